//! The trips schema and the live workload's events, shared by the tests and
//! `benches/live.rs` (which includes this file): a trips table with 400 keys in two
//! partitions, and batches of 50 out-of-order events whose times are unique
//! across writers (the residue of `ts` modulo 4 is the writer's number).

use std::sync::Arc;

use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use rand::Rng;

/// The table's Avro schema.
pub const SCHEMA: &str = r#"{"type":"record","name":"trips_record","namespace":"hoodie.trips","fields":[
    {"name":"ts","type":"long"},{"name":"uuid","type":"string"},
    {"name":"rider","type":["null","string"],"default":null},
    {"name":"fare","type":"double"},{"name":"city","type":"string"}]}"#;

/// One event: key number, event time, fare.
pub type Event = (u32, i64, f64);

/// The Arrow schema the writers send.
pub fn arrow_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("uuid", DataType::Utf8, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("rider", DataType::Utf8, true),
        Field::new("fare", DataType::Float64, false),
        Field::new("city", DataType::Utf8, false),
    ]))
}

/// The next 50 events of writer `writer` (0 to 3).
pub fn next_events(rng: &mut impl Rng, writer: i64) -> Vec<Event> {
    (0..50)
        .map(|_| {
            (
                rng.random_range(0..400u32),
                rng.random_range(1..1_000_000i64) * 4 + writer,
                f64::from(rng.random_range(0..1000u32)),
            )
        })
        .collect()
}

/// `events` as a batch of `schema` (see [`arrow_schema`]), ridden by `w<writer>`.
pub fn batch(schema: &SchemaRef, events: &[Event], writer: i64) -> RecordBatch {
    RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from_iter_values(events.iter().map(|e| format!("key-{:04}", e.0)))),
            Arc::new(Int64Array::from_iter_values(events.iter().map(|e| e.1))),
            Arc::new(StringArray::from_iter_values(events.iter().map(|_| format!("w{writer}")))),
            Arc::new(Float64Array::from_iter_values(events.iter().map(|e| e.2))),
            Arc::new(StringArray::from_iter_values(events.iter().map(|e| ["paris", "rome"][(e.0 % 2) as usize]))),
        ],
    )
    .expect("a batch of the live schema")
}

/// The line an output file records for a committed event.
pub fn event_line(e: &Event) -> String {
    format!("E key-{:04} {} {}", e.0, e.1, e.2)
}
