//! `tributary read` on real Hudi-written tables, against the official reader.

use std::path::Path;

use serde_json::Value;

use crate::support::*;

/// Every row, meta columns included (both readers expose them), sorted, as
/// JSON text lines.
fn sorted_rows(rows: Vec<Value>) -> Vec<String> {
    let mut out: Vec<String> = rows
        .into_iter()
        .map(|mut r| {
            if let Some(o) = r.as_object_mut() {
                o.retain(|_, v| !v.is_null());
            }
            r.to_string()
        })
        .collect();
    out.sort();
    out
}

/// `rows` without `_hoodie_file_name`, which a compaction changes (it
/// moves rows into new base files) while every other column stays.
fn moved(rows: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = rows
        .iter()
        .map(|r| {
            let mut v: Value = serde_json::from_str(r).unwrap();
            assert!(v.as_object_mut().unwrap().remove("_hoodie_file_name").is_some(), "{r}");
            v.to_string()
        })
        .collect();
    out.sort();
    out
}

fn ours(table: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["read", table.to_str().unwrap(), "--format", "jsonl", "--meta"];
    args.extend_from_slice(extra);
    let out = tributary_ok(&args);
    sorted_rows(out.lines().map(|l| serde_json::from_str(l).unwrap()).collect())
}

/// The official reader; `opts` is Python building `HudiReadOptions` as `o`.
fn official(table: &Path, opts: &str) -> Vec<String> {
    sorted_rows(official_rows(table, opts))
}

/// Every table of both corpus folders (Copy-on-Write and Merge-on-Read,
/// versions 6, 8 and 9, replaced file groups, Parquet log blocks) reads as
/// the official reader reads it: every row, every column.
#[test]
fn snapshots_of_corpus_tables_match_the_official_reader() {
    let Some(zips) = every_table() else { return };
    assert!(zips.len() >= 28, "{zips:?}");
    let mut failures = Vec::new();
    for zip in zips {
        let tmp = tempfile::tempdir().unwrap();
        let base = unzip_table(&zip, tmp.path());
        let mut got = ours(&base, &[]);
        let want = official(&base, "");
        // A table without meta fields (`hoodie.populate.meta.fields=false`):
        // the official reader returns no meta column, `tributary read
        // --meta` the file each row was read from.
        if want.iter().all(|r| !r.contains("\"_hoodie_file_name\"")) {
            got = sorted_rows(
                got.iter()
                    .map(|r| {
                        let mut v: Value = serde_json::from_str(r).unwrap();
                        v.as_object_mut().unwrap().shift_remove("_hoodie_file_name");
                        v
                    })
                    .collect(),
            );
        }
        // Only the empty tables hold no row.
        assert_eq!(got.is_empty(), zip.to_string_lossy().contains("_empty"), "{}", zip.display());
        if got != want {
            failures.push(format!(
                "{}: ours {} rows, official {}\n  ours {got:?}\n  want {want:?}",
                zip.display(),
                got.len(),
                want.len()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn time_travel_and_incremental_match_the_official_reader() {
    let Some(zips) = mor_tables() else { return };
    let travelled: Vec<_> = zips.iter().filter(|z| !z.to_string_lossy().contains("_empty")).collect();
    assert!(travelled.iter().any(|z| z.to_string_lossy().contains("v9_")), "{zips:?}");
    for zip in travelled {
        let tmp = tempfile::tempdir().unwrap();
        let base = unzip_table(zip, tmp.path());
        let done = completed_commits(&base);
        if done.len() < 2 {
            continue;
        }
        for (t, _) in &done {
            let got = ours(&base, &["--as-of", t]);
            let want = official(&base, &format!("o = o.with_as_of_timestamp('{t}')"));
            assert_eq!(got, want, "{} as of {t}", zip.display());
        }
        // Every window between consecutive completion times.
        let mut completions: Vec<&String> = done.iter().map(|(_, c)| c).collect();
        completions.sort();
        for w in completions.windows(2) {
            let (b, e) = (w[0], w[1]);
            let got = ours(&base, &["--query", "incremental", "--begin", b, "--end", e]);
            let want = official(
                &base,
                &format!(
                    "o = o.with_query_type(HudiQueryType.Incremental).with_start_timestamp('{b}').with_end_timestamp('{e}')"
                ),
            );
            assert_eq!(got, want, "{} incremental ({b}, {e}]", zip.display());
        }
    }
}

#[test]
fn documented_corpus_results() {
    let Some(corpus) = corpus_dir() else { return };
    let zip = corpus.join("quickstart_trips_table/mor/avro/v8_trips_8i1u.zip");
    let tmp = tempfile::tempdir().unwrap();
    let base = unzip_table(&zip, tmp.path());
    let rows = ours(&base, &["--query", "incremental", "--begin", "20250713011913490", "--end", "20250713011914662"]);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(rows[0].contains("rider-D") && rows[0].contains("25.0"), "{rows:?}");
    // Read-optimized reads base files only: the update in the log is not applied.
    let ro = ours(&base, &["--query", "read-optimized"]);
    assert_eq!(ro.len(), 8);
    assert!(ro.iter().any(|r| r.contains("rider-D") && r.contains("33.9")), "{ro:?}");

    let zip = corpus.join("quickstart_trips_table/mor/avro/v8_trips_8i3d.zip");
    let tmp = tempfile::tempdir().unwrap();
    let base = unzip_table(&zip, tmp.path());
    let rows = ours(&base, &[]);
    let riders: Vec<&str> = ["rider-E", "rider-F", "rider-G", "rider-I", "rider-J"]
        .into_iter()
        .filter(|r| rows.iter().any(|x| x.contains(r)))
        .collect();
    assert_eq!((rows.len(), riders.len()), (5, 5), "{rows:?}");
}

/// How many file groups `tributary compact` compacts in each v8 MOR corpus
/// table. Each holds its rows in one file group whose log files (Hudi's
/// updates and deletes) lie over its base file, so each compacts that one.
/// Of the v9 tables, the time-based one holds two groups with logs; in the
/// others a compaction and a clustering by Spark left no log to compact.
const COMPACTED_GROUPS: [(&str, usize); 7] = [
    ("v8_trips_8i1u", 1),
    ("v8_trips_8i3d", 1),
    ("v8_trips_8i3u1d", 1),
    ("v9_timebasedkeygen_nonhivestyle", 2),
    ("v9_txns_complex_meta", 0),
    ("v9_txns_complex_nometa", 0),
    ("v9_txns_nonpart_meta", 0),
];

/// The groups [`COMPACTED_GROUPS`] expects of the table in `zip`; a
/// table missing there fails, so a new fixture gets its expectation.
fn expected_groups(zip: &Path) -> usize {
    let stem = zip.file_stem().unwrap().to_string_lossy();
    let found = COMPACTED_GROUPS.iter().find(|(name, _)| *name == stem);
    found.unwrap_or_else(|| panic!("{stem}: add its expected compaction to COMPACTED_GROUPS")).1
}

/// The number of groups in `tributary compact`'s report, `compaction <t>
/// completed <c>: <n> groups (...)`, or 0 for `nothing to compact`; fails
/// on any other output.
fn compacted_groups(out: &str) -> usize {
    if out.trim() == "nothing to compact" {
        return 0;
    }
    let groups = out
        .strip_prefix("compaction ")
        .and_then(|rest| rest.split_once(": "))
        .filter(|(head, _)| head.contains(" completed "))
        .and_then(|(_, tail)| tail.split_once(" groups ("))
        .and_then(|(n, _)| n.parse().ok());
    groups.unwrap_or_else(|| panic!("expected a completed compaction, got: {out}"))
}

/// `tributary compact` on a copy of each v8 and v9 MOR corpus table
/// compacts the groups its fixture holds, and afterwards both readers still
/// return the same rows.
#[test]
fn compacting_corpus_tables_keeps_their_rows() {
    let Some(zips) = mor_tables() else { return };
    let mut spilled = Vec::new();
    let layout2: Vec<_> = zips.iter().filter(|z| !z.to_string_lossy().contains("/v6_")).collect();
    assert!(layout2.len() >= 7, "expected the v8 and v9 MOR tables, found {zips:?}");
    for zip in layout2 {
        let groups = expected_groups(zip);
        let tmp = tempfile::tempdir().unwrap();
        let base = unzip_table(zip, tmp.path());
        let before = moved(ours(&base, &[]));
        let out = tributary_ok(&["compact", base.to_str().unwrap(), "--time-mode", "hybrid-logical"]);
        assert_eq!(compacted_groups(&out), groups, "{}: {out}", zip.display());
        assert_eq!(moved(ours(&base, &[])), before, "{} snapshot after compaction", zip.display());
        // Every column but `_hoodie_file_name`: where a compacted group's
        // old log is still on disk, hudi-rs 0.5.0 returns the log record's
        // file name (the file id) for the row, Tributary the new base file's.
        assert_eq!(moved(official(&base, "")), before, "{} official reader after compaction", zip.display());
        let ro = moved(ours(&base, &["--query", "read-optimized"]));
        assert_eq!(ro, before, "{} base files hold it all", zip.display());
        // Again on a fresh copy with a budget of a few KiB, which sends the
        // groups whose winners outgrow it through spill files, Hudi's own
        // log blocks included (a group of one winning record fits).
        let tmp = tempfile::tempdir().unwrap();
        let base = unzip_table(zip, tmp.path());
        let rt = tokio::runtime::Runtime::new().unwrap();
        let done = rt.block_on(async {
            let time = tributary::TimeSettings {
                mode: Some(tributary_timeline::TimeMode::HybridLogical),
                ..Default::default()
            };
            let table_settings = tributary::TableSettings { time, ..Default::default() };
            let table = tributary::Table::builder_local(&base).with_settings(table_settings).open().await.unwrap();
            let settings = tributary_compaction::CompactorSettings { memory_budget: 4 << 10, ..Default::default() };
            table.compactor(settings).await.unwrap().run_once().await.unwrap()
        });
        assert_eq!(done.len(), usize::from(groups > 0), "{}: one compaction: {done:?}", zip.display());
        assert_eq!(
            done.iter().map(|d| d.groups).sum::<usize>(),
            groups,
            "{}: groups at 4 KiB: {done:?}",
            zip.display()
        );
        spilled.extend(std::iter::repeat_n(zip, done.iter().map(|d| d.spilled_groups).sum()));
        assert_eq!(moved(ours(&base, &[])), before, "{} snapshot after a spilled compaction", zip.display());
        assert_eq!(moved(official(&base, "")), before, "{} official reader after a spilled compaction", zip.display());
    }
    assert!(!spilled.is_empty(), "no v8 table's group was merged through spill files at 4 KiB");
}
