//! Whole-table histories against the event-time model: 1 to 4 writers send
//! out-of-order updates and deletes, and compactions and archiving (with
//! bounds as tight as they go) run between and during their commits. After
//! every compaction and archiving, and at the end, Tributary's
//! snapshot equals the model (per key, the event with the largest `ts`; a
//! key whose largest event is a delete is absent); at the end the official
//! reader's snapshot does too, and after a final compaction so do both
//! readers' read-optimized views. Event times are distinct, so the model
//! has one answer. `TRIBUTARY_HISTORY_CASES` sets the number of histories.
//! On the store `TRIBUTARY_TEST_STORE` names (see [`Place`]).

use std::collections::BTreeMap;

use arrow::array::RecordBatch;
use proptest::prelude::*;
use tributary::{ArchiveSettings, Query, ReadOptions, Table};
use tributary_compaction::CompactorSettings;
use tributary_writer::{WriteClient, WriteSettings};

use crate::support::{
    Place, batch_with_flags, fares_options, fares_rows, have_official_reader, hybrid, official_rows_of,
};

/// One event: key number, event time, and whether it deletes the key.
#[derive(Debug, Clone, Copy)]
struct Event {
    key: u8,
    ts: i64,
    delete: bool,
}

/// One step of a history.
#[derive(Debug, Clone)]
enum Step {
    /// Writer `w` commits `events`.
    Commit { writer: usize, events: Vec<Event> },
    /// A compaction round.
    Compact,
    /// Writer `w` writes `events`, a compaction runs (and archiving, with
    /// the write pending), then the writer commits: its logs complete after
    /// the compaction instant.
    Across { writer: usize, events: Vec<Event> },
    /// Archiving, down to one active commit where the rules allow.
    Archive,
}

fn key_of(k: u8) -> String {
    format!("k{k:02}")
}

/// Histories: `writers` writers, events with distinct times in a shuffled
/// (out-of-order) sequence, cut into steps.
fn history() -> impl Strategy<Value = (usize, Vec<Step>)> {
    (1usize..=4, 8usize..40).prop_flat_map(|(writers, n)| {
        let times = Just((0..n as i64).map(|t| 100 + 7 * t).collect::<Vec<_>>()).prop_shuffle();
        let events = prop::collection::vec((0u8..8, prop::bool::weighted(0.3)), n);
        let cuts = prop::collection::vec((0u8..6, 0usize..4, 1usize..6), 1..14);
        (Just(writers), times, events, cuts).prop_map(|(writers, times, events, cuts)| {
            let mut events = events
                .into_iter()
                .zip(times)
                .map(|((key, delete), ts)| Event { key, ts, delete })
                .collect::<Vec<_>>()
                .into_iter();
            let mut steps = Vec::new();
            for (kind, w, len) in cuts {
                let writer = w % writers;
                let take: Vec<Event> = events.by_ref().take(len).collect();
                match kind {
                    0 => steps.push(Step::Compact),
                    2 => {
                        steps.push(Step::Archive);
                        if !take.is_empty() {
                            steps.push(Step::Commit { writer, events: take });
                        }
                    }
                    _ if take.is_empty() => {}
                    1 => steps.push(Step::Across { writer, events: take }),
                    _ => steps.push(Step::Commit { writer, events: take }),
                }
            }
            let rest: Vec<Event> = events.collect();
            if !rest.is_empty() {
                steps.push(Step::Commit { writer: 0, events: rest });
            }
            (writers, steps)
        })
    })
}

/// The model: per key, the committed event with the largest time; a key
/// whose largest event is a delete has no row. Rows are `(key, ts, fare)`.
#[derive(Default)]
struct Model {
    newest: BTreeMap<u8, Event>,
}

impl Model {
    fn commit(&mut self, events: &[Event]) {
        for e in events {
            if self.newest.get(&e.key).is_none_or(|n| n.ts < e.ts) {
                self.newest.insert(e.key, *e);
            }
        }
    }

    fn rows(&self) -> Vec<(String, i64, f64)> {
        self.newest.values().filter(|e| !e.delete).map(|e| (key_of(e.key), e.ts, fare(e.ts))).collect()
    }
}

/// A row's fare: derived from its time, so a wrong version shows.
fn fare(ts: i64) -> f64 {
    ts as f64 / 4.0
}

fn batch(events: &[Event]) -> RecordBatch {
    let keys: Vec<String> = events.iter().map(|e| key_of(e.key)).collect();
    let rows: Vec<(&str, i64, f64)> = events.iter().zip(&keys).map(|(e, k)| (k.as_str(), e.ts, fare(e.ts))).collect();
    let flags: Vec<bool> = events.iter().map(|e| e.delete).collect();
    batch_with_flags(&rows, &flags)
}

async fn ours(t: &Table, query: Query) -> Vec<(String, i64, f64)> {
    fares_rows(&t.read(&ReadOptions { query, ..Default::default() }).await.unwrap())
}

fn official(t: &Table, read_optimized: bool) -> Vec<(String, i64, f64)> {
    let mut rows: Vec<(String, i64, f64)> = official_rows_of(t, read_optimized)
        .iter()
        .map(|r| (r["uuid"].as_str().unwrap().to_string(), r["ts"].as_i64().unwrap(), r["fare"].as_f64().unwrap()))
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    rows
}

async fn compact(t: &Table) {
    t.compactor(CompactorSettings::default()).await.unwrap().run_once().await.unwrap();
}

/// Archives as much as the rules allow: bounds of one and two commits.
async fn archive(t: &Table) {
    let tight = ArchiveSettings {
        keep_min_commits: 1,
        keep_max_commits: 2,
        cleaner_commits_retained: 0,
        compaction_delta_commits: 1,
        ..ArchiveSettings::default()
    };
    t.archive(&tight).await.unwrap();
}

async fn commit(client: &WriteClient, events: &[Event]) {
    let mut c = client.start_commit().await.unwrap();
    c.write_batch(&batch(events)).await.unwrap();
    c.commit().await.unwrap();
}

async fn run(place: &Place, writers: usize, steps: &[Step], official_reader: bool) -> Result<(), TestCaseError> {
    let o = fares_options();
    let t = place.table("t").builder().with_settings(hybrid()).create(o).await.unwrap();
    let mut clients: Vec<WriteClient> = Vec::with_capacity(writers);
    for _ in 0..writers {
        clients.push(t.write_client(WriteSettings::default()).await.unwrap());
    }
    let mut model = Model::default();
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Commit { writer, events } => {
                commit(&clients[*writer], events).await;
                model.commit(events);
            }
            Step::Compact => {
                compact(&t).await;
                prop_assert_eq!(ours(&t, Query::Snapshot).await, model.rows(), "after step {} (compaction)", i);
            }
            Step::Across { writer, events } => {
                let mut c = clients[*writer].start_commit().await.unwrap();
                c.write_batch(&batch(events)).await.unwrap();
                compact(&t).await;
                prop_assert_eq!(ours(&t, Query::Snapshot).await, model.rows(), "after step {} (compaction)", i);
                archive(&t).await;
                prop_assert_eq!(ours(&t, Query::Snapshot).await, model.rows(), "after step {} (archiving)", i);
                c.commit().await.unwrap();
                model.commit(events);
            }
            Step::Archive => {
                archive(&t).await;
                prop_assert_eq!(ours(&t, Query::Snapshot).await, model.rows(), "after step {} (archiving)", i);
            }
        }
    }
    let want = model.rows();
    prop_assert_eq!(ours(&t, Query::Snapshot).await, want.clone(), "at the end");
    if official_reader {
        prop_assert_eq!(official(&t, false), want.clone(), "the official reader at the end");
    }
    compact(&t).await;
    prop_assert_eq!(ours(&t, Query::ReadOptimized).await, want.clone(), "read-optimized after a final compaction");
    if official_reader {
        prop_assert_eq!(official(&t, true), want, "the official reader, read-optimized, after a final compaction");
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("TRIBUTARY_HISTORY_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 64, ..ProptestConfig::default() })]

    #[test]
    fn histories_with_compactions_match_the_event_time_model((writers, steps) in history()) {
        let Some(place) = Place::new() else { return Ok(()) };
        let official_reader = have_official_reader();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(run(&place, writers, &steps, official_reader))?;
    }
}

/// The history by name: a delete compacted away, then an older
/// update from another writer that completes after the compaction.
#[test]
fn a_late_older_update_across_a_compaction_stays_deleted() {
    let e = |key, ts, delete| Event { key, ts, delete };
    let steps = vec![
        Step::Commit { writer: 0, events: vec![e(1, 100, false), e(2, 100, false)] },
        Step::Commit { writer: 1, events: vec![e(1, 300, true)] },
        Step::Compact,
        Step::Across { writer: 0, events: vec![e(1, 200, false), e(2, 250, true)] },
        Step::Commit { writer: 1, events: vec![e(2, 150, false)] },
    ];
    let Some(place) = Place::new() else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(run(&place, 2, &steps, have_official_reader())).unwrap();
}
