//! What an ingest job consumes and how often it commits.

use std::collections::BTreeMap;
use std::time::Duration;

/// What to do with a record that cannot be written (malformed, or not
/// fitting the table's schema).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum OnBadRecord {
    /// Stop with an error naming the record's topic, partition, offset,
    /// field and reason. The table and its offsets stay at the last good
    /// commit. The default: nothing is lost silently.
    #[default]
    Fail,
    /// Leave the record out, count it and log its position.
    Skip,
    /// Produce the record, with headers naming its position and the
    /// reason, to this topic, then leave it out; it is counted and logged
    /// too. A commit's offsets never pass a record that was neither
    /// written nor delivered there.
    DeadLetter(String),
}

/// What a record's value holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ValueFormat {
    /// A JSON object: a row of the table, as `tributary write` takes it
    /// (`_hoodie_is_deleted: true` deletes its key).
    #[default]
    Json,
    /// A Debezium change event in JSON (with or without the converter's
    /// `schema`/`payload` wrapping): `op` c, r and u upsert `after`, d
    /// deletes the key of `before`, and the table's ordering field takes
    /// the value at `order_by`, a path into the event (`source.lsn`,
    /// `ts_ms`).
    DebeziumJson {
        /// The path, with `.` between its parts.
        order_by: String,
    },
    /// Avro binary of `schema`, a record whose fields are the table's
    /// columns (or some of them, and `_hoodie_is_deleted`), decoded
    /// with Avro's schema resolution into the table's types.
    Avro {
        /// The schema, as Avro JSON.
        schema: String,
        /// `None`: each value is a plain Avro body. `Some(id)`: each value
        /// is in Confluent's framing (magic byte 0, the schema id as 4
        /// bytes big-endian, then the body), and a value with another
        /// schema id is a bad record.
        schema_id: Option<u32>,
    },
}

/// Where a record's key comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyFrom {
    /// From the value's key fields.
    #[default]
    Value,
    /// From the message key: a JSON object holding the key fields, or,
    /// for a table with one key field, the key's text (a JSON string
    /// unquoted). It replaces what the value holds there; a message
    /// without a key is a bad record.
    MessageKey,
}

/// Where a partition with no offset in the table starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StartAt {
    /// At its first record still in Kafka.
    #[default]
    Earliest,
    /// After its last record at the moment it is first assigned.
    Latest,
}

/// An ingest job's settings ([`crate::Ingest`]).
#[derive(Debug, Clone)]
pub struct IngestSettings {
    /// `bootstrap.servers`: `host:port[,host:port...]`.
    pub brokers: String,
    /// The topics to consume.
    pub topics: Vec<String>,
    /// The consumer group. Processes with one group split the topics'
    /// partitions between them; the table records offsets per group,
    /// topic and partition.
    pub group: String,
    /// Commit once this many records are consumed (default 100,000).
    pub commit_records: usize,
    /// Commit once this much time has passed since the first record of
    /// the open batch was consumed (default 5 s).
    pub commit_interval: Duration,
    /// Commit once the open batch's values take this many bytes
    /// (default 256 MiB).
    pub commit_bytes: usize,
    /// What values hold (default [`ValueFormat::Json`]).
    pub format: ValueFormat,
    /// Where record keys come from (default [`KeyFrom::Value`]).
    pub key_from: KeyFrom,
    /// Bad records (default [`OnBadRecord::Fail`]).
    pub on_bad_record: OnBadRecord,
    /// Where partitions without an offset in the table start.
    pub start_at: StartAt,
    /// Further librdkafka consumer properties (`security.protocol`,
    /// `sasl.*`, `fetch.max.bytes`, ...). Tributary sets `group.id`,
    /// `bootstrap.servers`, `enable.auto.commit` (false) and
    /// `enable.auto.offset.store` (false) itself.
    pub kafka: BTreeMap<String, String>,
}

impl IngestSettings {
    /// Settings for consuming `topics` from `brokers` in `group`, with
    /// the defaults above.
    pub fn new(brokers: impl Into<String>, topics: Vec<String>, group: impl Into<String>) -> Self {
        Self {
            brokers: brokers.into(),
            topics,
            group: group.into(),
            commit_records: 100_000,
            commit_interval: Duration::from_secs(5),
            commit_bytes: 256 << 20,
            format: ValueFormat::Json,
            key_from: KeyFrom::Value,
            on_bad_record: OnBadRecord::Fail,
            start_at: StartAt::Earliest,
            kafka: BTreeMap::new(),
        }
    }
}
