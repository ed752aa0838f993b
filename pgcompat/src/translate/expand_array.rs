//! `information_schema._pg_expandarray(a)`, the set-returning function of PostgreSQL's `information_schema`
//! that pgjdbc's `getPrimaryKeys` and `getIndexInfo` call in a SELECT list: one row `(x, n)` per element of
//! `a`, its value and its position from 1 — `unnest(a) WITH ORDINALITY AS (x, n)`, which is what it becomes
//! here, as a FROM item joined after the SELECT's others (PostgreSQL runs a SELECT list's set-returning
//! function once per row of the FROM).
//!
//! Its result is a composite, which SQLite has no values for, so each use is rewritten by what it reads:
//! `(…_pg_expandarray(a)).x` and `.n` read the item's columns; the call alone is the composite's text as
//! PostgreSQL prints a record (`(2,1)`); and a derived table's composite column read field by field by the
//! query around it (`(result.keys).x`, pgjdbc's form) is given a hidden column per field read, named
//! `_pgc_xa_<column>_<field>`, which the outer reference reads instead. Every call in one SELECT must
//! expand the same array (PostgreSQL zips different ones; not done here: 0A000).
//!
//! The pass runs on the parsed statement before the other query passes, only for a text that names the
//! function (the caller checks its tokens).

use std::collections::HashMap;

use sqlparser::ast::{
    AccessExpr, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, Join, JoinConstraint, JoinOperator,
    ObjectNamePart, Query, Select, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, TableAlias,
    TableAliasColumnDef, TableFactor, TableWithJoins,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use super::walk::{self, Hooks};
use crate::error::{PgError, UNDEFINED_FUNCTION};

/// The function's name, as its schema qualifies it.
const FUNCTION: &str = "_pg_expandarray";
/// The prefix of the FROM items and hidden columns made here.
const PREFIX: &str = "_pgc_xa_";

/// Rewrites every use of `_pg_expandarray` in `query` (see the module doc).
pub(super) fn rewrite(query: &mut Query) -> Result<(), PgError> {
    let mut pass = Pass::default();
    walk::query(&mut pass, query)
}

/// What the pass knows of one SELECT (by its address, stable while the statement is walked).
#[derive(Default)]
struct SelectState {
    /// The array its calls expand and the alias of the FROM item made for them.
    item: Option<(Expr, String)>,
    /// Its result columns that are the composite itself: (lower-case name, the alias of the item it reads).
    composites: Vec<(String, String)>,
    /// Its derived tables' composite columns, which carry a hidden column per field: (alias, column), lower
    /// case.
    derived_composites: Vec<(String, String)>,
}

#[derive(Default)]
struct Pass {
    /// The SELECTs entered, innermost last.
    stack: Vec<usize>,
    /// The SELECT last left (its query's ORDER BY enters it again).
    last_left: Option<usize>,
    states: HashMap<usize, SelectState>,
    /// The number of FROM items made so far (their aliases' suffix).
    made: usize,
}

fn key(select: &Select) -> usize {
    select as *const Select as usize
}

fn ident_name(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_ascii_lowercase()
    }
}

/// The array argument of a call of `information_schema._pg_expandarray`; an error for a call of it with other
/// arguments. `None` for anything else.
fn expand_call(e: &Expr) -> Result<Option<&Expr>, PgError> {
    let Expr::Function(f) = e else {
        return Ok(None);
    };
    let parts: Vec<String> = f
        .name
        .0
        .iter()
        .map(|part| match part {
            ObjectNamePart::Identifier(ident) => ident_name(ident),
            other => other.to_string(),
        })
        .collect();
    if parts != ["information_schema", FUNCTION] {
        return Ok(None);
    }
    let FunctionArguments::List(list) = &f.args else {
        return Err(arguments_error());
    };
    match list.args.as_slice() {
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(array))] if f.over.is_none() && f.filter.is_none() => {
            Ok(Some(array))
        }
        _ => Err(arguments_error()),
    }
}

fn arguments_error() -> PgError {
    PgError::new(
        UNDEFINED_FUNCTION,
        "function information_schema._pg_expandarray takes one array argument",
    )
}

/// `root.field` of a field access, with the root through parentheses.
fn field_access(e: &Expr) -> Option<(&Expr, String)> {
    let Expr::CompoundFieldAccess { root, access_chain } = e else {
        return None;
    };
    let [AccessExpr::Dot(Expr::Identifier(field))] = access_chain.as_slice() else {
        return None;
    };
    let mut root = root.as_ref();
    while let Expr::Nested(inner) = root {
        root = inner;
    }
    Some((root, ident_name(field)))
}

fn column(table: &str, name: &str) -> Expr {
    Expr::CompoundIdentifier(vec![Ident::with_quote('"', table), Ident::with_quote('"', name)])
}

/// The record text PostgreSQL prints for `(x, n)`: a field quoted when it is empty or holds a quote, a
/// backslash, a parenthesis, a comma or white space (those two doubled), an empty field for NULL.
fn record_text(alias: &str) -> Result<Expr, PgError> {
    let a = crate::catalog::quote_ident(alias);
    let x = format!("CAST({a}.x AS TEXT)");
    // (A backslash is `chr(92)`: the tokenizer reads one in a literal as an escape.)
    let special = [
        "'\"'", "','", "'('", "')'", "' '", "chr(92)", "chr(9)", "chr(10)", "chr(13)",
    ]
    .map(|c| format!("strpos({x}, {c}) > 0"))
    .join(" OR ");
    let sql = format!(
        "'(' || CASE WHEN {x} IS NULL THEN '' WHEN {x} = '' OR {special} \
         THEN '\"' || replace(replace({x}, chr(92), chr(92) || chr(92)), '\"', '\"\"') || '\"' ELSE {x} END \
         || ',' || {a}.n || ')'"
    );
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&sql)
        .and_then(|mut parser| parser.parse_expr())
        .map_err(|e| PgError::new(crate::error::INTERNAL_ERROR, format!("rewriting _pg_expandarray: {e}")))
}

/// The hidden column of a derived table's composite `column` that holds `field`.
fn hidden_name(column: &str, field: &str) -> String {
    format!("{PREFIX}{column}_{field}")
}

impl Pass {
    fn current(&mut self) -> Option<&mut SelectState> {
        let key = *self.stack.last()?;
        Some(self.states.entry(key).or_default())
    }

    /// The alias of the current SELECT's FROM item for `array`, made on its first call.
    fn item_for(&mut self, array: &Expr) -> Result<String, PgError> {
        let made = self.made;
        let Some(state) = self.current() else {
            return Err(PgError::unsupported(
                "information_schema._pg_expandarray outside a SELECT list",
            ));
        };
        match &state.item {
            Some((existing, alias)) if existing == array => Ok(alias.clone()),
            Some(_) => Err(PgError::unsupported(
                "information_schema._pg_expandarray of different arrays in one SELECT",
            )),
            None => {
                let alias = format!("{PREFIX}{made}");
                state.item = Some((array.clone(), alias.clone()));
                self.made += 1;
                Ok(alias)
            }
        }
    }
}

impl Hooks for Pass {
    fn enter_select(&mut self, select: &Select) {
        self.stack.push(key(select));
    }

    fn leave_select(&mut self) {
        self.last_left = self.stack.pop();
    }

    fn reenter_select(&mut self) {
        if let Some(last) = self.last_left {
            self.stack.push(last);
        }
    }

    fn expr(&mut self, e: &mut Expr) -> Result<(), PgError> {
        // A call reads as its item's alias until its parent says which field it reads (children come first).
        if let Some(array) = expand_call(e)? {
            let array = array.clone();
            let alias = self.item_for(&array)?;
            *e = Expr::Identifier(Ident::with_quote('"', alias));
            return Ok(());
        }
        let Some((root, field)) = field_access(e) else {
            return Ok(());
        };
        let replacement = match root {
            Expr::Identifier(ident) if ident.value.starts_with(PREFIX) && ident.quote_style == Some('"') => {
                check_field(&field)?;
                column(&ident.value, &field)
            }
            Expr::CompoundIdentifier(parts) if parts.len() == 2 => {
                let (table, name) = (ident_name(&parts[0]), ident_name(&parts[1]));
                let Some(state) = self.current() else {
                    return Ok(());
                };
                if !state.derived_composites.contains(&(table, name.clone())) {
                    return Ok(());
                }
                check_field(&field)?;
                column(&parts[0].value, &hidden_name(&name, &field))
            }
            _ => return Ok(()),
        };
        *e = replacement;
        Ok(())
    }

    fn table_factor(&mut self, factor: &mut TableFactor) -> Result<(), PgError> {
        // A derived table (walked just now) with composite columns: a hidden column per field, which the
        // SELECT around it reads instead of the field.
        let TableFactor::Derived {
            subquery,
            alias: Some(alias),
            ..
        } = factor
        else {
            return Ok(());
        };
        let SetExpr::Select(inner) = subquery.body.as_mut() else {
            return Ok(());
        };
        let Some(composites) = self.states.get(&key(inner)).map(|s| s.composites.clone()) else {
            return Ok(());
        };
        let table = ident_name(&alias.name);
        for (name, item) in composites {
            for field in ["x", "n"] {
                inner.projection.push(SelectItem::ExprWithAlias {
                    expr: column(&item, field),
                    alias: Ident::with_quote('"', hidden_name(&name, field)),
                });
            }
            if let Some(state) = self.current() {
                state.derived_composites.push((table.clone(), name));
            }
        }
        Ok(())
    }

    fn finish_select(&mut self, select: &mut Select) -> Result<(), PgError> {
        let state = self.states.entry(key(select)).or_default();
        // A wildcard would show the hidden columns of a derived table's composite.
        for (table, _) in &state.derived_composites {
            let shows = select.projection.iter().any(|item| match item {
                SelectItem::Wildcard(_) => true,
                SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(name), _) => name
                    .0
                    .last()
                    .and_then(|part| part.as_ident())
                    .is_some_and(|ident| ident_name(ident) == *table),
                _ => false,
            });
            if shows {
                return Err(PgError::unsupported(
                    "* over a derived table with a column of information_schema._pg_expandarray",
                ));
            }
        }
        // The call alone as a result column: the composite's text.
        let mut composites = Vec::new();
        for item in &mut select.projection {
            let (SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }) = item else {
                continue;
            };
            let Expr::Identifier(ident) = e else {
                continue;
            };
            if !(ident.value.starts_with(PREFIX) && ident.quote_style == Some('"')) {
                continue;
            }
            let alias = ident.value.clone();
            let name = match item {
                SelectItem::ExprWithAlias { alias: name, .. } => ident_name(name),
                _ => FUNCTION.to_owned(),
            };
            let text = record_text(&alias)?;
            *item = SelectItem::ExprWithAlias {
                expr: text,
                alias: Ident::with_quote('"', name.clone()),
            };
            composites.push((name, alias));
        }
        state.composites = composites;
        // The item the calls read, after the SELECT's other FROM items (they may read those).
        if let Some((array, alias)) = state.item.take() {
            let factor = TableFactor::UNNEST {
                alias: Some(TableAlias {
                    explicit: true,
                    name: Ident::with_quote('"', alias),
                    columns: vec![TableAliasColumnDef::from_name("x"), TableAliasColumnDef::from_name("n")],
                    at: None,
                }),
                array_exprs: vec![array],
                with_offset: false,
                with_offset_alias: None,
                with_ordinality: true,
            };
            let join = Join {
                relation: factor,
                global: false,
                join_operator: JoinOperator::CrossJoin(JoinConstraint::None),
            };
            match select.from.last_mut() {
                Some(last) => last.joins.push(join),
                None => select.from.push(TableWithJoins {
                    relation: join.relation,
                    joins: Vec::new(),
                }),
            }
        }
        Ok(())
    }
}

/// `x` and `n` are the composite's fields; another is PostgreSQL's 42703.
fn check_field(field: &str) -> Result<(), PgError> {
    match field {
        "x" | "n" => Ok(()),
        _ => Err(PgError::new(
            crate::error::UNDEFINED_COLUMN,
            format!("column \"{field}\" not found in data type record"),
        )),
    }
}
