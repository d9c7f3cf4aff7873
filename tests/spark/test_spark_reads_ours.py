"""Spark (Apache Hudi's Java reader) reads tables Tributary wrote: several
concurrent writers, deletes and out-of-order events, partitioned and not,
through every state a table goes through (logs only, compacted, cleaned,
after a rolled-back failed write), with every query type, and with Spark's
metadata-table reads on and off. Each read equals the event-time model and
Tributary's own read of the same query."""

import random
import subprocess
import time

import pytest

from support import (
    Model,
    data_rows,
    init_table,
    meta_rows,
    our_rows,
    random_events,
    spark_rows,
    timeline,
    tributary,
    tributary_bin,
    write_jsonl,
)

WRITERS = 3


def write_concurrently(table, tmp, batches, tag):
    """Each batch written by its own `tributary write` process, all at once,
    with several commits each; returns when all have committed."""
    procs = []
    for i, events in enumerate(batches):
        f = write_jsonl(tmp / f"{tag}-{i}.jsonl", events)
        args = ["write", table, "--input", f, "--writer-id", f"w{i}", "--commit-every", "60", "--tasks", "2"]
        procs.append(subprocess.Popen([str(tributary_bin()), *map(str, args)], stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate()
        assert p.returncode == 0, err


def completed_deltacommits(table):
    return [i for i in timeline(table) if i["action"] == "deltacommit" and i["state"] == "COMPLETED"]


class History:
    """A table written through its states, with the model and instants each
    state's checks need."""

    def __init__(self, table, tmp, seed, partitioned):
        self.table, self.tmp, self.rng = table, tmp, random.Random(seed)
        self.model = Model()
        self.base_ts = 1_760_000_000_000
        init_table(table, partitioned=partitioned, bucket_hash="murmur3" if partitioned else "hudi-java")

    def phase(self, tag, events_per_writer=200):
        batches = [random_events(self.rng, 150, events_per_writer, self.base_ts) for _ in range(WRITERS)]
        write_concurrently(self.table, self.tmp, batches, tag)
        for b in batches:
            self.model.commit(b)


def spark_metadata(on):
    return {"hoodie.metadata.enable": "true" if on else "false"}


def check_snapshot(spark, h, what):
    ours = our_rows(h.table)
    assert data_rows(ours) == h.model.rows(), f"{what}: tributary read vs the model"
    for md in (False, True):
        theirs = spark_rows(spark, h.table, **spark_metadata(md))
        assert data_rows(theirs) == h.model.rows(), f"{what}: Spark snapshot (metadata {md}) vs the model"
        assert meta_rows(theirs) == meta_rows(ours), f"{what}: Spark snapshot (metadata {md}) vs tributary read"


def check_read_optimized(spark, h, what):
    ours = our_rows(h.table, "--query", "read-optimized")
    for md in (False, True):
        theirs = spark_rows(spark, h.table, **{"hoodie.datasource.query.type": "read_optimized"}, **spark_metadata(md))
        assert meta_rows(theirs) == meta_rows(ours), f"{what}: Spark read-optimized (metadata {md}) vs tributary"
    return ours


def check_incremental(spark, h, begin, end, what):
    ours = our_rows(h.table, "--query", "incremental", "--begin", begin, "--end", end)
    assert ours, f"{what}: the incremental range ({begin}, {end}] is empty, the check would prove nothing"
    for md in (False, True):
        opts = {
            "hoodie.datasource.query.type": "incremental",
            "hoodie.datasource.read.begin.instanttime": begin,
            "hoodie.datasource.read.end.instanttime": end,
        }
        theirs = spark_rows(spark, h.table, **opts, **spark_metadata(md))
        assert meta_rows(theirs) == meta_rows(ours), f"{what}: Spark incremental ({begin}, {end}] (metadata {md})"


def check_time_travel(spark, h, instant, model, what):
    ours = our_rows(h.table, "--as-of", instant)
    assert data_rows(ours) == model, f"{what}: tributary read --as-of {instant} vs the model"
    for md in (False, True):
        theirs = spark_rows(spark, h.table, **{"as.of.instant": instant}, **spark_metadata(md))
        assert meta_rows(theirs) == meta_rows(ours), f"{what}: Spark as.of.instant {instant} (metadata {md})"


@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
def test_spark_reads_every_state_and_query(spark, tmp_path, partitioned):
    h = History(tmp_path / "t", tmp_path, seed=7 if partitioned else 8, partitioned=partitioned)

    # Logs only.
    h.phase("a")
    first = completed_deltacommits(h.table)
    model_a = h.model.rows()
    h.phase("b")
    check_snapshot(spark, h, "logs only")
    assert check_read_optimized(spark, h, "logs only") == []
    commits = completed_deltacommits(h.table)
    mid = first[-1]["completed"]
    check_incremental(spark, h, mid, commits[-1]["completed"], "logs only")
    check_time_travel(spark, h, first[-1]["requested"], model_a, "logs only")

    # Compacted, then more logs on top of the base files.
    tributary("compact", h.table)
    model_c = h.model.rows()
    assert data_rows(check_read_optimized(spark, h, "compacted")) == model_c
    check_snapshot(spark, h, "compacted")
    h.phase("c")
    check_snapshot(spark, h, "logs over base files")
    assert data_rows(check_read_optimized(spark, h, "logs over base files")) == model_c
    later = completed_deltacommits(h.table)
    check_incremental(spark, h, commits[-1]["completed"], later[-1]["completed"], "across the compaction")

    # Compacted again and cleaned: the first slices are gone.
    tributary("compact", h.table)
    tributary("clean", h.table, "--retain-commits", "1")
    assert any(i["action"] == "clean" and i["state"] == "COMPLETED" for i in timeline(h.table))
    check_snapshot(spark, h, "cleaned")
    check_read_optimized(spark, h, "cleaned")

    # A failed write (killed while it wrote), rolled back by recovery.
    killed = kill_a_writer_midway(h)
    time.sleep(1.5)  # the killed writer's last heartbeat ages past the expiry
    tributary("clean", h.table, "--heartbeat-expiry", "1s")
    rollbacks = [i for i in timeline(h.table) if i["action"] == "rollback" and i["state"] == "COMPLETED"]
    assert rollbacks, "the killed write was not rolled back"
    assert killed not in {i["requested"] for i in timeline(h.table) if i["action"] == "deltacommit"}
    check_snapshot(spark, h, "after a rollback")
    h.phase("d")
    check_snapshot(spark, h, "written after a rollback")


def kill_a_writer_midway(h):
    """Starts a one-commit write and kills it once its instant is inflight
    with log files written; returns that instant. A write that completes
    before the kill is committed input (the model takes it), and the next
    attempt tries again."""
    for attempt in range(5):
        events = random_events(h.rng, 150, 20_000, h.base_ts)
        f = write_jsonl(h.tmp / f"killed-{attempt}.jsonl", events)
        before = {i["requested"] for i in timeline(h.table)}
        args = ["write", h.table, "--input", f, "--writer-id", "doomed", "--tasks", "2"]
        p = subprocess.Popen([str(tributary_bin()), *map(str, args)], stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while p.poll() is None and time.monotonic() < deadline:
                new = [i["requested"] for i in timeline(h.table) if i["requested"] not in before]
                if new and has_logs(h.table, new[0]):
                    break
                time.sleep(0.01)
        finally:
            p.kill()
            p.wait()
        new = [i for i in timeline(h.table) if i["requested"] not in before and i["action"] == "deltacommit"]
        assert len(new) == 1, f"expected one instant of the killed write, found {new}"
        if new[0]["state"] != "COMPLETED":
            return new[0]["requested"]
        h.model.commit(events)
    raise AssertionError("five writes completed before they could be killed")


def has_logs(table, instant):
    return any(instant in p.name for p in table.rglob(".*.log.*"))
