//! [`TimeMode`]: how instant times are kept ordered across processes, a
//! table setting stored as `tributary.time.mode` and followed by the
//! TrueTime generator (`truetime.rs`).

/// How the generator keeps times ordered across processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeMode {
    /// Sleep out the clock skew while holding the lock (Hudi's algorithm).
    #[default]
    WaitForSkew,
    /// `max(clock, last + 1 ms)` from the time stored in the lock; no sleep.
    HybridLogical,
}

impl TimeMode {
    /// `wait-for-skew` or `hybrid-logical`: the name [`TimeMode::parse`]
    /// reads, in settings, on the command line and in `hoodie.properties`.
    pub fn name(self) -> &'static str {
        match self {
            TimeMode::WaitForSkew => "wait-for-skew",
            TimeMode::HybridLogical => "hybrid-logical",
        }
    }

    /// Parses `wait-for-skew` or `hybrid-logical`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "wait-for-skew" => Some(TimeMode::WaitForSkew),
            "hybrid-logical" => Some(TimeMode::HybridLogical),
            _ => None,
        }
    }
}
