//! What translation gives: a statement's kind, its SQLite text and parameters, captured steps.

use super::*;

/// What a statement is, for its command tag and the transaction rules the caller applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `SELECT` (or anything returning rows that is not DML).
    Select,
    /// `INSERT`
    Insert,
    /// `UPDATE`
    Update,
    /// `DELETE`
    Delete,
    /// `VACUUM …`: refused inside a transaction block (25001, by the session, which knows the block); its
    /// steps are what it runs (none for a plain `VACUUM`, see `translate::maintenance`).
    Vacuum,
    /// `LOCK TABLE …`.
    Lock {
        /// Its mode keeps other writers out: it takes the writer lock.
        writers_out: bool,
    },
    /// `BEGIN` / `START TRANSACTION` with the transaction parameters its modes set
    /// (`transaction_read_only`, `transaction_isolation`), for the session's settings.
    Begin {
        /// `(parameter, value)` per mode given, in order.
        modes: Vec<(&'static str, &'static str)>,
    },
    /// `COMMIT` / `END`
    Commit,
    /// `ROLLBACK` / `ABORT`
    Rollback,
    /// `ROLLBACK TO SAVEPOINT`
    RollbackTo,
    /// `PREPARE name [(types)] AS statement`: the caller keeps the statement's PostgreSQL text.
    Prepare {
        /// The prepared statement's name.
        name: String,
        /// Its PostgreSQL text.
        statement: String,
        /// The parameter types given.
        types: Vec<PgType>,
        /// The `PREPARE` statement as Cambium's parser prints it (what `pg_prepared_statements` shows).
        source: String,
    },
    /// `EXECUTE name [(args)]`: the caller evaluates the arguments (PostgreSQL expressions) and runs the
    /// prepared statement with them.
    Execute {
        /// The prepared statement's name.
        name: String,
        /// Each argument's PostgreSQL text.
        args: Vec<String>,
    },
    /// `DEALLOCATE [PREPARE] name | ALL` (`None`: all).
    Deallocate(Option<String>),
    /// `DISCARD ALL`: settings reset, prepared statements deallocated.
    DiscardAll,
    /// `DECLARE name CURSOR FOR query`: the session runs the query (its PostgreSQL text) and keeps the
    /// cursor.
    Declare {
        /// The cursor's name.
        name: String,
        /// The query's PostgreSQL text.
        query: String,
        /// `SCROLL` (`Some(true)`), `NO SCROLL` (`Some(false)`), or neither.
        scroll: Option<bool>,
        /// `WITH HOLD`: the cursor outlives its transaction's commit.
        hold: bool,
    },
    /// `FETCH` (or `MOVE`, `move_only`) on a cursor.
    Fetch {
        /// The cursor's name.
        name: String,
        /// Where to go.
        direction: cursor::CursorMove,
        /// `MOVE`: position only, no rows.
        move_only: bool,
    },
    /// `CLOSE name`, or `CLOSE ALL` (`None`).
    Close(Option<String>),
    /// `LISTEN channel`.
    Listen(String),
    /// `UNLISTEN channel`, or `UNLISTEN *` (`None`).
    Unlisten(Option<String>),
    /// `NOTIFY channel [, payload]`.
    Notify {
        /// The channel.
        channel: String,
        /// The payload (empty if none).
        payload: String,
    },
    /// `COPY table [(columns)] FROM STDIN`: the session reads the rows the client streams.
    CopyFrom {
        /// The table as written (PostgreSQL text).
        table: String,
        /// The columns given (PostgreSQL text each); empty: every column, in order.
        columns: Vec<String>,
        /// Format and its options.
        options: crate::copy::Options,
    },
    /// `COPY table|(query) TO STDOUT`: the session runs the query and streams its rows.
    CopyTo {
        /// The query (PostgreSQL text).
        query: String,
        /// Format and its options.
        options: crate::copy::Options,
    },
    /// `EXPLAIN ANALYZE statement`: the caller runs `inner` (the statement's own translation: it really runs,
    /// as in PostgreSQL), and answers the plan's lines with the rows it gave and the time it took. The
    /// translation's steps are the plan's query without them, for a Describe.
    ExplainAnalyze {
        /// The plan's lines, as `EXPLAIN` shows them.
        plan: Vec<String>,
        /// The statement's translation.
        inner: Box<Translation>,
    },
    /// Any other statement, with its command tag (`CREATE TABLE`, `SAVEPOINT`, `TRUNCATE TABLE`).
    Other(String),
}

/// One PostgreSQL statement as SQLite runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Translation {
    /// The SQLite statements, in order; more than one only for DDL that also records types (run them in
    /// one savepoint).
    pub steps: Vec<String>,
    /// The step whose outcome (rows or count) is the statement's.
    pub primary: usize,
    /// The PostgreSQL type of each result column the layer could infer, `None` where the value or the
    /// column's origin decides; `None` as a whole when the columns are not known statically (`SELECT *`).
    pub columns: Option<Vec<Option<PgType>>>,
    /// The types of parameters `$1…` learned from where they are used.
    pub params: Vec<Option<PgType>>,
    /// What the statement is.
    pub kind: Kind,
    /// Whether the statement reads the transaction timestamp.
    pub uses_now: bool,
    /// The steps rebuild a table other tables reference: they must run with foreign keys off (which
    /// SQLite allows only outside a transaction block), or the old table's drop would run their
    /// `ON DELETE` actions.
    pub foreign_keys_off: bool,
    /// Result columns that are a bare parameter (`SELECT $1`), as (column, parameter) indexes from 0: such a
    /// column has the type the client gave the parameter, as in PostgreSQL (text when it gave none).
    pub param_columns: Vec<(usize, usize)>,
    /// Steps whose rows the caller keeps in a TEMP table before the next step runs (data-modifying CTEs,
    /// `modifying_cte`); the steps after the primary one drop those tables.
    pub captures: Vec<Capture>,
    /// The one step again with some integer literals as parameters `?1…?n` and their values, which a caller
    /// that binds no parameters of its own may run instead of `steps[0]` (same result): every text of a
    /// learned shape then has the same SQLite text, which SQLite's statement cache serves without compiling
    /// it again (`shapes::Template::bind`). `None` for every translation not filled from a shape's template.
    pub bound: Option<Bound>,
    /// The NOTICE messages PostgreSQL sends with this statement, in order: an `IF EXISTS` that finds nothing
    /// (`table "t" does not exist, skipping`), an `IF NOT EXISTS` that finds the object. They follow from the
    /// catalog the statement was translated against, as the rest of the translation does.
    pub notices: Vec<String>,
    /// Whether the result columns' origins SQLite reports (`sqlite3_column_table_name`, through subqueries and
    /// CTEs) are the ones PostgreSQL's RowDescription gives: a plain query of tables. Not for a set operation
    /// (PostgreSQL gives none; SQLite its first branch's) or a query that reads a view (PostgreSQL gives the
    /// view's; SQLite its table's), nor for any other statement.
    pub column_origins: bool,
}

/// A step with integer literals moved out of its text into parameters (see [`Translation::bound`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bound {
    /// The SQLite text, with `?1…?n` where the literals were.
    pub step: String,
    /// The value of `?i` at `values[i - 1]`.
    pub values: Vec<i64>,
}

/// A step whose rows (an INSERT, UPDATE or DELETE with RETURNING) go into a TEMP table: the caller makes
/// the table (`DROP TABLE IF EXISTS`, then one untyped column per result column, named as the step names
/// them), runs the step and inserts each row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capture {
    /// The step's index in `steps`.
    pub step: usize,
    /// The TEMP table's name (unquoted).
    pub table: String,
}

impl Translation {
    /// Whether a step reads the catalog views, which live in the connection's temp schema (a rollback of
    /// the transaction that made them takes them away: `pg_catalog::ensure` makes them again).
    pub fn reads_catalog(&self) -> bool {
        self.steps.iter().any(|s| catalog_refs::reads_catalog(s))
    }

    pub(super) fn single(sql: String, kind: Kind) -> Translation {
        Translation {
            steps: vec![sql],
            primary: 0,
            columns: None,
            params: Vec::new(),
            kind,
            uses_now: false,
            foreign_keys_off: false,
            param_columns: Vec::new(),
            captures: Vec::new(),
            bound: None,
            notices: Vec::new(),
            column_origins: false,
        }
    }
}

/// A query text translated: its statements, or the text to give SQLite as it is.
#[derive(Clone, Debug, PartialEq)]
pub enum Translated {
    /// Each statement translated.
    Statements(Vec<Translation>),
    /// Not PostgreSQL the parser knows: SQLite's own dialect, run as written (SQLite's extensions, PRAGMAs
    /// the defensive policy allows). Errors then come from SQLite.
    Passthrough,
}

impl Translated {
    /// Whether running it may change the schema (DDL by its command tag, or SQLite's own text): a hint for
    /// when to read the catalog again, never needed for correctness (a changed schema version is seen anyway).
    pub fn may_change_schema(&self) -> bool {
        match self {
            Translated::Passthrough => true,
            Translated::Statements(statements) => statements.iter().any(|statement| match &statement.kind {
                Kind::Other(tag) => ["CREATE", "ALTER", "DROP"].iter().any(|verb| tag.starts_with(verb)),
                _ => false,
            }),
        }
    }
}
