//! Wide tables: partial-column writers and sequence groups; on the store
//! `TRIBUTARY_TEST_STORE` names (see [`Place`]).

use std::collections::BTreeMap;
use std::time::Duration;

use arrow::array::{Array, AsArray, RecordBatch};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tributary::{CreateOptions, InstantTime, Query, ReadOptions, Table, TableSettings, TimeSettings};
use tributary_compaction::CompactorSettings;
use tributary_timeline::{SequenceGroup, TimeMode};
use tributary_writer::WriteSettings;

use crate::support::filters::{Ask, Columns, Lit, Row as ScanRow, ask, check, expected, read_rows, scanned};
use crate::support::*;

const SCHEMA: &str = r#"{"type":"record","name":"wide","fields":[
 {"name":"id","type":"string"},
 {"name":"ts","type":["null","long"],"default":null},
 {"name":"a1","type":["null","string"],"default":null},{"name":"a2","type":["null","long"],"default":null},
 {"name":"ts_a","type":["null","long"],"default":null},
 {"name":"b1","type":["null","string"],"default":null},{"name":"b2","type":["null","double"],"default":null},
 {"name":"ts_b","type":["null","long"],"default":null},
 {"name":"note","type":["null","string"],"default":null}]}"#;

/// `tributary init` of table `wide` in `place`, with groups `ts_a=a1,a2`
/// and `ts_b=b1,b2`.
fn init_wide(place: &Place) -> TableUri {
    let schema = place.scratch().join("wide.avsc");
    std::fs::write(&schema, SCHEMA).unwrap();
    let table = place.table("wide");
    tributary_ok(&[
        "init",
        table.uri(),
        "--schema",
        schema.to_str().unwrap(),
        "--record-key",
        "id",
        "--ordering-field",
        "ts",
        "--sequence-group",
        "ts_a=a1,a2",
        "--sequence-group",
        "ts_b=b1,b2",
        "--buckets",
        "4",
    ]);
    table
}

#[test]
fn bad_definitions_are_named() {
    let Some(place) = Place::new() else { return };
    let dir = place.scratch();
    let schema = dir.join("wide.avsc");
    std::fs::write(&schema, SCHEMA).unwrap();
    let s = schema.to_str().unwrap();
    let strict = dir.join("strict.avsc");
    std::fs::write(
        &strict,
        SCHEMA.replace(r#"{"name":"a2","type":["null","long"],"default":null}"#, r#"{"name":"a2","type":"long"}"#),
    )
    .unwrap();
    let t = place.table("t");
    let base = ["init", t.uri(), "--record-key", "id", "--ordering-field", "ts"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--schema", s, "--sequence-group", "ts_a=a1,a2", "--sequence-group", "ts_b=b1,a2"],
            "column `a2` is in two sequence groups",
        ),
        (vec!["--schema", s, "--sequence-group", "ts_x=a1"], "group ordering field `ts_x` is not in the schema"),
        (vec!["--schema", s, "--sequence-group", "ts_a=a1,zz"], "column field `zz` is not in the schema"),
        (vec!["--schema", s, "--sequence-group", "ts_a=a1,id"], "column `id` is the record key"),
        (vec!["--schema", s, "--sequence-group", "ts_a=a1,ts"], "the table's ordering field"),
        (vec!["--schema", s, "--sequence-group", "ts_a"], "expected ordering_field=col1,col2"),
        (vec!["--schema", strict.to_str().unwrap(), "--sequence-group", "ts_a=a1,a2"], "column `a2` must be nullable"),
    ];
    for (extra, expect) in cases {
        let mut args = base.to_vec();
        args.extend(extra);
        let err = tributary_err(&args);
        assert!(err.contains(expect), "{args:?}: expected `{expect}` in {err}");
    }
    assert!(t.list("").is_empty(), "no refused definition made a table");
    let table = init_wide(&place);
    let tt = table.uri();
    let input = dir.join("in.jsonl");
    std::fs::write(&input, "{\"id\":\"x\",\"b1\":\"v\",\"b2\":1.0}\n").unwrap();
    let i = input.to_str().unwrap();
    let err = tributary_err(&["write", tt, "--input", i, "--columns", "b1,b2"]);
    assert!(err.contains("sequence group ordered by `ts_b`, which is not declared"), "{err}");
    let err = tributary_err(&["write", tt, "--input", i, "--columns", "b1,b2,ts_b,colour"]);
    assert!(err.contains("unknown column `colour`"), "{err}");
    std::fs::write(&input, "{\"id\":\"x\",\"a1\":\"v\",\"ts_a\":1}\n").unwrap();
    let err = tributary_err(&["write", tt, "--input", i, "--columns", "b1,b2,ts_b"]);
    assert!(err.contains("field `a1`: unknown column"), "a partial writer refuses columns it did not declare: {err}");
}

/// Model of the two-source case: per key, a-columns from the maximum `ts_a`
/// event, b-columns from the maximum `ts_b` event (event times are unique).
fn two_source_model(a: &[Value], b: &[Value]) -> Vec<Value> {
    let mut rows: BTreeMap<String, Value> = BTreeMap::new();
    for (events, cols, ts) in [(a, ["a1", "a2"], "ts_a"), (b, ["b1", "b2"], "ts_b")] {
        for e in events {
            let r = rows.entry(e["id"].as_str().unwrap().to_string()).or_insert_with(
                || json!({"id": e["id"], "a1": null, "a2": null, "ts_a": null, "b1": null, "b2": null, "ts_b": null}),
            );
            if r[ts].is_null() || e[ts].as_i64() > r[ts].as_i64() {
                for c in cols {
                    r[c] = e[c].clone();
                }
                r[ts] = e[ts].clone();
            }
        }
    }
    rows.into_values().collect()
}

fn read_wide(table: &TableUri, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["read", table.uri(), "--format", "jsonl"];
    args.extend_from_slice(extra);
    let mut rows: Vec<Value> = tributary_ok(&args)
        .lines()
        .map(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            let g = |k: &str| r.get(k).cloned().unwrap_or(Value::Null);
            json!({"id": g("id"), "a1": g("a1"), "a2": g("a2"), "ts_a": g("ts_a"), "b1": g("b1"), "b2": g("b2").as_f64(), "ts_b": g("ts_b")})
        })
        .collect();
    rows.sort_by(|x, y| x["id"].as_str().cmp(&y["id"].as_str()));
    rows
}

fn normalize(mut rows: Vec<Value>) -> Vec<Value> {
    for r in &mut rows {
        r["b2"] = json!(r["b2"].as_f64());
    }
    rows
}

#[test]
fn two_sources_at_once_keep_each_groups_newest_values() {
    let Some(place) = Place::new() else { return };
    let table = init_wide(&place);
    let t = table.uri();
    let mut rng = StdRng::seed_from_u64(5);
    let mut times: Vec<i64> = (1..=20_000).collect();
    for i in (1..times.len()).rev() {
        times.swap(i, rng.random_range(0..=i));
    }
    let mut events = |source: char, n: usize| -> Vec<Value> {
        (0..n)
            .map(|_| {
                let id = format!("user-{:03}", rng.random_range(0..200));
                let ts = times.pop().unwrap();
                if source == 'a' {
                    json!({"id": id, "a1": format!("a-{ts}"), "a2": ts * 10, "ts_a": ts})
                } else {
                    json!({"id": id, "b1": format!("b-{ts}"), "b2": ts as f64 / 4.0, "ts_b": ts})
                }
            })
            .collect()
    };
    let mut a = events('a', 3000);
    let mut b = events('b', 3000);
    let run = |name: &str, events: &[Value], columns: &str| {
        let f = place.scratch().join(format!("{name}.jsonl"));
        std::fs::write(&f, events.iter().map(|e| format!("{e}\n")).collect::<String>()).unwrap();
        std::process::Command::new(env!("CARGO_BIN_EXE_tributary"))
            .args(["write", t, "--input", f.to_str().unwrap(), "--columns", columns, "--commit-every", "300"])
            .args(["--time-mode", "hybrid-logical", "--writer-id", name])
            .spawn()
            .unwrap()
    };
    // Two OS processes at once, each shuffled, over the same keys.
    let mut pa = run("a", &a, "a1,a2,ts_a");
    let mut pb = run("b", &b, "b1,b2,ts_b");
    assert!(pa.wait().unwrap().success() && pb.wait().unwrap().success());
    let want = normalize(two_source_model(&a, &b));
    assert_eq!(read_wide(&table, &[]), want, "snapshot");

    tributary_ok(&["compact", t, "--time-mode", "hybrid-logical"]);
    assert_eq!(read_wide(&table, &[]), want, "after compaction");
    assert_eq!(read_wide(&table, &["--query", "read-optimized"]), want, "base files hold merged rows");
    if have_official_reader() {
        // Without logs to merge, the official reader reads the compacted rows.
        let out = python(
            &format!(
                "import sys, json\nimport pyarrow as pa\n{OPEN_TABLE}\
                 print(json.dumps(pa.Table.from_batches(open_table(sys.argv[1]).read()).to_pylist()))"
            ),
            &[t],
        );
        let mut rows: Vec<Value> = serde_json::from_str::<Vec<Value>>(out.trim())
            .unwrap()
            .into_iter()
            .map(|r| json!({"id": r["id"], "a1": r["a1"], "a2": r["a2"], "ts_a": r["ts_a"], "b1": r["b1"], "b2": r["b2"].as_f64(), "ts_b": r["ts_b"]}))
            .collect();
        rows.sort_by(|x, y| x["id"].as_str().cmp(&y["id"].as_str()));
        assert_eq!(rows, want, "official reader after compaction");
    }

    // Further partial writes on top of the compacted base.
    let a2 = events('a', 500);
    let b2 = events('b', 500);
    let mut pa = run("a2", &a2, "a1,a2,ts_a");
    let mut pb = run("b2", &b2, "b1,b2,ts_b");
    assert!(pa.wait().unwrap().success() && pb.wait().unwrap().success());
    a.extend(a2);
    b.extend(b2);
    let want = normalize(two_source_model(&a, &b));
    assert_eq!(read_wide(&table, &[]), want, "partial writes over a compacted base");
    if have_official_reader() {
        // With partial logs to merge, the official reader refuses rather than misreads.
        let out = std::process::Command::new("python3")
            .args(["-c", &format!("import sys\n{OPEN_TABLE}open_table(sys.argv[1]).read()"), t])
            .output()
            .unwrap();
        assert!(!out.status.success(), "the official reader must not silently merge a CUSTOM table");
        assert!(String::from_utf8_lossy(&out.stderr).contains("CUSTOM"));
    }
}

/// One operation of the three-source workload.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    A { key: u8, a1: u16, ts_a: i64 },
    B { key: u8, b1: u16, ts_b: i64 },
    C { key: u8, note: u16, ts: i64 },
    Delete { key: u8, ts: i64 },
}

/// A key's row in the model: the written columns, and whether a delete
/// won (a tombstone).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Row {
    pub(crate) ts: Option<i64>,
    pub(crate) a1: Option<String>,
    pub(crate) ts_a: Option<i64>,
    pub(crate) b1: Option<String>,
    pub(crate) ts_b: Option<i64>,
    pub(crate) note: Option<String>,
    pub(crate) deleted: bool,
}

/// The documented rules, written out independently of the library. `rows`
/// keeps deleted rows as tombstones; visible rows are the others.
pub(crate) fn model_apply(rows: &mut BTreeMap<String, Row>, ops: &[Op]) {
    for op in ops {
        let key = match op {
            Op::A { key, .. } | Op::B { key, .. } | Op::C { key, .. } | Op::Delete { key, .. } => format!("k{key:02}"),
        };
        let r = rows.entry(key).or_default();
        let event_ts = match op {
            Op::C { ts, .. } | Op::Delete { ts, .. } => Some(*ts),
            _ => None,
        };
        if let Op::Delete { ts, .. } = op {
            if r.ts.is_none_or(|cur| *ts >= cur) {
                *r = Row { ts: Some(*ts), deleted: true, ..Row::default() };
            }
            continue;
        }
        if r.deleted {
            if let (Some(t), Some(cur)) = (event_ts, r.ts)
                && t < cur
            {
                continue; // older than the delete
            }
            *r = Row { ts: r.ts, ..Row::default() };
        }
        match op {
            Op::A { a1, ts_a, .. } => {
                if r.ts_a.is_none_or(|cur| *ts_a >= cur) {
                    r.a1 = Some(format!("a{a1}"));
                    r.ts_a = Some(*ts_a);
                }
            }
            Op::B { b1, ts_b, .. } => {
                if r.ts_b.is_none_or(|cur| *ts_b >= cur) {
                    r.b1 = Some(format!("b{b1}"));
                    r.ts_b = Some(*ts_b);
                }
            }
            Op::C { note, ts, .. } => {
                if r.ts.is_none_or(|cur| *ts >= cur) {
                    r.note = Some(format!("n{note}"));
                    r.ts = Some(*ts);
                }
            }
            Op::Delete { .. } => {}
        }
    }
}

pub(crate) fn visible(rows: &BTreeMap<String, Row>) -> BTreeMap<String, Row> {
    rows.iter().filter(|(_, r)| !r.deleted).map(|(k, r)| (k.clone(), r.clone())).collect()
}

pub(crate) fn op_strategy() -> impl Strategy<Value = Op> {
    let key = 0u8..6;
    prop_oneof![
        (key.clone(), any::<u16>(), 1i64..40).prop_map(|(key, a1, ts_a)| Op::A { key, a1, ts_a }),
        (key.clone(), any::<u16>(), 1i64..40).prop_map(|(key, b1, ts_b)| Op::B { key, b1, ts_b }),
        (key.clone(), any::<u16>(), 1i64..40).prop_map(|(key, note, ts)| Op::C { key, note, ts }),
        (key, 1i64..40).prop_map(|(key, ts)| Op::Delete { key, ts }),
    ]
}

/// The write client of each kind of op ([`op_kind`]): each writes only its
/// columns.
pub(crate) async fn op_clients(table: &Table) -> [tributary::WriteClient; 4] {
    let client = async |cols: &[&str]| {
        let settings =
            WriteSettings { columns: Some(cols.iter().map(|c| c.to_string()).collect()), ..Default::default() };
        table.write_client(settings).await.unwrap()
    };
    [client(&["a1", "ts_a"]).await, client(&["b1", "ts_b"]).await, client(&["note", "ts"]).await, client(&["ts"]).await]
}

/// Which of [`op_clients`] writes `op`.
pub(crate) fn op_kind(op: &Op) -> usize {
    match op {
        Op::A { .. } => 0,
        Op::B { .. } => 1,
        Op::C { .. } => 2,
        Op::Delete { .. } => 3,
    }
}

/// The JSON record that writes `op`.
pub(crate) fn op_json(op: &Op) -> Value {
    match op {
        Op::A { key, a1, ts_a } => json!({"id": format!("k{key:02}"), "a1": format!("a{a1}"), "ts_a": ts_a}),
        Op::B { key, b1, ts_b } => json!({"id": format!("k{key:02}"), "b1": format!("b{b1}"), "ts_b": ts_b}),
        Op::C { key, note, ts } => json!({"id": format!("k{key:02}"), "note": format!("n{note}"), "ts": ts}),
        Op::Delete { key, ts } => json!({"id": format!("k{key:02}"), "ts": ts, "_hoodie_is_deleted": true}),
    }
}

/// Commits `ops` in order: consecutive ops of one source share a commit;
/// deletes are committed on their own.
async fn apply(table: &Table, ops: &[Op]) {
    let clients = op_clients(table).await;
    let mut i = 0;
    while i < ops.len() {
        let k = op_kind(&ops[i]);
        let mut j = i;
        while j < ops.len() && op_kind(&ops[j]) == k && (k != 3 || j == i) {
            j += 1;
        }
        let values: Vec<Value> = ops[i..j].iter().map(op_json).collect();
        let mut c = clients[k].start_commit().await.unwrap();
        c.write_json(&values, "ops", 1).await.unwrap();
        c.commit().await.unwrap();
        i = j;
    }
}

pub(crate) async fn snapshot(table: &Table) -> BTreeMap<String, Row> {
    let b: RecordBatch = table.read(&ReadOptions::default()).await.unwrap();
    (0..b.num_rows()).map(|i| model_row(b.columns(), &b.schema(), i)).collect()
}

/// Row `i` of the table's columns `columns` (named by `schema`), as the
/// model's key and row.
pub(crate) fn model_row(
    columns: &[arrow::array::ArrayRef],
    schema: &arrow::datatypes::Schema,
    i: usize,
) -> (String, Row) {
    let column = |n: &str| &columns[schema.index_of(n).unwrap()];
    let s = |n: &str| {
        let a = column(n).as_string::<i32>();
        (!a.is_null(i)).then(|| a.value(i).to_string())
    };
    let l = |n: &str| {
        let a = column(n).as_primitive::<arrow::datatypes::Int64Type>();
        (!a.is_null(i)).then(|| a.value(i))
    };
    let row = Row {
        ts: l("ts"),
        a1: s("a1"),
        ts_a: l("ts_a"),
        b1: s("b1"),
        ts_b: l("ts_b"),
        note: s("note"),
        deleted: false,
    };
    (s("id").unwrap(), row)
}

/// A table `t` in `place` with groups `ts_a=a1,a2` and `ts_b=b1,b2`.
pub(crate) async fn new_table(place: &Place) -> Table {
    new_table_with(place, |_| {}).await
}

/// [`new_table`] with `options` changed by `change`.
pub(crate) async fn new_table_with(place: &Place, change: impl FnOnce(&mut CreateOptions)) -> Table {
    let mut o = CreateOptions::new(SCHEMA, "id", "ts");
    change(&mut o);
    o.buckets = 2;
    o.sequence_groups = vec![SequenceGroup::parse("ts_a=a1,a2").unwrap(), SequenceGroup::parse("ts_b=b1,b2").unwrap()];
    let time = TimeSettings { mode: Some(TimeMode::HybridLogical), max_clock_skew: Duration::from_millis(200) };
    place.table("t").builder().with_settings(TableSettings { time, ..Default::default() }).create(o).await.unwrap()
}

/// The columns the property's scans read and filter on (`a2` is never
/// written: always null).
const SCANNED_NAMES: [&str; 8] = ["id", "ts", "a1", "a2", "ts_a", "b1", "ts_b", "note"];

fn scan_literal(column: &str) -> BoxedStrategy<Lit> {
    match column {
        "id" => (0u8..7).prop_map(|k| Lit::Text(format!("k{k:02}"))).boxed(),
        "a1" => any::<u16>().prop_map(|v| Lit::Text(format!("a{v}"))).boxed(),
        "b1" => any::<u16>().prop_map(|v| Lit::Text(format!("b{v}"))).boxed(),
        "note" => any::<u16>().prop_map(|v| Lit::Text(format!("n{v}"))).boxed(),
        _ => (0i64..42).prop_map(Lit::Int).boxed(),
    }
}

static SCANNED: Columns = Columns { names: &SCANNED_NAMES, literal: scan_literal };

/// The model's visible rows as the columns of [`SCANNED_NAMES`].
fn scan_rows(rows: &BTreeMap<String, Row>) -> Vec<ScanRow> {
    let n = |v: Option<i64>| v.map(|v| v.to_string());
    visible(rows)
        .into_iter()
        .map(|(id, r)| vec![Some(id), n(r.ts), r.a1, None, n(r.ts_a), r.b1, n(r.ts_b), r.note])
        .collect()
}

/// Scans with filters and projections of `table` against the model's rows
/// (snapshot), and against its unfiltered reads (read-optimized, and
/// incremental over every commit but the first).
async fn check_scans(table: &Table, model: &[ScanRow], asks: &[Ask]) -> Result<(), TestCaseError> {
    let completions: Vec<InstantTime> =
        table.timeline().await.unwrap().completed().filter_map(|i| i.completed.clone()).collect();
    let incremental = Query::Incremental { begin: completions[0].clone(), end: completions.last().unwrap().clone() };
    let names = &SCANNED_NAMES;
    for ask in asks {
        let got = scanned(table, names, &Query::Snapshot, ask).await;
        check(got, expected(model, ask), ask, names, "snapshot")?;
        for query in [Query::ReadOptimized, incremental.clone()] {
            let all = read_rows(table, names, &query).await;
            check(scanned(table, names, &query, ask).await, expected(&all, ask), ask, names, &format!("{query:?}"))?;
        }
    }
    Ok(())
}

/// Cases of the three-source property: `TRIBUTARY_WIDE_CASES`, by default 24.
fn cases() -> u32 {
    std::env::var("TRIBUTARY_WIDE_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Three sources (a group each, plus the ungrouped `note` following the
    /// table's `ts`) and deletes, against the model; and the same after a
    /// compaction and more writes on top, with random scans (filters,
    /// projections, limits) of the result. `TRIBUTARY_WIDE_CASES` sets the
    /// number of cases.
    #[test]
    fn three_sources_with_deletes_match_the_model(
        first in prop::collection::vec(op_strategy(), 1..30),
        second in prop::collection::vec(op_strategy(), 0..10),
        asks in prop::collection::vec(ask(&SCANNED), 1..4),
    ) {
        let Some(place) = Place::new() else { return Ok(()) };
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let (got, after, expected, expected_all) = rt.block_on(async {
            let table = new_table(&place).await;
            apply(&table, &first).await;
            let got = snapshot(&table).await;
            table.compactor(CompactorSettings::default())
                .await.unwrap().run_once().await.unwrap();
            apply(&table, &second).await;
            let after = snapshot(&table).await;
            let mut rows = BTreeMap::new();
            model_apply(&mut rows, &first);
            let expected = visible(&rows);
            // Compaction keeps tombstones: deletes stay in force after it.
            model_apply(&mut rows, &second);
            check_scans(&table, &scan_rows(&rows), &asks).await?;
            Ok::<_, TestCaseError>((got, after, expected, visible(&rows)))
        })?;
        prop_assert_eq!(got, expected);
        prop_assert_eq!(after, expected_all);
    }
}
