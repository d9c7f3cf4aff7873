//! Tributary's table services: compaction (a pure planner, [`plan`], and
//! its executor, [`execute`]), cleaning ([`clean`]) and the rollback of
//! failed writes ([`rollback`]). Merging is [`tributary_merge`]'s.

mod base_file;
pub mod clean;
pub mod error;
pub mod execute;
pub mod plan;
pub mod rollback;
#[cfg(test)]
mod test_util;

pub use error::{Error, Result};
