//! Incremental reads against a model of what Apache Hudi's Java reader
//! (Spark, Hudi 1.2.0) returns (`docs/design.md`, "Merge semantics"): the
//! window's commits are those that completed in `(begin, end]`; per file
//! group, the latest slice among the files they wrote is merged, with base
//! rows of other commits left out; the winners the window wrote are the
//! rows. Histories of updates, deletes and compactions (some across a
//! writer's commit) are read over many windows, logs only and after
//! compactions. Named cases pin the results Spark gave for the same
//! histories, a cleaned table (Hudi's full-scan fallback) among them.
//! On the store `TRIBUTARY_TEST_STORE` names (see [`Place`]).

use std::collections::BTreeSet;

use arrow::array::{AsArray, RecordBatch};
use proptest::prelude::*;
use tributary::{CreateOptions, Query, ReadOptions, Table};
use tributary_compaction::CompactorSettings;
use tributary_timeline::InstantTime;
use tributary_writer::{WriteClient, WriteSettings};

use crate::support::{FARES_SCHEMA, Place, fares_batch, fares_rows, hybrid};

/// One event: key number, event time, and whether it deletes the key.
#[derive(Debug, Clone, Copy)]
struct Event {
    key: u8,
    ts: i64,
    delete: bool,
}

fn up(key: u8, ts: i64) -> Event {
    Event { key, ts, delete: false }
}

fn del(key: u8, ts: i64) -> Event {
    Event { key, ts, delete: true }
}

/// One step of a history.
#[derive(Debug, Clone)]
enum Step {
    /// A commit of `events`.
    Commit(Vec<Event>),
    /// A compaction round.
    Compact,
    /// A commit of `events` whose writing starts before a compaction and
    /// that completes after it: its logs join the compaction's slice.
    Across(Vec<Event>),
}

fn key_of(k: u8) -> String {
    format!("k{k:02}")
}

/// A key's partition: even keys in `oslo`, odd ones in `bergen`. With one
/// bucket, a partition is one file group.
fn city_of(k: u8) -> &'static str {
    if k.is_multiple_of(2) { "oslo" } else { "bergen" }
}

/// A row's fare: derived from its time, so a wrong version shows.
fn fare(ts: i64) -> f64 {
    ts as f64 / 4.0
}

fn batch(events: &[Event]) -> RecordBatch {
    let keys: Vec<String> = events.iter().map(|e| key_of(e.key)).collect();
    let rows: Vec<(&str, i64, f64, &str)> =
        events.iter().zip(&keys).map(|(e, k)| (k.as_str(), e.ts, fare(e.ts), city_of(e.key))).collect();
    let deleted: Vec<bool> = events.iter().map(|e| e.delete).collect();
    fares_batch(&rows, Some(&deleted))
}

/// A row of an incremental read: key, event time, and the commit
/// (requested time) that wrote it.
type Row = (String, i64, String);

/// What completed, in completion order.
#[derive(Debug, Clone)]
enum Done {
    Commit { requested: String, completed: String, events: Vec<Event> },
    Compaction { completed: String, cities: BTreeSet<&'static str> },
}

impl Done {
    fn completed(&self) -> &str {
        match self {
            Done::Commit { completed, .. } | Done::Compaction { completed, .. } => completed,
        }
    }
}

/// The model of a table's history, independent of Tributary's slicing and
/// merge: commits and compactions in completion order, with which cities
/// each compaction compacted (those written since their last compaction).
#[derive(Default)]
struct Model {
    done: Vec<Done>,
    /// Cities written since their last compaction.
    dirty: BTreeSet<&'static str>,
}

impl Model {
    fn commit(&mut self, requested: &InstantTime, completed: &InstantTime, events: &[Event]) {
        self.dirty.extend(events.iter().map(|e| city_of(e.key)));
        let (requested, completed) = (requested.to_string(), completed.to_string());
        self.done.push(Done::Commit { requested, completed, events: events.to_vec() });
    }

    /// A compaction round: it compacts the dirty cities, if any.
    fn compaction(&mut self, completed: Option<&InstantTime>) {
        let cities = std::mem::take(&mut self.dirty);
        assert_eq!(completed.is_some(), !cities.is_empty(), "a compaction runs when a city has new logs");
        if let Some(c) = completed {
            self.done.push(Done::Compaction { completed: c.to_string(), cities });
        }
    }

    /// The event-time winner of `key` among `done`'s commits that pass
    /// `keep`, with the commit that wrote it.
    fn winner(done: &[Done], key: u8, keep: impl Fn(&str) -> bool) -> Option<(Event, &str)> {
        let mut best: Option<(Event, &str)> = None;
        for d in done {
            if let Done::Commit { requested, completed, events } = d
                && keep(completed)
            {
                for e in events.iter().filter(|e| e.key == key) {
                    if best.is_none_or(|(b, _)| e.ts > b.ts) {
                        best = Some((*e, requested));
                    }
                }
            }
        }
        best
    }

    /// The rows of the incremental read `(begin, end]`, sorted.
    fn window(&self, begin: &str, end: &str) -> Vec<Row> {
        let in_window = |c: &str| c > begin && c <= end;
        let keys: BTreeSet<u8> = self
            .done
            .iter()
            .flat_map(|d| match d {
                Done::Commit { events, .. } => events.iter().map(|e| e.key).collect(),
                Done::Compaction { .. } => Vec::new(),
            })
            .collect();
        let mut rows = Vec::new();
        for key in keys {
            let city = city_of(key);
            // The latest slice among the window's files: the one the last
            // window compaction of the city opened, holding the commits that
            // completed after it; without one, all the window's commits.
            let last = self.done.iter().rposition(
                |d| matches!(d, Done::Compaction { completed, cities } if in_window(completed) && cities.contains(city)),
            );
            let mut versions = Vec::new();
            if let Some(j) = last {
                // Its base row (the snapshot winner then) takes part if a
                // window commit wrote it.
                if let Some((e, c)) = Self::winner(&self.done[..j], key, |_| true)
                    && !e.delete
                    && self.done.iter().any(|d| matches!(d, Done::Commit { requested, completed, .. } if requested == c && in_window(completed)))
                {
                    versions.push((e, c));
                }
            }
            let after = last.map_or(0, |j| j + 1);
            versions.extend(Self::winner(&self.done[after..], key, in_window));
            let newest = versions.into_iter().max_by_key(|(e, _)| e.ts);
            if let Some((e, c)) = newest.filter(|(e, _)| !e.delete) {
                rows.push((key_of(key), e.ts, c.to_string()));
            }
        }
        rows
    }

    /// Window bounds: before everything, then each completion time, and
    /// each commit's requested time (a bound between instants).
    fn bounds(&self) -> Vec<String> {
        let mut out = BTreeSet::from(["00000000000000000".to_string()]);
        for d in &self.done {
            out.insert(d.completed().to_string());
            if let Done::Commit { requested, .. } = d {
                out.insert(requested.clone());
            }
        }
        out.into_iter().collect()
    }
}

const KEYS: u8 = 6;

async fn incremental(t: &Table, begin: &str, end: &str) -> Vec<Row> {
    let query = Query::Incremental { begin: InstantTime::parse(begin).unwrap(), end: InstantTime::parse(end).unwrap() };
    let b = t.read(&ReadOptions { query, with_meta: true, ..Default::default() }).await.unwrap();
    let commit = b.column_by_name("_hoodie_commit_time").unwrap().as_string::<i32>();
    let mut rows: Vec<Row> = fares_rows(&b)
        .into_iter()
        .enumerate()
        .map(|(i, (uuid, ts, f))| {
            assert_eq!(f, fare(ts), "a row's columns come from one version");
            (uuid, ts, commit.value(i).to_string())
        })
        .collect();
    rows.sort();
    rows
}

/// A table of fares partitioned by city, one bucket per city.
async fn table(place: &Place) -> Table {
    let mut o = CreateOptions::new(FARES_SCHEMA, "uuid", "ts");
    o.partition_field = Some("city".into());
    o.buckets = 1;
    place.table("t").builder().with_settings(hybrid()).create(o).await.unwrap()
}

async fn compact(t: &Table) -> Option<InstantTime> {
    let done = t.compactor(CompactorSettings::default()).await.unwrap().run_once().await.unwrap();
    assert!(done.len() <= 1, "{done:?}");
    done.into_iter().next().map(|s| s.completed)
}

async fn commit(client: &WriteClient, events: &[Event], model: &mut Model) {
    let mut c = client.start_commit().await.unwrap();
    c.write_batch(&batch(events)).await.unwrap();
    let s = c.commit().await.unwrap();
    model.commit(&s.instant, &s.completed, events);
}

/// Runs `steps` on a new table; returns it with its model.
async fn run(place: &Place, steps: &[Step]) -> (Table, Model) {
    let t = table(place).await;
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    let mut model = Model::default();
    for step in steps {
        match step {
            Step::Commit(events) => commit(&client, events, &mut model).await,
            Step::Compact => model.compaction(compact(&t).await.as_ref()),
            Step::Across(events) => {
                let mut c = client.start_commit().await.unwrap();
                c.write_batch(&batch(events)).await.unwrap();
                model.compaction(compact(&t).await.as_ref());
                let s = c.commit().await.unwrap();
                model.commit(&s.instant, &s.completed, events);
            }
        }
    }
    (t, model)
}

/// Histories over a few keys in two cities, with distinct event times in a
/// shuffled order, a third of them deletes, cut into steps.
fn history() -> impl Strategy<Value = Vec<Step>> {
    (6usize..24).prop_flat_map(|n| {
        let times = Just((0..n as i64).map(|t| 100 + 7 * t).collect::<Vec<_>>()).prop_shuffle();
        let events = prop::collection::vec((0..KEYS, prop::bool::weighted(0.3)), n);
        let cuts = prop::collection::vec((0u8..5, 1usize..5), 2..9);
        (times, events, cuts).prop_map(|(times, events, cuts)| {
            let mut events =
                events.into_iter().zip(times).map(|((key, delete), ts)| Event { key, ts, delete }).collect::<Vec<_>>();
            let mut steps = Vec::new();
            for (kind, len) in cuts {
                let take: Vec<Event> = events.drain(..len.min(events.len())).collect();
                match kind {
                    0 => steps.push(Step::Compact),
                    _ if take.is_empty() => {}
                    1 => steps.push(Step::Across(take)),
                    _ => steps.push(Step::Commit(take)),
                }
            }
            if !events.is_empty() {
                steps.push(Step::Commit(events));
            }
            steps
        })
    })
}

/// Every window between two bounds of the model's history.
async fn check_every_window(t: &Table, model: &Model) -> Result<(), TestCaseError> {
    let bounds = model.bounds();
    for (i, begin) in bounds.iter().enumerate() {
        for end in &bounds[i + 1..] {
            prop_assert_eq!(incremental(t, begin, end).await, model.window(begin, end), "({}, {}]", begin, end);
        }
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("TRIBUTARY_HISTORY_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(12)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 32, ..ProptestConfig::default() })]

    #[test]
    fn incremental_reads_match_the_model(steps in history()) {
        let Some(place) = Place::new() else { return Ok(()) };
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async {
            let (t, model) = run(&place, &steps).await;
            check_every_window(&t, &model).await
        })?;
    }
}

/// The table's commits and compactions by number, in completion order:
/// `(requested, completed)`.
async fn instants(t: &Table) -> Vec<(String, String)> {
    let timeline = t.timeline().await.unwrap();
    let mut out: Vec<(String, String)> = timeline
        .completed()
        .filter(|i| i.action.writes_data())
        .map(|i| (i.requested.to_string(), i.completed.as_ref().unwrap().to_string()))
        .collect();
    out.sort_by(|a, b| a.1.cmp(&b.1));
    out
}

/// `(key, ts, n)`: the row of key `k<key>` at `ts` written by the `n`th
/// instant (from 1) of `instants`.
fn rows(instants: &[(String, String)], want: &[(u8, i64, usize)]) -> Vec<Row> {
    let mut out: Vec<Row> = want.iter().map(|&(k, ts, n)| (key_of(k), ts, instants[n - 1].0.clone())).collect();
    out.sort();
    out
}

/// Logs only (Spark, Hudi 1.2.0, gave these rows for the same history): a
/// window version that loses to an older commit's shows; among several
/// window versions the event-time winner shows; a window delete that wins
/// among the window's versions hides the key, even where it loses to an
/// older version; the begin bound is exclusive and the end inclusive, on
/// completion times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_window_merges_its_own_versions() {
    let Some(place) = Place::new() else { return };
    let steps = vec![
        Step::Commit(vec![up(0, 100), up(1, 100), up(2, 100), up(3, 100), up(4, 100)]),
        Step::Commit(vec![up(1, 50), up(2, 200), del(3, 200), del(4, 50), up(5, 10), up(6, 100), del(9, 100)]),
        Step::Commit(vec![up(2, 150), up(5, 20), del(6, 150), up(7, 100), up(8, 100), up(9, 50)]),
        Step::Commit(vec![del(7, 50), del(8, 150), up(10, 5)]),
    ];
    let (t, model) = run(&place, &steps).await;
    let i = instants(&t).await;
    let c = |n: usize| i[n - 1].1.as_str();
    let r = |n: usize| i[n - 1].0.as_str();
    let expect = [
        (c(1), c(4), rows(&i, &[(1, 50, 2), (2, 200, 2), (5, 20, 3), (7, 100, 3), (10, 5, 4)])),
        (c(2), c(3), rows(&i, &[(2, 150, 3), (5, 20, 3), (7, 100, 3), (8, 100, 3), (9, 50, 3)])),
        (c(1), c(2), rows(&i, &[(1, 50, 2), (2, 200, 2), (5, 10, 2), (6, 100, 2)])),
        // A requested time as the begin: the first commit completed after it.
        (r(1), c(2), rows(&i, &[(0, 100, 1), (1, 100, 1), (2, 200, 2), (4, 100, 1), (5, 10, 2), (6, 100, 2)])),
        (c(1), r(2), vec![]),
        (c(1), r(3), rows(&i, &[(1, 50, 2), (2, 200, 2), (5, 10, 2), (6, 100, 2)])),
        (c(1), c(1), vec![]),
    ];
    for (begin, end, want) in expect {
        let got = incremental(&t, begin, end).await;
        assert_eq!(got, want, "({begin}, {end}]");
        assert_eq!(got, model.window(begin, end), "the model of ({begin}, {end}]");
    }
}

/// With base files (Spark, Hudi 1.2.0, gave these rows): a compaction in
/// the window brings its base file, whose rows carry their own commits and
/// take part only when those are in the window; a window commit's logs
/// that a window compaction folded are read through its base file only;
/// a compaction's completion alone returns nothing; a tombstone log is not
/// read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compactions_bring_the_window_rows_of_their_base_files() {
    let Some(place) = Place::new() else { return };
    // Keys 0..=8 of one city (even numbers), so one file group.
    let (a, b, c, d, e, f, g, h, k) = (0, 2, 4, 6, 8, 10, 12, 14, 16);
    let steps = vec![
        Step::Commit(vec![up(a, 100), up(b, 100), up(c, 100), up(d, 100), up(e, 100), up(f, 100), up(k, 100)]),
        Step::Commit(vec![up(a, 150), up(g, 100), del(f, 200), up(k, 50)]),
        Step::Compact,
        Step::Commit(vec![up(a, 50), up(b, 200), del(c, 50), up(h, 100), del(e, 200), up(f, 150)]),
        Step::Commit(vec![up(b, 120), del(h, 50)]),
    ];
    let (t, model) = run(&place, &steps).await;
    let i = instants(&t).await;
    let done = |n: usize| i[n - 1].1.as_str();
    // Instants: 1, 2 commits, 3 the compaction, 4, 5 commits.
    let after_the_compaction = rows(&i, &[(a, 50, 4), (b, 200, 4), (f, 150, 4), (h, 100, 4)]);
    let expect = [
        (done(2), done(5), after_the_compaction.clone()),
        (done(3), done(5), after_the_compaction),
        (done(1), done(5), rows(&i, &[(a, 150, 2), (b, 200, 4), (f, 150, 4), (g, 100, 2), (h, 100, 4)])),
        (done(1), done(2), rows(&i, &[(a, 150, 2), (g, 100, 2), (k, 50, 2)])),
        (done(2), done(3), vec![]),
        (done(1), done(3), rows(&i, &[(a, 150, 2), (g, 100, 2)])),
    ];
    for (begin, end, want) in expect {
        let got = incremental(&t, begin, end).await;
        assert_eq!(got, want, "({begin}, {end}]");
        assert_eq!(got, model.window(begin, end), "the model of ({begin}, {end}]");
    }
}

/// Once a file a window commit wrote is cleaned, the read falls back to
/// every file, as Hudi does (Spark, Hudi 1.2.0, gave these rows): base rows
/// of other commits still drop out before the merge, but the logs of later
/// commits compete, and a window row they beat does not show.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleaned_window_reads_every_file() {
    let Some(place) = Place::new() else { return };
    let (a, b, y, z) = (0, 2, 4, 6);
    let steps = vec![
        Step::Commit(vec![up(a, 100)]),
        Step::Commit(vec![up(b, 100), up(z, 100)]),
        Step::Compact,
        Step::Commit(vec![up(z, 150)]),
        Step::Compact,
        Step::Commit(vec![up(b, 200), up(y, 100)]),
    ];
    let (t, _) = run(&place, &steps).await;
    let i = instants(&t).await;
    let done = |n: usize| i[n - 1].1.as_str();
    let requested = |n: usize| i[n - 1].0.as_str();
    // Instants: 1, 2 commits, 3 a compaction, 4 a commit, 5 a compaction, 6 a commit.
    assert_eq!(incremental(&t, done(1), done(2)).await, rows(&i, &[(b, 100, 2), (z, 100, 2)]), "before the clean");
    t.clean(1).await.unwrap().expect("a clean ran");
    assert_eq!(incremental(&t, done(1), done(2)).await, vec![], "b was overwritten by commit 6, z by commit 4");
    assert_eq!(
        incremental(&t, done(1), done(6)).await,
        rows(&i, &[(b, 200, 6), (y, 100, 6), (z, 150, 4)]),
        "every window commit's winner"
    );
    assert_eq!(incremental(&t, requested(2), done(4)).await, rows(&i, &[(z, 150, 4)]));
}

/// While a compaction is pending, a window commit requested before it and
/// completed after it has its log in the pending slice. Spark (Hudi 1.2.0)
/// returns none of its rows then, as it takes the latest slice requested at
/// or before the window's last commit; Tributary returns them, as it does
/// once the compaction completes (a deliberate difference, see
/// `docs/design.md`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_compaction_hides_no_window_rows() {
    let Some(place) = Place::new() else { return };
    let t = table(&place).await;
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    let mut model = Model::default();
    commit(&client, &[up(0, 100), up(2, 100)], &mut model).await;
    let mut late = client.start_commit().await.unwrap();
    late.write_batch(&batch(&[up(0, 50), up(4, 100)])).await.unwrap();
    let compactor = t.compactor(CompactorSettings::default()).await.unwrap();
    let (c, _) = compactor.schedule().await.unwrap().unwrap();
    assert!(late.instant() < &c, "requested before the compaction");
    let s = late.commit().await.unwrap();
    assert!(s.completed > c, "completed after it");
    model.commit(&s.instant, &s.completed, &[up(0, 50), up(4, 100)]);
    let (first, late) = (model.done[0].completed().to_string(), s.completed.to_string());
    let want = vec![(key_of(0), 50, s.instant.to_string()), (key_of(4), 100, s.instant.to_string())];
    assert_eq!(incremental(&t, &first, &late).await, want, "while the compaction is pending");
    assert_eq!(want, model.window(&first, &late));
    compactor.execute(&c).await.unwrap();
    assert_eq!(incremental(&t, &first, &late).await, want, "once it completed (after the window)");
}
