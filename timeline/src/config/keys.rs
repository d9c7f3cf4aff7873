//! Keys of `hoodie.properties` this library reads or writes.
#![allow(missing_docs)]

pub const NAME: &str = "hoodie.table.name";
pub const DATABASE: &str = "hoodie.database.name";
pub const TYPE: &str = "hoodie.table.type";
pub const VERSION: &str = "hoodie.table.version";
pub const INITIAL_VERSION: &str = "hoodie.table.initial.version";
pub const TIMELINE_LAYOUT: &str = "hoodie.timeline.layout.version";
pub const TIMELINE_PATH: &str = "hoodie.timeline.path";
pub const HISTORY_PATH: &str = "hoodie.timeline.history.path";
pub const RECORD_KEY: &str = "hoodie.table.recordkey.fields";
pub const PRECOMBINE: &str = "hoodie.table.precombine.field";
pub const ORDERING: &str = "hoodie.table.ordering.fields";
pub const PARTITION: &str = "hoodie.table.partition.fields";
pub const KEYGEN_TYPE: &str = "hoodie.table.keygenerator.type";
pub const KEYGEN_CLASS: &str = "hoodie.table.keygenerator.class";
pub const BASE_FORMAT: &str = "hoodie.table.base.file.format";
pub const LOG_FORMAT: &str = "hoodie.table.log.file.format";
pub const MERGE_MODE: &str = "hoodie.record.merge.mode";
pub const MERGE_STRATEGY: &str = "hoodie.record.merge.strategy.id";
pub const PAYLOAD_CLASS: &str = "hoodie.compaction.payload.class";
pub const POPULATE_META: &str = "hoodie.populate.meta.fields";
pub const HIVE_STYLE: &str = "hoodie.datasource.write.hive_style_partitioning";
pub const URL_ENCODE: &str = "hoodie.datasource.write.partitionpath.urlencode";
pub const DROP_PARTITION_COLUMNS: &str = "hoodie.datasource.write.drop.partition.columns";
pub const TIMEZONE: &str = "hoodie.table.timeline.timezone";
pub const CREATE_SCHEMA: &str = "hoodie.table.create.schema";
pub const CHECKSUM: &str = "hoodie.table.checksum";
pub const METADATA_PARTITIONS: &str = "hoodie.table.metadata.partitions";
pub const METADATA_PARTITIONS_INFLIGHT: &str = "hoodie.table.metadata.partitions.inflight";
pub const NUM_BUCKETS: &str = "hoodie.bucket.index.num.buckets";
pub const BUCKET_HASH: &str = "tributary.bucket.hash";
pub const SEQUENCE_GROUPS: &str = "tributary.merge.sequence.groups";
pub const TOMBSTONE_RETENTION: &str = "tributary.tombstone.retention";
pub const TIME_MODE: &str = "tributary.time.mode";
