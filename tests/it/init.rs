//! `tributary init` makes tables the official Hudi reader opens.

use crate::support::*;

#[test]
fn official_reader_opens_a_new_table() {
    let dir = tempfile::tempdir().unwrap();
    // Asked once, before the loop: a missing oracle skips only the oracle's
    // checks, never the later cases.
    let oracle = have_official_reader();
    for (name, extra) in [("part", &["--partition-field", "city"][..]), ("unpart", &[][..])] {
        let table = init_trips(dir.path(), name, &[&["--buckets", "4"][..], extra].concat());
        let props = std::fs::read_to_string(table.join(".hoodie/hoodie.properties")).unwrap();
        for line in [
            "hoodie.table.version=8",
            "hoodie.timeline.layout.version=2",
            "hoodie.table.type=MERGE_ON_READ",
            "hoodie.record.merge.mode=EVENT_TIME_ORDERING",
            "hoodie.record.merge.strategy.id=eeb8d96f-b1e4-49fd-bbf8-28ac514178e5",
            "hoodie.table.timeline.timezone=UTC",
            "hoodie.bucket.index.num.buckets=4",
            "hoodie.table.recordkey.fields=uuid",
            "hoodie.table.precombine.field=ts",
        ] {
            assert!(props.lines().any(|l| l == line), "missing {line} in\n{props}");
        }
        assert!(props.contains("hoodie.table.create.schema="));
        // Hudi's Java timeline lists the folder: it exists, empty.
        let timeline = std::fs::read_dir(table.join(".hoodie/timeline")).unwrap();
        assert_eq!(timeline.count(), 0, "no placeholder is left in the timeline folder");
        if !oracle {
            continue;
        }
        let got = python(
            "import sys, json\n\
             from hudi import HudiTableBuilder\n\
             t = HudiTableBuilder.from_base_uri(sys.argv[1]).build()\n\
             batches = t.read()\n\
             print(json.dumps({'rows': sum(b.num_rows for b in batches), 'mor': t.is_mor, 'name': t.table_name,\n\
                               'fields': [f.name for f in t.get_schema_with_meta_fields()]}))",
            &[table.to_str().unwrap()],
        );
        let v: serde_json::Value = serde_json::from_str(got.trim()).unwrap();
        assert_eq!(v["rows"], 0, "{got}");
        assert_eq!(v["mor"], true, "{got}");
        assert_eq!(v["name"], name, "{got}");
        // The official reader exposes the meta columns first, then the table's.
        let fields = [
            "_hoodie_commit_time",
            "_hoodie_commit_seqno",
            "_hoodie_record_key",
            "_hoodie_partition_path",
            "_hoodie_file_name",
            "ts",
            "uuid",
            "rider",
            "fare",
            "city",
        ];
        assert_eq!(v["fields"], serde_json::json!(fields), "{got}");
        assert!(assert_same_rows(&table, name).is_empty());
    }
}

#[test]
fn commit_time_tables_record_their_strategy() {
    let dir = tempfile::tempdir().unwrap();
    let table = init_trips(dir.path(), "ct", &["--merge-mode", "commit-time", "--bucket-hash", "hudi-java"]);
    let props = std::fs::read_to_string(table.join(".hoodie/hoodie.properties")).unwrap();
    assert!(props.contains("hoodie.record.merge.mode=COMMIT_TIME_ORDERING"));
    assert!(props.contains("hoodie.record.merge.strategy.id=ce9acb64-bde0-424c-9b91-f6ebba25356d"));
    assert!(props.contains("tributary.bucket.hash=hudi-java"));
    assert!(props.contains("hoodie.table.keygenerator.type=NON_PARTITION"));
}

#[test]
fn init_rejects_bad_definitions_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let schema = trips_schema(dir.path());
    let s = schema.to_str().unwrap();
    let bad_json = dir.path().join("bad.avsc");
    std::fs::write(&bad_json, "{\"type\": \"record\", ").unwrap();
    let not_record = dir.path().join("int.avsc");
    std::fs::write(&not_record, "\"int\"").unwrap();
    let t = dir.path().join("t");
    let t = t.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--schema", s, "--record-key", "id", "--ordering-field", "ts"], "record key field `id`"),
        (vec!["--schema", s, "--record-key", "uuid", "--ordering-field", "when"], "ordering field `when`"),
        (
            vec!["--schema", s, "--record-key", "uuid", "--ordering-field", "ts", "--partition-field", "region"],
            "partition field `region`",
        ),
        (vec!["--schema", s, "--record-key", "uuid", "--ordering-field", "ts", "--buckets", "0"], "--buckets"),
        (vec!["--schema", bad_json.to_str().unwrap(), "--record-key", "uuid", "--ordering-field", "ts"], "bad.avsc"),
        (
            vec!["--schema", not_record.to_str().unwrap(), "--record-key", "uuid", "--ordering-field", "ts"],
            "must be a record",
        ),
        (vec!["--schema", "/nonexistent.avsc", "--record-key", "uuid", "--ordering-field", "ts"], "/nonexistent.avsc"),
    ];
    for (args, expect) in cases {
        let mut full = vec!["init", t];
        full.extend(args);
        let err = tributary_err(&full);
        assert!(err.contains(expect), "{full:?}: expected `{expect}` in {err}");
        assert!(!std::path::Path::new(t).join(".hoodie").exists(), "nothing is written on error");
    }
    tributary_ok(&["init", t, "--schema", s, "--record-key", "uuid", "--ordering-field", "ts"]);
    let err = tributary_err(&["init", t, "--schema", s, "--record-key", "uuid", "--ordering-field", "ts"]);
    assert!(err.contains("already exists"), "{err}");
}

#[test]
fn an_ordering_field_must_be_of_an_orderable_type() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("types.avsc");
    std::fs::write(
        &schema,
        r#"{"type":"record","name":"r","fields":[
            {"name":"id","type":"string"},
            {"name":"i","type":"int"},{"name":"l","type":["null","long"],"default":null},
            {"name":"f","type":"float"},{"name":"d","type":"double"},{"name":"s","type":"string"},
            {"name":"day","type":{"type":"int","logicalType":"date"}},
            {"name":"ms","type":{"type":"long","logicalType":"timestamp-millis"}},
            {"name":"us","type":{"type":"long","logicalType":"timestamp-micros"}},
            {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
            {"name":"flag","type":"boolean"},{"name":"raw","type":"bytes"},
            {"name":"tod","type":{"type":"int","logicalType":"time-millis"}},
            {"name":"tags","type":{"type":"array","items":"string"}},
            {"name":"either","type":["null","int","string"],"default":null}]}"#,
    )
    .unwrap();
    let s = schema.to_str().unwrap();
    for (n, ok) in ["i", "l", "f", "d", "s", "day", "ms", "us", "dec"].iter().enumerate() {
        let t = dir.path().join(format!("ok{n}"));
        tributary_ok(&["init", t.to_str().unwrap(), "--schema", s, "--record-key", "id", "--ordering-field", ok]);
    }
    for bad in ["flag", "raw", "tod", "tags", "either"] {
        let t = dir.path().join(format!("bad-{bad}"));
        let err =
            tributary_err(&["init", t.to_str().unwrap(), "--schema", s, "--record-key", "id", "--ordering-field", bad]);
        assert!(
            err.contains(&format!("ordering field `{bad}` has type")) && err.contains("types.avsc"),
            "{bad}: {err}"
        );
        assert!(!t.join(".hoodie").exists(), "nothing is written on error");
    }
}
