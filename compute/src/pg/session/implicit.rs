//! A simple query's text of several statements runs as one transaction, PostgreSQL's *implicit transaction
//! block*: an error undoes what the text's statements before it did (back to a `COMMIT` or `ROLLBACK` of the
//! text), a `BEGIN` in the text makes the block an explicit one (the statements before it are in it), a
//! `COMMIT` or `ROLLBACK` in the text ends the block and the statements after it start another, and `SAVEPOINT`,
//! `RELEASE` and `ROLLBACK TO` are refused in it (25P01), as PostgreSQL does. Before this, each statement
//! committed by itself, so a text such as a migration tool's script that failed half-way left its first half
//! applied.
//!
//! The block is SQLite's transaction, opened before the text's first statement that runs outside a
//! transaction: `BEGIN IMMEDIATE` (the writer's lock, in its turn) when a statement of the text may write, so a
//! read before a write never meets a newer commit SQLite refuses to upgrade past; `BEGIN` for a text of reads.
//! Texts that keep today's statement-by-statement commits: one with `COPY … FROM STDIN` (the copy's rows come
//! after the text) or with a table rebuild that needs foreign keys off (SQLite allows that only outside a
//! transaction).

use pgcompat::Translation;

use super::{Outcome, Session};
use crate::pg::error::{SqlError, NO_ACTIVE_SQL_TRANSACTION};
use crate::pg::exec::TxState;

/// Where a text's implicit transaction block is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Implicit {
    /// The text's statements commit one by one.
    Off,
    /// Used, not open: before the first statement, or after the text's `COMMIT`, `ROLLBACK` or `BEGIN`.
    Closed {
        /// A statement of the text may write: the block takes the writer's lock when it opens.
        writes: bool,
    },
    /// Open: the session's SQLite transaction is the block's.
    Open {
        /// As in `Closed`.
        writes: bool,
    },
}

impl Implicit {
    /// The block of a text translated whole into `list`.
    pub(super) fn for_statements(list: &[Translation]) -> Implicit {
        if list.len() < 2 || list.iter().any(runs_outside_a_block) {
            return Implicit::Off;
        }
        Implicit::Closed {
            writes: !list.iter().all(reads_only),
        }
    }

    /// The block of a text run piece by piece, whose statements are translated only when their turn comes: one
    /// that may write unless each piece begins with a word of a statement that only reads.
    pub(super) fn for_pieces(pieces: &[&str]) -> Implicit {
        let reads = |piece: &&str| {
            crate::pg::exec::leading_words(piece, 1)
                .first()
                .is_some_and(|word| READING_WORDS.contains(&word.as_str()))
        };
        Implicit::Closed {
            writes: !pieces.iter().all(reads),
        }
    }
}

/// First words (upper case) of statements that only read, or begin or end a transaction, or act on the
/// session's own settings and objects.
const READING_WORDS: &[&str] = &[
    "SELECT",
    "VALUES",
    "TABLE",
    "SHOW",
    "SET",
    "RESET",
    "BEGIN",
    "START",
    "COMMIT",
    "END",
    "ROLLBACK",
    "ABORT",
    "FETCH",
    "MOVE",
    "DECLARE",
    "CLOSE",
    "LISTEN",
    "UNLISTEN",
    "DEALLOCATE",
    "PREPARE",
];

/// Whether a statement must run outside a transaction block: a `COPY FROM STDIN` (its rows come after the
/// text), a rebuild that turns foreign keys off (SQLite does that only outside a transaction).
pub(super) fn runs_outside_a_block(translation: &Translation) -> bool {
    translation.foreign_keys_off || matches!(translation.kind, pgcompat::Kind::CopyFrom { .. })
}

/// Whether a statement only reads (or ends or begins a transaction, or acts on the session's own objects).
fn reads_only(translation: &Translation) -> bool {
    use pgcompat::Kind;
    let kind_reads = matches!(
        translation.kind,
        Kind::Select
            | Kind::Begin { .. }
            | Kind::Commit
            | Kind::Rollback
            | Kind::Declare { .. }
            | Kind::Fetch { .. }
            | Kind::Close(_)
            | Kind::Prepare { .. }
            | Kind::Deallocate(_)
            | Kind::Listen(_)
            | Kind::Unlisten(_)
    );
    kind_reads && translation.steps.len() <= 1 && translation.captures.is_empty()
}

impl Session {
    /// Runs one statement of a text of several inside the text's implicit block (`implicit`), see
    /// [`Session::enter_implicit`] and [`Session::note_implicit_end`], and keeps its outcome; on an error the
    /// block is abandoned ([`Session::abandon_implicit`]).
    pub(super) fn run_in_text(
        &mut self,
        translation: &Translation,
        implicit: &mut Implicit,
        outcomes: &mut Vec<Outcome>,
    ) -> Result<(), SqlError> {
        // A COMMIT or ROLLBACK that ends the implicit block: PostgreSQL says no transaction was in progress.
        let ends_implicit = matches!(*implicit, Implicit::Open { .. })
            && matches!(translation.kind, pgcompat::Kind::Commit | pgcompat::Kind::Rollback);
        let ran = match self.enter_implicit(implicit, &translation.kind) {
            Ok(Some(done)) => Ok(done),
            Ok(None) => self.run_translation(translation, &[], &[], &pgwire::api::portal::Format::UnifiedText, None),
            Err(error) => Err(error),
        };
        match ran {
            Ok(outcome) => {
                if ends_implicit {
                    self.notice("WARNING", "25P01", "there is no transaction in progress".to_owned());
                }
                self.note_implicit_end(implicit);
                outcomes.push(outcome);
                Ok(())
            }
            Err(error) => {
                self.abandon_implicit(implicit);
                Err(error)
            }
        }
    }

    /// Before a statement of kind `kind` of the text: opens the block if the session is outside any
    /// transaction; a `BEGIN` makes the open block the explicit one (its outcome is returned: nothing more to
    /// run); a savepoint statement in the open block is refused.
    pub(super) fn enter_implicit(
        &mut self,
        implicit: &mut Implicit,
        kind: &pgcompat::Kind,
    ) -> Result<Option<Outcome>, SqlError> {
        use pgcompat::Kind;
        match (*implicit, kind) {
            (Implicit::Open { writes }, Kind::Begin { .. }) => {
                // The statements before the BEGIN are in the explicit block it opens.
                *implicit = Implicit::Closed { writes };
                self.tx = TxState::InBlock;
                self.after_transaction_statement(kind, false);
                return Ok(Some(Outcome::TxStart("BEGIN".to_owned())));
            }
            (Implicit::Open { .. }, Kind::RollbackTo) => return Err(outside_a_block("ROLLBACK TO SAVEPOINT")),
            (Implicit::Open { .. }, Kind::Other(tag)) if tag == "SAVEPOINT" => {
                return Err(outside_a_block("SAVEPOINT"))
            }
            (Implicit::Open { .. }, Kind::Other(tag)) if tag == "RELEASE" => {
                return Err(outside_a_block("RELEASE SAVEPOINT"));
            }
            (Implicit::Closed { writes }, kind)
                if !matches!(kind, Kind::Begin { .. } | Kind::Commit | Kind::Rollback)
                    && self.tx == TxState::Idle
                    && self.conn.is_autocommit() =>
            {
                self.conn
                    .execute_batch(if writes { "BEGIN IMMEDIATE" } else { "BEGIN" })
                    .map_err(SqlError::from)?;
                // now() is the block's start for each of its statements.
                self.dialect.state().start_transaction();
                *implicit = Implicit::Open { writes };
            }
            _ => {}
        }
        Ok(None)
    }

    /// After a statement of the text ran: one that ended the open block (the text's `COMMIT` or `ROLLBACK`,
    /// which PostgreSQL runs with a warning that no transaction was in progress) closes it, and the next
    /// statement opens another.
    pub(super) fn note_implicit_end(&mut self, implicit: &mut Implicit) {
        if let Implicit::Open { writes } = *implicit {
            if self.conn.is_autocommit() {
                *implicit = Implicit::Closed { writes };
                self.tx = TxState::Idle;
            }
        }
    }

    /// Before a statement that must run outside a transaction (a copy, a rebuild with foreign keys off): the
    /// open block is committed, and the text's statements from there on commit one by one.
    pub(super) fn leave_implicit(&mut self, implicit: &mut Implicit) -> Result<(), SqlError> {
        let committed = self.commit_implicit(implicit);
        *implicit = Implicit::Off;
        committed
    }

    /// After a statement of the text failed (or the session was stopped): the open block is rolled back, and the
    /// session is outside any transaction, as after PostgreSQL's failed implicit block.
    pub(super) fn abandon_implicit(&mut self, implicit: &mut Implicit) {
        let Implicit::Open { writes } = *implicit else {
            return;
        };
        *implicit = Implicit::Closed { writes };
        if !self.conn.is_autocommit() {
            if let Err(error) = self.conn.execute_batch("ROLLBACK") {
                tracing::warn!(%error, "rolling back a failed implicit transaction block failed");
            }
        }
        self.end_implicit(false);
    }

    /// At the end of the text: the open block is committed (its deferred constraints checked first, as a
    /// COMMIT checks them). A failed commit leaves nothing of the block and the session outside a transaction.
    pub(super) fn commit_implicit(&mut self, implicit: &mut Implicit) -> Result<(), SqlError> {
        let Implicit::Open { writes } = *implicit else {
            return Ok(());
        };
        *implicit = Implicit::Closed { writes };
        // On a violation this rolls back and leaves the session idle itself.
        self.check_deferred_constraints()?;
        match self.conn.execute_batch("COMMIT") {
            Ok(()) => {
                self.end_implicit(true);
                Ok(())
            }
            Err(error) => {
                if !self.conn.is_autocommit() {
                    if let Err(undo) = self.conn.execute_batch("ROLLBACK") {
                        tracing::warn!(%undo, "rolling back after a failed implicit commit failed");
                    }
                }
                self.end_implicit(false);
                Err(SqlError::from(error))
            }
        }
    }

    /// What ending a transaction does to the session (its settings' `SET LOCAL`s, its cursors), for the block.
    fn end_implicit(&mut self, committed: bool) {
        self.tx = TxState::Idle;
        let kind = if committed {
            pgcompat::Kind::Commit
        } else {
            pgcompat::Kind::Rollback
        };
        self.after_transaction_statement(&kind, !committed);
        self.sync_block();
    }
}

/// PostgreSQL's refusal of a savepoint statement in an implicit block.
fn outside_a_block(name: &str) -> SqlError {
    SqlError::new(
        NO_ACTIVE_SQL_TRANSACTION,
        format!("{name} can only be used in transaction blocks"),
    )
}
