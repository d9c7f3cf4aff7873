//! Tributary writer: bucket routing and the Hudi log format (HOODIE_LOG
//! blocks). The write client builds on these.

pub mod bucket;
pub mod error;
pub mod log_block;

pub use bucket::BucketIndex;
pub use error::{Error, Result};
pub use log_block::{BlockType, HeaderKey, LogBlock};
