//! Tributary compaction: the record merge shared with the snapshot reader.
//! Planning, execution and cleaning build on it.

pub mod clean;
pub mod columns;
pub mod error;
pub mod execute;
mod index;
mod keyed;
pub mod merge;
pub mod plan;
pub mod rollback;
pub mod slice;
pub mod spill;
#[cfg(test)]
mod test_util;

pub use error::{Error, Result};
pub use merge::{Version, merge};
