//! `Table::scan` with projections, filters and limits against a model.
//!
//! Random histories (upserts out of event-time order, deletes, compactions
//! between commits, so slices hold bases and logs) on a table partitioned
//! by `region` with four buckets. Random filters over every column (the
//! key, the partition column, nullable columns, meta columns) and random
//! projections are then evaluated two ways:
//! - Tributary's scan;
//! - this file's own evaluator of the filter (SQL's three-valued logic over
//!   `Option`s) on the model's snapshot, or on the rows the unfiltered read
//!   returns for read-optimized and incremental queries (those reads are
//!   checked against the official reader elsewhere).
//!
//! They must be equal, as sets of rows. A filter on a non-key column must
//! never let an older version of a key through in place of a newer one
//! that fails it: the model has the newest only.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use futures::TryStreamExt;
use proptest::prelude::*;
use tributary::{CompareOp, CreateOptions, InstantTime, Predicate, Query, ReadOptions, Table};
use tributary_compaction::CompactorSettings;
use tributary_writer::WriteSettings;

use crate::support::{Place, hybrid};

const SCHEMA: &str = r#"{"type":"record","name":"scan","fields":[
    {"name":"id","type":"string"},{"name":"ts","type":"long"},{"name":"region","type":"string"},
    {"name":"amount","type":["null","long"],"default":null},
    {"name":"note","type":["null","string"],"default":null}]}"#;

const REGIONS: [&str; 3] = ["eu", "us", "ap"];

/// Columns a projection picks from, and a filter reads.
const COLUMNS: [&str; 6] = ["id", "ts", "region", "amount", "note", "_hoodie_record_key"];

/// One event: a key (whose region the key decides), its time, its values,
/// and whether it deletes the key.
#[derive(Debug, Clone)]
struct Event {
    key: u8,
    ts: i64,
    amount: Option<i64>,
    note: Option<u8>,
    delete: bool,
}

fn key_of(k: u8) -> String {
    format!("k{k:02}")
}

fn region_of(k: u8) -> &'static str {
    REGIONS[usize::from(k) % REGIONS.len()]
}

fn note_of(n: u8) -> String {
    format!("n{n}")
}

/// A model row: every column as text, `None` for null, in [`COLUMNS`]
/// order.
type Row = Vec<Option<String>>;

fn model_row(e: &Event) -> Row {
    let key = key_of(e.key);
    vec![
        Some(key.clone()),
        Some(e.ts.to_string()),
        Some(region_of(e.key).to_string()),
        e.amount.map(|a| a.to_string()),
        e.note.map(note_of),
        Some(key),
    ]
}

/// A filter, as this test evaluates it and as Tributary is told it.
#[derive(Debug, Clone)]
enum F {
    Cmp(usize, CompareOp, Lit),
    In(usize, Vec<Lit>, bool),
    IsNull(usize, bool),
    And(Box<F>, Box<F>),
    Or(Box<F>, Box<F>),
    Not(Box<F>),
}

#[derive(Debug, Clone)]
enum Lit {
    Int(i64),
    Text(String),
}

/// A literal for column `c`: an integer for `ts` and `amount`, text for
/// the others.
fn lit(c: usize) -> BoxedStrategy<Lit> {
    match COLUMNS[c] {
        "ts" => (90i64..400).prop_map(Lit::Int).boxed(),
        "amount" => (0i64..200).prop_map(Lit::Int).boxed(),
        "region" => prop::sample::select(&REGIONS[..]).prop_map(|r| Lit::Text(r.into())).boxed(),
        "note" => (0u8..4).prop_map(|n| Lit::Text(note_of(n))).boxed(),
        _ => (0u8..14).prop_map(|k| Lit::Text(key_of(k))).boxed(),
    }
}

fn op() -> impl Strategy<Value = CompareOp> {
    prop::sample::select(vec![
        CompareOp::Eq,
        CompareOp::NotEq,
        CompareOp::Lt,
        CompareOp::LtEq,
        CompareOp::Gt,
        CompareOp::GtEq,
    ])
}

fn atom() -> impl Strategy<Value = F> {
    (0..COLUMNS.len()).prop_flat_map(|c| {
        prop_oneof![
            3 => (op(), lit(c)).prop_map(move |(o, l)| F::Cmp(c, o, l)),
            2 => (prop::collection::vec(lit(c), 1..4), prop::bool::weighted(0.2)).prop_map(move |(v, n)| F::In(c, v, n)),
            1 => any::<bool>().prop_map(move |n| F::IsNull(c, n)),
        ]
    })
}

fn filter() -> impl Strategy<Value = F> {
    atom().prop_recursive(3, 8, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| F::And(Box::new(a), Box::new(b))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| F::Or(Box::new(a), Box::new(b))),
            inner.prop_map(|a| F::Not(Box::new(a))),
        ]
    })
}

impl Lit {
    fn literal(&self) -> tributary::Literal {
        match self {
            Lit::Int(i) => (*i).into(),
            Lit::Text(s) => s.as_str().into(),
        }
    }

    /// `value op self`, null when `value` is.
    fn compare(&self, value: &Option<String>, op: CompareOp) -> Option<bool> {
        let value = value.as_ref()?;
        let ord = match self {
            Lit::Int(i) => value.parse::<i64>().expect("an integer column").cmp(i),
            Lit::Text(s) => value.as_str().cmp(s.as_str()),
        };
        Some(match op {
            CompareOp::Eq => ord.is_eq(),
            CompareOp::NotEq => ord.is_ne(),
            CompareOp::Lt => ord.is_lt(),
            CompareOp::LtEq => ord.is_le(),
            CompareOp::Gt => ord.is_gt(),
            CompareOp::GtEq => ord.is_ge(),
        })
    }
}

impl F {
    fn predicate(&self) -> Predicate {
        match self {
            F::Cmp(c, o, l) => Predicate::compare(COLUMNS[*c], *o, l.literal()),
            F::In(c, v, negated) => Predicate::InList {
                column: COLUMNS[*c].into(),
                values: v.iter().map(Lit::literal).collect(),
                negated: *negated,
            },
            F::IsNull(c, negated) => Predicate::IsNull { column: COLUMNS[*c].into(), negated: *negated },
            F::And(a, b) => a.predicate().and(b.predicate()),
            F::Or(a, b) => a.predicate().or(b.predicate()),
            F::Not(a) => a.predicate().not(),
        }
    }

    /// Its value on `row`: `None` for SQL's null.
    fn eval(&self, row: &Row) -> Option<bool> {
        match self {
            F::Cmp(c, o, l) => l.compare(&row[*c], *o),
            F::In(c, v, negated) => {
                let mut any = Some(false);
                for l in v {
                    any = or(any, l.compare(&row[*c], CompareOp::Eq));
                }
                if *negated { any.map(|b| !b) } else { any }
            }
            F::IsNull(c, negated) => Some(row[*c].is_none() != *negated),
            F::And(a, b) => and(a.eval(row), b.eval(row)),
            F::Or(a, b) => or(a.eval(row), b.eval(row)),
            F::Not(a) => a.eval(row).map(|b| !b),
        }
    }
}

fn and(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

fn or(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

/// One query of a case: a filter, the columns returned, and a limit.
#[derive(Debug, Clone)]
struct Ask {
    filter: F,
    columns: Vec<usize>,
    limit: Option<usize>,
}

fn ask() -> impl Strategy<Value = Ask> {
    let columns = prop::sample::subsequence((0..COLUMNS.len()).collect::<Vec<_>>(), 1..=COLUMNS.len()).prop_shuffle();
    (filter(), columns, prop::option::weighted(0.2, 0usize..6)).prop_map(|(filter, columns, limit)| Ask {
        filter,
        columns,
        limit,
    })
}

/// Histories: events with distinct times, shuffled (out of order), cut
/// into commits with compactions among them.
fn history() -> impl Strategy<Value = Vec<Vec<Event>>> {
    (6usize..40).prop_flat_map(|n| {
        let times = Just((0..n as i64).map(|t| 100 + 7 * t).collect::<Vec<_>>()).prop_shuffle();
        let events = prop::collection::vec(
            (
                0u8..12,
                prop::option::weighted(0.8, 0i64..200),
                prop::option::weighted(0.6, 0u8..4),
                prop::bool::weighted(0.2),
            ),
            n,
        );
        let cuts = prop::collection::vec(0usize..8, 1..8);
        (times, events, cuts).prop_map(|(times, events, cuts)| {
            let mut events = events.into_iter().zip(times).map(|((key, amount, note, delete), ts)| Event {
                key,
                ts,
                amount,
                note,
                delete,
            });
            // A cut of 0 is a compaction (an empty commit).
            let mut out: Vec<Vec<Event>> = cuts.iter().map(|&len| events.by_ref().take(len).collect()).collect();
            out.push(events.collect());
            out
        })
    })
}

fn batch(events: &[Event]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("region", DataType::Utf8, false),
        Field::new("amount", DataType::Int64, true),
        Field::new("note", DataType::Utf8, true),
        Field::new("_hoodie_is_deleted", DataType::Boolean, false),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(events.iter().map(|e| key_of(e.key)))),
        Arc::new(Int64Array::from_iter_values(events.iter().map(|e| e.ts))),
        Arc::new(StringArray::from_iter_values(events.iter().map(|e| region_of(e.key)))),
        Arc::new(Int64Array::from_iter(events.iter().map(|e| e.amount))),
        Arc::new(StringArray::from_iter(events.iter().map(|e| e.note.map(note_of)))),
        Arc::new(BooleanArray::from_iter(events.iter().map(|e| Some(e.delete)))),
    ];
    RecordBatch::try_new(schema, columns).unwrap()
}

/// `batch`'s rows as text, `None` for null, sorted.
fn rows_of(batch: &RecordBatch) -> Vec<Row> {
    let mut rows: Vec<Row> = (0..batch.num_rows())
        .map(|r| {
            batch
                .columns()
                .iter()
                .map(|c| (!c.is_null(r)).then(|| arrow::util::display::array_value_to_string(c, r).unwrap()))
                .collect()
        })
        .collect();
    rows.sort();
    rows
}

/// The model rows `ask` passes, projected, sorted.
fn expected(rows: &[Row], ask: &Ask) -> Vec<Row> {
    let mut out: Vec<Row> = rows
        .iter()
        .filter(|r| ask.filter.eval(r) == Some(true))
        .map(|r| ask.columns.iter().map(|&c| r[c].clone()).collect())
        .collect();
    out.sort();
    out
}

async fn scanned(t: &Table, query: &Query, ask: &Ask) -> Vec<Row> {
    let mut scan =
        t.scan().query(query.clone()).columns(ask.columns.iter().map(|&c| COLUMNS[c])).filter(ask.filter.predicate());
    if let Some(n) = ask.limit {
        scan = scan.limit(n);
    }
    let batches: Vec<RecordBatch> = scan.stream().await.unwrap().try_collect().await.unwrap();
    let mut rows: Vec<Row> = batches.iter().flat_map(rows_of).collect();
    rows.sort();
    rows
}

/// The rows an unfiltered read of `query` returns, every column of
/// [`COLUMNS`].
async fn read_rows(t: &Table, query: &Query) -> Vec<Row> {
    let all = t.read(&ReadOptions { query: query.clone(), with_meta: true, ..Default::default() }).await.unwrap();
    let projected = all.project(&COLUMNS.map(|c| all.schema().index_of(c).unwrap())).unwrap();
    rows_of(&projected)
}

fn check(got: Vec<Row>, want: Vec<Row>, ask: &Ask, what: &str) -> Result<(), TestCaseError> {
    match ask.limit {
        None => prop_assert_eq!(got, want, "{} with filter {}", what, ask.filter.predicate()),
        Some(n) => {
            prop_assert_eq!(got.len(), n.min(want.len()), "{} limited to {}", what, n);
            for r in &got {
                prop_assert!(want.contains(r), "{what}: row {r:?} does not pass {}", ask.filter.predicate());
            }
        }
    }
    Ok(())
}

/// Makes table `name` of `place` with the history `commits`, asks it
/// `asks`, and returns it.
async fn run(
    place: &Place,
    name: &str,
    commits: &[Vec<Event>],
    asks: &[Ask],
    window: (usize, usize),
) -> Result<Table, TestCaseError> {
    let mut o = CreateOptions::new(SCHEMA, "id", "ts");
    o.partition_field = Some("region".into());
    o.hive_style_partitioning = true;
    o.buckets = 4;
    let t = place.table(name).builder().with_settings(hybrid()).create(o).await.unwrap();
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    let mut newest: BTreeMap<u8, Event> = BTreeMap::new();
    for events in commits {
        if events.is_empty() {
            t.compactor(CompactorSettings::default()).await.unwrap().run_once().await.unwrap();
            continue;
        }
        let mut c = client.start_commit().await.unwrap();
        c.write_batch(&batch(events)).await.unwrap();
        c.commit().await.unwrap();
        for e in events {
            if newest.get(&e.key).is_none_or(|n| n.ts < e.ts) {
                newest.insert(e.key, e.clone());
            }
        }
    }
    let model: Vec<Row> = newest.values().filter(|e| !e.delete).map(model_row).collect();
    let timeline = t.timeline().await.unwrap();
    let completions: Vec<InstantTime> = timeline.completed().filter_map(|i| i.completed.clone()).collect();
    let incremental = match completions.len() {
        0 => None,
        n => {
            let (a, b) = (window.0 % n, window.1 % n);
            let (lo, hi) = (a.min(b), a.max(b));
            // From before the first completion, when the window starts there.
            let begin =
                if lo == 0 { InstantTime::parse("00000000000000000").unwrap() } else { completions[lo - 1].clone() };
            Some(Query::Incremental { begin, end: completions[hi].clone() })
        }
    };
    for ask in asks {
        check(scanned(&t, &Query::Snapshot, ask).await, expected(&model, ask), ask, "snapshot")?;
        let ro = read_rows(&t, &Query::ReadOptimized).await;
        check(scanned(&t, &Query::ReadOptimized, ask).await, expected(&ro, ask), ask, "read-optimized")?;
        if let Some(q) = &incremental {
            let inc = read_rows(&t, q).await;
            check(scanned(&t, q, ask).await, expected(&inc, ask), ask, "incremental")?;
        }
    }
    Ok(t)
}

fn cases() -> u32 {
    std::env::var("TRIBUTARY_SCAN_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 64, ..ProptestConfig::default() })]

    #[test]
    fn scans_with_filters_and_projections_match_the_model(
        commits in history(),
        asks in prop::collection::vec(ask(), 1..5),
        window in (0usize..16, 0usize..16),
    ) {
        let Some(place) = Place::new() else { return Ok(()) };
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(run(&place, "t", &commits, &asks, window))?;
    }
}

/// The case the design calls out: a key whose newest version fails the
/// filter while an older one passes is not returned, before and after the
/// older version is compacted into the base file.
#[test]
fn a_newer_version_that_fails_the_filter_hides_an_older_one_that_passes() {
    let Some(place) = Place::new() else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let e = |ts, amount| Event { key: 1, ts, amount: Some(amount), note: None, delete: false };
        let big = Ask { filter: F::Cmp(3, CompareOp::Gt, Lit::Int(100)), columns: vec![0, 3], limit: None };
        for compact_between in [false, true] {
            let mut commits = vec![vec![e(100, 150)]];
            if compact_between {
                commits.push(Vec::new());
            }
            commits.push(vec![e(200, 50)]);
            let name = format!("t{}", u8::from(compact_between));
            let t = run(&place, &name, &commits, std::slice::from_ref(&big), (0, 1)).await.unwrap();
            let got = scanned(&t, &Query::Snapshot, &big).await;
            assert_eq!(got, Vec::<Row>::new(), "compacted between: {compact_between}");
        }
    });
}

/// A filter on a column the table lacks is an error naming it, not an
/// empty result; so is a projection of one.
#[test]
fn unknown_columns_are_errors() {
    let Some(place) = Place::new() else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let one = [vec![Event { key: 1, ts: 100, amount: None, note: None, delete: false }]];
        let t = run(&place, "t", &one, &[], (0, 0)).await.unwrap();
        let e = t.scan().filter(Predicate::eq("amonut", 1i64)).stream().await.unwrap_err().to_string();
        assert!(e.contains("no column `amonut`") && e.contains("amount"), "{e}");
        let e = t.scan().columns(["id", "nope"]).stream().await.unwrap_err().to_string();
        assert!(e.contains("no column `nope`"), "{e}");
        let e = t.scan().filter(Predicate::eq("ts", "yesterday")).stream().await.unwrap_err().to_string();
        assert!(e.contains("'yesterday' is not a Int64"), "{e}");
    });
}

/// A base file written before a column was added, read for a projection
/// naming that column (and filtered on it): the column's default, as a
/// whole-row read gives it.
#[test]
fn a_projected_base_file_gives_added_columns_their_default() {
    let Some(place) = Place::new() else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let events: Vec<Event> = (0..6)
            .map(|k| Event { key: k, ts: 100 + i64::from(k), amount: Some(7), note: None, delete: false })
            .collect();
        let t = run(&place, "t", &[events, Vec::new()], &[], (0, 0)).await.unwrap();
        let add = tributary::Alteration::AddColumn {
            name: "tier".into(),
            data_type: "string".into(),
            default: Some(serde_json::json!("basic")),
        };
        t.alter_schema(&[add]).await.unwrap();
        let scan = t.scan().columns(["id", "tier"]).filter(Predicate::eq("tier", "basic"));
        let got = rows_of(&scan.collect().await.unwrap());
        let want: Vec<Row> = (0..6).map(|k| vec![Some(key_of(k)), Some("basic".into())]).collect();
        assert_eq!(got, want);
        let whole = t.read(&ReadOptions::default()).await.unwrap();
        let tier = whole.column_by_name("tier").unwrap();
        assert!(
            (0..whole.num_rows()).all(|r| arrow::util::display::array_value_to_string(tier, r).unwrap() == "basic")
        );
    });
}
