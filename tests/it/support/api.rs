//! Fixtures of the tests that use the Rust API: hybrid-logical table
//! settings, and a four-column fares table with batches of its rows.

use std::sync::Arc;

use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use tributary::{TableSettings, TimeSettings};
use tributary_timeline::TimeMode;

/// Table settings with hybrid-logical instants (no 200 ms wait per instant).
pub fn hybrid() -> TableSettings {
    TableSettings { time: TimeSettings { mode: TimeMode::HybridLogical, ..Default::default() }, ..Default::default() }
}

/// A fares table's Avro schema: `uuid`, `ts`, `fare`, `city`.
pub const FARES_SCHEMA: &str = r#"{"type":"record","name":"trips","fields":[
    {"name":"uuid","type":"string"},{"name":"ts","type":"long"},
    {"name":"fare","type":"double"},{"name":"city","type":"string"}]}"#;

/// Rows `(uuid, ts, fare)` in city `oslo`, as a batch of [`FARES_SCHEMA`].
pub fn oslo_batch(rows: &[(&str, i64, f64)]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("uuid", DataType::Utf8, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("fare", DataType::Float64, false),
        Field::new("city", DataType::Utf8, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.2))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|_| "oslo"))),
        ],
    )
    .unwrap()
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
    let b = oslo_batch(rows);
    let flags = arrow::array::BooleanArray::from_iter(flags.iter().map(|f| Some(*f)));
    let mut fields: Vec<Field> = b.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new("_hoodie_is_deleted", DataType::Boolean, true));
    let mut columns = b.columns().to_vec();
    columns.push(Arc::new(flags));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}
