//! Keys of `hoodie.properties` this library reads or writes.
#![allow(missing_docs)]

pub(crate) const NAME: &str = "hoodie.table.name";
pub(crate) const DATABASE: &str = "hoodie.database.name";
pub(crate) const TYPE: &str = "hoodie.table.type";
pub(crate) const VERSION: &str = "hoodie.table.version";
pub(crate) const INITIAL_VERSION: &str = "hoodie.table.initial.version";
pub(crate) const TIMELINE_LAYOUT: &str = "hoodie.timeline.layout.version";
pub(crate) const TIMELINE_PATH: &str = "hoodie.timeline.path";
pub(crate) const HISTORY_PATH: &str = "hoodie.timeline.history.path";
pub(crate) const RECORD_KEY: &str = "hoodie.table.recordkey.fields";
pub(crate) const PRECOMBINE: &str = "hoodie.table.precombine.field";
pub(crate) const ORDERING: &str = "hoodie.table.ordering.fields";
pub(crate) const PARTITION: &str = "hoodie.table.partition.fields";
pub(crate) const KEYGEN_TYPE: &str = "hoodie.table.keygenerator.type";
pub(crate) const KEYGEN_CLASS: &str = "hoodie.table.keygenerator.class";
pub(crate) const BASE_FORMAT: &str = "hoodie.table.base.file.format";
pub(crate) const LOG_FORMAT: &str = "hoodie.table.log.file.format";
pub(crate) const MERGE_MODE: &str = "hoodie.record.merge.mode";
pub(crate) const MERGE_STRATEGY: &str = "hoodie.record.merge.strategy.id";
pub(crate) const PAYLOAD_CLASS: &str = "hoodie.compaction.payload.class";
pub(crate) const TABLE_FORMAT: &str = "hoodie.table.format";
pub(crate) const POPULATE_META: &str = "hoodie.populate.meta.fields";
pub(crate) const HIVE_STYLE: &str = "hoodie.datasource.write.hive_style_partitioning";
pub(crate) const URL_ENCODE: &str = "hoodie.datasource.write.partitionpath.urlencode";
pub(crate) const DROP_PARTITION_COLUMNS: &str = "hoodie.datasource.write.drop.partition.columns";
pub(crate) const TIMEZONE: &str = "hoodie.table.timeline.timezone";
pub(crate) const CREATE_SCHEMA: &str = "hoodie.table.create.schema";
pub(crate) const CHECKSUM: &str = "hoodie.table.checksum";
pub(crate) const METADATA_PARTITIONS: &str = "hoodie.table.metadata.partitions";
pub(crate) const METADATA_PARTITIONS_INFLIGHT: &str = "hoodie.table.metadata.partitions.inflight";
pub(crate) const NUM_BUCKETS: &str = "hoodie.bucket.index.num.buckets";
pub(crate) const BUCKET_HASH: &str = "tributary.bucket.hash";
pub(crate) const SEQUENCE_GROUPS: &str = "tributary.merge.sequence.groups";
pub(crate) const TOMBSTONE_RETENTION: &str = "tributary.tombstone.retention";
pub(crate) const TIME_MODE: &str = "tributary.time.mode";
pub(crate) const MAX_LOGS_PER_FILE_GROUP: &str = "tributary.max.logs.per.file.group";
