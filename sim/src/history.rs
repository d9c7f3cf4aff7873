//! One history: a table, its writers, one compactor and one cleaner, each a
//! simulated process that may crash and restart, driven by one seed.
//!
//! - **Writers** send their batches in order, one commit each, with the
//!   batch number as the exactly-once checkpoint under their writer id. A
//!   (re)started writer registers its id, asks the table for its
//!   checkpoint and resumes after it; a failed commit is followed by the
//!   same question, so a commit whose answer was lost is not sent twice.
//!   A third of them, drawn apart, commit as an ingest job does: each
//!   incarnation takes two source ids over (as a job takes over the Kafka
//!   partitions it is assigned) and every commit records the batch under
//!   both ([`tributary_writer::Commit::commit_with_sources`]).
//! - **The compactor** runs [`Compactor::run_once`](tributary_compaction::Compactor::run_once)
//!   now and then: it rolls back writes whose heartbeat expired, finishes
//!   pending plans, plans at its own instant and executes.
//! - **The cleaner** runs [`Table::clean`]: the same rollback, then cleaning;
//!   and every other run [`Table::archive`], with bounds as tight as they
//!   go (one commit kept at the least), so the history's instants and files
//!   change under every other process.
//! - **Or one service process** in place of those two, in some histories:
//!   [`tributary::serve`] with schedules drawn from the seed, doing all of
//!   it (rollback, compaction, cleaning and archiving) in one loop.
//! - **A change-feed consumer**, in some histories: it follows
//!   [`Table::changes`] window after window into a replica built from the
//!   feed alone (`feed.rs`), starting again from a snapshot when the
//!   cleaner overtook it; at the end the replica must equal the table.
//! - **The crash controller** crashes a random process at random times and
//!   restarts it after a while. With [`Scale::zombies`], it freezes some
//!   instead of crashing them: a new incarnation takes the frozen one's
//!   place, and the old one wakes later and goes on, to be fenced or
//!   withdrawn; it wakes 2 to 12 s later, past its heartbeat expiry.
//!
//! The history draws its shape from the seed: 1 to 4 writers of whole rows
//! or of one sequence group, the time mode, the lock (one shared by the
//! processes as a host's OS lock is, or the lease lock in the store), clock
//! offsets and drifts within the skew bound, writer tasks, and the
//! [`FaultPlan`]; and, in 30 % of the histories, a tight bound of 4 to 8
//! uncompacted logs per file group, so that writers wait at it for
//! compaction, and every completion is checked against it. When every writer is done, the world heals: a last process
//! waits out the heartbeats and leases of the dead, cleans, compacts until
//! nothing is left to compact, and archives, and the final checks run.

use std::collections::{BTreeMap, VecDeque};
use std::ops::{Range, RangeInclusive};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use object_store::memory::InMemory;
use object_store::path::Path;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinHandle;
use tributary::timeline::{ErrorKind, InProcessLock, LockProvider, SequenceGroup, TableLocation, TimeMode};
use tributary::{
    Alteration, ArchiveSettings, CleanRetention, CreateOptions, HistorySettings, InstantTime, LockKind, ServiceEvent,
    ServiceSchedule, Table, TableSettings, TimeSettings,
};
use tributary_compaction::CompactorSettings;
use tributary_writer::{SourceLease, WriteClient, WriteSettings};

use crate::check::{Checker, Ledger};
use crate::feed::Feed;
use crate::recovery::Recovery;
use crate::workload::{BatchId, Role, Rows, Workload};
use crate::world::{FaultKind, FaultPlan, LONGEST_PAUSE, ProcessStore, SimClock, World};

/// The size of histories.
#[derive(Debug, Clone)]
pub struct Scale {
    /// Writers per history.
    pub writers: RangeInclusive<usize>,
    /// Events per history.
    pub records: Range<usize>,
    /// Keys of each kind.
    pub keys: u32,
    /// Whether processes crash.
    pub crashes: bool,
    /// How long stalls last ([`FaultPlan::draw`]).
    pub stalls: Stalls,
    /// Whether a third of the crashes are freezes instead: zombies. Drawn
    /// apart from the history's own draws, so without zombies a seed runs
    /// the history it ran before they existed.
    pub zombies: bool,
    /// The lease of the lease locks (renewed every quarter of it). A lease
    /// holder checks that half its lease remains right before each step
    /// under the lock, so the lease lock is sound while no write it issues
    /// lands more than half a lease later; the default, 30 s, keeps every
    /// stall and freeze (at most 12 s) within that bound. Shorter leases
    /// let a stalled holder's write land after a successor took over.
    pub lease: Duration,
}

/// How long the operations a fault plan stalls are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Stalls {
    /// 0.2 to 4 s: within the writers' heartbeat expiry.
    Short,
    /// 2 to 12 s, past the writers' heartbeat expiry: recovery rolls back
    /// writers that are alive.
    Long,
    /// Short or long by a coin drawn from the seed apart from the history's
    /// own draws, so a seed's history is the one it has in that mode.
    #[default]
    Mixed,
}

impl Stalls {
    /// Whether the history of `seed` stalls long.
    pub fn long_for(self, seed: u64) -> bool {
        match self {
            Stalls::Short => false,
            Stalls::Long => true,
            Stalls::Mixed => StdRng::seed_from_u64(seed ^ 0x5354_414c_4c53).random_bool(0.5),
        }
    }

    /// The simulator's command-line flag that selects this mode.
    pub fn flag(self) -> &'static str {
        match self {
            Stalls::Short => "--stalls short",
            Stalls::Long => "--stalls long",
            Stalls::Mixed => "--stalls mixed",
        }
    }
}

impl Default for Scale {
    /// 1 to 4 writers, 100 to 300 events over 12 keys of each kind,
    /// crashes and zombies, stalls short or long.
    fn default() -> Self {
        Self {
            writers: 1..=4,
            records: 100..300,
            keys: 12,
            crashes: true,
            stalls: Stalls::Mixed,
            zombies: true,
            lease: Duration::from_secs(30),
        }
    }
}

/// What a history did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Faults injected, per kind.
    pub faults: BTreeMap<FaultKind, u64>,
    /// Checks passed (one per completed instant, and the final one).
    pub checks: usize,
    /// Instants in the table's LSM history at the end.
    pub archived: usize,
    /// The change-feed consumer's windows, changes and starts from a
    /// snapshot (zeros in a history without one).
    pub feed: (usize, usize, usize),
    /// The change-log commits whose files were compared with the change
    /// feed at the end (0 in a history without a change log).
    pub change_logs: usize,
    /// Store operations that took effect.
    pub ops: u64,
    /// The fingerprint of those operations: a replay must match it.
    pub trace: u64,
    /// Virtual time the history took.
    pub virtual_time: Duration,
    /// The store at the end (the table is under [`TABLE_ROOT`]).
    pub store: Option<Arc<InMemory>>,
    /// The rows the table holds at the end, by the model.
    pub model: Rows,
}

/// The table's folder in the store.
pub const TABLE_ROOT: &str = "sim/trips";
const ROOT: &str = TABLE_ROOT;
/// A history that has not finished after this much virtual time is stuck.
const DEADLINE: Duration = Duration::from_secs(4 * 3600);
/// The table's heartbeat expiry, and the writers' heartbeat interval.
const HEARTBEAT_EXPIRY: Duration = Duration::from_secs(5);
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);
/// The largest clock offset of a process either way, and drift (ppm): any
/// two clocks stay well within the default 200 ms skew bound.
const MAX_OFFSET_MS: i64 = 80;
const MAX_DRIFT_PPM: i64 = 200;

/// Runs the history of `seed` to its end; `Err` names the first check or
/// actor that failed.
pub fn run(seed: u64, scale: &Scale) -> Result<Outcome, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    // Actors run as local tasks: some of the library's futures are not
    // `Send` for every lifetime, and one thread is the point anyway.
    let local = tokio::task::LocalSet::new();
    runtime.block_on(local.run_until(async {
        let history = History::new(seed, scale);
        let result = history.clone().play().await;
        history.stop_all();
        result
    }))
}

/// A simulated process's part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Writer(usize),
    Compactor,
    Cleaner,
    /// `serve`: compaction, cleaning and archiving in one process.
    Service,
    /// Follows the change feed.
    Consumer,
    /// Writes the change log (on a table that keeps one).
    ChangeLogger,
}

/// A process slot: its part, its current incarnation's view and task.
struct Slot {
    part: Part,
    clock_offset_ms: i64,
    drift_ppm: i64,
    incarnation: u32,
    store: Option<ProcessStore>,
    task: Option<JoinHandle<()>>,
}

/// A snapshot taken as an instant completed, waiting to be checked.
struct Pending {
    store: InMemory,
    ledger: Ledger,
    what: String,
}

struct History {
    world: Arc<World>,
    workload: Arc<Workload>,
    settings: TableSettings,
    /// The shared locks when the history uses OS-like locks.
    locks: Option<(Arc<dyn LockProvider>, Arc<dyn LockProvider>)>,
    writer_tasks: Vec<usize>,
    /// Each writer's [`WriteSettings::begin_next`].
    begin_next: Vec<Option<Duration>>,
    start: tokio::time::Instant,
    slots: Mutex<Vec<Slot>>,
    ledger: Mutex<Ledger>,
    done: Mutex<Vec<bool>>,
    failure: Mutex<Option<String>>,
    pending: Arc<Mutex<VecDeque<Pending>>>,
    crashes: bool,
    /// Draws whether a crash is a freeze, and for how long; `None`
    /// without zombies.
    zombie_rng: Option<Mutex<StdRng>>,
    /// Frozen processes replaced by a new incarnation, stopped at the end.
    zombies: Mutex<Vec<(ProcessStore, JoinHandle<()>)>>,
    /// Each slot's clock: its offset (ms) and drift (ppm).
    clocks: Vec<(i64, i64)>,
    /// The heartbeats processes read, and their rollbacks.
    recovery: Mutex<Recovery>,
    /// The table's bound on uncompacted logs per file group, when the
    /// history draws a tight one (writers then wait for compaction).
    bound: Option<usize>,
    /// The change-feed consumer's position and replica.
    feed: Mutex<Feed>,
    /// Per writer: whether it commits as an ingest job does, its position
    /// recorded under source ids it takes over ([`SOURCE_LANES`]) rather
    /// than under its registered writer id.
    sourced: Vec<bool>,
    /// Whether the table keeps a change log, which a change-log writer
    /// process (and `serve`, if one runs) writes.
    change_log: bool,
    /// Per actor, the last error it met and passed over, with when: what a
    /// stuck history reports.
    passed: Mutex<BTreeMap<String, (Duration, String)>>,
}

/// The source ids a sourced writer's commits record, as an ingest job's
/// commits record the partitions they hold: its writer id and one more.
/// Each (re)started incarnation takes both over, one after the other, and
/// every commit records its batch under both, so a zombie's commit is
/// fenced by whichever takeover came first.
const SOURCE_LANES: [&str; 2] = ["", ".lane1"];

/// Archiving bounds as tight as they go: archive above two commits, down
/// to one, with the history merging every two files of a level.
const TIGHT_ARCHIVING: ArchiveSettings = ArchiveSettings {
    keep_min_commits: 1,
    keep_max_commits: 2,
    cleaner_commits_retained: 0,
    compaction_delta_commits: 1,
    history: HistorySettings { compaction_batch_size: 2, compaction_max_file_bytes: 1 << 30, retained_manifests: 3 },
};

/// Epoch milliseconds when every history starts (2026-01-01).
const EPOCH_MS: i64 = 1_767_225_600_000;

/// Whether `path` is a completed instant file of the active timeline
/// (`<requested>_<completed>.<action>`).
fn is_completion(path: &str) -> bool {
    let Some((dir, name)) = path.rsplit_once('/') else { return false };
    dir.ends_with(".hoodie/timeline")
        && name.split('.').next().is_some_and(|stem| stem.contains('_'))
        && !name.ends_with(".requested")
        && !name.ends_with(".inflight")
}

impl History {
    fn new(seed: u64, scale: &Scale) -> Arc<Self> {
        let mut rng = StdRng::seed_from_u64(seed);
        let writers = rng.random_range(scale.writers.clone());
        let records = rng.random_range(scale.records.clone());
        let workload = Arc::new(Workload::draw(&mut rng, writers, records, scale.keys));
        let mode = if rng.random_bool(0.5) { TimeMode::WaitForSkew } else { TimeMode::HybridLogical };
        let in_process = rng.random_bool(0.5);
        let settings = TableSettings {
            time: TimeSettings { mode: Some(mode), ..TimeSettings::default() },
            lock: if in_process { LockKind::InProcess } else { LockKind::Lease },
            lock_lease: scale.lease,
            compaction_lease: scale.lease,
            lock_renew_interval: scale.lease / 4,
            heartbeat_expiry: HEARTBEAT_EXPIRY,
            ..TableSettings::default()
        };
        let locks = in_process.then(|| {
            let (a, b): (Arc<dyn LockProvider>, Arc<dyn LockProvider>) =
                (Arc::new(InProcessLock::new()), Arc::new(InProcessLock::new()));
            (a, b)
        });
        let writer_tasks = (0..writers).map(|_| rng.random_range(1..=3)).collect();
        // Drawn apart from the rest, so that a seed's other choices stay
        // what they were before these were drawn.
        let mut services = StdRng::seed_from_u64(seed ^ 0x0053_4552_5649_4345);
        let bound = services.random_bool(0.3).then(|| services.random_range(4..=8));
        let mut parts: Vec<Part> = (0..writers).map(Part::Writer).collect();
        if services.random_bool(0.4) {
            parts.push(Part::Service);
        } else {
            parts.extend([Part::Compactor, Part::Cleaner]);
        }
        // Its clock is drawn after the others', so theirs stay as they were.
        let consumer = services.random_bool(0.3);
        // Drawn after everything else, for the same reason.
        let change_log = services.random_bool(0.3);
        let slots: Vec<Slot> = parts
            .into_iter()
            .map(|part| Slot {
                part,
                clock_offset_ms: rng.random_range(-MAX_OFFSET_MS..=MAX_OFFSET_MS),
                drift_ppm: rng.random_range(-MAX_DRIFT_PPM..=MAX_DRIFT_PPM),
                incarnation: 0,
                store: None,
                task: None,
            })
            .collect();
        let mut slots = slots;
        if consumer {
            slots.push(Slot {
                part: Part::Consumer,
                clock_offset_ms: services.random_range(-MAX_OFFSET_MS..=MAX_OFFSET_MS),
                drift_ppm: services.random_range(-MAX_DRIFT_PPM..=MAX_DRIFT_PPM),
                incarnation: 0,
                store: None,
                task: None,
            });
        }
        // A change-log writer of its own, beside `serve`'s when there is
        // one: the two fence each other.
        let change_log = change_log.then(|| {
            (
                services.random_range(-MAX_OFFSET_MS..=MAX_OFFSET_MS),
                services.random_range(-MAX_DRIFT_PPM..=MAX_DRIFT_PPM),
            )
        });
        if let Some((clock_offset_ms, drift_ppm)) = change_log {
            slots.push(Slot {
                part: Part::ChangeLogger,
                clock_offset_ms,
                drift_ppm,
                incarnation: 0,
                store: None,
                task: None,
            });
        }
        let clocks = slots.iter().map(|s| (s.clock_offset_ms, s.drift_ppm)).collect();
        let mut sources = StdRng::seed_from_u64(seed ^ 0x534f_5552_4345);
        let sourced = (0..writers).map(|_| sources.random_bool(0.3)).collect();
        // Writers that begin each next commit in their completion hold,
        // kept unused for 0.1 to 2 s; drawn apart, as above.
        let mut early = StdRng::seed_from_u64(seed ^ 0x4e45_5854);
        let begin_next =
            (0..writers).map(|_| early.random_bool(0.5).then(|| Duration::from_millis(early.random_range(100..2000))));
        let begin_next = begin_next.collect();
        let plan = FaultPlan::draw(&mut rng, scale.stalls.long_for(seed));
        let world = World::new(StdRng::seed_from_u64(rng.random()), plan);
        Arc::new(Self {
            world,
            workload,
            settings,
            locks,
            writer_tasks,
            begin_next,
            start: tokio::time::Instant::now(),
            slots: Mutex::new(slots),
            ledger: Mutex::new(Ledger::default()),
            done: Mutex::new(vec![false; writers]),
            failure: Mutex::new(None),
            passed: Mutex::new(BTreeMap::new()),
            pending: Arc::new(Mutex::new(VecDeque::new())),
            crashes: scale.crashes,
            zombie_rng: scale.zombies.then(|| Mutex::new(StdRng::seed_from_u64(seed ^ 0x5a4f_4d42_4945))),
            zombies: Mutex::new(Vec::new()),
            clocks,
            recovery: Mutex::new(Recovery::new(HEARTBEAT_EXPIRY)),
            bound,
            feed: Mutex::new(Feed::default()),
            sourced,
            change_log: change_log.is_some(),
        })
    }

    /// The clock of process `pid` (of slot `pid / 1000`; the final process
    /// keeps true time).
    fn clock_of(&self, pid: u32) -> SimClock {
        let (offset, drift) = self.clocks.get(pid as usize / 1_000).copied().unwrap_or((0, 0));
        SimClock::new(EPOCH_MS, self.start, offset, drift)
    }

    fn fail(&self, message: String) {
        let mut f = self.failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f.get_or_insert(message);
    }

    fn failed(&self) -> Option<String> {
        self.failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The writers not done, and the last error each actor passed over.
    fn last_passed(&self) -> String {
        let done = self.done.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let waiting: Vec<&str> =
            self.workload.writers.iter().zip(done).filter(|(_, d)| !d).map(|(w, _)| w.id.as_str()).collect();
        let passed = self.passed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let errors: Vec<String> = passed.iter().map(|(who, (at, e))| format!("{who} at {at:?}: {e}")).collect();
        format!("not done: {}; last errors passed over: {}", waiting.join(", "), errors.join("; "))
    }

    fn all_done(&self) -> bool {
        self.done.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().all(|d| *d)
    }

    /// A uniformly drawn duration in `range` milliseconds.
    fn pause(&self, range: Range<u64>) -> Duration {
        Duration::from_millis(self.world.with_rng(|r| r.random_range(range)))
    }

    /// Opens the table as process `store` with the slot's clock.
    async fn open(&self, store: &ProcessStore, clock: Arc<SimClock>, pid: u32) -> tributary::Result<Table> {
        let loc = TableLocation::new(Arc::new(store.clone()), Path::from(ROOT));
        let settings = TableSettings { lock_owner: Some(format!("p{pid}")), ..self.settings.clone() };
        let mut builder = Table::builder(loc)
            .with_settings(settings)
            .with_clock(clock)
            .with_spill_store(Arc::new(InMemory::new()), Path::from("spill"));
        if let Some((lock, compaction)) = &self.locks {
            builder = builder.with_lock(lock.clone()).with_compaction_lock(compaction.clone());
        }
        builder.open().await
    }

    /// An error an actor may meet (the store or lock is unavailable, or
    /// another actor got there first) passes; any other fails the history.
    fn expect(&self, who: &str, e: impl Into<tributary::Error>) {
        let e = e.into();
        match e.kind() {
            ErrorKind::Unavailable | ErrorKind::Conflict => {
                let mut passed = self.passed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                passed.insert(who.to_string(), (self.start.elapsed(), e.to_string()));
            }
            kind => self.fail(format!("{who}: {kind:?} error: {e}")),
        }
    }

    async fn create(&self) -> Result<(), String> {
        let loc = TableLocation::new(self.world.store(), Path::from(ROOT));
        let mut options = CreateOptions::new(crate::workload::SCHEMA, "id", "ts");
        options.partition_field = Some("region".into());
        options.buckets = 2;
        if let Some(bound) = self.bound {
            options.max_logs_per_file_group = Some(bound);
        }
        options.change_log = self.change_log;
        options.sequence_groups = ["ts_a=a1", "ts_b=b1"]
            .iter()
            .map(|g| SequenceGroup::parse(g).ok_or(format!("sequence group `{g}`")))
            .collect::<Result<_, _>>()?;
        Table::builder(loc)
            .with_settings(TableSettings { lock: LockKind::InProcess, ..TableSettings::default() })
            .with_clock(Arc::new(SimClock::new(EPOCH_MS, self.start, 0, 0)))
            .create(options)
            .await
            .map(|_| ())
            .map_err(|e| format!("create: {e}"))
    }

    /// Starts (or restarts) the process in slot `i`.
    fn spawn(self: &Arc<Self>, i: usize) {
        let mut slots = self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let slot = &mut slots[i];
        slot.incarnation += 1;
        let pid = i as u32 * 1_000 + slot.incarnation;
        let store = self.world.process(pid);
        let clock = Arc::new(SimClock::new(EPOCH_MS, self.start, slot.clock_offset_ms, slot.drift_ppm));
        let this = self.clone();
        let (part, s) = (slot.part, store.clone());
        slot.task = Some(tokio::task::spawn_local(async move {
            match part {
                Part::Writer(w) => this.writer(w, s, clock, pid).await,
                Part::Compactor => this.compactor(s, clock, pid).await,
                Part::Cleaner => this.cleaner(s, clock, pid).await,
                Part::Service => this.service(s, clock, pid).await,
                Part::Consumer => this.consumer(s, clock, pid).await,
                Part::ChangeLogger => this.change_logger(s, clock, pid).await,
            }
        }));
        slot.store = Some(store);
    }

    /// Crashes the process in slot `i`; true if it was running.
    fn crash(&self, i: usize) -> bool {
        let mut slots = self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let slot = &mut slots[i];
        if let Some(s) = slot.store.take() {
            s.crash();
        }
        match slot.task.take() {
            Some(t) => {
                t.abort();
                true
            }
            None => false,
        }
    }

    /// Freezes process `i` for `d` and takes it out of its slot, to be
    /// replaced; false if the slot runs no process.
    fn freeze(&self, i: usize, d: Duration) -> bool {
        let mut slots = self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let slot = &mut slots[i];
        match (slot.store.take(), slot.task.take()) {
            (Some(s), Some(t)) => {
                s.freeze(d);
                self.zombies.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((s, t));
                true
            }
            (store, task) => {
                (slot.store, slot.task) = (store, task);
                false
            }
        }
    }

    fn stop_all(&self) {
        let n = self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len();
        for i in 0..n {
            self.crash(i);
        }
        for (s, t) in self.zombies.lock().unwrap_or_else(std::sync::PoisonError::into_inner).drain(..) {
            s.crash();
            t.abort();
        }
    }

    async fn writer(self: Arc<Self>, w: usize, store: ProcessStore, clock: Arc<SimClock>, pid: u32) {
        let input = &self.workload.writers[w];
        let who = format!("writer {} (process {pid})", input.id);
        let table = loop {
            match self.open(&store, clock.clone(), pid).await {
                Ok(t) => break t,
                Err(e) => self.expect(&who, e),
            }
            tokio::time::sleep(self.pause(50..500)).await;
        };
        let sourced = self.sourced[w];
        let settings = WriteSettings {
            tasks: self.writer_tasks[w],
            buffer_bytes: 16 << 10,
            heartbeat_interval: HEARTBEAT_INTERVAL,
            writer_id: if sourced { format!("{}-client", input.id) } else { input.id.clone() },
            columns: input.role.columns(),
            begin_next: self.begin_next[w],
            ..WriteSettings::default()
        };
        // A source that arrives later adds its columns and sequence group
        // first, while the other writers and the table services run.
        if input.role == Role::GroupC {
            self.add_group_c(&table, &who).await;
        }
        // Making a client lists the timeline (an unknown action is refused
        // before anything is written): a fault there is retried as one on
        // opening the table is.
        let client = loop {
            match table.write_client(settings.clone()).await {
                Ok(c) => break c,
                Err(e) => self.expect(&who, e),
            }
            tokio::time::sleep(self.pause(50..500)).await;
        };
        let mut leases = Vec::new();
        if !sourced {
            loop {
                match client.register().await {
                    Ok(_) => break,
                    Err(e) => self.expect(&who, e),
                }
                tokio::time::sleep(self.pause(50..500)).await;
            }
        }
        for lane in SOURCE_LANES.iter().filter(|_| sourced) {
            let id = format!("{}{lane}", input.id);
            loop {
                match client.take_over_source(&id).await {
                    Ok((lease, _)) => break leases.push(lease),
                    Err(e) => self.expect(&who, e),
                }
                tokio::time::sleep(self.pause(50..500)).await;
            }
        }
        loop {
            // A read must reflect every acknowledgement made before it
            // began (a zombie's read may predate its successor's).
            let acked = self.ledger().acked.range((w, 0)..(w + 1, 0)).next_back().map(|(_, b)| *b);
            let status = match client.checkpoint(&input.id).await {
                Ok(s) => s,
                Err(e) => {
                    self.expect(&who, e);
                    tokio::time::sleep(self.pause(50..500)).await;
                    continue;
                }
            };
            let next = match status.checkpoint.as_ref().map(|c| c.checkpoint.parse::<usize>()) {
                None => 0,
                Some(Ok(b)) => b + 1,
                Some(Err(_)) => return self.fail(format!("{who}: checkpoint {:?} is not a batch", status.checkpoint)),
            };
            if let Some(b) = acked
                && next <= b
            {
                return self
                    .fail(format!("{who}: the checkpoint says batch {next} is next, but batch {b} was acknowledged"));
            }
            if next >= input.batches.len() {
                client.close().await;
                self.done.lock().unwrap_or_else(std::sync::PoisonError::into_inner)[w] = true;
                return;
            }
            let id: BatchId = (w, next);
            self.ledger().attempted.insert(id);
            match self.commit(&client, id, &leases).await {
                Ok(()) => {
                    self.ledger().acked.insert(id);
                }
                // A zombie learns here that a newer incarnation replaced
                // it, and stops, as the error tells it to.
                Err(e) if e.is_fenced() => return,
                Err(e) => {
                    self.expect(&who, e);
                    tokio::time::sleep(self.pause(0..500)).await;
                }
            }
            tokio::time::sleep(self.pause(0..300)).await;
        }
    }

    /// Adds group C's columns (`c1`, `ts_c`) and the group `ts_c=c1`
    /// unless the schema in force has them: another group-C writer may have
    /// added them, before this one looked or after.
    async fn add_group_c(&self, table: &Table, who: &str) {
        let long = |name: &str| Alteration::AddColumn { name: name.into(), data_type: "long".into(), default: None };
        let group = SequenceGroup::parse("ts_c=c1").expect("a valid group");
        let alterations = [long("c1"), long("ts_c"), Alteration::SequenceGroup(group)];
        loop {
            match table.schema_at(None).await {
                Ok(s) if s.schema.arrow().index_of("c1").is_ok() => return,
                Ok(_) => match table.alter_schema(&alterations).await {
                    Ok(_) => return,
                    // Added meanwhile: the next look finds it.
                    Err(e) if e.kind() == ErrorKind::InvalidInput && e.to_string().contains("already has a column") => {
                    }
                    Err(e) => self.expect(who, e),
                },
                Err(e) => self.expect(who, e),
            }
            tokio::time::sleep(self.pause(50..500)).await;
        }
    }

    /// Commits batch `id`, its number the checkpoint of the writer's id,
    /// or of every source in `leases` when it has some.
    async fn commit(&self, client: &WriteClient, id: BatchId, leases: &[SourceLease]) -> tributary::Result<()> {
        let mut commit = client.start_commit().await?;
        if let Err(e) = commit.write_batch(&self.workload.arrow(id)).await {
            let _ = commit.abort().await;
            return Err(e.into());
        }
        if leases.is_empty() {
            commit.commit_with_checkpoint(Some(id.1.to_string())).await?;
        } else {
            let positions: Vec<(SourceLease, String)> = leases.iter().map(|l| (l.clone(), id.1.to_string())).collect();
            commit.commit_with_sources(None, &positions).await?;
        }
        Ok(())
    }

    async fn compactor(self: Arc<Self>, store: ProcessStore, clock: Arc<SimClock>, pid: u32) {
        let who = format!("compactor (process {pid})");
        loop {
            tokio::time::sleep(self.pause(500..8_000)).await;
            let settings = CompactorSettings {
                parallelism: self.world.with_rng(|r| r.random_range(1..=2)),
                ..CompactorSettings::default()
            };
            let run = async {
                let table = self.open(&store, clock.clone(), pid).await?;
                table.compactor(settings).await?.run_once().await?;
                Ok::<_, tributary::Error>(())
            };
            if let Err(e) = run.await {
                self.expect(&who, e);
            }
        }
    }

    async fn cleaner(self: Arc<Self>, store: ProcessStore, clock: Arc<SimClock>, pid: u32) {
        let who = format!("cleaner (process {pid})");
        loop {
            tokio::time::sleep(self.pause(1_000..10_000)).await;
            let (retain, archive) = self.world.with_rng(|r| (r.random_range(1..=3), r.random_bool(0.5)));
            let run = async {
                let table = self.open(&store, clock.clone(), pid).await?;
                table.clean(retain).await?;
                if archive {
                    table.archive(&TIGHT_ARCHIVING).await?;
                }
                Ok::<_, tributary::Error>(())
            };
            if let Err(e) = run.await {
                self.expect(&who, e);
            }
        }
    }

    /// `serve` on schedules drawn from the seed; a job's failure is
    /// judged as any actor's error, and the loop goes on.
    async fn service(self: Arc<Self>, store: ProcessStore, clock: Arc<SimClock>, pid: u32) {
        let who = format!("service (process {pid})");
        loop {
            let table = match self.open(&store, clock.clone(), pid).await {
                Ok(t) => t,
                Err(e) => {
                    self.expect(&who, e);
                    tokio::time::sleep(self.pause(500..3_000)).await;
                    continue;
                }
            };
            let schedule = ServiceSchedule {
                compact_every: self.pause(500..8_000),
                compactor: CompactorSettings {
                    parallelism: self.world.with_rng(|r| r.random_range(1..=2)),
                    ..CompactorSettings::default()
                },
                clean_every: Some(self.pause(1_000..10_000)),
                retention: CleanRetention::Commits(self.world.with_rng(|r| r.random_range(1..=3))),
                archive_every: Some(self.pause(1_000..10_000)),
                archive: TIGHT_ARCHIVING,
                // Fixed: a drawn interval would shift every later draw of
                // the world, and with it what each seed replays.
                change_log_every: Some(Duration::from_secs(2)),
            };
            let served = tributary::serve(&table, &schedule, std::future::pending(), |event| {
                if let ServiceEvent::Failed { job, error } = event {
                    self.expect(&format!("{who}, {job}"), error);
                }
            })
            .await;
            // It returns only on a failure to start (the compactor's).
            if let Err(e) = served {
                self.expect(&who, e);
            }
            tokio::time::sleep(self.pause(500..3_000)).await;
        }
    }

    /// Writes the change log now and then.
    async fn change_logger(self: Arc<Self>, store: ProcessStore, clock: Arc<SimClock>, pid: u32) {
        let who = format!("change-log writer (process {pid})");
        loop {
            tokio::time::sleep(self.pause(300..4_000)).await;
            let run = async {
                let table = self.open(&store, clock.clone(), pid).await?;
                table.change_log_writer().await?.run_once().await
            };
            if let Err(e) = run.await {
                self.expect(&who, e);
            }
        }
    }

    /// Follows the change feed now and then.
    async fn consumer(self: Arc<Self>, store: ProcessStore, clock: Arc<SimClock>, pid: u32) {
        let who = format!("feed consumer (process {pid})");
        loop {
            tokio::time::sleep(self.pause(300..5_000)).await;
            let run = async {
                let table = self.open(&store, clock.clone(), pid).await?;
                self.follow(&table, &who).await
            };
            if let Err(e) = run.await {
                self.expect(&who, e);
            }
        }
    }

    /// Applies the next window of the feed to the consumer's replica, or
    /// starts it again from a snapshot when the cleaner overtook its
    /// position (the table refuses the window as invalid input).
    async fn follow(&self, table: &Table, who: &str) -> tributary::Result<()> {
        let from = self.feed().position();
        match table.changes(&from, &InstantTime::LATEST).await {
            Ok(window) => {
                if let Err(e) = self.feed().apply(&from, &window) {
                    self.fail(format!("{who}: {e}"));
                }
                Ok(())
            }
            Err(e) if e.kind() == ErrorKind::InvalidInput => {
                let timeline = table.timeline().await?;
                let snapshot = crate::feed::snapshot(table, &timeline).await?;
                let mut feed = self.feed();
                if feed.position() == from
                    && let Err(e) = feed.restart(&timeline, &snapshot)
                {
                    self.fail(format!("{who}: {e}"));
                }
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn feed(&self) -> std::sync::MutexGuard<'_, Feed> {
        self.feed.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The consumer catches up with `table` (now alone on a calm store) and
    /// its replica must equal the table's snapshot.
    async fn check_feed(&self, table: &Table, what: &str) -> Result<(), String> {
        let who = format!("the feed consumer at {what}");
        self.follow(table, &who).await.map_err(|e| format!("{who}: {e}"))?;
        if let Some(f) = self.failed() {
            return Err(f);
        }
        let timeline = table.timeline().await.map_err(|e| format!("{who}: {e}"))?;
        let snapshot = crate::feed::snapshot(table, &timeline).await.map_err(|e| format!("{who}: {e}"))?;
        self.feed().matches(&snapshot).map_err(|e| format!("{who}: {e}"))
    }

    /// Crashes a random process now and then, and restarts it.
    async fn crash_controller(self: Arc<Self>) {
        let n = self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len();
        loop {
            tokio::time::sleep(self.pause(200..6_000)).await;
            let i = self.world.with_rng(|r| r.random_range(0..n));
            let is_done_writer = matches!(self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner)[i].part,
                Part::Writer(w) if self.done.lock().unwrap_or_else(std::sync::PoisonError::into_inner)[w]);
            let freeze_ms = 2_000..LONGEST_PAUSE.as_millis() as u64;
            let freeze = self.zombie_rng.as_ref().and_then(|z| {
                let mut z = z.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                z.random_bool(1.0 / 3.0).then(|| Duration::from_millis(z.random_range(freeze_ms)))
            });
            if is_done_writer {
                continue;
            }
            match freeze {
                Some(d) if self.freeze(i, d) => self.world.count(FaultKind::Zombie),
                None if self.crash(i) => self.world.count(FaultKind::Crash),
                _ => continue,
            }
            tokio::time::sleep(self.pause(0..3_000)).await;
            self.spawn(i);
        }
    }

    /// Checks the snapshots taken since the last call.
    async fn check_pending(&self, checker: &mut Checker) -> Result<(), String> {
        loop {
            let next = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop_front();
            let Some(p) = next else { return Ok(()) };
            checker.check(p.store, &p.ledger, &p.what, false).await?;
        }
    }

    async fn play(self: Arc<Self>) -> Result<Outcome, String> {
        self.create().await?;
        // Every completed instant file: a copy of the store, and the
        // ledger, as it appeared.
        let (pending, this) = (self.pending.clone(), Arc::downgrade(&self));
        self.world.observe(Box::new(move |seen, store| {
            let Some(this) = this.upgrade() else { return };
            let clock = this.clock_of(seen.pid);
            let judged =
                this.recovery.lock().unwrap_or_else(std::sync::PoisonError::into_inner).see(seen, store, &clock);
            if let Err(e) = judged {
                this.fail(e);
            }
            let path = seen.path;
            if !seen.op.writes() || !is_completion(path) {
                return;
            }
            let ledger = this.ledger().clone();
            let what = path.rsplit('/').next().unwrap_or(path).to_string();
            pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push_back(Pending {
                store: store.fork(),
                ledger,
                what,
            });
        }));
        let n = self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len();
        for i in 0..n {
            self.spawn(i);
        }
        let controller = self.crashes.then(|| tokio::task::spawn_local(self.clone().crash_controller()));
        let mut checker = Checker::new(self.workload.clone(), Path::from(ROOT));
        let stuck = |what: &str| format!("stuck: {what} after {DEADLINE:?} of virtual time");
        while !self.all_done() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            self.check_pending(&mut checker).await?;
            if let Some(f) = self.failed() {
                return Err(f);
            }
            if self.start.elapsed() > DEADLINE {
                return Err(format!("{}; {}", stuck("the writers are not done"), self.last_passed()));
            }
        }
        // The world heals; the dead's heartbeats and leases run out.
        if let Some(c) = controller {
            c.abort();
        }
        self.stop_all();
        self.check_pending(&mut checker).await?;
        if let Some(f) = self.failed() {
            return Err(f);
        }
        self.world.set_plan(FaultPlan::calm());
        tokio::time::sleep(HEARTBEAT_EXPIRY + self.settings.lock_lease + Duration::from_secs(2)).await;
        let pid = 999_999;
        let store = self.world.process(pid);
        let clock = Arc::new(SimClock::new(EPOCH_MS, self.start, 0, 0));
        let table = self.open(&store, clock, pid).await.map_err(|e| format!("final open: {e}"))?;
        let consumer = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .any(|s| s.part == Part::Consumer);
        if consumer {
            self.check_feed(&table, "the end of the writes").await?;
        }
        let mut change_logs = 0;
        if self.change_log {
            let writer = table.change_log_writer().await.map_err(|e| format!("final change log: {e}"))?;
            writer.run_once().await.map_err(|e| format!("final change log: {e}"))?;
            change_logs = crate::change_log::check(&table).await.map_err(|e| format!("the change log: {e}"))?;
        }
        table.clean(1).await.map_err(|e| format!("final clean: {e}"))?;
        let compactor =
            table.compactor(CompactorSettings::default()).await.map_err(|e| format!("final compactor: {e}"))?;
        for round in 0.. {
            let done = compactor.run_once().await.map_err(|e| format!("final compaction: {e}"))?;
            if done.is_empty() {
                break;
            }
            if round > 8 {
                return Err("the final compactions never run out of work".into());
            }
        }
        table.archive(&TIGHT_ARCHIVING).await.map_err(|e| format!("final archiving: {e}"))?;
        if consumer {
            // Compactions, a clean and archiving changed no row.
            self.check_feed(&table, "the end").await?;
        }
        if self.change_log {
            crate::change_log::check(&table).await.map_err(|e| format!("the change log at the end: {e}"))?;
        }
        let feed = {
            let feed = self.feed();
            (feed.windows, feed.changes, feed.restarts)
        };
        let timeline = table.timeline().await.map_err(|e| format!("final timeline: {e}"))?;
        let archived = timeline.instants().filter(|i| timeline.is_archived(&i.requested)).count();
        self.check_pending(&mut checker).await?;
        let ledger = self.ledger().clone();
        checker.check(self.world.snapshot(), &ledger, "the end", true).await?;
        let model = self.workload.model(self.workload.all_batches());
        let (trace, ops) = self.world.trace();
        Ok(Outcome {
            faults: self.world.faults(),
            checks: checker.checks,
            archived,
            feed,
            change_logs,
            ops,
            trace,
            virtual_time: self.start.elapsed(),
            store: Some(self.world.store()),
            model,
        })
    }
}
