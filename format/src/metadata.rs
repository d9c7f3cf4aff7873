//! Typed timeline metadata: `HoodieCommitMetadata` (completed `deltacommit`
//! and `commit` instants) and `HoodieCompactionPlan` (`compaction.requested`).
//!
//! Both are stored as Avro object container files holding one record. We
//! write them with the exact writer schemas Java Hudi 1.x embeds (copied from
//! a Spark-written v8 table into `format/schemas/`), because Avro resolves
//! named types by full name and Java readers expect
//! `org.apache.hudi.avro.model.*`. Decoding accepts any writer's container
//! and reads fields by name: missing or null fields take their defaults.
//!
//! ```
//! # fn main() -> tributary_format::Result<()> {
//! use tributary_format::{CommitMetadata, WriteStat};
//!
//! let mut commit = CommitMetadata { operation_type: "UPSERT".into(), ..Default::default() };
//! commit.partition_to_write_stats.entry("city=chennai".into()).or_default().push(WriteStat {
//!     file_id: "00000001-0000-0000-0000-000000000000-0".into(),
//!     partition_path: "city=chennai".into(),
//!     num_writes: 2,
//!     ..Default::default()
//! });
//! let bytes = commit.to_avro_container()?;
//! assert_eq!(CommitMetadata::from_avro_container(&bytes, "t_c.deltacommit")?, commit);
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use apache_avro::types::Value;
use serde::{Deserialize, Serialize};

use crate::avro::{
    self, corrupt, expect_record, opt, opt_bool, opt_int, opt_long, opt_map_of, opt_record, opt_string,
    opt_string_list, opt_strings, some, string_array, string_list, string_map,
};
use crate::avro::{Embedded, EmbeddedCell};
use crate::error::Result;
use crate::memo::Memo;

/// The writer schema of `org.apache.hudi.avro.model.HoodieCommitMetadata`,
/// as embedded by Hudi 1.x (table version 8) in completed commit files.
pub(crate) const COMMIT_METADATA_SCHEMA: &str = include_str!("../schemas/HoodieCommitMetadata.avsc");

/// The writer schema of `org.apache.hudi.avro.model.HoodieCompactionPlan`,
/// as embedded by Hudi 1.x (table version 8) in `compaction.requested` files.
pub(crate) const COMPACTION_PLAN_SCHEMA: &str = include_str!("../schemas/HoodieCompactionPlan.avsc");

/// The `extraMetadata` key under which writers store the table's Avro schema.
pub(crate) const SCHEMA_KEY: &str = "schema";

/// The compaction plan version Hudi 1.x writes (delta file paths are file
/// names relative to the partition).
pub(crate) const COMPACTION_PLAN_VERSION: i32 = 2;

/// The Avro default of `HoodieCompactionPlan.version` (and of the strategy's
/// version), used when a plan does not carry one.
const DEFAULT_AVRO_VERSION: i32 = 1;

/// The commit-metadata schema (prepared once).
fn commit_schema() -> Result<&'static Embedded> {
    static SCHEMA: EmbeddedCell = EmbeddedCell::new();
    avro::embedded(&SCHEMA, COMMIT_METADATA_SCHEMA, "schemas/HoodieCommitMetadata.avsc")
}

/// The compaction-plan schema (prepared once).
fn plan_schema() -> Result<&'static Embedded> {
    static SCHEMA: EmbeddedCell = EmbeddedCell::new();
    avro::embedded(&SCHEMA, COMPACTION_PLAN_SCHEMA, "schemas/HoodieCompactionPlan.avsc")
}

/// Runtime figures Java records per write stat (`HoodieRuntimeStats`), in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RuntimeStats {
    /// Time spent scanning logs.
    pub total_scan_time: i64,
    /// Time spent creating files.
    pub total_create_time: i64,
    /// Time spent writing records.
    pub total_upsert_time: i64,
}

/// One file written by an instant (`HoodieWriteStat`).
///
/// A v8 append (delta commit) writes one stat per log file, with `file_id`,
/// `path = "<partition>/<log file name>"`, `prev_commit` = the writer's own
/// instant, `base_file = Some("")`, `log_files = Some([<log file name>])`,
/// `log_version`, `log_offset` (0 for a new file), `partition_path`, the record
/// counts, `total_write_bytes` and `file_size_in_bytes`. A compaction (base
/// file) stat leaves the four log-only fields `None`, as Java does.
///
/// Counters are written as longs (Java writes `0`, not null); the `Option`
/// fields are written as null when `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WriteStat {
    /// The file group's id.
    pub file_id: String,
    /// The file's path relative to the table base path.
    pub path: String,
    /// The previous commit of the file group (v8 appends: the writer's own instant).
    pub prev_commit: String,
    /// Records written (inserts plus updates).
    pub num_writes: i64,
    /// Records deleted.
    pub num_deletes: i64,
    /// Records updated.
    pub num_update_writes: i64,
    /// Bytes written.
    pub total_write_bytes: i64,
    /// Records that failed to write.
    pub total_write_errors: i64,
    /// The partition path (`""` when unpartitioned).
    pub partition_path: String,
    /// Log records read (compaction).
    pub total_log_records: i64,
    /// Log files read; Java leaves this null.
    pub total_log_files: Option<i64>,
    /// Records updated from logs (compaction).
    pub total_updated_records_compacted: i64,
    /// Records inserted.
    pub num_inserts: i64,
    /// Log blocks read (compaction).
    pub total_log_blocks: i64,
    /// Corrupt log blocks seen (compaction).
    pub total_corrupt_log_block: i64,
    /// Rollback blocks seen (compaction).
    pub total_rollback_blocks: i64,
    /// The file's size after the write.
    pub file_size_in_bytes: i64,
    /// The log file's version (appends only).
    pub log_version: Option<i32>,
    /// Where this write's blocks start in the log file (appends only; 0 for a new file).
    pub log_offset: Option<i64>,
    /// The base file of the slice the log belongs to (appends only; `""` when none).
    pub base_file: Option<String>,
    /// The log file names written (appends only).
    pub log_files: Option<Vec<String>>,
    /// Change-data-capture file sizes by file name.
    pub cdc_stats: Option<BTreeMap<String, i64>>,
    /// The base file this one replaces (compaction).
    pub prev_base_file: Option<String>,
    /// Smallest event time written, if tracked.
    pub min_event_time: Option<i64>,
    /// Largest event time written, if tracked.
    pub max_event_time: Option<i64>,
    /// Timing figures.
    pub runtime_stats: Option<RuntimeStats>,
    /// Log files read (compaction).
    pub total_log_files_compacted: i64,
    /// Time spent reading logs (compaction).
    pub total_log_read_time_ms: i64,
    /// Bytes of logs read (compaction).
    pub total_log_size_compacted: i64,
    /// A temporary path the file was first written to.
    pub temp_path: Option<String>,
    /// Records updated (newer Java writers).
    pub num_updates: i64,
}

/// The content of a completed `deltacommit`, `commit` or `replacecommit`
/// instant (`HoodieCommitMetadata`, or `HoodieReplaceCommitMetadata`, which
/// adds the file groups the instant replaced).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CommitMetadata {
    /// Write stats by partition path.
    pub partition_to_write_stats: BTreeMap<String, Vec<WriteStat>>,
    /// The file groups a `replacecommit` replaced (insert overwrite,
    /// clustering, delete partition), by partition path: from its completion
    /// on, readers no longer see them. Empty for every other commit, and
    /// never written by [`CommitMetadata::to_avro_container`], whose schema
    /// has no such field.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub partition_to_replace_file_ids: BTreeMap<String, Vec<String>>,
    /// True for the commit that completes a compaction.
    pub compacted: bool,
    /// Free-form metadata; `schema` holds the table's Avro schema.
    pub extra_metadata: BTreeMap<String, String>,
    /// The write operation (`UPSERT`, `INSERT`, `COMPACT`, ...).
    pub operation_type: String,
}

impl CommitMetadata {
    /// The table's Avro schema JSON recorded by the writer (`extraMetadata["schema"]`).
    pub fn schema_json(&self) -> Option<&str> {
        self.extra_metadata.get(SCHEMA_KEY).map(String::as_str)
    }

    /// All write stats, partition by partition.
    pub fn write_stats(&self) -> impl Iterator<Item = &WriteStat> {
        self.partition_to_write_stats.values().flatten()
    }

    /// Encodes this metadata as an Avro object container file with one
    /// `HoodieCommitMetadata` record, the Java writer schema embedded and
    /// codec null. `version` is written as null, as Hudi 1.x does.
    pub fn to_avro_container(&self) -> Result<Vec<u8>> {
        let stats = self
            .partition_to_write_stats
            .iter()
            .map(|(partition, stats)| (partition.clone(), Value::Array(stats.iter().map(write_stat_to_avro).collect())))
            .collect();
        let record = Value::Record(vec![
            ("partitionToWriteStats".into(), some(Value::Map(stats))),
            ("compacted".into(), some(Value::Boolean(self.compacted))),
            ("extraMetadata".into(), some(string_map(&self.extra_metadata))),
            ("version".into(), Value::Union(1, Box::new(Value::Null))),
            ("operationType".into(), some(Value::String(self.operation_type.clone()))),
        ]);
        avro::encode_embedded(commit_schema()?, record, "HoodieCommitMetadata")
    }

    /// Decodes a commit file written by any Avro writer (ours or Java's).
    ///
    /// Missing or null fields take their defaults. An empty file (as an
    /// inflight instant may be) decodes to empty metadata, as in Java. `path`
    /// names the file in errors.
    ///
    /// Every read takes the latest commit's metadata again (for the
    /// schema), so what a commit file decodes to is kept once per process,
    /// keyed by its bytes (`memo.rs`).
    pub fn from_avro_container(bytes: &[u8], path: &str) -> Result<Self> {
        Self::from_avro_container_shared(bytes, path).map(Arc::unwrap_or_clone)
    }

    /// A completed commit file of either timeline layout: an Avro container
    /// (Hudi 1.x, Tributary), else JSON (table version 6 and earlier Hudi
    /// writers); shared with the memo, as
    /// [`CommitMetadata::from_avro_container_shared`]. An error names `path`
    /// and says why neither decoded.
    pub fn from_bytes_shared(bytes: &[u8], path: &str) -> Result<Arc<Self>> {
        if !bytes.starts_with(b"Obj\x01") && bytes.first() == Some(&b'{') {
            return serde_json::from_slice::<CommitMetadata>(bytes)
                .map(Arc::new)
                .map_err(|e| corrupt(path, format!("neither Avro commit metadata nor JSON: {e}")));
        }
        Self::from_avro_container_shared(bytes, path)
    }

    /// [`CommitMetadata::from_avro_container`], shared with the memo rather
    /// than copied out of it: for a caller that only looks.
    pub fn from_avro_container_shared(bytes: &[u8], path: &str) -> Result<Arc<Self>> {
        static DECODED: Memo<Option<Arc<CommitMetadata>>> = Memo::new();
        if bytes.is_empty() {
            return Ok(Arc::default());
        }
        DECODED.get_or_try(bytes, || Self::decode(bytes, path).map(Arc::new))
    }

    fn decode(bytes: &[u8], path: &str) -> Result<Self> {
        let record = avro::read_single_record(bytes, path)?;
        expect_record(&record, "HoodieCommitMetadata", path)?;
        let mut partition_to_write_stats = BTreeMap::new();
        if let Some(entries) = avro::opt_map(&record, "partitionToWriteStats", path)? {
            for (partition, stats) in entries {
                let Value::Array(stats) = avro::plain(stats) else {
                    return Err(corrupt(path, format!("partitionToWriteStats[{partition}] is not an array")));
                };
                let stats = stats.iter().map(|s| write_stat_from_avro(s, path)).collect::<Result<Vec<_>>>()?;
                partition_to_write_stats.insert(partition.clone(), stats);
            }
        }
        let mut partition_to_replace_file_ids = BTreeMap::new();
        if let Some(entries) = avro::opt_map(&record, "partitionToReplaceFileIds", path)? {
            for (partition, ids) in entries {
                let Value::Array(ids) = avro::plain(ids) else {
                    return Err(corrupt(path, format!("partitionToReplaceFileIds[{partition}] is not an array")));
                };
                let ids = ids
                    .iter()
                    .map(|id| match avro::plain(id) {
                        Value::String(s) => Ok(s.clone()),
                        _ => Err(corrupt(path, format!("partitionToReplaceFileIds[{partition}] holds a non-string"))),
                    })
                    .collect::<Result<Vec<_>>>()?;
                partition_to_replace_file_ids.insert(partition.clone(), ids);
            }
        }
        Ok(Self {
            partition_to_write_stats,
            partition_to_replace_file_ids,
            compacted: opt_bool(&record, "compacted", path)?.unwrap_or(false),
            extra_metadata: opt_strings(&record, "extraMetadata", path)?.unwrap_or_default(),
            operation_type: opt_string(&record, "operationType", path)?.unwrap_or_default(),
        })
    }
}

/// Fields of a `HoodieWriteStat` record, in schema order.
fn write_stat_to_avro(s: &WriteStat) -> Value {
    let long = |n: i64| some(Value::Long(n));
    let string = |t: &str| some(Value::String(t.to_string()));
    let opt_long = |n: Option<i64>| opt(n.map(Value::Long));
    let opt_string = |t: &Option<String>| opt(t.clone().map(Value::String));
    let runtime = s.runtime_stats.as_ref().map(|r| {
        Value::Record(vec![
            ("totalScanTime".into(), long(r.total_scan_time)),
            ("totalCreateTime".into(), long(r.total_create_time)),
            ("totalUpsertTime".into(), long(r.total_upsert_time)),
        ])
    });
    let cdc = s.cdc_stats.as_ref().map(|m| Value::Map(m.iter().map(|(k, v)| (k.clone(), Value::Long(*v))).collect()));
    Value::Record(vec![
        ("fileId".into(), string(&s.file_id)),
        ("path".into(), string(&s.path)),
        ("prevCommit".into(), string(&s.prev_commit)),
        ("numWrites".into(), long(s.num_writes)),
        ("numDeletes".into(), long(s.num_deletes)),
        ("numUpdateWrites".into(), long(s.num_update_writes)),
        ("totalWriteBytes".into(), long(s.total_write_bytes)),
        ("totalWriteErrors".into(), long(s.total_write_errors)),
        ("partitionPath".into(), string(&s.partition_path)),
        ("totalLogRecords".into(), long(s.total_log_records)),
        ("totalLogFiles".into(), opt_long(s.total_log_files)),
        ("totalUpdatedRecordsCompacted".into(), long(s.total_updated_records_compacted)),
        ("numInserts".into(), long(s.num_inserts)),
        ("totalLogBlocks".into(), long(s.total_log_blocks)),
        ("totalCorruptLogBlock".into(), long(s.total_corrupt_log_block)),
        ("totalRollbackBlocks".into(), long(s.total_rollback_blocks)),
        ("fileSizeInBytes".into(), long(s.file_size_in_bytes)),
        ("logVersion".into(), opt(s.log_version.map(Value::Int))),
        ("logOffset".into(), opt_long(s.log_offset)),
        ("baseFile".into(), opt_string(&s.base_file)),
        ("logFiles".into(), opt(s.log_files.as_deref().map(string_array))),
        ("cdcStats".into(), opt(cdc)),
        ("prevBaseFile".into(), opt_string(&s.prev_base_file)),
        ("minEventTime".into(), opt_long(s.min_event_time)),
        ("maxEventTime".into(), opt_long(s.max_event_time)),
        ("runtimeStats".into(), opt(runtime)),
        ("totalLogFilesCompacted".into(), long(s.total_log_files_compacted)),
        ("totalLogReadTimeMs".into(), long(s.total_log_read_time_ms)),
        ("totalLogSizeCompacted".into(), long(s.total_log_size_compacted)),
        ("tempPath".into(), opt_string(&s.temp_path)),
        ("numUpdates".into(), long(s.num_updates)),
    ])
}

fn write_stat_from_avro(v: &Value, path: &str) -> Result<WriteStat> {
    expect_record(v, "HoodieWriteStat", path)?;
    let long = |name: &str| opt_long(v, name, path).map(Option::unwrap_or_default);
    let string = |name: &str| opt_string(v, name, path).map(Option::unwrap_or_default);
    let runtime_stats = match opt_record(v, "runtimeStats", path)? {
        None => None,
        Some(r) => Some(RuntimeStats {
            total_scan_time: opt_long(r, "totalScanTime", path)?.unwrap_or_default(),
            total_create_time: opt_long(r, "totalCreateTime", path)?.unwrap_or_default(),
            total_upsert_time: opt_long(r, "totalUpsertTime", path)?.unwrap_or_default(),
        }),
    };
    Ok(WriteStat {
        file_id: string("fileId")?,
        path: string("path")?,
        prev_commit: string("prevCommit")?,
        num_writes: long("numWrites")?,
        num_deletes: long("numDeletes")?,
        num_update_writes: long("numUpdateWrites")?,
        total_write_bytes: long("totalWriteBytes")?,
        total_write_errors: long("totalWriteErrors")?,
        partition_path: string("partitionPath")?,
        total_log_records: long("totalLogRecords")?,
        total_log_files: opt_long(v, "totalLogFiles", path)?,
        total_updated_records_compacted: long("totalUpdatedRecordsCompacted")?,
        num_inserts: long("numInserts")?,
        total_log_blocks: long("totalLogBlocks")?,
        total_corrupt_log_block: long("totalCorruptLogBlock")?,
        total_rollback_blocks: long("totalRollbackBlocks")?,
        file_size_in_bytes: long("fileSizeInBytes")?,
        log_version: opt_int(v, "logVersion", path)?,
        log_offset: opt_long(v, "logOffset", path)?,
        base_file: opt_string(v, "baseFile", path)?,
        log_files: opt_string_list(v, "logFiles", path)?,
        cdc_stats: opt_map_of(v, "cdcStats", path, "long", |x| match x {
            Value::Long(n) => Some(*n),
            Value::Int(n) => Some(i64::from(*n)),
            _ => None,
        })?,
        prev_base_file: opt_string(v, "prevBaseFile", path)?,
        min_event_time: opt_long(v, "minEventTime", path)?,
        max_event_time: opt_long(v, "maxEventTime", path)?,
        runtime_stats,
        total_log_files_compacted: long("totalLogFilesCompacted")?,
        total_log_read_time_ms: long("totalLogReadTimeMs")?,
        total_log_size_compacted: long("totalLogSizeCompacted")?,
        temp_path: opt_string(v, "tempPath", path)?,
        num_updates: long("numUpdates")?,
    })
}

/// The file groups a pending clustering rewrites, as `(partition, file id)`:
/// the slices of its plan's input groups, read from the requested file of a
/// `clustering` instant (or of a layout-1 `replacecommit`), a
/// `HoodieRequestedReplaceMetadata` whose `clusteringPlan` is
/// `HoodieClusteringPlan{inputGroups: [{slices: [HoodieSliceInfo]}]}`. The
/// requested file of an insert overwrite holds no plan (an empty file, or a
/// record whose plan is null): no file group. `path` names the file in errors.
pub fn clustering_file_groups(bytes: &[u8], path: &str) -> Result<Vec<(String, String)>> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let record = avro::read_single_record(bytes, path)?;
    expect_record(&record, "HoodieRequestedReplaceMetadata", path)?;
    let Some(plan) = opt_record(&record, "clusteringPlan", path)? else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for group in avro::opt_array(plan, "inputGroups", path)?.unwrap_or_default() {
        for slice in avro::opt_array(avro::plain(group), "slices", path)?.unwrap_or_default() {
            let slice = avro::plain(slice);
            let file_id = opt_string(slice, "fileId", path)?
                .ok_or_else(|| corrupt(path, "a clustering slice without a fileId".into()))?;
            out.push((opt_string(slice, "partitionPath", path)?.unwrap_or_default(), file_id));
        }
    }
    Ok(out)
}

/// One file group to compact (`HoodieCompactionOperation`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CompactionOperation {
    /// The instant (slice key) of the file slice being compacted.
    pub base_instant_time: String,
    /// The slice's log file names (plan version 2: relative to the partition), in log order.
    pub delta_file_paths: Vec<String>,
    /// The slice's base file name, if it has one.
    pub data_file_path: Option<String>,
    /// The file group's id.
    pub file_id: String,
    /// The partition path (`""` when unpartitioned).
    pub partition_path: String,
    /// Planner metrics (`TOTAL_LOG_FILES`, `TOTAL_IO_MB`, ...).
    pub metrics: BTreeMap<String, f64>,
    /// The bootstrap source file, for bootstrapped tables.
    pub bootstrap_file_path: Option<String>,
}

/// How the plan is to be executed (`HoodieCompactionStrategy`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CompactionStrategy {
    /// The execution strategy class, if any.
    pub compactor_class_name: Option<String>,
    /// Strategy parameters.
    pub strategy_params: BTreeMap<String, String>,
    /// The strategy record's version (Avro default 1).
    pub version: i32,
}

impl Default for CompactionStrategy {
    fn default() -> Self {
        Self { compactor_class_name: None, strategy_params: BTreeMap::new(), version: DEFAULT_AVRO_VERSION }
    }
}

/// The content of a `compaction.requested` instant (`HoodieCompactionPlan`).
///
/// The default is an empty plan of `COMPACTION_PLAN_VERSION` with no strategy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CompactionPlan {
    /// The file groups to compact.
    pub operations: Vec<CompactionOperation>,
    /// Free-form metadata.
    pub extra_metadata: BTreeMap<String, String>,
    /// The plan version; Hudi 1.x writes `COMPACTION_PLAN_VERSION`.
    pub version: i32,
    /// The execution strategy; `None` (null) for a plain compaction.
    pub strategy: Option<CompactionStrategy>,
    /// Whether the compactor keeps the records' meta fields (Java: false).
    pub preserve_hoodie_metadata: bool,
    /// Partitions the planner skipped (Java writes an empty list).
    pub missing_schedule_partitions: Vec<String>,
}

impl Default for CompactionPlan {
    fn default() -> Self {
        Self {
            operations: Vec::new(),
            extra_metadata: BTreeMap::new(),
            version: COMPACTION_PLAN_VERSION,
            strategy: None,
            preserve_hoodie_metadata: false,
            missing_schedule_partitions: Vec::new(),
        }
    }
}

impl CompactionPlan {
    /// Encodes this plan as an Avro object container file with one
    /// `HoodieCompactionPlan` record, the Java writer schema embedded and codec null.
    pub fn to_avro_container(&self) -> Result<Vec<u8>> {
        let ops = self.operations.iter().map(operation_to_avro).collect();
        let strategy = self.strategy.as_ref().map(|s| {
            Value::Record(vec![
                ("compactorClassName".into(), opt(s.compactor_class_name.clone().map(Value::String))),
                ("strategyParams".into(), some(string_map(&s.strategy_params))),
                ("version".into(), Value::Union(0, Box::new(Value::Int(s.version)))),
            ])
        });
        let record = Value::Record(vec![
            ("operations".into(), some(Value::Array(ops))),
            ("extraMetadata".into(), some(string_map(&self.extra_metadata))),
            ("version".into(), Value::Union(0, Box::new(Value::Int(self.version)))),
            ("strategy".into(), opt(strategy)),
            ("preserveHoodieMetadata".into(), Value::Union(0, Box::new(Value::Boolean(self.preserve_hoodie_metadata)))),
            ("missingSchedulePartitions".into(), some(string_array(&self.missing_schedule_partitions))),
        ]);
        avro::encode_embedded(plan_schema()?, record, "HoodieCompactionPlan")
    }

    /// Decodes a `compaction.requested` file written by any Avro writer (ours
    /// or Java's). Missing or null fields take their defaults (a missing
    /// `version` is the Avro default 1). Unlike a commit, an empty file is an
    /// error ([`Error::Corrupt`](crate::Error::Corrupt)): a requested compaction always has a plan.
    pub fn from_avro_container(bytes: &[u8], path: &str) -> Result<Self> {
        Self::from_avro_container_shared(bytes, path).map(Arc::unwrap_or_clone)
    }

    /// [`CompactionPlan::from_avro_container`], shared with a memo keyed by
    /// the file's bytes, as [`CommitMetadata::from_avro_container_shared`]:
    /// every file-system view reads the plans of pending compactions again.
    pub fn from_avro_container_shared(bytes: &[u8], path: &str) -> Result<Arc<Self>> {
        static DECODED: Memo<Option<Arc<CompactionPlan>>> = Memo::new();
        DECODED.get_or_try(bytes, || Self::decode(bytes, path).map(Arc::new))
    }

    fn decode(bytes: &[u8], path: &str) -> Result<Self> {
        if bytes.is_empty() {
            return Err(corrupt(path, "empty compaction plan".into()));
        }
        let record = avro::read_single_record(bytes, path)?;
        expect_record(&record, "HoodieCompactionPlan", path)?;
        let operations = avro::opt_array(&record, "operations", path)?
            .unwrap_or_default()
            .iter()
            .map(|op| operation_from_avro(op, path))
            .collect::<Result<_>>()?;
        let strategy = match opt_record(&record, "strategy", path)? {
            None => None,
            Some(s) => Some(CompactionStrategy {
                compactor_class_name: opt_string(s, "compactorClassName", path)?,
                strategy_params: opt_strings(s, "strategyParams", path)?.unwrap_or_default(),
                version: opt_int(s, "version", path)?.unwrap_or(DEFAULT_AVRO_VERSION),
            }),
        };
        Ok(Self {
            operations,
            extra_metadata: opt_strings(&record, "extraMetadata", path)?.unwrap_or_default(),
            version: opt_int(&record, "version", path)?.unwrap_or(DEFAULT_AVRO_VERSION),
            strategy,
            preserve_hoodie_metadata: opt_bool(&record, "preserveHoodieMetadata", path)?.unwrap_or(false),
            missing_schedule_partitions: string_list(&record, "missingSchedulePartitions", path)?,
        })
    }
}

/// Fields of a `HoodieCompactionOperation` record, in schema order.
fn operation_to_avro(op: &CompactionOperation) -> Value {
    let metrics = op.metrics.iter().map(|(k, v)| (k.clone(), Value::Double(*v))).collect();
    Value::Record(vec![
        ("baseInstantTime".into(), some(Value::String(op.base_instant_time.clone()))),
        ("deltaFilePaths".into(), some(string_array(&op.delta_file_paths))),
        ("dataFilePath".into(), opt(op.data_file_path.clone().map(Value::String))),
        ("fileId".into(), some(Value::String(op.file_id.clone()))),
        ("partitionPath".into(), some(Value::String(op.partition_path.clone()))),
        ("metrics".into(), some(Value::Map(metrics))),
        ("bootstrapFilePath".into(), opt(op.bootstrap_file_path.clone().map(Value::String))),
    ])
}

fn operation_from_avro(v: &Value, path: &str) -> Result<CompactionOperation> {
    expect_record(v, "HoodieCompactionOperation", path)?;
    let file_id =
        opt_string(v, "fileId", path)?.ok_or_else(|| corrupt(path, "compaction operation without fileId".into()))?;
    Ok(CompactionOperation {
        base_instant_time: opt_string(v, "baseInstantTime", path)?.unwrap_or_default(),
        delta_file_paths: string_list(v, "deltaFilePaths", path)?,
        data_file_path: opt_string(v, "dataFilePath", path)?,
        file_id,
        partition_path: opt_string(v, "partitionPath", path)?.unwrap_or_default(),
        metrics: opt_map_of(v, "metrics", path, "double", |x| match x {
            Value::Double(d) => Some(*d),
            Value::Float(f) => Some(f64::from(*f)),
            Value::Long(n) => Some(*n as f64),
            Value::Int(n) => Some(f64::from(*n)),
            _ => None,
        })?
        .unwrap_or_default(),
        bootstrap_file_path: opt_string(v, "bootstrapFilePath", path)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use apache_avro::Schema;
    use std::path::{Path, PathBuf};

    const TRIPS: &str = "quickstart_trips_table/mor/avro/v8_trips_8i3u1d.zip";

    /// `$TRIBUTARY_CORPUS` or `<workspace>/../shared/hudi-corpus`. When it
    /// is absent the test fails under `CI`, and elsewhere returns `None`
    /// after a SKIP line.
    fn corpus_dir() -> Option<PathBuf> {
        let dir = std::env::var_os("TRIBUTARY_CORPUS")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("../shared/hudi-corpus"));
        if dir.is_dir() {
            return Some(dir);
        }
        assert!(
            std::env::var_os("CI").is_none(),
            "the Hudi corpus is missing at {}, and under CI a test may not pass without it (set TRIBUTARY_CORPUS)",
            dir.display()
        );
        eprintln!("SKIP: Hudi corpus not found at {} (set TRIBUTARY_CORPUS)", dir.display());
        None
    }

    /// Unzips a corpus table into a temp dir; returns the dir (keep it alive)
    /// and the table's `.hoodie/timeline` folder.
    fn unzip_timeline(zip: &str) -> Option<(tempfile::TempDir, PathBuf)> {
        let zip_path = corpus_dir()?.join(zip);
        let tmp = tempfile::tempdir().unwrap();
        let mut archive = zip::ZipArchive::new(std::fs::File::open(&zip_path).unwrap()).unwrap();
        archive.extract(tmp.path()).unwrap();
        let stem = zip_path.file_stem().unwrap().to_owned();
        let timeline = tmp.path().join(stem).join(".hoodie/timeline");
        assert!(timeline.is_dir(), "{} has no timeline", zip_path.display());
        Some((tmp, timeline))
    }

    fn read(dir: &Path, name: &str) -> (Vec<u8>, String) {
        let p = dir.join(name);
        (std::fs::read(&p).unwrap(), p.display().to_string())
    }

    fn sample_commit() -> CommitMetadata {
        let log = ".00000003-0000-0000-0000-000000000000-0_20251220210130911.log.1_0-1-0".to_string();
        let stat = WriteStat {
            file_id: "00000003-0000-0000-0000-000000000000-0".into(),
            path: format!("city=chennai/{log}"),
            prev_commit: "20251220210130911".into(),
            num_writes: 3,
            num_update_writes: 1,
            num_inserts: 2,
            num_deletes: 1,
            total_write_bytes: 1153,
            partition_path: "city=chennai".into(),
            file_size_in_bytes: 1153,
            log_version: Some(1),
            log_offset: Some(0),
            base_file: Some(String::new()),
            log_files: Some(vec![log]),
            min_event_time: Some(5),
            runtime_stats: Some(RuntimeStats { total_upsert_time: 7, ..Default::default() }),
            cdc_stats: Some(BTreeMap::from([("a.cdc".to_string(), 9)])),
            ..Default::default()
        };
        CommitMetadata {
            partition_to_write_stats: BTreeMap::from([
                ("city=chennai".to_string(), vec![stat.clone()]),
                ("".to_string(), vec![]),
            ]),
            compacted: false,
            extra_metadata: BTreeMap::from([(SCHEMA_KEY.to_string(), "{\"type\":\"record\"}".to_string())]),
            operation_type: "UPSERT".into(),
            ..Default::default()
        }
    }

    #[test]
    fn bundled_schemas_parse_with_java_names() {
        let c = &commit_schema().unwrap().schema;
        let p = &plan_schema().unwrap().schema;
        let name = |s: &Schema| match s {
            Schema::Record(r) => r.name.fullname(None),
            other => panic!("not a record: {other:?}"),
        };
        assert_eq!(name(c), "org.apache.hudi.avro.model.HoodieCommitMetadata");
        assert_eq!(name(p), "org.apache.hudi.avro.model.HoodieCompactionPlan");
    }

    #[test]
    fn commit_round_trips() {
        let commit = sample_commit();
        let bytes = commit.to_avro_container().unwrap();
        assert_eq!(&bytes[..4], b"Obj\x01");
        let back = CommitMetadata::from_avro_container(&bytes, "mem").unwrap();
        assert_eq!(back, commit);
        assert_eq!(back.schema_json(), Some("{\"type\":\"record\"}"));
        assert_eq!(back.write_stats().count(), 1);
        // The embedded schema is Java's, byte for byte.
        let reader = apache_avro::Reader::new(&bytes[..]).unwrap();
        assert_eq!(reader.writer_schema(), &commit_schema().unwrap().schema);
        assert!(reader.user_metadata().is_empty());
    }

    #[test]
    fn empty_and_default_commits() {
        assert_eq!(
            CommitMetadata::from_avro_container(&[], "x.deltacommit.inflight").unwrap(),
            CommitMetadata::default()
        );
        let d = CommitMetadata::default();
        assert_eq!(CommitMetadata::from_avro_container(&d.to_avro_container().unwrap(), "m").unwrap(), d);
        assert_eq!(d.schema_json(), None);
    }

    #[test]
    fn plan_round_trips() {
        let plan = CompactionPlan {
            operations: vec![
                CompactionOperation {
                    base_instant_time: "20251220210108078".into(),
                    delta_file_paths: vec![".a_1.log.1_0-1-0".into(), ".a_2.log.1_0-1-0".into()],
                    data_file_path: Some("a_0-1-0_20251220210108078.parquet".into()),
                    file_id: "a".into(),
                    partition_path: "city=chennai".into(),
                    metrics: BTreeMap::from([("TOTAL_LOG_FILES".to_string(), 2.0)]),
                    bootstrap_file_path: None,
                },
                CompactionOperation { file_id: "b".into(), base_instant_time: "1".into(), ..Default::default() },
            ],
            extra_metadata: BTreeMap::from([("k".to_string(), "v".to_string())]),
            strategy: Some(CompactionStrategy {
                compactor_class_name: None,
                strategy_params: BTreeMap::from([("p".to_string(), "q".to_string())]),
                version: 1,
            }),
            missing_schedule_partitions: vec!["city=x".into()],
            ..Default::default()
        };
        assert_eq!(plan.version, COMPACTION_PLAN_VERSION);
        let bytes = plan.to_avro_container().unwrap();
        assert_eq!(CompactionPlan::from_avro_container(&bytes, "mem").unwrap(), plan);
        let empty = CompactionPlan::default();
        assert_eq!(CompactionPlan::from_avro_container(&empty.to_avro_container().unwrap(), "m").unwrap(), empty);
    }

    #[test]
    fn bad_input_is_an_error_naming_the_path() {
        let err = CompactionPlan::from_avro_container(&[], "t/1.compaction.requested").unwrap_err();
        assert!(err.to_string().contains("t/1.compaction.requested"), "{err}");
        let err = CommitMetadata::from_avro_container(b"not avro", "t/1_2.deltacommit").unwrap_err();
        assert!(err.to_string().contains("t/1_2.deltacommit"), "{err}");
        // A commit container fed to the plan decoder: no fileId-bearing operations, just defaults.
        let commit = sample_commit().to_avro_container().unwrap();
        let plan = CompactionPlan::from_avro_container(&commit, "p").unwrap();
        assert!(plan.operations.is_empty());
        assert_eq!(plan.version, DEFAULT_AVRO_VERSION);
        // A field of the wrong type is corrupt, not a panic.
        let wrong = Value::Record(vec![("compacted".into(), Value::String("yes".into()))]);
        let json = r#"{"type":"record","name":"X","fields":[{"name":"compacted","type":"string"}]}"#;
        let bytes = avro::write_single_record(&Schema::parse_str(json).unwrap(), json, wrong, "x").unwrap();
        let err = CommitMetadata::from_avro_container(&bytes, "t/x.commit").unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }) && err.to_string().contains("compacted"), "{err}");
    }

    /// A zipped table of the second corpus (`../shared/hudi-corpus-next`,
    /// or `$TRIBUTARY_CORPUS_NEXT`) unzipped into a temp dir: the dir (keep
    /// it alive) and the table's timeline folder (`.hoodie/timeline`, or
    /// `.hoodie` for layout 1). Missing: a failure under `CI`, else `None`.
    fn unzip_next(zip: &str) -> Option<(tempfile::TempDir, PathBuf)> {
        let dir = std::env::var_os("TRIBUTARY_CORPUS_NEXT").map(PathBuf::from).unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("../shared/hudi-corpus-next")
        });
        if !dir.is_dir() {
            assert!(std::env::var_os("CI").is_none(), "the second Hudi corpus is missing at {}", dir.display());
            eprintln!("SKIP: second Hudi corpus not found at {}", dir.display());
            return None;
        }
        let zip_path = dir.join(zip);
        let tmp = tempfile::tempdir().unwrap();
        zip::ZipArchive::new(std::fs::File::open(&zip_path).unwrap()).unwrap().extract(tmp.path()).unwrap();
        let base = tmp.path().join(zip_path.file_stem().unwrap());
        let timeline =
            if base.join(".hoodie/timeline").is_dir() { base.join(".hoodie/timeline") } else { base.join(".hoodie") };
        Some((tmp, timeline))
    }

    /// Hudi's replacecommits decode with the file groups they replaced:
    /// Avro in a v9 table (insert overwrite and clustering), JSON in a v6
    /// one; and a clustering replaces exactly the groups its plan named.
    #[test]
    fn decodes_java_replace_commits_and_clustering_plans() {
        let Some((_tmp, timeline)) = unzip_next("sample_table/mor/avro/v9_txns_complex_nometa.zip") else { return };
        let (bytes, path) = read(&timeline, "20260307135907259_20260307135907539.replacecommit");
        let overwrite = CommitMetadata::from_bytes_shared(&bytes, &path).unwrap();
        assert_eq!(overwrite.operation_type, "INSERT_OVERWRITE");
        assert!(!overwrite.partition_to_replace_file_ids.is_empty());
        assert!(overwrite.write_stats().all(|s| s.path.ends_with(".parquet")), "{overwrite:?}");
        // An insert overwrite's requested file plans no clustering.
        let (bytes, path) = read(&timeline, "20260307135907259.replacecommit.requested");
        assert_eq!(clustering_file_groups(&bytes, &path).unwrap(), Vec::<(String, String)>::new());

        let (bytes, path) = read(&timeline, "20260307135909992_20260307135910436.replacecommit");
        let clustered = CommitMetadata::from_bytes_shared(&bytes, &path).unwrap();
        assert_eq!(clustered.operation_type, "CLUSTER");
        let mut replaced: Vec<(String, String)> = clustered
            .partition_to_replace_file_ids
            .iter()
            .flat_map(|(p, ids)| ids.iter().map(move |id| (p.clone(), id.clone())))
            .collect();
        let (bytes, path) = read(&timeline, "20260307135909992.clustering.requested");
        let mut planned = clustering_file_groups(&bytes, &path).unwrap();
        replaced.sort();
        planned.sort();
        assert!(!planned.is_empty());
        assert_eq!(planned, replaced);

        let zip = "sample_table/mor/parquet/v6_simplekeygen_nonhivestyle_overwritetable.zip";
        let Some((_tmp, timeline)) = unzip_next(zip) else { return };
        let (bytes, path) = read(&timeline, "20250121000702475.replacecommit");
        let table = CommitMetadata::from_bytes_shared(&bytes, &path).unwrap();
        assert_eq!(table.operation_type, "INSERT_OVERWRITE_TABLE");
        let partitions: Vec<&str> = table.partition_to_replace_file_ids.keys().map(String::as_str).collect();
        assert_eq!(partitions, ["10", "20", "30"]);
        assert_eq!(table.partition_to_replace_file_ids["10"], ["92e64357-e4d1-4639-a9d3-c3535829d0aa-0"]);
    }

    #[test]
    fn decodes_java_delta_commits() {
        let Some((_tmp, timeline)) = unzip_timeline(TRIPS) else { return };
        let (bytes, path) = read(&timeline, "20251220210123755_20251220210124336.deltacommit");
        let commit = CommitMetadata::from_avro_container(&bytes, &path).unwrap();
        assert_eq!(commit.operation_type, "UPSERT_PREPPED");
        assert!(!commit.compacted);
        assert!(commit.schema_json().unwrap().contains("v8_trips_8i3u1d_record"));
        assert_eq!(commit.extra_metadata.get("_hoodie.spark.sql.writes.prepped").map(String::as_str), Some("true"));
        let stats = &commit.partition_to_write_stats["city=san_francisco"];
        assert_eq!(stats.len(), 1);
        let s = &stats[0];
        let log = ".036ded81-9ed4-479f-bcea-7145dfa0079b-0_20251220210123755.log.1_0-1022-2928";
        assert_eq!(s.file_id, "036ded81-9ed4-479f-bcea-7145dfa0079b-0");
        assert_eq!(s.path, format!("city=san_francisco/{log}"));
        assert_eq!(s.prev_commit, "20251220210123755");
        assert_eq!(s.log_files.as_deref(), Some(&[log.to_string()][..]));
        assert_eq!((s.log_version, s.log_offset, s.base_file.as_deref()), (Some(1), Some(0), Some("")));
        assert_eq!((s.num_writes, s.num_update_writes, s.num_inserts, s.num_deletes), (1, 1, 0, 0));
        assert_eq!((s.total_write_bytes, s.file_size_in_bytes), (1153, 1153));
        assert_eq!(s.partition_path, "city=san_francisco");
        assert_eq!(s.total_log_files, None);
        assert_eq!(s.runtime_stats.as_ref().map(|r| r.total_upsert_time), Some(75));

        // Every completed and inflight delta commit decodes and survives our encoder.
        let mut seen = 0;
        for entry in std::fs::read_dir(&timeline).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if !(name.ends_with(".deltacommit") || name.ends_with(".commit") || name.ends_with(".deltacommit.inflight"))
            {
                continue;
            }
            let (bytes, path) = read(&timeline, &name);
            let java = CommitMetadata::from_avro_container(&bytes, &path).unwrap();
            let ours = java.to_avro_container().unwrap();
            assert_eq!(CommitMetadata::from_avro_container(&ours, &path).unwrap(), java, "{name}");
            seen += 1;
        }
        assert!(seen >= 13, "expected the corpus commits, saw {seen}");
    }

    /// The bytes before the first sync marker: magic and metadata map.
    fn header_of<'a>(ours: &'a [u8], embedded: &Embedded) -> &'a [u8] {
        let json = embedded.json.as_bytes();
        let at = ours.windows(json.len()).position(|w| w == json).expect("schema text embedded");
        &ours[..at + json.len() + 1]
    }

    #[test]
    fn container_header_matches_java_byte_for_byte() {
        let Some((_tmp, timeline)) = unzip_timeline(TRIPS) else { return };
        let (java, _) = read(&timeline, "20251220210129235_20251220210129883.commit");
        let ours = CommitMetadata::default().to_avro_container().unwrap();
        let header = header_of(&ours, commit_schema().unwrap());
        assert!(java.starts_with(header), "commit header differs from Java's");
        let (java, _) = read(&timeline, "20251220210129235.compaction.requested");
        let ours = CompactionPlan::default().to_avro_container().unwrap();
        let header = header_of(&ours, plan_schema().unwrap());
        assert!(java.starts_with(header), "plan header differs from Java's");
        // No randomness in the framing: the sync marker is derived from the content.
        assert_eq!(ours, CompactionPlan::default().to_avro_container().unwrap());
    }

    #[test]
    fn decodes_java_compaction_commit() {
        let Some((_tmp, timeline)) = unzip_timeline(TRIPS) else { return };
        let (bytes, path) = read(&timeline, "20251220210129235_20251220210129883.commit");
        let commit = CommitMetadata::from_avro_container(&bytes, &path).unwrap();
        assert!(commit.compacted);
        assert_eq!(commit.operation_type, "COMPACT");
        assert_eq!(commit.partition_to_write_stats.len(), 3);
        let s = &commit.partition_to_write_stats["city=chennai"][0];
        assert_eq!(s.prev_commit, "20251220210108078");
        assert_eq!(
            s.prev_base_file.as_deref(),
            Some("6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0_2-986-2794_20251220210108078.parquet")
        );
        assert_eq!((s.log_files.as_ref(), s.base_file.as_ref(), s.log_version), (None, None, None));
        assert_eq!((s.total_log_files_compacted, s.total_log_size_compacted, s.total_log_blocks), (2, 2117, 2));
        // Re-encoded with our encoder, decoded again: equal.
        let ours = commit.to_avro_container().unwrap();
        assert_eq!(CommitMetadata::from_avro_container(&ours, "ours").unwrap(), commit);
    }

    #[test]
    fn decodes_java_compaction_plan() {
        let Some((_tmp, timeline)) = unzip_timeline(TRIPS) else { return };
        let (bytes, path) = read(&timeline, "20251220210129235.compaction.requested");
        let plan = CompactionPlan::from_avro_container(&bytes, &path).unwrap();
        assert_eq!(plan.operations.len(), 3);
        assert_eq!(plan.version, 2);
        assert_eq!(plan.strategy, None);
        assert!(!plan.preserve_hoodie_metadata);
        assert!(plan.missing_schedule_partitions.is_empty());
        let op = plan.operations.iter().find(|o| o.partition_path == "city=chennai").unwrap();
        assert_eq!(op.file_id, "6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0");
        assert_eq!(op.base_instant_time, "20251220210108078");
        assert_eq!(
            op.delta_file_paths,
            [
                ".6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0_20251220210127080.log.1_0-1072-3078",
                ".6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0_20251220210128625.log.1_0-1097-3150",
            ]
        );
        assert_eq!(
            op.data_file_path.as_deref(),
            Some("6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0_2-986-2794_20251220210108078.parquet")
        );
        assert_eq!(op.metrics.get("TOTAL_LOG_FILES_SIZE"), Some(&2117.0));
        assert_eq!(op.bootstrap_file_path, None);
        // Re-encoded with our encoder, decoded again: equal.
        let again = CompactionPlan::from_avro_container(&plan.to_avro_container().unwrap(), "ours").unwrap();
        assert_eq!(again, plan);
    }

    #[test]
    fn decodes_layout_one_json_commits_through_serde() {
        let Some(corpus) = corpus_dir() else { return };
        let zip_path = corpus.join("quickstart_trips_table/mor/avro/v6_trips_8i1u.zip");
        let mut archive = zip::ZipArchive::new(std::fs::File::open(zip_path).unwrap()).unwrap();
        let name = archive
            .file_names()
            .find(|n| !n.contains("__MACOSX") && !n.contains("/metadata/") && n.ends_with(".deltacommit"))
            .unwrap()
            .to_string();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut archive.by_name(&name).unwrap(), &mut text).unwrap();
        let commit: CommitMetadata = serde_json::from_str(&text).unwrap();
        assert!(commit.write_stats().all(|s| !s.file_id.is_empty()), "{name}");
        assert!(commit.schema_json().is_some());
    }
}
