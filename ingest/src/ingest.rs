//! The ingest loop: consume, batch, commit records and offsets together.
//!
//! ```text
//!  rebalance: assigned p ──> pause p, take over p's writer id (table lock),
//!                            seek p to the offset the table records, resume
//!  message of p ─────────> accept if p is ours and its offset is the next
//!                          one; append its value to the open batch
//!  N records, T seconds ─> seal the batch: a task decodes it, writes it and
//!  or B bytes               commits it with the next offset of every
//!                           partition it holds, each under its writer id,
//!                           in the completing hold; the loop consumes the
//!                           next batch meanwhile
//!  commit done ──────────> Kafka's group offsets (monitoring only); a full
//!                          open batch is sealed next
//!  rebalance: revoked p ─> an open batch holding p commits (after the batch
//!                          in flight); then p is forgotten
//! ```
//!
//! One batch commits at a time. While it does and the next one is full,
//! consuming stops; if the commit still runs after [`PAUSE_AFTER`] (the
//! writer waits out compaction's backpressure, say), the partitions are
//! paused, and the loop keeps polling the consumer, so the group does not
//! evict the process, and memory stays at two batches.
//!
//! A process that lost a partition without knowing (stopped, cut off) and
//! commits it later fails: the new owner took the writer id over, and the
//! commit is fenced and withdrawn. That batch and the open one are dropped;
//! partitions still this process's go back to their committed offsets, and
//! the fenced ones are forgotten.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rdkafka::Message;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::FutureProducer;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{Instant, Sleep};
use tributary_format::ErrorKind;
use tributary_timeline::metrics as names;
use tributary_writer::{SourceLease, WriteClient};

use crate::batch::{Batch, Position};
use crate::commit::{Committer, Flushed};
use crate::context::{Context, Event, Partition};
use crate::error::{Error, Result};
use crate::position;
use crate::settings::{IngestSettings, OnBadRecord, StartAt};
use crate::stats::{IngestStats, IngestSummary};
use crate::values::Values;

/// How long a seek, a pause or a group offset commit may take.
const KAFKA_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the batches in flight and open may take to commit on shutdown
/// before they are abandoned.
const SHUTDOWN_COMMIT: Duration = Duration::from_secs(30);

/// Waits between attempts at a seek the client refused for now.
const SEEK_RETRY: Duration = Duration::from_millis(20);

/// Waits between attempts after a commit failed for a reason that may pass.
const RETRY_BACKOFF: Duration = Duration::from_secs(1);

/// How long consuming may stop for a full batch waiting on the commit in
/// flight before the partitions are paused and polling resumes.
const PAUSE_AFTER: Duration = Duration::from_secs(5);

/// How often the loop polls the consumer when nothing else wakes it.
const POLL_EVERY: Duration = Duration::from_secs(1);

/// Consumer properties the job sets unless its settings do:
/// - the client's statistics (each partition's lag) every 5 s;
/// - a fetcher whose local queue is full looks again after 10 ms, not
///   1 s: with 1 s, a job consuming a backlog waited for its fetcher most
///   of the time (1 M records of the peers workload in 8.3 s; 2.5 s with
///   10 ms, at 7 % less CPU; 3.9 s with 0, at 32 % more).
const CONSUMER_DEFAULTS: &[(&str, &str)] = &[("statistics.interval.ms", "5000"), ("fetch.queue.backoff.ms", "10")];

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

/// A running ingest job ([`Ingest::new`], [`Ingest::run`]).
pub struct Ingest {
    settings: IngestSettings,
    consumer: StreamConsumer<Context>,
    events: mpsc::UnboundedReceiver<Event>,
    committer: Committer,
    values: Arc<Values>,
    owned: HashMap<Partition, Owned>,
    /// Partitions being revoked, while what the batches hold of them
    /// commits under their leases: no longer consumed, and never sought.
    leaving: HashMap<Partition, Owned>,
    batch: Batch,
    /// The batch being committed: its task.
    in_flight: Option<JoinHandle<Flushed>>,
    /// Since when the open batch is full while a commit is in flight.
    full_since: Option<Instant>,
    /// Whether the owned partitions are paused for that.
    paused: bool,
    /// Fires every [`POLL_EVERY`]; reset when it fires, not per step.
    poll_timer: Pin<Box<Sleep>>,
    /// Fires at the open batch's commit deadline, `armed`; reset only when
    /// that deadline changes (a timer made per step would be registered
    /// with the runtime and dropped once per message).
    due_timer: Pin<Box<Sleep>>,
    armed: Option<Instant>,
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
        let values = Arc::new(Values::new(&settings, client.schema())?);
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
        // librdkafka's defaults, where the job wants others (a property
        // the settings name wins).
        for (k, v) in CONSUMER_DEFAULTS {
            if !settings.kafka.contains_key(*k) {
                config.set(*k, *v);
            }
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
        let committer = Committer {
            client,
            values: values.clone(),
            on_bad_record: settings.on_bad_record.clone(),
            dead_letters,
            stats: stats.clone(),
        };
        Ok(Self {
            settings,
            consumer,
            events,
            committer,
            values,
            owned: HashMap::new(),
            leaving: HashMap::new(),
            batch: Batch::default(),
            in_flight: None,
            full_since: None,
            paused: false,
            poll_timer: Box::pin(tokio::time::sleep(POLL_EVERY)),
            due_timer: Box::pin(tokio::time::sleep(POLL_EVERY)),
            armed: None,
            stats,
        })
    }

    /// The job's counters, shared: read them while [`Ingest::run`] runs.
    pub fn stats(&self) -> Arc<IngestStats> {
        self.stats.clone()
    }

    /// Consumes and commits until `shutdown` resolves, then commits the
    /// batches in flight and open (each all or, should that fail, none of
    /// it) and leaves the group. Returns the first error that stops the
    /// job: a bad record under [`OnBadRecord::Fail`], or a table or Kafka
    /// error that retrying does not cure. Committed records and offsets
    /// stay committed either way.
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) -> Result<IngestSummary> {
        tokio::pin!(shutdown);
        let result = loop {
            // The shutdown ends any step: a takeover cut short leaves
            // nothing half done, and the commit in flight runs on.
            let stopping = tokio::select! {
                biased;
                () = &mut shutdown => true,
                r = self.step() => match r {
                    Ok(()) => false,
                    Err(e) => break Err(e),
                },
            };
            if stopping {
                break match tokio::time::timeout(SHUTDOWN_COMMIT, self.commit_held()).await {
                    Ok(r) => r,
                    Err(_) => {
                        tracing::warn!("the open batch did not commit in {SHUTDOWN_COMMIT:?}; abandoned");
                        Ok(())
                    }
                };
            }
        };
        if let Some(task) = self.in_flight.take() {
            // A failed job leaves its commit in flight unfinished: an
            // instant left inflight is a failed write, rolled back later.
            task.abort();
        }
        self.consumer.unsubscribe();
        // A commit begun for the next batch is withdrawn, not left pending.
        self.committer.client.close().await;
        result?;
        Ok(IngestSummary {
            records: self.stats.records.load(Ordering::Relaxed),
            commits: self.stats.commits.load(Ordering::Relaxed),
            bad_records: self.stats.bad_records.load(Ordering::Relaxed),
        })
    }

    /// Commits what the job holds: waits for the commit in flight, then
    /// commits the open batch if that one succeeded. On shutdown, and
    /// before partitions the open batch holds are revoked.
    ///
    /// Cancel-safe: the commit in flight stays in `in_flight` until its
    /// outcome is handled, so a later call waits for it rather than
    /// committing beside it.
    async fn commit_held(&mut self) -> Result<()> {
        if !self.settle().await? {
            return Ok(());
        }
        if self.batch.advances() {
            self.seal();
            self.settle().await?;
        }
        Ok(())
    }

    /// Waits for the commit in flight, if any, and handles its outcome:
    /// whether it succeeded (or there was none).
    async fn settle(&mut self) -> Result<bool> {
        let Some(task) = self.in_flight.as_mut() else { return Ok(true) };
        let flushed = join(task).await?;
        self.in_flight = None;
        let succeeded = flushed.result.is_ok();
        self.on_flushed(flushed).await?;
        Ok(succeeded)
    }

    /// Whether the open batch is as large as a batch may be.
    fn full(&self) -> bool {
        self.batch.len() >= self.settings.commit_records || self.batch.bytes() >= self.settings.commit_bytes
    }

    /// One step: a rebalance, a commit done, a record, or a commit that is
    /// due.
    async fn step(&mut self) -> Result<()> {
        let idle = self.in_flight.is_none();
        let due = self.batch.first_at.filter(|_| idle).map(|t| t + self.settings.commit_interval);
        if due != self.armed {
            if let Some(t) = due {
                self.due_timer.as_mut().reset(t);
            }
            self.armed = due;
        }
        // A full batch waits for the commit in flight: consuming stops,
        // unless the partitions are paused, when polling goes on.
        let consume = !self.full() || self.paused;
        let in_flight = &mut self.in_flight;
        tokio::select! {
            biased;
            Some(event) = self.events.recv() => self.on_event(event).await?,
            flushed = wait(in_flight) => {
                self.in_flight = None;
                self.on_flushed(flushed?).await?;
            }
            () = &mut self.due_timer, if self.armed.is_some() => {
                self.armed = None;
                self.seal();
            }
            () = &mut self.poll_timer => self.poll_timer.as_mut().reset(Instant::now() + POLL_EVERY),
            message = self.consumer.recv(), if consume => match message {
                Ok(m) => {
                    let at = ((m.topic().to_string(), m.partition()), m.offset());
                    let (owned, batch, values) = (&mut self.owned, &mut self.batch, &self.values);
                    let bad = Self::take(owned, batch, values, &self.settings, &self.stats, at, m.key(), m.payload())?;
                    drop(m);
                    if let Some((at, error, value)) = bad {
                        self.committer.leave_out(&at, &value, &error).await?;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "consuming failed; retrying"),
            },
        }
        if self.full() {
            if self.in_flight.is_none() {
                self.seal();
            } else {
                let since = *self.full_since.get_or_insert_with(Instant::now);
                if !self.paused && since.elapsed() >= PAUSE_AFTER {
                    self.pause(true)?;
                }
            }
        }
        Ok(())
    }

    /// Pauses (`true`) or resumes every owned partition.
    fn pause(&mut self, pause: bool) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        for p in self.owned.keys() {
            tpl.add_partition(&p.0, p.1);
        }
        if pause {
            self.stats.pauses.fetch_add(1, Ordering::Relaxed);
            tracing::info!(partitions = self.owned.len(), "consumption paused: the commit in flight still runs");
            self.consumer.pause(&tpl).map_err(|e| Error::kafka("pausing the owned partitions", e))?;
        } else {
            self.consumer.resume(&tpl).map_err(|e| Error::kafka("resuming the owned partitions", e))?;
        }
        self.paused = pause;
        Ok(())
    }

    /// Hands the open batch to a commit task.
    fn seal(&mut self) {
        if !self.batch.advances() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        let positions: Vec<(SourceLease, String)> = batch
            .ends
            .iter()
            .filter_map(|(p, next)| {
                let owned = self.owned.get(p).or_else(|| self.leaving.get(p));
                owned.map(|o| (o.lease.clone(), position::render(*next)))
            })
            .collect();
        self.in_flight = Some(tokio::spawn(self.committer.clone().commit(batch, positions)));
    }

    /// A commit finished: on success its offsets are the partitions'
    /// committed ones; on a failure retrying may cure, the open batch goes
    /// too and every partition goes back to its committed offset.
    async fn on_flushed(&mut self, flushed: Flushed) -> Result<()> {
        self.full_since = None;
        let retry = match flushed.result {
            Ok(summary) => {
                let mut tpl = TopicPartitionList::new();
                for (p, next) in &flushed.ends {
                    if let Some(owned) = self.owned.get_mut(p) {
                        owned.committed = Offset::Offset(*next);
                        let _ = tpl.add_partition_offset(&p.0, p.1, Offset::Offset(*next));
                    }
                }
                // Kafka's group offsets, for monitoring: the table's are
                // the ones that count.
                if let Err(e) = self.consumer.commit(&tpl, CommitMode::Async) {
                    tracing::debug!(error = %e, "committing group offsets failed");
                }
                self.stats.records.fetch_add(flushed.records as u64, Ordering::Relaxed);
                self.stats.commits.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut last) = self.stats.last_commit.lock() {
                    *last = Some(summary.instant.to_string());
                }
                let table = self.committer.client.location().name();
                for (topic, n) in flushed.per_topic {
                    metrics::counter!(names::INGEST_RECORDS, "table" => table.clone(), "topic" => topic).increment(n);
                }
                metrics::counter!(names::INGEST_COMMITS, "table" => table).increment(1);
                tracing::info!(instant = %summary.instant, records = flushed.records, "committed");
                false
            }
            Err(e) if e.kind() == ErrorKind::Unavailable => {
                tracing::warn!(error = %e, "commit failed; consuming again from the committed offsets");
                true
            }
            Err(e) if e.kind() == ErrorKind::Conflict => {
                tracing::warn!(error = %e, "commit fenced: partitions moved to another process");
                self.forget_fenced().await?;
                true
            }
            Err(e) => return Err(e),
        };
        if retry {
            self.stats.retries.fetch_add(1, Ordering::Relaxed);
            let mut rewind: Vec<Partition> = flushed.ends.into_keys().collect();
            rewind.extend(std::mem::take(&mut self.batch).ends.into_keys());
            rewind.sort();
            rewind.dedup();
            self.rewind(&rewind).await;
            tokio::time::sleep(RETRY_BACKOFF).await;
        }
        if self.paused {
            self.pause(false)?;
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
                // Said as the revocation arrives, before the commit of
                // what the batch holds of them.
                tracing::info!(?partitions, "partitions revoked");
                // The client no longer fetches them: a failed commit must
                // not send them back to their offsets (a seek of a
                // partition not assigned is refused until it times out).
                for p in &partitions {
                    if let Some(owned) = self.owned.remove(p) {
                        self.leaving.insert(p.clone(), owned);
                    }
                }
                if partitions.iter().any(|p| self.batch.ends.contains_key(p)) {
                    // What was consumed of them is committed, after the
                    // batch in flight. The group does not wait for it: if
                    // it completes before the new owner takes their writer
                    // ids over, the new owner resumes after it; if not
                    // (or this process was stopped or cut off), the commit
                    // is fenced, nothing of it shows, and the partitions
                    // still ours rewind.
                    self.commit_held().await?;
                }
                self.leaving.clear();
            }
        }
        self.stats.partitions.store(self.owned.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Takes partition `p`'s writer id over and moves `p` to the offset the
    /// table records for it, then resumes it (unless all are paused).
    async fn take_over(&mut self, p: Partition) -> Result<()> {
        let id = position::source_id(&self.settings.group, &p.0, p.1);
        let (lease, status) = self.committer.client.take_over_source(&id).await?;
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
        if !self.paused {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition(&p.0, p.1);
            self.consumer.resume(&tpl).map_err(|e| Error::kafka(format!("resuming {} partition {}", p.0, p.1), e))?;
        }
        tracing::info!(topic = %p.0, partition = p.1, offset = ?committed, generation = lease.generation(), "partition assigned");
        self.owned.insert(p, Owned { lease, committed, next: offset_of(committed) });
        Ok(())
    }

    /// Moves `p` to `offset`. A partition assigned a moment ago may not
    /// fetch yet, and librdkafka then refuses the seek (its erroneous
    /// state): that is retried until it fetches.
    async fn seek(&self, p: &Partition, offset: Offset) -> Result<()> {
        let started = Instant::now();
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

    /// Takes a message of partition `p` at `offset` into the open batch,
    /// unless it is not this process's to take. A bad value fails the job,
    /// or comes back (copied) to be left out.
    #[allow(clippy::too_many_arguments)]
    fn take(
        owned: &mut HashMap<Partition, Owned>,
        batch: &mut Batch,
        values: &Values,
        settings: &IngestSettings,
        stats: &IngestStats,
        at: Position,
        key: Option<&[u8]>,
        payload: Option<&[u8]>,
    ) -> Result<Option<(Position, Error, Vec<u8>)>> {
        let Some(owned) = owned.get_mut(&at.0) else {
            // Fetched before a revocation or before the partition was
            // taken over: it is read again from the table's offset.
            return Ok(None);
        };
        if owned.next.is_some_and(|n| at.1 < n) {
            return Ok(None);
        }
        owned.next = Some(at.1 + 1);
        if !batch.advances() {
            tracing::debug!(topic = %at.0.0, partition = at.0.1, offset = at.1, "batch opened");
        }
        batch.advance(&at);
        let Some(value) = payload else {
            // A tombstone (a null value): nothing to write; its offset is
            // committed with the batch.
            stats.tombstones.fetch_add(1, Ordering::Relaxed);
            return Ok(None);
        };
        let Err((field, reason)) = values.accept(batch, at.clone(), key, value) else {
            return Ok(None);
        };
        let ((topic, partition), offset) = at.clone();
        let error = Error::BadRecord { topic, partition, offset, field, reason };
        if settings.on_bad_record == OnBadRecord::Fail {
            return Err(error);
        }
        Ok(Some((at, error, value.to_vec())))
    }

    /// Sends partitions `ps` back to their committed offsets (no commit is
    /// in flight when a failed one rewinds).
    async fn rewind(&mut self, ps: &[Partition]) {
        for p in ps {
            let Some(to) = self.owned.get(p).map(|o| o.committed) else { continue };
            if let Err(e) = self.seek(p, to).await {
                tracing::warn!(topic = %p.0, partition = p.1, error = %e, "rewinding failed");
            }
            if let Some(owned) = self.owned.get_mut(p) {
                owned.next = offset_of(to);
            }
        }
    }

    /// Forgets the partitions whose writer ids another process took over.
    async fn forget_fenced(&mut self) -> Result<()> {
        let mut lost = Vec::new();
        for (p, owned) in &self.owned {
            let status = self.committer.client.checkpoint(owned.lease.id()).await?;
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
}

/// The offset a seek to `to` makes next, when it is a number.
fn offset_of(to: Offset) -> Option<i64> {
    match to {
        Offset::Offset(n) => Some(n),
        _ => None,
    }
}

/// The commit in flight's outcome; never, when there is none.
async fn wait(in_flight: &mut Option<JoinHandle<Flushed>>) -> Result<Flushed> {
    match in_flight {
        Some(task) => join(task).await,
        None => std::future::pending().await,
    }
}

/// A commit task's outcome.
async fn join(
    task: impl std::future::Future<Output = std::result::Result<Flushed, tokio::task::JoinError>>,
) -> Result<Flushed> {
    task.await.map_err(|e| Error::Internal { what: "a batch's commit task".into(), reason: e.to_string() })
}
