"""Schema evolution across engines. Spark (Apache Hudi 1.2.0) reads a table
whose schema Tributary evolved (`tributary alter`, `write --evolve-schema`):
snapshot, incremental across the change, and read-optimized after a
compaction. Tributary reads, writes and compacts a table whose schema Spark
evolved (upserts carrying a new column, and `ALTER TABLE ... ADD COLUMNS`).
Every read equals an event-time model of whole rows, where a column a
record does not carry is null."""

import json
import random

from support import (
    SCHEMA,
    nbcc_options,
    our_rows,
    region_of,
    spark_rows,
    timeline,
    tributary,
)

BASE_TS = 1_770_000_000_000


def events(rng, keys, count, base, extra_columns):
    """`count` upserts of random keys at random event times, each carrying
    the base columns and every column of `extra_columns` (name to a value
    maker)."""
    out = []
    for _ in range(count):
        k = f"k{rng.randrange(keys):04d}"
        e = {"id": k, "region": region_of(k), "ts": base + rng.randrange(10**6), "v": f"v{rng.randrange(10**6)}"}
        e["n"] = rng.randrange(1000)
        for name, make in extra_columns.items():
            e[name] = make(rng)
        out.append(e)
    return out


class WholeRows:
    """Event-time merging of whole rows: per key the record with the
    largest `ts` wins (a later commit wins a tie); columns it lacks are
    null."""

    def __init__(self):
        self.winners = {}

    def commit(self, records):
        for r in records:
            w = self.winners.get(r["id"])
            if w is None or r["ts"] >= w["ts"]:
                self.winners[r["id"]] = r

    def rows(self, columns):
        return sorted((norm({c: r.get(c) for c in columns}) for r in self.winners.values()), key=lambda r: r["id"])


def norm(row):
    """Numbers as floats (a promoted column reads as double in one engine
    and may print as an integer in another)."""
    return {k: (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v) for k, v in row.items()}


def data(rows, columns):
    return sorted((norm({c: r.get(c) for c in columns}) for r in rows), key=lambda r: r["id"])


def write(table, tmp, records, *args):
    f = tmp / f"in-{random.randrange(10**9)}.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in records))
    return tributary("write", table, "--input", f, *args)


def schema_columns(table):
    return [f["name"] for f in json.loads(tributary("schema", table, "--format", "avro"))["fields"]]


def check(spark, table, model, what, **options):
    columns = schema_columns(table)
    ours = data(our_rows(table), columns)
    assert ours == model.rows(columns), f"{what}: tributary read vs the model"
    theirs = data(spark_rows(spark, table, **options), columns)
    assert theirs == ours, f"{what}: Spark snapshot vs tributary read"
    return columns


def test_spark_reads_a_table_tributary_evolved(spark, tmp_path):
    rng = random.Random(37)
    table = tmp_path / "evolved"
    schema = tmp_path / "s.avsc"
    # The tests' schema with `n` an int, promoted to long below.
    fields = [{**f, "type": ["null", "int"]} if f["name"] == "n" else f for f in SCHEMA["fields"]]
    schema.write_text(json.dumps({**SCHEMA, "fields": fields}))
    args = ["--partition-field", "region", "--buckets", 4, "--bucket-hash", "hudi-java"]
    tributary("init", table, "--schema", schema, "--record-key", "id", "--ordering-field", "ts", *args)
    model = WholeRows()

    first = events(rng, 120, 300, BASE_TS, {})
    write(table, tmp_path, first)
    model.commit(first)
    before = [i for i in timeline(table) if i["state"] == "COMPLETED"][-1]

    # Alter: a column with no data yet, and a promotion of `n` (int to long).
    tributary("alter", table, "--add-column", "note:string", "--promote", "n:long")
    # A write that brings two more columns.
    second = events(rng, 120, 300, BASE_TS, {"note": lambda r: f"x{r.randrange(9)}", "score": lambda r: r.random()})
    out = write(table, tmp_path, second, "--evolve-schema")
    assert "instants" in out, out
    model.commit(second)
    assert schema_columns(table) == ["id", "region", "ts", "v", "n", "note", "score"]
    check(spark, table, model, "after the evolution")
    for md in ("false", "true"):
        check(spark, table, model, f"metadata reads {md}", **{"hoodie.metadata.enable": md})

    # Incremental across the change: the versions committed after `before`.
    columns = schema_columns(table)
    begin = before["completed"]
    ours = data(our_rows(table, "--query", "incremental", "--begin", begin), columns)
    theirs = spark_rows(
        spark,
        table,
        **{"hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": begin},
    )
    assert data(theirs, columns) == ours, "incremental across the change"
    assert {r["id"] for r in ours} == {r["id"] for r in second}

    # After a compaction: read-optimized reads the new schema's base files.
    tributary("compact", table)
    check(spark, table, model, "after a compaction")
    ro = {"hoodie.datasource.query.type": "read_optimized"}
    assert data(spark_rows(spark, table, **ro), columns) == data(
        our_rows(table, "--query", "read-optimized"), columns
    ), "read-optimized after the compaction"
    assert data(our_rows(table, "--query", "read-optimized"), columns) == model.rows(columns)


def test_tributary_reads_writes_and_compacts_a_table_spark_evolved(spark, tmp_path):
    rng = random.Random(38)
    table = tmp_path / "spark_evolved"
    opts = nbcc_options("spark_evolved", buckets=4, metadata=False)
    model = WholeRows()

    def spark_upsert(records, ddl):
        df = spark.createDataFrame([tuple(r.get(c) for c in ddl_columns(ddl)) for r in records], ddl)
        df.write.format("hudi").options(**opts).mode("append").save(str(table))
        model.commit(records)

    base = "id string, region string, ts long, v string, n long"
    spark_upsert(events(rng, 100, 200, BASE_TS, {}), base)
    # An upsert whose rows carry a new column: Hudi adds it on write.
    spark_upsert(events(rng, 100, 200, BASE_TS, {"note": lambda r: f"s{r.randrange(9)}"}), base + ", note string")
    # ALTER TABLE ... ADD COLUMNS through the catalog.
    spark.sql(f"create table spark_evolved using hudi location '{table}'")
    spark.sql("alter table spark_evolved add columns (score double)")
    columns = check(spark, table, model, "Spark's evolution")
    # Spark's catalog puts the partition column last in the schema it records.
    assert sorted(columns) == sorted(["id", "region", "ts", "v", "n", "note", "score"]), columns

    # Tributary writes rows of the schema in force, compacts, writes again.
    ours = events(rng, 100, 200, BASE_TS, {"note": lambda r: f"t{r.randrange(9)}", "score": lambda r: r.random()})
    write(table, tmp_path, ours, "--buckets", "4")
    model.commit(ours)
    check(spark, table, model, "Tributary's write")
    tributary("compact", table)
    check(spark, table, model, "Tributary's compaction")
    more = events(rng, 100, 100, BASE_TS + 10**6, {"score": lambda r: r.random()})
    write(table, tmp_path, more, "--buckets", "4")
    model.commit(more)
    check(spark, table, model, "Tributary's write after the compaction")
    ro = {"hoodie.datasource.query.type": "read_optimized"}
    assert data(spark_rows(spark, table, **ro), columns) == data(our_rows(table, "--query", "read-optimized"), columns)
    spark.sql("drop table spark_evolved")


def ddl_columns(ddl):
    return [c.strip().split()[0] for c in ddl.split(",")]


def test_spark_reads_a_wide_table_a_third_source_joined(spark, tmp_path):
    """A wide table of two sources (sequence groups `ts_a=a1`, `ts_b=b1`);
    a third adds its columns and group (`alter --sequence-group`) while the
    first two keep writing. After a compaction Spark's read-optimized rows
    hold the three sources' columns merged per key, each source's newest
    event winning, as Tributary's snapshot and read-optimized reads do."""
    rng = random.Random(41)
    table = tmp_path / "wide"
    schema = tmp_path / "wide.avsc"
    nullable = lambda name, t: {"name": name, "type": ["null", t], "default": None}  # noqa: E731
    fields = [{"name": "id", "type": "string"}, nullable("ts", "long")]
    fields += [nullable("a1", "string"), nullable("ts_a", "long"), nullable("b1", "string"), nullable("ts_b", "long")]
    schema.write_text(json.dumps({"type": "record", "name": "wide", "fields": fields}))
    groups = ["--sequence-group", "ts_a=a1", "--sequence-group", "ts_b=b1"]
    tributary("init", table, "--schema", schema, "--record-key", "id", "--ordering-field", "ts", "--buckets", 2, *groups)
    newest = {}  # (key, source) -> (event time, value)

    def source(name, round_):
        col, ts = f"{name}1", f"ts_{name}"
        records = []
        for _ in range(60):
            k, when = f"k{rng.randrange(40):02d}", rng.randrange(100)
            value = f"{name}{round_}-{rng.randrange(1000)}"
            records.append({"id": k, col: value, ts: when})
            if (k, name) not in newest or when >= newest[(k, name)][0]:
                newest[(k, name)] = (when, value)
        write(table, tmp_path, records, "--columns", f"{col},{ts}")

    for round_ in range(2):
        source("a", round_)
        source("b", round_)
    tributary("compact", table)
    tributary("alter", table, "--add-column", "c1:string", "--add-column", "ts_c:long", "--sequence-group", "ts_c=c1")
    for round_ in range(2, 4):
        source("c", round_)
        source("a", round_)
        source("b", round_)
    tributary("compact", table)

    columns = ["id", "a1", "ts_a", "b1", "ts_b", "c1", "ts_c"]
    model = {}
    for (k, name), (when, value) in newest.items():
        row = model.setdefault(k, {c: None for c in columns} | {"id": k})
        row[f"{name}1"], row[f"ts_{name}"] = value, when
    want = data(model.values(), columns)
    assert sum(1 for r in want if r["a1"] and r["b1"] and r["c1"]) > 10
    assert data(our_rows(table), columns) == want, "tributary snapshot vs the model"
    assert data(our_rows(table, "--query", "read-optimized"), columns) == want, "tributary read-optimized"
    ro = {"hoodie.datasource.query.type": "read_optimized"}
    assert data(spark_rows(spark, table, **ro), columns) == want, "Spark read-optimized vs the model"
