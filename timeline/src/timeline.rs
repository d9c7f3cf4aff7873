//! Loading and writing the timeline.
//!
//! Layout 2 (table version 8) keeps `.hoodie/timeline/` with one immutable
//! file per state transition; an instant's state is its highest file. Layout
//! 1 (version 6) keeps `<t>.<action>[.state]` files in `.hoodie/`, without
//! completion times. Stray files are skipped with a warning, never a panic.
//!
//! A layout-2 timeline also holds the instants Java writers archived into
//! the LSM history (`.hoodie/timeline/history/`, [`crate::history`]): they
//! are completed instants like any other, with their completion times, and
//! [`Timeline::is_archived`] tells them apart. The active folder is listed
//! first and the history read after it: Java adds instants to the history
//! before it deletes their active files, so an instant archived meanwhile
//! is found in one place or both (the active one wins), never in neither.
//! The loaded timeline keeps the history snapshot it read
//! ([`Timeline::history`]), so reading an archived instant's content
//! ([`TimelineFolder::read_completed`]) reads neither the active timeline
//! nor the history's manifest again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path;

use crate::StorageError;
use crate::config::TableConfig;
use crate::error::{Error, Result};
use crate::history::{self, History};
use crate::instant::{Action, Instant, InstantTime, Latest, State, TimelineFile, position};
use tributary_storage::FOLDER_PLACEHOLDER;
use tributary_storage::TableLocation;

/// The instants of a table, sorted by requested time: those of the active
/// timeline, and those read from the LSM history.
///
/// The archived instants are shared, never copied: every timeline loaded
/// from one history snapshot holds the same list, the one the snapshot's
/// loaded [`History`] keeps, so loading, cloning and querying a
/// timeline cost what its active part costs, however long the history
/// grew. [`Timeline::instants`] merges the two lists as it walks them.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// The active timeline's instants, by requested time.
    active: Vec<Instant>,
    /// The completed instants read from the LSM history, by requested
    /// time; one also on the active timeline is passed over (the active
    /// entry wins).
    archived: Archived,
    /// The history snapshot the archived instants were read from.
    history: Option<Arc<History>>,
    /// The requested time of the first instant on the active timeline
    /// that writes data, which [`Timeline::is_completed`] compares with;
    /// computed once (adding archived instants does not change it).
    first_active_write: Option<InstantTime>,
    /// Whether every archived instant is among the instants: a layout-2
    /// timeline whose history (if any) was read without skipping a row.
    /// Layout 1 keeps its archive elsewhere, unread.
    archive_known: bool,
    warnings: Vec<String>,
    layout: u32,
}

/// Archived instants, by requested time, shared between timelines, with
/// the ones that became visible last.
#[derive(Debug, Clone, Default)]
struct Archived {
    instants: Arc<[Instant]>,
    latest: Latest,
}

impl Archived {
    /// From instants sorted by requested time, each completed, no two
    /// requested at one time.
    fn of(instants: Arc<[Instant]>) -> Self {
        Self { latest: Latest::of(&instants), instants }
    }

    fn get(&self, t: &InstantTime) -> Option<&Instant> {
        position(&self.instants, t).map(|n| &self.instants[n])
    }
}

/// The instants of a [`Timeline`], active and archived, by requested time
/// ([`Timeline::instants`]): one walk of both lists, from either end.
#[derive(Debug, Clone)]
pub struct Instants<'a> {
    active: &'a [Instant],
    archived: &'a [Instant],
}

impl<'a> Iterator for Instants<'a> {
    type Item = &'a Instant;

    fn next(&mut self) -> Option<&'a Instant> {
        use std::cmp::Ordering;
        let order = match (self.active.first(), self.archived.first()) {
            (Some(a), Some(h)) => a.requested.cmp(&h.requested),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => return None,
        };
        if order != Ordering::Less {
            let (h, rest) = self.archived.split_first()?;
            self.archived = rest;
            if order == Ordering::Greater {
                return Some(h);
            }
        }
        let (a, rest) = self.active.split_first()?;
        self.active = rest;
        Some(a)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let (a, h) = (self.active.len(), self.archived.len());
        (a.max(h), Some(a + h))
    }
}

impl DoubleEndedIterator for Instants<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        use std::cmp::Ordering;
        let order = match (self.active.last(), self.archived.last()) {
            (Some(a), Some(h)) => a.requested.cmp(&h.requested),
            (Some(_), None) => Ordering::Greater,
            (None, Some(_)) => Ordering::Less,
            (None, None) => return None,
        };
        if order != Ordering::Greater {
            let (h, rest) = self.archived.split_last()?;
            self.archived = rest;
            if order == Ordering::Less {
                return Some(h);
            }
        }
        let (a, rest) = self.active.split_last()?;
        self.active = rest;
        Some(a)
    }
}

impl Timeline {
    /// Lists the table's timeline folder and parses it, with the instants
    /// archived into its history.
    pub async fn load(loc: &TableLocation, config: &TableConfig) -> Result<Self> {
        TimelineFolder::new(loc, config).load().await
    }

    async fn load_dir(loc: &TableLocation, dir: &Path, layout: u32, history: Option<&Path>) -> Result<Self> {
        let listing = loc.store.list_with_delimiter(Some(dir)).await.map_err(|e| Error::store("list", dir, e))?;
        let names: Vec<String> =
            listing.objects.iter().filter_map(|m| m.location.filename().map(String::from)).collect();
        // An instant of an action this build does not know may change what
        // readers see (a new kind of commit): refuse rather than skip it.
        if let Some((name, action)) = names.iter().find_map(|n| unknown_action(n, layout).map(|a| (n, a))) {
            let known: Vec<&str> = Action::ALL.iter().map(|a| a.name()).collect();
            return Err(Error::Corrupt {
                path: dir.clone().join(name.as_str()).to_string(),
                reason: format!(
                    "unknown timeline action `{action}` (written by a newer Hudi?); this build reads {}",
                    known.join(", ")
                ),
            });
        }
        let active = if layout >= 2 {
            Self::from_layout2_names(names.iter().map(String::as_str))
        } else {
            Self::from_layout1_names(names.iter().map(String::as_str))
        };
        // The history is read only when the listing shows its folder (or
        // the first folder of its path): a table no Java writer archived
        // costs no request more.
        match history.filter(|h| listing.common_prefixes.iter().any(|p| h.prefix_matches(p))) {
            Some(h) => {
                let history = History::load(loc, h).await?;
                for w in history.warnings() {
                    tracing::warn!("{w}");
                }
                Ok(active.with_history(history))
            }
            None => Ok(active),
        }
    }

    /// This active timeline (just listed) with the instants of a loaded
    /// history snapshot, which the timeline keeps for reading their
    /// contents; the list of them is the snapshot's own, shared.
    fn with_history(mut self, history: History) -> Self {
        self.archive_known &= history.warnings().is_empty();
        self.warnings.extend(history.warnings().iter().cloned());
        let (instants, latest) = history.shared_instants();
        self.archived = Archived { instants, latest };
        self.history = Some(Arc::new(history));
        self
    }

    /// This timeline with the instants archived into the history added
    /// (completed, with their completion times); an instant also on the
    /// active timeline keeps its active entry. `warnings` name the history
    /// rows that were skipped. An instant that is not completed is no
    /// archived instant: it is skipped with a warning.
    pub fn with_archived(mut self, archived: impl IntoIterator<Item = Instant>, mut warnings: Vec<String>) -> Self {
        let by_time = |a: &Instant, b: &Instant| a.requested.cmp(&b.requested);
        let mut all: Vec<Instant> = self.archived.instants.iter().cloned().collect();
        for i in archived {
            if i.is_completed() {
                all.push(i);
            } else {
                warnings.push(format!("skipping archived instant {}: not completed", i.requested));
            }
        }
        // Stable: of two entries for one time, the one added first stays.
        all.sort_by(by_time);
        all.dedup_by(|a, b| a.requested == b.requested);
        self.archived = Archived::of(all.into());
        self.archive_known &= warnings.is_empty();
        self.warnings.extend(warnings);
        self
    }

    /// Builds a layout-2 timeline from the file names of its folder. The
    /// placeholder that creates the folder on a local table
    /// ([`FOLDER_PLACEHOLDER`]) is skipped without a warning.
    pub fn from_layout2_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut warnings = Vec::new();
        let mut by_time: BTreeMap<InstantTime, Vec<TimelineFile>> = BTreeMap::new();
        for name in names.into_iter().filter(|n| *n != FOLDER_PLACEHOLDER) {
            match TimelineFile::parse(name) {
                Ok(f) => by_time.entry(f.requested.clone()).or_default().push(f),
                Err(e) => warnings.push(format!("skipping timeline file: {e}")),
            }
        }
        let instants = by_time
            .into_iter()
            .filter_map(|(t, files)| match assemble(&t, &files) {
                Ok(i) => Some(i),
                Err(w) => {
                    warnings.push(w);
                    None
                }
            })
            .collect();
        Self::finish(instants, warnings, 2)
    }

    /// Builds a layout-1 (table version 6) timeline from the file names in `.hoodie/`.
    pub fn from_layout1_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut warnings = Vec::new();
        let mut instants: BTreeMap<InstantTime, Instant> = BTreeMap::new();
        for name in names {
            if !name.starts_with(|c: char| c.is_ascii_digit()) {
                continue;
            }
            let Some((t, rest)) = name.split_once('.') else {
                warnings.push(format!("skipping timeline file `{name}`: no action"));
                continue;
            };
            let Ok(t) = InstantTime::parse(t) else {
                warnings.push(format!("skipping timeline file `{name}`: bad instant time"));
                continue;
            };
            let (action, state) = match rest.rsplit_once('.') {
                Some((a, "requested")) => (a, State::Requested),
                Some((a, "inflight")) => (a, State::Inflight),
                None if rest == "inflight" => ("commit", State::Inflight),
                None => (rest, State::Completed),
                Some(_) => {
                    warnings.push(format!("skipping timeline file `{name}`: unknown state"));
                    continue;
                }
            };
            let Some(action) = Action::from_name(action) else {
                warnings.push(format!("skipping timeline file `{name}`: unknown action `{action}`"));
                continue;
            };
            let e = instants.entry(t.clone()).or_insert_with(|| Instant::requested(t, action));
            if state >= e.state {
                e.state = state;
                if action != Action::Commit || e.action != Action::Compaction {
                    e.action = action;
                }
            }
        }
        Self::finish(instants.into_values().collect(), warnings, 1)
    }

    fn finish(instants: Vec<Instant>, warnings: Vec<String>, layout: u32) -> Self {
        for w in &warnings {
            tracing::warn!("{w}");
        }
        let first_active_write = first_write(&instants);
        Self {
            active: instants,
            archived: Archived::default(),
            history: None,
            first_active_write,
            archive_known: layout >= 2,
            warnings,
            layout,
        }
    }

    /// The timeline restricted to the instants `keep` accepts; the others
    /// are treated as if they never happened (their files are invisible).
    /// The archived instants stay shared when `keep` accepts them all.
    pub fn filtered(&self, keep: impl Fn(&Instant) -> bool) -> Timeline {
        let active: Vec<Instant> = self.active.iter().filter(|i| keep(i)).cloned().collect();
        let archived = if self.archived.instants.iter().all(&keep) {
            self.archived.clone()
        } else {
            Archived::of(self.archived.instants.iter().filter(|i| keep(i)).cloned().collect())
        };
        Timeline {
            first_active_write: first_write(&active),
            active,
            archived,
            history: self.history.clone(),
            archive_known: self.archive_known,
            warnings: self.warnings.clone(),
            layout: self.layout,
        }
    }

    /// The timeline as it stood at completion time `t`: the instants that
    /// had completed by then (completion time at or before `t`; a layout-1
    /// instant's requested time stands in). Instants still pending at `t`
    /// are left out, so their files are invisible and a compaction that
    /// completed later has not yet opened its slice. The change feed reads
    /// the table at each commit's completion this way; time travel
    /// ([`Timeline::filtered`] by requested time) is Hudi's other rule.
    pub fn completed_by(&self, t: &InstantTime) -> Timeline {
        self.filtered(|i| i.is_completed() && i.visible_at() <= t)
    }

    /// Every instant, active and archived, by requested time.
    pub fn instants(&self) -> Instants<'_> {
        Instants { active: &self.active, archived: &self.archived.instants }
    }

    /// The instants of the active timeline, by requested time: every
    /// instant that is not archived.
    pub fn active(&self) -> &[Instant] {
        &self.active
    }

    /// How many instants the timeline holds, active and archived.
    pub fn len(&self) -> usize {
        let both = self.active.iter().filter(|i| self.archived.get(&i.requested).is_some()).count();
        self.active.len() + self.archived.instants.len() - both
    }

    /// Whether the timeline holds no instant.
    pub fn is_empty(&self) -> bool {
        self.active.is_empty() && self.archived.instants.is_empty()
    }

    /// Files that were skipped, with the reason.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The instant requested at `t`.
    pub fn get(&self, t: &InstantTime) -> Option<&Instant> {
        match position(&self.active, t) {
            Some(n) => Some(&self.active[n]),
            None => self.archived.get(t),
        }
    }

    /// Completed instants, by requested time.
    pub fn completed(&self) -> impl DoubleEndedIterator<Item = &Instant> {
        self.instants().filter(|i| i.is_completed())
    }

    /// Requested or inflight instants, by requested time: all on the
    /// active timeline.
    pub fn pending(&self) -> impl DoubleEndedIterator<Item = &Instant> {
        self.active.iter().filter(|i| !i.is_completed())
    }

    /// The completed instant that became visible last (largest completion
    /// time; for layout 1, largest requested time).
    pub fn latest_completed(&self) -> Option<&Instant> {
        self.latest_where(self.archived.latest.any, |_| true)
    }

    /// The completed instant that writes data (a commit, delta commit,
    /// compaction or replace) and became visible last: the one whose
    /// metadata holds the table's latest schema.
    pub fn latest_completed_write(&self) -> Option<&Instant> {
        self.latest_where(self.archived.latest.write, |i| i.action.writes_data())
    }

    /// The completed instant `keep` accepts that became visible last,
    /// where `archived` is that of the archived instants: one walk of the
    /// active ones.
    fn latest_where(&self, archived: Option<usize>, keep: impl Fn(&Instant) -> bool) -> Option<&Instant> {
        let later = |a: &&Instant, b: &&Instant| a.cmp_visibility(b);
        let active = self.active.iter().filter(|i| i.is_completed() && keep(i)).max_by(later);
        let on_active = |i: &Instant| position(&self.active, &i.requested).is_some();
        let archived = match archived.map(|n| &self.archived.instants[n]) {
            // The active entry of an instant in both places wins, so the
            // latest archived one is then looked for among the others.
            Some(h) if on_active(h) => self.archived.instants.iter().filter(|i| !on_active(i) && keep(i)).max_by(later),
            latest => latest,
        };
        active.into_iter().chain(archived).max_by(later)
    }

    /// The completion time of the instant requested at `t`, if it completed.
    /// Layout-1 instants have none; their requested time stands in.
    pub fn completion_time(&self, t: &InstantTime) -> Option<&InstantTime> {
        let i = self.get(t).filter(|i| i.is_completed())?;
        Some(i.visible_at())
    }

    /// Whether the instant requested at `t` was read from the LSM history
    /// (Java archived it), not from the active timeline.
    pub fn is_archived(&self, t: &InstantTime) -> bool {
        position(&self.active, t).is_none() && self.archived.get(t).is_some()
    }

    /// The history snapshot the archived instants were read from, when the
    /// timeline was loaded from a table Java archived.
    pub fn history(&self) -> Option<&History> {
        self.history.as_deref()
    }

    /// Whether files written by instant `t` are committed: it completed,
    /// on the active timeline or in the history.
    ///
    /// An instant found in neither is not committed when the timeline knows
    /// every archived instant (layout 2, its history read whole): it was
    /// withdrawn, and its files are orphans, such as those a writer that
    /// stalled past its heartbeat expiry writes after recovery rolled it
    /// back. Otherwise (layout 1, whose archive is not read, or a history
    /// row skipped), Hudi's rule (`CompletionTimeQueryView.isCompleted`)
    /// applies: an instant older than the first instant of the *active*
    /// write timeline is taken as archived, hence completed. Hudi's readers
    /// apply that rule to every table, which is why orphans are also
    /// deleted (the writer's own discard, and the cleaner's sweep).
    pub fn is_completed(&self, t: &InstantTime) -> bool {
        match self.get(t) {
            Some(i) => i.is_completed(),
            None => !self.archive_known && self.first_active_write.as_ref().is_some_and(|first| t < first),
        }
    }

    /// Whether every instant Java archived is on this timeline, so that an
    /// instant missing from it never completed ([`Timeline::is_completed`]).
    pub fn knows_archive(&self) -> bool {
        self.archive_known
    }

    /// Compactions that are requested or inflight.
    pub fn pending_compactions(&self) -> impl Iterator<Item = &Instant> {
        self.pending().filter(|i| i.action == Action::Compaction)
    }

    /// The timeline layout (1 or 2) this was read from.
    pub fn layout(&self) -> u32 {
        self.layout
    }
}

/// The requested time of the first instant of `active` (by requested
/// time) that writes data.
fn first_write(active: &[Instant]) -> Option<InstantTime> {
    active.iter().find(|i| i.action.writes_data()).map(|i| i.requested.clone())
}

fn assemble(t: &InstantTime, files: &[TimelineFile]) -> std::result::Result<Instant, String> {
    let pending: BTreeSet<&str> =
        files.iter().filter(|f| f.state != State::Completed).map(|f| f.action_name.as_str()).collect();
    let completed: Vec<&TimelineFile> = files.iter().filter(|f| f.state == State::Completed).collect();
    let action = match pending.iter().next() {
        Some(name) if pending.len() == 1 => {
            Action::from_name(name).ok_or_else(|| format!("skipping instant {t}: unknown action `{name}`"))?
        }
        Some(_) => {
            // `<t>.inflight` names a commit; a compaction also has `<t>.compaction.*`.
            let named: Vec<&&str> = pending.iter().filter(|n| **n != "commit").collect();
            match named.as_slice() {
                [one] => {
                    Action::from_name(one).ok_or_else(|| format!("skipping instant {t}: unknown action `{one}`"))?
                }
                _ => {
                    return Err(format!("skipping instant {t}: conflicting actions {pending:?}"));
                }
            }
        }
        None => {
            let name = &completed[0].action_name;
            Action::from_name(name).ok_or_else(|| format!("skipping instant {t}: unknown action `{name}`"))?
        }
    };
    let state = files.iter().map(|f| f.state).max().unwrap_or(State::Requested);
    let completed_at = match completed.as_slice() {
        [] => None,
        [one] if one.action_name == action.completed_name() => one.completed.clone(),
        [one] => {
            return Err(format!(
                "skipping instant {t}: completed as `{}` but requested as `{}`",
                one.action_name,
                action.name()
            ));
        }
        _ => {
            return Err(format!("skipping instant {t}: more than one completed file"));
        }
    };
    Ok(Instant { requested: t.clone(), action, state, completed: completed_at })
}

/// The action of a well-formed timeline file name that names an action
/// this build does not know, if it does; `None` for a known action and for
/// names that are no instant's file (those are skipped with a warning).
fn unknown_action(name: &str, layout: u32) -> Option<&str> {
    if !name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let (stem, rest) = name.split_once('.')?;
    if layout < 2 && stem.contains('_') || InstantTime::parse(stem.split('_').next()?).is_err() {
        return None;
    }
    let action = match rest.rsplit_once('.') {
        Some((a, "requested" | "inflight")) => a,
        Some(_) => return None,
        None if rest == "inflight" || rest == "requested" => return None,
        None => rest,
    };
    let well_formed = !action.is_empty() && action.bytes().all(|b| b.is_ascii_lowercase());
    (well_formed && Action::from_name(action).is_none()).then_some(action)
}

/// The folder holding the timeline: `.hoodie/timeline` (layout 2) or `.hoodie` (layout 1).
pub(crate) fn timeline_dir(loc: &TableLocation, config: &TableConfig) -> Path {
    crate::layout::timeline_dir(&loc.root, config.timeline_layout, &config.timeline_path)
}

/// How many completed files [`TimelineFolder::read_completed`] reads at once.
const CONCURRENT_READS: usize = 16;

/// The folder of a table's timeline: the file of each instant in each
/// state, created once (create-if-absent; nothing is renamed or rewritten)
/// and read, from the history when Java archived it. Writers create through
/// it and readers read through it; [`Timeline`] is what a listing of it
/// holds.
#[derive(Debug, Clone)]
pub struct TimelineFolder {
    loc: TableLocation,
    dir: Path,
    history: Option<Path>,
    layout: u32,
}

impl TimelineFolder {
    /// The timeline folder of the table's timeline layout.
    pub fn new(loc: &TableLocation, config: &TableConfig) -> Self {
        Self {
            loc: loc.clone(),
            dir: timeline_dir(loc, config),
            history: history::history_dir(loc, config),
            layout: config.timeline_layout,
        }
    }

    /// Creates the file recording `instant` in `state` with `content`.
    pub async fn create(&self, instant: &Instant, state: State, content: Vec<u8>) -> Result<Path> {
        let path = self.dir.clone().join(instant.file_name(state)?);
        self.loc.create(&path, content).await?;
        Ok(path)
    }

    /// Creates the file recording `instant` in `state` unless it exists
    /// (a step re-run after a crash finds its file already there).
    pub async fn create_if_absent(&self, instant: &Instant, state: State, content: Vec<u8>) -> Result<()> {
        match self.create(instant, state, content).await {
            Ok(_) | Err(Error::Storage(StorageError::AlreadyExists { .. })) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The path of the file recording `instant` in `state`.
    pub fn path_of(&self, instant: &Instant, state: State) -> Result<Path> {
        if self.layout < 2 && state == State::Completed {
            // Layout 1 names a completed instant `<t>.<action>`.
            return Ok(self.dir.clone().join(format!("{}.{}", instant.requested, instant.action.completed_name())));
        }
        Ok(self.dir.clone().join(instant.file_name(state)?))
    }

    /// Reads the content of the file recording `instant` in `state`. A
    /// completed instant whose file is not in the active timeline (Java
    /// archived it, perhaps since the timeline was loaded) is read from the
    /// history, which keeps the completed file's content: one listing of
    /// the history folder (all a table never archived costs), then its
    /// snapshot and the instant's row. With the timeline at hand,
    /// [`TimelineFolder::read_completed`] reads less.
    pub async fn read(&self, instant: &Instant, state: State) -> Result<bytes::Bytes> {
        match self.loc.get(&self.path_of(instant, state)?).await {
            Err(e) if e.is_not_found() && state == State::Completed => match self.probe_history().await? {
                Some(h) => Ok(h.read_metadata(&instant.requested).await?.ok_or(e)?),
                None => Err(e.into()),
            },
            other => Ok(other?),
        }
    }

    /// The contents of the completed files of `instants`, in order, all
    /// listed by `timeline`. Those it read from the history come from the
    /// history snapshot it loaded, each file of it read once for all of
    /// them and no request made to the active timeline; the others (and an
    /// archived one the snapshot no longer serves) are read as
    /// [`TimelineFolder::read`] reads them, up to 16 at once.
    pub async fn read_completed(&self, timeline: &Timeline, instants: &[&Instant]) -> Result<Vec<bytes::Bytes>> {
        let archived: Vec<InstantTime> =
            instants.iter().filter(|i| timeline.is_archived(&i.requested)).map(|i| i.requested.clone()).collect();
        let mut found = match timeline.history() {
            Some(h) if !archived.is_empty() => match h.read_metadata_many(&archived).await {
                Ok(found) => found,
                // A file of the snapshot is gone (Java compacted the
                // history since): read as if the timeline were not at hand.
                Err(e) if e.is_not_found() => BTreeMap::new(),
                Err(e) => return Err(e),
            },
            _ => BTreeMap::new(),
        };
        // The rest are read at once, a few at a time: a writer reads here,
        // under the table lock, the commits completed since its last look.
        let mut reads = Vec::with_capacity(instants.len());
        for &i in instants {
            let kept = found.remove(&i.requested);
            reads.push(async move {
                match kept {
                    Some(bytes) => Ok(bytes),
                    None => self.read(i, State::Completed).await,
                }
            });
        }
        futures::stream::iter(reads).buffered(CONCURRENT_READS).try_collect().await
    }

    /// Whether `instant` completed at its completion time: its completed
    /// file exists (one HEAD), or the history holds it with that
    /// completion time (Java archived it). When the HEAD misses, one
    /// listing of the history folder follows, which is all a table never
    /// archived costs; a table with a history then costs its snapshot
    /// (`_version_`, the manifest) and the first columns of the files
    /// covering the instant.
    pub async fn is_completed(&self, instant: &Instant) -> Result<bool> {
        let path = self.path_of(instant, State::Completed)?;
        match self.loc.store.head(&path).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => match self.probe_history().await? {
                Some(h) => Ok(h
                    .find_instant(&instant.requested)
                    .await?
                    .is_some_and(|a| instant.completed.is_none() || a.completed == instant.completed)),
                None => Ok(false),
            },
            Err(e) => Err(Error::store("head", &path, e)),
        }
    }

    /// The history's latest snapshot, looked for afresh (layout 2 only).
    async fn probe_history(&self) -> Result<Option<History>> {
        match &self.history {
            Some(dir) => Ok(Some(History::probe(&self.loc, dir).await?)),
            None => Ok(None),
        }
    }

    /// Lists the timeline this writer writes, with the instants archived
    /// into its history.
    pub async fn load(&self) -> Result<Timeline> {
        Timeline::load_dir(&self.loc, &self.dir, self.layout, self.history.as_ref()).await
    }

    /// Lists the active timeline alone: one listing, and no instant of the
    /// history, for a step that needs only what is not archived (the
    /// backpressure count of uncompacted logs).
    pub async fn load_active(&self) -> Result<Timeline> {
        Timeline::load_dir(&self.loc, &self.dir, self.layout, None).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembles_states_and_compactions() {
        let tl = Timeline::from_layout2_names([
            "20251220210108078.deltacommit.requested",
            "20251220210108078.deltacommit.inflight",
            "20251220210108078_20251220210109593.deltacommit",
            "20251220210129235.compaction.requested",
            "20251220210129235.compaction.inflight",
            "20251220210129235_20251220210129883.commit",
            "20251220210130911.deltacommit.requested",
            "20251220210130911.deltacommit.inflight",
            "20250713010139392.commit.requested",
            "20250713010139392.inflight",
            "20250713010139392_20250713010140981.commit",
            "garbage.txt",
            ".DS_Store",
        ]);
        let got: Vec<(String, Action, State, Option<String>)> = tl
            .instants()
            .map(|i| (i.requested.to_string(), i.action, i.state, i.completed.as_ref().map(|c| c.to_string())))
            .collect();
        assert_eq!(
            got,
            vec![
                ("20250713010139392".into(), Action::Commit, State::Completed, Some("20250713010140981".into())),
                ("20251220210108078".into(), Action::DeltaCommit, State::Completed, Some("20251220210109593".into())),
                ("20251220210129235".into(), Action::Compaction, State::Completed, Some("20251220210129883".into())),
                ("20251220210130911".into(), Action::DeltaCommit, State::Inflight, None),
            ]
        );
        assert_eq!(tl.warnings().len(), 2);
        assert_eq!(tl.pending().count(), 1);
        assert_eq!(tl.latest_completed().unwrap().requested.as_str(), "20251220210129235");
        // Older than the active timeline, and the table has no history:
        // never archived, so withdrawn (its files are orphans).
        assert!(tl.knows_archive());
        assert!(!tl.is_completed(&InstantTime::parse("20200101000000000").unwrap()), "withdrawn");
        assert!(!tl.is_completed(&InstantTime::parse("20251220210130911").unwrap()));
        assert!(!tl.is_completed(&InstantTime::parse("20251220210130912").unwrap()));
    }

    /// The placeholder that creates a local table's timeline folder is no
    /// stray file, should a listing see it.
    /// The table as it stood at a completion time: instants completed by
    /// then, not those requested before it that completed later (time
    /// travel keeps those), nor pending ones.
    #[test]
    fn completed_by_keeps_what_had_completed_then() {
        let tl = Timeline::from_layout2_names([
            "20251220210100000.deltacommit.requested",
            "20251220210100000_20251220210105000.deltacommit",
            "20251220210101000.deltacommit.requested",
            "20251220210101000_20251220210103000.deltacommit",
            "20251220210102000.compaction.requested",
            "20251220210102000_20251220210104000.commit",
            "20251220210106000.deltacommit.requested",
        ]);
        let at = |t: &str| -> Vec<String> {
            let t = InstantTime::parse(t).unwrap();
            tl.completed_by(&t).instants().map(|i| i.requested.to_string()).collect()
        };
        assert_eq!(at("20251220210102999"), Vec::<String>::new());
        assert_eq!(at("20251220210103000"), ["20251220210101000"]);
        assert_eq!(at("20251220210104500"), ["20251220210101000", "20251220210102000"]);
        assert_eq!(at("20251220210107000"), ["20251220210100000", "20251220210101000", "20251220210102000"]);
        let later = tl.completed_by(&InstantTime::parse("20251220210104500").unwrap());
        assert!(!later.is_completed(&InstantTime::parse("20251220210100000").unwrap()), "completed after: invisible");
    }

    #[test]
    fn the_folder_placeholder_is_skipped_without_a_warning() {
        let tl = Timeline::from_layout2_names([FOLDER_PLACEHOLDER, "20251220210108078.deltacommit.requested"]);
        assert_eq!(tl.len(), 1);
        assert!(tl.warnings().is_empty(), "{:?}", tl.warnings());
    }

    #[test]
    fn contradictions_are_skipped_with_a_warning() {
        let tl = Timeline::from_layout2_names([
            "20251220210108078.deltacommit.requested",
            "20251220210108078_20251220210109593.commit",
            "20251220210108079.frobnicate.requested",
        ]);
        assert!(tl.is_empty());
        assert_eq!(tl.warnings().len(), 2, "{:?}", tl.warnings());
    }
}

#[cfg(test)]
mod archived_tests {
    use super::*;

    fn t(s: &str) -> InstantTime {
        InstantTime::parse(s).unwrap()
    }

    fn done(r: &str, action: Action, c: &str) -> Instant {
        Instant { requested: t(r), action, state: State::Completed, completed: Some(t(c)) }
    }

    /// Archived 1..=3 (3 is a compaction, recorded as `commit`), active 4 and 6.
    fn timeline() -> Timeline {
        Timeline::from_layout2_names([
            "20250101000000004.deltacommit.requested",
            "20250101000000004_20250101000000007.deltacommit",
            "20250101000000006.deltacommit.requested",
            "20250101000000006.deltacommit.inflight",
        ])
        .with_archived(
            [
                done("20250101000000001", Action::DeltaCommit, "20250101000000005"),
                done("20250101000000002", Action::DeltaCommit, "20250101000000003"),
                done("20250101000000003", Action::Commit, "20250101000000004"),
                // Also still active (archived while the timeline was listed): the active entry wins.
                done("20250101000000004", Action::DeltaCommit, "20250101000000007"),
            ],
            vec!["skipping archived instant: a warning".into()],
        )
    }

    #[test]
    fn archived_instants_are_completed_with_their_completion_times() {
        let tl = timeline();
        let times: Vec<&str> = tl.instants().map(|i| i.requested.as_str()).collect();
        assert_eq!(
            times,
            ["20250101000000001", "20250101000000002", "20250101000000003", "20250101000000004", "20250101000000006"]
        );
        assert!(tl.is_archived(&t("20250101000000001")) && tl.is_archived(&t("20250101000000003")));
        assert!(!tl.is_archived(&t("20250101000000004")), "the active entry wins");
        assert_eq!(tl.completion_time(&t("20250101000000001")), Some(&t("20250101000000005")));
        assert_eq!(tl.completed().count(), 4);
        assert_eq!(tl.latest_completed().unwrap().requested, t("20250101000000004"));
        assert_eq!(tl.warnings().len(), 1);
        // Older than the first active write instant and in neither place:
        // archived by Hudi's assumption, hence completed.
        assert!(tl.is_completed(&t("20250101000000000")));
        assert!(tl.is_completed(&t("20250101000000002")));
        assert!(!tl.is_completed(&t("20250101000000005")), "after the active timeline starts");
        assert!(!tl.is_completed(&t("20250101000000006")), "pending");
    }

    proptest::proptest! {
        /// Walking the two lists, from either end or both, gives every
        /// instant once, by requested time, the active entry where an
        /// instant is in both; `len`, `get`, `is_archived` and
        /// `latest_completed` agree with one merged list.
        #[test]
        fn instants_merge_both_lists_from_either_end(
            active in proptest::collection::btree_map(0u32..60, (0u32..40, proptest::bool::ANY), 0..20),
            archived in proptest::collection::btree_map(0u32..60, 0u32..40, 0..40),
            fronts in proptest::collection::vec(proptest::bool::ANY, 0..80),
        ) {
            let ts = |n: u32| t(&format!("20250101000000{n:03}"));
            let entry = |r: u32, c: u32, completed: bool| Instant {
                requested: ts(r),
                action: if r.is_multiple_of(3) { Action::Clean } else { Action::DeltaCommit },
                state: if completed { State::Completed } else { State::Inflight },
                completed: completed.then(|| ts(100 + c)),
            };
            let tl = Timeline {
                active: active.iter().map(|(&r, &(c, done))| entry(r, c, done)).collect(),
                ..Timeline::default()
            }
            .with_archived(archived.iter().map(|(&r, &c)| entry(r, c, true)), vec![]);
            let mut want: BTreeMap<u32, Instant> = archived.iter().map(|(&r, &c)| (r, entry(r, c, true))).collect();
            want.extend(active.iter().map(|(&r, &(c, done))| (r, entry(r, c, done))));
            let want: Vec<Instant> = want.into_values().collect();
            proptest::prop_assert_eq!(tl.instants().cloned().collect::<Vec<_>>(), want.clone());
            proptest::prop_assert_eq!(tl.instants().rev().cloned().collect::<Vec<_>>(), want.iter().rev().cloned().collect::<Vec<_>>());
            proptest::prop_assert_eq!(tl.len(), want.len());
            // Both ends at once meet in the middle without losing or repeating one.
            let (mut walk, mut front, mut back) = (tl.instants(), Vec::new(), Vec::new());
            for &f in fronts.iter().chain(std::iter::repeat(&true)) {
                match if f { walk.next() } else { walk.next_back() } {
                    Some(i) if f => front.push(i.clone()),
                    Some(i) => back.push(i.clone()),
                    None => break,
                }
            }
            front.extend(back.into_iter().rev());
            proptest::prop_assert_eq!(front, want.clone());
            for i in &want {
                proptest::prop_assert_eq!(tl.get(&i.requested), Some(i));
                let in_active = active.contains_key(&(i.requested.as_str()[14..].parse::<u32>().unwrap()));
                proptest::prop_assert_eq!(tl.is_archived(&i.requested), !in_active);
            }
            let latest = want.iter().filter(|i| i.is_completed()).max_by(|a, b| a.cmp_visibility(b));
            proptest::prop_assert_eq!(tl.latest_completed(), latest);
            let write = want.iter().filter(|i| i.is_completed() && i.action.writes_data()).max_by(|a, b| a.cmp_visibility(b));
            proptest::prop_assert_eq!(tl.latest_completed_write(), write);
        }
    }

    #[test]
    fn a_missing_instant_is_withdrawn_when_the_whole_history_was_read() {
        let active = || {
            Timeline::from_layout2_names([
                "20250101000000004.deltacommit.requested",
                "20250101000000004_20250101000000007.deltacommit",
            ])
        };
        let read_whole =
            active().with_archived([done("20250101000000002", Action::DeltaCommit, "20250101000000003")], vec![]);
        assert!(read_whole.knows_archive());
        assert!(read_whole.is_completed(&t("20250101000000002")), "archived");
        assert!(!read_whole.is_completed(&t("20250101000000001")), "in neither place: withdrawn");
        // A skipped history row may be the missing instant: Hudi's rule.
        let skipped = active().with_archived([], vec!["skipping archived instant: a warning".into()]);
        assert!(!skipped.knows_archive());
        assert!(skipped.is_completed(&t("20250101000000001")));
        // Layout 1 keeps its archive elsewhere: Hudi's rule too.
        let layout1 = Timeline::from_layout1_names(["20250101000000004.deltacommit"]);
        assert!(!layout1.knows_archive());
        assert!(layout1.is_completed(&t("20250101000000001")));
        assert!(!layout1.is_completed(&t("20250101000000005")));
    }

    #[test]
    fn time_travel_into_the_history() {
        let tl = timeline();
        // As of 2: only 1 and 2 count; 3 (archived, later) does not, and no
        // active instant is left to assume anything older completed.
        let as_of = tl.filtered(|i| i.requested <= t("20250101000000002"));
        assert_eq!(as_of.len(), 2);
        assert!(as_of.is_completed(&t("20250101000000001")) && as_of.is_archived(&t("20250101000000001")));
        assert!(!as_of.is_completed(&t("20250101000000003")));
        assert!(!as_of.is_completed(&t("20250101000000000")));
        assert_eq!(as_of.completion_time(&t("20250101000000002")), Some(&t("20250101000000003")));
    }
}

#[cfg(test)]
mod write_tests {
    use std::sync::Arc;
    use std::time::Duration;

    use object_store::memory::InMemory;

    use super::*;
    use crate::config::{BucketHash, BucketSpec, NewTableConfig};
    use crate::partition::ensure_partition;
    use crate::truetime::{TimeGenerator, TimeMode};
    use tributary_storage::InProcessLock;
    use tributary_storage::ManualClock;

    fn config() -> TableConfig {
        TableConfig::new_table(&NewTableConfig {
            bucket: BucketSpec { num_buckets: 2, hash: BucketHash::Murmur3 },
            ..NewTableConfig::new("t", "id", "ts", "{}")
        })
    }

    #[tokio::test]
    async fn writes_each_state_once_and_reads_it_back() {
        let loc = TableLocation::new(Arc::new(InMemory::new()), Path::from("tables/t"));
        let cfg = config();
        let writer = TimelineFolder::new(&loc, &cfg);
        let generator = TimeGenerator::new(
            TimeMode::HybridLogical,
            Duration::from_millis(200),
            Arc::new(ManualClock::new(1_766_264_468_078)),
            Arc::new(InProcessLock::new()),
        );
        let t = generator.new_instant().await.unwrap();
        let mut instant = Instant::requested(t.clone(), Action::DeltaCommit);
        writer.create(&instant, State::Requested, Vec::new()).await.unwrap();
        writer.create(&instant, State::Inflight, Vec::new()).await.unwrap();
        // A retried create finds its own file: done. Other content is a conflict.
        writer.create(&instant, State::Inflight, Vec::new()).await.unwrap();
        let other = writer.create(&instant, State::Inflight, b"other".to_vec()).await;
        assert!(matches!(other, Err(Error::Storage(StorageError::AlreadyExists { .. }))), "{other:?}");
        // Completion time and visibility in one lock hold.
        let done = generator
            .with_time(|c| {
                instant.completed = Some(c);
                let (w, i) = (writer.clone(), instant.clone());
                async move { w.create(&i, State::Completed, b"meta".to_vec()).await.map(|_| i) }
            })
            .await
            .unwrap();
        assert!(done.completed.as_ref().unwrap() > &t);
        assert_eq!(&writer.read(&done, State::Completed).await.unwrap()[..], b"meta");

        let tl = Timeline::load(&loc, &cfg).await.unwrap();
        assert_eq!(tl.len(), 1);
        assert_eq!(tl.instants().next().unwrap().state, State::Completed);
        assert_eq!(tl.completion_time(&t), done.completed.as_ref());
        assert_eq!(tl.latest_completed().unwrap().requested, t);

        ensure_partition(&loc, "city=paris", &t).await.unwrap();
        ensure_partition(&loc, "city=paris", &t).await.unwrap();
        let meta = loc.get(&loc.join("city=paris/.hoodie_partition_metadata")).await.unwrap();
        let text = String::from_utf8(meta.to_vec()).unwrap();
        assert!(text.contains(&format!("commitTime={t}")) && text.contains("partitionDepth=1"), "{text}");
    }
}
