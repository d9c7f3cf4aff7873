//! The ingest loop: consume, batch, commit records and offsets together.
//!
//! ```text
//!  rebalance: assigned p ──> pause p, take over p's writer id (table lock),
//!                            seek p to the offset the table records, resume
//!  message of p ─────────> accept if p is ours and its offset is the next
//!                          one; append its value to the open batch
//!  N records, T seconds ─> decode the batch, write it, commit it with the
//!  or B bytes               next offset of every partition it holds, each
//!                           under its writer id, in the completing hold;
//!                           then Kafka's group offsets (monitoring only)
//!  rebalance: revoked p ─> forget p; a batch holding p is dropped and the
//!                          other partitions go back to their committed offsets
//! ```
//!
//! A process that lost a partition without knowing (stopped, cut off) and
//! commits it later fails: the new owner took the writer id over, and the
//! commit is fenced and withdrawn. The batch is dropped; partitions still
//! this process's go back to their committed offsets, and the fenced ones
//! are forgotten.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rdkafka::Message;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use tokio::sync::mpsc;
use tributary_timeline::metrics as names;
use tributary_writer::{CommitSummary, SourceLease, WriteClient};

use crate::context::{Context, Event, Partition};
use crate::debezium::Debezium;
use crate::error::{Error, Result};
use crate::position;
use crate::settings::{IngestSettings, OnBadRecord, StartAt, ValueFormat};
use crate::stats::{IngestStats, IngestSummary};

/// How long a seek, a pause or a group offset commit may take.
const KAFKA_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the open batch may take to commit on shutdown before it is
/// abandoned.
const SHUTDOWN_COMMIT: Duration = Duration::from_secs(30);

/// Waits between attempts at a seek the client refused for now.
const SEEK_RETRY: Duration = Duration::from_millis(20);

/// Waits between attempts after a commit failed for a reason that may pass.
const RETRY_BACKOFF: Duration = Duration::from_secs(1);

/// A partition this process owns.
#[derive(Debug)]
struct Owned {
    lease: SourceLease,
    /// Where the table says the partition resumes: its next offset, or the
    /// logical start when the table holds none yet.
    committed: Offset,
    /// The next offset to accept; `None` right after a seek to a logical
    /// offset, when the first record decides it.
    next: Option<i64>,
}

/// The open batch: values as JSON lines, each with its position.
#[derive(Debug, Default)]
struct Batch {
    text: String,
    lines: Vec<(Partition, i64)>,
    /// The next offset of each partition the batch holds (tombstones
    /// included).
    ends: HashMap<Partition, i64>,
    first_at: Option<tokio::time::Instant>,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

/// A running ingest job ([`Ingest::new`], [`Ingest::run`]).
pub struct Ingest {
    client: WriteClient,
    settings: IngestSettings,
    consumer: StreamConsumer<Context>,
    events: mpsc::UnboundedReceiver<Event>,
    dead_letters: Option<(String, FutureProducer)>,
    /// With [`ValueFormat::DebeziumJson`]: how events become records.
    debezium: Option<Debezium>,
    owned: HashMap<Partition, Owned>,
    batch: Batch,
    stats: Arc<IngestStats>,
}

impl std::fmt::Debug for Ingest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingest").field("settings", &self.settings).field("owned", &self.owned.len()).finish()
    }
}

impl Ingest {
    /// A job that writes through `client` what `settings` consumes. It
    /// subscribes to the topics at once; partitions arrive through the
    /// consumer group as [`Ingest::run`] polls.
    pub fn new(client: WriteClient, settings: IngestSettings) -> Result<Self> {
        let invalid = |what: &str, reason: &str| Error::InvalidInput { what: what.into(), reason: reason.into() };
        if settings.topics.is_empty() {
            return Err(invalid("ingest topics", "give at least one topic"));
        }
        if settings.group.is_empty() {
            return Err(invalid("ingest group", "give a consumer group"));
        }
        if settings.commit_records == 0 {
            return Err(invalid("ingest commit records", "must be at least 1"));
        }
        let debezium = match &settings.format {
            ValueFormat::Json => None,
            ValueFormat::DebeziumJson { order_by } => {
                let schema = client.schema();
                let field = schema.single_ordering().map(|i| schema.field_name(i).to_string()).ok_or_else(|| {
                    invalid("ingest --format debezium-json", "the table needs one ordering field for the events' order")
                })?;
                Some(Debezium::new(order_by, &field))
            }
        };
        let mut config = ClientConfig::new();
        for (k, v) in &settings.kafka {
            config.set(k, v);
        }
        config
            .set("bootstrap.servers", &settings.brokers)
            .set("group.id", &settings.group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest");
        if !settings.kafka.contains_key("statistics.interval.ms") {
            config.set("statistics.interval.ms", "5000");
        }
        let (tx, events) = mpsc::unbounded_channel();
        let stats = Arc::new(IngestStats::default());
        let consumer: StreamConsumer<Context> = config
            .create_with_context(Context { events: tx, stats: stats.clone(), table: client.location().name() })
            .map_err(|e| Error::kafka(format!("creating a consumer of {}", settings.brokers), e))?;
        let topics: Vec<&str> = settings.topics.iter().map(String::as_str).collect();
        consumer.subscribe(&topics).map_err(|e| Error::kafka(format!("subscribing to {topics:?}"), e))?;
        let dead_letters = match &settings.on_bad_record {
            OnBadRecord::DeadLetter(topic) => {
                let mut config = ClientConfig::new();
                for (k, v) in &settings.kafka {
                    config.set(k, v);
                }
                let producer: FutureProducer = config
                    .set("bootstrap.servers", &settings.brokers)
                    .set("enable.idempotence", "true")
                    .create()
                    .map_err(|e| Error::kafka(format!("creating a producer for dead letters to {topic}"), e))?;
                Some((topic.clone(), producer))
            }
            _ => None,
        };
        Ok(Self {
            client,
            settings,
            consumer,
            events,
            dead_letters,
            debezium,
            owned: HashMap::new(),
            batch: Batch::default(),
            stats,
        })
    }

    /// The job's counters, shared: read them while [`Ingest::run`] runs.
    pub fn stats(&self) -> Arc<IngestStats> {
        self.stats.clone()
    }

    /// Consumes and commits until `shutdown` resolves, then commits the
    /// open batch (all of it or, should that fail, none of it) and leaves
    /// the group. Returns the first error that stops the job: a bad record
    /// under [`OnBadRecord::Fail`], or a table or Kafka error that retrying
    /// does not cure. Committed records and offsets stay committed either way.
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) -> Result<IngestSummary> {
        tokio::pin!(shutdown);
        let result = loop {
            // The shutdown ends any step: a takeover or a commit cut short
            // leaves nothing half done (an instant left inflight is a
            // failed write, which recovery rolls back).
            let stopping = tokio::select! {
                biased;
                () = &mut shutdown => true,
                r = self.step() => match r {
                    Ok(()) => false,
                    Err(e) => break Err(e),
                },
            };
            if stopping {
                break match tokio::time::timeout(SHUTDOWN_COMMIT, self.commit_batch()).await {
                    Ok(r) => r.map(|_| ()),
                    Err(_) => {
                        tracing::warn!("the open batch did not commit in {SHUTDOWN_COMMIT:?}; abandoned");
                        Ok(())
                    }
                };
            }
        };
        self.consumer.unsubscribe();
        result?;
        Ok(IngestSummary {
            records: self.stats.records.load(Ordering::Relaxed),
            commits: self.stats.commits.load(Ordering::Relaxed),
            bad_records: self.stats.bad_records.load(Ordering::Relaxed),
        })
    }

    /// One step: a rebalance, a record, or a commit that is due.
    async fn step(&mut self) -> Result<()> {
        let deadline = self.batch.first_at.map(|t| t + self.settings.commit_interval);
        tokio::select! {
            biased;
            Some(event) = self.events.recv() => self.on_event(event).await?,
            () = sleep_until(deadline) => {
                self.commit_batch().await?;
            }
            message = self.consumer.recv() => match message {
                Ok(m) => {
                    let (topic, partition, offset) = (m.topic().to_string(), m.partition(), m.offset());
                    let payload = m.payload().map(<[u8]>::to_vec);
                    drop(m);
                    self.on_message((topic, partition), offset, payload.as_deref()).await?;
                }
                Err(e) => tracing::warn!(error = %e, "consuming failed; retrying"),
            },
        }
        let full = self.batch.lines.len() >= self.settings.commit_records
            || self.batch.text.len() >= self.settings.commit_bytes;
        if full {
            self.commit_batch().await?;
        }
        Ok(())
    }

    async fn on_event(&mut self, event: Event) -> Result<()> {
        match event {
            Event::Assigned(partitions) => {
                for p in partitions {
                    self.take_over(p).await?;
                }
            }
            Event::Revoked(partitions) => {
                let held = partitions.iter().any(|p| self.batch.ends.contains_key(p));
                for p in &partitions {
                    self.owned.remove(p);
                }
                if held {
                    // Its records of a partition no longer ours must not be
                    // committed: the batch goes, the others rewind.
                    self.drop_batch().await;
                }
                tracing::info!(?partitions, "partitions revoked");
            }
        }
        self.stats.partitions.store(self.owned.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Takes partition `p`'s writer id over and moves `p` to the offset the
    /// table records for it, then resumes it.
    async fn take_over(&mut self, p: Partition) -> Result<()> {
        let id = position::source_id(&self.settings.group, &p.0, p.1);
        let (lease, status) = self.client.take_over_source(&id).await?;
        let committed = match status.checkpoint {
            Some(c) => Offset::Offset(position::parse(&c.checkpoint).ok_or_else(|| Error::InvalidInput {
                what: format!("the table's offset of topic {} partition {} (writer ID `{id}`)", p.0, p.1),
                reason: format!("checkpoint `{}` of commit {} is not an offset", c.checkpoint, c.instant),
            })?),
            None => match self.settings.start_at {
                StartAt::Earliest => Offset::Beginning,
                StartAt::Latest => Offset::End,
            },
        };
        self.seek(&p, committed).await?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(&p.0, p.1);
        self.consumer.resume(&tpl).map_err(|e| Error::kafka(format!("resuming {} partition {}", p.0, p.1), e))?;
        tracing::info!(topic = %p.0, partition = p.1, offset = ?committed, generation = lease.generation(), "partition assigned");
        let next = match committed {
            Offset::Offset(n) => Some(n),
            _ => None,
        };
        self.owned.insert(p, Owned { lease, committed, next });
        Ok(())
    }

    /// Moves `p` to `offset`. A partition assigned a moment ago may not
    /// fetch yet, and librdkafka then refuses the seek (its erroneous
    /// state): that is retried until it fetches.
    async fn seek(&self, p: &Partition, offset: Offset) -> Result<()> {
        let started = tokio::time::Instant::now();
        let what = || format!("seeking {} partition {} to {offset:?}", p.0, p.1);
        loop {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(&p.0, p.1, offset).map_err(|e| Error::kafka(what(), e))?;
            let result = self
                .consumer
                .seek_partitions(tpl, KAFKA_TIMEOUT)
                .and_then(|tpl| tpl.elements().first().map_or(Ok(()), |e| e.error()));
            match result {
                Err(KafkaError::OffsetFetch(RDKafkaErrorCode::State)) if started.elapsed() < KAFKA_TIMEOUT => {
                    tokio::time::sleep(SEEK_RETRY).await;
                }
                other => return other.map_err(|e| Error::kafka(what(), e)),
            }
        }
    }

    async fn on_message(&mut self, p: Partition, offset: i64, payload: Option<&[u8]>) -> Result<()> {
        let Some(owned) = self.owned.get_mut(&p) else {
            // Fetched before a revocation or before the partition was
            // taken over: it is read again from the table's offset.
            return Ok(());
        };
        if owned.next.is_some_and(|n| offset < n) {
            return Ok(());
        }
        owned.next = Some(offset + 1);
        self.batch.ends.insert(p.clone(), offset + 1);
        self.batch.first_at.get_or_insert_with(tokio::time::Instant::now);
        let Some(value) = payload else {
            // A tombstone (a null value): nothing to write; its offset is
            // committed with the batch.
            self.stats.tombstones.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        };
        let converted;
        let text = match (&self.debezium, std::str::from_utf8(value)) {
            (_, Err(e)) => return self.bad_value(&p, offset, value, None, format!("not UTF-8 text: {e}")).await,
            (_, Ok(t)) if t.trim().is_empty() => {
                return self.bad_value(&p, offset, value, None, "an empty value, not a JSON object".into()).await;
            }
            (None, Ok(t)) => t,
            (Some(d), Ok(_)) => match d.record(value) {
                Ok(record) => {
                    converted = record;
                    converted.as_str()
                }
                Err((field, reason)) => return self.bad_value(&p, offset, value, field, reason).await,
            },
        };
        // A JSON value holds no raw line break outside its strings (inside
        // them it is invalid anyway), so one value is one line.
        if text.contains(['\n', '\r']) {
            self.batch.text.push_str(&text.replace(['\n', '\r'], " "));
        } else {
            self.batch.text.push_str(text);
        }
        self.batch.text.push('\n');
        self.batch.lines.push((p, offset));
        Ok(())
    }

    /// A value that is no record at all (no text, or an event that does
    /// not convert): the job fails, or the record is left out, as the
    /// settings say.
    async fn bad_value(
        &mut self,
        p: &Partition,
        offset: i64,
        value: &[u8],
        field: Option<String>,
        reason: String,
    ) -> Result<()> {
        let error = Error::BadRecord { topic: p.0.clone(), partition: p.1, offset, field, reason };
        if self.settings.on_bad_record == OnBadRecord::Fail {
            return Err(error);
        }
        self.leave_out(&(p.clone(), offset), &String::from_utf8_lossy(value), &error).await
    }

    /// Forgets the open batch; every partition it held goes back to its
    /// committed offset.
    async fn drop_batch(&mut self) {
        let batch = std::mem::take(&mut self.batch);
        for p in batch.ends.keys() {
            let Some(committed) = self.owned.get(p).map(|o| o.committed) else { continue };
            if let Err(e) = self.seek(p, committed).await {
                tracing::warn!(topic = %p.0, partition = p.1, error = %e, "rewinding failed");
            }
            if let Some(owned) = self.owned.get_mut(p) {
                owned.next = match committed {
                    Offset::Offset(n) => Some(n),
                    _ => None,
                };
            }
        }
    }

    /// Commits the open batch, if any, with its partitions' offsets.
    async fn commit_batch(&mut self) -> Result<Option<CommitSummary>> {
        if self.batch.is_empty() {
            return Ok(None);
        }
        match self.try_commit().await {
            Ok(summary) => Ok(summary),
            Err(e) if e.kind() == tributary_format::ErrorKind::Unavailable => {
                tracing::warn!(error = %e, "commit failed; consuming again from the committed offsets");
                self.stats.retries.fetch_add(1, Ordering::Relaxed);
                self.drop_batch().await;
                tokio::time::sleep(RETRY_BACKOFF).await;
                Ok(None)
            }
            Err(e) if e.kind() == tributary_format::ErrorKind::Conflict => {
                tracing::warn!(error = %e, "commit fenced: partitions moved to another process");
                self.stats.retries.fetch_add(1, Ordering::Relaxed);
                self.forget_fenced().await?;
                self.drop_batch().await;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Forgets the partitions whose writer ids another process took over.
    async fn forget_fenced(&mut self) -> Result<()> {
        let mut lost = Vec::new();
        for (p, owned) in &self.owned {
            let status = self.client.checkpoint(owned.lease.id()).await?;
            if status.generation > owned.lease.generation() {
                lost.push(p.clone());
            }
        }
        for p in lost {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition(&p.0, p.1);
            let _ = self.consumer.pause(&tpl);
            self.owned.remove(&p);
            tracing::info!(topic = %p.0, partition = p.1, "partition taken over by another process");
        }
        Ok(())
    }

    async fn try_commit(&mut self) -> Result<Option<CommitSummary>> {
        let rows = self.decode().await?;
        let positions: Vec<(SourceLease, String)> = self
            .batch
            .ends
            .iter()
            .filter_map(|(p, next)| self.owned.get(p).map(|o| (o.lease.clone(), position::render(*next))))
            .collect();
        let mut commit = self.client.start_commit().await?;
        if let Some(rows) = rows
            && let Err(e) = commit.write(rows).await
        {
            commit.abort().await?;
            return Err(e.into());
        }
        let summary = commit.commit_with_sources(None, &positions).await?;
        let batch = std::mem::take(&mut self.batch);
        let mut tpl = TopicPartitionList::new();
        for (p, next) in &batch.ends {
            if let Some(owned) = self.owned.get_mut(p) {
                owned.committed = Offset::Offset(*next);
            }
            let _ = tpl.add_partition_offset(&p.0, p.1, Offset::Offset(*next));
        }
        // Kafka's group offsets, for monitoring: the table's are the ones
        // that count.
        if let Err(e) = self.consumer.commit(&tpl, CommitMode::Async) {
            tracing::debug!(error = %e, "committing group offsets failed");
        }
        self.stats.records.fetch_add(batch.lines.len() as u64, Ordering::Relaxed);
        self.stats.commits.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut last) = self.stats.last_commit.lock() {
            *last = Some(summary.instant.to_string());
        }
        let table = self.client.location().name();
        let mut per_topic: HashMap<&str, u64> = HashMap::new();
        for ((topic, _), _) in &batch.lines {
            *per_topic.entry(topic).or_default() += 1;
        }
        for (topic, n) in per_topic {
            metrics::counter!(names::INGEST_RECORDS, "table" => table.clone(), "topic" => topic.to_string())
                .increment(n);
        }
        metrics::counter!(names::INGEST_COMMITS, "table" => table).increment(1);
        tracing::info!(instant = %summary.instant, records = batch.lines.len(), "committed");
        Ok(Some(summary))
    }

    /// The open batch's rows; bad records fail the job, or are left out
    /// (and dead-lettered) as the settings say.
    async fn decode(&mut self) -> Result<Option<tributary_writer::Rows>> {
        if self.batch.lines.is_empty() {
            return Ok(None);
        }
        let schema = self.client.schema().clone();
        let first = match tributary_writer::rows_from_json_lines(&schema, &self.batch.text, "kafka", 1) {
            Ok(rows) => return Ok(Some(rows)),
            Err(e) => e,
        };
        if self.settings.on_bad_record == OnBadRecord::Fail {
            return Err(self.bad_record(first));
        }
        // Each line alone, to find every bad one.
        let lines: Vec<String> = self.batch.text.lines().map(String::from).collect();
        let mut good = String::with_capacity(self.batch.text.len());
        let mut kept = Vec::with_capacity(lines.len());
        for (n, line) in lines.iter().enumerate() {
            match tributary_writer::rows_from_json_lines(&schema, line, "kafka", n + 1) {
                Ok(_) => {
                    good.push_str(line);
                    good.push('\n');
                    kept.push(self.batch.lines[n].clone());
                }
                Err(e) => {
                    let error = self.bad_record(e);
                    self.leave_out(&self.batch.lines[n], line, &error).await?;
                }
            }
        }
        self.batch.text = good;
        self.batch.lines = kept;
        if self.batch.lines.is_empty() {
            return Ok(None);
        }
        Ok(Some(tributary_writer::rows_from_json_lines(&schema, &self.batch.text, "kafka", 1)?))
    }

    /// A writer's error about line `n` of the batch, as an error naming the
    /// record's position.
    fn bad_record(&self, e: tributary_writer::Error) -> Error {
        match e {
            tributary_writer::Error::BadRecord { record, field, reason, .. } => {
                match self.batch.lines.get(record.wrapping_sub(1)) {
                    Some(((topic, partition), offset)) => {
                        Error::BadRecord { topic: topic.clone(), partition: *partition, offset: *offset, field, reason }
                    }
                    None => Error::Writer(tributary_writer::Error::BadRecord {
                        input: "kafka".into(),
                        record,
                        field,
                        reason,
                    }),
                }
            }
            other => Error::Writer(other),
        }
    }

    /// Counts, logs and (with a dead-letter topic) delivers a bad record.
    async fn leave_out(&self, position: &(Partition, i64), line: &str, error: &Error) -> Result<()> {
        let ((topic, partition), offset) = position;
        self.stats.bad_records.fetch_add(1, Ordering::Relaxed);
        let table = self.client.location().name();
        metrics::counter!(names::INGEST_BAD_RECORDS, "table" => table, "topic" => topic.clone()).increment(1);
        tracing::warn!(%topic, partition, offset, error = %error, "bad record left out");
        let Some((to, producer)) = &self.dead_letters else { return Ok(()) };
        let (partition_text, offset_text, reason) = (partition.to_string(), offset.to_string(), error.to_string());
        let headers = OwnedHeaders::new()
            .insert(Header { key: "tributary.topic", value: Some(topic.as_str()) })
            .insert(Header { key: "tributary.partition", value: Some(partition_text.as_str()) })
            .insert(Header { key: "tributary.offset", value: Some(offset_text.as_str()) })
            .insert(Header { key: "tributary.error", value: Some(reason.as_str()) });
        let record: FutureRecord<'_, (), str> = FutureRecord::to(to).payload(line).headers(headers);
        producer.send(record, KAFKA_TIMEOUT).await.map_err(|(e, _)| {
            Error::kafka(format!("delivering topic {topic} partition {partition} offset {offset} to {to}"), e)
        })?;
        Ok(())
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
