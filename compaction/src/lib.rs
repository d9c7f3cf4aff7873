//! Tributary compaction: the record merge shared with the snapshot reader.
//! Planning, execution and cleaning build on it.

pub mod error;
pub mod merge;
pub mod plan;
pub mod slice;

pub use error::{Error, Result};
pub use merge::{Version, merge};
