//! Tributary writer: bucket routing and the Hudi log format (HOODIE_LOG
//! blocks). The write client builds on these.

pub mod bucket;
pub mod client;
pub mod codec;
pub mod decode;
pub mod error;
pub mod input;
pub mod log_block;
pub mod schema;

pub use bucket::BucketIndex;
pub use client::{Commit, CommitSummary, FileWrite, WriteClient, WriteSettings};
pub use error::{Error, Result};
pub use input::Rows;
pub use log_block::{BlockType, HeaderKey, LogBlock};
pub use schema::TableSchema;
