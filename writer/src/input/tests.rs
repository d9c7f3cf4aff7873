//! Both input doors: values as people write them, errors that name the
//! record and field, the streaming JSON decoding against the reference
//! one, and composite keys built alike from JSON and Arrow.

use std::sync::Arc;

use arrow::array::{BooleanArray, RecordBatch};
use arrow::datatypes::DataType;
use serde_json::{Value, json};
use tributary_format::{IS_DELETED, TableSchema};

use super::json::parse_json_lines;
use super::json::{rows_from_numbered, stream_decode};
use super::{Rows, rows_from_batch, rows_from_json, rows_from_json_lines};
use crate::error::Result;

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
        vec![Arc::new(arrow::array::StringArray::from(vec!["y"])), Arc::new(arrow::array::Int64Array::from(vec![1]))],
    )
    .unwrap();
    let err = rows_from_batch(&s2, &batch, "batch").unwrap_err().to_string();
    assert!(err.contains("field `a`: missing record key column"), "{err}");
    // A value that does not convert to its column's type is an error naming
    // the column, not a null.
    let batch = RecordBatch::try_new(
        Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("a", DataType::Utf8, false),
            arrow::datatypes::Field::new("b", DataType::Utf8, false),
            arrow::datatypes::Field::new("ts", DataType::Utf8, false),
        ])),
        vec![
            Arc::new(arrow::array::StringArray::from(vec!["x", "y"])),
            Arc::new(arrow::array::StringArray::from(vec!["1", "2"])),
            Arc::new(arrow::array::StringArray::from(vec!["5", "late"])),
        ],
    )
    .unwrap();
    let err = rows_from_batch(&s2, &batch, "batch").unwrap_err().to_string();
    assert!(err.contains("field `ts`") && err.contains("late"), "{err}");
}
