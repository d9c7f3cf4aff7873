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

use arrow::array::{Array, ArrayRef, RecordBatch, StringArray};
use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::file::properties::WriterProperties;
use tributary_format::HeaderKey;
use tributary_format::{COMMIT_SEQNO, FILE_NAME, META_FIELDS, RECORD_KEY, TableSchema};
use tributary_format::{CommitMetadata, CompactionOperation, CompactionPlan, WriteStat};
use tributary_format::{DeleteRecord, encode_delete_block};
use tributary_timeline::{
    Action, BaseFileName, Clock, Fence, FileSystemView, Instant, InstantTime, LockProvider, LogFileName, State,
    TableConfig, TableLocation, TimeGenerator, Timeline, TimelineFolder, WriteToken,
};
use tributary_timeline::{Completion, complete_instant_with};
use tributary_timeline::{MARKER_APPEND, MARKER_CREATE, create_marker, remove_markers, rollback_files};
use tributary_timeline::{SEQUENCE_GROUPS_KEY, SequenceGroup};

use crate::base_file::BaseFileWriter;
use crate::error::{Error, Result};
use crate::health::{CompactionMeters, LogSpread};
use crate::plan::{PlanSettings, plan};
use tributary_merge::{BaseRows, Budget, RowOrder, Share, SliceFiles, SliceMerge, SpillArea, merge_slice};
use tributary_timeline::partition_file;

/// HEAD requests a group's compaction has in flight at once.
const HEADS_AT_ONCE: usize = 16;

/// Parts of a base file uploaded at once (each up to
/// [`Share::upload_buffer`] bytes): one, so that a writer holds the part
/// being uploaded and the one being filled, no more.
const UPLOADS_AT_ONCE: usize = 1;

/// File sizes by path, from listing the partitions a compaction takes.
type Listed = foldhash::HashMap<object_store::path::Path, u64>;

/// Settings of a [`Compactor`]. Where spill files go is not a setting but
/// a component, given with [`CompactorBuilder::with_spill`].
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
            row_group_rows: 128 * 1024,
            heartbeat_expiry: tributary_timeline::DEFAULT_HEARTBEAT_EXPIRY,
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
    /// Tombstones kept in the new file slices (`docs/design.md`, "Tombstones").
    pub tombstones: u64,
    /// Bytes of the log files holding them.
    pub tombstone_bytes: u64,
}

/// Plans and executes compactions of one table. Built by
/// [`Compactor::builder`].
#[derive(Debug, Clone)]
pub struct Compactor {
    loc: TableLocation,
    config: TableConfig,
    schema: Arc<TableSchema>,
    time: TimeGenerator,
    clock: Arc<dyn Clock>,
    exec_lock: Arc<dyn LockProvider>,
    spill_store: Arc<dyn ObjectStore>,
    spill_dir: object_store::path::Path,
    timeline: TimelineFolder,
    settings: CompactorSettings,
    /// What it records as metrics.
    meters: CompactionMeters,
    /// The log spread its last plan saw.
    last_spread: Arc<std::sync::Mutex<Option<LogSpread>>>,
}

/// Builds a [`Compactor`]: the table and its schema, the components it
/// uses (time generator, clock, execution lock, spill store) and its
/// settings. [`CompactorBuilder::build`] checks that the required parts
/// were given.
///
/// ```
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # use object_store::{memory::InMemory, path::Path};
/// # use tributary_compaction::{Compactor, CompactorSettings};
/// # use tributary_format::TableSchema;
/// # use tributary_timeline::*;
/// let schema_json = r#"{"type":"record","name":"r","fields":[{"name":"id","type":"string"},{"name":"ts","type":"long"}]}"#;
/// let config = TableConfig::new_table(&NewTableConfig::new("t", "id", "ts", schema_json));
/// let schema = TableSchema::new(schema_json, &["id"], Some("ts"), None)?;
/// let loc = TableLocation::new(Arc::new(InMemory::new()), Path::from("t"));
/// let clock = Arc::new(ManualClock::new(1_766_264_468_078));
/// let time = TimeGenerator::new(TimeMode::HybridLogical, Duration::from_millis(200), clock.clone(),
///                               Arc::new(InProcessLock::new()));
/// let compactor = Compactor::builder(loc, config)
///     .with_schema(schema)
///     .with_time(time)
///     .with_clock(clock)
///     .with_exec_lock(Arc::new(InProcessLock::new()))
///     .with_spill(Arc::new(InMemory::new()), Path::from("spill"))
///     .with_settings(CompactorSettings { memory_budget: 64 << 20, ..Default::default() })
///     .build()?;
/// # let _ = compactor;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct CompactorBuilder {
    loc: TableLocation,
    config: TableConfig,
    schema: Option<TableSchema>,
    time: Option<TimeGenerator>,
    clock: Option<Arc<dyn Clock>>,
    exec_lock: Option<Arc<dyn LockProvider>>,
    spill: Option<(Arc<dyn ObjectStore>, object_store::path::Path)>,
    settings: CompactorSettings,
}

impl CompactorBuilder {
    /// The table's schema, which new base files are written in. Required.
    pub fn with_schema(mut self, schema: TableSchema) -> Self {
        self.schema = Some(schema);
        self
    }

    /// The generator of compaction instants and completion times, on the
    /// table's instant lock. Required.
    pub fn with_time(mut self, time: TimeGenerator) -> Self {
        self.time = Some(time);
        self
    }

    /// The clock that judges whether a write's heartbeat has expired. By
    /// default the clock of the time generator.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The lock that lets one compactor at a time execute plans of this
    /// table ([`Compactor::run_once`] holds it). It must not be the instant
    /// lock inside the time generator. Required.
    pub fn with_exec_lock(mut self, lock: Arc<dyn LockProvider>) -> Self {
        self.exec_lock = Some(lock);
        self
    }

    /// Where spill files go: `<dir>/<instant>.<file id>.spill/` in `store`.
    /// By default the table's `.hoodie/.temp/` in the table's own store.
    /// Spill files never outlive a compaction, so a store that does not
    /// make writes durable (and removes emptied folders) suits best.
    pub fn with_spill(mut self, store: Arc<dyn ObjectStore>, dir: object_store::path::Path) -> Self {
        self.spill = Some((store, dir));
        self
    }

    /// The compactor's settings; [`CompactorSettings::default`] if not given.
    pub fn with_settings(mut self, settings: CompactorSettings) -> Self {
        self.settings = settings;
        self
    }

    /// The compactor, or [`Error::Invalid`] naming the table and the
    /// required part that was not given.
    pub fn build(self) -> Result<Compactor> {
        let missing = |part: &str| invalid(format!("compactor of {}", self.loc), format!("no {part} given"));
        let schema = self.schema.clone().ok_or_else(|| missing("schema (with_schema)"))?;
        let time = self.time.clone().ok_or_else(|| missing("time generator (with_time)"))?;
        let exec_lock = self.exec_lock.clone().ok_or_else(|| missing("execution lock (with_exec_lock)"))?;
        let Self { loc, config, clock, spill, settings, .. } = self;
        let clock = clock.unwrap_or_else(|| time.clock().clone());
        let (spill_store, spill_dir) =
            spill.unwrap_or_else(|| (loc.store.clone(), tributary_timeline::temp_dir(&loc.root)));
        let timeline = TimelineFolder::new(&loc, &config);
        let meters = CompactionMeters::new(&loc);
        Ok(Compactor {
            loc,
            config,
            schema: Arc::new(schema),
            time,
            clock,
            exec_lock,
            spill_store,
            spill_dir,
            timeline,
            settings,
            meters,
            last_spread: Arc::default(),
        })
    }
}

/// The error of a compactor that finds the plan it executes completed by
/// another compactor (which took the execution lock over meanwhile).
fn completed_meanwhile(instant: &InstantTime) -> tributary_timeline::Error {
    tributary_timeline::Error::Withdrawn {
        what: format!("compaction {instant}"),
        reason: "another compactor completed it meanwhile (this one lost the execution lock)".into(),
    }
}

fn invalid(what: impl Into<String>, reason: impl ToString) -> Error {
    Error::Invalid { what: what.into(), reason: reason.to_string() }
}

impl Compactor {
    /// A builder of a compactor for the table at `loc` with configuration
    /// `config`.
    pub fn builder(loc: TableLocation, config: TableConfig) -> CompactorBuilder {
        CompactorBuilder {
            loc,
            config,
            schema: None,
            time: None,
            clock: None,
            exec_lock: None,
            spill: None,
            settings: CompactorSettings::default(),
        }
    }

    async fn view(&self) -> Result<(Timeline, FileSystemView)> {
        let timeline = Timeline::load(&self.loc, &self.config).await?;
        let view = FileSystemView::load(&self.loc, &self.config, &timeline).await?;
        Ok((timeline, view))
    }

    /// The uncompacted logs its last plan saw (before that plan merged
    /// them); `None` before it planned.
    pub fn last_spread(&self) -> Option<LogSpread> {
        self.last_spread.lock().ok().and_then(|l| l.clone())
    }

    /// Takes a compaction instant and writes its plan. `None` when no file
    /// group qualifies, or when another compactor scheduled a compaction
    /// meanwhile (nothing is written then). The caller holds the execution
    /// lock ([`Compactor::run_once`] does).
    pub async fn schedule(&self) -> Result<Option<(InstantTime, CompactionPlan)>> {
        Ok(self.schedule_fenced(&Fence::none()).await?.map(|(instant, plan, _)| (instant, plan)))
    }

    /// [`Compactor::schedule`] under the execution lock whose `fence` is
    /// checked right before the plan is written. The plan is written under
    /// the table lock, and only if no compaction appeared on the timeline
    /// since the view it was made from: a compactor that lost the execution
    /// lock while it planned could otherwise plan file groups another
    /// compactor planned (or compacted) meanwhile, and two pending plans on
    /// one file group hide the slice before them from readers. Also returns
    /// the sizes of the files of the view the plan was made from, so that
    /// an execution right after it need not list them again.
    async fn schedule_fenced(&self, fence: &Fence) -> Result<Option<(InstantTime, CompactionPlan, Listed)>> {
        let instant = self.time.new_instant().await?;
        // Listed after the instant was issued: every delta commit that
        // completed before it is visible now (see docs/design.md).
        let (seen, view) = self.view().await?;
        let spread = self.meters.observe(&seen, &view, self.clock.now_millis());
        if let Ok(mut last) = self.last_spread.lock() {
            *last = Some(spread);
        }
        let Some(plan) = plan(&view, &instant, &self.settings.plan) else { return Ok(None) };
        let requested = Instant::requested(instant.clone(), Action::Compaction);
        let content = plan.to_avro_container()?;
        let writer = &self.timeline;
        let (seen, requested) = (&seen, &requested);
        let written = self
            .time
            .with_time_fenced(|_, table_fence| async move {
                let now = writer.load().await?;
                if now.instants().any(|i| i.action == Action::Compaction && seen.get(&i.requested).is_none()) {
                    return Ok(false);
                }
                fence.check().await?;
                table_fence.check().await?;
                writer.create(requested, State::Requested, content).await?;
                Ok(true)
            })
            .await?;
        if !written {
            tracing::info!(compaction = %instant, "another compactor scheduled meanwhile; not scheduling");
            return Ok(None);
        }
        Ok(Some((instant, plan, sizes_in(&view))))
    }

    /// Executes the pending plan at `instant`. The caller holds the
    /// execution lock ([`Compactor::run_once`] does): two executions of one
    /// plan at once would delete each other's base files.
    pub async fn execute(&self, instant: &InstantTime) -> Result<CompactionSummary> {
        self.execute_fenced(instant, &Fence::none(), None).await
    }

    /// [`Compactor::execute`] under the execution lock whose `fence` is
    /// checked before the plan is taken up and again, under the table lock,
    /// right before the compaction becomes visible: a compactor that lost
    /// the execution lock (its lease ran out while it was frozen or cut
    /// off, and another compactor took the plan over) stops there. `listed`:
    /// file sizes the plan's scheduling listed, if it came right before
    /// (the files of a completed write never change); else the partitions
    /// are listed.
    async fn execute_fenced(
        &self,
        instant: &InstantTime,
        fence: &Fence,
        listed: Option<Listed>,
    ) -> Result<CompactionSummary> {
        fence.check().await?;
        let timeline = Timeline::load(&self.loc, &self.config).await?;
        // New base files are written in the schema in force now: every log
        // the plan takes completed before it, and recorded a schema that
        // this one holds whole.
        let in_force = tributary_timeline::schema_in_force(&self.timeline, &self.config, &timeline, None).await?;
        match in_force {
            Some(s) if s.json != self.schema.table_json() || self.config.in_force(&s) != self.config => {
                let config = self.config.in_force(&s);
                let schema = Arc::new(config.schema_of(&s.json)?);
                let this = Compactor { schema, config, ..self.clone() };
                this.execute_at(instant, fence, timeline, listed).await
            }
            _ => self.execute_at(instant, fence, timeline, listed).await,
        }
    }

    /// [`Compactor::execute_fenced`] in this compactor's schema, at
    /// `timeline`, loaded after the fence was checked.
    async fn execute_at(
        &self,
        instant: &InstantTime,
        fence: &Fence,
        timeline: Timeline,
        listed: Option<Listed>,
    ) -> Result<CompactionSummary> {
        let pending = match timeline.get(instant).filter(|i| i.action == Action::Compaction) {
            Some(i) if !i.is_completed() => i.clone(),
            Some(_) => return Err(completed_meanwhile(instant).into()),
            None => return Err(invalid(format!("compaction {instant}"), "no such pending compaction")),
        };
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
        // Owned operations, so that the stream (and `execute`'s future)
        // holds no closure over borrowed ones: such a future is not `Send`
        // for every lifetime, and a caller could not spawn it.
        let operations: Vec<(usize, CompactionOperation)> = plan.operations.iter().cloned().enumerate().collect();
        let listed = Arc::new(match listed {
            Some(listed) => listed,
            None => self.list_partitions(&plan.operations).await?,
        });
        let jobs = operations.into_iter().map(|(i, op)| {
            let (this, timeline, instant, listed) = (self.clone(), timeline.clone(), instant.clone(), listed.clone());
            tokio::spawn(async move { this.compact_group(i as u64, &op, &timeline, &instant, &listed).await })
        });
        let results: Vec<_> =
            futures::stream::iter(jobs).buffer_unordered(self.settings.parallelism.max(1)).collect().await;
        let mut meta = CommitMetadata { compacted: true, operation_type: "COMPACT".into(), ..Default::default() };
        let own_schema = self.schema.table_json();
        meta.extra_metadata.insert("schema".into(), own_schema.clone());
        if !self.config.sequence_groups.is_empty() {
            let groups = SequenceGroup::render_list(&self.config.sequence_groups);
            meta.extra_metadata.insert(SEQUENCE_GROUPS_KEY.into(), groups);
        }
        let (mut records, mut bytes_read, mut bytes_written) = (0u64, 0u64, 0u64);
        let (mut key_first_groups, mut spilled_groups) = (0, 0);
        let (mut tombstones, mut tombstone_bytes) = (0u64, 0u64);
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
            tombstones += group.tombstones;
            tombstone_bytes += group.tombstone_bytes;
            meta.partition_to_write_stats.entry(stat.partition_path.clone()).or_default().push(stat);
        }
        let content = meta.to_avro_container()?;
        let (writer, config, meta) = (&self.timeline, &self.config, &meta);
        let before_visible = |_| async move {
            fence.check().await?;
            let now = writer.load().await?;
            if let Some(i) = now.get(instant).filter(|i| i.is_completed()) {
                return Err(completed_meanwhile(&i.requested));
            }
            // A commit that evolved the schema since this execution began
            // recorded the one in force; the compaction records it too, so
            // the latest write's schema never loses a column.
            match tributary_timeline::schema_in_force(writer, config, &now, None).await? {
                Some(s) if s.json != own_schema || config.in_force(&s) != *config => {
                    let mut meta = meta.clone();
                    if let Some(groups) = &s.sequence_groups {
                        meta.extra_metadata.insert(SEQUENCE_GROUPS_KEY.into(), SequenceGroup::render_list(groups));
                    }
                    meta.extra_metadata.insert("schema".into(), s.json);
                    Ok(Some(meta.to_avro_container()?))
                }
                _ => Ok(None),
            }
        };
        let completed =
            complete_instant_with(&self.loc, writer, &self.time, &pending, content, Completion::Owned, before_visible)
                .await?;
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
            tombstones,
            tombstone_bytes,
        })
    }

    /// Under the execution lock: finishes pending plans, then schedules and
    /// executes a new one. Returns what was executed.
    pub async fn run_once(&self) -> Result<Vec<CompactionSummary>> {
        let guard = self.exec_lock.acquire().await?;
        let result = self.run_locked(&guard.fence()).await;
        guard.release().await?;
        result
    }

    async fn run_locked(&self, fence: &Fence) -> Result<Vec<CompactionSummary>> {
        // A few failed writes first, so that their files leave soon.
        crate::rollback::rollback_before_service(
            &self.loc,
            &self.config,
            &self.time,
            self.clock.as_ref(),
            self.settings.heartbeat_expiry,
        )
        .await?;
        let mut done = Vec::new();
        let timeline = Timeline::load(&self.loc, &self.config).await?;
        let pending: Vec<InstantTime> = timeline.pending_compactions().map(|i| i.requested.clone()).collect();
        for c in pending {
            done.push(self.execute_fenced(&c, fence, None).await?);
        }
        if let Some((c, _, listed)) = self.schedule_fenced(fence).await? {
            done.push(self.execute_fenced(&c, fence, Some(listed)).await?);
        }
        for d in &done {
            self.meters.compacted(d.records, d.tombstones);
        }
        Ok(done)
    }

    /// The sizes of the files in the partitions `operations` compact, from
    /// one listing per partition rather than a request per file.
    async fn list_partitions(&self, operations: &[CompactionOperation]) -> Result<Listed> {
        let partitions: std::collections::BTreeSet<&str> =
            operations.iter().map(|op| op.partition_path.as_str()).collect();
        let mut sizes = Listed::default();
        for partition in partitions {
            let dir = self.loc.join(partition);
            let listing = self
                .loc
                .store
                .list_with_delimiter(Some(&dir))
                .await
                .map_err(|e| tributary_timeline::Error::store("list", &dir, e))?;
            sizes.extend(listing.objects.into_iter().map(|m| (m.location, m.size)));
        }
        Ok(sizes)
    }

    async fn compact_group(
        &self,
        index: u64,
        op: &CompactionOperation,
        timeline: &Timeline,
        instant: &InstantTime,
        listed: &Listed,
    ) -> Result<(GroupDone, WriteStat)> {
        let dir = self.loc.join(&op.partition_path);
        let base = op.data_file_path.as_ref().map(|b| dir.clone().join(b.as_str()));
        let logs: Vec<object_store::path::Path> =
            op.delta_file_paths.iter().map(|l| dir.clone().join(l.as_str())).collect();
        // The slice's input size sets its share of the budget. The sizes
        // come from the partitions' listing; a file it did not show is asked
        // for (and a missing one named), several at once (a group may have
        // hundreds of logs).
        let files: Vec<object_store::path::Path> = base.iter().chain(&logs).cloned().collect();
        let sizes = futures::stream::iter(files)
            .map(|p| {
                let store = self.loc.store.clone();
                let known = listed.get(&p).copied();
                async move {
                    if let Some(size) = known {
                        return Ok(size);
                    }
                    let meta = store.head(&p).await.map_err(|e| tributary_timeline::Error::store("head", &p, e))?;
                    Ok::<_, Error>(meta.size)
                }
            })
            .buffered(HEADS_AT_ONCE);
        let mut sizes: Vec<u64> = sizes.try_collect().await?;
        let bytes_read: u64 = sizes.iter().sum();
        // The logs' sizes, after the base file's.
        let log_sizes = sizes.split_off(usize::from(base.is_some()));
        let name = BaseFileName {
            file_id: op.file_id.clone(),
            write_token: WriteToken::new(index, 0, 0),
            instant: instant.clone(),
            extension: "parquet".into(),
        }
        .to_string();
        let rel = partition_file(&op.partition_path, &name);
        create_marker(&self.loc, instant, &op.partition_path, &name, MARKER_CREATE).await?;
        let out_path = self.loc.join(&rel);
        let ctx = SliceMerge { loc: &self.loc, schema: &self.schema, config: &self.config, timeline };
        let budget = Budget {
            share: Share::of_budget(self.settings.memory_budget, self.settings.parallelism),
            input_bytes: bytes_read,
            spill: self.spill_area(instant, &op.file_id)?,
        };
        let files = SliceFiles { base: base.as_ref(), logs: &logs, log_sizes: &log_sizes, base_rows: BaseRows::All };
        let mut merged = merge_slice(&ctx, &files, RowOrder::Key, Some(&budget)).await?;
        // The first rows show which columns a dictionary would suit.
        let first = merged.next_batch().await?;
        let mut writer = self.base_writer(&out_path, first.as_ref(), budget.share)?;
        let mut file_names = FileNameColumn::new(&name);
        let mut rows = 0u64;
        let mut next = first;
        while let Some(sorted) = next {
            let sorted = file_names.set(sorted)?;
            rows += sorted.num_rows() as u64;
            writer.write(&sorted).await?;
            next = merged.next_batch().await?;
        }
        let stat = self.finish_group(op, writer, rel, rows).await?;
        let tombstones = merged.tombstones(&ctx, &op.partition_path)?;
        let tombstone_bytes = self.write_tombstones(index, op, instant, &tombstones).await?;
        let done = GroupDone {
            bytes_read,
            key_first: merged.key_first(),
            spilled: merged.spilled(),
            tombstones: tombstones.len() as u64,
            tombstone_bytes,
        };
        Ok((done, stat))
    }

    /// Writes the tombstones a group keeps as a DELETE block in a log file
    /// of the new slice, named with the compaction instant, so it becomes
    /// visible with the new base file (`docs/design.md`, "Tombstones").
    /// Returns its size; nothing is written for no tombstones.
    async fn write_tombstones(
        &self,
        index: u64,
        op: &CompactionOperation,
        instant: &InstantTime,
        tombstones: &[DeleteRecord],
    ) -> Result<u64> {
        if tombstones.is_empty() {
            return Ok(0);
        }
        let header =
            [(HeaderKey::Schema, self.schema.log_json().to_string()), (HeaderKey::InstantTime, instant.to_string())];
        let mut out = Vec::with_capacity(tombstones.len() * 48 + 256);
        encode_delete_block(tombstones, &header, &mut out);
        let name = LogFileName {
            file_id: op.file_id.clone(),
            instant: instant.clone(),
            version: 1,
            write_token: Some(WriteToken::new(index, 0, 0)),
            suffix: String::new(),
        }
        .to_string();
        let rel = partition_file(&op.partition_path, &name);
        create_marker(&self.loc, instant, &op.partition_path, &name, MARKER_APPEND).await?;
        let path = self.loc.join(&rel);
        let size = out.len() as u64;
        self.loc.store.put(&path, out.into()).await.map_err(|e| tributary_timeline::Error::store("put", &path, e))?;
        Ok(size)
    }

    /// The Parquet writer of a new base file at `path`. Columns unique within
    /// a base file (record key, the key field of a single-field key,
    /// sequence number) get no
    /// dictionary, which would only be built to be given up; nor do columns
    /// whose values in `sample` (rows about to be written) look as distinct
    /// ([`dictionary_wasted`]).
    /// Row groups and the upload buffer are bounded by the group's `share`
    /// of the memory budget.
    fn base_writer(
        &self,
        path: &object_store::path::Path,
        sample: Option<&RecordBatch>,
        share: Share,
    ) -> Result<BaseFileWriter> {
        let row_group_rows = self.settings.row_group_rows.max(1024);
        let fields = self.schema.arrow_with_meta().fields();
        let mut plain = vec![RECORD_KEY, COMMIT_SEQNO];
        // A composite key's fields repeat (one date, many users): those keep
        // their dictionaries.
        let key = self.schema.record_key();
        if !key.is_composite() {
            plain.extend(key.columns().map(|k| META_FIELDS.len() + k));
        }
        if let Some(sample) = sample {
            let judged: Vec<usize> = (0..sample.num_columns())
                .filter(|c| !plain.contains(c) && dictionary_wasted(sample.column(*c)))
                .collect();
            plain.extend(judged);
        }
        let props = plain
            .iter()
            .filter_map(|&c| fields.get(c))
            .fold(WriterProperties::builder(), |b, f| {
                b.set_column_dictionary_enabled(parquet::schema::types::ColumnPath::from(f.name().as_str()), false)
            })
            .set_max_row_group_row_count(Some(row_group_rows))
            .set_max_row_group_bytes(Some(share.row_group_bytes()))
            .set_compression(parquet::basic::Compression::SNAPPY)
            .build();
        BaseFileWriter::new(
            self.loc.store.clone(),
            path.clone(),
            self.schema.arrow_with_meta().clone(),
            props,
            share.upload_buffer(),
            UPLOADS_AT_ONCE,
        )
    }

    /// Closes a group's new base file and describes it.
    async fn finish_group(
        &self,
        op: &CompactionOperation,
        writer: BaseFileWriter,
        rel: String,
        rows: u64,
    ) -> Result<WriteStat> {
        let size = writer.close().await?;
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

    /// The store and folder that hold the spill folders: what
    /// [`CompactorBuilder::with_spill`] was given, else the table's
    /// `.hoodie/.temp/`.
    fn spill_root(&self) -> (Arc<dyn ObjectStore>, object_store::path::Path) {
        (self.spill_store.clone(), self.spill_dir.clone())
    }

    /// Where file group `file_id` of compaction `instant` spills:
    /// `<instant>.<file_id>.spill/` in the spill root. Each group has its own
    /// top folder, so removing one group's emptied folder never races with
    /// another group creating its own.
    fn spill_area(&self, instant: &InstantTime, file_id: &str) -> Result<SpillArea> {
        let (store, root) = self.spill_root();
        Ok(SpillArea { store, dir: root.join(format!("{instant}.{file_id}.spill")) })
    }

    /// Deletes what an earlier attempt of compaction `instant` spilled.
    async fn clear_spills(&self, instant: &InstantTime) -> Result<()> {
        let (store, root) = self.spill_root();
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

/// The sizes of the files of `view`'s latest slices, by path.
fn sizes_in(view: &FileSystemView) -> Listed {
    view.latest_slices()
        .into_iter()
        .flat_map(|s| s.base.into_iter().map(|b| b.file).chain(s.logs.into_iter().map(|l| l.file)))
        .map(|f| (f.path, f.size))
        .collect()
}

/// How one file group was compacted.
struct GroupDone {
    /// Bytes of its base and log files.
    bytes_read: u64,
    /// Merged key first.
    key_first: bool,
    /// Merged through spill files.
    spilled: bool,
    /// Tombstones kept.
    tombstones: u64,
    /// Bytes of the log file holding them.
    tombstone_bytes: u64,
}

/// Whether a dictionary of `column`'s values would be wasted: nearly all
/// of them are distinct (at most one in ten of up to 1,024 sampled values
/// repeats), so the dictionary holds every value and the pages index it, a
/// larger file than plain encoding for more work; and past the writer's
/// dictionary page limit (1 MiB) it falls back to plain encoding anyway.
/// Fixed-width values and strings are compared as they are; other types
/// in Arrow's row format. Null values are not counted.
fn dictionary_wasted(column: &ArrayRef) -> bool {
    use arrow::array::AsArray;
    use arrow::datatypes::DataType;
    const SAMPLE: usize = 1024;
    let sample = column.slice(0, column.len().min(SAMPLE));
    let valid = |i: &usize| sample.is_valid(*i);
    let n = sample.len();
    if let Some(width) = sample.data_type().primitive_width() {
        let data = sample.to_data();
        let Some(values) = data.buffers().first() else { return false };
        let bytes = &values.as_slice()[data.offset() * width..];
        return nearly_all_distinct((0..n).filter(valid).map(|i| &bytes[i * width..(i + 1) * width]));
    }
    match sample.data_type() {
        DataType::Utf8 => {
            let a = sample.as_string::<i32>();
            nearly_all_distinct((0..n).filter(valid).map(|i| a.value(i).as_bytes()))
        }
        DataType::Binary => {
            let a = sample.as_binary::<i32>();
            nearly_all_distinct((0..n).filter(valid).map(|i| a.value(i)))
        }
        other => {
            let Ok(converter) = arrow::row::RowConverter::new(vec![arrow::row::SortField::new(other.clone())]) else {
                return false;
            };
            let Ok(rows) = converter.convert_columns(std::slice::from_ref(&sample)) else { return false };
            nearly_all_distinct((0..n).filter(valid).map(|i| rows.row(i).data()))
        }
    }
}

/// Whether at most one in ten of `values` repeats an earlier one, judged
/// from at least 256 values (fewer: no).
fn nearly_all_distinct<'a>(values: impl Iterator<Item = &'a [u8]>) -> bool {
    let mut distinct: foldhash::HashSet<&[u8]> = foldhash::HashSetExt::with_capacity(1024);
    let mut repeats = 0;
    for v in values {
        if !distinct.insert(v) {
            repeats += 1;
        }
    }
    let n = distinct.len() + repeats;
    n >= 256 && repeats * 10 <= n
}

/// The `_hoodie_file_name` column of a new base file's rows: one name in
/// every row, built once for the most rows a batch had and sliced for each.
struct FileNameColumn<'a> {
    name: &'a str,
    column: StringArray,
}

impl<'a> FileNameColumn<'a> {
    fn new(name: &'a str) -> Self {
        Self { name, column: StringArray::new_null(0) }
    }

    /// `batch` with its rows' `_hoodie_file_name` set to the name.
    fn set(&mut self, batch: RecordBatch) -> Result<RecordBatch> {
        let rows = batch.num_rows();
        if self.column.len() < rows {
            self.column = StringArray::from_iter_values(std::iter::repeat_n(self.name, rows));
        }
        let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
        columns[FILE_NAME] = Arc::new(self.column.slice(0, rows));
        RecordBatch::try_new(batch.schema(), columns)
            .map_err(|e| Error::Internal { what: format!("setting {} in its rows", self.name), reason: e.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    fn assert_send_sync<T: Send + Sync>() {}

    #[tokio::test]
    async fn the_builder_names_what_is_missing() {
        use tributary_timeline::{InProcessLock, ManualClock, TimeGenerator, TimeMode};
        let (loc, config) = crate::test_util::memory_table().await;
        let schema_json = r#"{"type":"record","name":"r","fields":[{"name":"id","type":"string"},{"name":"ts","type":"long"},{"name":"city","type":"string"}]}"#;
        let schema = tributary_format::TableSchema::new(schema_json, &["id"], Some("ts"), Some("city")).unwrap();
        let clock = Arc::new(ManualClock::new(0));
        let time =
            TimeGenerator::new(TimeMode::HybridLogical, Default::default(), clock, Arc::new(InProcessLock::new()));
        let builder = super::Compactor::builder(loc.clone(), config.clone());
        let err = builder.with_schema(schema.clone()).with_time(time.clone()).build().unwrap_err().to_string();
        assert!(err.contains("execution lock") && err.contains("warehouse/t"), "{err}");
        let err = super::Compactor::builder(loc.clone(), config.clone()).build().unwrap_err().to_string();
        assert!(err.contains("schema"), "{err}");
        let compactor = super::Compactor::builder(loc.clone(), config)
            .with_schema(schema)
            .with_time(time)
            .with_exec_lock(Arc::new(InProcessLock::new()))
            .build()
            .unwrap();
        // Without a spill store given, spill files go to the table's `.hoodie/.temp/`.
        assert_eq!(compactor.spill_root().1, tributary_timeline::temp_dir(&loc.root));
    }

    #[test]
    fn public_types_are_send_sync() {
        assert_send_sync::<super::Compactor>();
        assert_send_sync::<super::CompactorBuilder>();
        assert_send_sync::<super::CompactorSettings>();
        assert_send_sync::<super::CompactionSummary>();
    }

    use arrow::array::{ArrayRef, Float64Array, Int32Array, StringArray};

    use super::dictionary_wasted;

    #[test]
    fn dictionaries_are_left_out_where_nearly_every_value_is_distinct() {
        let unique: ArrayRef = Arc::new(Float64Array::from_iter_values((0..8192).map(|i| i as f64 * 1.5)));
        let few: ArrayRef = Arc::new(Int32Array::from_iter_values((0..8192).map(|i| i % 7)));
        let names: ArrayRef = Arc::new(StringArray::from_iter_values((0..8192).map(|i| format!("name-{i}"))));
        let repeating_names: ArrayRef =
            Arc::new(StringArray::from_iter_values((0..8192).map(|i| format!("name-{}", i % 900))));
        let mostly_null: ArrayRef = Arc::new(Int32Array::from_iter((0..8192).map(|i| (i % 10 == 0).then_some(i))));
        let dates: ArrayRef = Arc::new(arrow::array::Date32Array::from_iter_values(0..8192));
        assert!(dictionary_wasted(&unique));
        assert!(dictionary_wasted(&names));
        assert!(dictionary_wasted(&dates), "fixed-width types beyond the primitives' names are judged too");
        assert!(!dictionary_wasted(&few), "few distinct values suit a dictionary");
        assert!(!dictionary_wasted(&repeating_names), "one value in ten repeating is enough for a dictionary");
        assert!(!dictionary_wasted(&mostly_null), "103 values are too few to judge");
        assert!(!dictionary_wasted(&unique.slice(0, 100)), "too few rows to judge");
    }
}
