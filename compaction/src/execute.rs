//! The compaction executor and the compaction service.
//!
//! [`Compactor::schedule`] takes a TrueTime instant `C`, plans over the
//! current file-system view and writes `<C>.compaction.requested`.
//! [`Compactor::execute`] marks the plan inflight, merges each planned file
//! group (base plus the plan's logs, with the one merge the readers use) into
//! `{fileId}_{token}_{C}.parquet`, and completes `<C>_<c>.commit` under the
//! table lock. Re-running a plan after a crash first deletes what the crashed
//! attempt wrote (found through its markers), so it is idempotent.
//! [`Compactor::run_once`] does all of it under an execution lock, so only one
//! compactor executes a given plan; another waits, then finds it done.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use futures::StreamExt;
use object_store::ObjectStoreExt;
use object_store::buffered::BufWriter;
use parquet::arrow::AsyncArrowWriter;
use parquet::file::properties::WriterProperties;
use tributary_format::metadata::{CommitMetadata, CompactionOperation, CompactionPlan, WriteStat};
use tributary_format::schema::{COMMIT_SEQNO, FILE_NAME, META_FIELDS, RECORD_KEY, TableSchema};
use tributary_timeline::protocol::marker::{self, remove_markers, rollback_files};
use tributary_timeline::protocol::{Completion, complete_instant};
use tributary_timeline::{
    Action, BaseFileName, FileSystemView, Instant, InstantTime, LockProvider, State, TableConfig, TableLocation,
    TimeGenerator, Timeline, TimelineWriter, WriteToken,
};

use crate::error::{Error, Result};
use crate::plan::{PlanSettings, plan};
use tributary_merge::{Budget, RowOrder, Share, SliceFiles, SliceMerge, SpillArea, merge_slice};

/// Settings of a [`Compactor`].
#[derive(Debug, Clone)]
pub struct CompactorSettings {
    /// Which file groups a plan takes.
    pub plan: PlanSettings,
    /// File groups compacted at once.
    pub parallelism: usize,
    /// Memory budget of the compactor, shared by the groups compacted at
    /// once. A group whose inputs would not fit is merged through spill
    /// files, a key partition at a time.
    pub memory_budget: usize,
    /// An existing local folder for spill files; by default the table's
    /// `.hoodie/.temp/` (set it for tables in object stores, which would
    /// otherwise spill to the store).
    pub spill_dir: Option<std::path::PathBuf>,
    /// Rows per Parquet row group.
    pub row_group_rows: usize,
    /// An inflight delta commit whose heartbeat is older than this is a
    /// failed write; it is rolled back before planning.
    pub heartbeat_expiry: std::time::Duration,
}

impl Default for CompactorSettings {
    fn default() -> Self {
        Self {
            plan: PlanSettings::default(),
            parallelism: 2,
            memory_budget: 256 << 20,
            spill_dir: None,
            row_group_rows: 128 * 1024,
            heartbeat_expiry: tributary_timeline::protocol::DEFAULT_HEARTBEAT_EXPIRY,
        }
    }
}

/// What one executed compaction did.
#[derive(Debug, Clone)]
pub struct CompactionSummary {
    /// The compaction instant.
    pub instant: InstantTime,
    /// Its completion time.
    pub completed: InstantTime,
    /// File groups compacted.
    pub groups: usize,
    /// Records written to new base files.
    pub records: u64,
    /// Bytes read (base and log files).
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// File groups merged key first (only the winning records decoded).
    pub key_first_groups: usize,
    /// File groups merged through spill files.
    pub spilled_groups: usize,
}

/// Plans and executes compactions of one table.
#[derive(Debug, Clone)]
pub struct Compactor {
    loc: TableLocation,
    config: TableConfig,
    schema: Arc<TableSchema>,
    time: TimeGenerator,
    exec_lock: Arc<dyn LockProvider>,
    timeline: TimelineWriter,
    settings: CompactorSettings,
}

/// A failed write of a new base file: the store's failure (retryable) or
/// the Parquet encoder's (a bug).
fn write_failed(path: &object_store::path::Path, e: parquet::errors::ParquetError) -> Error {
    match e {
        parquet::errors::ParquetError::External(inner) => {
            Error::Unavailable { path: path.to_string(), reason: inner.to_string() }
        }
        e => Error::Internal { what: format!("encoding {path}"), reason: e.to_string() },
    }
}

fn invalid(what: impl Into<String>, reason: impl ToString) -> Error {
    Error::Invalid { what: what.into(), reason: reason.to_string() }
}

impl Compactor {
    /// A compactor for the table at `loc`. `exec_lock` serialises executors
    /// of this table (distinct from the instant lock inside `time`).
    pub fn new(
        loc: TableLocation,
        config: TableConfig,
        schema: TableSchema,
        time: TimeGenerator,
        exec_lock: Arc<dyn LockProvider>,
        settings: CompactorSettings,
    ) -> Self {
        let timeline = TimelineWriter::new(&loc, &config);
        Self { loc, config, schema: Arc::new(schema), time, exec_lock, timeline, settings }
    }

    async fn view(&self) -> Result<(Timeline, FileSystemView)> {
        let timeline = Timeline::load(&self.loc, &self.config).await?;
        let view = FileSystemView::load(&self.loc, &self.config, &timeline).await?;
        Ok((timeline, view))
    }

    /// Takes a compaction instant and writes its plan. `None` when no file
    /// group qualifies (nothing is written then).
    pub async fn schedule(&self) -> Result<Option<(InstantTime, CompactionPlan)>> {
        let instant = self.time.new_instant().await?;
        // Listed after the instant was issued: every delta commit that
        // completed before it is visible now (see docs/design.md).
        let (_, view) = self.view().await?;
        let Some(plan) = plan(&view, &instant, &self.settings.plan) else { return Ok(None) };
        let requested = Instant::requested(instant.clone(), Action::Compaction);
        self.timeline.create(&requested, State::Requested, plan.to_avro_container()?).await?;
        Ok(Some((instant, plan)))
    }

    /// Executes the pending plan at `instant`.
    pub async fn execute(&self, instant: &InstantTime) -> Result<CompactionSummary> {
        let timeline = Timeline::load(&self.loc, &self.config).await?;
        let pending = timeline
            .get(instant)
            .filter(|i| i.action == Action::Compaction && !i.is_completed())
            .cloned()
            .ok_or_else(|| invalid(format!("compaction {instant}"), "no such pending compaction"))?;
        let path = self.timeline.path_of(&pending, State::Requested)?;
        let plan = CompactionPlan::from_avro_container(&self.loc.get(&path).await?, path.as_ref())?;
        if pending.state == State::Requested {
            self.timeline.create_if_absent(&pending, State::Inflight, Vec::new()).await?;
        }
        // A crashed attempt may have left base files: remove them first.
        rollback_files(&self.loc, instant).await?;
        // And spill files.
        self.clear_spills(instant).await?;
        let timeline = Arc::new(timeline);
        let jobs = plan.operations.iter().enumerate().map(|(i, op)| {
            let (this, op, timeline, instant) = (self.clone(), op.clone(), timeline.clone(), instant.clone());
            tokio::spawn(async move { this.compact_group(i as u64, &op, &timeline, &instant).await })
        });
        let results: Vec<_> =
            futures::stream::iter(jobs).buffer_unordered(self.settings.parallelism.max(1)).collect().await;
        let mut meta = CommitMetadata { compacted: true, operation_type: "COMPACT".into(), ..Default::default() };
        meta.extra_metadata.insert("schema".into(), self.schema.table_json());
        let (mut records, mut bytes_read, mut bytes_written) = (0u64, 0u64, 0u64);
        let (mut key_first_groups, mut spilled_groups) = (0, 0);
        for r in results {
            let (group, stat) = r.map_err(|e| Error::Internal {
                what: format!("compaction {instant} of {}", self.loc),
                reason: format!("a file group's task failed: {e}"),
            })??;
            records += stat.num_writes as u64;
            bytes_written += stat.file_size_in_bytes as u64;
            bytes_read += group.bytes_read;
            key_first_groups += usize::from(group.key_first);
            spilled_groups += usize::from(group.spilled);
            meta.partition_to_write_stats.entry(stat.partition_path.clone()).or_default().push(stat);
        }
        let content = meta.to_avro_container()?;
        let completed =
            complete_instant(&self.loc, &self.timeline, &self.time, &pending, content, Completion::Owned).await?;
        remove_markers(&self.loc, instant).await?;
        Ok(CompactionSummary {
            instant: instant.clone(),
            completed,
            groups: plan.operations.len(),
            records,
            bytes_read,
            bytes_written,
            key_first_groups,
            spilled_groups,
        })
    }

    /// Under the execution lock: finishes pending plans, then schedules and
    /// executes a new one. Returns what was executed.
    pub async fn run_once(&self) -> Result<Vec<CompactionSummary>> {
        let guard = self.exec_lock.acquire().await?;
        let result = self.run_locked().await;
        guard.release().await?;
        result
    }

    async fn run_locked(&self) -> Result<Vec<CompactionSummary>> {
        // Failed writes first, so their files never join a slice.
        let clock = self.time.clock().clone();
        crate::rollback::rollback_failed_writes(
            &self.loc,
            &self.config,
            &self.time,
            clock.as_ref(),
            self.settings.heartbeat_expiry,
        )
        .await?;
        let mut done = Vec::new();
        let timeline = Timeline::load(&self.loc, &self.config).await?;
        let pending: Vec<InstantTime> = timeline.pending_compactions().map(|i| i.requested.clone()).collect();
        for c in pending {
            done.push(self.execute(&c).await?);
        }
        if let Some((c, _)) = self.schedule().await? {
            done.push(self.execute(&c).await?);
        }
        Ok(done)
    }

    async fn compact_group(
        &self,
        index: u64,
        op: &CompactionOperation,
        timeline: &Timeline,
        instant: &InstantTime,
    ) -> Result<(GroupDone, WriteStat)> {
        let dir = self.loc.join(&op.partition_path);
        let base = op.data_file_path.as_ref().map(|b| dir.clone().join(b.as_str()));
        let logs: Vec<object_store::path::Path> =
            op.delta_file_paths.iter().map(|l| dir.clone().join(l.as_str())).collect();
        let mut bytes_read = 0u64;
        for p in base.iter().chain(&logs) {
            let meta = self.loc.store.head(p).await.map_err(|e| tributary_timeline::Error::store("head", p, e))?;
            bytes_read += meta.size;
        }
        let name = BaseFileName {
            file_id: op.file_id.clone(),
            write_token: WriteToken::new(index, 0, 0),
            instant: instant.clone(),
            extension: "parquet".into(),
        }
        .to_string();
        let rel = if op.partition_path.is_empty() { name.clone() } else { format!("{}/{name}", op.partition_path) };
        marker::create_marker(&self.loc, instant, &op.partition_path, &name, marker::CREATE).await?;
        let out_path = self.loc.join(&rel);
        let ctx = SliceMerge { loc: &self.loc, schema: &self.schema, config: &self.config, timeline };
        let budget = Budget {
            share: Share::of_budget(self.settings.memory_budget, self.settings.parallelism),
            input_bytes: bytes_read,
            spill: self.spill_area(instant, &op.file_id)?,
        };
        let files = SliceFiles { base: base.as_ref(), logs: &logs };
        let mut merged = merge_slice(&ctx, &files, RowOrder::Key, Some(&budget)).await?;
        // The first rows show which columns a dictionary would suit.
        let first = merged.next_batch().await?;
        let mut writer = self.base_writer(&out_path, first.as_ref())?;
        let mut rows = 0u64;
        let mut next = first;
        while let Some(sorted) = next {
            let sorted = with_file_name(sorted, &name)?;
            rows += sorted.num_rows() as u64;
            writer.write(&sorted).await.map_err(|e| write_failed(&out_path, e))?;
            next = merged.next_batch().await?;
        }
        let done = GroupDone { bytes_read, key_first: merged.key_first(), spilled: merged.spilled() };
        Ok((done, self.finish_group(op, writer, &out_path, rel, rows).await?))
    }

    /// The Parquet writer of a new base file at `path`. Columns unique within
    /// a base file (record key, key field, sequence number) get no
    /// dictionary, which would only be built to be given up; nor do columns
    /// whose values in `sample` (rows about to be written) look as distinct.
    fn base_writer(
        &self,
        path: &object_store::path::Path,
        sample: Option<&RecordBatch>,
    ) -> Result<AsyncArrowWriter<BufWriter>> {
        let row_group_rows = self.settings.row_group_rows.max(1024);
        let fields = self.schema.arrow_with_meta().fields();
        let mut plain = vec![RECORD_KEY, COMMIT_SEQNO, META_FIELDS.len() + self.schema.key_index()];
        if let Some(sample) = sample {
            plain.extend((0..sample.num_columns()).filter(|&c| dictionary_overflows(sample.column(c), row_group_rows)));
        }
        let props = plain
            .iter()
            .filter_map(|&c| fields.get(c))
            .fold(WriterProperties::builder(), |b, f| {
                b.set_column_dictionary_enabled(parquet::schema::types::ColumnPath::from(f.name().as_str()), false)
            })
            .set_max_row_group_row_count(Some(row_group_rows))
            .set_compression(parquet::basic::Compression::SNAPPY)
            .build();
        AsyncArrowWriter::try_new(
            BufWriter::new(self.loc.store.clone(), path.clone()),
            self.schema.arrow_with_meta().clone(),
            Some(props),
        )
        .map_err(|e| Error::Internal { what: format!("opening the Parquet writer of {path}"), reason: e.to_string() })
    }

    /// Closes a group's new base file and describes it.
    async fn finish_group(
        &self,
        op: &CompactionOperation,
        writer: AsyncArrowWriter<BufWriter>,
        out_path: &object_store::path::Path,
        rel: String,
        rows: u64,
    ) -> Result<WriteStat> {
        writer.close().await.map_err(|e| write_failed(out_path, e))?;
        let size = self
            .loc
            .store
            .head(out_path)
            .await
            .map_err(|e| tributary_timeline::Error::store("head", out_path, e))?
            .size;
        let stat = WriteStat {
            file_id: op.file_id.clone(),
            path: rel,
            prev_commit: op.base_instant_time.clone(),
            num_writes: rows as i64,
            num_update_writes: rows as i64,
            total_write_bytes: size as i64,
            partition_path: op.partition_path.clone(),
            file_size_in_bytes: size as i64,
            total_updated_records_compacted: rows as i64,
            total_log_files_compacted: op.delta_file_paths.len() as i64,
            total_log_size_compacted: op.metrics.get("TOTAL_LOG_FILES_SIZE").copied().unwrap_or(0.0) as i64,
            prev_base_file: op.data_file_path.clone(),
            ..Default::default()
        };
        Ok(stat)
    }

    /// The store and folder that hold the spill folders of compaction
    /// `instant`: the configured spill folder, else the table's
    /// `.hoodie/.temp/`. On local disk spill files are written without fsync
    /// (they never outlive the compaction) and emptied folders are removed.
    fn spill_root(&self) -> Result<(Arc<dyn object_store::ObjectStore>, object_store::path::Path)> {
        let local = |dir: &std::path::Path| -> Result<(Arc<dyn object_store::ObjectStore>, object_store::path::Path)> {
            let store = object_store::local::LocalFileSystem::new_with_prefix(dir)
                .map_err(|e| invalid(format!("spill folder {}", dir.display()), e))?
                .with_automatic_cleanup(true);
            Ok((Arc::new(store), object_store::path::Path::default()))
        };
        match (&self.settings.spill_dir, &self.loc.local_root) {
            (Some(dir), _) => local(dir),
            (None, Some(root)) => local(&root.join(".hoodie").join(".temp")),
            (None, None) => Ok((self.loc.store.clone(), self.loc.meta_dir().join(".temp"))),
        }
    }

    /// Where file group `file_id` of compaction `instant` spills:
    /// `<instant>.<file_id>.spill/` in the spill root. Each group has its own
    /// top folder, so removing one group's emptied folder never races with
    /// another group creating its own.
    fn spill_area(&self, instant: &InstantTime, file_id: &str) -> Result<SpillArea> {
        let (store, root) = self.spill_root()?;
        Ok(SpillArea { store, dir: root.join(format!("{instant}.{file_id}.spill")) })
    }

    /// Deletes what an earlier attempt of compaction `instant` spilled.
    async fn clear_spills(&self, instant: &InstantTime) -> Result<()> {
        // A spill root that cannot be opened yet (no `.temp` folder) holds nothing.
        let Ok((store, root)) = self.spill_root() else { return Ok(()) };
        let mine = format!("{instant}.");
        let listed: Vec<object_store::path::Path> = store
            .list_with_delimiter(Some(&root))
            .await
            .map_err(|e| tributary_timeline::Error::store("list", &root, e))?
            .common_prefixes
            .into_iter()
            .filter(|p| p.filename().is_some_and(|n| n.starts_with(&mine) && n.ends_with(".spill")))
            .collect();
        for dir in listed {
            SpillArea { store: store.clone(), dir }.clear().await?;
        }
        Ok(())
    }
}

/// How one file group was compacted.
struct GroupDone {
    /// Bytes of its base and log files.
    bytes_read: u64,
    /// Merged key first.
    key_first: bool,
    /// Merged through spill files.
    spilled: bool,
}

/// Whether a dictionary of `column`'s values would outgrow the Parquet
/// writer's dictionary page limit (1 MiB, after which it falls back to plain
/// encoding, the dictionary work wasted) within a row group of
/// `row_group_rows` rows: judged from up to 4,096 of its values, when nearly
/// all of them are distinct.
fn dictionary_overflows(column: &ArrayRef, row_group_rows: usize) -> bool {
    const SAMPLE: usize = 4096;
    const DICTIONARY_LIMIT: usize = 1 << 20;
    let n = column.len().min(SAMPLE);
    if n < SAMPLE / 4 {
        return false;
    }
    let field = arrow::row::SortField::new(column.data_type().clone());
    let Ok(converter) = arrow::row::RowConverter::new(vec![field]) else { return false };
    let Ok(rows) = converter.convert_columns(&[column.slice(0, n)]) else { return false };
    let distinct: std::collections::HashSet<&[u8]> = rows.iter().map(|r| r.data()).collect();
    let bytes: usize = rows.iter().map(|r| r.data().len()).sum();
    distinct.len() * 10 >= n * 9 && row_group_rows.saturating_mul(bytes / n) > DICTIONARY_LIMIT
}

/// Rows with `_hoodie_file_name` set to the new base file.
fn with_file_name(batch: RecordBatch, file_name: &str) -> Result<RecordBatch> {
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns[FILE_NAME] = Arc::new(StringArray::from_iter_values(std::iter::repeat_n(file_name, batch.num_rows())));
    RecordBatch::try_new(batch.schema(), columns)
        .map_err(|e| Error::Internal { what: format!("setting {file_name} in its rows"), reason: e.to_string() })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Float64Array, Int32Array, StringArray};

    use super::dictionary_overflows;

    #[test]
    fn dictionaries_are_left_out_only_where_they_would_overflow() {
        let unique: ArrayRef = Arc::new(Float64Array::from_iter_values((0..8192).map(|i| i as f64 * 1.5)));
        let few: ArrayRef = Arc::new(Int32Array::from_iter_values((0..8192).map(|i| i % 7)));
        let names: ArrayRef = Arc::new(StringArray::from_iter_values((0..8192).map(|i| format!("name-{i}"))));
        assert!(dictionary_overflows(&unique, 128 * 1024));
        assert!(dictionary_overflows(&names, 128 * 1024));
        assert!(!dictionary_overflows(&few, 128 * 1024), "few distinct values suit a dictionary");
        // Unique values whose dictionary stays under the limit in a small row group.
        assert!(!dictionary_overflows(&unique, 16 * 1024));
        // Too few rows to judge.
        assert!(!dictionary_overflows(&unique.slice(0, 100), 128 * 1024));
    }
}
