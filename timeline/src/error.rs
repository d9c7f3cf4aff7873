//! The timeline crate's one error type.

pub use tributary_format::ErrorKind;

/// Result alias used throughout the timeline crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while reading or writing table metadata.
///
/// Variants say what the caller can do: fix the input ([`Error::InvalidConfig`],
/// [`Error::InvalidName`], [`Error::InvalidInput`]), retry later
/// ([`Error::Storage`]: a store call or the table lock), or treat the table
/// as damaged ([`Error::Corrupt`]). Messages name the path, key or instant involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A required `hoodie.properties` key is absent.
    #[error("{path}: missing required key `{key}`")]
    MissingConfig {
        /// The properties file.
        path: String,
        /// The missing key.
        key: String,
    },
    /// A `hoodie.properties` key holds a value we cannot accept.
    #[error("{path}: bad value for `{key}`: {reason}")]
    InvalidConfig {
        /// The properties file.
        path: String,
        /// The offending key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A table version this build cannot read or write.
    #[error("{path}: unsupported table version {version} (key `hoodie.table.version`); supported: {supported}")]
    UnsupportedVersion {
        /// The properties file.
        path: String,
        /// The version found.
        version: String,
        /// Versions this build supports.
        supported: &'static str,
    },
    /// A file or instant name does not follow the Hudi naming rules.
    #[error("invalid {kind} `{name}`: {reason}")]
    InvalidName {
        /// What was being parsed ("instant time", "log file name", ...).
        kind: &'static str,
        /// The text that failed to parse.
        name: String,
        /// Why it failed.
        reason: String,
    },
    /// Caller-supplied input (schema, field names, options) is invalid.
    #[error("{what}: {reason}")]
    InvalidInput {
        /// The input involved, e.g. a schema file or an option name.
        what: String,
        /// Why it is invalid.
        reason: String,
    },
    /// Metadata on storage is damaged or contradicts itself.
    #[error("{path}: corrupt: {reason}")]
    Corrupt {
        /// The damaged object.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The operation can no longer succeed: a recovery or another actor has
    /// withdrawn what it depended on. Start over.
    #[error("{what}: {reason}")]
    Withdrawn {
        /// The instant or object involved.
        what: String,
        /// What happened.
        reason: String,
    },
    /// A writer whose writer id a newer writer took over tried to complete
    /// a commit: the takeover raised the id's generation above this
    /// writer's, so the commit is refused before it becomes visible (its
    /// caller withdraws it). The client is replaced: every later commit of
    /// it fails the same way. Stop it; or, when the newer writer is known to
    /// be gone, register it again (which takes the id back) and resume from
    /// the checkpoint that returns.
    #[error(
        "{table}: instant {instant}: writer ID `{writer_id}` was taken over by a newer writer (generation \
         {generation}); this writer holds generation {held}, so its commit is withdrawn and nothing of it becomes \
         visible; this writer is replaced: stop it, or register it again to take the ID back and resume from the \
         checkpoint that returns"
    )]
    Fenced {
        /// The table.
        table: String,
        /// The commit's requested instant.
        instant: String,
        /// The writer id.
        writer_id: String,
        /// The id's generation now, set by the newer writer.
        generation: u64,
        /// The generation this writer registered (0: it never registered).
        held: u64,
    },
    /// A commit whose work began from its writer id's committed checkpoint
    /// `began` tried to complete after another commit of the id recorded
    /// `now` ([`crate::CommitFence::Checkpoint`]): its work is stale, so it is
    /// refused before it becomes visible (its caller withdraws it). Read
    /// the checkpoint again and redo the work from there.
    #[error(
        "{table}: instant {instant}: writer ID `{writer_id}` recorded checkpoint `{now}` since this commit began \
         from `{began}`, so its commit is withdrawn and nothing of it becomes visible; read the checkpoint again and \
         start over from it",
        began = .checkpoints.0,
        now = .checkpoints.1
    )]
    Overtaken {
        /// The table.
        table: String,
        /// The commit's requested instant.
        instant: String,
        /// The writer id.
        writer_id: String,
        /// The checkpoint the commit began from, and the id's committed
        /// checkpoint now (empty: none).
        checkpoints: Box<(String, String)>,
    },
    /// A commit would pass the table's bound on uncompacted logs per file
    /// group (`tributary.max.logs.per.file.group`) and waited for
    /// compaction as long as it may: nothing of it is visible. Retry once
    /// compaction has caught up (is a compactor, `tributary serve`,
    /// running?).
    #[error(
        "{table}: commit {instant}: file group {file_group} holds {logs} uncompacted log files, at the table's bound \
         of {bound}; waited {waited_ms} ms for compaction, which has not caught up (is a compactor running?); nothing \
         of the commit is visible, retry it"
    )]
    Backpressure {
        /// The table.
        table: String,
        /// The commit's requested instant.
        instant: String,
        /// The file group (`partition/file id`).
        file_group: String,
        /// Its committed, uncompacted log files.
        logs: usize,
        /// The bound.
        bound: usize,
        /// How long the commit waited.
        waited_ms: u64,
    },
    /// A Hudi file format (timeline metadata, schema) could not be encoded or decoded.
    #[error(transparent)]
    Format(#[from] tributary_format::Error),
    /// Reaching the table's store, the local file system or the table lock
    /// failed ([`tributary_storage::Error`]: an object-store call, a create
    /// refused because the file exists, a lock timed out or lost, ...).
    #[error(transparent)]
    Storage(#[from] tributary_storage::Error),
}

impl Error {
    /// What the caller can do about this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::MissingConfig { .. }
            | Error::InvalidConfig { .. }
            | Error::UnsupportedVersion { .. }
            | Error::InvalidName { .. }
            | Error::InvalidInput { .. } => ErrorKind::InvalidInput,
            Error::Withdrawn { .. } | Error::Fenced { .. } | Error::Overtaken { .. } => ErrorKind::Conflict,
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            Error::Backpressure { .. } => ErrorKind::Unavailable,
            Error::Format(e) => e.kind(),
            Error::Storage(e) => e.kind(),
        }
    }

    /// Wraps an object-store error, naming the operation and path
    /// ([`tributary_storage::Error::store`]).
    pub fn store(op: &'static str, path: impl ToString, source: object_store::Error) -> Self {
        tributary_storage::Error::store(op, path, source).into()
    }

    /// Wraps a Parquet error met reading the file at `path`
    /// ([`tributary_storage::Error::parquet`]).
    pub fn parquet(path: &str, e: parquet::errors::ParquetError) -> Self {
        tributary_storage::Error::parquet(path, e).into()
    }

    /// Wraps a local IO error, naming the operation and path.
    pub fn io(op: &'static str, path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        tributary_storage::Error::io(op, path, source).into()
    }

    /// Whether a store error may pass if the operation is tried again
    /// ([`tributary_storage::Error::is_transient`]).
    pub fn is_transient(source: &object_store::Error) -> bool {
        tributary_storage::Error::is_transient(source)
    }

    /// True when the error reports an object that was not found.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Storage(e) if e.is_not_found())
    }
}
