//! The change feed ([`Table::changes`]) against the model of `wide.rs`:
//! writers whose commits are open at once and complete out of order,
//! out-of-order events, late deletes, partial sequence-group writes and
//! compactions at random points; and a consumer that rebuilds the table
//! from successive windows while writers, compactions and cleaning run. On
//! the store `TRIBUTARY_TEST_STORE` names (see [`Place`]).

use std::collections::BTreeMap;

use arrow::array::{Array, AsArray, RecordBatch, StructArray};
use arrow::datatypes::Schema;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tributary::{ErrorKind, InstantTime, Table, WriteClient};
use tributary_compaction::CompactorSettings;

use crate::support::*;
use crate::wide::{Op, Row, model_apply, model_row, new_table, op_clients, op_json, op_kind, op_strategy, visible};

/// Keys and their visible rows.
type State = BTreeMap<String, Row>;

/// One change as the feed gives it: completion time, key, op, before, after.
type Change = (String, String, String, Option<Row>, Option<Row>);

/// A commit that completed: its ops, and where its writes stand in merge
/// order (the compactions planned before it completed, then its start).
#[derive(Debug, Clone)]
struct Done {
    ops: Vec<Op>,
    epoch: usize,
    started: usize,
    completed: InstantTime,
}

/// The model's visible rows once `done` have completed. Versions merge in
/// write order: a compaction folds the logs completed before it into its
/// base, and later logs follow it in their own order (requested time), so
/// a commit's place is (compactions planned before it completed, start).
fn model_state(done: &[&Done]) -> State {
    let mut order: Vec<&Done> = done.to_vec();
    order.sort_by_key(|d| (d.epoch, d.started));
    let mut rows = BTreeMap::new();
    for d in order {
        model_apply(&mut rows, &d.ops);
    }
    visible(&rows)
}

/// The model's state at completion time `t`.
fn model_at(done: &[Done], t: &InstantTime) -> State {
    model_state(&done.iter().filter(|d| &d.completed <= t).collect::<Vec<_>>())
}

/// The changes the model expects of the commits completed in `(b, e]`.
fn expected_changes(done: &[Done], b: &InstantTime, e: &InstantTime) -> Vec<Change> {
    let mut commits: Vec<&Done> = done.iter().filter(|d| &d.completed > b && &d.completed <= e).collect();
    commits.sort_by(|x, y| x.completed.cmp(&y.completed));
    let mut out = Vec::new();
    for c in commits {
        let before = model_state(&done.iter().filter(|d| d.completed < c.completed).collect::<Vec<_>>());
        let after = model_at(done, &c.completed);
        let keys: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
        for k in keys {
            let (old, new) = (before.get(k).cloned(), after.get(k).cloned());
            let op = match (&old, &new) {
                (None, Some(_)) => "i",
                (Some(_), None) => "d",
                (Some(o), Some(n)) if o != n => "u",
                _ => continue,
            };
            out.push((c.completed.to_string(), k.clone(), op.to_string(), old, new));
        }
    }
    out
}

/// The feed's rows as the model's changes.
fn changes_of(rows: &RecordBatch) -> Vec<Change> {
    let text = |n: &str| rows.column_by_name(n).unwrap().as_string::<i32>().clone();
    let (op, key, completed) = (text("op"), text("record_key"), text("completion_time"));
    let image = |n: &str| rows.column_by_name(n).unwrap().as_any().downcast_ref::<StructArray>().unwrap().clone();
    let (before, after) = (image("before"), image("after"));
    let row = |s: &StructArray, i: usize| {
        (!s.is_null(i)).then(|| model_row(s.columns(), &Schema::new(s.fields().clone()), i).1)
    };
    (0..rows.num_rows())
        .map(|i| {
            let k = key.value(i).to_string();
            (completed.value(i).to_string(), k, op.value(i).to_string(), row(&before, i), row(&after, i))
        })
        .collect()
}

/// Applies `changes` to `state`, checking each against what it replaces:
/// an insert's key is absent, an update's and a delete's row before is the
/// one held.
fn replay(state: &mut State, changes: &[Change]) -> Result<(), String> {
    for (at, key, op, before, after) in changes {
        let held = state.get(key);
        let ok = match op.as_str() {
            "i" => held.is_none() && before.is_none() && after.is_some(),
            "u" => held == before.as_ref() && after.is_some() && before != after,
            "d" => held == before.as_ref() && held.is_some() && after.is_none(),
            _ => false,
        };
        if !ok {
            return Err(format!("change {op} of {key} at {at} (before {before:?}) does not follow {held:?}"));
        }
        match after {
            Some(row) => state.insert(key.clone(), row.clone()),
            None => state.remove(key),
        };
    }
    Ok(())
}

/// A round of the property: its ops' commits (one per kind of op, the
/// first delete alone) are started in order; a compaction may run while
/// they are open; then they complete in an order drawn from `seed`.
#[derive(Debug, Clone)]
struct Round {
    ops: Vec<Op>,
    compact: bool,
    seed: u64,
}

fn round_strategy() -> impl Strategy<Value = Round> {
    (prop::collection::vec(op_strategy(), 1..8), prop::bool::weighted(0.3), any::<u64>())
        .prop_map(|(ops, compact, seed)| Round { ops, compact, seed })
}

/// The commits of `ops`: one per kind in the order kinds first appear,
/// deletes one only (the first).
fn commits_of(ops: &[Op]) -> Vec<(usize, Vec<Op>)> {
    let mut commits: Vec<(usize, Vec<Op>)> = Vec::new();
    for op in ops {
        let k = op_kind(op);
        match commits.iter_mut().find(|(kind, _)| *kind == k) {
            Some((_, ops)) if k != 3 => ops.push(op.clone()),
            Some(_) => {}
            None => commits.push((k, vec![op.clone()])),
        }
    }
    commits
}

/// Starts a commit of `ops` on `client` and writes them.
async fn start(client: &WriteClient, ops: &[Op]) -> tributary::Commit {
    let mut c = client.start_commit().await.unwrap();
    c.write_json(&ops.iter().map(op_json).collect::<Vec<_>>(), "ops", 1).await.unwrap();
    c
}

/// Runs `rounds` on `table`: the commits that completed, and the
/// completion times of the compactions.
async fn run(table: &Table, rounds: &[Round]) -> (Vec<Done>, Vec<InstantTime>) {
    let clients = op_clients(table).await;
    let compactor = table.compactor(CompactorSettings::default()).await.unwrap();
    let (mut done, mut compactions) = (Vec::new(), Vec::new());
    let (mut started, mut epoch) = (0, 0);
    for round in rounds {
        let mut open = Vec::new();
        for (kind, ops) in commits_of(&round.ops) {
            open.push((start(&clients[kind], &ops).await, ops, started));
            started += 1;
        }
        if round.compact {
            compactions.extend(compactor.run_once().await.unwrap().into_iter().map(|s| s.completed));
            epoch += 1;
        }
        open.shuffle(&mut StdRng::seed_from_u64(round.seed));
        for (commit, ops, started) in open {
            let summary = commit.commit().await.unwrap();
            done.push(Done { ops, epoch, started, completed: summary.completed });
        }
    }
    (done, compactions)
}

/// Checks the feed of `(b, e]` against the model: the changes of each
/// commit, in completion order, and that replaying them onto the model at
/// `b` gives the model at `e`.
async fn check_window(table: &Table, done: &[Done], b: &InstantTime, e: &InstantTime) -> Result<(), TestCaseError> {
    let feed = table.changes(b, e).await.unwrap();
    let got = changes_of(&feed.rows);
    let end = if *e == InstantTime::LATEST { feed.end.clone() } else { e.clone() };
    prop_assert_eq!(&got, &expected_changes(done, b, &end), "changes of ({}, {}]", b, e);
    let mut state = model_at(done, b);
    replay(&mut state, &got).map_err(TestCaseError::fail)?;
    prop_assert_eq!(state, model_at(done, &end), "replaying ({}, {}] onto the model at {}", b, e, b);
    Ok(())
}

/// Cases of the property: `TRIBUTARY_CHANGES_CASES`, by default 16.
fn cases() -> u32 {
    std::env::var("TRIBUTARY_CHANGES_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(16)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// For windows starting at every completion point (commits,
    /// compactions, and before the first) and ending at the latest, and
    /// for each single step between consecutive points: the feed holds
    /// exactly the model's changes, each commit's against the state just
    /// before it completed (so a window's first before-image is the state
    /// at its start, and a version that never became visible changes
    /// nothing), and replaying it gives the state at the window's end.
    #[test]
    fn the_feed_replays_every_window_of_the_model(rounds in prop::collection::vec(round_strategy(), 1..6)) {
        let Some(place) = Place::new() else { return Ok(()) };
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async {
            let table = new_table(&place).await;
            let (done, compactions) = run(&table, &rounds).await;
            let all: Vec<&Done> = done.iter().collect();
            prop_assert_eq!(crate::wide::snapshot(&table).await, model_state(&all), "the snapshot");
            let mut points: Vec<InstantTime> = done.iter().map(|d| d.completed.clone()).collect();
            points.extend(compactions);
            points.push(InstantTime::EARLIEST);
            points.sort();
            for (n, b) in points.iter().enumerate() {
                check_window(&table, &done, b, &InstantTime::LATEST).await?;
                if let Some(e) = points.get(n + 1) {
                    check_window(&table, &done, b, e).await?;
                }
            }
            Ok::<_, TestCaseError>(())
        })?;
    }
}

/// A consumer task follows the feed window after window, from the start,
/// while writers commit at once (completing in any order), a compactor runs
/// and the cleaner keeps two commits; each window begins where the last
/// ended. Its replica, built from the feed alone, equals the table. A
/// window reaching before what the cleaner kept is refused.
#[test]
fn a_consumer_rebuilds_the_table_from_the_feed_alone() {
    let Some(place) = Place::new() else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let table = std::sync::Arc::new(new_table(&place).await);
        let (caught_up, mut position) = tokio::sync::watch::channel(InstantTime::EARLIEST);
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let consumer = {
            let table = table.clone();
            tokio::spawn(async move {
                let mut replica = State::new();
                let mut at = InstantTime::EARLIEST;
                let mut windows = 0;
                loop {
                    let last = *stopped.borrow();
                    let feed = table.changes(&at, &InstantTime::LATEST).await.unwrap();
                    replay(&mut replica, &changes_of(&feed.rows)).unwrap();
                    at = feed.end;
                    windows += 1;
                    caught_up.send_replace(at.clone());
                    if last {
                        return (replica, windows);
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
            })
        };
        let clients = op_clients(&table).await;
        let compactor = table.compactor(CompactorSettings::default()).await.unwrap();
        let mut rng = StdRng::seed_from_u64(41);
        let (mut cleaned, mut compacted) = (0, 0);
        for round in 0..24 {
            commit_at_once(&clients, &mut rng).await;
            if round % 3 == 2 {
                compacted += compactor.run_once().await.unwrap().len();
            }
            if round % 4 == 3 {
                // The consumer keeps up before the cleaner removes what its
                // next window would need.
                let latest = table.timeline().await.unwrap().latest_completed().unwrap().visible_at().clone();
                position.wait_for(|at| *at >= latest).await.unwrap();
                if table.clean(2).await.unwrap().is_some_and(|c| !c.deleted_files.is_empty()) {
                    cleaned += 1;
                }
            }
        }
        stop.send_replace(true);
        let (replica, windows) = consumer.await.unwrap();
        assert!(compacted > 0 && cleaned > 0, "{compacted} compactions and {cleaned} cleans ran");
        let want = crate::wide::snapshot(&table).await;
        assert_eq!(replica, want, "the replica built from {windows} windows of the feed");
        let err = table.changes(&InstantTime::EARLIEST, &InstantTime::LATEST).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains("cleaner removed"), "{err}");
    });
}

/// The change log (`init --change-log`): two change-log writers run at
/// once behind writers that commit at once (completing in any order), a
/// compactor and a cleaner that keeps two commits and does not wait for
/// them. Each reads the `.cdc` files of every change-log commit it made,
/// and only those. Replayed in commit order into one replica, they equal
/// the table at the end: the change log holds every change, once, in an
/// order each before-image follows, and each window begins where the one
/// before ended. Neither writer stops the other: both get commits through,
/// and a run that lost its window to the other fails as a conflict that
/// leaves nothing behind. The cleaner never removes what the change log's
/// next window needs, and removes the change data of commits older than
/// what it keeps.
#[test]
fn the_change_log_holds_the_feed_in_hudis_cdc_files() {
    let Some(place) = Place::new() else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let table = std::sync::Arc::new(crate::wide::new_table_with(&place, |o| o.change_log = true).await);
        let (stop, stopped) = tokio::sync::watch::channel(false);
        // The round the writers are in: the change-log writers run during
        // every fifth round only, so that the cleaner, every fourth, finds
        // them behind.
        let (rounds, round_now) = tokio::sync::watch::channel(0usize);
        let loggers: Vec<_> = (0..2)
            .map(|_| {
                let (table, stopped, round_now) = (table.clone(), stopped.clone(), round_now.clone());
                tokio::spawn(async move {
                    let writer = table.change_log_writer().await.unwrap();
                    let (mut recorded, mut lost) = (Vec::new(), 0);
                    loop {
                        let last = *stopped.borrow();
                        if !last && *round_now.borrow() % 5 != 4 {
                            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                            continue;
                        }
                        match writer.run_once().await {
                            Ok(Some(c)) => {
                                let files = change_data_files(&table, &c.instant).await;
                                assert_eq!(files.len(), c.files, "{c:?}");
                                let mut changes = Vec::new();
                                for f in &files {
                                    changes.extend(read_change_data(&table, f).await);
                                }
                                assert_eq!(changes.len() as u64, c.changes, "{c:?}");
                                recorded.push((c, files, changes));
                            }
                            Ok(None) => {}
                            Err(e) => {
                                // The other writer recorded the window first.
                                assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
                                lost += 1;
                            }
                        }
                        if last {
                            return (recorded, lost);
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    }
                })
            })
            .collect();
        let clients = op_clients(&table).await;
        let compactor = table.compactor(CompactorSettings::default()).await.unwrap();
        let mut rng = StdRng::seed_from_u64(43);
        let mut cleaned = Vec::new();
        for round in 0..24 {
            rounds.send_replace(round);
            commit_at_once(&clients, &mut rng).await;
            if round % 3 == 2 {
                compactor.run_once().await.unwrap();
            }
            if round % 4 == 3
                && let Some(c) = table.clean(2).await.unwrap()
            {
                cleaned.extend(c.deleted_files);
            }
        }
        stop.send_replace(true);
        let (mut recorded, mut lost) = (Vec::new(), 0);
        for (i, logger) in loggers.into_iter().enumerate() {
            let (theirs, their_lost) = logger.await.unwrap();
            println!("change-log writer {i}: {} windows recorded, {their_lost} lost", theirs.len());
            recorded.extend(theirs);
            lost += their_lost;
        }
        recorded.sort_by(|a, b| a.0.instant.cmp(&b.0.instant));
        let (mut replica, mut seen, mut begin) = (State::new(), std::collections::BTreeSet::new(), None);
        for (c, files, changes) in &recorded {
            if let Some(begin) = &begin {
                assert_eq!(&c.begin, begin, "{c:?} begins where the window before ended");
            }
            begin = Some(c.instant.clone());
            for f in files {
                assert!(seen.insert(f.clone()), "{f} recorded twice");
            }
            // One file per group: a key's changes are in order within its
            // group's file.
            replay(&mut replica, changes).unwrap();
        }
        let want = crate::wide::snapshot(&table).await;
        let commits = recorded.len();
        assert!(commits > 1, "{commits} change-log commits");
        assert_eq!(replica, want, "the replica built from {commits} change-log commits ({lost} runs lost)");
        let cdc = tributary::timeline::CHANGE_DATA_SUFFIX;
        assert!(cleaned.iter().any(|f| f.ends_with(cdc)), "old change data was cleaned: {cleaned:?}");
        let timeline = table.timeline().await.unwrap();
        assert_eq!(timeline.pending().count(), 0, "every lost run's instant was withdrawn");

        // A change-log writer made later stops none made before it: each
        // records the window after the last one recorded.
        let older = table.change_log_writer().await.unwrap();
        let newer = table.change_log_writer().await.unwrap();
        let mut last = recorded.last().map(|r| r.0.instant.clone()).unwrap();
        for writer in [&older, &newer, &older] {
            let mut c = clients[2].start_commit().await.unwrap();
            c.write_json(&[op_json(&Op::C { key: 1, note: 99, ts: 99 })], "ops", 1).await.unwrap();
            c.commit().await.unwrap();
            let done = writer.run_once().await.unwrap().expect("a window to record");
            assert_eq!(done.begin, last, "{done:?}");
            last = done.instant;
        }
    });
}

/// The `.cdc` files of the change-log commit at `instant`, by path.
async fn change_data_files(table: &Table, instant: &InstantTime) -> Vec<String> {
    use futures::TryStreamExt;
    let loc = table.location();
    let cdc = tributary::timeline::CHANGE_DATA_SUFFIX;
    let mut files: Vec<String> = loc
        .store
        .list(Some(&loc.root))
        .map_ok(|o| o.location.to_string())
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .into_iter()
        .filter(|p| p.ends_with(cdc) && p.contains(&format!("_{instant}.log.")))
        .collect();
    files.sort();
    files
}

/// The changes a `.cdc` file holds, decoded with the schema its block
/// names: Hudi's CDC records (`op`, `ts_ms`, `before`, `after`).
async fn read_change_data(table: &Table, path: &str) -> Vec<Change> {
    use object_store::ObjectStoreExt;
    let loc = table.location();
    let bytes = loc.store.get(&object_store::path::Path::from(path)).await.unwrap().bytes().await.unwrap();
    let mut changes = Vec::new();
    for block in tributary_format::LogBlock::decode_all(&bytes, path).unwrap() {
        assert_eq!(block.block_type, tributary_format::BlockType::CdcData, "{path}");
        let schema = block.header(tributary_format::HeaderKey::Schema).unwrap();
        let rows = tributary_format::decode_data_block(&block.content, schema, schema, path).unwrap();
        let op = rows.column_by_name("op").unwrap().as_string::<i32>().clone();
        let ts = rows.column_by_name("ts_ms").unwrap().as_string::<i32>().clone();
        let image = |n: &str| rows.column_by_name(n).unwrap().as_any().downcast_ref::<StructArray>().unwrap().clone();
        let (before, after) = (image("before"), image("after"));
        let row = |s: &StructArray, i: usize| {
            (!s.is_null(i)).then(|| model_row(s.columns(), &Schema::new(s.fields().clone()), i))
        };
        for i in 0..rows.num_rows() {
            let (b, a) = (row(&before, i), row(&after, i));
            let key = a.as_ref().or(b.as_ref()).map(|r| r.0.clone()).unwrap();
            changes.push((ts.value(i).to_string(), key, op.value(i).to_string(), b.map(|r| r.1), a.map(|r| r.1)));
        }
    }
    changes
}

/// One round of the consumer tests' writers: a few random ops, one commit
/// per kind of op, started in order and completing at once, in whatever
/// order they get there.
async fn commit_at_once(clients: &[WriteClient], rng: &mut StdRng) {
    let ops: Vec<Op> = (0..rng.random_range(1..8)).map(|_| random_op(rng)).collect();
    let mut open = Vec::new();
    for (kind, ops) in commits_of(&ops) {
        open.push(start(&clients[kind], &ops).await);
    }
    for summary in futures::future::join_all(open.into_iter().map(|c| c.commit())).await {
        summary.unwrap();
    }
}

/// An op of the consumer test's writers.
fn random_op(rng: &mut StdRng) -> Op {
    let key = rng.random_range(0..6);
    let ts = rng.random_range(1..60);
    match rng.random_range(0..4) {
        0 => Op::A { key, a1: rng.random(), ts_a: ts },
        1 => Op::B { key, b1: rng.random(), ts_b: ts },
        2 => Op::C { key, note: rng.random(), ts },
        _ => Op::Delete { key, ts },
    }
}

/// The feed through the binary: `tributary changes` prints what
/// [`Table::changes`] returns, `tributary sql` queries it as a table
/// (`@changes=BEGIN..END`), and a window that ends before it begins is
/// refused naming the table.
#[test]
fn the_binary_prints_and_queries_the_feed() {
    let Some(place) = Place::new() else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (want, first) = rt.block_on(async {
        let table = new_table(&place).await;
        let ops = |key, ts| vec![Op::C { key, note: 7, ts }, Op::A { key, a1: 1, ts_a: ts }];
        let rounds: Vec<Round> = (0..4u8)
            .map(|n| Round {
                ops: [ops(n % 3, 10 + n as i64), vec![Op::Delete { key: 2, ts: 12 }]].concat(),
                compact: n == 2,
                seed: n.into(),
            })
            .collect();
        let (done, _) = run(&table, &rounds).await;
        let feed = table.changes(&InstantTime::EARLIEST, &InstantTime::LATEST).await.unwrap();
        (changes_of(&feed.rows), done[0].completed.clone())
    });
    let uri = place.table("t").uri().to_string();
    let printed = tributary_ok(&["changes", &uri]);
    let lines: Vec<serde_json::Value> = printed.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let got: Vec<(String, String, String)> = lines
        .iter()
        .map(|l| {
            (
                l["completion_time"].as_str().unwrap().into(),
                l["record_key"].as_str().unwrap().into(),
                l["op"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expected: Vec<(String, String, String)> =
        want.iter().map(|c| (c.0.clone(), c.1.clone(), c.2.clone())).collect();
    assert_eq!(got, expected, "tributary changes");
    assert!(expected.iter().any(|c| c.2 == "u") && expected.iter().any(|c| c.2 == "d"), "{expected:?}");

    let query = "SELECT completion_time, record_key, op, after.a1 AS a1 FROM c WHERE op <> 'i' \
                 ORDER BY completion_time, record_key";
    let spec = format!("c={uri}@changes={first}..");
    let rows: Vec<serde_json::Value> =
        tributary_ok(&["sql", query, "--table", &spec]).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let later: Vec<&Change> = want.iter().filter(|c| c.0 > first.to_string() && c.2 != "i").collect();
    assert_eq!(rows.len(), later.len(), "{rows:?}");
    for (row, c) in rows.iter().zip(later) {
        assert_eq!((row["record_key"].as_str().unwrap(), row["op"].as_str().unwrap()), (c.1.as_str(), c.2.as_str()));
        assert_eq!(row["a1"].as_str(), c.4.as_ref().and_then(|r| r.a1.as_deref()), "{row}");
    }

    let err = tributary_err(&["changes", &uri, "--begin", "20990101000000000", "--end", "20200101000000000"]);
    assert!(err.contains("ends before it begins") && err.contains(place.table("t").uri()), "{err}");
    let err = tributary_err(&["sql", "SELECT * FROM c", "--table", &format!("c={uri}@changes=x")]);
    assert!(err.contains("changes=BEGIN..END"), "{err}");
}
