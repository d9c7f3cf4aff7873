//! The root crate's error type.

use tributary_format::ErrorKind;

/// Result alias of the root crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of the table API, readers and CLI.
///
/// [`Error::kind`] says what the caller can do; the `tributary` binary exits
/// with its [`ErrorKind::exit_code`].
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
    /// Writing failed.
    #[error(transparent)]
    Writer(#[from] tributary_writer::Error),
    /// Merging or compaction failed.
    #[error(transparent)]
    Compaction(#[from] tributary_compaction::Error),
    /// There is no table at the path.
    #[error("{path}: not a Hudi table (no .hoodie/hoodie.properties)")]
    NotATable {
        /// The path given.
        path: String,
    },
    /// A table already exists where one was to be created.
    #[error("{path}: a table already exists here")]
    TableExists {
        /// The path given.
        path: String,
    },
    /// Caller input (schema, options) is invalid.
    #[error("{what}: {reason}")]
    InvalidInput {
        /// The input: a file, option or field.
        what: String,
        /// Why.
        reason: String,
    },
    /// A bug in Tributary: a reader task panicked, or an Arrow kernel refused
    /// data the reader built itself. Report it.
    #[error("{table}: {what}: {reason} (a bug in Tributary: please report it)")]
    Internal {
        /// The table.
        table: String,
        /// The step that failed.
        what: String,
        /// Why.
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
            Error::Writer(e) => e.kind(),
            Error::Compaction(e) => e.kind(),
            Error::NotATable { .. } | Error::InvalidInput { .. } => ErrorKind::InvalidInput,
            Error::TableExists { .. } => ErrorKind::Conflict,
            Error::Internal { .. } => ErrorKind::Internal,
        }
    }

    /// True when a newer writer took this writer's id over
    /// ([`tributary_timeline::Error::Fenced`]): the write client is replaced,
    /// and every later commit of it fails the same way, so a caller stops it
    /// rather than retry.
    pub fn is_fenced(&self) -> bool {
        matches!(
            self,
            Error::Timeline(tributary_timeline::Error::Fenced { .. })
                | Error::Writer(tributary_writer::Error::Timeline(tributary_timeline::Error::Fenced { .. }))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_say_what_to_do() {
        assert_eq!(Error::NotATable { path: "/t".into() }.kind(), ErrorKind::InvalidInput);
        assert_eq!(
            Error::InvalidInput { what: "--buckets".into(), reason: "x".into() }.kind(),
            ErrorKind::InvalidInput
        );
        assert_eq!(Error::TableExists { path: "/t".into() }.kind(), ErrorKind::Conflict);
        let internal = Error::Internal { table: "/t".into(), what: "read".into(), reason: "x".into() };
        assert_eq!(internal.kind(), ErrorKind::Internal);
        assert!(internal.to_string().starts_with("/t: read: x"), "{internal}");
        let store = tributary_timeline::Error::store(
            "get",
            "/t/.hoodie/hoodie.properties",
            object_store::Error::Generic { store: "test", source: "disk gone".into() },
        );
        assert_eq!(Error::from(store).kind(), ErrorKind::Unavailable);
        let lock = tributary_timeline::StorageError::LockLost { lock: "l".into(), reason: "x".into() };
        assert_eq!(Error::from(lock).kind(), ErrorKind::Conflict);
        let corrupt = tributary_format::Error::CorruptLog { path: "/t/x.log".into(), offset: 7, reason: "x".into() };
        assert_eq!(Error::from(corrupt).kind(), ErrorKind::Corrupt);
        let bad =
            tributary_writer::Error::BadRecord { input: "in.jsonl".into(), record: 2, field: None, reason: "x".into() };
        assert_eq!(Error::from(bad).kind(), ErrorKind::InvalidInput);
        let task =
            tributary_writer::Error::Task { table: "/t".into(), instant: "i".into(), task: 0, reason: "x".into() };
        assert_eq!(Error::from(task).kind(), ErrorKind::Internal);
    }
}
