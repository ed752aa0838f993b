//! Describe: a statement's parameter types and result columns, for the extended protocol.

use super::*;

/// A describe's answer kept for the next describe of the same text.
pub(super) struct Cached {
    /// The translation the answer was made from: the answer holds while the dialect hands out this same
    /// translation (its cache is emptied when the schema changes and is kept per `search_path`, and this
    /// reference keeps the allocation from being reused).
    translated: Arc<Translated>,
    /// The parameter types the client declared.
    client_types: Vec<Option<Type>>,
    described: Described,
}

impl Session {
    pub(super) fn describe_inner(&mut self, sql: &str, client_types: &[Option<Type>]) -> Result<Described, SqlError> {
        if let Some(word) = exec::leading_words(sql, 1)
            .first()
            .filter(|w| settings::is_setting_statement(w))
        {
            let columns = match (word.as_str(), settings::parse(sql)?) {
                ("SHOW", Command::Show(name)) => {
                    let (name, _) = self.dialect.state().read_settings(|settings| settings.show(&name))?;
                    vec![exec::Column::computed(name, PgType::TEXT)]
                }
                ("SHOW", Command::ShowAll) => ["name", "setting", "description"]
                    .map(|name| exec::Column::computed(name, PgType::TEXT))
                    .to_vec(),
                _ => Vec::new(),
            };
            return Ok(Described {
                params: Vec::new(),
                columns,
            });
        }
        let translated = self.translate(sql)?;
        if let Some(cached) = self.describe_cache.get(sql) {
            if Arc::ptr_eq(&cached.translated, &translated) && cached.client_types == client_types {
                let described = cached.described.clone();
                self.note_described(sql, &described.columns);
                return Ok(described);
            }
        }
        let (step, translation) = match &*translated {
            Translated::Passthrough => (exec::passthrough_text(sql).into_owned(), None),
            Translated::Statements(list) => match list.as_slice() {
                [translation] if !translation.steps.is_empty() => {
                    (translation.steps[translation.primary].clone(), Some(translation))
                }
                [Translation {
                    kind:
                        pgcompat::Kind::Fetch {
                            name, move_only: false, ..
                        },
                    ..
                }] => {
                    let columns = self.cursors.get(name)?.columns.clone();
                    return Ok(Described {
                        params: Vec::new(),
                        columns,
                    });
                }
                [_] | [] => {
                    return Ok(Described {
                        params: Vec::new(),
                        columns: Vec::new(),
                    })
                }
                _ => {
                    return Err(SqlError::new(
                        SYNTAX_ERROR,
                        "cannot insert multiple commands into a prepared statement",
                    ))
                }
            },
        };
        let learned: &[Option<PgType>] = translation.map_or(&[], |t| t.params.as_slice());
        // The primary step of a statement with captures reads their TEMP tables: made here (empty), and
        // made again when the statement runs.
        let captured_count = match translation.filter(|t| !t.captures.is_empty()) {
            Some(translation) => captured::make_capture_tables(&self.conn, translation)?,
            None => 0,
        };
        let mut stmt = self.conn.prepare(&step)?;
        // Every `$n` of the PostgreSQL text counts, also where the step has none: `EXPLAIN`'s step is its plan's
        // query, the parameters are the explained statement's (bound to nothing there, see `exec::bind`).
        let count = exec::parameter_numbers(&stmt)?
            .into_iter()
            .max()
            .unwrap_or(0)
            .max(captured_count)
            .max(learned.len());
        let raw = RawParams {
            values: Vec::new(),
            formats: Format::UnifiedText,
            client_types: client_types.to_vec(),
        };
        let params = (0..count.max(client_types.len()))
            .map(|index| {
                match client_types
                    .get(index)
                    .cloned()
                    .flatten()
                    .filter(|t| t.oid() != 0 && *t != Type::UNKNOWN)
                {
                    Some(ty) => ty,
                    None => types::wire_type(raw.type_of(index, learned).unwrap_or(types::PARAMETER_TYPE_DEFAULT)),
                }
            })
            .collect();
        let mut known = self.dialect.column_types(&stmt, translation);
        if let Some(translation) = translation {
            let param_types: Vec<Option<PgType>> = (0..count.max(client_types.len()))
                .map(|index| raw.type_of(index, learned))
                .collect();
            super::type_param_columns(&mut known, translation, &param_types);
        }
        let declared = exec::declared_types(&stmt);
        let unknown = known.iter().zip(&declared).any(|(k, d)| k.is_none() && d.is_none());
        let probed = unknown && stmt.readonly() && count == 0;
        let probe = if probed {
            let mut rows = stmt.raw_query();
            match rows.next()? {
                Some(row) => (0..declared.len())
                    .map(|i| row.get::<_, Value>(i))
                    .collect::<Result<Vec<_>, _>>()?,
                None => Vec::new(),
            }
        } else {
            Vec::new()
        };
        let origins = self.dialect.column_origins(&stmt, translation);
        let columns: exec::Columns = exec::names(&stmt)
            .into_iter()
            .zip(known.into_iter().zip(declared))
            .enumerate()
            .map(|(i, (name, (known, declared)))| {
                let ty = known
                    .or(declared)
                    .unwrap_or_else(|| types::type_of_values(probe.get(i).into_iter()));
                exec::Column {
                    name,
                    ty,
                    origin: origins.get(i).copied().flatten(),
                }
            })
            .collect();
        drop(stmt);
        self.note_described(sql, &columns);
        let described = Described { params, columns };
        // An answer typed from a row's values may change with the data: made again each time.
        if !probed {
            if self.describe_cache.len() >= DESCRIBED_STATEMENTS_MAX {
                self.describe_cache.clear();
            }
            let cached = Cached {
                translated: Arc::clone(&translated),
                client_types: client_types.to_vec(),
                described: described.clone(),
            };
            self.describe_cache.insert(sql.to_owned(), cached);
        }
        Ok(described)
    }

    /// Keeps the column types a describe gave the client, for the text's executions.
    fn note_described(&mut self, sql: &str, columns: &[exec::Column]) {
        if self.described.len() >= DESCRIBED_STATEMENTS_MAX && !self.described.contains_key(sql) {
            self.described.clear();
        }
        self.described
            .insert(sql.to_owned(), columns.iter().map(|column| column.ty).collect());
    }
}
