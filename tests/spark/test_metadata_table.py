"""The metadata table Spark creates by default, on a table Tributary then
writes, compacts and cleans: Tributary turns it off before its first
instant, as a Hudi writer with `hoodie.metadata.enable=false` does
(hoodie.properties lists no metadata partitions, `.hoodie/metadata` is
gone), so Spark with metadata reads on lists storage and reads every row.
The states a process stopped midway leaves are read correctly too."""

import random
import shutil

from support import (
    Model,
    data_rows,
    meta_rows,
    nbcc_options,
    our_rows,
    random_events,
    spark_rows,
    spark_write,
    timeline,
    tributary,
    write_jsonl,
)

BUCKETS = 4
BASE_TS = 1_760_000_000_000
METADATA_ON = {"hoodie.metadata.enable": "true"}


def properties(table) -> dict:
    out = {}
    for line in (table / ".hoodie" / "hoodie.properties").read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k] = v
    return out


def spark_table(spark, table, rng, model, commits=2):
    """A partitioned table Spark wrote with its metadata table on."""
    options = nbcc_options("mdt", buckets=BUCKETS, metadata=True)
    for _ in range(commits):
        events = random_events(rng, 60, 120, BASE_TS)
        spark_write(spark, table, events, options)
        model.commit(events)
    listed = properties(table)["hoodie.table.metadata.partitions"].split(",")
    assert "files" in listed, listed
    assert (table / ".hoodie" / "metadata" / "files").is_dir()


def assert_metadata_table_off(table):
    p = properties(table)
    assert p["hoodie.table.metadata.partitions"] == "" and p.get("hoodie.table.metadata.partitions.inflight", "") == "", p
    assert not (table / ".hoodie" / "metadata").exists()
    assert not (table / ".hoodie" / "hoodie.properties.backup").exists()
    # The sidecar of Spark's hoodie.properties described the old bytes.
    assert not (table / ".hoodie" / ".hoodie.properties.crc").exists()


def check(spark, table, model, what):
    """Spark with metadata reads on (snapshot and read-optimized) against
    the model and Tributary's reads."""
    ours = our_rows(table)
    assert data_rows(ours) == model.rows(), f"{what}: tributary read vs the model"
    theirs = spark_rows(spark, table, **METADATA_ON)
    assert data_rows(theirs) == model.rows(), f"{what}: Spark (metadata reads on) vs the model"
    assert meta_rows(theirs) == meta_rows(ours), f"{what}: Spark (metadata reads on) vs tributary read"
    ro = spark_rows(spark, table, **METADATA_ON, **{"hoodie.datasource.query.type": "read_optimized"})
    assert meta_rows(ro) == meta_rows(our_rows(table, "--query", "read-optimized")), f"{what}: read-optimized"


def tributary_write(table, tmp, rng, model, tag):
    events = random_events(rng, 60, 120, BASE_TS)
    f = write_jsonl(tmp / f"{tag}.jsonl", events)
    tributary("write", table, "--input", f, "--buckets", BUCKETS, "--commit-every", 60)
    model.commit(events)


def test_tributary_turns_the_metadata_table_off_and_spark_reads_every_row(spark, tmp_path):
    table = tmp_path / "t"
    rng = random.Random(21)
    model = Model()
    spark_table(spark, table, rng, model)
    check(spark, table, model, "as Spark wrote it")

    # The first Tributary instant (a write) turns the metadata table off.
    tributary_write(table, tmp_path, rng, model, "a")
    assert_metadata_table_off(table)
    check(spark, table, model, "written by tributary")

    # Compactions and a clean that deletes the first slices.
    tributary("compact", table)
    tributary_write(table, tmp_path, rng, model, "b")
    tributary("compact", table)
    tributary("clean", table, "--retain-commits", "1")
    assert any(i["action"] == "clean" and i["state"] == "COMPLETED" for i in timeline(table))
    assert_metadata_table_off(table)
    check(spark, table, model, "compacted and cleaned by tributary")

    # A Spark writer sharing the table runs with the metadata table off.
    events = random_events(rng, 60, 120, BASE_TS)
    spark_write(spark, table, events, nbcc_options("mdt", buckets=BUCKETS, metadata=False))
    model.commit(events)
    assert_metadata_table_off(table)
    check(spark, table, model, "written by Spark again, metadata off")


def test_the_states_an_interrupted_turning_off_leaves_read_correctly(spark, tmp_path):
    table = tmp_path / "t"
    rng = random.Random(22)
    model = Model()
    spark_table(spark, table, rng, model)
    meta = table / ".hoodie"
    saved = tmp_path / "metadata-saved"
    shutil.copytree(meta / "metadata", saved)

    # Stopped after the backup was written and hoodie.properties deleted:
    # every reader reads the backup, whose metadata table is still whole.
    shutil.copy(meta / "hoodie.properties", meta / "hoodie.properties.backup")
    (meta / "hoodie.properties").unlink()
    (meta / ".hoodie.properties.crc").unlink()
    check(spark, table, model, "hoodie.properties missing, its backup there")

    # The next Tributary instant restores it from the backup and finishes.
    tributary_write(table, tmp_path, rng, model, "a")
    assert_metadata_table_off(table)
    check(spark, table, model, "recovered, then written by tributary")

    # Stopped while deleting the metadata table: hoodie.properties lists no
    # partitions, so what is left of the folder is ignored...
    shutil.copytree(saved / "files", meta / "metadata" / "files")
    shutil.copytree(saved / ".hoodie", meta / "metadata" / ".hoodie")
    check(spark, table, model, "a metadata table half deleted")
    # ...and the next Tributary process deletes the rest.
    tributary("compact", table)
    assert_metadata_table_off(table)
    check(spark, table, model, "compacted after the half-deleted metadata table")
