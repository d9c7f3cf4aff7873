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

use arrow::array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use futures::TryStreamExt;
use proptest::prelude::*;
use tributary::{CompareOp, CreateOptions, InstantTime, Predicate, Query, ReadOptions, Table};
use tributary_compaction::CompactorSettings;
use tributary_writer::WriteSettings;

use crate::support::filters::{Ask, Columns, F, Lit, Row, ask, check, expected, read_rows, rows_of, scanned};
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

/// A literal for column `c`: an integer for `ts` and `amount`, text for
/// the others.
fn lit(c: &str) -> BoxedStrategy<Lit> {
    match c {
        "ts" => (90i64..400).prop_map(Lit::Int).boxed(),
        "amount" => (0i64..200).prop_map(Lit::Int).boxed(),
        "region" => prop::sample::select(&REGIONS[..]).prop_map(|r| Lit::Text(r.into())).boxed(),
        "note" => (0u8..4).prop_map(|n| Lit::Text(note_of(n))).boxed(),
        _ => (0u8..14).prop_map(|k| Lit::Text(key_of(k))).boxed(),
    }
}

static SCANNED: Columns = Columns { names: &COLUMNS, literal: lit };

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

/// The Arrow fields of [`SCHEMA`]'s columns.
fn table_fields() -> Vec<Field> {
    vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("region", DataType::Utf8, false),
        Field::new("amount", DataType::Int64, true),
        Field::new("note", DataType::Utf8, true),
    ]
}

fn batch(events: &[Event]) -> RecordBatch {
    let mut fields = table_fields();
    fields.push(Field::new("_hoodie_is_deleted", DataType::Boolean, false));
    let schema = Arc::new(Schema::new(fields));
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
        check(scanned(&t, &COLUMNS, &Query::Snapshot, ask).await, expected(&model, ask), ask, &COLUMNS, "snapshot")?;
        let ro = read_rows(&t, &COLUMNS, &Query::ReadOptimized).await;
        check(
            scanned(&t, &COLUMNS, &Query::ReadOptimized, ask).await,
            expected(&ro, ask),
            ask,
            &COLUMNS,
            "read-optimized",
        )?;
        if let Some(q) = &incremental {
            let inc = read_rows(&t, &COLUMNS, q).await;
            check(scanned(&t, &COLUMNS, q, ask).await, expected(&inc, ask), ask, &COLUMNS, "incremental")?;
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
        asks in prop::collection::vec(ask(&SCANNED), 1..5),
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
        let big =
            Ask { filter: F::Cmp(3, CompareOp::Gt, Lit::Int(100)), columns: vec![0, 3], limit: None, budget: None };
        for compact_between in [false, true] {
            let mut commits = vec![vec![e(100, 150)]];
            if compact_between {
                commits.push(Vec::new());
            }
            commits.push(vec![e(200, 50)]);
            let name = format!("t{}", u8::from(compact_between));
            let t = run(&place, &name, &commits, std::slice::from_ref(&big), (0, 1)).await.unwrap();
            for budget in [None, Some(512), Some(8 << 10)] {
                let got = scanned(&t, &COLUMNS, &Query::Snapshot, &Ask { budget, ..big.clone() }).await;
                assert_eq!(got, Vec::<Row>::new(), "compacted between: {compact_between}, budget {budget:?}");
            }
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

/// What a scan of one partition for two columns fetches, counted through
/// the store: the tail of each of that partition's base files (their
/// footers) and the chunks of the columns it reads (the two, and the one
/// its filter reads), of the row groups whose statistics the filter does
/// not rule out; nothing of the other partitions, and no other column.
#[test]
fn a_scan_fetches_its_partition_columns_and_row_groups_only() {
    use parquet::file::metadata::ParquetMetaDataReader;
    use tributary_timeline::{CountingStore, TAIL_BYTES, TableLocation};

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let memory = Arc::new(object_store::memory::InMemory::new());
        let store = Arc::new(CountingStore::new(memory.clone()));
        let loc = TableLocation::new(store.clone(), object_store::path::Path::from("warehouse/scan"));
        let mut o = CreateOptions::new(SCHEMA, "id", "ts");
        o.partition_field = Some("region".into());
        o.hive_style_partitioning = true;
        o.buckets = 2;
        let t = Table::builder(loc).with_settings(hybrid()).create(o).await.unwrap();
        let client = t.write_client(WriteSettings::default()).await.unwrap();
        // 60,000 rows, with notes that do not compress away, so each base
        // file is several times the tail a reader fetches on opening.
        let n = 60_000usize;
        let ids: Vec<String> = (0..n).map(|i| format!("k{i:06}")).collect();
        let regions: Vec<&str> = (0..n).map(|i| REGIONS[i % REGIONS.len()]).collect();
        let noise = |i: usize| format!("{:016x}", (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let notes: Vec<String> = (0..n).map(|i| (0..6).map(|j| noise(i * 6 + j)).collect()).collect();
        let schema = Arc::new(Schema::new(table_fields()));
        let rows = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from_iter_values(&ids)),
                Arc::new(Int64Array::from_iter_values((0..n as i64).map(|i| 1000 + i))),
                Arc::new(StringArray::from_iter_values(&regions)),
                Arc::new(Int64Array::from_iter_values((0..n as i64).map(|i| i % 1000))),
                Arc::new(StringArray::from_iter_values(&notes)),
            ],
        )
        .unwrap();
        let mut c = client.start_commit().await.unwrap();
        c.write_batch(&rows).await.unwrap();
        c.commit().await.unwrap();
        let settings = CompactorSettings { row_group_rows: 1024, ..CompactorSettings::default() };
        t.compactor(settings).await.unwrap().run_once().await.unwrap();

        // What this test expects each scan to fetch, from the base files'
        // own footers: per file of region `eu`, its tail, and the chunks of
        // `columns` in the row groups whose `id` may be below `below`.
        let bases: Vec<(String, bytes::Bytes)> = {
            use object_store::{ObjectStore, ObjectStoreExt};
            let listed: Vec<_> = memory.list(None).try_collect().await.unwrap();
            let mut out = Vec::new();
            for m in listed.into_iter().filter(|m| m.location.as_ref().ends_with(".parquet")) {
                if m.location.as_ref().contains("/.hoodie/") {
                    continue;
                }
                out.push((m.location.to_string(), memory.get(&m.location).await.unwrap().bytes().await.unwrap()));
            }
            out
        };
        let eu: Vec<&(String, bytes::Bytes)> = bases.iter().filter(|(p, _)| p.contains("region=eu/")).collect();
        assert_eq!(
            eu.len(),
            2,
            "one base file per bucket of region eu: {bases:?}",
            bases = bases.iter().map(|b| &b.0).collect::<Vec<_>>()
        );
        let bound = |columns: &[&str], below: Option<&str>| -> u64 {
            let mut total = 0;
            for (_, file) in &eu {
                let meta = ParquetMetaDataReader::new().parse_and_finish(file).unwrap();
                let size = file.len() as u64;
                assert!(size > 3 * TAIL_BYTES, "a base file of {size} bytes");
                let tail_start = size - TAIL_BYTES;
                total += TAIL_BYTES;
                for group in meta.row_groups() {
                    let id = group.columns().iter().find(|c| c.column_path().string() == "id").unwrap();
                    let min = id.statistics().and_then(|s| s.min_bytes_opt()).unwrap();
                    if below.is_some_and(|b| min >= b.as_bytes()) {
                        continue;
                    }
                    for c in group.columns().iter().filter(|c| columns.contains(&c.column_path().string().as_str())) {
                        let (start, len) = c.byte_range();
                        // A chunk within the tail is read from it.
                        total += (start + len).min(tail_start).saturating_sub(start);
                    }
                }
            }
            total
        };
        let eu_bytes: u64 = eu.iter().map(|(_, f)| f.len() as u64).sum();

        // The bytes a scan's stream fetches (its plan read the timeline),
        // and the rows it returns.
        async fn fetched(store: &CountingStore, scan: tributary::Scan<'_>) -> (u64, usize) {
            let plan = scan.plan().await.unwrap();
            let before = store.bytes_read();
            let got: Vec<RecordBatch> = plan.stream().try_collect().await.unwrap();
            (store.bytes_read() - before, got.iter().map(RecordBatch::num_rows).sum::<usize>())
        }
        let (bytes, rows) =
            fetched(&store, t.scan().columns(["id", "amount"]).filter(Predicate::eq("region", "eu"))).await;
        assert_eq!(rows, n / 3);
        let most = bound(&["id", "amount", "region"], None);
        assert!(bytes <= most, "{bytes} bytes fetched for one partition and two columns, at most {most} expected");
        assert!(most < eu_bytes / 2, "the columns read are a small part of the files ({most} of {eu_bytes} bytes)");

        // A filter on the key's order: the row groups whose smallest key is
        // past the bound are not fetched at all.
        let below = "k001000";
        let filter = Predicate::eq("region", "eu").and(Predicate::compare("id", CompareOp::Lt, below));
        let (bytes, rows) = fetched(&store, t.scan().columns(["id", "amount"]).filter(filter)).await;
        assert_eq!(rows, ids.iter().zip(&regions).filter(|(id, r)| id.as_str() < below && **r == "eu").count());
        let pruned = bound(&["id", "amount", "region"], Some(below));
        assert!(
            bytes <= pruned,
            "{bytes} bytes fetched for the row groups with keys below {below}, at most {pruned} expected"
        );
        let tails = eu.len() as u64 * TAIL_BYTES;
        assert!(pruned - tails < (most - tails) / 4, "most row groups are ruled out ({pruned} of {most} bytes)");
    });
}
