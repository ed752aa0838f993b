//! The PostgreSQL type of an expression, inferred where the layer can know it: columns by the scopes of
//! the SELECTs around them, literals, casts, operators and function calls.

use sqlparser::ast::{
    BinaryOperator, Expr, Function, ObjectName, ObjectNamePart, Query, Select, SelectItem, SetExpr, TableFactor,
    UnaryOperator, Value, ValueWithSpan,
};

use super::*;
use crate::catalog::Catalog;
use crate::types::{self, Base, PgType};

/// The tables a `SELECT` reads, by the name or alias its columns are qualified with.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scope {
    /// `(alias or name, table name)`, in FROM order.
    tables: Vec<(String, String)>,
    /// The set-returning functions of its FROM, rewritten (`srf`).
    pub(crate) functions: Vec<crate::translate::srf::FunctionTable>,
}

impl Scope {
    /// The scope of one SELECT's FROM clause (joined tables included; subqueries in FROM are not typed).
    pub(crate) fn of_select(select: &Select) -> Scope {
        let mut tables = Vec::new();
        let mut add = |factor: &TableFactor| match factor {
            TableFactor::Table { name, alias, .. } => {
                let table = last_part(name);
                let key = alias.as_ref().map_or_else(|| table.clone(), |a| a.name.value.clone());
                tables.push((key.to_ascii_lowercase(), table));
            }
            // A derived table is known by its alias; its columns' types are the rewriter's (`ctes`).
            TableFactor::Derived { alias: Some(a), .. } => {
                tables.push((a.name.value.to_ascii_lowercase(), a.name.value.clone()));
            }
            _ => {}
        };
        for from in &select.from {
            add(&from.relation);
            for join in &from.joins {
                add(&join.relation);
            }
        }
        Scope {
            tables,
            functions: Vec::new(),
        }
    }

    /// The scope of an UPDATE or DELETE: its target (by alias or name) and the tables of its FROM or USING.
    pub(crate) fn of_target(table: &str, alias: Option<&str>, others: &[sqlparser::ast::TableWithJoins]) -> Scope {
        let mut tables = vec![(alias.unwrap_or(table).to_ascii_lowercase(), table.to_owned())];
        for from in others {
            for factor in std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation)) {
                if let TableFactor::Table { name, alias, .. } = factor {
                    let table = last_part(name);
                    let key = alias.as_ref().map_or_else(|| table.clone(), |a| a.name.value.clone());
                    tables.push((key.to_ascii_lowercase(), table));
                }
            }
        }
        Scope {
            tables,
            functions: Vec::new(),
        }
    }

    /// A scope of one table (UPDATE, DELETE).
    pub(crate) fn of_table(table: &str) -> Scope {
        Scope {
            tables: vec![(table.to_ascii_lowercase(), table.to_owned())],
            functions: Vec::new(),
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

/// A CTE's columns and their types, as its (first) SELECT gives them.
#[derive(Clone, Debug, Default)]
pub(crate) struct CteTable {
    pub(crate) name: String,
    pub(crate) columns: Vec<(String, Option<PgType>)>,
    /// Its columns that are a catalog's vector column passed through (`i.indoption AS opts`), which stay
    /// vectors to the query around it (`crate::translate::vectors`).
    pub(crate) vectors: Vec<String>,
}

/// Types expressions from the catalog and the scopes of the SELECTs around them.
pub(crate) struct Typer<'a> {
    pub(crate) catalog: &'a Catalog,
    pub(crate) scopes: Vec<Scope>,
    /// The CTEs of the statement, by name (a CTE hides a table of its name).
    pub(crate) ctes: Vec<CteTable>,
    /// The columns of the set-returning functions of SELECTs already rewritten: their expressions, which the
    /// rewrite put where the columns were referenced, keep the columns' types (see
    /// [`Typer::rewritten_function_column`]).
    pub(crate) rewritten: Vec<crate::translate::srf::FunctionColumn>,
}

impl Typer<'_> {
    /// The type of a set-returning function's column that a reference was already rewritten into (its
    /// expression over the `json_each` item, which says nothing of the PostgreSQL type by itself).
    fn rewritten_function_column(&self, expr: &Expr) -> Option<PgType> {
        // (A compound identifier may be one: `"_pgc_fn_0".key`, named by the rewrite's own alias.)
        if matches!(expr, Expr::Identifier(_) | Expr::Value(_)) {
            return None;
        }
        self.scopes
            .iter()
            .rev()
            .flat_map(|scope| &scope.functions)
            .flat_map(|function| &function.columns)
            .chain(&self.rewritten)
            .find(|column| column.expr == *expr)
            .and_then(|column| column.ty)
    }

    /// The column of a set-returning function in FROM that `qualifier.column` names, if it is one.
    pub(crate) fn function_column(
        &self,
        qualifier: Option<&str>,
        column: &str,
    ) -> Option<&crate::translate::srf::FunctionColumn> {
        for scope in self.scopes.iter().rev() {
            for function in &scope.functions {
                if qualifier.is_some_and(|q| !q.eq_ignore_ascii_case(&function.alias)) {
                    continue;
                }
                if let Some(found) = function.column(column) {
                    return Some(found);
                }
            }
            // A name a table of this scope has is that table's (PostgreSQL would call it ambiguous).
            if qualifier.is_none()
                && scope
                    .tables
                    .iter()
                    .any(|(_, t)| self.catalog.column_type(t, column).is_some())
            {
                return None;
            }
        }
        None
    }

    /// A column name (folded as PostgreSQL folds it) that a table of the innermost scope has only in another
    /// case (`id` where the table has `"Id"`): SQLite would match it, PostgreSQL does not (42703). `None`
    /// when it matches exactly, or when the scope holds anything but the catalog's tables (a derived table,
    /// a CTE, a function), whose columns the layer may not know.
    pub(crate) fn case_mismatch(&self, qualifier: Option<&str>, folded: &str) -> Option<String> {
        let scope = self.scopes.last()?;
        if !scope.functions.is_empty() {
            return None;
        }
        let mut other_case = None;
        for (key, table) in &scope.tables {
            if qualifier.is_some_and(|q| !q.eq_ignore_ascii_case(key)) {
                continue;
            }
            if self.ctes.iter().any(|c| c.name.eq_ignore_ascii_case(table)) {
                return None;
            }
            let types = self.catalog.table(table)?;
            for (column, _) in types.columns() {
                if column == folded {
                    return None;
                }
                if column.eq_ignore_ascii_case(folded) {
                    other_case = Some(column.clone());
                }
            }
        }
        other_case
    }

    /// The columns of the FROM item a SELECT knows as `key` (a table, or a derived table or CTE the rewrite
    /// typed), in order, when `key` names one and no column of that name is in scope (a whole-row reference,
    /// as in `row_to_json(t)`).
    pub(crate) fn row_columns(&self, key: &str) -> Option<Vec<(String, Option<PgType>)>> {
        if self.function_column(None, key).is_some() || self.has_column(key) {
            return None;
        }
        for scope in self.scopes.iter().rev() {
            for (k, table) in &scope.tables {
                if !k.eq_ignore_ascii_case(key) {
                    continue;
                }
                if let Some(cte) = self.ctes.iter().rev().find(|c| c.name.eq_ignore_ascii_case(table)) {
                    return Some(cte.columns.clone());
                }
                return self
                    .catalog
                    .table(table)
                    .map(|t| t.columns().iter().map(|(c, ty)| (c.clone(), Some(*ty))).collect());
            }
        }
        None
    }

    /// Whether some FROM item in scope has a column named `column` (whatever its type).
    pub(crate) fn has_column(&self, column: &str) -> bool {
        self.scopes.iter().any(|scope| {
            scope.tables.iter().any(|(_, table)| {
                match self.ctes.iter().rev().find(|c| c.name.eq_ignore_ascii_case(table)) {
                    Some(cte) => cte.columns.iter().any(|(c, _)| c.eq_ignore_ascii_case(column)),
                    None => {
                        self.catalog.column_type(table, column).is_some()
                            || crate::pg_catalog::column_type(table, column).is_some()
                    }
                }
            })
        })
    }

    /// The table (by its key in the SELECT) whose column an unqualified `column` is, when the innermost
    /// SELECT also has set-returning functions in its FROM.
    /// The table a qualifier names in the innermost scope that has it; with no qualifier, the one table of
    /// the innermost scope that has any.
    pub(crate) fn table_named(&self, qualifier: Option<&str>) -> Option<&str> {
        match qualifier {
            Some(qualifier) => self.scopes.iter().rev().find_map(|scope| {
                scope
                    .tables
                    .iter()
                    .find(|(key, _)| key.eq_ignore_ascii_case(qualifier))
                    .map(|(_, table)| table.as_str())
            }),
            None => match self
                .scopes
                .iter()
                .rev()
                .find(|scope| !scope.tables.is_empty())?
                .tables
                .as_slice()
            {
                [(_, table)] => Some(table.as_str()),
                _ => None,
            },
        }
    }

    pub(crate) fn qualifier_for(&self, column: &str) -> Option<String> {
        let scope = self.scopes.last()?;
        if scope.functions.is_empty() {
            return None;
        }
        scope
            .tables
            .iter()
            .find(|(_, table)| self.catalog.column_type(table, column).is_some())
            .map(|(key, _)| key.clone())
    }

    fn column(&self, qualifier: Option<&str>, column: &str) -> Option<PgType> {
        if let Some(found) = self.function_column(qualifier, column) {
            return found.ty;
        }
        for scope in self.scopes.iter().rev() {
            for (key, table) in &scope.tables {
                if qualifier.is_some_and(|q| !q.eq_ignore_ascii_case(key)) {
                    continue;
                }
                if let Some(cte) = self.ctes.iter().rev().find(|c| c.name.eq_ignore_ascii_case(table)) {
                    match cte.columns.iter().find(|(c, _)| c.eq_ignore_ascii_case(column)) {
                        Some((_, ty)) => return *ty,
                        None => continue,
                    }
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
        if let Some(ty) = self.rewritten_function_column(expr) {
            return Some(ty);
        }
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
            Expr::Nested(inner) | Expr::Collate { expr: inner, .. } => self.infer(inner),
            // Written forms, before the rewrite makes them `pg_cast` (a CTE is typed before and after).
            Expr::TypedString(typed) => written_type(&typed.data_type).ok(),
            Expr::Cast { data_type, .. } => written_type(data_type).ok(),
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
            rewritten: self.rewritten.clone(),
            catalog: self.catalog,
            scopes: {
                let mut scopes = self.scopes.clone();
                scopes.push(Scope::of_select(select));
                scopes
            },
            ctes: self.ctes.clone(),
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
            B::StringConcat if self.infer(left).is_some_and(PgType::is_array) => self.infer(left),
            B::StringConcat if self.infer(left).is_some_and(|t| t.base() == Base::Bytea) => Some(PgType::BYTEA),
            B::StringConcat if self.infer(right).is_some_and(PgType::is_array) => self.infer(right),
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
            "pg_now" | "pg_current_timestamp" => PgType::TIMESTAMPTZ,
            "pg_clock_timestamp" => PgType::TIMESTAMPTZ,
            "pg_current_date" => PgType::new(Base::Date),
            "pg_localtimestamp" => PgType::new(Base::Timestamp),
            "pg_current_time" => PgType::new(Base::Time),
            "pg_current_timetz" => PgType::new(Base::Timetz),
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
            "pg_array_agg_packed" => {
                return match args.first() {
                    Some(Expr::Function(packed)) => plain_args(packed)
                        .get(1)
                        .and_then(|a| self.infer(a))
                        .map(|t| t.element().array()),
                    _ => None,
                }
            }
            "pg_string_agg_packed" => PgType::TEXT,
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
            "pg_interval_scale" | "pg_interval_sum" | "pg_interval_avg" => PgType::new(Base::Interval),
            "pg_percentile_cont" => PgType::FLOAT8,
            "pg_percentile_disc" => return args.get(1).and_then(|a| self.infer(a)),
            "pg_mode" => return first,
            "pg_bytea_concat" => PgType::BYTEA,
            "pg_float_arith" => return literal_type(3).or(Some(PgType::FLOAT8)),
            "pg_numeric_cmp" => PgType::INT4,
            "pg_jsonb_eq" => PgType::BOOL,
            "pg_numeric_sum" | "pg_numeric_add" | "pg_numeric_sub" | "pg_numeric_mul" | "pg_numeric_div" => {
                PgType::NUMERIC
            }
            "avg" => match first {
                Some(t) if matches!(t.base(), Base::Float4 | Base::Float8) => PgType::FLOAT8,
                _ => PgType::NUMERIC,
            },
            "pg_numeric_avg" => PgType::NUMERIC,
            // PostgreSQL has no `max(varchar)`: the aggregate over a varchar is `max(text)`, text.
            "min" | "max" if args.len() == 1 && first.is_some_and(|t| t.base() == Base::Varchar && !t.is_array()) => {
                PgType::TEXT
            }
            "min" | "max" | "abs" | "coalesce" | "nullif" | "greatest" | "least" => {
                return args.iter().find_map(|a| self.infer(a));
            }
            "length"
            | "char_length"
            | "character_length"
            | "octet_length"
            | "strpos"
            | "instr"
            | "ascii"
            | "pg_backend_pid"
            | "pg_inet_server_port"
            | "pg_inet_client_port"
            | "array_length"
            | "cardinality" => PgType::INT4,
            "substr" | "substring" | "overlay" => match first {
                Some(t) if t.base() == Base::Bytea && !t.is_array() => PgType::new(Base::Bytea),
                _ => PgType::TEXT,
            },
            "lower"
            | "upper"
            | "concat"
            | "concat_ws"
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
            | "pg_get_triggerdef"
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
            "_pgc_oid_of" => PgType::OID,
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
            | "pg_collation_is_visible"
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
    // A negative literal is typed by its magnitude, as PostgreSQL types the number before negating it.
    let magnitude = text.strip_prefix('-').unwrap_or(text);
    match magnitude.parse::<i64>() {
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
