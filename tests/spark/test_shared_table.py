"""One table, both engines at once: a Spark NBCC writer and Tributary writer
processes upsert into the same table at the same time, under Hudi's
`FileSystemBasedLockProvider` lock file (`tributary --lock hudi-file`), with
wait-for-skew instants on both sides. Afterwards Spark, Tributary and the
official Rust reader all read the event-time model of every committed event,
and after a compaction too."""

import random

from support import (
    official_rows,
    Model,
    data_rows,
    init_table,
    nbcc_options,
    our_rows,
    random_events,
    spark_rows,
    spark_write,
    start_writers,
    timeline,
    tributary,
    wait_writers,
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
