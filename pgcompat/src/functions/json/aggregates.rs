//! The `json[b]_agg` and `json[b]_object_agg` aggregates.

use rusqlite::functions::{Aggregate, Context};
use rusqlite::types::Value;

use super::*;
use crate::error::{PgError, INVALID_PARAMETER_VALUE};
use crate::functions::SessionState;
use crate::value::json::Node as J;

/// The running state of a JSON aggregate: its items and their approximate text size.
pub(super) struct Items<T> {
    items: Vec<T>,
    bytes: usize,
}

impl<T> Default for Items<T> {
    fn default() -> Items<T> {
        Items {
            items: Vec::new(),
            bytes: 0,
        }
    }
}

/// `json_agg` / `jsonb_agg`: every value (NULLs as `null`) in a JSON array; NULL over no rows.
pub(super) struct ArrayAgg {
    pub(super) flavor: Flavor,
    pub(super) typed: bool,
    pub(super) state: Arc<SessionState>,
}

impl Aggregate<Items<J>, Value> for ArrayAgg {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<Items<J>> {
        Ok(Items::default())
    }

    fn step(&self, ctx: &mut Context<'_>, acc: &mut Items<J>) -> rusqlite::Result<()> {
        let args = Args::of(ctx, self.typed)?;
        let node = to_node(&args.value(0), args.ty(0), &self.state.time_zone(), self.flavor).map_err(raise)?;
        acc.bytes += json_text(&node).len() + 2;
        check_size(acc.bytes).map_err(raise)?;
        acc.items.push(node);
        Ok(())
    }

    fn finalize(&self, _: &mut Context<'_>, acc: Option<Items<J>>) -> rusqlite::Result<Value> {
        let Some(acc) = acc.filter(|a| !a.items.is_empty()) else {
            return Ok(Value::Null);
        };
        match self.flavor {
            Flavor::Jsonb => jsonb_text(&J::Array(acc.items)).map_err(raise),
            Flavor::Json => {
                let texts: Vec<String> = acc.items.iter().map(json_text).collect();
                Ok(Value::Text(format!("[{}]", texts.join(", "))))
            }
        }
    }
}

/// `json_object_agg` / `jsonb_object_agg`: key–value pairs in a JSON object; NULL over no rows.
pub(super) struct ObjectAgg {
    pub(super) flavor: Flavor,
    pub(super) typed: bool,
    pub(super) state: Arc<SessionState>,
}

impl Aggregate<Items<(String, J)>, Value> for ObjectAgg {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<Items<(String, J)>> {
        Ok(Items::default())
    }

    fn step(&self, ctx: &mut Context<'_>, acc: &mut Items<(String, J)>) -> rusqlite::Result<()> {
        let args = Args::of(ctx, self.typed)?;
        let tz = self.state.time_zone();
        let key = args.value(0);
        if matches!(key, Value::Null) {
            return Err(raise(PgError::new(
                INVALID_PARAMETER_VALUE,
                "field name must not be null",
            )));
        }
        let key = match args.ty(0) {
            Some(t) => crate::value::output(t, &key, &tz).unwrap_or_default(),
            None => value_text(&key).unwrap_or_default(),
        };
        let node = to_node(&args.value(1), args.ty(1), &tz, self.flavor).map_err(raise)?;
        acc.bytes += key.len() + json_text(&node).len() + 6;
        check_size(acc.bytes).map_err(raise)?;
        acc.items.push((key, node));
        Ok(())
    }

    fn finalize(&self, _: &mut Context<'_>, acc: Option<Items<(String, J)>>) -> rusqlite::Result<Value> {
        let Some(acc) = acc.filter(|a| !a.items.is_empty()) else {
            return Ok(Value::Null);
        };
        match self.flavor {
            Flavor::Jsonb => jsonb_text(&J::Object(acc.items)).map_err(raise),
            Flavor::Json => {
                let mut out = String::from("{ ");
                for (i, (key, value)) in acc.items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_string(&mut out, key);
                    out.push_str(" : ");
                    write_json(&mut out, value);
                }
                out.push_str(" }");
                Ok(Value::Text(out))
            }
        }
    }
}
