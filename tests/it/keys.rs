//! Composite record keys: `_hoodie_record_key` in Hudi's complex format,
//! read back by both readers, every version of a key in one file group.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use arrow::array::{AsArray, BooleanArray, Date32Array, Int32Array, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tributary::{CreateOptions, ReadOptions, Table};
use tributary_format::{BlockType, HeaderKey, LogBlock};
use tributary_format::{decode_data_block, decode_delete_content};
use tributary_timeline::{BaseFileName, LogFileName};
use tributary_writer::WriteSettings;

use crate::support::*;

/// The Doris unique-key example: keyed by user, day and group (a nullable
/// group, so keys with `__null__` occur), ordered by `ts`.
const SCHEMA: &str = r#"{"type":"record","name":"doris","fields":[
    {"name":"user_id","type":"long"},
    {"name":"date","type":{"type":"int","logicalType":"date"}},
    {"name":"group_id","type":["null","int"],"default":null},
    {"name":"ts","type":"long"},
    {"name":"cost","type":"long"},
    {"name":"price","type":["null","double"],"default":null}]}"#;

const KEY: &str = "user_id,date,group_id";

/// Days since 1970-01-01 of the dates the events use.
const DATES: [(&str, i32); 3] = [("1999-12-31", 10_956), ("2017-10-01", 17_440), ("2020-02-22", 18_314)];

#[derive(Debug, Clone)]
struct Event {
    user_id: i64,
    day: usize,
    group_id: Option<i32>,
    ts: i64,
    cost: i64,
    deleted: bool,
}

impl Event {
    fn date(&self) -> &'static str {
        DATES[self.day].0
    }

    /// The key as Hudi's complex key generator writes it, spelled out here
    /// from the values (not by the code under test).
    fn hudi_key(&self) -> String {
        let group = self.group_id.map_or("__null__".to_string(), |g| g.to_string());
        format!("user_id:{},date:{},group_id:{group}", self.user_id, self.date())
    }

    fn json(&self) -> Value {
        let mut v = json!({"user_id": self.user_id, "date": self.date(), "group_id": self.group_id,
                           "ts": self.ts, "cost": self.cost});
        if self.deleted {
            v["_hoodie_is_deleted"] = json!(true);
        }
        v
    }
}

/// Out-of-order events over 4 users × 3 days × 3 groups (one of them
/// null), a sixth of them deletes, with event times in `times`.
fn events(rng: &mut StdRng, n: usize, times: std::ops::Range<i64>) -> Vec<Event> {
    let users = [1, 2, 10_004, 123_456_789_012];
    let groups = [Some(1), Some(2), None];
    (0..n)
        .map(|_| Event {
            user_id: users[rng.random_range(0..users.len())],
            day: rng.random_range(0..DATES.len()),
            group_id: groups[rng.random_range(0..groups.len())],
            ts: rng.random_range(times.clone()),
            cost: rng.random_range(0..10_000),
            deleted: rng.random_bool(1.0 / 6.0),
        })
        .collect()
}

/// The model: per key, in write order, a version (or delete) replaces the
/// current one when its event time is at least as large. Rows as the
/// readers should show them, sorted by key; `partitioned` names the
/// partition folder by the date.
fn expected(commits: &[Vec<Event>], partitioned: bool) -> Vec<Value> {
    let mut state: BTreeMap<String, Event> = BTreeMap::new();
    for e in commits.iter().flatten() {
        match state.get(&e.hudi_key()) {
            Some(cur) if e.ts < cur.ts => {}
            _ => {
                state.insert(e.hudi_key(), e.clone());
            }
        }
    }
    state
        .into_values()
        .filter(|e| !e.deleted)
        .map(|e| {
            let partition = if partitioned { format!("date={}", e.date()) } else { String::new() };
            json!({"key": e.hudi_key(), "partition": partition, "user_id": e.user_id, "date": e.date(),
                   "group_id": e.group_id, "ts": e.ts, "cost": e.cost})
        })
        .collect()
}

/// Rows of a reader (meta columns included) in the form of [`expected`].
fn normalize(rows: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({"key": r["_hoodie_record_key"], "partition": r["_hoodie_partition_path"], "user_id": r["user_id"],
                   "date": r["date"], "group_id": r["group_id"], "ts": r["ts"], "cost": r["cost"]})
        })
        .collect();
    out.sort_by(|a, b| a["key"].as_str().cmp(&b["key"].as_str()));
    out
}

/// Java's `List<String>.hashCode` of `values` (a null element hashes to 0,
/// a string by `String.hashCode` over UTF-16 units), as Java documents
/// both; the model of Hudi's bucket rule.
fn java_list_hash(values: &[Option<String>]) -> i32 {
    values.iter().fold(1i32, |h, v| {
        let s = v.as_deref().map_or(0i32, |s| s.encode_utf16().fold(0i32, |a, c| a.wrapping_mul(31) + i32::from(c)));
        h.wrapping_mul(31).wrapping_add(s)
    })
}

/// Every record key the table's files hold (log data and delete blocks,
/// base files) with the file groups (`partition/fileId`) holding it.
fn file_groups_of_keys(table: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let files = file_paths(table, |n| is_log(n) || n.ends_with(".parquet"));
    for p in files.iter().filter(|p| !p.to_string_lossy().contains("/.hoodie/")) {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let partition = p.parent().unwrap().strip_prefix(table).unwrap().to_string_lossy().into_owned();
        let mut keys: Vec<String> = Vec::new();
        let file_id = if let Ok(log) = LogFileName::parse(&name) {
            let bytes = bytes::Bytes::from(std::fs::read(p).unwrap());
            for b in LogBlock::decode_all(&bytes, &name).unwrap() {
                let schema = b.header(HeaderKey::Schema).unwrap().to_string();
                match b.block_type {
                    BlockType::AvroData => {
                        let batch = decode_data_block(&b.content, &schema, &schema, &name).unwrap();
                        let k = batch.column_by_name("_hoodie_record_key").unwrap().as_string::<i32>().clone();
                        keys.extend(k.iter().map(|k| k.unwrap().to_string()));
                    }
                    BlockType::Delete => {
                        keys.extend(decode_delete_content(&b.content, &name).unwrap().into_iter().map(|d| d.key));
                    }
                    _ => {}
                }
            }
            log.file_id
        } else {
            let file = std::fs::File::open(p).unwrap();
            let reader =
                parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
            for batch in reader {
                let batch = batch.unwrap();
                let k = batch.column_by_name("_hoodie_record_key").unwrap().as_string::<i32>().clone();
                keys.extend(k.iter().map(|k| k.unwrap().to_string()));
            }
            BaseFileName::parse(&name).unwrap().file_id
        };
        for k in keys {
            out.entry(k).or_default().insert(format!("{partition}/{file_id}"));
        }
    }
    out
}

/// Every version of every key written lies in exactly one file group, and,
/// with the `hudi-java` hash, in the bucket Hudi's rule gives its values.
fn assert_one_file_group_per_key(table: &Path, commits: &[Vec<Event>], buckets: u32, java: bool) {
    let groups = file_groups_of_keys(table);
    let written: BTreeMap<String, &Event> = commits.iter().flatten().map(|e| (e.hudi_key(), e)).collect();
    assert_eq!(
        groups.keys().collect::<Vec<_>>(),
        written.keys().collect::<Vec<_>>(),
        "the files hold the keys written"
    );
    for (key, in_groups) in &groups {
        assert_eq!(in_groups.len(), 1, "{key} lies in one file group, not {in_groups:?}");
        if java {
            let e = written[key];
            let values = [Some(e.user_id.to_string()), Some(e.date().to_string()), e.group_id.map(|g| g.to_string())];
            let want = (java_list_hash(&values) & i32::MAX) as u32 % buckets;
            let group = in_groups.first().unwrap();
            let file_id = group.rsplit('/').next().unwrap();
            assert_eq!(file_id[..8].parse::<u32>().unwrap(), want, "{key} in {group}");
        }
    }
}

fn props(table: &Path) -> Vec<String> {
    std::fs::read_to_string(table.join(".hoodie/hoodie.properties")).unwrap().lines().map(String::from).collect()
}

#[test]
fn composite_keys_from_the_cli_read_alike_in_both_readers() {
    let oracle = have_official_reader();
    for (name, partitioned, java) in [("flat", false, false), ("by_date", true, true)] {
        let dir = tempfile::tempdir().unwrap();
        let schema = dir.path().join("doris.avsc");
        std::fs::write(&schema, SCHEMA).unwrap();
        let table = dir.path().join(name);
        let t = table.to_str().unwrap();
        let mut init =
            vec!["init", t, "--schema", schema.to_str().unwrap(), "--record-key", KEY, "--ordering-field", "ts"];
        init.extend(["--buckets", "4"]);
        if partitioned {
            init.extend(["--partition-field", "date"]);
        }
        if java {
            init.extend(["--bucket-hash", "hudi-java"]);
        }
        tributary_ok(&init);
        let p = props(&table);
        let generator = if partitioned { "COMPLEX" } else { "NON_PARTITION" };
        for line in
            [format!("hoodie.table.recordkey.fields={KEY}"), format!("hoodie.table.keygenerator.type={generator}")]
        {
            assert!(p.contains(&line), "{name}: missing {line} in {p:?}");
        }
        assert!(!p.iter().any(|l| l.starts_with("hoodie.table.keygenerator.class")), "{name}: {p:?}");

        let mut rng = StdRng::seed_from_u64(if java { 22 } else { 2020 });
        let mut written: Vec<Vec<Event>> = Vec::new();
        for c in 0..4 {
            // The commit after the compaction is newer than everything
            // before it, so no event older than a compacted delete arrives.
            let batch = events(&mut rng, 60, if c < 3 { 1..400 } else { 400..800 });
            let f = dir.path().join(format!("c{c}.jsonl"));
            std::fs::write(&f, batch.iter().map(|e| format!("{}\n", e.json())).collect::<String>()).unwrap();
            tributary_ok(&[
                "write",
                t,
                "--input",
                f.to_str().unwrap(),
                "--tasks",
                "2",
                "--time-mode",
                "hybrid-logical",
            ]);
            written.push(batch);
            if c == 2 {
                // A compaction between commits: later versions land on top of base files.
                tributary_ok(&["compact", t, "--time-mode", "hybrid-logical"]);
            }
        }
        let want = expected(&written, partitioned);
        assert!(want.len() > 10 && want.iter().any(|r| r["group_id"].is_null()), "{name}: the workload covers nulls");
        let ours = our_rows(&table, &[]);
        assert_eq!(normalize(&ours), want, "{name}: tributary read vs the model");
        assert_one_file_group_per_key(&table, &written, 4, java);
        if oracle {
            assert_eq!(normalize(&official_rows(&table, "")), want, "{name}: official reader vs the model");
            assert_same_rows(&table, name);
        }
    }
}

fn arrow_batch(events: &[Event]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("user_id", DataType::Int64, false),
        Field::new("date", DataType::Date32, false),
        Field::new("group_id", DataType::Int32, true),
        Field::new("ts", DataType::Int64, false),
        Field::new("cost", DataType::Int64, false),
        Field::new("_hoodie_is_deleted", DataType::Boolean, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(events.iter().map(|e| e.user_id))),
            Arc::new(Date32Array::from_iter_values(events.iter().map(|e| DATES[e.day].1))),
            Arc::new(Int32Array::from(events.iter().map(|e| e.group_id).collect::<Vec<_>>())),
            Arc::new(Int64Array::from_iter_values(events.iter().map(|e| e.ts))),
            Arc::new(Int64Array::from_iter_values(events.iter().map(|e| e.cost))),
            Arc::new(BooleanArray::from(events.iter().map(|e| e.deleted).collect::<Vec<_>>())),
        ],
    )
    .unwrap()
}

#[tokio::test]
async fn composite_keys_from_arrow_batches_match_hudi_format() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = CreateOptions::new(SCHEMA, KEY, "ts");
    o.partition_field = Some("date".into());
    o.buckets = 3;
    o.bucket_hash = tributary_timeline::BucketHash::HudiJava;
    let path = dir.path().join("api");
    let table = Table::builder_local(&path).with_settings(hybrid()).create(o).await.unwrap();
    assert_eq!(table.config().record_key_fields, ["user_id", "date", "group_id"]);
    let client = table.write_client(WriteSettings { tasks: 2, ..Default::default() }).await.unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    let mut written = Vec::new();
    for _ in 0..3 {
        let batch = events(&mut rng, 80, 1..400);
        let mut c = client.start_commit().await.unwrap();
        // Two batches per commit: versions of a key meet across batches too.
        let (a, b) = batch.split_at(40);
        c.write_batch(&arrow_batch(a)).await.unwrap();
        c.write_batch(&arrow_batch(b)).await.unwrap();
        c.commit().await.unwrap();
        written.push(batch);
    }
    let read = table.read(&ReadOptions { with_meta: true, ..Default::default() }).await.unwrap();
    let mut json = arrow::json::ArrayWriter::new(Vec::new());
    json.write(&read).unwrap();
    json.finish().unwrap();
    let rows: Vec<Value> = serde_json::from_slice(&json.into_inner()).unwrap();
    let want = expected(&written, true);
    assert!(want.len() > 10);
    assert_eq!(normalize(&rows), want, "Table::read vs the model");
    assert_one_file_group_per_key(&path, &written, 3, true);
    if have_official_reader() {
        assert_eq!(normalize(&official_rows(&path, "")), want, "official reader vs the model");
        assert_same_rows(&path, "api");
    }
}

#[test]
fn bad_composite_keys_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("doris.avsc");
    std::fs::write(&schema, SCHEMA).unwrap();
    let s = schema.to_str().unwrap();
    let t = dir.path().join("t");
    let t = t.to_str().unwrap();
    for (key, expect) in [
        ("user_id,nope", "record key field `nope` is not in the schema"),
        ("user_id,date,user_id", "record key field `user_id` is listed twice"),
        ("user_id,price", "record key field `price` has type [\"null\",\"double\"]"),
        (" , ", "no record key field"),
    ] {
        let err = tributary_err(&["init", t, "--schema", s, "--record-key", key, "--ordering-field", "ts"]);
        assert!(err.contains(expect), "{key}: expected `{expect}` in {err}");
        if !expect.contains("listed twice") && !expect.contains("no record key") {
            assert!(err.contains("doris.avsc"), "{key}: the schema file is named: {err}");
        }
        assert!(!Path::new(t).join(".hoodie").exists(), "{key}: nothing is written on error");
    }

    tributary_ok(&["init", t, "--schema", s, "--record-key", KEY, "--ordering-field", "ts"]);
    let good = r#"{"user_id":1,"date":"2020-02-22","group_id":1,"ts":1,"cost":5}"#;
    for (bad, expect) in [
        (r#"{"user_id":1,"group_id":1,"ts":2,"cost":5}"#, "field `date`: missing record key"),
        (r#"{"user_id":1,"date":"2020-02-22","ts":2,"cost":5}"#, "field `group_id`: missing record key"),
        (r#"{"user_id":1,"date":"22/02/2020","group_id":1,"ts":2,"cost":5}"#, "field `date`: expected a date"),
    ] {
        let f = dir.path().join("in.jsonl");
        std::fs::write(&f, format!("{good}\n{bad}\n")).unwrap();
        let err = tributary_err(&["write", t, "--input", f.to_str().unwrap()]);
        assert!(err.contains("line 2") && err.contains(expect), "{bad}: expected `{expect}` in {err}");
    }
    assert!(tributary_ok(&["read", t, "--format", "jsonl"]).is_empty(), "nothing of the failed writes is visible");
}

/// Hudi's own composite-keyed tables: Tributary reads them, and the keys
/// Hudi wrote are the keys Tributary's rule builds from the same rows.
#[tokio::test]
async fn hudi_written_composite_keys_equal_ours() {
    let Some(zips) = all_corpus_zips("v") else { return };
    let zips: Vec<_> = zips.into_iter().filter(|z| z.to_string_lossy().contains("complex")).collect();
    assert!(zips.len() >= 5, "expected Hudi's complex-key tables, found {zips:?}");
    for zip in zips {
        let tmp = tempfile::tempdir().unwrap();
        let base = unzip_table(&zip, tmp.path());
        let table = Table::open_local(&base).await.unwrap();
        assert!(table.config().record_key_fields.len() > 1, "{}", zip.display());
        let timeline = table.timeline().await.unwrap();
        let schema = table.schema(&timeline).await.unwrap();
        let read = table.read(&ReadOptions { with_meta: true, ..Default::default() }).await.unwrap();
        assert!(read.num_rows() > 0, "{}", zip.display());
        let meta = tributary_format::META_FIELDS.len();
        let columns = read.project(&(meta..read.num_columns()).collect::<Vec<_>>()).unwrap();
        let ours = schema.record_key().build(&columns).unwrap();
        let hudi = read.column(tributary_format::RECORD_KEY).as_string::<i32>();
        for r in 0..read.num_rows() {
            assert_eq!(ours.keys().value(r), hudi.value(r), "{} row {r}", zip.display());
        }
        if have_official_reader() {
            let official: BTreeSet<String> = official_rows(&base, "")
                .iter()
                .map(|r| r["_hoodie_record_key"].as_str().unwrap().to_string())
                .collect();
            let ours: BTreeSet<String> = hudi.iter().map(|k| k.unwrap().to_string()).collect();
            assert_eq!(official, ours, "{}", zip.display());
        }
    }
}
