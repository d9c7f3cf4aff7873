//! The checks a history's table must pass: at every instant that completes
//! (on a copy of the store taken as its completed file appeared) and at the
//! end.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use object_store::memory::InMemory;
use object_store::path::Path;
use tributary::timeline::{
    Action, BaseFileName, CHANGE_DATA_SUFFIX, CHANGE_LOG_BEGIN_KEY, CHANGE_LOG_WRITER, CHANGE_LOGGED_OPERATION,
    InstantTime, LogFileName, ManualClock, State, TableLocation, Timeline, TimelineFolder,
};
use tributary::{LockKind, LogSpread, Query, ReadOptions, Table, TableSettings};
use tributary_format::{CommitMetadata, CompactionPlan};
use tributary_writer::CHECKPOINT_PREFIX;

use crate::workload::{BatchId, Rows, Workload, diff, merge, rows_of};

/// What the writers were told, as the history's actors record it.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// Batches a writer tried to commit.
    pub attempted: BTreeSet<BatchId>,
    /// Batches whose commit returned success.
    pub acked: BTreeSet<BatchId>,
}

/// A completed delta commit, as the checks need it.
#[derive(Debug, Clone)]
struct DeltaCommit {
    batch: BatchId,
    /// The data files its metadata names, relative to the table.
    files: Vec<String>,
}

/// Checks the table of one history; keeps what it parsed of completed
/// instants (they never change) across checks.
#[derive(Debug)]
pub struct Checker {
    workload: Arc<Workload>,
    root: Path,
    commits: HashMap<InstantTime, DeltaCommit>,
    /// The logs each compaction plan names.
    plans: HashMap<InstantTime, Vec<String>>,
    /// Delta commits that changed the schema only.
    schema_changes: BTreeSet<InstantTime>,
    /// Change-log commits, with where each one's window began.
    change_logs: BTreeMap<InstantTime, InstantTime>,
    /// Checks passed.
    pub checks: usize,
}

type Check<T> = Result<T, String>;

fn err(what: &str) -> impl Fn(tributary::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

impl Checker {
    /// A checker of the table at `root` written with `workload`.
    pub fn new(workload: Arc<Workload>, root: Path) -> Self {
        Self {
            workload,
            root,
            commits: HashMap::new(),
            plans: HashMap::new(),
            schema_changes: BTreeSet::new(),
            change_logs: BTreeMap::new(),
            checks: 0,
        }
    }

    /// The table in `store`, opened as a reader: no lock is taken.
    async fn open(&self, store: Arc<InMemory>) -> Check<Table> {
        let settings = TableSettings { lock: LockKind::InProcess, ..TableSettings::default() };
        Table::builder(TableLocation::new(store, self.root.clone()))
            .with_settings(settings)
            .with_clock(Arc::new(ManualClock::new(0)))
            .open()
            .await
            .map_err(err("open"))
    }

    /// Checks the table in `store`, a copy taken as instant `what` became
    /// visible, against `ledger` as it was then. At the `end`, every batch
    /// must be visible and every query mode equal the model.
    pub async fn check(&mut self, store: InMemory, ledger: &Ledger, what: &str, end: bool) -> Check<()> {
        self.checks += 1;
        // The checks only read: the store is as it was for the message.
        let store = Arc::new(store);
        match self.check_inner(store.clone(), ledger, end).await {
            Ok(()) => Ok(()),
            Err(e) => Err(format!("at {what}: {e}\n{}", self.describe(store, ledger).await)),
        }
    }

    /// The table's timeline, data files and the ledger, for a failure's
    /// message.
    async fn describe(&self, store: Arc<InMemory>, ledger: &Ledger) -> String {
        use futures::TryStreamExt;
        use object_store::ObjectStore;
        let mut out = format!("acknowledged {:?}\nattempted {:?}\n", ledger.acked, ledger.attempted);
        let listed: Vec<_> = store.list(Some(&self.root)).try_collect().await.unwrap_or_default();
        for m in listed {
            out.push_str(&format!("  {} ({} bytes)\n", m.location, m.size));
        }
        if let Ok(table) = self.open(store).await
            && let Ok(timeline) = table.timeline().await
        {
            for i in timeline.instants() {
                let batch = self.commits.get(&i.requested).map(|c| c.batch);
                out.push_str(&format!(
                    "  instant {} {:?} {:?} completed {:?} batch {batch:?}\n",
                    i.requested, i.action, i.state, i.completed
                ));
            }
        }
        out
    }

    async fn check_inner(&mut self, store: Arc<InMemory>, ledger: &Ledger, end: bool) -> Check<()> {
        let table = self.open(store.clone()).await?;
        let timeline = table.timeline().await.map_err(err("timeline"))?;
        if let Some(w) = timeline.warnings().first() {
            return Err(format!("the timeline is not well-formed: {w}"));
        }
        // Which batches the completed delta commits hold: each at most once.
        let reader = TimelineFolder::new(table.location(), table.config());
        let mut visible: BTreeMap<BatchId, InstantTime> = BTreeMap::new();
        let mut order: Vec<(InstantTime, InstantTime)> = Vec::new();
        for i in timeline.completed() {
            let completed = i.completed.clone().ok_or("a completed instant without a completion time")?;
            order.push((completed, i.requested.clone()));
            if i.action != Action::DeltaCommit {
                continue;
            }
            if self.schema_changes.contains(&i.requested) || self.change_logs.contains_key(&i.requested) {
                continue;
            }
            if !self.commits.contains_key(&i.requested) {
                let bytes = reader.read(i, State::Completed).await.map_err(|e| format!("delta commit: {e}"))?;
                let meta = CommitMetadata::from_avro_container_shared(&bytes, i.requested.as_str())
                    .map_err(|e| format!("delta commit metadata: {e}"))?;
                // A group-C writer's schema change holds no batch.
                if meta.operation_type == "ALTER_SCHEMA" {
                    if meta.write_stats().next().is_some() {
                        return Err(format!("schema change {} wrote files", i.requested));
                    }
                    self.schema_changes.insert(i.requested.clone());
                    continue;
                }
                if let Some(begin) = change_log_window(&meta, &i.requested)? {
                    self.change_logs.insert(i.requested.clone(), begin);
                    continue;
                }
                let change_logged = table.config().change_log().map_err(|e| format!("config: {e}"))?;
                if change_logged && meta.operation_type != CHANGE_LOGGED_OPERATION {
                    return Err(format!(
                        "delta commit {} of a table with a change log records {}, which Spark's CDC query infers from",
                        i.requested, meta.operation_type
                    ));
                }
                let batch = self.batch_of(&meta).map_err(|e| format!("delta commit {}: {e}", i.requested))?;
                let files = meta.write_stats().map(|s| s.path.clone()).collect();
                self.commits.insert(i.requested.clone(), DeltaCommit { batch, files });
            }
            let c = &self.commits[&i.requested];
            if let Some(other) = visible.insert(c.batch, i.requested.clone()) {
                return Err(format!("batch {:?} is visible twice: delta commits {other} and {}", c.batch, i.requested));
            }
        }
        // The change log's windows meet: each change-log commit's window
        // begins where the one before it ended. Every completion is
        // checked, so every change-log commit was seen when it completed,
        // archived ones included (archiving need not take the oldest first).
        let mut logged: Vec<(&InstantTime, &InstantTime)> =
            self.change_logs.iter().filter(|(t, _)| timeline.is_completed(t)).collect();
        logged.sort();
        for pair in logged.windows(2) {
            let ((before, _), (at, begin)) = (pair[0], pair[1]);
            if begin != before {
                return Err(format!(
                    "change-log commit {at} begins its window at {begin}, not where change-log commit {before} ended"
                ));
            }
        }
        // Backpressure: no file group holds more uncompacted logs than the
        // table's bound, at any completion.
        if let Some(bound) = table.config().max_logs_per_file_group {
            let (timeline, view) = table.file_system_view().await.map_err(err("file-system view"))?;
            let pending = timeline.pending_compactions().map(|i| i.requested.clone()).collect();
            let spread = LogSpread::of(&view, &pending);
            if spread.max > bound {
                return Err(format!("a file group holds {} uncompacted logs, above the bound {bound}", spread.max));
            }
        }
        // A compaction plan names only logs of delta commits that completed
        // before its instant: later ones belong to the slice it opens.
        for i in timeline.instants().filter(|i| i.action == Action::Compaction) {
            if !self.plans.contains_key(&i.requested) {
                let bytes = reader.read(i, State::Requested).await.map_err(|e| format!("compaction plan: {e}"))?;
                let plan = CompactionPlan::from_avro_container(&bytes, i.requested.as_str())
                    .map_err(|e| format!("compaction plan {}: {e}", i.requested))?;
                let logs = plan.operations.iter().flat_map(|op| op.delta_file_paths.iter().cloned()).collect();
                self.plans.insert(i.requested.clone(), logs);
            }
            for log in &self.plans[&i.requested] {
                let name = LogFileName::parse(log).map_err(|e| format!("compaction plan {}: {e}", i.requested))?;
                match timeline.completion_time(&name.instant) {
                    Some(c) if *c < i.requested => {}
                    c => {
                        return Err(format!(
                            "compaction plan {} takes log {log}, whose delta commit completed at {c:?}, not before it",
                            i.requested
                        ));
                    }
                }
            }
        }
        // Per writer, a prefix of its batches: a gap is a lost commit.
        for (w, input) in self.workload.writers.iter().enumerate() {
            let mine: Vec<(usize, &InstantTime)> =
                visible.range((w, 0)..(w + 1, 0)).map(|((_, b), t)| (*b, t)).collect();
            if let Some((i, (b, t))) = mine.iter().enumerate().find(|(i, (b, _))| i != b) {
                return Err(format!("writer {} has batch {b} visible ({t}) but not batch {i}: a gap", input.id));
            }
            if end && mine.len() != input.batches.len() {
                return Err(format!(
                    "writer {} finished with {} of {} batches visible",
                    input.id,
                    mine.len(),
                    input.batches.len()
                ));
            }
        }
        if let Some(b) = ledger.acked.iter().find(|b| !visible.contains_key(b)) {
            return Err(format!("batch {b:?} was acknowledged and is not visible"));
        }
        if let Some((b, t)) = visible.iter().find(|(b, _)| !ledger.attempted.contains(b)) {
            return Err(format!("batch {b:?} is visible in {t} but was never sent"));
        }
        let want = self.workload.model(visible.keys().copied());
        let read = |query: Query| ReadOptions { query, ..ReadOptions::default() };
        self.compare(&table, &timeline, read(Query::Snapshot), &want, "snapshot").await?;
        if !end {
            return Ok(());
        }
        let files: BTreeSet<String> = {
            use futures::TryStreamExt;
            use object_store::ObjectStore;
            let listed: Vec<_> = store.list(Some(&self.root)).try_collect().await.map_err(|e| e.to_string())?;
            let prefix = format!("{}/", self.root);
            listed.iter().filter_map(|m| m.location.as_ref().strip_prefix(&prefix).map(str::to_string)).collect()
        };
        // After the final clean, no data file of a withdrawn instant is
        // left: Hudi's readers would take one older than the active
        // timeline for archived, hence committed.
        for f in files.iter().filter(|f| !f.starts_with(".hoodie/")) {
            let name = f.rsplit('/').next().unwrap_or(f);
            let instant = match (LogFileName::parse(name), BaseFileName::parse(name)) {
                (Ok(log), _) => log.instant,
                (_, Ok(base)) => base.instant,
                _ => continue,
            };
            if timeline.get(&instant).is_none() {
                return Err(format!("orphan {f} left after the final clean: instant {instant} is on no timeline"));
            }
        }
        self.compare(&table, &timeline, read(Query::ReadOptimized), &want, "read-optimized after the final compaction")
            .await?;
        // Incremental: the whole timeline, then one window per delta commit
        // whose files are all still there and that holds no archived commit
        // (else Hudi's full-scan fallback applies, where later commits
        // compete).
        order.sort();
        let Some((last, _)) = order.last().cloned() else { return Ok(()) };
        let zero = InstantTime::from_millis(0).map_err(|e| e.to_string())?;
        self.compare(
            &table,
            &timeline,
            read(Query::Incremental { begin: zero.clone(), end: last }),
            &want,
            "incremental, all",
        )
        .await?;
        let mut begin = zero;
        for (completed, requested) in order {
            let archived = timeline.completed().any(|i| {
                i.action.writes_data()
                    && timeline.is_archived(&i.requested)
                    && timeline.completion_time(&i.requested).is_some_and(|t| *t > begin && *t <= completed)
            });
            if let Some(c) = self.commits.get(&requested)
                && !archived
                && c.files.iter().all(|f| files.contains(f))
            {
                let role = self.workload.writers[c.batch.0].role;
                let want = merge([(role, self.workload.batch(c.batch))]);
                let window = Query::Incremental { begin: begin.clone(), end: completed.clone() };
                self.compare(&table, &timeline, read(window), &want, &format!("incremental ({begin}, {completed}]"))
                    .await?;
            }
            begin = completed;
        }
        Ok(())
    }
}

/// For a change-log commit (one carrying the change-log writer's
/// checkpoint), where its window began; `None` for any other commit. Its
/// checkpoint must be its own instant, and it must carry change data only.
fn change_log_window(meta: &CommitMetadata, requested: &InstantTime) -> Check<Option<InstantTime>> {
    let Some(end) = meta.extra_metadata.get(&format!("{CHECKPOINT_PREFIX}{CHANGE_LOG_WRITER}")) else {
        return Ok(None);
    };
    let what = format!("change-log commit {requested}");
    if end != requested.as_str() {
        return Err(format!("{what} ends its window at {end}, not at its instant"));
    }
    let begin = meta.extra_metadata.get(CHANGE_LOG_BEGIN_KEY).ok_or(format!("{what} records no begin"))?;
    let begin = InstantTime::parse(begin).map_err(|e| format!("{what}: {e}"))?;
    if &begin >= requested {
        return Err(format!("{what} begins its window at {begin}, after its end"));
    }
    for stat in meta.write_stats() {
        let listed = stat.cdc_stats.as_ref().is_some_and(|c| c.contains_key(&stat.path));
        if !stat.path.ends_with(CHANGE_DATA_SUFFIX) || !listed || meta.operation_type != "UPSERT" {
            return Err(format!(
                "{what} writes {} ({}), not change data in its cdcStats",
                stat.path, meta.operation_type
            ));
        }
    }
    Ok(Some(begin))
}

impl Checker {
    /// The batch a delta commit's checkpoint names.
    fn batch_of(&self, meta: &CommitMetadata) -> Check<BatchId> {
        // A sourced writer's commit records its batch under its writer id
        // and a second source id; the first names the writer.
        let ids = meta.extra_metadata.iter().filter_map(|(k, v)| Some((k.strip_prefix(CHECKPOINT_PREFIX)?, v)));
        let ids: Vec<(&str, &String)> = ids.collect();
        let (w, value) = ids
            .iter()
            .find_map(|(id, v)| Some((self.workload.writers.iter().position(|i| i.id == *id)?, *v)))
            .ok_or(format!("no checkpoint of a writer in its metadata: {ids:?}"))?;
        let id = &self.workload.writers[w].id;
        if let Some((other, v)) = ids.iter().find(|(other, v)| !other.starts_with(id.as_str()) || *v != value) {
            return Err(format!("writer {id}'s commit records `{v}` under `{other}`, not its batch {value}"));
        }
        let b: usize = value.parse().map_err(|_| format!("checkpoint `{value}` is not a batch number"))?;
        if b >= self.workload.writers[w].batches.len() {
            return Err(format!("writer {id} has no batch {b}"));
        }
        Ok((w, b))
    }

    async fn compare(
        &self,
        table: &Table,
        timeline: &Timeline,
        options: ReadOptions,
        want: &Rows,
        what: &str,
    ) -> Check<()> {
        let batch = table.read_at(timeline, &options).await.map_err(|e| format!("{what} read: {e}"))?;
        let got = rows_of(&batch).map_err(|e| format!("{what} read: {e}"))?;
        if &got != want {
            return Err(format!("{what} read differs from the model: {}", diff(&got, want)));
        }
        Ok(())
    }
}
