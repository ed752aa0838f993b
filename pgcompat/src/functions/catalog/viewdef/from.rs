//! FROM clauses as ruleutils prints them (`get_from_clause`): the first item after ` FROM `, each other on a
//! line of its own, joins as the parser's left-deep tree (every join in parentheses without `pretty`), and the
//! FROM items' reference names and columns the expressions are resolved against.

use sqlparser::ast::{Join, JoinConstraint, JoinOperator, ObjectName, TableFactor, TableWithJoins};

use super::typed::Ty;
use super::{output_names, Deparser, Env, Item, INDENT_JOIN, INDENT_STD, INDENT_VAR};

impl Deparser<'_> {
    /// `get_from_clause`: the first item after ` FROM `, each other on a line of its own.
    pub(super) fn print_from(&mut self, from: &[TableWithJoins]) {
        for (i, table) in from.iter().enumerate() {
            if i == 0 {
                self.keyword(" FROM ", -INDENT_STD, INDENT_STD, 2);
                self.joined(&table.relation, &table.joins);
                continue;
            }
            self.out.push_str(", ");
            let text = self.captured(|d| d.joined(&table.relation, &table.joins));
            if text.starts_with('\n') {
                let trimmed = self.out.trim_end_matches(' ').len();
                self.out.truncate(trimmed);
            } else {
                self.keyword("", -INDENT_STD, INDENT_STD, INDENT_VAR);
            }
            self.out.push_str(&text);
        }
    }

    /// A FROM item and the joins after it, as the left-deep tree the parser makes of them.
    fn joined(&mut self, first: &TableFactor, joins: &[Join]) {
        let Some((last, rest)) = joins.split_last() else {
            self.factor(first);
            return;
        };
        let (word, constraint) = match &last.join_operator {
            JoinOperator::Join(c) | JoinOperator::Inner(c) => (" JOIN ", c),
            JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (" LEFT JOIN ", c),
            JoinOperator::Right(c) | JoinOperator::RightOuter(c) => (" RIGHT JOIN ", c),
            JoinOperator::FullOuter(c) => (" FULL JOIN ", c),
            JoinOperator::CrossJoin(c) => (" CROSS JOIN ", c),
            _ => {
                self.failed = true;
                return;
            }
        };
        let inner = matches!(word, " JOIN " | " CROSS JOIN ");
        let word = if inner && matches!(constraint, JoinConstraint::None) {
            " CROSS JOIN "
        } else {
            word
        };
        if !self.pretty {
            self.out.push('(');
        }
        self.joined(first, rest);
        self.keyword(word, -INDENT_STD, INDENT_STD, INDENT_JOIN);
        let right_paren = self.pretty && matches!(last.relation, TableFactor::NestedJoin { .. });
        if right_paren {
            self.out.push('(');
        }
        self.factor(&last.relation);
        if right_paren {
            self.out.push(')');
        }
        match constraint {
            JoinConstraint::On(on) => {
                self.out.push_str(" ON ");
                if !self.pretty {
                    self.out.push('(');
                }
                if let Some(node) = self.build(on) {
                    self.expr(&node.node);
                }
                if !self.pretty {
                    self.out.push(')');
                }
            }
            JoinConstraint::Using(columns) => {
                let names: Vec<String> = columns
                    .iter()
                    .map(|c| super::super::deparse::quote_ident(&crate::translate::schema::folded_parts(c).join(".")))
                    .collect();
                self.out.push_str(&format!(" USING ({})", names.join(", ")));
            }
            JoinConstraint::None if !inner => self.out.push_str(" ON TRUE"),
            JoinConstraint::None => {}
            JoinConstraint::Natural | JoinConstraint::UsingAlias(..) => self.failed = true,
        }
        if !self.pretty {
            self.out.push(')');
        }
    }

    fn factor(&mut self, factor: &TableFactor) {
        match factor {
            TableFactor::Table {
                name,
                alias,
                args: None,
                ..
            } => {
                let (shown, _) = relation_shown(name, self.env);
                self.out.push_str(&shown);
                if let Some(alias) = alias {
                    if !alias.columns.is_empty() {
                        self.failed = true;
                    }
                    self.out.push(' ');
                    self.out.push_str(&super::super::deparse::quote_ident(
                        &crate::translate::schema::fold_ident(&alias.name),
                    ));
                }
            }
            TableFactor::Derived {
                lateral: false,
                subquery,
                alias: Some(alias),
                ..
            } if alias.columns.is_empty() => {
                self.out.push('(');
                self.subquery(subquery);
                self.out.push_str(") ");
                self.out.push_str(&super::super::deparse::quote_ident(
                    &crate::translate::schema::fold_ident(&alias.name),
                ));
            }
            TableFactor::NestedJoin {
                table_with_joins,
                alias: None,
            } => self.joined(&table_with_joins.relation, &table_with_joins.joins),
            _ => self.failed = true,
        }
    }
}

/// A FROM item's relation as printed, and its own (bare) name.
pub(super) fn relation_shown(name: &ObjectName, env: &Env<'_>) -> (String, String) {
    let parts = crate::translate::schema::folded_parts(name);
    match parts.as_slice() {
        // A catalog relation: `pg_catalog` is always searched first, `information_schema` is not.
        [schema, relation] if schema == "pg_catalog" => {
            (super::super::deparse::quote_ident(relation), relation.clone())
        }
        [schema, relation] => (
            format!(
                "{}.{}",
                super::super::deparse::quote_ident(schema),
                super::super::deparse::quote_ident(relation)
            ),
            relation.clone(),
        ),
        [sqlite] => {
            let schemas = env.namer.schemas();
            let (_, bare) = crate::schemas::split_sqlite_name(sqlite, &schemas);
            (env.namer.relation(sqlite), bare.to_owned())
        }
        _ => (name.to_string(), name.to_string()),
    }
}

/// The FROM items of a FROM item (a join's, a nested join's) with their reference names and columns.
pub(super) fn collect_items(factor: &TableFactor, env: &Env<'_>, items: &mut Vec<Item>) {
    match factor {
        TableFactor::Table { name, alias, .. } => {
            let (_, bare) = relation_shown(name, env);
            let refname = alias
                .as_ref()
                .map_or(bare, |a| crate::translate::schema::fold_ident(&a.name));
            let parts = crate::translate::schema::folded_parts(name);
            let columns = match parts.as_slice() {
                [sqlite] => env.columns.get(&sqlite.to_ascii_lowercase()).map(|list| {
                    list.iter()
                        .map(|(c, t)| (c.clone(), t.map_or(Ty::Opaque, Ty::Known)))
                        .collect()
                }),
                _ => None,
            };
            items.push(Item { refname, columns });
        }
        TableFactor::Derived {
            subquery,
            alias: Some(alias),
            ..
        } => {
            let columns = output_names(subquery).map(|names| names.into_iter().map(|n| (n, Ty::Opaque)).collect());
            items.push(Item {
                refname: crate::translate::schema::fold_ident(&alias.name),
                columns,
            });
        }
        TableFactor::NestedJoin { table_with_joins, .. } => {
            collect_items(&table_with_joins.relation, env, items);
            for join in &table_with_joins.joins {
                collect_items(&join.relation, env, items);
            }
        }
        _ => {}
    }
}
