//! Backpressure: writers outrunning a slowed compactor wait at the table's
//! bound on uncompacted logs per file group; no group ever holds more, no
//! commit is lost, and a writer that waited its timeout gets an
//! unavailable error naming the file group and leaves nothing visible.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tributary::{ErrorKind, LogSpread, Query, ReadOptions, Table};
use tributary_compaction::CompactorSettings;
use tributary_timeline::InstantTime;
use tributary_writer::WriteSettings;

use crate::support::{Place, fares_options, fares_rows, hybrid, oslo_batch};

/// The bound of the tests' tables.
const BOUND: usize = 4;

/// The uncompacted logs per file group a reader of `t` sees now.
async fn spread(t: &Table) -> LogSpread {
    let (timeline, view) = t.file_system_view().await.unwrap();
    let pending: BTreeSet<InstantTime> = timeline.pending_compactions().map(|i| i.requested.clone()).collect();
    LogSpread::of(&view, &pending)
}

async fn bounded_table(place: &Place) -> Table {
    let mut o = fares_options();
    o.buckets = 1;
    o.max_logs_per_file_group = Some(BOUND);
    place.table("t").builder().with_settings(hybrid()).create(o).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_wait_at_the_bound_for_a_slow_compactor() {
    let Some(place) = Place::new() else { return };
    let t = bounded_table(&place).await;
    let done = Arc::new(AtomicBool::new(false));
    // A slow compactor: one round every 300 ms.
    let compactor = {
        let (t, done) = (t.clone(), done.clone());
        tokio::spawn(async move {
            let c = t.compactor(CompactorSettings::default()).await.unwrap();
            while !done.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(300)).await;
                c.run_once().await.unwrap();
            }
        })
    };
    // A watcher: the logs a reader merges, as often as it can look.
    let watcher = {
        let (t, done) = (t.clone(), done.clone());
        tokio::spawn(async move {
            let mut most = 0;
            while !done.load(Ordering::Relaxed) {
                most = most.max(spread(&t).await.max);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            most
        })
    };
    // Three writers, 8 one-row commits each, into the one file group.
    let mut writers = Vec::new();
    for w in 0..3i64 {
        let t = t.clone();
        writers.push(tokio::spawn(async move {
            let settings = WriteSettings { writer_id: format!("w{w}"), ..Default::default() };
            let client = t.write_client(settings).await.unwrap();
            let mut wrote = Vec::new();
            for n in 0..8i64 {
                let key = format!("w{w}-{n}");
                let mut c = client.start_commit().await.unwrap();
                c.write_batch(&oslo_batch(&[(&key, n, n as f64)])).await.unwrap();
                c.commit().await.unwrap();
                wrote.push((key, n, n as f64));
            }
            wrote
        }));
    }
    let mut want = BTreeMap::new();
    for w in writers {
        for (k, n, f) in w.await.unwrap() {
            want.insert(k, (n, f));
        }
    }
    done.store(true, Ordering::Relaxed);
    let most = watcher.await.unwrap();
    compactor.await.unwrap();
    assert!(most <= BOUND, "a file group held {most} uncompacted logs, above the bound {BOUND}");
    assert_eq!(most, BOUND, "24 commits into one group with a compactor every 300 ms reach the bound");
    assert!(spread(&t).await.max <= BOUND);
    let read = t.read(&ReadOptions { query: Query::Snapshot, ..Default::default() }).await.unwrap();
    let got: BTreeMap<String, (i64, f64)> = fares_rows(&read).into_iter().map(|(k, n, f)| (k, (n, f))).collect();
    assert_eq!(got, want, "every commit is in the table");
}

#[tokio::test]
async fn a_writer_gives_up_after_its_timeout_naming_the_file_group() {
    let Some(place) = Place::new() else { return };
    let t = bounded_table(&place).await;
    let settings = WriteSettings { backpressure_timeout: Duration::from_millis(300), ..Default::default() };
    let client = t.write_client(settings).await.unwrap();
    for n in 0..BOUND as i64 {
        let mut c = client.start_commit().await.unwrap();
        c.write_batch(&oslo_batch(&[(&format!("k{n}"), n, 1.0)])).await.unwrap();
        c.commit().await.unwrap();
    }
    // No compactor runs: the next commit waits its timeout and gives up.
    let mut c = client.start_commit().await.unwrap();
    c.write_batch(&oslo_batch(&[("late", 9, 9.0)])).await.unwrap();
    let e = c.commit().await.unwrap_err();
    let e = tributary::Error::from(e);
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    let text = e.to_string();
    let group = spread(&t).await;
    assert_eq!(group.max, BOUND);
    assert!(text.contains("city=oslo/") && text.contains(&format!("bound of {BOUND}")), "{text}");
    // Nothing of it is visible; every earlier commit is.
    let read = t.read(&ReadOptions { query: Query::Snapshot, ..Default::default() }).await.unwrap();
    let keys: Vec<String> = fares_rows(&read).into_iter().map(|r| r.0).collect();
    assert_eq!(keys, ["k0", "k1", "k2", "k3"]);
    // Once compaction catches up, the same client commits again.
    t.compactor(CompactorSettings::default()).await.unwrap().run_once().await.unwrap();
    let mut c = client.start_commit().await.unwrap();
    c.write_batch(&oslo_batch(&[("late", 9, 9.0)])).await.unwrap();
    c.commit().await.unwrap();
    let read = t.read(&ReadOptions { query: Query::Snapshot, ..Default::default() }).await.unwrap();
    assert_eq!(fares_rows(&read).len(), BOUND + 1);
}
