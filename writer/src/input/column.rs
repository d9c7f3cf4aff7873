//! One table column built value by value from JSON scalars: the rules for
//! what text or number each Arrow type takes (dates, timestamps, decimals).

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder, Float64Builder,
    Int32Builder, Int64Builder, StringBuilder, TimestampMicrosecondBuilder, TimestampMillisecondBuilder,
};
use arrow::datatypes::{DataType, TimeUnit};
use chrono::{DateTime, NaiveDate, NaiveDateTime};

use super::scalar::Scalar;

/// An Arrow builder of one table column, with the type details its
/// values are checked against.
pub(super) enum Column {
    Bool(BooleanBuilder),
    I32(Int32Builder),
    I64(Int64Builder),
    F32(Float32Builder),
    F64(Float64Builder),
    Str(StringBuilder),
    Bin(BinaryBuilder),
    Date(Date32Builder),
    TsMs(TimestampMillisecondBuilder, Option<Arc<str>>),
    TsUs(TimestampMicrosecondBuilder, Option<Arc<str>>),
    Dec(Decimal128Builder, u8, i8),
}

impl Column {
    pub(super) fn new(dt: &DataType, cap: usize) -> Option<Self> {
        Some(match dt {
            DataType::Boolean => Column::Bool(BooleanBuilder::with_capacity(cap)),
            DataType::Int32 => Column::I32(Int32Builder::with_capacity(cap)),
            DataType::Int64 => Column::I64(Int64Builder::with_capacity(cap)),
            DataType::Float32 => Column::F32(Float32Builder::with_capacity(cap)),
            DataType::Float64 => Column::F64(Float64Builder::with_capacity(cap)),
            DataType::Utf8 => Column::Str(StringBuilder::with_capacity(cap, cap * 16)),
            DataType::Binary => Column::Bin(BinaryBuilder::with_capacity(cap, cap * 16)),
            DataType::Date32 => Column::Date(Date32Builder::with_capacity(cap)),
            DataType::Timestamp(TimeUnit::Millisecond, tz) => {
                Column::TsMs(TimestampMillisecondBuilder::with_capacity(cap), tz.clone())
            }
            DataType::Timestamp(TimeUnit::Microsecond, tz) => {
                Column::TsUs(TimestampMicrosecondBuilder::with_capacity(cap), tz.clone())
            }
            DataType::Decimal128(p, s) => Column::Dec(Decimal128Builder::with_capacity(cap), *p, *s),
            _ => return None,
        })
    }

    pub(super) fn null(&mut self) {
        match self {
            Column::Bool(b) => b.append_null(),
            Column::I32(b) => b.append_null(),
            Column::I64(b) => b.append_null(),
            Column::F32(b) => b.append_null(),
            Column::F64(b) => b.append_null(),
            Column::Str(b) => b.append_null(),
            Column::Bin(b) => b.append_null(),
            Column::Date(b) => b.append_null(),
            Column::TsMs(b, _) => b.append_null(),
            Column::TsUs(b, _) => b.append_null(),
            Column::Dec(b, ..) => b.append_null(),
        }
    }

    /// A placeholder for a non-nullable column of a delete record.
    pub(super) fn zero(&mut self) {
        match self {
            Column::Bool(b) => b.append_value(false),
            Column::I32(b) => b.append_value(0),
            Column::I64(b) => b.append_value(0),
            Column::F32(b) => b.append_value(0.0),
            Column::F64(b) => b.append_value(0.0),
            Column::Str(b) => b.append_value(""),
            Column::Bin(b) => b.append_value(b""),
            Column::Date(b) => b.append_value(0),
            Column::TsMs(b, _) => b.append_value(0),
            Column::TsUs(b, _) => b.append_value(0),
            Column::Dec(b, ..) => b.append_value(0),
        }
    }

    pub(super) fn push<'a>(&mut self, v: Scalar<'a>) -> std::result::Result<(), String> {
        let int = |v: Scalar<'a>| v.as_i64().ok_or_else(|| format!("expected an integer, got {v}"));
        let num = |v: Scalar<'a>| v.as_f64().ok_or_else(|| format!("expected a number, got {v}"));
        let text = |v: Scalar<'a>| match v {
            Scalar::Str(s) => Ok(s),
            other => Err(format!("expected a string, got {other}")),
        };
        match self {
            Column::Bool(b) => b.append_value(match v {
                Scalar::Bool(x) => x,
                other => return Err(format!("expected true or false, got {other}")),
            }),
            Column::I32(b) => {
                b.append_value(i32::try_from(int(v)?).map_err(|_| format!("{v} does not fit a 32-bit int"))?)
            }
            Column::I64(b) => b.append_value(int(v)?),
            Column::F32(b) => b.append_value(num(v)? as f32),
            Column::F64(b) => b.append_value(num(v)?),
            Column::Str(b) => b.append_value(text(v)?),
            Column::Bin(b) => b.append_value(text(v)?.as_bytes()),
            Column::Date(b) => b.append_value(match v {
                Scalar::Str(s) => {
                    let d = NaiveDate::parse_from_str(s, "%Y-%m-%d")
                        .map_err(|e| format!("expected a date like 2024-01-31, got {s:?}: {e}"))?;
                    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default();
                    i32::try_from((d - epoch).num_days()).map_err(|_| format!("date {s} out of range"))?
                }
                other => i32::try_from(int(other)?).map_err(|_| format!("{other} is not a day number"))?,
            }),
            Column::TsMs(b, _) => b.append_value(timestamp(v, 1_000)?),
            Column::TsUs(b, _) => b.append_value(timestamp(v, 1_000_000)?),
            Column::Dec(b, p, s) => b.append_value(decimal(v, *p, *s)?),
        }
        Ok(())
    }

    pub(super) fn finish(self) -> ArrayRef {
        match self {
            Column::Bool(mut b) => Arc::new(b.finish()),
            Column::I32(mut b) => Arc::new(b.finish()),
            Column::I64(mut b) => Arc::new(b.finish()),
            Column::F32(mut b) => Arc::new(b.finish()),
            Column::F64(mut b) => Arc::new(b.finish()),
            Column::Str(mut b) => Arc::new(b.finish()),
            Column::Bin(mut b) => Arc::new(b.finish()),
            Column::Date(mut b) => Arc::new(b.finish()),
            Column::TsMs(mut b, tz) => Arc::new(b.finish().with_timezone_opt(tz)),
            Column::TsUs(mut b, tz) => Arc::new(b.finish().with_timezone_opt(tz)),
            Column::Dec(mut b, p, s) => {
                let a = b.finish();
                Arc::new(a.clone().with_precision_and_scale(p, s).unwrap_or(a))
            }
        }
    }
}

/// ISO-8601 text (with offset, or naive as UTC) or a number of units.
fn timestamp(v: Scalar<'_>, per_second: i64) -> std::result::Result<i64, String> {
    match v {
        Scalar::Str(s) => {
            let dt = DateTime::parse_from_rfc3339(s)
                .map(|d| d.to_utc())
                .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").map(|n| n.and_utc()))
                .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f").map(|n| n.and_utc()))
                .map_err(|_| format!("expected an ISO-8601 timestamp like 2024-01-31T12:00:00Z, got {s:?}"))?;
            Ok(if per_second == 1_000 { dt.timestamp_millis() } else { dt.timestamp_micros() })
        }
        other => other.as_i64().ok_or_else(|| format!("expected a timestamp string or number, got {other}")),
    }
}

/// A decimal from text or a JSON number, scaled to `scale`, within `precision` digits.
fn decimal(v: Scalar<'_>, precision: u8, scale: i8) -> std::result::Result<i128, String> {
    let text = match v {
        Scalar::Str(s) => s.to_string(),
        Scalar::Int(_) | Scalar::UInt(_) | Scalar::Float(_) => v.to_string(),
        other => return Err(format!("expected a decimal as a string or number, got {other}")),
    };
    let frac = text.split_once('.').map_or(0, |(_, f)| f.trim_end_matches(|c: char| !c.is_ascii_digit()).len());
    if frac > scale.max(0) as usize {
        return Err(format!("{text:?} has more than {scale} decimal places (decimal({precision},{scale}))"));
    }
    let parsed =
        arrow::compute::kernels::cast_utils::parse_decimal::<arrow::datatypes::Decimal128Type>(&text, precision, scale)
            .map_err(|e| format!("{text:?} is not a decimal({precision},{scale}): {e}"))?;
    Ok(parsed)
}
