//! The write client: one per job or process.
//!
//! A commit moves through typed stages: [`WriteClient::start_commit`] takes a
//! TrueTime instant and creates the requested and inflight files; rows sent
//! with [`Commit::write`] are routed to bucket-owning writer tasks through
//! bounded channels (a slow disk pushes back on the producer); each task
//! buffers rows up to its share of the memory budget and flushes them as
//! new log files, each announced by a marker first; [`Commit::commit`]
//! flushes, gathers the write stats and creates the completed instant under
//! the lock. [`Commit::abort`] deletes what was written.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::time::Duration;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray, UInt32Array};
use arrow::datatypes::DataType;
use object_store::{ObjectStoreExt, PutMode, PutPayload};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tributary_format::metadata::{CommitMetadata, WriteStat};
use tributary_timeline::fs_view::PARTITION_METADATA;
use tributary_timeline::partition::ensure_partition;
use tributary_timeline::{
    Action, BaseFileName, Instant, InstantTime, LogFileName, State, TableConfig, TableLocation, TimeGenerator,
    TimelineWriter, WriteToken, nbcc_file_id,
};

use tributary_format::codec::{DataBlockEncoder, DeleteRecord, OrderingValue, encode_delete_content};
use tributary_format::log_block::{BlockType, HeaderKey, begin_block, finish_block};
use tributary_format::schema::TableSchema;
use tributary_timeline::protocol::marker::{self, remove_markers, rollback_files};
use tributary_timeline::protocol::{Completion, Heartbeat, complete_instant};

use crate::bucket::BucketIndex;
use crate::error::{Error, Result};
use crate::input::{Rows, rows_from_batch, rows_from_json};

/// Extra-metadata key prefix under which checkpoints are stored.
pub const CHECKPOINT_PREFIX: &str = "tributary.checkpoint.";

/// Settings of a [`WriteClient`].
#[derive(Debug, Clone)]
pub struct WriteSettings {
    /// Writer tasks per commit; task `i` owns buckets `b` with `b % tasks == i`.
    pub tasks: usize,
    /// Memory budget for buffered rows across all tasks.
    pub buffer_bytes: usize,
    /// Messages each task's channel holds before the producer waits.
    pub channel_depth: usize,
    /// How often the heartbeat file is refreshed (Hudi: 60 s).
    pub heartbeat_interval: Duration,
    /// Name of this writer, under which checkpoints are kept.
    pub writer_id: String,
    /// The columns this writer writes (a partial writer); `None` for all.
    /// Its log blocks carry the column subset with `IS_PARTIAL=true`.
    pub columns: Option<Vec<String>>,
}

impl Default for WriteSettings {
    fn default() -> Self {
        Self {
            tasks: 2,
            buffer_bytes: 128 << 20,
            channel_depth: 4,
            heartbeat_interval: Duration::from_secs(60),
            writer_id: "default".into(),
            columns: None,
        }
    }
}

/// One log file a commit wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileWrite {
    /// Partition path.
    pub partition: String,
    /// File group id.
    pub file_id: String,
    /// Bare log file name.
    pub name: String,
    /// Log version.
    pub version: u32,
    /// Data records written.
    pub records: u64,
    /// Delete entries written.
    pub deletes: u64,
    /// Blocks written.
    pub blocks: u64,
    /// File size in bytes.
    pub bytes: u64,
}

/// What a completed commit did.
#[derive(Debug, Clone)]
pub struct CommitSummary {
    /// The commit's requested instant.
    pub instant: InstantTime,
    /// Its completion time.
    pub completed: InstantTime,
    /// Files written.
    pub files: Vec<FileWrite>,
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

/// The file id of each bucket of one partition.
type BucketFileIds = HashMap<u32, String>;

#[derive(Debug)]
struct Shared {
    /// File id of each bucket, per partition, once the partition was listed.
    /// A bucket's file id never changes, so one listing per partition and
    /// client is enough.
    file_ids: std::sync::Mutex<HashMap<Arc<str>, Arc<BucketFileIds>>>,
    loc: TableLocation,
    config: TableConfig,
    schema: Arc<TableSchema>,
    index: BucketIndex,
    time: TimeGenerator,
    timeline: TimelineWriter,
    settings: WriteSettings,
}

/// Writes commits into one table.
#[derive(Debug, Clone)]
pub struct WriteClient {
    shared: Arc<Shared>,
}

impl WriteClient {
    /// A client for the table at `loc` with configuration `config`, taking
    /// instants from `time`.
    pub fn new(loc: TableLocation, config: TableConfig, time: TimeGenerator, settings: WriteSettings) -> Result<Self> {
        let bucket = config.bucket.ok_or_else(|| Error::InvalidInput {
            what: format!("table {}", config.name),
            reason: "no bucket count in hoodie.properties (hoodie.bucket.index.num.buckets); create it with tributary"
                .into(),
        })?;
        if settings.tasks == 0 {
            return Err(Error::InvalidInput { what: "tasks".into(), reason: "must be at least 1".into() });
        }
        let full = config.table_schema()?;
        let schema = Arc::new(match &settings.columns {
            Some(cols) => full.partial(cols, &config.sequence_groups)?,
            None => full,
        });
        let timeline = TimelineWriter::new(&loc, &config);
        Ok(Self {
            shared: Arc::new(Shared {
                file_ids: std::sync::Mutex::new(HashMap::new()),
                loc,
                config,
                schema,
                index: BucketIndex::new(bucket),
                time,
                timeline,
                settings,
            }),
        })
    }

    /// The table schema.
    pub fn schema(&self) -> &Arc<TableSchema> {
        &self.shared.schema
    }

    /// Starts a commit: takes an instant, creates the requested and inflight
    /// files, starts the heartbeat and the writer tasks.
    pub async fn start_commit(&self) -> Result<Commit> {
        let s = &self.shared;
        let timeline = s.timeline.clone();
        let instant = s
            .time
            .with_time(|t| async move {
                let i = Instant::requested(t.clone(), Action::DeltaCommit);
                timeline.create(&i, State::Requested, Vec::new()).await?;
                Ok(t)
            })
            .await?;
        let pending = Instant::requested(instant.clone(), Action::DeltaCommit);
        s.timeline.create(&pending, State::Inflight, Vec::new()).await?;
        let heartbeat =
            Heartbeat::start(s.loc.clone(), &instant, s.time.clock().clone(), s.settings.heartbeat_interval).await?;
        let tasks = s.settings.tasks;
        let budget = (s.settings.buffer_bytes / tasks).max(1);
        let mut senders = Vec::with_capacity(tasks);
        let mut handles = Vec::with_capacity(tasks);
        let cancelled = Arc::new(std::sync::atomic::AtomicBool::new(false));
        for task in 0..tasks {
            let (tx, rx) = mpsc::channel(s.settings.channel_depth.max(1));
            let ctx = TaskContext::new(s.clone(), instant.clone(), task as u64, budget, cancelled.clone())?;
            handles.push(tokio::spawn(ctx.run(rx)));
            senders.push(tx);
        }
        Ok(Commit {
            shared: s.clone(),
            instant,
            senders,
            handles,
            heartbeat: Some(heartbeat),
            route: Vec::new(),
            rows: 0,
            cancelled,
        })
    }

    /// The last checkpoint `writer_id` attached to a completed commit, if any.
    pub async fn last_checkpoint(&self, writer_id: &str) -> Result<Option<String>> {
        let s = &self.shared;
        let timeline = tributary_timeline::Timeline::load(&s.loc, &s.config).await?;
        let mut done: Vec<&Instant> = timeline.completed().filter(|i| i.action == Action::DeltaCommit).collect();
        done.sort_by(|a, b| b.completed.cmp(&a.completed));
        let key = format!("{CHECKPOINT_PREFIX}{writer_id}");
        for i in done {
            let path = s.timeline.path_of(i, State::Completed)?;
            let bytes = s.loc.get(&path).await?;
            let meta = CommitMetadata::from_avro_container(&bytes, path.as_ref())?;
            if let Some(v) = meta.extra_metadata.get(&key) {
                return Ok(Some(v.clone()));
            }
        }
        Ok(None)
    }
}

/// A piece of a write routed to one bucket.
struct Piece {
    rows: Arc<Rows>,
    keys: Arc<StringArray>,
    partition: Arc<str>,
    bucket: u32,
    indices: UInt32Array,
}

/// An open commit. Finish it with [`Commit::commit`] or [`Commit::abort`].
#[derive(Debug)]
pub struct Commit {
    shared: Arc<Shared>,
    instant: InstantTime,
    senders: Vec<mpsc::Sender<Piece>>,
    handles: Vec<JoinHandle<Result<Vec<FileWrite>>>>,
    heartbeat: Option<Heartbeat>,
    route: Vec<u32>,
    rows: u64,
    cancelled: Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Debug for Piece {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Piece({}/{}: {} rows)", self.partition, self.bucket, self.indices.len())
    }
}

fn as_strings(col: &ArrayRef, what: &str) -> Result<Arc<StringArray>> {
    let c = match col.data_type() {
        DataType::Utf8 => col.clone(),
        _ => arrow::compute::cast(col, &DataType::Utf8).map_err(|e| Error::InvalidInput {
            what: what.to_string(),
            reason: format!("cannot render as text: {e}"),
        })?,
    };
    Ok(Arc::new(c.as_string::<i32>().clone()))
}

impl Commit {
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
        if rows.is_empty() {
            return Ok(());
        }
        let s = self.shared.clone();
        let schema = &s.schema;
        let keys = as_strings(rows.batch.column(schema.key_index()), "record key")?;
        let n = rows.len();
        s.index.route(keys.iter().map(|k| k.unwrap_or_default()), &mut self.route);
        // Partition of each row, interned.
        let mut partitions: Vec<Arc<str>> = Vec::new();
        let mut part_of_row: Vec<u32> = vec![0; n];
        match schema.partition_index() {
            None => partitions.push(Arc::from("")),
            Some(p) => {
                let values = as_strings(rows.batch.column(p), "partition field")?;
                let field = schema.field_name(p);
                let mut seen: HashMap<&str, u32> = HashMap::new();
                for (r, slot) in part_of_row.iter_mut().enumerate() {
                    let v = if values.is_null(r) { "__HIVE_DEFAULT_PARTITION__" } else { values.value(r) };
                    *slot = *seen.entry(v).or_insert_with(|| {
                        partitions.push(if s.config.hive_style_partitioning {
                            Arc::from(format!("{field}={v}"))
                        } else {
                            Arc::from(v)
                        });
                        (partitions.len() - 1) as u32
                    });
                }
            }
        }
        let mut groups: HashMap<(u32, u32), Vec<u32>> = HashMap::new();
        for (r, (&p, &b)) in part_of_row.iter().zip(&self.route).enumerate() {
            groups.entry((p, b)).or_default().push(r as u32);
        }
        let rows = Arc::new(rows);
        let mut groups: Vec<((u32, u32), Vec<u32>)> = groups.into_iter().collect();
        groups.sort_unstable_by_key(|(k, _)| *k);
        for ((p, bucket), idx) in groups {
            let task = (bucket as usize) % self.senders.len();
            let piece = Piece {
                rows: rows.clone(),
                keys: keys.clone(),
                partition: partitions[p as usize].clone(),
                bucket,
                indices: UInt32Array::from(idx),
            };
            if self.senders[task].send(piece).await.is_err() {
                // The task stopped: its error surfaces at commit.
                return self.task_failure(task).await;
            }
        }
        self.rows += n as u64;
        Ok(())
    }

    async fn task_failure(&mut self, task: usize) -> Result<()> {
        let handle = self.handles.remove(task);
        self.senders.remove(task);
        match handle.await {
            Ok(Err(e)) => Err(e),
            Ok(Ok(_)) => Err(Error::InvalidInput { what: "writer task".into(), reason: "stopped early".into() }),
            Err(e) => Err(Error::InvalidInput { what: "writer task".into(), reason: e.to_string() }),
        }
    }

    async fn finish_tasks(&mut self) -> Result<Vec<FileWrite>> {
        self.senders.clear();
        let mut files = Vec::new();
        let mut first_err = None;
        for h in self.handles.drain(..) {
            match h.await {
                Ok(Ok(f)) => files.extend(f),
                Ok(Err(e)) => first_err = first_err.or(Some(e)),
                Err(e) => {
                    first_err =
                        first_err.or(Some(Error::InvalidInput { what: "writer task".into(), reason: e.to_string() }))
                }
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

    /// Completes the commit, recording `checkpoint` (for example a source
    /// offset) under this client's writer id in the same atomic step.
    pub async fn commit_with_checkpoint(mut self, checkpoint: Option<String>) -> Result<CommitSummary> {
        let files = match self.finish_tasks().await {
            Ok(f) => f,
            Err(e) => {
                self.cleanup().await;
                return Err(e);
            }
        };
        let s = self.shared.clone();
        let mut meta = CommitMetadata { operation_type: "UPSERT".into(), compacted: false, ..Default::default() };
        meta.extra_metadata.insert("schema".into(), s.schema.full_table_json());
        if let Some(cp) = checkpoint {
            meta.extra_metadata.insert(format!("{CHECKPOINT_PREFIX}{}", s.settings.writer_id), cp);
        }
        for f in &files {
            meta.partition_to_write_stats.entry(f.partition.clone()).or_default().push(write_stat(f, &self.instant));
        }
        let content = meta.to_avro_container()?;
        let pending = Instant::requested(self.instant.clone(), Action::DeltaCommit);
        let completed = complete_instant(&s.loc, &s.timeline, &s.time, &pending, content, Completion::Owned).await?;
        self.cleanup_markers().await?;
        if let Some(h) = self.heartbeat.take() {
            h.stop().await?;
        }
        Ok(CommitSummary { instant: self.instant.clone(), completed, files })
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
        if let Err(e) = rollback_files(&self.shared.loc, &self.instant).await {
            tracing::warn!(instant = %self.instant, "deleting files of an aborted commit: {e}");
        }
        // With its files gone, the pending instant itself is withdrawn.
        let pending = Instant::requested(self.instant.clone(), Action::DeltaCommit);
        for state in [State::Inflight, State::Requested] {
            let deleted = match self.shared.timeline.path_of(&pending, state) {
                Ok(p) => self.shared.loc.store.delete(&p).await.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = deleted {
                tracing::warn!(instant = %self.instant, "withdrawing the aborted instant: {e}");
            }
        }
        if let Some(h) = self.heartbeat.take()
            && let Err(e) = h.stop().await
        {
            tracing::warn!(instant = %self.instant, "stopping heartbeat: {e}");
        }
    }

    async fn cleanup_markers(&self) -> Result<()> {
        Ok(remove_markers(&self.shared.loc, &self.instant).await?)
    }
}

fn write_stat(f: &FileWrite, instant: &InstantTime) -> WriteStat {
    let path = if f.partition.is_empty() { f.name.clone() } else { format!("{}/{}", f.partition, f.name) };
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

/// Rows buffered for one bucket of one partition.
#[derive(Default)]
struct BucketBuf {
    batches: Vec<RecordBatch>,
    keys: Vec<ArrayRef>,
    deletes: Vec<DeleteRecord>,
    bytes: usize,
}

struct TaskContext {
    shared: Arc<Shared>,
    instant: InstantTime,
    task: u64,
    budget: usize,
    encoder: DataBlockEncoder,
    seqno: AtomicU64,
    buffers: HashMap<(Arc<str>, u32), BucketBuf>,
    buffered: usize,
    versions: HashMap<(Arc<str>, u32), u32>,
    written: Vec<FileWrite>,
    out: Vec<u8>,
    cancelled: Arc<std::sync::atomic::AtomicBool>,
}

impl TaskContext {
    fn new(
        shared: Arc<Shared>,
        instant: InstantTime,
        task: u64,
        budget: usize,
        cancelled: Arc<std::sync::atomic::AtomicBool>,
    ) -> Result<Self> {
        let encoder = DataBlockEncoder::new(&shared.schema)?;
        Ok(Self {
            shared,
            instant,
            task,
            budget,
            encoder,
            seqno: AtomicU64::new(1),
            buffers: HashMap::new(),
            buffered: 0,
            versions: HashMap::new(),
            written: Vec::new(),
            out: Vec::new(),
            cancelled,
        })
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Piece>) -> Result<Vec<FileWrite>> {
        while let Some(piece) = rx.recv().await {
            if self.cancelled.load(AtomicOrdering::SeqCst) {
                return Ok(self.written);
            }
            self.add(piece)?;
            if self.buffered >= self.budget {
                self.flush_all().await?;
            }
        }
        if !self.cancelled.load(AtomicOrdering::SeqCst) {
            self.flush_all().await?;
        }
        Ok(self.written)
    }

    fn add(&mut self, p: Piece) -> Result<()> {
        let schema = &self.shared.schema;
        let deleted = p.rows.deleted.as_ref();
        let (keep, drop): (Vec<u32>, Vec<u32>) =
            p.indices.values().iter().partition(|&&r| deleted.is_none_or(|d| !d.value(r as usize)));
        let buf = self.buffers.entry((p.partition.clone(), p.bucket)).or_default();
        if !drop.is_empty() {
            let ord = schema.ordering_index().map(|i| p.rows.batch.column(i));
            for r in drop {
                let r = r as usize;
                buf.deletes.push(DeleteRecord {
                    key: p.keys.value(r).to_string(),
                    partition: p.partition.to_string(),
                    ordering: ord.map_or(OrderingValue::Null, |c| ordering_value(c, r)),
                });
                buf.bytes += 64;
                self.buffered += 64;
            }
        }
        if !keep.is_empty() {
            let idx = UInt32Array::from(keep);
            let arrow_err =
                |e: arrow::error::ArrowError| Error::InvalidInput { what: "rows".into(), reason: e.to_string() };
            let batch = arrow::compute::take_record_batch(&p.rows.batch, &idx).map_err(arrow_err)?;
            let keys = arrow::compute::take(p.keys.as_ref(), &idx, None).map_err(arrow_err)?;
            let size = batch.get_array_memory_size() + keys.get_array_memory_size();
            buf.bytes += size;
            self.buffered += size;
            buf.batches.push(batch);
            buf.keys.push(keys);
        }
        Ok(())
    }

    async fn flush_all(&mut self) -> Result<()> {
        let mut keys: Vec<(Arc<str>, u32)> = self.buffers.keys().cloned().collect();
        keys.sort();
        for k in keys {
            if let Some(buf) = self.buffers.remove(&k) {
                self.flush(&k.0, k.1, buf).await?;
            }
        }
        self.buffered = 0;
        Ok(())
    }

    async fn file_id(&mut self, partition: &Arc<str>, bucket: u32) -> Result<String> {
        let cached = self.shared.file_ids.lock().ok().and_then(|m| m.get(partition).cloned());
        let ids = match cached {
            Some(ids) => ids,
            None => {
                let ids = Arc::new(self.list_file_ids(partition).await?);
                if let Ok(mut m) = self.shared.file_ids.lock() {
                    m.insert(partition.clone(), ids.clone());
                }
                ids
            }
        };
        Ok(ids.get(&bucket).cloned().unwrap_or_else(|| nbcc_file_id(bucket)))
    }

    /// Lists a partition once: the file id already used for each bucket.
    async fn list_file_ids(&self, partition: &Arc<str>) -> Result<HashMap<u32, String>> {
        let loc = &self.shared.loc;
        ensure_partition(loc, partition, &self.instant).await?;
        let dir = loc.join(partition);
        let listing = loc
            .store
            .list_with_delimiter(Some(&dir))
            .await
            .map_err(|e| tributary_timeline::Error::store("list", &dir, e))?;
        let mut ids: HashMap<u32, String> = HashMap::new();
        for m in listing.objects {
            let Some(name) = m.location.filename() else { continue };
            if name == PARTITION_METADATA {
                continue;
            }
            let id = LogFileName::parse(name)
                .map(|l| l.file_id)
                .or_else(|_| BaseFileName::parse(name).map(|b| b.file_id))
                .ok();
            if let Some(id) = id
                && let Some(b) = tributary_timeline::file_name::bucket_of_file_id(&id)
            {
                // Prefer the smallest id for a bucket so every writer picks the same one.
                let e = ids.entry(b).or_insert_with(|| id.clone());
                if id < *e {
                    *e = id;
                }
            }
        }
        Ok(ids)
    }

    async fn flush(&mut self, partition: &Arc<str>, bucket: u32, buf: BucketBuf) -> Result<()> {
        if buf.batches.is_empty() && buf.deletes.is_empty() {
            return Ok(());
        }
        let file_id = self.file_id(partition, bucket).await?;
        let schema = self.shared.schema.clone();
        let mut header = vec![
            (HeaderKey::Schema, schema.log_json().to_string()),
            (HeaderKey::InstantTime, self.instant.to_string()),
        ];
        if schema.is_partial() {
            header.push((HeaderKey::IsPartial, "true".to_string()));
        }
        self.out.clear();
        let mut blocks = 0;
        let mut records = 0u64;
        if !buf.batches.is_empty() {
            let mut with_meta = Vec::with_capacity(buf.batches.len());
            for (batch, keys) in buf.batches.iter().zip(&buf.keys) {
                records += batch.num_rows() as u64;
                with_meta.push(self.meta_batch(batch, keys, partition, &file_id)?);
            }
            let open = begin_block(&mut self.out, BlockType::AvroData, &header);
            self.encoder.encode_content(&with_meta, &mut self.out)?;
            finish_block(&mut self.out, open, &[]);
            blocks += 1;
        }
        if !buf.deletes.is_empty() {
            let open = begin_block(&mut self.out, BlockType::Delete, &header);
            encode_delete_content(&buf.deletes, &mut self.out);
            finish_block(&mut self.out, open, &[]);
            blocks += 1;
        }
        let bytes = bytes::Bytes::from(std::mem::take(&mut self.out));
        let size = bytes.len() as u64;
        let key = (partition.clone(), bucket);
        let mut version = self.versions.get(&key).copied().unwrap_or(0) + 1;
        let loc = self.shared.loc.clone();
        loop {
            let name = LogFileName {
                file_id: file_id.clone(),
                instant: self.instant.clone(),
                version,
                write_token: Some(WriteToken::new(self.task, 0, 0)),
                suffix: String::new(),
            }
            .to_string();
            let rel = if partition.is_empty() { name.clone() } else { format!("{partition}/{name}") };
            marker::create_marker(&loc, &self.instant, partition, &name, marker::APPEND).await?;
            let path = loc.join(&rel);
            match loc.store.put_opts(&path, PutPayload::from(bytes.clone()), PutMode::Create.into()).await {
                Ok(_) => {
                    self.versions.insert(key, version);
                    self.written.push(FileWrite {
                        partition: partition.to_string(),
                        file_id,
                        name,
                        version,
                        records,
                        deletes: buf.deletes.len() as u64,
                        blocks,
                        bytes: size,
                    });
                    return Ok(());
                }
                Err(object_store::Error::AlreadyExists { .. }) => version += 1,
                Err(e) => return Err(tributary_timeline::Error::store("create", &path, e).into()),
            }
        }
    }

    fn meta_batch(&self, batch: &RecordBatch, keys: &ArrayRef, partition: &str, file_id: &str) -> Result<RecordBatch> {
        let n = batch.num_rows();
        let t = self.instant.as_str();
        let first = self.seqno.fetch_add(n as u64, AtomicOrdering::Relaxed);
        let constant = |v: &str| -> ArrayRef { Arc::new(StringArray::from_iter_values(std::iter::repeat_n(v, n))) };
        // `<t>_<task>_<n>`, written straight into one value buffer.
        let mut seq = arrow::array::StringBuilder::with_capacity(n, n * (t.len() + 12));
        for i in 0..n as u64 {
            let _ = write!(seq, "{t}_{}_{}", self.task, first + i);
            seq.append_value("");
        }
        let seq: ArrayRef = Arc::new(seq.finish());
        let mut columns = vec![constant(t), seq, keys.clone(), constant(partition), constant(file_id)];
        columns.extend(batch.columns().iter().cloned());
        RecordBatch::try_new(self.shared.schema.arrow_with_meta().clone(), columns)
            .map_err(|e| Error::InvalidInput { what: "rows".into(), reason: e.to_string() })
    }
}

/// The ordering value of row `r` of column `c`, as a delete record carries it.
pub fn ordering_value(c: &ArrayRef, r: usize) -> OrderingValue {
    use arrow::datatypes as t;
    if c.is_null(r) {
        return OrderingValue::Null;
    }
    match c.data_type() {
        DataType::Int32 => OrderingValue::Int(c.as_primitive::<t::Int32Type>().value(r)),
        DataType::Date32 => OrderingValue::Int(c.as_primitive::<t::Date32Type>().value(r)),
        DataType::Int64 => OrderingValue::Long(c.as_primitive::<t::Int64Type>().value(r)),
        DataType::Timestamp(t::TimeUnit::Millisecond, _) => {
            OrderingValue::Long(c.as_primitive::<t::TimestampMillisecondType>().value(r))
        }
        DataType::Timestamp(t::TimeUnit::Microsecond, _) => {
            OrderingValue::Long(c.as_primitive::<t::TimestampMicrosecondType>().value(r))
        }
        DataType::Float32 => OrderingValue::Float(c.as_primitive::<t::Float32Type>().value(r)),
        DataType::Float64 => OrderingValue::Double(c.as_primitive::<t::Float64Type>().value(r)),
        DataType::Utf8 => OrderingValue::String(c.as_string::<i32>().value(r).to_string()),
        _ => OrderingValue::Null,
    }
}
