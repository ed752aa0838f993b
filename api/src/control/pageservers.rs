//! Which pageserver a database's tenant lives on (issue 17 item 2): chosen at creation, told to the compute
//! host when the database is served. The metadata column and the choice are `store::pageservers`; the backend
//! sends each tenant's calls to its pageserver (`backend`'s module doc).

use std::sync::Arc;

use cambium_types::TenantId;

use super::Control;
use crate::backend::PlacementResolver;
use crate::error::ApiError;
use crate::store::databases::Database;
use crate::store::pageservers::choose_pageserver;
use crate::store::Store;

/// The backend's way to read a tenant's pageserver from `store`.
pub(super) fn resolver(store: &Arc<Store>) -> PlacementResolver {
    let store = Arc::clone(store);
    Arc::new(move |tenant: TenantId| {
        store
            .pageserver_of_tenant(tenant)
            .map(Option::flatten)
            .map_err(|e| e.to_string())
    })
}

impl Control {
    /// The pageserver a new database goes to: with one pageserver configured, none (the column stays `NULL`,
    /// which means the first, and nothing is asked); else the live one (it answers `ListTenants`) with the
    /// fewest databases placed on it. 503 if none answers.
    pub(super) async fn choose_new_pageserver(&self) -> Result<Option<String>, ApiError> {
        let configured = self.backend.pageserver_addresses();
        if configured.len() <= 1 {
            return Ok(None);
        }
        let live: Vec<bool> = self
            .backend
            .pageserver_tenant_counts()
            .await
            .iter()
            .map(Option::is_some)
            .collect();
        let loads = self.blocking(|store| store.pageserver_loads()).await?;
        match choose_pageserver(&configured, &live, &loads) {
            Some(index) => Ok(Some(configured[index].clone())),
            None => Err(ApiError::Unavailable("no pageserver answers".to_owned())),
        }
    }

    /// Records that new database `database_id` (of `tenant`) lives on `address` (placed nowhere yet).
    pub(super) async fn place_new_database(
        &self,
        database_id: &str,
        tenant: TenantId,
        address: &str,
    ) -> Result<(), ApiError> {
        let (id, to) = (database_id.to_owned(), address.to_owned());
        let placed = self
            .blocking(move |store| store.move_pageserver(&id, None, &to))
            .await?;
        if placed {
            self.backend.remember_placement(tenant, address)?;
        }
        Ok(())
    }

    /// Tells the compute host which pageserver `database`'s stores read from: the column as it is now (not the
    /// backend's remembered placement, which may be 2 s old), under the re-point lock (`repoint`).
    pub(super) async fn point_host_at_pageserver(&self, database: &Database) -> Result<(), ApiError> {
        self.point_at_placed_pageserver(&database.id, database.tenant_id)
            .await
            .map(drop)
    }
}
