//! Hudi's LSM history timeline (`.hoodie/timeline/history/`), read.
//!
//! Writers *archive* the oldest completed instants: they add them to this
//! folder, then delete their files from the active timeline (Java writers
//! after each commit, `hoodie.archive.automatic` being on by default;
//! Tributary's archiver as a table service, written by
//! [`crate::HistoryWriter`]). Archived instants are still part of the
//! table: their files stay committed and their completion times still place
//! log files in slices. So [`crate::Timeline`] merges them in, and a
//! completed instant's file that is gone from the active timeline is read
//! from here.
//!
//! Layout (Hudi 1.x `LSMTimeline`, `LSMTimelineFolder`,
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
//! bytes for compactions, clustering and cleans) and `version` (1).
//!
//! A [`History`] is one snapshot as read once: `_version_` and the manifest
//! are fetched when it is opened, never again for it. Loaded
//! ([`History::load`], what building the timeline does), it has read the
//! first three columns of every file and knows each archived instant's
//! row; a metadata blob is read only when one instant's content is asked
//! for, and then only its row's pages (the file's page index permitting).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arrow::array::{Array, AsArray, GenericByteArray, RecordBatch, StringArray};
use arrow::datatypes::{BinaryType, ByteArrayType, Utf8Type};
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectMeta;
use object_store::path::Path;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowReaderOptions, RowSelection};
use parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use parquet::file::metadata::PageIndexPolicy;
use serde::Deserialize;

use crate::config::TableConfig;
use crate::error::{Error, Result};
use crate::instant::{Action, Instant, InstantTime, Latest, State, position};
use tributary_storage::StoreFile;
use tributary_storage::TableLocation;

/// The file naming the latest snapshot version.
pub const VERSION_FILE: &str = "_version_";

/// The prefix of manifest files (`manifest_<N>`).
pub const MANIFEST_PREFIX: &str = "manifest_";

/// History files read at once.
const PARALLEL_READS: usize = 8;

/// The history folder of a layout-2 table (`hoodie.timeline.history.path`
/// under the timeline folder), `None` for layout 1 (whose archive,
/// `.hoodie/archived/`, Tributary does not read).
pub fn history_dir(loc: &TableLocation, config: &TableConfig) -> Option<Path> {
    (config.timeline_layout >= 2).then(|| {
        let timeline = crate::layout::timeline_dir(&loc.root, config.timeline_layout, &config.timeline_path);
        crate::layout::history_dir(&timeline, &config.history_path)
    })
}

/// One archived instant, a row of a history file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchivedRow {
    /// The requested time.
    pub requested: InstantTime,
    /// The completion time (Java's readers require one).
    pub completed: InstantTime,
    /// The completed file's action (`commit` for a compaction).
    pub action: String,
    /// The completed file's bytes (`None` for an empty file).
    pub metadata: Option<bytes::Bytes>,
    /// The plan: the requested file's bytes for cleans and compactions.
    pub plan: Option<bytes::Bytes>,
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
    Ok(snapshot(loc, dir, None).await?.map(|(_, files)| files).unwrap_or_default())
}

/// The latest snapshot's version and valid files; `None` when the table
/// has no history.
pub async fn latest_snapshot(loc: &TableLocation, dir: &Path) -> Result<Option<(u64, Vec<HistoryFile>)>> {
    snapshot(loc, dir, None).await
}

/// The names of the files a manifest (`manifest_<N>`'s bytes) lists.
pub(crate) fn manifest_file_names(bytes: &[u8]) -> std::result::Result<Vec<String>, String> {
    let manifest: Manifest = serde_json::from_slice(bytes).map_err(|e| format!("not a history manifest: {e}"))?;
    Ok(manifest.files.into_iter().map(|f| f.file_name).collect())
}

/// The latest snapshot's version and valid files; `None` when there is no
/// snapshot. `listed` is the folder's listing when the caller has it.
async fn snapshot(
    loc: &TableLocation,
    dir: &Path,
    listed: Option<&[ObjectMeta]>,
) -> Result<Option<(u64, Vec<HistoryFile>)>> {
    let Some(version) = latest_version(loc, dir, listed).await? else { return Ok(None) };
    let path = dir.clone().join(format!("{MANIFEST_PREFIX}{version}"));
    let bytes = loc.get(&path).await?;
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| Error::Corrupt { path: path.to_string(), reason: format!("not a history manifest: {e}") })?;
    let files = manifest
        .files
        .iter()
        .map(|f| {
            HistoryFile::parse(dir, &f.file_name, f.file_len)
                .map_err(|e| Error::Corrupt { path: path.to_string(), reason: format!("lists a bad file: {e}") })
        })
        .collect::<Result<_>>()?;
    Ok(Some((version, files)))
}

/// The latest snapshot version: `_version_`, else the highest manifest
/// listed; `None` when there is none. With the folder's listing at hand,
/// `_version_` is fetched only when listed, and the folder is not listed
/// again.
async fn latest_version(loc: &TableLocation, dir: &Path, listed: Option<&[ObjectMeta]>) -> Result<Option<u64>> {
    let path = dir.clone().join(VERSION_FILE);
    if listed.is_none_or(|l| l.iter().any(|m| m.location == path)) {
        match loc.get(&path).await {
            Ok(bytes) => match std::str::from_utf8(&bytes).ok().and_then(|s| s.trim().parse::<u64>().ok()) {
                Some(v) => return Ok(Some(v)),
                None => tracing::warn!(path = %path, "unreadable history version file; taking the highest manifest"),
            },
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    let listing;
    let objects = match listed {
        Some(l) => l,
        None => {
            listing = loc.store.list_with_delimiter(Some(dir)).await.map_err(|e| Error::store("list", dir, e))?;
            &listing.objects
        }
    };
    Ok(objects.iter().filter_map(|m| m.location.filename()?.strip_prefix(MANIFEST_PREFIX)?.parse::<u64>().ok()).max())
}

/// Every archived instant of a snapshot, by requested time, and where its
/// row is (the same position in `rows`). Built by concatenating the files'
/// instants and sorting (files cover ranges of time, so the sort finds
/// sorted runs), it costs a few milliseconds at 100,000 instants when a
/// snapshot's files change, where a map built entry by entry took 17.
#[derive(Debug)]
struct Index {
    instants: Arc<[Instant]>,
    rows: Vec<RowAt>,
    /// The positions of the instants that became visible last.
    latest: Latest,
}

impl Index {
    /// The index of the files' instants (`by_file[n]` holds those of file
    /// `n`): an instant in several files keeps its row in the first.
    fn build(by_file: &[&[(Instant, usize)]]) -> Self {
        let mut all: Vec<(Instant, RowAt)> = Vec::with_capacity(by_file.iter().map(|f| f.len()).sum());
        for (file, found) in by_file.iter().enumerate() {
            all.extend(found.iter().map(|(i, row)| (i.clone(), RowAt { file, row: *row })));
        }
        // Stable: of the entries for one time, the first file's stays first.
        all.sort_by(|a, b| a.0.requested.cmp(&b.0.requested));
        all.dedup_by(|a, b| a.0.requested == b.0.requested);
        let rows = all.iter().map(|(_, at)| *at).collect();
        let instants: Arc<[Instant]> = all.into_iter().map(|(i, _)| i).collect();
        Self { latest: Latest::of(&instants), instants, rows }
    }

    /// The instant requested at `t`, with its row.
    fn get(&self, t: &InstantTime) -> Option<(Instant, RowAt)> {
        let n = position(&self.instants, t)?;
        Some((self.instants[n].clone(), self.rows[n]))
    }
}

/// A loaded snapshot's instants, kept for its location
/// ([`TableLocation::remember`]) with the files they were read from, and
/// each file's instants: history files never change once listed in a
/// manifest, so the next load that finds the same files reads none of them
/// again, and one that finds new files (an archiving run appended one, or
/// merged some into one) reads only those. Only the latest snapshot's files
/// are kept, so files the history cleaned go with it.
struct Loaded {
    files: Vec<HistoryFile>,
    index: Arc<Index>,
    warnings: Vec<String>,
    by_file: std::collections::HashMap<Path, Arc<FileInstants>>,
}

/// One history file's instants, each with its row, and the rows skipped.
type FileInstants = (Vec<(Instant, usize)>, Vec<String>);

/// Where an archived instant's row is: a file of the snapshot (an index
/// into its files) and the row in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RowAt {
    file: usize,
    row: usize,
}

/// One snapshot of a table's history, read once (module notes): its valid
/// files and, once loaded, the archived instants they hold. Looking an
/// instant up or reading its content through it fetches neither
/// `_version_` nor the manifest again.
#[derive(Debug, Clone)]
pub struct History {
    loc: TableLocation,
    files: Vec<HistoryFile>,
    /// Every archived instant with its row, by requested time, once
    /// [`History::load`] read them all; `None` for a snapshot only opened,
    /// whose lookups read the files covering the instants asked for.
    index: Option<Arc<Index>>,
    /// The rows loading skipped (unknown actions, bad times).
    warnings: Vec<String>,
}

impl History {
    /// The latest snapshot of the history at `dir`: `_version_` and the
    /// manifest (the folder is listed only when `_version_` is missing).
    /// For a folder known to exist; [`History::probe`] first looks.
    pub async fn open(loc: &TableLocation, dir: &Path) -> Result<Self> {
        let files = snapshot(loc, dir, None).await?.map(|(_, files)| files).unwrap_or_default();
        Ok(Self { loc: loc.clone(), files, index: None, warnings: Vec::new() })
    }

    /// [`History::open`] for a folder that may not exist: one listing of
    /// it, which is all a table never archived costs; then `_version_` (if
    /// listed) and the manifest.
    pub async fn probe(loc: &TableLocation, dir: &Path) -> Result<Self> {
        let listing = loc.store.list_with_delimiter(Some(dir)).await.map_err(|e| Error::store("list", dir, e))?;
        let files = if listing.objects.is_empty() {
            Vec::new()
        } else {
            snapshot(loc, dir, Some(&listing.objects)).await?.map(|(_, files)| files).unwrap_or_default()
        };
        Ok(Self { loc: loc.clone(), files, index: None, warnings: Vec::new() })
    }

    /// [`History::open`], then the instants of every file (the first three
    /// columns), a few files at a time. Files the last load through this
    /// location (or a clone of it) read are not read again: when it found
    /// the same files, this load reads none.
    pub async fn load(loc: &TableLocation, dir: &Path) -> Result<Self> {
        let mut history = Self::open(loc, dir).await?;
        let key = format!("history instants: {dir}");
        let kept = loc.recall::<Loaded>(&key);
        if let Some(kept) = kept.as_ref().filter(|k| k.files == history.files) {
            history.index = Some(kept.index.clone());
            history.warnings = kept.warnings.clone();
            return Ok(history);
        }
        let known = |f: &HistoryFile| kept.as_ref().and_then(|k| k.by_file.get(&f.path).cloned());
        let unread: Vec<usize> = (0..history.files.len()).filter(|&n| known(&history.files[n]).is_none()).collect();
        let mut by_file: std::collections::HashMap<Path, Arc<FileInstants>> =
            history.files.iter().filter_map(|f| Some((f.path.clone(), known(f)?))).collect();
        for (file, found, skipped) in history.read_instants_of(&unread).await? {
            by_file.insert(history.files[file].path.clone(), Arc::new((found, skipped)));
        }
        let per_file: Vec<&FileInstants> = history.files.iter().map(|f| by_file[&f.path].as_ref()).collect();
        for (_, skipped) in &per_file {
            history.warnings.extend(skipped.iter().cloned());
        }
        let found: Vec<&[(Instant, usize)]> = per_file.iter().map(|(found, _)| found.as_slice()).collect();
        let index = Arc::new(Index::build(&found));
        let warnings = history.warnings.clone();
        let kept = Loaded { files: history.files.clone(), index: index.clone(), warnings, by_file };
        loc.remember(&key, Arc::new(kept));
        history.index = Some(index);
        Ok(history)
    }

    /// The snapshot's valid files.
    pub fn files(&self) -> &[HistoryFile] {
        &self.files
    }

    /// The archived instants, by requested time; empty unless loaded.
    pub fn instants(&self) -> impl Iterator<Item = &Instant> {
        self.index.iter().flat_map(|index| index.instants.iter())
    }

    /// Whether the loaded snapshot holds the instant requested at `t`.
    pub fn holds(&self, t: &InstantTime) -> bool {
        self.index.as_ref().is_some_and(|index| position(&index.instants, t).is_some())
    }

    /// [`History::instants`] as one list shared by every caller, and by
    /// every load of the same snapshot through this location: what a
    /// timeline holds of the history, never copied. With it, the positions
    /// of the instants that became visible last.
    pub(crate) fn shared_instants(&self) -> (Arc<[Instant]>, Latest) {
        self.index
            .as_ref()
            .map_or_else(|| (Arc::from([]), Latest::default()), |index| (index.instants.clone(), index.latest))
    }

    /// The rows loading skipped, with the reason.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The archived instant requested at `t`, if the snapshot holds it.
    pub async fn find_instant(&self, t: &InstantTime) -> Result<Option<Instant>> {
        Ok(self.locate(std::slice::from_ref(t)).await?.remove(t).map(|(i, _)| i))
    }

    /// The content the instant requested at `t` had in its completed file
    /// (its commit metadata, for a commit), if the snapshot holds the
    /// instant; empty when the instant was archived without content.
    pub async fn read_metadata(&self, t: &InstantTime) -> Result<Option<bytes::Bytes>> {
        Ok(self.read_metadata_many(std::slice::from_ref(t)).await?.remove(t))
    }

    /// [`History::read_metadata`] for each of `times` the snapshot holds,
    /// reading each file that holds some of them once, and of it only the
    /// rows of those.
    pub async fn read_metadata_many(&self, times: &[InstantTime]) -> Result<BTreeMap<InstantTime, bytes::Bytes>> {
        let located = self.locate(times).await?;
        let mut rows_by_file: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (_, at) in located.values() {
            rows_by_file.entry(at.file).or_default().push(at.row);
        }
        // Owned futures: borrowing closures here make the caller's future
        // fail `Send` for higher-ranked lifetimes (rust-lang/rust#102211).
        let reads: Vec<_> = rows_by_file
            .into_iter()
            .map(|(file, rows)| {
                let (loc, f) = (self.loc.clone(), self.files[file].clone());
                async move {
                    let batches = read_columns(&loc, &f, &["instantTime", "metadata"], Some(rows)).await?;
                    Ok::<_, Error>((f, batches))
                }
            })
            .collect();
        let per_file: Vec<_> = futures::stream::iter(reads).buffered(PARALLEL_READS).try_collect().await?;
        let wanted: BTreeMap<&str, &InstantTime> = located.keys().map(|t| (t.as_str(), t)).collect();
        let mut out = BTreeMap::new();
        for (f, batches) in per_file {
            for batch in batches {
                let times = column::<Utf8Type>(&batch, "instantTime", &f)?;
                let blobs = column::<BinaryType>(&batch, "metadata", &f)?;
                for row in 0..batch.num_rows() {
                    let Some(t) = times.is_valid(row).then(|| wanted.get(times.value(row))).flatten() else {
                        continue;
                    };
                    let blob = if blobs.is_valid(row) { blobs.value(row).to_vec() } else { Vec::new() };
                    out.entry((*t).clone()).or_insert_with(|| bytes::Bytes::from(blob));
                }
            }
        }
        Ok(out)
    }

    /// The instants of `times` the snapshot holds, with their rows: from
    /// the index when loaded, else from the files covering them, each read
    /// once.
    async fn locate(&self, times: &[InstantTime]) -> Result<BTreeMap<InstantTime, (Instant, RowAt)>> {
        if let Some(index) = &self.index {
            return Ok(times.iter().filter_map(|t| Some((t.clone(), index.get(t)?))).collect());
        }
        let wanted: BTreeSet<&InstantTime> = times.iter().collect();
        let covering: Vec<usize> =
            (0..self.files.len()).filter(|&n| wanted.iter().any(|t| self.files[n].covers(t))).collect();
        let mut out = BTreeMap::new();
        for (file, found, _) in self.read_instants_of(&covering).await? {
            for (i, row) in found.into_iter().filter(|(i, _)| wanted.contains(&i.requested)) {
                out.entry(i.requested.clone()).or_insert((i, RowAt { file, row }));
            }
        }
        Ok(out)
    }

    /// The instants (with their rows) and skipped rows of the files
    /// `files` (indexes), in that order, a few files at a time.
    async fn read_instants_of(&self, files: &[usize]) -> Result<Vec<(usize, Vec<(Instant, usize)>, Vec<String>)>> {
        let reads: Vec<_> = files
            .iter()
            .map(|&n| {
                let (loc, f) = (self.loc.clone(), self.files[n].clone());
                async move { read_instants(&loc, &f).await.map(|(found, skipped)| (n, found, skipped)) }
            })
            .collect();
        futures::stream::iter(reads).buffered(PARALLEL_READS).try_collect().await
    }
}

/// The instants of one history file, each with its row, and the rows
/// skipped.
async fn read_instants(loc: &TableLocation, f: &HistoryFile) -> Result<(Vec<(Instant, usize)>, Vec<String>)> {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let mut first_row = 0;
    for batch in read_columns(loc, f, &["instantTime", "completionTime", "action"], None).await? {
        let times = column::<Utf8Type>(&batch, "instantTime", f)?;
        let completions = column::<Utf8Type>(&batch, "completionTime", f)?;
        let actions = column::<Utf8Type>(&batch, "action", f)?;
        for row in 0..batch.num_rows() {
            match archived_instant(&times, &completions, &actions, row) {
                Ok(i) => out.push((i, first_row + row)),
                Err(reason) => skipped.push(format!("skipping archived instant in {}: {reason}", f.path)),
            }
        }
        first_row += batch.num_rows();
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

/// Every row of a history file, in file order: what merging files into
/// the next level copies. A row without a completion time gets its
/// requested time (as [`History`] reads it).
pub(crate) async fn read_rows(loc: &TableLocation, f: &HistoryFile) -> Result<Vec<ArchivedRow>> {
    let names = ["instantTime", "completionTime", "action", "metadata", "plan"];
    let mut out = Vec::new();
    for batch in read_columns(loc, f, &names, None).await? {
        let times = column::<Utf8Type>(&batch, "instantTime", f)?;
        let completions = column::<Utf8Type>(&batch, "completionTime", f)?;
        let actions = column::<Utf8Type>(&batch, "action", f)?;
        let metadata = column::<BinaryType>(&batch, "metadata", f)?;
        let plans = column::<BinaryType>(&batch, "plan", f)?;
        for row in 0..batch.num_rows() {
            let corrupt = |reason: String| Error::Corrupt { path: f.path.to_string(), reason };
            let requested = times
                .is_valid(row)
                .then(|| InstantTime::parse(times.value(row)))
                .ok_or_else(|| corrupt(format!("row {row}: no instant time")))?
                .map_err(|e| corrupt(format!("row {row}: {e}")))?;
            let completed = match completions.is_valid(row) {
                true => InstantTime::parse(completions.value(row)).map_err(|e| corrupt(format!("row {row}: {e}")))?,
                false => requested.clone(),
            };
            let blob =
                |a: &arrow::array::BinaryArray| a.is_valid(row).then(|| bytes::Bytes::copy_from_slice(a.value(row)));
            out.push(ArchivedRow {
                requested,
                completed,
                action: if actions.is_valid(row) { actions.value(row).to_string() } else { String::new() },
                metadata: blob(&metadata),
                plan: blob(&plans),
            });
        }
    }
    Ok(out)
}

/// The named columns of a history file, read through the store by ranges
/// (the other columns, metadata blobs above all, are not fetched). With
/// `rows` (row numbers in the file), only those rows: the file's page index
/// is read too, so that only the pages holding them are fetched.
async fn read_columns(
    loc: &TableLocation,
    f: &HistoryFile,
    columns: &[&str],
    rows: Option<Vec<usize>>,
) -> Result<Vec<RecordBatch>> {
    let name = f.path.to_string();
    let reader = StoreFile::new(Arc::clone(&loc.store), f.path.clone(), f.len);
    let options = match rows {
        Some(_) => ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional),
        None => ArrowReaderOptions::new(),
    };
    let builder = ParquetRecordBatchStreamBuilder::new_with_options(reader, options)
        .await
        .map_err(|e| Error::parquet(&name, e))?;
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
    let mut builder = builder.with_projection(mask);
    if let Some(mut rows) = rows {
        // A row past the end (the file is not the one the rows were read
        // from) selects nothing; the caller matches rows by instant time.
        let total = usize::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0);
        rows.retain(|&r| r < total);
        rows.sort_unstable();
        rows.dedup();
        builder = builder
            .with_row_selection(RowSelection::from_consecutive_ranges(rows.into_iter().map(|r| r..r + 1), total));
    }
    let stream = builder.build().map_err(|e| Error::parquet(&name, e))?;
    stream.map(|b| b.map_err(|e| Error::parquet(&name, e))).try_collect().await
}

/// A text or binary column of a history batch, as `T`'s array (a string
/// column may come as any of Arrow's string types; it is cast).
fn column<T: ByteArrayType>(batch: &RecordBatch, column: &str, f: &HistoryFile) -> Result<GenericByteArray<T>> {
    let corrupt = |reason: String| Error::Corrupt { path: f.path.to_string(), reason };
    let col = batch.column_by_name(column).ok_or_else(|| corrupt(format!("no column `{column}`")))?;
    let cast = arrow::compute::cast(col, &T::DATA_TYPE)
        .map_err(|e| corrupt(format!("column `{column}` is not {}: {e}", T::DATA_TYPE)))?;
    cast.as_bytes_opt::<T>().cloned().ok_or_else(|| corrupt(format!("column `{column}` is not {}", T::DATA_TYPE)))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use object_store::memory::InMemory;

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

    #[test]
    fn nested_history_paths_are_segments() {
        let (loc, mut config, _) = table();
        config.history_path = "archive/lsm".into();
        assert_eq!(history_dir(&loc, &config).unwrap().as_ref(), "t/.hoodie/timeline/archive/lsm");
    }

    #[tokio::test]
    async fn no_history_is_empty() {
        let (loc, _, dir) = table();
        assert!(snapshot_files(&loc, &dir).await.unwrap().is_empty());
        assert!(History::load(&loc, &dir).await.unwrap().instants().next().is_none());
        assert_eq!(
            History::open(&loc, &dir).await.unwrap().read_metadata(&t("20250101000000000")).await.unwrap(),
            None
        );
        // Probing a table never archived costs one listing, nothing else.
        let counting = Arc::new(tributary_storage::CountingStore::new(loc.store.clone()));
        let probing = TableLocation::new(counting.clone(), loc.root.clone());
        let probed = History::probe(&probing, &dir).await.unwrap();
        assert_eq!(probed.find_instant(&t("20250101000000000")).await.unwrap(), None);
        let r = counting.requests();
        assert_eq!((r.lists, r.total()), (1, 1), "{r:?}");
    }

    #[tokio::test]
    async fn damaged_history_is_corrupt_and_named() {
        let (loc, _, dir) = table();
        loc.put(&dir.clone().join(VERSION_FILE), b"1".to_vec()).await.unwrap();
        loc.put(&dir.clone().join("manifest_1"), b"{\"files\":[{\"fileName\":\"x.parquet\",\"fileLen\":3}]}".to_vec())
            .await
            .unwrap();
        let err = History::load(&loc, &dir).await.unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Corrupt);
        assert!(err.to_string().contains("manifest_1") && err.to_string().contains("x.parquet"), "{err}");

        let name = "20250101000000001_20250101000000001_0.parquet";
        loc.put(&dir.clone().join(name), b"not parquet".to_vec()).await.unwrap();
        let manifest = format!("{{\"files\":[{{\"fileName\":\"{name}\",\"fileLen\":11}}]}}");
        loc.put(&dir.clone().join("manifest_1"), manifest.into_bytes()).await.unwrap();
        let err = History::load(&loc, &dir).await.unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Corrupt);
        assert!(err.to_string().contains(name), "{err}");
    }
}
