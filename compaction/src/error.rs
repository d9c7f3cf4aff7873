//! The compaction crate's one error type.

use tributary_format::ErrorKind;

/// Result alias of the compaction crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of planning, executing, cleaning and rollback. [`Error::kind`]
/// tells the caller what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Table metadata could not be read or written.
    #[error(transparent)]
    Timeline(#[from] tributary_timeline::Error),
    /// A Hudi format could not be encoded or decoded.
    #[error(transparent)]
    Format(#[from] tributary_format::Error),
    /// Reading or merging a file slice failed.
    #[error(transparent)]
    Merge(#[from] tributary_merge::Error),
    /// A request or setting that cannot be carried out as given.
    #[error("{what}: {reason}")]
    Invalid {
        /// What was being processed.
        what: String,
        /// Why it failed.
        reason: String,
    },
    /// Writing a new base file to the store failed; the compaction can be
    /// run again.
    #[error("writing {path}: {reason}")]
    Unavailable {
        /// The file being written.
        path: String,
        /// What failed.
        reason: String,
    },
    /// A bug: a compaction task panicked, or an invariant does not hold.
    #[error("internal error in {what}: {reason}")]
    Internal {
        /// What was being done, naming the instant and file group.
        what: String,
        /// What went wrong.
        reason: String,
    },
}

/// A storage error (a store call, a lock) reaches callers as the timeline
/// error that wraps it, so it reads and classifies as it did.
impl From<tributary_timeline::StorageError> for Error {
    fn from(e: tributary_timeline::StorageError) -> Self {
        Error::Timeline(e.into())
    }
}

impl Error {
    /// What the caller can do about this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Timeline(e) => e.kind(),
            Error::Format(e) => e.kind(),
            Error::Merge(e) => e.kind(),
            Error::Invalid { .. } => ErrorKind::InvalidInput,
            Error::Unavailable { .. } => ErrorKind::Unavailable,
            Error::Internal { .. } => ErrorKind::Internal,
        }
    }
}
