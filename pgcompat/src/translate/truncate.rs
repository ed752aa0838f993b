//! `TRUNCATE`: the tables emptied in an order their foreign keys allow (with `CASCADE`, the tables that
//! reference them too), and with `RESTART IDENTITY` the sequences their columns own started again.

use sqlparser::ast::{CascadeOption, Truncate, TruncateIdentityOption};

use super::{ddl, dependents, Kind, Translation};
use crate::catalog::{quote_ident, quote_literal, Catalog};
use crate::error::PgError;

/// The steps of `truncate`: one `DELETE` per emptied table, then the sequences' restarts.
pub(super) fn truncate(
    conn: &rusqlite::Connection,
    catalog: &Catalog,
    truncate: &Truncate,
) -> Result<Translation, PgError> {
    let tables = truncate
        .table_names
        .iter()
        .map(|target| ddl::table_name(catalog, &target.name))
        .collect::<Result<Vec<_>, _>>()?;
    let cascade = matches!(truncate.cascade, Some(CascadeOption::Cascade));
    let emptied = dependents::truncate_order(conn, &tables, cascade)?;
    let mut steps: Vec<String> = emptied
        .iter()
        .map(|name| format!("DELETE FROM {}", quote_ident(name)))
        .collect();
    // RESTART IDENTITY: the sequences the emptied tables' columns own start again (as `ALTER SEQUENCE …
    // RESTART` does: the next value is the start).
    if matches!(truncate.identity, Some(TruncateIdentityOption::Restart)) {
        for table in &emptied {
            for sequence in catalog.owned_sequences(table, None) {
                steps.push(format!(
                    "UPDATE _cambium_sequences SET last_value = start_value, is_called = 0 WHERE name = {}",
                    quote_literal(&sequence.name)
                ));
            }
        }
    }
    let mut t = Translation::single(String::new(), Kind::Other("TRUNCATE TABLE".to_owned()));
    t.steps = steps;
    Ok(t)
}
