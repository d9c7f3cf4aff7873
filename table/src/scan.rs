//! Scans: a table's rows as a stream of Arrow batches, one file slice (or
//! part of one) at a time, with projection, filters, a limit and a memory
//! budget ([`Table::scan`]).
//!
//! A scan plans first ([`Scan::plan`]): it fixes the timeline, the schema
//! in force and the file slices to read, leaving out partitions and buckets
//! its filter rules out. Then each slice is merged on a task of its own, a
//! few at once, and its rows are filtered and projected as they come out of
//! the merge. Batches come as the merges running at once produce them, in
//! no fixed order between slices; rows within a slice come in write order,
//! or (with a memory budget) in record-key order.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use arrow::array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{Schema, SchemaRef};
use futures::channel::mpsc;
use futures::{SinkExt, Stream, StreamExt};
use object_store::path::Path;
use tributary_format::{META_FIELDS, RECORD_KEY, TableSchema};
use tributary_merge::{
    BaseReader, BaseRows, Budget, RowGroupFilter, RowOrder, RowSink, Share, SliceFiles, SliceMerge, SpillArea,
    merge_slice, stream_slice, written_by,
};
use tributary_timeline::{
    BucketIndex, FileSlice, FileSystemView, InstantTime, TableConfig, TableLocation, Timeline, bucket_of_file_id,
};

use crate::error::{Error, Result};
use crate::incremental::Window;
use crate::predicate::Predicate;
use crate::read::Query;
use crate::statistics::StatisticsFilter;
use crate::table::Table;

/// Batches a slice's task may have ready before the scan takes them.
const READY_PER_SLICE: usize = 2;

/// A scan of a table being set up ([`Table::scan`]); [`Scan::stream`] runs
/// it.
///
/// ```
/// # async fn example(table: &tributary_table::Table) -> tributary_table::Result<()> {
/// use futures::TryStreamExt;
/// use tributary_table::{CompareOp, Predicate};
///
/// let batches: Vec<_> = table
///     .scan()
///     .columns(["id", "amount"])
///     .filter(Predicate::eq("region", "eu").and(Predicate::compare("amount", CompareOp::Gt, 100i64)))
///     .limit(10)
///     .stream()
///     .await?
///     .try_collect()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a scan does nothing until it is streamed"]
pub struct Scan<'t> {
    table: &'t Table,
    timeline: Option<Timeline>,
    query: Query,
    as_of: Option<InstantTime>,
    columns: Option<Vec<String>>,
    filter: Option<Predicate>,
    limit: Option<usize>,
    with_meta: bool,
    memory_budget: Option<usize>,
}

impl Table {
    /// A scan of the table: its latest snapshot, every column but the
    /// `_hoodie_*` meta columns, every row, until told otherwise.
    pub fn scan(&self) -> Scan<'_> {
        Scan {
            table: self,
            timeline: None,
            query: Query::Snapshot,
            as_of: None,
            columns: None,
            filter: None,
            limit: None,
            with_meta: false,
            memory_budget: None,
        }
    }
}

impl<'t> Scan<'t> {
    /// Reads at `timeline`, one the caller loaded ([`Table::timeline`]),
    /// rather than loading the latest.
    pub fn at(mut self, timeline: Timeline) -> Self {
        self.timeline = Some(timeline);
        self
    }

    /// The query: snapshot (the default), read-optimized or incremental.
    pub fn query(mut self, query: Query) -> Self {
        self.query = query;
        self
    }

    /// Time travel: the table as of instant `t` (instants requested at or
    /// before it that completed).
    pub fn as_of(mut self, t: InstantTime) -> Self {
        self.as_of = Some(t);
        self
    }

    /// Only these columns, in this order (meta columns among them if
    /// named). A filter may read columns not among them.
    pub fn columns<S: Into<String>>(mut self, columns: impl IntoIterator<Item = S>) -> Self {
        self.columns = Some(columns.into_iter().map(Into::into).collect());
        self
    }

    /// Only rows `predicate` is true on; several filters must all be.
    pub fn filter(mut self, predicate: Predicate) -> Self {
        self.filter = Some(match self.filter.take() {
            Some(p) => p.and(predicate),
            None => predicate,
        });
        self
    }

    /// At most `n` rows.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// Keeps the five `_hoodie_*` meta columns (when no columns are named).
    pub fn with_meta(mut self, yes: bool) -> Self {
        self.with_meta = yes;
        self
    }

    /// Merges within `bytes` of memory: a slice too large for its share of
    /// it hands on its winning rows as they are decoded, or spills to the
    /// table's spill folder (as compaction does) and hands on each spill
    /// partition's rows once they are merged. Without a budget a slice is
    /// merged in memory.
    pub fn memory_budget(mut self, bytes: usize) -> Self {
        self.memory_budget = Some(bytes);
        self
    }

    /// Fixes what the scan reads: the timeline, the schema in force and the
    /// file slices its filter does not rule out. Bad columns or filters are
    /// [`Error::InvalidInput`] naming the table.
    pub async fn plan(self) -> Result<ScanPlan> {
        let table = self.table;
        let loc = table.location();
        let invalid = |reason: String| Error::InvalidInput { what: format!("a scan of {loc}"), reason };
        let full = match self.timeline {
            Some(t) => t,
            None => table.timeline().await?,
        };
        let timeline = match &self.as_of {
            Some(t) => full.filtered(|i| &i.requested <= t),
            None => full,
        };
        // Time travel sees the schema (and sequence groups) in force then.
        let (schema, config) = table.in_force(&timeline).await?;
        tributary_merge::check_merger(&config)?;
        let all = schema.arrow_with_meta().clone();
        let columns: Vec<usize> = match &self.columns {
            Some(names) => names
                .iter()
                .map(|n| {
                    all.index_of(n)
                        .map_err(|_| invalid(format!("no column `{n}` (the columns are {})", names_of(&all))))
                })
                .collect::<Result<_>>()?,
            None if self.with_meta => (0..all.fields().len()).collect(),
            None => (META_FIELDS.len()..all.fields().len()).collect(),
        };
        let out_schema = Arc::new(all.project(&columns).map_err(|e| invalid(e.to_string()))?);
        if let Some(f) = &self.filter {
            f.check(&all).map_err(|e| invalid(format!("filter {f}: {e}")))?;
        }
        // What a base file without logs is read for: the columns returned
        // and those the filter reads, in the table's order.
        let mut read: Vec<usize> = columns.clone();
        if let Some(f) = &self.filter {
            read.extend(f.columns().iter().filter_map(|c| all.index_of(c).ok()));
        }
        read.sort_unstable();
        read.dedup();
        let base_schema = Arc::new(all.project(&read).map_err(|e| invalid(e.to_string()))?);
        let base_columns: Vec<usize> =
            columns.iter().map(|c| read.iter().position(|r| r == c).unwrap_or_default()).collect();
        let window = match &self.query {
            Query::Incremental { begin, end } => Some(Window::of(&timeline, begin, end)),
            _ => None,
        };
        let view = match &window {
            Some(w) => w.view(table, &timeline).await?,
            None => FileSystemView::load(loc, table.config(), &timeline).await?,
        };
        if let Some(t) = &self.as_of {
            // After the listing: a clean that removed what `t` saw is on
            // the timeline by then.
            table.check_not_cleaned(t, format!("time travel to {t} in {loc}")).await?;
        }
        let base_only = self.query == Query::ReadOptimized;
        let prune = Pruning::new(self.filter.as_ref(), &config, &schema);
        let slices: Vec<FileSlice> = view
            .latest_slices()
            .into_iter()
            .filter(|s| s.base.is_some() || (!base_only && !s.logs.is_empty()))
            .filter(|s| prune.keeps(s))
            .collect();
        let spill = match self.memory_budget {
            Some(bytes) => Some((bytes, table.spill_root().await?)),
            None => None,
        };
        let row_groups = self
            .filter
            .clone()
            .map(|predicate| StatisticsFilter { predicate, table: schema.arrow_with_meta().clone() });
        Ok(ScanPlan {
            shared: Arc::new(Shared {
                loc: loc.clone(),
                schema,
                config,
                timeline,
                commits: window.map(|w| w.commits().clone()),
                base_only,
                row_groups,
                filter: self.filter,
                columns,
                out_schema,
                base_schema,
                base_columns,
                spill,
            }),
            slices,
            limit: self.limit,
            at_once: crate::read::parallelism(),
            sharing: crate::read::parallelism(),
        })
    }

    /// Plans the scan ([`Scan::plan`]) and streams it.
    pub async fn stream(self) -> Result<ScanStream> {
        Ok(self.plan().await?.stream())
    }

    /// The scan's rows in one batch, in the order they stream.
    pub async fn collect(self) -> Result<RecordBatch> {
        let table = self.table.location().to_string();
        let stream = self.stream().await?;
        let schema = stream.schema();
        let batches: Vec<RecordBatch> = stream.collect::<Vec<_>>().await.into_iter().collect::<Result<_>>()?;
        arrow::compute::concat_batches(&schema, &batches).map_err(|e| Error::Internal {
            table,
            what: "concatenating a scan's batches".into(),
            reason: e.to_string(),
        })
    }
}

fn names_of(schema: &Schema) -> String {
    schema.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ")
}

/// What every slice task of a scan reads by.
#[derive(Debug)]
struct Shared {
    loc: TableLocation,
    schema: TableSchema,
    config: TableConfig,
    timeline: Timeline,
    /// An incremental read's commits.
    commits: Option<Arc<HashSet<String>>>,
    base_only: bool,
    filter: Option<Predicate>,
    /// The filter, for the row groups of base files read without logs.
    row_groups: Option<StatisticsFilter>,
    /// The columns returned, as indexes of the schema with meta columns.
    columns: Vec<usize>,
    /// The columns a base file without logs is read for (those returned
    /// and those the filter reads), and the returned ones among them.
    base_schema: SchemaRef,
    base_columns: Vec<usize>,
    out_schema: SchemaRef,
    /// The memory budget, and where to spill past it.
    spill: Option<SpillTo>,
}

/// A memory budget in bytes, and the store and folder spill files go to.
type SpillTo = (usize, (Arc<dyn object_store::ObjectStore>, Path));

/// A planned scan ([`Scan::plan`]): its schema and file slices, streamed
/// whole ([`ScanPlan::stream`]) or a part of its slices at a time
/// ([`ScanPlan::stream_slices`]), as a query engine's partitions do.
#[derive(Debug, Clone)]
pub struct ScanPlan {
    shared: Arc<Shared>,
    slices: Vec<FileSlice>,
    limit: Option<usize>,
    /// How many slices its stream merges at once.
    at_once: usize,
    /// How many merges share the memory budget: this plan's, and those of
    /// the other parts of the plan it was split from.
    sharing: usize,
}

impl ScanPlan {
    /// The schema of the batches it returns.
    pub fn schema(&self) -> SchemaRef {
        self.shared.out_schema.clone()
    }

    /// The file slices it reads, in the order it starts them.
    pub fn slices(&self) -> &[FileSlice] {
        &self.slices
    }

    /// The bytes of the files it reads: its slices' base files, and their
    /// logs unless it reads base files only.
    pub fn file_bytes(&self) -> u64 {
        let logs = |s: &FileSlice| if self.shared.base_only { 0 } else { s.logs.iter().map(|l| l.file.size).sum() };
        self.slices.iter().map(|s| s.base.as_ref().map_or(0, |b| b.file.size) + logs(s)).sum()
    }

    /// The timeline it reads at.
    pub fn timeline(&self) -> &Timeline {
        &self.shared.timeline
    }

    /// Its filter, if any.
    pub fn filter(&self) -> Option<&Predicate> {
        self.shared.filter.as_ref()
    }

    /// The plan in at most `n` parts of about equal bytes, to be streamed
    /// at once (a query engine's partitions): each merges its slices one
    /// core's share at a time, and the memory budget is shared among all
    /// of them. A limit applies to each part.
    pub fn split(&self, n: usize) -> Vec<ScanPlan> {
        let parts = n.clamp(1, self.slices.len().max(1));
        let bytes = |s: &FileSlice| {
            s.base.as_ref().map_or(0, |b| b.file.size) + s.logs.iter().map(|l| l.file.size).sum::<u64>()
        };
        let mut slices = self.slices.clone();
        slices.sort_by_key(|s| std::cmp::Reverse(bytes(s)));
        let mut out: Vec<(u64, Vec<FileSlice>)> = vec![(0, Vec::new()); parts];
        for s in slices {
            if let Some(smallest) = out.iter_mut().min_by_key(|(size, _)| *size) {
                smallest.0 += bytes(&s);
                smallest.1.push(s);
            }
        }
        let at_once = (self.at_once / parts).max(1);
        out.into_iter()
            .map(|(_, slices)| ScanPlan {
                shared: self.shared.clone(),
                slices,
                limit: self.limit,
                at_once,
                sharing: at_once * parts,
            })
            .collect()
    }

    /// Streams every slice, a few at once (one per core), each slice's
    /// batches as its merge produces them; stops at the limit.
    pub fn stream(&self) -> ScanStream {
        self.stream_slices(0..self.slices.len())
    }

    /// Streams the slices `range` of [`ScanPlan::slices`], up to the limit
    /// (each part on its own: a limit of `n` gives each part `n`).
    pub fn stream_slices(&self, range: std::ops::Range<usize>) -> ScanStream {
        let shared = self.shared.clone();
        let slices: Vec<FileSlice> = self.slices[range].to_vec();
        let at_once = self.at_once;
        let share = shared.spill.as_ref().map(|(bytes, _)| Share::of_budget(*bytes, self.sharing));
        let rows = futures::stream::iter(slices)
            .map(move |slice| SliceRows::spawn(shared.clone(), slice, share))
            .flatten_unordered(at_once);
        let rows: Pin<Box<dyn Stream<Item = Result<RecordBatch>> + Send>> = match self.limit {
            Some(n) => Box::pin(limited(rows, n)),
            None => Box::pin(rows),
        };
        ScanStream { schema: self.schema(), rows }
    }
}

/// `rows` cut after `n` rows.
fn limited(rows: impl Stream<Item = Result<RecordBatch>> + Send, n: usize) -> impl Stream<Item = Result<RecordBatch>> {
    rows.scan(n, |left, b| {
        let out = match b {
            _ if *left == 0 => None,
            Ok(b) => {
                let take = b.num_rows().min(*left);
                *left -= take;
                Some(Ok(b.slice(0, take)))
            }
            Err(e) => Some(Err(e)),
        };
        futures::future::ready(out)
    })
}

/// The batches of a scan ([`Scan::stream`]).
pub struct ScanStream {
    schema: SchemaRef,
    rows: Pin<Box<dyn Stream<Item = Result<RecordBatch>> + Send>>,
}

impl std::fmt::Debug for ScanStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanStream").field("schema", &self.schema).finish_non_exhaustive()
    }
}

impl ScanStream {
    /// The schema of its batches.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

impl Stream for ScanStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rows.as_mut().poll_next(cx)
    }
}

/// The rows of one slice, merged on a task of its own; dropping it stops
/// the task.
struct SliceRows {
    rx: mpsc::Receiver<Result<RecordBatch>>,
    task: Option<tokio::task::JoinHandle<()>>,
    group: String,
    loc: String,
}

impl SliceRows {
    fn spawn(shared: Arc<Shared>, slice: FileSlice, share: Option<Share>) -> Self {
        let (mut tx, rx) = mpsc::channel(READY_PER_SLICE);
        let group = group_name(&slice);
        let loc = shared.loc.to_string();
        let task = tokio::spawn(async move {
            if let Err(e) = read_slice(&shared, &slice, share, &mut tx).await {
                let _ = tx.send(Err(e)).await;
            }
        });
        Self { rx, task: Some(task), group, loc }
    }
}

impl Drop for SliceRows {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

impl Stream for SliceRows {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.rx.poll_next_unpin(cx) {
            Poll::Ready(Some(b)) => return Poll::Ready(Some(b)),
            Poll::Pending => return Poll::Pending,
            // Every sender is gone, and every batch sent taken: the task
            // ended, or is ending.
            Poll::Ready(None) => {}
        }
        // A task that panicked must not look like a slice without rows.
        let Some(task) = self.task.as_mut() else { return Poll::Ready(None) };
        match Pin::new(task).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(joined) => {
                self.task = None;
                Poll::Ready(joined.err().map(|e| {
                    Err(Error::Internal {
                        table: self.loc.clone(),
                        what: format!("reading file group {}", self.group),
                        reason: e.to_string(),
                    })
                }))
            }
        }
    }
}

fn group_name(slice: &FileSlice) -> String {
    if slice.partition.is_empty() { slice.file_id.clone() } else { format!("{}/{}", slice.partition, slice.file_id) }
}

/// Spill folders of scans made by this process: each slice of each scan
/// spills into a folder of its own.
static SCANS: AtomicU64 = AtomicU64::new(0);

/// Merges `slice` and sends its rows, filtered and projected, to `out`;
/// stops early when the scan is dropped.
async fn read_slice(
    shared: &Shared,
    slice: &FileSlice,
    share: Option<Share>,
    out: &mut mpsc::Sender<Result<RecordBatch>>,
) -> Result<()> {
    let base = slice.base.as_ref().map(|b| b.file.path.clone());
    let logs: Vec<Path> =
        if shared.base_only { Vec::new() } else { slice.logs.iter().map(|l| l.file.path.clone()).collect() };
    let log_sizes: Vec<u64> = slice.logs.iter().take(logs.len()).map(|l| l.file.size).collect();
    // An incremental read merges the window's base rows only.
    let base_rows = shared.commits.as_deref().map_or(BaseRows::All, BaseRows::WrittenBy);
    let files = SliceFiles { base: base.as_ref(), logs: &logs, log_sizes: &log_sizes, base_rows };
    let ctx =
        SliceMerge { loc: &shared.loc, schema: &shared.schema, config: &shared.config, timeline: &shared.timeline };
    let budget = match (&shared.spill, share) {
        (Some((_, (store, root))), Some(share)) => Some(Budget {
            share,
            input_bytes: slice.base.as_ref().map_or(0, |b| b.file.size) + log_sizes.iter().sum::<u64>(),
            spill: SpillArea {
                store: store.clone(),
                dir: root.clone().join(format!(
                    "scan-{}-{}.{}.spill",
                    std::process::id(),
                    SCANS.fetch_add(1, Ordering::Relaxed),
                    slice.file_id
                )),
            },
        }),
        _ => None,
    };
    if logs.is_empty() && shared.commits.is_none() {
        // Nothing to merge: the base file's rows, read for the columns the
        // scan needs only.
        if let Some(base) = &base {
            let groups = shared.row_groups.as_ref().map(|f| f as &dyn RowGroupFilter);
            let mut reader =
                BaseReader::open_projected(&shared.loc, &shared.schema, &shared.base_schema, base, groups).await?;
            while let Some(b) = reader.next().await? {
                if !emit(shared, slice, b, &shared.base_columns, out).await? {
                    return Ok(());
                }
            }
        }
        return Ok(());
    }
    let what = format!("the incremental read of {}, file group {}", shared.loc, group_name(slice));
    let mut sink = ScanSink { shared, slice, out, what, failed: None };
    match &budget {
        Some(budget) => {
            stream_slice(&ctx, &files, budget, &mut sink).await?;
        }
        None => {
            let mut merged = merge_slice(&ctx, &files, RowOrder::Write, None).await?;
            while let Some(b) = merged.next_batch().await? {
                if !sink.take(b).await {
                    break;
                }
            }
        }
    }
    sink.failed.map_or(Ok(()), Err)
}

/// A slice's merged rows on their way out of a scan: of an incremental
/// read's rows, those the window's commits wrote; then filtered, projected
/// and sent. Stops the merge once the scan is dropped or a batch fails.
struct ScanSink<'a> {
    shared: &'a Shared,
    slice: &'a FileSlice,
    out: &'a mut mpsc::Sender<Result<RecordBatch>>,
    /// The read, for errors of an incremental one.
    what: String,
    failed: Option<Error>,
}

impl RowSink for ScanSink<'_> {
    async fn take(&mut self, b: RecordBatch) -> bool {
        let b = match self.shared.commits.as_deref() {
            Some(c) => written_by(b, c, &self.what),
            None => Ok(b),
        };
        let sent = match b {
            Ok(b) => emit(self.shared, self.slice, b, &self.shared.columns, self.out).await,
            Err(e) => Err(e.into()),
        };
        sent.unwrap_or_else(|e| {
            self.failed = Some(e);
            false
        })
    }
}

/// Sends the rows of `b` the filter passes, as `columns` of it; false when
/// the scan was dropped (or reached its limit).
async fn emit(
    shared: &Shared,
    slice: &FileSlice,
    b: RecordBatch,
    columns: &[usize],
    out: &mut mpsc::Sender<Result<RecordBatch>>,
) -> Result<bool> {
    let b = match &shared.filter {
        Some(f) => f.filter(&b).map_err(|e| Error::InvalidInput {
            what: format!("filter {f} on {}, file group {}", shared.loc, group_name(slice)),
            reason: e,
        })?,
        None => b,
    };
    if b.num_rows() == 0 {
        return Ok(true);
    }
    let b = b.project(columns).map_err(|e| Error::Internal {
        table: shared.loc.to_string(),
        what: "projecting a scan's columns".into(),
        reason: e.to_string(),
    })?;
    Ok(out.send(Ok(b)).await.is_ok())
}

/// Which file slices a filter rules out: partitions whose values fail it,
/// and buckets that cannot hold the keys it names.
struct Pruning<'a> {
    filter: Option<&'a Predicate>,
    config: &'a TableConfig,
    schema: &'a TableSchema,
    /// The buckets the filter's keys fall in, when it names keys and the
    /// table routes keys to buckets.
    buckets: Option<HashSet<u32>>,
}

impl<'a> Pruning<'a> {
    fn new(filter: Option<&'a Predicate>, config: &'a TableConfig, schema: &'a TableSchema) -> Self {
        let buckets = filter.and_then(|f| key_buckets(f, config, schema));
        Self { filter, config, schema, buckets }
    }

    fn keeps(&self, slice: &FileSlice) -> bool {
        let Some(filter) = self.filter else { return true };
        if let Some(buckets) = &self.buckets
            && let Some(bucket) = bucket_of_file_id(&slice.file_id)
            && !buckets.contains(&bucket)
        {
            return false;
        }
        match partition_row(self.config, self.schema, &slice.partition) {
            Some(values) => filter.may_pass(&values),
            None => true,
        }
    }
}

/// The buckets holding the keys `filter` names (`key = v`, `key IN (...)`,
/// on the record key field or `_hoodie_record_key`) in a table with one
/// record key field and a bucket index; `None` when it names none.
fn key_buckets(filter: &Predicate, config: &TableConfig, schema: &TableSchema) -> Option<HashSet<u32>> {
    let spec = config.bucket?;
    let [field] = config.record_key_fields.as_slice() else { return None };
    let (column, values) = match filter.values_of(field) {
        Some(values) => (field.as_str(), values),
        None => (META_FIELDS[RECORD_KEY], filter.values_of(META_FIELDS[RECORD_KEY])?),
    };
    let key_type = schema.arrow_with_meta().field_with_name(column).ok()?.data_type().clone();
    let index = BucketIndex::new(spec);
    let mut buckets = HashSet::new();
    for v in values {
        // A key is its column value's text (`tributary_format::key`): the
        // literal as the column's type first (`'007'` is the integer key
        // `7`), as the filter compares it. A value without a key's text
        // (null, or a type keys do not take) decides nothing.
        let options = arrow::compute::CastOptions { safe: false, ..Default::default() };
        let typed = arrow::compute::cast_with_options(v.array(), &key_type, &options).ok()?;
        if typed.is_null(0) || !is_key_type(&typed) {
            return None;
        }
        let text = arrow::compute::cast(&typed, &arrow::datatypes::DataType::Utf8).ok()?;
        buckets.insert(index.bucket(text.as_any().downcast_ref::<StringArray>()?.value(0)));
    }
    Some(buckets)
}

/// Whether values of `a`'s type key rows as their text: strings and
/// integers.
fn is_key_type(a: &ArrayRef) -> bool {
    use arrow::datatypes::DataType::*;
    matches!(
        a.data_type(),
        Utf8 | LargeUtf8 | Utf8View | Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64
    )
}

/// One row of the partition field values of partition folder `path`, typed
/// as the schema's columns; `None` when the folder does not give them.
fn partition_row(config: &TableConfig, schema: &TableSchema, path: &str) -> Option<RecordBatch> {
    let values = config.partition_values(path)?;
    let arrow = schema.arrow_with_meta();
    let mut fields = Vec::with_capacity(values.len());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(values.len());
    for (name, value) in config.partition_fields.iter().zip(values) {
        let field = arrow.field_with_name(name).ok()?;
        let text: ArrayRef = Arc::new(StringArray::from(vec![value]));
        let options = arrow::compute::CastOptions { safe: false, ..Default::default() };
        columns.push(arrow::compute::cast_with_options(&text, field.data_type(), &options).ok()?);
        fields.push(field.clone().with_nullable(true));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tributary_timeline::NewTableConfig;

    /// A literal is taken as the key column's type before its bucket is
    /// found: `id = '007'` on an integer key is the key `7`.
    #[test]
    fn key_literals_are_typed_as_the_key_column() {
        let json = r#"{"type":"record","name":"r","fields":[{"name":"id","type":"long"},{"name":"ts","type":"long"}]}"#;
        let config = TableConfig::new_table(&NewTableConfig::new("t", "id", "ts", json));
        let schema = config.schema_of(json).unwrap();
        let index = BucketIndex::new(config.bucket.unwrap());
        let want: HashSet<u32> = [index.bucket("7")].into();
        assert_eq!(key_buckets(&Predicate::eq("id", "007"), &config, &schema), Some(want.clone()));
        assert_eq!(key_buckets(&Predicate::eq("id", 7i64), &config, &schema), Some(want));
        assert_eq!(key_buckets(&Predicate::eq("ts", 7i64), &config, &schema), None);
    }
}
