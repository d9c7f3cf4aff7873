//! Incremental reads: the rows that the commits completed in a window
//! `(begin, end]` wrote, as Apache Hudi's Java reader (Spark, Hudi 1.2)
//! returns them (`docs/design.md`, "Merge semantics" has the evidence).
//!
//! 1. The window's commits are the instants that write data (delta commits
//!    and compactions alike) whose completion time is in `(begin, end]`.
//! 2. The files read are those the window's commits name in their commit
//!    metadata. A compaction's tombstone log is not named there, so it is
//!    not read. If one of those files is gone (cleaned), or one of the
//!    window's commits was archived by a Java writer (its metadata then
//!    lives in the LSM history), every file of the table is read instead, as
//!    Hudi falls back to a full scan in both cases.
//! 3. Each file group's latest slice among those files is merged, after the
//!    base file's rows not written by a window commit are dropped: only
//!    versions of the window compete (an update in the window that loses to
//!    an older commit's version still shows), except what a compaction in
//!    the window folded together, and the logs of a full scan.
//! 4. Of each slice's merged rows, those written by a window commit are
//!    returned.
//! 5. A file group replaced (insert overwrite, clustering) by a
//!    `replacecommit` of the window is not read; one replaced after the
//!    window still is, as the window's commits wrote it.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use tributary_format::CommitMetadata;
use tributary_timeline::DataFile;
use tributary_timeline::{FileSystemView, Instant, InstantTime, State, Timeline, TimelineFolder, replaces_groups};

use crate::error::Result;
use crate::table::Table;

/// Commit metadata files read at once.
const METADATA_READS: usize = 16;

/// The commits of an incremental window.
#[derive(Debug, Clone)]
pub(crate) struct Window {
    /// The instants that write data (delta commits and compactions) and
    /// completed in the window, in timeline order.
    instants: Vec<Instant>,
    /// Their requested times: what their rows carry as `_hoodie_commit_time`.
    commits: Arc<HashSet<String>>,
    /// Whether one of them is archived (Java moved it to the history).
    archived: bool,
}

impl Window {
    /// The commits of `timeline` that completed in `(begin, end]`.
    pub(crate) fn of(timeline: &Timeline, begin: &InstantTime, end: &InstantTime) -> Self {
        let instants: Vec<Instant> = timeline
            .completed()
            .filter(|i| i.action.writes_data())
            .filter(|i| timeline.completion_time(&i.requested).is_some_and(|c| c > begin && c <= end))
            .cloned()
            .collect();
        let commits = instants.iter().map(|i| i.requested.to_string()).collect();
        let archived = instants.iter().any(|i| timeline.is_archived(&i.requested));
        Window { instants, commits: Arc::new(commits), archived }
    }

    /// The window's commits, by requested time.
    pub(crate) fn commits(&self) -> &Arc<HashSet<String>> {
        &self.commits
    }

    /// The file-system view an incremental read merges at `timeline` (the
    /// one the window was taken from): the files the window's commits
    /// wrote, or all files when one of them is gone or archived.
    pub(crate) async fn view(&self, table: &Table, timeline: &Timeline) -> Result<FileSystemView> {
        let loc = table.location();
        if self.instants.is_empty() {
            return Ok(FileSystemView::default());
        }
        // Hudi's full scan when the window reaches into the archive
        // (`startInstantArchived`): no commit metadata is read.
        let written = if self.archived { None } else { Some(self.written_files(table).await?) };
        let select = |listed: Vec<DataFile>| match written {
            None => {
                tracing::debug!(table = %loc, "the incremental window holds archived commits: reading every file");
                listed
            }
            Some(written) => {
                let present: HashSet<String> = listed.iter().map(relative).collect();
                if written.iter().all(|f| present.contains(f)) {
                    listed.into_iter().filter(|f| written.contains(&relative(f))).collect()
                } else {
                    tracing::debug!(table = %loc, "a file of the incremental window is gone: reading every file");
                    listed
                }
            }
        };
        // Only the window's own replacecommits hide the groups they
        // replaced, as in Hudi's incremental relation, whose view is of the
        // window's commits: a group replaced later still had these rows.
        let outside = |i: &Instant| replaces_groups(i) && !self.commits.contains(i.requested.as_str());
        let timeline = match timeline.active().iter().any(outside) {
            true => &timeline.filtered(|i| !outside(i)),
            false => timeline,
        };
        Ok(FileSystemView::load_filtered(loc, table.config(), timeline, select).await?)
    }

    /// The files (paths relative to the table) that the window's commits
    /// name in their commit metadata, read a few commits at a time.
    async fn written_files(&self, table: &Table) -> Result<BTreeSet<String>> {
        let folder = &TimelineFolder::new(table.location(), table.config());
        // Collected first, as in `Table::read_at`: the iterator's closure
        // would keep the read's future from being `Send`.
        let reads: Vec<_> = self
            .instants
            .iter()
            .map(|i| async move {
                let bytes = folder.read(i, State::Completed).await?;
                Ok::<_, crate::error::Error>(CommitMetadata::from_bytes_shared(&bytes, i.requested.as_str())?)
            })
            .collect();
        let mut metas = futures::stream::iter(reads).buffer_unordered(METADATA_READS);
        let mut files = BTreeSet::new();
        while let Some(meta) = metas.next().await {
            let meta = meta?;
            let paths = meta.write_stats().map(|s| s.path.trim_start_matches('/')).filter(|p| !p.is_empty());
            files.extend(paths.map(String::from));
        }
        Ok(files)
    }
}

/// A data file's path relative to the table, as commit metadata names it.
fn relative(f: &DataFile) -> String {
    tributary_timeline::partition_file(&f.partition, &f.name)
}
