//! PostgreSQL's operator and type resolution, for the forms views have: which implicit casts an operator's
//! operands get (`int4 = numeric` casts the integer, `varchar = unknown` compares as text), the result type,
//! and the common type of a CASE's or COALESCE's values.

use crate::types::{Base, PgType};

use super::typed::Ty;

pub(super) fn same_type(a: PgType, b: PgType) -> bool {
    a.base() == b.base() && a.is_array() == b.is_array()
}

fn numeric_rank(ty: PgType) -> Option<u8> {
    if ty.is_array() {
        return None;
    }
    Some(match ty.base() {
        Base::Int2 => 1,
        Base::Int4 => 2,
        Base::Int8 => 3,
        Base::Numeric => 4,
        Base::Float4 => 5,
        Base::Float8 => 6,
        _ => return None,
    })
}

fn is_text_like(ty: PgType) -> bool {
    !ty.is_array() && matches!(ty.base(), Base::Text | Base::Varchar | Base::Name)
}

fn is_datetime(ty: PgType) -> bool {
    !ty.is_array()
        && matches!(
            ty.base(),
            Base::Date | Base::Timestamp | Base::Timestamptz | Base::Time | Base::Timetz
        )
}

/// PostgreSQL's choice for `l op r`: the type each side is converted to (`None`: as it is) and the result.
pub(super) fn resolve(op: &str, l: Ty, r: Ty) -> (Option<PgType>, Option<PgType>, Ty) {
    let bool_result = Ty::Known(PgType::BOOL);
    let comparison = matches!(op, "=" | "<>" | "<" | "<=" | ">" | ">=");
    let text_op = matches!(op, "||" | "~~" | "!~~" | "~~*" | "!~~*" | "~" | "~*" | "!~" | "!~*");
    if text_op {
        return text_operator(op, l, r);
    }
    if matches!(op, "->" | "->>" | "#>" | "#>>" | "@>" | "<@" | "?") {
        return json_operator(op, l, r);
    }
    match (l, r) {
        (Ty::Known(a), Ty::Known(b)) => {
            let (ca, cb, result) = known_pair(op, a, b);
            let result = if comparison { bool_result } else { result };
            (ca, cb, result)
        }
        (Ty::Unknown, Ty::Known(b)) => {
            let (lit, other) = unknown_against(op, b);
            (Some(lit), other, if comparison { bool_result } else { Ty::Known(b) })
        }
        (Ty::Known(a), Ty::Unknown) => {
            let (lit, other) = unknown_against(op, a);
            (other, Some(lit), if comparison { bool_result } else { Ty::Known(a) })
        }
        (Ty::Unknown, Ty::Unknown) => (
            Some(PgType::TEXT),
            Some(PgType::TEXT),
            if comparison {
                bool_result
            } else {
                Ty::Known(PgType::TEXT)
            },
        ),
        _ => (None, None, if comparison { bool_result } else { Ty::Opaque }),
    }
}

/// An untyped literal against a value of type `other`: the literal's type and the other side's conversion.
fn unknown_against(op: &str, other: PgType) -> (PgType, Option<PgType>) {
    if is_datetime(other) && matches!(op, "+" | "-") {
        return (PgType::new(Base::Interval), None);
    }
    if !other.is_array() && matches!(other.base(), Base::Varchar) {
        // varchar has no operators of its own: both sides are text.
        return (PgType::TEXT, Some(PgType::TEXT));
    }
    (other, None)
}

fn known_pair(op: &str, a: PgType, b: PgType) -> (Option<PgType>, Option<PgType>, Ty) {
    if same_type(a, b) && (a.base() != Base::Varchar || a.is_array()) {
        return (None, None, Ty::Known(a));
    }
    if let (Some(ra), Some(rb)) = (numeric_rank(a), numeric_rank(b)) {
        let wider = if ra >= rb { a } else { b };
        // Integers of any width meet through cross-type operators; numeric and floats by casting.
        if ra <= 3 && rb <= 3 {
            return (None, None, Ty::Known(wider));
        }
        if matches!(
            (a.base(), b.base()),
            (Base::Float4, Base::Float8) | (Base::Float8, Base::Float4)
        ) {
            return (None, None, Ty::Known(PgType::FLOAT8));
        }
        let cast = |t: PgType| (numeric_rank(t) != numeric_rank(wider)).then_some(wider);
        return (cast(a), cast(b), Ty::Known(wider));
    }
    if is_text_like(a) && is_text_like(b)
        || (a.base() == Base::Bpchar && is_text_like(b))
        || (b.base() == Base::Bpchar && is_text_like(a))
    {
        let to_text = |t: PgType| (t.base() != Base::Text).then_some(PgType::TEXT);
        return (to_text(a), to_text(b), Ty::Known(PgType::TEXT));
    }
    if is_datetime(a) && is_datetime(b) {
        let result = match op {
            "-" if a.base() == Base::Date && b.base() == Base::Date => PgType::INT4,
            "-" => PgType::new(Base::Interval),
            _ => a,
        };
        return (None, None, Ty::Known(result));
    }
    if is_datetime(a) && b.base() == Base::Interval {
        let result = if a.base() == Base::Date {
            PgType::new(Base::Timestamp)
        } else {
            a
        };
        return (None, None, Ty::Known(result));
    }
    if a.base() == Base::Date && b.is_integer() {
        return (None, None, Ty::Known(a));
    }
    (None, None, Ty::Known(a))
}

fn text_operator(op: &str, l: Ty, r: Ty) -> (Option<PgType>, Option<PgType>, Ty) {
    let result = if op == "||" {
        Ty::Known(PgType::TEXT)
    } else {
        Ty::Known(PgType::BOOL)
    };
    let side = |t: Ty, other: Ty| match t {
        Ty::Unknown => Some(PgType::TEXT),
        // char(n) has its own LIKE; in `||` it is text like the others.
        Ty::Known(t) if t.base() == Base::Bpchar && op != "||" => None,
        Ty::Known(t) if !t.is_array() && matches!(t.base(), Base::Varchar | Base::Bpchar | Base::Name) => {
            Some(PgType::TEXT)
        }
        // `text || anynonarray`: the other side stays as it is.
        _ => {
            let _ = other;
            None
        }
    };
    (side(l, r), side(r, l), result)
}

fn json_operator(op: &str, l: Ty, r: Ty) -> (Option<PgType>, Option<PgType>, Ty) {
    let json = l
        .known()
        .filter(|t| matches!(t.base(), Base::Json | Base::Jsonb) && !t.is_array());
    let result = match op {
        "->>" | "#>>" => Ty::Known(PgType::TEXT),
        "@>" | "<@" | "?" => Ty::Known(PgType::BOOL),
        _ => json.map_or(Ty::Opaque, Ty::Known),
    };
    let right = match (r, op) {
        (Ty::Unknown, "#>" | "#>>") => Some(PgType::TEXT.array()),
        (Ty::Unknown, "@>" | "<@") => json,
        (Ty::Unknown, _) => Some(PgType::TEXT),
        _ => None,
    };
    (None, right, result)
}

/// The common type of several values (PostgreSQL's `select_common_type`, for the forms views have): the
/// widest number, text among strings, else the first known type; all untyped: text.
pub(super) fn common_type(types: impl Iterator<Item = Ty>) -> PgType {
    let known: Vec<PgType> = types.filter_map(Ty::known).collect();
    let Some(first) = known.first().copied() else {
        return PgType::TEXT;
    };
    if known.iter().all(|t| numeric_rank(*t).is_some()) {
        return known.iter().copied().max_by_key(|t| numeric_rank(*t)).unwrap_or(first);
    }
    if known.iter().all(|t| is_text_like(*t) || t.base() == Base::Bpchar)
        && known.iter().any(|t| t.base() == Base::Text)
    {
        return PgType::TEXT;
    }
    first
}
