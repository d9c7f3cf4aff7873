//! Typed metadata of the table-service instants: `HoodieCleanerPlan`
//! (`clean.requested` and `clean.inflight`), `HoodieCleanMetadata` (completed
//! `clean`), `HoodieRollbackPlan` (`rollback.requested`) and
//! `HoodieRollbackMetadata` (completed `rollback`).
//!
//! Like [`crate::metadata`], each is an Avro object container file holding
//! one record, written under the writer schema Java Hudi 1.x (table version
//! 8) embeds: the bundled `timeline/schemas/*.avsc` reproduce the
//! `org.apache.hudi.avro.model` schemas of `hudi-common/src/main/avro` field
//! for field (names, order, types, defaults), with nested named types inlined
//! at first use as Java's generated classes embed them. Decoding accepts any
//! writer's container and reads fields by name; missing or null fields take
//! their defaults.
//!
//! ```
//! # fn main() -> tributary_format::Result<()> {
//! use tributary_format::{InstantInfo, RollbackPlan, RollbackRequest};
//!
//! let plan = RollbackPlan {
//!     instant_to_rollback: Some(InstantInfo::new("20251220210108078", "deltacommit")),
//!     rollback_requests: vec![RollbackRequest {
//!         partition_path: "city=chennai".into(),
//!         files_to_be_deleted: vec!["city=chennai/.f-0_20251220210108078.log.1_0-1-0".into()],
//!         ..Default::default()
//!     }],
//!     ..Default::default()
//! };
//! let bytes = plan.to_avro_container()?;
//! assert_eq!(RollbackPlan::from_avro_container(&bytes, "t.rollback.requested")?, plan);
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, HashMap};

use apache_avro::types::Value;
use serde::{Deserialize, Serialize};

use crate::avro::{
    self, corrupt, expect_record, opt, opt_bool, opt_int, opt_long, opt_map, opt_map_of, opt_record, opt_string,
    opt_strings, read_record, some, string_array, string_list, string_map,
};
use crate::avro::{Embedded, EmbeddedCell};
use crate::error::Result;

/// The writer schema of `org.apache.hudi.avro.model.HoodieCleanerPlan`.
pub(crate) const CLEANER_PLAN_SCHEMA: &str = include_str!("../schemas/HoodieCleanerPlan.avsc");
/// The writer schema of `org.apache.hudi.avro.model.HoodieCleanMetadata`.
pub(crate) const CLEAN_METADATA_SCHEMA: &str = include_str!("../schemas/HoodieCleanMetadata.avsc");
/// The writer schema of `org.apache.hudi.avro.model.HoodieRollbackPlan`.
pub(crate) const ROLLBACK_PLAN_SCHEMA: &str = include_str!("../schemas/HoodieRollbackPlan.avsc");
/// The writer schema of `org.apache.hudi.avro.model.HoodieRollbackMetadata`.
pub(crate) const ROLLBACK_METADATA_SCHEMA: &str = include_str!("../schemas/HoodieRollbackMetadata.avsc");

/// The cleaner plan version Hudi 1.x writes (`CleanPlanner.LATEST_CLEAN_PLAN_VERSION`):
/// files are listed in `filePathsToBeDeletedPerPartition`.
pub(crate) const CLEANER_PLAN_VERSION: i32 = 2;
/// The clean metadata version Hudi 1.x writes (`CLEAN_METADATA_VERSION_2`).
pub(crate) const CLEAN_METADATA_VERSION: i32 = 2;
/// The rollback plan version Hudi 1.x writes.
pub(crate) const ROLLBACK_PLAN_VERSION: i32 = 1;
/// The rollback metadata version Hudi 1.x writes.
pub(crate) const ROLLBACK_METADATA_VERSION: i32 = 1;
/// The cleaning policy that keeps the file slices the last N commits need.
pub const KEEP_LATEST_COMMITS: &str = "KEEP_LATEST_COMMITS";

/// The Avro default of every `version` field here, used when a file has none.
const DEFAULT_AVRO_VERSION: i32 = 1;

fn cleaner_plan_schema() -> Result<&'static Embedded> {
    static SCHEMA: EmbeddedCell = EmbeddedCell::new();
    avro::embedded(&SCHEMA, CLEANER_PLAN_SCHEMA, "schemas/HoodieCleanerPlan.avsc")
}

fn clean_metadata_schema() -> Result<&'static Embedded> {
    static SCHEMA: EmbeddedCell = EmbeddedCell::new();
    avro::embedded(&SCHEMA, CLEAN_METADATA_SCHEMA, "schemas/HoodieCleanMetadata.avsc")
}

fn rollback_plan_schema() -> Result<&'static Embedded> {
    static SCHEMA: EmbeddedCell = EmbeddedCell::new();
    avro::embedded(&SCHEMA, ROLLBACK_PLAN_SCHEMA, "schemas/HoodieRollbackPlan.avsc")
}

fn rollback_metadata_schema() -> Result<&'static Embedded> {
    static SCHEMA: EmbeddedCell = EmbeddedCell::new();
    avro::embedded(&SCHEMA, ROLLBACK_METADATA_SCHEMA, "schemas/HoodieRollbackMetadata.avsc")
}

/// An instant named by time and action (`HoodieInstantInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InstantInfo {
    /// The instant's requested time.
    pub commit_time: String,
    /// The action name (`deltacommit`, `commit`, ...).
    pub action: String,
}

impl InstantInfo {
    /// An instant `commit_time` of `action`.
    pub fn new(commit_time: impl Into<String>, action: impl Into<String>) -> Self {
        Self { commit_time: commit_time.into(), action: action.into() }
    }
}

/// An instant with its state (`HoodieActionInstant`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ActionInstant {
    /// The instant's requested time.
    pub timestamp: String,
    /// The action name.
    pub action: String,
    /// The state as Java names it: `REQUESTED`, `INFLIGHT` or `COMPLETED`.
    pub state: String,
}

/// One file a cleaner plan deletes (`HoodieCleanFileInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CleanFileInfo {
    /// The file's path (Java writes the full path).
    pub file_path: Option<String>,
    /// Whether it is a bootstrap source file (Java: `false` for ordinary files).
    pub is_bootstrap_base_file: Option<bool>,
}

/// The content of `clean.requested` and `clean.inflight` (`HoodieCleanerPlan`).
///
/// The default is an empty version-2 [`KEEP_LATEST_COMMITS`] plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CleanerPlan {
    /// The oldest instant whose file slices are all kept.
    pub earliest_instant_to_retain: Option<ActionInstant>,
    /// The requested time of the latest completed commit when planning.
    pub last_completed_commit_timestamp: String,
    /// The cleaning policy (`KEEP_LATEST_COMMITS`, ...).
    pub policy: String,
    /// Version-1 file lists by partition (deprecated; Java writes an empty map).
    pub files_to_be_deleted_per_partition: BTreeMap<String, Vec<String>>,
    /// The plan version (Avro default 1; Hudi 1.x writes `CLEANER_PLAN_VERSION`).
    pub version: i32,
    /// The files to delete, by partition.
    pub file_paths_to_be_deleted_per_partition: BTreeMap<String, Vec<CleanFileInfo>>,
    /// Partitions to delete outright (Java writes an empty list).
    pub partitions_to_be_deleted: Vec<String>,
    /// Free-form metadata (Java: savepointed timestamps); `None` is written as null.
    pub extra_metadata: Option<BTreeMap<String, String>>,
}

impl Default for CleanerPlan {
    fn default() -> Self {
        Self {
            earliest_instant_to_retain: None,
            last_completed_commit_timestamp: String::new(),
            policy: KEEP_LATEST_COMMITS.into(),
            files_to_be_deleted_per_partition: BTreeMap::new(),
            version: CLEANER_PLAN_VERSION,
            file_paths_to_be_deleted_per_partition: BTreeMap::new(),
            partitions_to_be_deleted: Vec::new(),
            extra_metadata: None,
        }
    }
}

impl CleanerPlan {
    /// Every `(partition, file path)` the plan deletes, from both the
    /// version-2 and the deprecated version-1 lists.
    pub fn files(&self) -> Vec<(String, String)> {
        let v2 = self.file_paths_to_be_deleted_per_partition.iter().flat_map(|(partition, files)| {
            files.iter().filter_map(|f| f.file_path.clone()).map(move |p| (partition.clone(), p))
        });
        let v1 = self
            .files_to_be_deleted_per_partition
            .iter()
            .flat_map(|(partition, files)| files.iter().map(move |p| (partition.clone(), p.clone())));
        v2.chain(v1).collect()
    }

    /// Encodes this plan as an Avro object container file with one
    /// `HoodieCleanerPlan` record, the Java writer schema embedded, codec null.
    pub fn to_avro_container(&self) -> Result<Vec<u8>> {
        let earliest = self.earliest_instant_to_retain.as_ref().map(|i| {
            Value::Record(vec![
                ("timestamp".into(), Value::String(i.timestamp.clone())),
                ("action".into(), Value::String(i.action.clone())),
                ("state".into(), Value::String(i.state.clone())),
            ])
        });
        let v1 = self
            .files_to_be_deleted_per_partition
            .iter()
            .map(|(p, files)| (p.clone(), string_array(files)))
            .collect::<HashMap<_, _>>();
        let v2 = self
            .file_paths_to_be_deleted_per_partition
            .iter()
            .map(|(p, files)| {
                let infos = files
                    .iter()
                    .map(|f| {
                        Value::Record(vec![
                            ("filePath".into(), opt(f.file_path.clone().map(Value::String))),
                            ("isBootstrapBaseFile".into(), opt(f.is_bootstrap_base_file.map(Value::Boolean))),
                        ])
                    })
                    .collect();
                (p.clone(), Value::Array(infos))
            })
            .collect::<HashMap<_, _>>();
        let record = Value::Record(vec![
            ("earliestInstantToRetain".into(), opt(earliest)),
            ("lastCompletedCommitTimestamp".into(), Value::String(self.last_completed_commit_timestamp.clone())),
            ("policy".into(), Value::String(self.policy.clone())),
            ("filesToBeDeletedPerPartition".into(), some(Value::Map(v1))),
            ("version".into(), int_first(self.version)),
            ("filePathsToBeDeletedPerPartition".into(), some(Value::Map(v2))),
            ("partitionsToBeDeleted".into(), some(string_array(&self.partitions_to_be_deleted))),
            ("extraMetadata".into(), opt(self.extra_metadata.as_ref().map(string_map))),
        ]);
        avro::encode_embedded(cleaner_plan_schema()?, record, "HoodieCleanerPlan")
    }

    /// Decodes a cleaner plan written by any Avro writer. An empty file is
    /// [`Error::Corrupt`](crate::Error::Corrupt): a requested clean always has a plan.
    pub fn from_avro_container(bytes: &[u8], path: &str) -> Result<Self> {
        let record = read_record(bytes, path, "HoodieCleanerPlan")?;
        let earliest_instant_to_retain = match opt_record(&record, "earliestInstantToRetain", path)? {
            None => None,
            Some(i) => Some(ActionInstant {
                timestamp: opt_string(i, "timestamp", path)?.unwrap_or_default(),
                action: opt_string(i, "action", path)?.unwrap_or_default(),
                state: opt_string(i, "state", path)?.unwrap_or_default(),
            }),
        };
        let mut v1 = BTreeMap::new();
        for (partition, files) in opt_map(&record, "filesToBeDeletedPerPartition", path)?.into_iter().flatten() {
            v1.insert(partition.clone(), strings_of(files, "filesToBeDeletedPerPartition", path)?);
        }
        let mut v2 = BTreeMap::new();
        for (partition, files) in opt_map(&record, "filePathsToBeDeletedPerPartition", path)?.into_iter().flatten() {
            let Value::Array(items) = avro::plain(files) else {
                return Err(corrupt(path, format!("filePathsToBeDeletedPerPartition[{partition}] is not an array")));
            };
            let infos = items
                .iter()
                .map(|f| {
                    expect_record(f, "HoodieCleanFileInfo", path)?;
                    Ok(CleanFileInfo {
                        file_path: opt_string(f, "filePath", path)?,
                        is_bootstrap_base_file: opt_bool(f, "isBootstrapBaseFile", path)?,
                    })
                })
                .collect::<Result<_>>()?;
            v2.insert(partition.clone(), infos);
        }
        Ok(Self {
            earliest_instant_to_retain,
            last_completed_commit_timestamp: opt_string(&record, "lastCompletedCommitTimestamp", path)?
                .unwrap_or_default(),
            policy: opt_string(&record, "policy", path)?.unwrap_or_default(),
            files_to_be_deleted_per_partition: v1,
            version: opt_int(&record, "version", path)?.unwrap_or(DEFAULT_AVRO_VERSION),
            file_paths_to_be_deleted_per_partition: v2,
            partitions_to_be_deleted: string_list(&record, "partitionsToBeDeleted", path)?,
            extra_metadata: opt_strings(&record, "extraMetadata", path)?,
        })
    }
}

/// What a clean did in one partition (`HoodieCleanPartitionMetadata`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CleanPartitionMetadata {
    /// The partition path.
    pub partition_path: String,
    /// The cleaning policy.
    pub policy: String,
    /// The file names the plan listed.
    pub delete_path_patterns: Vec<String>,
    /// The file names deleted (or already gone).
    pub success_delete_files: Vec<String>,
    /// The file names that could not be deleted.
    pub failed_delete_files: Vec<String>,
    /// Whether the whole partition was deleted.
    pub is_partition_deleted: Option<bool>,
}

/// The content of a completed `clean` instant (`HoodieCleanMetadata`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CleanMetadata {
    /// The clean's instant time.
    pub start_clean_time: String,
    /// How long the clean took.
    pub time_taken_in_millis: i64,
    /// Files deleted, over all partitions.
    pub total_files_deleted: i32,
    /// The oldest instant whose file slices were all kept.
    pub earliest_commit_to_retain: String,
    /// The plan's `lastCompletedCommitTimestamp`.
    pub last_completed_commit_timestamp: String,
    /// What was done, by partition.
    pub partition_metadata: BTreeMap<String, CleanPartitionMetadata>,
    /// The metadata version (Hudi 1.x writes `CLEAN_METADATA_VERSION`).
    pub version: i32,
    /// Bootstrap files cleaned, by partition (Java writes an empty map).
    pub bootstrap_partition_metadata: Option<BTreeMap<String, CleanPartitionMetadata>>,
    /// Free-form metadata (the plan's); `None` is written as null.
    pub extra_metadata: Option<BTreeMap<String, String>>,
}

impl Default for CleanMetadata {
    fn default() -> Self {
        Self {
            start_clean_time: String::new(),
            time_taken_in_millis: 0,
            total_files_deleted: 0,
            earliest_commit_to_retain: String::new(),
            last_completed_commit_timestamp: String::new(),
            partition_metadata: BTreeMap::new(),
            version: CLEAN_METADATA_VERSION,
            bootstrap_partition_metadata: Some(BTreeMap::new()),
            extra_metadata: None,
        }
    }
}

fn clean_partition_to_avro(m: &CleanPartitionMetadata) -> Value {
    Value::Record(vec![
        ("partitionPath".into(), Value::String(m.partition_path.clone())),
        ("policy".into(), Value::String(m.policy.clone())),
        ("deletePathPatterns".into(), string_array(&m.delete_path_patterns)),
        ("successDeleteFiles".into(), string_array(&m.success_delete_files)),
        ("failedDeleteFiles".into(), string_array(&m.failed_delete_files)),
        ("isPartitionDeleted".into(), opt(m.is_partition_deleted.map(Value::Boolean))),
    ])
}

fn clean_partition_from_avro(v: &Value, path: &str) -> Result<CleanPartitionMetadata> {
    expect_record(v, "HoodieCleanPartitionMetadata", path)?;
    Ok(CleanPartitionMetadata {
        partition_path: opt_string(v, "partitionPath", path)?.unwrap_or_default(),
        policy: opt_string(v, "policy", path)?.unwrap_or_default(),
        delete_path_patterns: string_list(v, "deletePathPatterns", path)?,
        success_delete_files: string_list(v, "successDeleteFiles", path)?,
        failed_delete_files: string_list(v, "failedDeleteFiles", path)?,
        is_partition_deleted: opt_bool(v, "isPartitionDeleted", path)?,
    })
}

fn clean_partitions_from_avro(
    v: &Value,
    name: &str,
    path: &str,
) -> Result<Option<BTreeMap<String, CleanPartitionMetadata>>> {
    let Some(entries) = opt_map(v, name, path)? else { return Ok(None) };
    entries.iter().map(|(k, m)| Ok((k.clone(), clean_partition_from_avro(m, path)?))).collect::<Result<_>>().map(Some)
}

impl CleanMetadata {
    /// Encodes this metadata as an Avro object container file with one
    /// `HoodieCleanMetadata` record, the Java writer schema embedded, codec null.
    pub fn to_avro_container(&self) -> Result<Vec<u8>> {
        let partitions = |m: &BTreeMap<String, CleanPartitionMetadata>| {
            Value::Map(m.iter().map(|(k, p)| (k.clone(), clean_partition_to_avro(p))).collect())
        };
        let record = Value::Record(vec![
            ("startCleanTime".into(), Value::String(self.start_clean_time.clone())),
            ("timeTakenInMillis".into(), Value::Long(self.time_taken_in_millis)),
            ("totalFilesDeleted".into(), Value::Int(self.total_files_deleted)),
            ("earliestCommitToRetain".into(), Value::String(self.earliest_commit_to_retain.clone())),
            ("lastCompletedCommitTimestamp".into(), Value::String(self.last_completed_commit_timestamp.clone())),
            ("partitionMetadata".into(), partitions(&self.partition_metadata)),
            ("version".into(), int_first(self.version)),
            ("bootstrapPartitionMetadata".into(), opt(self.bootstrap_partition_metadata.as_ref().map(partitions))),
            ("extraMetadata".into(), opt(self.extra_metadata.as_ref().map(string_map))),
        ]);
        avro::encode_embedded(clean_metadata_schema()?, record, "HoodieCleanMetadata")
    }

    /// Decodes a completed clean written by any Avro writer. An empty file is
    /// [`Error::Corrupt`](crate::Error::Corrupt).
    pub fn from_avro_container(bytes: &[u8], path: &str) -> Result<Self> {
        let record = read_record(bytes, path, "HoodieCleanMetadata")?;
        Ok(Self {
            start_clean_time: opt_string(&record, "startCleanTime", path)?.unwrap_or_default(),
            time_taken_in_millis: opt_long(&record, "timeTakenInMillis", path)?.unwrap_or_default(),
            total_files_deleted: opt_int(&record, "totalFilesDeleted", path)?.unwrap_or_default(),
            earliest_commit_to_retain: opt_string(&record, "earliestCommitToRetain", path)?.unwrap_or_default(),
            last_completed_commit_timestamp: opt_string(&record, "lastCompletedCommitTimestamp", path)?
                .unwrap_or_default(),
            partition_metadata: clean_partitions_from_avro(&record, "partitionMetadata", path)?.unwrap_or_default(),
            version: opt_int(&record, "version", path)?.unwrap_or(DEFAULT_AVRO_VERSION),
            bootstrap_partition_metadata: clean_partitions_from_avro(&record, "bootstrapPartitionMetadata", path)?,
            extra_metadata: opt_strings(&record, "extraMetadata", path)?,
        })
    }
}

/// The files of one file group a rollback deletes (`HoodieRollbackRequest`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RollbackRequest {
    /// The partition path.
    pub partition_path: String,
    /// The file group id, if known.
    pub file_id: Option<String>,
    /// The base instant of the file (v8 logs: the failed instant itself), if known.
    pub latest_base_instant: Option<String>,
    /// The files to delete (Java writes full paths).
    pub files_to_be_deleted: Vec<String>,
    /// Table version 6 only: logs to append rollback blocks to, with sizes.
    pub log_blocks_to_be_deleted: Option<BTreeMap<String, i64>>,
}

/// The content of `rollback.requested` (`HoodieRollbackPlan`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RollbackPlan {
    /// The instant being rolled back.
    pub instant_to_rollback: Option<InstantInfo>,
    /// What to delete.
    pub rollback_requests: Vec<RollbackRequest>,
    /// The plan version (Hudi 1.x writes `ROLLBACK_PLAN_VERSION`).
    pub version: i32,
}

impl Default for RollbackPlan {
    fn default() -> Self {
        Self { instant_to_rollback: None, rollback_requests: Vec::new(), version: ROLLBACK_PLAN_VERSION }
    }
}

impl RollbackPlan {
    /// Encodes this plan as an Avro object container file with one
    /// `HoodieRollbackPlan` record, the Java writer schema embedded, codec null.
    pub fn to_avro_container(&self) -> Result<Vec<u8>> {
        let requests = self
            .rollback_requests
            .iter()
            .map(|r| {
                Value::Record(vec![
                    ("partitionPath".into(), Value::String(r.partition_path.clone())),
                    ("fileId".into(), opt(r.file_id.clone().map(Value::String))),
                    ("latestBaseInstant".into(), opt(r.latest_base_instant.clone().map(Value::String))),
                    ("filesToBeDeleted".into(), string_array(&r.files_to_be_deleted)),
                    ("logBlocksToBeDeleted".into(), opt(r.log_blocks_to_be_deleted.as_ref().map(long_map))),
                ])
            })
            .collect();
        let record = Value::Record(vec![
            ("instantToRollback".into(), opt(self.instant_to_rollback.as_ref().map(instant_info_to_avro))),
            ("RollbackRequests".into(), some(Value::Array(requests))),
            ("version".into(), int_first(self.version)),
        ]);
        avro::encode_embedded(rollback_plan_schema()?, record, "HoodieRollbackPlan")
    }

    /// Decodes a rollback plan written by any Avro writer. An empty file is
    /// [`Error::Corrupt`](crate::Error::Corrupt): a requested rollback always has a plan.
    pub fn from_avro_container(bytes: &[u8], path: &str) -> Result<Self> {
        let record = read_record(bytes, path, "HoodieRollbackPlan")?;
        let instant_to_rollback = match opt_record(&record, "instantToRollback", path)? {
            None => None,
            Some(i) => Some(instant_info_from_avro(i, path)?),
        };
        let rollback_requests = avro::opt_array(&record, "RollbackRequests", path)?
            .unwrap_or_default()
            .iter()
            .map(|r| {
                expect_record(r, "HoodieRollbackRequest", path)?;
                Ok(RollbackRequest {
                    partition_path: opt_string(r, "partitionPath", path)?.unwrap_or_default(),
                    file_id: opt_string(r, "fileId", path)?,
                    latest_base_instant: opt_string(r, "latestBaseInstant", path)?,
                    files_to_be_deleted: string_list(r, "filesToBeDeleted", path)?,
                    log_blocks_to_be_deleted: opt_longs(r, "logBlocksToBeDeleted", path)?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            instant_to_rollback,
            rollback_requests,
            version: opt_int(&record, "version", path)?.unwrap_or(DEFAULT_AVRO_VERSION),
        })
    }
}

/// What a rollback did in one partition (`HoodieRollbackPartitionMetadata`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RollbackPartitionMetadata {
    /// The partition path.
    pub partition_path: String,
    /// The files deleted (or already gone).
    pub success_delete_files: Vec<String>,
    /// The files that could not be deleted.
    pub failed_delete_files: Vec<String>,
    /// Table version 6 only: logs rollback blocks were appended to, with sizes.
    pub rollback_log_files: Option<BTreeMap<String, i64>>,
    /// Log files the failed commit wrote, with sizes (for the metadata table).
    pub log_files_from_failed_commit: Option<BTreeMap<String, i64>>,
}

/// The content of a completed `rollback` instant (`HoodieRollbackMetadata`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RollbackMetadata {
    /// The rollback's instant time.
    pub start_rollback_time: String,
    /// How long the rollback took.
    pub time_taken_in_millis: i64,
    /// Files deleted, over all partitions.
    pub total_files_deleted: i32,
    /// The requested times of the instants rolled back.
    pub commits_rollback: Vec<String>,
    /// What was done, by partition.
    pub partition_metadata: BTreeMap<String, RollbackPartitionMetadata>,
    /// The metadata version (Hudi 1.x writes `ROLLBACK_METADATA_VERSION`).
    pub version: i32,
    /// The instants rolled back, with their actions.
    pub instants_rollback: Vec<InstantInfo>,
}

impl Default for RollbackMetadata {
    fn default() -> Self {
        Self {
            start_rollback_time: String::new(),
            time_taken_in_millis: 0,
            total_files_deleted: 0,
            commits_rollback: Vec::new(),
            partition_metadata: BTreeMap::new(),
            version: ROLLBACK_METADATA_VERSION,
            instants_rollback: Vec::new(),
        }
    }
}

impl RollbackMetadata {
    /// Encodes this metadata as an Avro object container file with one
    /// `HoodieRollbackMetadata` record, the Java writer schema embedded, codec null.
    pub fn to_avro_container(&self) -> Result<Vec<u8>> {
        let partitions = self
            .partition_metadata
            .iter()
            .map(|(k, m)| {
                let v = Value::Record(vec![
                    ("partitionPath".into(), Value::String(m.partition_path.clone())),
                    ("successDeleteFiles".into(), string_array(&m.success_delete_files)),
                    ("failedDeleteFiles".into(), string_array(&m.failed_delete_files)),
                    ("rollbackLogFiles".into(), opt(m.rollback_log_files.as_ref().map(long_map))),
                    ("logFilesFromFailedCommit".into(), opt(m.log_files_from_failed_commit.as_ref().map(long_map))),
                ]);
                (k.clone(), v)
            })
            .collect();
        let record = Value::Record(vec![
            ("startRollbackTime".into(), Value::String(self.start_rollback_time.clone())),
            ("timeTakenInMillis".into(), Value::Long(self.time_taken_in_millis)),
            ("totalFilesDeleted".into(), Value::Int(self.total_files_deleted)),
            ("commitsRollback".into(), string_array(&self.commits_rollback)),
            ("partitionMetadata".into(), Value::Map(partitions)),
            ("version".into(), int_first(self.version)),
            (
                "instantsRollback".into(),
                Value::Array(self.instants_rollback.iter().map(instant_info_to_avro).collect()),
            ),
        ]);
        avro::encode_embedded(rollback_metadata_schema()?, record, "HoodieRollbackMetadata")
    }

    /// Decodes a completed rollback written by any Avro writer. An empty file
    /// is [`Error::Corrupt`](crate::Error::Corrupt).
    pub fn from_avro_container(bytes: &[u8], path: &str) -> Result<Self> {
        let record = read_record(bytes, path, "HoodieRollbackMetadata")?;
        let mut partition_metadata = BTreeMap::new();
        for (k, m) in opt_map(&record, "partitionMetadata", path)?.into_iter().flatten() {
            expect_record(m, "HoodieRollbackPartitionMetadata", path)?;
            partition_metadata.insert(
                k.clone(),
                RollbackPartitionMetadata {
                    partition_path: opt_string(m, "partitionPath", path)?.unwrap_or_default(),
                    success_delete_files: string_list(m, "successDeleteFiles", path)?,
                    failed_delete_files: string_list(m, "failedDeleteFiles", path)?,
                    rollback_log_files: opt_longs(m, "rollbackLogFiles", path)?,
                    log_files_from_failed_commit: opt_longs(m, "logFilesFromFailedCommit", path)?,
                },
            );
        }
        let instants_rollback = avro::opt_array(&record, "instantsRollback", path)?
            .unwrap_or_default()
            .iter()
            .map(|i| instant_info_from_avro(avro::plain(i), path))
            .collect::<Result<_>>()?;
        Ok(Self {
            start_rollback_time: opt_string(&record, "startRollbackTime", path)?.unwrap_or_default(),
            time_taken_in_millis: opt_long(&record, "timeTakenInMillis", path)?.unwrap_or_default(),
            total_files_deleted: opt_int(&record, "totalFilesDeleted", path)?.unwrap_or_default(),
            commits_rollback: string_list(&record, "commitsRollback", path)?,
            partition_metadata,
            version: opt_int(&record, "version", path)?.unwrap_or(DEFAULT_AVRO_VERSION),
            instants_rollback,
        })
    }
}

fn instant_info_to_avro(i: &InstantInfo) -> Value {
    Value::Record(vec![
        ("commitTime".into(), Value::String(i.commit_time.clone())),
        ("action".into(), Value::String(i.action.clone())),
    ])
}

fn instant_info_from_avro(v: &Value, path: &str) -> Result<InstantInfo> {
    expect_record(v, "HoodieInstantInfo", path)?;
    Ok(InstantInfo {
        commit_time: opt_string(v, "commitTime", path)?.unwrap_or_default(),
        action: opt_string(v, "action", path)?.unwrap_or_default(),
    })
}

/// The `int` branch (index 0) of an `["int", "null"]` union.
fn int_first(n: i32) -> Value {
    Value::Union(0, Box::new(Value::Int(n)))
}

fn long_map(m: &BTreeMap<String, i64>) -> Value {
    Value::Map(m.iter().map(|(k, v)| (k.clone(), Value::Long(*v))).collect())
}

/// The strings of an array value (an entry of a map of string arrays).
fn strings_of(v: &Value, name: &str, path: &str) -> Result<Vec<String>> {
    let Value::Array(items) = avro::plain(v) else {
        return Err(corrupt(path, format!("field `{name}`: expected arrays of string")));
    };
    items
        .iter()
        .map(|i| match avro::plain(i) {
            Value::String(s) => Ok(s.clone()),
            _ => Err(corrupt(path, format!("field `{name}`: expected arrays of string"))),
        })
        .collect()
}

/// A map-of-long field (ints widened); `None` when missing or null.
fn opt_longs(v: &Value, name: &str, path: &str) -> Result<Option<BTreeMap<String, i64>>> {
    opt_map_of(v, name, path, "long", |x| match x {
        Value::Long(n) => Some(*n),
        Value::Int(n) => Some(i64::from(*n)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use apache_avro::Schema;

    /// Full names of the records defined in `s`, in definition order.
    fn record_names(s: &Schema, out: &mut Vec<String>) {
        match s {
            Schema::Record(r) => {
                out.push(r.name.fullname(None));
                for f in &r.fields {
                    record_names(&f.schema, out);
                }
            }
            Schema::Array(a) => record_names(&a.items, out),
            Schema::Map(m) => record_names(&m.types, out),
            Schema::Union(u) => u.variants().iter().for_each(|v| record_names(v, out)),
            _ => {}
        }
    }

    #[test]
    fn bundled_schemas_parse_with_java_names() {
        let ns = |names: &[&str]| names.iter().map(|n| format!("org.apache.hudi.avro.model.{n}")).collect::<Vec<_>>();
        for (embedded, expected) in [
            (cleaner_plan_schema().unwrap(), ns(&["HoodieCleanerPlan", "HoodieActionInstant", "HoodieCleanFileInfo"])),
            (clean_metadata_schema().unwrap(), ns(&["HoodieCleanMetadata", "HoodieCleanPartitionMetadata"])),
            (
                rollback_plan_schema().unwrap(),
                ns(&["HoodieRollbackPlan", "HoodieInstantInfo", "HoodieRollbackRequest"]),
            ),
            (
                rollback_metadata_schema().unwrap(),
                ns(&["HoodieRollbackMetadata", "HoodieRollbackPartitionMetadata", "HoodieInstantInfo"]),
            ),
        ] {
            let mut names = Vec::new();
            record_names(&embedded.schema, &mut names);
            assert_eq!(names, expected);
        }
    }

    fn sample_cleaner_plan() -> CleanerPlan {
        CleanerPlan {
            earliest_instant_to_retain: Some(ActionInstant {
                timestamp: "20251220210123755".into(),
                action: "deltacommit".into(),
                state: "COMPLETED".into(),
            }),
            last_completed_commit_timestamp: "20251220210130911".into(),
            file_paths_to_be_deleted_per_partition: BTreeMap::from([(
                "city=chennai".to_string(),
                vec![
                    CleanFileInfo {
                        file_path: Some("/t/city=chennai/f-0_0-1-0_20251220210108078.parquet".into()),
                        is_bootstrap_base_file: Some(false),
                    },
                    CleanFileInfo { file_path: None, is_bootstrap_base_file: None },
                ],
            )]),
            files_to_be_deleted_per_partition: BTreeMap::from([("old".to_string(), vec!["a.parquet".to_string()])]),
            extra_metadata: Some(BTreeMap::from([("k".to_string(), "v".to_string())])),
            ..Default::default()
        }
    }

    #[test]
    fn cleaner_plan_round_trips() {
        let plan = sample_cleaner_plan();
        let bytes = plan.to_avro_container().unwrap();
        assert_eq!(&bytes[..4], b"Obj\x01");
        assert_eq!(CleanerPlan::from_avro_container(&bytes, "mem").unwrap(), plan);
        let reader = apache_avro::Reader::new(&bytes[..]).unwrap();
        assert_eq!(reader.writer_schema(), &cleaner_plan_schema().unwrap().schema);
        assert_eq!(
            plan.files(),
            vec![
                ("city=chennai".to_string(), "/t/city=chennai/f-0_0-1-0_20251220210108078.parquet".to_string()),
                ("old".to_string(), "a.parquet".to_string()),
            ]
        );
        let empty = CleanerPlan::default();
        assert_eq!(CleanerPlan::from_avro_container(&empty.to_avro_container().unwrap(), "m").unwrap(), empty);
    }

    #[test]
    fn clean_metadata_round_trips() {
        let part = CleanPartitionMetadata {
            partition_path: "city=chennai".into(),
            policy: KEEP_LATEST_COMMITS.into(),
            delete_path_patterns: vec!["a.parquet".into(), ".a_1.log.1_0-1-0".into()],
            success_delete_files: vec!["a.parquet".into()],
            failed_delete_files: vec![".a_1.log.1_0-1-0".into()],
            is_partition_deleted: Some(false),
        };
        let meta = CleanMetadata {
            start_clean_time: "20251220210140000".into(),
            time_taken_in_millis: 12,
            total_files_deleted: 1,
            earliest_commit_to_retain: "20251220210123755".into(),
            last_completed_commit_timestamp: "20251220210130911".into(),
            partition_metadata: BTreeMap::from([("city=chennai".to_string(), part.clone())]),
            bootstrap_partition_metadata: Some(BTreeMap::from([("b".to_string(), part)])),
            ..Default::default()
        };
        let bytes = meta.to_avro_container().unwrap();
        assert_eq!(CleanMetadata::from_avro_container(&bytes, "mem").unwrap(), meta);
        let d = CleanMetadata { bootstrap_partition_metadata: None, ..Default::default() };
        assert_eq!(CleanMetadata::from_avro_container(&d.to_avro_container().unwrap(), "m").unwrap(), d);
    }

    #[test]
    fn rollback_plan_and_metadata_round_trip() {
        let plan = RollbackPlan {
            instant_to_rollback: Some(InstantInfo::new("20251220210130911", "deltacommit")),
            rollback_requests: vec![
                RollbackRequest {
                    partition_path: "city=chennai".into(),
                    file_id: Some("00000001-0000-0000-0000-000000000000-0".into()),
                    latest_base_instant: Some("20251220210130911".into()),
                    files_to_be_deleted: vec![
                        "/t/city=chennai/.00000001-0000-0000-0000-000000000000-0_20251220210130911.log.1_0-1-0".into(),
                    ],
                    log_blocks_to_be_deleted: Some(BTreeMap::new()),
                },
                RollbackRequest { partition_path: String::new(), ..Default::default() },
            ],
            ..Default::default()
        };
        let bytes = plan.to_avro_container().unwrap();
        assert_eq!(RollbackPlan::from_avro_container(&bytes, "mem").unwrap(), plan);

        let meta = RollbackMetadata {
            start_rollback_time: "20251220210140000".into(),
            time_taken_in_millis: 3,
            total_files_deleted: 1,
            commits_rollback: vec!["20251220210130911".into()],
            partition_metadata: BTreeMap::from([(
                "city=chennai".to_string(),
                RollbackPartitionMetadata {
                    partition_path: "city=chennai".into(),
                    success_delete_files: plan.rollback_requests[0].files_to_be_deleted.clone(),
                    failed_delete_files: vec![],
                    rollback_log_files: Some(BTreeMap::new()),
                    log_files_from_failed_commit: Some(BTreeMap::from([("x".to_string(), 7)])),
                },
            )]),
            instants_rollback: vec![InstantInfo::new("20251220210130911", "deltacommit")],
            ..Default::default()
        };
        let bytes = meta.to_avro_container().unwrap();
        assert_eq!(RollbackMetadata::from_avro_container(&bytes, "mem").unwrap(), meta);
        let d = RollbackMetadata::default();
        assert_eq!(RollbackMetadata::from_avro_container(&d.to_avro_container().unwrap(), "m").unwrap(), d);
    }

    #[test]
    fn bad_input_is_an_error_naming_the_path() {
        let err = RollbackPlan::from_avro_container(&[], "t/1.rollback.requested").unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }) && err.to_string().contains("t/1.rollback.requested"), "{err}");
        let err = CleanerPlan::from_avro_container(b"not avro", "t/1.clean.requested").unwrap_err();
        assert!(err.to_string().contains("t/1.clean.requested"), "{err}");
        // A field of the wrong type is corrupt, not a panic.
        let wrong = Value::Record(vec![("commitsRollback".into(), Value::String("x".into()))]);
        let json = r#"{"type":"record","name":"X","fields":[{"name":"commitsRollback","type":"string"}]}"#;
        let bytes = avro::write_single_record(&Schema::parse_str(json).unwrap(), json, wrong, "x").unwrap();
        let err = RollbackMetadata::from_avro_container(&bytes, "t/x.rollback").unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }) && err.to_string().contains("commitsRollback"), "{err}");
    }

    /// Writes one encoded file of each kind to `$TRIBUTARY_AVRO_DUMP` (when
    /// set), for checking with an independent Avro reader by hand.
    #[test]
    fn dump_for_independent_readers() {
        let Some(dir) = std::env::var_os("TRIBUTARY_AVRO_DUMP") else { return };
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cleaner_plan.avro"), sample_cleaner_plan().to_avro_container().unwrap()).unwrap();
        let meta = CleanMetadata {
            start_clean_time: "20251220210140000".into(),
            earliest_commit_to_retain: "20251220210123755".into(),
            partition_metadata: BTreeMap::from([(
                "p".to_string(),
                CleanPartitionMetadata {
                    partition_path: "p".into(),
                    policy: KEEP_LATEST_COMMITS.into(),
                    success_delete_files: vec!["a.parquet".into()],
                    ..Default::default()
                },
            )]),
            ..Default::default()
        };
        std::fs::write(dir.join("clean_metadata.avro"), meta.to_avro_container().unwrap()).unwrap();
        let plan = RollbackPlan {
            instant_to_rollback: Some(InstantInfo::new("20251220210130911", "deltacommit")),
            rollback_requests: vec![RollbackRequest {
                partition_path: "p".into(),
                files_to_be_deleted: vec!["p/.f_20251220210130911.log.1_0-1-0".into()],
                log_blocks_to_be_deleted: Some(BTreeMap::new()),
                ..Default::default()
            }],
            ..Default::default()
        };
        std::fs::write(dir.join("rollback_plan.avro"), plan.to_avro_container().unwrap()).unwrap();
        let meta = RollbackMetadata {
            start_rollback_time: "20251220210140000".into(),
            commits_rollback: vec!["20251220210130911".into()],
            partition_metadata: BTreeMap::from([(
                "p".to_string(),
                RollbackPartitionMetadata {
                    partition_path: "p".into(),
                    success_delete_files: vec!["p/.f_20251220210130911.log.1_0-1-0".into()],
                    rollback_log_files: Some(BTreeMap::new()),
                    log_files_from_failed_commit: Some(BTreeMap::from([("x".to_string(), 7)])),
                    ..Default::default()
                },
            )]),
            instants_rollback: vec![InstantInfo::new("20251220210130911", "deltacommit")],
            ..Default::default()
        };
        std::fs::write(dir.join("rollback_metadata.avro"), meta.to_avro_container().unwrap()).unwrap();
    }
}
