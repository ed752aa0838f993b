//! The store's scenarios on both backends. Each scenario takes how to open the store (again: a reopen must find
//! what was written) and runs as its own test on SQLite; [`every_scenario_on_postgresql`] runs all of them, each
//! on a fresh database of a real PostgreSQL 15 started for the test (skipped, saying so, where it is absent).
//! [`every_store_call`] calls every store method at least once with the values that differ between the
//! backends (LSNs past 32 bits, bytes, booleans, NULLs, text that must sort bytewise), so a statement that only
//! SQLite accepts fails here.

#![allow(clippy::unwrap_used)] // a test failure is a panic

use std::sync::Arc;

use cambium_types::{Lsn, TimelineId};

use super::databases::{BranchUpdate, DatabaseStatus, NewDatabase, RestoreChange, TimelineRow};
use super::idempotency::StoredResponse;
use super::labels::{LabelFilter, Labels};
use super::operations::{Action, NewOperation, OperationStatus, RestoreParams};
use super::webhooks::WebhookEvent;
use super::{KeyScope, Store, StoreError};
use crate::testing_postgres::TestPostgres;

/// How a scenario opens the store: each call opens it again on the same data.
pub(crate) type Open<'a> = &'a dyn Fn() -> Store;

/// Runs `scenario` on SQLite in a fresh data directory.
pub(crate) fn on_sqlite(scenario: fn(Open<'_>)) {
    let dir = tempfile::tempdir().unwrap();
    scenario(&|| Store::open(dir.path()).unwrap());
}

/// A scenario: its name and its body.
type Scenario = (&'static str, fn(Open<'_>));

/// Every scenario, by name.
const SCENARIOS: &[Scenario] = &[
    ("every_store_call", every_store_call),
    (
        "the_first_account_is_made_once_by_racing_stores",
        super::tests::the_first_account_is_made_once_by_racing_stores_on,
    ),
    (
        "a_quota_holds_when_one_stores_calls_race",
        super::tests::a_quota_holds_when_one_stores_calls_race_on,
    ),
    (
        "migrations_apply_once_and_reopen",
        super::tests::migrations_apply_once_and_reopen_on,
    ),
    (
        "the_audit_sequence_migration_numbers_existing_entries",
        super::tests::the_audit_sequence_migration_numbers_existing_entries_on,
    ),
    (
        "a_set_is_recorded_once_and_moved_only_from_what_it_is",
        super::timeline_sets::tests::a_set_is_recorded_once_and_moved_only_from_what_it_is_on,
    ),
    (
        "listings_filter_on_a_key_or_a_key_and_value",
        super::labels::tests::listings_filter_on_a_key_or_a_key_and_value_on,
    ),
    (
        "buckets_add_wal_growth_and_compute_time_and_keep_the_last_size",
        super::consumption::tests::buckets_add_wal_growth_and_compute_time_and_keep_the_last_size_on,
    ),
    (
        "entries_list_newest_first_by_project_and_old_ones_go",
        super::audit::tests::entries_list_newest_first_by_project_and_old_ones_go_on,
    ),
    (
        "a_change_and_its_audit_entry_commit_together",
        super::audit::tests::a_change_and_its_audit_entry_commit_together_on,
    ),
    (
        "deliveries_queue_by_subscription_and_log_their_attempts",
        super::webhooks::tests::deliveries_queue_by_subscription_and_log_their_attempts_on,
    ),
    (
        "a_project_has_a_bounded_number_of_webhooks",
        super::webhooks::tests::a_project_has_a_bounded_number_of_webhooks_on,
    ),
    (
        "rows_written_before_the_typed_action_run_as_they_are",
        super::operations::tests::rows_written_before_the_typed_action_run_as_they_are_on,
    ),
    (
        "a_new_operation_is_stored_as_its_action_says",
        super::operations::tests::a_new_operation_is_stored_as_its_action_says_on,
    ),
    (
        "a_dead_hosts_databases_move_to_a_live_one",
        super::hosts::tests::a_dead_hosts_databases_move_to_a_live_one_on,
    ),
    (
        "a_row_that_cannot_be_read_fails_its_operation_not_the_listing",
        super::operations::tests::a_row_that_cannot_be_read_fails_its_operation_not_the_listing_on,
    ),
    (
        "counts_are_exchanged_between_stores_and_old_windows_go",
        super::rate_limits::tests::counts_are_exchanged_between_stores_and_old_windows_go_on,
    ),
    (
        "a_pageservers_weight_is_its_databases_sizes",
        super::pageservers::tests::a_pageservers_weight_is_its_databases_sizes_on,
    ),
    (
        "a_key_is_reserved_by_one_process_until_its_response_is_stored",
        super::idempotency::tests::a_key_is_reserved_by_one_process_until_its_response_is_stored_on,
    ),
];

#[test]
fn every_scenario_on_postgresql() {
    let Some(server) = TestPostgres::start() else {
        return;
    };
    for (index, (name, scenario)) in SCENARIOS.iter().enumerate() {
        let url = server.create_database(&format!("scenario_{index}"));
        eprintln!("scenario {name} on PostgreSQL");
        scenario(&|| Store::open_postgres(&url).unwrap());
    }
}

/// Every scenario on SQLite with a pool of several connections (`--metadata-connections-max`): WAL readers beside
/// one writer, which `BEGIN IMMEDIATE` and the busy timeout serialize.
#[test]
fn every_scenario_on_sqlite_with_several_connections() {
    let pool = super::pool::PoolConfig {
        connections_max: 4,
        connection_wait_ms: super::pool::CONNECTION_WAIT_MS_DEFAULT,
    };
    for (name, scenario) in SCENARIOS {
        let dir = tempfile::tempdir().unwrap();
        eprintln!("scenario {name} on SQLite with 4 connections");
        scenario(&|| Store::open_sqlite(dir.path(), pool).unwrap());
    }
}

#[test]
fn every_store_call_on_sqlite() {
    on_sqlite(every_store_call);
}

fn timeline(hex_digit: char) -> TimelineId {
    hex_digit.to_string().repeat(32).parse().unwrap()
}

/// Every store method, with values whose storage differs between the backends.
fn every_store_call(open: Open<'_>) {
    let store = open();
    let account = store.create_account().unwrap();
    let env: Labels = [("env".to_owned(), "dev".to_owned())].into();
    let project = store.create_project(&account, "p", 10, &env).unwrap();
    assert!(matches!(
        store.create_project(&account, "q", 1, &Labels::new()),
        Err(StoreError::QuotaExceeded(_))
    ));
    let renamed = store.rename_project(&account, &project.id, "renamed").unwrap().unwrap();
    assert_eq!(renamed.name, "renamed");
    let filter = LabelFilter {
        key: "env".to_owned(),
        value: Some("dev".to_owned()),
    };
    let listed = store.list_projects(&account, None, 10, Some(&filter)).unwrap();
    assert_eq!(listed.items, std::slice::from_ref(&renamed));
    assert_eq!(store.admin_account().unwrap(), Some(account.clone()));
    assert_eq!(store.accounts().unwrap(), std::slice::from_ref(&account));
    keys(&store, &account, &project.id);
    let database_id = databases_and_branches(&store, &account, &project.id);
    operations_and_restore(&store, &account, &project.id, &database_id);
    idempotency(&store, &account);
    drop(store);
    let store = open();
    assert_eq!(store.get_project(&account, &project.id).unwrap(), Some(renamed));
    let deleted = store.delete_database(&account, &database_id).unwrap().unwrap();
    assert_eq!(deleted.id, database_id);
    assert!(store.all_databases().unwrap().is_empty());
    assert_eq!(store.delete_project(&account, &project.id).unwrap(), Some(Vec::new()));
    assert_eq!(store.get_project(&account, &project.id).unwrap(), None);
}

fn keys(store: &Store, account: &super::AccountId, project_id: &str) {
    let scope = KeyScope {
        project_id: Some(project_id.to_owned()),
        read_only: true,
        expires_at: Some("2999-01-01T00:00:00.000Z".to_owned()),
    };
    let hash = [0u8, 255, 1, 254];
    let id = store.insert_key(account, &hash, &scope).unwrap();
    let key = store.key_by_hash(&hash).unwrap().unwrap();
    assert_eq!(
        (key.id.as_str(), &key.scope, key.revoked_at.as_deref()),
        (id.as_str(), &scope, None)
    );
    assert!(store.revoke_key(&id).unwrap());
    assert!(!store.revoke_key(&id).unwrap());
    assert!(store.key_by_hash(&hash).unwrap().unwrap().revoked_at.is_some());
    assert_eq!(store.keys().unwrap().len(), 1);
    assert_eq!(store.key_by_hash(&[9]).unwrap(), None);
}

/// A database with a child branch whose LSN needs more than 32 bits; returns the database's id.
fn databases_and_branches(store: &Store, account: &super::AccountId, project_id: &str) -> String {
    let verifier = compute::pg::ScramVerifier::from_password("pw", compute::pg::scram::ITERATIONS_DEFAULT).unwrap();
    let root = TimelineRow {
        timeline_id: timeline('1'),
        ancestor_timeline_id: None,
        start_lsn: Lsn(0x0100_0000),
    };
    let new = NewDatabase {
        project_id: project_id.to_owned(),
        name: "d".to_owned(),
        region: "local".to_owned(),
        tenant_id: "0123456789abcdef0123456789abcdef".parse().unwrap(),
        timeline: root,
        branch_name: "main".to_owned(),
        password_verifier: Arc::new(verifier.clone()),
        labels: Labels::new(),
        suspend_timeout_seconds: 300,
    };
    let created = store.create_database(account, &new, 10).unwrap().unwrap();
    let id = created.database.id.clone();
    let mut twin = new.clone();
    twin.tenant_id = "fedcba9876543210fedcba9876543210".parse().unwrap();
    assert!(matches!(
        store.create_database(account, &twin, 10),
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store.create_database(account, &twin, 1),
        Err(StoreError::QuotaExceeded(_))
    ));
    assert_eq!(
        store
            .list_databases(account, project_id, None, 10, None)
            .unwrap()
            .unwrap()
            .items
            .len(),
        1
    );
    assert_eq!(store.rename_database(account, &id, "e").unwrap().unwrap().name, "e");
    assert!(store.set_password_verifier(&id, &verifier).unwrap());
    assert!(store.set_database_status(&id, DatabaseStatus::Active).unwrap());
    assert_eq!(store.database(&id).unwrap().unwrap().status, DatabaseStatus::Active);
    assert_eq!(
        store
            .get_database(account, &id)
            .unwrap()
            .unwrap()
            .password_verifier
            .to_string(),
        verifier.to_string()
    );
    let child_timeline = TimelineRow {
        timeline_id: timeline('2'),
        ancestor_timeline_id: Some(root.timeline_id),
        start_lsn: Lsn(0x0123_4567_89ab_cdef),
    };
    let mut child = created.branch.clone();
    child.id = format!("{}x", created.branch.id);
    child.name = "child".to_owned();
    child.parent_branch_id = Some(created.branch.id.clone());
    child.parent_lsn = Some(child_timeline.start_lsn);
    child.timeline_id = child_timeline.timeline_id;
    // A webhook on `branch.created`: a creation's delivery is queued with its row, held (neither due nor
    // listed) until the creation is confirmed, and taken back with an undone creation.
    let hook = store
        .create_webhook(
            account,
            project_id,
            "http://127.0.0.1:1/h",
            &[WebhookEvent::BranchCreated],
            "s",
        )
        .unwrap()
        .unwrap();
    let listed = |store: &Store| {
        store
            .list_deliveries(account, project_id, &hook.id, None, 10)
            .unwrap()
            .unwrap()
            .items
            .len()
    };
    let inserted = store
        .insert_branch(&child, &child_timeline, None, Some("{\"branch\":{}}"), &[])
        .unwrap();
    assert_eq!(inserted.held, 1);
    // Written at once with its storage: pending until confirmed.
    assert_eq!(store.pending_timelines_of(&id).unwrap(), [child_timeline.timeline_id]);
    assert!(store.due_deliveries("9999", 10).unwrap().is_empty());
    assert_eq!(listed(store), 0);
    assert_eq!(store.confirm_timelines(&[child_timeline.timeline_id]).unwrap(), 1);
    assert!(store.pending_timelines_of(&id).unwrap().is_empty());
    let due = store.due_deliveries("9999", 10).unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(
        (due[0].delivery.event.as_str(), due[0].delivery.body.as_str()),
        ("branch.created", "{\"branch\":{}}")
    );
    assert_eq!(listed(store), 1);
    assert_eq!(store.confirm_timelines(&[child_timeline.timeline_id]).unwrap(), 0);
    // Another child of the same parent: its id suffixed, its own name and timeline.
    let sibling = |suffix: char, name: &str, id: char| {
        let mut branch = child.clone();
        branch.id.push(suffix);
        branch.name = name.to_owned();
        branch.timeline_id = timeline(id);
        let row = TimelineRow {
            timeline_id: branch.timeline_id,
            ..child_timeline
        };
        (branch, row)
    };
    let (undone, undone_timeline) = sibling('u', "undone", '5');
    store
        .insert_branch(
            &undone,
            &undone_timeline,
            None,
            Some("{}"),
            &[child_timeline.timeline_id],
        )
        .unwrap();
    assert_eq!(store.pending_timelines_of(&id).unwrap(), [undone.timeline_id]);
    store
        .undo_branch_creation(&undone.id, undone.timeline_id, None)
        .unwrap();
    // Its held delivery went with it; the confirmed one stays.
    assert_eq!(store.due_deliveries("9999", 10).unwrap().len(), 1);
    assert_eq!(store.confirm_timelines(&[undone.timeline_id]).unwrap(), 0);
    assert_eq!(listed(store), 1);
    assert_eq!(store.branch(&undone.id).unwrap(), None);
    assert!(store.pending_timelines_of(&id).unwrap().is_empty());
    assert_eq!(store.branch(&child.id).unwrap().unwrap(), child);
    let mut again = child.clone();
    again.id.push('y');
    assert!(matches!(
        store.insert_branch(
            &again,
            &TimelineRow {
                timeline_id: timeline('3'),
                ..child_timeline
            },
            None,
            Some("{}"),
            &[]
        ),
        Err(StoreError::Conflict(_))
    ));
    // A refused insertion holds nothing.
    assert_eq!(store.due_deliveries("9999", 10).unwrap().len(), 1);
    // A branch deleted while its event is held (its confirmation failed): the event is due then, before the
    // deletion's own.
    let (gone, gone_timeline) = sibling('g', "gone", '6');
    store
        .insert_branch(&gone, &gone_timeline, None, Some("{}"), &[])
        .unwrap();
    assert_eq!(store.due_deliveries("9999", 10).unwrap().len(), 1);
    assert_eq!(store.delete_branch_subtree(&gone.id).unwrap().len(), 1);
    assert_eq!(store.due_deliveries("9999", 10).unwrap().len(), 2);
    assert_eq!(store.confirm_timelines(&[gone.timeline_id]).unwrap(), 0);
    // Its timeline's row, now unreferenced, goes as the sweep takes it.
    assert!(store.unreferenced_timelines(&id).unwrap().contains(&gone.timeline_id));
    store.remove_timeline(gone.timeline_id).unwrap();
    // A held delivery released by a later creation's transaction, which confirms the earlier creation: it says
    // how many it released (the caller wakes the webhook worker then).
    let (earlier, earlier_timeline) = sibling('e', "earlier", '7');
    let inserted = store
        .insert_branch(&earlier, &earlier_timeline, None, Some("{}"), &[])
        .unwrap();
    assert_eq!((inserted.held, inserted.released), (1, 0));
    let (later, later_timeline) = sibling('l', "later", '8');
    let inserted = store
        .insert_branch(&later, &later_timeline, None, Some("{}"), &[earlier.timeline_id])
        .unwrap();
    assert_eq!((inserted.held, inserted.released), (1, 1));
    assert_eq!(store.due_deliveries("9999", 10).unwrap().len(), 3);
    for branch in [&later, &earlier] {
        assert_eq!(store.delete_branch_subtree(&branch.id).unwrap().len(), 1);
        store.remove_timeline(branch.timeline_id).unwrap();
    }
    assert!(store.delete_webhook(account, project_id, &hook.id).unwrap());
    assert_eq!(store.branch_count(&id).unwrap(), 2);
    assert_eq!(store.branches_of(&id).unwrap().len(), 2);
    assert_eq!(
        store
            .list_branches(account, &id, None, 1, None)
            .unwrap()
            .unwrap()
            .next_after,
        Some(created.branch.id.clone())
    );
    assert_eq!(store.get_branch(account, &child.id).unwrap().unwrap().0, child);
    let update = BranchUpdate {
        name: Some("kid".to_owned()),
        protected: Some(true),
        expires_at: Some(Some("2000-01-01T00:00:00.000Z".to_owned())),
        promote: false,
        labels: Some(Labels::from([("k".to_owned(), "v".to_owned())])),
    };
    store.update_branch(&child.id, &update).unwrap();
    assert_eq!(store.protected_branch(&id).unwrap().unwrap().name, "kid");
    assert!(matches!(
        store.delete_branch_subtree(&child.id),
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(store.expired_branches("2001", 10).unwrap().len(), 1);
    assert!(store.clear_expiry(&child.id, "2000-01-01T00:00:00.000Z").unwrap());
    assert!(store.expired_branches("2001", 10).unwrap().is_empty());
    assert_eq!(store.children_of(&created.branch.id).unwrap().len(), 1);
    let unprotect = BranchUpdate {
        protected: Some(false),
        ..BranchUpdate::default()
    };
    store.update_branch(&child.id, &unprotect).unwrap();
    assert_eq!(store.timelines_of(&id).unwrap(), [root, child_timeline]);
    assert_eq!(store.live_timelines().unwrap().len(), 2);
    assert!(store.is_live_timeline(child_timeline.timeline_id).unwrap());
    id
}

fn operations_and_restore(store: &Store, account: &super::AccountId, project_id: &str, database_id: &str) {
    let child = store.branches_of(database_id).unwrap().pop().unwrap();
    let params = RestoreParams {
        branch_id: child.id.clone(),
        old_timeline_id: child.timeline_id,
        source_timeline_id: child.timeline_id,
        target_lsn: Lsn(0x0123_4567_89ab_cdf0),
        new_timeline_id: timeline('4'),
        preserved_name: Some("kept".to_owned()),
        preserved_id: format!("{}k", child.id),
    };
    let action = Action::RestoreBranch(params.clone());
    let new = NewOperation {
        project_id,
        account_id: account,
        database_id: Some(database_id),
        branch_id: Some(&child.id),
        action: &action,
    };
    let operation = store.start_operation(&new).unwrap();
    assert!(matches!(store.start_operation(&new), Err(StoreError::Conflict(_))));
    assert_eq!(
        store
            .running_operations_on_database(database_id, Action::RESTORE_BRANCH)
            .unwrap(),
        1
    );
    assert!(store.running_operation_on_database(database_id).unwrap().is_some());
    assert!(store
        .other_running_operation_on_database(database_id, &operation.id)
        .unwrap()
        .is_some());
    let change = RestoreChange {
        branch_id: child.id.clone(),
        old_timeline_id: child.timeline_id,
        new_timeline: TimelineRow {
            timeline_id: params.new_timeline_id,
            ancestor_timeline_id: Some(child.timeline_id),
            start_lsn: params.target_lsn,
        },
        preserved_name: params.preserved_name.clone(),
        preserved_id: params.preserved_id.clone(),
        new_parent_lsn: None,
    };
    let preserved = store.apply_restore(&change).unwrap().unwrap();
    assert_eq!(
        (preserved.name.as_str(), preserved.timeline_id),
        ("kept", child.timeline_id)
    );
    assert_eq!(
        store.apply_restore(&change).unwrap(),
        None,
        "a retried restore changes nothing"
    );
    assert!(store.finish_operation(&operation.id, Ok(())).unwrap());
    assert!(!store.finish_operation(&operation.id, Err("late".to_owned())).unwrap());
    assert_eq!(
        store.get_operation(account, &operation.id).unwrap().unwrap().status,
        OperationStatus::Finished
    );
    assert_eq!(store.operation(&operation.id).unwrap().unwrap().work().unwrap(), action);
    assert_eq!(
        store
            .list_operations(account, project_id, None, 10)
            .unwrap()
            .unwrap()
            .items
            .len(),
        2
    );
    assert_eq!(
        store.running_operations().unwrap().len(),
        1,
        "the database's creation still runs"
    );
    // The preserved branch holds the old timeline; deleting it leaves that timeline unreferenced (its child, the
    // restored branch's new timeline, still needs it, so it stays until that one goes).
    assert_eq!(store.delete_branch_subtree(&preserved.id).unwrap().len(), 1);
    assert_eq!(store.needed_timelines_of(database_id).unwrap().len(), 3);
    assert!(store.unreferenced_timelines(database_id).unwrap().is_empty());
    // That old timeline is now an ancestor no branch is on: retired, its safekeeper copies are needed no more.
    assert_eq!(store.retirable_timelines(database_id).unwrap(), [timeline('2')]);
    assert!(store.retired_timelines(database_id).unwrap().is_empty());
    store.retire_timeline(timeline('2')).unwrap();
    assert!(store.retirable_timelines(database_id).unwrap().is_empty());
    assert_eq!(store.retired_timelines(database_id).unwrap(), [timeline('2')]);
    assert_eq!(store.needed_timelines_of(database_id).unwrap().len(), 2);
    assert!(!store.is_live_timeline(timeline('2')).unwrap());
    assert_eq!(store.timelines_of(database_id).unwrap().len(), 3, "its row stays");
    assert_eq!(store.delete_branch_subtree(&child.id).unwrap().len(), 1);
    let unreferenced = store.unreferenced_timelines(database_id).unwrap();
    assert_eq!(unreferenced, [timeline('4')]);
    store.remove_timeline(unreferenced[0]).unwrap();
    assert_eq!(store.unreferenced_timelines(database_id).unwrap(), [timeline('2')]);
}

fn idempotency(store: &Store, account: &super::AccountId) {
    let mut response = StoredResponse {
        method: "POST".to_owned(),
        path: "/v1/projects".to_owned(),
        request_hash: vec![1, 2, 3],
        status: 201,
        body: b"{\"uri\":\"postgresql://u:secret@h/d\"}".to_vec(),
    };
    store.store_idempotent_response(account, "k", &response).unwrap();
    response.status = 200;
    store.store_idempotent_response(account, "k", &response).unwrap();
    let stored = store.idempotent_response(account, "k").unwrap().unwrap();
    assert_eq!(
        (stored.status, stored.body.as_slice()),
        (200, &b"{\"uri\":\"postgresql://u@h/d\"}"[..])
    );
    assert_eq!(stored.request_hash, [1, 2, 3]);
    assert_eq!(store.idempotent_response(account, "other").unwrap(), None);
}

/// Two connections (as two `cambium api` processes) creating projects at once against one quota: the count and
/// the insert of each are one writer-locked transaction, so the quota holds exactly.
#[test]
fn a_quota_holds_across_connections_on_postgresql() {
    const PROJECTS_MAX: u32 = 5;
    let Some(server) = TestPostgres::start() else {
        return;
    };
    let url = server.create_database("quota");
    let first = Store::open_postgres(&url).unwrap();
    let account = first.create_account().unwrap();
    let second = Store::open_postgres(&url).unwrap();
    let outcomes: Vec<Result<(), StoreError>> = std::thread::scope(|scope| {
        let workers: Vec<_> = [&first, &second]
            .into_iter()
            .map(|store| {
                let account = account.clone();
                scope.spawn(move || {
                    (0..PROJECTS_MAX)
                        .map(|n| {
                            store
                                .create_project(&account, &format!("p{n}"), PROJECTS_MAX, &Labels::new())
                                .map(drop)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|worker| worker.join().unwrap()).collect()
    });
    let created = outcomes.iter().filter(|outcome| outcome.is_ok()).count();
    assert_eq!(created, PROJECTS_MAX as usize, "{outcomes:?}");
    assert!(outcomes
        .iter()
        .all(|outcome| matches!(outcome, Ok(()) | Err(StoreError::QuotaExceeded(_)))));
    assert_eq!(
        second.list_projects(&account, None, 100, None).unwrap().items.len(),
        PROJECTS_MAX as usize
    );
}
