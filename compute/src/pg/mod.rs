//! The PostgreSQL wire protocol over SQLite sessions, through `pgwire`.
//!
//! Each client connection gets its own handlers and, once its password checks out, its own SQLite
//! connection from a [`SessionFactory`] (picked by user and database name). SQLite calls block, so they
//! run on tokio's blocking pool; the session's lock is only ever taken there, never across an await.
//!
//! Limits: results are built in memory, bounded in rows and bytes (SQLSTATE 54000 beyond); queries
//! longer than [`QUERY_BYTES_MAX`] are refused. pgwire itself bounds startup messages but accepts
//! query messages up to 1 GiB before they reach us.

mod error;
mod session;
mod types;

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream;
use parking_lot::Mutex;
use pgwire::api::auth::cleartext::CleartextPasswordAuthStartupHandler;
use pgwire::api::auth::{AuthSource, DefaultServerParameterProvider, LoginInfo, Password};
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{DescribePortalResponse, DescribeStatementResponse, QueryResponse, Response, Tag};
use pgwire::api::stmt::{NoopQueryParser, StoredStatement};
use pgwire::api::{ClientInfo, PgWireServerHandlers};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult, SEVERITY_FATAL};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use self::error::{SqlError, INVALID_CATALOG_NAME, PROGRAM_LIMIT_EXCEEDED};
use self::session::{Described, Outcome, Session};

/// Longest query text accepted, in bytes.
pub const QUERY_BYTES_MAX: usize = 16 << 20;
/// Most client connections served at once; more are closed on accept.
pub const CONNECTIONS_MAX: usize = 1024;

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The database name is not one this factory serves.
    #[error("invalid database name {0:?}")]
    InvalidDatabaseName(String),
    /// SQLite could not open the database.
    #[error("cannot open database: {0}")]
    Open(#[from] rusqlite::Error),
}

/// Gives each authenticated client its SQLite connection, and knows the users' passwords.
pub trait SessionFactory: Send + Sync + 'static {
    /// The password `user` must present to open `database` (the name the client gave, time-travel suffix and
    /// all), or `None` if there is no such user there.
    fn password(&self, user: &str, database: &str) -> Option<String>;

    /// Opens the connection for `user` on the database named `database`. Blocks; called off the
    /// async executor.
    fn open(&self, user: &str, database: &str) -> Result<rusqlite::Connection, SessionError>;
}

/// A [`SessionFactory`] over plain files: database `name` is `<dir>/<name>.sqlite`, created on first use.
/// Users and passwords are a fixed map. Until the VFS-backed factory exists, this makes the server
/// usable and testable.
#[derive(Debug, Clone)]
pub struct FileSessionFactory {
    dir: PathBuf,
    passwords: HashMap<String, String>,
}

impl FileSessionFactory {
    /// A factory serving the databases in `dir` to the users in `passwords` (user → password).
    pub fn new(dir: impl Into<PathBuf>, passwords: HashMap<String, String>) -> FileSessionFactory {
        FileSessionFactory {
            dir: dir.into(),
            passwords,
        }
    }
}

/// Whether `name` is a database name we accept: `[A-Za-z0-9_]+`, so it can never leave the directory.
fn is_valid_database_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl SessionFactory for FileSessionFactory {
    fn password(&self, user: &str, _database: &str) -> Option<String> {
        self.passwords.get(user).cloned()
    }

    fn open(&self, _user: &str, database: &str) -> Result<rusqlite::Connection, SessionError> {
        if !is_valid_database_name(database) {
            return Err(SessionError::InvalidDatabaseName(database.to_owned()));
        }
        let conn = rusqlite::Connection::open(self.dir.join(format!("{database}.sqlite")))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(conn)
    }
}

/// A [`SessionFactory`] over the databases registered with the compute's VFS (`compute::vfs`): the database
/// name a client gives selects a registered database; any other name is refused (it never falls through to a
/// local file). Users and passwords are a fixed map.
#[derive(Debug, Clone)]
pub struct VfsSessionFactory {
    passwords: HashMap<String, String>,
}

impl VfsSessionFactory {
    /// A factory serving registered databases to the users in `passwords` (user → password).
    pub fn new(passwords: HashMap<String, String>) -> VfsSessionFactory {
        VfsSessionFactory { passwords }
    }
}

impl SessionFactory for VfsSessionFactory {
    fn password(&self, user: &str, _database: &str) -> Option<String> {
        self.passwords.get(user).cloned()
    }

    fn open(&self, _user: &str, database: &str) -> Result<rusqlite::Connection, SessionError> {
        if !crate::vfs::is_registered(database) {
            return Err(SessionError::InvalidDatabaseName(database.to_owned()));
        }
        Ok(crate::vfs::open_connection(database)?)
    }
}

/// Serves PostgreSQL clients on `listener` until `shutdown` completes, then closes every connection.
pub async fn serve(listener: TcpListener, sessions: Arc<dyn SessionFactory>, shutdown: impl Future<Output = ()>) {
    tokio::pin!(shutdown);
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    if connections.len() >= CONNECTIONS_MAX {
                        tracing::warn!(%peer, "refusing connection: {CONNECTIONS_MAX} already open");
                        continue;
                    }
                    let handlers = ConnectionHandlers::new(sessions.clone());
                    connections.spawn(async move {
                        if let Err(error) = pgwire::tokio::process_socket(socket, None, handlers).await {
                            tracing::debug!(%peer, %error, "connection ended");
                        }
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    // Out of file descriptors and the like: back off rather than spin.
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
        }
    }
    connections.shutdown().await;
}

/// The session of one connection: empty until authentication opens it.
type SessionSlot = Arc<Mutex<Option<Session>>>;

/// Runs `f` on the connection's session on the blocking pool.
async fn with_session<T: Send + 'static>(
    slot: &SessionSlot,
    f: impl FnOnce(&mut Session) -> T + Send + 'static,
) -> PgWireResult<T> {
    let slot = slot.clone();
    tokio::task::spawn_blocking(move || {
        let mut guard = slot.lock();
        guard.as_mut().map(f)
    })
    .await
    .map_err(|e| PgWireError::ApiError(Box::new(e)))?
    .ok_or(PgWireError::NotReadyForQuery)
}

fn check_query_size(query: &str) -> Result<(), SqlError> {
    if query.len() > QUERY_BYTES_MAX {
        return Err(SqlError::new(
            PROGRAM_LIMIT_EXCEEDED,
            format!("query of {} bytes exceeds {QUERY_BYTES_MAX}", query.len()),
        ));
    }
    Ok(())
}

/// Checks passwords and, on success, opens the connection's session.
struct ConnectionAuth {
    sessions: Arc<dyn SessionFactory>,
    slot: SessionSlot,
}

impl Debug for ConnectionAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionAuth").finish_non_exhaustive()
    }
}

fn fatal(code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        SEVERITY_FATAL.to_owned(),
        code.to_owned(),
        message,
    )))
}

#[async_trait]
impl AuthSource for ConnectionAuth {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        let user = login.user().unwrap_or_default();
        // PostgreSQL's default: the database is named after the user.
        let database = login.database().unwrap_or(user);
        let password = self
            .sessions
            .password(user, database)
            .ok_or_else(|| PgWireError::InvalidPassword(user.to_owned()))?;
        Ok(Password::new(None, password.into_bytes()))
    }

    async fn verify_password(&self, login: &LoginInfo, presented_password: &[u8]) -> PgWireResult<Option<()>> {
        let user = login.user().unwrap_or_default().to_owned();
        // PostgreSQL's default: the database is named after the user.
        let database = login.database().unwrap_or(&user).to_owned();
        let expected = self.sessions.password(&user, &database);
        if expected.as_deref().map(str::as_bytes) != Some(presented_password) {
            return Err(PgWireError::InvalidPassword(user));
        }
        let sessions = self.sessions.clone();
        let name = database.clone();
        let opened = tokio::task::spawn_blocking(move || sessions.open(&user, &name))
            .await
            .map_err(|e| PgWireError::ApiError(Box::new(e)))?;
        match opened {
            Ok(conn) => {
                *self.slot.lock() = Some(Session::new(conn, &database));
                Ok(None)
            }
            Err(error) => Err(fatal(INVALID_CATALOG_NAME, error.to_string())),
        }
    }
}

/// Simple and extended query handling over the connection's session.
struct QueryHandler {
    slot: SessionSlot,
    parser: Arc<NoopQueryParser>,
}

fn outcome_response(outcome: Outcome) -> Response {
    match outcome {
        Outcome::Rows { fields, rows, tag } => {
            let mut response = QueryResponse::new(fields, stream::iter(rows.into_iter().map(Ok)));
            response.set_command_tag(&tag);
            Response::Query(response)
        }
        Outcome::Command(tag) => Response::Execution(Tag::new(&tag)),
        Outcome::TxStart(tag) => Response::TransactionStart(Tag::new(&tag)),
        Outcome::TxEnd(tag) => Response::TransactionEnd(Tag::new(&tag)),
    }
}

#[async_trait]
impl SimpleQueryHandler for QueryHandler {
    async fn do_query<C>(&self, _client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        check_query_size(query).map_err(SqlError::into_pgwire)?;
        let query = query.to_owned();
        let (outcomes, error) = with_session(&self.slot, move |s| s.simple_query(&query)).await?;
        let mut responses: Vec<Response> = outcomes.into_iter().map(outcome_response).collect();
        if let Some(error) = error {
            // An error response in the list (not an `Err`) keeps the results before it.
            responses.push(Response::Error(Box::new(error.into_info())));
        }
        Ok(responses)
    }
}

#[async_trait]
impl ExtendedQueryHandler for QueryHandler {
    type Statement = String;
    type QueryParser = NoopQueryParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        self.parser.clone()
    }

    async fn do_query<C>(
        &self,
        _client: &mut C,
        portal: &Portal<Self::Statement>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let sql = portal.statement.statement.clone();
        check_query_size(&sql).map_err(SqlError::into_pgwire)?;
        let params = types::parameters(portal).map_err(SqlError::into_pgwire)?;
        let format = portal.result_column_format.clone();
        let outcome = with_session(&self.slot, move |s| s.execute(&sql, &params, &format)).await?;
        outcome.map(outcome_response).map_err(SqlError::into_pgwire)
    }

    async fn do_describe_statement<C>(
        &self,
        _client: &mut C,
        stmt: &StoredStatement<Self::Statement>,
    ) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let described = self.describe(stmt).await?;
        let fields = types::fields(&described.columns, &Format::UnifiedText);
        Ok(DescribeStatementResponse::new(described.params, fields))
    }

    async fn do_describe_portal<C>(
        &self,
        _client: &mut C,
        portal: &Portal<Self::Statement>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let described = self.describe(&portal.statement).await?;
        let fields = types::fields(&described.columns, &portal.result_column_format);
        Ok(DescribePortalResponse::new(fields))
    }
}

impl QueryHandler {
    async fn describe(&self, stmt: &StoredStatement<String>) -> PgWireResult<Described> {
        let sql = stmt.statement.clone();
        check_query_size(&sql).map_err(SqlError::into_pgwire)?;
        let client_types = stmt.parameter_types.clone();
        with_session(&self.slot, move |s| s.describe(&sql, &client_types))
            .await?
            .map_err(SqlError::into_pgwire)
    }
}

/// The pgwire handlers of one connection, sharing its session slot.
struct ConnectionHandlers {
    startup: Arc<CleartextPasswordAuthStartupHandler<ConnectionAuth, DefaultServerParameterProvider>>,
    query: Arc<QueryHandler>,
}

impl ConnectionHandlers {
    fn new(sessions: Arc<dyn SessionFactory>) -> ConnectionHandlers {
        let slot: SessionSlot = Arc::new(Mutex::new(None));
        let mut parameters = DefaultServerParameterProvider::default();
        parameters.server_version = format!("16.0 (Cambium, SQLite {})", rusqlite::version());
        let auth = ConnectionAuth {
            sessions,
            slot: slot.clone(),
        };
        ConnectionHandlers {
            startup: Arc::new(CleartextPasswordAuthStartupHandler::new(auth, parameters)),
            query: Arc::new(QueryHandler {
                slot,
                parser: Arc::new(NoopQueryParser::new()),
            }),
        }
    }
}

impl PgWireServerHandlers for ConnectionHandlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.query.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        self.query.clone()
    }

    fn startup_handler(&self) -> Arc<impl pgwire::api::auth::StartupHandler> {
        self.startup.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names_stay_in_the_directory() {
        assert!(is_valid_database_name("db_1"));
        assert!(!is_valid_database_name(""));
        assert!(!is_valid_database_name("../etc"));
        assert!(!is_valid_database_name("a.b"));
        assert!(!is_valid_database_name("a b"));
    }
}
