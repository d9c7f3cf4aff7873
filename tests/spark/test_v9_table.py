"""A version-9 table Spark (Apache Hudi 1.2.0, no version pin) makes and
shares with Tributary: non-blocking concurrency control and the simple
bucket index, then an insert overwrite of one partition and a clustering of
another (both replace file groups), upserts, a Tributary compaction and
Tributary writes. At every step Tributary reads what Spark reads; at the
end Spark reads Tributary's writes, snapshot and read-optimized, with
metadata reads on and off, equal to the event-time model.

What Hudi 1.2 itself allows, as this test finds it (`docs/interop.md`,
"Replaced file groups"): its NBCC writer refuses insert overwrite ("Insert
overwrite is not supported with non-blocking concurrency control"), so the
overwrite runs as a single writer; and after a clustering of a simple
bucket-index partition, whose new file group is no bucket's, its own
bucket-index writer fails on that partition. Tributary refuses to write
there too, with an error that says why."""

import random
import subprocess

from support import (
    HUDI_VERSION_8,
    Event,
    Model,
    check_both_engines,
    nbcc_options,
    random_events,
    region_of,
    spark_write,
    timeline,
    tributary,
    tributary_bin,
    write_jsonl,
)

BUCKETS = 4
BASE_TS = 1_760_000_000_000


def v9_options(name, metadata):
    """Spark's NBCC bucket-index options, without the version-8 pin."""
    opts = {k: v for k, v in nbcc_options(name, buckets=BUCKETS, metadata=metadata).items() if k not in HUDI_VERSION_8}
    return opts


def overwrite_events(rng, region, count):
    """Events of distinct keys of `region`, no deletes: an insert overwrite
    inserts every row it is given."""
    keys = sorted({k for k in (f"k{rng.randrange(150):04d}" for _ in range(count * 4)) if region_of(k) == region})
    return [Event(k, BASE_TS + rng.randrange(10**6), region, f"o{rng.randrange(10**6)}", 1) for k in keys[:count]]


def test_spark_and_tributary_share_a_v9_table_through_overwrite_and_clustering(spark, tmp_path):
    table = tmp_path / "v9"
    rng = random.Random(9)
    model = Model()

    # Spark creates the table (version 9, its metadata table on) and upserts.
    for _ in range(2):
        batch = random_events(rng, 150, 300, BASE_TS)
        spark_write(spark, table, batch, v9_options("v9", metadata=True))
        model.commit(batch)
    props = (table / ".hoodie" / "hoodie.properties").read_text()
    for line in ["hoodie.table.version=9", "hoodie.table.ordering.fields=ts", "hoodie.record.merge.mode=EVENT_TIME_ORDERING"]:
        assert line in props.splitlines(), f"{line} in {props}"
    check_both_engines(spark, table, model, "Spark's upserts")

    # Insert overwrite of `eu`: Hudi's NBCC writer refuses it, a single writer runs it.
    eu = overwrite_events(rng, "eu", 30)
    overwrite = {**v9_options("v9", metadata=True), "hoodie.datasource.write.operation": "insert_overwrite"}
    overwrite["hoodie.write.concurrency.mode"] = "SINGLE_WRITER"
    spark_write(spark, table, eu, overwrite)
    model.winners = {k: e for k, e in model.winners.items() if e.region != "eu"}
    model.commit(eu)
    check_both_engines(spark, table, model, "insert overwrite of eu")

    # Clustering of `us`.
    spark.sql(f"call run_clustering(path => '{table}', predicate => \"region = 'us'\")").collect()
    actions = [(i["action"], i["state"]) for i in timeline(table)]
    assert ("clustering", "COMPLETED") in actions or ("replacecommit", "COMPLETED") in actions, actions
    check_both_engines(spark, table, model, "clustering of us")

    # Spark upserts the partitions its bucket index still serves.
    batch = [e for e in random_events(rng, 150, 300, BASE_TS) if e.region != "us"]
    spark_write(spark, table, batch, v9_options("v9", metadata=True))
    model.commit(batch)
    check_both_engines(spark, table, model, "Spark's upserts after the replacements")

    # Tributary compacts (turning the metadata table off), and writes.
    out = tributary("compact", table, "--time-mode", "wait-for-skew")
    assert " completed " in out, out
    check_both_engines(spark, table, model, "Tributary's compaction")
    batch = [e for e in random_events(rng, 150, 300, BASE_TS) if e.region != "us"]
    tributary("write", table, "--input", write_jsonl(tmp_path / "ours.jsonl", batch), "--buckets", BUCKETS)
    model.commit(batch)
    check_both_engines(spark, table, model, "Tributary's write")
    out = tributary("compact", table, "--time-mode", "wait-for-skew")
    check_both_engines(spark, table, model, "Tributary's second compaction")

    # A key of the clustered partition: its bucket's file group is replaced.
    us = [e for e in random_events(rng, 150, 50, BASE_TS) if e.region == "us"]
    f = write_jsonl(tmp_path / "us.jsonl", us)
    done = subprocess.run(
        [str(tributary_bin()), "write", str(table), "--input", str(f), "--buckets", str(BUCKETS)],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "takes no more logs" in done.stderr, done.stderr
    check_both_engines(spark, table, model, "a refused write")

    # Spark writes again (metadata off now, as Tributary left the table) and reads it all.
    batch = [e for e in random_events(rng, 150, 300, BASE_TS) if e.region != "us"]
    spark_write(spark, table, batch, v9_options("v9", metadata=False))
    model.commit(batch)
    check_both_engines(spark, table, model, "Spark's upserts after Tributary's")
