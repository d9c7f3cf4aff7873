"""One table, both engines at once: a Spark NBCC writer and Tributary writer
processes upsert into the same table at the same time, under Hudi's
`FileSystemBasedLockProvider` lock file (`tributary --lock hudi-file`), with
wait-for-skew instants on both sides. Afterwards Spark, Tributary and the
official Rust reader all read the event-time model of every committed event,
and after a compaction too. And with archiving on both sides: Spark archives
after each of its commits while `tributary serve` archives every second, both
into the one LSM history, under the one lock."""

import json
import os
import random
import re
import signal
import subprocess
import threading
import time

from support import (
    official_rows,
    Model,
    data_rows,
    history_folder,
    history_rows,
    init_table,
    meta_rows,
    nbcc_options,
    our_rows,
    random_events,
    spark_rows,
    spark_write,
    start_writers,
    timeline,
    timeline_rows,
    tributary,
    tributary_bin,
    wait_writers,
    write_jsonl,
)

#: What a Spark writer sets to share a table with Tributary writers (see
#: docs/interop.md), beside the NBCC bucket-index options.
SHARED = {
    "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
    "hoodie.write.lock.filesystem.expire": "1",
    "hoodie.write.lock.client.wait_time_ms_between_retry": "100",
    "hoodie.write.lock.client.num_retries": "1200",
    "hoodie.metadata.enable": "false",
    "hoodie.archive.automatic": "false",
    "hoodie.time.generator.type": "WAIT_TO_ADJUST_SKEW",
    "hoodie.time.generator.max_expected_clock_skew_ms": "200",
}
TRIBUTARY_LOCK = ["--lock", "hudi-file", "--hudi-lock-expire", "1m"]


def test_spark_and_tributary_write_one_table_at_once(spark, tmp_path):
    rng = random.Random(41)
    # A table shared with Java writers records their time mode.
    table = init_table(tmp_path / "shared", partitioned=True, buckets=4, bucket_hash="hudi-java", time_mode="wait-for-skew")
    base_ts = 1_760_000_000_000
    model = Model()

    # Spark's first commit into the table Tributary created (it warms up
    # Spark's write path, so the later ones are quick).
    opts = {**nbcc_options("shared", buckets=4), **SHARED}
    spark_batches = [random_events(rng, 150, 60, base_ts) for _ in range(4)]
    spark_write(spark, table, spark_batches[0], opts)

    # Two Tributary writer processes, thirty commits each, and Spark's
    # commits while they write.
    ours = [random_events(rng, 150, 900, base_ts) for _ in range(2)]
    writers = start_writers(table, tmp_path, ours, "ours", "--commit-every", "30", *TRIBUTARY_LOCK)
    overlapped = 0
    for events in spark_batches[1:]:
        overlapped += any(p.poll() is None for p, _ in writers)
        spark_write(spark, table, events, opts)
    assert overlapped, "the Tributary writers finished before a Spark commit began"
    wait_writers(writers)
    for events in spark_batches + ours:
        model.commit(events)

    tl = [i for i in timeline(table) if i["action"] == "deltacommit"]
    assert all(i["state"] == "COMPLETED" for i in tl), tl
    assert len(tl) == 2 * 30 + 4, tl
    completions = [i["completed"] for i in tl]
    assert len(set(completions)) == len(completions), "two commits completed at one time"
    props = (table / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.version=8" in props
    assert not (table / ".hoodie" / "lock").exists(), "the lock file was left behind"

    expected = model.rows()
    assert data_rows(our_rows(table)) == expected, "tributary read vs the model"
    for md in ("false", "true"):
        assert data_rows(spark_rows(spark, table, **{"hoodie.metadata.enable": md})) == expected, f"Spark (metadata {md})"
    assert data_rows(official_rows(table)) == expected, "the official Rust reader vs the model"

    tributary("compact", table, *TRIBUTARY_LOCK)
    assert data_rows(our_rows(table)) == expected
    assert data_rows(spark_rows(spark, table, **{"hoodie.metadata.enable": "false"})) == expected


#: SHARED with Spark's archiving on and as tight as ARCHIVE_SOON in
#: test_archived_timeline.py: after each commit Spark archives once more
#: than 3 commits are active, down to 2 (Hudi needs `keep.min.commits` above
#: the cleaner's retained commits; its cleaning is off so that time travel
#: keeps its files). One delta commit is enough for a compaction by count,
#: so that rule does not hold Spark's archiving back, and Spark merges the
#: history's files three at a time (10 by default), Tributary's among them.
SHARED_ARCHIVING = {
    **SHARED,
    "hoodie.archive.automatic": "true",
    "hoodie.keep.min.commits": "2",
    "hoodie.keep.max.commits": "3",
    "hoodie.cleaner.commits.retained": "1",
    "hoodie.clean.automatic": "false",
    "hoodie.compact.inline.max.delta.commits": "1",
    "hoodie.timeline.compaction.batch.size": "3",
}

#: `tributary serve` with the same bounds, archiving every second and
#: compacting every two; no cleaning (time travel keeps its files).
SERVE_ARCHIVING = [
    "--archive-every", "1s", "--compact-every", "2s", "--clean-every", "0s",
    "--keep-min-commits", "2", "--keep-max-commits", "3",
    "--cleaner-commits-retained", "0", "--compaction-delta-commits", "1",
    "--time-mode", "wait-for-skew",
]


class HistoryWatch(threading.Thread):
    """Watches the history folder while both archivers run: each Parquet
    file once it is whole, with its writer (the footer's `created_by`:
    parquet-mr is Java's, parquet-rs Tributary's), its level, its instants
    and when it was first seen. A history file is deleted only several
    snapshots after a merge replaced it, so polling every 50 ms sees every
    one."""

    def __init__(self, table):
        super().__init__(daemon=True)
        self.folder = history_folder(table)
        self.files = {}
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            self.poll()
            self.done.wait(0.05)
        self.poll()

    def stop(self):
        self.done.set()
        self.join()

    def poll(self):
        import pyarrow.parquet as pq

        try:
            names = sorted(os.listdir(self.folder))
        except FileNotFoundError:
            return
        for name in names:
            if name.startswith(".") or not name.endswith(".parquet") or name in self.files:
                continue
            try:
                f = pq.ParquetFile(self.folder / name)
                instants = f.read(columns=["instantTime"]).column(0).to_pylist()
                creator = f.metadata.created_by or ""
            except Exception:  # not whole yet, or gone: the next poll decides
                continue
            writer = "java" if creator.startswith("parquet-mr") else "tributary" if creator.startswith("parquet-rs") else creator
            level = int(name[: -len(".parquet")].rsplit("_", 1)[1])
            self.files[name] = {"writer": writer, "level": level, "instants": instants, "seen": time.monotonic()}

    def level0(self):
        """The level-0 files (one per archiving run), in the order they appeared."""
        return sorted(((n, f) for n, f in self.files.items() if f["level"] == 0), key=lambda nf: nf[1]["seen"])


def active_instants(table):
    """Requested time -> completion time (None while pending) of the instants
    whose files are in `.hoodie/timeline/`, read from the file names."""
    out = {}
    for p in (table / ".hoodie" / "timeline").iterdir():
        if p.is_dir() or p.name.startswith("."):
            continue
        stem = p.name.split(".", 1)[0]
        requested, _, completed = stem.partition("_")
        out[requested] = completed or out.get(requested)
    return out


def check_history_snapshot(table):
    """`_version_` names the newest manifest; every file the manifest lists
    is there, with the length it records; every Parquet file in the folder
    is listed by a manifest still there (history cleaning left no orphan).
    Returns the latest manifest's file names."""
    folder = history_folder(table)
    version = int((folder / "_version_").read_text().strip())
    manifests = sorted(int(p.name[len("manifest_"):]) for p in folder.glob("manifest_*"))
    assert manifests and manifests[-1] == version, f"_version_ {version}, manifests {manifests}"
    latest = json.loads((folder / f"manifest_{version}").read_text())["files"]
    for f in latest:
        path = folder / f["fileName"]
        assert path.is_file(), f"manifest_{version} lists {f['fileName']}, which is missing: {sorted(os.listdir(folder))}"
        assert path.stat().st_size == f["fileLen"], (f, path.stat().st_size)
    listed = {f["fileName"] for v in manifests for f in json.loads((folder / f"manifest_{v}").read_text())["files"]}
    orphans = {p.name for p in folder.glob("*.parquet")} - listed
    assert not orphans, f"history files no manifest lists: {orphans}"
    return [f["fileName"] for f in latest]


def stale_plan_read(table, error, watch):
    """When a Spark write failed reading the plan of an instant that is in
    the history (archived while the write was pending: Hudi's write path
    reads plans of the instants its timeline, loaded at the start, holds
    pending), says so, with the history's listing; else None."""
    m = re.search(r"timeline/(\d{17})\.(\w+)\.requested does not exist", str(error))
    if not m:
        return None
    instant = m.group(1)
    into = {n: f["writer"] for n, f in watch.files.items() if instant in f["instants"]}
    listing = sorted(os.listdir(history_folder(table)))
    return (
        f"Spark's write failed reading {m.group(0)}: the {m.group(2)} {instant} was archived while the write was "
        f"pending, into {into or 'no history file seen'}; history folder: {listing}"
    )


def test_spark_and_tributary_archive_one_table_at_once(spark, tmp_path):
    """Hudi's archiver (1.x `TimelineArchiverV2`) holds the table lock for
    its whole run whenever a lock provider or a multi-writer concurrency
    mode is set, and Tributary's holds it too (`compaction/src/archive.rs`):
    with the one lock file they take turns. Spark commits with archiving on
    while `tributary serve` archives every second and Tributary writers
    commit; afterwards every instant is in exactly one place (active, or
    one history file), the history's snapshot is whole, and every engine
    reads the model."""
    rng = random.Random(43)
    table = init_table(tmp_path / "both", partitioned=True, buckets=4, bucket_hash="hudi-java", time_mode="wait-for-skew")
    base_ts = 1_760_000_000_000
    model = Model()
    opts = {**nbcc_options("both", buckets=4), **SHARED_ARCHIVING}

    # A Spark commit (it warms up Spark's write path) and a Tributary one,
    # the instant the time travel below goes back to once it is archived.
    events = random_events(rng, 150, 60, base_ts)
    spark_write(spark, table, events, opts)
    model.commit(events)
    events = random_events(rng, 150, 60, base_ts)
    tributary("write", table, "--input", write_jsonl(tmp_path / "first.jsonl", events), "--writer-id", "first", *TRIBUTARY_LOCK)
    model.commit(events)
    as_of = max(i["requested"] for i in timeline(table) if i["action"] == "deltacommit")
    model_as_of = model.rows()

    # The service, two Tributary writers (thirty commits each) and Spark's
    # commits, all at once.
    watch = HistoryWatch(table)
    watch.start()
    serve_out, serve_err = tmp_path / "serve.out", tmp_path / "serve.err"
    with open(serve_out, "w") as out, open(serve_err, "w") as err:
        serve = subprocess.Popen(
            [str(tributary_bin()), "serve", str(table), *TRIBUTARY_LOCK, *SERVE_ARCHIVING], stdout=out, stderr=err
        )
    ours = [random_events(rng, 150, 900, base_ts) for _ in range(2)]
    writers = start_writers(table, tmp_path, ours, "ours", "--commit-every", "30", *TRIBUTARY_LOCK)
    spark_commits = []

    def spark_commit(writing):
        events = random_events(rng, 150, 60, base_ts)
        start = time.monotonic()
        try:
            spark_write(spark, table, events, opts)
        except Exception as e:
            raise AssertionError(stale_plan_read(table, e, watch) or "Spark's write failed") from e
        spark_commits.append((start, time.monotonic(), serve.poll() is None, writing and any(p.poll() is None for p, _ in writers)))
        model.commit(events)

    try:
        for _ in range(8):
            spark_commit(writing=True)
        wait_writers(writers)
        for events in ours:
            model.commit(events)
        # One more Spark commit once the writers are done, with the service
        # still archiving: it archives what they left.
        spark_commit(writing=False)
        time.sleep(2)  # a round of the service's archiving after it
    finally:
        if serve.poll() is None:
            serve.send_signal(signal.SIGTERM)
        try:
            code = serve.wait(timeout=120)
        finally:
            if serve.poll() is None:
                serve.kill()
            for p, _ in writers:
                if p.poll() is None:
                    p.kill()
            watch.stop()
            # The history's files as they appeared, for a failure's post-mortem.
            (tmp_path / "history-files.json").write_text(json.dumps(watch.files, indent=1))
    report = serve_out.read_text()
    errors = serve_err.read_text()
    assert code == 0, f"serve exited {code}:\n{report}\n{errors}"
    assert f"{table}: stopped after" in report and "(0 failed)" in report, f"{report}\n{errors}"
    assert all(serving for _, _, serving, _ in spark_commits), "the service stopped before Spark's last commit"
    assert sum(writing for _, _, _, writing in spark_commits) >= 2, "the Tributary writers finished too soon"

    # Both archived, in turns: level-0 files (one per archiving run) of
    # both writers, Java's and Tributary's alternating at least twice, and
    # Java's level-0 rows are the instants each of Spark's archiving runs
    # took, Tributary's the ones the service reports.
    level0 = watch.level0()
    by = {w: [f for _, f in level0 if f["writer"] == w] for w in ("java", "tributary")}
    writers_in_order = [f["writer"] for _, f in level0]
    assert set(writers_in_order) <= {"java", "tributary"}, writers_in_order
    assert len(by["java"]) >= 2 and len(by["tributary"]) >= 2, writers_in_order
    turns = sum(a != b for a, b in zip(writers_in_order, writers_in_order[1:]))
    assert turns >= 2, f"the archivers did not take turns: {writers_in_order}"
    reported = sum(int(line.split()[2]) for line in report.splitlines() if ": archived " in line)
    assert reported == sum(len(f["instants"]) for f in by["tributary"]), (report, by["tributary"])
    first, last = spark_commits[0][0], spark_commits[-1][1]
    assert any(first <= f["seen"] <= last for f in by["tributary"]), "Tributary archived nothing while Spark committed"
    assert all(any(s <= f["seen"] <= e + 1 for s, e, *_ in spark_commits) for f in by["java"]), (
        "a Java history file appeared outside Spark's commits"
    )

    # Every instant archived once: no instant in two level-0 files, and the
    # history's snapshot holds exactly their instants, none twice, none
    # still active.
    archived_by_run = [t for _, f in level0 for t in f["instants"]]
    assert len(archived_by_run) == len(set(archived_by_run)), f"an instant archived twice: {level0}"
    history = history_rows(table)
    in_history = [r["instantTime"] for r in history]
    assert len(in_history) == len(set(in_history)), f"an instant twice in the history: {history}"
    assert set(in_history) == set(archived_by_run), (in_history, level0)
    active = active_instants(table)
    assert not set(active) & set(in_history), f"active and archived: {sorted(set(active) & set(in_history))}"
    names = check_history_snapshot(table)
    assert any(f["level"] > 0 for f in watch.files.values()), f"no history merge happened: {names}"

    # `tributary timeline` has every commit once, completed: archived
    # exactly when in the history, with the history's completion time.
    tl = timeline_rows(table)
    requested = [i["requested"] for i in tl]
    assert len(requested) == len(set(requested)), "an instant listed twice"
    assert all(i["state"] == "COMPLETED" for i in tl), [i for i in tl if i["state"] != "COMPLETED"]
    deltas = [i for i in tl if i["action"] == "deltacommit"]
    assert len(deltas) == 1 + 1 + 2 * 30 + 9, len(deltas)
    compactions = sum(int(line.split()[-2]) for line in report.splitlines() if ": compacted " in line)
    assert sum(i["action"] in ("compaction", "commit") for i in tl) == compactions, (report, tl)
    assert {i["requested"] for i in tl if i["archived"]} == set(in_history)
    completed = {r["instantTime"]: r["completionTime"] for r in history}
    assert all(i["completed"] == completed[i["requested"]] for i in tl if i["archived"])
    assert all(active[i["requested"]] == i["completed"] for i in tl if not i["archived"])
    assert as_of in completed, "the time-travel instant was not archived"
    assert not (table / ".hoodie" / "lock").exists(), "the lock file was left behind"
    assert "hoodie.table.version=8" in (table / ".hoodie" / "hoodie.properties").read_text()

    # Every engine reads the model; each row's commit is a completed instant.
    expected = model.rows()
    ours_read = our_rows(table)
    assert data_rows(ours_read) == expected, "tributary read vs the model"
    assert {r["_hoodie_commit_time"] for r in ours_read} <= set(requested)
    theirs = spark_rows(spark, table, **{"hoodie.metadata.enable": "false"})
    assert data_rows(theirs) == expected, "Spark vs the model"
    assert meta_rows(theirs) == meta_rows(ours_read), "Spark vs tributary read"
    assert data_rows(our_rows(table, "--as-of", as_of)) == model_as_of, "tributary read --as-of an archived instant"
    back = spark_rows(spark, table, **{"as.of.instant": as_of, "hoodie.metadata.enable": "false"})
    assert data_rows(back) == model_as_of, "Spark as.of.instant an archived instant"

    # The official reader (hudi-rs 0.5.0) reads no history and misplaces an
    # archived log that straddles a compaction (docs/interop.md, Archival):
    # after a last compaction every latest slice is a base file.
    tributary("compact", table, *TRIBUTARY_LOCK)
    assert data_rows(official_rows(table)) == expected, "the official Rust reader vs the model"
    assert data_rows(our_rows(table)) == expected
    assert data_rows(spark_rows(spark, table, **{"hoodie.metadata.enable": "false"})) == expected
