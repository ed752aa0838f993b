//! The pgwire query handlers of a connection (simple and extended query, COPY), over its session.

use super::*;
use pgwire::api::store::PortalStore;
use pgwire::api::ClientPortalStore;

/// Bytes of `CopyData` gathered before they are handed to the session in one call (and whatever is left at
/// `CopyDone`). psql and pgbench send a row per message, and a session call (the statements' watchdog, the
/// durability scope, the counters) cost more than parsing and inserting the row.
pub(super) const COPY_BATCH_BYTES: usize = 256 * 1024;

/// Simple and extended query handling over the connection's session.
pub(super) struct QueryHandler {
    pub(super) connection: Arc<Connection>,
    pub(super) parser: Arc<NoopQueryParser>,
    /// `CopyData` of the copy in progress not yet handed to the session (under [`COPY_BATCH_BYTES`] plus one
    /// message); emptied when a copy starts, ends or fails.
    pub(super) copy_pending: parking_lot::Mutex<Vec<u8>>,
}

impl QueryHandler {
    /// The responses to `outcomes`; a copy starting among them starts with nothing pending (a copy the protocol
    /// cut short leaves nothing for the next one).
    fn responses(&self, outcomes: Vec<Outcome>) -> Vec<Response> {
        if outcomes.iter().any(|o| matches!(o, Outcome::CopyIn { .. })) {
            self.copy_pending.lock().clear();
        }
        outcomes.into_iter().map(outcome_response).collect()
    }
}

/// Sends a call's notices (NoticeResponse messages), before its results as PostgreSQL sends them.
async fn send_notices<C>(client: &mut C, notices: Vec<super::session::Notice>) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    for notice in notices {
        let info = pgwire::error::ErrorInfo::new(notice.severity.to_owned(), notice.code.to_owned(), notice.message);
        client.feed(PgWireBackendMessage::NoticeResponse(info.into())).await?;
    }
    Ok(())
}

pub(super) fn outcome_response(outcome: Outcome) -> Response {
    match outcome {
        Outcome::Rows { fields, rows, tag } => {
            let mut response = QueryResponse::new(fields, stream::iter(rows.into_iter().map(Ok)));
            response.set_command_tag(&tag);
            Response::Query(response)
        }
        Outcome::Command(tag) => Response::Execution(Tag::new(&tag)),
        Outcome::TxStart(tag) => Response::TransactionStart(Tag::new(&tag)),
        Outcome::TxEnd(tag) => Response::TransactionEnd(Tag::new(&tag)),
        // The copy's format code: 0 text (and CSV), 1 binary (pgwire then appends the binary end marker).
        Outcome::CopyIn { columns, binary } => {
            Response::CopyIn(CopyResponse::new(i8::from(binary), columns, stream::empty()))
        }
        Outcome::CopyOut { columns, binary, data } => Response::CopyOut(CopyResponse::new(
            i8::from(binary),
            columns,
            stream::iter(data.into_iter().map(|chunk| Ok(CopyData::new(chunk)))),
        )),
    }
}

#[async_trait]
impl CopyHandler for QueryHandler {
    async fn on_copy_data<C>(&self, _client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let batch = {
            let mut pending = self.copy_pending.lock();
            pending.extend_from_slice(&copy_data.data);
            if pending.len() < COPY_BATCH_BYTES {
                return Ok(());
            }
            std::mem::replace(&mut *pending, Vec::with_capacity(COPY_BATCH_BYTES + 1024))
        };
        self.connection.run(move |s| s.copy_data(&batch)).await?;
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let rest = std::mem::take(&mut *self.copy_pending.lock());
        let rows = self
            .connection
            .run(move |s| {
                if !rest.is_empty() {
                    s.copy_data(&rest);
                }
                s.copy_done()
            })
            .await?
            .map_err(SqlError::into_pgwire)?;
        let rows = usize::try_from(rows).unwrap_or(usize::MAX);
        client
            .send(PgWireBackendMessage::CommandComplete(
                Tag::new("COPY").with_rows(rows).into(),
            ))
            .await?;
        Ok(())
    }

    async fn on_copy_fail<C>(&self, _client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let message = fail.message;
        self.copy_pending.lock().clear();
        match self.connection.run(move |s| s.copy_fail(&message)).await {
            Ok(error) => error.into_pgwire(),
            Err(error) => error,
        }
    }
}

#[async_trait]
impl SimpleQueryHandler for QueryHandler {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        check_query_size(query).map_err(SqlError::into_pgwire)?;
        if let Some(moved) = self.move_in_portal(client, query).await? {
            return Ok(vec![moved]);
        }
        let query = query.to_owned();
        let ((outcomes, error), notices) = self
            .connection
            .run(move |s| {
                let ran = s.simple_query(&query);
                (ran, s.take_notices())
            })
            .await?;
        send_notices(client, notices).await?;
        let mut responses = self.responses(outcomes);
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
        client: &mut C,
        portal: &Portal<Self::Statement>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let sql = portal.statement.statement.clone();
        check_query_size(&sql).map_err(SqlError::into_pgwire)?;
        let params = types::RawParams {
            values: portal.parameters.clone(),
            formats: portal.parameter_format.clone(),
            client_types: portal.statement.parameter_types.clone(),
        };
        let format = portal.result_column_format.clone();
        let (outcome, notices) = self
            .connection
            .run(move |s| {
                let ran = s.execute(&sql, &params, &format);
                (ran, s.take_notices())
            })
            .await?;
        send_notices(client, notices).await?;
        outcome
            .map(|outcome| self.responses(vec![outcome]).pop().expect("one response per outcome"))
            .map_err(SqlError::into_pgwire)
    }

    async fn do_describe_statement<C>(
        &self,
        client: &mut C,
        stmt: &StoredStatement<Self::Statement>,
    ) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let described = self.describe(client, stmt).await?;
        let fields = types::fields(&described.columns, &Format::UnifiedText);
        Ok(DescribeStatementResponse::new(described.params, fields))
    }

    async fn do_describe_portal<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let described = self.describe(client, &portal.statement).await?;
        let fields = types::fields(&described.columns, &portal.result_column_format);
        Ok(DescribePortalResponse::new(fields))
    }
}

impl QueryHandler {
    /// `MOVE [FORWARD] [n | ALL] name` on the protocol-level portal `name` (bound and executed with a row limit:
    /// PostgreSQL's portals are cursors, and asyncpg's cursors skip rows so), when no SQL cursor has the name:
    /// its next rows passed over, `MOVE <count>`. `None` for any other text, and for a portal not executed yet
    /// (the session answers, 34000 as before).
    async fn move_in_portal<C>(&self, client: &mut C, query: &str) -> PgWireResult<Option<Response>>
    where
        C: ClientPortalStore + Send,
        C::PortalStore: PortalStore,
    {
        let Some((name, count)) = pgcompat::translate::cursor::move_forward(query) else {
            return Ok(None);
        };
        // The connection's portals are pgwire's store of this handler's statements (texts).
        let Some(store) = client
            .portal_store()
            .as_any()
            .downcast_ref::<pgwire::api::store::MemPortalStore<String>>()
        else {
            return Ok(None);
        };
        let Some(pgwire::api::store::Entry::Value(portal)) = store.get_portal(&name) else {
            return Ok(None);
        };
        let cursor = name.clone();
        if self.connection.run(move |s| s.has_cursor(&cursor)).await? {
            return Ok(None);
        }
        // `ALL` is pgwire's 0 (no limit); a count past `usize` is as good as `ALL`.
        let limit = count.map_or(0, |count| usize::try_from(count).unwrap_or(0));
        if limit == 0 && count == Some(0) {
            return Ok(Some(Response::Execution(Tag::new("MOVE 0"))));
        }
        let fetched = match portal.fetch(limit).await {
            Ok(fetched) => fetched,
            Err(PgWireError::PortalNotStarted) => return Ok(None),
            Err(error) => return Err(error),
        };
        let mut rows = fetched.response;
        let mut moved: u64 = 0;
        while let Some(row) = rows.data_rows().next().await {
            row?;
            moved += 1;
        }
        Ok(Some(Response::Execution(Tag::new(&format!("MOVE {moved}")))))
    }

    pub(super) async fn describe<C: ClientInfo>(
        &self,
        _client: &C,
        stmt: &StoredStatement<String>,
    ) -> PgWireResult<Described> {
        let sql = &stmt.statement;
        check_query_size(sql).map_err(SqlError::into_pgwire)?;
        let client_types = &stmt.parameter_types;
        self.connection
            .run(move |s| s.describe(sql, client_types))
            .await?
            .map_err(SqlError::into_pgwire)
    }
}
