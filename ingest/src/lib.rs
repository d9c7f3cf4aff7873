//! Exactly-once ingest from Kafka into a Tributary table, by many processes
//! on many hosts at once.
//!
//! An [`Ingest`] job consumes topics in a consumer group and commits every
//! N records or T seconds. Each commit records, in the same instant, the next
//! offset of every partition it covers, under a writer id per group, topic
//! and partition (`kafka.<group>.<topic>.<partition>`), which the job took
//! over when Kafka assigned it the partition. A restarted job resumes from
//! those offsets, not from Kafka's group offsets (which it also commits, for
//! monitoring). A job that lost a partition in a rebalance cannot commit it
//! any more: the new owner's takeover fences it.
//!
//! Values are JSON objects, decoded and checked exactly as `tributary write`
//! decodes JSON lines, Debezium change events, or Avro, plain or in
//! Confluent's framing ([`ValueFormat`]). Record keys come from the value
//! or from the message key ([`KeyFrom`]). A bad
//! record fails the job, or is skipped or delivered to a dead-letter topic
//! ([`OnBadRecord`]).

#![warn(unreachable_pub)]

mod batch;
mod commit;
mod context;
mod debezium;
mod error;
mod ingest;
mod position;
mod settings;
mod stats;
mod values;

pub use error::{Error, Result};
pub use ingest::Ingest;
pub use settings::{IngestSettings, KeyFrom, OnBadRecord, StartAt, ValueFormat};
pub use stats::{IngestStats, IngestSummary};
