//! Tributary's writer: bucket routing ([`BucketIndex`]), input conversion
//! from Arrow and JSON ([`Rows`]), the write client ([`WriteClient`]) and
//! its open commits ([`Commit`]), whose writer tasks write each commit's
//! rows as new log files and which complete the commit through the
//! timeline's commit protocol. The client's settings, what it shares with
//! its commits and their tasks, each task's log file of a file group and the
//! pieces a commit routes to its tasks have private modules of their own.

#![warn(unreachable_pub)]

mod backpressure;
mod block_buffer;

mod client;
mod commit;
mod error;
mod file_write;
mod group_file;
mod input;
mod next;
mod piece;
mod settings;
mod shared;
mod source;
mod task;

pub use client::{CHECKPOINT_PREFIX, WriteClient};
pub use commit::{Commit, CommitSummary};
pub use error::{Error, Result};
pub use file_write::FileWrite;
pub use input::{InputEvolution, Rows, rows_from_batch, rows_from_json_lines, schema_evolution_in_json_lines};
pub use settings::WriteSettings;
pub use source::SourceLease;
pub use tributary_timeline::BucketIndex;
pub use tributary_timeline::{Checkpoint, WriterStatus};
