//! An open commit: routing rows to the writer tasks, then completing the
//! instant with the files they wrote (or withdrawing it).

use std::sync::Arc;
use std::sync::atomic::Ordering as AtomicOrdering;

use arrow::array::{Array, AsArray, RecordBatch, StringArray};
use arrow::datatypes::DataType;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tributary_format::{CommitMetadata, WriteStat};
use tributary_format::{TableDatumEncoder, TableDatums};
use tributary_timeline::partition_file;
use tributary_timeline::{Action, Instant, InstantTime, NULL_PARTITION};
use tributary_timeline::{
    CommitFence, Completion, Heartbeat, begin_instant, complete_instant_then_begin, delete_if_exists, withdraw_instant,
    withdraw_or_leave,
};
use tributary_timeline::{MARKER_APPEND, create_marker, remove_markers, rollback_files};
use tributary_timeline::{SEQUENCE_GROUPS_KEY, SequenceGroup};
use tributary_timeline::{TableConfig, TableLocation, Timeline, replaced_groups, replaces_groups};

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::backpressure::{Group, LogTally, at_bound, logs_per_group, next_poll};

use tributary_timeline::CHECKPOINT_KEY_PREFIX;

use crate::error::{Error, Result};
pub(crate) use crate::file_write::FileWrite;
use crate::input::{Rows, rows_from_batch, rows_from_json};
use crate::piece::Piece;
use crate::shared::Shared;
use crate::source::SourceLease;
use crate::task::TaskContext;

/// Extra-metadata key prefix under which each commit also records its
/// checkpoint (`tributary.checkpoint.<writer id>`), for other tools; lookups
/// read the writer's state file instead.
pub const CHECKPOINT_PREFIX: &str = CHECKPOINT_KEY_PREFIX;

/// What a completed commit did.
#[derive(Debug, Clone)]
pub struct CommitSummary {
    /// The commit's requested instant.
    pub instant: InstantTime,
    /// Its completion time.
    pub completed: InstantTime,
    /// Files written.
    pub files: Vec<FileWrite>,
    /// Rows the commit was given (its records and deletes before each key's
    /// versions were combined: [`crate::WriteSettings::combine`]).
    pub rows: u64,
}

impl CommitSummary {
    /// Data records plus deletes written.
    pub fn records(&self) -> u64 {
        self.files.iter().map(|f| f.records + f.deletes).sum()
    }

    /// Bytes written.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }
}

/// An open commit. Finish it with [`Commit::commit`] or [`Commit::abort`].
#[derive(Debug)]
pub struct Commit {
    shared: Arc<Shared>,
    instant: InstantTime,
    senders: Vec<mpsc::Sender<Piece>>,
    /// Each writer task's number and handle, in the order of `senders`.
    handles: Vec<(usize, JoinHandle<Result<Vec<FileWrite>>>)>,
    heartbeat: Option<Heartbeat>,
    /// The Avro encoder of the table columns, once a write took one (writes
    /// encode their rows when versions do not combine).
    encoder: Option<TableDatumEncoder>,
    route: Vec<u32>,
    part_of_row: Vec<u32>,
    rows: u64,
    cancelled: Arc<std::sync::atomic::AtomicBool>,
    /// A writer task failed during a write: the commit can only be aborted.
    failed: bool,
    /// The writer id's generation this commit was started under (0: the
    /// client never registered).
    generation: u64,
    /// The committed checkpoint of the writer id this commit began from,
    /// when it shares the id optimistically
    /// ([`Commit::complete_only_after`]) rather than by generation.
    began: Option<Option<String>>,
    /// The `operationType` its metadata records.
    operation: &'static str,
    /// The change-data files it carries ([`Commit::write_change_data`]).
    change_data: Vec<WriteStat>,
    /// Extra metadata its caller recorded ([`Commit::set_extra_metadata`]).
    extra: Vec<(String, String)>,
}

/// Column `index` of `rows` as text (the partition path's values). A
/// failure comes from the table's schema (a partition type with no text
/// form), so it names the table and the field.
fn as_strings(shared: &Shared, rows: &Rows, index: usize, what: &str) -> Result<Arc<StringArray>> {
    let col = rows.batch.column(index);
    let c = match col.data_type() {
        DataType::Utf8 => col.clone(),
        _ => arrow::compute::cast(col, &DataType::Utf8).map_err(|e| Error::InvalidInput {
            what: format!("{}: {what} `{}`", shared.loc, shared.schema.field_name(index)),
            reason: format!("cannot render {} as text: {e}", col.data_type()),
        })?,
    };
    Ok(Arc::new(c.as_string::<i32>().clone()))
}

impl Commit {
    /// Starts a commit of `shared`'s client ([`crate::WriteClient::start_commit`]).
    pub(crate) async fn start(shared: Arc<Shared>) -> Result<Self> {
        // Data commits of a table that keeps a change log leave Hudi's CDC
        // query nothing to infer; a CDC mode Tributary does not write is
        // refused before anything is.
        let operation = match shared.config.change_log()? {
            true => tributary_timeline::CHANGE_LOGGED_OPERATION,
            false => "UPSERT",
        };
        if let Some((begun, heartbeat)) = shared.next.take() {
            return Self::open(shared, begun.requested, heartbeat, operation);
        }
        let timeline = shared.timeline.clone();
        let instant = shared
            .time
            .with_time_fenced(|t, fence| async move {
                begin_instant(&timeline, &Instant::requested(t.clone(), Action::DeltaCommit), &fence).await?;
                Ok(t)
            })
            .await?;
        let heartbeat = Self::beat(&shared, &instant).await?;
        Self::open(shared, instant, heartbeat, operation)
    }

    /// Starts the heartbeat of `instant`, begun by this client.
    async fn beat(shared: &Shared, instant: &InstantTime) -> tributary_timeline::Result<Heartbeat> {
        Heartbeat::start(shared.loc.clone(), instant, shared.time.clock().clone(), shared.settings.heartbeat_interval)
            .await
    }

    /// Spawns the writer tasks of a commit whose instant is inflight and
    /// whose heartbeat runs.
    fn open(shared: Arc<Shared>, instant: InstantTime, heartbeat: Heartbeat, operation: &'static str) -> Result<Self> {
        let tasks = shared.settings.tasks;
        let budget = (shared.settings.buffer_bytes / tasks).max(1);
        let mut senders = Vec::with_capacity(tasks);
        let mut handles = Vec::with_capacity(tasks);
        let cancelled = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let generation = shared.writer.generation();
        for task in 0..tasks {
            let (tx, rx) = mpsc::channel(shared.settings.channel_depth.max(1));
            let ctx = TaskContext::new(shared.clone(), instant.clone(), task as u64, budget, cancelled.clone());
            handles.push((task, tokio::spawn(ctx.run(rx))));
            senders.push(tx);
        }
        Ok(Commit {
            shared,
            instant,
            senders,
            handles,
            heartbeat: Some(heartbeat),
            encoder: None,
            route: Vec::new(),
            part_of_row: Vec::new(),
            rows: 0,
            cancelled,
            failed: false,
            generation,
            began: None,
            operation,
            change_data: Vec::new(),
            extra: Vec::new(),
        })
    }

    /// Stores the change-data file (`.cdc`) of file group `file_id` in
    /// `partition`: `content`, encoded log blocks of change records
    /// ([`tributary_format::encode_cdc_content`]) holding `records` changes,
    /// under this commit's instant, its marker first. The commit then
    /// becomes a change-log commit: its metadata names the file in the
    /// group's `cdcStats` and records an operation Hudi's CDC query reads
    /// changes from (`UPSERT`); `docs/design.md`, "Change log".
    pub async fn write_change_data(
        &mut self,
        partition: &str,
        file_id: &str,
        content: bytes::Bytes,
        records: u64,
    ) -> Result<()> {
        let loc = &self.shared.loc;
        let name = tributary_timeline::LogFileName {
            file_id: file_id.to_string(),
            instant: self.instant.clone(),
            version: 1,
            write_token: Some(tributary_timeline::WriteToken::new(0, 0, 0)),
            suffix: tributary_timeline::CHANGE_DATA_SUFFIX.to_string(),
        }
        .to_string();
        let rel = partition_file(partition, &name);
        create_marker(loc, &self.instant, partition, &name, MARKER_APPEND).await?;
        let size = content.len() as i64;
        match loc.create(&loc.join(&rel), object_store::PutPayload::from(content)).await {
            Ok(_) => {}
            Err(tributary_timeline::StorageError::AlreadyExists { .. }) => {
                return Err(Error::Internal {
                    table: loc.to_string(),
                    instant: self.instant.to_string(),
                    what: format!("storing the change data of {partition}/{file_id}"),
                    reason: format!("{rel} was written already"),
                });
            }
            Err(e) => return Err(e.into()),
        }
        self.operation = "UPSERT";
        self.change_data.push(WriteStat {
            file_id: file_id.to_string(),
            path: rel.clone(),
            prev_commit: self.instant.to_string(),
            num_writes: records as i64,
            total_write_bytes: size,
            file_size_in_bytes: size,
            partition_path: partition.to_string(),
            cdc_stats: Some(std::collections::BTreeMap::from([(rel, size)])),
            ..Default::default()
        });
        Ok(())
    }

    /// Records `value` under `key` in the commit's extra metadata, beside
    /// what the commit records itself (its schema, sequence groups and
    /// checkpoints, which a key of the same name does not replace).
    pub fn set_extra_metadata(&mut self, key: &str, value: &str) {
        self.extra.push((key.to_string(), value.to_string()));
    }

    /// Makes the commit share its client's writer id optimistically: it
    /// completes only if the id's committed checkpoint is still `began`
    /// (`None`: the id has none), the checkpoint its work started from,
    /// whichever clients commit under the id, registered or not. Another
    /// commit that recorded a checkpoint first refuses it as a conflict
    /// ([`tributary_timeline::Error::Overtaken`]); it is withdrawn as by
    /// [`Commit::abort`]. Registering fences nothing then: no commit of the
    /// id blocks another's progress, and none records its checkpoint over a
    /// newer one.
    pub fn complete_only_after(&mut self, began: Option<&str>) {
        self.began = Some(began.map(str::to_string));
    }

    /// The commit's requested instant; log files are named by it.
    pub fn instant(&self) -> &InstantTime {
        &self.instant
    }

    /// Rows accepted so far.
    pub fn rows_written(&self) -> u64 {
        self.rows
    }

    /// Validates an Arrow batch and writes it.
    pub async fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        let rows = rows_from_batch(&self.shared.schema, batch, "batch")?;
        self.write(rows).await
    }

    /// Validates JSON records (the row API) and writes them. `source` and
    /// `first_record` name records in errors.
    pub async fn write_json(&mut self, records: &[serde_json::Value], source: &str, first_record: usize) -> Result<()> {
        let rows = rows_from_json(&self.shared.schema, records, source, first_record)?;
        self.write(rows).await
    }

    /// Routes validated rows to the writer tasks. Waits when their channels are full.
    pub async fn write(&mut self, rows: Rows) -> Result<()> {
        if self.failed {
            return Err(self.failed_error());
        }
        if rows.is_empty() {
            return Ok(());
        }
        let s = self.shared.clone();
        let schema = &s.schema;
        // The keys were built with the rows (`Rows::keys`); deletes carry
        // the same keys, so every version of a key routes alike.
        let keys = rows.keys().keys().clone();
        let n = rows.len();
        s.index.route(rows.keys(), &mut self.route);
        // Partition of each row, interned.
        let mut partitions: Vec<Arc<str>> = Vec::new();
        self.part_of_row.clear();
        match schema.partition_index() {
            None => {
                partitions.push(Arc::from(""));
                self.part_of_row.resize(n, 0);
            }
            Some(p) => {
                let values = as_strings(&s, &rows, p, "partition field")?;
                let field = schema.field_name(p);
                let mut seen: foldhash::HashMap<Option<&str>, u32> = foldhash::HashMap::default();
                for r in 0..n {
                    // A value spelled as the null folder is that folder.
                    let v = (!values.is_null(r)).then(|| values.value(r)).filter(|v| *v != NULL_PARTITION);
                    let slot = *seen.entry(v).or_insert_with(|| {
                        partitions.push(Arc::from(s.config.partition_path(field, v)));
                        (partitions.len() - 1) as u32
                    });
                    self.part_of_row.push(slot);
                }
            }
        }
        // Rows of each (partition, bucket), in that order.
        let buckets = s.index.num_buckets() as usize;
        let mut groups: Vec<Vec<u32>> = vec![Vec::new(); partitions.len() * buckets];
        for (r, (&p, &b)) in self.part_of_row.iter().zip(&self.route).enumerate() {
            groups[p as usize * buckets + b as usize].push(r as u32);
        }
        // What a row holds, about: its share of the batch's columns and of
        // its keys (the bytes they use: a batch read from a file may share
        // one larger buffer between its columns).
        let used = |a: &dyn Array| a.to_data().get_slice_memory_size().unwrap_or_else(|_| a.get_array_memory_size());
        let batch_bytes: usize = rows.batch.columns().iter().map(|c| used(c.as_ref())).sum();
        let row_bytes = (batch_bytes + used(keys.as_ref())).div_ceil(n);
        // Rows that may combine are encoded by the writer tasks, once they
        // know which rows are kept; others are encoded here, all at once.
        let datums = match s.combines {
            true => None,
            false => Some(Arc::new(self.encode(&rows)?)),
        };
        let rows = Arc::new(rows);
        for (g, indices) in groups.into_iter().enumerate() {
            if indices.is_empty() {
                continue;
            }
            let bucket = (g % buckets) as u32;
            let task = (bucket as usize) % self.senders.len();
            let piece = Piece {
                rows: rows.clone(),
                datums: datums.clone(),
                row_bytes,
                keys: keys.clone(),
                partition: partitions[g / buckets].clone(),
                bucket,
                indices,
            };
            if self.senders[task].send(piece).await.is_err() {
                // The task stopped: its error surfaces at commit.
                return self.task_failure(task).await;
            }
        }
        self.rows += n as u64;
        Ok(())
    }

    /// The Avro datums of `rows`' table columns, by the commit's encoder.
    /// An encoder that failed may hold part of the batch, so it is dropped.
    fn encode(&mut self, rows: &Rows) -> Result<TableDatums> {
        let mut encoder = match self.encoder.take() {
            Some(e) => e,
            None => self.shared.take_encoder()?,
        };
        let datums = encoder.encode(&rows.batch).map_err(|cause| Error::Encode {
            table: self.shared.loc.to_string(),
            instant: self.instant.to_string(),
            input: format!("{} rows of a write", rows.len()),
            cause: Box::new(cause),
        })?;
        self.encoder = Some(encoder);
        Ok(datums)
    }

    async fn task_failure(&mut self, task: usize) -> Result<()> {
        // Its rows are lost and the remaining tasks would own other buckets:
        // nothing more can be written or committed.
        self.failed = true;
        let (number, handle) = self.handles.remove(task);
        self.senders.remove(task);
        match handle.await {
            Ok(Err(e)) => Err(e),
            Ok(Ok(_)) => Err(self.task_error(number, "stopped before its input ended".into())),
            Err(e) => Err(self.task_error(number, join_failure(e))),
        }
    }

    fn failed_error(&self) -> Error {
        Error::Failed { table: self.shared.loc.to_string(), instant: self.instant.to_string() }
    }

    /// A writer task that panicked or stopped unexpectedly: a bug.
    fn task_error(&self, task: usize, reason: String) -> Error {
        Error::Task { table: self.shared.loc.to_string(), instant: self.instant.to_string(), task, reason }
    }

    async fn finish_tasks(&mut self) -> Result<Vec<FileWrite>> {
        self.senders.clear();
        let mut files = Vec::new();
        let mut first_err = None;
        let handles = std::mem::take(&mut self.handles);
        for (task, h) in handles {
            match h.await {
                Ok(Ok(f)) => files.extend(f),
                Ok(Err(e)) => first_err = first_err.or(Some(e)),
                Err(e) => first_err = first_err.or_else(|| Some(self.task_error(task, join_failure(e)))),
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(files),
        }
    }

    /// Completes the commit. Visible to readers once this returns.
    pub async fn commit(self) -> Result<CommitSummary> {
        self.commit_with_checkpoint(None).await
    }

    /// Completes a commit that wrote no rows as a schema change: its
    /// metadata records the client's schema (merged with the one in force)
    /// and `operationType` `ALTER_SCHEMA`, Hudi's operation for a commit
    /// that only changes the schema.
    pub async fn commit_schema_change(mut self) -> Result<CommitSummary> {
        if self.rows > 0 {
            let what = format!("schema change {} of {}", self.instant, self.shared.loc);
            self.cleanup().await;
            return Err(Error::InvalidInput { what, reason: "a schema change writes no rows".into() });
        }
        self.operation = "ALTER_SCHEMA";
        self.commit_with_checkpoint(None).await
    }

    /// [`Commit::commit_schema_change`] that never restates the schema:
    /// it is requested after every write it could be behind.
    async fn restate(mut self) -> Result<CommitSummary> {
        self.operation = "ALTER_SCHEMA";
        Ok(self.complete(None, &[]).await?.0)
    }

    /// Completes the commit, recording `checkpoint` (for example a source
    /// offset) under this client's writer id in the same atomic step: the
    /// checkpoint is in the writer id's state file (and in the commit's
    /// extra metadata) and is returned by lookups exactly when the commit is
    /// visible.
    ///
    /// If a newer client registered the writer id since this commit
    /// started ([`WriteClient::register`](crate::WriteClient::register)),
    /// it fails with a conflict ([`tributary_timeline::Error::Fenced`]),
    /// and its files are deleted and its instant withdrawn as by
    /// [`Commit::abort`]: nothing of it becomes visible.
    pub async fn commit_with_checkpoint(self, checkpoint: Option<String>) -> Result<CommitSummary> {
        self.commit_with_sources(checkpoint, &[]).await
    }

    /// [`Commit::commit_with_checkpoint`] that also records, in the same
    /// atomic step, the position of each source in `positions`: each
    /// lease's writer id gets its position as its checkpoint
    /// ([`WriteClient::take_over_source`](crate::WriteClient::take_over_source)).
    /// If another client took any of them over since, the commit fails with
    /// a conflict ([`tributary_timeline::Error::Fenced`], naming that id)
    /// and nothing of it becomes visible.
    pub async fn commit_with_sources(
        self,
        checkpoint: Option<String>,
        positions: &[(SourceLease, String)],
    ) -> Result<CommitSummary> {
        let shared = self.shared.clone();
        let (summary, behind) = self.complete(checkpoint, positions).await?;
        if behind {
            restate_schema(&shared).await;
        }
        Ok(summary)
    }

    /// [`Commit::commit_with_sources`] without the restating of the
    /// schema it may need; returns whether it does ([`record_schema`]).
    async fn complete(
        mut self,
        checkpoint: Option<String>,
        positions: &[(SourceLease, String)],
    ) -> Result<(CommitSummary, bool)> {
        let files = match self.finish_tasks().await {
            Ok(f) if !self.failed => f,
            Ok(_) => {
                self.cleanup().await;
                return Err(self.failed_error());
            }
            Err(e) => {
                self.cleanup().await;
                return Err(e);
            }
        };
        let s = self.shared.clone();
        let mut meta = CommitMetadata { operation_type: self.operation.into(), compacted: false, ..Default::default() };
        for (k, v) in &self.extra {
            meta.extra_metadata.insert(k.clone(), v.clone());
        }
        let ours_schema = s.schema.full_table_json();
        meta.extra_metadata.insert("schema".into(), ours_schema.clone());
        if !s.config.sequence_groups.is_empty() {
            let groups = SequenceGroup::render_list(&s.config.sequence_groups);
            meta.extra_metadata.insert(SEQUENCE_GROUPS_KEY.into(), groups);
        }
        if let Some(cp) = &checkpoint {
            meta.extra_metadata.insert(format!("{CHECKPOINT_PREFIX}{}", s.settings.writer_id), cp.clone());
        }
        for (lease, position) in positions {
            meta.extra_metadata.insert(format!("{CHECKPOINT_PREFIX}{}", lease.id()), position.clone());
        }
        for f in &files {
            meta.partition_to_write_stats.entry(f.partition.clone()).or_default().push(write_stat(f, &self.instant));
        }
        for stat in &self.change_data {
            meta.partition_to_write_stats.entry(stat.partition_path.clone()).or_default().push(stat.clone());
        }
        let content = meta.to_avro_container()?;
        let pending = Instant::requested(self.instant.clone(), Action::DeltaCommit);
        let ours = logs_per_group(&files);
        let partitions: Vec<&str> = {
            let mut p: Vec<&str> = ours.keys().map(|g| g.0.as_str()).collect();
            p.sort_unstable();
            p.dedup();
            p
        };
        let started = tokio::time::Instant::now();
        let mut waited = false;
        let mut attempts = 0;
        let look_failed = AtomicBool::new(false);
        // Set when this commit changes the schema in force while a write
        // requested after it has completed already (`record_schema`).
        let schema_behind = AtomicBool::new(false);
        let done = loop {
            // Backpressure: wait, outside the lock, until every group this
            // commit writes is below the bound.
            if let Some(tally) = &s.backpressure {
                let look = attempts > 0 || tally.lock().await.look_ahead(&partitions);
                if look && let Err(e) = self.wait_below(tally, &ours, &partitions, started, &mut waited).await {
                    break Err(e);
                }
            }
            attempts += 1;
            let (writer, instant) = (&s.writer, &self.instant);
            let fence = match &self.began {
                Some(began) => CommitFence::Checkpoint(began.as_deref()),
                None => CommitFence::Generation(self.generation),
            };
            let checkpoint = checkpoint.as_deref();
            let (ours, tally, folder) = (&ours, s.backpressure.as_ref(), &s.timeline);
            let (loc, config, partitions) = (&s.loc, &s.config, &partitions);
            let name = s.loc.to_string();
            let (look_failed, schema_behind) = (&look_failed, &schema_behind);
            let (meta, in_force) = (&meta, &s.in_force);
            let (ours_schema, base_schema) = (&ours_schema, &s.base_json);
            let before_visible = |c: InstantTime| async move {
                // Again under the lock, with the commits completed since.
                let mut replacing = true;
                let mut listing = None;
                if let Some(tally) = tally {
                    let mut tally = tally.lock().await;
                    let reads = match tally.refresh(loc, config, folder, partitions).await {
                        Ok(reads) => reads,
                        Err(e) => {
                            look_failed
                                .store(e.kind() == tributary_timeline::ErrorKind::Unavailable, Ordering::Relaxed);
                            return Err(e);
                        }
                    };
                    tally.looked_under_lock(reads);
                    if let Some((g, logs)) = tally.over(ours) {
                        return Err(at_bound(&name, instant, g, logs, tally.bound(), started.elapsed()));
                    }
                    replacing = tally.replacing();
                    listing = tally.take_listing();
                }
                let timeline = match listing {
                    Some(t) => t,
                    None => folder.load_active().await?,
                };
                // Only a listing under the lock shows a replacecommit or a
                // clustering completed or planned since the write began.
                if replacing {
                    check_not_replaced(loc, config, &timeline, ours, instant).await?;
                }
                let (content, behind) =
                    record_schema(&name, folder, config, &timeline, in_force, meta, base_schema, ours_schema, instant)
                        .await?;
                schema_behind.store(behind, Ordering::Relaxed);
                if fence != CommitFence::Generation(0) || checkpoint.is_some() {
                    // Fence and record the checkpoint in the same hold.
                    writer.before_visible(fence, instant, &c, checkpoint).await?;
                }
                // Each source's state file, at once: every commit waits
                // for this hold.
                let sources = positions.iter().map(|(lease, position)| {
                    let fence = CommitFence::Generation(lease.generation());
                    lease.state().before_visible(fence, instant, &c, Some(position))
                });
                futures::future::try_join_all(sources).await?;
                Ok(content)
            };
            // Begins the client's next commit in this hold, unless one is
            // kept already (another commit of this client began it).
            let next = s.settings.begin_next.filter(|_| s.next.is_empty()).map(|_| Action::DeltaCommit);
            match complete_instant_then_begin(
                &s.loc,
                &s.timeline,
                &s.time,
                &pending,
                content.clone(),
                Completion::Owned,
                before_visible,
                next,
            )
            .await
            {
                Err(tributary_timeline::Error::Backpressure { .. }) => continue,
                // The look under the lock failed on the store: nothing
                // was completed; look again from outside the lock.
                Err(_)
                    if look_failed.swap(false, Ordering::Relaxed)
                        && started.elapsed() < s.settings.backpressure_timeout =>
                {
                    continue;
                }
                other => break other,
            }
        };
        if waited {
            s.meters.backpressure_wait.record(started.elapsed());
        }
        let completed = match done {
            Ok((c, begun)) => {
                if let (Some(begun), Some(idle)) = (begun, s.settings.begin_next) {
                    self.keep_begun(begun, idle).await;
                }
                s.writer.completed(&self.instant);
                for (lease, _) in positions {
                    lease.state().completed(&self.instant);
                }
                c
            }
            Err(
                e @ (tributary_timeline::Error::Fenced { .. }
                | tributary_timeline::Error::Overtaken { .. }
                | tributary_timeline::Error::Backpressure { .. }
                | tributary_timeline::Error::InvalidInput { .. }
                | tributary_timeline::Error::Format(tributary_format::Error::SchemaConflict { .. })),
            ) => {
                if matches!(e, tributary_timeline::Error::InvalidInput { .. }) {
                    // A group was replaced since the client listed its
                    // partitions: the next commit lists them again, and
                    // writes a bucket an insert overwrite gave a new group
                    // into that group.
                    if let Ok(mut ids) = s.file_ids.lock() {
                        ids.clear();
                    }
                }
                self.cleanup().await;
                return Err(e.into());
            }
            Err(e @ tributary_timeline::Error::Withdrawn { .. }) => {
                self.discard_withdrawn(&files).await;
                return Err(e.into());
            }
            Err(e) => return Err(e.into()),
        };
        self.cleanup_markers().await?;
        if let Some(h) = self.heartbeat.take() {
            h.stop().await?;
        }
        if let Some(tally) = &s.backpressure {
            let mut tally = tally.lock().await;
            tally.committed(&self.instant, &completed, &ours);
            let (max, p99) = tally.spread();
            s.meters.logs_max.set(max as f64);
            s.meters.logs_p99.set(p99 as f64);
        }
        s.meters.upserts.increment(files.iter().map(|f| f.records).sum());
        s.meters.deletes.increment(files.iter().map(|f| f.deletes).sum());
        s.meters.commits.increment(1);
        let summary = CommitSummary { instant: self.instant.clone(), completed, files, rows: self.rows };
        Ok((summary, schema_behind.load(Ordering::Relaxed)))
    }

    /// Waits, outside the table lock, until every file group of `ours`
    /// is below the table's bound on uncompacted logs, or fails with
    /// [`tributary_timeline::Error::Backpressure`] once the commit has waited
    /// [`WriteSettings::backpressure_timeout`](crate::WriteSettings::backpressure_timeout)
    /// since `started`. The first wait is logged and counted; `waited`
    /// records that there was one.
    async fn wait_below(
        &self,
        tally: &tokio::sync::Mutex<LogTally>,
        ours: &HashMap<Group, usize>,
        partitions: &[&str],
        started: tokio::time::Instant,
        waited: &mut bool,
    ) -> tributary_timeline::Result<()> {
        let s = &self.shared;
        let mut poll = None;
        loop {
            // The tally is not held while sleeping: the client's other
            // commits check it under the table lock.
            let looked = {
                let mut tally = tally.lock().await;
                match tally.refresh(&s.loc, &s.config, &s.timeline, partitions).await {
                    Ok(_) => match tally.over(ours) {
                        None => return Ok(()),
                        Some((g, logs)) => Ok((g, logs, tally.bound())),
                    },
                    // A look the store failed is tried again at the next
                    // poll, until the timeout: the wait is no reason to
                    // fail a commit a retry would let through.
                    Err(e) if e.kind() == tributary_timeline::ErrorKind::Unavailable => Err(e),
                    Err(e) => return Err(e),
                }
            };
            let elapsed = started.elapsed();
            let (g, logs, bound) = match looked {
                Ok(found) => found,
                Err(e) if elapsed >= s.settings.backpressure_timeout => return Err(e),
                Err(e) => {
                    tracing::debug!(instant = %self.instant, error = %e, "looking at the log bound failed; looking again");
                    let next = next_poll(poll);
                    poll = Some(next);
                    tokio::time::sleep(next).await;
                    continue;
                }
            };
            if elapsed >= s.settings.backpressure_timeout {
                return Err(at_bound(&s.loc.to_string(), &self.instant, g, logs, bound, elapsed));
            }
            if !*waited {
                *waited = true;
                s.meters.backpressure_waits.increment(1);
                tracing::warn!(
                    table = %s.loc,
                    instant = %self.instant,
                    file_group = %format!("{}/{}", g.0, g.1),
                    logs,
                    bound,
                    "commit waits for compaction: the file group is at the table's bound on uncompacted log files"
                );
            }
            let next = next_poll(poll);
            poll = Some(next);
            tokio::time::sleep(next.min(s.settings.backpressure_timeout.saturating_sub(elapsed))).await;
        }
    }

    /// Abandons the commit: stops the tasks and deletes every file they wrote
    /// (found through the markers). Nothing of it is or becomes visible.
    pub async fn abort(mut self) -> Result<()> {
        // Tasks stop without flushing; one mid-write finishes it first, so
        // its marker and file exist before the rollback below looks.
        self.cancelled.store(true, AtomicOrdering::SeqCst);
        let _ = self.finish_tasks().await;
        self.cleanup().await;
        Ok(())
    }

    async fn cleanup(&mut self) {
        // The pending instant is withdrawn only once every file it wrote is
        // gone: a log file left behind by an instant no longer on the
        // timeline would read as committed, since readers (Hudi's too)
        // take an instant older than the active timeline for an archived,
        // completed one. When a delete fails, the instant stays pending and
        // its heartbeat goes stale, so recovery rolls it back.
        let withdrawn = match rollback_files(&self.shared.loc, &self.instant).await {
            Ok(_) => self.withdraw().await,
            Err(e) => Err(format!("deleting its files: {e}")),
        };
        if let Err(e) = withdrawn {
            tracing::warn!(instant = %self.instant, "aborted commit left for recovery to roll back: {e}");
            // Dropping the heartbeat stops the beats and leaves the file.
            drop(self.heartbeat.take());
            return;
        }
        self.stop_heartbeat().await;
    }

    /// After recovery withdrew the instant (this writer stalled past its
    /// heartbeat expiry), deletes the files its tasks wrote, some perhaps
    /// after the rollback looked: left behind, they would be orphans of an
    /// instant no longer on the timeline, which Hudi's readers take for
    /// archived and committed once the timeline starts after it. What a
    /// delete misses, crash included, the cleaner's orphan sweep removes.
    /// The files are deleted by name as well as through the markers: a
    /// task whose marker the rollback already deleted may have written its
    /// file after the rollback looked.
    async fn discard_withdrawn(&mut self, files: &[FileWrite]) {
        let loc = &self.shared.loc;
        for f in files {
            let path = loc.join(&partition_file(&f.partition, &f.name));
            if let Err(e) = delete_if_exists(loc, &path).await {
                tracing::warn!(instant = %self.instant, file = %path, "deleting a withdrawn commit's file: {e}");
            }
        }
        if let Err(e) = rollback_files(loc, &self.instant).await {
            tracing::warn!(instant = %self.instant, "deleting a withdrawn commit's marked files: {e}");
        }
        self.stop_heartbeat().await;
    }

    /// Stops the heartbeat and deletes its file; a failure is only logged.
    async fn stop_heartbeat(&mut self) {
        if let Some(h) = self.heartbeat.take()
            && let Err(e) = h.stop().await
        {
            tracing::warn!(instant = %self.instant, "stopping heartbeat: {e}");
        }
    }

    /// Deletes the pending instant's files, inflight first: a failure
    /// leaves it pending (requested, or requested and inflight).
    async fn withdraw(&self) -> std::result::Result<(), String> {
        let pending = Instant::requested(self.instant.clone(), Action::DeltaCommit);
        withdraw_instant(&self.shared.loc, &self.shared.timeline, &pending)
            .await
            .map_err(|e| format!("withdrawing the instant: {e}"))
    }

    /// Starts the heartbeat of the commit this one began in its completion
    /// hold and keeps it for the client's next commit; should the heartbeat
    /// not start, the begun commit is withdrawn (or left for recovery).
    async fn keep_begun(&self, begun: Instant, idle: std::time::Duration) {
        let s = &self.shared;
        match Self::beat(s, &begun.requested).await {
            Ok(heartbeat) => s.next.keep(&s.loc, &s.timeline, begun, heartbeat, idle),
            Err(e) => {
                tracing::warn!(instant = %begun.requested, table = %s.loc, error = %e,
                    "starting the heartbeat of the next commit failed; withdrawing it");
                withdraw_or_leave(&s.loc, &s.timeline, &begun).await;
            }
        }
    }

    async fn cleanup_markers(&self) -> Result<()> {
        Ok(remove_markers(&self.shared.loc, &self.instant).await?)
    }
}

impl Drop for Commit {
    /// Hands the encoder back to the client for its next commits.
    fn drop(&mut self) {
        if let Some(e) = self.encoder.take() {
            self.shared.keep_encoder(e);
        }
    }
}

/// Why a writer task's handle failed: it panicked (with its message) or was cancelled.
fn join_failure(e: tokio::task::JoinError) -> String {
    if !e.is_panic() {
        return "was cancelled".into();
    }
    let payload = e.into_panic();
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into());
    format!("panicked: {message}")
}

fn write_stat(f: &FileWrite, instant: &InstantTime) -> WriteStat {
    let path = partition_file(&f.partition, &f.name);
    WriteStat {
        file_id: f.file_id.clone(),
        path,
        prev_commit: instant.to_string(),
        num_writes: (f.records + f.deletes) as i64,
        num_deletes: f.deletes as i64,
        num_inserts: f.records as i64,
        total_write_bytes: f.bytes as i64,
        partition_path: f.partition.clone(),
        total_log_records: (f.records + f.deletes) as i64,
        total_log_files: Some(1),
        total_log_blocks: f.blocks as i64,
        file_size_in_bytes: f.bytes as i64,
        log_version: Some(f.version as i32),
        log_offset: Some(0),
        base_file: Some(String::new()),
        log_files: Some(vec![f.name.clone()]),
        ..Default::default()
    }
}

/// Refuses a commit with a log in a file group that a completed
/// replacecommit replaced (a Java writer's clustering or insert overwrite)
/// or that a pending clustering rewrites: readers no longer read the group,
/// so the log's records would be lost. Hudi's Spark writers refuse updates
/// to a group under pending clustering too (`SparkRejectUpdateStrategy`).
/// Under the lock: the commit metadata to complete with when the schema
/// in force at `timeline` differs from the one `meta` records (`ours`): the
/// schema in force with this commit's changes to `base`
/// (`tributary_format::merge_committed`), so that the latest commit's
/// schema holds every column any commit added. Fails with a schema
/// conflict when another commit changed a column this one changed too.
///
/// Also returns whether this commit changes the schema in force while a
/// write requested after it has completed: Hudi's `TableSchemaResolver`
/// takes the schema of the completed write requested last, which then
/// lacks this commit's change ([`restate_schema`]).
#[allow(clippy::too_many_arguments)]
async fn record_schema(
    table: &str,
    folder: &tributary_timeline::TimelineFolder,
    config: &TableConfig,
    timeline: &tributary_timeline::Timeline,
    in_force: &std::sync::Mutex<Option<tributary_timeline::SchemaInForce>>,
    meta: &CommitMetadata,
    base: &str,
    ours: &str,
    instant: &InstantTime,
) -> tributary_timeline::Result<(Option<Vec<u8>>, bool)> {
    let known = in_force.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    let Some(now) = tributary_timeline::schema_in_force(folder, config, timeline, known.as_ref()).await? else {
        return Ok((None, false));
    };
    let recorded = tributary_format::merge_committed(table, &now.json, base, ours)?;
    let behind = recorded != now.json
        && timeline.active().iter().any(|i| i.is_completed() && i.action.writes_data() && i.requested > *instant);
    // The sequence groups too: those in force with any this client added.
    let groups = match (&now.sequence_groups, config.sequence_groups.is_empty()) {
        (None, true) => None,
        (in_force_groups, _) => {
            let in_force_groups = in_force_groups.as_deref().unwrap_or(&[]);
            let union =
                SequenceGroup::union(in_force_groups, &config.sequence_groups).map_err(|(column, reason)| {
                    tributary_format::Error::SchemaConflict { table: table.to_string(), column, reason }
                })?;
            Some(union)
        }
    };
    // Once this commit completes, it is the latest write, and its schema
    // the one in force: the next commit need not read it back. Should it
    // not complete, the next lookup finds it missing and reads the latest.
    let changed = recorded != now.json || groups != now.sequence_groups;
    if changed && let Some(field) = groups.as_deref().and_then(|g| SequenceGroup::missing_ordering(g, &recorded)) {
        let from = now.instant.as_ref().map_or("the create schema".to_string(), |i| format!("commit {i}"));
        return Err(tributary_timeline::Error::Corrupt {
            path: format!("{table}, commit {instant}"),
            reason: format!(
                "it would record sequence group `{field}` beside a schema without that column (the schema in \
                 force, from {from}, merged with this writer's); readers would refuse the table, so nothing of \
                 this commit became visible"
            ),
        });
    }
    let next = tributary_timeline::SchemaInForce {
        json: recorded.clone(),
        sequence_groups: groups.clone(),
        instant: Some(instant.clone()),
    };
    *in_force.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(next);
    let groups = groups.map(|g| SequenceGroup::render_list(&g));
    if recorded == ours && groups.as_ref() == meta.extra_metadata.get(SEQUENCE_GROUPS_KEY) {
        return Ok((None, behind));
    }
    let mut meta = meta.clone();
    meta.extra_metadata.insert("schema".into(), recorded);
    if let Some(g) = groups {
        meta.extra_metadata.insert(SEQUENCE_GROUPS_KEY.into(), g);
    }
    Ok((Some(meta.to_avro_container()?), behind))
}

/// After a commit that changed the schema in force completed while a
/// write requested after it had completed already: an empty
/// `ALTER_SCHEMA` delta commit, requested now, that records the schema in
/// force, so that Hudi's readers, which take the schema of the completed
/// write requested last, see the change too. Tributary's readers take the
/// write that became visible last and need none. Should it fail, the next
/// commit of any writer records the schema in force anyway: the failure is
/// logged, and the data commit stands.
async fn restate_schema(shared: &Arc<Shared>) {
    let result = async { Commit::start(shared.clone()).await?.restate().await }.await;
    if let Err(e) = result {
        tracing::warn!(table = %shared.loc, error = %e, "restating the schema in force for Hudi's readers failed");
    }
}

async fn check_not_replaced(
    loc: &TableLocation,
    config: &TableConfig,
    timeline: &Timeline,
    ours: &HashMap<Group, usize>,
    instant: &InstantTime,
) -> tributary_timeline::Result<()> {
    if !timeline.active().iter().any(replaces_groups) {
        return Ok(());
    }
    let replaced = replaced_groups(loc, config, timeline).await?;
    for group in ours.keys() {
        let how = match replaced.replaced.get(group) {
            Some(by) => format!("the replacecommit {by} replaced it"),
            None if replaced.clustering.contains(group) => "a pending clustering rewrites it".to_string(),
            None => continue,
        };
        let (partition, file_id) = group;
        return Err(tributary_timeline::Error::InvalidInput {
            what: format!("commit {instant} of {loc}"),
            reason: format!(
                "file group {file_id} of partition `{partition}` takes no more logs: {how} (a Java writer's \
                 clustering or insert overwrite), and readers no longer read it; Tributary's writers write each \
                 bucket into its one file group, so keys of this bucket cannot be written. Nothing of this \
                 commit became visible"
            ),
        });
    }
    Ok(())
}
