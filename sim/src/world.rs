//! The simulated world: one shared in-memory object store, seen by each
//! simulated process through its own [`ProcessStore`], and a clock per
//! process ([`SimClock`]).
//!
//! Every store operation of a process passes `decide`, which draws
//! from the history's one seeded generator: a latency before the operation
//! takes effect and one before its answer arrives (so operations in flight
//! at once take effect and answer out of order), and, by the history's
//! [`FaultPlan`], a fault:
//!
//! - [`FaultKind::Fail`]: the operation fails without taking effect;
//! - [`FaultKind::LostAnswer`]: a write takes effect, then reports failure;
//! - [`FaultKind::Delay`]: it stalls for a long while first.
//!
//! A crash ([`ProcessStore::crash`]) loses the process's view at whatever
//! await point it is: its operations not yet in effect never take effect,
//! those in effect never answer, and its later operations never start. The
//! tasks it left behind (writer tasks, heartbeats) hang; nothing of the
//! process reaches the store again. A freeze ([`ProcessStore::freeze`])
//! holds the process the same way for a while, and then lets it go on:
//! a zombie, which finds on waking that others took its place.
//!
//! The runtime is a current-thread tokio runtime with paused time: a task
//! runs until it awaits, and when every task waits, virtual time jumps to
//! the next deadline. So the seeded latencies are the scheduler: they decide
//! which process goes next, and one seed replays one history exactly.

use std::collections::BTreeMap;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult,
};
use rand::Rng;
use rand::rngs::StdRng;
use tributary_timeline::Clock;

/// The longest a stall or a freeze lasts.
pub const LONGEST_PAUSE: Duration = Duration::from_secs(12);

/// A kind of fault the world injects, and the counts reported per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// An operation failed without taking effect.
    Fail,
    /// A write took effect, then reported failure.
    LostAnswer,
    /// An operation stalled for [`FaultPlan::long_delay`] first.
    Delay,
    /// A process lost its view at an await point.
    Crash,
    /// A process froze at an await point, was replaced, and woke up later.
    Zombie,
}

impl FaultKind {
    /// Every kind, in report order.
    pub const ALL: [FaultKind; 5] =
        [FaultKind::Fail, FaultKind::LostAnswer, FaultKind::Delay, FaultKind::Crash, FaultKind::Zombie];

    /// The kind's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Fail => "failed operation",
            FaultKind::LostAnswer => "lost answer",
            FaultKind::Delay => "long delay",
            FaultKind::Crash => "crash",
            FaultKind::Zombie => "zombie (frozen, replaced, woken)",
        }
    }
}

/// Which part of a table an operation touches; fault rates are per class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathClass {
    /// `.hoodie/timeline/`: instant files.
    Timeline = 0,
    /// `.hoodie/.locks/`: lease documents.
    Lock = 1,
    /// The rest of `.hoodie/`: heartbeats, markers, writer states, properties.
    Control = 2,
    /// Data files in the partitions.
    Data = 3,
}

impl PathClass {
    /// The class of `path`.
    pub fn of(path: &str) -> Self {
        if path.contains("/.hoodie/timeline/") {
            PathClass::Timeline
        } else if path.contains("/.hoodie/.locks/") {
            PathClass::Lock
        } else if path.contains("/.hoodie/") {
            PathClass::Control
        } else {
            PathClass::Data
        }
    }
}

/// Store operations, as the world sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A put (any mode) or a multipart upload's start.
    Put,
    /// A read.
    Get,
    /// A listing.
    List,
    /// A delete.
    Delete,
    /// A copy.
    Copy,
}

impl Op {
    /// Whether the operation changes the store.
    pub fn writes(self) -> bool {
        matches!(self, Op::Put | Op::Delete | Op::Copy)
    }
}

/// The faults and latencies of one history.
#[derive(Debug, Clone)]
pub struct FaultPlan {
    /// Per [`PathClass`], the chance an operation fails without effect.
    pub fail: [f64; 4],
    /// Per [`PathClass`], the chance a write takes effect and reports failure.
    pub lost_answer: [f64; 4],
    /// The chance an operation stalls for [`FaultPlan::long_delay`].
    pub delay: f64,
    /// Latency before an operation takes effect, and again before its
    /// answer arrives: uniform in this range of milliseconds.
    pub latency_ms: Range<u64>,
    /// How long a stalled operation waits.
    pub long_delay: Duration,
}

impl FaultPlan {
    /// No faults, and latencies still drawn (the schedule stays random).
    pub fn calm() -> Self {
        Self { fail: [0.0; 4], lost_answer: [0.0; 4], delay: 0.0, latency_ms: 0..20, long_delay: Duration::ZERO }
    }

    /// A plan drawn from `rng`: a quarter of histories run without faults;
    /// the others fail and lose answers on a random subset of path classes,
    /// at rates up to 2 %, and stall some operations: for 0.2 to 4 s, or
    /// with `long_stalls` for 2 to 12 s at up to 3 % of operations, past
    /// the writers' heartbeat expiry (recovery then rolls back writers that
    /// are alive).
    pub fn draw(rng: &mut StdRng, long_stalls: bool) -> Self {
        let mut plan = Self::calm();
        plan.latency_ms = 0..rng.random_range(2..60);
        if rng.random_bool(0.25) {
            return plan;
        }
        for class in 0..4 {
            if rng.random_bool(0.6) {
                plan.fail[class] = rng.random_range(0.0..0.02);
            }
            if rng.random_bool(0.6) {
                plan.lost_answer[class] = rng.random_range(0.0..0.02);
            }
        }
        if rng.random_bool(0.5) {
            let longest = LONGEST_PAUSE.as_millis() as u64;
            let (rate, stall) = if long_stalls { (0.03, 2_000..longest) } else { (0.01, 200..4_000) };
            plan.delay = rng.random_range(0.0..rate);
            plan.long_delay = Duration::from_millis(rng.random_range(stall));
        }
        plan
    }
}

/// What happens to one operation.
#[derive(Debug, Clone, Copy)]
struct Decision {
    before: Duration,
    after: Duration,
    fault: Option<FaultKind>,
}

/// Called with each operation that took effect, and each read that found
/// nothing (right after, before any other task runs), with the store as it
/// then is.
pub type Observer = Box<dyn FnMut(&Seen<'_>, &InMemory) + Send>;

/// An operation as the observer sees it, with the store right after it.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    /// The process that made it.
    pub pid: u32,
    /// What it was.
    pub op: Op,
    /// The path it named.
    pub path: &'a str,
    /// False for a read of a path that is not there.
    pub found: bool,
}

struct State {
    rng: StdRng,
    plan: FaultPlan,
    faults: BTreeMap<FaultKind, u64>,
    /// A fingerprint of every operation that took effect, in order.
    trace: u64,
    ops: u64,
    observer: Option<Observer>,
}

/// The world of one history: the shared store, the seeded generator every
/// decision draws from, and the fault counts.
pub struct World {
    store: Arc<InMemory>,
    state: Mutex<State>,
}

impl fmt::Debug for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("World")
    }
}

impl World {
    /// A world with an empty store, drawing from `rng`.
    pub fn new(rng: StdRng, plan: FaultPlan) -> Arc<Self> {
        Arc::new(Self {
            store: Arc::new(InMemory::new()),
            state: Mutex::new(State { rng, plan, faults: BTreeMap::new(), trace: 0, ops: 0, observer: None }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Draws from the world's generator.
    pub fn with_rng<T>(&self, f: impl FnOnce(&mut StdRng) -> T) -> T {
        f(&mut self.state().rng)
    }

    /// The shared store itself, with no latency and no faults: for the
    /// checker and the set-up.
    pub fn store(&self) -> Arc<InMemory> {
        self.store.clone()
    }

    /// A copy of the store as it is now.
    pub fn snapshot(&self) -> InMemory {
        self.store.fork()
    }

    /// Replaces the fault plan (the final phase heals the world).
    pub fn set_plan(&self, plan: FaultPlan) {
        self.state().plan = plan;
    }

    /// Sets the observer of operations.
    pub fn observe(&self, observer: Observer) {
        self.state().observer = Some(observer);
    }

    /// Counts a fault the actors injected (crashes).
    pub fn count(&self, kind: FaultKind) {
        *self.state().faults.entry(kind).or_default() += 1;
    }

    /// Faults injected so far, per kind.
    pub fn faults(&self) -> BTreeMap<FaultKind, u64> {
        self.state().faults.clone()
    }

    /// The fingerprint of the operations that took effect, and their number.
    pub fn trace(&self) -> (u64, u64) {
        let s = self.state();
        (s.trace, s.ops)
    }

    /// A view of the store for process `pid`, alive until crashed.
    pub fn process(self: &Arc<Self>, pid: u32) -> ProcessStore {
        ProcessStore { world: self.clone(), pid, alive: Arc::new(AtomicBool::new(true)), frozen_until: Arc::default() }
    }

    fn decide(&self, op: Op, path: &str) -> Decision {
        let mut s = self.state();
        let State { rng, plan, faults, .. } = &mut *s;
        let class = PathClass::of(path) as usize;
        let mut latency = || Duration::from_millis(rng.random_range(plan.latency_ms.clone()));
        let (mut before, after) = (latency(), latency());
        let fault = if rng.random_bool(plan.fail[class]) {
            Some(FaultKind::Fail)
        } else if op.writes() && rng.random_bool(plan.lost_answer[class]) {
            Some(FaultKind::LostAnswer)
        } else if rng.random_bool(plan.delay) {
            before += plan.long_delay;
            Some(FaultKind::Delay)
        } else {
            None
        };
        if let Some(k) = fault {
            *faults.entry(k).or_default() += 1;
        }
        Decision { before, after, fault }
    }

    /// Records an operation that took effect, and tells the observer.
    fn took_effect(&self, pid: u32, op: Op, path: &str) {
        let mut s = self.state();
        let mut h = foldhash::fast::FixedState::with_seed(s.trace).build_hasher();
        h.write_u32(pid);
        h.write_u8(op as u8);
        h.write(path.as_bytes());
        s.trace = h.finish();
        s.ops += 1;
        if let Some(observer) = s.observer.as_mut() {
            observer(&Seen { pid, op, path, found: true }, &self.store);
        }
    }

    /// Tells the observer of a read that found nothing.
    fn found_nothing(&self, pid: u32, op: Op, path: &str) {
        if let Some(observer) = self.state().observer.as_mut() {
            observer(&Seen { pid, op, path, found: false }, &self.store);
        }
    }
}

/// One process's view of the world's store. Cloning shares the view (and
/// its fate in a crash).
#[derive(Debug, Clone)]
pub struct ProcessStore {
    world: Arc<World>,
    pid: u32,
    alive: Arc<AtomicBool>,
    frozen_until: Arc<Mutex<Option<tokio::time::Instant>>>,
}

impl fmt::Display for ProcessStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SimStore(process {})", self.pid)
    }
}

fn injected(op: Op, path: &str, what: &str) -> object_store::Error {
    object_store::Error::Generic { store: "sim", source: format!("injected fault: {op:?} {path}: {what}").into() }
}

impl ProcessStore {
    /// Loses the process's view: nothing it does reaches the store again,
    /// and no operation of it in flight answers.
    pub fn crash(&self) {
        self.alive.store(false, Ordering::SeqCst);
    }

    /// Holds the process for `d` at its next await point on the store (a
    /// long GC pause, a host suspended): nothing of it takes effect or
    /// answers until then; afterwards it goes on as if nothing happened.
    pub fn freeze(&self, d: Duration) {
        *self.frozen_until.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(tokio::time::Instant::now() + d);
    }

    /// True until [`ProcessStore::crash`].
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    async fn halt_if_dead(&self) {
        let thaw = *self.frozen_until.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(t) = thaw
            && t > tokio::time::Instant::now()
        {
            tokio::time::sleep_until(t).await;
        }
        if !self.is_alive() {
            std::future::pending::<()>().await;
        }
    }

    /// Runs `apply` as operation `op` on `path`: latency, the drawn fault,
    /// the effect, latency, the answer.
    async fn run<T, F>(&self, op: Op, path: &str, apply: F) -> object_store::Result<T>
    where
        F: Future<Output = object_store::Result<T>>,
    {
        self.halt_if_dead().await;
        let d = self.world.decide(op, path);
        tokio::time::sleep(d.before).await;
        self.halt_if_dead().await;
        if d.fault == Some(FaultKind::Fail) {
            return Err(injected(op, path, "failed before taking effect"));
        }
        let out = apply.await;
        match &out {
            Ok(_) => self.world.took_effect(self.pid, op, path),
            Err(object_store::Error::NotFound { .. }) => self.world.found_nothing(self.pid, op, path),
            Err(_) => {}
        }
        tokio::time::sleep(d.after).await;
        self.halt_if_dead().await;
        match (out, d.fault) {
            (Ok(_), Some(FaultKind::LostAnswer)) => Err(injected(op, path, "took effect, answer lost")),
            (out, _) => out,
        }
    }
}

#[async_trait::async_trait]
impl ObjectStore for ProcessStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.run(Op::Put, location.as_ref(), self.world.store.put_opts(location, payload, opts)).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        // The upload's parts and completion go straight to the store: the
        // tables here are small enough that the library never uploads in
        // parts, and the start is where a fault is drawn.
        self.run(Op::Put, location.as_ref(), self.world.store.put_multipart_opts(location, opts)).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        self.run(Op::Get, location.as_ref(), self.world.store.get_opts(location, options)).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let this = self.clone();
        locations
            .then(move |p| {
                let this = this.clone();
                async move {
                    let p = p?;
                    let one = this.world.store.delete_stream(stream::iter([Ok(p.clone())]).boxed()).try_collect();
                    this.run(Op::Delete, p.as_ref(), one).await.map(|_: Vec<Path>| p)
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let (this, prefix) = (self.clone(), prefix.cloned());
        stream::once(async move {
            let shown = prefix.as_ref().map(|p| p.to_string()).unwrap_or_default();
            let all = this.world.store.list(prefix.as_ref()).try_collect::<Vec<_>>();
            this.run(Op::List, &shown, all).await
        })
        .flat_map(|listed| match listed {
            Ok(metas) => stream::iter(metas.into_iter().map(Ok)).boxed(),
            Err(e) => stream::iter([Err(e)]).boxed(),
        })
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let shown = prefix.map(|p| p.to_string()).unwrap_or_default();
        self.run(Op::List, &shown, self.world.store.list_with_delimiter(prefix)).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        self.run(Op::Copy, to.as_ref(), self.world.store.copy_opts(from, to, options)).await
    }
}

/// A process's wall clock: the world's virtual time since the history
/// began, from `epoch_ms`, shifted by the process's offset and drifting by
/// its rate (parts per million).
#[derive(Debug)]
pub struct SimClock {
    epoch_ms: i64,
    start: tokio::time::Instant,
    offset_ms: i64,
    drift_ppm: i64,
}

impl SimClock {
    /// A clock that reads `epoch_ms + offset_ms` when the history began
    /// (virtual time `start`).
    pub fn new(epoch_ms: i64, start: tokio::time::Instant, offset_ms: i64, drift_ppm: i64) -> Self {
        Self { epoch_ms, start, offset_ms, drift_ppm }
    }
}

impl Clock for SimClock {
    fn now_millis(&self) -> i64 {
        let elapsed = i64::try_from(self.start.elapsed().as_millis()).unwrap_or(i64::MAX / 2);
        self.epoch_ms + self.offset_ms + elapsed + elapsed * self.drift_ppm / 1_000_000
    }
}
