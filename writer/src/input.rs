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
    /// naming the record (`first_record` numbers the batch's first row).
    fn new(
        schema: &TableSchema,
        batch: RecordBatch,
        deleted: Option<BooleanArray>,
        source: &str,
        first_record: usize,
    ) -> Result<Self> {
        let keys = schema
            .record_key()
            .build(&batch)
            .map_err(|e| bad(source, first_record + e.row, e.field.as_deref(), e.reason))?;
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
    Rows::new(schema, batch, deleted, source, 1)
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

    fn push(&mut self, v: &Value) -> std::result::Result<(), String> {
        let int = |v: &Value| v.as_i64().ok_or_else(|| format!("expected an integer, got {v}"));
        let num = |v: &Value| v.as_f64().ok_or_else(|| format!("expected a number, got {v}"));
        let text = |v: &Value| v.as_str().map(str::to_owned).ok_or_else(|| format!("expected a string, got {v}"));
        match self {
            Column::Bool(b) => b.append_value(v.as_bool().ok_or_else(|| format!("expected true or false, got {v}"))?),
            Column::I32(b) => {
                b.append_value(i32::try_from(int(v)?).map_err(|_| format!("{v} does not fit a 32-bit int"))?)
            }
            Column::I64(b) => b.append_value(int(v)?),
            Column::F32(b) => b.append_value(num(v)? as f32),
            Column::F64(b) => b.append_value(num(v)?),
            Column::Str(b) => b.append_value(text(v)?),
            Column::Bin(b) => b.append_value(text(v)?.as_bytes()),
            Column::Date(b) => b.append_value(match v {
                Value::String(s) => {
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
fn timestamp(v: &Value, per_second: i64) -> std::result::Result<i64, String> {
    match v {
        Value::String(s) => {
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
fn decimal(v: &Value, precision: u8, scale: i8) -> std::result::Result<i128, String> {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
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
    let fields = schema.arrow().fields();
    let mut cols: Vec<Column> = fields
        .iter()
        .map(|f| {
            Column::new(f.data_type(), values.len()).ok_or_else(|| Error::InvalidInput {
                what: format!("column `{}`", f.name()),
                reason: format!("type {} is not supported for writing yet", f.data_type()),
            })
        })
        .collect::<Result<_>>()?;
    let mut deleted = BooleanBuilder::with_capacity(values.len());
    let mut any_deleted = false;
    let composite_key = schema.record_key().is_composite();
    for (n, value) in values.iter().enumerate() {
        let record = first_record + n;
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
        any_deleted |= is_deleted;
        deleted.append_value(is_deleted);
        for (i, (f, col)) in fields.iter().zip(cols.iter_mut()).enumerate() {
            let is_key = schema.is_key(i);
            // A composite key's field may be given as null when it is
            // nullable (its value is then written `__null__`).
            let null_key_ok = is_key && composite_key && f.is_nullable();
            let required = (is_key && !null_key_ok) || Some(i) == schema.ordering_index();
            // A field the record leaves out takes its schema default; a key
            // field takes none (every record names its key).
            let given = match obj.get(f.name()) {
                None if is_key => return Err(bad(source, record, Some(f.name()), "missing record key")),
                None => schema.default_of(i).filter(|d| !d.is_null()),
                given => given,
            };
            match given {
                None | Some(Value::Null) if required => {
                    let what = if is_key { "missing record key" } else { "missing ordering value" };
                    return Err(bad(source, record, Some(f.name()), what));
                }
                None | Some(Value::Null) if f.is_nullable() => col.null(),
                None if is_deleted => col.zero(),
                None => return Err(bad(source, record, Some(f.name()), "missing value for a non-nullable column")),
                Some(Value::Null) => return Err(bad(source, record, Some(f.name()), "null in a non-nullable column")),
                Some(v) => col.push(v).map_err(|reason| bad(source, record, Some(f.name()), reason))?,
            }
        }
    }
    let columns: Vec<ArrayRef> = cols.into_iter().map(Column::finish).collect();
    let batch = RecordBatch::try_new(schema.arrow().clone(), columns)
        .map_err(|e| bad(source, first_record, None, format!("cannot build rows: {e}")))?;
    Rows::new(schema, batch, any_deleted.then(|| deleted.finish()), source, first_record)
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
