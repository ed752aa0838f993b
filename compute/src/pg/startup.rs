//! Startup: SCRAM-SHA-256 authentication, then the session opened before the client is told it is in.

use super::*;

/// Gives pgwire's SCRAM exchange the verifier of the user and database a client names.
pub(super) struct ConnectionAuth {
    pub(super) sessions: Arc<dyn SessionFactory>,
}

impl Debug for ConnectionAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionAuth").finish_non_exhaustive()
    }
}

pub(super) fn fatal(code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        SEVERITY_FATAL.to_owned(),
        code.to_owned(),
        message,
    )))
}

/// The user and database a client named (PostgreSQL's default database is the user's name).
pub(super) fn login_names(login: &LoginInfo) -> (String, String) {
    let user = login.user().unwrap_or_default().to_owned();
    let database = login.database().unwrap_or(&user).to_owned();
    (user, database)
}

/// A verifier no password matches, for names that have none: the exchange runs to the end and fails like a
/// wrong password, so a client cannot tell which users or databases exist (as PostgreSQL does).
pub(super) static DOOMED: std::sync::LazyLock<Option<Arc<scram::ScramVerifier>>> = std::sync::LazyLock::new(|| {
    let mut password = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut password).ok()?;
    let password: String = password.iter().map(|b| format!("{b:02x}")).collect();
    scram::ScramVerifier::from_password(&password, scram::ITERATIONS_DEFAULT)
        .ok()
        .map(Arc::new)
});

#[async_trait]
impl AuthSource for ConnectionAuth {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        // Only SCRAM is offered; no password is ever kept to hand out.
        Err(PgWireError::InvalidPassword(
            login.user().unwrap_or_default().to_owned(),
        ))
    }

    async fn get_scram_secret(
        &self,
        login: &LoginInfo,
    ) -> PgWireResult<(pgwire::api::auth::sasl::scram::ScramSecret, Option<()>)> {
        let (user, database) = login_names(login);
        let verifier = self.sessions.verifier(&user, &database).or_else(|| DOOMED.clone());
        let verifier = verifier.ok_or_else(|| PgWireError::InvalidPassword(user.clone()))?;
        Ok((verifier.secret(), None))
    }
}

/// Startup: SCRAM-SHA-256, then the session opens before the client is told it is in, so a database that
/// cannot be opened is a FATAL error of the connection attempt, as in PostgreSQL.
pub(super) struct Startup {
    pub(super) driver: AuthDriver<DefaultServerParameterProvider>,
    pub(super) mechanisms: SaslMechanisms,
    pub(super) sessions: Arc<dyn SessionFactory>,
    pub(super) connection: Arc<Connection>,
    /// Where the session is registered for cancel requests once the client has its key.
    pub(super) cancel: Arc<super::cancel::CancelTargets>,
}

impl Startup {
    /// Opens the session of the authenticated client.
    pub(super) async fn open_session<C: ClientInfo>(&self, client: &C) -> PgWireResult<()> {
        let (user, database) = login_names(&LoginInfo::from_client_info(client));
        let sessions = self.sessions.clone();
        let defaults = self.connection.config.session_defaults;
        let mut startup: Vec<(String, String)> = client
            .metadata()
            .iter()
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        startup.sort();
        let addresses = self
            .connection
            .watch
            .local_addr()
            .and_then(|server| Ok((server, self.connection.watch.peer_addr()?)))
            .ok();
        // On the connection's own thread, which has nothing else to do meanwhile (opening may start the branch's
        // store, bounded by the store's own deadlines).
        let opened = (|| {
            let admission = sessions.admit(&database)?;
            let (conn, catalog) = sessions.open_sharing(&user, &database)?;
            let mut session = Session::new(conn, &database, &user, defaults, &startup)?.with_shared_catalog(catalog);
            if let Some((server, client)) = addresses {
                session = session.with_addresses(server, client);
            }
            Ok::<_, SessionError>(session.with_admission(admission))
        })();
        match opened {
            Ok(session) => {
                let _first = self.connection.shared.set(session.shared());
                *self.connection.slot.lock() = Some(session);
                Ok(())
            }
            Err(
                error @ (SessionError::TooManyConnections { .. } | SessionError::TooManyConnectionsForAccount { .. }),
            ) => Err(fatal(TOO_MANY_CONNECTIONS, error.to_string())),
            Err(error) => Err(fatal(INVALID_CATALOG_NAME, error.to_string())),
        }
    }

    pub(super) async fn finish<C>(&self, client: &mut C, outcome: AuthOutcome) -> PgWireResult<()>
    where
        C: ClientInfo + futures::Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as futures::Sink<PgWireBackendMessage>>::Error>,
    {
        match outcome {
            AuthOutcome::InProgress => Ok(()),
            AuthOutcome::Authenticated { final_message, .. } => {
                self.open_session(client).await?;
                self.driver.complete_authentication(client, final_message).await?;
                // The client now has its key (BackendKeyData): cancel requests with it stop the session's calls.
                let (pid, secret) = client.pid_and_secret_key();
                if let Some(shared) = self.connection.shared.get() {
                    let _first = self.connection.cancel.set(self.cancel.register(pid, &secret, shared));
                }
                Ok(())
            }
        }
    }
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(&self, client: &mut C, message: PgWireFrontendMessage) -> PgWireResult<()>
    where
        C: ClientInfo + futures::Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as futures::Sink<PgWireBackendMessage>>::Error>,
    {
        match message {
            PgWireFrontendMessage::Startup(ref startup) => {
                protocol_negotiation(client, startup).await?;
                save_startup_parameters_to_metadata(client, startup);
                let outcome = self
                    .driver
                    .begin_authentication(client, self.mechanisms.create())
                    .await?;
                self.finish(client, outcome).await
            }
            PgWireFrontendMessage::PasswordMessageFamily(message) => {
                let outcome = self.driver.advance_authentication(client, message).await?;
                self.finish(client, outcome).await
            }
            _ => Ok(()),
        }
    }
}
