//! Tributary's writer: bucket routing ([`bucket`]), input conversion from
//! Arrow and JSON ([`input`]) and the write client ([`client`]), which
//! writes each commit's rows as new log files and completes the commit
//! through the timeline's commit protocol.

pub mod bucket;
pub mod client;
pub mod error;
pub mod input;

pub use bucket::BucketIndex;
pub use client::{Commit, CommitSummary, FileWrite, WriteClient, WriteSettings};
pub use error::{Error, Result};
pub use input::Rows;
