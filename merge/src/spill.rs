//! Compacting a file group larger than the memory budget, by spilling.
//!
//! Each input is decoded once, and memory stays near the budget whatever the
//! group's size:
//! 1. **Partition.** Every version (base rows, then each log's blocks, in
//!    write order) is split by a hash of the record key into `P` partitions.
//!    Each partition's share is buffered and, past a threshold, written to a
//!    spill object, still in write order: Arrow IPC streams for rows (partial
//!    rows keep their present-column mask), delete-block bytes for deletes.
//! 2. **Merge.** A partition's versions are read back in order and merged
//!    with the one merge the readers use. A key lives in exactly one
//!    partition, so merging partitions apart gives the rows merging the whole
//!    group would. The merged rows are sorted by key and written back as a
//!    sorted run, in chunks.
//! 3. **Output.** The `P` sorted runs are merged by key into the base file,
//!    holding one chunk of each run at a time.
//!
//! Spill objects live under one folder per file group and are deleted when
//! the group is done; a crashed attempt's folder is deleted when the plan
//! is executed again.

use std::collections::VecDeque;
use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch, StringArray, UInt32Array};
use arrow::datatypes::SchemaRef;
use arrow::ipc::reader::StreamDecoder;
use arrow::ipc::writer::StreamWriter;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tributary_format::RECORD_KEY;
use tributary_format::{DeleteRecord, decode_delete_content, encode_delete_content};

use crate::error::{Error, Result};
use crate::version::Version;

/// Most rows per chunk of a sorted run, and per batch handed to the output.
const RUN_CHUNK_ROWS: usize = 16 * 1024;

/// Seed of the partition hash; distinct from the bucket hash's seed 0, so a
/// file group's keys (which share a bucket) still spread over partitions.
const PARTITION_SEED: u32 = 0x9e37_79b9;

/// Spill objects deleted at once. Not a store's `delete_stream`: on local
/// disk that runs ten at once, each on a blocking thread of its own, and
/// every thread that then reads a spill object or a log keeps what it
/// allocated in an allocator arena of its own; a compaction's resident
/// memory grows with their number.
const DELETES_AT_ONCE: usize = 2;

/// A folder of spill objects in some store.
#[derive(Debug, Clone)]
pub struct SpillArea {
    /// The store the objects go to.
    pub store: Arc<dyn ObjectStore>,
    /// The folder.
    pub dir: Path,
}

fn invalid(what: &Path, reason: impl ToString) -> Error {
    Error::Internal { what: format!("spill file {what}"), reason: reason.to_string() }
}

fn store_err(op: &'static str, path: &Path, e: object_store::Error) -> Error {
    tributary_timeline::Error::store(op, path, e).into()
}

impl SpillArea {
    /// Deletes every object under the folder, a few at a time
    /// (`DELETES_AT_ONCE`).
    pub async fn clear(&self) -> Result<()> {
        let paths: Vec<Path> = self
            .store
            .list(Some(&self.dir))
            .map_ok(|m| m.location)
            .try_collect()
            .await
            .map_err(|e| store_err("list", &self.dir, e))?;
        let mut deleted = futures::stream::iter(paths)
            .map(|path| async move {
                match self.store.delete(&path).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                    Err(e) => Err(store_err("delete", &path, e)),
                }
            })
            .buffer_unordered(DELETES_AT_ONCE);
        while let Some(r) = deleted.next().await {
            r?;
        }
        Ok(())
    }

    fn path(&self, name: &str) -> Path {
        self.dir.clone().join(name)
    }

    async fn put(&self, name: &str, bytes: Vec<u8>) -> Result<Path> {
        let path = self.path(name);
        self.store.put(&path, PutPayload::from(bytes)).await.map_err(|e| store_err("put", &path, e))?;
        Ok(path)
    }

    async fn get(&self, path: &Path) -> Result<bytes::Bytes> {
        let got = self.store.get(path).await.map_err(|e| store_err("get", path, e))?;
        got.bytes().await.map_err(|e| store_err("get", path, e))
    }
}

/// How a spill segment's rows are to be read back.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Rows,
    Partial(Arc<[bool]>),
    Deletes,
}

/// A spilled piece of one partition.
#[derive(Debug)]
struct Segment {
    kind: Kind,
    path: Path,
}

/// What a partition holds in memory before it spills.
#[derive(Debug, Default)]
struct Buffer {
    kind: Option<Kind>,
    batches: Vec<RecordBatch>,
    deletes: Vec<DeleteRecord>,
    bytes: usize,
}

/// Partitions a group's versions into spill objects (step 1), then merges
/// partition by partition (step 2) into sorted runs.
#[derive(Debug)]
pub(crate) struct Spiller {
    area: SpillArea,
    partitions: Vec<(Buffer, Vec<Segment>)>,
    flush_bytes: usize,
    objects: usize,
    /// Whether any version was partial: then every partition merges column-wise.
    partial: bool,
    /// Bytes written to spill objects.
    pub spilled_bytes: u64,
}

impl Spiller {
    /// A spiller over `partitions` partitions, each flushing once its buffer
    /// passes `flush_bytes`.
    pub(crate) fn new(area: SpillArea, partitions: usize, flush_bytes: usize) -> Self {
        let partitions = (0..partitions.max(1)).map(|_| (Buffer::default(), Vec::new())).collect();
        Self { area, partitions, flush_bytes: flush_bytes.max(1 << 16), objects: 0, partial: false, spilled_bytes: 0 }
    }

    /// The folder it spills to.
    pub(crate) fn area(&self) -> &SpillArea {
        &self.area
    }

    /// Number of partitions.
    pub(crate) fn partitions(&self) -> usize {
        self.partitions.len()
    }

    fn partition_of(&self, key: &str) -> usize {
        let h = murmur3::murmur3_32(&mut std::io::Cursor::new(key.as_bytes()), PARTITION_SEED).unwrap_or_default();
        h as usize % self.partitions.len()
    }

    /// Whether the group holds partial versions (pass it to
    /// [`crate::rules::merge_as`] for every partition).
    pub(crate) fn partial(&self) -> bool {
        self.partial
    }

    /// Adds the next version in write order.
    pub(crate) async fn push(&mut self, version: Version) -> Result<()> {
        let n = self.partitions.len();
        self.partial |= matches!(version, Version::Partial { .. });
        match version {
            Version::Rows(b) => self.push_rows(b, Kind::Rows).await,
            Version::Partial { batch, present } => self.push_rows(batch, Kind::Partial(present)).await,
            Version::Deletes(ds) => {
                let mut parts: Vec<Vec<DeleteRecord>> = (0..n).map(|_| Vec::new()).collect();
                for d in ds {
                    let p = self.partition_of(&d.key);
                    parts[p].push(d);
                }
                for (p, ds) in parts.into_iter().enumerate() {
                    if ds.is_empty() {
                        continue;
                    }
                    self.switch_kind(p, Kind::Deletes).await?;
                    let buf = &mut self.partitions[p].0;
                    buf.bytes += ds.iter().map(|d| d.key.len() + d.partition.len() + 32).sum::<usize>();
                    buf.deletes.extend(ds);
                    self.flush_if_full(p).await?;
                }
                Ok(())
            }
        }
    }

    async fn push_rows(&mut self, batch: RecordBatch, kind: Kind) -> Result<()> {
        let n = self.partitions.len();
        let keys = batch.column(RECORD_KEY).as_string::<i32>();
        let mut rows: Vec<Vec<u32>> = (0..n).map(|_| Vec::new()).collect();
        for (i, k) in keys.iter().enumerate() {
            // Rows without a key take no part in the merge.
            if let Some(k) = k {
                rows[self.partition_of(k)].push(i as u32);
            }
        }
        for (p, idx) in rows.into_iter().enumerate() {
            if idx.is_empty() {
                continue;
            }
            let part = arrow::compute::take_record_batch(&batch, &UInt32Array::from(idx))
                .map_err(|e| invalid(&self.area.dir, e))?;
            self.switch_kind(p, kind.clone()).await?;
            let buf = &mut self.partitions[p].0;
            buf.bytes += part.get_array_memory_size();
            buf.batches.push(part);
            self.flush_if_full(p).await?;
        }
        Ok(())
    }

    /// Flushes partition `p` if its buffer holds another kind of rows.
    async fn switch_kind(&mut self, p: usize, kind: Kind) -> Result<()> {
        if self.partitions[p].0.kind.as_ref().is_some_and(|k| *k != kind) {
            self.flush(p).await?;
        }
        self.partitions[p].0.kind = Some(kind);
        Ok(())
    }

    async fn flush_if_full(&mut self, p: usize) -> Result<()> {
        if self.partitions[p].0.bytes >= self.flush_bytes { self.flush(p).await } else { Ok(()) }
    }

    /// Writes partition `p`'s buffer to a new spill object.
    async fn flush(&mut self, p: usize) -> Result<()> {
        let buf = std::mem::take(&mut self.partitions[p].0);
        let Some(kind) = buf.kind else { return Ok(()) };
        let bytes = match kind {
            Kind::Deletes => {
                let mut out = Vec::new();
                encode_delete_content(&buf.deletes, &mut out);
                out
            }
            Kind::Rows | Kind::Partial(_) => match buf.batches.first() {
                Some(first) => ipc_bytes(&first.schema(), &buf.batches, &self.area.dir)?,
                None => return Ok(()),
            },
        };
        self.objects += 1;
        self.spilled_bytes += bytes.len() as u64;
        let path = self.area.put(&format!("part-{p:04}-{:06}.spill", self.objects), bytes).await?;
        self.partitions[p].1.push(Segment { kind, path });
        Ok(())
    }

    /// Spills what is still buffered; afterwards each partition can be read.
    pub(crate) async fn finish(&mut self) -> Result<()> {
        for p in 0..self.partitions.len() {
            self.flush(p).await?;
        }
        Ok(())
    }

    /// Partition `p`'s versions, in write order.
    pub(crate) async fn versions(&self, p: usize) -> Result<Vec<Version>> {
        let mut out = Vec::new();
        for seg in &self.partitions[p].1 {
            let bytes = self.area.get(&seg.path).await?;
            match &seg.kind {
                Kind::Deletes => out.push(Version::Deletes(decode_delete_content(&bytes, seg.path.as_ref())?)),
                Kind::Rows | Kind::Partial(_) => {
                    for b in read_ipc(bytes, &seg.path)? {
                        out.push(match &seg.kind {
                            Kind::Partial(present) => Version::Partial { batch: b, present: present.clone() },
                            _ => Version::Rows(b),
                        });
                    }
                }
            }
        }
        Ok(out)
    }

    /// Writes rows sorted by key as partition `p`'s run, in chunks. The
    /// final merge holds a chunk of every run at once, so a chunk is sized
    /// like a partition's buffer: all of them together take a quarter of the
    /// budget's share.
    pub(crate) async fn write_run(&mut self, p: usize, sorted: &RecordBatch) -> Result<Run> {
        let row_bytes = sorted.get_array_memory_size() / sorted.num_rows().max(1);
        let chunk_rows = (self.flush_bytes / row_bytes.max(1)).clamp(256, RUN_CHUNK_ROWS);
        let mut chunks = VecDeque::new();
        let mut offset = 0;
        while offset < sorted.num_rows() {
            let len = chunk_rows.min(sorted.num_rows() - offset);
            let chunk = sorted.slice(offset, len);
            let bytes = ipc_bytes(&sorted.schema(), std::slice::from_ref(&chunk), &self.area.dir)?;
            self.spilled_bytes += bytes.len() as u64;
            chunks.push_back(self.area.put(&format!("run-{p:04}-{:06}.arrow", chunks.len()), bytes).await?);
            offset += len;
        }
        Ok(Run { chunks })
    }
}

/// The sorted rows of one partition, as spill objects in key order.
#[derive(Debug, Default)]
pub(crate) struct Run {
    chunks: VecDeque<Path>,
}

fn ipc_bytes(schema: &SchemaRef, batches: &[RecordBatch], dir: &Path) -> Result<Vec<u8>> {
    let size: usize = batches.iter().map(RecordBatch::get_array_memory_size).sum();
    let mut w = StreamWriter::try_new(Vec::with_capacity(size + 1024), schema).map_err(|e| invalid(dir, e))?;
    for b in batches {
        w.write(b).map_err(|e| invalid(dir, e))?;
    }
    w.into_inner().map_err(|e| invalid(dir, e))
}

/// The batches of a spill object, decoded in place: their columns are
/// slices of `bytes`, not copies.
fn read_ipc(bytes: bytes::Bytes, path: &Path) -> Result<Vec<RecordBatch>> {
    let mut buffer = arrow::buffer::Buffer::from(bytes);
    let mut decoder = StreamDecoder::new();
    let mut batches = Vec::new();
    while !buffer.is_empty() {
        if let Some(batch) = decoder.decode(&mut buffer).map_err(|e| invalid(path, e))? {
            batches.push(batch);
        }
    }
    decoder.finish().map_err(|e| invalid(path, e))?;
    Ok(batches)
}

/// Merges sorted runs by key, a chunk of each at a time (step 3). Keys are
/// unique across runs (each key lives in one partition).
#[derive(Debug)]
pub(crate) struct RunMerger {
    area: SpillArea,
    cursors: Vec<Cursor>,
}

#[derive(Debug)]
struct Cursor {
    run: Run,
    batch: Option<RecordBatch>,
    /// The current chunk's record keys.
    keys: Option<StringArray>,
    row: usize,
}

impl Cursor {
    fn key(&self) -> Option<&str> {
        self.keys.as_ref().map(|k| k.value(self.row))
    }
}

impl RunMerger {
    /// A merger over `runs`.
    pub(crate) fn new(area: SpillArea, runs: Vec<Run>) -> Self {
        Self { area, cursors: runs.into_iter().map(|run| Cursor { run, batch: None, keys: None, row: 0 }).collect() }
    }

    /// Loads the next chunk of cursor `i` if its current one is used up.
    async fn refill(&mut self, i: usize) -> Result<()> {
        let c = &mut self.cursors[i];
        while c.batch.as_ref().is_none_or(|b| c.row >= b.num_rows()) {
            c.batch = None;
            c.keys = None;
            c.row = 0;
            let Some(path) = c.run.chunks.pop_front() else { return Ok(()) };
            let got = self.area.get(&path).await?;
            let mut batches = read_ipc(got, &path)?;
            // Best effort, to free disk early: the folder is cleared at the end.
            let _ = self.area.store.delete(&path).await;
            c.batch = match batches.len() {
                0 => None,
                1 => batches.pop(),
                _ => Some(
                    arrow::compute::concat_batches(&batches[0].schema(), &batches).map_err(|e| invalid(&path, e))?,
                ),
            };
            c.keys = c.batch.as_ref().map(|b| b.column(RECORD_KEY).as_string::<i32>().clone());
        }
        Ok(())
    }

    /// The next batch of rows in key order, or `None` when all runs are done.
    pub(crate) async fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        for i in 0..self.cursors.len() {
            self.refill(i).await?;
        }
        let mut picks: Vec<(usize, usize)> = Vec::with_capacity(RUN_CHUNK_ROWS);
        while picks.len() < RUN_CHUNK_ROWS {
            let mut best: Option<(usize, &str)> = None;
            for (i, c) in self.cursors.iter().enumerate() {
                if let Some(k) = c.key()
                    && best.is_none_or(|(_, b)| k < b)
                {
                    best = Some((i, k));
                }
            }
            let Some((i, _)) = best else { break };
            let c = &mut self.cursors[i];
            picks.push((i, c.row));
            c.row += 1;
            // Emit before a chunk is replaced: picks point into the current chunks.
            if c.batch.as_ref().is_some_and(|b| c.row >= b.num_rows()) {
                break;
            }
        }
        if picks.is_empty() {
            return Ok(None);
        }
        let empty = RecordBatch::new_empty(self.schema());
        let batches: Vec<&RecordBatch> = self.cursors.iter().map(|c| c.batch.as_ref().unwrap_or(&empty)).collect();
        arrow::compute::interleave_record_batch(&batches, &picks).map(Some).map_err(|e| invalid(&self.area.dir, e))
    }

    fn schema(&self) -> SchemaRef {
        self.cursors
            .iter()
            .find_map(|c| c.batch.as_ref().map(RecordBatch::schema))
            .unwrap_or_else(|| Arc::new(arrow::datatypes::Schema::empty()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, RecordBatch};
    use object_store::memory::InMemory;
    use proptest::prelude::*;

    use super::*;
    use crate::rules::{merge, merge_as};
    use crate::test_util::{Case, case, sorted, write};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Partitioning, spilling, merging per partition and merging the
        /// sorted runs gives exactly the rows of merging everything at once.
        #[test]
        fn spilling_merges_like_the_whole_group(
            writes in prop::collection::vec(write(), 1..12),
            partitions in 1usize..6,
            grouped in any::<bool>(),
        ) {
            let Case { schema, config, versions, want } = case(&writes, grouped);

            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let got = rt.block_on(async {
                let area = SpillArea { store: Arc::new(InMemory::new()), dir: Path::from("spill") };
                // A tiny threshold: every push spills.
                let mut spiller = Spiller::new(area.clone(), partitions, 0);
                for v in versions.iter().cloned() {
                    spiller.push(v).await.unwrap();
                }
                spiller.finish().await.unwrap();
                let mut runs = Vec::new();
                for p in 0..spiller.partitions() {
                    let part = spiller.versions(p).await.unwrap();
                    if let Some(m) = merge_as(&schema, &config, &part, spiller.partial(), false).unwrap() {
                        let cols = sorted(m);
                        let b = RecordBatch::try_new(schema.arrow_with_meta().clone(), cols).unwrap();
                        runs.push(spiller.write_run(p, &b).await.unwrap());
                    }
                }
                let mut merger = RunMerger::new(area.clone(), runs);
                let mut out = Vec::new();
                while let Some(b) = merger.next_batch().await.unwrap() {
                    out.push(b);
                }
                area.clear().await.unwrap();
                let left: Vec<_> = area.store.list(None).try_collect().await.unwrap();
                assert!(left.is_empty(), "spill folder cleared: {left:?}");
                if out.is_empty() {
                    None
                } else {
                    let all = arrow::compute::concat_batches(&out[0].schema(), &out).unwrap();
                    let keys = all.column(RECORD_KEY).as_string::<i32>();
                    assert!((1..keys.len()).all(|i| keys.value(i - 1) < keys.value(i)), "runs merge in key order");
                    Some(all.columns().to_vec())
                }
            });
            prop_assert_eq!(got, want);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Merging as versions arrive, folding now and then, and handing the
        /// merged state on as versions (when a partial version arrives, or
        /// at any point) gives exactly the rows of merging everything at once.
        #[test]
        fn folding_merges_like_the_whole_group(
            writes in prop::collection::vec(write(), 1..12),
            fold_every in 1usize..4,
            hand_on_at in 0usize..14,
        ) {
            let Case { schema, config, versions, want } = case(&writes, false);

            let mut merger = crate::rows::RowMerger::new(&schema, config.merge_mode);
            let hand_on = versions
                .iter()
                .position(|v| matches!(v, Version::Partial { .. }))
                .map_or(hand_on_at, |p| p.min(hand_on_at));
            for (i, v) in versions.iter().enumerate().take(hand_on) {
                merger.push(v).unwrap();
                if i % fold_every == 0 {
                    merger.fold().unwrap();
                }
            }
            let got = if hand_on < versions.len() {
                let mut rest = merger.into_versions().unwrap();
                rest.extend(versions[hand_on..].iter().cloned());
                merge(&schema, &config, &rest).unwrap().map(sorted)
            } else {
                merger.finish(true).unwrap().map(|b| {
                    let keys = b.column(RECORD_KEY).as_string::<i32>();
                    assert!((1..keys.len()).all(|i| keys.value(i - 1) < keys.value(i)), "rows in key order");
                    b.columns().to_vec()
                })
            };
            prop_assert_eq!(got, want);
        }
    }
}
