"""SQL through Tributary's DataFusion provider (`tributary sql`) answers as
Spark SQL (Apache Hudi 1.2.0) does over the same tables: two tables Spark
wrote (NBCC upserts, deletes and out-of-order events over several commits,
before any compaction) and two of the Hudi-written corpus (a version-8
table with a compaction and deletes, and a version-9 table with a
compaction and clustering). The queries: `count(*)`, a group-by with sums,
key lookups, a join of two tables, and time travel (the table as of its
first commit, alone and joined with its latest state)."""

import decimal
import json
import os
import random
import zipfile
from pathlib import Path

import pytest

from support import ROOT, nbcc_options, random_events, spark_write, timeline, tributary

BASE_TS = 1_765_000_000_000


def norm(value):
    """Numbers as floats rounded to 9 significant digits (sums of doubles
    differ in their last bits between engines; a decimal prints as a
    string in JSON), anything else as it is."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float, decimal.Decimal)):
        return float(f"{float(value):.9g}")
    if isinstance(value, str):
        try:
            if any(c.isdigit() for c in value) and value.replace(".", "", 1).lstrip("-").isdigit():
                return float(f"{float(value):.9g}")
        except ValueError:
            pass
    return value


def rows(dicts):
    return sorted(tuple((k, norm(v)) for k, v in sorted(d.items())) for d in dicts)


def spark_answer(spark, query, tables):
    """`query` in Spark SQL over `tables` (view name to path and Hudi read
    options)."""
    for name, (path, options) in tables.items():
        reader = spark.read.format("hudi")
        for k, v in options.items():
            reader = reader.option(k, v)
        reader.load(str(path)).createOrReplaceTempView(name)
    return rows(r.asDict() for r in spark.sql(query).collect())


def our_answer(query, tables):
    """`query` through `tributary sql` over the same tables."""
    args = ["sql", query]
    for name, (path, options) in tables.items():
        spec = f"{name}={path}"
        if "as.of.instant" in options:
            spec += f"@as-of={options['as.of.instant']}"
        args += ["--table", spec]
    return rows(json.loads(line) for line in tributary(*args).splitlines())


def same_answers(spark, queries, tables):
    for query in queries:
        ours = our_answer(query, tables)
        assert ours, f"{query}: no rows (the comparison would prove nothing)"
        assert ours == spark_answer(spark, query, tables), query


def first_commit(table):
    return next(i["requested"] for i in timeline(table) if i["state"] == "COMPLETED")


def test_sql_answers_equal_spark_sql_on_spark_tables(spark, tmp_path):
    paths = {}
    for name, seed in (("a", 5), ("b", 6)):
        rng = random.Random(seed)
        path = tmp_path / name
        options = nbcc_options(name, buckets=4, partitioned=True, metadata=False)
        for _ in range(3):
            spark_write(spark, path, random_events(rng, 80, 160, BASE_TS), options)
        paths[name] = path
    first = first_commit(paths["a"])
    tables = {
        "a": (paths["a"], {}),
        "b": (paths["b"], {}),
        "old": (paths["a"], {"as.of.instant": first}),
    }
    # Keys of a's latest state, for lookups that find rows.
    keys = [v for row in our_answer("SELECT id FROM a ORDER BY id LIMIT 40", tables) for _, v in row][::7]
    same_answers(
        spark,
        [
            "SELECT count(*) AS n FROM a",
            "SELECT region, count(*) AS n, sum(n) AS total, min(v) AS lo, max(ts) AS latest FROM a GROUP BY region",
            f"SELECT id, ts, v, n FROM a WHERE id IN ({', '.join(repr(k) for k in keys)}, 'k9999')",
            f"SELECT id, region, v FROM a WHERE id = '{keys[1]}'",
            "SELECT a.id, a.v, b.v AS bv FROM a JOIN b ON a.id = b.id WHERE a.n > b.n",
            "SELECT count(*) AS n, sum(n) AS total FROM old",
            "SELECT a.id, a.v, old.v AS was FROM a JOIN old ON a.id = old.id WHERE a.ts <> old.ts",
        ],
        tables,
    )


def corpus_table(tmp_path, relative, name):
    """The corpus zip at `relative` unzipped into `tmp_path`: its table
    folder (never the `__MACOSX` sibling)."""
    base = Path(os.environ.get("TRIBUTARY_CORPUS", ROOT.parent / "shared" / "hudi-corpus"))
    if relative.startswith("next/"):
        base = Path(os.environ.get("TRIBUTARY_CORPUS_NEXT", ROOT.parent / "shared" / "hudi-corpus-next"))
        relative = relative[len("next/") :]
    zipped = base / relative
    if not zipped.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"under CI the corpus must be there: {zipped} is missing")
        pytest.skip(f"{zipped} is missing")
    with zipfile.ZipFile(zipped) as z:
        z.extractall(tmp_path)
    return tmp_path / name


def test_sql_answers_equal_spark_sql_on_corpus_tables(spark, tmp_path):
    trips = corpus_table(tmp_path, "quickstart_trips_table/mor/avro/v8_trips_8i3u1d.zip", "v8_trips_8i3u1d")
    txns = corpus_table(tmp_path, "next/sample_table/mor/avro/v9_txns_complex_nometa.zip", "v9_txns_complex_nometa")
    tables = {
        "trips": (trips, {}),
        "first": (trips, {"as.of.instant": first_commit(trips)}),
        "txns": (txns, {}),
        "txns_first": (txns, {"as.of.instant": first_commit(txns)}),
    }
    same_answers(
        spark,
        [
            "SELECT count(*) AS n FROM trips",
            "SELECT city, count(*) AS n, sum(fare) AS fares FROM trips GROUP BY city",
            "SELECT uuid, rider, fare FROM trips WHERE rider IN ('rider-A', 'rider-G', 'rider-Z')",
            "SELECT count(*) AS n, sum(fare) AS fares FROM first",
            "SELECT t.rider, t.fare, f.fare AS was FROM trips t JOIN first f ON t.uuid = f.uuid WHERE t.fare <> f.fare",
            "SELECT count(*) AS n FROM txns",
            "SELECT region, count(*) AS n, sum(amount) AS amount FROM txns GROUP BY region",
            "SELECT txn_id, account_id, amount FROM txns WHERE txn_id IN ('TXN-007', 'TXN-015', 'TXN-999')",
            "SELECT t.txn_id, t.amount, f.amount AS was FROM txns t JOIN txns_first f ON t.txn_id = f.txn_id",
        ],
        tables,
    )
