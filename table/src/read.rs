//! Readers: snapshot, read-optimized, incremental and time travel, returning
//! Arrow record batches.

use arrow::array::{ArrayRef, RecordBatch};
use std::sync::Arc;

use arrow::row::{RowConverter, SortField};
use futures::TryStreamExt;
use tributary_format::{META_FIELDS, PARTITION_PATH, RECORD_KEY, TableSchema};
use tributary_timeline::{InstantTime, TableConfig, TableLocation, Timeline, TimelineFolder};

use crate::error::{Error, Result};
use crate::table::Table;

/// Which rows a read returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Query {
    /// Latest file slices, base plus logs merged.
    #[default]
    Snapshot,
    /// Base files only.
    ReadOptimized,
    /// What the commits completed in `(begin, end]` wrote, merged among
    /// themselves as Hudi's Java reader (Spark) merges them: a key updated
    /// in the window shows its window version even where an older commit's
    /// version wins the snapshot (`docs/design.md`, "Merge semantics").
    Incremental {
        /// Exclusive lower bound (completion time).
        begin: InstantTime,
        /// Inclusive upper bound (completion time).
        end: InstantTime,
    },
}

impl Query {
    /// An incremental query over `(begin, end]`, either end open when
    /// `None`.
    pub fn incremental(begin: Option<InstantTime>, end: Option<InstantTime>) -> Self {
        Query::Incremental { begin: begin.unwrap_or(InstantTime::EARLIEST), end: end.unwrap_or(InstantTime::LATEST) }
    }
}

/// Options of [`Table::read`].
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// The query.
    pub query: Query,
    /// Time travel: see the table as of this instant (instants requested at
    /// or before it that have completed).
    pub as_of: Option<InstantTime>,
    /// Keep the five `_hoodie_*` meta columns.
    pub with_meta: bool,
    /// Skip ordering the rows by partition and record key.
    pub unordered: bool,
}

/// An Arrow kernel refused batches the reader built itself: a bug.
fn arrow_err<'a>(table: &'a TableLocation, what: &'a str) -> impl Fn(arrow::error::ArrowError) -> Error + 'a {
    move |e| Error::Internal { table: table.to_string(), what: what.to_string(), reason: e.to_string() }
}

impl Table {
    /// The table schema in force at `timeline`: the latest completed
    /// write's `extraMetadata.schema`, else the create schema
    /// ([`tributary_timeline::schema_in_force`]).
    pub async fn schema(&self, timeline: &Timeline) -> Result<TableSchema> {
        Ok(self.in_force(timeline).await?.0)
    }

    /// The schema in force at `timeline`, and the table's configuration
    /// with the sequence groups in force ([`TableConfig::in_force`]).
    pub(crate) async fn in_force(&self, timeline: &Timeline) -> Result<(TableSchema, TableConfig)> {
        let cfg = self.config();
        let folder = TimelineFolder::new(self.location(), cfg);
        let found = tributary_timeline::schema_in_force(&folder, cfg, timeline, None).await?.ok_or_else(|| {
            Error::InvalidInput {
                what: self.location().to_string(),
                reason: "no schema: no commit carries one and hoodie.table.create.schema is not set".into(),
            }
        })?;
        let config = cfg.in_force(&found);
        Ok((config.schema_of(&found.json)?, config))
    }

    /// Reads the table. Rows come ordered by partition, then record key.
    pub async fn read(&self, options: &ReadOptions) -> Result<RecordBatch> {
        self.read_at(&self.timeline().await?, options).await
    }

    /// Refuses a read of the table as it was at `t` (time travel, or the
    /// start of a change feed's window; `what` names the read) when a clean
    /// removed, or is removing, what `t` saw: `t` is before the earliest
    /// commit that the latest clean, or a pending one, retains (Hudi's
    /// `validateTimestampAsOf`, which looks at completed cleans only). Older
    /// file slices are gone, and a read would return a partial table
    /// without telling. The timeline is loaded here, after the caller
    /// listed the files it reads ([`tributary_compaction::cleaned_before`]).
    pub(crate) async fn check_not_cleaned(&self, t: &InstantTime, what: String) -> Result<()> {
        let folder = TimelineFolder::new(self.location(), self.config());
        let timeline = self.timeline().await?;
        match tributary_compaction::cleaned_before(&folder, &timeline).await? {
            Some(retained) if *t < retained => Err(Error::InvalidInput {
                what,
                reason: format!(
                    "the cleaner removed the file slices of {t} (the latest clean retains commits from {retained} \
                     on); start at {retained} or later, or have the cleaner retain more commits"
                ),
            }),
            _ => Ok(()),
        }
    }

    /// [`Table::read`] at `full`, a timeline of this table the caller
    /// loaded ([`Table::timeline`]): several queries at one timeline see
    /// the same completed instants, and none loads it again.
    pub async fn read_at(&self, full: &Timeline, options: &ReadOptions) -> Result<RecordBatch> {
        // An ordered read sorts by two meta columns; an unordered one reads
        // the meta columns only when it returns them.
        let meta = options.with_meta || !options.unordered;
        let mut scan = self.scan().at(full.clone()).query(options.query.clone()).with_meta(meta);
        if let Some(t) = &options.as_of {
            scan = scan.as_of(t.clone());
        }
        let stream = scan.stream().await?;
        let streamed = stream.schema();
        let parts: Vec<RecordBatch> = stream.try_collect().await?;
        let loc = self.location();
        // The meta columns are dropped before the slices are put together,
        // so that only the columns returned are copied; an ordered read
        // puts together the two it sorts by as well.
        let columns: Vec<usize> = if meta && !options.with_meta {
            (META_FIELDS.len()..streamed.fields().len()).collect()
        } else {
            (0..streamed.fields().len()).collect()
        };
        let out_schema = Arc::new(streamed.project(&columns).map_err(arrow_err(loc, "dropping the meta columns"))?);
        let projected = parts
            .iter()
            .map(|p| p.project(&columns))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(arrow_err(loc, "dropping the meta columns"))?;
        let all = arrow::compute::concat_batches(&out_schema, &projected)
            .map_err(arrow_err(loc, "concatenating file slices"))?;
        if options.unordered || all.num_rows() == 0 {
            return Ok(all);
        }
        let column = |i: usize| {
            let pieces: Vec<&dyn arrow::array::Array> = parts.iter().map(|p| p.column(i).as_ref()).collect();
            arrow::compute::concat(&pieces).map_err(arrow_err(loc, "sort"))
        };
        sort_by_partition_and_key(loc, [column(PARTITION_PATH)?, column(RECORD_KEY)?], &all)
    }
}

/// How many file slices a read merges at once: one per core. Asked of the
/// system once per process (the answer reads the cgroup quota from files,
/// which costs more than merging a small slice).
pub(crate) fn parallelism() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
}

/// `batch` in the order of its rows' partition paths, then record keys
/// (`cols`: those two, row for row).
fn sort_by_partition_and_key(loc: &TableLocation, cols: [ArrayRef; 2], batch: &RecordBatch) -> Result<RecordBatch> {
    // Row format turns the two-column comparison into one memcmp.
    let converter = RowConverter::new(cols.iter().map(|c| SortField::new(c.data_type().clone())).collect())
        .map_err(arrow_err(loc, "sort"))?;
    let rows = converter.convert_columns(&cols).map_err(arrow_err(loc, "sort"))?;
    let mut order: Vec<u32> = (0..batch.num_rows() as u32).collect();
    order.sort_unstable_by(|a, b| rows.row(*a as usize).cmp(&rows.row(*b as usize)));
    let idx = arrow::array::UInt32Array::from(order);
    arrow::compute::take_record_batch(batch, &idx).map_err(arrow_err(loc, "sort"))
}
