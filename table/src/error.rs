//! The root crate's error type: one error for everything the table API,
//! the readers, the ingest and the CLI report, wrapping the errors of the
//! crates below.

use tributary_format::ErrorKind;
use tributary_writer::Checkpoint;

/// Result alias of the root crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of the table API, readers, ingest and CLI.
///
/// [`Error::kind`] says what the caller can do; the `tributary` binary exits
/// with its [`ErrorKind::exit_code`]. It answers [`Error::kind`] and
/// [`Error::is_fenced`] for every error it wraps.
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
    /// Ingest from Kafka failed.
    #[cfg(feature = "kafka")]
    #[error(transparent)]
    Ingest(#[from] tributary_ingest::Error),
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
    /// A local file or stream (an input, a schema file) could not be opened
    /// or read: a path or permission the caller can fix, or a device that
    /// may come back.
    #[error("{what}: {source}")]
    Io {
        /// What was being opened or read, and where.
        what: String,
        /// Why.
        source: std::io::Error,
    },
    /// A writer id's last committed checkpoint is not the one the caller
    /// expected after registering the id
    /// ([`Table::register_writer`](crate::Table::register_writer)): another
    /// writer with this id committed since. Nothing was written; read the
    /// checkpoint again.
    #[error(
        "{table}: writer ID `{writer_id}`: expected {}, but {}: another writer with this ID committed since; \
         nothing was written; read the checkpoint again",
        expected_text(expected),
        found_text(found.as_deref())
    )]
    CheckpointMismatch {
        /// The table.
        table: String,
        /// The writer id.
        writer_id: String,
        /// The checkpoint expected (empty: none).
        expected: String,
        /// The id's last committed checkpoint.
        found: Option<Box<Checkpoint>>,
    },
    /// A commit was aborted because its input failed before it completed:
    /// nothing of it is visible. Its kind is the cause's.
    #[error("{0}; nothing of this commit was written")]
    CommitAborted(Box<Error>),
    /// A task of this crate panicked or was cancelled (decoding input on a
    /// blocking thread): a bug in Tributary.
    #[error("{what}: {reason}")]
    TaskFailed {
        /// The task's work.
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
            #[cfg(feature = "kafka")]
            Error::Ingest(e) => e.kind(),
            Error::NotATable { .. } | Error::InvalidInput { .. } => ErrorKind::InvalidInput,
            Error::TableExists { .. } => ErrorKind::Conflict,
            Error::Internal { .. } | Error::TaskFailed { .. } => ErrorKind::Internal,
            Error::Io { source, .. } => {
                use std::io::ErrorKind as Io;
                match source.kind() {
                    Io::NotFound | Io::PermissionDenied | Io::InvalidData | Io::InvalidInput => ErrorKind::InvalidInput,
                    _ => ErrorKind::Unavailable,
                }
            }
            Error::CheckpointMismatch { .. } => ErrorKind::Conflict,
            Error::CommitAborted(cause) => cause.kind(),
        }
    }

    /// True when a newer writer took this writer's id over
    /// ([`tributary_timeline::Error::Fenced`]): the write client is replaced,
    /// and every later commit of it fails the same way, so a caller stops it
    /// rather than retry.
    pub fn is_fenced(&self) -> bool {
        use tributary_timeline::Error::Fenced;
        match self {
            Error::CommitAborted(cause) => cause.is_fenced(),
            _ => matches!(
                self,
                Error::Timeline(Fenced { .. })
                    | Error::Writer(tributary_writer::Error::Timeline(Fenced { .. }))
                    | Error::Merge(tributary_merge::Error::Timeline(Fenced { .. }))
                    | Error::Compaction(tributary_compaction::Error::Timeline(Fenced { .. }))
            ),
        }
    }
}

/// The checkpoint a [`Error::CheckpointMismatch`] expected, in words.
fn expected_text(expected: &str) -> String {
    if expected.is_empty() { "no checkpoint".to_string() } else { format!("checkpoint `{expected}`") }
}

/// The checkpoint a [`Error::CheckpointMismatch`] found, in words.
fn found_text(found: Option<&Checkpoint>) -> String {
    match found {
        Some(c) => format!("its last committed checkpoint is `{}` (instant {})", c.checkpoint, c.instant),
        None => "it has no committed checkpoint".into(),
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
