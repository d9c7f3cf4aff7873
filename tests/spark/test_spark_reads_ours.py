"""Spark (Apache Hudi's Java reader) reads tables Tributary wrote: several
concurrent writers, deletes and out-of-order events, partitioned and not,
through every state a table goes through (logs only, compacted, cleaned,
after a rolled-back failed write), with every query type, and with Spark's
metadata-table reads on and off. Each read equals the event-time model and
Tributary's own read of the same query."""

import pytest

from support import (
    History,
    check_read_optimized,
    check_snapshot,
    completed_deltacommits,
    data_rows,
    kill_a_writer_midway,
    meta_rows,
    our_rows,
    spark_metadata,
    spark_rows,
    timeline,
    tributary,
)

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


@pytest.mark.parametrize(
    "partitioned,version", [(True, 8), (False, 8), (True, 9)], ids=["partitioned", "unpartitioned", "v9-partitioned"]
)
def test_spark_reads_every_state_and_query(spark, tmp_path, partitioned, version):
    h = History(tmp_path / "t", tmp_path, seed=7 if partitioned else 8, partitioned=partitioned, table_version=version)
    props = (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_text().splitlines()
    assert f"hoodie.table.version={version}" in props, props

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
    # No writer runs now, so every pending write has failed: the least
    # expiry the CLI takes (1 ms) says so with no wait for the killed
    # writer's heartbeat to age. Its last beat came before the kill, and
    # this later process reads it far more than 1 ms after.
    tributary("clean", h.table, "--heartbeat-expiry", "1ms")
    rollbacks = [i for i in timeline(h.table) if i["action"] == "rollback" and i["state"] == "COMPLETED"]
    assert rollbacks, "the killed write was not rolled back"
    assert killed not in {i["requested"] for i in timeline(h.table) if i["action"] == "deltacommit"}
    check_snapshot(spark, h, "after a rollback")
    h.phase("d")
    check_snapshot(spark, h, "written after a rollback")


