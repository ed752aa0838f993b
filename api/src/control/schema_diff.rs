//! Schema diffs: each side's schema read at its point through a read-only time-travel session of the compute
//! host (`<branch>@<LSN>`), so nothing is copied and the live branches are not touched.

use std::sync::Arc;

use cambium_types::Lsn;

use super::{Control, PointInTime};
use crate::error::ApiError;
use crate::schema_diff::{changes, read_schema, unified_diff, Change, Schema, SchemaDiffError};
use crate::store::databases::{Branch, Database};
use crate::store::AccountId;

/// What a schema diff compares: the branch at `point` against `base_branch_id` (its parent when `None`) at
/// `base_point`.
#[derive(Debug, Clone)]
pub struct SchemaDiffRequest {
    /// The base branch; the branch's parent when `None`.
    pub base_branch_id: Option<String>,
    /// Where in the base branch's history.
    pub base_point: PointInTime,
    /// Where in the branch's history.
    pub point: PointInTime,
}

/// A computed schema diff.
#[derive(Debug, Clone)]
pub struct SchemaDiff {
    /// The branch diffed.
    pub branch_id: String,
    /// The point of it whose schema was read.
    pub lsn: Lsn,
    /// The base branch.
    pub base_branch_id: String,
    /// The point of the base whose schema was read.
    pub base_lsn: Lsn,
    /// The differences from the base to the branch.
    pub changes: Vec<Change>,
    /// `diff -U0` of the two DDL documents.
    pub diff: String,
}

impl Control {
    /// The differences between the schema of `account`'s branch `id` and its base's, each at its point. Both
    /// branches are of one database, which must be active or suspended for idleness (the schemas are read through
    /// its compute, which wakes it).
    pub async fn schema_diff(
        &self,
        account: &AccountId,
        id: &str,
        request: SchemaDiffRequest,
    ) -> Result<SchemaDiff, ApiError> {
        let (branch, database) = self.get_branch(account, id).await?;
        // Suspended for idleness still serves: reading the schemas starts a store, which wakes it.
        if !database.serves_sessions() {
            return Err(ApiError::Conflict(format!(
                "the database is {}: a schema diff reads through its compute (resume it first)",
                database.status.as_str()
            )));
        }
        let base_id = request
            .base_branch_id
            .or_else(|| branch.parent_branch_id.clone())
            .ok_or_else(|| ApiError::Unprocessable("the branch has no parent: give `base_branch_id`".to_owned()))?;
        let base = match self.get_branch(account, &base_id).await {
            Ok((base, _)) if base.database_id == database.id => base,
            Ok(_) | Err(ApiError::NotFound) => {
                return Err(ApiError::Unprocessable(format!(
                    "`base_branch_id` {base_id:?} is not a branch of this database"
                )))
            }
            Err(other) => return Err(other),
        };
        let lsn = self.point_on(&database, &branch, &request.point).await?;
        let base_lsn = self.point_on(&database, &base, &request.base_point).await?;
        let (name, base_name) = (format!("{}@{lsn}", branch.id), format!("{}@{base_lsn}", base.id));
        let host = Arc::clone(self.host());
        let (names, read_names) = ((name.clone(), base_name.clone()), (name.clone(), base_name.clone()));
        let read = tokio::task::spawn_blocking(move || -> Result<(Schema, Schema), ApiError> {
            let read = |name: &str| {
                let connection = host
                    .open_read_only(name)
                    .map_err(|e| ApiError::Unavailable(format!("reading the schema of {name}: {e}")))?;
                read_schema(&connection).map_err(|error| match error {
                    SchemaDiffError::TooLarge(message) => ApiError::Unprocessable(format!("{name}: {message}")),
                    other => ApiError::Unavailable(format!("{name}: {other}")),
                })
            };
            Ok((read(&read_names.1)?, read(&read_names.0)?))
        })
        .await;
        let (base_schema, schema) = read.map_err(|_| ApiError::Internal)??;
        Ok(SchemaDiff {
            branch_id: branch.id,
            lsn,
            base_branch_id: base.id,
            base_lsn,
            changes: changes(&base_schema, &schema),
            diff: unified_diff(&base_schema, &schema, &names.1, &names.0),
        })
    }

    /// The LSN `point` names on `branch`'s own timeline; a point before the branch's own history (in an
    /// ancestor's) is 422, as its time-travel name cannot serve it.
    async fn point_on(&self, database: &Database, branch: &Branch, point: &PointInTime) -> Result<Lsn, ApiError> {
        let (holder, lsn) = self.resolve(database, branch, point).await?;
        if holder.timeline_id != branch.timeline_id {
            // At its start the branch's timeline is its ancestor at the branch point, which resolution names; its
            // time-travel name serves that point all the same.
            let (database_id, own) = (database.id.clone(), branch.timeline_id);
            let own_start = self
                .blocking(move |store| store.timelines_of(&database_id))
                .await?
                .into_iter()
                .find(|row| row.timeline_id == own)
                .map(|row| row.start_lsn);
            if own_start == Some(lsn) {
                return Ok(lsn);
            }
            return Err(ApiError::Unprocessable(format!(
                "LSN {lsn} is before branch {}'s own history; diff its parent at that point instead",
                branch.id
            )));
        }
        Ok(lsn)
    }
}
