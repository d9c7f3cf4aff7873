//! Fixtures of the tests that use the Rust API: hybrid-logical table
//! settings, and a four-column fares table with batches of its rows and
//! the rows of its reads.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Float64Type, Int64Type, Schema};
use tributary::{CreateOptions, TableSettings, TimeSettings};
use tributary_timeline::TimeMode;

/// Table settings with hybrid-logical instants (no 200 ms wait per instant).
pub fn hybrid() -> TableSettings {
    TableSettings {
        time: TimeSettings { mode: Some(TimeMode::HybridLogical), ..Default::default() },
        ..Default::default()
    }
}

/// Options of a fares table: keyed by `uuid`, ordered by `ts`,
/// partitioned by `city`, 2 buckets.
pub fn fares_options() -> CreateOptions {
    let mut o = CreateOptions::new(FARES_SCHEMA, "uuid", "ts");
    o.partition_field = Some("city".into());
    o.buckets = 2;
    o
}

/// A fares table's Avro schema: `uuid`, `ts`, `fare`, `city`.
pub const FARES_SCHEMA: &str = r#"{"type":"record","name":"trips","fields":[
    {"name":"uuid","type":"string"},{"name":"ts","type":"long"},
    {"name":"fare","type":"double"},{"name":"city","type":"string"}]}"#;

/// Rows `(uuid, ts, fare, city)` as a batch of [`FARES_SCHEMA`]; with
/// `deleted`, a `_hoodie_is_deleted` column holding one flag per row.
pub fn fares_batch(rows: &[(&str, i64, f64, &str)], deleted: Option<&[bool]>) -> RecordBatch {
    let mut fields = vec![
        Field::new("uuid", DataType::Utf8, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("fare", DataType::Float64, false),
        Field::new("city", DataType::Utf8, false),
    ];
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.2))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.3))),
    ];
    if let Some(flags) = deleted {
        assert_eq!(flags.len(), rows.len(), "one delete flag per row");
        fields.push(Field::new("_hoodie_is_deleted", DataType::Boolean, true));
        columns.push(Arc::new(BooleanArray::from_iter(flags.iter().map(|f| Some(*f)))));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

/// The rows `(uuid, ts, fare)` of a read of a fares table, in the read's
/// order.
pub fn fares_rows(batch: &RecordBatch) -> Vec<(String, i64, f64)> {
    let column = |name: &str| batch.column_by_name(name).unwrap_or_else(|| panic!("no column `{name}`"));
    let uuid = column("uuid").as_string::<i32>();
    let ts = column("ts").as_primitive::<Int64Type>();
    let fare = column("fare").as_primitive::<Float64Type>();
    (0..batch.num_rows()).map(|i| (uuid.value(i).to_string(), ts.value(i), fare.value(i))).collect()
}

/// Rows `(uuid, ts, fare)` in city `oslo`, as a batch of [`FARES_SCHEMA`].
pub fn oslo_batch(rows: &[(&str, i64, f64)]) -> RecordBatch {
    fares_batch(&in_oslo(rows), None)
}

/// [`oslo_batch`] with a `_hoodie_is_deleted` column: the rows whose key
/// `deleted` picks are deletes.
pub fn batch_with_deletes(rows: &[(&str, i64, f64)], deleted: &dyn Fn(&str) -> bool) -> RecordBatch {
    let flags: Vec<bool> = rows.iter().map(|r| deleted(r.0)).collect();
    batch_with_flags(rows, &flags)
}

/// [`oslo_batch`] with a `_hoodie_is_deleted` column holding `flags`, one
/// per row.
pub fn batch_with_flags(rows: &[(&str, i64, f64)], flags: &[bool]) -> RecordBatch {
    fares_batch(&in_oslo(rows), Some(flags))
}

/// `rows` with city `oslo`.
fn in_oslo<'a>(rows: &[(&'a str, i64, f64)]) -> Vec<(&'a str, i64, f64, &'static str)> {
    rows.iter().map(|&(uuid, ts, fare)| (uuid, ts, fare, "oslo")).collect()
}
