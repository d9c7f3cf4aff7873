//! Turning caller input into validated Arrow rows of the table schema.
//!
//! Two doors: Arrow [`RecordBatch`]es (columns matched by name and cast to
//! the table's types) and JSON values (one object per record, as JSON lines
//! or through the row API). Either way every record is checked: the key and
//! the ordering value must be present and non-null, types must match, and
//! unknown columns are refused. Key fields must be present (they take no
//! schema default); a composite key's nullable field may be null (its value
//! is then written `__null__`), but not all of them. Each record's `_hoodie_record_key` is built here, by
//! the one rule of [`tributary_format::key`]. A `_hoodie_is_deleted: true`
//! record deletes its key. Errors name the record (line), the field and the
//! reason.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryBuilder, BooleanArray, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder,
    Float64Builder, Int32Builder, Int64Builder, RecordBatch, StringBuilder, TimestampMicrosecondBuilder,
    TimestampMillisecondBuilder,
};
use arrow::datatypes::{DataType, TimeUnit};
use chrono::{DateTime, NaiveDate, NaiveDateTime};
use serde_json::Value;

use crate::error::{Error, Result};
use tributary_format::Keys;
use tributary_format::schema::{IS_DELETED, TableSchema};

/// Validated rows in the table's column layout, with delete flags and
/// their record keys. Made by [`rows_from_batch`] and [`rows_from_json`].
#[derive(Debug, Clone)]
pub struct Rows {
    /// Table columns (the table's Arrow schema, without meta columns).
    pub batch: RecordBatch,
    /// `true` where the row deletes its key; `None` when nothing is deleted.
    pub deleted: Option<BooleanArray>,
    /// Each row's `_hoodie_record_key` (and what the bucket index hashes).
    keys: Keys,
}

impl Rows {
    /// Validated `batch` with its delete flags: builds the record keys, the
    /// one place they are built; a key that cannot be formed is an error
    /// naming the record (`record_of` numbers the batch's rows).
    fn new(
        schema: &TableSchema,
        batch: RecordBatch,
        deleted: Option<BooleanArray>,
        source: &str,
        record_of: impl Fn(usize) -> usize,
    ) -> Result<Self> {
        let keys = schema
            .record_key()
            .build(&batch)
            .map_err(|e| bad(source, record_of(e.row), e.field.as_deref(), e.reason))?;
        Ok(Self { batch, deleted, keys })
    }

    /// The rows' record keys.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.batch.num_rows()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.batch.num_rows() == 0
    }
}

fn bad(source: &str, record: usize, field: Option<&str>, reason: impl Into<String>) -> Error {
    Error::BadRecord { input: source.to_string(), record, field: field.map(String::from), reason: reason.into() }
}

/// Validates an Arrow batch against the table schema. Columns are matched by
/// name and cast to the table's types; a missing nullable column is filled
/// with nulls; an optional boolean `_hoodie_is_deleted` column marks deletes.
pub fn rows_from_batch(schema: &TableSchema, batch: &RecordBatch, source: &str) -> Result<Rows> {
    let input = batch.schema();
    for f in input.fields() {
        if f.name() != IS_DELETED && schema.arrow().index_of(f.name()).is_err() {
            return Err(bad(source, 1, Some(f.name()), "unknown column (not in the table schema)"));
        }
    }
    let n = batch.num_rows();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.arrow().fields().len());
    for (i, field) in schema.arrow().fields().iter().enumerate() {
        let col = match batch.column_by_name(field.name()) {
            Some(c) if c.data_type() == field.data_type() => c.clone(),
            Some(c) => arrow::compute::cast(c, field.data_type()).map_err(|e| {
                bad(
                    source,
                    1,
                    Some(field.name()),
                    format!("cannot convert {} to {}: {e}", c.data_type(), field.data_type()),
                )
            })?,
            None if schema.is_key(i) => return Err(bad(source, 1, Some(field.name()), "missing record key column")),
            None if field.is_nullable() => arrow::array::new_null_array(field.data_type(), n),
            None => return Err(bad(source, 1, Some(field.name()), "missing column")),
        };
        // A composite key's nullable fields may hold nulls (`__null__`).
        let key_needs_value = schema.is_key(i) && (!schema.record_key().is_composite() || !field.is_nullable());
        if col.null_count() > 0 && (!field.is_nullable() || key_needs_value || Some(i) == schema.ordering_index()) {
            let row = (0..n).find(|r| col.is_null(*r)).unwrap_or(0);
            let what = if schema.is_key(i) {
                "missing record key"
            } else if Some(i) == schema.ordering_index() {
                "missing ordering value"
            } else {
                "null in a non-nullable column"
            };
            return Err(bad(source, row + 1, Some(field.name()), what));
        }
        columns.push(col);
    }
    let deleted = match batch.column_by_name(IS_DELETED) {
        None => None,
        Some(c) => {
            let b = c
                .as_any()
                .downcast_ref::<BooleanArray>()
                .ok_or_else(|| bad(source, 1, Some(IS_DELETED), "must be boolean"))?;
            (b.true_count() > 0).then(|| b.clone())
        }
    };
    let batch = RecordBatch::try_new(schema.arrow().clone(), columns)
        .map_err(|e| bad(source, 1, None, format!("cannot build rows: {e}")))?;
    Rows::new(schema, batch, deleted, source, |row| row + 1)
}

enum Column {
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
    fn new(dt: &DataType, cap: usize) -> Option<Self> {
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

    fn null(&mut self) {
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
    fn zero(&mut self) {
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

    fn push<'a>(&mut self, v: Scalar<'a>) -> std::result::Result<(), String> {
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

    fn finish(self) -> ArrayRef {
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

/// Builds validated rows from JSON objects. `first_record` numbers the
/// first value in error messages (its line in a JSON-lines file).
pub fn rows_from_json(schema: &TableSchema, values: &[Value], source: &str, first_record: usize) -> Result<Rows> {
    let numbered: Vec<(usize, &Value)> = values.iter().enumerate().map(|(n, v)| (first_record + n, v)).collect();
    rows_from_numbered(schema, &numbered, source)
}

/// [`rows_from_json`] over values that carry their own record numbers (the
/// lines of a JSON-lines text with blank lines in it). This is the
/// reference decoding: its checks run field by field in schema order, so a
/// record with several faults reports the first field's.
fn rows_from_numbered(schema: &TableSchema, values: &[(usize, &Value)], source: &str) -> Result<Rows> {
    let mut rows = RowsBuilder::new(schema, values.len())?;
    for &(record, value) in values {
        let obj = value.as_object().ok_or_else(|| bad(source, record, None, "expected a JSON object"))?;
        for k in obj.keys() {
            if k != IS_DELETED && schema.arrow().index_of(k).is_err() {
                return Err(bad(source, record, Some(k), "unknown column (not in the table schema)"));
            }
        }
        let is_deleted = match obj.get(IS_DELETED) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(bad(source, record, Some(IS_DELETED), format!("expected true or false, got {other}")));
            }
        };
        let fault = |(i, reason): Fault| bad(source, record, Some(schema.arrow().field(i).name()), reason);
        for (i, f) in schema.arrow().fields().iter().enumerate() {
            match obj.get(f.name()) {
                Some(v) => rows.given(i, Scalar::of(v)).map_err(fault)?,
                None => rows.missing(i, is_deleted).map_err(fault)?,
            }
        }
        rows.end_record(record, is_deleted).map_err(fault)?;
    }
    rows.finish(source)
}

/// Decodes JSON-lines `text` into validated rows straight into Arrow
/// columns, with no JSON tree per record; `first_line` is the 1-based line
/// number of its first line, and blank lines are skipped. It accepts and
/// refuses exactly what [`parse_json_lines`] with [`rows_from_json`] does:
/// every column value goes through the same rules ([`RowsBuilder`]). Any
/// fault sends the text through that reference decoding instead, so errors
/// are the same too, naming the first faulty line and field.
pub fn rows_from_json_lines(schema: &TableSchema, text: &str, source: &str, first_line: usize) -> Result<Rows> {
    stream_decode(schema, text, first_line).or_else(|()| {
        let values = parse_json_lines(text, source, first_line)?;
        let numbered: Vec<(usize, &Value)> = values.iter().map(|(n, v)| (*n, v)).collect();
        rows_from_numbered(schema, &numbered, source)
    })
}

/// The fast path of [`rows_from_json_lines`]: `Err(())` on any fault, for
/// the reference decoding to name.
fn stream_decode(schema: &TableSchema, text: &str, first_line: usize) -> std::result::Result<Rows, ()> {
    use serde::de::DeserializeSeed;
    let lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let mut rows = RowsBuilder::new(schema, text.len() / 64).map_err(drop)?;
    for (n, line) in lines {
        let mut de = serde_json::Deserializer::from_str(line);
        let is_deleted = RecordSeed(&mut rows).deserialize(&mut de).map_err(drop)?;
        de.end().map_err(drop)?;
        rows.end_record(first_line + n, is_deleted).map_err(drop)?;
    }
    rows.finish("").map_err(drop)
}

/// A JSON scalar as a record gives it, borrowed: what a column decodes.
#[derive(Debug, Clone, Copy)]
enum Scalar<'a> {
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
    fn of(v: &'a Value) -> Self {
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

    fn as_i64(self) -> Option<i64> {
        match self {
            Scalar::Int(i) => Some(i),
            Scalar::UInt(u) => i64::try_from(u).ok(),
            _ => None,
        }
    }

    fn as_f64(self) -> Option<f64> {
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

/// A field's fault: its column and the reason.
type Fault = (usize, String);

/// Builds the table's columns record by record: the one home of the rules
/// for what a JSON record may give a column, shared by the reference
/// decoding and the streaming one.
struct RowsBuilder<'s> {
    schema: &'s TableSchema,
    cols: Vec<Column>,
    deleted: BooleanBuilder,
    any_deleted: bool,
    /// Which columns the current record gave.
    seen: Vec<bool>,
    /// Each record's number (line), for the record key's errors.
    records: Vec<usize>,
}

impl<'s> RowsBuilder<'s> {
    fn new(schema: &'s TableSchema, capacity: usize) -> Result<Self> {
        let fields = schema.arrow().fields();
        let cols = fields
            .iter()
            .map(|f| {
                Column::new(f.data_type(), capacity).ok_or_else(|| Error::InvalidInput {
                    what: format!("column `{}`", f.name()),
                    reason: format!("type {} is not supported for writing yet", f.data_type()),
                })
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            schema,
            cols,
            deleted: BooleanBuilder::with_capacity(capacity),
            any_deleted: false,
            seen: vec![false; fields.len()],
            records: Vec::with_capacity(capacity),
        })
    }

    /// Whether column `i` must hold a value: the ordering field, and a key
    /// field (but a composite key's nullable field may be null, written
    /// `__null__`).
    fn required(&self, i: usize) -> bool {
        let is_key = self.schema.is_key(i);
        let null_key_ok =
            is_key && self.schema.record_key().is_composite() && self.schema.arrow().field(i).is_nullable();
        (is_key && !null_key_ok) || Some(i) == self.schema.ordering_index()
    }

    fn missing_required(&self, i: usize) -> Fault {
        let what = if self.schema.is_key(i) { "missing record key" } else { "missing ordering value" };
        (i, what.to_string())
    }

    /// The current record gives column `i` the value `v` (null included).
    fn given(&mut self, i: usize, v: Scalar<'_>) -> std::result::Result<(), Fault> {
        if std::mem::replace(&mut self.seen[i], true) {
            return Err((i, "given twice".into()));
        }
        match v {
            Scalar::Null if self.required(i) => Err(self.missing_required(i)),
            Scalar::Null if self.schema.arrow().field(i).is_nullable() => {
                self.cols[i].null();
                Ok(())
            }
            Scalar::Null => Err((i, "null in a non-nullable column".into())),
            v => self.cols[i].push(v).map_err(|reason| (i, reason)),
        }
    }

    /// The current record leaves column `i` out: it takes its schema
    /// default, or null; a key field takes none (every record names its
    /// key), and a delete needs no value in a non-nullable column.
    fn missing(&mut self, i: usize, is_deleted: bool) -> std::result::Result<(), Fault> {
        self.seen[i] = true;
        if self.schema.is_key(i) {
            return Err((i, "missing record key".into()));
        }
        match self.schema.default_of(i).filter(|d| !d.is_null()) {
            Some(d) => self.cols[i].push(Scalar::of(d)).map_err(|reason| (i, reason)),
            None if self.required(i) => Err(self.missing_required(i)),
            None if self.schema.arrow().field(i).is_nullable() => {
                self.cols[i].null();
                Ok(())
            }
            None if is_deleted => {
                self.cols[i].zero();
                Ok(())
            }
            None => Err((i, "missing value for a non-nullable column".into())),
        }
    }

    /// Ends record number `record`: fills the columns it left out.
    fn end_record(&mut self, record: usize, is_deleted: bool) -> std::result::Result<(), Fault> {
        for i in 0..self.seen.len() {
            if !self.seen[i] {
                self.missing(i, is_deleted)?;
            }
            self.seen[i] = false;
        }
        self.any_deleted |= is_deleted;
        self.deleted.append_value(is_deleted);
        self.records.push(record);
        Ok(())
    }

    fn finish(mut self, source: &str) -> Result<Rows> {
        let first = self.records.first().copied().unwrap_or(1);
        let columns: Vec<ArrayRef> = self.cols.into_iter().map(Column::finish).collect();
        let batch = RecordBatch::try_new(self.schema.arrow().clone(), columns)
            .map_err(|e| bad(source, first, None, format!("cannot build rows: {e}")))?;
        let deleted = self.any_deleted.then(|| self.deleted.finish());
        let records = self.records;
        Rows::new(self.schema, batch, deleted, source, |row| records.get(row).copied().unwrap_or(first))
    }
}

/// Decodes one JSON object into a [`RowsBuilder`]'s current record;
/// yields whether the record deletes its key.
struct RecordSeed<'b, 's>(&'b mut RowsBuilder<'s>);

impl<'de> serde::de::DeserializeSeed<'de> for RecordSeed<'_, '_> {
    type Value = bool;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<bool, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for RecordSeed<'_, '_> {
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<bool, A::Error> {
        use serde::de::Error as _;
        let (mut is_deleted, mut next) = (None, 0);
        while let Some(field) = map.next_key_seed(FieldSeed(self.0.schema, next))? {
            match field {
                Field::Column(i) => {
                    map.next_value_seed(ValueSeed(self.0, i))?;
                    next = i + 1;
                }
                Field::IsDeleted(column) if is_deleted.is_none() => {
                    let flag = map.next_value::<Option<bool>>()?;
                    is_deleted = Some(flag.unwrap_or(false));
                    // A table may keep the flag as a column of its own too.
                    if let Some(i) = column {
                        self.0
                            .given(i, flag.map_or(Scalar::Null, Scalar::Bool))
                            .map_err(|(_, r)| A::Error::custom(r))?;
                    }
                }
                Field::IsDeleted(_) => return Err(A::Error::custom("given twice")),
            }
        }
        Ok(is_deleted.unwrap_or(false))
    }
}

/// A key of a record.
enum Field {
    /// A column of the table.
    Column(usize),
    /// `_hoodie_is_deleted`, and its column if the table has one.
    IsDeleted(Option<usize>),
}

/// A key of a record as a [`Field`]; an unknown column is an error.
/// Records mostly list their fields in schema order, so the column after
/// the last one is tried first.
struct FieldSeed<'s>(&'s TableSchema, usize);

impl<'de> serde::de::DeserializeSeed<'de> for FieldSeed<'_> {
    type Value = Field;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl serde::de::Visitor<'_> for FieldSeed<'_> {
    type Value = Field;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a column name")
    }

    fn visit_str<E: serde::de::Error>(self, name: &str) -> std::result::Result<Self::Value, E> {
        let fields = self.0.arrow().fields();
        let column = if fields.get(self.1).is_some_and(|f| f.name() == name) {
            Some(self.1)
        } else {
            self.0.arrow().index_of(name).ok()
        };
        match column {
            _ if name == IS_DELETED => Ok(Field::IsDeleted(column)),
            Some(i) => Ok(Field::Column(i)),
            None => Err(E::custom("unknown column")),
        }
    }
}

/// One column's value, handed to the [`RowsBuilder`] as a [`Scalar`].
struct ValueSeed<'b, 's>(&'b mut RowsBuilder<'s>, usize);

impl<'de> serde::de::DeserializeSeed<'de> for ValueSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl ValueSeed<'_, '_> {
    fn give<E: serde::de::Error>(self, v: Scalar<'_>) -> std::result::Result<(), E> {
        self.0.given(self.1, v).map_err(|(_, reason)| E::custom(reason))
    }
}

impl<'de> serde::de::Visitor<'de> for ValueSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON scalar")
    }

    fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<(), E> {
        self.give(Scalar::Null)
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> std::result::Result<(), E> {
        self.give(Scalar::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<(), E> {
        self.give(Scalar::Int(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<(), E> {
        match i64::try_from(v) {
            Ok(i) => self.give(Scalar::Int(i)),
            Err(_) => self.give(Scalar::UInt(v)),
        }
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<(), E> {
        self.give(Scalar::Float(v))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<(), E> {
        self.give(Scalar::Str(v))
    }
}

/// Parses JSON lines; `first_line` is the 1-based line number of `text`'s
/// first line. Blank lines are skipped.
pub fn parse_json_lines(text: &str, source: &str, first_line: usize) -> Result<Vec<(usize, Value)>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map(|v| (first_line + i, v))
                .map_err(|e| bad(source, first_line + i, None, format!("malformed JSON: {e}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> TableSchema {
        TableSchema::new(
            r#"{"type":"record","name":"r","fields":[
              {"name":"id","type":"string"},{"name":"ts","type":"long"},
              {"name":"d","type":["null",{"type":"int","logicalType":"date"}],"default":null},
              {"name":"t","type":["null",{"type":"long","logicalType":"timestamp-millis"}],"default":null},
              {"name":"m","type":["null",{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}],"default":null},
              {"name":"n","type":"int"}]}"#,
            &["id"],
            Some("ts"),
            None,
        )
        .unwrap()
    }

    #[test]
    fn accepts_logical_types_as_people_write_them() {
        let rows = rows_from_json(
            &schema(),
            &[
                json!({"id":"a","ts":1,"d":"2024-01-31","t":"2024-01-31T12:00:00.5Z","m":"12.34","n":1}),
                json!({"id":"b","ts":2,"d":19753,"t":1706702400000i64,"m":12.5,"n":2}),
                json!({"id":"c","ts":3,"_hoodie_is_deleted":true}),
            ],
            "in",
            1,
        )
        .unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows.deleted.as_ref().unwrap().true_count(), 1);
        let d = rows.batch.column(2).as_any().downcast_ref::<arrow::array::Date32Array>().unwrap();
        assert_eq!(d.value(0), 19753);
        let m = rows.batch.column(4).as_any().downcast_ref::<arrow::array::Decimal128Array>().unwrap();
        assert_eq!((m.value(0), m.value(1)), (1234, 1250));
        let t = rows.batch.column(3).as_any().downcast_ref::<arrow::array::TimestampMillisecondArray>().unwrap();
        assert_eq!(t.value(0), 1_706_702_400_500);
    }

    #[test]
    fn errors_name_record_field_and_reason() {
        let s = schema();
        let cases = [
            (json!({"ts":1,"n":1}), "field `id`: missing record key"),
            (json!({"id":"a","n":1}), "field `ts`: missing ordering value"),
            (json!({"id":"a","ts":null,"n":1}), "field `ts`: missing ordering value"),
            (json!({"id":"a","ts":"soon","n":1}), "field `ts`: expected an integer"),
            (json!({"id":"a","ts":1,"n":1,"color":"red"}), "field `color`: unknown column"),
            (json!({"id":"a","ts":1}), "field `n`: missing value"),
            (json!({"id":"a","ts":1,"n":1,"d":"31/01/2024"}), "field `d`: expected a date"),
            (json!({"id":"a","ts":1,"n":1,"m":"1.234"}), "field `m`"),
            (json!({"id":"a","ts":1,"n":1e12}), "field `n`"),
            (json!([1, 2]), "expected a JSON object"),
        ];
        for (v, expect) in cases {
            let ok = json!({"id":"z","ts":0,"n":0});
            let err = rows_from_json(&s, &[ok, v.clone()], "in.jsonl", 10).unwrap_err().to_string();
            assert!(err.contains("in.jsonl line 11") && err.contains(expect), "{v}: {err}");
        }
        let err = parse_json_lines("{\"id\":1}\n\n{oops\n", "f.jsonl", 1).unwrap_err().to_string();
        assert!(err.contains("f.jsonl line 3") && err.contains("malformed JSON"), "{err}");
    }

    /// The reference decoding of a JSON-lines text.
    fn reference(schema: &TableSchema, text: &str, source: &str) -> Result<Rows> {
        let values = parse_json_lines(text, source, 1)?;
        let numbered: Vec<(usize, &Value)> = values.iter().map(|(n, v)| (*n, v)).collect();
        rows_from_numbered(schema, &numbered, source)
    }

    #[test]
    fn json_lines_stream_into_the_columns_the_reference_decoding_builds() {
        let s = schema();
        let lines = [
            r#"{"id":"a","ts":1,"d":"2024-01-31","t":"2024-01-31T12:00:00.5Z","m":"12.34","n":1}"#,
            "",
            r#"{"n":2,"m":12.5,"t":1706702400000,"d":19753,"ts":-2,"id":"b\u00e9"}"#,
            r#"  {"id":"c","ts":3,"_hoodie_is_deleted":true}  "#,
            r#"{"id":"d","ts":4,"n":-7,"d":null,"_hoodie_is_deleted":false}"#,
        ];
        let text = lines.join("\n");
        // The streaming path decodes it, with no fallback.
        let got = stream_decode(&s, &text, 1).unwrap();
        let want = reference(&s, &text, "in").unwrap();
        assert_eq!(got.batch, want.batch);
        assert_eq!(got.deleted, want.deleted);
        assert_eq!(keys(&got), keys(&want));
        assert_eq!(got.len(), 4);
        // A table that keeps `_hoodie_is_deleted` as a column: the flag
        // deletes and fills the column.
        let flagged = TableSchema::new(
            r#"{"type":"record","name":"r","fields":[
              {"name":"id","type":"string"},{"name":"ts","type":"long"},
              {"name":"_hoodie_is_deleted","type":"boolean","default":false}]}"#,
            &["id"],
            Some("ts"),
            None,
        )
        .unwrap();
        let text = "{\"id\":\"a\",\"ts\":1,\"_hoodie_is_deleted\":true}\n{\"id\":\"b\",\"ts\":2}\n{\"_hoodie_is_deleted\":false,\"id\":\"c\",\"ts\":3}";
        let got = stream_decode(&flagged, text, 1).unwrap();
        let want = reference(&flagged, text, "in").unwrap();
        assert_eq!((&got.batch, &got.deleted), (&want.batch, &want.deleted));
        assert_eq!(got.deleted.as_ref().map(BooleanArray::true_count), Some(1));
        // A field given twice: the last one counts, as in a JSON tree.
        let twice = r#"{"id":"e","ts":5,"n":1,"n":2}"#;
        let got = rows_from_json_lines(&s, twice, "in", 1).unwrap();
        assert_eq!(got.batch, reference(&s, twice, "in").unwrap().batch);
        let n = got.batch.column(5).as_any().downcast_ref::<arrow::array::Int32Array>().unwrap();
        assert_eq!(n.value(0), 2);
    }

    #[test]
    fn json_lines_fail_as_the_reference_decoding_does() {
        let s = schema();
        let faulty = [
            r#"{"ts":1,"n":1}"#,
            r#"{"id":"a","ts":null,"n":1}"#,
            r#"{"id":"a","ts":"soon","n":1}"#,
            r#"{"id":"a","ts":1,"n":1,"color":"red"}"#,
            r#"{"id":"a","ts":1}"#,
            r#"{"id":"a","ts":1,"n":1,"d":"31/01/2024"}"#,
            r#"{"id":"a","ts":1,"n":1,"m":"1.234"}"#,
            r#"{"id":"a","ts":1,"n":1e12}"#,
            r#"{"id":"a","ts":1,"n":99999999999999999999}"#,
            r#"{"id":"a","ts":1,"n":[1]}"#,
            r#"{"id":"a","ts":1,"n":1,"_hoodie_is_deleted":"yes"}"#,
            r#"{"id":7,"ts":1,"n":1}"#,
            r#"[1, 2]"#,
            r#"{"id":"a","ts":1,"n":1} trailing"#,
            r#"{"id":"a","ts":1,"n":1"#,
            // Two faults: the reference names the first field in schema order.
            r#"{"n":"x","ts":1}"#,
        ];
        for line in faulty {
            let text = format!("{{\"id\":\"z\",\"ts\":0,\"n\":0}}\n\n{line}\n");
            let got = rows_from_json_lines(&s, &text, "in.jsonl", 1).unwrap_err().to_string();
            let want = reference(&s, &text, "in.jsonl").unwrap_err().to_string();
            assert_eq!(got, want, "{line}");
            assert!(got.starts_with("in.jsonl line 3"), "{line}: {got}");
        }
    }

    #[test]
    fn a_left_out_field_takes_its_schema_default() {
        let s = TableSchema::new(
            r#"{"type":"record","name":"r","fields":[
              {"name":"id","type":"string"},{"name":"ts","type":"long"},
              {"name":"n","type":"int","default":7},
              {"name":"label","type":"string","default":"none"},
              {"name":"_hoodie_is_deleted","type":"boolean","default":false}]}"#,
            &["id"],
            Some("ts"),
            None,
        )
        .unwrap();
        let rows = rows_from_json(&s, &[json!({"id":"a","ts":1}), json!({"id":"b","ts":2,"n":3})], "in", 1).unwrap();
        let b = &rows.batch;
        let n = b.column(2).as_any().downcast_ref::<arrow::array::Int32Array>().unwrap();
        assert_eq!((n.value(0), n.value(1)), (7, 3));
        assert_eq!(b.column(3).as_any().downcast_ref::<arrow::array::StringArray>().unwrap().value(0), "none");
        assert!(!b.column(4).as_any().downcast_ref::<arrow::array::BooleanArray>().unwrap().value(0));
        assert!(rows.deleted.is_none());
        // A key field takes no default: every record names its key.
        let keyed = TableSchema::new(
            r#"{"type":"record","name":"r","fields":[{"name":"id","type":"string","default":"x"},
              {"name":"ts","type":"long"}]}"#,
            &["id"],
            Some("ts"),
            None,
        )
        .unwrap();
        let err = rows_from_json(&keyed, &[json!({"ts":1})], "in", 1).unwrap_err().to_string();
        assert!(err.contains("field `id`: missing record key"), "{err}");
        // A default fills a field left out, not one given as null.
        let err = rows_from_json(&s, &[json!({"id":"a","ts":1,"n":null})], "in", 1).unwrap_err().to_string();
        assert!(err.contains("field `n`: null in a non-nullable column"), "{err}");
    }

    /// The Doris unique-key example: keyed by user, day and group.
    fn composite() -> TableSchema {
        TableSchema::new(
            r#"{"type":"record","name":"r","fields":[
              {"name":"user_id","type":"long"},
              {"name":"date","type":{"type":"int","logicalType":"date"}},
              {"name":"group_id","type":["null","string"],"default":null},
              {"name":"ts","type":"long"},{"name":"cost","type":["null","long"],"default":null}]}"#,
            &["user_id", "date", "group_id"],
            Some("ts"),
            None,
        )
        .unwrap()
    }

    fn keys(rows: &Rows) -> Vec<&str> {
        rows.keys().keys().iter().map(Option::unwrap_or_default).collect()
    }

    #[test]
    fn composite_keys_are_built_the_same_from_json_and_arrow() {
        let s = composite();
        let json = rows_from_json(
            &s,
            &[
                json!({"user_id":1,"date":"2020-02-22","group_id":"1","ts":5}),
                json!({"user_id":10004,"date":"2017-10-01","group_id":null,"ts":6,"_hoodie_is_deleted":true}),
                json!({"user_id":-3,"date":0,"group_id":"","ts":7}),
            ],
            "in",
            1,
        )
        .unwrap();
        let want = [
            "user_id:1,date:2020-02-22,group_id:1",
            "user_id:10004,date:2017-10-01,group_id:__null__",
            "user_id:-3,date:1970-01-01,group_id:__empty__",
        ];
        assert_eq!(keys(&json), want);
        // The same rows through the Arrow door (the key columns given as
        // other types are cast first), deletes included.
        let batch = RecordBatch::try_new(
            Arc::new(arrow::datatypes::Schema::new(vec![
                arrow::datatypes::Field::new("user_id", DataType::Int32, false),
                arrow::datatypes::Field::new("date", DataType::Date32, false),
                arrow::datatypes::Field::new("group_id", DataType::Utf8, true),
                arrow::datatypes::Field::new("ts", DataType::Int64, false),
                arrow::datatypes::Field::new(IS_DELETED, DataType::Boolean, false),
            ])),
            vec![
                Arc::new(arrow::array::Int32Array::from(vec![1, 10004, -3])),
                Arc::new(arrow::array::Date32Array::from(vec![18_314, 17_440, 0])),
                Arc::new(arrow::array::StringArray::from(vec![Some("1"), None, Some("")])),
                Arc::new(arrow::array::Int64Array::from(vec![5, 6, 7])),
                Arc::new(BooleanArray::from(vec![false, true, false])),
            ],
        )
        .unwrap();
        let arrow_rows = rows_from_batch(&s, &batch, "batch").unwrap();
        assert_eq!(keys(&arrow_rows), want);
        assert_eq!(arrow_rows.deleted.as_ref().map(BooleanArray::true_count), Some(1));
    }

    #[test]
    fn composite_key_errors_name_the_record_and_field() {
        let s = composite();
        let ok = json!({"user_id":1,"date":"2020-02-22","group_id":"1","ts":5});
        let cases = [
            // Left out: a key field must be given, even a nullable one.
            (json!({"user_id":1,"group_id":"1","ts":5}), "field `date`: missing record key"),
            (json!({"user_id":1,"date":"2020-02-22","ts":5}), "field `group_id`: missing record key"),
            (json!({"user_id":null,"date":"2020-02-22","group_id":"1","ts":5}), "field `user_id`: missing record key"),
            (json!({"user_id":"x","date":"2020-02-22","group_id":"1","ts":5}), "field `user_id`: expected an integer"),
        ];
        for (v, expect) in cases {
            let err = rows_from_json(&s, &[ok.clone(), v.clone()], "in.jsonl", 4).unwrap_err().to_string();
            assert!(err.contains("in.jsonl line 5") && err.contains(expect), "{v}: {err}");
        }
        // Every value null or empty: Hudi refuses such a key, and so do we.
        let s2 = TableSchema::new(
            r#"{"type":"record","name":"r","fields":[{"name":"a","type":["null","string"],"default":null},
              {"name":"b","type":"string"},{"name":"ts","type":"long"}]}"#,
            &["a", "b"],
            Some("ts"),
            None,
        )
        .unwrap();
        let err = rows_from_json(&s2, &[json!({"a":"x","b":"","ts":1}), json!({"a":null,"b":"","ts":1})], "in", 7)
            .unwrap_err()
            .to_string();
        assert!(err.contains("in line 8") && err.contains("every record key field (a, b) is null or empty"), "{err}");
        // An Arrow batch without a key column is refused, even a nullable one.
        let batch = RecordBatch::try_new(
            Arc::new(arrow::datatypes::Schema::new(vec![
                arrow::datatypes::Field::new("b", DataType::Utf8, false),
                arrow::datatypes::Field::new("ts", DataType::Int64, false),
            ])),
            vec![
                Arc::new(arrow::array::StringArray::from(vec!["y"])),
                Arc::new(arrow::array::Int64Array::from(vec![1])),
            ],
        )
        .unwrap();
        let err = rows_from_batch(&s2, &batch, "batch").unwrap_err().to_string();
        assert!(err.contains("field `a`: missing record key column"), "{err}");
    }
}
