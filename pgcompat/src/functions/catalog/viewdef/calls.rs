//! Function calls of a view's expressions: their result types, the types their arguments are converted to,
//! the calls ruleutils prints in SQL syntax (`COALESCE`, `CURRENT_DATE`) and window clauses.

use sqlparser::ast::{Expr, Function, OrderByOptions, OrderBySort, WindowType};

use super::typed::{build, coerce, common_type, plain_args, Node, Scope, Ty, Typed, Unsupported, Window};
use crate::types::{Base, PgType};

type Result<T> = std::result::Result<T, Unsupported>;

/// A call: its name lower-cased (schema `pg_catalog` dropped), arguments typed and converted.
pub(super) fn function(f: &Function, scope: &dyn Scope) -> Result<Typed> {
    let name = match f.name.0.as_slice() {
        [part] => part.to_string(),
        [schema, part] if schema.to_string().eq_ignore_ascii_case("pg_catalog") => part.to_string(),
        _ => return Err(Unsupported),
    }
    .to_ascii_lowercase();
    if !f.within_group.is_empty() || f.null_treatment.is_some() {
        return Err(Unsupported);
    }
    if let sqlparser::ast::FunctionArguments::None = f.args {
        return keyword(&name);
    }
    let (args, star, distinct) = plain_args(&f.args).ok_or(Unsupported)?;
    let args = args.into_iter().map(|a| build(a, scope)).collect::<Result<Vec<_>>>()?;
    if let Some(special) = special(&name) {
        if f.over.is_some() || f.filter.is_some() {
            return Err(Unsupported);
        }
        let common = common_type(args.iter().map(|a| a.ty));
        let ty = if special == "NULLIF" {
            args.first().map_or(Ty::Opaque, |a| a.ty)
        } else {
            Ty::Known(common)
        };
        let args = args.into_iter().map(|a| coerce(a, common, scope)).collect();
        return Ok(Typed {
            node: Node::Special { name: special, args },
            ty,
        });
    }
    let result = result_type(&name, &args, star);
    let args = args
        .into_iter()
        .enumerate()
        .map(|(i, a)| match a.ty {
            // An untyped literal takes the parameter's type: text for every function the views call
            // with one (`date_trunc('day', …)`, `to_char(…, 'YYYY')`), a number's for arithmetic ones.
            Ty::Unknown => coerce(a, literal_parameter(&name, i), scope),
            _ => a.node,
        })
        .collect();
    let filter = match &f.filter {
        Some(filter) => Some(Box::new(coerce(build(filter, scope)?, PgType::BOOL, scope))),
        None => None,
    };
    let over = match &f.over {
        None => None,
        Some(WindowType::WindowSpec(spec)) if spec.window_frame.is_none() && spec.window_name.is_none() => {
            Some(window(&spec.partition_by, &spec.order_by, scope)?)
        }
        Some(_) => return Err(Unsupported),
    };
    Ok(Typed {
        node: Node::Func {
            name,
            args,
            star,
            distinct,
            over,
            filter,
        },
        ty: result,
    })
}

fn window(partition: &[Expr], order: &[sqlparser::ast::OrderByExpr], scope: &dyn Scope) -> Result<Window> {
    let partition = partition
        .iter()
        .map(|e| build(e, scope).map(|t| t.node))
        .collect::<Result<Vec<_>>>()?;
    let order = order
        .iter()
        .map(|item| Ok((build(&item.expr, scope)?.node, sort_suffix(&item.options)?)))
        .collect::<Result<Vec<_>>>()?;
    Ok(Window { partition, order })
}

/// What ruleutils prints after a sort key: ` DESC`, and the NULLS placement only where it is not the default.
pub(super) fn sort_suffix(options: &OrderByOptions) -> Result<String> {
    let descending = match options.sort {
        None | Some(OrderBySort::Asc) => false,
        Some(OrderBySort::Desc) => true,
        Some(_) => return Err(Unsupported),
    };
    let mut suffix = if descending { " DESC".to_owned() } else { String::new() };
    match options.nulls_first {
        Some(true) if !descending => suffix.push_str(" NULLS FIRST"),
        Some(false) if descending => suffix.push_str(" NULLS LAST"),
        _ => {}
    }
    Ok(suffix)
}

/// A function written without parentheses (SQL's value functions), as ruleutils prints it.
fn keyword(name: &str) -> Result<Typed> {
    let (text, ty) = match name {
        "current_date" => ("CURRENT_DATE", PgType::new(Base::Date)),
        "current_timestamp" => ("CURRENT_TIMESTAMP", PgType::TIMESTAMPTZ),
        "localtimestamp" => ("LOCALTIMESTAMP", PgType::new(Base::Timestamp)),
        "current_time" => ("CURRENT_TIME", PgType::new(Base::Timetz)),
        "localtime" => ("LOCALTIME", PgType::new(Base::Time)),
        "current_user" | "user" => ("CURRENT_USER", PgType::NAME),
        "session_user" => ("SESSION_USER", PgType::NAME),
        "current_schema" => ("CURRENT_SCHEMA", PgType::NAME),
        _ => return Err(Unsupported),
    };
    Ok(Typed {
        node: Node::Keyword(text.to_owned()),
        ty: Ty::Known(ty),
    })
}

fn special(name: &str) -> Option<&'static str> {
    Some(match name {
        "coalesce" => "COALESCE",
        "nullif" => "NULLIF",
        "greatest" => "GREATEST",
        "least" => "LEAST",
        _ => return None,
    })
}

/// The type an untyped literal argument of `name` is read as.
fn literal_parameter(name: &str, position: usize) -> PgType {
    match (name, position) {
        ("round" | "trunc" | "left" | "right" | "repeat" | "lpad" | "rpad", 1) => PgType::INT4,
        ("substr" | "substring", 1 | 2) => PgType::INT4,
        _ => PgType::TEXT,
    }
}

/// The result type of a built-in function or aggregate (as far as the deparser needs it: to add the
/// implicit casts of the operators around it).
fn result_type(name: &str, args: &[Typed], star: bool) -> Ty {
    let first = args.first().map_or(Ty::Opaque, |a| a.ty);
    let first_base = match first {
        Ty::Known(t) if !t.is_array() => Some(t.base()),
        _ => None,
    };
    let known = |t: PgType| Ty::Known(t);
    match name {
        "count" if star || args.len() == 1 => known(PgType::INT8),
        "row_number" | "rank" | "dense_rank" | "ntile" => known(PgType::INT8),
        "percent_rank" | "cume_dist" => known(PgType::FLOAT8),
        "sum" => match first_base {
            Some(Base::Int2 | Base::Int4) => known(PgType::INT8),
            Some(Base::Int8 | Base::Numeric) => known(PgType::NUMERIC),
            _ => first,
        },
        "avg" => match first_base {
            Some(Base::Int2 | Base::Int4 | Base::Int8 | Base::Numeric) => known(PgType::NUMERIC),
            Some(Base::Float4 | Base::Float8) => known(PgType::FLOAT8),
            _ => first,
        },
        "min" | "max" | "abs" | "first_value" | "last_value" | "lag" | "lead" => first,
        "round" | "trunc" | "ceil" | "ceiling" | "floor" => match first_base {
            Some(Base::Float4 | Base::Float8) => known(PgType::FLOAT8),
            _ => known(PgType::NUMERIC),
        },
        "lower" | "upper" | "btrim" | "ltrim" | "rtrim" | "trim" | "substr" | "substring" | "replace" | "concat"
        | "concat_ws" | "left" | "right" | "repeat" | "lpad" | "rpad" | "initcap" | "md5" | "to_char"
        | "string_agg" | "format" | "split_part" | "reverse" | "translate" => known(PgType::TEXT),
        "length" | "char_length" | "character_length" | "octet_length" | "position" | "strpos" => known(PgType::INT4),
        "now" | "statement_timestamp" | "transaction_timestamp" | "clock_timestamp" => known(PgType::TIMESTAMPTZ),
        "date_trunc" => args.get(1).map_or(Ty::Opaque, |a| a.ty),
        "date_part" | "extract" => known(PgType::FLOAT8),
        "age" => known(PgType::new(Base::Interval)),
        "bool_and" | "bool_or" | "every" => known(PgType::BOOL),
        "array_agg" => match first {
            Ty::Known(t) => known(t.array()),
            _ => Ty::Opaque,
        },
        "json_agg" | "json_build_object" | "json_build_array" | "to_json" | "json_object_agg" => {
            known(PgType::new(Base::Json))
        }
        "jsonb_agg" | "jsonb_build_object" | "jsonb_build_array" | "to_jsonb" | "jsonb_object_agg" => {
            known(PgType::new(Base::Jsonb))
        }
        "gen_random_uuid" => known(PgType::new(Base::Uuid)),
        _ => Ty::Opaque,
    }
}
