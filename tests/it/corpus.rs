//! Our timeline loader and file-system view on real Hudi-written tables.

use std::collections::{BTreeMap, BTreeSet};

use tributary::Table;
use tributary_timeline::State;

use crate::support::*;

/// Instants and completion times as the file names say, derived here
/// independently of the library's parser.
fn expected_from_names(timeline_dir: &std::path::Path) -> BTreeMap<String, (State, Option<String>)> {
    let mut out: BTreeMap<String, (State, Option<String>)> = BTreeMap::new();
    for e in std::fs::read_dir(timeline_dir).unwrap().flatten() {
        if e.path().is_dir() {
            continue;
        }
        let name = e.file_name().to_string_lossy().into_owned();
        let stem = name.split('.').next().unwrap();
        let (state, requested, completed) = if name.ends_with(".requested") {
            (State::Requested, stem.to_string(), None)
        } else if name.ends_with(".inflight") {
            (State::Inflight, stem.to_string(), None)
        } else {
            let (t, c) = stem.split_once('_').unwrap();
            (State::Completed, t.to_string(), Some(c.to_string()))
        };
        let entry = out.entry(requested).or_insert((state, None));
        if state >= entry.0 {
            entry.0 = state;
        }
        if completed.is_some() {
            entry.1 = completed;
        }
    }
    out
}

/// Every layout-2 table (versions 8 and 9) of both corpus folders: the
/// timeline holds what the file names say, `clustering` and `indexing`
/// instants included.
#[tokio::test]
async fn timeline_loader_reads_every_v8_and_v9_table() {
    let (Some(v8), Some(v9)) = (all_corpus_zips("v8_"), all_corpus_zips("v9_")) else { return };
    assert!(v8.len() >= 5 && v9.len() >= 4, "expected the v8 and v9 corpus tables, found {v8:?} {v9:?}");
    for zip in v8.into_iter().chain(v9) {
        let tmp = tempfile::tempdir().unwrap();
        let base = unzip_table(&zip, tmp.path());
        let table = Table::open_local(&base).await.unwrap_or_else(|e| panic!("{}: {e}", zip.display()));
        let version = if zip.to_string_lossy().contains("/v9_") { 9 } else { 8 };
        assert_eq!(table.config().version, version, "{}", zip.display());
        let timeline = table.timeline().await.unwrap();
        assert!(timeline.warnings().is_empty(), "{}: {:?}", zip.display(), timeline.warnings());
        let got: BTreeMap<String, (State, Option<String>)> = timeline
            .instants()
            .map(|i| (i.requested.to_string(), (i.state, i.completed.as_ref().map(|c| c.to_string()))))
            .collect();
        let dir = base.join(".hoodie/timeline");
        let expected = if dir.is_dir() { expected_from_names(&dir) } else { BTreeMap::new() };
        assert_eq!(got, expected, "{}", zip.display());
        // Requested→completion lookups and the latest completed instant agree too.
        for (t, (_, c)) in &expected {
            let t = tributary_timeline::InstantTime::parse(t).unwrap();
            assert_eq!(timeline.completion_time(&t).map(|c| c.to_string()), c.clone());
        }
        let latest = expected.iter().filter_map(|(t, (_, c))| c.clone().map(|c| (c, t.clone()))).max();
        assert_eq!(
            timeline.latest_completed().map(|i| i.requested.to_string()),
            latest.map(|(_, t)| t),
            "{}",
            zip.display()
        );
    }
}

/// The latest file slices of every Merge-on-Read table of both corpus
/// folders are the official reader's: replaced file groups left out.
#[tokio::test]
async fn file_slices_match_the_official_reader() {
    let Some(zips) = mor_tables() else { return };
    assert!(zips.len() >= 14, "expected the MOR corpus tables, found {zips:?}");
    for zip in zips {
        let tmp = tempfile::tempdir().unwrap();
        let base = unzip_table(&zip, tmp.path());
        let official = python(
            "import sys, json\n\
             from hudi import HudiTableBuilder\n\
             t = HudiTableBuilder.from_base_uri(sys.argv[1]).build()\n\
             print(json.dumps([[s.partition_path, s.file_id, s.base_file_name, sorted(s.log_file_names)]\n\
                               for s in t.get_file_slices()]))",
            &[base.to_str().unwrap()],
        );
        let official: Vec<(String, String, String, Vec<String>)> = serde_json::from_str(official.trim()).unwrap();
        let official: BTreeSet<_> = official.into_iter().collect();

        let table = Table::open_local(&base).await.unwrap();
        let (_, view) = table.file_system_view().await.unwrap();
        let ours: BTreeSet<(String, String, String, Vec<String>)> = view
            .latest_slices()
            .into_iter()
            .map(|s| {
                let mut logs: Vec<String> = s.log_file_names().into_iter().map(String::from).collect();
                logs.sort();
                (s.partition.clone(), s.file_id.clone(), s.base_file_name().unwrap_or("").to_string(), logs)
            })
            .collect();
        assert_eq!(ours.is_empty(), zip.to_string_lossy().contains("_empty"), "{}", zip.display());
        assert_eq!(ours, official, "{}", zip.display());
    }
}

/// Every log file Hudi wrote in the MOR corpus decodes, carries its own
/// instant in INSTANT_TIME, and re-encodes to the same bytes.
#[test]
fn corpus_log_files_round_trip_byte_for_byte() {
    use tributary_format::{BlockType, HeaderKey, LogBlock, decode_avro_content};
    let Some(zips) = all_corpus_zips("v") else { return };
    let (mut seen, mut parquet) = (0, 0);
    for zip in zips.into_iter().filter(|z| z.to_string_lossy().contains("/mor/")) {
        let tmp = tempfile::tempdir().unwrap();
        let base = unzip_table(&zip, tmp.path());
        let mut stack = vec![base.clone()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap().flatten() {
                let p = e.path();
                let name = e.file_name().to_string_lossy().into_owned();
                if p.is_dir() {
                    if name != ".hoodie" {
                        stack.push(p);
                    }
                    continue;
                }
                let Ok(log_name) = tributary_timeline::LogFileName::parse(&name) else { continue };
                let bytes = bytes::Bytes::from(std::fs::read(&p).unwrap());
                let blocks = LogBlock::decode_all(&bytes, &p.display().to_string()).unwrap();
                assert!(!blocks.is_empty(), "{}", p.display());
                let mut again = Vec::new();
                for b in &blocks {
                    b.encode_into(&mut again);
                    if !zip.to_string_lossy().contains("/v6_") {
                        assert_eq!(b.header(HeaderKey::InstantTime), Some(log_name.instant.as_str()), "{name}");
                    }
                    assert!(b.header(HeaderKey::Schema).is_some_and(|s| s.contains("_hoodie_commit_time")));
                    if b.block_type == BlockType::AvroData {
                        assert!(!decode_avro_content(&b.content, &name).unwrap().is_empty());
                    }
                    if b.block_type == BlockType::ParquetData {
                        assert!(b.content.starts_with(b"PAR1") && b.content.ends_with(b"PAR1"), "{name}");
                        parquet += 1;
                    }
                }
                assert_eq!(again, bytes, "{} re-encodes byte for byte", p.display());
                seen += 1;
            }
        }
    }
    assert!(seen >= 7, "expected the corpus log files, saw {seen}");
    assert!(parquet >= 1, "expected Parquet log blocks in the corpus");
}

/// The cleaner deletes the file groups Spark's insert overwrite and
/// clustering replaced, once no retained commit needs them; the archiver
/// keeps each replacecommit while its replaced groups have files; both
/// readers return the same rows before and after.
#[tokio::test]
async fn the_cleaner_deletes_replaced_file_groups() {
    let Some(zips) = all_corpus_zips("v9_") else { return };
    let mut cleaned = 0;
    for zip in zips {
        let tmp = tempfile::tempdir().unwrap();
        let base = unzip_table(&zip, tmp.path());
        let table = Table::open_local(&base).await.unwrap();
        let (_, view) = table.file_system_view().await.unwrap();
        let replaced: Vec<tributary_timeline::DataFile> =
            view.replaced().values().flat_map(|g| g.files.iter().cloned()).collect();
        if replaced.is_empty() {
            continue;
        }
        let t = base.to_str().unwrap();
        let before = our_rows(t, &[]);
        // While they have files, the archiver keeps the replacecommits.
        let replacecommits = || {
            let names = std::fs::read_dir(base.join(".hoodie/timeline")).unwrap().flatten();
            names.filter(|e| e.file_name().to_string_lossy().ends_with(".replacecommit")).count()
        };
        let active = replacecommits();
        let archive =
            ["archive", t, "--keep-min-commits", "1", "--keep-max-commits", "2", "--time-mode", "hybrid-logical"];
        tributary_ok(&archive);
        assert_eq!(replacecommits(), active, "{}: a replacecommit was archived", zip.display());
        let out = tributary_ok(&["clean", t, "--retain-commits", "1", "--time-mode", "hybrid-logical"]);
        assert!(out.contains("files deleted"), "{}: {out}", zip.display());
        for f in &replaced {
            assert!(!base.join(&f.partition).join(&f.name).exists(), "{}: {} is left", zip.display(), f.name);
        }
        let (_, view) = table.file_system_view().await.unwrap();
        assert!(view.replaced().is_empty(), "{}", zip.display());
        assert_eq!(our_rows(t, &[]), before, "{}", zip.display());
        if have_official_reader() {
            assert_eq!(official_rows(t, ""), before, "{}", zip.display());
        }
        cleaned += 1;
    }
    assert!(cleaned >= 3, "expected v9 tables with replaced file groups, cleaned {cleaned}");
}
