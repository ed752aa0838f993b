//! The rewrite of one expression node: casts, typed literals, `IS [NOT] DISTINCT FROM`, `LIKE`/`ILIKE`,
//! `AT TIME ZONE`, `EXTRACT`, subscripts, array constructors and the other forms SQLite spells differently.

use sqlparser::ast::{BinaryOperator, CastKind, Expr, Ident, TrimWhereField, UnaryOperator, Value, ValueWithSpan};

use super::*;
use crate::error::PgError;
use crate::types::{Base, PgType};

impl Rewriter<'_> {
    pub(super) fn rewrite_node(&mut self, expr: &mut Expr) -> Result<(), PgError> {
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
                if let Some(replacement) = super::super::catalog_refs::rewrite_cast(inner, written) {
                    self.uses_catalog = true;
                    *expr = replacement;
                    return Ok(());
                }
                let target = crate::translate::enums::written_type(self.typer.catalog, data_type)?;
                let source = self.typer.infer(inner);
                self.learn_param(inner, Some(target));
                Some(crate::translate::enums::with_collation(
                    cast_call(
                        std::mem::replace(inner.as_mut(), Expr::value(Value::Null)),
                        target,
                        source,
                    ),
                    target,
                ))
            }
            Expr::TypedString(typed) => {
                let target = crate::translate::enums::written_type(self.typer.catalog, &typed.data_type)?;
                let text = typed.value.value.clone().into_string().unwrap_or_default();
                Some(crate::translate::enums::with_collation(
                    cast_call(string(&text), target, Some(PgType::TEXT)),
                    target,
                ))
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
                | Value::UnicodeStringLiteral(text)
                | Value::DollarQuotedString(sqlparser::ast::DollarQuotedString { value: text, .. }) => {
                    Some(string(text))
                }
                _ => None,
            },
            Expr::BinaryOp { left, op, right } => {
                if let Some(plain) = super::super::catalog_refs::plain_operator(op) {
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
            Expr::UnaryOp {
                op: UnaryOperator::Minus,
                expr: inner,
            } if self
                .typer
                .infer(inner)
                .is_some_and(|t| !t.is_array() && matches!(t.base(), Base::Interval | Base::Numeric)) =>
            {
                // SQLite would negate the stored text as a number: an interval is negated field by field,
                // a numeric exactly.
                if self.typer.infer(inner).is_some_and(|t| t.base() == Base::Interval) {
                    Some(call(
                        "pg_interval_scale",
                        vec![take(inner), string("*"), Expr::value(number("-1"))],
                    ))
                } else {
                    Some(call("pg_numeric_sub", vec![Expr::value(number("0")), take(inner)]))
                }
            }
            Expr::Like { any: true, .. } | Expr::ILike { any: true, .. } => self.quantified_like(expr)?,
            Expr::Like { pattern, .. } | Expr::ILike { pattern, .. } if matches!(pattern.as_ref(), Expr::Function(f) if last_part(&f.name).eq_ignore_ascii_case("all")) => {
                self.quantified_like(expr)?
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
            Expr::SimilarTo {
                negated,
                expr: inner,
                pattern,
                escape_char,
            } => {
                let mut args = vec![take(inner), take(pattern)];
                if let Some(escape) = escape_char {
                    args.push(escape.as_ref().clone());
                }
                Some(negate_if(*negated, call("pg_similar", args)))
            }
            Expr::Overlay {
                expr: inner,
                overlay_what,
                overlay_from,
                overlay_for,
            } => Some(overlay(
                take(inner),
                take(overlay_what),
                take(overlay_from),
                overlay_for.as_mut().map(|m| take(m)),
            )),
            Expr::UnaryOp { op, expr: inner }
                if matches!(
                    op,
                    UnaryOperator::PGSquareRoot
                        | UnaryOperator::PGCubeRoot
                        | UnaryOperator::PGAbs
                        | UnaryOperator::PGPrefixFactorial
                ) =>
            {
                let name = match op {
                    UnaryOperator::PGSquareRoot => "sqrt",
                    UnaryOperator::PGCubeRoot => "cbrt",
                    UnaryOperator::PGAbs => "abs",
                    _ => "factorial",
                };
                let ty = self.typer.infer(inner);
                Some(crate::functions::typed_expr(name, &[ty], vec![take(inner)]))
            }
            Expr::IsUnknown(inner) => Some(Expr::IsNull(Box::new(take(inner)))),
            Expr::IsNotUnknown(inner) => Some(Expr::IsNotNull(Box::new(take(inner)))),
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
            } if substring_for.is_none()
                && substring_from
                    .as_deref()
                    .is_some_and(|f| self.typer.infer(f).is_some_and(|t| t.is_string())) =>
            {
                // substring(text FROM pattern): the first match of a POSIX regular expression (its first
                // parenthesized group if it has one).
                let pattern = substring_from.as_deref().cloned().unwrap_or(Expr::value(Value::Null));
                Some(call("pg_regexp_substring", vec![take(inner), pattern]))
            }
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
                // Elements that are arrays make an array of one dimension more (its type the same).
                let inferred = array
                    .elem
                    .iter()
                    .find_map(|e| self.typer.infer(e))
                    .unwrap_or(PgType::TEXT);
                let element = if inferred.is_array() {
                    inferred
                } else {
                    inferred.element()
                };
                let mut args = vec![string(&element.catalog_text())];
                args.append(&mut array.elem);
                Some(call("pg_array", args))
            }
            Expr::AnyOp {
                left,
                compare_op: BinaryOperator::Eq,
                right,
                ..
            } if matches!(right.as_ref(), Expr::Subquery(_)) => {
                let Expr::Subquery(query) = take(right) else {
                    unreachable!("matched above")
                };
                Some(Expr::In {
                    expr: Box::new(take(left)),
                    target: sqlparser::ast::InTarget::Subquery(query),
                    negated: false,
                    global: false,
                })
            }
            Expr::AllOp {
                left,
                compare_op: BinaryOperator::NotEq,
                right,
            } if matches!(right.as_ref(), Expr::Subquery(_)) => {
                let Expr::Subquery(query) = take(right) else {
                    unreachable!("matched above")
                };
                Some(Expr::In {
                    expr: Box::new(take(left)),
                    target: sqlparser::ast::InTarget::Subquery(query),
                    negated: true,
                    global: false,
                })
            }
            // A catalog's vector (`opc.oid = ANY(i.indclass)`, drizzle-kit's): its numbers as an array.
            Expr::AnyOp {
                left,
                compare_op: BinaryOperator::Eq,
                right,
                ..
            } if super::super::vectors::is_vector(&self.typer, right) => {
                let array = super::super::vectors::as_array(right);
                Some(call(
                    "pg_array_contains",
                    vec![array, take(left), string(&PgType::INT8.catalog_text())],
                ))
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
            Expr::AnyOp {
                left,
                compare_op,
                right,
                ..
            } => Some(self.quantified(left, compare_op, right, false)?),
            Expr::AllOp {
                left,
                compare_op,
                right,
            } => Some(self.quantified(left, compare_op, right, true)?),
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
            Expr::IsDistinctFrom(left, right) | Expr::IsNotDistinctFrom(left, right) => {
                // Typed as `=` types its sides: a parameter or an untyped string takes the other side's type.
                let (lt, rt) = (self.typer.infer(left), self.typer.infer(right));
                self.type_compared_sides(left, right, lt, rt);
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
            Expr::Collate { expr: inner, collation } if super::super::catalog_refs::is_default_collation(collation) => {
                Some(take(inner))
            }
            Expr::Collate { .. } => return Err(PgError::unsupported("COLLATE in expressions")),
            Expr::Identifier(ident) => self.identifier(ident)?,
            Expr::CompoundIdentifier(parts)
                if parts.len() == 2
                    && self
                        .returning_target
                        .as_deref()
                        .is_some_and(|t| t.eq_ignore_ascii_case(&parts[0].value)) =>
            {
                Some(Expr::Identifier(parts[1].clone()))
            }
            Expr::CompoundIdentifier(parts) => {
                // `public.t.c`: the one schema there is names nothing more than `t.c` does (what ORMs such
                // as Prisma write).
                let schema = &parts[0];
                let is_public = match schema.quote_style {
                    Some(_) => schema.value == "public",
                    None => schema.value.eq_ignore_ascii_case("public"),
                };
                if parts.len() == 3 && is_public {
                    parts.remove(0);
                }
                if let [qualifier, column] = parts.as_slice() {
                    if let Some(found) = self.typer.function_column(Some(&qualifier.value), &column.value) {
                        *expr = found.expr.clone();
                        return Ok(());
                    }
                    if let Some(oid) = self.catalog_tableoid(Some(&qualifier.value), column) {
                        *expr = oid;
                        return Ok(());
                    }
                    check_case(&self.typer, Some(&qualifier.value), column)?;
                }
                super::super::catalog_refs::rewrite_compound(parts);
                // `schema.table.column`: the table is known by its own name (FROM aliases it so).
                if parts.len() == 3
                    && self
                        .typer
                        .catalog
                        .schema_exists(&super::super::schema::fold_ident(&parts[0]))
                {
                    parts.remove(0);
                }
                None
            }
            Expr::CompoundFieldAccess { root, access_chain } => {
                // `c.conkey[1]`: the column is `c.conkey` (the walk merged it so already).
                super::super::walk::merge_dotted_root(root, access_chain);
                let ty = self.typer.infer(root);
                match access_chain.as_slice() {
                    // A catalog's `int2vector`/`oidvector` column: its elements from 0.
                    [sqlparser::ast::AccessExpr::Subscript(sqlparser::ast::Subscript::Index { index })]
                        if super::super::vectors::is_vector(&self.typer, root) =>
                    {
                        let array = super::super::vectors::as_array(root);
                        Some(call("pg_array_get", vec![array, one_based(index), string("int8")]))
                    }
                    // A `name` is an array of characters from 0 (pg_dump's `typname[0] = '_'`).
                    [sqlparser::ast::AccessExpr::Subscript(sqlparser::ast::Subscript::Index { index })]
                        if ty.is_some_and(|t| t.base() == Base::Name && !t.is_array()) =>
                    {
                        Some(call(
                            "substr",
                            vec![take(root), one_based(index), Expr::value(number("1"))],
                        ))
                    }
                    [sqlparser::ast::AccessExpr::Subscript(sqlparser::ast::Subscript::Index { index })] => {
                        let element = ty.unwrap_or(PgType::TEXT.array()).element();
                        Some(call(
                            "pg_array_get",
                            vec![take(root), index.clone(), string(&element.catalog_text())],
                        ))
                    }
                    [sqlparser::ast::AccessExpr::Subscript(sqlparser::ast::Subscript::Slice {
                        lower_bound,
                        upper_bound,
                        stride: None,
                    })] => {
                        let bound = |b: &Option<Expr>| b.clone().unwrap_or(Expr::value(Value::Null));
                        let (lower, upper) = (bound(lower_bound), bound(upper_bound));
                        Some(crate::functions::typed_expr(
                            "pg_array_slice",
                            &[ty, None, None],
                            vec![take(root), lower, upper],
                        ))
                    }
                    _ => return Err(PgError::unsupported("array slices and field access")),
                }
            }
            _ => None,
        };
        if let Some(new) = replacement {
            *expr = new;
        }
        Ok(())
    }
}

impl Rewriter<'_> {
    /// A bare column name: a set-returning function's column, a table's column qualified beside one, or a
    /// PostgreSQL system column, which SQLite tables do not have (0A000).
    fn identifier(&self, ident: &Ident) -> Result<Option<Expr>, PgError> {
        if let Some(column) = self.typer.function_column(None, &ident.value) {
            return Ok(Some(column.expr.clone()));
        }
        if let Some(oid) = self.catalog_tableoid(None, ident) {
            return Ok(Some(oid));
        }
        let name = ident.value.to_ascii_lowercase();
        if ident.quote_style.is_none() {
            // PostgreSQL's reserved words that are functions called without parentheses (sqlparser reads
            // only some of them as calls).
            match name.as_str() {
                "current_role" | "current_user" | "session_user" => {
                    return Ok(Some(call("pg_current_user", Vec::new())))
                }
                "current_schema" => return Ok(Some(call("pg_current_schema", Vec::new()))),
                "current_catalog" => return Ok(Some(call("pg_current_database", Vec::new()))),
                _ => {}
            }
        }
        check_case(&self.typer, None, ident)?;
        if ident.quote_style.is_none()
            && matches!(name.as_str(), "xmin" | "xmax" | "cmin" | "cmax" | "ctid" | "tableoid")
            && !self.typer.has_column(&name)
            && !self.typer.scopes.is_empty()
        {
            return Err(PgError::unsupported(format!("the system column {name}")));
        }
        // Beside a set-returning function (SQLite's `json_each`, whose own columns are `key`, `value`,
        // `type`, `id`, …), a table's column is named with its table.
        Ok(self
            .typer
            .qualifier_for(&ident.value)
            .map(|table| Expr::CompoundIdentifier(vec![Ident::with_quote('"', table), ident.clone()])))
    }
}

impl Rewriter<'_> {
    /// `tableoid` of a row of a system catalog (`x.tableoid` with `x` a catalog, or bare with one catalog in
    /// FROM): the catalog's OID, a constant, as PostgreSQL gives it (pg_dump reads it for every object).
    fn catalog_tableoid(&self, qualifier: Option<&str>, column: &Ident) -> Option<Expr> {
        if column.quote_style.is_some() || !column.value.eq_ignore_ascii_case("tableoid") {
            return None;
        }
        let oid = crate::pg_catalog::system_catalog_oid(self.typer.table_named(qualifier)?)?;
        // Typed oid (`_pgc_oid_of` is the identity).
        Some(call("_pgc_oid_of", vec![Expr::value(number(&oid.to_string()))]))
    }
}

/// 42703 for a column named in another case than a table of the scope has it (`id` for `"Id"`), which SQLite
/// would match.
fn check_case(typer: &Typer<'_>, qualifier: Option<&str>, ident: &Ident) -> Result<(), PgError> {
    let folded = crate::translate::schema::fold_ident(ident);
    match typer.case_mismatch(qualifier, &folded) {
        Some(column) => Err(PgError::new(
            crate::error::UNDEFINED_COLUMN,
            format!("column \"{folded}\" does not exist (the table has \"{column}\")"),
        )),
        None => Ok(()),
    }
}

/// `index + 1`: a subscript from 0 (a `name`'s, a vector's) as a position from 1.
fn one_based(index: &Expr) -> Expr {
    Expr::BinaryOp {
        left: Box::new(Expr::Nested(Box::new(index.clone()))),
        op: BinaryOperator::Plus,
        right: Box::new(Expr::value(number("1"))),
    }
}

/// `overlay(s PLACING r FROM n [FOR m])` = `substr(s, 1, n - 1) || r || substr(s, n + m)`, `m` the length of
/// `r` by default.
fn overlay(s: Expr, r: Expr, n: Expr, m: Option<Expr>) -> Expr {
    let m = m.unwrap_or_else(|| call("length", vec![r.clone()]));
    let binary = |left: Expr, op: BinaryOperator, right: Expr| Expr::BinaryOp {
        left: Box::new(left),
        op,
        right: Box::new(right),
    };
    let head = call(
        "substr",
        vec![
            s.clone(),
            Expr::value(number("1")),
            binary(n.clone(), BinaryOperator::Minus, Expr::value(number("1"))),
        ],
    );
    let tail = call("substr", vec![s, binary(n, BinaryOperator::Plus, m)]);
    Expr::Nested(Box::new(binary(
        binary(head, BinaryOperator::StringConcat, r),
        BinaryOperator::StringConcat,
        tail,
    )))
}
