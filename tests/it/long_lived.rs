//! A table that lives long, compressed: 20,000 commits of 4 records each
//! (200 keys) with `serve` compacting, cleaning and archiving beside the
//! writer on Hudi's default bounds. Every 2,000 commits, once an archiving
//! round has run, the active timeline holds at most a fixed number of
//! instants however many commits came before. At the end, the snapshot,
//! time travel back to the oldest commit cleaning kept, and an incremental
//! read from the newest archived commit equal the model, and time travel to
//! an archived instant (whose files the cleaner removed) is refused, as
//! Hudi refuses it. The official reader reads the same snapshot, and the
//! test leaves the table and those reads for the Spark suite. The
//! table lives in memory, so the test pays for the protocol and not for
//! the disk; `benches/longevity.rs` measures the same life on disk and on
//! S3, with its rates and read times.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use object_store::memory::InMemory;
use object_store::path::Path;
use tributary::{
    ArchiveSettings, CleanRetention, LockKind, Query, ReadOptions, ServiceEvent, ServiceSchedule, Table, TableSettings,
    serve,
};
use tributary_timeline::{Action, InstantTime, TableLocation};
use tributary_writer::WriteSettings;

use crate::support::{copy_table_to, fares_json, fares_options, fares_rows, hybrid, oslo_batch, spark_handoff};

const COMMITS: u64 = 20_000;
const CHECK_EVERY: u64 = 2_000;
const KEYS: u64 = 200;
const PER_COMMIT: u64 = 4;

/// Rows `(uuid, ts, fare)` of commit `n`: records `4n..4n+4`, record `i`
/// upserting key `k{i % 200}` with `ts = fare = i`.
fn commit_rows(n: u64) -> Vec<(String, i64, f64)> {
    (n * PER_COMMIT..(n + 1) * PER_COMMIT).map(|i| (format!("k{}", i % KEYS), i as i64, i as f64)).collect()
}

/// The table's rows after commits `from..until`, over an empty table:
/// each key's latest record, by key.
fn model(from: u64, until: u64) -> Vec<(String, i64, f64)> {
    let mut latest = BTreeMap::new();
    for n in from..until {
        for r in commit_rows(n) {
            latest.insert(r.0.clone(), r);
        }
    }
    latest.into_values().collect()
}

async fn rows(t: &Table, query: Query, as_of: Option<&InstantTime>) -> Vec<(String, i64, f64)> {
    let mut rows =
        fares_rows(&t.read(&ReadOptions { query, as_of: as_of.cloned(), ..Default::default() }).await.unwrap());
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_thousand_commits_with_serve_keep_the_timeline_bounded_and_the_rows() {
    // The table is in memory whatever the suite's store: once is enough.
    if crate::support::store() != crate::support::Store::Local {
        return;
    }
    let loc = TableLocation::new(Arc::new(InMemory::new()), Path::from("long/t"));
    let settings = TableSettings { lock: LockKind::InProcess, ..hybrid() };
    let t = Table::builder(loc).with_settings(settings).create(fares_options()).await.unwrap();
    let archive = ArchiveSettings::default();
    let schedule = ServiceSchedule {
        compact_every: Duration::from_millis(50),
        clean_every: Some(Duration::from_millis(200)),
        retention: CleanRetention::Commits(10),
        archive_every: Some(Duration::from_millis(200)),
        archive,
        ..ServiceSchedule::default()
    };
    // Archiving rounds finished, and the failures of any job.
    let (rounds_tx, mut rounds) = tokio::sync::watch::channel(0u64);
    let failures = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let service = {
        let (t, failures) = (t.clone(), failures.clone());
        tokio::spawn(async move {
            serve(
                &t,
                &schedule,
                async {
                    let _ = stopped.await;
                },
                |e| match e {
                    ServiceEvent::Archived { .. } => rounds_tx.send_modify(|n| *n += 1),
                    ServiceEvent::Failed { job, error } => failures.lock().unwrap().push(format!("{job}: {error}")),
                    _ => {}
                },
            )
            .await
            .unwrap()
        })
    };

    let client = t.write_client(WriteSettings::default()).await.unwrap();
    let mut instants = Vec::with_capacity(COMMITS as usize);
    let mut active_at_checks = Vec::new();
    let started = std::time::Instant::now();
    for n in 0..COMMITS {
        let owned = commit_rows(n);
        let rows: Vec<(&str, i64, f64)> = owned.iter().map(|r| (r.0.as_str(), r.1, r.2)).collect();
        let mut c = client.start_commit().await.unwrap();
        c.write_batch(&oslo_batch(&rows)).await.unwrap();
        instants.push(c.commit().await.unwrap());
        if (n + 1) % CHECK_EVERY == 0 {
            // Two rounds end after the writer paused: one ran whole on
            // this timeline.
            let seen = *rounds.borrow_and_update();
            rounds.wait_for(|r| *r >= seen + 2).await.unwrap();
            let tl = t.timeline().await.unwrap();
            let active: Vec<String> =
                tl.active().iter().map(|i| format!("{}.{:?}.{:?}", i.requested, i.action, i.state)).collect();
            active_at_checks.push((n + 1, active));
        }
    }
    let _ = stop.send(());
    let report = service.await.unwrap();
    let counts: Vec<(u64, usize)> = active_at_checks.iter().map(|(n, a)| (*n, a.len())).collect();
    eprintln!(
        "{COMMITS} commits in {:.1} s; active instants after archiving, by commits: {counts:?}; {report:?}",
        started.elapsed().as_secs_f64()
    );
    let failures = failures.lock().unwrap().clone();
    assert!(failures.is_empty(), "{failures:?}");
    assert!(report.archives > 0 && report.compactions > 0 && report.cleans > 0, "{report:?}");

    // The bound: archiving keeps at most `keep_max_commits` commits (delta
    // commits and compactions); the clean, rollback and compaction
    // instants among them are at most as many again.
    let bound = 2 * archive.keep_max_commits;
    for (commits, active) in &active_at_checks {
        assert!(
            active.len() <= bound,
            "{} active instants after {commits} commits (bound {bound}): {active:?}",
            active.len()
        );
    }

    let tl = t.timeline().await.unwrap();
    let snapshot = rows(&t, Query::Snapshot, None).await;
    assert_eq!(snapshot, model(0, COMMITS), "snapshot");
    // Time travel reaches back to the earliest commit the latest clean
    // retains, which archiving keeps active; to an archived instant, whose
    // slices the cleaner removed, it is refused, as Hudi refuses it.
    let folder = tributary_timeline::TimelineFolder::new(t.location(), t.config());
    let retained = tributary_compaction::latest_clean_retained(&folder, &tl).await.unwrap().expect("a clean ran");
    // Hudi slices a log by its commit's completion time, so its time travel
    // to `t` leaves out a commit requested by `t` that completed after a
    // compaction requested after `t` (docs/interop.md, "Time travel"). The
    // instant Spark is sent to is the oldest kept commit no compaction
    // straddles; with one writer, no other commit requested by then
    // completed after it.
    let straddled = |c: &tributary_writer::CommitSummary| {
        tl.active().iter().any(|i| {
            matches!(i.action, Action::Compaction | Action::Commit)
                && c.instant < i.requested
                && i.requested < c.completed
        })
    };
    let oldest = instants.iter().position(|c| c.instant >= retained && !straddled(c)).unwrap();
    let travel = &instants[oldest].instant;
    assert_eq!(rows(&t, Query::Snapshot, Some(travel)).await, model(0, oldest as u64 + 1), "as of {travel}");
    let early = &instants[1_234].instant;
    assert!(tl.is_archived(early), "commit 1234 is archived");
    let refused = t.read(&ReadOptions { as_of: Some(early.clone()), ..Default::default() }).await.unwrap_err();
    assert!(refused.to_string().contains("cleaner removed"), "{refused}");
    // An incremental read from the newest archived commit.
    let from = instants.iter().rposition(|c| tl.is_archived(&c.instant)).expect("archived commits") as u64;
    let begin = &instants[from as usize];
    let end = instants.last().unwrap().completed.clone();
    let window = rows(&t, Query::Incremental { begin: begin.completed.clone(), end }, None).await;
    assert_eq!(window, model(from + 1, COMMITS), "incremental from commit {from}");

    // The official reader, on a copy in a local folder: the same snapshot.
    if crate::support::have_official_reader() {
        let dir = tempfile::tempdir().unwrap();
        copy_table_to(&t, dir.path()).await;
        let mut theirs: Vec<(String, i64, f64)> = crate::support::official_rows(dir.path(), "")
            .iter()
            .map(|r| (r["uuid"].as_str().unwrap().into(), r["ts"].as_i64().unwrap(), r["fare"].as_f64().unwrap()))
            .collect();
        theirs.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(theirs, snapshot, "the official reader's snapshot");
    }
    // Spark reads the same table, with what each read must return.
    if let Some(dir) = spark_handoff("long_lived") {
        copy_table_to(&t, &dir.join("table")).await;
        let expected = serde_json::json!({
            "snapshot": fares_json(&snapshot),
            "as_of": travel.to_string(),
            "as_of_rows": fares_json(&model(0, oldest as u64 + 1)),
            "cleaned_as_of": early.to_string(),
            "incremental_begin": begin.completed.to_string(),
            "incremental_end": instants.last().unwrap().completed.to_string(),
            "incremental_rows": fares_json(&window),
        });
        std::fs::write(dir.join("expected.json"), expected.to_string()).unwrap();
    }
}
