//! Function calls: PostgreSQL functions by their SQLite or layer names, typed calls, and the refusals of
//! functions no pass can make faithful.

use sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, ObjectName, SelectItem, SetExpr,
};

use super::*;
use crate::error::PgError;
use crate::types::{self, Base, PgType};

impl Rewriter<'_> {
    pub(super) fn rewrite_function(&mut self, function: &mut Function) -> Result<Option<Expr>, PgError> {
        let name = last_part(&function.name).to_ascii_lowercase();
        if function.name.0.len() > 1 {
            let schema = function.name.0[0].to_string().to_ascii_lowercase();
            if schema != "pg_catalog" && schema != "public" {
                return Err(PgError::new(
                    crate::error::UNDEFINED_FUNCTION,
                    format!("function {}() does not exist", function.name),
                ));
            }
            function.name = ObjectName::from(vec![Ident::new(name.clone())]);
        }
        positional_args(&name, function)?;
        if matches!(name.as_str(), "concat" | "concat_ws" | "format") {
            // These print each argument through its output function: a regclass or regtype is its name, as
            // with `||` (see `catalog_refs::name_as_text`), not its OID.
            if let FunctionArguments::List(list) = &mut function.args {
                for arg in &mut list.args {
                    if let FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) = arg {
                        if let Some(text) = super::super::catalog_refs::name_as_text(expr) {
                            *expr = text;
                        }
                    }
                }
            }
        }
        let no_args = matches!(function.args, FunctionArguments::None)
            || matches!(&function.args, FunctionArguments::List(l) if l.args.is_empty());
        let renamed = |to: &str| {
            let mut f = function.clone();
            f.name = ObjectName::from(vec![Ident::new(to)]);
            Expr::Function(f)
        };
        if let (true, FunctionArguments::Subquery(query)) = (name == "array", &function.args) {
            let element = match query.body.as_ref() {
                SetExpr::Select(select) => {
                    let mut scopes = self.typer.scopes.clone();
                    scopes.push(Scope::of_select(select));
                    let inner = Typer {
                        rewritten: self.typer.rewritten.clone(),
                        catalog: self.typer.catalog,
                        scopes,
                        ctes: self.typer.ctes.clone(),
                    };
                    match select.projection.first() {
                        Some(SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }) => inner.infer(e),
                        _ => None,
                    }
                }
                _ => None,
            };
            let element = element.unwrap_or(PgType::TEXT).element().catalog_text();
            if let Some(replacement) = super::super::catalog_refs::array_of_subquery(query, &element) {
                return Ok(Some(replacement));
            }
        }
        if let Some(replacement) = super::super::catalog_refs::rewrite_call(&name, &plain_args(function)) {
            self.uses_catalog = true;
            return Ok(Some(replacement));
        }
        if name.starts_with("jsonb_path_") || name.starts_with("json_path_") {
            return Err(PgError::unsupported(format!("the SQL/JSON path function {name}")));
        }
        if matches!(
            name.as_str(),
            "to_tsvector" | "to_tsquery" | "plainto_tsquery" | "phraseto_tsquery" | "websearch_to_tsquery" | "ts_rank"
        ) {
            return Err(PgError::unsupported(format!("full-text search ({name})")));
        }
        // Transactions have no ids under SQLite (one writer at a time, readers on a snapshot): no value would
        // be one PostgreSQL could give.
        if matches!(
            name.as_str(),
            "txid_current"
                | "txid_current_if_assigned"
                | "txid_current_snapshot"
                | "pg_current_xact_id"
                | "pg_current_xact_id_if_assigned"
                | "pg_current_snapshot"
        ) {
            return Err(PgError::unsupported(format!("transaction ids ({name})")));
        }
        // Addresses are of type inet, which the layer does not have (the ports are answered below).
        if matches!(name.as_str(), "inet_server_addr" | "inet_client_addr") {
            return Err(PgError::unsupported(format!("the inet type ({name})")));
        }
        if let Some(replacement) = ordered_set(&name, function)? {
            return Ok(Some(replacement));
        }
        if let Some(replacement) = self.whole_row(&name, function) {
            return Ok(Some(replacement));
        }
        Ok(Some(match name.as_str() {
            "inet_server_port" | "inet_client_port" if no_args => call(&format!("pg_{name}"), Vec::new()),
            // The same value; a name of its own so a column default prints back as it was written.
            "current_timestamp" if no_args => {
                self.uses_now = true;
                call("pg_current_timestamp", Vec::new())
            }
            "now" | "transaction_timestamp" | "statement_timestamp" if no_args => {
                self.uses_now = true;
                call("pg_now", Vec::new())
            }
            "clock_timestamp" => call("pg_clock_timestamp", Vec::new()),
            "current_date" if no_args => {
                self.uses_now = true;
                call("pg_current_date", Vec::new())
            }
            "localtimestamp" if no_args => {
                self.uses_now = true;
                call("pg_localtimestamp", Vec::new())
            }
            "current_time" if no_args => {
                self.uses_now = true;
                call("pg_current_timetz", Vec::new())
            }
            "localtime" if no_args => {
                self.uses_now = true;
                call("pg_current_time", Vec::new())
            }
            "version" => call("pg_version", Vec::new()),
            "current_database" | "current_catalog" => call("pg_current_database", Vec::new()),
            "current_schema" => call("pg_current_schema", Vec::new()),
            "current_user" | "session_user" | "user" | "current_role" if no_args => call("pg_current_user", Vec::new()),
            "length" | "char_length" | "character_length"
                if plain_args(function).len() == 1
                    && plain_args(function)
                        .first()
                        .and_then(|a| self.typer.infer(a))
                        .is_some_and(|t| t.base() == Base::Bpchar && !t.is_array()) =>
            {
                // char(n)'s padding is not part of its length.
                let arg = plain_args(function)[0].clone();
                call("length", vec![call("rtrim", vec![arg, string(" ")])])
            }
            "strpos" => {
                let args = plain_args(function).into_iter().cloned().collect();
                call("instr", args)
            }
            "date_trunc" | "date_part" => {
                let mut args: Vec<Expr> = plain_args(function).into_iter().cloned().collect();
                let source = args.get(1).and_then(|a| self.typer.infer(a));
                // A date is truncated as the timestamptz it converts to, as PostgreSQL does.
                let source = match source {
                    Some(t) if name == "date_trunc" && t.base() == Base::Date => PgType::TIMESTAMPTZ,
                    Some(t) => t,
                    None => PgType::TIMESTAMPTZ,
                };
                args.push(string(&source.catalog_text()));
                call(
                    if name == "date_trunc" {
                        "pg_date_trunc"
                    } else {
                        "pg_date_part"
                    },
                    args,
                )
            }
            "age" => {
                let args: Vec<Expr> = plain_args(function).into_iter().cloned().collect();
                call("pg_age", args)
            }
            "array_agg" | "string_agg" if is_distinct(function) => {
                // SQLite's DISTINCT takes one argument: the arguments go packed in a JSON array.
                let args: Vec<Expr> = plain_args(function).into_iter().cloned().collect();
                let packed = if name == "array_agg" {
                    let ty = args.first().and_then(|a| self.typer.infer(a)).unwrap_or(PgType::TEXT);
                    let mut packed = vec![string(&ty.catalog_text())];
                    packed.extend(args);
                    packed
                } else {
                    args
                };
                let mut f = function.clone();
                f.name = ObjectName::from(vec![Ident::new(format!("pg_{name}_packed"))]);
                if let FunctionArguments::List(list) = &mut f.args {
                    list.args = vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(call("json_array", packed)))];
                }
                Expr::Function(f)
            }
            "array_agg" => {
                let arg = plain_args(function).first().map(|a| (*a).clone());
                let ty = arg.as_ref().and_then(|a| self.typer.infer(a)).unwrap_or(PgType::TEXT);
                let mut f = function.clone();
                f.name = ObjectName::from(vec![Ident::new("pg_array_agg")]);
                if let FunctionArguments::List(list) = &mut f.args {
                    list.args.insert(
                        0,
                        FunctionArg::Unnamed(FunctionArgExpr::Expr(string(&ty.catalog_text()))),
                    );
                }
                Expr::Function(f)
            }
            "sum" | "avg"
                if plain_args(function)
                    .first()
                    .and_then(|a| self.typer.infer(a))
                    .is_some_and(|t| t.base() == Base::Interval && !t.is_array()) =>
            {
                renamed(if name == "sum" {
                    "pg_interval_sum"
                } else {
                    "pg_interval_avg"
                })
            }
            "sum" | "avg" => {
                let ty = plain_args(function).first().and_then(|a| self.typer.infer(a));
                if ty.is_some_and(|t| t.base() == Base::Numeric)
                    || (name == "avg" && ty.is_some_and(PgType::is_integer))
                {
                    renamed(if name == "sum" {
                        "pg_numeric_sum"
                    } else {
                        "pg_numeric_avg"
                    })
                } else {
                    return Ok(None);
                }
            }
            // `num_nulls(a, b, …)`: how many arguments are NULL; `num_nonnulls`: how many are not. (A sum of
            // the tests, cast so the result is typed int4 as PostgreSQL's.)
            "num_nulls" | "num_nonnulls" => {
                let args = plain_args(function);
                if args.is_empty() {
                    return Err(PgError::new(
                        crate::error::UNDEFINED_FUNCTION,
                        format!("function {name}() does not exist"),
                    ));
                }
                let test = |arg: &Expr| {
                    let arg = Box::new(Expr::Nested(Box::new(arg.clone())));
                    Expr::Nested(Box::new(if name == "num_nulls" {
                        Expr::IsNull(arg)
                    } else {
                        Expr::IsNotNull(arg)
                    }))
                };
                let sum = args
                    .iter()
                    .map(|arg| test(arg))
                    .reduce(|left, right| Expr::BinaryOp {
                        left: Box::new(left),
                        op: sqlparser::ast::BinaryOperator::Plus,
                        right: Box::new(right),
                    })
                    .expect("checked: at least one argument");
                Expr::Cast {
                    kind: sqlparser::ast::CastKind::Cast,
                    expr: Box::new(sum),
                    data_type: sqlparser::ast::DataType::Integer(None),
                    format: None,
                }
            }
            "pg_typeof" => {
                let arg = plain_args(function).first().map(|a| (*a).clone());
                let ty = arg.as_ref().and_then(|a| self.typer.infer(a));
                let name = string(&ty.map_or_else(
                    || "unknown".to_owned(),
                    |t| {
                        crate::translate::enums::display_name(
                            self.typer.catalog,
                            t.with_modifier(types::Modifier::None),
                        )
                    },
                ));
                // The argument stays in the statement (evaluated, its value unused): an aggregate in it
                // (`pg_typeof(count(*))`) keeps the query an aggregate one, one row, as in PostgreSQL.
                match arg {
                    Some(arg) => Expr::Case {
                        case_token: sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
                        end_token: sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
                        operand: None,
                        conditions: vec![sqlparser::ast::CaseWhen {
                            condition: Expr::IsNull(Box::new(arg)),
                            result: name.clone(),
                        }],
                        else_result: Some(Box::new(name)),
                    },
                    None => name,
                }
            }
            n if crate::functions::takes_types(n) => crate::functions::typed_call(
                function,
                n,
                &plain_args(function)
                    .iter()
                    .map(|a| self.typer.infer(a))
                    .collect::<Vec<_>>(),
            ),
            "nextval" | "currval" | "setval" | "lastval" => {
                return crate::translate::sequence::rewrite_call(self.typer.catalog, &name, function)
            }
            "enum_range" | "enum_first" | "enum_last" => {
                let args: Vec<Expr> = plain_args(function).into_iter().cloned().collect();
                let types: Vec<Option<PgType>> = args.iter().map(|a| self.typer.infer(a)).collect();
                return Ok(crate::translate::enums::rewrite_call(&name, &args, &types));
            }
            _ => return Ok(None),
        }))
    }
}

/// The parameters of the built-ins applications call with named arguments (`make_interval(days => 10)`):
/// each name and, for an optional one, the default it takes.
fn parameters(function: &str) -> Option<&'static [(&'static str, Option<&'static str>)]> {
    Some(match function {
        "make_interval" => &[
            ("years", Some("0")),
            ("months", Some("0")),
            ("weeks", Some("0")),
            ("days", Some("0")),
            ("hours", Some("0")),
            ("mins", Some("0")),
            ("secs", Some("0.0")),
        ],
        "make_date" => &[("year", None), ("month", None), ("day", None)],
        "make_time" => &[("hour", None), ("min", None), ("sec", None)],
        "make_timestamp" => &[
            ("year", None),
            ("month", None),
            ("mday", None),
            ("hour", None),
            ("min", None),
            ("sec", None),
        ],
        "make_timestamptz" => &[
            ("year", None),
            ("month", None),
            ("mday", None),
            ("hour", None),
            ("min", None),
            ("sec", None),
            ("timezone", None),
        ],
        "jsonb_set" => &[
            ("target", None),
            ("path", None),
            ("new_value", None),
            ("create_if_missing", Some("true")),
        ],
        "jsonb_insert" => &[
            ("target", None),
            ("path", None),
            ("new_value", None),
            ("insert_after", Some("false")),
        ],
        _ => return None,
    })
}

/// Named arguments (`name => value`) put in their positions, defaults filling the optional ones left out;
/// 42883 for a name the function does not have (as PostgreSQL finds no such function).
fn positional_args(name: &str, function: &mut Function) -> Result<(), PgError> {
    let FunctionArguments::List(list) = &mut function.args else {
        return Ok(());
    };
    if !list
        .args
        .iter()
        .any(|a| matches!(a, FunctionArg::Named { .. } | FunctionArg::ExprNamed { .. }))
    {
        return Ok(());
    }
    let no_function = || {
        PgError::new(
            crate::error::UNDEFINED_FUNCTION,
            format!("function {name} with these named arguments does not exist"),
        )
    };
    let params = parameters(name).ok_or_else(no_function)?;
    let mut slots: Vec<Option<FunctionArgExpr>> = vec![None; params.len()];
    let mut next = 0;
    for arg in list.args.drain(..) {
        let (at, value) = match arg {
            FunctionArg::Unnamed(value) => {
                next += 1;
                (next - 1, value)
            }
            FunctionArg::Named { name: given, arg, .. } => {
                let at = params
                    .iter()
                    .position(|(p, _)| p.eq_ignore_ascii_case(&given.value))
                    .ok_or_else(no_function)?;
                (at, arg)
            }
            FunctionArg::ExprNamed {
                name: Expr::Identifier(given),
                arg,
                ..
            } => {
                let at = params
                    .iter()
                    .position(|(p, _)| p.eq_ignore_ascii_case(&given.value))
                    .ok_or_else(no_function)?;
                (at, arg)
            }
            FunctionArg::ExprNamed { .. } => return Err(no_function()),
        };
        let slot = slots.get_mut(at).ok_or_else(no_function)?;
        if slot.is_some() {
            return Err(PgError::new(
                crate::error::SYNTAX_ERROR,
                format!("argument of {name} given more than once"),
            ));
        }
        *slot = Some(value);
    }
    // Trailing optional parameters left out stay out only if every one after them is out too; a missing
    // one before a given one takes its default.
    let last_given = slots.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
    for (slot, (_, default)) in slots.iter_mut().zip(params).take(last_given) {
        if slot.is_none() {
            let default = default.ok_or_else(no_function)?;
            *slot = Some(FunctionArgExpr::Expr(Expr::value(sqlparser::ast::Value::Number(
                default.to_owned(),
                false,
            ))));
        }
    }
    list.args = slots
        .into_iter()
        .take(last_given)
        .flatten()
        .map(FunctionArg::Unnamed)
        .collect();
    Ok(())
}

/// Whether an aggregate call is `f(DISTINCT …)`.
fn is_distinct(function: &Function) -> bool {
    matches!(
        &function.args,
        FunctionArguments::List(list)
            if matches!(list.duplicate_treatment, Some(sqlparser::ast::DuplicateTreatment::Distinct))
    )
}

impl Rewriter<'_> {
    /// `row_to_json(t)`, `to_json[b](t)`, `json[b]_agg(t)` of a whole row: an object of the row's columns
    /// (`{"id":1,"name":"x"}` for json, jsonb's normalized form for jsonb), built from the FROM item's
    /// columns as the typer knows them.
    fn whole_row(&mut self, name: &str, function: &Function) -> Option<Expr> {
        let jsonb = match name {
            "row_to_json" | "to_json" | "json_agg" => false,
            "to_jsonb" | "jsonb_agg" => true,
            _ => return None,
        };
        let row = whole_row_arg(function)?;
        let columns = self.typer.row_columns(&row.value)?;
        let mut types = Vec::with_capacity(columns.len() * 2);
        let mut object_args = Vec::with_capacity(columns.len() * 2);
        for (column, ty) in &columns {
            types.push(Some(PgType::TEXT));
            types.push(*ty);
            object_args.push(string(column));
            object_args.push(Expr::CompoundIdentifier(vec![
                Ident::with_quote('"', row.value.clone()),
                Ident::with_quote('"', column.clone()),
            ]));
        }
        let object = crate::functions::typed_expr(
            if jsonb { "jsonb_build_object" } else { "pg_row_json" },
            &types,
            object_args,
        );
        if !name.ends_with("_agg") {
            return Some(object);
        }
        // The aggregate over the objects, its ORDER BY and FILTER kept.
        let mut aggregate = function.clone();
        if let FunctionArguments::List(list) = &mut aggregate.args {
            list.args = vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(object))];
        }
        let flavor = if jsonb {
            PgType::new(Base::Jsonb)
        } else {
            PgType::new(Base::Json)
        };
        Some(crate::functions::typed_call(&aggregate, name, &[Some(flavor)]))
    }
}

/// The one argument of a call that names a FROM item: `f(t)`, or `f(t.*)`, which means the same.
fn whole_row_arg(function: &Function) -> Option<Ident> {
    let FunctionArguments::List(list) = &function.args else {
        return None;
    };
    match list.args.as_slice() {
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Identifier(row)))] => Some(row.clone()),
        [FunctionArg::Unnamed(FunctionArgExpr::QualifiedWildcard(name))] => match name.0.as_slice() {
            [part] => part.as_ident().cloned(),
            _ => None,
        },
        _ => None,
    }
}

/// `percentile_cont(f) WITHIN GROUP (ORDER BY x [DESC])`, `percentile_disc(…)` and `mode() WITHIN GROUP
/// (…)` as the layer's aggregates over `(f, x, descending)`.
fn ordered_set(name: &str, function: &Function) -> Result<Option<Expr>, PgError> {
    if !matches!(name, "percentile_cont" | "percentile_disc" | "mode") || function.within_group.is_empty() {
        return Ok(None);
    }
    let [order] = function.within_group.as_slice() else {
        return Err(PgError::unsupported(format!("{name} over several ORDER BY items")));
    };
    let descending = matches!(order.options.sort, Some(sqlparser::ast::OrderBySort::Desc));
    let flag = Expr::value(sqlparser::ast::Value::Number(i64::from(descending).to_string(), false));
    let mut args: Vec<Expr> = plain_args(function).into_iter().cloned().collect();
    if name != "mode" && args.len() != 1 {
        return Err(PgError::new(
            crate::error::UNDEFINED_FUNCTION,
            format!("function {name} takes one fraction"),
        ));
    }
    if matches!(args.first(), Some(Expr::Array(_))) {
        return Err(PgError::unsupported(format!("{name} of an array of fractions")));
    }
    args.push(order.expr.clone());
    args.push(flag);
    Ok(Some(call(&format!("pg_{name}"), args)))
}
