"""The peers' side of the peers benchmark: one case of one engine per process.

run.py starts `python engines.py ENGINE CASE --table DIR [...]` under the
benchmark's virtualenv, once per case and repetition, as it starts
Tributary's driver (benches/peers/driver.rs); like the driver, each run
prints one JSON line of figures: `wall` (seconds), `cpu` (user + system
seconds of this process, all threads, from getrusage), `rows`, and per case
more. Imports (those pyarrow and delta-rs make lazily too: see
`pa.array([0])` and `Delta.open`), reading the input and opening the table
come before the clock starts.

Engines and the exact API each uses:

- `paimon`: Apache Paimon's Rust core through its Python binding
  `pypaimon-rust` (module `pypaimon_rust.datafusion`), not pypaimon's
  pure-Python writer. The table is created with Paimon SQL through
  `SQLContext.sql("CREATE TABLE ...")`: a primary-key table
  `PRIMARY KEY (region, id)`, `PARTITIONED BY (region)`, options
  `bucket` = the bucket count and `sequence.field` = `ts` (the row with the
  larger `ts` wins). A commit is `PaimonCatalog({"warehouse": DIR})
  .get_table("bench.t").new_batch_write_builder()`, then
  `new_write().write_arrow(batch)` per batch, `prepare_commit()`, and
  `new_commit().commit(messages)`. A read is `new_read_builder()`,
  `new_scan().plan().splits()`, `new_read().read(splits)`. The Rust writer
  does not compact (its type stubs say it flushes without background
  compaction, and a bucket's files pile up, one per commit that touched
  it), so every commit adds a sorted run that reads merge.
- `delta`: delta-rs (`deltalake`). The table is made by
  `DeltaTable.create(DIR, schema, partition_by=["region"])`. Delta has no
  merge-on-write by key, so each write first keeps the newest row per `id`
  of its input (pyarrow sort and filter, timed as part of the write). The
  first ingest then appends (`write_deltalake(DIR, rows, mode="append")`,
  into the empty table); every later write is
  `DeltaTable(DIR).merge(rows, "t.region = s.region AND t.id = s.id",
  source_alias="s", target_alias="t").when_matched_update_all(
  predicate="s.ts > t.ts").when_not_matched_insert_all().execute()`:
  a copy-on-write merge that keeps the row with the larger `ts`. A commit
  that fails with `CommitFailedError` (a concurrent writer changed what it
  read) counts as a failed attempt and is retried from a fresh table
  state. A read is `DeltaTable(DIR).to_pyarrow_table()`.
- `hudi`: the official Hudi reader, hudi-rs (`hudi` 0.5.0), on Tributary's
  table: `HudiTableBuilder.from_base_uri(DIR).build().read()` (a snapshot
  read; Arrow record batches). It only reads.
- `tributary-py`: Tributary's own Python package (`tributary`, the release
  wheel run.py builds from python/ for its `python` case), the in-process
  counterpart of the driver. The table is made by `tributary.create(DIR,
  schema, record_key="id", ordering_field="ts", partition_by="region",
  buckets=N)` (the workload's pyarrow schema; a Merge-on-Read table with
  event-time merging, as the driver makes) and opened by
  `tributary.Table(DIR)` before the clock starts. Every write, the first
  included, is `table.write(rows)`: one commit, each key keeping its
  largest `ts`, so no deduplication comes first; a `ConflictError` counts
  as a failed attempt and the write starts over, as the driver does. A
  read is `table.to_pyarrow()` (a snapshot read, merged) of the table
  opened before the clock, as the driver's read is; the snapshot count is
  the completed `deltacommit`s of `table.timeline()`, as run.py counts the
  driver's.

SQL (case `sql --queries F`, F a JSON object of named queries over a table
`t`; each query runs once, in order, is collected in full and timed alone;
opening the table, making the session and an untimed `SELECT 1` come
before, the last because delta-rs's first query in a process, whatever it
is, takes some 150 ms more to start its session):

- `paimon`: pypaimon-rust's own DataFusion session,
  `pypaimon_rust.datafusion.SQLContext` with the warehouse registered as
  catalog `paimon` (`register_catalog`) and `bench` as the current
  database, so `t` is the table; `SQLContext.sql(q)` returns the record
  batches.
- `delta`: delta-rs's `deltalake.QueryBuilder` (DataFusion inside the
  deltalake wheel): `QueryBuilder().register("t", DeltaTable(DIR))`, then
  `.execute(q).read_all()`.
- `hudi`: hudi-rs's DataFusion table provider, `hudi.HudiDataFusionDataSource(
  DIR)` (a snapshot read of Tributary's table), registered with
  `SessionContext.register_table("t", ...)` of the `datafusion` Python
  package through DataFusion's FFI; `.sql(q).to_arrow_table()`. That
  package must be built on the DataFusion hudi 0.5.0 is built on (54.1),
  hence run.py's pin of `datafusion` 54.1.0.

Compaction (case `compact`): `delta` only, `DeltaTable(DIR).optimize.compact()`
(bin-packing small files into larger ones; it merges no versions, since a
MERGE has already rewritten them). Neither pypaimon-rust 0.4.0 nor
pypaimon 2.1.0 can compact a primary-key table: the Rust writer "flushes
synchronously and has no background compaction", and pypaimon's commit
rejects compaction increments (`_reject_compact_increment`).

JSON-lines input (`ingest-json`, paimon and delta): pyarrow's JSON reader
(`pyarrow.json.read_json` with the table's schema) parses the file inside
the timed part, then the rows are written as by `ingest`.

pandas input (`ingest` and `upsert` with `--from pandas`; run.py's
`python` case): the input's rows become a pandas DataFrame
(`pa.Table.to_pandas()`) before the clock starts, and each engine is given
the DataFrame, so that the conversion it needs is timed as part of the
write. `tributary-py` takes it as it is (`table.write(df)` converts it to
Arrow with the table's types inside the call). Paimon's `write_arrow`
takes record batches only: `pa.Table.from_pandas(df, schema=SCHEMA,
preserve_index=False)` first (`arrow_of`). Delta's `write_deltalake` and
`merge` would take the DataFrame (through pandas' `__arrow_c_stream__`,
itself `pa.Table.from_pandas`), but its newest-row-per-`id` step works on
Arrow, so Delta converts with `arrow_of` as Paimon does, and then writes
Arrow as with Arrow input: the same conversion, made once.
"""

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workload  # noqa: E402

# pyarrow imports pandas, when it is installed, the first time it makes an
# array of Python objects (`pa.array`, as `newest_per_key` does): some
# 0.25 s. Done here, so that no engine's clock counts it.
pa.array([0])

PAIMON_TABLE = "bench.t"
# Attempts of one commit before a case gives up.
MAX_ATTEMPTS = 50
# The `sql` case's untimed first query: session start-up, no table.
WARM_UP = "SELECT 1"


def with_retries(commit, conflict: type) -> int:
    """Calls `commit` until it returns, retrying while it raises `conflict`
    (a concurrent writer got there first), at most MAX_ATTEMPTS times;
    the failed attempts."""
    failed = 0
    while True:
        try:
            commit()
            return failed
        except conflict:
            failed += 1
            if failed >= MAX_ATTEMPTS:
                raise


def cpu_seconds() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


class Stopwatch:
    """A wall clock and a CPU clock started together."""

    def __init__(self):
        self.cpu = cpu_seconds()
        self.wall = time.perf_counter()

    def stop(self):
        return time.perf_counter() - self.wall, cpu_seconds() - self.cpu


def arrow_of(rows) -> pa.Table:
    """`rows` as a pyarrow Table of the workload's schema: a pandas
    DataFrame (`--from pandas`) is converted, inside the timed part; a
    pyarrow Table is returned as it is."""
    if isinstance(rows, pa.Table):
        return rows
    return pa.Table.from_pandas(rows, schema=workload.SCHEMA, preserve_index=False)


def newest_per_key(table: pa.Table) -> pa.Table:
    """The row with the largest `ts` of each `id`: what a Delta write needs
    first, since a Delta table has no key of its own."""
    if table.num_rows == 0:
        return table
    ordered = table.take(pc.sort_indices(table, sort_keys=[("id", "ascending"), ("ts", "descending")]))
    ids = ordered.column("id").combine_chunks()
    first_of_key = pa.concat_arrays([pa.array([True]), pc.not_equal(ids.slice(1), ids.slice(0, len(ids) - 1))])
    return ordered.filter(first_of_key)


# ---------------------------------------------------------------- Paimon (Rust core)


class Paimon:
    """Paimon's Rust writer and reader (pypaimon-rust)."""

    name = "paimon"

    def __init__(self, warehouse: Path):
        from pypaimon_rust.datafusion import PaimonCatalog

        self.warehouse = warehouse
        self.catalog = PaimonCatalog({"warehouse": str(warehouse)})
        self._table = None

    def create(self, buckets: int):
        from pypaimon_rust.datafusion import SQLContext

        self.warehouse.mkdir(parents=True, exist_ok=True)
        ctx = SQLContext()
        ctx.register_catalog("paimon", {"warehouse": str(self.warehouse)})
        ctx.sql("CREATE SCHEMA paimon.bench")
        ctx.sql(
            "CREATE TABLE paimon.bench.t (id STRING NOT NULL, region STRING NOT NULL, ts BIGINT NOT NULL, "
            "l1 BIGINT NOT NULL, l2 BIGINT NOT NULL, l3 BIGINT NOT NULL, l4 BIGINT NOT NULL, "
            "d1 DOUBLE NOT NULL, d2 DOUBLE NOT NULL, note STRING NOT NULL, PRIMARY KEY (region, id) NOT ENFORCED) "
            f"PARTITIONED BY (region) WITH ('bucket' = '{buckets}', 'sequence.field' = 'ts')"
        )

    def open(self):
        self._table = self.catalog.get_table(PAIMON_TABLE)

    def first_write(self, table: pa.Table):
        """Rows into the new, empty table."""
        return self.write(table)

    def write(self, table: pa.Table) -> int:
        """One commit of `table`'s rows (or a DataFrame's: `arrow_of`);
        failed attempts."""
        table = arrow_of(table)

        def commit():
            builder = self._table.new_batch_write_builder()
            writer = builder.new_write()
            try:
                for b in table.to_batches():
                    writer.write_arrow(b)
                messages = writer.prepare_commit()
                committer = builder.new_commit()
                try:
                    committer.commit(messages)
                finally:
                    committer.close()
            finally:
                writer.close()

        return with_retries(commit, Exception)

    def read(self) -> pa.Table:
        table = self.catalog.get_table(PAIMON_TABLE)
        builder = table.new_read_builder()
        splits = builder.new_scan().plan().splits()
        batches = builder.new_read().read(splits)
        if not batches:
            return workload.SCHEMA.empty_table()
        return pa.Table.from_batches(batches)

    def snapshot(self) -> int:
        """The latest snapshot id (0: none)."""
        latest = self.catalog.get_table(PAIMON_TABLE).latest_snapshot()
        return latest.id() if latest is not None else 0

    def sql_session(self):
        """A function that runs a query over the table `t`, to a pyarrow Table."""
        from pypaimon_rust.datafusion import SQLContext

        ctx = SQLContext()
        ctx.register_catalog("paimon", {"warehouse": str(self.warehouse)})
        ctx.set_current_catalog("paimon")
        ctx.set_current_database(PAIMON_TABLE.split(".")[0])
        return lambda q: batches_table(ctx.sql(q))


# ---------------------------------------------------------------- Delta (delta-rs)


class Delta:
    """delta-rs: an append for the first write, a merge on `id` after."""

    name = "delta"
    predicate = "t.region = s.region AND t.id = s.id"

    def __init__(self, path: Path):
        self.path = path

    def create(self, buckets: int):
        from deltalake import DeltaTable

        DeltaTable.create(str(self.path), workload.SCHEMA, partition_by=["region"])

    def open(self):
        # What `to_pyarrow_table` imports on its first call (some 25 ms),
        # imported here so that a read's clock does not count it.
        import deltalake.fs  # noqa: F401
        import pyarrow.dataset  # noqa: F401
        import pyarrow.parquet  # noqa: F401
        from deltalake import DeltaTable

        DeltaTable(str(self.path))

    def first_write(self, table: pa.Table) -> int:
        from deltalake import write_deltalake

        write_deltalake(str(self.path), newest_per_key(arrow_of(table)), mode="append")
        return 0

    def write(self, table: pa.Table) -> int:
        from deltalake import DeltaTable
        from deltalake.exceptions import CommitFailedError

        rows = newest_per_key(arrow_of(table))
        return with_retries(
            lambda: DeltaTable(str(self.path))
            .merge(rows, self.predicate, source_alias="s", target_alias="t")
            .when_matched_update_all(predicate="s.ts > t.ts")
            .when_not_matched_insert_all()
            .execute(),
            CommitFailedError,
        )

    def read(self) -> pa.Table:
        from deltalake import DeltaTable

        return DeltaTable(str(self.path)).to_pyarrow_table()

    def snapshot(self) -> int:
        from deltalake import DeltaTable

        return DeltaTable(str(self.path)).version()

    def sql_session(self):
        """A function that runs a query over the table `t`, to a pyarrow Table."""
        from deltalake import DeltaTable, QueryBuilder

        qb = QueryBuilder().register("t", DeltaTable(str(self.path)))
        return lambda q: pa.table(qb.execute(q).read_all())

    def compact(self) -> dict:
        """`optimize.compact()`: its metrics."""
        from deltalake import DeltaTable

        return DeltaTable(str(self.path)).optimize.compact()


# ---------------------------------------------------------------- Hudi (official reader)


class Hudi:
    """The official Hudi reader on Tributary's table; it only reads."""

    name = "hudi"

    def __init__(self, path: Path):
        self.path = path

    def open(self):
        pass

    def read(self) -> pa.Table:
        from hudi import HudiTableBuilder

        batches = HudiTableBuilder.from_base_uri(str(self.path)).build().read()
        if not batches:
            return workload.SCHEMA.empty_table()
        return pa.Table.from_batches(batches)

    def sql_session(self):
        """A function that runs a query over the table `t`, to a pyarrow Table."""
        from datafusion import SessionContext
        from hudi import HudiDataFusionDataSource

        ctx = SessionContext()
        ctx.register_table("t", HudiDataFusionDataSource(str(self.path)))
        return lambda q: ctx.sql(q).to_arrow_table()


# ---------------------------------------------------------------- Tributary (Python package)


class TributaryPy:
    """Tributary's Python package, in this process: `table.write` for every
    write, `table.to_pyarrow()` to read."""

    name = "tributary-py"

    def __init__(self, path: Path):
        self.path = path
        self._table = None

    def create(self, buckets: int):
        import tributary

        tributary.create(
            str(self.path),
            workload.SCHEMA,
            record_key="id",
            ordering_field="ts",
            partition_by="region",
            buckets=buckets,
        )

    def open(self):
        import tributary

        self._table = tributary.Table(str(self.path))

    def first_write(self, rows) -> int:
        """Rows into the new, empty table: a write like any other."""
        return self.write(rows)

    def write(self, rows) -> int:
        """One commit of `rows` (a pyarrow Table or a pandas DataFrame, which
        `table.write` converts itself); failed attempts."""
        from tributary import ConflictError

        return with_retries(lambda: self._table.write(rows), ConflictError)

    def read(self) -> pa.Table:
        return self._table.to_pyarrow()

    def snapshot(self) -> int:
        """Completed delta commits in the timeline."""
        import tributary

        timeline = tributary.Table(str(self.path)).timeline()
        return sum(1 for i in timeline if i["action"] == "deltacommit" and i["completed"])


ENGINES = {"paimon": Paimon, "delta": Delta, "hudi": Hudi, "tributary-py": TributaryPy}


def batches_table(batches: list) -> pa.Table:
    """Record batches as one table (none: an empty table without columns)."""
    return pa.Table.from_batches(batches) if batches else pa.table({})


def engine(name: str, table: Path):
    """The adapter of engine `name` for the table at `table`."""
    return ENGINES[name](table)


# ---------------------------------------------------------------- cases


def one_commit(step) -> dict:
    """Times `step`, which makes one commit and returns (rows, failed attempts)."""
    clock = Stopwatch()
    rows, failed = step()
    wall, cpu = clock.stop()
    return {"rows": len(rows), "commits": 1, "failed": failed, "wall": wall, "cpu": cpu}


def input_rows(args):
    """The rows of `--input` as a pyarrow Table, or with `--from pandas` as a
    pandas DataFrame (made here, before the clock starts)."""
    rows = pa.Table.from_batches(workload.read_ipc(args.input), schema=workload.SCHEMA)
    return rows.to_pandas() if args.source == "pandas" else rows


def case_ingest(e, args) -> dict:
    rows = input_rows(args)
    e.create(args.buckets)
    e.open()
    return one_commit(lambda: (rows, e.first_write(rows)))


def case_ingest_json(e, args) -> dict:
    e.create(args.buckets)
    e.open()
    options = pyarrow.json.ParseOptions(explicit_schema=workload.SCHEMA)

    def parse_and_write():
        # The parse is part of the ingest, as `tributary write` parses too.
        rows = pyarrow.json.read_json(str(args.input), parse_options=options)
        return rows, e.first_write(rows)

    return one_commit(parse_and_write)


def case_upsert(e, args) -> dict:
    rows = input_rows(args)
    e.open()
    return one_commit(lambda: (rows, e.write(rows)))


def case_commits(e, args) -> dict:
    batches = workload.read_ipc(args.input)
    end = len(batches) if args.count is None else min(len(batches), args.first + args.count)
    batches = batches[args.first : end]
    tables = [pa.Table.from_batches([b]) for b in batches]
    e.open()
    snapshot_before = e.snapshot()
    if args.barrier:
        print(json.dumps({"ready": True}), flush=True)
        sys.stdin.readline()
    clock = Stopwatch()
    latencies, failed = [], 0
    for t in tables:
        started = time.perf_counter()
        failed += e.write(t)
        latencies.append((time.perf_counter() - started) * 1e3)
    wall, cpu = clock.stop()
    ordered = sorted(latencies)

    def pct(p):
        return ordered[round((len(ordered) - 1) * p)] if ordered else float("nan")

    return {
        "rows": sum(t.num_rows for t in tables),
        "commits": len(tables),
        "failed": failed,
        "wall": wall,
        "cpu": cpu,
        "p50_ms": pct(0.5),
        "p99_ms": pct(0.99),
        "latencies_ms": latencies,
        "snapshot_before": snapshot_before,
    }


def case_read(e, args) -> dict:
    e.open()
    clock = Stopwatch()
    table = e.read()
    wall, cpu = clock.stop()
    if args.dump:
        rows = workload.normalise(table)
        workload.write_ipc(args.dump, rows.to_batches(), rows.schema)
    return {"rows": table.num_rows, "wall": wall, "cpu": cpu}


def case_sql(e, args) -> dict:
    """Each named query of `--queries`, timed alone; see the module notes."""
    queries = json.loads(args.queries.read_text())
    run = e.sql_session()
    run(WARM_UP)
    figures, total = {}, 0.0
    for name, query in queries.items():
        clock = Stopwatch()
        result = run(query)
        wall, cpu = clock.stop()
        total += wall
        answer = None if name == "projection" else result.to_pylist()
        figures[name] = {"wall": wall, "cpu": cpu, "rows": result.num_rows, "answer": answer}
    return {"wall": total, "queries": figures}


def case_compact(e, args) -> dict:
    clock = Stopwatch()
    metrics = e.compact()
    wall, cpu = clock.stop()
    return {"wall": wall, "cpu": cpu, "metrics": metrics}


def case_snapshot(e, args) -> dict:
    """Not a measurement: the table's latest snapshot id or version."""
    return {"snapshot": e.snapshot()}


CASES = {
    "ingest": case_ingest,
    "ingest-json": case_ingest_json,
    "upsert": case_upsert,
    "commits": case_commits,
    "read": case_read,
    "sql": case_sql,
    "compact": case_compact,
    "snapshot": case_snapshot,
}


def main():
    p = argparse.ArgumentParser(description="One case of one peer engine; prints one JSON line of figures.")
    p.add_argument("engine", choices=sorted(ENGINES))
    p.add_argument("case", choices=sorted(CASES))
    p.add_argument("--table", type=Path, required=True)
    p.add_argument("--input", type=Path)
    p.add_argument("--buckets", type=int, default=16)
    p.add_argument(
        "--from",
        dest="source",
        choices=["arrow", "pandas"],
        default="arrow",
        help="ingest, upsert: give each engine the input as a pyarrow Table (default) or a pandas DataFrame",
    )
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--count", type=int)
    p.add_argument("--barrier", action="store_true", help="print a ready line, wait for a line on stdin")
    p.add_argument("--dump", type=Path, help="read: also write the rows read to this Arrow IPC file (untimed)")
    p.add_argument("--queries", type=Path, help="sql: a JSON object of named queries over the table `t`")
    args = p.parse_args()
    figures = CASES[args.case](engine(args.engine, args.table), args)
    print(json.dumps(figures), flush=True)
    sys.stderr.flush()
    # Skip the interpreter's teardown: delta-rs's native threads sometimes
    # abort the process there ("terminate called without an active
    # exception") after the work is done and reported.
    os._exit(0)


if __name__ == "__main__":
    main()
