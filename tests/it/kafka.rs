//! Ingest from a real Kafka broker (`.ci/kafka.sh`, `TRIBUTARY_TEST_KAFKA`),
//! into local tables and, in the S3 run, tables on S3 ([`Place`]):
//! records and offsets committed together, out-of-order events and deletes
//! against a model, bad records under each mode, and jobs that lose their
//! partitions to others.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{Value, json};
use tributary::ingest::{IngestSettings, OnBadRecord};
use tributary::{CreateOptions, ReadOptions, Table, WriteSettings};

use crate::support::{Place, Store, require, store};

const SCHEMA: &str = r#"{"type":"record","name":"r","fields":[
    {"name":"id","type":"string"},{"name":"ts","type":"long"},
    {"name":"v","type":["null","long"],"default":null}]}"#;

/// Values to produce, per partition (`None`: a tombstone).
type PartitionValues = Vec<Vec<Option<String>>>;

/// The broker the suite runs against, if any ([`require`]).
fn brokers() -> Option<String> {
    require(
        "a Kafka broker (TRIBUTARY_TEST_KAFKA)",
        ".ci/kafka.sh start DIR, then source DIR/env",
        std::env::var("TRIBUTARY_TEST_KAFKA").ok(),
    )
}

/// A consumer group named for the test and this run: the two runs of CI
/// (local and S3) share one broker, and a group is never reused.
fn group(name: &str) -> String {
    format!("{name}-{}", std::process::id())
}

/// A new topic of `partitions` partitions, named for the test.
async fn topic(brokers: &str, name: &str, partitions: i32) -> String {
    let name = format!("{name}-{}", std::process::id());
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", brokers).create().unwrap();
    let topics = [NewTopic::new(&name, partitions, TopicReplication::Fixed(1))];
    for r in admin.create_topics(&topics, &AdminOptions::new()).await.unwrap() {
        r.unwrap();
    }
    name
}

fn producer(brokers: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .create()
        .unwrap()
}

/// Produces `values` (`None`: a tombstone) to `partition` of `topic`.
async fn produce(p: &FutureProducer, topic: &str, partition: i32, values: &[Option<String>]) {
    let sends = values.iter().map(|v| {
        let record: FutureRecord<'_, str, str> = FutureRecord::to(topic).partition(partition);
        let record = match v {
            Some(v) => record.payload(v.as_str()),
            None => record,
        };
        p.send(record, Duration::from_secs(30))
    });
    for r in futures::future::join_all(sends).await {
        r.unwrap();
    }
}

/// The end offset of each of `topic`'s `partitions` partitions.
fn end_offsets(brokers: &str, topic: &str, partitions: i32) -> Vec<i64> {
    let c: BaseConsumer = ClientConfig::new().set("bootstrap.servers", brokers).create().unwrap();
    (0..partitions).map(|p| c.fetch_watermarks(topic, p, Duration::from_secs(30)).unwrap().1).collect()
}

/// The test's table `t` in `place` (a local folder, or S3 in the S3 run).
async fn create(place: &Place) -> Table {
    let mut options = CreateOptions::new(SCHEMA, "id", "ts");
    options.buckets = 4;
    place.table("t").builder().create(options).await.unwrap()
}

/// The next offset the table records for each partition of `topic` under
/// `group` (writer ids `kafka.<group>.<topic>.<partition>`).
async fn table_offsets(t: &Table, group: &str, topic: &str, partitions: i32) -> Vec<Option<i64>> {
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    let mut out = Vec::new();
    for p in 0..partitions {
        let id = format!("kafka.{group}.{topic}.{p}");
        out.push(client.last_checkpoint(&id).await.unwrap().map(|c| c.parse().unwrap()));
    }
    out
}

/// Waits until the table's offsets reach `ends`, for at most two minutes.
async fn until_caught_up(t: &Table, group: &str, topic: &str, ends: &[i64]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let now = table_offsets(t, group, topic, ends.len() as i32).await;
        // A partition never written has no offset in the table.
        if now.iter().zip(ends).all(|(o, e)| o.unwrap_or(0) == *e) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the table's offsets {now:?} never reached {ends:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The table's snapshot rows as JSON objects.
async fn table_values(t: &Table) -> Vec<Value> {
    let batch = t.read(&ReadOptions::default()).await.unwrap();
    let mut w = arrow::json::ArrayWriter::new(Vec::new());
    w.write(&batch).unwrap();
    w.finish().unwrap();
    let bytes = w.into_inner();
    if bytes.is_empty() { Vec::new() } else { serde_json::from_slice(&bytes).unwrap() }
}

/// An ingest job running in a task until [`Running::stop`].
struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    job: tokio::task::JoinHandle<Result<tributary::ingest::IngestSummary, tributary::ingest::Error>>,
}

impl Running {
    fn start(job: tributary::ingest::Ingest) -> Self {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let job = tokio::spawn(job.run(async move {
            let _ = stopped.await;
        }));
        Self { stop, job }
    }

    /// Shuts the job down; it must end without an error.
    async fn stop(self) -> tributary::ingest::IngestSummary {
        self.stop.send(()).unwrap();
        self.job.await.unwrap().unwrap()
    }
}

/// A job of `group` on `topic` into `t`, committing every `records`
/// records or `interval`, started; with its counters.
async fn start_job(
    t: &Table,
    brokers: &str,
    topic: &str,
    group: &str,
    (records, interval): (usize, Duration),
) -> (std::sync::Arc<tributary::ingest::IngestStats>, Running) {
    let mut settings = IngestSettings::new(brokers, vec![topic.to_string()], group);
    settings.commit_records = records;
    settings.commit_interval = interval;
    let job = t.ingest(WriteSettings::default(), settings).await.unwrap();
    (job.stats(), Running::start(job))
}

/// The table's rows: id to (ts, v).
async fn rows(t: &Table) -> BTreeMap<String, (i64, Option<i64>)> {
    table_values(t)
        .await
        .into_iter()
        .map(|r| (r["id"].as_str().unwrap().to_string(), (r["ts"].as_i64().unwrap(), r["v"].as_i64())))
        .collect()
}

/// Out-of-order events, deletes and tombstones over 3 partitions, ingested
/// in many small commits: the table holds, per key, the version with the
/// latest event time (none where that is a delete), and its offsets are
/// the topic's end offsets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_is_ingested_into_the_model_with_its_offsets() {
    let Some(brokers) = brokers() else { return };
    let Some(place) = Place::new() else { return };
    let t = create(&place).await;
    let topic = topic(&brokers, "model", 3).await;
    let producer = producer(&brokers);
    // Key k lives in partition k % 3; its event times come out of order.
    // Per key: the latest event time seen, and the row it leaves (none
    // for a delete).
    type Row = (i64, Option<i64>);
    let mut model: BTreeMap<String, (i64, Option<Row>)> = BTreeMap::new();
    let mut per_partition: PartitionValues = vec![Vec::new(); 3];
    for n in 0..3000i64 {
        let k = n % 150;
        let ts = (n * 7919) % 10007;
        let (id, p) = (format!("k{k}"), (k % 3) as usize);
        let value = if n % 97 == 0 {
            None
        } else if n % 11 == 0 {
            Some(json!({"id": id, "ts": ts, "_hoodie_is_deleted": true}))
        } else {
            Some(json!({"id": id, "ts": ts, "v": n}))
        };
        if let Some(v) = &value {
            let version = (!v["_hoodie_is_deleted"].as_bool().unwrap_or(false)).then_some((ts, Some(n)));
            let e = model.entry(id).or_insert((i64::MIN, None));
            if ts >= e.0 {
                *e = (ts, version);
            }
        }
        per_partition[p].push(value.map(|v| v.to_string()));
    }
    for (p, values) in per_partition.iter().enumerate() {
        produce(&producer, &topic, p as i32, values).await;
    }
    let ends = end_offsets(&brokers, &topic, 3);
    let (stats, running) = start_job(&t, &brokers, &topic, &group("model"), (400, Duration::from_millis(500))).await;
    until_caught_up(&t, &group("model"), &topic, &ends).await;
    let summary = running.stop().await;
    assert!(summary.commits > 3, "{summary:?}");
    assert_eq!(
        stats.tombstones.load(Ordering::Relaxed),
        per_partition.iter().flatten().filter(|v| v.is_none()).count() as u64
    );
    let want: BTreeMap<String, Row> = model.into_iter().filter_map(|(k, (_, v))| v.map(|v| (k, v))).collect();
    assert_eq!(rows(&t).await, want);
}

/// A bad record fails the job, naming its position, and nothing of its
/// batch is committed; skipped, it is counted and the rest is written;
/// dead-lettered, it is delivered with its position and reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_record_fails_the_job_or_is_skipped() {
    let Some(brokers) = brokers() else { return };
    let Some(place) = Place::new() else { return };
    let t = create(&place).await;
    let topic = topic(&brokers, "bad", 1).await;
    let values: Vec<Option<String>> = vec![
        Some(json!({"id": "a", "ts": 1, "v": 1}).to_string()),
        Some(json!({"id": "b", "ts": "late", "v": 2}).to_string()),
        Some("{not json".to_string()),
        Some(json!({"id": "c", "ts": 3, "v": 3}).to_string()),
    ];
    produce(&producer(&brokers), &topic, 0, &values).await;

    let mut settings = IngestSettings::new(&brokers, vec![topic.clone()], group("bad-fail"));
    settings.commit_interval = Duration::from_millis(300);
    let job = t.ingest(WriteSettings::default(), settings.clone()).await.unwrap();
    let e = job.run(std::future::pending()).await.unwrap_err();
    let message = e.to_string();
    let at = |offset: i64| format!("topic {topic} partition 0 offset {offset}");
    let named = (message.contains(&at(1)) && message.contains("`ts`"))
        || (message.contains(&at(2)) && message.contains("malformed JSON"));
    assert!(named, "{message}");
    assert_eq!(table_offsets(&t, &group("bad-fail"), &topic, 1).await, vec![None]);
    assert!(rows(&t).await.is_empty());

    settings.group = group("bad-skip");
    settings.on_bad_record = OnBadRecord::Skip;
    let job = t.ingest(WriteSettings::default(), settings).await.unwrap();
    let stats = job.stats();
    let running = Running::start(job);
    until_caught_up(&t, &group("bad-skip"), &topic, &[4]).await;
    running.stop().await;
    assert_eq!(stats.bad_records.load(Ordering::Relaxed), 2);
    let keys: Vec<String> = rows(&t).await.into_keys().collect();
    assert_eq!(keys, ["a", "c"]);

    // Dead-lettered: delivered with their positions and reasons before the
    // offsets pass them.
    let dead = self::topic(&brokers, "dead", 1).await;
    let mut settings = IngestSettings::new(&brokers, vec![topic.clone()], group("bad-dead"));
    settings.commit_interval = Duration::from_millis(300);
    settings.on_bad_record = OnBadRecord::DeadLetter(dead.clone());
    let job = t.ingest(WriteSettings::default(), settings).await.unwrap();
    let running = Running::start(job);
    until_caught_up(&t, &group("bad-dead"), &topic, &[4]).await;
    running.stop().await;
    let letters = dead_letters(&brokers, &dead, 2);
    let offsets: Vec<&str> = letters.iter().map(|h| h["tributary.offset"].as_str()).collect();
    assert_eq!(offsets, ["1", "2"]);
    for h in &letters {
        assert_eq!(h["tributary.topic"], topic);
        assert!(!h["tributary.error"].is_empty(), "{h:?}");
    }
}

/// The headers of the first `n` records of partition 0 of `topic`.
fn dead_letters(brokers: &str, topic: &str, n: usize) -> Vec<BTreeMap<String, String>> {
    use rdkafka::Message;
    use rdkafka::message::Headers;
    let c: BaseConsumer =
        ClientConfig::new().set("bootstrap.servers", brokers).set("group.id", group("dead-reader")).create().unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, rdkafka::Offset::Beginning).unwrap();
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while out.len() < n && std::time::Instant::now() < deadline {
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            let m = m.unwrap();
            let headers = m.headers().map(|h| {
                h.iter()
                    .map(|h| (h.key.to_string(), String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned()))
                    .collect()
            });
            out.push(headers.unwrap_or_default());
        }
    }
    assert_eq!(out.len(), n, "dead letters in {topic}");
    out
}

/// One `tributary ingest` process of the fault test, appending its log to
/// `log`, committing every `commit` records or time.
fn ingest_process(
    brokers: &str,
    table: &str,
    topic: &str,
    group: &str,
    commit: (usize, &str),
    log: &std::path::Path,
) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let log = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_tributary"))
        .args(["ingest", table, "--brokers", brokers, "--topic", topic, "--group", group])
        .args(["--commit-records", &commit.0.to_string(), "--commit-interval", commit.1])
        // Every record is stored, so the records commits wrote sum to the
        // records produced (a commit keeps one version per key otherwise).
        .arg("--keep-every-version")
        // A stopped process leaves the group after 6 s, not Kafka's 45.
        .args(["--kafka", "session.timeout.ms=6000", "--kafka", "heartbeat.interval.ms=1000"])
        .env("RUST_LOG", "tributary_ingest=debug")
        // A process group of its own, so that the kernel never hangs the
        // stopped one up: a stopped member of a process group that has
        // become orphaned (the test's, under some launchers) gets SIGHUP.
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

/// The logs at `paths`, for a failure's message.
fn said(paths: &[&std::path::Path]) -> String {
    let mut out = String::new();
    for p in paths {
        out += &format!("--- {}\n{}", p.display(), std::fs::read_to_string(p).unwrap_or_default());
    }
    out
}

/// Child processes killed when the test ends, passed or not.
struct Reaper(Vec<u32>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

fn signal(child: &std::process::Child, sig: &str) {
    let ok = std::process::Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap().success();
    assert!(ok, "kill {sig} {}", child.id());
}

/// The records every completed delta commit wrote (deletes included),
/// summed: a record applied twice counts twice.
async fn written_records(t: &Table) -> u64 {
    let timeline = t.timeline().await.unwrap();
    let folder = tributary::timeline::TimelineFolder::new(t.location(), t.config());
    let mut n = 0;
    for i in timeline.completed().filter(|i| i.action == tributary::Action::DeltaCommit) {
        let bytes = folder.read(i, tributary::State::Completed).await.unwrap();
        let meta = tributary_format::CommitMetadata::from_bytes_shared(&bytes, "commit").unwrap();
        n += meta.partition_to_write_stats.values().flatten().map(|s| s.num_writes).sum::<i64>() as u64;
    }
    n
}

/// Three processes in one group on six partitions while records keep
/// coming: one is stopped (SIGSTOP) until the group gave its partitions to
/// the others, then continued, and its commit fails; then ten times one
/// is killed (SIGKILL) at a random point and started again. Records with
/// keys of their own, and records of shared keys out of event-time order
/// with deletes among them: no record is lost or written twice, the
/// table's offsets are the topic's end offsets, and both readers read the
/// model of the topic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_and_stopped_processes_lose_and_repeat_nothing() {
    use rand::{Rng, SeedableRng};
    let Some(brokers) = brokers() else { return };
    let Some(place) = Place::new() else { return };
    let t = create(&place).await;
    let path = place.table("t").uri().to_string();
    let group = format!("faults-{}", std::process::id());
    let (group, partitions) = (group.as_str(), 6);
    let topic = topic(&brokers, "faults", partitions).await;
    let seed = rand::random::<u64>();
    eprintln!("fault schedule seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);

    // Records keep coming while processes stop and die: 80 waves, each of
    // 50 records per partition with keys of their own (ordered by wave) and
    // 10 of five keys shared by the partition's waves, whose event times
    // come out of order and a fifth of which delete.
    type Row = (i64, Option<i64>);
    let mut model: BTreeMap<String, (i64, Option<Row>)> = BTreeMap::new();
    let mut waves: Vec<PartitionValues> = Vec::new();
    for wave in 0..80i64 {
        let mut wave_values: PartitionValues = Vec::new();
        for part in 0..partitions as i64 {
            let mut values = Vec::new();
            for i in 0..50 {
                let id = format!("w{wave}-p{part}-{i}");
                values.push(Some(json!({"id": id, "ts": wave, "v": i}).to_string()));
                model.insert(id, (wave, Some((wave, Some(i)))));
            }
            for j in 0..10i64 {
                let n = wave * 60 + part * 10 + j;
                let (id, ts) = (format!("s{part}-{}", j % 5), 1_000_000 + (n * 7919) % 100_003);
                let deletes = (n * 31) % 5 == 0;
                let value = if deletes {
                    json!({"id": id, "ts": ts, "_hoodie_is_deleted": true})
                } else {
                    json!({"id": id, "ts": ts, "v": n})
                };
                values.push(Some(value.to_string()));
                let e = model.entry(id).or_insert((i64::MIN, None));
                if ts > e.0 {
                    *e = (ts, (!deletes).then_some((ts, Some(n))));
                }
            }
            wave_values.push(values);
        }
        waves.push(wave_values);
    }
    let want: BTreeMap<String, Row> = model.into_iter().filter_map(|(k, (_, v))| v.map(|v| (k, v))).collect();
    let producing = {
        let (brokers, topic) = (brokers.clone(), topic.clone());
        tokio::spawn(async move {
            let p = producer(&brokers);
            let mut n = 0u64;
            for wave in waves {
                for (part, values) in wave.iter().enumerate() {
                    produce(&p, &topic, part as i32, values).await;
                    n += values.len() as u64;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            n
        })
    };
    let often = (300, "400ms");
    let logs = place.scratch().join("ingest.log");
    let mut procs: Vec<_> = (0..2).map(|_| ingest_process(&brokers, &path, &topic, group, often, &logs)).collect();
    let mut reaper = Reaper(procs.iter().map(|p| p.id()).collect());
    // The third process never commits on its own: it holds what it
    // consumed when it is stopped. Once the group gave its partitions to
    // the others and they committed every partition, it is told to stop
    // (SIGTERM) and continued. It learns first either that it is stopping
    // or that its session lapsed (librdkafka revokes its partitions);
    // either way it commits what it holds, and that commit must fail, and
    // show nothing.
    let zombie_log = place.scratch().join("zombie.log");
    let mut zombie = ingest_process(&brokers, &path, &topic, group, (1_000_000, "1h"), &zombie_log);
    reaper.0.push(zombie.id());
    // It is stopped once the group is settled (the others committed) and
    // it holds records consumed since its last assignment, with no
    // revocation since: a rebalance as the processes join revokes what it
    // held before, and commits it. Its log is read again once it is
    // stopped, so nothing came between the reading and the stop.
    let holding = || {
        let said = std::fs::read_to_string(&zombie_log).unwrap_or_default();
        let lines: Vec<&str> = said.lines().collect();
        let last = |what: &str| lines.iter().rposition(|l| l.contains(what));
        let holds = matches!((last("partition assigned"), last("batch opened")), (Some(a), Some(b)) if b > a);
        let settled = std::fs::read_to_string(&logs).unwrap_or_default().contains("committed");
        (holds && settled && last("partitions revoked") < last("partition assigned"), said)
    };
    let started = std::time::Instant::now();
    loop {
        let (ready, said) = holding();
        if ready {
            signal(&zombie, "-STOP");
            if holding().0 {
                break;
            }
            signal(&zombie, "-CONT");
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the third process never held records of a partition:\n{said}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let at_stop = table_offsets(&t, group, &topic, partitions).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let now = table_offsets(&t, group, &topic, partitions).await;
        if now.iter().zip(&at_stop).all(|(n, s)| n > s) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the others never took the stopped process's partitions over (table offsets {now:?}, at the stop \
             {at_stop:?}):\n{}",
            said(&[&logs, &zombie_log])
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    signal(&zombie, "-TERM");
    signal(&zombie, "-CONT");
    let status = zombie.wait().unwrap();
    assert!(status.success(), "the stopped process ended with {status}:\n{}", said(&[&zombie_log]));
    let zombie_said = std::fs::read_to_string(&zombie_log).unwrap();
    assert!(zombie_said.contains("commit fenced"), "the stopped process's commit was not fenced:\n{zombie_said}");
    procs.push(ingest_process(&brokers, &path, &topic, group, often, &logs));
    reaper.0.extend(procs.last().map(|p| p.id()));
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(rng.random_range(200..1500))).await;
        let k = rng.random_range(0..procs.len());
        procs[k].kill().unwrap();
        procs[k].wait().unwrap();
        procs[k] = ingest_process(&brokers, &path, &topic, group, often, &logs);
        reaper.0.push(procs[k].id());
    }
    let produced = producing.await.unwrap();

    let ends = end_offsets(&brokers, &topic, partitions);
    assert_eq!(ends.iter().sum::<i64>() as u64, produced);
    until_caught_up(&t, group, &topic, &ends).await;
    // A process listens for SIGTERM from the start of its job, but one
    // signalled while it is still being executed dies of the signal: the
    // last one restarted gets a moment to start.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for p in &procs {
        signal(p, "-TERM");
    }
    for p in &mut procs {
        let status = p.wait().unwrap();
        assert!(status.success(), "an ingest process ended with {status}:\n{}", said(&[&logs]));
    }
    // What the processes went through, from their logs.
    let log = std::fs::read_to_string(&logs).unwrap();
    let count = |what: &str| log.lines().filter(|l| l.contains(what)).count();
    eprintln!(
        "{} commits, {} fenced, {} partition assignments, {} revocations",
        count("committed"),
        count("commit fenced"),
        count("partition assigned"),
        count("partitions revoked")
    );
    assert_eq!(written_records(&t).await, produced, "records written, over every commit");
    assert_eq!(rows(&t).await, want);
    // The official reader reads local tables in these tests.
    if store() == Store::Local && crate::support::have_official_reader() {
        let theirs: BTreeMap<String, Row> = crate::support::official_rows_of(&t, false)
            .into_iter()
            .map(|r| (r["id"].as_str().unwrap().to_string(), (r["ts"].as_i64().unwrap(), r["v"].as_i64())))
            .collect();
        assert_eq!(theirs, want, "the official reader's rows");
    }
}

/// A Debezium change stream of a source table (snapshot reads, inserts,
/// updates, deletes with their tombstones), some events out of order and
/// some wrapped in the JSON converter's schema envelope: the table ends as
/// the source table ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debezium_stream_gives_the_source_tables_final_state() {
    use rand::{Rng, SeedableRng};
    let Some(brokers) = brokers() else { return };
    let Some(place) = Place::new() else { return };
    let schema = r#"{"type":"record","name":"r","fields":[
        {"name":"id","type":"long"},{"name":"name","type":["null","string"],"default":null},
        {"name":"lsn","type":"long"}]}"#;
    let mut options = CreateOptions::new(schema, "id", "lsn");
    options.buckets = 2;
    let t = place.table("t").builder().create(options).await.unwrap();
    let topic = topic(&brokers, "cdc", 2).await;
    let seed = rand::random::<u64>();
    eprintln!("change stream seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    // The source table, and the events its changes make, per partition.
    let mut source: BTreeMap<i64, String> = BTreeMap::new();
    let mut events: PartitionValues = vec![Vec::new(); 2];
    let mut lsn = 1000;
    // An event of key `id` (null: a tombstone), to its partition; some
    // in the converter's schema envelope.
    fn emit(events: &mut PartitionValues, id: i64, event: Option<Value>, rng: &mut rand::rngs::StdRng) {
        let event =
            event.map(|e| if rng.random_bool(0.3) { json!({"schema": {"type": "struct"}, "payload": e}) } else { e });
        events[(id % 2) as usize].push(event.map(|e| e.to_string()));
    }
    for id in 0..40 {
        lsn += 1;
        let name = format!("n{id}");
        emit(
            &mut events,
            id,
            Some(json!({"op": "r", "before": null, "after": {"id": id, "name": name}, "source": {"lsn": lsn}})),
            &mut rng,
        );
        source.insert(id, name);
    }
    for step in 0..400 {
        lsn += 1;
        let id = rng.random_range(0..60);
        match source.get(&id).cloned() {
            None => {
                let name = format!("i{step}");
                emit(
                    &mut events,
                    id,
                    Some(json!({"op": "c", "before": null, "after": {"id": id, "name": name}, "source": {"lsn": lsn}})),
                    &mut rng,
                );
                source.insert(id, name);
            }
            Some(old) if rng.random_bool(0.25) => {
                emit(
                    &mut events,
                    id,
                    Some(json!({"op": "d", "before": {"id": id, "name": old}, "after": null, "source": {"lsn": lsn}})),
                    &mut rng,
                );
                emit(&mut events, id, None, &mut rng);
                source.remove(&id);
            }
            Some(old) => {
                let name = format!("u{step}");
                let event = json!({"op": "u", "before": {"id": id, "name": old}, "after": {"id": id, "name": name}, "source": {"lsn": lsn}});
                emit(&mut events, id, Some(event), &mut rng);
                source.insert(id, name);
            }
        }
    }
    // Some neighbours swap: a change may arrive before an older one.
    for part in &mut events {
        for i in 1..part.len() {
            if rng.random_bool(0.2) {
                part.swap(i - 1, i);
            }
        }
    }
    let p = producer(&brokers);
    for (part, values) in events.iter().enumerate() {
        produce(&p, &topic, part as i32, values).await;
    }
    let ends = end_offsets(&brokers, &topic, 2);
    let mut settings = IngestSettings::new(&brokers, vec![topic.clone()], group("cdc"));
    settings.format = tributary::ingest::ValueFormat::DebeziumJson { order_by: "source.lsn".into() };
    settings.commit_records = 100;
    let job = t.ingest(WriteSettings::default(), settings).await.unwrap();
    let running = Running::start(job);
    until_caught_up(&t, &group("cdc"), &topic, &ends).await;
    running.stop().await;
    let got: BTreeMap<i64, String> = table_values(&t)
        .await
        .iter()
        .map(|r| (r["id"].as_i64().unwrap(), r["name"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(got, source);
}

/// Two sources, each a topic consumed by a group of its own, fill the two
/// sequence groups of one wide table at once, each ordered by its own
/// event time and out of order: every key holds each group's latest
/// values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_groups_fill_two_sequence_groups_at_once() {
    let Some(brokers) = brokers() else { return };
    let Some(place) = Place::new() else { return };
    let schema = r#"{"type":"record","name":"wide","fields":[
        {"name":"id","type":"string"},{"name":"ts","type":["null","long"],"default":null},
        {"name":"a1","type":["null","long"],"default":null},{"name":"ts_a","type":["null","long"],"default":null},
        {"name":"b1","type":["null","string"],"default":null},{"name":"ts_b","type":["null","long"],"default":null}]}"#;
    let mut options = CreateOptions::new(schema, "id", "ts");
    options.buckets = 2;
    options.sequence_groups =
        vec![tributary::SequenceGroup::parse("ts_a=a1").unwrap(), tributary::SequenceGroup::parse("ts_b=b1").unwrap()];
    let t = place.table("t").builder().create(options).await.unwrap();
    let (topic_a, topic_b) = (topic(&brokers, "source-a", 2).await, topic(&brokers, "source-b", 2).await);
    // Per key, each group's latest (event time, value).
    type Latest<T> = Option<(i64, T)>;
    let mut want: BTreeMap<String, (Latest<i64>, Latest<String>)> = BTreeMap::new();
    let (mut a, mut b): (PartitionValues, PartitionValues) = (vec![Vec::new(); 2], vec![Vec::new(); 2]);
    for n in 0..1200i64 {
        let k = n % 80;
        let id = format!("k{k}");
        let ts = (n * 7919) % 5003;
        let entry = want.entry(id.clone()).or_default();
        if n % 2 == 0 {
            a[(k / 2 % 2) as usize].push(Some(json!({"id": id, "a1": n, "ts_a": ts}).to_string()));
            if entry.0.is_none_or(|(t, _)| ts >= t) {
                entry.0 = Some((ts, n));
            }
        } else {
            b[(k / 2 % 2) as usize].push(Some(json!({"id": id, "b1": format!("b{n}"), "ts_b": ts}).to_string()));
            if entry.1.as_ref().is_none_or(|(t, _)| ts >= *t) {
                entry.1 = Some((ts, format!("b{n}")));
            }
        }
    }
    let p = producer(&brokers);
    for part in 0..2 {
        produce(&p, &topic_a, part as i32, &a[part]).await;
        produce(&p, &topic_b, part as i32, &b[part]).await;
    }
    let mut jobs = Vec::new();
    for (topic, group, columns) in
        [(&topic_a, group("source-a"), ["a1", "ts_a"]), (&topic_b, group("source-b"), ["b1", "ts_b"])]
    {
        let mut settings = IngestSettings::new(&brokers, vec![topic.clone()], group);
        settings.commit_records = 150;
        let write = WriteSettings { columns: Some(columns.map(String::from).to_vec()), ..Default::default() };
        jobs.push(Running::start(t.ingest(write, settings).await.unwrap()));
    }
    until_caught_up(&t, &group("source-a"), &topic_a, &end_offsets(&brokers, &topic_a, 2)).await;
    until_caught_up(&t, &group("source-b"), &topic_b, &end_offsets(&brokers, &topic_b, 2)).await;
    for job in jobs {
        job.stop().await;
    }
    let got: BTreeMap<String, (Option<i64>, Option<String>)> = table_values(&t)
        .await
        .iter()
        .map(|r| (r["id"].as_str().unwrap().to_string(), (r["a1"].as_i64(), r["b1"].as_str().map(String::from))))
        .collect();
    let want: BTreeMap<String, (Option<i64>, Option<String>)> =
        want.into_iter().map(|(k, (a, b))| (k, (a.map(|x| x.1), b.map(|x| x.1)))).collect();
    assert_eq!(got, want);
}

/// Avro values in Confluent's framing, keyed by their message keys, through
/// `tributary ingest --format avro`: a value naming another schema id and
/// one without the framing go to the dead-letter topic, the rest into the
/// table by event time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framed_avro_values_keyed_by_message_keys() {
    let Some(brokers) = brokers() else { return };
    let Some(place) = Place::new() else { return };
    let t = create(&place).await;
    let (topic, dead) = (topic(&brokers, "avro", 1).await, topic(&brokers, "avro-dead", 1).await);
    let avro_group = group("avro");
    // The values carry no key field: keys come from the messages.
    let value_schema = r#"{"type":"record","name":"e","fields":[
        {"name":"ts","type":"long"},{"name":"v","type":["null","long"],"default":null}]}"#;
    let schema_file = place.scratch().join("value.avsc");
    std::fs::write(&schema_file, value_schema).unwrap();
    let avro = apache_avro::Schema::parse_str(value_schema).unwrap();
    let framed = |id: u32, ts: i64, v: i64| {
        use apache_avro::types::Value as A;
        let body = apache_avro::to_avro_datum(
            &avro,
            A::Record(vec![("ts".into(), A::Long(ts)), ("v".into(), A::Union(1, Box::new(A::Long(v))))]),
        )
        .unwrap();
        let mut out = vec![0u8];
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&body);
        out
    };
    // (key, value): "a" updated out of order, a foreign schema id, no framing.
    let messages: Vec<(&str, Vec<u8>)> = vec![
        ("a", framed(7, 20, 2)),
        ("b", framed(7, 5, 5)),
        ("a", framed(7, 10, 1)),
        ("c", framed(9, 1, 1)),
        ("c", b"{\"ts\":1}".to_vec()),
        ("\"d\"", framed(7, 1, 4)),
    ];
    let p = producer(&brokers);
    for (key, value) in &messages {
        let record: FutureRecord<'_, str, [u8]> = FutureRecord::to(&topic).partition(0).key(*key).payload(value);
        p.send(record, Duration::from_secs(30)).await.unwrap();
    }
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tributary"))
        .args(["ingest", place.table("t").uri(), "--brokers", &brokers, "--topic", &topic])
        .args(["--group", &avro_group, "--format", "avro", "--value-schema", schema_file.to_str().unwrap()])
        .args(["--schema-id", "7", "--key-from", "message", "--commit-interval", "300ms"])
        .args(["--on-bad-record", &format!("dead-letter={dead}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _reaper = Reaper(vec![child.id()]);
    until_caught_up(&t, &avro_group, &topic, &[6]).await;
    signal(&child, "-TERM");
    assert!(child.wait().unwrap().success(), "the job did not end cleanly on SIGTERM");
    let rows = rows(&t).await;
    let expected: BTreeMap<String, (i64, Option<i64>)> =
        [("a", (20, Some(2))), ("b", (5, Some(5))), ("d", (1, Some(4)))].map(|(k, v)| (k.to_string(), v)).into();
    assert_eq!(rows, expected);
    let letters = dead_letters(&brokers, &dead, 2);
    let offsets: Vec<&str> = letters.iter().map(|h| h["tributary.offset"].as_str()).collect();
    assert_eq!(offsets, ["3", "4"]);
    assert!(letters[0]["tributary.error"].contains("schema id 9"), "{:?}", letters[0]);
    assert!(letters[1]["tributary.error"].contains("framing"), "{:?}", letters[1]);
}

/// A job whose commits wait at the table's bound on uncompacted logs (no
/// compactor runs) pauses consuming instead of buffering what the topic
/// holds, and once a compaction frees the bound it goes on to the topic's
/// end, losing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_waiting_on_compaction_pauses_and_then_catches_up() {
    let Some(brokers) = brokers() else { return };
    let Some(place) = Place::new() else { return };
    let mut options = CreateOptions::new(SCHEMA, "id", "ts");
    options.buckets = 1;
    options.max_logs_per_file_group = Some(2);
    let t = place.table("t").builder().create(options).await.unwrap();
    let topic = topic(&brokers, "bounded", 1).await;
    let values: Vec<Option<String>> =
        (0..200).map(|i| Some(json!({"id": format!("k{}", i % 50), "ts": i, "v": i}).to_string())).collect();
    produce(&producer(&brokers), &topic, 0, &values).await;

    let (stats, running) = start_job(&t, &brokers, &topic, &group("bounded"), (20, Duration::from_millis(100))).await;
    // Two commits fill the bound; the third waits, and the batch after it
    // fills, then consuming pauses.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while stats.pauses.load(Ordering::Relaxed) == 0 {
        assert!(std::time::Instant::now() < deadline, "consuming never paused");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(stats.commits.load(Ordering::Relaxed), 2);
    let held = table_offsets(&t, &group("bounded"), &topic, 1).await;
    assert_eq!(held, vec![Some(40)]);

    let compactor = t.compactor(tributary_compaction::CompactorSettings::default()).await.unwrap();
    let ends = end_offsets(&brokers, &topic, 1);
    // Each compaction frees the bound for the commits after it.
    let caught_up = async {
        loop {
            compactor.run_once().await.unwrap();
            if table_offsets(&t, &group("bounded"), &topic, 1).await == vec![Some(ends[0])] {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(120), caught_up).await.expect("the job never caught up");
    running.stop().await;
    let expected: BTreeMap<String, (i64, Option<i64>)> =
        (150..200).map(|i| (format!("k{}", i % 50), (i, Some(i)))).collect();
    assert_eq!(rows(&t).await, expected);
}
