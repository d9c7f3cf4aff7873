//! The ingest crate's errors.

/// Results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of an ingest job. [`Error::kind`] says what the caller can do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A record could not be written, and bad records fail the job
    /// ([`crate::OnBadRecord::Fail`]). Nothing of the open batch was
    /// committed; the table's offsets stay before the record.
    #[error("topic {topic} partition {partition} offset {offset}{}: {reason}", field.as_ref().map(|f| format!(": field `{f}`")).unwrap_or_default())]
    BadRecord {
        /// The record's topic.
        topic: String,
        /// Its partition.
        partition: i32,
        /// Its offset.
        offset: i64,
        /// The field involved, if known.
        field: Option<String>,
        /// What is wrong.
        reason: String,
    },
    /// The settings are invalid.
    #[error("{what}: {reason}")]
    InvalidInput {
        /// The setting.
        what: String,
        /// Why.
        reason: String,
    },
    /// Kafka could not be reached or refused an operation.
    #[error("kafka: {what}: {source}")]
    Kafka {
        /// The operation, with its topic and partition where there is one.
        what: String,
        /// The client's error.
        source: rdkafka::error::KafkaError,
    },
    /// An invariant of the job broke: a bug in Tributary.
    #[error("{what}: {reason} (a bug in Tributary: please report it)")]
    Internal {
        /// The step that failed.
        what: String,
        /// Why.
        reason: String,
    },
    /// Writing the table failed.
    #[error(transparent)]
    Writer(#[from] tributary_writer::Error),
}

impl Error {
    /// What the caller can do about this error.
    pub fn kind(&self) -> tributary_format::ErrorKind {
        use tributary_format::ErrorKind;
        match self {
            Error::BadRecord { .. } | Error::InvalidInput { .. } => ErrorKind::InvalidInput,
            Error::Kafka { .. } => ErrorKind::Unavailable,
            Error::Internal { .. } => ErrorKind::Internal,
            Error::Writer(e) => e.kind(),
        }
    }

    pub(crate) fn kafka(what: impl Into<String>, source: rdkafka::error::KafkaError) -> Self {
        Error::Kafka { what: what.into(), source }
    }
}
