//! Writer states: takeovers fence older generations, a checkpoint counts
//! once its commit is visible, checkpoints only in commit metadata (tables
//! older than the state files), damaged state files, and checkpoints whose
//! commits Java archived.

use std::sync::Arc;
use std::time::Duration;

use object_store::memory::InMemory;
use object_store::path::Path;
use tributary_format::CommitMetadata;
use tributary_testkit::history::archive;
use tributary_timeline::CountingStore;
use tributary_timeline::{
    Action, CHECKPOINT_KEY_PREFIX, CommitFence, Completion, ErrorKind, InProcessLock, Instant, InstantTime,
    ManualClock, NewTableConfig, Result, State, TableConfig, TableLocation, TimeGenerator, TimeMode, TimelineFolder,
    WriterState, complete_instant, complete_instant_with, lookup_writer, mark_new_table,
};

struct Fixture {
    loc: TableLocation,
    config: TableConfig,
    timeline: TimelineFolder,
    time: TimeGenerator,
}

fn fixture() -> Fixture {
    let loc = TableLocation::new(Arc::new(InMemory::new()), Path::from("t"));
    let config = TableConfig::new_table(&NewTableConfig::new("t", "id", "ts", "{}"));
    let timeline = TimelineFolder::new(&loc, &config);
    let clock = Arc::new(ManualClock::new(1_766_264_468_078));
    let lock = Arc::new(InProcessLock::new());
    let time = TimeGenerator::new(TimeMode::HybridLogical, Duration::from_millis(200), clock, lock);
    Fixture { loc, config, timeline, time }
}

/// Starts a delta commit: requested and inflight files.
async fn start(f: &Fixture) -> Instant {
    let t = f.time.new_instant().await.unwrap();
    let instant = Instant::requested(t, Action::DeltaCommit);
    f.timeline.create(&instant, State::Requested, Vec::new()).await.unwrap();
    f.timeline.create(&instant, State::Inflight, Vec::new()).await.unwrap();
    instant
}

/// Completes a delta commit of `w` at generation `held`, with the
/// checkpoint both in the state file and in the commit's metadata.
async fn commit(f: &Fixture, w: &WriterState, held: u64, checkpoint: Option<&str>) -> Result<InstantTime> {
    let instant = start(f).await;
    let mut meta = CommitMetadata::default();
    if let Some(cp) = checkpoint {
        meta.extra_metadata.insert(format!("{CHECKPOINT_KEY_PREFIX}{}", w.writer_id()), cp.to_string());
    }
    let t = instant.requested.clone();
    let content = meta.to_avro_container().unwrap();
    let hook = |c: InstantTime| async move {
        w.before_visible(CommitFence::Generation(held), &t, &c, checkpoint).await.map(|()| None)
    };
    complete_instant_with(&f.loc, &f.timeline, &f.time, &instant, content, Completion::Owned, hook).await?;
    w.completed(&instant.requested);
    Ok(instant.requested)
}

async fn last(f: &Fixture, id: &str) -> Option<String> {
    lookup_writer(&f.loc, &f.config, id).await.unwrap().checkpoint.map(|c| c.checkpoint)
}

#[tokio::test]
async fn a_takeover_fences_the_older_generation() {
    let f = fixture();
    let a = WriterState::new(&f.loc, &f.config, "orders").unwrap();
    let first = a.take_over(&f.time).await.unwrap();
    assert_eq!((first.generation, first.checkpoint.clone()), (1, None));
    commit(&f, &a, 1, Some("10")).await.unwrap();

    let b = WriterState::new(&f.loc, &f.config, "orders").unwrap();
    let second = b.take_over(&f.time).await.unwrap();
    assert_eq!(second.generation, 2);
    assert_eq!(second.checkpoint.as_ref().map(|c| c.checkpoint.as_str()), Some("10"));

    let err = commit(&f, &a, a.generation(), Some("20")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    let msg = err.to_string();
    assert!(msg.contains("writer ID `orders` was taken over by a newer writer (generation 2)"), "{msg}");
    assert!(msg.contains("this writer holds generation 1"), "{msg}");
    let listed = f.timeline.load().await.unwrap();
    assert_eq!(listed.completed().count(), 1, "the fenced commit did not complete");
    // A client that never registered is fenced too once the id is taken.
    let err = commit(&f, &a, 0, Some("30")).await.unwrap_err();
    assert!(err.to_string().contains("holds generation 0"), "{err}");
    // Commits without a checkpoint are fenced as well.
    assert_eq!(commit(&f, &a, 1, None).await.unwrap_err().kind(), ErrorKind::Conflict);

    commit(&f, &b, 2, Some("40")).await.unwrap();
    assert_eq!(last(&f, "orders").await.as_deref(), Some("40"));
    assert_eq!(lookup_writer(&f.loc, &f.config, "orders").await.unwrap().generation, 2);
}

#[tokio::test]
async fn a_pending_checkpoint_counts_once_its_commit_is_visible() {
    let f = fixture();
    let w = WriterState::new(&f.loc, &f.config, "orders").unwrap();
    w.take_over(&f.time).await.unwrap();
    let first = commit(&f, &w, 1, Some("100")).await.unwrap();
    // The writer records its pending entry, then dies before creating
    // the completed file.
    let instant = start(&f).await;
    let c = f.time.new_instant().await.unwrap();
    w.before_visible(CommitFence::Generation(1), &instant.requested, &c, Some("200")).await.unwrap();
    let found = lookup_writer(&f.loc, &f.config, "orders").await.unwrap().checkpoint.unwrap();
    assert_eq!((found.checkpoint.as_str(), &found.instant), ("100", &first));
    // Had the completed file been created, the pending entry is it.
    let done = Instant { state: State::Completed, completed: Some(c.clone()), ..instant.clone() };
    f.timeline.create(&done, State::Completed, Vec::new()).await.unwrap();
    let found = lookup_writer(&f.loc, &f.config, "orders").await.unwrap().checkpoint.unwrap();
    assert_eq!((found.checkpoint.as_str(), found.completed.as_ref()), ("200", Some(&c)));

    // A takeover settles the pending entry into the committed one.
    let again = WriterState::new(&f.loc, &f.config, "orders").unwrap();
    let status = again.take_over(&f.time).await.unwrap();
    assert_eq!(status.checkpoint.map(|c| c.checkpoint).as_deref(), Some("200"));
    let text = f.loc.get(&f.loc.join(".hoodie/.tributary/writers/orders.json")).await.unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&text).unwrap();
    assert_eq!(doc["pending"], serde_json::Value::Null, "{doc}");
    assert_eq!(doc["committed"]["checkpoint"], "200", "{doc}");
    assert_eq!(doc["generation"], 2, "{doc}");
}

#[tokio::test]
async fn checkpoints_in_commit_metadata_alone_are_found_before_the_state_files_began() {
    let f = fixture();
    // A table written before state files: checkpoints only in commits.
    let old = WriterState::new(&f.loc, &f.config, "orders").unwrap();
    let legacy = |id: &'static str, cp: &'static str| {
        let f = &f;
        async move {
            let instant = start(f).await;
            let mut meta = CommitMetadata::default();
            meta.extra_metadata.insert(format!("{CHECKPOINT_KEY_PREFIX}{id}"), cp.into());
            let content = meta.to_avro_container().unwrap();
            complete_instant(&f.loc, &f.timeline, &f.time, &instant, content, Completion::Owned).await.unwrap();
        }
    };
    legacy("orders", "7").await;
    legacy("risk", "r1").await;
    assert_eq!(last(&f, "orders").await.as_deref(), Some("7"));
    assert_eq!(last(&f, "risk").await.as_deref(), Some("r1"));
    assert_eq!(last(&f, "profile").await, None);

    // The first checkpoint recorded in a state file starts the era:
    // older commits are still scanned for ids without a state file.
    commit(&f, &old, 0, Some("8")).await.unwrap();
    assert_eq!(last(&f, "orders").await.as_deref(), Some("8"));
    assert_eq!(last(&f, "risk").await.as_deref(), Some("r1"));
    // A takeover of an id without a state file starts from its old checkpoint.
    let risk = WriterState::new(&f.loc, &f.config, "risk").unwrap();
    assert_eq!(risk.take_over(&f.time).await.unwrap().checkpoint.map(|c| c.checkpoint).as_deref(), Some("r1"));

    // A new table says all its checkpoints are in state files: no scan.
    let g = fixture();
    mark_new_table(&g.loc).await.unwrap();
    let instant = start(&g).await;
    let mut meta = CommitMetadata::default();
    meta.extra_metadata.insert(format!("{CHECKPOINT_KEY_PREFIX}orders"), "9".into());
    let content = meta.to_avro_container().unwrap();
    complete_instant(&g.loc, &g.timeline, &g.time, &instant, content, Completion::Owned).await.unwrap();
    assert_eq!(last(&g, "orders").await, None, "commits of a table with state files are never scanned");
}

#[tokio::test]
async fn damaged_state_files_are_corrupt_naming_the_file() {
    let f = fixture();
    let path = f.loc.join(".hoodie/.tributary/writers/orders.json");
    f.loc.create(&path, b"{not json".to_vec()).await.unwrap();
    let err = lookup_writer(&f.loc, &f.config, "orders").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert!(err.to_string().contains("t/.hoodie/.tributary/writers/orders.json"), "{err}");
    let err = lookup_writer(&f.loc, &f.config, "../x").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

/// A Java writer archives the commit a state file's pending entry
/// names (and older ones): the checkpoint stays, for lookups, takeovers
/// and the legacy scan of commit metadata alike.
#[tokio::test]
async fn checkpoints_of_archived_commits_stay() {
    let f = fixture();
    let w = WriterState::new(&f.loc, &f.config, "orders").unwrap();
    w.take_over(&f.time).await.unwrap();
    commit(&f, &w, 1, Some("10")).await.unwrap();
    commit(&f, &w, 1, Some("20")).await.unwrap();
    let listed = f.timeline.load().await.unwrap();
    let done: Vec<Instant> = listed.completed().cloned().collect();
    archive(&f.loc, &f.config, &done).await.unwrap();
    let after = f.timeline.load().await.unwrap();
    assert!(done.iter().all(|i| after.is_archived(&i.requested)));
    assert_eq!(last(&f, "orders").await.as_deref(), Some("20"));
    let next = WriterState::new(&f.loc, &f.config, "orders").unwrap();
    assert_eq!(next.take_over(&f.time).await.unwrap().checkpoint.map(|c| c.checkpoint).as_deref(), Some("20"));

    // A table from before state files: its checkpoints are found in the
    // archived commits' metadata.
    let g = fixture();
    for cp in ["7", "8"] {
        let instant = start(&g).await;
        let mut meta = CommitMetadata::default();
        meta.extra_metadata.insert(format!("{CHECKPOINT_KEY_PREFIX}risk"), cp.into());
        let content = meta.to_avro_container().unwrap();
        tributary_timeline::complete_instant(&g.loc, &g.timeline, &g.time, &instant, content, Completion::Owned)
            .await
            .unwrap();
    }
    let done: Vec<Instant> = g.timeline.load().await.unwrap().completed().cloned().collect();
    archive(&g.loc, &g.config, &done).await.unwrap();
    assert_eq!(last(&g, "risk").await.as_deref(), Some("8"));
}

/// The scan of commit metadata reads the history snapshot the listing
/// loaded, each of its files once for all the archived commits it
/// holds: as many requests for eight archived commits as for two.
#[tokio::test]
async fn scanning_archived_commits_reads_each_history_file_once() {
    let mut gets = Vec::new();
    for commits in [2, 8] {
        let f = fixture();
        for _ in 0..commits {
            let instant = start(&f).await;
            let content = CommitMetadata::default().to_avro_container().unwrap();
            tributary_timeline::complete_instant(&f.loc, &f.timeline, &f.time, &instant, content, Completion::Owned)
                .await
                .unwrap();
        }
        let done: Vec<Instant> = f.timeline.load().await.unwrap().completed().cloned().collect();
        archive(&f.loc, &f.config, &done).await.unwrap();
        let counting = Arc::new(CountingStore::new(f.loc.store.clone()));
        let loc = TableLocation::new(counting.clone(), f.loc.root.clone());
        assert_eq!(lookup_writer(&loc, &f.config, "orders").await.unwrap().checkpoint, None);
        gets.push(counting.requests().gets);
    }
    assert_eq!(gets[0], gets[1], "{gets:?}");
}
