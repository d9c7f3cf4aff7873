//! `tributary_merge::merge` against a small independent model of the merge
//! rules (`merge/src/merge.rs`, `merge/src/columns.rs` and `docs/design.md`,
//! "Merge semantics" and "Partial-column writers and sequence groups"): the
//! model keeps, per record key, the row as the rules say it is after each
//! write. The expected result comes from the model alone.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{Int64Type, Schema};
use proptest::prelude::*;
use tributary_format::{DeleteRecord, OrderingValue};
use tributary_format::{META_FIELDS, TableSchema};
use tributary_merge::Version;
use tributary_timeline::{MergeMode, NewTableConfig, SequenceGroup, TableConfig};

/// `ts` orders rows; `b` orders the sequence group `{b, a}` when the table
/// has one; `c` is never in a group. `ts` is nullable, as in a table with
/// partial writers that do not write it (see `tests/it/wide.rs`).
const SCHEMA: &str = r#"{"type":"record","name":"r","fields":[
    {"name":"id","type":"string"},{"name":"ts","type":["null","long"],"default":null},
    {"name":"a","type":["null","string"],"default":null},{"name":"b","type":["null","long"],"default":null},
    {"name":"c","type":["null","long"],"default":null}]}"#;

/// One generated row: key number, `ts`, `a`, `b`, `c`.
#[derive(Debug, Clone)]
struct Row {
    key: u8,
    ts: i64,
    a: Option<u8>,
    b: Option<i64>,
    c: Option<i64>,
}

/// A delete's ordering value as written in a delete block.
#[derive(Debug, Clone, Copy)]
enum Del {
    Null,
    Int(i32),
    Long(i64),
}

/// One write (a version) of the slice, in write order.
#[derive(Debug, Clone)]
enum Write {
    Rows(Vec<Row>),
    /// A partial writer's rows; which of `ts`, `a`, `b`, `c` it carries.
    Partial([bool; 4], Vec<Row>),
    Deletes(Vec<(u8, Del)>),
}

/// Record key of key number `k`: short keys, and long ones (over 15 bytes)
/// sharing their first 16 bytes, so the merge index holds keys both ways.
fn key_of(k: u8) -> String {
    if k.is_multiple_of(2) { format!("{}{k:03}", "p".repeat(14)) } else { format!("key{k:03}") }
}

fn row() -> impl Strategy<Value = Row> {
    (0u8..8, 0i64..6, any::<Option<u8>>(), prop::option::of(0i64..6), any::<Option<i64>>())
        .prop_map(|(key, ts, a, b, c)| Row { key, ts, a, b, c })
}

fn del() -> impl Strategy<Value = Del> {
    prop_oneof![
        1 => Just(Del::Null),
        1 => Just(Del::Int(0)),
        1 => Just(Del::Long(0)),
        2 => (1i32..6).prop_map(Del::Int),
        3 => (1i64..6).prop_map(Del::Long),
    ]
}

fn whole_write() -> impl Strategy<Value = Write> {
    prop_oneof![
        2 => prop::collection::vec(row(), 0..12).prop_map(Write::Rows),
        1 => prop::collection::vec((0u8..8, del()), 0..6).prop_map(Write::Deletes),
    ]
}

fn any_write() -> impl Strategy<Value = Write> {
    prop_oneof![
        2 => prop::collection::vec(row(), 0..12).prop_map(Write::Rows),
        3 => (any::<[bool; 4]>(), prop::collection::vec(row(), 0..12)).prop_map(|(p, rows)| Write::Partial(p, rows)),
        2 => prop::collection::vec((0u8..8, del()), 0..6).prop_map(Write::Deletes),
    ]
}

/// A delete's ordering as the model sees it (`None`: no value, ordered
/// before every value), and whether it always wins: a delete without an
/// ordering value, or with Hudi's zero sentinel (int 0 or long 0).
fn delete_order(d: Del) -> (Option<i64>, bool) {
    match d {
        Del::Null => (None, true),
        Del::Int(0) | Del::Long(0) => (Some(0), true),
        Del::Int(v) => (Some(i64::from(v)), false),
        Del::Long(v) => (Some(v), false),
    }
}

/// A row as compared: meta columns, then `id`, `ts`, `a`, `b`, `c`, each
/// rendered as text (`None`: null).
type Cells = Vec<Option<String>>;

/// The meta columns the fixture writes for row `i` of write `n`.
fn meta_of(n: usize, i: usize, key: &str) -> Cells {
    vec![
        Some(format!("c{n}")),
        Some(format!("{n}_{i}")),
        Some(key.to_string()),
        Some(String::new()),
        Some(format!("f{n}")),
    ]
}

fn a_text(a: u8) -> String {
    format!("a{a}")
}

// ---------------------------------------------------------------- model --

/// A key's current winner in the whole-row model: its ordering value, and
/// the row `(write, row)` or a delete (`None`).
type Winner = (Option<i64>, Option<(usize, usize)>);

/// The whole-row model: per key the current winner.
fn row_model(writes: &[Write], event_time: bool) -> BTreeMap<String, Cells> {
    let mut state: BTreeMap<String, Winner> = BTreeMap::new();
    for (n, w) in writes.iter().enumerate() {
        match w {
            Write::Rows(rows) => {
                for (i, r) in rows.iter().enumerate() {
                    let order = Some(r.ts);
                    let key = key_of(r.key);
                    // Event time: at least as large wins (a tie goes to the
                    // later write); commit time: the later write wins.
                    let wins = state.get(&key).is_none_or(|cur| !event_time || order >= cur.0);
                    if wins {
                        state.insert(key, (order, Some((n, i))));
                    }
                }
            }
            Write::Deletes(ds) => {
                for &(k, d) in ds {
                    let (order, always) = delete_order(d);
                    let key = key_of(k);
                    let wins = state.get(&key).is_none_or(|cur| always || !event_time || order >= cur.0);
                    if wins {
                        state.insert(key, (order, None));
                    }
                }
            }
            Write::Partial(..) => unreachable!("whole rows only"),
        }
    }
    state
        .into_iter()
        .filter_map(|(key, (_, at))| {
            let (n, i) = at?;
            let Write::Rows(rows) = &writes[n] else { unreachable!() };
            let r = &rows[i];
            let mut cells = meta_of(n, i, &key);
            cells.extend([
                Some(key.clone()),
                Some(r.ts.to_string()),
                r.a.map(a_text),
                r.b.map(|b| b.to_string()),
                r.c.map(|c| c.to_string()),
            ]);
            Some((key, cells))
        })
        .collect()
}

/// The column model's state of one key.
#[derive(Debug, Clone, Default)]
struct ColRow {
    /// The row's table-level ordering value (after a delete: the delete's,
    /// remembered until a compaction).
    ts: Option<i64>,
    /// The group's ordering value (`b`).
    group: Option<i64>,
    a: Option<String>,
    b: Option<i64>,
    c: Option<i64>,
    /// The latest write that changed the row: its meta columns.
    latest: Option<(usize, usize)>,
    deleted: bool,
}

/// The column-wise model (partial versions, sequence groups), as
/// `docs/design.md` states the rules.
fn column_model(writes: &[Write], event_time: bool, grouped: bool) -> BTreeMap<String, Cells> {
    let mut state: BTreeMap<String, ColRow> = BTreeMap::new();
    for (n, w) in writes.iter().enumerate() {
        let (carried, rows) = match w {
            Write::Rows(rows) => ([true; 4], rows),
            Write::Partial(p, rows) => (*p, rows),
            Write::Deletes(ds) => {
                for &(k, d) in ds {
                    let (order, always) = delete_order(d);
                    let st = state.entry(key_of(k)).or_default();
                    // Removes the row when at least the row's `ts`, or the row
                    // has none, or the delete carries none; commit time: always.
                    if !event_time || always || st.ts.is_none() || order >= st.ts {
                        *st = ColRow { deleted: true, ts: if always { None } else { order }, ..Default::default() };
                    }
                }
                continue;
            }
        };
        let [has_ts, has_a, has_b, has_c] = carried;
        for (i, r) in rows.iter().enumerate() {
            let t = has_ts.then_some(r.ts);
            let st = state.entry(key_of(r.key)).or_default();
            if st.deleted {
                // Older than the delete: ignored. Otherwise it re-creates the
                // row with only its columns, keeping the delete's `ts`.
                if event_time && t.is_some() && st.ts.is_some() && t < st.ts {
                    continue;
                }
                *st = ColRow { ts: st.ts, ..Default::default() };
            }
            // `ts` and the ungrouped columns: a version with a `ts` at least
            // the row's, or without `ts` (as the later write); commit time:
            // every version.
            let take_table = !event_time || t.is_none() || st.ts.is_none() || t >= st.ts;
            // The group: a version carrying a non-null `b` at least the row's.
            let take_group = grouped && has_b && r.b.is_some() && (st.group.is_none() || r.b >= st.group);
            if take_table {
                if t.is_some() {
                    st.ts = t;
                }
                if has_c {
                    st.c = r.c;
                }
                if !grouped {
                    if has_a {
                        st.a = r.a.map(a_text);
                    }
                    if has_b {
                        st.b = r.b;
                    }
                }
            }
            if take_group {
                st.group = r.b;
                st.b = r.b;
                if has_a {
                    st.a = r.a.map(a_text);
                }
            }
            if take_table || take_group {
                st.latest = Some((n, i));
            }
        }
    }
    state
        .into_iter()
        .filter(|(_, st)| !st.deleted)
        .map(|(key, st)| {
            let (n, i) = st.latest.expect("a live row was written");
            let mut cells = meta_of(n, i, &key);
            cells.extend([
                Some(key.clone()),
                st.ts.map(|t| t.to_string()),
                st.a,
                st.b.map(|b| b.to_string()),
                st.c.map(|c| c.to_string()),
            ]);
            (key, cells)
        })
        .collect()
}

// ------------------------------------------------------ the real merge --

fn table(mode: MergeMode, grouped: bool) -> (TableSchema, TableConfig) {
    let schema = TableSchema::new(SCHEMA, &["id"], Some("ts"), None).unwrap();
    let mut new = NewTableConfig::new("t", "id", "ts", SCHEMA);
    new.merge_mode = mode;
    if grouped {
        new.sequence_groups = vec![SequenceGroup { ordering: "b".into(), columns: vec!["a".into()] }];
    }
    (schema, TableConfig::new_table(&new))
}

fn version(schema: &TableSchema, n: usize, w: &Write) -> Version {
    let (carried, rows) = match w {
        Write::Deletes(ds) => {
            return Version::Deletes(
                ds.iter()
                    .map(|&(k, d)| DeleteRecord {
                        key: key_of(k),
                        partition: String::new(),
                        ordering: match d {
                            Del::Null => OrderingValue::Null,
                            Del::Int(v) => OrderingValue::Int(v),
                            Del::Long(v) => OrderingValue::Long(v),
                        },
                    })
                    .collect(),
            );
        }
        Write::Rows(rows) => (None, rows),
        Write::Partial(p, rows) => (Some(*p), rows),
    };
    let has = |c: usize| carried.is_none_or(|p: [bool; 4]| p[c]);
    let keys: Vec<String> = rows.iter().map(|r| key_of(r.key)).collect();
    let text =
        |f: &dyn Fn(usize) -> String| -> ArrayRef { Arc::new(StringArray::from_iter_values((0..rows.len()).map(f))) };
    let columns: Vec<ArrayRef> = vec![
        text(&|_| format!("c{n}")),
        text(&|i| format!("{n}_{i}")),
        Arc::new(StringArray::from(keys.clone())),
        text(&|_| String::new()),
        text(&|_| format!("f{n}")),
        Arc::new(StringArray::from(keys)),
        Arc::new(Int64Array::from_iter(rows.iter().map(|r| has(0).then_some(r.ts)))),
        Arc::new(StringArray::from_iter(rows.iter().map(|r| if has(1) { r.a.map(a_text) } else { None }))),
        Arc::new(Int64Array::from_iter(rows.iter().map(|r| if has(2) { r.b } else { None }))),
        Arc::new(Int64Array::from_iter(rows.iter().map(|r| if has(3) { r.c } else { None }))),
    ];
    let target = schema.arrow_with_meta();
    match carried {
        None => Version::Rows(RecordBatch::try_new(target.clone(), columns).unwrap()),
        Some(p) => {
            let nullable =
                Schema::new(target.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<_>>());
            let batch = RecordBatch::try_new(Arc::new(nullable), columns).unwrap();
            let mut present = vec![true; META_FIELDS.len() + 1];
            present.extend(p);
            Version::Partial { batch, present: present.into() }
        }
    }
}

/// The merge's surviving rows, by key, as the model renders them.
fn merged(schema: &TableSchema, config: &TableConfig, writes: &[Write]) -> BTreeMap<String, Cells> {
    let versions: Vec<Version> = writes.iter().enumerate().map(|(n, w)| version(schema, n, w)).collect();
    let Some(b) = tributary_merge::merge(schema, config, &versions).unwrap() else { return BTreeMap::new() };
    assert_eq!(b.schema(), *schema.arrow_with_meta(), "rows come in the table's schema, meta columns first");
    let cell = |c: usize, r: usize| -> Option<String> {
        let col = b.column(c);
        if col.is_null(r) {
            None
        } else if let Some(s) = col.as_string_opt::<i32>() {
            Some(s.value(r).to_string())
        } else {
            Some(col.as_primitive::<Int64Type>().value(r).to_string())
        }
    };
    let mut out = BTreeMap::new();
    for r in 0..b.num_rows() {
        let cells: Cells = (0..b.num_columns()).map(|c| cell(c, r)).collect();
        let key = cells[2].clone().expect("a record key");
        assert!(out.insert(key.clone(), cells).is_none(), "key {key} survives twice");
    }
    out
}

fn check(mode: MergeMode, grouped: bool, writes: &[Write]) -> Result<(), TestCaseError> {
    let (schema, config) = table(mode, grouped);
    let columnwise = grouped || writes.iter().any(|w| matches!(w, Write::Partial(..)));
    let event_time = mode != MergeMode::CommitTime;
    let want = if columnwise { column_model(writes, event_time, grouped) } else { row_model(writes, event_time) };
    let got = merged(&schema, &config, writes);
    prop_assert_eq!(got, want);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whole rows and deletes, under event-time and commit-time ordering.
    #[test]
    fn row_merge_matches_the_model(commit_time in any::<bool>(), writes in prop::collection::vec(whole_write(), 1..8)) {
        let mode = if commit_time { MergeMode::CommitTime } else { MergeMode::EventTime };
        check(mode, false, &writes)?;
    }

    /// Partial-column versions mixed with whole rows and deletes, without
    /// groups (event or commit time) and with the sequence group `{b, a}`.
    #[test]
    fn column_merge_matches_the_model(
        table_kind in 0u8..3,
        writes in prop::collection::vec(any_write(), 1..8),
    ) {
        let (mode, grouped) = match table_kind {
            0 => (MergeMode::EventTime, false),
            1 => (MergeMode::CommitTime, false),
            _ => (MergeMode::EventTime, true),
        };
        check(mode, grouped, &writes)?;
    }
}

/// Cases the rules name, written out, so each stays covered whatever the
/// generator draws.
#[test]
fn named_cases_match_the_model() {
    let r = |key, ts, c| Row { key, ts, a: None, b: None, c: Some(c) };
    let cases: Vec<(MergeMode, bool, Vec<Write>)> = vec![
        // A tie goes to the later write.
        (MergeMode::EventTime, false, vec![Write::Rows(vec![r(1, 3, 10)]), Write::Rows(vec![r(1, 3, 20)])]),
        // An older event loses; under commit time the later write wins.
        (MergeMode::EventTime, false, vec![Write::Rows(vec![r(1, 4, 10)]), Write::Rows(vec![r(1, 3, 20)])]),
        (MergeMode::CommitTime, false, vec![Write::Rows(vec![r(1, 4, 10)]), Write::Rows(vec![r(1, 3, 20)])]),
        // A delete older than the row loses; zero sentinel and null win.
        (MergeMode::EventTime, false, vec![Write::Rows(vec![r(1, 4, 10)]), Write::Deletes(vec![(1, Del::Long(3))])]),
        (MergeMode::EventTime, false, vec![Write::Rows(vec![r(1, 4, 10)]), Write::Deletes(vec![(1, Del::Long(0))])]),
        (MergeMode::EventTime, false, vec![Write::Rows(vec![r(1, 4, 10)]), Write::Deletes(vec![(1, Del::Int(0))])]),
        (MergeMode::EventTime, false, vec![Write::Rows(vec![r(1, 4, 10)]), Write::Deletes(vec![(1, Del::Null)])]),
        // A row older than a delete stays deleted.
        (MergeMode::EventTime, false, vec![Write::Deletes(vec![(1, Del::Long(4))]), Write::Rows(vec![r(1, 3, 10)])]),
        // A partial row without `ts` after a delete re-creates the row
        // holding the delete's `ts`.
        (
            MergeMode::EventTime,
            false,
            vec![
                Write::Rows(vec![r(1, 2, 10)]),
                Write::Deletes(vec![(1, Del::Long(4))]),
                Write::Partial([false, false, false, true], vec![r(1, 0, 30)]),
            ],
        ),
        // Sequence group: the larger `b` keeps `a` though its `ts` is older.
        (
            MergeMode::EventTime,
            true,
            vec![
                Write::Rows(vec![Row { key: 1, ts: 5, a: Some(1), b: Some(4), c: None }]),
                Write::Partial(
                    [false, true, true, false],
                    vec![Row { key: 1, ts: 0, a: Some(2), b: Some(3), c: None }],
                ),
                Write::Partial(
                    [true, true, true, true],
                    vec![Row { key: 1, ts: 1, a: Some(3), b: Some(4), c: Some(7) }],
                ),
            ],
        ),
    ];
    for (mode, grouped, writes) in cases {
        check(mode, grouped, &writes).unwrap_or_else(|e| panic!("{mode:?} grouped={grouped} {writes:?}: {e}"));
    }
}

#[test]
fn the_model_itself_follows_the_rules() {
    // Hand-worked expectations of the model, so a model bug that the merge
    // shares cannot hide.
    let r = |key, ts, c| Row { key, ts, a: None, b: None, c: Some(c) };
    let k = key_of(1);
    let ts_c = |m: &BTreeMap<String, Cells>| m.get(&k).map(|c| (c[6].clone().unwrap(), c[9].clone().unwrap()));
    let tie = row_model(&[Write::Rows(vec![r(1, 3, 10)]), Write::Rows(vec![r(1, 3, 20)])], true);
    assert_eq!(ts_c(&tie), Some(("3".into(), "20".into())));
    let older = row_model(&[Write::Rows(vec![r(1, 4, 10)]), Write::Rows(vec![r(1, 3, 20)])], true);
    assert_eq!(ts_c(&older), Some(("4".into(), "10".into())));
    let sentinel = row_model(&[Write::Rows(vec![r(1, 4, 10)]), Write::Deletes(vec![(1, Del::Int(0))])], true);
    assert_eq!(ts_c(&sentinel), None);
    let old_delete = row_model(&[Write::Rows(vec![r(1, 4, 10)]), Write::Deletes(vec![(1, Del::Long(3))])], true);
    assert_eq!(ts_c(&old_delete), Some(("4".into(), "10".into())));
    let recreated = column_model(
        &[
            Write::Rows(vec![r(1, 2, 10)]),
            Write::Deletes(vec![(1, Del::Long(4))]),
            Write::Partial([false, false, false, true], vec![r(1, 0, 30)]),
        ],
        true,
        false,
    );
    assert_eq!(ts_c(&recreated), Some(("4".into(), "30".into())));
}
