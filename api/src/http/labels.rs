//! Labels in requests: the bounds a label map must keep, and the `?label=key:value` filter of listings.
//!
//! Bounds (checked before anything is stored; past one, 400): at most [`LABELS_MAX`] labels; a key is 1 to
//! [`LABEL_KEY_BYTES_MAX`] bytes of ASCII letters, digits and `_ . - /`, starting with a letter or digit; a value
//! is at most [`LABEL_VALUE_CHARS_MAX`] characters without control characters. So a resource's labels take at
//! most about 20 KiB, and a key never needs quoting in the filter (`key:value` splits at the first colon).

use serde::Deserialize;

use crate::error::ApiError;
use crate::store::labels::{LabelFilter, Labels};

/// Labels a resource may have, at most.
pub const LABELS_MAX: usize = 64;
/// The longest label key, in bytes (ASCII).
pub const LABEL_KEY_BYTES_MAX: usize = 63;
/// The longest label value, in characters.
pub const LABEL_VALUE_CHARS_MAX: usize = 255;

/// Whether `key` is a label key: see the module doc.
fn is_key(key: &str) -> bool {
    let mut bytes = key.bytes();
    let first_ok = bytes.next().is_some_and(|b| b.is_ascii_alphanumeric());
    first_ok
        && key.len() <= LABEL_KEY_BYTES_MAX
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'/'))
}

/// Whether `value` is a label value.
fn is_value(value: &str) -> bool {
    value.chars().count() <= LABEL_VALUE_CHARS_MAX && !value.chars().any(char::is_control)
}

/// `labels` from a request, checked against the bounds (400 naming the first one broken).
pub(crate) fn checked(labels: Labels) -> Result<Labels, ApiError> {
    if labels.len() > LABELS_MAX {
        return Err(ApiError::InvalidRequest(format!(
            "`labels` has {} labels; at most {LABELS_MAX} are allowed",
            labels.len()
        )));
    }
    for (key, value) in &labels {
        if !is_key(key) {
            return Err(ApiError::InvalidRequest(format!(
                "label key {key:?} must be 1 to {LABEL_KEY_BYTES_MAX} ASCII letters, digits, `_`, `.`, `-` or `/`, \
                 starting with a letter or digit"
            )));
        }
        if !is_value(value) {
            return Err(ApiError::InvalidRequest(format!(
                "the value of label {key:?} must be at most {LABEL_VALUE_CHARS_MAX} characters without control \
                 characters"
            )));
        }
    }
    Ok(labels)
}

/// `?label=` of a listing of labelled resources.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct LabelParams {
    /// `key:value` lists only the resources with that label; `key` alone, those with the key whatever its value.
    #[param(pattern = r"^[A-Za-z0-9][A-Za-z0-9_./-]{0,62}(:.{0,255})?$")]
    label: Option<String>,
}

impl LabelParams {
    /// The filter asked for, if any; a malformed one is 400.
    pub(crate) fn filter(&self) -> Result<Option<LabelFilter>, ApiError> {
        let Some(label) = &self.label else {
            return Ok(None);
        };
        let (key, value) = match label.split_once(':') {
            Some((key, value)) => (key, Some(value)),
            None => (label.as_str(), None),
        };
        if !is_key(key) || !value.is_none_or(is_value) {
            return Err(ApiError::InvalidRequest(format!(
                "`label` must be `key:value` or `key` (a key is 1 to {LABEL_KEY_BYTES_MAX} ASCII letters, digits, \
                 `_`, `.`, `-` or `/`), not {label:?}"
            )));
        }
        Ok(Some(LabelFilter {
            key: key.to_owned(),
            value: value.map(str::to_owned),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn labels_within_the_bounds_pass_and_others_are_400() {
        let long_key = "k".repeat(LABEL_KEY_BYTES_MAX);
        let long_value = "é".repeat(LABEL_VALUE_CHARS_MAX);
        let good = labels(&[("env", "preview"), ("app.io/pr-12", ""), (&long_key, &long_value)]);
        assert_eq!(checked(good.clone()), Ok(good));
        let too_long_key = "k".repeat(LABEL_KEY_BYTES_MAX + 1);
        let too_long_value = "v".repeat(LABEL_VALUE_CHARS_MAX + 1);
        for bad in [
            labels(&[("", "x")]),
            labels(&[("-env", "x")]),
            labels(&[("env:x", "x")]),
            labels(&[("é", "x")]),
            labels(&[(&too_long_key, "x")]),
            labels(&[("env", &too_long_value)]),
            labels(&[("env", "a\nb")]),
        ] {
            assert!(
                matches!(checked(bad.clone()), Err(ApiError::InvalidRequest(_))),
                "{bad:?}"
            );
        }
        let many: Labels = (0..=LABELS_MAX).map(|i| (format!("k{i}"), String::new())).collect();
        assert!(matches!(checked(many), Err(ApiError::InvalidRequest(_))));
    }

    #[test]
    fn a_filter_is_a_key_and_an_optional_value_split_at_the_first_colon() {
        let filter = |label: &str| {
            LabelParams {
                label: Some(label.to_owned()),
            }
            .filter()
        };
        let expect = |key: &str, value: Option<&str>| {
            Ok(Some(LabelFilter {
                key: key.to_owned(),
                value: value.map(str::to_owned),
            }))
        };
        assert_eq!(filter("env:preview"), expect("env", Some("preview")));
        assert_eq!(filter("env"), expect("env", None));
        assert_eq!(filter("env:"), expect("env", Some("")));
        assert_eq!(filter("url:http://x"), expect("url", Some("http://x")));
        for bad in ["", ":x", "-env:x", "a b:c"] {
            assert!(matches!(filter(bad), Err(ApiError::InvalidRequest(_))), "{bad}");
        }
        assert_eq!(LabelParams { label: None }.filter(), Ok(None));
    }
}
