//! The writer crate's one error type.

use tributary_format::ErrorKind;

/// Result alias of the writer crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of bucketing, input conversion and the write client.
///
/// [`Error::kind`] says what the caller can do: fix the input
/// ([`Error::BadRecord`], [`Error::InvalidInput`]), retry or start over
/// (storage and lock failures, reported through [`Error::Timeline`]), or
/// report a bug ([`Error::Task`], [`Error::Internal`]). Messages name the
/// table, the instant and the file or record involved where known.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Table metadata could not be read or written.
    #[error(transparent)]
    Timeline(#[from] tributary_timeline::Error),
    /// A Hudi format could not be encoded or decoded.
    #[error(transparent)]
    Format(#[from] tributary_format::Error),
    /// One input record is invalid; nothing of its commit becomes visible.
    #[error("{input} line {record}{}: {reason}", field.as_ref().map(|f| format!(": field `{f}`")).unwrap_or_default())]
    BadRecord {
        /// The input (file name, `stdin`, `batch`, `rows`).
        input: String,
        /// 1-based record number (line number for JSON lines).
        record: usize,
        /// The field involved, if any.
        field: Option<String>,
        /// What is wrong.
        reason: String,
    },
    /// Caller input is invalid.
    #[error("{what}: {reason}")]
    InvalidInput {
        /// The input involved.
        what: String,
        /// Why.
        reason: String,
    },
    /// Rows of a commit could not be encoded as Avro log records, when
    /// written or (where versions combine, the writer tasks encode the rows
    /// kept) at commit; the cause's kind says what to do. Abort the commit.
    #[error("{table}: instant {instant}: encoding {input}: {cause}")]
    Encode {
        /// The table.
        table: String,
        /// The commit's instant.
        instant: String,
        /// The rows: their count, and their file group when a writer task
        /// encoded them.
        input: String,
        /// The encoder's error.
        cause: Box<tributary_format::Error>,
    },
    /// A write of this commit failed earlier (that call returned why), so
    /// the commit can neither take more rows nor complete: abort it and
    /// write the rows again in a new commit. A misuse of the API.
    #[error(
        "{table}: instant {instant}: an earlier write of this commit failed; abort it and write again in a new commit"
    )]
    Failed {
        /// The table.
        table: String,
        /// The commit's instant.
        instant: String,
    },
    /// A writer task of a commit panicked, was cancelled or stopped before
    /// its input ended: a bug in Tributary. Abort the commit; nothing of it
    /// becomes visible.
    #[error("{table}: instant {instant}: writer task {task} {reason} (a bug in Tributary: please report it)")]
    Task {
        /// The table.
        table: String,
        /// The commit's instant.
        instant: String,
        /// Which writer task (0-based).
        task: usize,
        /// What happened to it.
        reason: String,
    },
    /// An invariant of the writer broke (an Arrow kernel refused rows that
    /// were already validated): a bug in Tributary. Abort the commit.
    #[error("{table}: instant {instant}: {what}: {reason} (a bug in Tributary: please report it)")]
    Internal {
        /// The table.
        table: String,
        /// The commit's instant.
        instant: String,
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
            Error::Encode { cause, .. } => cause.kind(),
            Error::BadRecord { .. } | Error::InvalidInput { .. } | Error::Failed { .. } => ErrorKind::InvalidInput,
            Error::Task { .. } | Error::Internal { .. } => ErrorKind::Internal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_say_what_to_do() {
        let bad =
            Error::BadRecord { input: "in.jsonl".into(), record: 2, field: Some("ts".into()), reason: "x".into() };
        assert_eq!(bad.kind(), ErrorKind::InvalidInput);
        assert_eq!(Error::InvalidInput { what: "tasks".into(), reason: "x".into() }.kind(), ErrorKind::InvalidInput);
        let store = tributary_timeline::Error::store(
            "put",
            "t/.hoodie/x",
            object_store::Error::Generic { store: "test", source: "disk gone".into() },
        );
        assert_eq!(Error::from(store).kind(), ErrorKind::Unavailable);
        let exists = tributary_timeline::Error::store(
            "put",
            "t/.hoodie/x",
            object_store::Error::AlreadyExists { path: "t/.hoodie/x".into(), source: "exists".into() },
        );
        assert_eq!(Error::from(exists).kind(), ErrorKind::Conflict);
        let corrupt = tributary_format::Error::Corrupt { path: "t/x.log".into(), reason: "x".into() };
        assert_eq!(Error::from(corrupt).kind(), ErrorKind::Corrupt);
        let encode = Error::Encode {
            table: "/t".into(),
            instant: "20250101000000000".into(),
            input: "batch (3 rows)".into(),
            cause: Box::new(tributary_format::Error::InvalidInput { what: "records".into(), reason: "x".into() }),
        };
        assert_eq!(encode.kind(), ErrorKind::InvalidInput);
        let task =
            Error::Task { table: "/t".into(), instant: "20250101000000000".into(), task: 1, reason: "panicked".into() };
        assert_eq!(task.kind(), ErrorKind::Internal);
        let msg = task.to_string();
        assert!(msg.contains("/t") && msg.contains("20250101000000000") && msg.contains("task 1"), "{msg}");
        let failed = Error::Failed { table: "/t".into(), instant: "i".into() };
        assert_eq!(failed.kind(), ErrorKind::InvalidInput);
        let internal = Error::Internal {
            table: "/t".into(),
            instant: "i".into(),
            what: "buffering rows".into(),
            reason: "x".into(),
        };
        assert_eq!(internal.kind(), ErrorKind::Internal);
    }
}
