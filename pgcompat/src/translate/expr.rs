//! Expressions: PostgreSQL forms rewritten to SQLite ones (casts, typed literals, operators whose meaning
//! differs, functions by other names), and the PostgreSQL type of an expression inferred where the layer
//! can know it (for result columns, parameters and the operators that depend on types).
//!
//! The rewrite runs bottom-up (`walk`): each node is rewritten knowing its children
//! are already rewritten, and their types are inferred from the rewritten form, which [`Typer::infer`]
//! understands (a `pg_cast(x, 'int4')` is an `integer`).

use sqlparser::ast::{
    BinaryOperator, CastKind, DateTimeField, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentList,
    FunctionArguments, Ident, ObjectName, ObjectNamePart, Query, Select, SelectItem, SetExpr, TableFactor,
    TrimWhereField, UnaryOperator, Value, ValueWithSpan,
};

use crate::catalog::Catalog;
use crate::error::{PgError, UNDEFINED_OBJECT};
use crate::types::{self, Base, PgType, Written};

/// The tables a `SELECT` reads, by the name or alias its columns are qualified with.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scope {
    /// `(alias or name, table name)`, in FROM order.
    tables: Vec<(String, String)>,
}

impl Scope {
    /// The scope of one SELECT's FROM clause (joined tables included; subqueries in FROM are not typed).
    pub(crate) fn of_select(select: &Select) -> Scope {
        let mut tables = Vec::new();
        let mut add = |factor: &TableFactor| {
            if let TableFactor::Table { name, alias, .. } = factor {
                let table = last_part(name);
                let key = alias.as_ref().map_or_else(|| table.clone(), |a| a.name.value.clone());
                tables.push((key.to_ascii_lowercase(), table));
            }
        };
        for from in &select.from {
            add(&from.relation);
            for join in &from.joins {
                add(&join.relation);
            }
        }
        Scope { tables }
    }

    /// A scope of one table (UPDATE, DELETE).
    pub(crate) fn of_table(table: &str) -> Scope {
        Scope {
            tables: vec![(table.to_ascii_lowercase(), table.to_owned())],
        }
    }
}

/// The last identifier of a possibly qualified name (`public.items` → `items`).
pub(crate) fn last_part(name: &ObjectName) -> String {
    match name.0.last() {
        Some(ObjectNamePart::Identifier(ident)) => ident.value.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// Types expressions from the catalog and the scopes of the SELECTs around them.
pub(crate) struct Typer<'a> {
    pub(crate) catalog: &'a Catalog,
    pub(crate) scopes: Vec<Scope>,
}

impl Typer<'_> {
    fn column(&self, qualifier: Option<&str>, column: &str) -> Option<PgType> {
        for scope in self.scopes.iter().rev() {
            for (key, table) in &scope.tables {
                if qualifier.is_some_and(|q| !q.eq_ignore_ascii_case(key)) {
                    continue;
                }
                if let Some(ty) = self
                    .catalog
                    .column_type(table, column)
                    .or_else(|| crate::pg_catalog::column_type(table, column))
                {
                    return Some(ty);
                }
            }
        }
        None
    }

    /// The PostgreSQL type of a (rewritten) expression, when the layer can know it.
    pub(crate) fn infer(&self, expr: &Expr) -> Option<PgType> {
        match expr {
            Expr::Identifier(ident) => self.column(None, &ident.value),
            Expr::CompoundIdentifier(parts) => match parts.as_slice() {
                [.., q, c] => self.column(Some(&q.value), &c.value),
                _ => None,
            },
            Expr::Value(ValueWithSpan { value, .. }) => match value {
                Value::Number(text, _) => Some(number_type(text)),
                Value::Boolean(_) => Some(PgType::BOOL),
                Value::SingleQuotedString(_) | Value::EscapedStringLiteral(_) | Value::DollarQuotedString(_) => {
                    Some(PgType::TEXT)
                }
                _ => None,
            },
            Expr::Nested(inner) => self.infer(inner),
            Expr::UnaryOp { op, expr } => match op {
                UnaryOperator::Not => Some(PgType::BOOL),
                _ => self.infer(expr),
            },
            Expr::BinaryOp { left, op, right } => self.infer_binary(left, op, right),
            Expr::IsNull(_)
            | Expr::IsNotNull(_)
            | Expr::IsTrue(_)
            | Expr::IsFalse(_)
            | Expr::IsNotTrue(_)
            | Expr::IsNotFalse(_)
            | Expr::IsUnknown(_)
            | Expr::IsNotUnknown(_)
            | Expr::IsDistinctFrom(..)
            | Expr::IsNotDistinctFrom(..)
            | Expr::In { .. }
            | Expr::Between { .. }
            | Expr::Like { .. }
            | Expr::ILike { .. }
            | Expr::Exists { .. }
            | Expr::AnyOp { .. }
            | Expr::AllOp { .. } => Some(PgType::BOOL),
            Expr::Case {
                conditions,
                else_result,
                ..
            } => conditions
                .iter()
                .find_map(|c| self.infer(&c.result))
                .or_else(|| else_result.as_deref().and_then(|e| self.infer(e))),
            Expr::Function(function) => self.infer_function(function),
            Expr::Subquery(query) => self.infer_query_column(query),
            _ => None,
        }
    }

    fn infer_query_column(&self, query: &Query) -> Option<PgType> {
        let SetExpr::Select(select) = query.body.as_ref() else {
            return None;
        };
        let item = select.projection.first()?;
        let inner = Typer {
            catalog: self.catalog,
            scopes: {
                let mut scopes = self.scopes.clone();
                scopes.push(Scope::of_select(select));
                scopes
            },
        };
        match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => inner.infer(e),
            _ => None,
        }
    }

    fn infer_binary(&self, left: &Expr, op: &BinaryOperator, right: &Expr) -> Option<PgType> {
        use BinaryOperator as B;
        match op {
            B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq | B::And | B::Or | B::Xor => Some(PgType::BOOL),
            B::PGRegexMatch | B::PGRegexIMatch | B::PGRegexNotMatch | B::PGRegexNotIMatch => Some(PgType::BOOL),
            B::AtArrow | B::ArrowAt | B::Question | B::QuestionAnd | B::QuestionPipe => Some(PgType::BOOL),
            B::StringConcat if self.infer(left).is_some_and(|t| t.base() == Base::Jsonb) => {
                Some(PgType::new(Base::Jsonb))
            }
            B::StringConcat => Some(PgType::TEXT),
            B::LongArrow | B::HashLongArrow => Some(PgType::TEXT),
            B::Arrow | B::HashArrow => self
                .infer(left)
                .filter(|t| t.base() == Base::Json)
                .or(Some(PgType::new(Base::Jsonb))),
            B::Plus | B::Minus | B::Multiply | B::Divide | B::Modulo => {
                arithmetic_type(self.infer(left), op, self.infer(right))
            }
            _ => None,
        }
    }

    fn infer_function(&self, function: &Function) -> Option<PgType> {
        let name = last_part(&function.name).to_ascii_lowercase();
        let args = plain_args(function);
        let first = args.first().and_then(|a| self.infer(a));
        let literal_type = |i: usize| -> Option<PgType> {
            match args.get(i) {
                Some(Expr::Value(ValueWithSpan {
                    value: Value::SingleQuotedString(text),
                    ..
                })) => PgType::from_catalog(text),
                _ => None,
            }
        };
        Some(match name.as_str() {
            "pg_cast" | "pg_coerce" => return literal_type(1),
            "pg_int" => return first,
            "pg_div" | "pg_mod" => return first,
            "pg_now" => PgType::TIMESTAMPTZ,
            "pg_clock_timestamp" => PgType::TIMESTAMPTZ,
            "pg_current_date" => PgType::new(Base::Date),
            "pg_localtimestamp" => PgType::new(Base::Timestamp),
            "pg_datetime_arith" => return literal_type(3),
            "pg_extract" => PgType::NUMERIC,
            "pg_date_part" => PgType::FLOAT8,
            "pg_date_trunc" => {
                return args.get(1).and_then(|a| self.infer(a)).map(|t| match t.base() {
                    Base::Date => PgType::TIMESTAMPTZ,
                    _ => t,
                })
            }
            "pg_age" => PgType::new(Base::Interval),
            "pg_array" => return literal_type(0).map(PgType::array),
            "pg_array_agg" => return args.get(1).and_then(|a| self.infer(a)).map(|t| t.element().array()),
            "pg_array_get" => return literal_type(2),
            "pg_array_contains_all" | "pg_array_overlap" | "pg_jsonb_has_keys" => PgType::BOOL,
            "pg_jsonb_path" => {
                return match args.get(2) {
                    Some(Expr::Value(ValueWithSpan {
                        value: Value::SingleQuotedString(kind),
                        ..
                    })) if kind == "text" => Some(PgType::TEXT),
                    _ => Some(PgType::new(Base::Jsonb)),
                }
            }
            "pg_jsonb_delete_path" | "pg_jsonb_concat" | "pg_jsonb_delete" => PgType::new(Base::Jsonb),
            "pg_json_get" => {
                return match args.get(2) {
                    Some(Expr::Value(ValueWithSpan {
                        value: Value::SingleQuotedString(kind),
                        ..
                    })) if kind == "text" => Some(PgType::TEXT),
                    _ => Some(
                        self.infer(args[0])
                            .filter(|t| t.base() == Base::Json)
                            .unwrap_or(PgType::new(Base::Jsonb)),
                    ),
                }
            }
            "count" => PgType::INT8,
            "sum" => match first {
                Some(t) if matches!(t.base(), Base::Int2 | Base::Int4) => PgType::INT8,
                Some(t) if t.base() == Base::Int8 => PgType::NUMERIC,
                Some(t) => t,
                None => return None,
            },
            "pg_numeric_sum" | "pg_numeric_add" | "pg_numeric_sub" | "pg_numeric_mul" | "pg_numeric_div" => {
                PgType::NUMERIC
            }
            "avg" => match first {
                Some(t) if matches!(t.base(), Base::Float4 | Base::Float8) => PgType::FLOAT8,
                _ => PgType::NUMERIC,
            },
            "pg_numeric_avg" => PgType::NUMERIC,
            "min" | "max" | "abs" | "coalesce" | "nullif" | "greatest" | "least" => {
                return args.iter().find_map(|a| self.infer(a));
            }
            "length" | "char_length" | "character_length" | "octet_length" | "strpos" | "instr" | "ascii"
            | "pg_backend_pid" | "array_length" | "cardinality" => PgType::INT4,
            "lower"
            | "upper"
            | "concat"
            | "concat_ws"
            | "substr"
            | "substring"
            | "replace"
            | "trim"
            | "ltrim"
            | "rtrim"
            | "left"
            | "right"
            | "lpad"
            | "rpad"
            | "repeat"
            | "reverse"
            | "initcap"
            | "md5"
            | "to_char"
            | "format"
            | "string_agg"
            | "pg_version"
            | "pg_current_database"
            | "pg_current_schema"
            | "pg_current_user"
            | "split_part"
            | "chr"
            | "translate"
            | "quote_ident"
            | "quote_literal"
            | "regexp_replace"
            | "btrim"
            | "pg_typeof"
            | "format_type"
            | "current_setting"
            | "set_config"
            | "pg_get_expr"
            | "pg_get_indexdef"
            | "pg_get_constraintdef"
            | "pg_get_userbyid"
            | "pg_encoding_to_char"
            | "obj_description"
            | "col_description"
            | "shobj_description"
            | "pg_get_viewdef"
            | "pg_get_function_result"
            | "pg_get_function_arguments"
            | "pg_get_function_identity_arguments"
            | "pg_size_pretty"
            | "to_hex" => PgType::TEXT,
            "pg_relation_size"
            | "pg_total_relation_size"
            | "pg_table_size"
            | "pg_indexes_size"
            | "pg_database_size" => PgType::INT8,
            "gen_random_uuid" | "uuid_generate_v4" => PgType::new(Base::Uuid),
            "random" => PgType::FLOAT8,
            "round" | "trunc" | "ceil" | "ceiling" | "floor" => match first {
                Some(t) if matches!(t.base(), Base::Float4 | Base::Float8) => PgType::FLOAT8,
                Some(t) if t.is_integer() && matches!(name.as_str(), "ceil" | "ceiling" | "floor") => PgType::NUMERIC,
                _ => PgType::NUMERIC,
            },
            "pg_regex"
            | "pg_ilike"
            | "pg_array_contains"
            | "pg_table_is_visible"
            | "pg_type_is_visible"
            | "pg_function_is_visible"
            | "pg_is_in_recovery"
            | "pg_relation_is_publishable"
            | "has_column_privilege"
            | "has_sequence_privilege"
            | "has_function_privilege"
            | "has_table_privilege"
            | "has_schema_privilege"
            | "has_database_privilege"
            | "pg_has_role"
            | "starts_with" => PgType::BOOL,
            "row_number" | "rank" | "dense_rank" | "ntile" => PgType::INT8,
            "percent_rank" | "cume_dist" => PgType::FLOAT8,
            "lag" | "lead" | "first_value" | "last_value" | "nth_value" => return first,
            "to_timestamp" => PgType::TIMESTAMPTZ,
            "to_date" => PgType::new(Base::Date),
            "make_interval" | "justify_days" | "justify_hours" | "justify_interval" => PgType::new(Base::Interval),
            "jsonb_build_object" | "jsonb_build_array" | "to_jsonb" | "jsonb_agg" | "jsonb_object_agg"
            | "jsonb_set" | "jsonb_strip_nulls" => PgType::new(Base::Jsonb),
            "json_build_object" | "json_build_array" | "to_json" | "json_agg" | "json_object_agg" => {
                PgType::new(Base::Json)
            }
            "jsonb_typeof" | "json_typeof" | "jsonb_pretty" => PgType::TEXT,
            "jsonb_array_length" | "json_array_length" => PgType::INT4,
            _ => {
                let types: Vec<Option<PgType>> = args.iter().map(|a| self.infer(a)).collect();
                return crate::functions::result_type(&name, &types);
            }
        })
    }
}

/// The type of a numeric literal: `integer` if it fits, else `bigint`, else `numeric` (PostgreSQL's rule).
pub(crate) fn number_type(text: &str) -> PgType {
    if text.contains(['.', 'e', 'E']) {
        return PgType::NUMERIC;
    }
    match text.parse::<i64>() {
        Ok(v) if i32::try_from(v).is_ok() => PgType::INT4,
        Ok(_) => PgType::INT8,
        Err(_) => PgType::NUMERIC,
    }
}

/// The result type of arithmetic on two types, by PostgreSQL's promotion (smallint < integer < bigint <
/// numeric < double precision), and date/time arithmetic.
pub(crate) fn arithmetic_type(left: Option<PgType>, op: &BinaryOperator, right: Option<PgType>) -> Option<PgType> {
    let (l, r) = (left?, right?);
    if let Some(ty) = datetime_result(l, op, r) {
        return Some(ty);
    }
    if !(l.is_numeric() && r.is_numeric()) {
        return None;
    }
    let rank = |t: PgType| match t.base() {
        Base::Int2 => 0,
        Base::Int4 | Base::Oid => 1,
        Base::Int8 => 2,
        Base::Numeric => 3,
        Base::Float4 => 4,
        _ => 5,
    };
    let top = if rank(l) >= rank(r) { l } else { r };
    Some(match top.base() {
        // smallint arithmetic is integer in PostgreSQL only when mixed; int2 + int2 stays int2.
        Base::Numeric => PgType::NUMERIC,
        Base::Float4 if rank(l) == rank(r) => PgType::new(Base::Float4),
        Base::Float4 | Base::Float8 => PgType::FLOAT8,
        _ => top.with_modifier(types::Modifier::None),
    })
}

/// Date/time arithmetic results: `date + integer` is a date, `date - date` an integer, `timestamp ±
/// interval` a timestamp, `timestamp - timestamp` an interval, `date + interval` a timestamp.
pub(crate) fn datetime_result(l: PgType, op: &BinaryOperator, r: PgType) -> Option<PgType> {
    use Base::*;
    let plus = matches!(op, BinaryOperator::Plus);
    let minus = matches!(op, BinaryOperator::Minus);
    if !(plus || minus) || l.is_array() || r.is_array() {
        return None;
    }
    Some(match (l.base(), r.base()) {
        (Date, Int2 | Int4 | Int8) => PgType::new(Date),
        (Int2 | Int4 | Int8, Date) if plus => PgType::new(Date),
        (Date, Date) if minus => PgType::INT4,
        (Date, Interval) => PgType::new(Timestamp),
        (Interval, Date) if plus => PgType::new(Timestamp),
        (Timestamp, Interval) => PgType::new(Timestamp),
        (Interval, Timestamp) if plus => PgType::new(Timestamp),
        (Timestamptz, Interval) => PgType::TIMESTAMPTZ,
        (Interval, Timestamptz) if plus => PgType::TIMESTAMPTZ,
        (Timestamp | Date, Timestamp | Date) | (Timestamptz, Timestamptz)
            if minus && !(l.base() == Date && r.base() == Date) =>
        {
            PgType::new(Interval)
        }
        (Time, Time) if minus => PgType::new(Interval),
        (Interval, Interval) => PgType::new(Interval),
        (Time, Interval) => PgType::new(Time),
        (Date, Time) if plus => PgType::new(Timestamp),
        _ => return None,
    })
}

/// The plain expression arguments of a call (`f(a, b)`), none for `*` or named arguments.
pub(crate) fn plain_args(function: &Function) -> Vec<&Expr> {
    match &function.args {
        FunctionArguments::List(list) => list
            .args
            .iter()
            .filter_map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A call of a function by name.
pub(crate) fn call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(Function {
        name: ObjectName::from(vec![Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|e| FunctionArg::Unnamed(FunctionArgExpr::Expr(e)))
                .collect(),
            clauses: Vec::new(),
        }),
        within_group: Vec::new(),
        filter: None,
        null_treatment: None,
        over: None,
    })
}

/// A string literal expression.
pub(crate) fn string(text: &str) -> Expr {
    Expr::Value(Value::SingleQuotedString(text.to_owned()).into())
}

/// The type a written data type names, or the error PostgreSQL gives for it.
pub(crate) fn written_type(data_type: &sqlparser::ast::DataType) -> Result<PgType, PgError> {
    match types::from_data_type(data_type) {
        Written::Type(ty) => Ok(ty),
        Written::Serial(_) => Err(PgError::new(
            UNDEFINED_OBJECT,
            format!("type \"{data_type}\" does not exist"),
        )),
        Written::Custom(name) => Err(PgError::new(
            UNDEFINED_OBJECT,
            format!("type \"{name}\" does not exist"),
        )),
        Written::Unsupported(name) => Err(PgError::unsupported(format!("the type {name}"))),
    }
}

/// Rewrites every expression of a statement (and the queries inside it), keeping the scopes of SELECTs for
/// typing; stops at the first error.
pub(crate) struct Rewriter<'a> {
    pub(crate) typer: Typer<'a>,
    /// Parameter types learned (index `n - 1` for `$n`).
    pub(crate) params: Vec<Option<PgType>>,
    /// Whether the statement reads the transaction timestamp (`now()`).
    pub(crate) uses_now: bool,
    /// Whether the statement reads the catalog views (`pg_class`, `information_schema.tables`, `::regclass`).
    pub(crate) uses_catalog: bool,
}

impl<'a> Rewriter<'a> {
    pub(crate) fn new(catalog: &'a Catalog) -> Rewriter<'a> {
        Rewriter {
            typer: Typer {
                catalog,
                scopes: Vec::new(),
            },
            params: Vec::new(),
            uses_now: false,
            uses_catalog: false,
        }
    }

    /// Rewrites every expression of a query.
    pub(crate) fn rewrite_query(&mut self, query: &mut Query) -> Result<(), PgError> {
        super::walk::query(self, query)
    }

    /// Rewrites an expression.
    pub(crate) fn rewrite_expr(&mut self, expr: &mut Expr) -> Result<(), PgError> {
        super::walk::expr(self, expr)
    }

    /// Rewrites select items (RETURNING).
    pub(crate) fn rewrite_items(&mut self, items: &mut [SelectItem]) -> Result<(), PgError> {
        super::walk::items(self, items)
    }

    /// Notes the type of a `$n` parameter compared with or assigned to a value of `ty`.
    pub(crate) fn learn_param(&mut self, expr: &Expr, ty: Option<PgType>) {
        let (
            Some(ty),
            Expr::Value(ValueWithSpan {
                value: Value::Placeholder(name),
                ..
            }),
        ) = (ty, expr)
        else {
            return;
        };
        let Some(n) = name.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) else {
            return;
        };
        if n == 0 || n > crate::PARAMS_MAX {
            return;
        }
        if self.params.len() < n {
            self.params.resize(n, None);
        }
        if self.params[n - 1].is_none() {
            self.params[n - 1] = Some(ty);
        }
    }

    fn rewrite_node(&mut self, expr: &mut Expr) -> Result<(), PgError> {
        let replacement = match expr {
            Expr::Cast {
                kind,
                expr: inner,
                data_type,
                ..
            } => {
                let _ = kind == &CastKind::DoubleColon;
                let written = data_type.to_string().to_ascii_lowercase();
                let written = written.strip_prefix("pg_catalog.").unwrap_or(&written);
                if let Some(replacement) = super::catalog_refs::rewrite_cast(inner, written) {
                    self.uses_catalog = true;
                    *expr = replacement;
                    return Ok(());
                }
                let target = written_type(data_type)?;
                let source = self.typer.infer(inner);
                self.learn_param(inner, Some(target));
                Some(cast_call(
                    std::mem::replace(inner.as_mut(), Expr::value(Value::Null)),
                    target,
                    source,
                ))
            }
            Expr::TypedString(typed) => {
                let target = written_type(&typed.data_type)?;
                let text = typed.value.value.clone().into_string().unwrap_or_default();
                Some(cast_call(string(&text), target, Some(PgType::TEXT)))
            }
            Expr::Interval(interval) => {
                let text = match interval.value.as_ref() {
                    Expr::Value(v) => v.value.clone().into_string().unwrap_or_else(|| v.value.to_string()),
                    other => return Err(PgError::unsupported(format!("the interval expression {other}"))),
                };
                let text = match &interval.leading_field {
                    Some(field) if interval.last_field.is_none() => format!("{text} {}", field_unit(field)),
                    _ => text,
                };
                Some(cast_call(
                    string(&text),
                    PgType::new(Base::Interval),
                    Some(PgType::TEXT),
                ))
            }
            Expr::Value(ValueWithSpan { value, .. }) => match value {
                // A decimal literal is numeric, exact: SQLite would read it as a float.
                Value::Number(text, _) if number_type(text) == PgType::NUMERIC => {
                    Some(cast_call(string(text), PgType::NUMERIC, None))
                }
                Value::EscapedStringLiteral(text)
                | Value::DollarQuotedString(sqlparser::ast::DollarQuotedString { value: text, .. }) => {
                    Some(string(text))
                }
                _ => None,
            },
            Expr::BinaryOp { left, op, right } => {
                if let Some(plain) = super::catalog_refs::plain_operator(op) {
                    *op = plain;
                }
                self.rewrite_binary(left, op, right)?
            }
            Expr::UnaryOp {
                op: UnaryOperator::Minus,
                expr: inner,
            } if self.typer.infer(inner).is_some_and(PgType::is_integer) => {
                let bits = match self.typer.infer(inner).map(PgType::base) {
                    Some(Base::Int2) => "16",
                    Some(Base::Int4) => "32",
                    _ => "64",
                };
                let negated = Expr::UnaryOp {
                    op: UnaryOperator::Minus,
                    expr: Box::new(take(inner)),
                };
                Some(call("pg_int", vec![negated, Expr::value(number(bits))]))
            }
            Expr::ILike {
                negated,
                expr: inner,
                pattern,
                escape_char,
                any: false,
            } => {
                let mut args = vec![take(inner), take(pattern)];
                if let Some(escape) = escape_char {
                    args.push(escape.as_ref().clone());
                }
                Some(negate_if(*negated, call("pg_ilike", args)))
            }
            Expr::SimilarTo { .. } => return Err(PgError::unsupported("SIMILAR TO")),
            Expr::Extract { field, expr: inner, .. } => {
                let source = self.typer.infer(inner).unwrap_or(PgType::TIMESTAMPTZ);
                Some(call(
                    "pg_extract",
                    vec![
                        string(&field.to_string().to_ascii_lowercase()),
                        take(inner),
                        string(&source.catalog_text()),
                    ],
                ))
            }
            Expr::Position { expr: needle, r#in } => Some(call("instr", vec![take(r#in), take(needle)])),
            Expr::Substring {
                expr: inner,
                substring_from,
                substring_for,
                ..
            } => {
                let mut args = vec![
                    take(inner),
                    substring_from.as_deref().cloned().unwrap_or(Expr::value(number("1"))),
                ];
                if let Some(count) = substring_for {
                    args.push(take(count));
                }
                Some(call("substr", args))
            }
            Expr::Trim {
                expr: inner,
                trim_where,
                trim_what,
                trim_characters,
            } => {
                let name = match trim_where {
                    Some(TrimWhereField::Leading) => "ltrim",
                    Some(TrimWhereField::Trailing) => "rtrim",
                    _ => "trim",
                };
                let mut args = vec![take(inner)];
                if let Some(what) = trim_what {
                    args.push(take(what));
                } else if let Some(chars) = trim_characters.as_mut().and_then(|c| c.first_mut()) {
                    args.push(take(chars));
                }
                Some(call(name, args))
            }
            Expr::Ceil { expr: inner, .. } => Some(crate::functions::typed_expr(
                "ceil",
                &[self.typer.infer(inner)],
                vec![take(inner)],
            )),
            Expr::Floor { expr: inner, .. } => Some(crate::functions::typed_expr(
                "floor",
                &[self.typer.infer(inner)],
                vec![take(inner)],
            )),
            Expr::AtTimeZone { timestamp, time_zone } => {
                let source = self.typer.infer(timestamp).unwrap_or(PgType::TIMESTAMPTZ);
                Some(call(
                    "pg_at_time_zone",
                    vec![take(timestamp), take(time_zone), string(&source.catalog_text())],
                ))
            }
            Expr::Array(array) => {
                let element = array
                    .elem
                    .iter()
                    .find_map(|e| self.typer.infer(e))
                    .unwrap_or(PgType::TEXT)
                    .element();
                let mut args = vec![string(&element.catalog_text())];
                args.append(&mut array.elem);
                Some(call("pg_array", args))
            }
            Expr::AnyOp {
                left,
                compare_op: BinaryOperator::Eq,
                right,
                ..
            } => {
                let element = self.typer.infer(left).unwrap_or(PgType::TEXT);
                self.learn_param(right, Some(element.array()));
                Some(call(
                    "pg_array_contains",
                    vec![take(right), take(left), string(&element.catalog_text())],
                ))
            }
            Expr::AllOp {
                left,
                compare_op: BinaryOperator::NotEq,
                right,
                ..
            } => {
                let element = self.typer.infer(left).unwrap_or(PgType::TEXT);
                self.learn_param(right, Some(element.array()));
                Some(negate_if(
                    true,
                    call(
                        "pg_array_contains",
                        vec![take(right), take(left), string(&element.catalog_text())],
                    ),
                ))
            }
            Expr::AnyOp { compare_op, .. } => return Err(PgError::unsupported(format!("ANY with {compare_op}"))),
            Expr::AllOp { compare_op, .. } => return Err(PgError::unsupported(format!("ALL with {compare_op}"))),
            Expr::Function(function) => self.rewrite_function(function)?,
            Expr::In {
                expr: inner,
                target: sqlparser::ast::InTarget::List(list),
                ..
            } => {
                let ty = self.typer.infer(inner);
                for item in list.iter() {
                    self.learn_param(item, ty);
                }
                coerce_literals(ty, list.iter_mut());
                None
            }
            Expr::Between {
                expr: inner, low, high, ..
            } => {
                let ty = self.typer.infer(inner);
                self.learn_param(low, ty);
                self.learn_param(high, ty);
                coerce_literals(ty, [low.as_mut(), high.as_mut()].into_iter());
                None
            }
            Expr::Collate { expr: inner, collation } if super::catalog_refs::is_default_collation(collation) => {
                Some(take(inner))
            }
            Expr::Collate { .. } => return Err(PgError::unsupported("COLLATE in expressions")),
            Expr::CompoundIdentifier(parts) => {
                super::catalog_refs::rewrite_compound(parts);
                None
            }
            Expr::CompoundFieldAccess { root, access_chain } => {
                // `c.conkey[1]` parses as `c` with `.conkey` and `[1]`: the column is `c.conkey`.
                while let (Some(sqlparser::ast::AccessExpr::Dot(Expr::Identifier(field))), [_, _, ..]) =
                    (access_chain.first(), access_chain.as_slice())
                {
                    let field = field.clone();
                    let parts = match root.as_ref() {
                        Expr::Identifier(ident) => vec![ident.clone(), field],
                        Expr::CompoundIdentifier(parts) => {
                            let mut parts = parts.clone();
                            parts.push(field);
                            parts
                        }
                        _ => break,
                    };
                    **root = Expr::CompoundIdentifier(parts);
                    access_chain.remove(0);
                }
                let ty = self.typer.infer(root);
                match access_chain.as_slice() {
                    [sqlparser::ast::AccessExpr::Subscript(sqlparser::ast::Subscript::Index { index })] => {
                        let element = ty.unwrap_or(PgType::TEXT.array()).element();
                        Some(call(
                            "pg_array_get",
                            vec![take(root), index.clone(), string(&element.catalog_text())],
                        ))
                    }
                    _ => return Err(PgError::unsupported("array slices and field access")),
                }
            }
            Expr::Like { any: true, .. } | Expr::ILike { any: true, .. } => {
                return Err(PgError::unsupported("LIKE ANY / ILIKE ANY"))
            }
            _ => None,
        };
        if let Some(new) = replacement {
            *expr = new;
        }
        Ok(())
    }

    fn rewrite_binary(
        &mut self,
        left: &mut Box<Expr>,
        op: &BinaryOperator,
        right: &mut Box<Expr>,
    ) -> Result<Option<Expr>, PgError> {
        use BinaryOperator as B;
        let lt = self.typer.infer(left);
        let rt = self.typer.infer(right);
        Ok(match op {
            B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq
                if lt.is_some_and(|t| t.base() == Base::Interval) && rt.is_some_and(|t| t.base() == Base::Interval) =>
            {
                // Intervals compare by their length (a month is 30 days), not by their text.
                let compare = call("pg_interval_cmp", vec![take(left), take(right)]);
                Some(Expr::BinaryOp {
                    left: Box::new(compare),
                    op: op.clone(),
                    right: Box::new(Expr::value(number("0"))),
                })
            }
            B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq => {
                self.learn_param(right, lt);
                self.learn_param(left, rt);
                // An untyped string compared with a typed value is read as that type, as PostgreSQL does.
                if is_string_literal(right) {
                    coerce_literals(lt, std::iter::once(right.as_mut()));
                }
                if is_string_literal(left) {
                    coerce_literals(rt, std::iter::once(left.as_mut()));
                }
                None
            }
            B::StringConcat if lt.is_some_and(|t| t.base() == Base::Jsonb) => {
                Some(call("pg_jsonb_concat", vec![take(left), take(right)]))
            }
            B::StringConcat
                if lt.is_some_and(|t| t.base() == Base::Bool) || rt.is_some_and(|t| t.base() == Base::Bool) =>
            {
                // A boolean concatenated prints as `true`/`false` (its text cast), not SQLite's 1/0.
                let as_text = |e: Expr, t: Option<PgType>| match t {
                    Some(t) if t.base() == Base::Bool => cast_call(e, PgType::TEXT, Some(t)),
                    _ => e,
                };
                Some(Expr::BinaryOp {
                    left: Box::new(as_text(take(left), lt)),
                    op: B::StringConcat,
                    right: Box::new(as_text(take(right), rt)),
                })
            }
            B::LongArrow => Some(call("pg_json_get", vec![take(left), take(right), string("text")])),
            B::Minus if lt.is_some_and(|t| t.base() == Base::Jsonb) => {
                Some(call("pg_jsonb_delete", vec![take(left), take(right)]))
            }
            B::Plus | B::Minus | B::Multiply => {
                self.learn_param(right, lt);
                self.learn_param(left, rt);
                let (lt, rt) = (lt.or(rt), rt.or(lt));
                match (lt, rt) {
                    (Some(l), Some(r)) if datetime_result(l, op, r).is_some() => {
                        let result = datetime_result(l, op, r).expect("checked above");
                        let sign = if matches!(op, B::Plus) { "+" } else { "-" };
                        Some(call(
                            "pg_datetime_arith",
                            vec![
                                take(left),
                                string(sign),
                                take(right),
                                string(&result.catalog_text()),
                                string(&l.catalog_text()),
                                string(&r.catalog_text()),
                            ],
                        ))
                    }
                    (Some(l), Some(r)) if l.is_integer() && r.is_integer() => {
                        let result = arithmetic_type(Some(l), op, Some(r)).expect("integers");
                        let bits = match result.base() {
                            Base::Int2 => 16,
                            Base::Int4 => 32,
                            _ => 64,
                        };
                        let inner = Expr::BinaryOp {
                            left: Box::new(take(left)),
                            op: op.clone(),
                            right: Box::new(take(right)),
                        };
                        Some(call(
                            "pg_int",
                            vec![Expr::Nested(Box::new(inner)), Expr::value(number(&bits.to_string()))],
                        ))
                    }
                    (Some(l), Some(r))
                        if (l.base() == Base::Numeric || r.base() == Base::Numeric)
                            && arithmetic_type(Some(l), op, Some(r)) == Some(PgType::NUMERIC) =>
                    {
                        let name = match op {
                            B::Plus => "pg_numeric_add",
                            B::Minus => "pg_numeric_sub",
                            _ => "pg_numeric_mul",
                        };
                        Some(call(name, vec![take(left), take(right)]))
                    }
                    _ => None,
                }
            }
            B::Divide if arithmetic_type(lt, op, rt) == Some(PgType::NUMERIC) => {
                Some(call("pg_numeric_div", vec![take(left), take(right)]))
            }
            B::Divide | B::Modulo => {
                let name = if matches!(op, B::Divide) { "pg_div" } else { "pg_mod" };
                let both_int = lt.is_some_and(PgType::is_integer) && rt.is_some_and(PgType::is_integer);
                let mode = if both_int { "int" } else { "any" };
                Some(call(name, vec![take(left), take(right), string(mode)]))
            }
            B::PGRegexMatch | B::PGRegexIMatch | B::PGRegexNotMatch | B::PGRegexNotIMatch => {
                let flags = if matches!(op, B::PGRegexIMatch | B::PGRegexNotIMatch) {
                    "i"
                } else {
                    ""
                };
                let negated = matches!(op, B::PGRegexNotMatch | B::PGRegexNotIMatch);
                Some(negate_if(
                    negated,
                    call("pg_regex", vec![take(left), take(right), string(flags)]),
                ))
            }
            B::Arrow => Some(call("pg_json_get", vec![take(left), take(right), string("json")])),
            B::AtArrow | B::ArrowAt | B::PGOverlap
                if lt.is_some_and(PgType::is_array) || rt.is_some_and(PgType::is_array) =>
            {
                let element = lt.or(rt).map_or(PgType::TEXT, PgType::element);
                let (name, a, b) = match op {
                    B::AtArrow => ("pg_array_contains_all", take(left), take(right)),
                    B::ArrowAt => ("pg_array_contains_all", take(right), take(left)),
                    _ => ("pg_array_overlap", take(left), take(right)),
                };
                Some(call(name, vec![a, b, string(&element.catalog_text())]))
            }
            B::AtArrow => Some(call("pg_jsonb_contains", vec![take(left), take(right)])),
            B::ArrowAt => Some(call("pg_jsonb_contains", vec![take(right), take(left)])),
            B::Question => Some(call("pg_jsonb_has_key", vec![take(left), take(right)])),
            B::QuestionPipe => Some(call("pg_jsonb_has_keys", vec![take(left), take(right), string("any")])),
            B::QuestionAnd => Some(call("pg_jsonb_has_keys", vec![take(left), take(right), string("all")])),
            B::HashArrow => Some(call("pg_jsonb_path", vec![take(left), take(right), string("jsonb")])),
            B::HashLongArrow => Some(call("pg_jsonb_path", vec![take(left), take(right), string("text")])),
            B::HashMinus => Some(call("pg_jsonb_delete_path", vec![take(left), take(right)])),
            B::PGStartsWith => Some(call("starts_with", vec![take(left), take(right)])),
            B::PGLikeMatch | B::PGNotLikeMatch => {
                let like = Expr::Like {
                    negated: matches!(op, B::PGNotLikeMatch),
                    any: false,
                    expr: Box::new(take(left)),
                    pattern: Box::new(take(right)),
                    escape_char: None,
                };
                Some(like)
            }
            B::PGILikeMatch | B::PGNotILikeMatch => Some(negate_if(
                matches!(op, B::PGNotILikeMatch),
                call("pg_ilike", vec![take(left), take(right)]),
            )),
            B::PGExp => Some(crate::functions::typed_expr(
                "pow",
                &[lt, rt],
                vec![take(left), take(right)],
            )),
            B::PGBitwiseXor => {
                // a # b = (a | b) & ~(a & b): SQLite has no XOR operator.
                let (a, b) = (take(left), take(right));
                let or = Expr::BinaryOp {
                    left: Box::new(a.clone()),
                    op: B::BitwiseOr,
                    right: Box::new(b.clone()),
                };
                let and = Expr::BinaryOp {
                    left: Box::new(a),
                    op: B::BitwiseAnd,
                    right: Box::new(b),
                };
                Some(Expr::BinaryOp {
                    left: Box::new(Expr::Nested(Box::new(or))),
                    op: B::BitwiseAnd,
                    right: Box::new(Expr::UnaryOp {
                        op: UnaryOperator::BitwiseNot,
                        expr: Box::new(Expr::Nested(Box::new(and))),
                    }),
                })
            }
            _ => None,
        })
    }

    fn rewrite_function(&mut self, function: &mut Function) -> Result<Option<Expr>, PgError> {
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
                        catalog: self.typer.catalog,
                        scopes,
                    };
                    match select.projection.first() {
                        Some(SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }) => inner.infer(e),
                        _ => None,
                    }
                }
                _ => None,
            };
            let element = element.unwrap_or(PgType::TEXT).element().catalog_text();
            if let Some(replacement) = super::catalog_refs::array_of_subquery(query, &element) {
                return Ok(Some(replacement));
            }
        }
        if let Some(replacement) = super::catalog_refs::rewrite_call(&name, &plain_args(function)) {
            self.uses_catalog = true;
            return Ok(Some(replacement));
        }
        Ok(Some(match name.as_str() {
            "now" | "transaction_timestamp" | "current_timestamp" | "statement_timestamp" if no_args => {
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
            "current_time" | "localtime" if no_args => {
                self.uses_now = true;
                call("pg_current_time", Vec::new())
            }
            "version" => call("pg_version", Vec::new()),
            "current_database" | "current_catalog" => call("pg_current_database", Vec::new()),
            "current_schema" => call("pg_current_schema", Vec::new()),
            "current_user" | "session_user" | "user" | "current_role" if no_args => call("pg_current_user", Vec::new()),
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
            "pg_typeof" => {
                let ty = plain_args(function).first().and_then(|a| self.typer.infer(a));
                string(&ty.map_or_else(
                    || "unknown".to_owned(),
                    |t| t.with_modifier(types::Modifier::None).sql_name(),
                ))
            }
            n if crate::functions::takes_types(n) => crate::functions::typed_call(
                function,
                n,
                &plain_args(function)
                    .iter()
                    .map(|a| self.typer.infer(a))
                    .collect::<Vec<_>>(),
            ),
            "nextval" | "currval" | "setval" | "lastval" => return super::sequence::rewrite_call(&name, function),
            _ => return Ok(None),
        }))
    }
}

impl super::walk::Hooks for Rewriter<'_> {
    fn enter_select(&mut self, select: &Select) {
        self.typer.scopes.push(Scope::of_select(select));
    }

    fn leave_select(&mut self) {
        self.typer.scopes.pop();
    }

    fn expr(&mut self, expr: &mut Expr) -> Result<(), PgError> {
        self.rewrite_node(expr)
    }

    fn table_factor(&mut self, factor: &mut TableFactor) -> Result<(), PgError> {
        if let Some(replacement) = super::catalog_refs::rewrite_table(factor) {
            self.uses_catalog = true;
            *factor = replacement;
            return Ok(());
        }
        if let TableFactor::Table { name, .. } = factor {
            strip_public(name)?;
        }
        if let Some(replacement) = super::tables::rewrite_factor(self, factor)? {
            *factor = replacement;
        }
        Ok(())
    }
}

/// A relation name with its schema: `public.t` is `t` (the one schema there is); any other schema does not
/// exist (3F000), never silently the same table as `t`.
pub(crate) fn strip_public(name: &mut ObjectName) -> Result<(), PgError> {
    if name.0.len() < 2 {
        return Ok(());
    }
    let schema = match &name.0[name.0.len() - 2] {
        ObjectNamePart::Identifier(ident) if ident.quote_style.is_some() => ident.value.clone(),
        ObjectNamePart::Identifier(ident) => ident.value.to_ascii_lowercase(),
        other => other.to_string(),
    };
    if schema != "public" {
        return Err(PgError::new(
            crate::error::INVALID_SCHEMA_NAME,
            format!("schema \"{schema}\" does not exist"),
        ));
    }
    let last = name.0.pop().expect("a name of two parts has a last part");
    *name = ObjectName(vec![last]);
    Ok(())
}

fn take(expr: &mut Expr) -> Expr {
    std::mem::replace(expr, Expr::value(Value::Null))
}

fn number(text: &str) -> Value {
    Value::Number(text.to_owned(), false)
}

fn negate_if(negated: bool, expr: Expr) -> Expr {
    if negated {
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr: Box::new(expr),
        }
    } else {
        expr
    }
}

fn is_string_literal(expr: &Expr) -> bool {
    matches!(
        expr,
        Expr::Value(ValueWithSpan {
            value: Value::SingleQuotedString(_),
            ..
        })
    )
}

/// String literals among `exprs` read as `ty` (when `ty` is not a string type).
fn coerce_literals<'e>(ty: Option<PgType>, exprs: impl Iterator<Item = &'e mut Expr>) {
    let Some(ty) = ty.filter(|t| !t.is_string()) else {
        return;
    };
    for expr in exprs {
        if is_string_literal(expr) {
            let literal = take(expr);
            *expr = cast_call(literal, ty, Some(PgType::TEXT));
        }
    }
}

/// `pg_cast(x, 'target', 'source')`.
pub(crate) fn cast_call(expr: Expr, target: PgType, source: Option<PgType>) -> Expr {
    let source = source.map_or_else(String::new, PgType::catalog_text);
    call("pg_cast", vec![expr, string(&target.catalog_text()), string(&source)])
}

/// `pg_coerce(x, 'type')`: a value assigned to a column of that type.
pub(crate) fn coerce_call(expr: Expr, ty: PgType) -> Expr {
    call(
        "pg_coerce",
        vec![expr, Expr::value(Value::SingleQuotedString(ty.catalog_text()))],
    )
}

fn field_unit(field: &DateTimeField) -> String {
    field.to_string().to_ascii_lowercase()
}
