//! A view's definition as PostgreSQL 15 prints it (`pg_get_viewdef`, `pg_views.definition`): the query the
//! view was made with (kept in its SQLite text by `translate::view_source`) deparsed in ruleutils' layout —
//! ` SELECT t.a,\n    t.b\n   FROM t\n  WHERE …;` — with columns qualified by their FROM item, relation
//! names as the session's `search_path` shows them, constants and PostgreSQL's implicit casts written out,
//! and parentheses as ruleutils puts them (all operators without the `pretty` flag; by precedence with it).
//!
//! Forms the deparser does not know (WITH, set operations with ORDER BY, window frames, functions outside
//! its table…) are printed as written instead, relation names still shown as the path shows them; a view
//! whose kept query is gone or stale (its SQLite text was rewritten by a rename) shows its SQLite text.

mod calls;
mod from;
mod print;
mod resolve;
#[cfg(test)]
mod tests;
mod typed;

use std::collections::HashMap;

use sqlparser::ast::{
    Distinct, Expr, GroupByExpr, Ident, LimitClause, ObjectName, OrderByKind, Query, Select, SelectItem, SetExpr,
    SetOperator, SetQuantifier, TableFactor, TableWithJoins,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use super::names::Namer;
use crate::functions::SessionState;
use crate::types::PgType;
use typed::{Node, Ty, Unsupported};

/// ruleutils' `PRETTYINDENT_STD`.
const INDENT_STD: i32 = 8;
/// ruleutils' `PRETTYINDENT_JOIN`.
const INDENT_JOIN: i32 = 4;
/// ruleutils' `PRETTYINDENT_VAR`.
const INDENT_VAR: i32 = 4;
/// Deepest nesting of subqueries printed (deeper: the text as written).
const DEPTH_MAX: usize = 32;

/// What starts the comment holding a view's PostgreSQL query in its SQLite text.
const MARKER: &str = " /*pg:";

/// The comment `CREATE VIEW` appends to a view's SQLite text: a fingerprint of the SQLite query `sqlite_body`
/// and the PostgreSQL query. `None` when the query holds the comment's end (`*/`).
pub(crate) fn source_comment(sqlite_body: &str, pg_query: &str) -> Option<String> {
    if pg_query.contains("*/") {
        return None;
    }
    Some(format!("{MARKER}{:016x}:{pg_query}*/", fingerprint(sqlite_body)))
}

/// FNV-1a: a fingerprint, not a defence (the texts are the database's own).
fn fingerprint(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A view's SQLite text split into its text without the comment and the PostgreSQL query the comment keeps,
/// if it still describes the SQLite query beside it.
pub(super) fn split_source(sql: &str) -> (&str, Option<&str>) {
    let Some(start) = sql.rfind(MARKER) else {
        return (sql, None);
    };
    let (head, comment) = sql.split_at(start);
    let kept = comment[MARKER.len()..]
        .strip_suffix("*/")
        .and_then(|rest| rest.split_once(':'))
        .filter(|(hash, _)| {
            let body = head.find(" AS ").map_or("", |i| &head[i + 4..]);
            u64::from_str_radix(hash, 16).is_ok_and(|h| h == fingerprint(body))
        })
        .map(|(_, query)| query);
    (head, kept)
}

/// The columns of every relation by lower-case SQLite name, in order, with their recorded types: the JSON
/// object `{"t": [["id", "int4"], ["name", null]]}` the catalog view passes.
pub(super) type Columns = HashMap<String, Vec<(String, Option<PgType>)>>;

/// Reads the columns' JSON (`None`: not an object of that shape).
pub(super) fn columns_of(json: &str) -> Option<Columns> {
    let value: serde_json::Value = serde_json::from_str(json).ok()?;
    let mut columns = Columns::new();
    for (relation, list) in value.as_object()? {
        let list = list
            .as_array()?
            .iter()
            .map(|pair| {
                let pair = pair.as_array()?;
                let name = pair.first()?.as_str()?.to_owned();
                let ty = pair.get(1).and_then(|t| t.as_str()).and_then(PgType::from_catalog);
                Some((name, ty))
            })
            .collect::<Option<Vec<_>>>()?;
        columns.insert(relation.to_ascii_lowercase(), list);
    }
    Some(columns)
}

/// What a definition is printed against.
pub(super) struct Env<'a> {
    pub(super) columns: &'a Columns,
    pub(super) namer: &'a Namer,
    pub(super) state: &'a SessionState,
}

/// A view's definition from its SQLite text (`pretty`: `pg_get_viewdef(…, true)`).
pub(super) fn definition(sql: &str, pretty: bool, env: &Env<'_>) -> String {
    let (head, kept) = split_source(sql);
    let Some(query) = kept.and_then(|text| {
        Parser::new(&PostgreSqlDialect {})
            .try_with_sql(text)
            .ok()?
            .parse_query()
            .ok()
    }) else {
        return sqlite_body(head);
    };
    let mut deparser = Deparser {
        out: String::new(),
        indent: 0,
        pretty,
        env,
        scopes: Vec::new(),
        failed: false,
    };
    deparser.query(&query);
    if deparser.failed {
        return format!(" {};", as_written(*query, env));
    }
    deparser.out.push(';');
    deparser.out
}

/// The body of a `CREATE VIEW … AS body` text (what is shown of a view whose query was not kept).
pub(super) fn sqlite_body(sql: &str) -> String {
    let (head, _) = split_source(sql);
    head.find(" AS ")
        .and_then(|i| head.get(i + 4..))
        .map_or_else(|| head.to_owned(), |body| format!(" {};", body.trim()))
}

/// The query as written, its relations named as the path shows them.
fn as_written(mut query: Query, env: &Env<'_>) -> String {
    struct Rename<'a>(&'a Namer);
    impl crate::translate::walk::Hooks for Rename<'_> {
        fn enter_select(&mut self, _: &Select) {}
        fn leave_select(&mut self) {}
        fn expr(&mut self, _: &mut Expr) -> Result<(), crate::error::PgError> {
            Ok(())
        }
        fn table_factor(&mut self, factor: &mut TableFactor) -> Result<(), crate::error::PgError> {
            if let TableFactor::Table { name, args: None, .. } = factor {
                if let [only] = name.0.as_slice() {
                    let shown = self
                        .0
                        .relation(&only.to_string().trim_matches('"').replace("\"\"", "\""));
                    *name = ObjectName::from(vec![Ident::new(shown)]);
                }
            }
            Ok(())
        }
    }
    // The walk only renames: it cannot fail.
    let _ = crate::translate::walk::query(&mut Rename(env.namer), &mut query);
    query.to_string()
}

/// One FROM item as expressions see it.
struct Item {
    refname: String,
    /// Its columns, if known.
    columns: Option<Vec<(String, Ty)>>,
}

/// ruleutils' deparse context: the text so far, the indentation level and the FROM items in scope.
pub(super) struct Deparser<'a> {
    pub(super) out: String,
    indent: i32,
    pub(super) pretty: bool,
    pub(super) env: &'a Env<'a>,
    scopes: Vec<Vec<Item>>,
    pub(super) failed: bool,
}

impl typed::Scope for Deparser<'_> {
    fn column(&self, qualifier: Option<&str>, name: &str) -> Option<(String, Ty)> {
        for scope in self.scopes.iter().rev() {
            for item in scope {
                if qualifier.is_some_and(|q| q != item.refname) {
                    continue;
                }
                match &item.columns {
                    Some(columns) => {
                        if let Some((_, ty)) = columns.iter().find(|(c, _)| c == name) {
                            return Some((item.refname.clone(), *ty));
                        }
                    }
                    // Columns unknown: the only item of its FROM, or the one named, has it.
                    None if qualifier.is_some() || scope.len() == 1 => return Some((item.refname.clone(), Ty::Opaque)),
                    None => {}
                }
            }
        }
        None
    }

    fn type_name(&self, ty: PgType) -> String {
        self.scope_type_name(ty)
    }

    fn canonical(&self, ty: PgType, text: &str) -> Option<String> {
        let tz = self.env.state.time_zone();
        let value = crate::value::input(ty, text, &tz).ok()?;
        crate::value::output(ty, &value, &tz)
    }
}

impl Deparser<'_> {
    /// A type's name as the path shows it.
    pub(super) fn scope_type_name(&self, ty: PgType) -> String {
        super::helpers::type_shown(self.env.state, self.env.namer, ty)
    }

    /// ruleutils' `appendContextKeyword`.
    pub(super) fn keyword(&mut self, text: &str, indent_before: i32, indent_after: i32, indent_plus: i32) {
        self.indent += indent_before;
        let trimmed = self.out.trim_end_matches(' ').len();
        self.out.truncate(trimmed);
        self.out.push('\n');
        let spaces = usize::try_from(self.indent.max(0) + indent_plus).unwrap_or(0);
        self.out.push_str(&" ".repeat(spaces));
        self.out.push_str(text);
        self.indent = (self.indent + indent_after).max(0);
    }

    /// Prints into a buffer of its own, returned (the context's indentation carries over).
    fn captured(&mut self, print: impl FnOnce(&mut Self)) -> String {
        let outer = std::mem::take(&mut self.out);
        print(self);
        std::mem::replace(&mut self.out, outer)
    }

    fn build(&mut self, expr: &Expr) -> Option<typed::Typed> {
        match typed::build(expr, &*self) {
            Ok(built) => Some(built),
            Err(Unsupported) => {
                self.failed = true;
                None
            }
        }
    }

    /// A subquery of an expression, at the current indentation.
    pub(super) fn subquery(&mut self, query: &Query) {
        let indent = self.indent;
        self.query(query);
        self.indent = indent;
    }

    /// `get_query_def` at the current indentation.
    fn query(&mut self, query: &Query) {
        if query.with.is_some() || query.fetch.is_some() || !query.locks.is_empty() || self.scopes.len() >= DEPTH_MAX {
            self.failed = true;
            return;
        }
        let indent = self.indent;
        match query.body.as_ref() {
            SetExpr::Select(select) => {
                self.scopes.push(Vec::new());
                self.register_from(&select.from);
                let targets = self.select(select);
                self.order_and_limit(query, &targets);
                self.scopes.pop();
            }
            SetExpr::SetOperation { .. } if query.order_by.is_none() && query.limit_clause.is_none() => {
                self.set_operation(query.body.as_ref());
            }
            _ => self.failed = true,
        }
        self.indent = indent;
    }

    fn set_operation(&mut self, body: &SetExpr) {
        match body {
            SetExpr::Select(select) => {
                let indent = self.indent;
                self.scopes.push(Vec::new());
                self.register_from(&select.from);
                self.select(select);
                self.scopes.pop();
                self.indent = indent;
            }
            SetExpr::Query(leaf) => {
                let paren = leaf.order_by.is_some() || leaf.limit_clause.is_some();
                if paren {
                    self.out.push('(');
                }
                self.subquery(leaf);
                if paren {
                    self.out.push(')');
                }
            }
            SetExpr::SetOperation {
                op,
                set_quantifier,
                left,
                right,
            } => {
                let same_left = matches!(left.as_ref(), SetExpr::SetOperation { op: lop, set_quantifier: lq, .. }
                    if lop == op && lq == set_quantifier);
                let left_paren = matches!(left.as_ref(), SetExpr::SetOperation { .. }) && !same_left;
                let sub = if left_paren { INDENT_STD } else { 0 };
                if left_paren {
                    self.out.push('(');
                    self.keyword("", sub, 0, 0);
                }
                self.set_operation(left);
                if left_paren {
                    self.keyword(") ", -sub, 0, 0);
                } else {
                    self.keyword("", -sub, 0, 0);
                }
                self.out.push_str(match op {
                    SetOperator::Union => "UNION ",
                    SetOperator::Intersect => "INTERSECT ",
                    _ => "EXCEPT ",
                });
                if matches!(set_quantifier, SetQuantifier::All) {
                    self.out.push_str("ALL ");
                }
                let right_paren = matches!(right.as_ref(), SetExpr::SetOperation { .. });
                let sub = if right_paren { INDENT_STD } else { 0 };
                if right_paren {
                    self.out.push('(');
                }
                self.keyword("", sub, 0, 0);
                self.set_operation(right);
                self.indent -= sub;
                if right_paren {
                    self.keyword(")", 0, 0, 0);
                }
            }
            _ => self.failed = true,
        }
    }

    /// The FROM items of a SELECT put in scope, each with its columns where known.
    fn register_from(&mut self, from: &[TableWithJoins]) {
        let mut items = Vec::new();
        for table in from {
            from::collect_items(&table.relation, self.env, &mut items);
            for join in &table.joins {
                from::collect_items(&join.relation, self.env, &mut items);
            }
        }
        if let Some(scope) = self.scopes.last_mut() {
            *scope = items;
        }
    }

    /// `get_basic_select_query`: returns the target list's nodes and names (for ORDER BY).
    fn select(&mut self, select: &Select) -> Vec<(Node, String)> {
        self.indent += INDENT_STD;
        self.out.push(' ');
        self.out.push_str("SELECT");
        match &select.distinct {
            None | Some(Distinct::All) => {}
            Some(Distinct::Distinct) => self.out.push_str(" DISTINCT"),
            Some(Distinct::On(keys)) => {
                self.out.push_str(" DISTINCT ON (");
                for (i, key) in keys.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    if let Some(node) = self.build(key) {
                        self.sort_key(&node.node);
                    }
                }
                self.out.push(')');
            }
        }
        let targets = self.targets(&select.projection);
        self.print_targets(&targets);
        self.print_from(&select.from);
        if let Some(selection) = &select.selection {
            self.keyword(" WHERE ", -INDENT_STD, INDENT_STD, 1);
            if let Some(node) = self.build(selection) {
                self.expr(&node.node);
            }
        }
        match &select.group_by {
            GroupByExpr::Expressions(keys, modifiers) if modifiers.is_empty() => {
                if !keys.is_empty() {
                    self.keyword(" GROUP BY ", -INDENT_STD, INDENT_STD, 1);
                    for (i, key) in keys.iter().enumerate() {
                        if i > 0 {
                            self.out.push_str(", ");
                        }
                        if let Some(node) = self.sort_target(key, &targets, false) {
                            self.sort_key(&node);
                        }
                    }
                }
            }
            _ => self.failed = true,
        }
        if let Some(having) = &select.having {
            self.keyword(" HAVING ", -INDENT_STD, INDENT_STD, 0);
            if let Some(node) = self.build(having) {
                self.expr(&node.node);
            }
        }
        if select.qualify.is_some() || !select.named_window.is_empty() || select.into.is_some() {
            self.failed = true;
        }
        targets
    }

    /// The target list: each item's node and output name (`*` expanded to the columns of the FROM items).
    fn targets(&mut self, projection: &[SelectItem]) -> Vec<(Node, String)> {
        let mut targets = Vec::new();
        for item in projection {
            match item {
                SelectItem::ExprWithAlias { expr, alias } => {
                    if let Some(node) = self.build(expr) {
                        targets.push((node.node, crate::translate::schema::fold_ident(alias)));
                    }
                }
                SelectItem::UnnamedExpr(expr) => {
                    if let Some(node) = self.build(expr) {
                        let name = match &node.node {
                            Node::Var { name, .. } => name.clone(),
                            Node::Func { name, .. } => name.clone(),
                            _ => "?column?".to_owned(),
                        };
                        targets.push((node.node, name));
                    }
                }
                SelectItem::Wildcard(_) => self.expand(None, &mut targets),
                SelectItem::QualifiedWildcard(sqlparser::ast::SelectItemQualifiedWildcardKind::ObjectName(name), _) => {
                    let qualifier = crate::translate::schema::folded_parts(name).pop();
                    self.expand(qualifier.as_deref(), &mut targets);
                }
                _ => self.failed = true,
            }
        }
        targets
    }

    fn expand(&mut self, qualifier: Option<&str>, targets: &mut Vec<(Node, String)>) {
        let Some(scope) = self.scopes.last() else {
            self.failed = true;
            return;
        };
        for item in scope.iter().filter(|i| qualifier.is_none_or(|q| q == i.refname)) {
            let Some(columns) = &item.columns else {
                self.failed = true;
                return;
            };
            for (name, _) in columns {
                let var = Node::Var {
                    prefix: item.refname.clone(),
                    name: name.clone(),
                };
                targets.push((var, name.clone()));
            }
        }
    }

    /// `get_target_list`: one item a line after the first (ruleutils' wrap column 0).
    fn print_targets(&mut self, targets: &[(Node, String)]) {
        let mut separator = " ";
        for (number, (node, name)) in targets.iter().enumerate() {
            self.out.push_str(separator);
            separator = ", ";
            let text = self.captured(|d| {
                d.expr(node);
                let own = match node {
                    Node::Var { name, .. } => Some(name.as_str()),
                    _ => None,
                };
                if own != Some(name.as_str()) {
                    d.out.push_str(" AS ");
                    d.out.push_str(&super::deparse::quote_ident(name));
                }
            });
            if text.starts_with('\n') {
                let trimmed = self.out.trim_end_matches(' ').len();
                self.out.truncate(trimmed);
            } else if number > 0 {
                self.keyword("", -INDENT_STD, INDENT_STD, INDENT_VAR);
            }
            self.out.push_str(&text);
        }
    }

    /// A GROUP BY or ORDER BY key: a position or (ORDER BY first, GROUP BY after the FROM items' columns)
    /// an output name stands for that target's expression.
    fn sort_target(&mut self, key: &Expr, targets: &[(Node, String)], output_first: bool) -> Option<Node> {
        if let Expr::Value(v) = key {
            if let sqlparser::ast::Value::Number(n, _) = &v.value {
                let found = n
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| i.checked_sub(1))
                    .and_then(|i| targets.get(i));
                if found.is_none() {
                    self.failed = true;
                }
                return found.map(|(node, _)| node.clone());
            }
        }
        if let Expr::Identifier(ident) = key {
            let name = crate::translate::schema::fold_ident(ident);
            let output = targets.iter().find(|(_, n)| *n == name).map(|(node, _)| node.clone());
            let input = typed::Scope::column(&*self, None, &name).is_some();
            if output.is_some() && (output_first || !input) {
                return output;
            }
        }
        self.build(key).map(|t| t.node)
    }

    fn order_and_limit(&mut self, query: &Query, targets: &[(Node, String)]) {
        if let Some(order_by) = &query.order_by {
            let OrderByKind::Expressions(items) = &order_by.kind else {
                self.failed = true;
                return;
            };
            self.keyword(" ORDER BY ", -INDENT_STD, INDENT_STD, 1);
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    self.out.push_str(", ");
                }
                let Some(node) = self.sort_target(&item.expr, targets, true) else {
                    continue;
                };
                self.sort_key(&node);
                match calls::sort_suffix(&item.options) {
                    Ok(suffix) => self.out.push_str(&suffix),
                    Err(Unsupported) => self.failed = true,
                }
            }
        }
        let (limit, offset) = match &query.limit_clause {
            None => (None, None),
            Some(LimitClause::LimitOffset {
                limit,
                offset,
                limit_by,
                ..
            }) if limit_by.is_empty() => (limit.as_ref(), offset.as_ref().map(|o| &o.value)),
            Some(_) => {
                self.failed = true;
                return;
            }
        };
        if let Some(offset) = offset {
            self.keyword(" OFFSET ", -INDENT_STD, INDENT_STD, 0);
            if let Some(node) = self.build(offset) {
                self.expr(&node.node);
            }
        }
        if let Some(limit) = limit {
            self.keyword(" LIMIT ", -INDENT_STD, INDENT_STD, 0);
            match self.build(limit) {
                Some(node) if matches!(node.node, Node::Const { null: true, .. }) => self.out.push_str("ALL"),
                Some(node) => self.expr(&node.node),
                None => {}
            }
        }
    }
}

/// The output names of a subquery's items, where each is named or a column.
fn output_names(query: &Query) -> Option<Vec<String>> {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    select
        .projection
        .iter()
        .map(|item| match item {
            SelectItem::ExprWithAlias { alias, .. } => Some(crate::translate::schema::fold_ident(alias)),
            SelectItem::UnnamedExpr(Expr::Identifier(ident)) => Some(crate::translate::schema::fold_ident(ident)),
            SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => {
                parts.last().map(crate::translate::schema::fold_ident)
            }
            _ => None,
        })
        .collect()
}
