//! The catalog's read skipped while the caller's commit version stands still (`Dialect::set_commit_version`):
//! a statement outside a transaction reads the schema version again only when the version moved, was not
//! given, or the catalog was last read inside a transaction (whose own schema changes a rollback takes back).
//! Another dialect on the same connection stands for another connection's commits.

mod common;

use common::{ok, setup};
use pgcompat::Dialect;

#[test]
fn the_catalog_is_read_again_when_the_commit_version_moves() {
    let (conn, mut d) = setup();
    let mut other = Dialect::new(&conn, "shop", "cambium", 2).expect("dialect");
    ok(&conn, &mut d, "CREATE TABLE a (x int4)");
    d.set_commit_version(Some(1));
    ok(&conn, &mut d, "SELECT x FROM a");
    assert!(d.catalog().table("a").is_some());

    ok(&conn, &mut other, "CREATE TABLE b (y int8)");
    // The caller says nothing was committed since: the catalog is not read.
    d.set_commit_version(Some(1));
    ok(&conn, &mut d, "SELECT 1");
    assert!(d.catalog().table("b").is_none(), "read though the version stood still");
    // It moved: read.
    d.set_commit_version(Some(2));
    ok(&conn, &mut d, "SELECT 1");
    assert!(d.catalog().table("b").is_some(), "the commit version moved");

    // A version serves one translation: the next one, given none, reads.
    ok(&conn, &mut other, "CREATE TABLE c (z text)");
    ok(&conn, &mut d, "SELECT 2");
    assert!(d.catalog().table("c").is_some(), "no version given");
}

#[test]
fn a_catalog_read_inside_a_transaction_is_not_trusted_after_it() {
    let (conn, mut d) = setup();
    d.set_commit_version(Some(7));
    ok(&conn, &mut d, "SELECT 1");
    ok(&conn, &mut d, "BEGIN");
    ok(&conn, &mut d, "CREATE TABLE v (z int4)");
    d.set_commit_version(Some(7));
    ok(&conn, &mut d, "SELECT z FROM v");
    assert!(d.catalog().table("v").is_some(), "the transaction sees its own table");
    ok(&conn, &mut d, "ROLLBACK");
    // Nothing was committed (the version stands still), but the catalog was read inside the transaction.
    d.set_commit_version(Some(7));
    ok(&conn, &mut d, "SELECT 1");
    assert!(d.catalog().table("v").is_none(), "the rolled-back table is gone");
}
