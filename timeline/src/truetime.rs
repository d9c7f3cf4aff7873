//! TrueTime-style instant generation.
//!
//! Every instant time and every completion time is taken under the table lock,
//! so the order of times equals the order in which the lock was held. Two
//! modes:
//!
//! - [`TimeMode::WaitForSkew`] (Hudi's algorithm): take the lock,
//!   read the clock, sleep `max_clock_skew` while holding it, release. Any
//!   later reader of any clock that is at most `max_clock_skew` behind then
//!   reads a larger time. Java writers sharing the lock rely on this.
//! - [`TimeMode::HybridLogical`]: take the lock, issue
//!   `max(clock, last_issued + 1 ms)`, store it in the lock, release. Nothing
//!   sleeps. Order holds whatever the clocks do; only writers that read the
//!   stored time may share the table, and only under a lock that keeps it
//!   ([`LockProvider::keeps_last_issued`]; the generator refuses the mode
//!   under any other).
//!
//! In both modes the time issued is at least `last_issued + 1`, so a clock far
//! behind can never issue a time below one already issued under the lock.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;

pub(crate) use crate::config::time_mode::TimeMode;
use crate::error::{Error, Result};
use crate::instant::InstantTime;
use tributary_storage::Clock;
use tributary_storage::{Fence, LockGuard, LockProvider};

/// Hudi's default `hoodie.time.generator.max_expected_clock_skew_ms`.
pub const DEFAULT_MAX_CLOCK_SKEW: Duration = Duration::from_millis(200);

/// Work a [`TimeGenerator`] runs at the start of each of its lock holds,
/// before the hold's own work, given with
/// [`TimeGenerator::with_first_hold_hook`]. A hook does its work until it
/// succeeded once and remembers that (generators sharing a hook share
/// it), so later holds cost nothing: the metadata-table guard
/// (`protocol/metadata_table.rs`) is the one Tributary gives. A hold whose
/// hook fails does nothing else and returns its error.
#[async_trait]
pub trait FirstHoldHook: std::fmt::Debug + Send + Sync {
    /// Runs the hook; called holding the lock. `clock` is the generator's.
    async fn before_hold(&self, clock: &dyn Clock) -> Result<()>;
}

/// Issues instant and completion times under a table lock.
#[derive(Debug, Clone)]
pub struct TimeGenerator {
    mode: TimeMode,
    max_skew: Duration,
    clock: Arc<dyn Clock>,
    lock: Arc<dyn LockProvider>,
    behind_reports: Arc<AtomicU64>,
    /// Runs at the start of each hold until it succeeded once (see
    /// [`TimeGenerator::with_first_hold_hook`]).
    first_hold: Option<Arc<dyn FirstHoldHook>>,
    /// Lock wait, lock hold and skew wait; no-ops unless metered.
    meters: LockMeters,
}

/// The histograms a metered generator records ([`TimeGenerator::metered`]).
#[derive(Debug, Clone)]
struct LockMeters {
    wait: metrics::Histogram,
    hold: metrics::Histogram,
    skew: metrics::Histogram,
}

impl LockMeters {
    fn noop() -> Self {
        Self { wait: metrics::Histogram::noop(), hold: metrics::Histogram::noop(), skew: metrics::Histogram::noop() }
    }
}

impl TimeGenerator {
    /// A generator reading `clock` and serialising on `lock`.
    pub fn new(mode: TimeMode, max_skew: Duration, clock: Arc<dyn Clock>, lock: Arc<dyn LockProvider>) -> Self {
        Self {
            mode,
            max_skew,
            clock,
            lock,
            behind_reports: Arc::new(AtomicU64::new(0)),
            first_hold: None,
            meters: LockMeters::noop(),
        }
    }

    /// This generator recording how long it waits for the lock, holds it
    /// and waits out the clock skew under it, as the metrics
    /// `tributary_lock_wait_seconds`, `tributary_lock_hold_seconds` and
    /// `tributary_clock_skew_wait_seconds` of table `table`
    /// ([`tributary_storage::metrics`]), to the recorder installed now.
    pub fn metered(mut self, table: &str) -> Self {
        use tributary_storage::metrics::{LOCK_HOLD, LOCK_WAIT, SKEW_WAIT};
        let h = |name: &'static str| metrics::histogram!(name, "table" => table.to_string());
        self.meters = LockMeters { wait: h(LOCK_WAIT), hold: h(LOCK_HOLD), skew: h(SKEW_WAIT) };
        self
    }

    /// Takes the lock, recording the wait; the hold starts on return.
    async fn acquire(&self) -> Result<(Box<dyn LockGuard>, std::time::Instant)> {
        let start = std::time::Instant::now();
        let guard = self.lock.acquire().await?;
        let held = std::time::Instant::now();
        self.meters.wait.record(held - start);
        Ok((guard, held))
    }

    /// Releases a lock taken by [`TimeGenerator::acquire`] at `held`,
    /// recording the hold.
    async fn release(&self, guard: Box<dyn LockGuard>, held: std::time::Instant) {
        release(guard).await;
        self.meters.hold.record(held.elapsed());
    }

    /// This generator with `hook` run at the start of each of its lock
    /// holds, before the hold's own work, until it succeeded once (the
    /// hook remembers, and generators sharing it share that). A table's
    /// metadata-table guard is given so, so the metadata table is turned
    /// off before anything of Tributary's is requested, written or
    /// completed (`protocol/metadata_table.rs`). A hold whose hook fails
    /// does nothing else and returns its error.
    pub fn with_first_hold_hook(mut self, hook: Arc<dyn FirstHoldHook>) -> Self {
        self.first_hold = Some(hook);
        self
    }

    /// Runs the first-hold hook, if any; call it holding the lock.
    async fn before_hold(&self) -> Result<()> {
        match &self.first_hold {
            Some(h) => h.before_hold(self.clock.as_ref()).await,
            None => Ok(()),
        }
    }

    /// The mode.
    pub fn mode(&self) -> TimeMode {
        self.mode
    }

    /// The clock this generator reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// How many times this generator found its clock behind the stored time
    /// by more than the allowed skew (each is also logged as a warning).
    pub fn clock_behind_reports(&self) -> u64 {
        self.behind_reports.load(Ordering::Relaxed)
    }

    /// A new instant time, strictly greater than every time issued before
    /// under the same lock.
    pub async fn new_instant(&self) -> Result<InstantTime> {
        self.with_time(|t| async move { Ok(t) }).await
    }

    /// Issues a time and runs `f` with it while still holding the lock, so
    /// that what `f` does (typically creating `<t>_<c>.<action>`) becomes
    /// visible before any later time is issued. This is the atomic
    /// "completion time plus visibility" step that completion-time slicing
    /// relies on.
    pub async fn with_time<T, F, Fut>(&self, f: F) -> Result<T>
    where
        F: FnOnce(InstantTime) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.with_time_fenced(|t, _| f(t)).await
    }

    /// [`TimeGenerator::with_time`], giving `f` a [`Fence`] too: `f` checks
    /// it right before the step that must happen under the lock, which then
    /// fails instead of happening when the lock was lost meanwhile (a lease
    /// taken over while this process was frozen or cut off).
    pub async fn with_time_fenced<T, F, Fut>(&self, f: F) -> Result<T>
    where
        F: FnOnce(InstantTime, Fence) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.with_times_fenced(false, |t, _, fence| f(t, fence)).await
    }

    /// [`TimeGenerator::with_time_fenced`] that, when `next` is asked for
    /// and the mode is hybrid-logical, issues in the same hold the time
    /// right after the one it gives `f`, and gives `f` that one too. Both
    /// are issued under the lock, so every time issued in a later hold is
    /// above them. A write client completes a commit with the first and
    /// begins its next commit with the second (`complete_instant_then_begin`).
    /// In the wait-for-skew mode `f` gets no second time: it would need a
    /// skew wait of its own, which saves nothing over another hold.
    pub async fn with_times_fenced<T, F, Fut>(&self, next: bool, f: F) -> Result<T>
    where
        F: FnOnce(InstantTime, Option<InstantTime>, Fence) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.check_lock()?;
        let (mut guard, held) = self.acquire().await?;
        let fence = guard.fence();
        let next = next && self.mode == TimeMode::HybridLogical;
        let result = async {
            self.before_hold().await?;
            self.issue_and_run(guard.as_mut(), next, |t, n| f(t, n, fence)).await
        }
        .await;
        self.release(guard, held).await;
        result
    }

    /// Refuses the hybrid-logical mode under a lock that keeps no last
    /// issued time ([`LockProvider::keeps_last_issued`]): with no floor to
    /// issue above and no clock skew waited out, a process whose clock is
    /// behind would issue times below those already issued.
    fn check_lock(&self) -> Result<()> {
        if self.mode == TimeMode::HybridLogical && !self.lock.keeps_last_issued() {
            return Err(Error::InvalidInput {
                what: format!("the hybrid-logical time mode under the {}", self.lock.describe()),
                reason: "this lock keeps no last issued time, so instants under it need the wait-for-skew time \
                         mode (as Hudi's own writers use); set the time mode to wait-for-skew"
                    .into(),
            });
        }
        Ok(())
    }

    /// Runs `f` holding the table lock without issuing a time: for a step
    /// that must be ordered against every completion but needs no time of
    /// its own (a writer id's takeover, `protocol/writer_state.rs`). Nothing
    /// sleeps, in either mode.
    pub async fn with_lock<T, F, Fut>(&self, f: F) -> Result<T>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let (guard, held) = self.acquire().await?;
        let result = async {
            self.before_hold().await?;
            f().await
        }
        .await;
        self.release(guard, held).await;
        result
    }

    async fn issue_and_run<T, F, Fut>(&self, guard: &mut dyn LockGuard, next: bool, f: F) -> Result<T>
    where
        F: FnOnce(InstantTime, Option<InstantTime>) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let now = self.clock.now_millis();
        let floor = guard.last_issued();
        if let Some(last) = floor
            && now < last - self.max_skew.as_millis() as i64
        {
            self.behind_reports.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                clock_ms = now,
                last_issued_ms = last,
                behind_ms = last - now,
                max_skew_ms = self.max_skew.as_millis() as u64,
                "clock is behind the last issued time by more than the maximum clock skew"
            );
        }
        let t = floor.map_or(now, |last| now.max(last + 1));
        let instant = InstantTime::from_millis(t)?;
        let after = if next { Some(InstantTime::from_millis(t + 1)?) } else { None };
        guard.set_last_issued(if next { t + 1 } else { t });
        if self.mode == TimeMode::WaitForSkew {
            tokio::time::sleep(self.max_skew).await;
            self.meters.skew.record(self.max_skew);
        }
        f(instant, after).await
    }
}

/// Releases a lock after the work done under it. A failed release is
/// logged, not returned: what ran under the lock has happened (a completed
/// instant is visible) and must not be reported as failed, and a lease
/// that could not be released runs out by itself.
async fn release(guard: Box<dyn LockGuard>) {
    if let Err(e) = guard.release().await {
        tracing::error!(error = %e, "releasing the table lock failed; a lease runs out by itself");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tributary_storage::InProcessLock;
    use tributary_storage::ManualClock;

    #[tokio::test]
    async fn hybrid_never_goes_back_and_reports_a_slow_clock() {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let g = TimeGenerator::new(
            TimeMode::HybridLogical,
            Duration::from_millis(200),
            clock.clone(),
            Arc::new(InProcessLock::new()),
        );
        let a = g.new_instant().await.unwrap();
        let b = g.new_instant().await.unwrap();
        assert!(b > a);
        clock.advance(-150);
        let c = g.new_instant().await.unwrap();
        assert!(c > b);
        assert_eq!(g.clock_behind_reports(), 0, "150 ms is within the skew");
        clock.advance(-1_000);
        let d = g.new_instant().await.unwrap();
        assert!(d > c);
        assert_eq!(g.clock_behind_reports(), 1);
    }

    /// Under a lock that keeps no last issued time (Hudi's lock file), the
    /// hybrid-logical mode is refused before the lock is taken, naming the
    /// lock and the mode to use; wait-for-skew issues times.
    #[tokio::test]
    async fn hybrid_is_refused_under_a_lock_that_keeps_no_time() {
        let store: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let lock = Arc::new(crate::HudiFileLock::at(
            store.clone(),
            crate::layout::hudi_lock_file(&object_store::path::Path::from("t")),
            "test",
            clock.clone(),
            None,
            Duration::from_millis(300),
        ));
        assert!(!lock.keeps_last_issued());
        assert!(InProcessLock::new().keeps_last_issued());
        let hybrid = TimeGenerator::new(TimeMode::HybridLogical, Duration::ZERO, clock.clone(), lock.clone());
        let err = hybrid.new_instant().await.unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidInput, "{err}");
        let err = err.to_string();
        assert!(err.contains("Hudi lock file t/.hoodie/lock"), "names the lock: {err}");
        assert!(err.contains("set the time mode to wait-for-skew"), "says what to do: {err}");
        let listed: Vec<_> = futures::TryStreamExt::try_collect::<Vec<_>>(store.list(None)).await.unwrap();
        assert!(listed.is_empty(), "the lock was not taken: {listed:?}");
        let wait = TimeGenerator::new(TimeMode::WaitForSkew, Duration::ZERO, clock, lock);
        assert_eq!(wait.new_instant().await.unwrap(), InstantTime::from_millis(1_700_000_000_000).unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn wait_for_skew_holds_the_lock_for_the_skew() {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let g = TimeGenerator::new(
            TimeMode::WaitForSkew,
            Duration::from_millis(200),
            clock,
            Arc::new(InProcessLock::new()),
        );
        let start = tokio::time::Instant::now();
        let (a, b) = tokio::join!(g.new_instant(), g.new_instant());
        assert_ne!(a.unwrap(), b.unwrap());
        assert!(start.elapsed() >= Duration::from_millis(400));
    }
}
