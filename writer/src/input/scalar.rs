//! A JSON scalar as a record gives it: what a column decodes, from a JSON
//! tree or straight from the text.

use serde_json::Value;

/// A JSON scalar as a record gives it, borrowed: what a column decodes.
#[derive(Debug, Clone, Copy)]
pub(super) enum Scalar<'a> {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(&'a str),
    /// An array or object (only the reference decoding sees one).
    Nested(&'a Value),
}

impl<'a> Scalar<'a> {
    pub(super) fn of(v: &'a Value) -> Self {
        match v {
            Value::Null => Scalar::Null,
            Value::Bool(b) => Scalar::Bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Scalar::Int(i),
                (None, Some(u)) => Scalar::UInt(u),
                _ => Scalar::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => Scalar::Str(s),
            other => Scalar::Nested(other),
        }
    }

    pub(super) fn as_i64(self) -> Option<i64> {
        match self {
            Scalar::Int(i) => Some(i),
            Scalar::UInt(u) => i64::try_from(u).ok(),
            _ => None,
        }
    }

    pub(super) fn as_f64(self) -> Option<f64> {
        match self {
            Scalar::Int(i) => Some(i as f64),
            Scalar::UInt(u) => Some(u as f64),
            Scalar::Float(f) => Some(f),
            _ => None,
        }
    }
}

/// As JSON, the way error messages have always shown a value.
impl std::fmt::Display for Scalar<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::Null => f.write_str("null"),
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::UInt(u) => write!(f, "{u}"),
            Scalar::Float(x) => match serde_json::Number::from_f64(*x) {
                Some(n) => write!(f, "{n}"),
                None => write!(f, "{x}"),
            },
            Scalar::Str(s) => write!(f, "{}", Value::String((*s).to_string())),
            Scalar::Nested(v) => write!(f, "{v}"),
        }
    }
}
