//! Schema evolution while writers run: columns added on write and with
//! `tributary alter`, promotions, writers that hold an older schema,
//! concurrent evolutions, refused changes, and every reader on the result.

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use serde_json::{Value, json};
use tributary::{Alteration, CreateOptions, ErrorKind, ReadOptions, Table, WriteClient, WriteSettings};
use tributary_compaction::CompactorSettings;

use crate::support::*;

const SCHEMA: &str = r#"{"type":"record","name":"r","fields":[
    {"name":"id","type":"string"},{"name":"ts","type":"long"},
    {"name":"a","type":["null","int"],"default":null}]}"#;

async fn create(dir: &Path) -> Table {
    let mut options = CreateOptions::new(SCHEMA, "id", "ts");
    options.buckets = 2;
    Table::create_local(&dir.join("t"), options).await.unwrap()
}

/// `client` evolved by adding `columns` (name, Avro type) as nullable columns.
fn with_columns(client: &WriteClient, columns: &[(&str, &str)]) -> tributary::Result<WriteClient> {
    let mut json = client.schema().full_table_json();
    for (name, t) in columns {
        json = tributary_format::with_added_column(&json, name, &json!(t), None)?;
    }
    Ok(client.evolved(client.schema().with_json(&json)?)?)
}

async fn commit(client: &WriteClient, records: &[Value]) -> tributary::Result<()> {
    let mut c = client.start_commit().await?;
    c.write_json(records, "test", 1).await?;
    c.commit().await?;
    Ok(())
}

/// The table's rows by key, without meta columns or null values.
async fn rows(t: &Table, options: &ReadOptions) -> BTreeMap<String, Value> {
    let batch = t.read(options).await.unwrap();
    let mut out = BTreeMap::new();
    for r in batch_json(&batch) {
        let mut r = r;
        r.as_object_mut().unwrap().retain(|_, v| !v.is_null());
        out.insert(r["id"].as_str().unwrap().to_string(), r);
    }
    out
}

/// Rows by their key.
fn by_key(rows: Vec<(&str, Value)>) -> BTreeMap<String, Value> {
    rows.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn batch_json(batch: &arrow::array::RecordBatch) -> Vec<Value> {
    let mut w = arrow::json::ArrayWriter::new(Vec::new());
    w.write(batch).unwrap();
    w.finish().unwrap();
    let bytes = w.into_inner();
    if bytes.is_empty() { Vec::new() } else { serde_json::from_slice(&bytes).unwrap() }
}

fn names(t: &tributary::TableSchema) -> Vec<String> {
    t.arrow().fields().iter().map(|f| f.name().clone()).collect()
}

#[tokio::test]
async fn a_writer_holding_the_old_schema_never_erases_a_column_it_does_not_know() {
    let dir = tempfile::tempdir().unwrap();
    let t = create(dir.path()).await;
    let old = t.write_client(WriteSettings::default()).await.unwrap();
    let new = with_columns(&old, &[("b", "string")]).unwrap();
    commit(&new, &[json!({"id":"k1","ts":1,"a":1,"b":"x"}), json!({"id":"k2","ts":1,"a":1,"b":"y"})]).await.unwrap();
    // Newer event times from the old writer: its columns win, `b` stays.
    commit(&old, &[json!({"id":"k1","ts":2,"a":2}), json!({"id":"k3","ts":1,"a":3})]).await.unwrap();
    // An older event time loses whole.
    commit(&old, &[json!({"id":"k2","ts":0,"a":9})]).await.unwrap();
    let want = by_key(vec![
        ("k1", json!({"id":"k1","ts":2,"a":2,"b":"x"})),
        ("k2", json!({"id":"k2","ts":1,"a":1,"b":"y"})),
        ("k3", json!({"id":"k3","ts":1,"a":3})),
    ]);
    assert_eq!(rows(&t, &ReadOptions::default()).await, want);
    // The old writer's commits recorded the schema in force, not theirs.
    assert_eq!(names(&t.schema_at(None).await.unwrap().schema), ["id", "ts", "a", "b"]);
    // Compaction merges the same way, into base files of the new schema.
    let compactor = t.compactor(CompactorSettings::default()).await.unwrap();
    assert!(!compactor.run_once().await.unwrap().is_empty());
    assert_eq!(rows(&t, &ReadOptions::default()).await, want);
    let ro = ReadOptions { query: tributary::Query::ReadOptimized, ..Default::default() };
    assert_eq!(rows(&t, &ro).await, want);
    // And the official reader reads the compacted slices alike.
    if have_official_reader() {
        let official: BTreeMap<String, Value> = official_rows_of(&t, false)
            .into_iter()
            .map(|mut r| {
                r.as_object_mut().unwrap().retain(|k, v| !k.starts_with("_hoodie") && !v.is_null());
                (r["id"].as_str().unwrap().to_string(), r)
            })
            .collect();
        assert_eq!(official, want);
    }
}

#[tokio::test]
async fn a_compactor_made_before_an_evolution_keeps_the_new_columns() {
    let dir = tempfile::tempdir().unwrap();
    let t = create(dir.path()).await;
    let compactor = t.compactor(CompactorSettings::default()).await.unwrap();
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    commit(&client, &[json!({"id":"k1","ts":1,"a":1})]).await.unwrap();
    let evolved = with_columns(&client, &[("b", "long")]).unwrap();
    commit(&evolved, &[json!({"id":"k2","ts":1,"b":7})]).await.unwrap();
    assert!(!compactor.run_once().await.unwrap().is_empty());
    let got = rows(&t, &ReadOptions { query: tributary::Query::ReadOptimized, ..Default::default() }).await;
    assert_eq!(got["k2"], json!({"id":"k2","ts":1,"b":7}));
    // The compaction commit records the schema in force.
    assert_eq!(names(&t.schema_at(None).await.unwrap().schema), ["id", "ts", "a", "b"]);
}

#[tokio::test]
async fn writers_that_add_different_columns_at_once_both_commit() {
    let dir = tempfile::tempdir().unwrap();
    let t = create(dir.path()).await;
    let base = t.write_client(WriteSettings::default()).await.unwrap();
    let x = with_columns(&base, &[("x", "long")]).unwrap();
    let y = with_columns(&base, &[("y", "string")]).unwrap();
    let mut cx = x.start_commit().await.unwrap();
    let mut cy = y.start_commit().await.unwrap();
    cx.write_json(&[json!({"id":"k1","ts":1,"x":1})], "x", 1).await.unwrap();
    cy.write_json(&[json!({"id":"k1","ts":2,"y":"b"}), json!({"id":"k2","ts":1,"y":"c"})], "y", 1).await.unwrap();
    cx.commit().await.unwrap();
    cy.commit().await.unwrap();
    assert_eq!(names(&t.schema_at(None).await.unwrap().schema), ["id", "ts", "a", "x", "y"]);
    let got = rows(&t, &ReadOptions::default()).await;
    // Each writer's block lacks the other's column, so neither erases it.
    assert_eq!(got["k1"], json!({"id":"k1","ts":2,"x":1,"y":"b"}));
    assert_eq!(got["k2"], json!({"id":"k2","ts":1,"y":"c"}));
    // A later client writes both.
    let both = t.write_client(WriteSettings::default()).await.unwrap();
    commit(&both, &[json!({"id":"k3","ts":1,"x":3,"y":"d"})]).await.unwrap();
    assert_eq!(rows(&t, &ReadOptions::default()).await["k3"], json!({"id":"k3","ts":1,"x":3,"y":"d"}));
}

#[tokio::test]
async fn the_same_column_added_with_two_types_fails_the_later_commit() {
    let dir = tempfile::tempdir().unwrap();
    let t = create(dir.path()).await;
    let base = t.write_client(WriteSettings::default()).await.unwrap();
    let long = with_columns(&base, &[("c", "long")]).unwrap();
    let text = with_columns(&base, &[("c", "string")]).unwrap();
    let mut first = long.start_commit().await.unwrap();
    let mut second = text.start_commit().await.unwrap();
    first.write_json(&[json!({"id":"k1","ts":1,"c":1})], "first", 1).await.unwrap();
    second.write_json(&[json!({"id":"k2","ts":1,"c":"two"})], "second", 1).await.unwrap();
    first.commit().await.unwrap();
    let e = second.commit().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    let msg = e.to_string();
    assert!(msg.contains("`c`") && msg.contains("long") && msg.contains("string"), "{msg}");
    // Nothing of the failed commit is visible; the table reads.
    let got = rows(&t, &ReadOptions::default()).await;
    assert_eq!(got.keys().collect::<Vec<_>>(), ["k1"]);
    assert_eq!(names(&t.schema_at(None).await.unwrap().schema), ["id", "ts", "a", "c"]);
    // The same column with the same type is no conflict.
    let again = with_columns(&base, &[("c", "long")]).unwrap();
    commit(&again, &[json!({"id":"k3","ts":1,"c":3})]).await.unwrap();
}

#[tokio::test]
async fn promotions_read_old_records_in_the_new_type() {
    let dir = tempfile::tempdir().unwrap();
    let t = create(dir.path()).await;
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    commit(&client, &[json!({"id":"k1","ts":1,"a":7}), json!({"id":"k2","ts":1,"a":-3})]).await.unwrap();
    t.alter_schema(&[Alteration::Promote { name: "a".into(), data_type: "long".into() }]).await.unwrap();
    let got = rows(&t, &ReadOptions::default()).await;
    assert_eq!(got["k1"]["a"], json!(7));
    t.alter_schema(&[Alteration::Promote { name: "a".into(), data_type: "string".into() }]).await.unwrap();
    let got = rows(&t, &ReadOptions::default()).await;
    assert_eq!((&got["k1"]["a"], &got["k2"]["a"]), (&json!("7"), &json!("-3")));
    // The old client still commits ints; they read as strings.
    commit(&client, &[json!({"id":"k2","ts":2,"a":5})]).await.unwrap();
    let compactor = t.compactor(CompactorSettings::default()).await.unwrap();
    compactor.run_once().await.unwrap();
    let got = rows(&t, &ReadOptions { query: tributary::Query::ReadOptimized, ..Default::default() }).await;
    assert_eq!((&got["k1"]["a"], &got["k2"]["a"]), (&json!("7"), &json!("5")));
    let schema = t.schema_at(None).await.unwrap().schema;
    assert_eq!(schema.data_type(2), &arrow::datatypes::DataType::Utf8);
}

#[tokio::test]
async fn time_travel_and_incremental_reads_see_the_schema_of_their_time() {
    let dir = tempfile::tempdir().unwrap();
    let t = create(dir.path()).await;
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    commit(&client, &[json!({"id":"k1","ts":1,"a":1})]).await.unwrap();
    let before = t.timeline().await.unwrap().latest_completed_write().unwrap().requested.clone();
    let evolved = with_columns(&client, &[("b", "string")]).unwrap();
    commit(&evolved, &[json!({"id":"k2","ts":1,"b":"x"})]).await.unwrap();
    let then = t.read(&ReadOptions { as_of: Some(before.clone()), ..Default::default() }).await.unwrap();
    assert_eq!(then.schema().fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>(), ["id", "ts", "a"]);
    assert_eq!(t.schema_at(Some(&before)).await.unwrap().recorded_by, Some(before.clone()));
    let completed = t.timeline().await.unwrap().completion_time(&before).cloned().unwrap();
    let incremental = tributary::Query::Incremental { begin: completed, end: "99999999999999999".parse().unwrap() };
    let got = rows(&t, &ReadOptions { query: incremental, ..Default::default() }).await;
    assert_eq!(got.into_values().collect::<Vec<_>>(), [json!({"id":"k2","ts":1,"b":"x"})]);
}

/// The bytes of every file under `root`, by path.
fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    file_paths(root, |_| true)
        .into_iter()
        .map(|p| (p.strip_prefix(root).unwrap().display().to_string(), std::fs::read(&p).unwrap()))
        .collect()
}

#[test]
fn refused_changes_name_the_column_and_leave_the_table_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("s.avsc");
    std::fs::write(&schema, SCHEMA).unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    tributary_ok(&["init", t, "--schema", schema.to_str().unwrap(), "--record-key", "id", "--ordering-field", "ts"]);
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, "{\"id\":\"k1\",\"ts\":1,\"a\":1}\n").unwrap();
    tributary_ok(&["write", t, "--input", input.to_str().unwrap()]);
    tributary_ok(&["alter", t, "--add-column", "n:long"]);
    let before = snapshot(&table);
    let cases: [(&[&str], &str); 6] = [
        (&["--promote", "n:int"], "long → int narrows"),
        (&["--promote", "a:boolean"], "not a promotion"),
        (&["--promote", "gone:long"], "`gone`"),
        (&["--add-column", "a:string"], "already has a column"),
        (&["--add-column", "z:uuid"], "column type `uuid`"),
        (&["--add-column", "z:long:\"x\""], "not valid Avro"),
    ];
    for (args, says) in cases {
        let mut all = vec!["alter", t];
        all.extend_from_slice(args);
        let e = tributary_err(&all);
        assert!(e.contains(says), "{args:?}: {e}");
        assert_eq!(snapshot(&table), before, "{args:?} changed the table");
    }
    // A write whose records carry a new column, without --evolve-schema.
    std::fs::write(&input, "{\"id\":\"k2\",\"ts\":1,\"q\":1}\n").unwrap();
    let e = tributary_err(&["write", t, "--input", input.to_str().unwrap()]);
    assert!(e.contains("`q`") && e.contains("unknown column"), "{e}");
    // With it, a new column of nulls only, or of mixed kinds.
    for (text, says) in [
        ("{\"id\":\"k2\",\"ts\":1,\"q\":null}\n", "all null"),
        ("{\"id\":\"k2\",\"ts\":1,\"q\":1}\n{\"id\":\"k3\",\"ts\":1,\"q\":\"x\"}\n", "one kind"),
        ("{\"id\":\"k2\",\"ts\":1,\"q\":{\"x\":1}}\n", "nested"),
    ] {
        std::fs::write(&input, text).unwrap();
        let e = tributary_err(&["write", t, "--input", input.to_str().unwrap(), "--evolve-schema"]);
        assert!(e.contains("`q`") && e.contains(says), "{e}");
    }
    // A sequence group in a table that merges whole rows.
    let e =
        tributary_err(&["alter", t, "--add-column", "g:long", "--add-column", "g1:string", "--sequence-group", "g=g1"]);
    assert!(e.contains("no sequence groups"), "{e}");
    assert_eq!(snapshot(&table), before, "a refused group changed the table");
    // Nothing of a refused write was created either.
    assert_eq!(snapshot(&table), before, "a refused write changed the table");
}

#[test]
fn write_evolve_schema_adds_columns_as_the_input_brings_them() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("s.avsc");
    std::fs::write(&schema, SCHEMA).unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    tributary_ok(&["init", t, "--schema", schema.to_str().unwrap(), "--record-key", "id", "--ordering-field", "ts"]);
    let input = dir.path().join("in.jsonl");
    let mut text = String::new();
    for i in 0..20_000 {
        text.push_str(&match i {
            i if i < 9_000 => format!("{{\"id\":\"k{i}\",\"ts\":1,\"a\":{}}}\n", i % 100),
            i if i < 15_000 => format!("{{\"id\":\"k{i}\",\"ts\":1,\"b\":\"s{i}\",\"c\":{}}}\n", i % 7),
            i => format!("{{\"id\":\"k{i}\",\"ts\":1,\"c\":{}.5,\"d\":true}}\n", i % 3),
        });
    }
    std::fs::write(&input, text).unwrap();
    let out = tributary_ok(&["write", t, "--input", input.to_str().unwrap(), "--evolve-schema"]);
    assert!(out.contains("20000 records in 2 instants"), "{out}");
    let schema = tributary_ok(&["schema", t, "--format", "avro"]);
    let v: Value = serde_json::from_str(schema.trim()).unwrap();
    let fields: Vec<(String, Value)> = v["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap().to_string(), f["type"].clone()))
        .collect();
    assert_eq!(
        fields,
        [
            ("id".to_string(), json!("string")),
            ("ts".to_string(), json!("long")),
            ("a".to_string(), json!(["null", "int"])),
            ("b".to_string(), json!(["null", "string"])),
            ("c".to_string(), json!(["null", "double"])),
            ("d".to_string(), json!(["null", "boolean"])),
        ]
    );
    let read = tributary_ok(&["read", t]);
    let rows: BTreeMap<String, Value> = read
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|r| (r["id"].as_str().unwrap().to_string(), r))
        .collect();
    assert_eq!(rows.len(), 20_000);
    assert_eq!(rows["k8999"], json!({"id":"k8999","ts":1,"a":99}));
    assert_eq!(rows["k9000"], json!({"id":"k9000","ts":1,"b":"s9000","c":5.0}));
    assert_eq!(rows["k19999"], json!({"id":"k19999","ts":1,"c":1.5,"d":true}));
}

#[tokio::test]
async fn an_added_column_reads_its_default_where_no_one_wrote_it() {
    let dir = tempfile::tempdir().unwrap();
    let t = create(dir.path()).await;
    let old = t.write_client(WriteSettings::default()).await.unwrap();
    commit(&old, &[json!({"id":"k1","ts":1,"a":1})]).await.unwrap();
    t.compactor(CompactorSettings::default()).await.unwrap().run_once().await.unwrap();
    let add = Alteration::AddColumn { name: "c".into(), data_type: "long".into(), default: Some(json!(5)) };
    t.alter_schema(&[add]).await.unwrap();
    let new = t.write_client(WriteSettings::default()).await.unwrap();
    // k1: a base-file row from before the column; k2: a log record of the
    // old schema; k3: set to null, then updated by the old writer; k4: set.
    commit(&old, &[json!({"id":"k2","ts":1,"a":2})]).await.unwrap();
    commit(&new, &[json!({"id":"k3","ts":1,"c":null}), json!({"id":"k4","ts":1,"c":9})]).await.unwrap();
    commit(&old, &[json!({"id":"k3","ts":2,"a":3}), json!({"id":"k4","ts":2,"a":4})]).await.unwrap();
    let want = by_key(vec![
        ("k1", json!({"id":"k1","ts":1,"a":1,"c":5})),
        ("k2", json!({"id":"k2","ts":1,"a":2,"c":5})),
        ("k3", json!({"id":"k3","ts":2,"a":3})),
        ("k4", json!({"id":"k4","ts":2,"a":4,"c":9})),
    ]);
    assert_eq!(rows(&t, &ReadOptions::default()).await, want);
    t.compactor(CompactorSettings::default()).await.unwrap().run_once().await.unwrap();
    assert_eq!(rows(&t, &ReadOptions::default()).await, want);
}

/// A wide table of two sources (sequence groups `ts_a=a1` and `ts_b=b1`)
/// gains a third with `alter --sequence-group` while the first two keep
/// writing; every source's events arrive out of order.
#[test]
fn a_third_source_adds_its_sequence_group_while_two_keep_writing() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("wide.avsc");
    std::fs::write(
        &schema,
        r#"{"type":"record","name":"wide","fields":[{"name":"id","type":"string"},
        {"name":"ts","type":["null","long"],"default":null},
        {"name":"a1","type":["null","string"],"default":null},{"name":"ts_a","type":["null","long"],"default":null},
        {"name":"b1","type":["null","string"],"default":null},{"name":"ts_b","type":["null","long"],"default":null}]}"#,
    )
    .unwrap();
    let table = dir.path().join("wide");
    let t = table.to_str().unwrap();
    let s = schema.to_str().unwrap();
    let groups = ["--sequence-group", "ts_a=a1", "--sequence-group", "ts_b=b1"];
    let mut init = vec!["init", t, "--schema", s, "--record-key", "id", "--ordering-field", "ts", "--buckets", "2"];
    init.extend_from_slice(&groups);
    tributary_ok(&init);
    // The model: per key and source, the value with the largest event time
    // (a later write wins a tie).
    let mut model: BTreeMap<String, BTreeMap<&str, (i64, String)>> = BTreeMap::new();
    let mut rng = 7u64;
    let mut next = move |n: u64| {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (rng >> 33) % n
    };
    let input = dir.path().join("in.jsonl");
    let mut write = |source: &'static str, model: &mut BTreeMap<String, BTreeMap<&str, (i64, String)>>, round: u64| {
        let (col, ts) = match source {
            "a" => ("a1", "ts_a"),
            "b" => ("b1", "ts_b"),
            _ => ("c1", "ts_c"),
        };
        let mut text = String::new();
        for _ in 0..40 {
            let key = format!("k{}", next(30));
            let when = next(100) as i64;
            let value = format!("{source}{round}-{}", next(1000));
            text.push_str(&format!("{{\"id\":\"{key}\",\"{col}\":\"{value}\",\"{ts}\":{when}}}\n"));
            let e = model.entry(key).or_default().entry(source).or_insert((i64::MIN, String::new()));
            if when >= e.0 {
                *e = (when, value);
            }
        }
        std::fs::write(&input, text).unwrap();
        tributary_ok(&["write", t, "--input", input.to_str().unwrap(), "--columns", &format!("{col},{ts}")]);
    };
    for round in 0..3 {
        write("a", &mut model, round);
        write("b", &mut model, round);
    }
    tributary_ok(&["compact", t]);
    tributary_ok(&[
        "alter",
        t,
        "--add-column",
        "c1:string",
        "--add-column",
        "ts_c:long",
        "--sequence-group",
        "ts_c=c1",
    ]);
    for round in 3..6 {
        write("c", &mut model, round);
        write("a", &mut model, round);
        write("b", &mut model, round);
    }
    let want: Vec<Value> = model
        .iter()
        .map(|(k, sources)| {
            let mut row = serde_json::Map::new();
            row.insert("id".into(), json!(k));
            for (source, (col, ts)) in [("a", ("a1", "ts_a")), ("b", ("b1", "ts_b")), ("c", ("c1", "ts_c"))] {
                if let Some((when, value)) = sources.get(source) {
                    row.insert(col.into(), json!(value));
                    row.insert(ts.into(), json!(when));
                }
            }
            Value::Object(row)
        })
        .collect();
    let ours = |extra: &[&str]| -> Vec<Value> {
        let mut args = vec!["read", t, "--sort"];
        args.extend_from_slice(extra);
        tributary_ok(&args).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let three = want.iter().filter(|r| ["a1", "b1", "c1"].iter().all(|c| r.get(*c).is_some())).count();
    assert!(three > 10, "{three} keys hold all three sources");
    assert_eq!(ours(&[]), want, "three sources merged per key");
    let groups = tributary_ok(&["schema", t]);
    assert!(groups.contains("c1") && groups.contains("ts_c"), "{groups}");
    tributary_ok(&["compact", t]);
    assert_eq!(ours(&[]), want, "after a compaction");
    assert_eq!(ours(&["--query", "read-optimized"]), want, "read-optimized after a compaction");
    if have_official_reader() {
        let official: Vec<Value> = official_rows(&table, "")
            .into_iter()
            .map(|mut r| {
                r.as_object_mut().unwrap().retain(|k, v| !k.starts_with("_hoodie") && !v.is_null());
                r
            })
            .collect();
        let mut want = want.clone();
        want.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
        let mut official = official;
        official.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
        assert_eq!(official, want, "the official reader of the compacted table");
    }
    // A group over a column already in the table, and a group in a table
    // without groups, are refused.
    let e = tributary_err(&["alter", t, "--add-column", "d1:string", "--sequence-group", "ts_a=d1,b1"]);
    assert!(e.contains("`b1`") && e.contains("keeps the rule"), "{e}");
}

/// The schema versions of the property below: v1 `a: int`; v2 promotes
/// `a` to long and adds `b: string`; v3 adds `c: double`.
fn version_json(v: usize) -> String {
    let mut json = SCHEMA.to_string();
    if v >= 2 {
        json = tributary_format::with_column_type(&json, "a", "long").unwrap();
        json = tributary_format::with_added_column(&json, "b", &json!("string"), None).unwrap();
    }
    if v >= 3 {
        json = tributary_format::with_added_column(&json, "c", &json!("double"), None).unwrap();
    }
    json
}

/// The record a writer on schema version `v` writes: every column of its
/// version, some of them null.
fn record(v: usize, key: u8, ts: i64, seed: i64) -> Value {
    let mut r = json!({"id": format!("k{key}"), "ts": ts, "a": if seed % 7 == 0 { Value::Null } else { json!(seed) }});
    if v >= 2 {
        r["b"] = if seed % 5 == 0 { Value::Null } else { json!(format!("s{seed}")) };
    }
    if v >= 3 {
        r["c"] = if seed % 3 == 0 { Value::Null } else { json!(seed as f64 + 0.5) };
    }
    r
}

#[derive(Debug, Clone)]
enum EvolutionOp {
    /// Writer `w` commits `(key, ts, seed)` records.
    Write(usize, Vec<(u8, i64, i64)>),
    /// Writers `w1` and `w2` commit at once: both start and write, then
    /// both complete, in that order.
    Both(usize, Vec<(u8, i64, i64)>, usize, Vec<(u8, i64, i64)>),
    /// Writer `w` moves to the next schema version.
    Evolve(usize),
    /// A compaction.
    Compact,
    /// A compaction while writer `w`'s commit is open.
    CompactDuring(usize, Vec<(u8, i64, i64)>),
}

fn evolution_op() -> impl Strategy<Value = EvolutionOp> {
    let records = || prop::collection::vec((0u8..12, 0i64..40, 0i64..1000), 1..8);
    prop_oneof![
        4 => (0usize..3, records()).prop_map(|(w, r)| EvolutionOp::Write(w, r)),
        2 => (0usize..3, records(), 0usize..3, records()).prop_map(|(a, r, b, s)| EvolutionOp::Both(a, r, b, s)),
        2 => (0usize..3).prop_map(EvolutionOp::Evolve),
        1 => Just(EvolutionOp::Compact),
        1 => (0usize..3, records()).prop_map(|(w, r)| EvolutionOp::CompactDuring(w, r)),
    ]
}

/// Per key, the event-time model of records that carry only their
/// schema's columns: a record at least as new as the row sets the columns
/// it carries (null included) and keeps the others.
#[derive(Default)]
struct Carried {
    rows: BTreeMap<String, (i64, serde_json::Map<String, Value>)>,
}

impl Carried {
    fn commit(&mut self, records: &[Value]) {
        for r in records {
            let ts = r["ts"].as_i64().unwrap();
            let row = self.rows.entry(r["id"].as_str().unwrap().to_string()).or_insert((i64::MIN, Default::default()));
            if ts >= row.0 {
                row.0 = ts;
                for (k, v) in r.as_object().unwrap() {
                    row.1.insert(k.clone(), v.clone());
                }
            }
        }
    }

    fn rows(&self) -> BTreeMap<String, Value> {
        self.rows
            .iter()
            .map(|(k, (_, cols))| {
                let mut cols = cols.clone();
                cols.retain(|_, v| !v.is_null());
                (k.clone(), Value::Object(cols))
            })
            .collect()
    }
}

/// Cases of the schema-evolution property: `TRIBUTARY_EVOLUTION_CASES`,
/// by default 24.
fn evolution_cases() -> u32 {
    std::env::var("TRIBUTARY_EVOLUTION_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(evolution_cases()))]

    /// Three writers on schema versions 1 to 3 (a promotion, two added
    /// columns) commit one at a time and at once, with compactions between
    /// and during commits. Every snapshot equals the model, and so does
    /// the official reader's after a last compaction; the schema in force
    /// is the newest a commit was written under.
    #[test]
    fn writers_on_three_schema_versions_match_the_model(ops in prop::collection::vec(evolution_op(), 1..24)) {
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let (checks, table, top) = rt.block_on(async {
            let t = create(dir.path()).await;
            let first = t.write_client(WriteSettings::default()).await.unwrap();
            let mut writers: Vec<(usize, WriteClient)> = vec![(1, first.clone()), (1, first.clone()), (1, first)];
            let mut model = Carried::default();
            let mut checks = Vec::new();
            let mut n = 0i64;
            // The newest version any commit was written under.
            let mut top = 1;
            // Distinct event times: no ties, whose winner depends on
            // completion order.
            let mut records = |v: usize, rs: &[(u8, i64, i64)]| -> Vec<Value> {
                rs.iter().map(|&(k, ts, seed)| { n += 1; record(v, k, ts * 10_000 + n, seed) }).collect()
            };
            for op in &ops {
                match op {
                    EvolutionOp::Write(w, rs) => {
                        let recs = records(writers[*w].0, rs);
                        commit(&writers[*w].1, &recs).await.unwrap();
                        model.commit(&recs);
                        top = top.max(writers[*w].0);
                    }
                    EvolutionOp::Both(a, ra, b, rb) => {
                        let (ra, rb) = (records(writers[*a].0, ra), records(writers[*b].0, rb));
                        let mut ca = writers[*a].1.start_commit().await.unwrap();
                        let mut cb = writers[*b].1.start_commit().await.unwrap();
                        ca.write_json(&ra, "a", 1).await.unwrap();
                        cb.write_json(&rb, "b", 1).await.unwrap();
                        ca.commit().await.unwrap();
                        cb.commit().await.unwrap();
                        model.commit(&ra);
                        model.commit(&rb);
                        top = top.max(writers[*a].0).max(writers[*b].0);
                    }
                    EvolutionOp::Evolve(w) => {
                        let (v, client) = &writers[*w];
                        if *v < 3 {
                            let next = client.evolved(client.schema().with_json(&version_json(v + 1)).unwrap()).unwrap();
                            writers[*w] = (v + 1, next);
                        }
                    }
                    EvolutionOp::Compact => {
                        t.compactor(CompactorSettings::default()).await.unwrap().run_once().await.unwrap();
                        checks.push(("after a compaction", rows(&t, &ReadOptions::default()).await, model.rows()));
                    }
                    EvolutionOp::CompactDuring(w, rs) => {
                        let recs = records(writers[*w].0, rs);
                        let mut c = writers[*w].1.start_commit().await.unwrap();
                        c.write_json(&recs, "during", 1).await.unwrap();
                        t.compactor(CompactorSettings::default()).await.unwrap().run_once().await.unwrap();
                        c.commit().await.unwrap();
                        model.commit(&recs);
                        top = top.max(writers[*w].0);
                    }
                }
            }
            checks.push(("at the end", rows(&t, &ReadOptions::default()).await, model.rows()));
            (checks, t, top)
        });
        for (what, got, want) in &checks {
            prop_assert_eq!(got, want, "{}", what);
        }
        // The schema in force is the newest any commit was written under.
        let in_force = rt.block_on(async { table.schema_at(None).await.unwrap() });
        let columns = names(&in_force.schema);
        prop_assert_eq!(columns.len(), [0, 3, 4, 5][top], "{:?}", columns);
        // hudi 0.5.0 refuses a file slice whose logs hold a promoted column
        // in its older type ("partial-update column 'a' has type Int32 but
        // the table schema expects Int64"; `docs/interop.md`): it reads the
        // table once a compaction merged every slice into base files of
        // the schema in force.
        rt.block_on(async { table.compactor(CompactorSettings::default()).await.unwrap().run_once().await.unwrap() });
        if have_official_reader() {
            let official: BTreeMap<String, Value> = official_rows_of(&table, false)
                .into_iter()
                .map(|mut r| {
                    r.as_object_mut().unwrap().retain(|k, v| !k.starts_with("_hoodie") && !v.is_null());
                    (r["id"].as_str().unwrap().to_string(), r)
                })
                .collect();
            prop_assert_eq!(&official, &checks.last().unwrap().2, "the official reader");
        }
    }
}

#[test]
fn a_table_that_evolves_on_write_takes_new_columns_without_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("s.avsc");
    std::fs::write(&schema, SCHEMA).unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let s = schema.to_str().unwrap();
    tributary_ok(&["init", t, "--schema", s, "--record-key", "id", "--ordering-field", "ts", "--evolve-schema"]);
    let props = std::fs::read_to_string(table.join(".hoodie/hoodie.properties")).unwrap();
    assert!(props.contains("tributary.schema.evolve.on.write=true"), "{props}");
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, "{\"id\":\"k1\",\"ts\":1,\"a\":1,\"q\":\"new\"}\n").unwrap();
    tributary_ok(&["write", t, "--input", input.to_str().unwrap()]);
    assert_eq!(tributary_ok(&["read", t]).trim(), r#"{"id":"k1","ts":1,"a":1,"q":"new"}"#);
}

/// Hudi's `TableSchemaResolver` takes the schema of the completed write
/// requested last. A commit that adds a column but completes after a
/// later-requested one restates the schema in a new `ALTER_SCHEMA` commit,
/// so that write holds the column.
#[tokio::test]
async fn a_schema_change_completed_out_of_requested_order_is_restated_for_hudi() {
    let dir = tempfile::tempdir().unwrap();
    let t = create(dir.path()).await;
    let old = t.write_client(WriteSettings::default()).await.unwrap();
    let new = with_columns(&old, &[("b", "string")]).unwrap();
    let mut adds = new.start_commit().await.unwrap();
    let mut later = old.start_commit().await.unwrap();
    adds.write_json(&[json!({"id":"k1","ts":1,"b":"x"})], "adds", 1).await.unwrap();
    later.write_json(&[json!({"id":"k2","ts":1,"a":2})], "later", 1).await.unwrap();
    later.commit().await.unwrap();
    adds.commit().await.unwrap();
    let timeline = t.timeline().await.unwrap();
    let last = timeline
        .active()
        .iter()
        .filter(|i| i.is_completed() && i.action.writes_data())
        .max_by_key(|i| i.requested.clone())
        .unwrap();
    let folder = tributary::timeline::TimelineFolder::new(t.location(), t.config());
    let bytes = folder.read(last, tributary::State::Completed).await.unwrap();
    let meta = tributary_format::CommitMetadata::from_bytes_shared(&bytes, "last").unwrap();
    assert_eq!(meta.operation_type, "ALTER_SCHEMA");
    assert!(meta.schema_json().unwrap().contains("\"b\""), "{:?}", meta.schema_json());
    assert_eq!(rows(&t, &ReadOptions::default()).await.len(), 2);
}

/// A schema change requested before other writes and visible after them
/// all, whose restating commit failed (its process died first), stays on
/// the active timeline when archiving runs: writers look the schema in
/// force up there, so a writer that never knew the column still records
/// it, and readers keep it.
#[tokio::test]
async fn archiving_keeps_a_schema_change_that_became_visible_last() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let t = create(dir.path()).await;
    let healthy = t.location().clone();
    let armed = Arc::new(AtomicBool::new(false));
    let arm = armed.clone();
    let store = Arc::new(FaultStore::new(healthy.store.clone(), "the process died", move |p| {
        arm.load(Ordering::SeqCst) && p.ends_with(".deltacommit.requested")
    }));
    // One table, one lock, for every actor.
    let settings = tributary::TableSettings { lock: tributary::LockKind::InProcess, ..Default::default() };
    let faulty = Table::builder(tributary::TableLocation::new(store.clone(), healthy.root.clone()))
        .with_settings(settings)
        .open()
        .await
        .unwrap();
    let old = faulty.write_client(WriteSettings::default()).await.unwrap();
    let change = with_columns(&old, &[("b", "string")]).unwrap().start_commit().await.unwrap();
    for n in 0..6 {
        commit(&old, &[json!({"id": format!("k{n}"), "ts": 1, "a": n})]).await.unwrap();
    }
    faulty.compactor(CompactorSettings::default()).await.unwrap().run_once().await.unwrap();
    armed.store(true, Ordering::SeqCst);
    change.commit_schema_change().await.unwrap();
    armed.store(false, Ordering::SeqCst);
    assert!(!store.hit().is_empty(), "the restating commit failed");
    let tight = tributary::ArchiveSettings {
        keep_min_commits: 2,
        keep_max_commits: 4,
        cleaner_commits_retained: 0,
        compaction_delta_commits: 1,
        ..Default::default()
    };
    let summary = faulty.archive(&tight).await.unwrap();
    assert!(matches!(summary.retained, Some(tributary::Retained::SchemaInForce(_))), "{summary:?}");
    commit(&old, &[json!({"id": "k0", "ts": 2, "a": 10})]).await.unwrap();
    let fresh = Table::open_local(&dir.path().join("t")).await.unwrap();
    assert!(names(&fresh.schema_at(None).await.unwrap().schema).contains(&"b".to_string()));
    let batch = fresh.read(&ReadOptions::default()).await.unwrap();
    assert!(batch.schema().field_with_name("b").is_ok(), "{:?}", batch.schema());
    assert_eq!(rows(&fresh, &ReadOptions::default()).await["k0"]["a"], json!(10));
}
