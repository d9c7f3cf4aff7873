//! Sources whose positions a client's commits record: writer ids other than
//! the client's own, each taken over on its own, so that one commit can
//! advance several of them (a process that consumes several Kafka
//! partitions commits them together) and each is fenced on its own (a
//! partition that moved to another process).

use std::sync::Arc;

use tributary_timeline::{TimeGenerator, WriterState, WriterStatus};

use crate::error::Result;

/// A writer id a client took over as a source of its commits
/// ([`WriteClient::take_over_source`](crate::WriteClient::take_over_source)).
/// A commit that records a position for it
/// ([`Commit::commit_with_sources`](crate::Commit::commit_with_sources))
/// fails with a conflict, and nothing of it becomes visible, once another
/// client took the id over since.
#[derive(Debug, Clone)]
pub struct SourceLease {
    state: Arc<WriterState>,
    generation: u64,
}

impl SourceLease {
    /// Takes writer id `state` over under the table lock of `time`.
    pub(crate) async fn take_over(state: WriterState, time: &TimeGenerator) -> Result<(Self, WriterStatus)> {
        let status = state.take_over(time).await?;
        Ok((Self { state: Arc::new(state), generation: status.generation }, status))
    }

    /// The writer id.
    pub fn id(&self) -> &str {
        self.state.writer_id()
    }

    /// The generation taken over.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub(crate) fn state(&self) -> &WriterState {
        &self.state
    }
}
