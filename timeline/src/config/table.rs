//! [`TableConfig`]: the typed contents of `hoodie.properties`, parsed once
//! from its keys and values, validated, and rendered back.

use std::collections::BTreeMap;

pub use tributary_format::SequenceGroup;
use tributary_format::TableSchema;

use crate::config::bucket::{BucketHash, BucketSpec};
use crate::config::keys;
use crate::config::merge_mode::{MergeMode, OVERWRITE_PAYLOAD, SEQUENCE_GROUPS_STRATEGY_ID};
use crate::config::properties_text::{
    ChecksumState, checksum_state, parse_properties, render_properties, table_checksum,
};
use crate::config::time_mode::TimeMode;
use crate::config::tombstone::TombstoneRetention;
use crate::error::{Error, Result};
use crate::layout;

/// Table versions this build reads.
pub(crate) const SUPPORTED_VERSIONS: &str = "6, 8, 9";

/// Copy-on-write or merge-on-read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableType {
    /// Base files only.
    CopyOnWrite,
    /// Base files plus log files.
    MergeOnRead,
}

impl TableType {
    fn name(self) -> &'static str {
        match self {
            TableType::CopyOnWrite => "COPY_ON_WRITE",
            TableType::MergeOnRead => "MERGE_ON_READ",
        }
    }
}

/// The typed contents of `.hoodie/hoodie.properties`.
#[derive(Debug, Clone, PartialEq)]
pub struct TableConfig {
    /// `hoodie.table.name`.
    pub name: String,
    /// `hoodie.database.name`, if set.
    pub database: Option<String>,
    /// `hoodie.table.type`.
    pub table_type: TableType,
    /// `hoodie.table.version` (6, 8 or 9).
    pub version: u32,
    /// `hoodie.timeline.layout.version` (1 for v6, 2 for v8 and v9).
    pub timeline_layout: u32,
    /// `hoodie.timeline.path`, relative to `.hoodie/` (v8).
    pub timeline_path: String,
    /// `hoodie.timeline.history.path`, relative to the timeline folder (v8):
    /// where Java writers archive old instants (the LSM history timeline).
    pub history_path: String,
    /// `hoodie.table.recordkey.fields`.
    pub record_key_fields: Vec<String>,
    /// The ordering (event-time, precombine) fields, in order; empty when
    /// none. Hudi 1.1+ compares several element by element.
    pub ordering_fields: Vec<String>,
    /// `hoodie.table.partition.fields`; empty when unpartitioned.
    pub partition_fields: Vec<String>,
    /// `hoodie.datasource.write.hive_style_partitioning`.
    pub hive_style_partitioning: bool,
    /// `hoodie.populate.meta.fields`.
    pub populate_meta_fields: bool,
    /// `hoodie.record.merge.mode` (inferred from the payload class for v6).
    pub merge_mode: MergeMode,
    /// `hoodie.record.merge.strategy.id`.
    pub merge_strategy_id: String,
    /// Bucket index settings, when the table was made by Tributary.
    pub bucket: Option<BucketSpec>,
    /// Sequence groups (merge mode CUSTOM with Tributary's strategy id).
    pub sequence_groups: Vec<SequenceGroup>,
    /// `hoodie.table.create.schema` (Avro JSON without meta fields), if set.
    pub create_schema: Option<String>,
    /// How long compaction keeps tombstones (`tributary.tombstone.retention`).
    pub tombstone_retention: TombstoneRetention,
    /// The time mode the table's writers use unless told otherwise
    /// (`tributary.time.mode`); `None` for a table that records none (one
    /// another engine made), whose writers use wait-for-skew.
    pub time_mode: Option<TimeMode>,
    /// The bound on committed, uncompacted log files per file group that
    /// writers wait at for compaction (`tributary.max.logs.per.file.group`;
    /// `None`, written `0`, for no bound). Absent from a table's
    /// properties, [`DEFAULT_MAX_LOGS_PER_FILE_GROUP`]; `docs/design.md`,
    /// "Backpressure".
    pub max_logs_per_file_group: Option<usize>,
    /// Whether writes add the columns their records bring
    /// (`tributary.schema.evolve.on.write`), as `write --evolve-schema`
    /// does for one write; `docs/design.md`, "Schema evolution".
    pub evolve_on_write: bool,
    /// Every other key, kept verbatim.
    pub other: BTreeMap<String, String>,
}

/// The CDC supplemental logging mode of Tributary's change log
/// (`hoodie.table.cdc.supplemental.logging.mode`): each change record
/// holds the row before and after, so readers need no other file.
pub const CHANGE_LOG_MODE: &str = "DATA_BEFORE_AFTER";

/// The writer id of change-log commits: its checkpoint is where the next
/// change-log window begins (the previous change-log commit's instant),
/// and registering it fences an older change-log writer. The cleaner
/// keeps what that window needs.
pub const CHANGE_LOG_WRITER: &str = "tributary-change-log";

/// The extra-metadata key under which a change-log commit records where
/// its window began (the previous change-log commit's instant); its own
/// instant, the window's end, is its checkpoint.
pub const CHANGE_LOG_BEGIN_KEY: &str = "tributary.change.log.begin";

/// The `operationType` of a data commit on a table that keeps a change
/// log. Hudi's CDC query takes a commit's changes from its write stats
/// only for operations that yield changes (`WriteOperationType.yieldChanges`);
/// `INSERT_PREPPED` is not one, and no reader does anything else with it
/// that `UPSERT` would not get. The changes are in the change-log commits.
pub const CHANGE_LOGGED_OPERATION: &str = "INSERT_PREPPED";

/// Table versions a new table may have: 8 (Hudi 1.0.x) or 9 (Hudi 1.1 and
/// later); `docs/interop.md`, "Table version 9".
pub const WRITABLE_VERSIONS: [u32; 2] = [8, 9];

/// The version of a new table unless told otherwise: 8, which every Hudi
/// 1.x reader reads (1.0.x readers refuse 9).
pub const DEFAULT_TABLE_VERSION: u32 = 8;

/// What a new table needs; everything else takes Hudi's defaults for its
/// version.
#[derive(Debug, Clone)]
pub struct NewTableConfig {
    /// `hoodie.table.version`: one of [`WRITABLE_VERSIONS`].
    pub version: u32,
    /// Table name (letters, digits, `_`).
    pub name: String,
    /// Optional database name.
    pub database: Option<String>,
    /// Record key fields, in declared order: one, or several for a
    /// composite key (`field:value,...`, Hudi's complex key format).
    pub record_key_fields: Vec<String>,
    /// Ordering (event-time) fields: one, or (table version 9) several,
    /// compared element by element.
    pub ordering_fields: Vec<String>,
    /// Optional partition field.
    pub partition_field: Option<String>,
    /// Whether partition folders are named `field=value`.
    pub hive_style_partitioning: bool,
    /// Merge mode.
    pub merge_mode: MergeMode,
    /// Buckets.
    pub bucket: BucketSpec,
    /// Sequence groups; when non-empty the merge mode is CUSTOM.
    pub sequence_groups: Vec<SequenceGroup>,
    /// The table's Avro schema JSON, without meta fields.
    pub schema_json: String,
    /// How long compaction keeps tombstones.
    pub tombstone_retention: TombstoneRetention,
    /// The time mode to record, if any.
    pub time_mode: Option<TimeMode>,
    /// The bound on uncompacted logs per file group; `None` for none.
    pub max_logs_per_file_group: Option<usize>,
    /// Whether writes evolve the schema by default.
    pub evolve_on_write: bool,
    /// Whether the table keeps a change log that Hudi's CDC query reads
    /// ([`TableConfig::change_log`]).
    pub change_log: bool,
}

/// The bound on committed, uncompacted log files per file group of a
/// table that names none: a reader merges at most this many logs per file
/// group, and writers wait for compaction there (`docs/design.md`,
/// "Backpressure").
pub const DEFAULT_MAX_LOGS_PER_FILE_GROUP: usize = 256;

impl NewTableConfig {
    /// A table keyed by `record_key` (one field, or several separated by
    /// `,` as in `hoodie.table.recordkey.fields`) and ordered by
    /// `ordering_field`, with defaults: unpartitioned, event-time merging,
    /// 16 murmur3 buckets.
    pub fn new(name: &str, record_key: &str, ordering_field: &str, schema_json: &str) -> Self {
        Self {
            version: DEFAULT_TABLE_VERSION,
            name: name.into(),
            database: None,
            record_key_fields: split_fields(record_key),
            ordering_fields: split_fields(ordering_field),
            partition_field: None,
            hive_style_partitioning: true,
            merge_mode: MergeMode::EventTime,
            bucket: BucketSpec { num_buckets: 16, hash: BucketHash::Murmur3 },
            sequence_groups: Vec::new(),
            schema_json: schema_json.into(),
            tombstone_retention: TombstoneRetention::Forever,
            time_mode: None,
            max_logs_per_file_group: Some(DEFAULT_MAX_LOGS_PER_FILE_GROUP),
            evolve_on_write: false,
            change_log: false,
        }
    }
}

/// Field names separated by `,` (surrounding spaces and empty names dropped),
/// as Hudi lists them in `hoodie.table.recordkey.fields`.
pub fn split_fields(list: &str) -> Vec<String> {
    list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
}

/// The `hoodie.table.keygenerator.type` Hudi 1.x infers for a version-8
/// table (`KeyGenUtils.inferKeyGeneratorType`): `NON_PARTITION` for an
/// unpartitioned table, whose generator also writes several key fields in
/// the complex format; for a partitioned one `SIMPLE` with one key field
/// and `COMPLEX` with several. Version-8 tables record the type only; the
/// deprecated `hoodie.table.keygenerator.class` is not written (Hudi
/// 1.0.x's own v8 tables lack it too).
pub(crate) fn key_generator_type(partitioned: bool, key_fields: usize) -> &'static str {
    let [simple, complex, non_partition] = KEY_GENERATOR_TYPES;
    match (partitioned, key_fields) {
        (false, _) => non_partition,
        (true, 0 | 1) => simple,
        (true, _) => complex,
    }
}

/// The key generator types (`hoodie.table.keygenerator.type`) whose record
/// keys and partition paths Tributary forms as they do (`format/src/key.rs`;
/// a partition folder is the partition field's value, or `field=value`):
/// simple, complex and non-partitioned, in that order.
const KEY_GENERATOR_TYPES: [&str; 3] = ["SIMPLE", "COMPLEX", "NON_PARTITION"];

/// The partition folder of rows whose partition value is null (Hive's).
pub const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// The key generator classes (`hoodie.table.keygenerator.class`, which
/// tables older than version 8 record) of [`KEY_GENERATOR_TYPES`].
const KEY_GENERATOR_CLASSES: [&str; 6] = [
    "org.apache.hudi.keygen.SimpleKeyGenerator",
    "org.apache.hudi.keygen.SimpleAvroKeyGenerator",
    "org.apache.hudi.keygen.ComplexKeyGenerator",
    "org.apache.hudi.keygen.ComplexAvroKeyGenerator",
    "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
    "org.apache.hudi.keygen.NonpartitionedAvroKeyGenerator",
];

struct Props<'a> {
    path: &'a str,
    map: BTreeMap<String, String>,
}

impl Props<'_> {
    fn take(&mut self, key: &str) -> Option<String> {
        self.map.remove(key)
    }

    fn required(&mut self, key: &str) -> Result<String> {
        self.take(key).ok_or_else(|| Error::MissingConfig { path: self.path.to_string(), key: key.to_string() })
    }

    fn bad(&self, key: &str, reason: impl Into<String>) -> Error {
        Error::InvalidConfig { path: self.path.to_string(), key: key.to_string(), reason: reason.into() }
    }

    fn bool(&mut self, key: &str, default: bool) -> Result<bool> {
        match self.take(key).as_deref() {
            None => Ok(default),
            Some("true") => Ok(true),
            Some("false") => Ok(false),
            Some(v) => Err(self.bad(key, format!("expected true or false, got `{v}`"))),
        }
    }

    fn list(&mut self, key: &str) -> Vec<String> {
        self.take(key).map(|v| split_fields(&v)).unwrap_or_default()
    }
}

impl TableConfig {
    /// Parses and validates `hoodie.properties` text. `path` names the file in errors.
    pub fn parse(text: &str, path: &str) -> Result<Self> {
        Self::from_properties(parse_properties(text, path)?, path)
    }

    /// Validates the keys and values of a `hoodie.properties` file already
    /// read (`parse_properties`). `path` names the file in errors.
    pub fn from_properties(properties: BTreeMap<String, String>, path: &str) -> Result<Self> {
        let mut p = Props { path, map: properties };
        let checksum = checksum_state(&p.map);

        let version_text = p.required(keys::VERSION)?;
        let version: u32 = match version_text.trim().parse() {
            Ok(v @ (6 | 8 | 9)) => v,
            _ => {
                return Err(Error::UnsupportedVersion {
                    path: path.to_string(),
                    version: version_text,
                    supported: SUPPORTED_VERSIONS,
                });
            }
        };
        let name = p.required(keys::NAME)?;
        if name.trim().is_empty() {
            return Err(p.bad(keys::NAME, "empty table name"));
        }
        let database = p.take(keys::DATABASE).filter(|d| !d.is_empty());
        let table_type = match p.take(keys::TYPE).as_deref() {
            None | Some("COPY_ON_WRITE") => TableType::CopyOnWrite,
            Some("MERGE_ON_READ") => TableType::MergeOnRead,
            Some(v) => {
                return Err(p.bad(keys::TYPE, format!("expected COPY_ON_WRITE or MERGE_ON_READ, got `{v}`")));
            }
        };
        let default_layout = if version >= 8 { 2 } else { 1 };
        let timeline_layout = match p.take(keys::TIMELINE_LAYOUT) {
            None => default_layout,
            Some(v) => match v.trim().parse::<u32>() {
                Ok(l @ (1 | 2)) if (l == 2) == (version >= 8) => l,
                _ => {
                    return Err(p.bad(keys::TIMELINE_LAYOUT, format!("`{v}` does not match table version {version}")));
                }
            },
        };
        let timeline_path = p.take(keys::TIMELINE_PATH).unwrap_or_else(|| layout::DEFAULT_TIMELINE_FOLDER.into());
        if timeline_path.is_empty() || timeline_path.contains("..") {
            return Err(p.bad(keys::TIMELINE_PATH, format!("`{timeline_path}` is not a folder name")));
        }
        let history_path = p.take(keys::HISTORY_PATH).unwrap_or_else(|| layout::DEFAULT_HISTORY_FOLDER.into());
        if history_path.is_empty() || history_path.contains("..") {
            return Err(p.bad(keys::HISTORY_PATH, format!("`{history_path}` is not a folder name")));
        }
        let record_key_fields = p.list(keys::RECORD_KEY);
        // Hudi 1.1 and later write `hoodie.table.ordering.fields` (a list),
        // also into version-8 tables; earlier versions the precombine field.
        let ordering_field = match (p.take(keys::ORDERING), p.take(keys::PRECOMBINE)) {
            (Some(o), _) if !o.trim().is_empty() => Some((keys::ORDERING, o)),
            (_, Some(o)) if !o.trim().is_empty() => Some((keys::PRECOMBINE, o)),
            _ => None,
        };
        let ordering_fields = ordering_field.map(|(_, o)| split_fields(&o)).unwrap_or_default();
        // Hudi records a custom key generator's partition type after the
        // field (`field:SIMPLE`, `field:TIMESTAMP`); the field is what precedes it.
        let partition_fields: Vec<String> = p
            .list(keys::PARTITION)
            .into_iter()
            .map(|f| f.split_once(':').map_or(f.clone(), |(name, _)| name.to_string()))
            .collect();
        let hive_style_partitioning = p.bool(keys::HIVE_STYLE, false)?;
        let populate_meta_fields = p.bool(keys::POPULATE_META, true)?;
        let payload = p.map.get(keys::PAYLOAD_CLASS).cloned();
        let (merge_mode, merge_strategy_id) = match version {
            8.. => {
                let mode_text = p.required(keys::MERGE_MODE)?;
                let mode = match mode_text.as_str() {
                    "EVENT_TIME_ORDERING" => MergeMode::EventTime,
                    "COMMIT_TIME_ORDERING" => MergeMode::CommitTime,
                    "CUSTOM" => MergeMode::Custom,
                    v => {
                        return Err(p.bad(
                            keys::MERGE_MODE,
                            format!("expected EVENT_TIME_ORDERING, COMMIT_TIME_ORDERING or CUSTOM, got `{v}`"),
                        ));
                    }
                };
                let strategy = p.take(keys::MERGE_STRATEGY).unwrap_or_else(|| mode.strategy_id().into());
                if mode != MergeMode::Custom && strategy != mode.strategy_id() {
                    return Err(p.bad(keys::MERGE_STRATEGY, format!("`{strategy}` does not match merge mode {mode}")));
                }
                (mode, strategy)
            }
            _ => {
                let mode = match payload.as_deref() {
                    Some(OVERWRITE_PAYLOAD) => MergeMode::CommitTime,
                    _ if ordering_fields.is_empty() => MergeMode::CommitTime,
                    _ => MergeMode::EventTime,
                };
                (mode, mode.strategy_id().to_string())
            }
        };
        if merge_mode == MergeMode::EventTime && ordering_fields.is_empty() && version >= 8 {
            return Err(Error::MissingConfig { path: path.to_string(), key: keys::PRECOMBINE.into() });
        }
        let bucket = match p.take(keys::NUM_BUCKETS) {
            None => None,
            Some(n) => {
                let num_buckets = match n.trim().parse::<u32>() {
                    Ok(v) if v > 0 => v,
                    _ => {
                        return Err(p.bad(keys::NUM_BUCKETS, format!("expected a positive integer, got `{n}`")));
                    }
                };
                // Tributary always records its hash with the count; a count
                // without it was written by someone else, for Hudi's writers.
                let hash = match p.take(keys::BUCKET_HASH) {
                    None => BucketHash::HudiJava,
                    Some(h) => BucketHash::parse(&h)
                        .ok_or_else(|| p.bad(keys::BUCKET_HASH, format!("expected murmur3 or hudi-java, got `{h}`")))?,
                };
                Some(BucketSpec { num_buckets, hash })
            }
        };
        if let Some(tz) = p.map.get(keys::TIMEZONE)
            && tz != "UTC"
            && tz != "LOCAL"
        {
            return Err(p.bad(keys::TIMEZONE, format!("expected UTC or LOCAL, got `{tz}`")));
        }
        if checksum == ChecksumState::Invalid {
            let sum = p.map.get(keys::CHECKSUM).cloned().unwrap_or_default();
            let expected = table_checksum(database.as_deref(), &name);
            return Err(p.bad(keys::CHECKSUM, format!("`{sum}` does not match table `{name}` (expected {expected})")));
        }
        let sequence_groups = match p.take(keys::SEQUENCE_GROUPS) {
            None => Vec::new(),
            Some(v) => SequenceGroup::parse_list(&v).map_err(|e| p.bad(keys::SEQUENCE_GROUPS, e))?,
        };
        if merge_mode == MergeMode::Custom
            && merge_strategy_id == SEQUENCE_GROUPS_STRATEGY_ID
            && sequence_groups.is_empty()
        {
            return Err(Error::MissingConfig { path: path.to_string(), key: keys::SEQUENCE_GROUPS.into() });
        }
        let tombstone_retention = match p.take(keys::TOMBSTONE_RETENTION) {
            None => TombstoneRetention::Forever,
            Some(v) => TombstoneRetention::parse(&v).map_err(|e| p.bad(keys::TOMBSTONE_RETENTION, e))?,
        };
        let time_mode = match p.take(keys::TIME_MODE) {
            None => None,
            Some(v) => Some(
                TimeMode::parse(&v)
                    .ok_or_else(|| p.bad(keys::TIME_MODE, "expected `wait-for-skew` or `hybrid-logical`"))?,
            ),
        };
        let max_logs_per_file_group = match p.take(keys::MAX_LOGS_PER_FILE_GROUP) {
            None => Some(DEFAULT_MAX_LOGS_PER_FILE_GROUP),
            Some(v) => match v.trim().parse::<usize>() {
                Ok(0) => None,
                Ok(n) => Some(n),
                Err(_) => return Err(p.bad(keys::MAX_LOGS_PER_FILE_GROUP, "expected a count (0 for no bound)")),
            },
        };
        let evolve_on_write = match p.take(keys::EVOLVE_ON_WRITE).as_deref().map(str::trim) {
            None | Some("false") => false,
            Some("true") => true,
            Some(_) => return Err(p.bad(keys::EVOLVE_ON_WRITE, "expected true or false")),
        };
        let unknown: Vec<&String> = p.map.keys().filter(|k| k.starts_with("tributary.")).collect();
        if let Some(k) = unknown.first() {
            return Err(p.bad(k, "unknown tributary key (written by a newer version?)"));
        }
        let create_schema = p.take(keys::CREATE_SCHEMA).filter(|s| !s.is_empty());
        Ok(Self {
            name,
            database,
            table_type,
            version,
            timeline_layout,
            timeline_path,
            history_path,
            record_key_fields,
            ordering_fields,
            partition_fields,
            hive_style_partitioning,
            populate_meta_fields,
            merge_mode,
            merge_strategy_id,
            bucket,
            sequence_groups,
            create_schema,
            tombstone_retention,
            time_mode,
            max_logs_per_file_group,
            evolve_on_write,
            other: p.map,
        })
    }

    /// The configuration of a new Merge-on-Read table of version
    /// `new.version` (8 or 9). A version-9 table records its merge mode
    /// alone (no payload class, and a strategy id only for CUSTOM) and its
    /// ordering field under `hoodie.table.ordering.fields`, as Hudi 1.1
    /// creates one.
    pub fn new_table(new: &NewTableConfig) -> Self {
        let mut other = BTreeMap::new();
        let mut put = |k: &str, v: &str| {
            other.insert(k.to_string(), v.to_string());
        };
        put(keys::INITIAL_VERSION, &new.version.to_string());
        put(keys::KEYGEN_TYPE, key_generator_type(new.partition_field.is_some(), new.record_key_fields.len()));
        put(keys::BASE_FORMAT, "PARQUET");
        put(keys::LOG_FORMAT, "HOODIE_LOG");
        if new.version >= 9 {
            put(keys::TABLE_FORMAT, "native");
        } else {
            put(keys::PAYLOAD_CLASS, new.merge_mode.payload_class());
        }
        put(keys::URL_ENCODE, "false");
        put(keys::DROP_PARTITION_COLUMNS, "false");
        put(keys::TIMEZONE, "UTC");
        put(keys::CHECKSUM, &table_checksum(new.database.as_deref(), &new.name).to_string());
        if new.change_log {
            put(keys::CDC_ENABLED, "true");
            put(keys::CDC_MODE, CHANGE_LOG_MODE);
        }
        Self {
            name: new.name.clone(),
            database: new.database.clone(),
            table_type: TableType::MergeOnRead,
            version: new.version,
            timeline_layout: 2,
            timeline_path: layout::DEFAULT_TIMELINE_FOLDER.into(),
            history_path: layout::DEFAULT_HISTORY_FOLDER.into(),
            record_key_fields: new.record_key_fields.clone(),
            ordering_fields: new.ordering_fields.clone(),
            partition_fields: new.partition_field.iter().cloned().collect(),
            hive_style_partitioning: new.hive_style_partitioning,
            populate_meta_fields: true,
            merge_mode: if new.sequence_groups.is_empty() { new.merge_mode } else { MergeMode::Custom },
            merge_strategy_id: if new.sequence_groups.is_empty() {
                new.merge_mode.strategy_id().into()
            } else {
                SEQUENCE_GROUPS_STRATEGY_ID.into()
            },
            bucket: Some(new.bucket),
            sequence_groups: new.sequence_groups.clone(),
            create_schema: Some(new.schema_json.clone()),
            tombstone_retention: new.tombstone_retention,
            time_mode: new.time_mode,
            max_logs_per_file_group: new.max_logs_per_file_group,
            evolve_on_write: new.evolve_on_write,
            other,
        }
    }

    /// Whether the table keeps a change log (`hoodie.table.cdc.enabled`):
    /// change-log commits carry `.cdc` files of the change feed, and data
    /// commits leave Hudi's CDC query nothing to infer (`docs/design.md`,
    /// "Change log"). A table whose CDC mode is not [`CHANGE_LOG_MODE`]
    /// (a Java writer's `OP_KEY_ONLY` or `DATA_BEFORE`) is
    /// [`Error::InvalidInput`]: its readers expect records Tributary does
    /// not write.
    pub fn change_log(&self) -> Result<bool> {
        match self.other.get(keys::CDC_ENABLED).map(|v| v.trim()) {
            None | Some("false") => Ok(false),
            Some("true") => match self.other.get(keys::CDC_MODE).map(|v| v.trim()) {
                Some(CHANGE_LOG_MODE) => Ok(true),
                mode => Err(Error::InvalidInput {
                    what: format!("table {}", self.name),
                    reason: format!(
                        "{} is {}; Tributary's change log is {CHANGE_LOG_MODE}",
                        keys::CDC_MODE,
                        mode.unwrap_or("unset (Hudi's default, OP_KEY_ONLY)")
                    ),
                }),
            },
            Some(v) => Err(Error::InvalidInput {
                what: format!("table {}", self.name),
                reason: format!("{} is `{v}`; expected true or false", keys::CDC_ENABLED),
            }),
        }
    }

    /// All properties as key/value pairs, as they are written to disk.
    pub fn to_properties(&self) -> BTreeMap<String, String> {
        let mut m = self.other.clone();
        let mut put = |k: &str, v: String| {
            m.insert(k.to_string(), v);
        };
        put(keys::NAME, self.name.clone());
        if let Some(db) = &self.database {
            put(keys::DATABASE, db.clone());
        }
        put(keys::TYPE, self.table_type.name().into());
        put(keys::VERSION, self.version.to_string());
        put(keys::TIMELINE_LAYOUT, self.timeline_layout.to_string());
        put(keys::TIMELINE_PATH, self.timeline_path.clone());
        if self.timeline_layout >= 2 {
            put(keys::HISTORY_PATH, self.history_path.clone());
        }
        if !self.record_key_fields.is_empty() {
            put(keys::RECORD_KEY, self.record_key_fields.join(","));
        }
        if !self.ordering_fields.is_empty() {
            // Version 9 renamed the key; Hudi 1.1 reads the old one as an
            // alternative, 1.0 only the old one.
            put(if self.version >= 9 { keys::ORDERING } else { keys::PRECOMBINE }, self.ordering_fields.join(","));
        }
        if !self.partition_fields.is_empty() {
            put(keys::PARTITION, self.partition_fields.join(","));
        }
        put(keys::HIVE_STYLE, self.hive_style_partitioning.to_string());
        put(keys::POPULATE_META, self.populate_meta_fields.to_string());
        if self.version >= 8 {
            put(keys::MERGE_MODE, self.merge_mode.name().into());
            // Version 9 records a strategy id for CUSTOM merging only.
            if self.version == 8 || self.merge_mode == MergeMode::Custom {
                put(keys::MERGE_STRATEGY, self.merge_strategy_id.clone());
            }
        }
        if !self.sequence_groups.is_empty() {
            put(keys::SEQUENCE_GROUPS, SequenceGroup::render_list(&self.sequence_groups));
        }
        if let Some(b) = &self.bucket {
            put(keys::NUM_BUCKETS, b.num_buckets.to_string());
            put(keys::BUCKET_HASH, b.hash.name().into());
        }
        if let Some(s) = &self.create_schema {
            put(keys::CREATE_SCHEMA, s.clone());
        }
        put(keys::TOMBSTONE_RETENTION, self.tombstone_retention.render());
        if let Some(mode) = self.time_mode {
            put(keys::TIME_MODE, mode.name().into());
        }
        put(keys::MAX_LOGS_PER_FILE_GROUP, self.max_logs_per_file_group.unwrap_or(0).to_string());
        if self.evolve_on_write {
            put(keys::EVOLVE_ON_WRITE, "true".into());
        }
        m
    }

    /// The Java properties text of this configuration. `comment` becomes the
    /// header line (Java writes `Updated at <time>` there).
    pub fn to_properties_text(&self, comment: &str) -> Result<String> {
        render_properties(&self.to_properties(), comment)
    }

    /// The bucket index writers of this table use. A table Tributary made
    /// records its bucket count and hash; Hudi's writers keep the count in
    /// their own configuration (`hoodie.bucket.index.num.buckets`), not in
    /// the table, and hash with Hudi's Java rule. `given` is the count a
    /// writer was told (for a table that records none, it must equal the
    /// Hudi writers' setting); it must agree with a recorded count.
    pub fn bucket_spec(&self, given: Option<u32>) -> Result<BucketSpec> {
        let what = || format!("bucket count of table {}", self.name);
        match (self.bucket, given) {
            (_, Some(0)) => Err(Error::InvalidInput { what: what(), reason: "must be at least 1".into() }),
            (Some(spec), Some(n)) if n != spec.num_buckets => Err(Error::InvalidInput {
                what: what(),
                reason: format!(
                    "{n} was given, but hoodie.properties records {} ({})",
                    spec.num_buckets,
                    keys::NUM_BUCKETS
                ),
            }),
            (Some(spec), _) => Ok(spec),
            (None, Some(n)) => Ok(BucketSpec { num_buckets: n, hash: BucketHash::HudiJava }),
            (None, None) => Err(Error::InvalidInput {
                what: what(),
                reason: format!(
                    "hoodie.properties records none: Hudi keeps it in each writer's configuration ({}), not in the \
                     table; give the count the table's Hudi writers use (tributary write --buckets N)",
                    keys::NUM_BUCKETS
                ),
            }),
        }
    }

    /// The metadata-table partitions `hoodie.properties` lists as built
    /// (`hoodie.table.metadata.partitions`) and as being built (`...inflight`).
    /// Hudi readers use the metadata table while the built ones include `files`.
    pub fn metadata_partitions(&self) -> (Vec<String>, Vec<String>) {
        let list = |key: &str| self.other.get(key).map(|v| split_fields(v)).unwrap_or_default();
        (list(keys::METADATA_PARTITIONS), list(keys::METADATA_PARTITIONS_INFLIGHT))
    }

    /// Why the table's record keys or partition paths are not formed as
    /// Tributary forms them (a timestamp or custom key generator,
    /// URL-encoded partition paths); `None` when they are.
    fn other_key_rule(&self) -> Option<String> {
        let other = |k: &str| self.other.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        if let Some(t) = other(keys::KEYGEN_TYPE)
            && !KEY_GENERATOR_TYPES.contains(&t)
        {
            return Some(format!(
                "Tributary does not write key generator type {t} ({}); it writes {}",
                keys::KEYGEN_TYPE,
                KEY_GENERATOR_TYPES.join(", ")
            ));
        }
        if let Some(c) = other(keys::KEYGEN_CLASS)
            && !KEY_GENERATOR_CLASSES.contains(&c)
        {
            return Some(format!("Tributary does not write key generator {c} ({})", keys::KEYGEN_CLASS));
        }
        if other(keys::URL_ENCODE) == Some("true") {
            return Some(format!("Tributary does not URL-encode partition paths ({}=true)", keys::URL_ENCODE));
        }
        None
    }

    /// The partition folder of rows whose partition field `field` holds
    /// `value` (`None` for null): the value as it is, or `field=value` in a
    /// table with hive-style partitioning; a null value is Hive's
    /// `__HIVE_DEFAULT_PARTITION__`.
    pub fn partition_path(&self, field: &str, value: Option<&str>) -> String {
        let value = value.unwrap_or(NULL_PARTITION);
        if self.hive_style_partitioning { format!("{field}={value}") } else { value.to_string() }
    }

    /// The partition field values that partition folder `path` stands
    /// for, in [`Self::partition_fields`] order (`None` for a null value),
    /// as [`Self::partition_path`] forms folders, one level per field.
    /// `None` when the table forms its paths otherwise (a timestamp or
    /// custom key generator, URL encoding: a folder's name is then not a
    /// field's value) or `path` does not parse.
    pub fn partition_values(&self, path: &str) -> Option<Vec<Option<String>>> {
        if self.partition_fields.is_empty() || self.other_key_rule().is_some() {
            return None;
        }
        let levels: Vec<&str> = path.split('/').collect();
        if levels.len() != self.partition_fields.len() {
            return None;
        }
        levels
            .iter()
            .zip(&self.partition_fields)
            .map(|(level, field)| {
                let value = if self.hive_style_partitioning {
                    level.strip_prefix(field.as_str())?.strip_prefix('=')?
                } else {
                    level
                };
                Some((value != NULL_PARTITION).then(|| value.to_string()))
            })
            .collect()
    }

    /// Refuses a table whose record keys or partition paths another engine
    /// forms in a way Tributary does not (a timestamp or custom key
    /// generator, URL-encoded partition paths, several partition fields):
    /// rows written anyway would land in other partitions or under other
    /// keys than that engine's. Writers check it before anything else.
    pub fn check_writable(&self) -> Result<()> {
        let refuse = |reason: String| Err(Error::InvalidInput { what: format!("table {}", self.name), reason });
        if let Some(reason) = self.other_key_rule() {
            return refuse(reason);
        }
        if self.partition_fields.len() > 1 {
            return refuse(format!(
                "Tributary writes tables with one partition field, not {} ({})",
                self.partition_fields.join(","),
                keys::PARTITION
            ));
        }
        Ok(())
    }

    /// The table's schema (its create schema) in the forms writers and
    /// readers need, checked against the configured key, ordering and
    /// partition fields.
    pub fn table_schema(&self) -> Result<TableSchema> {
        let json = self.create_schema.as_deref().ok_or_else(|| Error::InvalidInput {
            what: format!("table {}", self.name),
            reason: format!("{} is not set", keys::CREATE_SCHEMA),
        })?;
        self.schema_of(json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> NewTableConfig {
        NewTableConfig {
            version: 8,
            name: "trips".into(),
            database: None,
            record_key_fields: vec!["uuid".into()],
            ordering_fields: vec!["ts".into()],
            partition_field: Some("city".into()),
            hive_style_partitioning: true,
            merge_mode: MergeMode::EventTime,
            bucket: BucketSpec { num_buckets: 4, hash: BucketHash::Murmur3 },
            sequence_groups: Vec::new(),
            schema_json: r#"{"type":"record","name":"r","fields":[{"name":"a:b","type":"string"}]}"#.into(),
            tombstone_retention: TombstoneRetention::Lateness(std::time::Duration::from_secs(7 * 86_400)),
            time_mode: Some(TimeMode::HybridLogical),
            max_logs_per_file_group: Some(40),
            evolve_on_write: true,
            change_log: true,
        }
    }

    /// A table keeps a change log in Hudi's keys and only in the mode its
    /// records are written in; any other mode is refused, not ignored.
    #[test]
    fn the_change_log_is_hudis_cdc_in_the_before_and_after_mode() {
        let cfg = TableConfig::new_table(&sample());
        let text = cfg.to_properties_text("t").unwrap();
        assert!(text.contains("hoodie.table.cdc.enabled=true"), "{text}");
        assert!(text.contains("hoodie.table.cdc.supplemental.logging.mode=DATA_BEFORE_AFTER"), "{text}");
        assert!(TableConfig::parse(&text, "p").unwrap().change_log().unwrap());
        let plain = TableConfig::new_table(&NewTableConfig { change_log: false, ..sample() });
        assert!(!plain.change_log().unwrap());
        let mut other = cfg.clone();
        other.other.insert(keys::CDC_MODE.into(), "OP_KEY_ONLY".into());
        let err = other.change_log().unwrap_err().to_string();
        assert!(err.contains("OP_KEY_ONLY") && err.contains("DATA_BEFORE_AFTER"), "{err}");
        other.other.remove(keys::CDC_MODE);
        assert!(other.change_log().is_err(), "Hudi's default mode is OP_KEY_ONLY");
    }

    #[test]
    fn round_trips_through_text() {
        let cfg = TableConfig::new_table(&sample());
        let text = cfg.to_properties_text("Updated by tributary").unwrap();
        assert!(text.contains("hoodie.table.version=8"));
        assert!(text.contains("hoodie.table.checksum="));
        let back = TableConfig::parse(&text, "hoodie.properties").unwrap();
        assert_eq!(back, cfg);
    }

    /// Folders name partitions as writers name them, and give their values
    /// back; tables whose folders are not the values give none.
    #[test]
    fn partition_folders_and_their_values() {
        let mut cfg = TableConfig::new_table(&sample());
        for value in [Some("oslo"), None] {
            let path = cfg.partition_path("city", value);
            assert_eq!(cfg.partition_values(&path), Some(vec![value.map(String::from)]), "{path}");
        }
        assert_eq!(cfg.partition_path("city", None), "city=__HIVE_DEFAULT_PARTITION__");
        assert_eq!(cfg.partition_values("town=oslo"), None);
        assert_eq!(cfg.partition_values("city=oslo/x"), None);
        cfg.hive_style_partitioning = false;
        assert_eq!(cfg.partition_path("city", Some("oslo")), "oslo");
        assert_eq!(cfg.partition_values("oslo"), Some(vec![Some("oslo".into())]));
        cfg.other.insert(keys::KEYGEN_TYPE.into(), "TIMESTAMP".into());
        assert_eq!(cfg.partition_values("2024/01/01"), None);
    }

    /// A version-9 table records what Hudi 1.1 records at creation: the
    /// ordering field under its new key, the merge mode without a payload
    /// class or (for a built-in mode) a strategy id, and the table format.
    #[test]
    fn version_9_tables_record_what_hudi_1_1_records() {
        let mut new = sample();
        new.version = 9;
        let cfg = TableConfig::new_table(&new);
        let text = cfg.to_properties_text("Updated by tributary").unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for want in [
            "hoodie.table.version=9",
            "hoodie.table.initial.version=9",
            "hoodie.timeline.layout.version=2",
            "hoodie.table.ordering.fields=ts",
            "hoodie.record.merge.mode=EVENT_TIME_ORDERING",
            "hoodie.table.format=native",
        ] {
            assert!(lines.contains(&want), "{want} in {text}");
        }
        for absent in [keys::PRECOMBINE, keys::PAYLOAD_CLASS, keys::MERGE_STRATEGY] {
            assert!(!text.contains(absent), "{absent} in {text}");
        }
        assert_eq!(TableConfig::parse(&text, "hoodie.properties").unwrap(), cfg);
        // Sequence groups are CUSTOM merging: the strategy id is recorded.
        new.sequence_groups = vec![SequenceGroup::parse("ts=a:b").unwrap()];
        let text = TableConfig::new_table(&new).to_properties_text("x").unwrap();
        assert!(text.contains(&format!("{}={SEQUENCE_GROUPS_STRATEGY_ID}", keys::MERGE_STRATEGY)), "{text}");
    }

    /// The `hoodie.properties` Spark with Hudi 1.1 wrote for a version-9
    /// table (`../shared/hudi-corpus-next`, `v9_txns_complex_nometa`).
    #[test]
    fn reads_what_hudi_1_1_writes_at_version_9() {
        let text = "hoodie.table.initial.version=9\n\
hoodie.table.keygenerator.type=COMPLEX\n\
hoodie.table.type=MERGE_ON_READ\n\
hoodie.table.partition.fields=region\n\
hoodie.timeline.layout.version=2\n\
hoodie.timeline.history.path=history\n\
hoodie.table.checksum=3642927758\n\
hoodie.table.format=native\n\
hoodie.table.name=v9_txns_mor_complex_meta\n\
hoodie.table.recordkey.fields=txn_id,account_id\n\
hoodie.timeline.path=timeline\n\
hoodie.table.ordering.fields=txn_ts\n\
hoodie.datasource.write.hive_style_partitioning=true\n\
hoodie.database.name=default\n\
hoodie.record.merge.mode=EVENT_TIME_ORDERING\n\
hoodie.table.version=9\n";
        let c = TableConfig::parse(text, "hoodie.properties").unwrap();
        assert_eq!((c.version, c.timeline_layout, c.merge_mode), (9, 2, MergeMode::EventTime));
        assert_eq!(c.ordering_fields, ["txn_ts"]);
        assert_eq!(c.merge_strategy_id, MergeMode::EventTime.strategy_id());
        // Version 10 is refused, naming the versions this build reads.
        let err = TableConfig::parse(&text.replace("version=9\n", "version=10\n"), "p").unwrap_err().to_string();
        assert!(err.contains("unsupported table version 10") && err.contains("6, 8, 9"), "{err}");
    }

    #[test]
    fn composite_keys_record_their_fields_and_generator() {
        let mut new = sample();
        new.record_key_fields = vec!["user_id".into(), "date".into(), "group_id".into()];
        let text = TableConfig::new_table(&new).to_properties_text("x").unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.contains(&"hoodie.table.recordkey.fields=user_id,date,group_id"), "{text}");
        assert!(lines.contains(&"hoodie.table.keygenerator.type=COMPLEX"), "{text}");
        assert!(!text.contains("hoodie.table.keygenerator.class"), "{text}");
        let back = TableConfig::parse(&text, "p").unwrap();
        assert_eq!(back.record_key_fields, ["user_id", "date", "group_id"]);
        new.partition_field = None;
        let text = TableConfig::new_table(&new).to_properties_text("x").unwrap();
        assert!(text.lines().any(|l| l == "hoodie.table.keygenerator.type=NON_PARTITION"), "{text}");
        assert_eq!(NewTableConfig::new("t", " a, b ,c", "ts", "{}").record_key_fields, ["a", "b", "c"]);
        assert_eq!(key_generator_type(true, 1), "SIMPLE");
    }

    fn with(text: &str, key: &str, value: Option<&str>) -> String {
        let mut lines: Vec<String> =
            text.lines().filter(|l| !l.starts_with(&format!("{key}="))).map(String::from).collect();
        if let Some(v) = value {
            lines.push(format!("{key}={v}"));
        }
        lines.join("\n")
    }

    #[test]
    fn errors_name_the_key() {
        let text = TableConfig::new_table(&sample()).to_properties_text("x").unwrap();
        let cases = [
            (keys::VERSION, Some("7"), "unsupported table version 7"),
            (keys::VERSION, None, "missing required key `hoodie.table.version`"),
            (keys::NAME, None, "`hoodie.table.name`"),
            (keys::MERGE_MODE, Some("FASTEST"), "`hoodie.record.merge.mode`"),
            (keys::MERGE_STRATEGY, Some("abc"), "`hoodie.record.merge.strategy.id`"),
            (keys::NUM_BUCKETS, Some("0"), "`hoodie.bucket.index.num.buckets`"),
            (keys::NUM_BUCKETS, Some("four"), "`hoodie.bucket.index.num.buckets`"),
            (keys::BUCKET_HASH, Some("md5"), "`tributary.bucket.hash`"),
            (keys::TIME_MODE, Some("fast"), "`tributary.time.mode`"),
            (keys::CHECKSUM, Some("12"), "`hoodie.table.checksum`"),
            (keys::HIVE_STYLE, Some("yes"), "hive_style_partitioning"),
            (keys::TIMELINE_LAYOUT, Some("1"), "`hoodie.timeline.layout.version`"),
            ("tributary.frobnicate", Some("1"), "`tributary.frobnicate`"),
        ];
        for (key, value, expect) in cases {
            let err =
                TableConfig::parse(&with(&text, key, value), "t/.hoodie/hoodie.properties").expect_err(key).to_string();
            assert!(err.contains(expect), "{key}: {err}");
            assert!(err.contains("t/.hoodie/hoodie.properties"), "{err}");
        }
    }

    /// `hoodie.properties` as Hudi 1.2.0's Spark writer left it for a
    /// version-8 NBCC bucket-index table (the tests' Spark run, sorted).
    const SPARK_1_2_PROPERTIES: &str = "\
#Updated at 2026-11-30T19:04:51.104056322Z
hoodie.archivelog.folder=history
hoodie.compaction.payload.class=org.apache.hudi.common.model.DefaultHoodieRecordPayload
hoodie.datasource.write.drop.partition.columns=false
hoodie.datasource.write.hive_style_partitioning=false
hoodie.datasource.write.partitionpath.urlencode=false
hoodie.partition.metafile.use.base.format=false
hoodie.populate.meta.fields=true
hoodie.record.merge.mode=EVENT_TIME_ORDERING
hoodie.record.merge.strategy.id=eeb8d96f-b1e4-49fd-bbf8-28ac514178e5
hoodie.table.base.file.format=PARQUET
hoodie.table.cdc.enabled=false
hoodie.table.checksum=1601697594
hoodie.table.format=native
hoodie.table.index.defs.path=.hoodie/.index_defs/index.json
hoodie.table.initial.version=8
hoodie.table.keygenerator.type=SIMPLE
hoodie.table.metadata.partitions.inflight=
hoodie.table.metadata.partitions=column_stats,files,partition_stats
hoodie.table.multiple.base.file.formats.enable=false
hoodie.table.name=t_p
hoodie.table.ordering.fields=ts
hoodie.table.partition.fields=region
hoodie.table.partition_extractor_class=org.apache.hudi.hive.SinglePartPartitionValueExtractor
hoodie.table.recordkey.fields=id
hoodie.table.timeline.timezone=UTC
hoodie.table.type=MERGE_ON_READ
hoodie.table.version=8
hoodie.timeline.history.path=history
hoodie.timeline.layout.version=2
hoodie.timeline.path=timeline
";

    #[test]
    fn reads_what_hudi_1_2_writes_at_version_8() {
        let c = TableConfig::parse(SPARK_1_2_PROPERTIES, "p").unwrap();
        assert_eq!((c.version, c.table_type, c.merge_mode), (8, TableType::MergeOnRead, MergeMode::EventTime));
        assert_eq!(c.ordering_fields, ["ts"]);
        assert_eq!(
            (c.record_key_fields.as_slice(), c.partition_fields.as_slice()),
            (&["id".to_string()][..], &["region".to_string()][..])
        );
        assert!(!c.hive_style_partitioning && c.create_schema.is_none() && c.bucket.is_none());
        assert_eq!(
            c.metadata_partitions(),
            (vec!["column_stats".to_string(), "files".into(), "partition_stats".into()], vec![])
        );
        // Keys it does not interpret are kept verbatim.
        assert_eq!(
            c.other.get("hoodie.table.index.defs.path").map(String::as_str),
            Some(".hoodie/.index_defs/index.json")
        );
        assert_eq!(c.other.get("hoodie.table.metadata.partitions.inflight").map(String::as_str), Some(""));
        assert_eq!(checksum_state(&parse_properties(SPARK_1_2_PROPERTIES, "p").unwrap()), ChecksumState::Valid);
        // An unpartitioned table lists no partition fields, with the key present.
        let unpartitioned = with(SPARK_1_2_PROPERTIES, keys::PARTITION, Some(""));
        assert!(TableConfig::parse(&unpartitioned, "p").unwrap().partition_fields.is_empty());
        // A custom key generator's partition type follows the field.
        let typed = with(SPARK_1_2_PROPERTIES, keys::PARTITION, Some("region:SIMPLE"));
        assert_eq!(TableConfig::parse(&typed, "p").unwrap().partition_fields, ["region"]);
        // Several ordering fields, in their order (Hudi 1.1+).
        let two = with(SPARK_1_2_PROPERTIES, keys::ORDERING, Some("ts,seq"));
        assert_eq!(TableConfig::parse(&two, "p").unwrap().ordering_fields, ["ts", "seq"]);
    }

    /// New tables, and tables Spark made with the key generators Tributary
    /// forms keys as, are writable; other generators, URL-encoded paths and
    /// several partition fields are refused, naming the setting.
    #[test]
    fn writable_tables_are_those_whose_keys_tributary_forms_alike() {
        for partitioned in [false, true] {
            for keys in 1..3 {
                let mut new = sample();
                new.partition_field = partitioned.then(|| "city".into());
                new.record_key_fields = (0..keys).map(|k| format!("k{k}")).collect();
                TableConfig::new_table(&new).check_writable().unwrap();
            }
        }
        TableConfig::parse(SPARK_1_2_PROPERTIES, "p").unwrap().check_writable().unwrap();
        let class = with(SPARK_1_2_PROPERTIES, keys::KEYGEN_CLASS, Some("org.apache.hudi.keygen.ComplexKeyGenerator"));
        TableConfig::parse(&class, "p").unwrap().check_writable().unwrap();
        let cases = [
            (keys::KEYGEN_TYPE, "TIMESTAMP", "key generator type TIMESTAMP"),
            (keys::KEYGEN_CLASS, "org.apache.hudi.keygen.CustomKeyGenerator", "CustomKeyGenerator"),
            (keys::URL_ENCODE, "true", keys::URL_ENCODE),
            (keys::PARTITION, "region,day", "region,day"),
        ];
        for (key, value, expect) in cases {
            let config = TableConfig::parse(&with(SPARK_1_2_PROPERTIES, key, Some(value)), "p").unwrap();
            let err = config.check_writable().expect_err(key);
            assert_eq!(err.kind(), crate::error::ErrorKind::InvalidInput, "{key}");
            let err = err.to_string();
            assert!(err.contains(expect) && err.contains("table t_p"), "{key}: {err}");
        }
    }

    #[test]
    fn a_table_without_a_bucket_count_takes_the_writers_with_hudis_hash() {
        let spark = TableConfig::parse(SPARK_1_2_PROPERTIES, "p").unwrap();
        let err = spark.bucket_spec(None).unwrap_err().to_string();
        assert!(err.contains("--buckets") && err.contains("hoodie.bucket.index.num.buckets"), "{err}");
        assert_eq!(spark.bucket_spec(Some(4)).unwrap(), BucketSpec { num_buckets: 4, hash: BucketHash::HudiJava });
        assert!(spark.bucket_spec(Some(0)).is_err());
        // A count recorded without Tributary's hash key hashes as Hudi does.
        let counted = with(SPARK_1_2_PROPERTIES, keys::NUM_BUCKETS, Some("8"));
        let counted = TableConfig::parse(&counted, "p").unwrap();
        assert_eq!(counted.bucket_spec(None).unwrap(), BucketSpec { num_buckets: 8, hash: BucketHash::HudiJava });
        // Tributary's own table: its count and hash; another count is refused.
        let ours = TableConfig::new_table(&sample());
        assert_eq!(ours.bucket_spec(None).unwrap(), BucketSpec { num_buckets: 4, hash: BucketHash::Murmur3 });
        assert_eq!(ours.bucket_spec(Some(4)).unwrap().num_buckets, 4);
        let err = ours.bucket_spec(Some(5)).unwrap_err().to_string();
        assert!(err.contains("5 was given") && err.contains("records 4"), "{err}");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for text in ["", "\u{0}\u{1}\u{2}", "hoodie.table.version", "=\n=\n\\"] {
            assert!(TableConfig::parse(text, "p").is_err());
        }
    }
}
