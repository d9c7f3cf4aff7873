"""Tributary reads, compacts and extends tables Spark (Apache Hudi 1.2.0)
wrote: version-8 Merge-on-Read, the simple bucket index, non-blocking
concurrency control, upserts, deletes and out-of-order events over several
commits, partitioned and not. Tributary's read equals the event-time model;
after Tributary compacts the table, Spark reads the same rows (snapshot and
read-optimized, metadata reads on and off); Tributary then writes more
commits into the same file groups (Hudi's bucket hash, the bucket count
given on the command line), and both engines still read the model."""

import random
import subprocess

import pytest

from support import (
    Model,
    check_both_engines,
    data_rows,
    meta_rows,
    nbcc_options,
    random_events,
    read_quietly,
    spark_rows,
    spark_write,
    timeline,
    tributary,
    tributary_bin,
    write_jsonl,
)

BUCKETS = 4
BASE_TS = 1_760_000_000_000


def file_groups(table):
    """The file ids of every log and base file, by partition."""
    groups = set()
    for f in table.rglob("*"):
        if ".hoodie" in f.parts or not f.is_file() or f.name.endswith(".crc"):
            continue
        name = f.name
        if name.startswith(".") and ".log." in name:
            groups.add((f.parent.name, name[1:].split("_", 1)[0]))
        elif name.endswith(".parquet"):
            groups.add((f.parent.name, name.split("_", 1)[0]))
    return groups


@pytest.mark.parametrize(
    "partitioned, metadata",
    [(True, True), (False, False)],
    ids=["partitioned-metadata-table", "unpartitioned-no-metadata-table"],
)
def test_we_read_compact_and_extend_a_spark_table(spark, tmp_path, partitioned, metadata):
    table = tmp_path / "spark_table"
    rng = random.Random(11 if partitioned else 12)
    model = Model()
    options = nbcc_options("spark_table", buckets=BUCKETS, partitioned=partitioned, metadata=metadata)
    for _ in range(3):
        events = random_events(rng, 60, 120, BASE_TS)
        spark_write(spark, table, events, options)
        model.commit(events)
    props = (table / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.ordering.fields=ts" in props and "hoodie.bucket.index.num.buckets" not in props
    assert list(table.rglob(".*.crc")), "Spark on local disk writes Hadoop checksum sidecars"
    spark_groups = file_groups(table)

    # Tributary reads Spark's logs.
    ours = read_quietly(table)
    assert data_rows(ours) == model.rows(), "tributary read of Spark's table vs the model"
    theirs = spark_rows(spark, table, **{"hoodie.metadata.enable": "false"})
    assert meta_rows(theirs) == meta_rows(ours), "tributary read vs Spark's own read"

    # Tributary compacts; Spark reads the base files and logs.
    tributary("compact", table)
    assert any(i["action"] == "compaction" and i["state"] == "COMPLETED" for i in timeline(table))
    ro = check_both_engines(spark, table, model, "compacted by tributary")
    assert data_rows(ro) == model.rows(), "read-optimized after the compaction vs the model"

    # Tributary writes into the same file groups: Hudi's bucket hash; the
    # bucket count, which Hudi keeps in its writers' settings, is given.
    events = random_events(rng, 60, 120, BASE_TS)
    f = write_jsonl(tmp_path / "more.jsonl", events)
    refused = subprocess.run([str(tributary_bin()), "write", str(table), "--input", str(f)], capture_output=True, text=True)
    assert refused.returncode == 2 and "--buckets" in refused.stderr, refused.stderr
    tributary("write", table, "--input", f, "--buckets", BUCKETS, "--commit-every", 50)
    model.commit(events)
    # Every key it wrote was Spark's already: a hash that disagreed with
    # Hudi's would have opened file groups of other buckets.
    assert file_groups(table) == spark_groups
    check_both_engines(spark, table, model, "written by tributary after the compaction")
    wrong = subprocess.run(
        [str(tributary_bin()), "write", str(table), "--input", str(f), "--buckets", "2"], capture_output=True, text=True
    )
    assert wrong.returncode == 2 and "this writer has 2 buckets" in wrong.stderr, wrong.stderr

    # Compacted again, the read-optimized view holds everything.
    tributary("compact", table)
    ro = check_both_engines(spark, table, model, "compacted again")
    assert data_rows(ro) == model.rows()
