//! A table with a metadata table that another engine made (Spark makes one
//! by default): Tributary turns it off before its first instant, as Hudi
//! does for a writer with `hoodie.metadata.enable=false`, and finishes a
//! turning off that a process stopped midway; on the store
//! `TRIBUTARY_TEST_STORE` names (see [`Place`]).

use std::sync::Arc;

use tributary_writer::WriteSettings;

use crate::support::*;

const PARTITIONS: &str = "hoodie.table.metadata.partitions";
const PROPERTIES: &str = ".hoodie/hoodie.properties";
const BACKUP: &str = ".hoodie/hoodie.properties.backup";

/// Files of a metadata table, relative to `.hoodie/metadata`.
const METADATA_FILES: [&str; 4] = [
    ".hoodie/hoodie.properties",
    ".hoodie/timeline/00000000000000000_20250101000000000.deltacommit",
    "files/.files-0000-0_00000000000000000.log.1_0-0-0",
    "files/.hoodie_partition_metadata",
];

/// Gives `table` what a Spark writer's metadata table leaves: its
/// partitions listed in `hoodie.properties` and its files; in a local
/// folder also Hadoop's checksum sidecars and folders that hold no file.
fn add_metadata_table(table: &TableUri) {
    let props = String::from_utf8(table.read(PROPERTIES).to_vec()).unwrap();
    table.put(PROPERTIES, format!("{props}{PARTITIONS}=column_stats,files,partition_stats\n{PARTITIONS}.inflight=\n"));
    for f in METADATA_FILES {
        table.put(&format!(".hoodie/metadata/{f}"), "x");
    }
    if let Some(dir) = table.location().local_folder() {
        let hoodie = dir.join(".hoodie");
        std::fs::write(hoodie.join(".hoodie.properties.crc"), b"crc of the old bytes").unwrap();
        std::fs::write(hoodie.join("metadata/files/..hoodie_partition_metadata.crc"), b"crc").unwrap();
        std::fs::create_dir_all(hoodie.join("metadata/.hoodie/.aux/.bootstrap/.partitions")).unwrap();
    }
}

/// The metadata partitions `hoodie.properties` lists.
fn listed(table: &TableUri) -> String {
    let props = String::from_utf8(table.read(PROPERTIES).to_vec()).unwrap();
    props.lines().find_map(|l| l.strip_prefix(&format!("{PARTITIONS}="))).unwrap_or_default().to_string()
}

/// Checks that `table` has no metadata table left, as Hudi leaves it.
fn assert_off(table: &TableUri) {
    assert_eq!(listed(table), "");
    let props = String::from_utf8(table.read(PROPERTIES).to_vec()).unwrap();
    assert!(props.lines().any(|l| l == format!("{PARTITIONS}.inflight=")), "both keys stay, empty: {props}");
    assert!(table.list(".hoodie/metadata").is_empty());
    assert!(!table.exists(BACKUP));
    if let Some(dir) = table.location().local_folder() {
        assert!(!dir.join(".hoodie/metadata").exists(), "the folder goes too");
        assert!(!dir.join(".hoodie/.hoodie.properties.crc").exists(), "no checksum of the old bytes");
    }
}

fn lines(place: &Place, name: &str, ts: i64) -> String {
    let p = place.scratch().join(name);
    let text: String = (0..20)
        .map(|i| format!("{{\"uuid\":\"k{i:03}\",\"ts\":{ts},\"rider\":\"r\",\"fare\":1.0,\"city\":\"c{}\"}}\n", i % 2))
        .collect();
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn the_first_instant_turns_the_metadata_table_off_once() {
    let Some(place) = Place::new() else { return };
    let table = place.init_trips("t", &["--partition-field", "city", "--buckets", "2"]);
    add_metadata_table(&table);
    let t = table.uri();
    let out = tributary(&["write", t, "--input", &lines(&place, "a.jsonl", 1), "--time-mode", "hybrid-logical"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("turned the metadata table off"), "{said}");
    assert!(said.contains("column_stats,files,partition_stats"), "names the partitions: {said}");
    assert_off(&table);
    assert_eq!(tributary_ok(&["read", t]).lines().count(), 20);
    // Nothing left to do: the next process says nothing.
    let out = tributary(&["write", t, "--input", &lines(&place, "b.jsonl", 2), "--time-mode", "hybrid-logical"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(!said.contains("metadata table"), "{said}");
    // Every actor turns it off first: a compaction, on a table given a new one.
    add_metadata_table(&table);
    tributary_ok(&["compact", t, "--time-mode", "hybrid-logical"]);
    assert_off(&table);
    if have_official_reader() {
        assert_same_rows(t, "after the metadata table was turned off");
    }
}

#[tokio::test]
async fn a_turning_off_stopped_midway_is_finished_by_the_next_instant() {
    let Some(place) = Place::new() else { return };
    let table = place.init_trips("t", &["--partition-field", "city", "--buckets", "2"]);
    tributary_ok(&["write", table.uri(), "--input", &lines(&place, "a.jsonl", 1), "--time-mode", "hybrid-logical"]);
    add_metadata_table(&table);
    let before = tributary_ok(&["read", table.uri(), "--sort"]);

    // The process stops when it would write the changed hoodie.properties:
    // the backup is written and hoodie.properties deleted.
    let stopped = place
        .table("t")
        .builder_through(
            |s| Arc::new(FailPuts::new(s, "stopped", |p| p.ends_with("/.hoodie/hoodie.properties"))),
            hybrid(),
        )
        .open()
        .await
        .unwrap();
    let client = stopped.write_client(WriteSettings::default()).await.unwrap();
    // Nothing of Tributary's starts before the metadata table is off: the
    // commit fails with the stop itself.
    let err = client.start_commit().await.expect_err("the commit starts only once the metadata table is off");
    assert!(err.to_string().contains("stopped"), "{err}");
    assert!(err.to_string().contains("hoodie.properties"), "names the file: {err}");
    assert!(!table.exists(PROPERTIES), "the stop came after hoodie.properties was deleted");
    assert!(table.exists(BACKUP), "its backup is there");
    assert_eq!(table.list(".hoodie/metadata").len(), METADATA_FILES.len(), "untouched while it is listed");

    // Readers read the backup meanwhile.
    let reader = place.table("t").builder().with_settings(hybrid()).open().await.unwrap();
    assert!(reader.config().metadata_partitions().0.contains(&"files".to_string()));
    assert_eq!(tributary_ok(&["read", table.uri(), "--sort"]), before);

    // The next instant restores hoodie.properties from the backup and
    // finishes turning the metadata table off, before it writes.
    let healthy = place.table("t").builder().with_settings(hybrid()).open().await.unwrap();
    let client = healthy.write_client(WriteSettings::default()).await.unwrap();
    let mut commit = client.start_commit().await.unwrap();
    assert_off(&table);
    let record = serde_json::json!({"uuid": "k999", "ts": 5, "rider": "r", "fare": 2.0, "city": "c0"});
    commit.write_json(&[record], "test", 1).await.unwrap();
    commit.commit().await.unwrap();
    assert_eq!(tributary_ok(&["read", table.uri(), "--sort"]).lines().count(), before.lines().count() + 1);
}
