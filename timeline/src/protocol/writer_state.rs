//! A writer id's state: its generation (for fencing) and its last committed
//! checkpoint, found without reading commit files.
//!
//! Each writer id has one small JSON file, `.hoodie/.tributary/writers/<id>.json`
//! (Hudi's readers and writers never look inside `.hoodie/.tributary/`):
//!
//! ```text
//! {"version":1,"writer_id":"orders","generation":2,
//!  "committed":{"instant":"20251220210108078","completed":"20251220210109593","checkpoint":"offset=100"},
//!  "pending":{"instant":"20251220210110000","completed":"20251220210111204","checkpoint":"offset=200"}}
//! ```
//!
//! It is rewritten in place (the one table file besides the lock documents
//! that is), and only under the table lock:
//!
//! - **Takeover** ([`WriterState::take_over`], in a lock hold of its own):
//!   settle `pending` (below), raise `generation` by one and return the
//!   committed checkpoint. From then on, a commit of an older generation
//!   fails.
//! - **Completion** ([`WriterState::before_visible`], inside the lock hold
//!   that completes the commit, after its completion time `c` is issued and
//!   before `<t>_<c>.deltacommit` is created): check the commit's fence
//!   ([`CommitFence`]). Under a generation, the file's generation must still
//!   be the writer's own, else it fails with [`Error::Fenced`]. Under a
//!   checkpoint (writers that share an id optimistically, as change-log
//!   writers do), the settled committed checkpoint must still be the one
//!   the commit began from, else it fails with [`Error::Overtaken`]. Then,
//!   when the commit carries a checkpoint, settle `pending` and write
//!   `pending = {t, c, checkpoint}`.
//!
//! Settling `pending`: its commit completed exactly when
//! `<t>_<c>.deltacommit` exists (one HEAD) or, once a Java writer archived
//! it, when the history holds it completed at `c`; then it becomes
//! `committed`; otherwise it is dropped (the writer died between the two
//! steps, or the completed file could not be created). A lookup
//! ([`lookup`]) does the same without writing: one GET of the state file,
//! and one HEAD when it holds a pending entry. Only when that HEAD misses
//! is the history looked at: one listing of its folder, all a table never
//! archived costs; on a table Java archived, also its snapshot and the
//! first columns of the history file covering the commit
//! ([`TimelineFolder::is_completed`]). So the checkpoint a lookup returns
//! is that of the writer's last commit that is visible at the moment of the
//! HEAD, neither earlier nor later.
//!
//! Tables written before writer state files existed kept checkpoints only
//! in the commits' extra metadata (`tributary.checkpoint.<id>`, still
//! written for other tools). `.hoodie/.tributary/writers.json` says from
//! which completion time on every checkpoint is also in a state file
//! (`"states_since"`; `null` for a table created with it). A writer id with
//! no state file falls back to scanning only the delta commits that
//! completed before that time, newest first; a table without the file (no
//! checkpoint was committed since the upgrade) is scanned whole.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use object_store::path::Path;
use serde::{Deserialize, Serialize};
use tributary_format::CommitMetadata;

use crate::StorageError;
use crate::config::TableConfig;
use crate::error::{Error, Result};
use crate::instant::{Action, Instant, InstantTime, State};
use crate::timeline::TimelineFolder;
use crate::truetime::TimeGenerator;
use tributary_storage::TableLocation;

/// Extra-metadata key prefix under which a commit also records its
/// writer's checkpoint: `tributary.checkpoint.<writer id>`.
pub const CHECKPOINT_KEY_PREFIX: &str = "tributary.checkpoint.";

/// The longest writer id accepted.
pub(crate) const MAX_WRITER_ID_LEN: usize = 128;

/// The state file format this build reads and writes.
const VERSION: u32 = 1;

/// Checks that `id` can name a writer: 1 to [`MAX_WRITER_ID_LEN`] ASCII
/// letters, digits, `.`, `_` or `-`, not starting with `.` (it names a
/// file, and `.` and `..` must not).
pub(crate) fn check_writer_id(id: &str) -> Result<()> {
    let reason = if id.is_empty() {
        "is empty".to_string()
    } else if id.len() > MAX_WRITER_ID_LEN {
        format!("is {} bytes long", id.len())
    } else if id.starts_with('.') {
        "starts with `.`".to_string()
    } else if let Some(c) = id.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        format!("holds `{}`", c.escape_debug())
    } else {
        return Ok(());
    };
    Err(Error::InvalidInput {
        what: format!("writer ID `{}`", id.escape_debug()),
        reason: format!(
            "{reason}; a writer ID is 1 to {MAX_WRITER_ID_LEN} characters from A-Z, a-z, 0-9, `.`, `_` and `-`, \
             not starting with `.` (it names the file .hoodie/.tributary/writers/<ID>.json)"
        ),
    })
}

/// The state file of writer `id`: `.hoodie/.tributary/writers/<id>.json`.
pub(crate) fn state_path(loc: &TableLocation, id: &str) -> Path {
    crate::layout::writer_state_file(&loc.root, id)
}

/// `.hoodie/.tributary/writers.json`: since when checkpoints are in state files.
pub(crate) fn since_path(loc: &TableLocation) -> Path {
    crate::layout::writers_since_file(&loc.root)
}

/// A checkpoint and the commit that made it visible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The checkpoint (for example a source offset), as the writer gave it.
    pub checkpoint: String,
    /// The commit's requested instant.
    pub instant: InstantTime,
    /// Its completion time (`None` only for a layout-1 commit found in
    /// commit metadata).
    pub completed: Option<InstantTime>,
}

/// What a table records about one writer id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterStatus {
    /// The writer id.
    pub writer_id: String,
    /// How many times the id was registered (taken over); 0 if never.
    pub generation: u64,
    /// The checkpoint of the id's last visible commit that carried one.
    pub checkpoint: Option<Checkpoint>,
}

impl WriterStatus {
    /// The text of the id's last committed checkpoint, if any.
    pub fn checkpoint_text(&self) -> Option<&str> {
        self.checkpoint.as_ref().map(|c| c.checkpoint.as_str())
    }
}

/// One commit's entry in the state file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    instant: String,
    completed: Option<String>,
    checkpoint: String,
}

/// The state file's content.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StateFile {
    version: u32,
    writer_id: String,
    generation: u64,
    committed: Option<Entry>,
    pending: Option<Entry>,
}

/// The content of `writers.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SinceFile {
    version: u32,
    /// Commits that completed at or after this time record their
    /// checkpoints in state files; `None`: all of them.
    states_since: Option<String>,
}

/// Records that every checkpoint of the new table at `loc` is in a state
/// file, so a writer id without one has no checkpoint and nothing is
/// scanned. Called once the table's `hoodie.properties` exists.
pub async fn mark_new_table(loc: &TableLocation) -> Result<()> {
    let doc = SinceFile { version: VERSION, states_since: None };
    create_since(loc, &doc).await
}

async fn create_since(loc: &TableLocation, doc: &SinceFile) -> Result<()> {
    let bytes = serde_json::to_vec(doc)
        .map_err(|e| Error::Corrupt { path: since_path(loc).to_string(), reason: format!("cannot encode: {e}") })?;
    match loc.create(&since_path(loc), bytes).await {
        Ok(()) | Err(StorageError::AlreadyExists { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// What `writers.json` says: `None` when absent (scan every commit),
/// `Some(None)` for a table whose checkpoints are all in state files,
/// `Some(Some(t))` when those completed before `t` are not.
async fn read_since(loc: &TableLocation) -> Result<Option<Option<InstantTime>>> {
    let path = since_path(loc);
    let bytes = match loc.get(&path).await {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let corrupt = |reason: String| Error::Corrupt { path: path.to_string(), reason };
    let doc: SinceFile = serde_json::from_slice(&bytes).map_err(|e| corrupt(format!("not a writers file: {e}")))?;
    if doc.version != VERSION {
        return Err(corrupt(format!("version {} (this build reads version {VERSION})", doc.version)));
    }
    let since = doc
        .states_since
        .map(|t| InstantTime::parse(&t).map_err(|e| corrupt(format!("states_since: {e}"))))
        .transpose()?;
    Ok(Some(since))
}

async fn read_state(loc: &TableLocation, id: &str) -> Result<Option<StateFile>> {
    let path = state_path(loc, id);
    let bytes = match loc.get(&path).await {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let corrupt = |reason: String| Error::Corrupt { path: path.to_string(), reason };
    let doc: StateFile =
        serde_json::from_slice(&bytes).map_err(|e| corrupt(format!("state of writer ID `{id}`: {e}")))?;
    if doc.version != VERSION {
        return Err(corrupt(format!(
            "state of writer ID `{id}`: version {} (this build reads version {VERSION})",
            doc.version
        )));
    }
    if doc.writer_id != id {
        return Err(corrupt(format!("holds the state of writer ID `{}`, not `{id}`", doc.writer_id)));
    }
    Ok(Some(doc))
}

async fn write_state(loc: &TableLocation, doc: &StateFile) -> Result<()> {
    let path = state_path(loc, &doc.writer_id);
    let bytes = serde_json::to_vec(doc)
        .map_err(|e| Error::Corrupt { path: path.to_string(), reason: format!("cannot encode: {e}") })?;
    Ok(loc.put(&path, bytes).await?)
}

/// Parses an entry's instant times; bad ones mean the file is corrupt.
fn entry_times(loc: &TableLocation, id: &str, e: &Entry) -> Result<(InstantTime, Option<InstantTime>)> {
    let corrupt = |err: Error| Error::Corrupt {
        path: state_path(loc, id).to_string(),
        reason: format!("state of writer ID `{id}`: {err}"),
    };
    let instant = InstantTime::parse(&e.instant).map_err(corrupt)?;
    let completed = e.completed.as_deref().map(InstantTime::parse).transpose().map_err(corrupt)?;
    Ok((instant, completed))
}

fn to_checkpoint(loc: &TableLocation, id: &str, e: &Entry) -> Result<Checkpoint> {
    let (instant, completed) = entry_times(loc, id, e)?;
    Ok(Checkpoint { checkpoint: e.checkpoint.clone(), instant, completed })
}

/// The committed entry of `doc` once its pending entry is settled: the
/// pending one if its commit is visible (`known` is an instant the caller
/// saw complete), else the committed one.
async fn settle(
    loc: &TableLocation,
    timeline: &TimelineFolder,
    doc: &StateFile,
    known: Option<&str>,
) -> Result<Option<Entry>> {
    let Some(p) = &doc.pending else { return Ok(doc.committed.clone()) };
    if known == Some(p.instant.as_str()) {
        return Ok(Some(p.clone()));
    }
    let (instant, completed) = entry_times(loc, &doc.writer_id, p)?;
    let Some(completed) = completed else {
        return Err(Error::Corrupt {
            path: state_path(loc, &doc.writer_id).to_string(),
            reason: format!("state of writer ID `{}`: pending commit {instant} has no completion time", doc.writer_id),
        });
    };
    let done = Instant {
        requested: instant,
        action: Action::DeltaCommit,
        state: State::Completed,
        completed: Some(completed),
    };
    // A Java writer may have archived the commit since: it then counts as
    // visible when the history holds it with the same completion time.
    if timeline.is_completed(&done).await? { Ok(Some(p.clone())) } else { Ok(doc.committed.clone()) }
}

/// The checkpoint writer `id` recorded in the extra metadata of a delta
/// commit that completed before the table's state files began (see the
/// module notes): the newest such commit's.
async fn legacy_checkpoint(loc: &TableLocation, timeline: &TimelineFolder, id: &str) -> Result<Option<Checkpoint>> {
    let before = match read_since(loc).await? {
        None => None,
        Some(None) => return Ok(None),
        Some(Some(t)) => Some(t),
    };
    let listed = timeline.load().await?;
    let visible = |i: &Instant| i.completed.clone().unwrap_or_else(|| i.requested.clone());
    let mut done: Vec<&Instant> = listed
        .completed()
        .filter(|i| i.action == Action::DeltaCommit)
        .filter(|i| before.as_ref().is_none_or(|b| &visible(i) < b))
        .collect();
    done.sort_by_key(|i| std::cmp::Reverse(visible(i)));
    let key = format!("{CHECKPOINT_KEY_PREFIX}{id}");
    let mut rest = done.as_slice();
    while !rest.is_empty() {
        // Archived commits (a Spark table's oldest) are read from
        // the history snapshot the listing loaded, a run of them at a time
        // so that each history file is read once per run; an active
        // commit's file alone.
        let archived = rest.iter().take(ARCHIVED_READS).take_while(|i| listed.is_archived(&i.requested)).count().max(1);
        let (run, tail) = rest.split_at(archived);
        rest = tail;
        for (i, bytes) in run.iter().zip(timeline.read_completed(&listed, run).await?) {
            let path = timeline.path_of(i, State::Completed)?;
            let meta = CommitMetadata::from_avro_container(&bytes, path.as_ref())?;
            if let Some(v) = meta.extra_metadata.get(&key) {
                return Ok(Some(Checkpoint {
                    checkpoint: v.clone(),
                    instant: i.requested.clone(),
                    completed: i.completed.clone(),
                }));
            }
        }
    }
    Ok(None)
}

/// Archived commits whose metadata the scan of commit metadata reads at
/// once: it holds their metadata together, and may read up to this many
/// more than it needed.
const ARCHIVED_READS: usize = 64;

fn legacy_entry(c: Option<Checkpoint>) -> Option<Entry> {
    c.map(|c| Entry {
        instant: c.instant.to_string(),
        completed: c.completed.map(|t| t.to_string()),
        checkpoint: c.checkpoint,
    })
}

/// The last committed checkpoint of writer `id` at the table at `loc`: one
/// GET of its state file and, when that holds a pending commit, one HEAD
/// of the commit's completed file (and, when the HEAD misses, the history's
/// requests, module notes). Only a writer id without a state file on a
/// table written before state files existed scans commit metadata (module
/// notes). Reads only; takes no lock.
pub async fn lookup_writer(loc: &TableLocation, config: &TableConfig, id: &str) -> Result<WriterStatus> {
    check_writer_id(id)?;
    let timeline = TimelineFolder::new(loc, config);
    let (generation, checkpoint) = match read_state(loc, id).await? {
        Some(doc) => {
            let committed = settle(loc, &timeline, &doc, None).await?;
            (doc.generation, committed.map(|e| to_checkpoint(loc, id, &e)).transpose()?)
        }
        None => (0, legacy_checkpoint(loc, &timeline, id).await?),
    };
    Ok(WriterStatus { writer_id: id.to_string(), generation, checkpoint })
}

/// What refuses a commit of a writer id at its completion
/// ([`WriterState::before_visible`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitFence<'a> {
    /// The generation the commit was started under (0: its client never
    /// registered): a newer registration of the id refuses it
    /// ([`Error::Fenced`]). One writer owns the id at a time.
    Generation(u64),
    /// The id's committed checkpoint the commit's work began from (`None`:
    /// none): the commit completes only if that is still the id's
    /// committed checkpoint ([`Error::Overtaken`]), whoever else commits
    /// under the id. Writers share the id optimistically, none fences
    /// another, and the first to complete from a checkpoint wins.
    Checkpoint(Option<&'a str>),
}

/// One writer id at one table, as a write client holds it: the generation
/// it registered, and the step that fences and records its commits.
#[derive(Debug)]
pub struct WriterState {
    loc: TableLocation,
    timeline: TimelineFolder,
    writer_id: String,
    /// The generation this writer took over; 0 until it does.
    generation: AtomicU64,
    /// The last instant this writer completed with a pending entry, so
    /// settling it needs no HEAD.
    last_completed: Mutex<Option<String>>,
    /// Whether `writers.json` is known to exist.
    since_known: AtomicBool,
}

impl WriterState {
    /// The state of writer `id` at the table at `loc`; checks the id.
    pub fn new(loc: &TableLocation, config: &TableConfig, id: &str) -> Result<Self> {
        check_writer_id(id)?;
        Ok(Self {
            loc: loc.clone(),
            timeline: TimelineFolder::new(loc, config),
            writer_id: id.to_string(),
            generation: AtomicU64::new(0),
            last_completed: Mutex::new(None),
            since_known: AtomicBool::new(false),
        })
    }

    /// The writer id.
    pub fn writer_id(&self) -> &str {
        &self.writer_id
    }

    /// The generation this writer took over; 0 if it never did.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Takes the writer id over, under the table lock: settles the pending
    /// commit, raises the generation by one and returns the new generation
    /// with the committed checkpoint. Commits of every older generation of
    /// this id fail from now on; since their completions take the same
    /// lock, none can become visible after the checkpoint returned here.
    pub async fn take_over(&self, time: &TimeGenerator) -> Result<WriterStatus> {
        let id = self.writer_id.as_str();
        let known = self.known();
        let status = time
            .with_lock(|| async {
                let (generation, committed) = match read_state(&self.loc, id).await? {
                    Some(doc) => (doc.generation, settle(&self.loc, &self.timeline, &doc, known.as_deref()).await?),
                    None => (0, legacy_entry(legacy_checkpoint(&self.loc, &self.timeline, id).await?)),
                };
                let doc = StateFile {
                    version: VERSION,
                    writer_id: id.to_string(),
                    generation: generation + 1,
                    committed: committed.clone(),
                    pending: None,
                };
                write_state(&self.loc, &doc).await?;
                let checkpoint = committed.map(|e| to_checkpoint(&self.loc, id, &e)).transpose()?;
                Ok(WriterStatus { writer_id: id.to_string(), generation: doc.generation, checkpoint })
            })
            .await?;
        self.generation.store(status.generation, Ordering::SeqCst);
        Ok(status)
    }

    /// The step run inside the lock hold that completes this writer's
    /// commit `instant` at `completed`, before the commit becomes visible.
    /// Fails as `fence` says: with [`Error::Fenced`] when a newer writer
    /// took the id over, or with [`Error::Overtaken`] when another commit
    /// recorded a checkpoint past the one this commit began from.
    /// Otherwise, when the commit carries `checkpoint`, records it as the
    /// pending entry (and settles the one before).
    pub async fn before_visible(
        &self,
        fence: CommitFence<'_>,
        instant: &InstantTime,
        completed: &InstantTime,
        checkpoint: Option<&str>,
    ) -> Result<()> {
        let id = self.writer_id.as_str();
        let doc = read_state(&self.loc, id).await?;
        let generation = doc.as_ref().map_or(0, |d| d.generation);
        if let CommitFence::Generation(held) = fence {
            if generation > held {
                return Err(Error::Fenced {
                    table: self.loc.to_string(),
                    instant: instant.to_string(),
                    writer_id: id.to_string(),
                    generation,
                    held,
                });
            }
            if generation < held {
                return Err(Error::Corrupt {
                    path: state_path(&self.loc, id).to_string(),
                    reason: format!(
                        "writer ID `{id}` is at generation {generation}, below the {held} this writer registered: \
                         the file was replaced or deleted; instant {instant} was not completed"
                    ),
                });
            }
        }
        let began = match fence {
            CommitFence::Checkpoint(began) => Some(began),
            CommitFence::Generation(_) if checkpoint.is_some() => None,
            CommitFence::Generation(_) => return Ok(()),
        };
        let committed = match &doc {
            Some(doc) => settle(&self.loc, &self.timeline, doc, self.known().as_deref()).await?,
            None => legacy_entry(legacy_checkpoint(&self.loc, &self.timeline, id).await?),
        };
        let now = committed.as_ref().map(|e| e.checkpoint.as_str());
        if let Some(began) = began
            && now != began
        {
            return Err(Error::Overtaken {
                table: self.loc.to_string(),
                instant: instant.to_string(),
                writer_id: id.to_string(),
                checkpoints: Box::new((began.unwrap_or_default().to_string(), now.unwrap_or_default().to_string())),
            });
        }
        let Some(checkpoint) = checkpoint else { return Ok(()) };
        if !self.since_known.load(Ordering::SeqCst) {
            // From this commit on, checkpoints are in state files (a no-op
            // on tables that already say so).
            let since = SinceFile { version: VERSION, states_since: Some(completed.to_string()) };
            create_since(&self.loc, &since).await?;
            self.since_known.store(true, Ordering::SeqCst);
        }
        let pending = Entry {
            instant: instant.to_string(),
            completed: Some(completed.to_string()),
            checkpoint: checkpoint.to_string(),
        };
        let doc =
            StateFile { version: VERSION, writer_id: id.to_string(), generation, committed, pending: Some(pending) };
        write_state(&self.loc, &doc).await
    }

    /// Notes that `instant`, recorded by [`WriterState::before_visible`],
    /// completed: settling it later needs no HEAD.
    pub fn completed(&self, instant: &InstantTime) {
        if let Ok(mut last) = self.last_completed.lock() {
            *last = Some(instant.to_string());
        }
    }

    fn known(&self) -> Option<String> {
        self.last_completed.lock().ok().and_then(|l| l.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn writer_ids_name_safe_files() {
        for ok in ["orders", "cli", "a.b_c-1", "W7", &"x".repeat(MAX_WRITER_ID_LEN)] {
            check_writer_id(ok).unwrap();
        }
        for bad in ["", ".hidden", "..", "a/b", "a\\b", "a b", "caf\u{e9}", "a\nb", &"x".repeat(MAX_WRITER_ID_LEN + 1)]
        {
            let err = check_writer_id(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad:?}");
            let msg = err.to_string();
            assert!(msg.starts_with("writer ID `") && msg.contains("A-Z, a-z, 0-9"), "{msg}");
        }
        assert!(check_writer_id("a/b").unwrap_err().to_string().contains("writer ID `a/b`: holds `/`"));
    }
}
