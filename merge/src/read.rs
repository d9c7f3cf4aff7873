//! Reading a file slice: what a slice merge reads ([`SliceFiles`] with a
//! [`SliceMerge`] context), and base Parquet rows and log blocks as versions
//! in write order.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, BooleanArray, RecordBatch, new_null_array};
use arrow::datatypes::{DataType, Schema, SchemaRef};
use object_store::ObjectStoreExt;
use object_store::path::Path;
use tributary_format::Memo;
use tributary_format::{BlockHead, BlockType, HeaderKey, LogBlock};
use tributary_format::{COMMIT_TIME, TableSchema};
use tributary_format::{DataBlockBatches, decode_delete_content};
use tributary_timeline::{InstantTime, TableConfig, TableLocation, Timeline};
use tributary_timeline::{StoreFile, TAIL_BYTES};

use crate::error::{Error, Result};
use crate::version::Version;

/// The files of one slice, in write order.
#[derive(Debug, Clone, Copy)]
pub struct SliceFiles<'a> {
    /// The base file, if any.
    pub base: Option<&'a Path>,
    /// The log files, in log order.
    pub logs: &'a [Path],
    /// The sizes of `logs` in bytes, in the same order, where the caller
    /// knows them (a listing, say); else empty. A small log of known size
    /// is read in one request.
    pub log_sizes: &'a [u64],
    /// Which of the base file's rows take part in the merge.
    pub base_rows: BaseRows<'a>,
}

/// Which rows of a slice's base file take part in its merge.
#[derive(Debug, Clone, Copy, Default)]
pub enum BaseRows<'a> {
    /// Every row: snapshot reads and the compactor.
    #[default]
    All,
    /// Only the rows whose `_hoodie_commit_time` is one of these instants;
    /// the others are dropped before the merge, so they neither show nor
    /// beat a log version. Incremental reads take the base rows of the
    /// window's commits only (`docs/design.md`, "Merge semantics").
    WrittenBy(&'a HashSet<String>),
}

impl SliceFiles<'_> {
    /// The size of log `i`, if known.
    pub(crate) fn log_size(&self, i: usize) -> Option<u64> {
        self.log_sizes.get(i).copied()
    }
}

impl BaseRows<'_> {
    /// Whether every row is taken.
    pub fn all(&self) -> bool {
        matches!(self, BaseRows::All)
    }

    /// The rows of `batch` (a base file's, meta columns first) that take
    /// part; `path` names the file for errors.
    pub fn keep(&self, batch: RecordBatch, path: &str) -> Result<RecordBatch> {
        match self {
            BaseRows::All => Ok(batch),
            BaseRows::WrittenBy(commits) => written_by(batch, commits, path),
        }
    }
}

/// The rows of `batch` (meta columns first) whose `_hoodie_commit_time` is
/// one of `commits`; `what` names the rows' source for errors.
pub fn written_by(batch: RecordBatch, commits: &HashSet<String>, what: &str) -> Result<RecordBatch> {
    let times = batch.column(COMMIT_TIME).as_string_opt::<i32>().ok_or_else(|| Error::Invalid {
        what: what.to_string(),
        reason: format!("`_hoodie_commit_time` is {}, not a string", batch.column(COMMIT_TIME).data_type()),
    })?;
    let mask: BooleanArray = times.iter().map(|t| Some(t.is_some_and(|t| commits.contains(t)))).collect();
    if mask.true_count() == batch.num_rows() {
        return Ok(batch);
    }
    arrow::compute::filter_record_batch(&batch, &mask)
        .map_err(|e| Error::arrow(format!("keeping the rows of {what} by commit"), e))
}

/// What a slice merge reads with: the table, its schema and config, and the
/// timeline that says which log blocks are committed.
#[derive(Debug, Clone, Copy)]
pub struct SliceMerge<'a> {
    /// The table.
    pub loc: &'a TableLocation,
    /// The schema rows are merged in.
    pub schema: &'a TableSchema,
    /// The table's configuration (merge mode, sequence groups).
    pub config: &'a TableConfig,
    /// The timeline the slice was taken from.
    pub timeline: &'a Timeline,
}

/// Rows decoded per step when a log is read.
const LOG_BATCH_ROWS: usize = 16 * 1024;

/// The versions of one log file in write order, decoded as they are pulled:
/// a log holds one block at a time and one decoded batch of it. Blocks of
/// instants that did not complete (possible in pre-v8 logs) are skipped.
pub(crate) struct LogReader<'a> {
    blocks: LogBlocks<'a>,
    schema: &'a TableSchema,
    timeline: &'a Timeline,
    /// The data block being read.
    current: Option<Block>,
}

/// A data block being read: decoded as pulled, with its records' layout;
/// or (a small block) decoded at once.
enum Block {
    Decoding(DataBlockBatches, Layout),
    Decoded(Arc<[Version]>, usize),
}

/// Data blocks up to this size decode once per process while they are
/// read again ([`decoded_block`]); larger ones a batch at a time.
const MEMO_BLOCK_BYTES: usize = 64 << 10;

impl<'a> LogReader<'a> {
    /// Opens the log file `log` of the table at `loc`, of `size` bytes if
    /// known.
    pub(crate) async fn open(
        loc: &'a TableLocation,
        schema: &'a TableSchema,
        log: &'a object_store::path::Path,
        size: Option<u64>,
        timeline: &'a Timeline,
    ) -> Result<Self> {
        Ok(Self { blocks: LogBlocks::open(loc, log, size).await?, schema, timeline, current: None })
    }

    /// The next version, or `None` at the end of the file.
    pub(crate) async fn next(&mut self) -> Result<Option<Version>> {
        loop {
            match &mut self.current {
                Some(Block::Decoding(batches, layout)) => match batches.next() {
                    Some(b) => return version_of(b?, *layout, self.schema, &self.blocks.name).map(Some),
                    None => self.current = None,
                },
                Some(Block::Decoded(versions, next)) => match versions.get(*next) {
                    Some(v) => {
                        *next += 1;
                        return Ok(Some(v.clone()));
                    }
                    None => self.current = None,
                },
                None => {}
            }
            let Some(block) = self.blocks.next_live(self.timeline).await? else { return Ok(None) };
            let path = &self.blocks.name;
            match block.block_type {
                BlockType::AvroData => {
                    let writer_json = block.header(HeaderKey::Schema).unwrap_or(self.schema.log_json());
                    let layout = read_as_written(&block, writer_json, self.schema);
                    self.current = Some(if block.content.len() <= MEMO_BLOCK_BYTES {
                        Block::Decoded(decoded_block(&block.content, writer_json, layout, self.schema, path)?, 0)
                    } else {
                        let batches = data_block_batches(&block.content, writer_json, layout, self.schema, path)?;
                        Block::Decoding(batches, layout)
                    });
                }
                BlockType::ParquetData => {
                    self.current = Some(Block::Decoded(parquet_block(&block.content, self.schema, path)?, 0));
                }
                BlockType::Delete => return Ok(Some(Version::Deletes(decode_delete_content(&block.content, path)?))),
                BlockType::Command => {}
                other => return Err(unsupported_block(other, path)),
            }
        }
    }
}

/// The versions of a Parquet data block (`HoodieParquetDataBlock`, which
/// Hudi writes with `hoodie.logfile.data.block.format=parquet`): its
/// content is a whole Parquet file of the records, meta columns included,
/// read like a base file and laid out as the table's rows.
fn parquet_block(content: &bytes::Bytes, schema: &TableSchema, path: &str) -> Result<Arc<[Version]>> {
    if !(content.starts_with(b"PAR1") && content.ends_with(b"PAR1")) {
        return Err(Error::Corrupt {
            path: path.to_string(),
            reason: format!("a Parquet data block of {} bytes is not a Parquet file (no PAR1 magic)", content.len()),
        });
    }
    Ok(read_parquet(content.clone(), schema, path)?.into_iter().map(Version::Rows).collect())
}

/// The batches of a data block's `content`, written under `writer_json`:
/// as the table's log schema, or (a partial block) as written.
fn data_block_batches(
    content: &bytes::Bytes,
    writer_json: &str,
    layout: Layout,
    schema: &TableSchema,
    path: &str,
) -> Result<DataBlockBatches> {
    // A block of another layout is read as written, then widened to the table.
    let reader_json = if layout == Layout::Table { schema.log_json() } else { writer_json };
    Ok(DataBlockBatches::new(content.clone(), writer_json, reader_json, path, LOG_BATCH_ROWS)?)
}

/// Whether a data block is decoded as written and then laid out as the
/// table ([`widen`]), rather than decoded straight into the table's log
/// schema: a partial writer's block (`IS_PARTIAL=true`), and a block
/// written under another schema, such as an older one from before columns
/// were added or promoted (`docs/design.md`, "Schema evolution").
fn read_as_written(block: &LogBlock, writer_json: &str, schema: &TableSchema) -> Layout {
    if block.header(HeaderKey::IsPartial) == Some("true") {
        Layout::Partial
    } else if writer_json != schema.log_json() {
        Layout::Evolved
    } else {
        Layout::Table
    }
}

/// How a data block's records are laid out against the table's schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// Written under the table's log schema.
    Table,
    /// Whole records of another schema (an older one, before an evolution).
    Evolved,
    /// A partial writer's columns (`IS_PARTIAL=true`).
    Partial,
}

/// A decoded batch of a data block as a version of the table's rows.
fn version_of(b: RecordBatch, layout: Layout, schema: &TableSchema, path: &str) -> Result<Version> {
    match layout {
        Layout::Table => Ok(Version::Rows(b)),
        Layout::Evolved | Layout::Partial => widen(b, layout, schema, path),
    }
}

/// The versions of a small data block, decoded once per process while the
/// block is read again: keyed by its content, the schema it was written
/// under and the table's (`tributary_format::memo`), so a changed block or
/// schema is a new key. Until the next compaction, every snapshot read and
/// the compaction itself take the same blocks of the latest slices. The
/// memo holds at most 16 MiB of keys and decoded versions.
fn decoded_block(
    content: &bytes::Bytes,
    writer_json: &str,
    layout: Layout,
    schema: &TableSchema,
    path: &str,
) -> Result<Arc<[Version]>> {
    static DECODED: Memo<Option<Arc<[Version]>>> = Memo::weighed(4096, 16 << 20, |versions| {
        versions.as_deref().map_or(0, |v| v.iter().map(Version::held_bytes).sum())
    });
    let decode = || -> Result<Arc<[Version]>> {
        data_block_batches(content, writer_json, layout, schema, path)?
            .map(|b| version_of(b?, layout, schema, path))
            .collect()
    };
    let log_json = schema.log_json();
    let mut key = Vec::with_capacity(writer_json.len() + log_json.len() + content.len() + 3);
    for part in [writer_json.as_bytes(), &[0], log_json.as_bytes(), &[0, layout as u8], content] {
        key.extend_from_slice(part);
    }
    DECODED.get_or_try(&key, decode)
}

/// The error for a log block of a type no reader handles.
pub(crate) fn unsupported_block(block_type: BlockType, path: &str) -> Error {
    Error::Invalid {
        what: path.to_string(),
        reason: format!(
            "a log block of type {} ({block_type:?}) cannot be read here; data logs hold Avro (3) or Parquet (5) \
             data, delete (1) and command (0) blocks",
            block_type as i32
        ),
    }
}

/// Log files up to this size are read in one request; larger ones a block
/// at a time, so a reader holds one block rather than the whole file.
/// (Unit tests stream every log, in tiny windows.)
const WHOLE_LOG_BYTES: u64 = if cfg!(test) { 1 } else { 8 << 20 };

/// Bytes read for a block's head in a large log file: enough for any
/// header this crate writes, and for a whole small block.
const HEAD_BYTES: u64 = if cfg!(test) { 2 << 10 } else { 64 << 10 };

/// Bytes fetched at a time when a large data block's records are streamed.
const WINDOW_BYTES: u64 = if cfg!(test) { 100 } else { 1 << 20 };

/// The blocks of one log file, in file order.
pub(crate) struct LogBlocks<'a> {
    loc: &'a TableLocation,
    log: &'a object_store::path::Path,
    /// The file's path, for errors.
    pub(crate) name: String,
    size: u64,
    offset: u64,
    /// The whole file, when it was small enough to read at once.
    bytes: Option<bytes::Bytes>,
    /// The whole file's blocks, when it was read at once.
    whole: Option<std::vec::IntoIter<LogBlock>>,
}

/// One block of a log file: read, or (a large data block) only its head,
/// its content left in the store to be streamed by [`Records`].
pub(crate) enum LogEntry {
    /// The whole block.
    Loaded(LogBlock),
    /// A data block's head; the block starts at `offset` of the file.
    Stored { offset: u64, head: BlockHead },
}

impl LogEntry {
    pub(crate) fn block_type(&self) -> BlockType {
        match self {
            LogEntry::Loaded(b) => b.block_type,
            LogEntry::Stored { head, .. } => head.block_type,
        }
    }

    pub(crate) fn header(&self, key: HeaderKey) -> Option<&str> {
        match self {
            LogEntry::Loaded(b) => b.header(key),
            LogEntry::Stored { head, .. } => head.header(key),
        }
    }
}

/// Bytes `range` of `path`, by `get_ranges` with one range: a single
/// request on local disk, where `get` or `get_range` take two (open, then
/// read).
async fn read_range(
    store: &dyn object_store::ObjectStore,
    path: &object_store::path::Path,
    range: std::ops::Range<u64>,
) -> Result<bytes::Bytes> {
    let got = store.get_ranges(path, std::slice::from_ref(&range)).await;
    Ok(got.map_err(|e| tributary_timeline::Error::store("get", path, e))?.pop().unwrap_or_default())
}

impl<'a> LogBlocks<'a> {
    /// Opens the log file `log` of the table at `loc`: a small file is read
    /// whole, a large one a block at a time. A small file of known `size`
    /// takes one request; otherwise its size is asked first.
    pub(crate) async fn open(
        loc: &'a TableLocation,
        log: &'a object_store::path::Path,
        size: Option<u64>,
    ) -> Result<Self> {
        if let Some(size) = size.filter(|s| *s <= WHOLE_LOG_BYTES) {
            let bytes = read_range(loc.store.as_ref(), log, 0..size).await?;
            return Self::of_bytes(loc, log, bytes);
        }
        let got = loc.store.get(log).await.map_err(|e| tributary_timeline::Error::store("get", log, e))?;
        if got.meta.size <= WHOLE_LOG_BYTES {
            let bytes = got.bytes().await.map_err(|e| tributary_timeline::Error::store("get", log, e))?;
            return Self::of_bytes(loc, log, bytes);
        }
        Ok(Self { loc, log, name: log.to_string(), size: got.meta.size, offset: 0, bytes: None, whole: None })
    }

    /// Opens `log` again: from `kept`, its whole bytes as an earlier open
    /// read them ([`LogBlocks::whole_file`]), else as [`LogBlocks::open`].
    pub(crate) async fn reopen(
        loc: &'a TableLocation,
        log: &'a object_store::path::Path,
        size: Option<u64>,
        kept: Option<bytes::Bytes>,
    ) -> Result<Self> {
        match kept {
            Some(bytes) => Self::of_bytes(loc, log, bytes),
            None => Self::open(loc, log, size).await,
        }
    }

    fn of_bytes(loc: &'a TableLocation, log: &'a object_store::path::Path, bytes: bytes::Bytes) -> Result<Self> {
        let name = log.to_string();
        let whole = Some(LogBlock::decode_all(&bytes, &name)?.into_iter());
        Ok(Self { loc, log, name, size: bytes.len() as u64, offset: 0, bytes: Some(bytes), whole })
    }

    /// The whole file, when it was small enough to be read at once.
    pub(crate) fn whole_file(&self) -> Option<&bytes::Bytes> {
        self.bytes.as_ref()
    }

    async fn range(&self, r: std::ops::Range<u64>) -> Result<bytes::Bytes> {
        read_range(self.loc.store.as_ref(), self.log, r).await
    }

    /// The next block written by an instant that completed (every block of
    /// a v8 log; pre-v8 logs may hold blocks of failed instants).
    pub(crate) async fn next_live(&mut self, timeline: &Timeline) -> Result<Option<LogBlock>> {
        match self.next_live_entry(timeline).await? {
            Some(e) => self.load(e).await.map(Some),
            None => Ok(None),
        }
    }

    /// [`LogBlocks::next_live`], leaving a large data block's content in the
    /// store.
    pub(crate) async fn next_live_entry(&mut self, timeline: &Timeline) -> Result<Option<LogEntry>> {
        while let Some(entry) = self.next_entry().await? {
            if let Some(t) = entry.header(HeaderKey::InstantTime)
                && let Ok(t) = InstantTime::parse(t)
                && !timeline.is_completed(&t)
            {
                continue;
            }
            return Ok(Some(entry));
        }
        Ok(None)
    }

    /// The whole block of `entry`.
    pub(crate) async fn load(&self, entry: LogEntry) -> Result<LogBlock> {
        match entry {
            LogEntry::Loaded(b) => Ok(b),
            LogEntry::Stored { offset, head } => {
                let bytes = self.range(offset..offset + head.framed_len as u64).await?;
                Ok(LogBlock::decode_framed(bytes, offset, &self.name)?)
            }
        }
    }

    async fn next_entry(&mut self) -> Result<Option<LogEntry>> {
        if let Some(whole) = &mut self.whole {
            return Ok(whole.next().map(LogEntry::Loaded));
        }
        if self.offset >= self.size {
            return Ok(None);
        }
        let offset = self.offset;
        let first = self.range(offset..self.size.min(offset + HEAD_BYTES)).await?;
        let len = LogBlock::framed_len(&first, offset, &self.name)? as u64;
        let end =
            offset.checked_add(len).filter(|e| *e <= self.size).ok_or_else(|| tributary_format::Error::CorruptLog {
                path: self.name.clone(),
                offset,
                reason: format!("block of {len} bytes runs past the end of the file"),
            })?;
        self.offset = end;
        if len <= first.len() as u64 {
            return Ok(Some(LogEntry::Loaded(LogBlock::decode_framed(
                first.slice(..len as usize),
                offset,
                &self.name,
            )?)));
        }
        Ok(Some(match LogBlock::decode_head(&first, offset, &self.name)? {
            Some(head) if head.block_type == BlockType::AvroData => LogEntry::Stored { offset, head },
            // Other blocks, and heads longer than the first read, are read whole.
            _ => LogEntry::Loaded(LogBlock::decode_framed(self.range(offset..end).await?, offset, &self.name)?),
        }))
    }
}

/// The records of one AVRO_DATA block, in order: from its content in memory,
/// or streamed from the store a window at a time, so that a large block is
/// never held whole. A record that spans two windows is copied out.
pub(crate) struct Records {
    store: std::sync::Arc<dyn object_store::ObjectStore>,
    path: object_store::path::Path,
    name: String,
    window: bytes::Bytes,
    at: usize,
    /// The content not fetched yet.
    unread: std::ops::Range<u64>,
    carry: Vec<u8>,
    count: usize,
}

impl Records {
    /// The records of the data block `entry` of `blocks`.
    pub(crate) async fn open(entry: LogEntry, blocks: &LogBlocks<'_>) -> Result<Self> {
        let (window, unread) = match entry {
            LogEntry::Loaded(b) => (b.content, 0..0),
            LogEntry::Stored { offset, head } => {
                // The footer and reverse pointer are checked first.
                let content = offset + head.content.start as u64..offset + head.content.end as u64;
                let tail = blocks.range(content.end..offset + head.framed_len as u64).await?;
                LogBlock::decode_tail(&head, &tail, offset, &blocks.name)?;
                (bytes::Bytes::new(), content)
            }
        };
        let mut records = Self {
            store: blocks.loc.store.clone(),
            path: blocks.log.clone(),
            name: blocks.name.clone(),
            window,
            at: 0,
            unread,
            carry: Vec::new(),
            count: 0,
        };
        let version = records.i32().await?;
        if version != tributary_format::CONTENT_VERSION {
            return Err(records.corrupt(format!("data block: unsupported content version {version}")));
        }
        let count = records.i32().await?;
        records.count =
            usize::try_from(count).map_err(|_| records.corrupt("data block: negative record count".into()))?;
        Ok(records)
    }

    /// The block's record count.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    fn corrupt(&self, reason: String) -> Error {
        tributary_format::Error::CorruptLog { path: self.name.clone(), offset: 0, reason }.into()
    }

    async fn i32(&mut self) -> Result<i32> {
        let b = self.take(4).await?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Whether the next record lies whole in the bytes at hand, so that
    /// [`Records::next_ready`] can take it without a read.
    #[inline]
    pub(crate) fn ready(&self) -> bool {
        let rest = &self.window[self.at..];
        rest.first_chunk::<4>()
            .is_some_and(|len| usize::try_from(i32::from_be_bytes(*len)).is_ok_and(|len| rest.len() - 4 >= len))
    }

    /// The next record, when [`Records::ready`] said it is at hand.
    #[inline]
    pub(crate) fn next_ready(&mut self) -> &[u8] {
        let rest = &self.window[self.at..];
        let len = i32::from_be_bytes(*rest.first_chunk::<4>().expect("ready")) as usize;
        self.at += 4 + len;
        &self.window[self.at - len..self.at]
    }

    /// The next record's bytes (after its length prefix). Call it at most
    /// [`Records::count`] times.
    pub(crate) async fn next(&mut self) -> Result<&[u8]> {
        let len = self.i32().await?;
        let len = usize::try_from(len).map_err(|_| self.corrupt("negative record length".into()))?;
        self.take(len).await
    }

    /// The next `n` content bytes.
    async fn take(&mut self, n: usize) -> Result<&[u8]> {
        if self.window.len() - self.at >= n {
            self.at += n;
            return Ok(&self.window[self.at - n..self.at]);
        }
        self.carry.clear();
        self.carry.extend_from_slice(&self.window[self.at..]);
        while self.carry.len() < n {
            if self.unread.is_empty() {
                return Err(self.corrupt("data block: unexpected end of content".into()));
            }
            let want = ((n - self.carry.len()) as u64).max(WINDOW_BYTES).min(self.unread.end - self.unread.start);
            let range = self.unread.start..self.unread.start + want;
            self.window = read_range(self.store.as_ref(), &self.path, range.clone()).await?;
            self.unread.start = range.end;
            self.at = (n - self.carry.len()).min(self.window.len());
            self.carry.extend_from_slice(&self.window[..self.at]);
        }
        Ok(&self.carry[..n])
    }
}

/// A batch decoded as written, laid out as the whole table: columns
/// matched by name and cast to the table's types (a promotion). When it
/// carries every column, it is whole rows. Otherwise absent columns are
/// nulls marked absent: the version leaves them as they were, so a writer
/// that did not know a column never erases it. A table with several
/// ordering fields merges whole rows only; there, as in Hudi, absent
/// columns of a whole-row block read as null.
fn widen(part: RecordBatch, layout: Layout, schema: &TableSchema, path: &str) -> Result<Version> {
    let target = schema.arrow_with_meta();
    let whole = target.fields().iter().all(|f| part.column_by_name(f.name()).is_some());
    if whole || (layout == Layout::Evolved && schema.ordering_indices().len() > 1) {
        return conform(part, target, Some(schema), path).map(Version::Rows);
    }
    let mut present = Vec::with_capacity(target.fields().len());
    let columns: Vec<ArrayRef> = target
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| match part.column_by_name(f.name()) {
            Some(c) => {
                present.push(true);
                if c.data_type() == f.data_type() {
                    Ok(c.clone())
                } else {
                    arrow::compute::cast(c, f.data_type()).map_err(|e| Error::Corrupt {
                        path: path.to_string(),
                        reason: format!("column {}: {e}", f.name()),
                    })
                }
            }
            None => {
                // Marked absent, so it never overwrites a value; a row that
                // has none takes this default ([`crate::columns`]).
                present.push(false);
                Ok(absent(Some(schema), i, f.name(), f.data_type(), part.num_rows()))
            }
        })
        .collect::<Result<_>>()?;
    // Absent columns are null even where the table says non-null.
    let nullable = arrow::datatypes::Schema::new(
        target.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<_>>(),
    );
    let batch = RecordBatch::try_new(std::sync::Arc::new(nullable), columns)
        .map_err(|e| Error::Corrupt { path: path.to_string(), reason: e.to_string() })?;
    Ok(Version::Partial { batch, present: present.into() })
}

/// Reads a whole Parquet file (`bytes`), matching columns to `target` by
/// name (casting types, filling absent nullable columns with nulls).
pub(crate) fn read_parquet(bytes: bytes::Bytes, schema: &TableSchema, path: &str) -> Result<Vec<RecordBatch>> {
    let target = schema.arrow_with_meta();
    let batches =
        if bytes.len() as u64 <= TAIL_BYTES { decoded_file(&bytes, path)? } else { decode_file(bytes, path)? };
    batches.iter().map(|b| conform(b.clone(), target, Some(schema), path)).collect()
}

/// The rows of a whole Parquet file, every column as the file has it.
fn decode_file(bytes: bytes::Bytes, path: &str) -> Result<Arc<[RecordBatch]>> {
    let err = |e| Error::parquet(path, e);
    let metadata = tributary_timeline::arrow_metadata_of_file(&bytes).map_err(err)?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::new_with_metadata(bytes, metadata)
        .with_batch_size(8192)
        .build()
        .map_err(err)?;
    reader.map(|b| b.map_err(|e| Error::Corrupt { path: path.to_string(), reason: e.to_string() })).collect()
}

/// [`decode_file`] of a small file, once per process while it is read
/// again: keyed by the file's content (`tributary_format::memo`), so a
/// changed file is a new key. Until the next compaction, every snapshot
/// read takes the same base files of the latest slices. The memo holds at
/// most 24 MiB of file contents and decoded batches.
fn decoded_file(bytes: &bytes::Bytes, path: &str) -> Result<Arc<[RecordBatch]>> {
    static DECODED: Memo<Option<Arc<[RecordBatch]>>> = Memo::weighed(1024, 24 << 20, |batches| {
        batches.as_deref().map_or(0, |b| b.iter().map(RecordBatch::get_array_memory_size).sum())
    });
    DECODED.get_or_try(bytes, || decode_file(bytes.clone(), path))
}

/// `b` laid out as `target`: columns matched by name, cast where the types
/// differ, absent ones their default ([`TableSchema::absent_column`], when
/// `target` lays out `table`'s columns, or some of them) or null.
fn conform(b: RecordBatch, target: &SchemaRef, table: Option<&TableSchema>, path: &str) -> Result<RecordBatch> {
    let err = |e: &dyn std::fmt::Display| Error::Corrupt { path: path.to_string(), reason: e.to_string() };
    let columns: Vec<ArrayRef> = target
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| match b.column_by_name(f.name()) {
            Some(c) if c.data_type() == f.data_type() => Ok(c.clone()),
            Some(c) => arrow::compute::cast(c, f.data_type()).map_err(|e| err(&format!("column {}: {e}", f.name()))),
            None => Ok(absent(table, i, f.name(), f.data_type(), b.num_rows())),
        })
        .collect::<Result<_>>()?;
    // A layout of no columns (a count) keeps the rows' number.
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(b.num_rows()));
    RecordBatch::try_new_with_options(target.clone(), columns, &options).map_err(|e| err(&e))
}

/// Column `name`, the `i`th of the layout, for `rows` rows that lack it:
/// the default of `table`'s column of that name (the `i`th of its
/// `arrow_with_meta`, unless the layout is a projection), or nulls.
fn absent(table: Option<&TableSchema>, i: usize, name: &str, data_type: &DataType, rows: usize) -> ArrayRef {
    let column = |t: &TableSchema| {
        let all = t.arrow_with_meta();
        match all.fields().get(i) {
            Some(f) if f.name() == name => Some(i),
            _ => all.index_of(name).ok(),
        }
    };
    table.and_then(|t| t.absent_column(column(t)?, rows)).unwrap_or_else(|| new_null_array(data_type, rows))
}

/// Which row groups and pages of a base file a read needs, from what the
/// file's metadata says of them (a scan's filter rules out those whose
/// statistics show that no row of theirs passes it).
pub trait RowGroupFilter: Send + Sync {
    /// The indexes, ascending, of the row groups of the file with
    /// `metadata` to read; `schema` is the file's Arrow schema.
    fn row_groups(&self, metadata: &parquet::file::metadata::ParquetMetaData, schema: &Schema) -> Vec<usize>;

    /// Of the rows of the row groups `groups` (in that order), those to
    /// read, from the page indexes in `metadata`; `None` for all of them.
    /// The pages of the columns read that hold none of the selected rows
    /// are then not fetched.
    fn rows(
        &self,
        metadata: &parquet::file::metadata::ParquetMetaData,
        schema: &Schema,
        groups: &[usize],
    ) -> Option<parquet::arrow::arrow_reader::RowSelection>;
}

/// The rows of a base (Parquet) file, read a row group at a time through
/// the store rather than as one object, for files that may not fit in
/// memory; a small file, fetched whole on opening, is decoded at once (and
/// kept once per process by content).
pub struct BaseReader {
    source: BaseSource,
    target: SchemaRef,
    /// The table whose rows `target` lays out (or some of them), for the
    /// defaults of columns the file lacks; `None`: nulls.
    table: Option<TableSchema>,
    path: String,
    rows: usize,
}

/// Where a base reader's batches come from.
enum BaseSource {
    Stream(Box<parquet::arrow::async_reader::ParquetRecordBatchStream<StoreFile>>),
    Decoded(Arc<[RecordBatch]>, usize),
}

impl BaseReader {
    /// Opens the base file at `path`.
    pub(crate) async fn open(
        loc: &TableLocation,
        schema: &TableSchema,
        path: &object_store::path::Path,
    ) -> Result<Self> {
        let mut reader = Self::open_columns(loc, schema.arrow_with_meta(), path).await?;
        reader.table = Some(schema.clone());
        Ok(reader)
    }

    /// Opens the base file at `path` for the columns of `target` only (a
    /// projection of the table's `arrow_with_meta` schema).
    pub(crate) async fn open_columns(
        loc: &TableLocation,
        target: &SchemaRef,
        path: &object_store::path::Path,
    ) -> Result<Self> {
        Self::open_row_groups(loc, target, path, None).await
    }

    /// [`BaseReader::open_columns`], reading only the row groups `groups`
    /// picks (all of a file small enough to have been fetched whole).
    async fn open_row_groups(
        loc: &TableLocation,
        target: &SchemaRef,
        path: &object_store::path::Path,
        groups: Option<&dyn RowGroupFilter>,
    ) -> Result<Self> {
        let name = path.to_string();
        let err = |e| Error::parquet(&name, e);
        let mut reader = StoreFile::open(loc.store.clone(), path.clone()).await?;
        if let Some(file) = reader.whole() {
            let batches = decoded_file(file, &name)?;
            let rows = batches.iter().map(RecordBatch::num_rows).sum();
            return Ok(Self {
                source: BaseSource::Decoded(batches, 0),
                target: target.clone(),
                table: None,
                path: name,
                rows,
            });
        }
        // A filtered read may skip pages too: it reads the page indexes.
        let metadata = match groups {
            Some(_) => reader.arrow_metadata_with_page_index().await.map_err(err)?,
            None => reader.arrow_metadata().await.map_err(err)?,
        };
        let builder = parquet::arrow::ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata);
        let rows = usize::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0);
        // Only the file's columns that the target names are decoded.
        let wanted: Vec<usize> = builder
            .schema()
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| target.field_with_name(f.name()).is_ok())
            .map(|(i, _)| i)
            .collect();
        let mask = parquet::arrow::ProjectionMask::roots(builder.parquet_schema(), wanted);
        let mut builder = builder.with_projection(mask).with_batch_size(8192);
        if let Some(groups) = groups {
            let picked = groups.row_groups(builder.metadata(), builder.schema());
            if let Some(rows) = groups.rows(builder.metadata(), builder.schema(), &picked) {
                builder = builder.with_row_selection(rows);
            }
            builder = builder.with_row_groups(picked);
        }
        let stream = builder.build().map_err(err)?;
        Ok(Self { source: BaseSource::Stream(Box::new(stream)), target: target.clone(), table: None, path: name, rows })
    }

    /// Opens the base file at `path` for the columns of `target` only, a
    /// projection of `schema`'s `arrow_with_meta`: only those the file has
    /// are decoded, and those it lacks take their default. Of a file not
    /// fetched whole on opening, only the row groups `groups` picks are
    /// read. A scan of a slice without logs reads its base file so.
    pub async fn open_projected(
        loc: &TableLocation,
        schema: &TableSchema,
        target: &SchemaRef,
        path: &object_store::path::Path,
        groups: Option<&dyn RowGroupFilter>,
    ) -> Result<Self> {
        let mut reader = Self::open_row_groups(loc, target, path, groups).await?;
        reader.table = Some(schema.clone());
        Ok(reader)
    }

    /// The file's row count, as its metadata gives it.
    pub(crate) fn num_rows(&self) -> usize {
        self.rows
    }

    /// The next batch of rows, or `None` at the end.
    pub async fn next(&mut self) -> Result<Option<RecordBatch>> {
        use futures::StreamExt;
        let b = match &mut self.source {
            BaseSource::Stream(stream) => match stream.next().await {
                None => return Ok(None),
                Some(b) => b.map_err(|e| Error::parquet(&self.path, e))?,
            },
            BaseSource::Decoded(batches, next) => match batches.get(*next) {
                None => return Ok(None),
                Some(b) => {
                    *next += 1;
                    b.clone()
                }
            },
        };
        conform(b, &self.target, self.table.as_ref(), &self.path).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;
    use tributary_format::DataBlockEncoder;
    use tributary_format::{begin_block, finish_block};

    use super::*;
    use crate::test_util::{SCHEMA, Write, version};

    fn rows(schema: &TableSchema, ts: i64) -> RecordBatch {
        let w = Write { kind: 0, present: (true, true), rows: vec![(1, ts, Some(2), Some(3)), (2, ts, None, None)] };
        match version(schema, &w, 0) {
            Version::Rows(b) => b,
            _ => unreachable!("whole rows"),
        }
    }

    fn parquet_of(batch: &RecordBatch) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), None).unwrap();
        w.write(batch).unwrap();
        w.close().unwrap();
        out
    }

    fn log_of(schema: &TableSchema, batch: &RecordBatch) -> Vec<u8> {
        let mut out = Vec::new();
        let open = begin_block(&mut out, BlockType::AvroData, &[(HeaderKey::Schema, schema.log_json().to_string())]);
        DataBlockEncoder::new(schema).unwrap().encode_content(std::slice::from_ref(batch), &mut out).unwrap();
        finish_block(&mut out, open, &[]);
        out
    }

    /// Small files and blocks decode once per process, keyed by content: a
    /// file written again in place with other rows reads its new rows.
    #[tokio::test]
    async fn a_small_file_written_again_in_place_reads_its_new_rows() {
        let schema = TableSchema::new(SCHEMA, &["id"], Some("ts"), None).unwrap();
        let store = Arc::new(InMemory::new());
        let loc = TableLocation::new(store.clone(), Path::from("t"));
        let (base, log) = (Path::from("t/p/f1_0-1-0_001.parquet"), Path::from("t/p/.f1_001.log.1_0-1-0"));
        let timeline = Timeline::default();
        for ts in [5, 7, 5] {
            let want = rows(&schema, ts);
            store.put(&base, parquet_of(&want).into()).await.unwrap();
            store.put(&log, log_of(&schema, &want).into()).await.unwrap();
            for _ in 0..2 {
                let mut reader = BaseReader::open(&loc, &schema, &base).await.unwrap();
                assert_eq!(reader.num_rows(), 2);
                assert_eq!(reader.next().await.unwrap().as_ref(), Some(&want), "base file at ts {ts}");
                assert!(reader.next().await.unwrap().is_none());
                let whole = store.get(&base).await.unwrap().bytes().await.unwrap();
                assert_eq!(read_parquet(whole, &schema, "base").unwrap(), vec![want.clone()]);
                let mut reader = LogReader::open(&loc, &schema, &log, None, &timeline).await.unwrap();
                match reader.next().await.unwrap() {
                    Some(Version::Rows(got)) => assert_eq!(got, want, "log at ts {ts}"),
                    other => panic!("log at ts {ts}: {other:?}"),
                }
                assert!(reader.next().await.unwrap().is_none());
            }
        }
    }

    /// A projection of a small base file takes the target's columns only.
    #[tokio::test]
    async fn a_small_base_file_reads_a_projection() {
        let schema = TableSchema::new(SCHEMA, &["id"], Some("ts"), None).unwrap();
        let store = Arc::new(InMemory::new());
        let loc = TableLocation::new(store.clone(), Path::from("t"));
        let base = Path::from("t/p/f1_0-1-0_001.parquet");
        let all = rows(&schema, 9);
        store.put(&base, parquet_of(&all).into()).await.unwrap();
        let target = Arc::new(schema.arrow_with_meta().project(&[2, 6]).unwrap());
        let mut reader = BaseReader::open_columns(&loc, &target, &base).await.unwrap();
        let got = reader.next().await.unwrap().unwrap();
        assert_eq!(got, all.project(&[2, 6]).unwrap());
    }
}
