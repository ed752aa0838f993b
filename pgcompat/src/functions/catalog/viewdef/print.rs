//! Expression nodes printed as PostgreSQL 15's ruleutils prints them (`get_rule_expr`): without the
//! `pretty` flag every operator and boolean expression in parentheses and every cast as `(x)::type`; with it,
//! parentheses only where precedence needs them (`isSimpleNode`).

use super::typed::{Node, SubLinkKind, Ty, Window};
use super::Deparser;
use crate::types::Base;

/// What a node is printed inside, for the `pretty` parenthesization.
#[derive(Clone, Copy)]
pub(super) enum Parent<'a> {
    Op(&'a str),
    Bool(BoolKind),
    /// A cast: its argument is parenthesized unless it is a single word or call.
    Cast,
    /// A test (`IS NULL`, `= ANY`): like an operator of no known precedence.
    Other,
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum BoolKind {
    And,
    Or,
    Not,
}

fn simple_op_rank(op: &str) -> Option<u8> {
    match op {
        "+" | "-" => Some(1),
        "*" | "/" | "%" => Some(2),
        _ => None,
    }
}

/// ruleutils' `isSimpleNode`: whether `node` needs no parentheses inside `parent` in pretty mode.
fn is_simple(node: &Node, parent: Parent<'_>, left_of_parent: bool) -> bool {
    match node {
        Node::Var { .. }
        | Node::Const { .. }
        | Node::Func { .. }
        | Node::Special { .. }
        | Node::Keyword(_)
        | Node::Array(_)
        | Node::Case { .. }
        | Node::Cast { .. } => true,
        Node::Op { op, left, .. } => {
            if let Parent::Op(parent_op) = parent {
                let (Some(rank), Some(parent_rank)) = (simple_op_rank(op), simple_op_rank(parent_op)) else {
                    return false;
                };
                // A binary operator of higher priority, or of the same on the parent's left side.
                return left.is_some() && (rank > parent_rank || (rank == parent_rank && left_of_parent));
            }
            inside_enclosing(parent)
        }
        Node::NullTest { .. } | Node::BoolTest { .. } | Node::SubLink { .. } | Node::ArrayOp { .. } => {
            inside_enclosing(parent)
        }
        Node::And(_) | Node::Or(_) | Node::Not(_) => {
            let kind = match node {
                Node::And(_) => BoolKind::And,
                Node::Or(_) => BoolKind::Or,
                _ => BoolKind::Not,
            };
            match parent {
                Parent::Bool(parent_kind) => match kind {
                    BoolKind::Not | BoolKind::And => matches!(parent_kind, BoolKind::And | BoolKind::Or),
                    BoolKind::Or => parent_kind == BoolKind::Or,
                },
                _ => false,
            }
        }
    }
}

/// Whether a test or operator needs no parentheses inside `parent`: only a boolean expression's (a call's
/// arguments are printed without asking).
fn inside_enclosing(parent: Parent<'_>) -> bool {
    matches!(parent, Parent::Bool(_))
}

impl Deparser<'_> {
    fn open(&mut self) {
        if !self.pretty {
            self.out.push('(');
        }
    }

    fn close(&mut self) {
        if !self.pretty {
            self.out.push(')');
        }
    }

    /// `get_rule_expr_paren`.
    pub(super) fn expr_paren(&mut self, node: &Node, parent: Parent<'_>, left_of_parent: bool) {
        let paren = self.pretty && !is_simple(node, parent, left_of_parent);
        if paren {
            self.out.push('(');
        }
        self.expr(node);
        if paren {
            self.out.push(')');
        }
    }

    /// `get_rule_expr`.
    pub(super) fn expr(&mut self, node: &Node) {
        match node {
            Node::Var { prefix, name } => {
                self.out.push_str(&quote(prefix));
                self.out.push('.');
                self.out.push_str(&quote(name));
            }
            Node::Const { text, ty, null } => self.constant(text, *ty, *null, false),
            Node::Op { op, left, right } => {
                self.open();
                if let Some(left) = left {
                    self.expr_paren(left, Parent::Op(op), true);
                    self.out.push_str(&format!(" {op} "));
                } else {
                    self.out.push_str(&format!("{op} "));
                }
                self.expr_paren(right, Parent::Op(op), false);
                self.close();
            }
            Node::And(args) | Node::Or(args) => {
                let (kind, word) = if matches!(node, Node::And(_)) {
                    (BoolKind::And, " AND ")
                } else {
                    (BoolKind::Or, " OR ")
                };
                self.open();
                for (i, arg) in args.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(word);
                    }
                    self.expr_paren(arg, Parent::Bool(kind), false);
                }
                self.close();
            }
            Node::Not(arg) => {
                self.open();
                self.out.push_str("NOT ");
                self.expr_paren(arg, Parent::Bool(BoolKind::Not), false);
                self.close();
            }
            Node::Func { .. } => self.call(node),
            Node::Special { name, args } => {
                self.out.push_str(name);
                self.out.push('(');
                self.list(args);
                self.out.push(')');
            }
            Node::Keyword(word) => self.out.push_str(word),
            Node::Cast { arg, to, .. } => {
                self.open();
                self.expr_paren(arg, Parent::Cast, false);
                self.close();
                self.out.push_str("::");
                self.out.push_str(to);
            }
            Node::NullTest { arg, not } => {
                self.open();
                self.expr_paren(arg, Parent::Other, false);
                self.out.push_str(if *not { " IS NOT NULL" } else { " IS NULL" });
                self.close();
            }
            Node::BoolTest { arg, test } => {
                self.open();
                self.expr_paren(arg, Parent::Other, false);
                self.out.push(' ');
                self.out.push_str(test);
                self.close();
            }
            Node::Case {
                operand,
                whens,
                otherwise,
            } => self.case(operand.as_deref(), whens, otherwise),
            Node::ArrayOp { left, op, all, array } => {
                self.open();
                self.expr_paren(left, Parent::Other, false);
                self.out
                    .push_str(&format!(" {op} {} (", if *all { "ALL" } else { "ANY" }));
                self.expr_paren(array, Parent::Other, false);
                self.out.push(')');
                self.close();
            }
            Node::Array(items) => {
                self.out.push_str("ARRAY[");
                self.list(items);
                self.out.push(']');
            }
            Node::SubLink { kind, query, negated } => self.sublink(kind, query, *negated),
        }
    }

    fn list(&mut self, items: &[Node]) {
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.expr(item);
        }
    }

    /// `get_const_expr`: `showtype` forces the type label (a constant GROUP BY or ORDER BY key).
    pub(super) fn constant(&mut self, text: &str, ty: Ty, null: bool, showtype: bool) {
        let label = |d: &Self| match ty {
            Ty::Known(t) => format!("::{}", d.scope_type_name(t)),
            _ => String::new(),
        };
        if null {
            self.out.push_str("NULL");
            let label = label(self);
            self.out.push_str(&label);
            return;
        }
        let quoted = format!("'{}'", text.replace('\'', "''"));
        let (shown, needs_label) = match ty {
            Ty::Known(t) if !t.is_array() && t.base() == Base::Int4 => {
                if text.starts_with('-') {
                    (quoted, true)
                } else {
                    (text.to_owned(), false)
                }
            }
            Ty::Known(t) if !t.is_array() && t.base() == Base::Numeric => {
                let looks_float = text.starts_with(|c: char| c.is_ascii_digit()) && text.contains(['.', 'e', 'E']);
                if looks_float {
                    (text.to_owned(), false)
                } else {
                    (quoted, true)
                }
            }
            Ty::Known(t) if !t.is_array() && t.base() == Base::Bool => {
                let truth = matches!(
                    text.to_ascii_lowercase().as_str(),
                    "t" | "true" | "y" | "yes" | "on" | "1"
                );
                ((if truth { "true" } else { "false" }).to_owned(), false)
            }
            Ty::Known(_) => (quoted, true),
            _ => (quoted, false),
        };
        self.out.push_str(&shown);
        if needs_label || (showtype && matches!(ty, Ty::Known(_))) {
            let label = label(self);
            self.out.push_str(&label);
        }
    }

    fn call(&mut self, node: &Node) {
        let Node::Func {
            name,
            args,
            star,
            distinct,
            over,
            filter,
        } = node
        else {
            return;
        };
        self.out.push_str(&quote(name));
        self.out.push('(');
        if *distinct {
            self.out.push_str("DISTINCT ");
        }
        if *star {
            self.out.push('*');
        } else {
            self.list(args);
        }
        self.out.push(')');
        if let Some(filter) = filter {
            self.out.push_str(" FILTER (WHERE ");
            self.expr(filter);
            self.out.push(')');
        }
        if let Some(window) = over {
            self.window(window);
        }
    }

    fn window(&mut self, window: &Window) {
        self.out.push_str(" OVER (");
        let mut space = false;
        if !window.partition.is_empty() {
            self.out.push_str("PARTITION BY ");
            for (i, key) in window.partition.iter().enumerate() {
                if i > 0 {
                    self.out.push_str(", ");
                }
                self.sort_key(key);
            }
            space = true;
        }
        if !window.order.is_empty() {
            if space {
                self.out.push(' ');
            }
            self.out.push_str("ORDER BY ");
            for (i, (key, suffix)) in window.order.iter().enumerate() {
                if i > 0 {
                    self.out.push_str(", ");
                }
                self.sort_key(key);
                self.out.push_str(suffix);
            }
        }
        self.out.push(')');
    }

    /// `get_rule_sortgroupclause`: a constant with its type, a column as it is, a call in parentheses (and,
    /// pretty, any other expression).
    pub(super) fn sort_key(&mut self, node: &Node) {
        match node {
            Node::Const { text, ty, null } => self.constant(text, *ty, *null, true),
            Node::Var { .. } => self.expr(node),
            _ => {
                let paren = self.pretty || matches!(node, Node::Func { .. } | Node::Cast { .. });
                if paren {
                    self.out.push('(');
                }
                self.expr(node);
                if paren {
                    self.out.push(')');
                }
            }
        }
    }

    fn case(&mut self, operand: Option<&Node>, whens: &[(Node, Node)], otherwise: &Node) {
        self.keyword("CASE", 0, super::INDENT_VAR, 0);
        if let Some(operand) = operand {
            self.out.push(' ');
            self.expr(operand);
        }
        for (test, result) in whens {
            self.keyword("WHEN ", 0, 0, 0);
            self.expr(test);
            self.out.push_str(" THEN ");
            self.expr(result);
        }
        self.keyword("ELSE ", 0, 0, 0);
        self.expr(otherwise);
        self.keyword("END", -super::INDENT_VAR, 0, 0);
    }

    fn sublink(&mut self, kind: &SubLinkKind, query: &sqlparser::ast::Query, negated: bool) {
        if negated {
            self.open();
            self.out.push_str("NOT ");
        }
        self.out.push('(');
        let paren = match kind {
            SubLinkKind::Exists => {
                self.out.push_str("EXISTS ");
                true
            }
            SubLinkKind::In(left) => {
                self.expr(left);
                self.out.push_str(" IN ");
                true
            }
            SubLinkKind::Expr => false,
        };
        if paren {
            self.out.push('(');
        }
        self.subquery(query);
        self.out.push_str(if paren { "))" } else { ")" });
        if negated {
            self.close();
        }
    }
}

fn quote(name: &str) -> String {
    super::super::deparse::quote_ident(name)
}
