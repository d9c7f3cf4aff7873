//! Tributary's record merge, shared by snapshot readers and the compactor.

pub mod columns;
pub mod error;
mod index;
pub mod keyed;
pub mod merge;
pub mod slice;
pub mod spill;
#[cfg(test)]
pub(crate) mod test_util;

pub use error::{Error, Result};
pub use merge::{Version, merge};
