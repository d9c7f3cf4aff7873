//! Backpressure: the table's bound on committed, uncompacted log files per
//! file group (`tributary.max.logs.per.file.group`), which a commit waits
//! at for compaction instead of passing it (`docs/design.md`,
//! "Backpressure").
//!
//! A [`LogTally`] counts, per file group, the log files of completed delta
//! commits that no completed compaction has merged yet: the logs a reader
//! of the latest slice merges. It counts a partition from one listing of it
//! when a commit of the client first writes there, then keeps the count
//! from the commit metadata of the active timeline, each completed instant
//! read once per client: a refresh costs one listing of the active timeline
//! and one read per instant completed since the last. When archiving may
//! have moved a commit the client never took in (a commit the last refresh
//! saw pending is gone, or every commit it listed is), it counts from
//! listings again, since archiving may move a commit whose logs are still
//! uncompacted.
//!
//! A commit checks its file groups under the table lock, right before it
//! becomes visible, so that every commit completed before it is counted and
//! the bound holds however many writers commit at once. When other writers
//! are committing (the last look under the lock read their commits), or a
//! partition is new to the client, it also looks before taking the lock,
//! so that the look under it finds little to read; and a commit that found
//! a group full waits outside the lock, looking again until compaction has
//! made room. Writers never abort each other: a commit that finds its
//! group at the bound under the lock leaves the lock and waits again; one
//! that waited its timeout fails with [`Error::Backpressure`] naming the
//! file group, and is withdrawn.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

use tributary_format::CommitMetadata;
use tributary_timeline::{
    Action, Error, FileSystemView, Instant, InstantTime, LogFileName, Result, State, TableConfig, TableLocation,
    Timeline, TimelineFolder, list_partition_files, planned_groups, replaces_groups,
};

use crate::file_write::FileWrite;

/// A file group: partition path and file id.
pub(crate) type Group = (String, String);

/// Committed, uncompacted log files per file group, of the partitions a
/// client writes.
#[derive(Debug)]
pub(crate) struct LogTally {
    bound: usize,
    /// Completed delta commits and compactions already taken in, by
    /// requested time; those no longer active are forgotten.
    counted: HashSet<InstantTime>,
    /// The partitions counted: each listed once when a commit first writes
    /// it, and kept from the timeline after that.
    known: HashSet<String>,
    /// The commits (any state) the last refresh listed on the active
    /// timeline.
    listed: HashSet<InstantTime>,
    /// Those of them that were pending then.
    listed_pending: HashSet<InstantTime>,
    /// Whether the last refresh listed an instant that replaces file
    /// groups (a Java writer's replacecommit or clustering).
    replacing: bool,
    /// The timeline the last refresh listed, for the rest of its lock
    /// hold to look at without listing again.
    listing: Option<tributary_timeline::Timeline>,
    /// The completion times of each group's uncompacted logs.
    logs: HashMap<Group, Vec<InstantTime>>,
    /// The latest completed compaction of each group: a log that completed
    /// before it was merged by it (or an earlier one).
    compacted: HashMap<Group, InstantTime>,
    /// The commit metadata the last look under the table lock had to read:
    /// other writers are committing, so the next commit looks ahead.
    read_under_lock: usize,
}

impl LogTally {
    /// An empty tally for the bound `bound`.
    pub(crate) fn new(bound: usize) -> Self {
        Self {
            bound,
            counted: HashSet::new(),
            known: HashSet::new(),
            listed: HashSet::new(),
            listed_pending: HashSet::new(),
            replacing: false,
            listing: None,
            logs: HashMap::new(),
            compacted: HashMap::new(),
            read_under_lock: 0,
        }
    }

    /// Whether a commit writing `partitions` should look before it takes
    /// the table lock, so that the look under the lock finds little to
    /// read: when a partition is not counted yet (its listing), or when the
    /// last look under the lock read other writers' commits. A lone writer
    /// far from the bound looks only under the lock.
    pub(crate) fn look_ahead(&self, partitions: &[&str]) -> bool {
        self.read_under_lock > 0 || partitions.iter().any(|p| !self.known.contains(*p))
    }

    /// Records what a look under the table lock read.
    pub(crate) fn looked_under_lock(&mut self, reads: usize) {
        self.read_under_lock = reads;
    }

    /// The bound.
    pub(crate) fn bound(&self) -> usize {
        self.bound
    }

    /// Whether the last refresh listed an instant that replaces file
    /// groups: only then must a commit look for replaced groups.
    pub(crate) fn replacing(&self) -> bool {
        self.replacing
    }

    /// Takes in the delta commits and compactions completed on the active
    /// timeline since the last refresh, and counts the `partitions` not
    /// counted yet from a listing of each. Before any partition is counted
    /// no commit metadata is read, so a new client costs the same however
    /// long the timeline: one listing of it, one of each partition it
    /// writes, the history's snapshot, and a read of each pending
    /// compaction plan. Returns how many commit metadata files it read.
    ///
    /// Archiving may move a delta commit whose logs a latest slice still
    /// reads (one after the slice's base file), and may do so between two
    /// refreshes, before this client saw it complete. It moves completed
    /// commits oldest first and stops at a pending one, so such a commit
    /// was either pending at the last refresh or requested after it, and
    /// then every commit the last refresh listed went before it. So when a
    /// commit the last refresh saw pending has left the active timeline
    /// without being taken in (archived, or rolled back), or every commit
    /// it listed has, the count starts over from listings, at the timeline
    /// with its history.
    pub(crate) async fn refresh(
        &mut self,
        loc: &TableLocation,
        config: &TableConfig,
        folder: &TimelineFolder,
        partitions: &[&str],
    ) -> Result<usize> {
        let mut timeline = folder.load_active().await?;
        self.replacing = timeline.active().iter().any(replaces_groups);
        let commits = || timeline.instants().filter(|i| is_commit(i.action));
        let listed: HashSet<InstantTime> = commits().map(|i| i.requested.clone()).collect();
        let pending: HashSet<InstantTime> =
            commits().filter(|i| !i.is_completed()).map(|i| i.requested.clone()).collect();
        let missed = self.listed_pending.iter().any(|t| !listed.contains(t) && !self.counted.contains(t));
        if missed || self.listed.iter().all(|t| !listed.contains(t)) {
            self.forget();
        }
        self.listed = listed;
        self.listed_pending = pending;
        let missing: Vec<&str> = partitions.iter().copied().filter(|p| !self.known.contains(*p)).collect();
        if !missing.is_empty() {
            // Listed again with the history, which the view needs for the
            // completion times of archived commits' logs.
            timeline = folder.load().await?;
        }
        let mut new: Vec<&Instant> = timeline
            .active()
            .iter()
            .filter(|i| i.is_completed() && is_commit(i.action) && !self.counted.contains(&i.requested))
            .collect();
        new.sort_by(|a, b| a.completed.cmp(&b.completed));
        let mut reads = 0;
        if !new.is_empty() && !self.known.is_empty() {
            reads = new.len();
            let contents = folder.read_completed(&timeline, &new).await?;
            for (i, bytes) in new.iter().zip(contents) {
                let path = folder.path_of(i, State::Completed)?;
                let meta = CommitMetadata::from_avro_container_shared(&bytes, path.as_ref())?;
                let completed = i.completed.clone().unwrap_or_else(|| i.requested.clone());
                self.take_in(i.action, &i.requested, &completed, &meta);
            }
        }
        self.counted.extend(new.iter().map(|i| i.requested.clone()));
        self.counted.retain(|t| timeline.get(t).is_some_and(|i| !timeline.is_archived(&i.requested)));
        if !missing.is_empty() {
            self.count_listed(loc, config, &timeline, &missing).await?;
        }
        self.listing = Some(timeline);
        Ok(reads)
    }

    /// The timeline the last refresh listed, taken out.
    pub(crate) fn take_listing(&mut self) -> Option<tributary_timeline::Timeline> {
        self.listing.take()
    }

    /// Forgets every count: each partition is counted again from a listing
    /// when a commit next writes it.
    fn forget(&mut self) {
        self.known.clear();
        self.counted.clear();
        self.logs.clear();
        self.compacted.clear();
    }

    /// Counts the groups of `partitions` from a listing of each, at
    /// `timeline` (whose completed instants are all counted already).
    async fn count_listed(
        &mut self,
        loc: &TableLocation,
        config: &TableConfig,
        timeline: &Timeline,
        partitions: &[&str],
    ) -> Result<()> {
        let mut files = Vec::new();
        for p in partitions {
            files.extend(list_partition_files(loc, p).await?);
        }
        let planned = planned_groups(loc, config, timeline).await?;
        let view = FileSystemView::build(timeline, files, &planned);
        let pending: BTreeSet<InstantTime> = timeline.pending_compactions().map(|i| i.requested.clone()).collect();
        for group in view.groups() {
            let Some(slice) = group.latest_merged(&pending) else { continue };
            let key = (group.partition.clone(), group.file_id.clone());
            let logs: Vec<InstantTime> =
                slice.logs.iter().filter(|l| !slice.is_tombstone_log(l)).map(|l| l.completed.clone()).collect();
            if slice.base.is_some() {
                self.compacted.insert(key.clone(), slice.base_instant.clone());
            }
            if !logs.is_empty() {
                self.logs.insert(key, logs);
            }
        }
        self.known.extend(partitions.iter().map(|p| p.to_string()));
        Ok(())
    }

    /// Takes in one completed instant's metadata.
    fn take_in(&mut self, action: Action, requested: &InstantTime, completed: &InstantTime, meta: &CommitMetadata) {
        for (partition, stats) in &meta.partition_to_write_stats {
            // A partition not counted yet is counted from its listing when
            // a commit first writes it.
            if !self.known.contains(partition) {
                continue;
            }
            for stat in stats {
                let group = (partition.clone(), stat.file_id.clone());
                match action {
                    Action::DeltaCommit => {
                        let name = stat.path.rsplit('/').next().unwrap_or(&stat.path);
                        let merged = self.compacted.get(&group).is_some_and(|c| completed < c);
                        // A change-log commit's change data is no log
                        // readers merge.
                        let log = LogFileName::parse(name).is_ok_and(|n| n.suffix.is_empty());
                        if !merged && log {
                            self.logs.entry(group).or_default().push(completed.clone());
                        }
                    }
                    _ => {
                        // A compaction at `requested` merged every log of
                        // the group that completed before it.
                        if let Some(logs) = self.logs.get_mut(&group) {
                            logs.retain(|t| t >= requested);
                            if logs.is_empty() {
                                self.logs.remove(&group);
                            }
                        }
                        let c = self.compacted.entry(group).or_insert_with(|| requested.clone());
                        if *c < *requested {
                            *c = requested.clone();
                        }
                    }
                }
            }
        }
    }

    /// Takes in this client's own commit, completed at `completed` with
    /// the logs `ours`, so that no refresh reads it again.
    pub(crate) fn committed(&mut self, requested: &InstantTime, completed: &InstantTime, ours: &HashMap<Group, usize>) {
        if !self.counted.insert(requested.clone()) {
            return; // a refresh took it in already
        }
        for (g, n) in ours.iter().filter(|(g, _)| self.known.contains(&g.0)) {
            let logs = self.logs.entry(g.clone()).or_default();
            logs.extend(std::iter::repeat_n(completed.clone(), *n));
        }
    }

    /// The uncompacted logs of `group`.
    pub(crate) fn logs(&self, group: &Group) -> usize {
        self.logs.get(group).map_or(0, Vec::len)
    }

    /// The first of `ours` (a commit's logs per group) that would pass the
    /// bound, with the logs it holds. A group holding no logs takes a
    /// commit of any size, so one large commit never waits forever.
    pub(crate) fn over<'a>(&self, ours: &'a HashMap<Group, usize>) -> Option<(&'a Group, usize)> {
        ours.iter()
            .map(|(g, n)| (g, self.logs(g), n))
            .filter(|(_, have, n)| *have > 0 && have + *n > self.bound)
            .map(|(g, have, _)| (g, have))
            .min_by(|a, b| a.0.cmp(b.0))
    }

    /// The most logs any group holds, and the 99th percentile over the
    /// groups holding any (0 and 0 when none does).
    pub(crate) fn spread(&self) -> (usize, usize) {
        let mut counts: Vec<usize> = self.logs.values().map(Vec::len).collect();
        counts.sort_unstable();
        let max = counts.last().copied().unwrap_or(0);
        let p99 = match counts.len() {
            0 => 0,
            n => counts[((n * 99).div_ceil(100)).saturating_sub(1)],
        };
        (max, p99)
    }
}

/// Whether instants of `action` write data files: delta commits, and
/// compactions (completed as commits).
fn is_commit(action: Action) -> bool {
    matches!(action, Action::DeltaCommit | Action::Commit | Action::Compaction)
}

/// A commit's log files per file group.
pub(crate) fn logs_per_group(files: &[FileWrite]) -> HashMap<Group, usize> {
    let mut ours: HashMap<Group, usize> = HashMap::new();
    for f in files {
        *ours.entry((f.partition.clone(), f.file_id.clone())).or_default() += 1;
    }
    ours
}

/// How long a waiting commit sleeps between looks at the timeline: from
/// 50 ms, doubling to 1 s.
pub(crate) fn next_poll(previous: Option<Duration>) -> Duration {
    previous.map_or(Duration::from_millis(50), |d| (d * 2).min(Duration::from_secs(1)))
}

/// The error of a commit that found `group` holding `logs` at the bound.
pub(crate) fn at_bound(
    table: &str,
    instant: &InstantTime,
    group: &Group,
    logs: usize,
    bound: usize,
    waited: Duration,
) -> Error {
    Error::Backpressure {
        table: table.to_string(),
        instant: instant.to_string(),
        file_group: format!("{}/{}", group.0, group.1),
        logs,
        bound,
        waited_ms: waited.as_millis() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tributary_format::WriteStat;

    fn meta(files: &[(&str, &str, &str)]) -> CommitMetadata {
        let mut m = CommitMetadata::default();
        for (partition, file_id, path) in files {
            m.partition_to_write_stats.entry(partition.to_string()).or_default().push(WriteStat {
                file_id: file_id.to_string(),
                path: path.to_string(),
                partition_path: partition.to_string(),
                ..WriteStat::default()
            });
        }
        m
    }

    fn t(s: &str) -> InstantTime {
        InstantTime::parse(s).expect("instant")
    }

    fn log(file_id: &str, instant: &str) -> String {
        format!("p/.{file_id}_{instant}.log.1_0-0-0")
    }

    /// Logs count until a compaction that started after they completed;
    /// one that completed after the compaction started stays counted, and
    /// a delta commit read after the compaction that merged it is not.
    #[test]
    fn counts_logs_a_compaction_has_not_merged() {
        let mut tally = LogTally::new(3);
        tally.known.insert("p".into());
        let g: Group = ("p".into(), "00000000-0000-0000-0000-000000000000-0".into());
        let id = g.1.as_str();
        for (req, done) in [("20250101000000001", "20250101000000002"), ("20250101000000003", "20250101000000006")] {
            tally.take_in(Action::DeltaCommit, &t(req), &t(done), &meta(&[("p", id, &log(id, req))]));
        }
        assert_eq!(tally.logs(&g), 2);
        // Compaction at ...005: merges the log completed at ...002, not the one at ...006.
        tally.take_in(
            Action::Commit,
            &t("20250101000000005"),
            &t("20250101000000007"),
            &meta(&[("p", id, "p/base.parquet")]),
        );
        assert_eq!(tally.logs(&g), 1);
        // A delta commit completed at ...004, read late: merged already.
        tally.take_in(
            Action::DeltaCommit,
            &t("20250101000000004"),
            &t("20250101000000004"),
            &meta(&[("p", id, &log(id, "20250101000000004"))]),
        );
        assert_eq!(tally.logs(&g), 1);
        let ours = HashMap::from([(g.clone(), 2)]);
        assert_eq!(tally.over(&ours), None, "1 + 2 is the bound");
        let ours = HashMap::from([(g.clone(), 3)]);
        assert_eq!(tally.over(&ours), Some((&g, 1)));
        // A group holding nothing takes any commit.
        let empty: Group = ("p".into(), "other".into());
        assert_eq!(tally.over(&HashMap::from([(empty, 10)])), None);
        assert_eq!(tally.spread(), (1, 1));
    }

    #[test]
    fn spread_is_max_and_p99() {
        let mut tally = LogTally::new(1000);
        for n in 1..=200usize {
            let g: Group = ("p".into(), format!("g{n}"));
            tally.logs.insert(g, vec![t("20250101000000001"); n]);
        }
        assert_eq!(tally.spread(), (200, 198));
    }
}
