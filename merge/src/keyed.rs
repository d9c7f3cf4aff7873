//! The key-first merge of a file slice: index first, decode the winners only.
//!
//! A slice's versions mostly lose: a key updated in five logs has four
//! versions that no reader will see. Decoding every version into Arrow
//! buffers, only to drop most of them, is most of the cost of a merge. So a
//! slice whose logs hold plain data blocks of the table's own schema is
//! merged in two passes over its files:
//!
//! 1. **Index.** Each log record is walked only as far as its record key and
//!    ordering value (the fields before them are skipped by their lengths,
//!    those after them not read at all); the base file is read for its key
//!    and ordering columns only. Deletes are applied as they come. The merge
//!    index ([`RowMerger`]) then knows each key's winner by its place: which
//!    input, which record.
//! 2. **Decode.** The files are read again, and only the winning records are
//!    decoded (the others are passed over by their length prefixes); the
//!    winning base rows are taken from the base file.
//!
//! The outcome is the [`RowMerger`] of the whole slice with the winning rows
//! in place, merged exactly as if every version had been pushed to it; or,
//! when the winning rows would not fit the memory budget, those rows written
//! to spill files as they are decoded, as sorted runs: the winners are one
//! row per key already, so they need sorting, not merging again. Anything
//! this does not cover (partial blocks, blocks of another schema, fields the columnar decoder
//! does not cover, sequence-group merges), and a slice whose key index alone
//! outgrows half the budget, is [`KeyFirst::Declined`] before a row is
//! decoded, and the caller merges the slice the general way.

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use tributary_format::decode_delete_content;
use tributary_format::{BlockType, HeaderKey};
use tributary_format::{ColumnDecoder, KeyScanner, Scanned};
use tributary_format::{RECORD_KEY, TableSchema};
use tributary_timeline::{TableLocation, Timeline};

use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::ordering::Ord2;
use crate::read::{BaseReader, LogBlocks, LogEntry, Records, SliceFiles, SliceMerge, unsupported_block};
use crate::rows::{KeyBatch, RowMerger, row_of};
use crate::rules::sort_by_key;
use crate::sink::RowSink;
use crate::spill::{Run, Spiller};
use crate::tombstone::Tombstone;
use crate::version::Version;

/// Rows per decoded batch of winners.
const WINNER_BATCH_ROWS: usize = 16 * 1024;

/// At most this many bytes of a slice's small log files are kept from the
/// index pass for the decode pass; the files past it are read again.
const KEPT_LOG_BYTES: usize = 64 << 20;

/// What the merge reads a slice with.
struct SliceScan<'a> {
    loc: &'a TableLocation,
    schema: &'a TableSchema,
    timeline: &'a Timeline,
    decoder: ColumnDecoder,
    scanner: KeyScanner,
    /// The base file's columns read by the index pass.
    base_keys: SchemaRef,
    /// The log files the index pass read whole, kept for the decode pass
    /// (by log number), so that it reads each file once; `None` for a file
    /// read again from the store.
    kept: Vec<Option<bytes::Bytes>>,
    /// How many more bytes of log files may be kept.
    keep_room: usize,
}

/// What [`merge_key_first`] did with a slice.
pub(crate) enum KeyFirst {
    /// Not a slice it covers, or one whose key index would not fit: merge it
    /// the general way. Nothing was written.
    Declined,
    /// Merged: the merger holds the winning rows.
    Merged(RowMerger),
    /// Merged: the winning rows (one per surviving key) were too many to
    /// hold and were written with the spiller, which was given, as `runs`
    /// sorted by key (no key is in two runs); the deleted keys' tombstones
    /// are here.
    Spilled {
        /// The winning rows, as runs sorted by key.
        runs: Vec<Run>,
        /// The deleted keys' tombstones.
        tombstones: Vec<Tombstone>,
    },
}

/// Merges the slice `files` key first within `limits` (see the module
/// notes). The winning rows are kept when they fit, else written as sorted
/// runs with `spiller`, or the merge is declined without one.
pub(crate) async fn merge_key_first(
    ctx: &SliceMerge<'_>,
    files: &SliceFiles<'_>,
    limits: Limits,
    spiller: Option<&mut Spiller>,
) -> Result<KeyFirst> {
    // A merge without limits holds every winner anyway; one with limits
    // keeps nothing extra, so that the key index and the winners get the
    // share.
    let keep_room = if limits == Limits::NONE { KEPT_LOG_BYTES } else { 0 };
    let Some(Indexed { mut scan, mut merger, sizes }) = index_slice(ctx, files, limits.index, keep_room).await? else {
        return Ok(KeyFirst::Declined);
    };
    // Decoded rows take about one and a half times their Avro bytes.
    let winners = merger.winners();
    let decoded = winners.len().saturating_mul(sizes.bytes_per_record()).saturating_mul(3) / 2;
    if merger.retained_bytes().saturating_add(decoded) <= limits.keep {
        let mut kept = Vec::new();
        scan.decode_winners(files, &winners, &mut kept).await?;
        merger.place(&winners, kept);
        return Ok(KeyFirst::Merged(merger));
    }
    let Some(spiller) = spiller else {
        tracing::debug!(winners = winners.len(), decoded, keep = limits.keep, "winning rows would outgrow the budget");
        return Ok(KeyFirst::Declined);
    };
    // Only the winners' places (and the tombstones) are needed from here on.
    let tombstones = merger.tombstones();
    drop(merger);
    tracing::debug!(winners = winners.len(), decoded, keep = limits.keep, "winning rows go to sorted runs");
    let mut runs = SortedRuns { spiller, buffered: Vec::new(), bytes: 0, limit: limits.run_bytes(), runs: Vec::new() };
    scan.decode_winners(files, &winners, &mut runs).await?;
    runs.flush().await?;
    Ok(KeyFirst::Spilled { runs: runs.runs, tombstones })
}

/// Merges the slice `files` key first for a reader that takes rows in any
/// order: with a key index of at most `index_limit` bytes, the winning rows
/// go to `sink` as they are decoded, in the order of the files, so they are
/// never held together. `None` when the slice is declined (nothing was
/// sent); else whether the sink took every row.
pub(crate) async fn stream_key_first<S: RowSink>(
    ctx: &SliceMerge<'_>,
    files: &SliceFiles<'_>,
    index_limit: usize,
    sink: &mut S,
) -> Result<Option<bool>> {
    let Some(Indexed { mut scan, merger, .. }) = index_slice(ctx, files, index_limit, 0).await? else {
        return Ok(None);
    };
    let winners = merger.winners();
    drop(merger);
    tracing::debug!(winners = winners.len(), "winning rows streamed as they are decoded");
    let mut out = Streamed { sink, open: true };
    scan.decode_winners(files, &winners, &mut out).await?;
    Ok(Some(out.open))
}

/// A slice's key index, and what reads its winners.
struct Indexed<'a> {
    scan: SliceScan<'a>,
    merger: RowMerger,
    sizes: Sizes,
}

/// The index pass of a slice the key-first merge covers, with a key index
/// of at most `limit` bytes, keeping up to `keep_room` bytes of small log
/// files for the decode pass; `None` when the merge declines the slice.
async fn index_slice<'a>(
    ctx: &SliceMerge<'a>,
    files: &SliceFiles<'_>,
    limit: usize,
    keep_room: usize,
) -> Result<Option<Indexed<'a>>> {
    let SliceMerge { loc, schema, config, timeline } = *ctx;
    // A base file of which only some rows take part (an incremental read)
    // is merged the general way, which filters its rows as it reads them.
    if !config.sequence_groups.is_empty() || (files.base.is_some() && !files.base_rows.all()) {
        return Ok(None);
    }
    let mut merger = RowMerger::new(schema, config.merge_mode);
    if merger.several_ordering_fields() {
        return Ok(None);
    }
    let ordering = merger.event_time_ordering();
    let Some(decoder) = ColumnDecoder::for_schema(schema.log_json()) else { return Ok(None) };
    let Some(scanner) = decoder.key_scanner(RECORD_KEY, ordering) else { return Ok(None) };
    let with_meta = schema.arrow_with_meta();
    let base_keys = std::sync::Arc::new(
        with_meta
            .project(&[Some(RECORD_KEY), ordering].into_iter().flatten().collect::<Vec<_>>())
            .map_err(|e| Error::arrow(format!("key columns of table {}", config.name), e))?,
    );
    let mut scan = SliceScan { loc, schema, timeline, decoder, scanner, base_keys, kept: Vec::new(), keep_room };
    let Some(sizes) = scan.index(files, &mut merger, limit).await? else { return Ok(None) };
    Ok(Some(Indexed { scan, merger, sizes }))
}

/// Where decoded winning rows go; `false` from [`WinnerOut::push`] ends the
/// decode pass early.
trait WinnerOut: Send {
    fn push(&mut self, batch: RecordBatch) -> impl Future<Output = Result<bool>> + Send;
}

/// Kept in memory.
impl WinnerOut for Vec<RecordBatch> {
    async fn push(&mut self, batch: RecordBatch) -> Result<bool> {
        Vec::push(self, batch);
        Ok(true)
    }
}

/// Handed on to a reader's sink.
struct Streamed<'s, S> {
    sink: &'s mut S,
    /// False once the sink takes no more.
    open: bool,
}

impl<S: RowSink> WinnerOut for Streamed<'_, S> {
    async fn push(&mut self, batch: RecordBatch) -> Result<bool> {
        self.open = self.sink.take(batch).await;
        Ok(self.open)
    }
}

/// Winning rows on their way to spill files: buffered up to `limit` bytes,
/// then sorted by key and written as one run.
struct SortedRuns<'s> {
    spiller: &'s mut Spiller,
    buffered: Vec<RecordBatch>,
    bytes: usize,
    limit: usize,
    runs: Vec<Run>,
}

impl WinnerOut for SortedRuns<'_> {
    async fn push(&mut self, batch: RecordBatch) -> Result<bool> {
        self.bytes += batch.get_array_memory_size();
        self.buffered.push(batch);
        if self.bytes >= self.limit {
            self.flush().await?;
        }
        Ok(true)
    }
}

impl SortedRuns<'_> {
    /// Writes what is buffered as the next run.
    async fn flush(&mut self) -> Result<()> {
        if self.buffered.is_empty() {
            return Ok(());
        }
        let sorted = sort_by_key(&self.buffered)?;
        self.buffered.clear();
        self.bytes = 0;
        let run = self.spiller.write_run(self.runs.len(), &sorted).await?;
        self.runs.push(run);
        Ok(())
    }
}

/// Which record a pass is at: source number, file and record number.
struct RecordAt<'p> {
    source: usize,
    path: &'p str,
    r: usize,
}

/// What the index pass saw of the inputs' sizes.
#[derive(Debug, Default)]
struct Sizes {
    records: usize,
    bytes: usize,
}

impl Sizes {
    /// Average Avro bytes per record (a guess of 256 with no log records).
    fn bytes_per_record(&self) -> usize {
        self.bytes.checked_div(self.records).unwrap_or(256).max(1)
    }
}

/// The error of a record that could not be read: file, record and field.
fn corrupt_record(path: &str, record: usize, detail: String) -> Error {
    tributary_format::Error::CorruptLog {
        path: path.to_string(),
        offset: 0,
        reason: format!("data block record {}{detail}", record + 1),
    }
    .into()
}

/// The ordering value of a scanned field, exactly as the merge reads it from
/// a decoded column.
fn ordering_of(value: Scanned<'_>, path: &str, record: usize) -> Result<Ord2> {
    Ok(match value {
        Scanned::Long(v) => Ord2::Int(v),
        Scanned::Float(v) => Ord2::Float(f64::from(v)),
        Scanned::Double(v) => Ord2::Float(v),
        Scanned::Text(b) => Ord2::Text(Box::new(
            String::from_utf8(b.to_vec())
                .map_err(|e| corrupt_record(path, record, format!(", ordering field: {e}")))?,
        )),
        Scanned::Null | Scanned::Boolean(_) | Scanned::Bytes(_) => Ord2::Null,
    })
}

/// A data block the key-first merge can read: complete rows of the table's
/// own log schema.
fn readable(block: &LogEntry, schema: &TableSchema) -> bool {
    block.header(HeaderKey::IsPartial) != Some("true")
        && block.header(HeaderKey::Schema).is_none_or(|s| s == schema.log_json())
}

/// A record that could not be read, named by its number in the block.
fn record_error(e: Error, record: usize) -> Error {
    match e {
        Error::Format(tributary_format::Error::CorruptLog { path, offset, reason }) => {
            tributary_format::Error::CorruptLog {
                path,
                offset,
                reason: format!("data block record {}: {reason}", record + 1),
            }
            .into()
        }
        other => other,
    }
}

impl SliceScan<'_> {
    /// The index pass: every version's key and ordering value into `merger`.
    /// Sources are numbered as [`SliceScan::decode_winners`] numbers them: the
    /// base file is source 0 (rows counted through the file), each data
    /// block a source from 1 on (rows counted through the block). `None`
    /// when a block is not readable or the index outgrows `limit` bytes.
    async fn index(&mut self, files: &SliceFiles<'_>, merger: &mut RowMerger, limit: usize) -> Result<Option<Sizes>> {
        let mut sizes = Sizes::default();
        if let Some(base) = files.base {
            let mut reader = BaseReader::open_columns(self.loc, &self.base_keys, base).await?;
            // The base file holds one row per key: room for them all at
            // once, so that the index does not grow (and hold its old and
            // new slots) step by step; or, when that is past the limit, the
            // merge is declined before a row is read.
            let keys = reader.num_rows();
            if RowMerger::index_bytes_for(keys) > limit {
                tracing::debug!(keys, limit, "key index of the base file would outgrow the budget");
                return Ok(None);
            }
            merger.expect_keys(keys);
            let mut first_row = 0;
            while let Some(b) = reader.next().await? {
                merger.push_keys(b.column(0), (b.num_columns() > 1).then(|| b.column(1)), 0, first_row)?;
                first_row += b.num_rows();
                if merger.retained_bytes() > limit {
                    tracing::debug!(
                        held = merger.retained_bytes(),
                        limit,
                        "key index of the base file outgrows the budget"
                    );
                    return Ok(None);
                }
            }
        }
        let mut source = 1;
        let mut batch = KeyBatch::default();
        for (i, log) in files.logs.iter().enumerate() {
            let mut blocks = LogBlocks::open(self.loc, log, files.log_size(i)).await?;
            while let Some(entry) = blocks.next_live_entry(self.timeline).await? {
                let path = &blocks.name;
                match entry.block_type() {
                    BlockType::AvroData => {
                        if !readable(&entry, self.schema) {
                            return Ok(None);
                        }
                        let mut records = Records::open(entry, &blocks).await?;
                        let count = records.count();
                        // A slice's first block usually holds most of its keys.
                        merger.expect_keys(count);
                        let mut at = RecordAt { source, path, r: 0 };
                        while at.r < count {
                            // The records at hand without a pause, then one
                            // that needs a read.
                            while at.r < count && records.ready() {
                                self.index_record(records.next_ready(), &at, merger, &mut batch, &mut sizes)?;
                                at.r += 1;
                            }
                            if at.r < count {
                                let record = records.next().await.map_err(|e| record_error(e, at.r))?;
                                self.index_record(record, &at, merger, &mut batch, &mut sizes)?;
                                at.r += 1;
                            }
                        }
                        merger.push_batch(&mut batch);
                        source += 1;
                    }
                    BlockType::Delete => {
                        let block = blocks.load(entry).await?;
                        merger.push(&Version::Deletes(decode_delete_content(&block.content, path)?))?
                    }
                    BlockType::Command => {}
                    // Its records are not indexed in place: the slice is
                    // merged whole instead.
                    BlockType::ParquetData => return Ok(None),
                    other => return Err(unsupported_block(other, path)),
                }
                if merger.retained_bytes() > limit {
                    tracing::debug!(held = merger.retained_bytes(), limit, "key index outgrows the budget");
                    return Ok(None);
                }
            }
            let keep = blocks.whole_file().filter(|b| b.len() <= self.keep_room).cloned();
            self.keep_room -= keep.as_ref().map_or(0, bytes::Bytes::len);
            self.kept.push(keep);
        }
        Ok(Some(sizes))
    }

    /// The decode pass: the rows of `winners` (ascending places, as
    /// [`RowMerger::winners`] gives them), in that order, to `out`, until it
    /// takes no more.
    async fn decode_winners<O: WinnerOut>(
        &mut self,
        files: &SliceFiles<'_>,
        winners: &[(u64, u32)],
        out: &mut O,
    ) -> Result<()> {
        let place = |w: &(u64, u32)| row_of(w.0);
        let mut next = 0;
        if let Some(base) = files.base
            && winners.first().is_some_and(|w| place(w).0 == 0)
        {
            let mut reader = BaseReader::open(self.loc, self.schema, base).await?;
            let mut first_row = 0;
            while let Some(b) = reader.next().await? {
                let end = first_row + b.num_rows();
                let mut take = Vec::new();
                while let Some((0, row)) = winners.get(next).map(place)
                    && row < end
                {
                    take.push((row - first_row) as u32);
                    next += 1;
                }
                if !take.is_empty() {
                    let indices = arrow::array::UInt32Array::from(take);
                    let taken = arrow::compute::take_record_batch(&b, &indices)
                        .map_err(|e| Error::arrow(format!("winning rows of {base}"), e))?;
                    if !out.push(taken).await? {
                        return Ok(());
                    }
                }
                first_row = end;
            }
        }
        let mut source = 1;
        for (i, log) in files.logs.iter().enumerate() {
            if next == winners.len() {
                break;
            }
            let kept = self.kept.get_mut(i).and_then(Option::take);
            let mut blocks = LogBlocks::reopen(self.loc, log, files.log_size(i), kept).await?;
            while let Some(entry) = blocks.next_live_entry(self.timeline).await? {
                if entry.block_type() != BlockType::AvroData {
                    continue;
                }
                let path = &blocks.name;
                if winners.get(next).is_some_and(|w| place(w).0 == source) {
                    let mut records = Records::open(entry, &blocks).await?;
                    let count = records.count();
                    let mut at = RecordAt { source, path, r: 0 };
                    let mut done = Vec::new();
                    // Up to the block's last winner: the records at hand
                    // without a pause, then one that needs a read.
                    let wanted = |next: usize| winners.get(next).map(place).filter(|w| w.0 == source);
                    while at.r < count && wanted(next).is_some() {
                        while at.r < count && records.ready() {
                            let Some((_, row)) = wanted(next) else { break };
                            let record = records.next_ready();
                            if row == at.r {
                                self.decode_winner(record, &at, &mut done)?;
                                next += 1;
                            }
                            at.r += 1;
                        }
                        if at.r < count && wanted(next).is_some() && !records.ready() {
                            let record = records.next().await.map_err(|e| record_error(e, at.r))?;
                            if wanted(next).is_some_and(|w| w.1 == at.r) {
                                self.decode_winner(record, &at, &mut done)?;
                                next += 1;
                            }
                            at.r += 1;
                        }
                    }
                    for b in done {
                        if !out.push(b).await? {
                            return Ok(());
                        }
                    }
                }
                source += 1;
            }
        }
        if self.decoder.rows() > 0 {
            let last = self.finish_batch("log records")?;
            if !out.push(last).await? {
                return Ok(());
            }
        }
        if next != winners.len() {
            return Err(Error::Internal {
                what: "key-first merge".into(),
                reason: format!("{} winning rows were not found on the second read", winners.len() - next),
            });
        }
        Ok(())
    }

    /// Indexes the key and ordering value of the record `at`.
    #[inline]
    fn index_record(
        &self,
        record: &[u8],
        at: &RecordAt<'_>,
        merger: &mut RowMerger,
        batch: &mut KeyBatch,
        sizes: &mut Sizes,
    ) -> Result<()> {
        let (path, r) = (at.path, at.r);
        let (key, order) = self
            .scanner
            .scan(record)
            .map_err(|e| corrupt_record(path, r, format!(", field `{}`: {}", e.field, e.reason)))?;
        sizes.records += 1;
        sizes.bytes += record.len();
        if let Some(key) = key
            && batch.push(key, ordering_of(order, path, r)?, at.source, r)
        {
            merger.push_batch(batch);
        }
        Ok(())
    }

    /// Decodes the winning record `at`; a full batch of winners goes to `done`.
    #[inline]
    fn decode_winner(&mut self, record: &[u8], at: &RecordAt<'_>, done: &mut Vec<RecordBatch>) -> Result<()> {
        if let Err(e) = self.decoder.push(record) {
            self.decoder.reset();
            return Err(corrupt_record(at.path, at.r, format!(", field `{}`: {}", e.field, e.reason)));
        }
        if self.decoder.rows() == WINNER_BATCH_ROWS {
            done.push(self.finish_batch(at.path)?);
        }
        Ok(())
    }

    fn finish_batch(&mut self, path: &str) -> Result<RecordBatch> {
        self.decoder.finish().map_err(|e| Error::Corrupt { path: path.to_string(), reason: e.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use object_store::memory::InMemory;
    use object_store::path::Path;
    use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
    use proptest::prelude::*;
    use tributary_format::{DataBlockEncoder, encode_delete_content};
    use tributary_format::{LogBlock, avro_record_count, next_avro_record};
    use tributary_timeline::{MergeMode, TableConfig};

    use super::*;
    use crate::read::BaseRows;
    use crate::rules::merge;
    use crate::spill::{RunMerger, SpillArea};
    use crate::test_util::{Case, Write, case, sorted, write};

    /// `versions` as files of a slice: the first as a Parquet base file when
    /// `with_base` (and it is rows), the rest as logs of `per_log` blocks.
    async fn slice_files(
        store: &Arc<dyn ObjectStore>,
        schema: &TableSchema,
        versions: &[Version],
        with_base: bool,
        per_log: usize,
    ) -> (Option<Path>, Vec<Path>) {
        let mut rest = versions;
        let mut base = None;
        if with_base && let Some(Version::Rows(b)) = versions.first() {
            let mut bytes = Vec::new();
            let mut w = parquet::arrow::ArrowWriter::try_new(&mut bytes, b.schema(), None).unwrap();
            w.write(b).unwrap();
            w.close().unwrap();
            let path = Path::from("t/base.parquet");
            store.put(&path, PutPayload::from(bytes)).await.unwrap();
            base = Some(path);
            rest = &versions[1..];
        }
        let mut logs = Vec::new();
        let mut encoder = DataBlockEncoder::new(schema).unwrap();
        for (n, chunk) in rest.chunks(per_log).enumerate() {
            let mut file = Vec::new();
            for v in chunk {
                let mut content = Vec::new();
                let block_type = match v {
                    Version::Rows(b) => {
                        encoder.encode_content(std::slice::from_ref(b), &mut content).unwrap();
                        BlockType::AvroData
                    }
                    Version::Deletes(ds) => {
                        encode_delete_content(ds, &mut content);
                        BlockType::Delete
                    }
                    Version::Partial { .. } => unreachable!("whole rows only"),
                };
                let header = vec![(HeaderKey::Schema, schema.log_json().to_string())];
                LogBlock { block_type, header, content: content.into(), footer: Vec::new() }.encode_into(&mut file);
            }
            let path = Path::from(format!("t/.f1_{n}.log.1_0-1-0"));
            store.put(&path, PutPayload::from(file)).await.unwrap();
            logs.push(path);
        }
        (base, logs)
    }

    /// The key-first merge of `versions` laid out as files, sorted by key;
    /// `None` when it declines the slice.
    fn merge_files(
        schema: &TableSchema,
        config: &TableConfig,
        versions: &[Version],
        with_base: bool,
        per_log: usize,
        spill: bool,
    ) -> Result<Option<Option<Vec<arrow::array::ArrayRef>>>> {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
            let loc = TableLocation::new(store.clone(), Path::from("t"));
            let timeline = Timeline::load(&loc, config).await?;
            let (base, logs) = slice_files(&store, schema, versions, with_base, per_log).await;
            let files = SliceFiles { base: base.as_ref(), logs: &logs, log_sizes: &[], base_rows: BaseRows::All };
            let area = SpillArea { store: Arc::new(InMemory::new()), dir: Path::from("spill") };
            let mut spiller = Spiller::new(area, 3, 0);
            let limits = Limits { keep: if spill { 0 } else { usize::MAX }, ..Limits::NONE };
            let ctx = SliceMerge { loc: &loc, schema, config, timeline: &timeline };
            let merged = merge_key_first(&ctx, &files, limits, Some(&mut spiller));
            match merged.await? {
                KeyFirst::Declined => Ok(None),
                KeyFirst::Merged(merger) => {
                    assert!(!spill, "kept in memory only when that fits");
                    Ok(Some(merger.finish(true)?.map(|b| b.columns().to_vec())))
                }
                KeyFirst::Spilled { runs, .. } => {
                    assert!(spill, "spilled only when the winners do not fit");
                    // The runs merged by key are the rows, in key order.
                    let mut merged = RunMerger::new(spiller.area().clone(), runs);
                    let mut parts = Vec::new();
                    while let Some(b) = merged.next_batch().await? {
                        parts.push(b);
                    }
                    if parts.is_empty() {
                        return Ok(Some(None));
                    }
                    let all = arrow::compute::concat_batches(&parts[0].schema(), &parts).unwrap();
                    assert_eq!(sorted(all.clone()), all.columns().to_vec(), "runs merge into key order");
                    Ok(Some(Some(all.columns().to_vec())))
                }
            }
        })
    }

    /// Whole rows and deletes only: partial writes become whole rows.
    fn whole(writes: Vec<Write>) -> Vec<Write> {
        writes.into_iter().map(|w| Write { kind: if w.kind == 1 { 0 } else { w.kind }, ..w }).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Indexing keys, then decoding only the winners, gives exactly the
        /// rows of decoding and merging every version, with a base file or
        /// without, under either ordering.
        #[test]
        fn key_first_merges_like_the_whole_group(
            writes in prop::collection::vec(write(), 1..12),
            with_base in any::<bool>(),
            per_log in 1usize..4,
            commit_time in any::<bool>(),
            spill in any::<bool>(),
        ) {
            let Case { schema, mut config, versions, .. } = case(&whole(writes), false);
            if commit_time {
                config.merge_mode = MergeMode::CommitTime;
            }
            let want = merge(&schema, &config, &versions).unwrap().map(sorted);
            let got = merge_files(&schema, &config, &versions, with_base, per_log, spill).unwrap();
            prop_assert_eq!(got, Some(want));
        }
    }

    #[test]
    fn key_first_declines_partial_blocks_and_sequence_groups() {
        let writes = vec![Write { kind: 0, present: (true, true), rows: vec![(1, 1, Some(1), Some(1))] }];
        let Case { schema, config, versions, .. } = case(&writes, true);
        assert_eq!(merge_files(&schema, &config, &versions, false, 1, false).unwrap(), None);

        // A partial block (read under another schema) is left to the general merge.
        let Case { schema, config, .. } = case(&writes, false);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let declined = rt.block_on(async {
            let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
            let loc = TableLocation::new(store.clone(), Path::from("t"));
            let timeline = Timeline::load(&loc, &config).await.unwrap();
            let header = vec![(HeaderKey::Schema, "{}".to_string()), (HeaderKey::IsPartial, "true".to_string())];
            let mut file = Vec::new();
            LogBlock { block_type: BlockType::AvroData, header, content: Vec::new().into(), footer: Vec::new() }
                .encode_into(&mut file);
            let logs = vec![Path::from("t/.f1_0.log.1_0-1-0")];
            store.put(&logs[0], PutPayload::from(file)).await.unwrap();
            let files = SliceFiles { base: None, logs: &logs, log_sizes: &[], base_rows: BaseRows::All };
            let ctx = SliceMerge { loc: &loc, schema: &schema, config: &config, timeline: &timeline };
            let merged = merge_key_first(&ctx, &files, Limits::NONE, None);
            matches!(merged.await.unwrap(), KeyFirst::Declined)
        });
        assert!(declined);
    }

    #[test]
    fn a_corrupt_record_is_named_by_file_and_record() {
        let writes = vec![Write { kind: 0, present: (true, true), rows: vec![(1, 1, None, None), (2, 2, None, None)] }];
        let Case { schema, config, versions, .. } = case(&writes, false);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let err = rt.block_on(async {
            let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
            let loc = TableLocation::new(store.clone(), Path::from("t"));
            let timeline = Timeline::load(&loc, &config).await.unwrap();
            let Version::Rows(b) = &versions[0] else { unreachable!() };
            let mut content = Vec::new();
            DataBlockEncoder::new(&schema).unwrap().encode_content(std::slice::from_ref(b), &mut content).unwrap();
            // The second record's commit time claims more bytes than the record has.
            let (_, mut pos) = avro_record_count(&content, "x").unwrap();
            next_avro_record(&content, &mut pos).unwrap();
            content[pos + 4] = 0x7e;
            let header = vec![(HeaderKey::Schema, schema.log_json().to_string())];
            let mut file = Vec::new();
            LogBlock { block_type: BlockType::AvroData, header, content: content.into(), footer: Vec::new() }
                .encode_into(&mut file);
            let logs = vec![Path::from("t/.f1_0.log.1_0-1-0")];
            store.put(&logs[0], PutPayload::from(file)).await.unwrap();
            let files = SliceFiles { base: None, logs: &logs, log_sizes: &[], base_rows: BaseRows::All };
            let ctx = SliceMerge { loc: &loc, schema: &schema, config: &config, timeline: &timeline };
            let merged = merge_key_first(&ctx, &files, Limits::NONE, None);
            merged.await.err().unwrap().to_string()
        });
        assert!(err.contains(".f1_0.log.1_0-1-0") && err.contains("record 2") && err.contains("field"), "{err}");
    }
}
