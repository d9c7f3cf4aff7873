//! Several ordering fields (`hoodie.table.ordering.fields=ts,seq`, Hudi
//! 1.1+): the merge against an independent model, where the version with
//! the larger `(ts, seq)`, compared element by element, wins and a tie goes
//! to the later write; deletes carry both values (`ArrayWrapper`) and
//! compete alike, and a delete without a value always wins. Then the same
//! through the CLI: init, writes with deletes, compaction.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, Int64Array, RecordBatch, StringArray};
use proptest::prelude::*;
use serde_json::{Value, json};
use tributary_format::{DeleteRecord, OrderingValue, TableSchema};
use tributary_merge::Version;
use tributary_timeline::{NewTableConfig, TableConfig};

use crate::support::*;

const SCHEMA: &str = r#"{"type":"record","name":"r","fields":[
    {"name":"id","type":"string"},{"name":"ts","type":"long"},{"name":"seq","type":"string"},
    {"name":"v","type":["null","long"],"default":null}]}"#;

/// One write of the slice, in write order: rows `(key, ts, seq, v)`, or
/// deletes `(key, Some((ts, seq)))` (`None`: no ordering value).
#[derive(Debug, Clone)]
enum Write {
    Rows(Vec<(u8, i64, u8, i64)>),
    Deletes(Vec<(u8, Option<(i64, u8)>)>),
}

fn seq(s: u8) -> String {
    ["a", "b", "ab"][usize::from(s % 3)].to_string()
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        3 => prop::collection::vec((0u8..5, 0i64..3, 0u8..3, 0i64..100), 0..10).prop_map(Write::Rows),
        1 => prop::collection::vec((0u8..5, prop::option::of((0i64..3, 0u8..3))), 0..4).prop_map(Write::Deletes),
    ]
}

/// The model: per key, the winning `(ts, seq)` and the row's `v` (`None`:
/// deleted). A later version wins when its `(ts, seq)` is at least the
/// winner's; a delete without a value always wins and orders below every
/// later version.
fn model(writes: &[Write]) -> BTreeMap<String, (i64, String, i64)> {
    type Order = Option<(i64, String)>;
    let mut state: BTreeMap<u8, (Order, Option<i64>)> = BTreeMap::new();
    for w in writes {
        match w {
            Write::Rows(rows) => {
                for &(k, ts, s, v) in rows {
                    let order = Some((ts, seq(s)));
                    if state.get(&k).is_none_or(|(cur, _)| order >= *cur) {
                        state.insert(k, (order, Some(v)));
                    }
                }
            }
            Write::Deletes(ds) => {
                for &(k, d) in ds {
                    let order = d.map(|(ts, s)| (ts, seq(s)));
                    if order.is_none() || state.get(&k).is_none_or(|(cur, _)| order >= *cur) {
                        state.insert(k, (order, None));
                    }
                }
            }
        }
    }
    state
        .into_iter()
        .filter_map(|(k, (order, v))| {
            let (ts, s) = order?;
            Some((format!("k{k}"), (ts, s, v?)))
        })
        .collect()
}

fn table() -> (TableSchema, TableConfig) {
    let mut new = NewTableConfig::new("t", "id", "ts,seq", SCHEMA);
    new.version = 9;
    let config = TableConfig::new_table(&new);
    (config.table_schema().unwrap(), config)
}

fn version(schema: &TableSchema, n: usize, w: &Write) -> Version {
    match w {
        Write::Deletes(ds) => Version::Deletes(
            ds.iter()
                .map(|&(k, d)| DeleteRecord {
                    key: format!("k{k}"),
                    partition: String::new(),
                    ordering: d.map_or(OrderingValue::Null, |(ts, s)| {
                        OrderingValue::Array(vec![OrderingValue::Long(ts), OrderingValue::String(seq(s))])
                    }),
                })
                .collect(),
        ),
        Write::Rows(rows) => {
            let keys: Vec<String> = rows.iter().map(|r| format!("k{}", r.0)).collect();
            let text = |f: &dyn Fn(usize) -> String| -> ArrayRef {
                Arc::new(StringArray::from_iter_values((0..rows.len()).map(f)))
            };
            let columns: Vec<ArrayRef> = vec![
                text(&|_| format!("c{n}")),
                text(&|i| format!("{n}_{i}")),
                Arc::new(StringArray::from(keys.clone())),
                text(&|_| String::new()),
                text(&|_| format!("f{n}")),
                Arc::new(StringArray::from(keys)),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| seq(r.2)))),
                Arc::new(Int64Array::from_iter(rows.iter().map(|r| Some(r.3)))),
            ];
            Version::Rows(RecordBatch::try_new(schema.arrow_with_meta().clone(), columns).unwrap())
        }
    }
}

fn merged(writes: &[Write]) -> BTreeMap<String, (i64, String, i64)> {
    let (schema, config) = table();
    let versions: Vec<Version> = writes.iter().enumerate().map(|(n, w)| version(&schema, n, w)).collect();
    let Some(b) = tributary_merge::merge(&schema, &config, &versions).unwrap() else { return BTreeMap::new() };
    let keys = b.column(5).as_string::<i32>();
    let ts = b.column(6).as_primitive::<arrow::datatypes::Int64Type>();
    let seqs = b.column(7).as_string::<i32>();
    let v = b.column(8).as_primitive::<arrow::datatypes::Int64Type>();
    (0..b.num_rows())
        .map(|r| (keys.value(r).to_string(), (ts.value(r), seqs.value(r).to_string(), v.value(r))))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Rows and deletes over two ordering fields merge as the model says.
    #[test]
    fn several_ordering_fields_merge_as_the_model(writes in prop::collection::vec(write(), 1..8)) {
        prop_assert_eq!(merged(&writes), model(&writes));
    }
}

/// The cases the rule turns on, written out: the second field decides when
/// the first ties (strings compare as strings: "ab" < "b"), the first
/// decides whatever the second, a full tie goes to the later write, and a
/// delete competes by both values.
#[test]
fn named_cases_of_several_ordering_fields() {
    let cases = [
        vec![Write::Rows(vec![(1, 5, 1, 10)]), Write::Rows(vec![(1, 5, 2, 20)])], // "b" then "ab": "b" stays
        vec![Write::Rows(vec![(1, 5, 2, 10)]), Write::Rows(vec![(1, 5, 1, 20)])], // "ab" then "b": "b" wins
        vec![Write::Rows(vec![(1, 6, 0, 10)]), Write::Rows(vec![(1, 5, 1, 20)])], // 6 beats 5, whatever seq
        vec![Write::Rows(vec![(1, 5, 1, 10)]), Write::Rows(vec![(1, 5, 1, 20)])], // a tie: the later
        vec![Write::Rows(vec![(1, 5, 1, 10)]), Write::Deletes(vec![(1, Some((5, 2)))])], // "ab" < "b": the row stays
        vec![Write::Rows(vec![(1, 5, 2, 10)]), Write::Deletes(vec![(1, Some((5, 1)))])], // "b" > "ab": deleted
        vec![Write::Deletes(vec![(1, Some((5, 1)))]), Write::Rows(vec![(1, 5, 0, 10)])], // older: stays deleted
        vec![Write::Rows(vec![(1, 9, 1, 10)]), Write::Deletes(vec![(1, None)])],  // no value: deleted
    ];
    let want = [Some(10), Some(20), Some(10), Some(20), Some(10), None, None, None];
    for (writes, want) in cases.iter().zip(want) {
        let got = merged(writes);
        assert_eq!(got, model(writes), "{writes:?}");
        assert_eq!(got.get("k1").map(|r| r.2), want, "{writes:?}");
    }
}

/// Through the CLI: a version-9 table ordered by `ts,seq` records both
/// fields; writes with deletes, then a compaction, read as the model; a
/// version-8 table with two fields, and a null ordering value, are refused.
#[test]
fn a_table_ordered_by_two_fields_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("s.avsc");
    std::fs::write(&schema, SCHEMA).unwrap();
    let t = dir.path().join("t");
    let (t, s) = (t.to_str().unwrap(), schema.to_str().unwrap());
    fn init<'a>(table: &'a str, schema: &'a str, version: &'a str) -> Vec<&'a str> {
        let args = ["init", table, "--schema", schema, "--record-key", "id", "--ordering-field", "ts,seq"];
        [&args[..], &["--buckets", "2", "--table-version", version]].concat()
    }
    let t8 = format!("{t}8");
    let err = tributary_err(&init(&t8, s, "8"));
    assert!(err.contains("--table-version 9") && err.contains("ts,seq"), "{err}");
    tributary_ok(&init(t, s, "9"));
    let props = std::fs::read_to_string(dir.path().join("t/.hoodie/hoodie.properties")).unwrap();
    assert!(props.lines().any(|l| l == "hoodie.table.ordering.fields=ts,seq"), "{props}");

    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(36);
    let mut writes = Vec::new();
    for c in 0..6 {
        use rand::Rng;
        let w = if c % 3 == 2 {
            Write::Deletes(
                (0..4)
                    .map(|_| (rng.random_range(0..5), Some((rng.random_range(0..3), rng.random_range(0..3)))))
                    .collect(),
            )
        } else {
            Write::Rows(
                (0..8)
                    .map(|_| {
                        (
                            rng.random_range(0..5),
                            rng.random_range(0..3),
                            rng.random_range(0..3),
                            rng.random_range(0..100),
                        )
                    })
                    .collect(),
            )
        };
        let lines: String = match &w {
            Write::Rows(rows) => rows
                .iter()
                .map(|&(k, ts, sq, v)| {
                    json!({"id": format!("k{k}"), "ts": ts, "seq": seq(sq), "v": v}).to_string() + "\n"
                })
                .collect(),
            Write::Deletes(ds) => ds
                .iter()
                .map(|&(k, d)| {
                    let (ts, sq) = d.unwrap_or_default();
                    json!({"id": format!("k{k}"), "ts": ts, "seq": seq(sq), "_hoodie_is_deleted": true}).to_string()
                        + "\n"
                })
                .collect(),
        };
        let f = dir.path().join(format!("c{c}.jsonl"));
        std::fs::write(&f, lines).unwrap();
        // One record per key and commit, so the model's write order is the table's.
        tributary_ok(&["write", t, "--input", f.to_str().unwrap(), "--keep-every-version"]);
        writes.push(w);
    }
    let want = model(&writes);
    assert!(!want.is_empty());
    let read = |extra: &[&str]| -> BTreeMap<String, (i64, String, i64)> {
        let out = tributary_ok(&[&["read", t, "--format", "jsonl"][..], extra].concat());
        out.lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                let s = |f: &str| v[f].as_str().unwrap().to_string();
                (s("id"), (v["ts"].as_i64().unwrap(), s("seq"), v["v"].as_i64().unwrap()))
            })
            .collect()
    };
    assert_eq!(read(&[]), want, "snapshot before compaction");
    let out = tributary_ok(&["compact", t]);
    assert!(out.contains(" completed "), "{out}");
    assert_eq!(read(&[]), want, "snapshot after compaction");
    // Every ordering field needs a value.
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"id\":\"k1\",\"ts\":1}\n").unwrap();
    let err = tributary_err(&["write", t, "--input", bad.to_str().unwrap()]);
    assert!(err.contains("line 1") && err.contains("`seq`"), "{err}");
}
