//! A commit's writer task: the actor that owns some buckets, buffers their
//! rows up to its share of the memory budget and flushes them as new log
//! files, each announced by a marker first.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use arrow::array::{Array, ArrayRef, RecordBatch, StringArray, UInt32Array};
use futures::StreamExt;
use tokio::sync::mpsc;
use tributary_format::codec::{DataBlockEncoder, DeleteRecord, OrderingValue, encode_delete_block};
use tributary_format::log_block::{BlockType, HeaderKey, begin_block, finish_block};
use tributary_timeline::fs_view::PARTITION_METADATA;
use tributary_timeline::partition::ensure_partition;
use tributary_timeline::protocol::marker;
use tributary_timeline::{BaseFileName, InstantTime, LogFileName, TableLocation, WriteToken, nbcc_file_id};

use crate::client::Shared;
use crate::commit::FileWrite;
use crate::error::{Error, Result};
use crate::input::Rows;

/// A piece of a write routed to one bucket.
pub(crate) struct Piece {
    pub(crate) rows: Arc<Rows>,
    pub(crate) keys: Arc<StringArray>,
    pub(crate) partition: Arc<str>,
    pub(crate) bucket: u32,
    pub(crate) indices: UInt32Array,
}

impl std::fmt::Debug for Piece {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Piece({}/{}: {} rows)", self.partition, self.bucket, self.indices.len())
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

pub(crate) struct TaskContext {
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
    pub(crate) fn new(
        shared: Arc<Shared>,
        instant: InstantTime,
        task: u64,
        budget: usize,
        cancelled: Arc<std::sync::atomic::AtomicBool>,
    ) -> Result<Self> {
        let encoder = shared.take_encoder()?;
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

    pub(crate) async fn run(mut self, mut rx: mpsc::Receiver<Piece>) -> Result<Vec<FileWrite>> {
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
        // Every block was flushed whole: the encoder holds no rows.
        self.shared.keep_encoder(self.encoder);
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
                    ordering: ord.map_or(OrderingValue::Null, |c| OrderingValue::of(c, r)),
                });
                buf.bytes += 64;
                self.buffered += 64;
            }
        }
        if !keep.is_empty() {
            let idx = UInt32Array::from(keep);
            // The rows were validated and the indices are theirs: a failure is a bug.
            let arrow_err = |e| internal(&self.shared, &self.instant, "buffering rows", e);
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

    /// Flushes every bucket held: encodes up to [`FLUSH_CONCURRENCY`]
    /// buckets' logs at a time, then stores them concurrently (a local
    /// disk syncs them together, an object store takes the puts in
    /// parallel), in bucket order.
    async fn flush_all(&mut self) -> Result<()> {
        let mut keys: Vec<(Arc<str>, u32)> = self.buffers.keys().cloned().collect();
        keys.sort();
        for chunk in keys.chunks(FLUSH_CONCURRENCY) {
            let mut encoded = Vec::with_capacity(chunk.len());
            for k in chunk {
                if let Some(buf) = self.buffers.remove(k)
                    && let Some(e) = self.encode(&k.0, k.1, buf).await?
                {
                    encoded.push(e);
                }
            }
            let (loc, instant, task) = (&self.shared.loc, &self.instant, self.task);
            let stored: Vec<Result<(u32, FileWrite)>> = futures::stream::iter(encoded)
                .map(|e| e.store(loc, instant, task))
                .buffered(FLUSH_CONCURRENCY)
                .collect()
                .await;
            for stored in stored {
                let (bucket, w) = stored?;
                self.versions.insert((Arc::from(w.partition.as_str()), bucket), w.version);
                self.written.push(w);
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
                // A file group of a bucket beyond the count: the table's
                // writers use more buckets than this one was given.
                let buckets = self.shared.index.num_buckets();
                if b >= buckets {
                    return Err(Error::InvalidInput {
                        what: format!("{loc} (table {})", self.shared.config.name),
                        reason: format!(
                            "file group {id} in partition `{partition}` is bucket {b}, but this writer has {buckets} \
                             buckets: give the bucket count the table's other writers use"
                        ),
                    });
                }
                // Prefer the smallest id for a bucket so every writer picks the same one.
                let e = ids.entry(b).or_insert_with(|| id.clone());
                if id < *e {
                    *e = id;
                }
            }
        }
        Ok(ids)
    }

    /// One bucket's buffered rows and deletes as the bytes of a new log
    /// file; `None` when there is nothing.
    async fn encode(&mut self, partition: &Arc<str>, bucket: u32, buf: BucketBuf) -> Result<Option<Encoded>> {
        if buf.batches.is_empty() && buf.deletes.is_empty() {
            return Ok(None);
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
            self.encoder.encode_content(&with_meta, &mut self.out).map_err(|cause| Error::Encode {
                table: self.shared.loc.to_string(),
                instant: self.instant.to_string(),
                file: if partition.is_empty() { file_id.clone() } else { format!("{partition}/{file_id}") },
                cause: Box::new(cause),
            })?;
            finish_block(&mut self.out, open, &[]);
            blocks += 1;
        }
        if !buf.deletes.is_empty() {
            encode_delete_block(&buf.deletes, &header, &mut self.out);
            blocks += 1;
        }
        // The buffer goes with the file; the next encode starts a new one
        // of the same size.
        let capacity = self.out.capacity();
        let bytes = bytes::Bytes::from(std::mem::replace(&mut self.out, Vec::with_capacity(capacity)));
        let version = self.versions.get(&(partition.clone(), bucket)).copied().unwrap_or(0) + 1;
        Ok(Some(Encoded {
            write: FileWrite {
                partition: partition.to_string(),
                file_id,
                name: String::new(),
                version,
                records,
                deletes: buf.deletes.len() as u64,
                blocks,
                bytes: bytes.len() as u64,
            },
            bucket,
            bytes,
        }))
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
            .map_err(|e| internal(&self.shared, &self.instant, "adding the meta columns", e))
    }
}

/// How many log files a task encodes ahead and stores at once.
const FLUSH_CONCURRENCY: usize = 8;

/// A log file encoded, to be stored: its description (the version to try
/// first; the name is set once stored) and its bytes.
struct Encoded {
    write: FileWrite,
    bucket: u32,
    bytes: bytes::Bytes,
}

impl Encoded {
    /// Stores the file under the first free version from the one it holds,
    /// each announced by its marker first; yields its bucket and what was
    /// written.
    async fn store(self, loc: &TableLocation, instant: &InstantTime, task: u64) -> Result<(u32, FileWrite)> {
        let Encoded { mut write, bucket, bytes } = self;
        let partition = write.partition.as_str();
        loop {
            let name = LogFileName {
                file_id: write.file_id.clone(),
                instant: instant.clone(),
                version: write.version,
                write_token: Some(WriteToken::new(task, 0, 0)),
                suffix: String::new(),
            }
            .to_string();
            let rel = tributary_timeline::location::partition_file(partition, &name);
            marker::create_marker(loc, instant, partition, &name, marker::APPEND).await?;
            // A create that finds its own bytes there (a retry after a lost
            // answer) is done; other bytes mean the name is taken.
            match loc.create(&loc.join(&rel), bytes.clone()).await {
                Ok(_) => {
                    write.name = name;
                    return Ok((bucket, write));
                }
                Err(tributary_timeline::Error::AlreadyExists { .. }) => write.version += 1,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// An Arrow kernel refused rows the writer built or validated itself: a bug.
fn internal(shared: &Shared, instant: &InstantTime, what: &str, e: arrow::error::ArrowError) -> Error {
    Error::Internal {
        table: shared.loc.to_string(),
        instant: instant.to_string(),
        what: what.into(),
        reason: e.to_string(),
    }
}
