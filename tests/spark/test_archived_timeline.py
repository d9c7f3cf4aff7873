"""Tables whose oldest instants a Java writer archived into the LSM history
timeline (`.hoodie/timeline/history/`): Spark (Hudi 1.2.0) archives by
default after a commit. Tributary reads archived instants as completed,
with their completion times, so its snapshot, read-optimized, incremental
and time-travel reads still equal Spark's and the event-time model, its
compactor still folds the archived commits' logs, and a writer's checkpoint
survives the archival of the commit that recorded it. Both a table
Tributary wrote (then Spark wrote into it), a table Spark wrote alone, and a
table Tributary archived itself (then Spark wrote and archived too)."""

import random

from support import (
    Model,
    archived,
    data_rows,
    history_rows,
    init_table,
    meta_rows,
    nbcc_options,
    official_rows,
    our_rows,
    random_events,
    spark_rows,
    spark_write,
    start_writers,
    timeline,
    timeline_rows,
    tributary,
    wait_writers,
    write_jsonl,
)

#: Spark archives after each commit once more than 3 commits are active,
#: down to 2. Hudi requires `keep.min.commits` above the cleaner's retained
#: commits; Spark's automatic clean is off so that every file slice stays
#: and time travel to archived instants has its files.
ARCHIVE_SOON = {
    "hoodie.archive.automatic": "true",
    "hoodie.keep.min.commits": "2",
    "hoodie.keep.max.commits": "3",
    "hoodie.cleaner.commits.retained": "1",
    "hoodie.clean.automatic": "false",
}

METADATA_OFF = {"hoodie.metadata.enable": "false"}


def check_snapshot(spark, table, model, what):
    ours = our_rows(table)
    assert data_rows(ours) == model.rows(), f"{what}: tributary read vs the model"
    theirs = spark_rows(spark, table, **METADATA_OFF)
    assert data_rows(theirs) == model.rows(), f"{what}: Spark snapshot vs the model"
    assert meta_rows(theirs) == meta_rows(ours), f"{what}: Spark snapshot vs tributary read"


def check_read_optimized(spark, table, what):
    ours = our_rows(table, "--query", "read-optimized")
    theirs = spark_rows(spark, table, **{"hoodie.datasource.query.type": "read_optimized"}, **METADATA_OFF)
    assert meta_rows(theirs) == meta_rows(ours), f"{what}: Spark read-optimized vs tributary"
    return ours


def check_incremental(spark, table, begin, end, what):
    ours = our_rows(table, "--query", "incremental", "--begin", begin, "--end", end)
    assert ours, f"{what}: the incremental range ({begin}, {end}] is empty, the check would prove nothing"
    opts = {
        "hoodie.datasource.query.type": "incremental",
        "hoodie.datasource.read.begin.instanttime": begin,
        "hoodie.datasource.read.end.instanttime": end,
    }
    theirs = spark_rows(spark, table, **opts, **METADATA_OFF)
    assert meta_rows(theirs) == meta_rows(ours), f"{what}: Spark incremental ({begin}, {end}]"


def check_time_travel(spark, table, instant, model_rows, what):
    ours = our_rows(table, "--as-of", instant)
    assert data_rows(ours) == model_rows, f"{what}: tributary read --as-of {instant} vs the model"
    theirs = spark_rows(spark, table, **{"as.of.instant": instant}, **METADATA_OFF)
    assert meta_rows(theirs) == meta_rows(ours), f"{what}: Spark as.of.instant {instant} vs tributary"


def write_concurrently(table, tmp, batches, tag, commit_every=60):
    return start_writers(table, tmp, batches, tag, "--commit-every", commit_every, id_prefix=tag)


def deltacommits(table):
    return [i for i in timeline_rows(table) if i["action"] == "deltacommit" and i["state"] == "COMPLETED"]


def test_spark_archives_a_table_tributary_wrote(spark, tmp_path):
    rng = random.Random(71)
    base_ts = 1_760_000_000_000
    table = init_table(tmp_path / "arch", partitioned=True, buckets=4, bucket_hash="hudi-java")
    model = Model()

    # Phase a: two concurrent writers, then two single commits that record
    # a checkpoint each.
    batches = [random_events(rng, 150, 240, base_ts) for _ in range(2)]
    wait_writers(write_concurrently(table, tmp_path, batches, "a"))
    for b in batches:
        model.commit(b)
    for n in (1, 2):
        events = random_events(rng, 150, 40, base_ts)
        f = write_jsonl(tmp_path / f"cp{n}.jsonl", events)
        tributary("write", table, "--input", f, "--writer-id", "cp", "--checkpoint", f"offset-{n}")
        model.commit(events)
    as_of_a = max(i["requested"] for i in deltacommits(table))
    model_a = model.rows()

    # A compaction, then phase b: writers with a compaction running among
    # them, then phase c, whose commits follow the last compaction (Hudi
    # keeps those active).
    tributary("compact", table)
    batches = [random_events(rng, 150, 180, base_ts) for _ in range(2)]
    procs = write_concurrently(table, tmp_path, batches, "b")
    tributary("compact", table)
    wait_writers(procs)
    for b in batches:
        model.commit(b)
    tributary("compact", table)
    batches = [random_events(rng, 150, 120, base_ts)]
    wait_writers(write_concurrently(table, tmp_path, batches, "c"))
    model.commit(batches[0])
    ours_before = our_rows(table)
    assert data_rows(ours_before) == model.rows()

    # Spark writes into the table four times; each commit archives.
    opts = {**nbcc_options("arch", buckets=4, metadata=False), **ARCHIVE_SOON}
    for _ in range(4):
        events = random_events(rng, 150, 60, base_ts)
        spark_write(spark, table, events, opts)
        model.commit(events)

    history = history_rows(table)
    assert len(history) >= 8, history
    check_snapshot(spark, table, model, "archived")
    check_read_optimized(spark, table, "archived")
    check_time_travel(spark, table, as_of_a, model_a, "an archived instant")
    archived_commits = sorted(r["completionTime"] for r in history if r["action"] == "deltacommit")
    latest = max(i["completed"] for i in timeline_rows(table) if i["completed"] != "-")
    # A window inside the history, and one across its end into the active timeline.
    check_incremental(spark, table, archived_commits[1], archived_commits[-2], "inside the history")
    check_incremental(spark, table, archived_commits[2], latest, "across the archive boundary")

    # The checkpoint of the archived commit that recorded it.
    assert tributary("checkpoint", table, "--writer-id", "cp").strip() == "offset-2"

    # What Spark archived is what `tributary timeline` marks archived: the
    # phase-a commits and checkpoint commits, and compactions (recorded as
    # `commit`), each with the completion time the history holds.
    ours_archived = {i["requested"]: i for i in archived(table)}
    assert set(ours_archived) == {r["instantTime"] for r in history}
    for r in history:
        i = ours_archived[r["instantTime"]]
        assert (i["completed"], i["state"]) == (r["completionTime"], "COMPLETED"), (i, r)
        assert i["action"] == r["action"], (i, r)
    assert any(r["action"] == "commit" for r in history), "no compaction was archived"
    assert all(i["requested"] in ours_archived for i in deltacommits(table) if i["requested"] <= as_of_a)
    assert "archived" not in tributary("timeline", table).splitlines()[-1]

    # Tributary compacts what is left (archived commits' logs among it);
    # both engines read the model.
    tributary("compact", table)
    check_snapshot(spark, table, model, "compacted after archival")
    assert data_rows(check_read_optimized(spark, table, "compacted after archival")) == model.rows()


def test_tributary_reads_a_table_spark_wrote_and_archived(spark, tmp_path):
    """Spark alone writes the table, compacting inline every third commit
    (so compactions are archived too) and archiving; no deletes, whose
    resurrection after Hudi's compaction `test_spark_compacts_our_logs`
    covers."""
    rng = random.Random(72)
    base_ts = 1_760_000_000_000
    table = tmp_path / "spark_arch"
    model = Model()
    opts = {
        **nbcc_options("spark_arch", buckets=4, metadata=False),
        **ARCHIVE_SOON,
        "hoodie.compact.inline": "true",
        "hoodie.compact.inline.max.delta.commits": "3",
    }
    as_of = None
    for n in range(8):
        events = random_events(rng, 150, 80, base_ts, delete_share=0)
        spark_write(spark, table, events, opts, mode="overwrite" if n == 0 else "append")
        model.commit(events)
        if n == 1:
            as_of = timeline(table)[-1]["requested"]
            model_as_of = model.rows()

    history = history_rows(table)
    assert any(r["action"] == "commit" for r in history), f"no compaction was archived: {history}"
    assert as_of in {r["instantTime"] for r in history}

    check_snapshot(spark, table, model, "Spark's archived table")
    assert data_rows(check_read_optimized(spark, table, "Spark's archived table")) != []
    check_time_travel(spark, table, as_of, model_as_of, "Spark's archived instant")
    archived_commits = sorted(r["completionTime"] for r in history if r["action"] == "deltacommit")
    latest = max(i["completed"] for i in timeline_rows(table) if i["completed"] != "-")
    check_incremental(spark, table, archived_commits[0], latest, "across the archive boundary")
    assert {i["requested"] for i in archived(table)} == {r["instantTime"] for r in history}

    tributary("compact", table)
    check_snapshot(spark, table, model, "compacted by Tributary")
    assert data_rows(check_read_optimized(spark, table, "compacted by Tributary")) == model.rows()


#: `tributary archive` bounds as tight as ARCHIVE_SOON's.
TRIBUTARY_ARCHIVE_SOON = (
    "--keep-min-commits", "2", "--keep-max-commits", "3",
    "--cleaner-commits-retained", "0", "--compaction-delta-commits", "1",
)


def test_spark_and_the_official_reader_read_a_table_tributary_archived(spark, tmp_path):
    """Tributary archives its own table; Spark reads the history it wrote
    (snapshot, time travel to an archived instant, incremental windows in
    and across it), as does the official reader (which reads no history).
    Then Spark writes and archives into the same history, and Tributary
    archives after it."""
    rng = random.Random(73)
    base_ts = 1_760_000_000_000
    table = init_table(tmp_path / "ours", partitioned=True, buckets=4, bucket_hash="hudi-java")
    model = Model()
    as_of = None
    for phase in range(4):
        batches = [random_events(rng, 150, 120, base_ts) for _ in range(2)]
        procs = write_concurrently(table, tmp_path, batches, f"p{phase}")
        tributary("compact", table)  # among the writers: some straddle it
        wait_writers(procs)
        for b in batches:
            model.commit(b)
        if phase == 0:
            as_of = max(i["requested"] for i in deltacommits(table))
            model_as_of = model.rows()
    tributary("compact", table)
    out = tributary("archive", table, *TRIBUTARY_ARCHIVE_SOON)
    assert out.startswith("archived "), out

    history = history_rows(table)
    assert as_of in {r["instantTime"] for r in history}, (as_of, history)
    assert {i["requested"] for i in archived(table)} == {r["instantTime"] for r in history}
    check_snapshot(spark, table, model, "Tributary's archive")
    check_read_optimized(spark, table, "Tributary's archive")
    check_time_travel(spark, table, as_of, model_as_of, "an instant Tributary archived")
    archived_commits = sorted(r["completionTime"] for r in history if r["action"] == "deltacommit")
    latest = max(i["completed"] for i in timeline_rows(table) if i["completed"] != "-")
    check_incremental(spark, table, archived_commits[1], archived_commits[-2], "inside Tributary's history")
    check_incremental(spark, table, archived_commits[2], latest, "across Tributary's archive boundary")
    assert data_rows(official_rows(table)) == model.rows(), "the official reader vs the model"

    # Spark writes and archives into the history Tributary began; then
    # Tributary archives again on top of Spark's snapshot.
    opts = {**nbcc_options("ours", buckets=4, metadata=False), **ARCHIVE_SOON}
    for _ in range(3):
        events = random_events(rng, 150, 60, base_ts)
        spark_write(spark, table, events, opts)
        model.commit(events)
    spark_history = history_rows(table)
    assert len(spark_history) > len(history), "Spark archived into the history"
    for _ in range(2):
        events = random_events(rng, 150, 60, base_ts)
        tributary("write", table, "--input", write_jsonl(tmp_path / "more.jsonl", events))
        model.commit(events)
    tributary("archive", table, *TRIBUTARY_ARCHIVE_SOON)
    assert {i["requested"] for i in archived(table)} == {r["instantTime"] for r in history_rows(table)}
    check_snapshot(spark, table, model, "archived by both")
    check_time_travel(spark, table, as_of, model_as_of, "an instant Tributary archived, after Spark's archiving")
    assert data_rows(official_rows(table)) == model.rows(), "the official reader vs the model, archived by both"
