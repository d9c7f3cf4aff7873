//! Tributary's writer: bucket routing ([`bucket`]), input conversion from
//! Arrow and JSON ([`input`]), the write client ([`client`]) and its open
//! commits ([`commit`]), whose writer tasks write each commit's rows as new
//! log files and which complete the commit through the timeline's commit
//! protocol. The client's settings, what it shares with its commits and
//! their tasks, each task's log file of a file group and the pieces a
//! commit routes to its tasks have private modules of their own.

mod block_buffer;
pub mod bucket;
pub mod client;
pub mod commit;
pub mod error;
mod file_write;
mod group_file;
pub mod input;
mod piece;
mod settings;
mod shared;
mod task;

pub use bucket::BucketIndex;
pub use client::WriteClient;
pub use commit::{Commit, CommitSummary};
pub use error::{Error, Result};
pub use file_write::FileWrite;
pub use input::Rows;
pub use settings::WriteSettings;
pub use tributary_timeline::protocol::writer_state::{Checkpoint, WriterStatus};
