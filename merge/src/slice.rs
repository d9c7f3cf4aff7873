//! The one entry point for merging a file slice, used by snapshot reads and
//! by the compactor.
//!
//! A slice (a base file and the logs placed on it, in write order) is merged
//! the cheapest way that is exact:
//!
//! 1. A slice without logs is its base file's rows: nothing to merge.
//! 2. A slice whose logs hold whole rows of the table's own schema is merged
//!    key first ([`crate::keyed`]): only the winning log records are decoded,
//!    and the winners are kept or, past the [`Limits`](crate::limits::Limits)
//!    of the share, written as sorted runs that are merged by key.
//! 3. Anything else is read once, in write order, into a sink chosen by the
//!    memory policy ([`crate::limits`]): all versions in memory when the
//!    slice fits its share; else a fold (merge as read, drop the losers)
//!    that hands its state on to spill partitions if the winners still
//!    outgrow the share; or spill partitions straight away for partial rows
//!    and sequence groups. Spilled partitions are merged one at a time into
//!    sorted runs, and the runs are merged by key.
//!
//! The merged rows come out as a [`Merged`] stream of batches, in write
//! order (readers) or record-key order (the compactor).

use std::collections::VecDeque;

use arrow::array::{Array, RecordBatch};
use tributary_format::DeleteRecord;
use tributary_format::META_FIELDS;
use tributary_timeline::TombstoneRetention;

use crate::error::{Error, Result};
use crate::keyed::{KeyFirst, merge_key_first};
use crate::limits::{Limits, Share};
use crate::ordering::{Ord2, OrderColumn};
use crate::read::{BaseReader, LogReader, SliceFiles, SliceMerge, read_parquet};
use crate::rows::{RowMerger, Survivors};
use crate::rules::{merge_parts, sort_by_key};
use crate::sink::RowSink;
use crate::spill::{RunMerger, SpillArea, Spiller};
use crate::tombstone::{Tombstone, retained};
use crate::version::Version;

/// Rows per batch of merged output.
const OUTPUT_BATCH_ROWS: usize = 32 * 1024;

/// The order merged rows come out in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowOrder {
    /// Write order: what readers return.
    Write,
    /// Record-key order: what a new base file holds.
    Key,
}

/// A bounded merge: the slice's share of a memory budget, its files' encoded
/// size, and where it may spill.
#[derive(Debug, Clone)]
pub struct Budget {
    /// The slice's share of the budget.
    pub share: Share,
    /// The encoded size of the slice's files, in bytes.
    pub input_bytes: u64,
    /// Where spill files go; cleared before and after use.
    pub spill: SpillArea,
}

impl Budget {
    /// Whether the slice is too large to merge in its share at once.
    fn spills(&self) -> bool {
        self.share.partitions(self.input_bytes) > 1
    }

    /// The spiller of a slice that [`Budget::spills`], its area cleared;
    /// `None` for one merged in memory.
    async fn spiller(&self) -> Result<Option<Spiller>> {
        let partitions = self.share.partitions(self.input_bytes);
        if partitions <= 1 {
            return Ok(None);
        }
        self.spill.clear().await?;
        Ok(Some(Spiller::new(self.spill.clone(), partitions, self.share.spill_buffer(partitions))))
    }
}

/// The merged rows of a slice, a batch at a time, and how they were merged;
/// in key order (the compactor's), also the tombstones of its deleted keys.
pub struct Merged {
    source: Source,
    key_first: bool,
    spilled: bool,
    tombstones: Vec<Tombstone>,
    /// Tracks the newest ordering value of the rows returned, when a
    /// tombstone retention bound needs it.
    newest: Option<Newest>,
}

/// The newest ordering value seen in one column of the merged rows.
struct Newest {
    column: usize,
    value: Ord2,
}

impl Newest {
    fn see(&mut self, batch: &RecordBatch) {
        let c = batch.column(self.column);
        let nulls = c.logical_nulls();
        let values = OrderColumn::of(c);
        for r in 0..batch.num_rows() {
            let v = values.at(nulls.as_ref(), r);
            if v.cmp(&self.value) == std::cmp::Ordering::Greater {
                self.value = v;
            }
        }
    }
}

enum Source {
    Batches(VecDeque<RecordBatch>),
    Survivors(Survivors),
    Runs { runs: RunMerger, area: SpillArea },
}

impl Merged {
    /// Whether the slice was merged key first.
    pub fn key_first(&self) -> bool {
        self.key_first
    }

    /// Whether the merge went through spill files.
    pub fn spilled(&self) -> bool {
        self.spilled
    }

    /// The next batch of merged rows; `None` once all have been returned.
    /// Spill files are deleted once the last batch is read.
    pub async fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        let next = self.next_source_batch().await?;
        if let (Some(newest), Some(b)) = (&mut self.newest, &next) {
            newest.see(b);
        }
        Ok(next)
    }

    /// The tombstones the compaction of this slice keeps, after its
    /// retention (`tributary.tombstone.retention`), as delete records of
    /// `partition` sorted by key; call it once every row has been read, as
    /// the retention bound is measured from the newest ordering value among
    /// them. Empty for merges in write order.
    pub fn tombstones(&mut self, ctx: &SliceMerge<'_>, partition: &str) -> Result<Vec<DeleteRecord>> {
        let tombstones = std::mem::take(&mut self.tombstones);
        let Some(&ordering) = ctx.schema.ordering_indices().first() else { return Ok(Vec::new()) };
        if tombstones.is_empty() {
            return Ok(Vec::new());
        }
        // A retention needs one ordering field (`CreateOptions`); kept
        // forever, tombstones carry every field's value, each of its type.
        let field = ctx.schema.arrow_with_meta().field(ordering + META_FIELDS.len());
        let several = ctx.schema.ordering_indices().len() > 1;
        let data_type = match several {
            true => arrow::datatypes::DataType::Struct(
                ctx.schema.ordering_indices().iter().map(|&o| ctx.schema.arrow().field(o).clone()).collect(),
            ),
            false => field.data_type().clone(),
        };
        let mut newest = self.newest.as_ref().map_or(Ord2::Null, |n| n.value.clone());
        for t in &tombstones {
            if t.order.cmp(&newest) == std::cmp::Ordering::Greater {
                newest = t.order.clone();
            }
        }
        retained(tombstones, &newest, ctx.config.tombstone_retention, &data_type, field.name(), partition)
    }

    async fn next_source_batch(&mut self) -> Result<Option<RecordBatch>> {
        match &mut self.source {
            Source::Batches(batches) => Ok(batches.pop_front()),
            Source::Survivors(survivors) => survivors.next().transpose(),
            Source::Runs { runs, area } => {
                let next = runs.next_batch().await?;
                if next.is_none() {
                    area.clear().await?;
                }
                Ok(next)
            }
        }
    }

    /// Every remaining batch of merged rows, for readers.
    pub async fn into_batches(mut self) -> Result<Vec<RecordBatch>> {
        let mut out = Vec::new();
        while let Some(b) = self.next_batch().await? {
            out.push(b);
        }
        Ok(out)
    }

    fn batches(batches: impl IntoIterator<Item = RecordBatch>, key_first: bool, spilled: bool) -> Self {
        Merged::of(Source::Batches(batches.into_iter().collect()), key_first, spilled)
    }

    fn of(source: Source, key_first: bool, spilled: bool) -> Self {
        Merged { source, key_first, spilled, tombstones: Vec::new(), newest: None }
    }

    /// Keeps `tombstones` for [`Merged::tombstones`], and has the newest
    /// ordering value tracked when the table's retention needs it.
    fn with_tombstones(mut self, ctx: &SliceMerge<'_>, tombstones: Vec<Tombstone>) -> Self {
        let bounded = ctx.config.tombstone_retention != TombstoneRetention::Forever;
        if bounded && !tombstones.is_empty() {
            self.newest =
                ctx.schema.single_ordering().map(|o| Newest { column: o + META_FIELDS.len(), value: Ord2::Null });
        }
        self.tombstones = tombstones;
        self
    }
}

/// Merges the slice `files` (see the module notes). Without a `budget` the
/// merge holds what it needs (readers); with one it stays within its share,
/// spilling where the policy says.
pub async fn merge_slice(
    ctx: &SliceMerge<'_>,
    files: &SliceFiles<'_>,
    order: RowOrder,
    budget: Option<&Budget>,
) -> Result<Merged> {
    crate::rules::check_merger(ctx.config)?;
    if files.logs.is_empty() {
        return base_rows(ctx, files, order, budget.is_some()).await;
    }
    let by_key = order == RowOrder::Key;
    let mut spiller = match budget {
        Some(b) => b.spiller().await?,
        None => None,
    };
    let limits = budget.map_or(Limits::NONE, |b| b.share.key_first(spiller.is_some()));
    let keyed = merge_key_first(ctx, files, limits, spiller.as_mut()).await?;
    let key_first = !matches!(keyed, KeyFirst::Declined);
    let mut tombstones = Vec::new();
    let sink = match keyed {
        KeyFirst::Merged(merger) => {
            let source = match order {
                RowOrder::Write => return Ok(Merged::batches(merger.finish(false)?, true, false)),
                RowOrder::Key => {
                    tombstones = merger.tombstones();
                    Source::Survivors(merger.finish_in_batches(true, OUTPUT_BATCH_ROWS))
                }
            };
            return Ok(Merged::of(source, true, false).with_tombstones(ctx, tombstones));
        }
        KeyFirst::Spilled { runs, tombstones: kept } => match spiller {
            Some(spiller) => {
                tracing::debug!(
                    runs = runs.len(),
                    spilled_bytes = spiller.spilled_bytes,
                    "winning rows merged from sorted runs"
                );
                let area = spiller.area().clone();
                let merged = Merged::of(Source::Runs { runs: RunMerger::new(area.clone(), runs), area }, true, true);
                return Ok(merged.with_tombstones(ctx, if by_key { kept } else { Vec::new() }));
            }
            None => {
                return Err(Error::Internal {
                    what: format!("merging a slice of {}", ctx.loc),
                    reason: "the key-first merge spilled without a spiller".into(),
                });
            }
        },
        KeyFirst::Declined => read_into(ctx, files, spiller, budget.map(|b| b.share)).await?,
    };
    let merged = match sink {
        Sink::Memory(versions) => {
            let partial = versions.iter().any(|v| matches!(v, Version::Partial { .. }));
            let (rows, kept) = merge_parts(ctx.schema, ctx.config, &versions, partial, by_key)?;
            tombstones = kept;
            Merged::batches(rows, false, false)
        }
        Sink::Fold { merger, .. } => {
            if by_key {
                tombstones = merger.tombstones();
            }
            Merged::of(Source::Survivors(merger.finish_in_batches(by_key, OUTPUT_BATCH_ROWS)), key_first, false)
        }
        Sink::Spill(mut spiller) => {
            spiller.finish().await?;
            let mut runs = Vec::with_capacity(spiller.partitions());
            for part in 0..spiller.partitions() {
                let versions = spiller.versions(part).await?;
                let (sorted, kept) = merge_parts(ctx.schema, ctx.config, &versions, spiller.partial(), true)?;
                drop(versions);
                tombstones.extend(kept);
                if let Some(sorted) = sorted {
                    runs.push(spiller.write_run(part, &sorted).await?);
                }
            }
            tracing::debug!(
                partitions = spiller.partitions(),
                spilled_bytes = spiller.spilled_bytes,
                "file slice merged through spill files"
            );
            let area = spiller.area().clone();
            Merged::of(Source::Runs { runs: RunMerger::new(area.clone(), runs), area }, key_first, true)
        }
    };
    if !by_key {
        tombstones.clear();
    }
    Ok(merged.with_tombstones(ctx, tombstones))
}

/// Merges the slice `files` within `budget` for a reader that takes rows in
/// any order, handing each batch to `sink` as soon as its rows are known to
/// win, so that nothing is sorted and winning rows are never spilled:
/// - a slice without logs is its base file's rows, a row group at a time;
/// - a whole-row slice whose key index fits the share's index limit is
///   merged key first, the winners streamed as they are decoded;
/// - the rest are read into the sink the memory policy picks (module
///   notes), and each spill partition's rows go out once it is merged
///   (partitions hold disjoint keys).
///
/// Returns whether the sink took every row.
pub async fn stream_slice<S: RowSink>(
    ctx: &SliceMerge<'_>,
    files: &SliceFiles<'_>,
    budget: &Budget,
    sink: &mut S,
) -> Result<bool> {
    crate::rules::check_merger(ctx.config)?;
    if files.logs.is_empty() {
        let Some(path) = files.base else { return Ok(true) };
        let mut reader = BaseReader::open(ctx.loc, ctx.schema, path).await?;
        while let Some(b) = reader.next().await? {
            let b = files.base_rows.keep(b, path.as_ref())?;
            if b.num_rows() > 0 && !sink.take(b).await {
                return Ok(false);
            }
        }
        return Ok(true);
    }
    let index_limit = budget.share.stream_index(budget.spills());
    if let Some(took_all) = crate::keyed::stream_key_first(ctx, files, index_limit, sink).await? {
        return Ok(took_all);
    }
    let spiller = budget.spiller().await?;
    match read_into(ctx, files, spiller, Some(budget.share)).await? {
        Sink::Memory(versions) => {
            let partial = versions.iter().any(|v| matches!(v, Version::Partial { .. }));
            send_merged(ctx, versions, partial, sink).await
        }
        Sink::Fold { merger, .. } => send_survivors(merger, sink).await,
        Sink::Spill(mut spiller) => {
            spiller.finish().await?;
            let mut took_all = true;
            for part in 0..spiller.partitions() {
                let versions = spiller.versions(part).await?;
                if !send_merged(ctx, versions, spiller.partial(), sink).await? {
                    took_all = false;
                    break;
                }
            }
            tracing::debug!(
                partitions = spiller.partitions(),
                spilled_bytes = spiller.spilled_bytes,
                "file slice streamed through spill partitions"
            );
            spiller.area().clear().await?;
            Ok(took_all)
        }
    }
}

/// Merges `versions` (of keys no other versions hold; `partial` as in
/// [`merge_parts`]) and hands the rows to `sink` in batches of
/// [`OUTPUT_BATCH_ROWS`]; whether it took them all. Whole rows are gathered
/// a batch at a time, so they are never copied all at once.
async fn send_merged<S: RowSink>(
    ctx: &SliceMerge<'_>,
    versions: Vec<Version>,
    partial: bool,
    sink: &mut S,
) -> Result<bool> {
    if !partial && ctx.config.sequence_groups.is_empty() {
        let mut merger = RowMerger::new(ctx.schema, ctx.config.merge_mode);
        for v in versions {
            merger.push(&v)?;
        }
        return send_survivors(merger, sink).await;
    }
    let (rows, _) = merge_parts(ctx.schema, ctx.config, &versions, partial, false)?;
    drop(versions);
    let Some(rows) = rows else { return Ok(true) };
    let mut at = 0;
    while at < rows.num_rows() {
        let len = OUTPUT_BATCH_ROWS.min(rows.num_rows() - at);
        if !sink.take(rows.slice(at, len)).await {
            return Ok(false);
        }
        at += len;
    }
    Ok(true)
}

/// Hands the rows `merger` kept to `sink` in write order, gathered a batch
/// at a time; whether it took them all.
async fn send_survivors<S: RowSink>(merger: RowMerger, sink: &mut S) -> Result<bool> {
    for b in merger.finish_in_batches(false, OUTPUT_BATCH_ROWS) {
        if !sink.take(b?).await {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The rows of a slice without logs: its base file's, as they are (those
/// its [`BaseRows`](crate::read::BaseRows) take). A merge without a budget
/// (a reader) reads the file in one request; a bounded one a row group at a
/// time.
async fn base_rows(ctx: &SliceMerge<'_>, files: &SliceFiles<'_>, order: RowOrder, bounded: bool) -> Result<Merged> {
    let mut batches = Vec::new();
    match files.base {
        Some(path) if !bounded => {
            let bytes = ctx.loc.get(path).await?;
            for b in read_parquet(bytes, ctx.schema, path.as_ref())? {
                batches.push(files.base_rows.keep(b, path.as_ref())?);
            }
        }
        Some(path) => {
            let mut reader = BaseReader::open(ctx.loc, ctx.schema, path).await?;
            while let Some(b) = reader.next().await? {
                batches.push(files.base_rows.keep(b, path.as_ref())?);
            }
        }
        None => {}
    }
    // A base file holds one row per key, in key order when Tributary wrote
    // it; other writers' base files are sorted here when key order is asked.
    if order == RowOrder::Key && !batches.is_empty() {
        batches = vec![sort_by_key(&batches)?];
    }
    Ok(Merged::batches(batches, false, false))
}

/// Reads a slice's files in write order into the sink the memory policy
/// picks: memory without a `spiller`, else a fold that may spill, or spill
/// partitions straight away for tables with sequence groups.
async fn read_into(
    ctx: &SliceMerge<'_>,
    files: &SliceFiles<'_>,
    spiller: Option<Spiller>,
    share: Option<Share>,
) -> Result<Sink> {
    let mut sink = match (spiller, share) {
        (Some(spiller), Some(share)) if ctx.config.sequence_groups.is_empty() => {
            Sink::Fold { merger: RowMerger::new(ctx.schema, ctx.config.merge_mode), share, spiller }
        }
        (Some(spiller), _) => Sink::Spill(spiller),
        (None, _) => Sink::Memory(Vec::new()),
    };
    if let Some(base) = files.base {
        let mut reader = BaseReader::open(ctx.loc, ctx.schema, base).await?;
        while let Some(b) = reader.next().await? {
            let b = files.base_rows.keep(b, base.as_ref())?;
            if b.num_rows() > 0 {
                sink.push(Version::Rows(b)).await?;
            }
        }
    }
    for (i, log) in files.logs.iter().enumerate() {
        let mut reader = LogReader::open(ctx.loc, ctx.schema, log, files.log_size(i), ctx.timeline).await?;
        while let Some(v) = reader.next().await? {
            sink.push(v).await?;
        }
    }
    Ok(sink)
}

/// Where a slice's versions go as they are read.
enum Sink {
    /// Kept, for a slice that fits its share of the budget.
    Memory(Vec<Version>),
    /// Merged as they come: once what the merge holds passes
    /// [`Share::fold_at`], the losing rows are dropped (a fold). A slice
    /// whose winners alone still take over [`Share::spill_after_fold`], or
    /// that holds partial versions, moves its merged state into spill
    /// partitions and goes on there.
    Fold { merger: RowMerger, share: Share, spiller: Spiller },
    /// Partitioned into spill files.
    Spill(Spiller),
}

impl Sink {
    async fn push(&mut self, v: Version) -> Result<()> {
        match self {
            Sink::Memory(versions) => {
                versions.push(v);
                Ok(())
            }
            Sink::Fold { merger, share, .. } => {
                let pending = match v {
                    Version::Partial { .. } => Some(v),
                    v => {
                        merger.push(&v)?;
                        if merger.retained_bytes() <= share.fold_at() {
                            return Ok(());
                        }
                        merger.fold()?;
                        if merger.retained_bytes() <= share.spill_after_fold() {
                            return Ok(());
                        }
                        tracing::debug!(
                            held = merger.retained_bytes(),
                            "merged rows outgrow the budget share: spilling"
                        );
                        None
                    }
                };
                self.spill_fold(pending).await
            }
            Sink::Spill(spiller) => spiller.push(v).await,
        }
    }

    /// Moves a fold's merged state, then `pending`, into its spill partitions.
    async fn spill_fold(&mut self, pending: Option<Version>) -> Result<()> {
        if let Sink::Fold { merger, mut spiller, .. } = std::mem::replace(self, Sink::Memory(Vec::new())) {
            for v in merger.into_versions()?.into_iter().chain(pending) {
                spiller.push(v).await?;
            }
            *self = Sink::Spill(spiller);
        }
        Ok(())
    }
}
