"""Our timeline is Hudi's timeline: Apache Hudi's Java implementation loads
every instant Tributary writes (delta commits, compaction plans and commits,
clean plans and metadata, rollback plans and metadata) through Spark's Hudi
procedures, and what it reports matches what Tributary did. Then Spark's
own compaction runs over Tributary's logs: the rows stay the same in both
engines, and Tributary keeps writing and compacting after it."""

import pytest

from support import (
    History,
    check_read_optimized,
    check_snapshot,
    completed_deltacommits,
    data_rows,
    kill_a_writer_midway,
    timeline,
    tributary,
)


def procedure(spark, sql) -> list[dict]:
    return [r.asDict() for r in spark.sql(sql).collect()]


def register(spark, name, path):
    """Registers the table at `path` in Spark's catalog as `name` (the
    procedures name tables): Hudi reads its config from the table."""
    spark.sql(f"drop table if exists {name}")
    spark.sql(f"create table {name} using hudi location '{path}'")


def completed(table, action):
    return [i for i in timeline(table) if i["action"] == action and i["state"] == "COMPLETED"]


@pytest.fixture(scope="module")
def every_instant(tmp_path_factory):
    """A table with every kind of instant Tributary writes: delta commits of
    several writers, two compactions, a clean and the rollback of a killed
    write."""
    tmp = tmp_path_factory.mktemp("timeline")
    h = History(tmp / "t", tmp, seed=21, partitioned=True)
    h.phase("a", events_per_writer=120, writers=2)
    tributary("compact", h.table)
    h.phase("b", events_per_writer=120, writers=2)
    tributary("compact", h.table)
    tributary("clean", h.table, "--retain-commits", "1")
    killed = kill_a_writer_midway(h)
    # No writer runs now, so every pending write has failed: the least
    # expiry the CLI takes (1 ms) says so with no wait for the killed
    # writer's heartbeat to age. Its last beat came before the kill, and
    # this later process reads it far more than 1 ms after.
    tributary("clean", h.table, "--heartbeat-expiry", "1ms")
    h.phase("c", events_per_writer=60, writers=2)
    return h, killed


def test_java_loads_every_instant(spark, every_instant):
    h, killed = every_instant
    register(spark, "every_instant", h.table)

    # Delta commits and compaction commits, with their commit metadata.
    ours = {i["requested"]: i for i in timeline(h.table) if i["state"] == "COMPLETED"}
    commits = procedure(spark, "call show_commits(table => 'every_instant', limit => 1000)")
    expected = {t: i["action"].replace("compaction", "commit") for t, i in ours.items() if i["action"] in ("deltacommit", "compaction")}
    assert sum(a == "commit" for a in expected.values()) == 2, expected  # the fixture's two compactions
    assert sum(a == "deltacommit" for a in expected.values()) >= 6, expected  # three phases of two writers
    assert {c["commit_time"]: c["action"] for c in commits} == expected
    for c in commits:
        assert c["state_transition_time"] == ours[c["commit_time"]]["completed"], c
        assert c["total_records_written"] > 0 and c["total_bytes_written"] > 0, c
        assert c["total_errors"] == 0, c

    # Every instant of the timeline in its state (Java names a completed
    # compaction by its file, `commit`).
    def java_action(i):
        return "commit" if i["action"] == "compaction" and i["state"] == "COMPLETED" else i["action"]

    shown = procedure(spark, "call show_timeline(table => 'every_instant', limit => 1000)")
    assert {(s["instant_time"], s["action"], s["state"]) for s in shown} == {
        (i["requested"], java_action(i), i["state"]) for i in timeline(h.table)
    }

    # Compaction plans (requested) and their commits.
    compactions = procedure(spark, "call show_compaction(table => 'every_instant', limit => 100)")
    assert sorted(c["timestamp"] for c in compactions) == sorted(i["requested"] for i in completed(h.table, "compaction"))
    assert all(c["state"] == "COMPLETED" and c["operation_size"] > 0 for c in compactions), compactions
    for c in compactions:
        files = procedure(spark, f"call show_commit_files(table => 'every_instant', instant_time => '{c['timestamp']}', limit => 1000)")
        assert len(files) == c["operation_size"], (c, files)

    # Clean plans and clean metadata.
    cleans = completed(h.table, "clean")
    assert cleans
    plans = procedure(spark, "call show_clean_plans(table => 'every_instant')")
    assert {p["plan_time"] for p in plans} == {i["requested"] for i in cleans}
    metas = procedure(spark, "call show_cleans(table => 'every_instant')")
    assert {m["clean_time"] for m in metas} == {i["requested"] for i in cleans}
    assert {m["state_transition_time"] for m in metas} == {i["completed"] for i in cleans}
    assert sum(m["total_files_deleted"] for m in metas) > 0, metas

    # Rollback plans and rollback metadata: the killed write, its files deleted.
    rollbacks = procedure(spark, "call show_rollbacks(table => 'every_instant')")
    assert [r["rollback_instant"] for r in rollbacks] == [killed]
    assert rollbacks[0]["instant"] == completed(h.table, "rollback")[0]["requested"]
    assert rollbacks[0]["total_files_deleted"] > 0
    detail = procedure(spark, f"call show_rollback_detail(table => 'every_instant', instant_time => '{rollbacks[0]['instant']}', limit => 1000)")
    assert len(detail) == rollbacks[0]["total_files_deleted"] and all(d["succeeded"] for d in detail), detail


#: Spark's compaction of a shared table: version 8, no upgrade, and no
#: metadata table (Tributary does not keep one).
SPARK_COMPACTION = "hoodie.write.table.version=8,hoodie.write.auto.upgrade=false,hoodie.metadata.enable=false"


@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
def test_spark_compacts_our_logs(spark, tmp_path, partitioned):
    h = History(tmp_path / "t", tmp_path, seed=31 if partitioned else 32, partitioned=partitioned)
    h.phase("a", events_per_writer=150)
    h.phase("b", events_per_writer=150)
    name = f"ours_{'p' if partitioned else 'u'}"
    register(spark, name, h.table)
    before = {i["requested"] for i in completed(h.table, "compaction")}
    out = procedure(spark, f"call run_compaction(op => 'scheduleAndExecute', table => '{name}', options => '{SPARK_COMPACTION}')")
    spark_compactions = [i for i in completed(h.table, "compaction") if i["requested"] not in before]
    assert len(spark_compactions) == 1, (out, timeline(h.table))
    assert "hoodie.table.version=8" in (h.table / ".hoodie" / "hoodie.properties").read_text()

    # Both engines read the same rows as before, base files included. Hudi's
    # compaction keeps no tombstones (Tributary's keeps them, see
    # docs/interop.md): a later event older than a delete it compacted
    # brings the key back.
    check_snapshot(spark, h, "compacted by Spark")
    h.model.forget_deletes()
    assert data_rows(check_read_optimized(spark, h, "compacted by Spark")) == h.model.rows()

    # Tributary keeps writing, and compacts Spark's base files with its logs.
    h.phase("c", events_per_writer=150)
    check_snapshot(spark, h, "written after Spark's compaction")
    tributary("compact", h.table)
    check_snapshot(spark, h, "compacted by Tributary after Spark")
    assert data_rows(check_read_optimized(spark, h, "compacted by Tributary after Spark")) == h.model.rows()
    assert len(completed_deltacommits(h.table)) >= 6
