//! Hudi's LSM history timeline (`.hoodie/timeline/history/`), read only.
//!
//! Java writers (Spark, Flink; `hoodie.archive.automatic` is on by default)
//! *archive* the oldest completed instants after a commit: they add them to
//! this folder, then delete their files from the active timeline. Tributary
//! never archives, but the instants Java archived are still part of the
//! table: their files stay committed and their completion times still place
//! log files in slices. So [`crate::Timeline`] merges them in, and a
//! completed instant's file that is gone from the active timeline is read
//! from here.
//!
//! Layout (Hudi 1.x `LSMTimeline`, `LSMTimelineWriter`,
//! `HoodieLSMTimelineManifest`; checked on folders Spark 3.5 with Hudi 1.2.0
//! wrote, see `tests/spark/test_archived_timeline.py`):
//!
//! ```text
//! _version_                          the latest snapshot version N, as decimal text
//! manifest_<N>                       {"files":[{"fileName":"<min>_<max>_<L>.parquet","fileLen":4993},...]}
//! <min>_<max>_<level>.parquet        the instants requested in [min, max]
//! ```
//!
//! Only the files the latest manifest lists are valid: LSM compaction merges
//! ten files of a level into one of the next and leaves the old files behind
//! for a while. When `_version_` is missing or unreadable the highest
//! `manifest_<N>` listed is the latest (Java does the same). Each Parquet
//! row is Hudi's Avro record `HoodieLSMTimelineInstant`: `instantTime`,
//! `completionTime`, `action` (the *completed* file's action, so a
//! compaction reads `commit`), `metadata` (the completed file's bytes, for a
//! commit the Avro `HoodieCommitMetadata`), `plan` (the requested file's
//! bytes for compactions, clustering and cleans) and `version` (1). Building
//! the timeline reads only the first three columns; a metadata blob is read
//! only when one instant's content is asked for.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, RecordBatch, StringArray};
use arrow::datatypes::DataType;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use parquet::arrow::ProjectionMask;
use parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use serde::Deserialize;

use crate::config::TableConfig;
use crate::error::{Error, Result};
use crate::instant::{Action, Instant, InstantTime, State};
use crate::location::TableLocation;
use crate::parquet_file::StoreFile;

/// The file naming the latest snapshot version.
pub const VERSION_FILE: &str = "_version_";

/// The prefix of manifest files (`manifest_<N>`).
pub const MANIFEST_PREFIX: &str = "manifest_";

/// History files read at once.
const PARALLEL_READS: usize = 8;

/// The history folder of a layout-2 table, `None` for layout 1 (whose
/// archive, `.hoodie/archived/`, Tributary does not read).
pub fn history_dir(loc: &TableLocation, config: &TableConfig) -> Option<Path> {
    (config.timeline_layout >= 2).then(|| crate::timeline::timeline_dir(loc, config).join(config.history_path.as_str()))
}

/// One data file of the history's latest snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryFile {
    /// Its path in the store.
    pub path: Path,
    /// The smallest requested time it holds (from its name).
    pub min: InstantTime,
    /// The largest requested time it holds (from its name).
    pub max: InstantTime,
    /// Its LSM level (from its name).
    pub level: u32,
    /// Its length in bytes, as the manifest gives it.
    pub len: u64,
}

impl HistoryFile {
    /// Parses `<min>_<max>_<level>.parquet`.
    pub fn parse(dir: &Path, name: &str, len: u64) -> Result<Self> {
        let bad = |reason: &str| Error::InvalidName {
            kind: "history file name",
            name: name.to_string(),
            reason: reason.to_string(),
        };
        let stem = name.strip_suffix(".parquet").ok_or_else(|| bad("not a .parquet file"))?;
        let mut parts = stem.split('_');
        let (Some(min), Some(max), Some(level), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(bad("not <min>_<max>_<level>.parquet"));
        };
        let level = match level.as_bytes() {
            [d] if d.is_ascii_digit() => u32::from(d - b'0'),
            _ => return Err(bad("the level is not one digit")),
        };
        let (min, max) = (InstantTime::parse(min)?, InstantTime::parse(max)?);
        Ok(Self { path: dir.clone().join(name), min, max, level, len })
    }

    /// Whether the file's name range covers `t`.
    pub fn covers(&self, t: &InstantTime) -> bool {
        &self.min <= t && t <= &self.max
    }
}

/// `manifest_<N>` as JSON.
#[derive(Debug, Deserialize)]
struct Manifest {
    files: Vec<ManifestEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManifestEntry {
    file_name: String,
    file_len: u64,
}

/// The valid files of the history's latest snapshot; empty when the table
/// has no history.
pub async fn snapshot_files(loc: &TableLocation, dir: &Path) -> Result<Vec<HistoryFile>> {
    let Some(version) = latest_version(loc, dir).await? else { return Ok(Vec::new()) };
    let path = dir.clone().join(format!("{MANIFEST_PREFIX}{version}"));
    let bytes = loc.get(&path).await?;
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| Error::Corrupt { path: path.to_string(), reason: format!("not a history manifest: {e}") })?;
    manifest
        .files
        .iter()
        .map(|f| {
            HistoryFile::parse(dir, &f.file_name, f.file_len)
                .map_err(|e| Error::Corrupt { path: path.to_string(), reason: format!("lists a bad file: {e}") })
        })
        .collect()
}

/// The latest snapshot version: `_version_`, else the highest manifest
/// listed; `None` when there is none.
async fn latest_version(loc: &TableLocation, dir: &Path) -> Result<Option<u64>> {
    let path = dir.clone().join(VERSION_FILE);
    match loc.get(&path).await {
        Ok(bytes) => match std::str::from_utf8(&bytes).ok().and_then(|s| s.trim().parse::<u64>().ok()) {
            Some(v) => return Ok(Some(v)),
            None => tracing::warn!(path = %path, "unreadable history version file; taking the highest manifest"),
        },
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(e),
    }
    let listing = loc.store.list_with_delimiter(Some(dir)).await.map_err(|e| Error::store("list", dir, e))?;
    Ok(listing
        .objects
        .iter()
        .filter_map(|m| m.location.filename()?.strip_prefix(MANIFEST_PREFIX)?.parse::<u64>().ok())
        .max())
}

/// The archived instants of the history at `dir`, by requested time, with
/// the names of rows that were skipped (unknown actions, bad times).
pub async fn load_instants(loc: &TableLocation, dir: &Path) -> Result<(Vec<Instant>, Vec<String>)> {
    let files = snapshot_files(loc, dir).await?;
    // Owned futures: borrowing closures here make the caller's future fail
    // `Send` for higher-ranked lifetimes (rust-lang/rust#102211).
    let reads: Vec<_> = files
        .into_iter()
        .map(|f| {
            let loc = loc.clone();
            async move { read_instants(&loc, &f).await }
        })
        .collect();
    let per_file: Vec<_> = futures::stream::iter(reads).buffered(PARALLEL_READS).try_collect().await?;
    let mut instants = BTreeMap::new();
    let mut warnings = Vec::new();
    for (found, skipped) in per_file {
        warnings.extend(skipped);
        for i in found {
            instants.entry(i.requested.clone()).or_insert(i);
        }
    }
    Ok((instants.into_values().collect(), warnings))
}

/// The archived instant requested at `t`, if the history holds it.
pub async fn find_instant(loc: &TableLocation, dir: &Path, t: &InstantTime) -> Result<Option<Instant>> {
    for f in snapshot_files(loc, dir).await?.iter().filter(|f| f.covers(t)) {
        if let Some(i) = read_instants(loc, f).await?.0.into_iter().find(|i| &i.requested == t) {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// The content the instant requested at `t` had in its completed file (its
/// commit metadata, for a commit), if the history holds the instant; empty
/// when the instant was archived without content.
pub async fn read_metadata(loc: &TableLocation, dir: &Path, t: &InstantTime) -> Result<Option<bytes::Bytes>> {
    for f in snapshot_files(loc, dir).await?.iter().filter(|f| f.covers(t)) {
        for batch in read_columns(loc, f, &["instantTime", "metadata"]).await? {
            let times = strings(&batch, "instantTime", f)?;
            let blobs = binary(&batch, "metadata", f)?;
            for row in 0..batch.num_rows() {
                if times.is_valid(row) && times.value(row) == t.as_str() {
                    let blob = if blobs.is_valid(row) { blobs.value(row).to_vec() } else { Vec::new() };
                    return Ok(Some(bytes::Bytes::from(blob)));
                }
            }
        }
    }
    Ok(None)
}

/// The instants of one history file.
async fn read_instants(loc: &TableLocation, f: &HistoryFile) -> Result<(Vec<Instant>, Vec<String>)> {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for batch in read_columns(loc, f, &["instantTime", "completionTime", "action"]).await? {
        let times = strings(&batch, "instantTime", f)?;
        let completions = strings(&batch, "completionTime", f)?;
        let actions = strings(&batch, "action", f)?;
        for row in 0..batch.num_rows() {
            match archived_instant(&times, &completions, &actions, row) {
                Ok(i) => out.push(i),
                Err(reason) => skipped.push(format!("skipping archived instant in {}: {reason}", f.path)),
            }
        }
    }
    Ok((out, skipped))
}

/// One row as an instant. A row without a completion time (Hudi's
/// metaserver writes such) completed at its requested time, as Java reads it.
fn archived_instant(
    times: &StringArray,
    completions: &StringArray,
    actions: &StringArray,
    row: usize,
) -> std::result::Result<Instant, String> {
    let get = |a: &StringArray| a.is_valid(row).then(|| a.value(row).to_string());
    let t = get(times).ok_or("no instant time")?;
    let requested = InstantTime::parse(&t).map_err(|e| e.to_string())?;
    let completed = match get(completions) {
        Some(c) => InstantTime::parse(&c).map_err(|e| format!("instant {t}: {e}"))?,
        None => requested.clone(),
    };
    let name = get(actions).ok_or_else(|| format!("instant {t}: no action"))?;
    // The archive records the completed file's action name, which is the
    // action's own name for every action that has no separate completed name.
    let action = Action::from_name(&name).ok_or_else(|| format!("instant {t}: unknown action `{name}`"))?;
    Ok(Instant { requested, action, state: State::Completed, completed: Some(completed) })
}

/// The named columns of a history file, read through the store by ranges
/// (the other columns, metadata blobs above all, are not fetched).
async fn read_columns(loc: &TableLocation, f: &HistoryFile, columns: &[&str]) -> Result<Vec<RecordBatch>> {
    let name = f.path.to_string();
    let reader = StoreFile::new(Arc::clone(&loc.store), f.path.clone(), f.len);
    let builder = ParquetRecordBatchStreamBuilder::new(reader).await.map_err(|e| Error::parquet(&name, e))?;
    let wanted: Vec<usize> = columns
        .iter()
        .map(|c| {
            builder.schema().index_of(c).map_err(|_| Error::Corrupt {
                path: name.clone(),
                reason: format!("not a history file: no column `{c}`"),
            })
        })
        .collect::<Result<_>>()?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), wanted);
    let stream = builder.with_projection(mask).build().map_err(|e| Error::parquet(&name, e))?;
    stream.map(|b| b.map_err(|e| Error::parquet(&name, e))).try_collect().await
}

/// A string column of a history batch (any of Arrow's string types).
fn strings(batch: &RecordBatch, column: &str, f: &HistoryFile) -> Result<StringArray> {
    let corrupt = |reason: String| Error::Corrupt { path: f.path.to_string(), reason };
    let col = batch.column_by_name(column).ok_or_else(|| corrupt(format!("no column `{column}`")))?;
    let cast = arrow::compute::cast(col, &DataType::Utf8)
        .map_err(|e| corrupt(format!("column `{column}` is not text: {e}")))?;
    cast.as_any()
        .downcast_ref::<StringArray>()
        .cloned()
        .ok_or_else(|| corrupt(format!("column `{column}` is not text")))
}

/// A binary column of a history batch.
fn binary(batch: &RecordBatch, column: &str, f: &HistoryFile) -> Result<arrow::array::BinaryArray> {
    let corrupt = |reason: String| Error::Corrupt { path: f.path.to_string(), reason };
    let col = batch.column_by_name(column).ok_or_else(|| corrupt(format!("no column `{column}`")))?;
    let cast = arrow::compute::cast(col, &DataType::Binary)
        .map_err(|e| corrupt(format!("column `{column}` is not binary: {e}")))?;
    cast.as_any()
        .downcast_ref::<arrow::array::BinaryArray>()
        .cloned()
        .ok_or_else(|| corrupt(format!("column `{column}` is not binary")))
}

/// Writes history folders as Java lays them out, for tests: Tributary itself
/// never archives. The layout is the one documented above, checked against
/// folders Spark wrote.
#[doc(hidden)]
pub mod fixture {
    use std::sync::Arc;

    use arrow::array::{BinaryArray, Int32Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use object_store::path::Path;
    use parquet::arrow::ArrowWriter;
    use parquet::basic::{Compression, GzipLevel};
    use parquet::file::properties::WriterProperties;

    use object_store::ObjectStoreExt;

    use super::{MANIFEST_PREFIX, VERSION_FILE};
    use crate::config::TableConfig;
    use crate::error::{Error, Result};
    use crate::instant::{Instant, State};
    use crate::location::TableLocation;
    use crate::timeline::TimelineWriter;

    /// One archived instant: `(instant time, completion time, completed action, metadata)`.
    pub type Row<'a> = (&'a str, Option<&'a str>, &'a str, Option<&'a [u8]>);

    /// Writes one level-0 file per entry of `files` (rows in requested-time
    /// order), then `manifest_<version>` listing them and `_version_`.
    /// Returns the files' names.
    pub async fn write_snapshot(
        loc: &TableLocation,
        dir: &Path,
        version: u64,
        files: &[Vec<Row<'_>>],
    ) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let mut entries = Vec::new();
        for rows in files {
            let (Some(first), Some(last)) = (rows.first(), rows.last()) else { continue };
            let name = format!("{}_{}_0.parquet", first.0, last.0);
            let bytes = parquet_bytes(rows)?;
            entries.push(serde_json::json!({"fileName": name, "fileLen": bytes.len()}));
            loc.put(&dir.clone().join(name.as_str()), bytes).await?;
            names.push(name);
        }
        let manifest = serde_json::to_vec_pretty(&serde_json::json!({ "files": entries }))
            .map_err(|e| Error::InvalidInput { what: "history manifest".into(), reason: e.to_string() })?;
        loc.put(&dir.clone().join(format!("{MANIFEST_PREFIX}{version}")), manifest).await?;
        loc.put(&dir.clone().join(VERSION_FILE), version.to_string().into_bytes()).await?;
        Ok(names)
    }

    /// Archives the completed `instants` as a Java writer does: adds one
    /// level-0 file holding them (with their completed files' content) to a
    /// new snapshot of the table's history, then deletes their files from
    /// the active timeline, pending states first.
    pub async fn archive(loc: &TableLocation, config: &TableConfig, instants: &[Instant]) -> Result<()> {
        let dir = super::history_dir(loc, config)
            .ok_or_else(|| Error::InvalidInput { what: "archive".into(), reason: "a layout-1 table".into() })?;
        let writer = TimelineWriter::new(loc, config);
        let mut contents = Vec::new();
        for i in instants {
            contents.push(writer.read(i, State::Completed).await?);
        }
        let times: Vec<(String, String)> = instants
            .iter()
            .map(|i| (i.requested.to_string(), i.completed.as_ref().map(ToString::to_string).unwrap_or_default()))
            .collect();
        let rows: Vec<Row<'_>> = instants
            .iter()
            .zip(&times)
            .zip(&contents)
            .map(|((i, (t, c)), m)| (t.as_str(), Some(c.as_str()), i.action.completed_name(), Some(&m[..])))
            .collect();
        let mut previous = super::snapshot_files(loc, &dir).await?;
        let version = super::latest_version(loc, &dir).await?.map_or(1, |v| v + 1);
        let name = format!("{}_{}_0.parquet", rows[0].0, rows[rows.len() - 1].0);
        let bytes = parquet_bytes(&rows)?;
        let len = bytes.len() as u64;
        loc.put(&dir.clone().join(name.as_str()), bytes).await?;
        previous.push(super::HistoryFile::parse(&dir, &name, len)?);
        let entries: Vec<_> = previous
            .iter()
            .map(|f| serde_json::json!({"fileName": f.path.filename().unwrap_or_default(), "fileLen": f.len}))
            .collect();
        let manifest = serde_json::to_vec_pretty(&serde_json::json!({ "files": entries }))
            .map_err(|e| Error::InvalidInput { what: "history manifest".into(), reason: e.to_string() })?;
        loc.put(&dir.clone().join(format!("{MANIFEST_PREFIX}{version}")), manifest).await?;
        loc.put(&dir.clone().join(VERSION_FILE), version.to_string().into_bytes()).await?;
        for i in instants {
            for state in [State::Requested, State::Inflight, State::Completed] {
                let path = writer.path_of(i, state)?;
                match loc.store.delete(&path).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(Error::store("delete", &path, e)),
                }
            }
        }
        Ok(())
    }

    /// The rows as a Parquet file of Hudi's `HoodieLSMTimelineInstant`
    /// columns, gzip-compressed as Java writes them.
    pub fn parquet_bytes(rows: &[Row<'_>]) -> Result<Vec<u8>> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("instantTime", DataType::Utf8, true),
            Field::new("completionTime", DataType::Utf8, true),
            Field::new("action", DataType::Utf8, true),
            Field::new("metadata", DataType::Binary, true),
            Field::new("plan", DataType::Binary, true),
            Field::new("version", DataType::Int32, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from_iter(rows.iter().map(|r| Some(r.0)))),
                Arc::new(StringArray::from_iter(rows.iter().map(|r| r.1))),
                Arc::new(StringArray::from_iter(rows.iter().map(|r| Some(r.2)))),
                Arc::new(BinaryArray::from_iter(rows.iter().map(|r| r.3))),
                Arc::new(BinaryArray::from_iter(rows.iter().map(|_| None::<&[u8]>))),
                Arc::new(Int32Array::from_iter_values(rows.iter().map(|_| 1))),
            ],
        )
        .map_err(|e| Error::InvalidInput { what: "history rows".into(), reason: e.to_string() })?;
        let props = WriterProperties::builder().set_compression(Compression::GZIP(GzipLevel::default())).build();
        let mut out = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut out, schema, Some(props))
            .map_err(|e| Error::InvalidInput { what: "history file".into(), reason: e.to_string() })?;
        writer.write(&batch).map_err(|e| Error::InvalidInput { what: "history file".into(), reason: e.to_string() })?;
        writer.close().map_err(|e| Error::InvalidInput { what: "history file".into(), reason: e.to_string() })?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;

    use super::fixture::write_snapshot;
    use super::*;
    use crate::config::NewTableConfig;

    fn table() -> (TableLocation, TableConfig, Path) {
        let loc = TableLocation::new(Arc::new(InMemory::new()), Path::from("t"));
        let config = TableConfig::new_table(&NewTableConfig::new("t", "id", "ts", "{}"));
        let dir = history_dir(&loc, &config).unwrap();
        (loc, config, dir)
    }

    fn t(s: &str) -> InstantTime {
        InstantTime::parse(s).unwrap()
    }

    #[test]
    fn file_names() {
        let dir = Path::from("h");
        let f = HistoryFile::parse(&dir, "20261130202315567_20261130202319866_0.parquet", 4993).unwrap();
        assert_eq!(
            (f.min.as_str(), f.max.as_str(), f.level, f.len),
            ("20261130202315567", "20261130202319866", 0, 4993)
        );
        assert_eq!(f.path.as_ref(), "h/20261130202315567_20261130202319866_0.parquet");
        assert!(f.covers(&t("20261130202315567")) && f.covers(&t("20261130202319866")));
        assert!(!f.covers(&t("20261130202319867")));
        for bad in ["manifest_1", "_version_", "1_2_0.parquet", "20261130202315567_20261130202319866_10.parquet"] {
            assert!(HistoryFile::parse(&dir, bad, 1).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn no_history_is_empty() {
        let (loc, _, dir) = table();
        assert!(snapshot_files(&loc, &dir).await.unwrap().is_empty());
        assert!(load_instants(&loc, &dir).await.unwrap().0.is_empty());
        assert_eq!(read_metadata(&loc, &dir, &t("20250101000000000")).await.unwrap(), None);
    }

    #[tokio::test]
    async fn reads_the_latest_snapshot_only() {
        let (loc, _, dir) = table();
        let meta: &[u8] = b"Obj\x01 commit metadata";
        // Snapshot 1: two files; snapshot 2 (an LSM compaction) replaces
        // them by one; the old files stay behind, unlisted.
        write_snapshot(
            &loc,
            &dir,
            1,
            &[
                vec![("20250101000000001", Some("20250101000000003"), "deltacommit", Some(meta))],
                vec![("20250101000000002", Some("20250101000000009"), "deltacommit", None)],
            ],
        )
        .await
        .unwrap();
        write_snapshot(
            &loc,
            &dir,
            2,
            &[vec![
                ("20250101000000001", Some("20250101000000003"), "deltacommit", Some(meta)),
                ("20250101000000002", Some("20250101000000009"), "deltacommit", None),
                ("20250101000000004", None, "clean", None),
                ("20250101000000005", Some("20250101000000006"), "commit", None),
                ("20250101000000007", Some("20250101000000008"), "frobnicate", None),
            ]],
        )
        .await
        .unwrap();
        let files = snapshot_files(&loc, &dir).await.unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].path.filename(), Some("20250101000000001_20250101000000007_0.parquet"));

        let (instants, warnings) = load_instants(&loc, &dir).await.unwrap();
        let got: Vec<(&str, Action, Option<&str>)> = instants
            .iter()
            .map(|i| (i.requested.as_str(), i.action, i.completed.as_ref().map(InstantTime::as_str)))
            .collect();
        assert_eq!(
            got,
            vec![
                ("20250101000000001", Action::DeltaCommit, Some("20250101000000003")),
                ("20250101000000002", Action::DeltaCommit, Some("20250101000000009")),
                // No completion time: completed at its requested time, as Java reads it.
                ("20250101000000004", Action::Clean, Some("20250101000000004")),
                // The archive names a compaction by its completed action.
                ("20250101000000005", Action::Commit, Some("20250101000000006")),
            ]
        );
        assert!(instants.iter().all(Instant::is_completed));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("unknown action `frobnicate`"), "{warnings:?}");

        let found = find_instant(&loc, &dir, &t("20250101000000002")).await.unwrap().unwrap();
        assert_eq!(found.completed, Some(t("20250101000000009")));
        assert_eq!(find_instant(&loc, &dir, &t("20250101000000003")).await.unwrap(), None);
        let blob = read_metadata(&loc, &dir, &t("20250101000000001")).await.unwrap().unwrap();
        assert_eq!(&blob[..], meta);
        assert_eq!(read_metadata(&loc, &dir, &t("20250101000000002")).await.unwrap().unwrap().len(), 0);
        assert_eq!(read_metadata(&loc, &dir, &t("20250101000000003")).await.unwrap(), None);

        // Without `_version_`, the highest manifest listed is the latest.
        loc.store.delete(&dir.clone().join(VERSION_FILE)).await.unwrap();
        assert_eq!(snapshot_files(&loc, &dir).await.unwrap(), files);
    }

    #[tokio::test]
    async fn damaged_history_is_corrupt_and_named() {
        let (loc, _, dir) = table();
        loc.put(&dir.clone().join(VERSION_FILE), b"1".to_vec()).await.unwrap();
        loc.put(&dir.clone().join("manifest_1"), b"{\"files\":[{\"fileName\":\"x.parquet\",\"fileLen\":3}]}".to_vec())
            .await
            .unwrap();
        let err = load_instants(&loc, &dir).await.unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Corrupt);
        assert!(err.to_string().contains("manifest_1") && err.to_string().contains("x.parquet"), "{err}");

        let name = "20250101000000001_20250101000000001_0.parquet";
        loc.put(&dir.clone().join(name), b"not parquet".to_vec()).await.unwrap();
        let manifest = format!("{{\"files\":[{{\"fileName\":\"{name}\",\"fileLen\":11}}]}}");
        loc.put(&dir.clone().join("manifest_1"), manifest.into_bytes()).await.unwrap();
        let err = load_instants(&loc, &dir).await.unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Corrupt);
        assert!(err.to_string().contains(name), "{err}");
    }
}
