//! Tributary compaction: merge, plan, execute and clean.
