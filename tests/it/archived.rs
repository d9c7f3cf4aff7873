//! Tables a Java writer archived: the oldest completed instants moved into
//! the LSM history (`.hoodie/timeline/history/`, laid out as Spark writes
//! it by `tributary_testkit::history::archive`; the Spark test
//! `tests/spark/test_archived_timeline.py` checks real ones). Every read and
//! the compactor see the table as before the archival.

use tributary::{ArchiveSettings, CreateOptions, Query, ReadOptions, Retained, Table};
use tributary_compaction::CompactorSettings;
use tributary_testkit::history::archive;
use tributary_timeline::{Instant, InstantTime};
use tributary_writer::WriteSettings;

use crate::support::{FARES_SCHEMA, Place, fares_rows, hybrid, oslo_batch};

async fn rows(t: &Table, query: Query, as_of: Option<&InstantTime>) -> Vec<(String, i64, f64)> {
    fares_rows(&t.read(&ReadOptions { query, as_of: as_of.cloned(), ..Default::default() }).await.unwrap())
}

/// The RFC-66 case, archived: a delta commit requested before a compaction
/// and completed after it has its log in the compaction's slice. Once it is
/// archived, only the history's completion time keeps it there (its
/// requested time would put it in the slice the compaction replaced, and
/// the row would be lost to readers and to the next compaction).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archived_instants_keep_their_slices() {
    let Some(place) = Place::new() else { return };
    let mut o = CreateOptions::new(FARES_SCHEMA, "uuid", "ts");
    o.partition_field = Some("city".into());
    o.buckets = 2;
    let t = place.table("t").builder().with_settings(hybrid()).create(o).await.unwrap();
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    let mut c1 = client.start_commit().await.unwrap();
    c1.write_batch(&oslo_batch(&[("a", 1, 1.0), ("b", 1, 1.0)])).await.unwrap();
    let first = c1.instant().clone();
    c1.commit().await.unwrap();
    let mut late = client.start_commit().await.unwrap();
    late.write_batch(&oslo_batch(&[("a", 2, 2.0), ("c", 2, 2.0)])).await.unwrap();
    let compactor = t.compactor(CompactorSettings::default()).await.unwrap();
    let (c, _) = compactor.schedule().await.unwrap().unwrap();
    assert!(late.instant() < &c);
    let late_done = late.commit().await.unwrap();
    assert!(late_done.completed > c, "completed after the compaction instant");
    compactor.execute(&c).await.unwrap();
    let mut c3 = client.start_commit().await.unwrap();
    c3.write_batch(&oslo_batch(&[("d", 3, 3.0)])).await.unwrap();
    c3.commit().await.unwrap();

    let timeline = t.timeline().await.unwrap();
    let completions: Vec<InstantTime> = timeline.completed().filter_map(|i| i.completed.clone()).collect();
    let (begin, end) = (completions[0].clone(), completions[completions.len() - 1].clone());
    let reads = [
        (Query::Snapshot, None),
        (Query::ReadOptimized, None),
        (Query::Snapshot, Some(first.clone())),
        (Query::Snapshot, Some(c.clone())),
        (Query::Incremental { begin: begin.clone(), end: end.clone() }, None),
    ];
    let mut before = Vec::new();
    for (q, as_of) in &reads {
        before.push(rows(&t, q.clone(), as_of.as_ref()).await);
    }
    let want = vec![
        ("a".to_string(), 2, 2.0),
        ("b".to_string(), 1, 1.0),
        ("c".to_string(), 2, 2.0),
        ("d".to_string(), 3, 3.0),
    ];
    assert_eq!(before[0], want);

    // Java archives the first commit, the late one and the compaction.
    let to_archive: Vec<Instant> = timeline.completed().filter(|i| i.requested <= c).cloned().collect();
    assert_eq!(to_archive.len(), 3);
    archive(t.location(), t.config(), &to_archive).await.unwrap();
    let after = t.timeline().await.unwrap();
    let times = |tl: &tributary_timeline::Timeline| -> Vec<(InstantTime, Option<InstantTime>)> {
        tl.instants().iter().map(|i| (i.requested.clone(), i.completed.clone())).collect()
    };
    assert_eq!(times(&after), times(&timeline), "the same instants, with the same completion times");
    // The history records a compaction by its completed action.
    assert_eq!(after.get(&c).unwrap().action, tributary_timeline::Action::Commit);
    assert!(to_archive.iter().all(|i| after.is_archived(&i.requested)));

    for ((q, as_of), want) in reads.iter().zip(&before) {
        assert_eq!(&rows(&t, q.clone(), as_of.as_ref()).await, want, "{q:?} as of {as_of:?} after the archival");
    }

    // The next compaction folds the archived late commit's log, which sits
    // on the archived compaction's base file.
    let (_, plan) = compactor.schedule().await.unwrap().unwrap();
    let planned: Vec<String> = plan.operations.iter().flat_map(|o| o.delta_file_paths.clone()).collect();
    assert!(planned.iter().any(|p| p.contains(late_done.instant.as_str())), "{planned:?}");
    compactor.run_once().await.unwrap();
    assert_eq!(rows(&t, Query::Snapshot, None).await, want);
    assert_eq!(rows(&t, Query::ReadOptimized, None).await, want);

    // The cleaner counts archived commits among those it retains and
    // deletes the slice before the archived compaction's (the first,
    // archived commit's logs); reads stay the same.
    let cleaned = t.clean(1).await.unwrap().expect("the replaced slices are cleaned");
    assert!(!cleaned.deleted_files.is_empty());
    assert!(cleaned.deleted_files.iter().all(|f| f.contains(first.as_str())), "{cleaned:?}");
    assert_eq!(rows(&t, Query::Snapshot, None).await, want);
    assert_eq!(rows(&t, Query::ReadOptimized, None).await, want);
}

/// Tributary's own archiver on a table that compaction keeps up with: 40
/// commits, a compaction every 8, and a write that straddles the last
/// compaction (requested before it, completed after). The oldest instants
/// go into the history; the straddling write stays active (the official
/// reader would misplace its log once archived); every read, the official
/// reader's included, sees the table as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tributary_archives_and_every_reader_reads_the_same() {
    let Some(place) = Place::new() else { return };
    let mut o = CreateOptions::new(FARES_SCHEMA, "uuid", "ts");
    o.partition_field = Some("city".into());
    o.buckets = 2;
    let table = place.table("t");
    let t = table.builder().with_settings(hybrid()).create(o).await.unwrap();
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    let compactor = t.compactor(CompactorSettings::default()).await.unwrap();
    let mut instants = Vec::new();
    for n in 0..41i64 {
        let mut c = client.start_commit().await.unwrap();
        c.write_batch(&oslo_batch(&[(&format!("k{}", n % 7), n, n as f64)])).await.unwrap();
        instants.push(c.commit().await.unwrap().instant);
        if n % 8 == 7 && n < 40 {
            compactor.run_once().await.unwrap();
        }
    }
    let mut late = client.start_commit().await.unwrap();
    late.write_batch(&oslo_batch(&[("k1", 100, 100.0), ("k9", 100, 100.0)])).await.unwrap();
    let (c, _) = compactor.schedule().await.unwrap().unwrap();
    let late = late.commit().await.unwrap();
    assert!(late.instant < c && late.completed > c, "the write straddles the compaction");
    compactor.execute(&c).await.unwrap();
    for n in 41..44i64 {
        let mut w = client.start_commit().await.unwrap();
        w.write_batch(&oslo_batch(&[(&format!("k{}", n % 7), n, n as f64)])).await.unwrap();
        w.commit().await.unwrap();
    }

    let early = instants[3].clone();
    let reads = [
        (Query::Snapshot, None),
        (Query::ReadOptimized, None),
        (Query::Snapshot, Some(early.clone())),
        (
            Query::Incremental { begin: instants[2].clone(), end: InstantTime::parse("99999999999999999").unwrap() },
            None,
        ),
    ];
    let mut before = Vec::new();
    for (q, as_of) in &reads {
        before.push(rows(&t, q.clone(), as_of.as_ref()).await);
    }
    let timeline = t.timeline().await.unwrap();

    let summary = t.archive(&ArchiveSettings::default()).await.unwrap();
    assert!(!summary.archived.is_empty(), "{summary:?}");
    let after = t.timeline().await.unwrap();
    let times = |tl: &tributary_timeline::Timeline| -> Vec<(InstantTime, Option<InstantTime>)> {
        tl.instants().iter().map(|i| (i.requested.clone(), i.completed.clone())).collect()
    };
    assert_eq!(times(&after), times(&timeline), "the same instants, with the same completion times");
    assert!(after.is_archived(&early) && !after.is_archived(&late.instant), "{summary:?}");
    let active = after.completed().filter(|i| !after.is_archived(&i.requested) && i.action.writes_data()).count();
    assert!((20..=30).contains(&active), "{active} commits left active");
    for ((q, as_of), want) in reads.iter().zip(&before) {
        assert_eq!(&rows(&t, q.clone(), as_of.as_ref()).await, want, "{q:?} as of {as_of:?} after archiving");
    }
    if crate::support::store() == crate::support::Store::Local && crate::support::have_official_reader() {
        crate::support::assert_same_rows(table.uri(), "after archiving");
    }
    // Archiving again finds nothing more to move.
    assert!(t.archive(&ArchiveSettings::default()).await.unwrap().archived.is_empty());

    // With tight bounds, archiving stops at the straddling write.
    let tight =
        ArchiveSettings { keep_min_commits: 2, keep_max_commits: 3, cleaner_commits_retained: 0, ..Default::default() };
    let summary = t.archive(&tight).await.unwrap();
    assert_eq!(summary.retained, Some(Retained::LatestSliceLog(late.instant.clone())), "{summary:?}");
    let after = t.timeline().await.unwrap();
    assert!(after.completed().filter(|i| i.requested < late.instant).all(|i| after.is_archived(&i.requested)));
    for ((q, as_of), want) in reads.iter().zip(&before) {
        assert_eq!(&rows(&t, q.clone(), as_of.as_ref()).await, want, "{q:?} as of {as_of:?} after archiving");
    }
    if crate::support::store() == crate::support::Store::Local && crate::support::have_official_reader() {
        crate::support::assert_same_rows(table.uri(), "after archiving up to the straddling write");
    }
}
