//! A commit's writer task: the actor that owns some buckets, assembles
//! their log files record by record, up to its share of the memory budget,
//! and flushes them as new log files, each announced by a marker first.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering as AtomicOrdering;

use arrow::array::RecordBatch;
use arrow::array::StringArray;
use futures::StreamExt;
use tokio::sync::mpsc;
use tributary_format::codec::{
    DeleteRecord, MetaFields, OrderingValue, TableDatumEncoder, TableDatums, encode_delete_block,
};
use tributary_format::log_block::{AvroContent, BlockType, HeaderKey, OpenBlock, begin_block, finish_block};
use tributary_merge::Combiner;
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
    /// The Avro datums of the rows' table columns, when the write encoded
    /// them (it does when versions do not combine).
    pub(crate) datums: Option<Arc<TableDatums>>,
    /// The memory a row of `rows` holds, about.
    pub(crate) row_bytes: usize,
    pub(crate) keys: Arc<StringArray>,
    pub(crate) partition: Arc<str>,
    pub(crate) bucket: u32,
    pub(crate) indices: Vec<u32>,
}

impl std::fmt::Debug for Piece {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Piece({}/{}: {} rows)", self.partition, self.bucket, self.indices.len())
    }
}

/// The log file of one bucket of one partition, assembled as rows arrive.
///
/// Where versions combine ([`Combiner`]), rows are held (by reference to
/// their pieces) and combined as they come, while their keys are still in
/// the CPU's caches, so that of a key's versions only the one the merge
/// keeps is stored; when the file is flushed, the rows kept are gathered,
/// encoded as Avro (only they are) and written. Where they do not, each
/// piece's rows (which the write encoded) are written as they come.
///
/// Records go into AVRO_DATA blocks of up to about [`BLOCK_BYTES`] each, in
/// buffers used again once the file is stored. Deletes wait for the end of
/// the file, unless a row of a key they delete comes after them: then the
/// rows held and the deletes go first, as blocks of their own, so that the
/// file keeps the input's order of every key's versions (under commit-time
/// ordering, or on a tie of event times, the later write wins).
struct GroupFile {
    partition: Arc<str>,
    file_id: String,
    meta: MetaFields,
    /// The blocks sealed so far.
    sealed: Vec<bytes::Bytes>,
    /// The data block being written, if any.
    open: Option<OpenData>,
    /// The rows held, combined as they came, and the pieces they are in (by
    /// the combiner's source number).
    held: Combiner,
    sources: Vec<Source>,
    /// The memory of the rows held (those that lost too: their pieces stay
    /// held).
    held_bytes: usize,
    records: u64,
    /// Deletes not yet in a block, and their keys.
    deletes: Vec<DeleteRecord>,
    deleted_keys: foldhash::HashSet<String>,
    /// Deletes in sealed blocks.
    deletes_sealed: u64,
}

/// An AVRO_DATA block being written.
struct OpenData {
    out: Vec<u8>,
    block: OpenBlock,
    content: AvroContent,
}

/// A piece whose rows a group file holds.
struct Source {
    rows: Arc<Rows>,
    keys: Arc<StringArray>,
    datums: Option<Arc<TableDatums>>,
}

/// What a task's records are written with: the block header, the sequence
/// numbers and the Avro encoder, and the client's buffers.
struct Encoding {
    shared: Arc<Shared>,
    instant: InstantTime,
    header: Vec<(HeaderKey, String)>,
    seqno: u64,
    /// The Avro encoder of the table columns, once the task encoded rows.
    encoder: Option<TableDatumEncoder>,
}

impl Encoding {
    /// The Avro datums of `rows`' table columns (`what` names them). An
    /// encoder that failed may hold part of the rows, so it is dropped.
    fn datums(&mut self, rows: &RecordBatch, what: impl FnOnce() -> String) -> Result<TableDatums> {
        let mut encoder = match self.encoder.take() {
            Some(e) => e,
            None => self.shared.take_encoder()?,
        };
        let datums = encoder.encode(rows).map_err(|cause| Error::Encode {
            table: self.shared.loc.to_string(),
            instant: self.instant.to_string(),
            input: what(),
            cause: Box::new(cause),
        })?;
        self.encoder = Some(encoder);
        Ok(datums)
    }
}

impl GroupFile {
    /// Bytes held.
    fn bytes(&self) -> usize {
        self.sealed.iter().map(bytes::Bytes::len).sum::<usize>()
            + self.open.as_ref().map_or(0, |o| o.out.len())
            + self.held_bytes
            + DELETE_BYTES * self.deletes.len()
    }

    /// Starts holding rows of piece `p`; its source number.
    fn hold(&mut self, p: &Piece) -> u32 {
        self.sources.push(Source { rows: p.rows.clone(), keys: p.keys.clone(), datums: p.datums.clone() });
        self.held.add_source(&p.keys, &p.rows.batch)
    }

    /// Writes the rows held, of each key's versions the one the combiner
    /// keeps, in write order, into data blocks, and stops holding them.
    fn write_held(&mut self, enc: &mut Encoding) -> Result<()> {
        let GroupFile { partition, file_id, held, sources, .. } = self;
        let at: Vec<(usize, usize)> = held.kept().iter().map(|&(s, r)| (s as usize, r as usize)).collect();
        if sources.iter().all(|s| s.datums.is_some()) {
            // Encoded as they came (every row is kept).
            let records = at.iter().map(|&(s, r)| {
                let s = &sources[s];
                (s.keys.value(r).as_bytes(), s.datums.as_deref().map_or(&[][..], |d| d.get(r)))
            });
            write_records(records, &self.meta, enc, &mut self.open, &mut self.sealed, &mut self.records);
        } else if !at.is_empty() {
            // Only the rows kept are gathered and encoded.
            let batches: Vec<&RecordBatch> = sources.iter().map(|s| &s.rows.batch).collect();
            let what = || format!("{} rows of file group {file_id} in partition `{partition}`", at.len());
            let rows = arrow::compute::interleave_record_batch(&batches, &at).map_err(|e| Error::Internal {
                table: enc.shared.loc.to_string(),
                instant: enc.instant.to_string(),
                what: format!("gathering {}", what()),
                reason: e.to_string(),
            })?;
            let datums = enc.datums(&rows, what)?;
            let keys = at.iter().map(|&(s, r)| sources[s].keys.value(r).as_bytes());
            let records = keys.zip((0..rows.num_rows()).map(|i| datums.get(i)));
            write_records(records, &self.meta, enc, &mut self.open, &mut self.sealed, &mut self.records);
        }
        self.held.clear();
        self.sources.clear();
        self.held_bytes = 0;
        Ok(())
    }

    /// Writes the rows held and seals the data block, then the waiting
    /// deletes as a DELETE block.
    fn seal(&mut self, enc: &mut Encoding) -> Result<()> {
        self.write_held(enc)?;
        if let Some(open) = self.open.take() {
            self.sealed.push(seal_block(open, &mut self.records));
        }
        if !self.deletes.is_empty() {
            let mut out = Vec::new();
            encode_delete_block(&self.deletes, &enc.header, &mut out);
            self.sealed.push(bytes::Bytes::from(out));
            self.deletes_sealed += self.deletes.len() as u64;
            self.deletes.clear();
            self.deleted_keys.clear();
        }
        Ok(())
    }
}

/// Writes records (key, datum), each after its meta fields, into the open
/// data block, sealing it into `sealed` whenever it is full.
fn write_records<'r>(
    input: impl Iterator<Item = (&'r [u8], &'r [u8])> + Clone,
    meta: &MetaFields,
    enc: &mut Encoding,
    open: &mut Option<OpenData>,
    sealed: &mut Vec<bytes::Bytes>,
    records: &mut u64,
) {
    let need = |seqno: u64, (key, datum): (&[u8], &[u8])| 4 + meta.max_len(seqno, key.len()) + datum.len();
    // What the records take, to size a new block's buffer: a small
    // commit's block takes little memory, a large one's grows less.
    let mut rest: usize = input.clone().map(|r| need(enc.seqno, r)).sum();
    for (key, datum) in input {
        let need = need(enc.seqno, (key, datum));
        if let Some(o) = open.take_if(|o| o.content.records() > 0 && o.out.len() + need + BLOCK_TAIL > BLOCK_BYTES) {
            sealed.push(seal_block(o, records));
        }
        let o = open.get_or_insert_with(|| {
            let want = (rest + BLOCK_TAIL).clamp(MIN_BLOCK_BUFFER, BLOCK_BYTES);
            let mut out = enc.shared.buffers.take(want);
            let block = begin_block(&mut out, BlockType::AvroData, &enc.header);
            let content = AvroContent::begin(&mut out);
            OpenData { out, block, content }
        });
        if o.out.len() + need + BLOCK_TAIL > o.out.capacity() {
            // Doubling, up to the block size: a block never moves more than
            // once per doubling and never outgrows its seal.
            let len = o.out.len() + need + BLOCK_TAIL;
            let target = (o.out.capacity() * 2).max(len).min(BLOCK_BYTES.max(len));
            o.out.reserve_exact(target - o.out.len());
        }
        let at = o.content.start_record(&mut o.out);
        meta.put(&mut o.out, enc.seqno, key);
        o.out.extend_from_slice(datum);
        o.content.end_record(&mut o.out, at);
        enc.seqno += 1;
        rest = rest.saturating_sub(need);
    }
}

/// The data block `o`, finished, its records counted into `records`.
fn seal_block(o: OpenData, records: &mut u64) -> bytes::Bytes {
    let OpenData { mut out, block, content } = o;
    *records += content.records() as u64;
    content.finish(&mut out);
    finish_block(&mut out, block, &[]);
    bytes::Bytes::from(out)
}

/// The size a data block is sealed at: large enough that its header (the
/// schema) costs little, small enough that a block buffer is reused soon.
const BLOCK_BYTES: usize = 1 << 20;

/// Room a block keeps for its footer and reverse pointer.
const BLOCK_TAIL: usize = 16;

/// The smallest buffer a data block starts in.
const MIN_BLOCK_BUFFER: usize = 16 << 10;

/// Buffers of data blocks, kept once their files were stored: memory in
/// use already costs less than fresh pages.
#[derive(Debug, Default)]
pub(crate) struct BlockBuffers {
    /// The buffers kept, and their capacities' sum.
    kept: std::sync::Mutex<(Vec<Vec<u8>>, usize)>,
}

impl BlockBuffers {
    /// An empty block buffer of at least `want` bytes: a kept one, else a
    /// new one.
    fn take(&self, want: usize) -> Vec<u8> {
        let mut kept = self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (buffers, held) = &mut *kept;
        match buffers.iter().rposition(|b| b.capacity() >= want) {
            Some(i) => {
                let b = buffers.swap_remove(i);
                *held -= b.capacity();
                b
            }
            None => Vec::with_capacity(want),
        }
    }

    /// Keeps the buffer of a stored block's `bytes` when nothing else holds
    /// them, it is not too small to start a block in, and the kept ones
    /// stay within `limit` bytes.
    fn keep(&self, bytes: bytes::Bytes, limit: usize) {
        let Ok(mut b) = bytes.try_into_mut() else { return };
        // Emptied first, so that taking the vector back copies nothing.
        b.clear();
        let buffer = Vec::from(b);
        if buffer.capacity() < MIN_BLOCK_BUFFER {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (buffers, held) = &mut *kept;
        if *held + buffer.capacity() <= limit {
            *held += buffer.capacity();
            buffers.push(buffer);
        }
    }
}

/// What a delete costs in the memory budget (its key, partition and
/// ordering value, roughly).
const DELETE_BYTES: usize = 64;

pub(crate) struct TaskContext {
    shared: Arc<Shared>,
    instant: InstantTime,
    task: u64,
    budget: usize,
    enc: Encoding,
    groups: HashMap<(Arc<str>, u32), GroupFile>,
    buffered: usize,
    versions: HashMap<(Arc<str>, u32), u32>,
    written: Vec<FileWrite>,
    cancelled: Arc<std::sync::atomic::AtomicBool>,
}

impl TaskContext {
    pub(crate) fn new(
        shared: Arc<Shared>,
        instant: InstantTime,
        task: u64,
        budget: usize,
        cancelled: Arc<std::sync::atomic::AtomicBool>,
    ) -> Self {
        let mut header = vec![
            (HeaderKey::Schema, shared.schema.log_json().to_string()),
            (HeaderKey::InstantTime, instant.to_string()),
        ];
        if shared.schema.is_partial() {
            header.push((HeaderKey::IsPartial, "true".to_string()));
        }
        let enc = Encoding { shared: shared.clone(), instant: instant.clone(), header, seqno: 1, encoder: None };
        Self {
            shared,
            instant,
            task,
            budget,
            enc,
            groups: HashMap::new(),
            buffered: 0,
            versions: HashMap::new(),
            written: Vec::new(),
            cancelled,
        }
    }

    pub(crate) async fn run(mut self, mut rx: mpsc::Receiver<Piece>) -> Result<Vec<FileWrite>> {
        while let Some(piece) = rx.recv().await {
            if self.cancelled.load(AtomicOrdering::SeqCst) {
                return Ok(self.finish());
            }
            self.add(piece).await?;
            if self.buffered >= self.budget {
                self.flush_all().await?;
            }
        }
        if !self.cancelled.load(AtomicOrdering::SeqCst) {
            self.flush_all().await?;
        }
        Ok(self.finish())
    }

    /// What the task wrote; its encoder goes back to the client for later
    /// commits.
    fn finish(mut self) -> Vec<FileWrite> {
        if let Some(e) = self.enc.encoder.take() {
            self.shared.keep_encoder(e);
        }
        std::mem::take(&mut self.written)
    }

    /// Takes a piece's rows into its file group's log file: each kept row
    /// to be combined with the key's other versions, each deleted row as a
    /// delete.
    async fn add(&mut self, p: Piece) -> Result<()> {
        let group = (p.partition.clone(), p.bucket);
        if !self.groups.contains_key(&group) {
            let file_id = self.file_id(&p.partition, p.bucket).await?;
            let meta = MetaFields::new(self.instant.as_str(), self.task, &p.partition, &file_id);
            let g = GroupFile {
                partition: p.partition.clone(),
                file_id,
                meta,
                sealed: Vec::new(),
                open: None,
                held: self.shared.combiner(),
                sources: Vec::new(),
                held_bytes: 0,
                records: 0,
                deletes: Vec::new(),
                deleted_keys: Default::default(),
                deletes_sealed: 0,
            };
            self.groups.insert(group.clone(), g);
        }
        let Some(g) = self.groups.get_mut(&group) else { return Ok(()) };
        let before = g.bytes();
        let deleted = p.rows.deleted.as_ref();
        let ord = self.shared.schema.ordering_index().map(|i| p.rows.batch.column(i));
        let mut source = g.hold(&p);
        // Rows go to the combiner in runs, between deletes and the rows
        // that must follow them.
        let mut run = 0;
        let watch = deleted.is_some() || !g.deleted_keys.is_empty();
        for (i, &r) in p.indices.iter().enumerate().filter(|_| watch) {
            let key = p.keys.value(r as usize);
            if deleted.is_some_and(|d| d.value(r as usize)) {
                g.held.push(source, &p.indices[run..i]);
                run = i + 1;
                g.deletes.push(DeleteRecord {
                    key: key.to_string(),
                    partition: p.partition.to_string(),
                    ordering: ord.map_or(OrderingValue::Null, |c| OrderingValue::of(c, r as usize)),
                });
                g.deleted_keys.insert(key.to_string());
            } else if !g.deleted_keys.is_empty() && g.deleted_keys.contains(key) {
                // A row of a key deleted before it: what is held, and the
                // deletes, go first.
                g.held.push(source, &p.indices[run..i]);
                run = i;
                g.seal(&mut self.enc)?;
                source = g.hold(&p);
            }
        }
        g.held.push(source, &p.indices[run..]);
        g.held_bytes += p.indices.len() * p.row_bytes;
        if !self.shared.combines {
            // Nothing to wait for: written while the datums are warm.
            g.write_held(&mut self.enc)?;
        }
        // Sealing replaces estimates by encoded sizes, which may be smaller.
        self.buffered = (self.buffered + g.bytes()).saturating_sub(before);
        Ok(())
    }

    /// Flushes every file group held: seals each log file and stores them
    /// [`FLUSH_CONCURRENCY`] at a time (a local disk syncs them together,
    /// an object store takes the puts in parallel), in bucket order.
    async fn flush_all(&mut self) -> Result<()> {
        let mut groups: Vec<((Arc<str>, u32), GroupFile)> = self.groups.drain().collect();
        groups.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut sealed: Vec<Encoded> = Vec::with_capacity(groups.len());
        for ((p, b), g) in groups {
            sealed.extend(self.seal(&p, b, g)?);
        }
        let (loc, instant, task) = (&self.shared.loc, &self.instant, self.task);
        let stored: Vec<Result<(u32, FileWrite, Vec<bytes::Bytes>)>> = futures::stream::iter(sealed)
            .map(|e| e.store(loc, instant, task))
            .buffered(FLUSH_CONCURRENCY)
            .collect()
            .await;
        self.buffered = 0;
        for stored in stored {
            let (bucket, w, blocks) = stored?;
            for b in blocks {
                self.shared.buffers.keep(b, self.shared.settings.buffer_bytes);
            }
            self.versions.insert((Arc::from(w.partition.as_str()), bucket), w.version);
            self.written.push(w);
        }
        Ok(())
    }

    /// One file group's log file sealed: its last data block finished, the
    /// deletes still waiting appended as a DELETE block; `None` when it holds
    /// nothing.
    fn seal(&mut self, partition: &Arc<str>, bucket: u32, mut g: GroupFile) -> Result<Option<Encoded>> {
        g.seal(&mut self.enc)?;
        let GroupFile { file_id, sealed, records, deletes_sealed: deletes, .. } = g;
        if sealed.is_empty() {
            return Ok(None);
        }
        let version = self.versions.get(&(partition.clone(), bucket)).copied().unwrap_or(0) + 1;
        Ok(Some(Encoded {
            write: FileWrite {
                partition: partition.to_string(),
                file_id,
                name: String::new(),
                version,
                records,
                deletes,
                blocks: sealed.len() as u64,
                bytes: sealed.iter().map(|b| b.len() as u64).sum(),
            },
            bucket,
            blocks: sealed,
        }))
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
}

/// How many log files a task stores at once.
const FLUSH_CONCURRENCY: usize = 8;

/// A log file encoded, to be stored: its description (the version to try
/// first; the name is set once stored) and its bytes.
struct Encoded {
    write: FileWrite,
    bucket: u32,
    /// The file's blocks, in order.
    blocks: Vec<bytes::Bytes>,
}

impl Encoded {
    /// Stores the file under the first free version from the one it holds,
    /// each announced by its marker first; yields its bucket, what was
    /// written and the blocks, for their buffers to be used again.
    async fn store(
        self,
        loc: &TableLocation,
        instant: &InstantTime,
        task: u64,
    ) -> Result<(u32, FileWrite, Vec<bytes::Bytes>)> {
        let Encoded { mut write, bucket, blocks } = self;
        let payload: object_store::PutPayload = blocks.iter().cloned().collect();
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
            match loc.create(&loc.join(&rel), payload.clone()).await {
                Ok(_) => {
                    write.name = name;
                    drop(payload);
                    return Ok((bucket, write, blocks));
                }
                Err(tributary_timeline::StorageError::AlreadyExists { .. }) => write.version += 1,
                Err(e) => return Err(e.into()),
            }
        }
    }
}
