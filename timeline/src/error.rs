//! The timeline crate's one error type.

use std::time::Duration;

pub use tributary_format::ErrorKind;

/// Result alias used throughout the timeline crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while reading or writing table metadata.
///
/// Variants say what the caller can do: fix the input ([`Error::InvalidConfig`],
/// [`Error::InvalidName`], [`Error::InvalidInput`]), retry later
/// ([`Error::LockTimeout`], [`Error::Store`]), or treat the table as damaged
/// ([`Error::Corrupt`]). Messages name the path, key or instant involved.
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
    /// A file that must be created fresh already exists.
    #[error("{path} already exists")]
    AlreadyExists {
        /// The existing object.
        path: String,
    },
    /// Metadata on storage is damaged or contradicts itself.
    #[error("{path}: corrupt: {reason}")]
    Corrupt {
        /// The damaged object.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The table lock could not be taken in time.
    #[error("timed out after {waited:?} waiting for the table lock {lock}")]
    LockTimeout {
        /// Which lock.
        lock: String,
        /// How long we waited.
        waited: Duration,
    },
    /// A lease lock expired and was taken by another owner while we held it.
    #[error("lost the table lock {lock}: {reason}")]
    LockLost {
        /// Which lock.
        lock: String,
        /// What happened.
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
    /// An object-store call failed.
    #[error("{op} {path}: {source}")]
    Store {
        /// The operation ("get", "put", "list", ...).
        op: &'static str,
        /// The object or prefix.
        path: String,
        /// The underlying error.
        #[source]
        source: object_store::Error,
    },
    /// A local OS call failed (only the local file lock and durable store use these).
    #[error("{op} {path}: {source}")]
    Io {
        /// The operation.
        op: &'static str,
        /// The local path.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A Hudi file format (timeline metadata, schema) could not be encoded or decoded.
    #[error(transparent)]
    Format(#[from] tributary_format::Error),
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
            Error::AlreadyExists { .. } | Error::LockLost { .. } | Error::Withdrawn { .. } | Error::Fenced { .. } => {
                ErrorKind::Conflict
            }
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            // A write to a missing object's place fails only when the
            // bucket or container itself is missing.
            Error::Store { op: "create" | "put", source: object_store::Error::NotFound { .. }, .. } => {
                ErrorKind::InvalidInput
            }
            Error::Store { source, .. } => match source {
                // Credentials, permissions and options are the caller's to fix.
                object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. }
                | object_store::Error::UnknownConfigurationKey { .. }
                | object_store::Error::InvalidPath { .. }
                | object_store::Error::NotSupported { .. }
                | object_store::Error::NotImplemented { .. } => ErrorKind::InvalidInput,
                _ => ErrorKind::Unavailable,
            },
            Error::LockTimeout { .. } | Error::Io { .. } => ErrorKind::Unavailable,
            Error::Format(e) => e.kind(),
        }
    }

    /// Wraps an object-store error, naming the operation and path.
    pub fn store(op: &'static str, path: impl ToString, source: object_store::Error) -> Self {
        match source {
            object_store::Error::AlreadyExists { .. } => Error::AlreadyExists { path: path.to_string() },
            source => Error::Store { op, path: path.to_string(), source },
        }
    }

    /// Wraps a Parquet error met reading the file at `path`: the store's
    /// error when one lies beneath it, else corruption of the file.
    pub fn parquet(path: &str, e: parquet::errors::ParquetError) -> Self {
        match e {
            parquet::errors::ParquetError::External(inner) => match inner.downcast::<object_store::Error>() {
                Ok(store) => Error::store("get", path, *store),
                Err(other) => Error::Corrupt { path: path.to_string(), reason: other.to_string() },
            },
            e => Error::Corrupt { path: path.to_string(), reason: e.to_string() },
        }
    }

    /// Wraps a local IO error, naming the operation and path.
    pub fn io(op: &'static str, path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        Error::Io { op, path: path.as_ref().display().to_string(), source }
    }

    /// Whether a store error may pass if the operation is tried again: a
    /// failure reported by the store's client after its own retries (a
    /// timeout, a dropped connection, a 5xx), or a task that did not finish.
    /// Answers about the object (not found, already exists, precondition)
    /// and errors of configuration or permission are not.
    pub fn is_transient(source: &object_store::Error) -> bool {
        matches!(source, object_store::Error::Generic { .. } | object_store::Error::JoinError { .. })
    }

    /// True when the error reports an object that was not found.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Store { source: object_store::Error::NotFound { .. }, .. })
    }
}
