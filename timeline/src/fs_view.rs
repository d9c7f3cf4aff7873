//! The file-system view: file groups and file slices by completion time.
//!
//! Rules (format notes §7):
//! - base files open a slice at their own instant;
//! - a pending compaction opens an empty slice at its instant;
//! - each completed log, in log order, joins the slice with the largest key
//!   that is ≤ its completion time, or opens one at its own instant;
//! - files of instants that have not completed are invisible;
//! - a file group a completed `replacecommit` replaced (insert overwrite,
//!   clustering, delete partition) is gone from the view, as in Hudi's
//!   `AbstractTableFileSystemView`; a view of a timeline cut at an earlier
//!   instant (time travel) still has it.

use std::collections::{BTreeMap, BTreeSet};

use futures::TryStreamExt;
use object_store::path::Path;

use tributary_format::{CommitMetadata, CompactionPlan, clustering_file_groups};

use crate::config::TableConfig;
use crate::error::{Error, Result};
use crate::file_name::{BaseFileName, LogFileName};
use crate::instant::InstantTime;
use crate::timeline::Timeline;
use tributary_storage::TableLocation;

/// Name of the marker file that makes a folder a partition.
pub(crate) use crate::layout::PARTITION_METADATA;

/// One data file found in a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFile {
    /// Partition path relative to the table root (`""` when unpartitioned).
    pub partition: String,
    /// Bare file name.
    pub name: String,
    /// Full path in the store.
    pub path: Path,
    /// Size in bytes.
    pub size: u64,
}

impl DataFile {
    /// The file group and the instant a data file's name gives (a log's
    /// delta commit, or before table version 8 its slice's base instant; a
    /// base file's commit); `None` for a name that is neither.
    pub fn written(&self) -> Option<(GroupId, InstantTime)> {
        let (file_id, instant) = match LogFileName::parse(&self.name) {
            Ok(n) => (n.file_id, n.instant),
            Err(_) => BaseFileName::parse(&self.name).map(|n| (n.file_id, n.instant)).ok()?,
        };
        Some(((self.partition.clone(), file_id), instant))
    }
}

/// A base (Parquet) file of a slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseFile {
    /// Parsed name.
    pub name: BaseFileName,
    /// The file.
    pub file: DataFile,
}

/// A log file of a slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    /// Parsed name.
    pub name: LogFileName,
    /// The file.
    pub file: DataFile,
    /// When the delta commit that wrote it completed.
    pub completed: InstantTime,
}

impl FileSlice {
    /// Whether `log` is the tombstone log the compaction that wrote this
    /// slice's base file put beside it (named with the base file's instant):
    /// it carries forward what an earlier merge decided, and is no new write.
    pub fn is_tombstone_log(&self, log: &LogFile) -> bool {
        self.base.as_ref().is_some_and(|b| b.name.instant == log.name.instant)
    }
}

/// A base file (or none) plus the logs that apply on top of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSlice {
    /// Partition path.
    pub partition: String,
    /// File group id.
    pub file_id: String,
    /// The slice key: base instant, compaction instant or first log's instant.
    pub base_instant: InstantTime,
    /// The base file, if any.
    pub base: Option<BaseFile>,
    /// Log files in log order, except that the tombstone log
    /// ([`FileSlice::is_tombstone_log`]) comes first.
    pub logs: Vec<LogFile>,
}

impl FileSlice {
    /// The base file's name, if any.
    pub fn base_file_name(&self) -> Option<&str> {
        self.base.as_ref().map(|b| b.file.name.as_str())
    }

    /// The log files' names, in log order.
    pub fn log_file_names(&self) -> Vec<&str> {
        self.logs.iter().map(|l| l.file.name.as_str()).collect()
    }
}

/// All slices of one file group, keyed by base instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileGroup {
    /// Partition path.
    pub partition: String,
    /// File group id.
    pub file_id: String,
    /// Slices by key.
    pub slices: BTreeMap<InstantTime, FileSlice>,
}

impl FileGroup {
    fn slice_at(&mut self, key: InstantTime) -> &mut FileSlice {
        let FileGroup { partition, file_id, slices } = self;
        slices.entry(key).or_insert_with_key(|key| FileSlice {
            partition: partition.clone(),
            file_id: file_id.clone(),
            base_instant: key.clone(),
            base: None,
            logs: Vec::new(),
        })
    }

    /// The newest slice.
    pub fn latest(&self) -> Option<&FileSlice> {
        self.slices.values().next_back()
    }

    /// The newest slice as a reader sees it: while a compaction is pending,
    /// its (base-less) slice is read together with the slice before it.
    pub fn latest_merged(&self, pending_compactions: &BTreeSet<InstantTime>) -> Option<FileSlice> {
        let mut it = self.slices.values().rev();
        let latest = it.next()?;
        if latest.base.is_none()
            && pending_compactions.contains(&latest.base_instant)
            && let Some(prev) = it.next()
        {
            let mut merged = prev.clone();
            merged.logs.extend(latest.logs.iter().cloned());
            return Some(merged);
        }
        Some(latest.clone())
    }
}

/// File groups of a table at one timeline.
#[derive(Debug, Clone, Default)]
pub struct FileSystemView {
    /// By partition, then file id.
    groups: BTreeMap<String, BTreeMap<String, FileGroup>>,
    pending_compactions: BTreeSet<InstantTime>,
    in_pending_plans: BTreeSet<(String, String)>,
    clustering: BTreeSet<(String, String)>,
    replaced: BTreeMap<GroupId, ReplacedGroup>,
    change_data: Vec<(LogFileName, DataFile)>,
    skipped: Vec<String>,
}

/// A file group a completed `replacecommit` replaced whose files are still
/// in storage: invisible to readers, for the cleaner to delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplacedGroup {
    /// The replacecommit's requested time.
    pub replaced_by: InstantTime,
    /// The group's files, in listing order.
    pub files: Vec<DataFile>,
}

/// A file group: `(partition, file id)`.
pub type GroupId = (String, String);

/// What the table services of a timeline planned and replaced, read from
/// their instants' files ([`planned_groups`]), for [`FileSystemView::build`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlannedGroups {
    /// For each pending compaction, the file groups its plan covers.
    pub compactions: BTreeMap<InstantTime, BTreeSet<GroupId>>,
    /// The file groups a pending clustering rewrites: no compaction plans
    /// them until it completes (Hudi's compaction planner skips them too).
    pub clustering: BTreeSet<GroupId>,
    /// The file groups a completed `replacecommit` replaced, with its
    /// requested time.
    pub replaced: BTreeMap<GroupId, InstantTime>,
}

impl FileSystemView {
    /// Groups `files` into slices by the rules above. `planned` gives, for
    /// each pending compaction instant, the file groups its plan covers.
    pub fn build(timeline: &Timeline, files: impl IntoIterator<Item = DataFile>, planned: &PlannedGroups) -> Self {
        let mut bases = Vec::new();
        let mut logs = Vec::new();
        let mut skipped = Vec::new();
        let mut change_data = Vec::new();
        let mut replaced: BTreeMap<GroupId, ReplacedGroup> = BTreeMap::new();
        for f in files {
            if f.name == PARTITION_METADATA {
                continue;
            }
            if !planned.replaced.is_empty()
                && let Some((group, _)) = f.written()
                && let Some(by) = planned.replaced.get(&group)
            {
                let entry = replaced
                    .entry(group)
                    .or_insert_with(|| ReplacedGroup { replaced_by: by.clone(), files: Vec::new() });
                entry.files.push(f);
                continue;
            }
            if f.name.starts_with('.') && f.name.contains(".log.") {
                match LogFileName::parse(&f.name) {
                    // Files of instants that have not completed are invisible.
                    Ok(n) if !timeline.is_completed(&n.instant) => {}
                    // Change-data logs (`.cdc`, Hudi's CDC files, written by
                    // Java's merge handles and compactions) hold change
                    // records, not data: Hudi's readers skip them too
                    // (`HoodieLogFile.isCDC`).
                    Ok(n) if n.suffix == crate::CHANGE_DATA_SUFFIX => change_data.push((n, f)),
                    Ok(n) => logs.push((n, f)),
                    Err(e) => skipped.push(e.to_string()),
                }
            } else if f.name.ends_with(".parquet") {
                match BaseFileName::parse(&f.name) {
                    Ok(n) => bases.push((n, f)),
                    Err(e) => skipped.push(e.to_string()),
                }
            }
        }
        // By partition, then file id: a file's group is found without
        // copying its names.
        let mut groups: BTreeMap<String, BTreeMap<String, FileGroup>> = BTreeMap::new();
        fn group<'a>(
            groups: &'a mut BTreeMap<String, BTreeMap<String, FileGroup>>,
            partition: &str,
            file_id: &str,
        ) -> &'a mut FileGroup {
            if !groups.contains_key(partition) {
                groups.insert(partition.to_string(), BTreeMap::new());
            }
            let ids = groups.get_mut(partition).unwrap_or_else(|| unreachable!("inserted above"));
            if !ids.contains_key(file_id) {
                let g = FileGroup {
                    partition: partition.to_string(),
                    file_id: file_id.to_string(),
                    slices: BTreeMap::new(),
                };
                ids.insert(file_id.to_string(), g);
            }
            ids.get_mut(file_id).unwrap_or_else(|| unreachable!("inserted above"))
        }
        for (name, file) in bases {
            if !timeline.is_completed(&name.instant) {
                continue;
            }
            let slice = group(&mut groups, &file.partition, &name.file_id).slice_at(name.instant.clone());
            // Two committed base files at one instant would be a broken table;
            // keep the first in name order so the result is deterministic.
            if slice.base.as_ref().is_none_or(|b| b.file.name > file.name) {
                slice.base = Some(BaseFile { name, file });
            }
        }
        let pending_compactions: BTreeSet<InstantTime> =
            timeline.pending_compactions().map(|i| i.requested.clone()).collect();
        let mut in_pending_plans = BTreeSet::new();
        for (t, covered) in &planned.compactions {
            if pending_compactions.contains(t) {
                for (partition, file_id) in covered {
                    group(&mut groups, partition, file_id).slice_at(t.clone());
                    in_pending_plans.insert((partition.clone(), file_id.clone()));
                }
            }
        }
        // In log order: the positions are sorted rather than the wide rows.
        // Distinct files never compare equal, so an unstable sort is as
        // deterministic as a stable one.
        let mut order: Vec<u32> = (0..logs.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| {
            let (a, b) = (&logs[a as usize], &logs[b as usize]);
            a.0.log_order(&b.0)
                .then_with(|| a.1.partition.cmp(&b.1.partition))
                .then_with(|| a.0.file_id.cmp(&b.0.file_id))
        });
        let mut logs: Vec<Option<(LogFileName, DataFile)>> = logs.into_iter().map(Some).collect();
        for (name, file) in order.into_iter().filter_map(|i| logs[i as usize].take()) {
            let completed = timeline.completion_time(&name.instant).cloned().unwrap_or_else(|| name.instant.clone());
            let g = group(&mut groups, &file.partition, &name.file_id);
            let key = g
                .slices
                .range(..=&completed)
                .next_back()
                .map(|(k, _)| k.clone())
                .unwrap_or_else(|| name.instant.clone());
            g.slice_at(key).logs.push(LogFile { name, file, completed });
        }
        // A slice's tombstone log holds the deletes its compaction folded:
        // they came before every write of the slice, so it is merged
        // first, ahead of logs requested before the compaction that
        // completed after it.
        for slice in groups.values_mut().flat_map(|ids| ids.values_mut()).flat_map(|g| g.slices.values_mut()) {
            if let Some(at) = slice.base.as_ref().map(|b| b.name.instant.clone()) {
                slice.logs.sort_by_key(|l| l.name.instant != at);
            }
        }
        let clustering = planned.clustering.clone();
        Self { groups, pending_compactions, in_pending_plans, clustering, replaced, change_data, skipped }
    }

    /// Lists the table and builds its view at `timeline`.
    pub async fn load(loc: &TableLocation, config: &TableConfig, timeline: &Timeline) -> Result<Self> {
        Self::load_filtered(loc, config, timeline, |files| files).await
    }

    /// [`FileSystemView::load`] of the data files `select` keeps of the
    /// table's listing ([`list_data_files`]): an incremental read's view of
    /// the files its window's commits wrote.
    pub async fn load_filtered(
        loc: &TableLocation,
        config: &TableConfig,
        timeline: &Timeline,
        select: impl FnOnce(Vec<DataFile>) -> Vec<DataFile>,
    ) -> Result<Self> {
        let files = select(list_data_files(loc).await?);
        let planned = planned_groups(loc, config, timeline).await?;
        Ok(Self::build(timeline, files, &planned))
    }

    /// Every file group.
    pub fn groups(&self) -> impl Iterator<Item = &FileGroup> {
        self.groups.values().flat_map(BTreeMap::values)
    }

    /// The newest slice of every file group, as readers merge it.
    pub fn latest_slices(&self) -> Vec<FileSlice> {
        self.groups().filter_map(|g| g.latest_merged(&self.pending_compactions)).collect()
    }

    /// Whether a pending compaction plan covers the file group.
    pub fn in_pending_plan(&self, partition: &str, file_id: &str) -> bool {
        self.in_pending_plans.contains(&(partition.to_string(), file_id.to_string()))
    }

    /// Whether a pending clustering rewrites the file group: compaction
    /// leaves it alone until the clustering completes.
    pub fn in_pending_clustering(&self, partition: &str, file_id: &str) -> bool {
        !self.clustering.is_empty() && self.clustering.contains(&(partition.to_string(), file_id.to_string()))
    }

    /// The file groups completed replacecommits replaced that still have
    /// files in storage, which no reader of this view sees.
    pub fn replaced(&self) -> &BTreeMap<GroupId, ReplacedGroup> {
        &self.replaced
    }

    /// The change-data logs (`.cdc`) of completed instants, which no
    /// slice holds: the change log's files, for the cleaner.
    pub fn change_data(&self) -> &[(LogFileName, DataFile)] {
        &self.change_data
    }

    /// Names that looked like data files but did not parse.
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }
}

/// What the table services of `timeline` planned and replaced, for
/// [`FileSystemView::build`]: the file groups of each pending compaction
/// (from its requested plan) and of each pending clustering, and those each
/// completed `replacecommit` replaced (from its commit metadata). A table
/// no Java writer clustered or overwrote has no such instants, and costs no
/// read for them.
pub async fn planned_groups(loc: &TableLocation, config: &TableConfig, timeline: &Timeline) -> Result<PlannedGroups> {
    let mut planned = replaced_groups(loc, config, timeline).await?;
    let writer = crate::timeline::TimelineFolder::new(loc, config);
    for c in timeline.pending_compactions() {
        let path = writer.path_of(c, crate::instant::State::Requested)?;
        let bytes = loc.get(&path).await?;
        // An empty requested file plans no file group.
        let groups = if bytes.is_empty() {
            BTreeSet::new()
        } else {
            let plan = CompactionPlan::from_avro_container_shared(&bytes, path.as_ref())?;
            plan.operations.iter().map(|op| (op.partition_path.clone(), op.file_id.clone())).collect()
        };
        planned.compactions.insert(c.requested.clone(), groups);
    }
    Ok(planned)
}

/// Whether an instant replaces file groups: a `replacecommit` (insert
/// overwrite, delete partition, a layout-1 clustering) or a `clustering`.
pub fn replaces_groups(i: &crate::instant::Instant) -> bool {
    use crate::instant::Action;
    matches!(i.action, Action::ReplaceCommit | Action::Clustering)
}

/// The file groups the completed replacecommits among `timeline`'s active
/// instants replaced, and those its pending clusterings rewrite
/// ([`PlannedGroups::replaced`] and [`PlannedGroups::clustering`]; no
/// compaction). Reads nothing when no active instant replaces groups.
pub async fn replaced_groups(loc: &TableLocation, config: &TableConfig, timeline: &Timeline) -> Result<PlannedGroups> {
    use crate::instant::State;
    let mut planned = PlannedGroups::default();
    let writer = crate::timeline::TimelineFolder::new(loc, config);
    // The active timeline's, as Hudi's view takes them: Hudi archives a
    // replacecommit only after its cleaner removed the replaced files.
    for i in timeline.active().iter().filter(|i| replaces_groups(i)) {
        if i.is_completed() {
            let path = writer.path_of(i, State::Completed)?;
            let bytes = loc.get(&path).await?;
            let meta = CommitMetadata::from_bytes_shared(&bytes, path.as_ref())?;
            for (partition, ids) in &meta.partition_to_replace_file_ids {
                for id in ids {
                    planned.replaced.insert((partition.clone(), id.clone()), i.requested.clone());
                }
            }
        } else {
            let path = writer.path_of(i, State::Requested)?;
            let bytes = loc.get(&path).await?;
            planned.clustering.extend(clustering_file_groups(&bytes, path.as_ref())?);
        }
    }
    Ok(planned)
}

/// Lists the files of one partition (`""` for the table's own folder), with
/// one listing of its folder: no other partition's files, and nothing under
/// `.hoodie/`. A partition not yet made lists empty.
pub async fn list_partition_files(loc: &TableLocation, partition: &str) -> Result<Vec<DataFile>> {
    let dir = if partition.is_empty() { loc.root.clone() } else { loc.join(partition) };
    let listing = loc.store.list_with_delimiter(Some(&dir)).await.map_err(|e| Error::store("list", &dir, e))?;
    Ok(listing
        .objects
        .into_iter()
        .filter_map(|m| {
            let name = m.location.filename()?.to_string();
            Some(DataFile { partition: partition.to_string(), name, path: m.location, size: m.size })
        })
        .collect())
}

/// Lists every file in every partition (folder holding `.hoodie_partition_metadata`).
pub async fn list_data_files(loc: &TableLocation) -> Result<Vec<DataFile>> {
    let meta = crate::layout::meta_dir(&loc.root);
    let all: Vec<object_store::ObjectMeta> = loc
        .store
        .list(Some(&loc.root))
        .try_filter(|m| futures::future::ready(!m.location.prefix_matches(&meta)))
        .try_collect()
        .await
        .map_err(|e| Error::store("list", &loc.root, e))?;
    let mut files = Vec::with_capacity(all.len());
    let mut partitions = BTreeSet::new();
    for m in all {
        let mut partition = loc.relative(&m.location);
        let name = match partition.rfind('/') {
            Some(i) => {
                let name = partition[i + 1..].to_string();
                partition.truncate(i);
                name
            }
            None => std::mem::take(&mut partition),
        };
        if name == PARTITION_METADATA {
            partitions.insert(partition.clone());
        }
        files.push(DataFile { partition, name, path: m.location, size: m.size });
    }
    // By partition, each in listing order.
    files.retain(|f| partitions.contains(&f.partition));
    files.sort_by(|a, b| a.partition.cmp(&b.partition));
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each slice of `g`: its base instant and its logs' instants.
    fn slice_instants(g: &FileGroup) -> Vec<(String, Vec<String>)> {
        g.slices
            .values()
            .map(|s| (s.base_instant.to_string(), s.logs.iter().map(|l| l.name.instant.to_string()).collect()))
            .collect()
    }

    fn file(partition: &str, name: &str) -> DataFile {
        DataFile {
            partition: partition.into(),
            name: name.into(),
            path: Path::from(format!("{partition}/{name}")),
            size: 1,
        }
    }

    fn t(s: &str) -> InstantTime {
        InstantTime::parse(s).unwrap()
    }

    /// The RFC-66 example: logs [t21,t40], [t30,t50], [t35,t90] with base t10
    /// and a compaction at t60 give slices {t60: [l3]} and {t10: [l1, l2]}.
    #[test]
    fn rfc66_example() {
        let ts = |n: u32| format!("20250101000000{n:03}");
        let names: Vec<String> = vec![
            format!("{}.commit.requested", ts(10)),
            format!("{}_{}.commit", ts(10), ts(11)),
            format!("{}.deltacommit.requested", ts(21)),
            format!("{}_{}.deltacommit", ts(21), ts(40)),
            format!("{}.deltacommit.requested", ts(30)),
            format!("{}_{}.deltacommit", ts(30), ts(50)),
            format!("{}.deltacommit.requested", ts(35)),
            format!("{}_{}.deltacommit", ts(35), ts(90)),
            format!("{}.compaction.requested", ts(60)),
        ];
        let tl = Timeline::from_layout2_names(names.iter().map(String::as_str));
        let fid = "00000000-0000-0000-0000-000000000000-0";
        let files = vec![
            file("p", &format!("{fid}_0-1-1_{}.parquet", ts(10))),
            file("p", &format!(".{fid}_{}.log.1_0-1-1", ts(21))),
            file("p", &format!(".{fid}_{}.log.1_0-1-1", ts(30))),
            file("p", &format!(".{fid}_{}.log.1_0-1-1", ts(35))),
        ];
        let mut planned = PlannedGroups::default();
        planned.compactions.insert(t(&ts(60)), [("p".to_string(), fid.to_string())].into());
        let view = FileSystemView::build(&tl, files, &planned);
        let g = view.groups().next().unwrap();
        let slices = slice_instants(g);
        assert_eq!(slices, vec![(ts(10), vec![ts(21), ts(30)]), (ts(60), vec![ts(35)])]);
        // While the compaction is pending, readers merge both slices.
        let latest = &view.latest_slices()[0];
        assert_eq!(latest.base_instant, t(&ts(10)));
        assert_eq!(latest.logs.len(), 3);
    }

    /// A delta commit requested before a compaction and completed after it
    /// belongs to the compaction's slice; once Java archived it, its
    /// completion time comes from the history, and the log stays there
    /// (with the requested time standing in, it fell into the old slice,
    /// which readers drop once the compaction completed).
    /// Change-data logs (`.cdc`) are no part of a slice.
    #[test]
    fn change_data_logs_are_left_out() {
        let tl = Timeline::from_layout2_names([
            "20250101000000010.deltacommit.requested",
            "20250101000000010_20250101000000011.deltacommit",
        ]);
        let fid = "00000000-0000-0000-0000-000000000000-0";
        let data = format!(".{fid}_20250101000000010.log.1_0-1-1");
        let files = vec![file("p", &data), file("p", &format!("{data}.cdc"))];
        let view = FileSystemView::build(&tl, files, &PlannedGroups::default());
        assert_eq!(view.latest_slices().pop().unwrap().log_file_names(), [data.as_str()]);
        let kept: Vec<&str> = view.change_data().iter().map(|(_, f)| f.name.as_str()).collect();
        assert_eq!(kept, [format!("{data}.cdc")], "the cleaner's to delete");
    }

    /// A compaction's tombstone log comes first in its slice, before a log
    /// requested before the compaction that completed after it.
    #[test]
    fn the_tombstone_log_comes_first_in_its_slice() {
        let ts = |n: u32| format!("20250101000000{n:03}");
        let names: Vec<String> = vec![
            format!("{}.deltacommit.requested", ts(10)),
            format!("{}_{}.deltacommit", ts(10), ts(11)),
            format!("{}.deltacommit.requested", ts(20)),
            format!("{}.compaction.requested", ts(30)),
            format!("{}_{}.commit", ts(30), ts(31)),
            format!("{}_{}.deltacommit", ts(20), ts(40)),
        ];
        let tl = Timeline::from_layout2_names(names.iter().map(String::as_str));
        let fid = "00000000-0000-0000-0000-000000000000-0";
        let files = vec![
            file("p", &format!(".{fid}_{}.log.1_0-1-1", ts(10))),
            file("p", &format!(".{fid}_{}.log.1_0-1-1", ts(20))),
            file("p", &format!("{fid}_0-1-1_{}.parquet", ts(30))),
            file("p", &format!(".{fid}_{}.log.1_0-1-1", ts(30))),
        ];
        let view = FileSystemView::build(&tl, files, &PlannedGroups::default());
        let slice = view.latest_slices().pop().unwrap();
        assert_eq!(slice.base_instant, t(&ts(30)));
        let tombstones = format!(".{fid}_{}.log.1_0-1-1", ts(30));
        let late = format!(".{fid}_{}.log.1_0-1-1", ts(20));
        assert_eq!(slice.log_file_names(), [tombstones.as_str(), late.as_str()]);
    }

    #[test]
    fn archived_completion_times_place_logs() {
        let ts = |n: u32| format!("20250101000000{n:03}");
        let done = |r: u32, action, c: u32| crate::instant::Instant {
            requested: t(&ts(r)),
            action,
            state: crate::instant::State::Completed,
            completed: Some(t(&ts(c))),
        };
        use crate::instant::Action;
        let tl = Timeline::from_layout2_names([
            format!("{}.deltacommit.requested", ts(80)).as_str(),
            format!("{}_{}.deltacommit", ts(80), ts(85)).as_str(),
        ])
        .with_archived(
            [
                done(10, Action::DeltaCommit, 11),
                done(20, Action::DeltaCommit, 40),
                done(30, Action::Commit, 35),
                done(31, Action::DeltaCommit, 32),
            ],
            Vec::new(),
        );
        let fid = "00000000-0000-0000-0000-000000000000-0";
        let files = vec![
            file("p", &format!(".{fid}_{}.log.1_0-1-1", ts(10))),
            file("p", &format!(".{fid}_{}.log.1_0-1-1", ts(20))),
            file("p", &format!("{fid}_0-1-1_{}.parquet", ts(30))),
            file("p", &format!(".{fid}_{}.log.1_0-1-1", ts(31))),
            file("p", &format!(".{fid}_{}.log.1_0-1-1", ts(80))),
        ];
        let view = FileSystemView::build(&tl, files, &PlannedGroups::default());
        let g = view.groups().next().unwrap();
        let slices = slice_instants(g);
        assert_eq!(slices, vec![(ts(10), vec![ts(10)]), (ts(30), vec![ts(20), ts(31), ts(80)])]);
        let latest = &view.latest_slices()[0];
        assert_eq!(latest.logs.iter().map(|l| l.completed.to_string()).collect::<Vec<_>>(), [ts(40), ts(32), ts(85)]);
    }

    #[test]
    fn uncommitted_files_are_invisible_and_log_only_groups_work() {
        let tl = Timeline::from_layout2_names([
            "20250101000000001.deltacommit.requested",
            "20250101000000001_20250101000000005.deltacommit",
            "20250101000000002.deltacommit.requested",
            "20250101000000002.deltacommit.inflight",
        ]);
        let fid = "00000003-0000-0000-0000-000000000000-0";
        let files = vec![
            file("", &format!(".{fid}_20250101000000001.log.1_0-1-1")),
            file("", &format!(".{fid}_20250101000000002.log.1_0-1-1")),
            file("", ".hoodie_partition_metadata"),
        ];
        let view = FileSystemView::build(&tl, files, &PlannedGroups::default());
        let slices = view.latest_slices();
        assert_eq!(slices.len(), 1);
        assert_eq!(slices[0].base_instant, t("20250101000000001"));
        assert_eq!(slices[0].log_file_names(), vec![format!(".{fid}_20250101000000001.log.1_0-1-1")]);
    }
}
