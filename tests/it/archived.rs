//! Tables a Java writer archived: the oldest completed instants moved into
//! the LSM history (`.hoodie/timeline/history/`, laid out as Spark writes
//! it by `tributary_testkit::history::archive`; the Spark test
//! `tests/spark/test_archived_timeline.py` checks real ones). Every read and
//! the compactor see the table as before the archival.

use tributary::{ArchiveSettings, Query, ReadOptions, Retained, Table};
use tributary_compaction::CompactorSettings;
use tributary_testkit::history::archive;
use tributary_timeline::{Instant, InstantTime};
use tributary_writer::WriteSettings;

use crate::support::{Place, fares_options, fares_rows, hybrid, oslo_batch};

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
    let o = fares_options();
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
        tl.instants().map(|i| (i.requested.clone(), i.completed.clone())).collect()
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
    let o = fares_options();
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
        tl.instants().map(|i| (i.requested.clone(), i.completed.clone())).collect()
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

/// Copies the folder `from` to `to`, recursively.
fn copy_folder(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_folder(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// An archiving process killed after each of its writes in turn (every
/// later write fails, as a dead process makes none): the table reads as
/// before, by Tributary and (every third crash point) the official reader
/// and Spark (the Spark suite reads the states this test leaves it);
/// the same instants stay completed at the same times; and the next run
/// finishes the archival, each instant once in the history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_any_write_of_archiving_leaves_the_table_readable() {
    use std::sync::Arc;

    use tributary::{LockKind, TableSettings};
    use tributary_timeline::{History, TableLocation, history_dir, local_location};

    use crate::support::{FaultStore, Store, fares_json, have_official_reader, official_rows_of, spark_handoff};

    let Some(place) = Place::on(Store::Local) else { return };
    let official = have_official_reader();
    let settings = TableSettings { lock: LockKind::InProcess, ..hybrid() };
    let tight =
        ArchiveSettings { keep_min_commits: 1, keep_max_commits: 2, cleaner_commits_retained: 0, ..Default::default() };
    let base = place.scratch().join("base");
    let o = fares_options();
    let t = Table::builder(local_location(&base).unwrap()).with_settings(settings.clone()).create(o).await.unwrap();
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    for n in 0..5i64 {
        let mut c = client.start_commit().await.unwrap();
        c.write_batch(&oslo_batch(&[(&format!("k{}", n % 3), n, n as f64)])).await.unwrap();
        c.commit().await.unwrap();
        if n == 2 {
            t.compactor(CompactorSettings::default()).await.unwrap().run_once().await.unwrap();
        }
    }
    let want = rows(&t, Query::Snapshot, None).await;
    let times = |tl: &tributary_timeline::Timeline| -> Vec<(InstantTime, Option<InstantTime>)> {
        tl.instants().map(|i| (i.requested.clone(), i.completed.clone())).collect()
    };
    let instants = times(&t.timeline().await.unwrap());

    // Every third state is also left for Spark to read.
    let handoff = spark_handoff("archive_crashes");
    let mut handed = Vec::new();
    let mut crashes = 0;
    for writes in 0.. {
        let dir = place.scratch().join(format!("crash{writes}"));
        copy_folder(&base, &dir);
        let healthy = local_location(&dir).unwrap();
        let dying = Arc::new(FaultStore::crash_after(healthy.store.clone(), writes));
        let run = async {
            let t = Table::builder(TableLocation::new(dying, healthy.root.clone()))
                .with_settings(settings.clone())
                .open()
                .await?;
            t.archive(&tight).await
        };
        let finished = run.await.is_ok();
        let t = Table::builder(healthy.clone()).with_settings(settings.clone()).open().await.unwrap();
        let what = format!("killed after {writes} writes");
        assert_eq!(rows(&t, Query::Snapshot, None).await, want, "{what}");
        assert_eq!(times(&t.timeline().await.unwrap()), instants, "{what}");
        if official && writes % 3 == 0 {
            let theirs: Vec<(String, i64, f64)> = official_rows_of(&t, false)
                .iter()
                .map(|r| (r["uuid"].as_str().unwrap().into(), r["ts"].as_i64().unwrap(), r["fare"].as_f64().unwrap()))
                .collect();
            let mut theirs = theirs;
            theirs.sort_by(|a, b| a.0.cmp(&b.0));
            assert_eq!(theirs, want, "{what}: the official reader");
        }
        if finished {
            assert!(writes > 5, "archiving takes more than {writes} writes");
            break;
        }
        if let Some(h) = handoff.as_ref().filter(|_| writes % 3 == 0) {
            let name = format!("killed_after_{writes}_writes");
            copy_folder(&dir, &h.join(&name));
            handed.push(name);
        }
        crashes += 1;
        // The next run finishes the job.
        let summary = t.archive(&tight).await.unwrap();
        let tl = t.timeline().await.unwrap();
        assert!(!summary.archived.is_empty() || tl.instants().any(|i| tl.is_archived(&i.requested)), "{what}");
        let history = History::load(t.location(), &history_dir(t.location(), t.config()).unwrap()).await.unwrap();
        let mut rows_in_files = Vec::new();
        for f in history.files() {
            let bytes = t.location().get(&f.path).await.unwrap();
            let reader =
                parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap().build().unwrap();
            for batch in reader {
                let batch = batch.unwrap();
                let col = batch.column_by_name("instantTime").unwrap();
                let col = col.as_any().downcast_ref::<arrow::array::StringArray>().unwrap();
                rows_in_files.extend(col.iter().map(|v| v.unwrap().to_string()));
            }
        }
        let n = rows_in_files.len();
        rows_in_files.sort();
        rows_in_files.dedup();
        assert_eq!(rows_in_files.len(), n, "{what}: each instant once in the history");
        assert_eq!(n, history.instants().count(), "{what}");
        assert_eq!(rows(&t, Query::Snapshot, None).await, want, "{what}, then finished");
    }
    eprintln!("archiving was killed at {crashes} points");
    assert!(crashes > 5, "{crashes} crash points");
    if let Some(h) = handoff {
        let expected = serde_json::json!({ "snapshot": fares_json(&want), "tables": handed });
        std::fs::write(h.join("expected.json"), expected.to_string()).unwrap();
    }
}
