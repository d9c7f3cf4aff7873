//! Compaction beside writers: completion-time slicing, crash recovery,
//! bounded memory; on the store `TRIBUTARY_TEST_STORE` names (see
//! [`Place`]).

use std::sync::Arc;

use arrow::array::{Array, AsArray};
use tributary::{CreateOptions, Query, ReadOptions, Table, TableSettings};
use tributary_compaction::CompactorSettings;
use tributary_timeline::{Action, State};
use tributary_writer::WriteSettings;

use crate::support::{
    FARES_SCHEMA, FailPuts, Place, batch_with_deletes, fares_options, fares_rows, hybrid, official_rows_of, oslo_batch,
};
use tributary_timeline::ManualClock;

/// A fares table `t` in `place`, two buckets per city.
async fn table(place: &Place) -> Table {
    let o = fares_options();
    place.table("t").builder().with_settings(hybrid()).create(o).await.unwrap()
}

/// [`table`] with one commit of keys `a` and `b`, and its write client.
async fn table_with_one_commit(place: &Place) -> (Table, tributary_writer::WriteClient) {
    let t = table(place).await;
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    let mut c1 = client.start_commit().await.unwrap();
    c1.write_batch(&oslo_batch(&[("a", 1, 1.0), ("b", 1, 1.0)])).await.unwrap();
    c1.commit().await.unwrap();
    (t, client)
}

async fn rows(t: &Table, query: Query) -> Vec<(String, i64, f64)> {
    fares_rows(&t.read(&ReadOptions { query, ..Default::default() }).await.unwrap())
}

/// RFC-66: a delta commit requested before the compaction instant but
/// completed after it lands in the new slice, and nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_completion_falls_into_the_new_slice() {
    let Some(place) = Place::new() else { return };
    let (t, client) = table_with_one_commit(&place).await;

    // A writer requests its instant before the compaction instant ...
    let mut late = client.start_commit().await.unwrap();
    late.write_batch(&oslo_batch(&[("a", 2, 2.0), ("c", 2, 2.0)])).await.unwrap();

    let compactor = t.compactor(CompactorSettings::default()).await.unwrap();
    let (c, plan) = compactor.schedule().await.unwrap().unwrap();
    assert!(late.instant() < &c, "requested before the compaction instant");
    let planned: Vec<String> = plan.operations.iter().flat_map(|o| o.delta_file_paths.clone()).collect();
    assert!(planned.iter().all(|p| !p.contains(late.instant().as_str())), "pending logs are not planned");

    // ... and completes after it, while the plan is pending.
    let late_instant = late.instant().clone();
    let summary = late.commit().await.unwrap();
    assert!(summary.completed > c);
    let want = vec![("a".to_string(), 2, 2.0), ("b".to_string(), 1, 1.0), ("c".to_string(), 2, 2.0)];
    assert_eq!(rows(&t, Query::Snapshot).await, want, "readers merge the pending slice with the previous one");

    compactor.execute(&c).await.unwrap();
    let (timeline, view) = t.file_system_view().await.unwrap();
    assert!(timeline.get(&c).unwrap().is_completed());
    for slice in view.latest_slices() {
        assert_eq!(slice.base_instant, c, "new slices start at the compaction instant");
        for log in &slice.logs {
            assert_eq!(log.name.instant, late_instant, "only the late log sits on the new base");
        }
    }
    assert_eq!(rows(&t, Query::Snapshot).await, want, "no record lost after the compaction commits");
    // Base files alone hold the compacted part only.
    let ro = rows(&t, Query::ReadOptimized).await;
    let first = vec![("a".to_string(), 1, 1.0), ("b".to_string(), 1, 1.0)];
    assert_eq!(ro, first);

    // Time travel to the late commit's instant holds the late commit: it was
    // requested by then. Hudi's leaves it out, as the Spark suite checks: it
    // slices the late log into the compaction's slice, which begins after
    // that instant (docs/interop.md, "Time travel").
    let mut travel =
        fares_rows(&t.read(&ReadOptions { as_of: Some(late_instant.clone()), ..Default::default() }).await.unwrap());
    travel.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(travel, want, "as of the late commit");
    if crate::support::store() == crate::support::Store::Local
        && let Some(dir) = crate::support::spark_handoff("straddle")
    {
        crate::support::copy_table_to(&t, &dir.join("table")).await;
        let expected = serde_json::json!({
            "snapshot": crate::support::fares_json(&want),
            "as_of": late_instant.to_string(),
            "as_of_rows": crate::support::fares_json(&travel),
            "before_the_late_commit": crate::support::fares_json(&first),
        });
        std::fs::write(dir.join("expected.json"), expected.to_string()).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_before_commit_is_invisible_and_the_rerun_finishes() {
    let Some(place) = Place::new() else { return };
    let t = table(&place).await;
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    for i in 0..3 {
        let mut c = client.start_commit().await.unwrap();
        c.write_batch(&oslo_batch(&[("a", i, i as f64), ("b", 10 - i, i as f64), ("c", i, 0.5)])).await.unwrap();
        c.commit().await.unwrap();
    }
    let before = rows(&t, Query::Snapshot).await;

    let broken =
        place.table("t").builder_through(|s| Arc::new(FailPuts::before_commit(s)), hybrid()).open().await.unwrap();
    let err = broken.compactor(CompactorSettings::default()).await.unwrap().run_once().await;
    assert!(err.is_err(), "the crash stops the compaction");
    let (timeline, _) = t.file_system_view().await.unwrap();
    let pending: Vec<_> = timeline.pending_compactions().collect();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].state, State::Inflight);
    let parquet = place.table("t").file_names_under("city=oslo", |n| n.ends_with(".parquet")).len();
    assert!(parquet > 0, "base files were written before the crash");
    assert_eq!(rows(&t, Query::Snapshot).await, before, "readers never see the partial result");
    assert!(rows(&t, Query::ReadOptimized).await.is_empty());

    // The next run finishes the pending plan; no duplicate files stay.
    let done = t.compactor(CompactorSettings::default()).await.unwrap().run_once().await.unwrap();
    assert!(done.iter().any(|s| s.instant == pending[0].requested));
    assert_eq!(rows(&t, Query::Snapshot).await, before);
    assert_eq!(rows(&t, Query::ReadOptimized).await, before);
    let timeline = t.timeline().await.unwrap();
    assert!(timeline.instants().filter(|i| i.action == Action::Compaction).all(|i| i.is_completed()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_larger_than_the_budget_merge_through_spill_files() {
    let Some(place) = Place::new() else { return };
    let t = table(&place).await;
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    let keys: Vec<String> = (0..3000).map(|k| format!("k{k:05}")).collect();
    for round in 0..4i64 {
        let data: Vec<(&str, i64, f64)> = keys.iter().map(|k| (k.as_str(), round, round as f64)).collect();
        let mut c = client.start_commit().await.unwrap();
        c.write_batch(&oslo_batch(&data)).await.unwrap();
        c.commit().await.unwrap();
    }
    // A first compaction within the budget leaves base files to merge with.
    t.compactor(CompactorSettings::default()).await.unwrap().run_once().await.unwrap();
    // Then newer updates, deletes, and stale updates that must lose.
    let number = |k: &str| k[1..].parse::<u32>().unwrap();
    let newer: Vec<(&str, i64, f64)> =
        keys.iter().filter(|k| number(k) % 2 == 0).map(|k| (k.as_str(), 10, 10.0)).collect();
    let stale: Vec<(&str, i64, f64)> =
        keys.iter().filter(|k| number(k) % 5 == 0).map(|k| (k.as_str(), 1, -1.0)).collect();
    for data in [newer, stale] {
        let mut c = client.start_commit().await.unwrap();
        c.write_batch(&batch_with_deletes(&data, &|k| number(k) % 7 == 0)).await.unwrap();
        c.commit().await.unwrap();
    }
    let before = rows(&t, Query::Snapshot).await;
    let expected: Vec<(String, i64, f64)> = keys
        .iter()
        .filter(|k| number(k) % 14 != 0)
        .map(|k| if number(k) % 2 == 0 { (k.clone(), 10, 10.0) } else { (k.clone(), 3, 3.0) })
        .collect();
    assert_eq!(before, expected);
    // Each budget, on a copy of the table, gives the same rows by whichever
    // path it takes; between them they take every path: key first in memory,
    // key first with the winners spilled, and the general merge spilled (its
    // key index alone over the budget).
    let mut paths = std::collections::BTreeSet::new();
    for budget_kib in [16, 64, 256, 512, 800, 832, 1024, 4096, 16384] {
        let copy = place.table(&format!("copy-{budget_kib}"));
        place.table("t").copy_to(&copy);
        let t = copy.builder().with_settings(hybrid()).open().await.unwrap();
        let settings = CompactorSettings { memory_budget: budget_kib << 10, ..Default::default() };
        let done = t.compactor(settings).await.unwrap().run_once().await.unwrap();
        let s = &done[0];
        let all = |n: usize| {
            if n == s.groups {
                Some(true)
            } else if n == 0 {
                Some(false)
            } else {
                None
            }
        };
        paths.insert((all(s.key_first_groups), all(s.spilled_groups)));
        assert_eq!(rows(&t, Query::ReadOptimized).await, before, "{budget_kib} KiB");
    }
    for path in [(Some(true), Some(false)), (Some(true), Some(true)), (Some(false), Some(true))] {
        assert!(paths.contains(&path), "(key first, spilled) = {path:?} among {paths:?}");
    }
    // A budget far below the group's size forces the merge through spill
    // files. They go to the table's `.hoodie/.temp/` for a local folder;
    // for a table elsewhere to its subfolder of `TableSettings::spill_dir`
    // (by default of the system's temporary folder; here of one of this
    // test's own, so that the subfolder is the only one there).
    let settings = CompactorSettings { memory_budget: 64 << 10, ..Default::default() };
    let (t, spill_dir) = match t.location().local_folder() {
        Some(dir) => (t.clone(), dir.join(".hoodie/.temp")),
        None => {
            let spill_dir = place.scratch().join("spill");
            let settings = TableSettings { spill_dir: Some(spill_dir.clone()), ..hybrid() };
            (place.table("t").builder().with_settings(settings).open().await.unwrap(), spill_dir)
        }
    };
    let compactor = t.compactor(settings).await.unwrap();
    let spill_root = match t.location().local_folder() {
        Some(_) => spill_dir,
        None => {
            let subfolders: Vec<_> = std::fs::read_dir(&spill_dir).unwrap().flatten().map(|e| e.path()).collect();
            assert_eq!(subfolders.len(), 1, "one subfolder per table: {subfolders:?}");
            subfolders[0].clone()
        }
    };
    // What a crashed attempt of this plan would have spilled is cleared first.
    let (c, _) = compactor.schedule().await.unwrap().unwrap();
    let leftover = spill_root.join(format!("{c}.00000000-0000-0000-0000-000000000000-0.spill"));
    std::fs::create_dir_all(&leftover).unwrap();
    std::fs::write(leftover.join("part-0000-000001.spill"), b"stale").unwrap();
    let done = compactor.run_once().await.unwrap();
    assert_eq!(done.len(), 1);
    assert!(!leftover.exists(), "stale spill files are removed");
    assert_eq!(rows(&t, Query::ReadOptimized).await, before);
    assert_eq!(rows(&t, Query::Snapshot).await, before);
    // Every instant completed: no marker folder and no spill folder is left.
    let markers = place.table("t").list(".hoodie/.temp");
    assert!(markers.is_empty(), "markers are removed: {markers:?}");
    let temp: Vec<String> = std::fs::read_dir(&spill_root)
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    assert!(temp.is_empty(), "markers and spill files are removed: {temp:?}");
    // Base files are sorted by record key.
    let table = place.table("t");
    for path in table.file_paths(|n| n.ends_with(".parquet")) {
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(table.read(&path))
            .unwrap()
            .build()
            .unwrap();
        let mut keys = Vec::new();
        for b in reader {
            let b = b.unwrap();
            let k = b.column_by_name("_hoodie_record_key").unwrap().as_string::<i32>().clone();
            keys.extend((0..k.len()).map(|i| k.value(i).to_string()));
        }
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{path}: sorted and unique");
    }
}

/// A base file in several row groups (the compactor closes one at
/// `row_group_rows` rows, or at its budget share's
/// [`row_group_bytes`](tributary_merge::Share::row_group_bytes)) reads the
/// same through Tributary and the official reader as the logs did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_files_of_several_row_groups_read_alike_by_both_readers() {
    let Some(place) = Place::new() else { return };
    let t = table(&place).await;
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    let keys: Vec<String> = (0..5000).map(|k| format!("k{k:05}")).collect();
    for round in 0..2i64 {
        let data: Vec<(&str, i64, f64)> =
            keys.iter().skip(round as usize * 1000).map(|k| (k.as_str(), round, round as f64)).collect();
        let mut c = client.start_commit().await.unwrap();
        c.write_batch(&oslo_batch(&data)).await.unwrap();
        c.commit().await.unwrap();
    }
    let before = rows(&t, Query::Snapshot).await;
    assert_eq!(before.len(), keys.len());
    let settings = CompactorSettings { row_group_rows: 1024, ..Default::default() };
    t.compactor(settings).await.unwrap().run_once().await.unwrap();
    let table = place.table("t");
    let mut groups = Vec::new();
    for path in table.file_paths(|n| n.ends_with(".parquet")) {
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(table.read(&path)).unwrap();
        groups.push(reader.metadata().num_row_groups());
    }
    assert_eq!(groups.len(), 2, "one base file per bucket");
    assert!(groups.iter().all(|&n| n > 1), "row groups per base file: {groups:?}");
    assert_eq!(rows(&t, Query::ReadOptimized).await, before);
    let official: Vec<(String, i64)> = {
        let mut r: Vec<(String, i64)> = official_rows_of(&t, true)
            .iter()
            .map(|r| (r["uuid"].as_str().unwrap().to_string(), r["ts"].as_i64().unwrap()))
            .collect();
        r.sort();
        r
    };
    assert_eq!(official, before.iter().map(|(k, ts, _)| (k.clone(), *ts)).collect::<Vec<_>>());
}

/// Two tables outside a local folder spill to the same local folder by
/// default. Their compactions may share an instant (here two tables whose
/// clocks read alike) and file group ids (bucket file ids are the same in
/// every table): each still merges its own rows, and neither clears the
/// other's spill files. On `memory://` tables in every run: the shared
/// folder is local whatever the table's store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_compacting_at_one_instant_keep_their_spill_files_apart() {
    let keys: Vec<String> = (0..3000).map(|k| format!("k{k:05}")).collect();
    let mut tables = Vec::new();
    for (name, fare) in [("a", 1.0), ("b", 2.0)] {
        let mut o = CreateOptions::new(FARES_SCHEMA, "uuid", "ts");
        o.buckets = 1;
        let t = Table::builder_uri(format!("memory:///compaction-spill/{name}"))
            .with_settings(hybrid())
            .with_clock(Arc::new(ManualClock::new(1_766_264_468_078)))
            .create(o)
            .await
            .unwrap();
        let client = t.write_client(WriteSettings::default()).await.unwrap();
        for round in 0..3i64 {
            let data: Vec<(&str, i64, f64)> = keys.iter().map(|k| (k.as_str(), round, fare)).collect();
            let mut c = client.start_commit().await.unwrap();
            c.write_batch(&oslo_batch(&data)).await.unwrap();
            c.commit().await.unwrap();
        }
        let want = rows(&t, Query::Snapshot).await;
        tables.push((t, want));
    }
    // A budget far below a group's size: both merges go through spill files.
    let settings = CompactorSettings { memory_budget: 16 << 10, ..Default::default() };
    let (a, b) = (&tables[0].0, &tables[1].0);
    let (ca, cb) = (a.compactor(settings.clone()).await.unwrap(), b.compactor(settings).await.unwrap());
    let (ia, _) = ca.schedule().await.unwrap().unwrap();
    let (ib, _) = cb.schedule().await.unwrap().unwrap();
    assert_eq!(ia, ib, "the two compactions share an instant");
    let (da, db) = tokio::join!(ca.execute(&ia), cb.execute(&ib));
    for (done, (t, want)) in [da, db].into_iter().zip(&tables) {
        let done = done.unwrap_or_else(|e| panic!("{}: {e}", t.location()));
        assert_eq!(done.spilled_groups, done.groups, "{}: merged through spill files", t.location());
        assert_eq!(&rows(t, Query::ReadOptimized).await, want, "{}: its own rows", t.location());
    }
}

/// Two compactors that both took up one plan (the first lost its execution
/// lock while frozen, the second finished the plan): the second to finish
/// is refused with a conflict, and the compaction completes once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_another_compactor_completed_is_not_completed_again() {
    let Some(place) = Place::new() else { return };
    let (t, _) = table_with_one_commit(&place).await;
    let (first, second) = (
        t.compactor(CompactorSettings::default()).await.unwrap(),
        t.compactor(CompactorSettings::default()).await.unwrap(),
    );
    let (c, _) = first.schedule().await.unwrap().unwrap();
    second.execute(&c).await.unwrap();
    let e = first.execute(&c).await.unwrap_err();
    assert_eq!(e.kind(), tributary_format::ErrorKind::Conflict, "{e}");
    let (timeline, _) = t.file_system_view().await.unwrap();
    assert!(timeline.get(&c).unwrap().is_completed());
    assert!(timeline.warnings().is_empty(), "{:?}", timeline.warnings());
    // A plan no compactor wrote is still invalid input.
    let e = first.execute(&tributary_timeline::InstantTime::parse("20200101000000000").unwrap()).await.unwrap_err();
    assert_eq!(e.kind(), tributary_format::ErrorKind::InvalidInput, "{e}");
}

/// After a Java clustering, a partition holds new file groups with random
/// ids, which are no buckets even when the id begins with eight digits, as
/// a bucket's does: a write to a bucket clustering left alone goes on, and
/// one to a bucket whose group clustering replaced is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clustered_group_whose_id_looks_like_a_bucket_is_no_bucket() {
    use object_store::ObjectStoreExt;
    let Some(place) = Place::new() else { return };
    let t = table(&place).await;
    let index = tributary_timeline::BucketIndex::new(t.config().bucket.unwrap());
    let key = |bucket: u32| (0..).map(|n| format!("k{n}")).find(|k| index.bucket(k) == bucket).unwrap();
    let (k0, k1) = (key(0), key(1));
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    let mut c = client.start_commit().await.unwrap();
    c.write_batch(&oslo_batch(&[(&k0, 1, 1.0), (&k1, 1, 1.0)])).await.unwrap();
    let done = c.commit().await.unwrap();

    // A clustering of bucket 0's group into a group whose random id begins
    // with eight digits.
    // Its instants from the table's TrueTime, as a Java writer's are: a
    // writer never takes one of them (two actions at one instant would make
    // the instant unreadable).
    let time = t.time_generator();
    let (requested, completed) = (time.new_instant().await.unwrap(), time.new_instant().await.unwrap());
    assert!(requested > done.completed);
    let loc = t.location();
    let timeline = |name: String| loc.join(&format!(".hoodie/timeline/{name}"));
    let put = |path, bytes: Vec<u8>| async move { loc.store.put(&path, bytes.into()).await.unwrap() };
    put(timeline(format!("{requested}.clustering.requested")), Vec::new()).await;
    put(timeline(format!("{requested}.clustering.inflight")), Vec::new()).await;
    let clustered = "12345678-aaaa-4bbb-8ccc-dddddddddddd-0";
    put(loc.join(&format!("city=oslo/{clustered}_0-0-0_{requested}.parquet")), b"clustered rows".to_vec()).await;
    let mut meta = tributary_format::CommitMetadata { operation_type: "CLUSTER".into(), ..Default::default() };
    meta.partition_to_replace_file_ids.insert("city=oslo".into(), vec![tributary_timeline::nbcc_file_id(0)]);
    put(timeline(format!("{requested}_{completed}.replacecommit")), serde_json::to_vec(&meta).unwrap()).await;

    let client = t.write_client(WriteSettings::default()).await.unwrap();
    let mut c = client.start_commit().await.unwrap();
    c.write_batch(&oslo_batch(&[(&k1, 2, 2.0)])).await.unwrap();
    c.commit().await.unwrap();
    let mut c = client.start_commit().await.unwrap();
    c.write_batch(&oslo_batch(&[(&k0, 2, 2.0)])).await.unwrap();
    let err = c.commit().await.unwrap_err().to_string();
    assert!(err.contains("takes no more logs"), "{err}");
}
