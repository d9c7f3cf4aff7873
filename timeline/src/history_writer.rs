//! Writing Hudi's LSM history (`.hoodie/timeline/history/`) as Java's
//! archiver writes it (Hudi 1.x `LSMTimelineWriter`), in the layout
//! [`crate::History`] reads.
//!
//! One archival adds one level-0 file, `<min>_<max>_0.parquet` (the
//! smallest and largest requested time of its rows), then a new snapshot:
//!
//! ```text
//!  append                                                       storage
//!    |  <min>_<max>_0.parquet (unless the latest manifest lists it) ->|
//!    |  manifest_<N+1>: the latest manifest's files, this one appended ->|
//!    |  delete _version_, create it holding N+1 ------------------------>|
//! ```
//!
//! Readers take only the files the latest manifest lists, so a crash
//! before `_version_` names the new manifest leaves a file nobody reads,
//! and a retry of the same rows (the same name) writes it again. Between
//! the delete of `_version_` and its creation, readers take the highest
//! manifest, which is complete.
//!
//! Then the history's own compaction: while a level holds at least
//! [`HistorySettings::compaction_batch_size`] files, its oldest (by name)
//! are merged into one file of the next level, rows in file order, and a
//! snapshot replaces them with it. Cleaning keeps the newest
//! [`HistorySettings::retained_manifests`] manifests (plus one per merge
//! just made) and deletes the older ones and every Parquet file no kept
//! manifest lists, as Java does; it must run under the table lock, since an
//! unlisted file may be another archiver's file in the making.
//!
//! Rows are Hudi's Avro record `HoodieLSMTimelineInstant` as Parquet:
//! `instantTime`, `completionTime`, `action` (the completed file's action),
//! `metadata` (the completed file's bytes), `plan` (the requested file's
//! bytes for cleans and compactions), `version` (1); gzip-compressed, with
//! the Avro schema in the footer as parquet-avro writes it.

use std::sync::Arc;

use arrow::array::{BinaryArray, Int32Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use object_store::path::Path;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::basic::{Compression, GzipLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use serde::Serialize;

use crate::config::TableConfig;
use crate::error::{Error, Result};
use crate::history::{
    ArchivedRow, HistoryFile, MANIFEST_PREFIX, VERSION_FILE, history_dir, latest_snapshot, read_rows,
};
use tributary_storage::{TableLocation, delete_if_exists};

/// The Avro schema of a history row, as Java's parquet-avro writer records
/// it in the footer (`parquet.avro.schema`).
const ROW_AVRO_SCHEMA: &str = r#"{"type":"record","name":"HoodieLSMTimelineInstant","namespace":"org.apache.hudi.avro.model","fields":[{"name":"instantTime","type":["null",{"type":"string","avro.java.string":"String"}],"default":null},{"name":"completionTime","type":["null",{"type":"string","avro.java.string":"String"}],"default":null},{"name":"action","type":["null",{"type":"string","avro.java.string":"String"}],"default":null},{"name":"metadata","type":["null","bytes"],"default":null},{"name":"plan","type":["null","bytes"],"default":null},{"name":"version","type":"int","default":1}]}"#;

/// How the history compacts and cleans its own files, with Hudi's names
/// and defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistorySettings {
    /// `hoodie.timeline.compaction.batch.size`: the files of one level that
    /// trigger a merge into the next, and the most merged at once (10).
    pub compaction_batch_size: usize,
    /// `hoodie.timeline.compaction.target.file.max.bytes`: the most bytes
    /// of files merged at once (1,048,576,000).
    pub compaction_max_file_bytes: u64,
    /// `hoodie.timeline.manifest.retained.versions`: manifests kept (3).
    pub retained_manifests: usize,
}

impl Default for HistorySettings {
    fn default() -> Self {
        Self { compaction_batch_size: 10, compaction_max_file_bytes: 1_048_576_000, retained_manifests: 3 }
    }
}

/// What [`HistoryWriter::compact_and_clean`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryMaintenance {
    /// The files written by merges.
    pub merged_into: Vec<String>,
    /// The manifests and data files deleted.
    pub deleted: usize,
}

/// Writes a table's LSM history (module notes).
#[derive(Debug, Clone)]
pub struct HistoryWriter {
    loc: TableLocation,
    dir: Path,
    settings: HistorySettings,
}

/// `manifest_<N>` as Java writes it.
#[derive(Debug, Serialize)]
struct Manifest<'a> {
    files: Vec<ManifestEntry<'a>>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ManifestEntry<'a> {
    file_name: &'a str,
    file_len: u64,
}

impl HistoryWriter {
    /// The writer of the table's history; an error for a layout-1 table,
    /// whose archive Tributary does not write.
    pub fn new(loc: &TableLocation, config: &TableConfig, settings: HistorySettings) -> Result<Self> {
        let dir = history_dir(loc, config).ok_or_else(|| Error::InvalidInput {
            what: format!("table {loc}"),
            reason: "timeline layout 1 keeps its archive in `.hoodie/archived`, which Tributary does not write".into(),
        })?;
        Ok(Self { loc: loc.clone(), dir, settings })
    }

    /// The history folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Adds `rows` (not empty) as one level-0 file and a snapshot listing
    /// it; returns the file's name. Rows are written in requested-time
    /// order. When the latest snapshot already lists the file (a retry
    /// after a crash), nothing is written.
    pub async fn append(&self, rows: &[ArchivedRow]) -> Result<String> {
        let mut rows = rows.to_vec();
        rows.sort_by(|a, b| a.requested.cmp(&b.requested));
        let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
            return Err(Error::InvalidInput { what: format!("history of {}", self.loc), reason: "no rows".into() });
        };
        let name = format!("{}_{}_0.parquet", first.requested, last.requested);
        let (version, files) = latest_snapshot(&self.loc, &self.dir).await?.unwrap_or_default();
        if files.iter().any(|f| file_name(f) == name) {
            return Ok(name);
        }
        let len = self.write_file(&name, &rows).await?;
        let mut entries: Vec<(String, u64)> = files.iter().map(|f| (file_name(f).to_string(), f.len)).collect();
        entries.push((name.clone(), len));
        self.write_snapshot(version, &entries).await?;
        Ok(name)
    }

    /// Merges full levels into the next (module notes), then cleans old
    /// manifests and the files none of the kept ones lists.
    pub async fn compact_and_clean(&self) -> Result<HistoryMaintenance> {
        let mut done = HistoryMaintenance::default();
        let Some((mut version, mut files)) = latest_snapshot(&self.loc, &self.dir).await? else { return Ok(done) };
        let mut level = 0;
        while let Some(candidates) = self.merge_candidates(&files, level) {
            let mut rows = Vec::new();
            for f in &candidates {
                rows.extend(read_rows(&self.loc, f).await?);
            }
            let min = candidates.iter().map(|f| &f.min).min().cloned();
            let max = candidates.iter().map(|f| &f.max).max().cloned();
            let (Some(min), Some(max)) = (min, max) else { break };
            let name = format!("{min}_{max}_{}.parquet", level + 1);
            delete_if_exists(&self.loc, &self.dir.clone().join(name.as_str())).await?;
            let len = self.write_file(&name, &rows).await?;
            let mut entries: Vec<(String, u64)> =
                files.iter().filter(|f| !candidates.contains(f)).map(|f| (file_name(f).to_string(), f.len)).collect();
            entries.push((name.clone(), len));
            version = self.write_snapshot(version, &entries).await?;
            files = entries.iter().map(|(n, len)| HistoryFile::parse(&self.dir, n, *len)).collect::<Result<_>>()?;
            done.merged_into.push(name);
            level += 1;
        }
        done.deleted = self.clean(self.settings.retained_manifests + done.merged_into.len()).await?;
        Ok(done)
    }

    /// The files of `level` to merge, oldest first, as Java picks them:
    /// only once the level holds a batch; up to a batch, and up to the
    /// byte bound (a single file over it is skipped); at least two.
    fn merge_candidates(&self, files: &[HistoryFile], level: u32) -> Option<Vec<HistoryFile>> {
        let mut at_level: Vec<&HistoryFile> = files.iter().filter(|f| f.level == level).collect();
        if at_level.len() < self.settings.compaction_batch_size.max(2) {
            return None;
        }
        at_level.sort_by(|a, b| file_name(a).cmp(file_name(b)));
        let mut picked: Vec<HistoryFile> = Vec::new();
        let mut bytes = 0u64;
        for f in at_level {
            if picked.len() >= self.settings.compaction_batch_size {
                break;
            }
            if bytes.saturating_add(f.len) > self.settings.compaction_max_file_bytes {
                if picked.len() < 2 {
                    picked.clear();
                    bytes = 0;
                    continue;
                }
                break;
            }
            bytes += f.len;
            picked.push(f.clone());
        }
        (picked.len() >= 2).then_some(picked)
    }

    /// Writes `rows` as the data file `name`; returns its length.
    async fn write_file(&self, name: &str, rows: &[ArchivedRow]) -> Result<u64> {
        let path = self.dir.clone().join(name);
        let bytes =
            history_file_bytes(rows).map_err(|reason| Error::InvalidInput { what: path.to_string(), reason })?;
        let len = bytes.len() as u64;
        self.loc.put(&path, bytes).await?;
        Ok(len)
    }

    /// Writes `manifest_<latest + 1>` listing `entries`, then `_version_`
    /// naming it; returns the new version.
    async fn write_snapshot(&self, latest: u64, entries: &[(String, u64)]) -> Result<u64> {
        let version = latest + 1;
        let manifest = Manifest {
            files: entries.iter().map(|(name, len)| ManifestEntry { file_name: name, file_len: *len }).collect(),
        };
        let path = self.dir.clone().join(format!("{MANIFEST_PREFIX}{version}"));
        let json = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| Error::InvalidInput { what: path.to_string(), reason: e.to_string() })?;
        // A manifest of this version left by a crash before `_version_`
        // named it is nobody's yet.
        delete_if_exists(&self.loc, &path).await?;
        self.loc.create(&path, json).await?;
        let version_path = self.dir.clone().join(VERSION_FILE);
        delete_if_exists(&self.loc, &version_path).await?;
        self.loc.create(&version_path, version.to_string().into_bytes()).await?;
        Ok(version)
    }

    /// Deletes the manifests older than the newest `keep`, then every data
    /// file no kept manifest lists; returns how many files it deleted.
    async fn clean(&self, keep: usize) -> Result<usize> {
        let listing = self
            .loc
            .store
            .list_with_delimiter(Some(&self.dir))
            .await
            .map_err(|e| Error::store("list", &self.dir, e))?;
        let mut manifests: Vec<u64> = listing
            .objects
            .iter()
            .filter_map(|m| m.location.filename()?.strip_prefix(MANIFEST_PREFIX)?.parse().ok())
            .collect();
        if manifests.len() <= keep {
            return Ok(0);
        }
        manifests.sort_unstable();
        let (old, kept) = manifests.split_at(manifests.len() - keep);
        let mut deleted = 0;
        for v in old {
            delete_if_exists(&self.loc, &self.dir.clone().join(format!("{MANIFEST_PREFIX}{v}"))).await?;
            deleted += 1;
        }
        let mut listed = std::collections::BTreeSet::new();
        for v in kept {
            let path = self.dir.clone().join(format!("{MANIFEST_PREFIX}{v}"));
            let bytes = self.loc.get(&path).await?;
            let names = crate::history::manifest_file_names(&bytes)
                .map_err(|reason| Error::Corrupt { path: path.to_string(), reason })?;
            listed.extend(names);
        }
        for m in &listing.objects {
            let Some(name) = m.location.filename() else { continue };
            if name.ends_with(".parquet") && !listed.contains(name) {
                delete_if_exists(&self.loc, &m.location).await?;
                deleted += 1;
            }
        }
        Ok(deleted)
    }
}

/// The name of a history file.
fn file_name(f: &HistoryFile) -> &str {
    f.path.filename().unwrap_or_default()
}

/// The Arrow schema of a history file: Hudi's `HoodieLSMTimelineInstant`
/// columns.
pub fn history_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("instantTime", DataType::Utf8, true),
        Field::new("completionTime", DataType::Utf8, true),
        Field::new("action", DataType::Utf8, true),
        Field::new("metadata", DataType::Binary, true),
        Field::new("plan", DataType::Binary, true),
        Field::new("version", DataType::Int32, false),
    ]))
}

/// The rows as a Parquet file of [`history_schema`], gzip-compressed, with
/// the Avro schema in the footer, as Java's archiver writes them.
pub(crate) fn history_file_bytes(rows: &[ArchivedRow]) -> std::result::Result<Vec<u8>, String> {
    let schema = history_schema();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from_iter(rows.iter().map(|r| Some(r.requested.as_str())))),
            Arc::new(StringArray::from_iter(rows.iter().map(|r| Some(r.completed.as_str())))),
            Arc::new(StringArray::from_iter(rows.iter().map(|r| Some(r.action.as_str())))),
            Arc::new(BinaryArray::from_iter(rows.iter().map(|r| r.metadata.as_deref()))),
            Arc::new(BinaryArray::from_iter(rows.iter().map(|r| r.plan.as_deref()))),
            Arc::new(Int32Array::from_iter_values(rows.iter().map(|_| 1))),
        ],
    )
    .map_err(|e| e.to_string())?;
    let props = WriterProperties::builder()
        .set_compression(Compression::GZIP(GzipLevel::default()))
        .set_key_value_metadata(Some(vec![
            KeyValue::new("parquet.avro.schema".into(), ROW_AVRO_SCHEMA.to_string()),
            KeyValue::new("writer.model.name".into(), "avro".to_string()),
        ]))
        .build();
    let options = ArrowWriterOptions::new().with_properties(props).with_skip_arrow_metadata(true);
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new_with_options(&mut out, schema, options).map_err(|e| e.to_string())?;
    writer.write(&batch).map_err(|e| e.to_string())?;
    writer.close().map_err(|e| e.to_string())?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use object_store::memory::InMemory;

    use super::*;
    use crate::History;
    use crate::config::NewTableConfig;
    use crate::instant::InstantTime;

    fn writer() -> HistoryWriter {
        let loc = TableLocation::new(Arc::new(InMemory::new()), Path::from("t"));
        let config = TableConfig::new_table(&NewTableConfig::new("t", "id", "ts", "{}"));
        HistoryWriter::new(&loc, &config, HistorySettings { compaction_batch_size: 2, ..Default::default() }).unwrap()
    }

    fn row(t: u32) -> ArchivedRow {
        ArchivedRow {
            requested: InstantTime::parse(&format!("20250101000000{t:03}")).unwrap(),
            completed: InstantTime::parse(&format!("20250101000000{:03}", t + 1)).unwrap(),
            action: "deltacommit".into(),
            metadata: Some(Bytes::from(format!("metadata of {t}"))),
            plan: None,
        }
    }

    async fn version(w: &HistoryWriter) -> String {
        String::from_utf8(w.loc.get(&w.dir.clone().join(VERSION_FILE)).await.unwrap().to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_retry_of_the_same_rows_writes_nothing_new() {
        let w = writer();
        let name = w.append(&[row(20), row(10)]).await.unwrap();
        assert_eq!(name, "20250101000000010_20250101000000020_0.parquet");
        assert_eq!(w.append(&[row(10), row(20)]).await.unwrap(), name);
        assert_eq!(version(&w).await, "1");
        let history = History::load(&w.loc, &w.dir).await.unwrap();
        let got = history.read_metadata(&row(10).requested).await.unwrap().unwrap();
        assert_eq!(&got[..], b"metadata of 10");
    }

    /// A crash after the file, or after the manifest, before `_version_`
    /// named it: the retry writes the snapshot whole, once.
    #[tokio::test]
    async fn a_crash_before_the_version_file_is_retried_whole() {
        let w = writer();
        w.append(&[row(1)]).await.unwrap();
        let name = "20250101000000010_20250101000000010_0.parquet";
        w.loc.put(&w.dir.clone().join(name), b"half a file".to_vec()).await.unwrap();
        w.loc.put(&w.dir.clone().join("manifest_2"), b"{\"files\":[".to_vec()).await.unwrap();
        assert_eq!(History::load(&w.loc, &w.dir).await.unwrap().files().len(), 1, "readers see snapshot 1");
        assert_eq!(w.append(&[row(10)]).await.unwrap(), name);
        assert_eq!(version(&w).await, "2");
        let history = History::load(&w.loc, &w.dir).await.unwrap();
        assert_eq!(history.instants().count(), 2);
    }

    #[tokio::test]
    async fn merges_keep_every_row_and_cleaning_leaves_only_listed_files() {
        let w = writer();
        let orphan = w.dir.clone().join("20250101000000090_20250101000000090_0.parquet");
        w.loc.put(&orphan, b"an archiver's file in the making".to_vec()).await.unwrap();
        let mut merged = Vec::new();
        for t in [10, 20, 30, 40, 50] {
            w.append(&[row(t)]).await.unwrap();
            merged.extend(w.compact_and_clean().await.unwrap().merged_into);
        }
        // Batches of two: 10+20 and 30+40 into level 1, those two into level 2.
        assert_eq!(
            merged,
            [
                "20250101000000010_20250101000000020_1.parquet",
                "20250101000000030_20250101000000040_1.parquet",
                "20250101000000010_20250101000000040_2.parquet"
            ]
        );
        let history = History::load(&w.loc, &w.dir).await.unwrap();
        let all: Vec<_> = history.instants().map(|i| i.requested.clone()).collect();
        assert_eq!(all, [10, 20, 30, 40, 50].map(|t| row(t).requested).to_vec());
        let metadata = history.read_metadata(&row(30).requested).await.unwrap().unwrap();
        assert_eq!(&metadata[..], b"metadata of 30", "merges copy whole rows");
        assert!(w.loc.get(&orphan).await.is_err(), "no kept manifest lists it");
        let listing = w.loc.store.list_with_delimiter(Some(&w.dir)).await.unwrap();
        let parquet = listing.objects.iter().filter(|m| m.location.as_ref().ends_with(".parquet")).count();
        assert!(parquet >= history.files().len(), "{parquet} files for {:?}", history.files());
    }
}
