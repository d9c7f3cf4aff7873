//! Injected wall clocks.
//!
//! Every timestamp the library takes goes through [`Clock`], so tests can skew
//! clocks per process or task and replay schedules. [`SystemClock`] is the one
//! place that reads the operating system's clock.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// A source of wall-clock time in milliseconds since the Unix epoch (UTC).
pub trait Clock: Send + Sync + Debug {
    /// The current time in milliseconds since the Unix epoch.
    fn now_millis(&self) -> i64;
}

/// The operating system's real-time clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)]
    fn now_millis(&self) -> i64 {
        let now = std::time::SystemTime::now();
        match now.duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
            Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
        }
    }
}

/// Another clock shifted by a fixed offset: a process whose clock is skewed.
#[derive(Debug, Clone)]
pub struct OffsetClock {
    inner: Arc<dyn Clock>,
    offset_ms: i64,
}

impl OffsetClock {
    /// `inner` shifted by `offset_ms` (negative: behind).
    pub fn new(inner: Arc<dyn Clock>, offset_ms: i64) -> Self {
        Self { inner, offset_ms }
    }
}

impl Clock for OffsetClock {
    fn now_millis(&self) -> i64 {
        self.inner.now_millis() + self.offset_ms
    }
}

/// A clock that only moves when told to; for deterministic tests.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicI64,
}

impl ManualClock {
    /// A clock standing at `millis`.
    pub fn new(millis: i64) -> Self {
        Self { now: AtomicI64::new(millis) }
    }

    /// Moves the clock to `millis` (backwards too).
    pub fn set(&self, millis: i64) {
        self.now.store(millis, Ordering::SeqCst);
    }

    /// Moves the clock forward by `millis`.
    pub fn advance(&self, millis: i64) {
        self.now.fetch_add(millis, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_millis(&self) -> i64 {
        self.now.load(Ordering::SeqCst)
    }
}
