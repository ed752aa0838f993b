//! What a `CREATE TABLE` text (SQLite's, as the layer wrote it) declares: its constraints with PostgreSQL's
//! names and `pg_get_constraintdef` texts, and its serial column.

use serde_json::json;
use sqlparser::ast::{
    ColumnOption, CreateTable, Expr, Ident, ObjectName, ReferentialAction, Statement, TableConstraint,
};
use sqlparser::dialect::SQLiteDialect;
use sqlparser::parser::Parser;

use super::deparse::{expression_text, quote_ident};

fn parse_create_table(sql: &str) -> Option<CreateTable> {
    let mut statements = Parser::parse_sql(&SQLiteDialect {}, sql).ok()?;
    match statements.pop()? {
        Statement::CreateTable(create) => Some(create),
        _ => None,
    }
}

/// The numeric columns of a table: DDL gives them the `pg_numeric` collation, which is how the text tells them.
fn numeric_columns(create: &CreateTable) -> Vec<String> {
    create
        .columns
        .iter()
        .filter(|c| {
            c.options.iter().any(|o| {
                matches!(&o.option, ColumnOption::Collation(name) if name.to_string().eq_ignore_ascii_case("pg_numeric"))
            })
        })
        .map(|c| ident_text(&c.name))
        .collect()
}

/// The expression of a generated column of a `CREATE TABLE` text, as PostgreSQL prints it (`pg_get_expr` of its
/// `pg_attrdef` row: `(id * 2)`).
pub(super) fn generation_expression(sql: &str, column: &str) -> Option<String> {
    let create = parse_create_table(sql)?;
    let numeric = numeric_columns(&create);
    let def = create
        .columns
        .iter()
        .find(|c| c.name.value.eq_ignore_ascii_case(column))?;
    def.options.iter().find_map(|option| match &option.option {
        ColumnOption::Generated {
            generation_expr: Some(expr),
            ..
        } => Some(match expr {
            Expr::Nested(_) | Expr::Function(_) | Expr::Identifier(_) | Expr::Value(_) => {
                expression_text(expr, &numeric)
            }
            other => format!("({})", expression_text(other, &numeric)),
        }),
        _ => None,
    })
}

/// The column of a `CREATE TABLE` text that is `AUTOINCREMENT` (a serial or identity key).
pub(super) fn serial_column(sql: &str) -> Option<String> {
    if !sql.to_ascii_uppercase().contains("AUTOINCREMENT") {
        return None;
    }
    let create = parse_create_table(sql)?;
    create
        .columns
        .iter()
        .find(|c| c.to_string().to_ascii_uppercase().contains("AUTOINCREMENT"))
        .map(|c| c.name.value.clone())
}

fn ident_text(ident: &Ident) -> String {
    ident.value.clone()
}

fn object_last(name: &ObjectName) -> String {
    match name.0.last() {
        Some(sqlparser::ast::ObjectNamePart::Identifier(ident)) => ident.value.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

fn action_code(action: Option<&ReferentialAction>) -> &'static str {
    match action {
        Some(ReferentialAction::Restrict) => "r",
        Some(ReferentialAction::Cascade) => "c",
        Some(ReferentialAction::SetNull) => "n",
        Some(ReferentialAction::SetDefault) => "d",
        _ => "a",
    }
}

fn initially_deferred(characteristics: Option<&sqlparser::ast::ConstraintCharacteristics>) -> bool {
    characteristics
        .is_some_and(|c| c.deferrable == Some(true) && c.initially == Some(sqlparser::ast::DeferrableInitial::Deferred))
}

fn action_text(code: &str) -> &'static str {
    match code {
        "r" => "RESTRICT",
        "c" => "CASCADE",
        "n" => "SET NULL",
        "d" => "SET DEFAULT",
        _ => "NO ACTION",
    }
}

fn cols_text(cols: &[String]) -> String {
    cols.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(", ")
}

/// One constraint read from a `CREATE TABLE` text.
struct Constraint {
    name: Option<String>,
    kind: char,
    cols: Vec<String>,
    ref_table: Option<String>,
    ref_cols: Vec<String>,
    on_update: &'static str,
    on_delete: &'static str,
    check: Option<String>,
    /// `DEFERRABLE INITIALLY DEFERRED` (the one deferrable form SQLite's text keeps: a foreign key's).
    deferred: bool,
}

/// The constraints of a `CREATE TABLE` text as a JSON array (`[]` when the text does not parse): each with
/// its PostgreSQL name (given, else made as PostgreSQL makes it), kind (`p u f c`), columns, referenced
/// table and columns, actions and `pg_get_constraintdef` text (`{REFCOLS}` standing for referenced columns
/// left implicit, which the view fills from the referenced table's key, and `{REFTABLE}` for the referenced
/// table, which the view names as the session's `search_path` shows it).
pub(super) fn constraints(table: &str, sql: &str) -> String {
    let Some(create) = parse_create_table(sql) else {
        return "[]".to_owned();
    };
    let numeric = numeric_columns(&create);
    let expression_text = |expr: &Expr| expression_text(expr, &numeric);
    let mut list: Vec<Constraint> = Vec::new();
    for column in &create.columns {
        let col = ident_text(&column.name);
        for option in &column.options {
            // The name DDL gives an identity key's PRIMARY KEY marks it; it is no constraint name.
            let name = option
                .name
                .as_ref()
                .map(ident_text)
                .filter(|n| !n.starts_with("_cambium_identity_"));
            let single = vec![col.clone()];
            match &option.option {
                ColumnOption::PrimaryKey(_) => list.push(Constraint::keyed(name, 'p', single)),
                ColumnOption::Unique(_) => list.push(Constraint::keyed(name, 'u', single)),
                ColumnOption::ForeignKey(fk) => list.push(Constraint {
                    name,
                    kind: 'f',
                    cols: single,
                    ref_table: Some(object_last(&fk.foreign_table)),
                    ref_cols: fk.referred_columns.iter().map(ident_text).collect(),
                    on_update: action_code(fk.on_update.as_ref()),
                    on_delete: action_code(fk.on_delete.as_ref()),
                    check: None,
                    deferred: initially_deferred(fk.characteristics.as_ref()),
                }),
                ColumnOption::Check(check) => {
                    let mut c = Constraint::keyed(name, 'c', single);
                    c.check = Some(expression_text(&check.expr));
                    list.push(c);
                }
                _ => {}
            }
        }
    }
    for constraint in &create.constraints {
        let index_cols = |cols: &[sqlparser::ast::IndexColumn]| -> Vec<String> {
            cols.iter()
                .map(|c| match &c.column.expr {
                    Expr::Identifier(ident) => ident.value.clone(),
                    other => other.to_string(),
                })
                .collect()
        };
        match constraint {
            TableConstraint::PrimaryKey(pk) => list.push(Constraint::keyed(
                pk.name.as_ref().map(ident_text),
                'p',
                index_cols(&pk.columns),
            )),
            TableConstraint::Unique(u) => list.push(Constraint::keyed(
                u.name.as_ref().map(ident_text),
                'u',
                index_cols(&u.columns),
            )),
            TableConstraint::ForeignKey(fk) => list.push(Constraint {
                name: fk.name.as_ref().map(ident_text),
                kind: 'f',
                cols: fk.columns.iter().map(ident_text).collect(),
                ref_table: Some(object_last(&fk.foreign_table)),
                ref_cols: fk.referred_columns.iter().map(ident_text).collect(),
                on_update: action_code(fk.on_update.as_ref()),
                on_delete: action_code(fk.on_delete.as_ref()),
                check: None,
                deferred: initially_deferred(fk.characteristics.as_ref()),
            }),
            TableConstraint::Check(check) => {
                let text = expression_text(&check.expr);
                let cols = first_column(&check.expr).into_iter().collect();
                let mut c = Constraint::keyed(check.name.as_ref().map(ident_text), 'c', cols);
                c.check = Some(text);
                list.push(c);
            }
            _ => {}
        }
    }
    // PostgreSQL lists the primary key first among what a table declares; order by kind as it names them.
    list.sort_by_key(|c| match c.kind {
        'p' => 0,
        'u' => 1,
        'f' => 2,
        _ => 3,
    });
    let items: Vec<serde_json::Value> = list.iter().map(|c| c.to_json(table)).collect();
    serde_json::Value::Array(items).to_string()
}

impl Constraint {
    fn keyed(name: Option<String>, kind: char, cols: Vec<String>) -> Constraint {
        Constraint {
            name,
            kind,
            cols,
            ref_table: None,
            ref_cols: Vec::new(),
            on_update: " ",
            on_delete: " ",
            check: None,
            deferred: false,
        }
    }

    fn to_json(&self, table: &str) -> serde_json::Value {
        let suffix = match self.kind {
            'p' => "pkey",
            'u' => "key",
            'f' => "fkey",
            _ => "check",
        };
        let name = self.name.clone().unwrap_or_else(|| match self.kind {
            'p' => format!("{table}_pkey"),
            _ if self.cols.is_empty() => format!("{table}_{suffix}"),
            _ => format!("{table}_{}_{suffix}", self.cols.join("_")),
        });
        let def = match self.kind {
            'p' => format!("PRIMARY KEY ({})", cols_text(&self.cols)),
            'u' => format!("UNIQUE ({})", cols_text(&self.cols)),
            'f' => {
                let refs = if self.ref_cols.is_empty() {
                    "{REFCOLS}".to_owned()
                } else {
                    cols_text(&self.ref_cols)
                };
                let mut def = format!(
                    "FOREIGN KEY ({}) REFERENCES {{REFTABLE}}({refs})",
                    cols_text(&self.cols)
                );
                if self.on_update != "a" {
                    def.push_str(&format!(" ON UPDATE {}", action_text(self.on_update)));
                }
                if self.on_delete != "a" {
                    def.push_str(&format!(" ON DELETE {}", action_text(self.on_delete)));
                }
                if self.deferred {
                    def.push_str(" DEFERRABLE INITIALLY DEFERRED");
                }
                def
            }
            _ => format!("CHECK ({})", self.check.as_deref().unwrap_or_default()),
        };
        json!({
            "name": name,
            "type": self.kind.to_string(),
            "cols": self.cols,
            "ref_table": self.ref_table,
            "ref_cols": self.ref_cols,
            "upd": self.on_update,
            "del": self.on_delete,
            "def": def,
            "dfr": self.deferred,
            "dfd": self.deferred,
        })
    }
}

/// The first column an expression mentions (PostgreSQL names a table CHECK after it).
fn first_column(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Identifier(ident) => Some(ident.value.clone()),
        Expr::CompoundIdentifier(parts) => parts.last().map(|p| p.value.clone()),
        Expr::BinaryOp { left, right, .. } => first_column(left).or_else(|| first_column(right)),
        Expr::Nested(inner) | Expr::UnaryOp { expr: inner, .. } => first_column(inner),
        Expr::Function(f) => match &f.args {
            sqlparser::ast::FunctionArguments::List(list) => list.args.iter().find_map(|a| match a {
                sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(e)) => first_column(e),
                _ => None,
            }),
            _ => None,
        },
        _ => None,
    }
}
