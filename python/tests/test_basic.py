"""The Python package: create, write upserts and deletes out of order,
read back (Tributary's reader, the official Hudi reader, pandas) against a
model; bad input; threads and processes at once; types; a writer killed
and resumed from its checkpoint (exactly once)."""

from __future__ import annotations

import json
import os
import random
import threading
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

import tributary

SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("city", pa.string(), nullable=False),
        pa.field("fare", pa.float64()),
        pa.field("note", pa.string()),
    ]
)
CITIES = ["sf", "nyc", "paris"]


def make_table(path: Path | str, buckets: int = 4) -> tributary.Table:
    return tributary.create(
        str(path), SCHEMA, record_key="id", ordering_field="ts", partition_by="city", buckets=buckets
    )


@pytest.fixture(params=["local", "s3"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a test's tables go: a local folder, or a fresh prefix on the S3
    server of `$TRIBUTARY_TEST_S3` (`s3://bucket[/prefix]`, reached through
    the `AWS_*` variables, as `.ci/s3.sh` writes them). Without a server the
    S3 case is skipped, and under CI it fails."""
    if request.param == "local":
        return str(tmp_path.resolve())
    root = os.environ.get("TRIBUTARY_TEST_S3")
    if not root:
        if os.environ.get("CI"):
            pytest.fail("TRIBUTARY_TEST_S3 is not set: CI runs the Python tests on S3 too")
        pytest.skip("no S3 server (TRIBUTARY_TEST_S3)")
    return f"{root.rstrip('/')}/python/{uuid.uuid4().hex}"


class Model:
    """Each key keeps its event with the greatest ts (all ts are distinct);
    a delete that wins removes the key."""

    def __init__(self) -> None:
        self.best: dict[str, tuple[int, dict | None]] = {}
        self.lock = threading.Lock()

    def apply(self, events: list[dict]) -> None:
        with self.lock:
            for e in events:
                ts = e["ts"]
                if e["id"] not in self.best or ts > self.best[e["id"]][0]:
                    row = None if e["_hoodie_is_deleted"] else {k: v for k, v in e.items() if k != "_hoodie_is_deleted"}
                    self.best[e["id"]] = (ts, row)

    def rows(self) -> dict[str, dict]:
        return {k: row for k, (_, row) in self.best.items() if row is not None}


def events(rng: random.Random, keys: list[str], n: int, ts_pool: list[int]) -> list[dict]:
    """n events on keys, out of order: ts drawn from a shuffled pool of
    distinct values; about one in six is a delete. A key's city is fixed
    (a record stays in its partition)."""
    out = []
    for _ in range(n):
        k = rng.choice(keys)
        out.append(
            {
                "id": k,
                "ts": ts_pool.pop(),
                "city": CITIES[int(k[1:]) % len(CITIES)],
                "fare": round(rng.uniform(1, 100), 2),
                "note": rng.choice([None, "x", "y"]),
                "_hoodie_is_deleted": rng.random() < 1 / 6,
            }
        )
    return out


def as_arrow(evs: list[dict]) -> pa.Table:
    cols = ["id", "ts", "city", "fare", "note", "_hoodie_is_deleted"]
    return pa.table({c: [e[c] for e in evs] for c in cols})


def by_key(t: pa.Table) -> dict[str, dict]:
    cols = ["id", "ts", "city", "fare", "note"]
    return {r["id"]: {c: r[c] for c in cols} for r in t.select(cols).to_pylist()}


def hudi_rows(path: Path | str) -> dict[str, dict]:
    from hudi import HudiTableBuilder

    uri = str(path) if str(path).startswith("s3://") else str(Path(path).resolve())
    builder = HudiTableBuilder.from_base_uri(uri)
    if uri.startswith("s3://"):
        builder = builder.with_storage_options(
            {k.lower(): v for k, v in os.environ.items() if k.startswith("AWS_")}
        )
    batches = builder.build().read()
    if not batches:
        return {}
    return by_key(pa.Table.from_batches(batches))


def test_create_write_read_against_model(place: str) -> None:
    path = f"{place}/trips"
    table = make_table(path)
    assert repr(table) == f'Table(uri="{path}", name="trips")'
    assert table.schema().names == SCHEMA.names
    avro = json.loads(table.avro_schema())
    assert avro["fields"][3] == {"name": "fare", "type": ["null", "double"], "default": None}

    rng = random.Random(7)
    keys = [f"k{i}" for i in range(60)]
    pool = list(range(1, 2000))
    rng.shuffle(pool)
    model = Model()
    # pyarrow, pandas and a RecordBatchReader as inputs.
    for round_ in range(6):
        evs = events(rng, keys, 120, pool)
        data = as_arrow(evs)
        if round_ % 3 == 1:
            data = data.to_pandas()
        elif round_ % 3 == 2:
            data = pa.RecordBatchReader.from_batches(data.schema, data.to_batches(max_chunksize=50))
        summary = table.write(data)
        model.apply(evs)
        assert summary["rows"] == 120
        assert summary["instant"] and summary["completed"] >= summary["instant"]

    expected = model.rows()
    assert by_key(table.to_pyarrow()) == expected
    assert by_key(tributary.Table(path).to_pandas().pipe(pa.Table.from_pandas)) == expected
    assert by_key(pa.Table.from_batches(list(table.to_batches()), schema=table.schema())) == expected
    # The official reader (hudi-rs) reads the same rows.
    assert hudi_rows(path) == expected

    # Filters and columns.
    sf = table.to_pyarrow(columns=["id", "fare"], filter=[("city", "=", "sf"), ("fare", ">", 50.0)])
    assert sf.column_names == ["id", "fare"]
    want = {k for k, r in expected.items() if r["city"] == "sf" and r["fare"] > 50}
    assert set(sf.column("id").to_pylist()) == want
    either = table.to_pyarrow(filter=[[("city", "in", ["nyc"])], [("note", "=", None)]])
    want = {k for k, r in expected.items() if r["city"] == "nyc" or r["note"] is None}
    assert set(either.column("id").to_pylist()) == want

    # Time travel to the first commit.
    first = [i for i in table.timeline() if i["action"] == "deltacommit"][0]
    assert first["state"] == "COMPLETED" or first["completed"]
    assert table.to_pyarrow(as_of=first["requested"]).num_rows <= 120

    # Compaction leaves the rows as they were, for both readers.
    done = table.compact()
    assert done and all(d["records"] >= 0 for d in done)
    assert by_key(table.to_pyarrow()) == expected
    assert hudi_rows(path) == expected


def test_bad_input_names_the_column_and_writes_nothing(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t")
    table.write(pa.table({"id": ["a"], "ts": [1], "city": ["sf"], "fare": [1.0]}))
    before = table.to_pyarrow()
    commits = [i for i in table.timeline() if i["completed"]]

    with pytest.raises(tributary.InvalidInputError, match="`id`"):
        table.write(pa.table({"ts": [2], "city": ["sf"]}))
    with pytest.raises(tributary.InvalidInputError, match="`ts`"):
        table.write(pa.table({"id": ["b"], "ts": ["not a number"], "city": ["sf"]}))
    # A value that does not convert is an error, not a null.
    with pytest.raises(tributary.InvalidInputError, match="field `fare`: cannot convert"):
        table.write(pa.table({"id": ["b"], "ts": [2], "city": ["sf"], "fare": ["abc"]}))
    with pytest.raises(tributary.InvalidInputError, match="`colour`"):
        table.write(pa.table({"id": ["b"], "ts": [2], "city": ["sf"], "colour": ["red"]}))
    # A bad second batch: the good first one is not committed either.
    good = pa.record_batch({"id": ["c"], "ts": [3], "city": ["sf"]})
    bad = pa.record_batch({"id": [None], "ts": [4], "city": ["sf"]}, schema=good.schema)
    with pytest.raises(tributary.InvalidInputError, match="`id`"):
        table.write(pa.RecordBatchReader.from_batches(good.schema, [good, bad]))
    assert issubclass(tributary.InvalidInputError, tributary.TributaryError)

    # The same mistakes from pandas and Polars.
    import pandas as pd
    import polars as pl

    # Python objects that fit neither what pyarrow infers nor the table's
    # type: pyarrow's message names the column.
    with pytest.raises(tributary.InvalidInputError, match="fare"):
        table.write(pd.DataFrame({"id": ["b"], "ts": [2], "city": ["sf"], "fare": [[("k", object())]]}))

    for frame in (pd.DataFrame, pl.DataFrame):
        with pytest.raises(tributary.InvalidInputError, match="`id`"):
            table.write(frame({"ts": [2], "city": ["sf"]}))
        with pytest.raises(tributary.InvalidInputError, match="`ts`"):
            table.write(frame({"id": ["b"], "ts": ["not a number"], "city": ["sf"]}))
        with pytest.raises(tributary.InvalidInputError, match="`colour`"):
            table.write(frame({"id": ["b"], "ts": [2], "city": ["sf"], "colour": ["red"]}))

    assert table.to_pyarrow().equals(before)
    assert [i for i in table.timeline() if i["completed"]] == commits

    with pytest.raises(tributary.InvalidInputError, match="not a Hudi table"):
        tributary.Table(str(tmp_path / "nothing"))
    with pytest.raises(tributary.ConflictError):
        make_table(tmp_path / "t")
    with pytest.raises(tributary.InvalidInputError, match="filter"):
        table.to_pyarrow(filter=[("nope", "=", 1)])


def test_two_threads_write_at_once(place: str) -> None:
    path = f"{place}/shared"
    table = make_table(path, buckets=2)
    keys = [f"k{i}" for i in range(40)]
    pool = list(range(1, 5000))
    random.Random(3).shuffle(pool)
    pool_lock = threading.Lock()
    model = Model()
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        rng = random.Random(n)
        try:
            for offset in range(1, 9):
                with pool_lock:
                    evs = events(rng, keys, 50, pool)
                # Each thread's own table object; same table.
                t = tributary.Table(path)
                t.write(as_arrow(evs), writer_id=f"thread-{n}", checkpoint=str(offset))
                model.apply(evs)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors

    assert table.checkpoint("thread-0") == "8"
    assert table.checkpoint("thread-1") == "8"
    assert table.checkpoint("nobody") is None
    commits = [i for i in table.timeline() if i["action"] == "deltacommit" and i["completed"]]
    assert len(commits) == 16
    expected = model.rows()
    assert by_key(table.to_pyarrow()) == expected
    assert hudi_rows(path) == expected


def test_a_newer_writer_with_the_same_id_fences_the_older(tmp_path: Path) -> None:
    table = make_table(tmp_path / "f")
    row = {"id": ["a"], "ts": [1], "city": ["sf"]}
    table.write(pa.table(row), writer_id="app", checkpoint="10")
    assert table.checkpoint("app") == "10"

    # The older writer registers and starts its commit, then waits in the
    # middle of its input while a newer writer of the id commits.
    middle, go = threading.Event(), threading.Event()
    schema = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("city", pa.string())])

    def slow_input():
        yield pa.record_batch({"id": ["b"], "ts": [2], "city": ["sf"]}, schema=schema)
        middle.set()
        go.wait(60)
        yield pa.record_batch({"id": ["c"], "ts": [3], "city": ["sf"]}, schema=schema)

    outcome: list[BaseException | dict] = []

    def older() -> None:
        try:
            reader = pa.RecordBatchReader.from_batches(schema, slow_input())
            outcome.append(table.write(reader, writer_id="app", checkpoint="11"))
        except BaseException as e:  # noqa: BLE001 - checked below
            outcome.append(e)

    thread = threading.Thread(target=older)
    thread.start()
    assert middle.wait(60)
    table.write(pa.table({"id": ["d"], "ts": [4], "city": ["sf"]}), writer_id="app", checkpoint="12")
    go.set()
    thread.join(60)

    assert len(outcome) == 1 and isinstance(outcome[0], tributary.FencedError), outcome
    assert isinstance(outcome[0], tributary.ConflictError)
    assert table.checkpoint("app") == "12"
    assert sorted(table.to_pyarrow().column("id").to_pylist()) == ["a", "d"]


def test_avro_schema_of_types() -> None:
    schema = pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            ("when", pa.timestamp("ns", tz="UTC")),
            ("day", pa.date32()),
            ("price", pa.decimal128(10, 2)),
            ("tags", pa.list_(pa.string())),
            ("where", pa.struct([("lat", pa.float64()), ("lon", pa.float64())])),
        ]
    )
    avro = json.loads(tributary.avro_schema_of(schema, "trips"))
    assert avro["name"] == "trips_record" and avro["namespace"] == "hoodie.trips"
    fields = {f["name"]: f for f in avro["fields"]}
    assert fields["id"]["type"] == "string"
    assert fields["when"]["type"] == ["null", {"type": "long", "logicalType": "timestamp-micros"}]
    assert fields["when"]["default"] is None
    assert fields["day"]["type"][1]["logicalType"] == "date"


def _writer_ids(n: int) -> list[str]:
    """The writer ids of process n: process 0 writes from 2 threads."""
    return [f"process-0-thread-{t}" for t in range(2)] if n == 0 else [f"process-{n}"]


def _process_writer(path: str, n: int, evs: list[dict]) -> None:
    """One process's writes: its events in 4 commits per writer id, process
    0's split between 2 threads that share one `Table`."""
    table = tributary.Table(path)
    ids = _writer_ids(n)

    def write(k: int, writer_id: str) -> None:
        mine = evs[k :: len(ids)]
        for offset in range(4):
            table.write(as_arrow(mine[offset::4]), writer_id=writer_id, checkpoint=str(offset + 1))

    threads = [threading.Thread(target=write, args=(k, w)) for k, w in enumerate(ids)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


@pytest.mark.parametrize("start_method", ["spawn", "fork"])
def test_processes_write_at_once(place: str, start_method: str) -> None:
    import multiprocessing

    path = f"{place}/procs"
    table = make_table(path, buckets=2)
    # The parent has used the runtime before it forks: a forked child makes
    # its own.
    assert table.to_pyarrow().num_rows == 0
    rng = random.Random(11)
    keys = [f"k{i}" for i in range(30)]
    pool = list(range(1, 5000))
    rng.shuffle(pool)
    per_process = [events(rng, keys, 80, pool) for _ in range(4)]
    ctx = multiprocessing.get_context(start_method)
    procs = [ctx.Process(target=_process_writer, args=(str(path), n, evs)) for n, evs in enumerate(per_process)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]

    model = Model()
    for evs in per_process:
        model.apply(evs)
    expected = model.rows()
    assert all(table.checkpoint(w) == "4" for n in range(4) for w in _writer_ids(n))
    commits = [i for i in table.timeline() if i["action"] == "deltacommit" and i["completed"]]
    assert len(commits) == 5 * 4
    assert by_key(table.to_pyarrow()) == expected
    assert hudi_rows(path) == expected
    assert by_key(pa.Table.from_pandas(table.to_pandas(), preserve_index=False)) == expected


def test_types_round_trip(tmp_path: Path) -> None:
    import datetime as dt
    import decimal

    utc = dt.timezone.utc
    schema = pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("ts", pa.int64(), nullable=False),
            ("i32", pa.int32()),
            ("flag", pa.bool_()),
            ("f32", pa.float32()),
            ("raw", pa.binary()),
            ("price", pa.decimal128(10, 2)),
            ("day", pa.date32()),
            ("at_utc", pa.timestamp("us", tz="UTC")),
            ("at_ms", pa.timestamp("ms", tz="UTC")),
            ("at_local", pa.timestamp("us")),
            ("tags", pa.list_(pa.string())),
            ("place", pa.struct([("lat", pa.float64()), ("lon", pa.float64())])),
            ("attrs", pa.map_(pa.string(), pa.int64())),
        ]
    )
    rows = [
        {
            "id": "a",
            "ts": 1,
            "i32": 7,
            "flag": True,
            "f32": 1.5,
            "raw": b"\x00\x01",
            "price": decimal.Decimal("12.34"),
            "day": dt.date(2024, 2, 29),
            "at_utc": dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=utc),
            "at_ms": dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=utc),
            "at_local": dt.datetime(2024, 1, 2, 3, 4, 5, 6),
            "tags": ["x", None],
            "place": {"lat": 1.0, "lon": 2.0},
            "attrs": [("k", 1)],
        },
        {"id": "b", "ts": 2, **{f.name: None for f in schema if f.name not in ("id", "ts")}},
    ]
    import polars as pl

    table = tributary.create(str(tmp_path / "types"), schema, record_key="id", ordering_field="ts")
    # The same rows from each library, under keys of their own. pandas
    # holds timestamps in nanoseconds (cast to the table's microseconds)
    # and maps as lists of pairs; Polars has its own types for each.
    converters = {
        "pyarrow": lambda t: t,
        "pandas": lambda t: t.to_pandas(),
        "polars": pl.from_arrow,
    }
    for source, convert in converters.items():
        mine = [{**r, "id": f"{source}-{r['id']}"} for r in rows]
        table.write(convert(pa.Table.from_pylist(mine, schema=schema)))
    got = table.to_pyarrow()
    # UTC comes back spelled as Arrow's Avro and Parquet readers spell it.
    utc_as_read = pa.schema(
        [f.with_type(pa.timestamp(f.type.unit, tz="+00:00")) if getattr(f.type, "tz", None) == "UTC" else f for f in schema]
    )
    assert got.schema.remove_metadata() == utc_as_read
    # Maps come back as lists of pairs, as pyarrow gives them.
    for source in converters:
        mine = sorted((r for r in got.to_pylist() if r["id"].startswith(f"{source}-")), key=lambda r: r["id"])
        assert [{**r, "id": r["id"].split("-", 1)[1]} for r in mine] == rows, source
    # The official reader (hudi-rs 0.5.0) panics on `local-timestamp-micros`
    # (a timestamp without a time zone); the rest it reads.
    from hudi import HudiTableBuilder

    path = tmp_path / "types_hudi"
    no_local = pa.schema([f for f in schema if f.name != "at_local"])
    t2 = tributary.create(str(path), no_local, record_key="id", ordering_field="ts")
    t2.write(pa.Table.from_pylist([{k: v for k, v in r.items() if k != "at_local"} for r in rows], schema=no_local))
    read = pa.Table.from_batches(HudiTableBuilder.from_base_uri(str(path)).build().read())
    assert sorted(read.select(no_local.names).to_pylist(), key=lambda r: r["id"]) == [
        {k: v for k, v in r.items() if k != "at_local"} for r in rows
    ]


def test_writer_adds_several_batches_to_one_commit(tmp_path: Path) -> None:
    table = make_table(tmp_path / "w")
    with table.writer(writer_id="app") as w:
        assert w.is_open and w.instant
        w.write(pa.table({"id": ["a"], "ts": [1], "city": ["sf"]}))
        w.write(pa.record_batch({"id": ["b"], "ts": [2], "city": ["nyc"]}))
        # Not visible before the commit.
        assert table.to_pyarrow().num_rows == 0
        summary = w.commit(checkpoint="2")
    assert summary["rows"] == 2 and summary["writer_id"] == "app"
    assert not w.is_open
    assert table.checkpoint("app") == "2"
    assert sorted(table.to_pyarrow().column("id").to_pylist()) == ["a", "b"]
    with pytest.raises(tributary.InvalidInputError, match="committed or aborted"):
        w.write(pa.table({"id": ["c"], "ts": [3], "city": ["sf"]}))

    # Leaving the block without a commit aborts; so does a bad batch.
    with table.writer() as w:
        w.write(pa.table({"id": ["c"], "ts": [3], "city": ["sf"]}))
    with pytest.raises(tributary.InvalidInputError, match="`ts`"):
        with table.writer() as w:
            w.write(pa.table({"id": ["d"], "ts": [4], "city": ["sf"]}))
            w.write(pa.table({"id": ["e"], "city": ["sf"]}))
    assert sorted(table.to_pyarrow().column("id").to_pylist()) == ["a", "b"]
    deltacommits = [i for i in table.timeline() if i["action"] == "deltacommit" and i["completed"]]
    assert len(deltacommits) == 1


def test_queries_and_clean(tmp_path: Path) -> None:
    table = make_table(tmp_path / "q", buckets=1)
    first = table.write(pa.table({"id": ["a", "b"], "ts": [1, 1], "city": ["sf", "sf"], "fare": [1.0, 2.0]}))
    second = table.write(pa.table({"id": ["b", "c"], "ts": [2, 2], "city": ["sf", "sf"], "fare": [3.0, 4.0]}))

    def ids(t: pa.Table) -> list[str]:
        return sorted(t.column("id").to_pylist())

    # Before any compaction there are no base files.
    assert table.to_pyarrow(query="read_optimized").num_rows == 0
    # What the second commit wrote.
    inc = table.to_pyarrow(query="incremental", begin=first["completed"], end=second["completed"])
    assert ids(inc) == ["b", "c"]
    assert ids(table.to_pyarrow(query="incremental", end=first["completed"])) == ["a", "b"]
    with pytest.raises(tributary.InvalidInputError, match="query"):
        table.to_pyarrow(query="latest")
    with pytest.raises(tributary.InvalidInputError, match="incremental"):
        table.to_pyarrow(begin=first["completed"])

    assert table.compact()
    assert ids(table.to_pyarrow(query="read_optimized")) == ["a", "b", "c"]
    # The compaction made the two log files' slices obsolete.
    table.write(pa.table({"id": ["d"], "ts": [3], "city": ["sf"]}))
    done = table.clean(retain_commits=1)
    assert done is not None and done["deleted_files"]
    assert ids(table.to_pyarrow()) == ["a", "b", "c", "d"]
    assert table.clean(retain_commits=1) is None
    with pytest.raises(tributary.InvalidInputError, match="not both"):
        table.clean(retain_commits=1, retain_hours=1)


def _resuming_writer(path: str, batches: int) -> None:
    """Writes batch `i` (50 new keys) with checkpoint `i + 1`, from where the
    last visible commit of its writer id left off, pausing between commits
    so that a kill can land anywhere."""
    import time

    table = tributary.Table(path)
    start = int(table.checkpoint("resumer") or 0)
    rng = random.Random(start)
    for i in range(start, batches):
        rows = [
            {"id": f"k{i * 50 + j}", "ts": i, "city": CITIES[j % 3], "fare": float(i), "note": str(j),
             "_hoodie_is_deleted": False}
            for j in range(50)
        ]
        table.write(as_arrow(rows), writer_id="resumer", checkpoint=str(i + 1))
        time.sleep(rng.uniform(0.005, 0.02))


def test_a_killed_writer_resumes_from_its_checkpoint(place: str) -> None:
    """Exactly once: a writer process killed at random moments (mid-write
    included) and started again resumes from `checkpoint()`; at the end
    every batch is in the table once, each in one completed commit."""
    import multiprocessing
    import signal
    import time

    path = f"{place}/resume"
    make_table(path, buckets=2)
    # Fewer on S3, whose commits take longer.
    on_s3 = path.startswith("s3://")
    batches, runs_killed = (8, 3) if on_s3 else (30, 8)
    ctx = multiprocessing.get_context("spawn")
    rng = random.Random(5)
    kills, finished = 0, False
    reader = tributary.Table(path)
    # Up to `runs_killed` runs killed at a random moment soon after they commit their
    # next batch (so that every killed run made progress, and a kill can
    # land mid-write), then one left to finish.
    for attempt in range(runs_killed + 1):
        before = reader.checkpoint("resumer")
        p = ctx.Process(target=_resuming_writer, args=(path, batches))
        p.start()
        if attempt < runs_killed:
            deadline = time.monotonic() + 120
            while p.is_alive() and reader.checkpoint("resumer") == before and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(rng.uniform(0, 0.05))
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
                p.join()
                kills += 1
                continue
        p.join(timeout=300)
        assert p.exitcode == 0
        finished = True
        break
    assert finished, "the writer never finished"
    assert kills > 0, "no run was killed: the test did not test resuming"

    table = tributary.Table(path)
    assert table.checkpoint("resumer") == str(batches)
    rows = table.to_pyarrow()
    ids = rows.column("id").to_pylist()
    assert sorted(ids) == sorted(f"k{i}" for i in range(batches * 50)), "every key once"
    # No batch was committed twice: one completed delta commit per batch.
    done = [i for i in table.timeline() if i["action"] == "deltacommit" and i["state"] == "COMPLETED"]
    assert len(done) == batches, done
    assert hudi_rows(path).keys() == set(ids)


def test_polars_in_and_out(tmp_path: Path) -> None:
    """A Polars DataFrame writes through the Arrow C stream interface and
    reads back with `to_polars`."""
    import polars as pl
    table = make_table(tmp_path / "polars")
    df = pl.DataFrame(
        {"id": ["k1", "k2", "k3"], "ts": [3, 1, 2], "city": ["sf", "nyc", "sf"], "fare": [1.5, None, 3.0],
         "note": ["a", "b", None]}
    )
    table.write(df)
    table.write(pl.DataFrame({"id": ["k1"], "ts": [2], "city": ["sf"], "fare": [9.0], "note": ["old"]}))
    got = table.to_polars(columns=["id", "ts", "fare", "note"]).sort("id")
    assert got.to_dicts() == [
        {"id": "k1", "ts": 3, "fare": 1.5, "note": "a"},
        {"id": "k2", "ts": 1, "fare": None, "note": "b"},
        {"id": "k3", "ts": 2, "fare": 3.0, "note": None},
    ]


def test_sql_over_tables(place: str) -> None:
    path = f"{place}/sqlt"
    table = make_table(path, buckets=2)
    first = table.write(pa.table({"id": ["a", "b", "c"], "ts": [1, 1, 1], "city": ["sf", "sf", "nyc"], "fare": [1.0, 2.0, 3.0]}))
    table.write(pa.table({"id": ["b", "d"], "ts": [2, 2], "city": ["sf", "paris"], "fare": [20.0, 4.0]}))

    got = tributary.sql("SELECT city, count(*) AS n, sum(fare) AS total FROM t GROUP BY city ORDER BY city", {"t": table})
    assert got.to_pylist() == [
        {"city": "nyc", "n": 1, "total": 3.0},
        {"city": "paris", "n": 1, "total": 4.0},
        {"city": "sf", "n": 2, "total": 21.0},
    ]
    # A URI with time travel, joined to the latest snapshot.
    changed = tributary.sql(
        "SELECT n.id, n.fare - o.fare AS change FROM n JOIN o ON n.id = o.id WHERE n.fare <> o.fare",
        {"n": table, "o": f"{path}@as-of={first['completed']}"},
    )
    assert changed.to_pylist() == [{"id": "b", "change": 18.0}]
    meta = tributary.sql("SELECT _hoodie_record_key AS k FROM t WHERE fare > 3 ORDER BY k", {"t": path})
    assert meta.column("k").to_pylist() == ["b", "d"]
    reader = tributary.sql("SELECT id FROM t", {"t": table}, stream=True)
    assert isinstance(reader, pa.RecordBatchReader)
    assert sorted(reader.read_all().column("id").to_pylist()) == ["a", "b", "c", "d"]

    with pytest.raises(tributary.InvalidInputError, match="SELEC"):
        tributary.sql("SELEC 1", {"t": table})
    with pytest.raises(tributary.InvalidInputError, match="nope"):
        tributary.sql("SELECT nope FROM t", {"t": table})
    with pytest.raises(tributary.InvalidInputError, match="missing"):
        tributary.sql("SELECT * FROM missing", {"t": table})
    with pytest.raises(tributary.InvalidInputError, match="@as-of=T"):
        tributary.sql("SELECT 1", {"t": f"{path}@yesterday"})


def test_datafusion_python_queries_a_table(tmp_path: Path) -> None:
    from datafusion import SessionContext

    table = make_table(tmp_path / "df")
    table.write(pa.table({"id": ["a", "b", "c"], "ts": [1, 1, 1], "city": ["sf", "sf", "nyc"], "fare": [1.0, 2.0, 3.0]}))
    table.write(pa.table({"id": ["a"], "ts": [2], "city": ["sf"], "_hoodie_is_deleted": [True]}))
    ctx = SessionContext()
    ctx.register_table("trips", table)
    got = ctx.sql("SELECT city, count(*) AS n FROM trips WHERE fare >= 2 GROUP BY city ORDER BY city").to_arrow_table()
    assert got.to_pylist() == [{"city": "nyc", "n": 1}, {"city": "sf", "n": 1}]
    assert ctx.sql("SELECT id FROM trips LIMIT 1").count() == 1


def test_an_error_while_streaming_raises_its_kind(tmp_path: Path) -> None:
    table = make_table(tmp_path / "e", buckets=1)
    table.write(pa.table({"id": ["a"], "ts": [1], "city": ["sf"], "fare": [1.0]}))
    reader = table.to_batches()
    # The file the scan planned is damaged before it is read.
    for f in (tmp_path / "e" / "city=sf").iterdir():
        if ".log." in f.name:
            f.write_bytes(b"not an avro log")
    with pytest.raises(tributary.CorruptDataError):
        reader.read_all()


def test_a_consumer_follows_the_change_feed(place: str) -> None:
    """A loop over successive windows of `changes()`, each beginning where
    the last ended, while two threads write out-of-order events and deletes
    and the table is compacted and cleaned: the replica built from the feed
    alone equals the table, and a late event that lost changed nothing."""
    path = f"{place}/feed"
    table = make_table(path, buckets=2)
    keys = [f"k{i}" for i in range(20)]
    pool = list(range(1, 5000))
    random.Random(7).shuffle(pool)
    pool_lock = threading.Lock()
    errors: list[BaseException] = []
    done = threading.Event()

    def writer(n: int) -> None:
        rng = random.Random(n)
        try:
            t = tributary.Table(path)
            for _ in range(6):
                with pool_lock:
                    evs = events(rng, keys, 15, pool)
                t.write(as_arrow(evs))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    replica: dict[str, dict] = {}
    position = None
    windows = 0

    def follow() -> None:
        nonlocal position, windows
        feed = table.changes(position)
        for change in feed.rows.to_pylist():
            key, before, after = change["record_key"], change["before"], change["after"]
            if change["op"] == "i":
                assert key not in replica and before is None, change
            else:
                assert replica.get(key) == before, change
            if after is None:
                del replica[key]
            else:
                replica[key] = after
        position = feed.end
        windows += 1

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    rounds = 0
    while any(t.is_alive() for t in threads):
        follow()
        rounds += 1
        if rounds % 5 == 0:
            table.compact()
    for t in threads:
        t.join()
    assert not errors, errors
    follow()
    table.compact()
    follow()
    cleaned = table.clean(retain_commits=1)
    follow()
    assert cleaned and cleaned["deleted_files"], "the cleaner removed nothing: cleaning was not tested"
    want = {r["id"]: {c: r[c] for c in ["id", "ts", "city", "fare", "note"]} for r in table.to_pyarrow().to_pylist()}
    assert {k: {c: v[c] for c in ["id", "ts", "city", "fare", "note"]} for k, v in replica.items()} == want
    assert windows > 2

    # A late event that loses to the newer version changes nothing; one
    # that wins is an update with the row before.
    key = next(iter(want))
    newest = want[key]["ts"]
    late = {**want[key], "ts": newest - 1, "fare": -1.0, "_hoodie_is_deleted": False}
    table.write(as_arrow([late]))
    assert table.changes(position).rows.num_rows == 0
    newer = {**want[key], "ts": newest + 10_000, "fare": -2.0, "_hoodie_is_deleted": False}
    table.write(as_arrow([newer]))
    (change,) = table.changes(position).rows.to_pylist()
    assert (change["op"], change["before"]["fare"], change["after"]["fare"]) == ("u", want[key]["fare"], -2.0)
    with pytest.raises(tributary.InvalidInputError, match="cleaner removed"):
        table.changes()


def test_the_change_log_records_the_feed(tmp_path: Path) -> None:
    """A table created with `change_log=True`: `write_change_log()` records
    the changes of the commits completed since its last run, as many as the
    feed gives for its window, writes nothing when none completed, and a
    table without a change log refuses it."""
    path = str(tmp_path / "logged")
    table = tributary.create(
        path, SCHEMA, record_key="id", ordering_field="ts", partition_by="city", buckets=2, change_log=True
    )
    rng, keys, pool = random.Random(3), [f"k{i}" for i in range(12)], list(range(1, 1000))
    random.Random(4).shuffle(pool)
    begin = None
    for _ in range(3):
        for _ in range(2):
            table.write(as_arrow(events(rng, keys, 10, pool)))
        done = table.write_change_log()
        assert done is not None and done["files"] >= 1, done
        feed = table.changes(begin, done["instant"])
        assert done["changes"] == feed.rows.num_rows > 0, (done, feed.rows.num_rows)
        assert done["begin"] == (begin or "00000000000000000"), done
        begin = done["instant"]
    assert table.write_change_log() is None
    cdc = [p.name for p in (tmp_path / "logged").rglob("*.cdc")]
    assert len(cdc) >= 3, cdc
    plain = make_table(tmp_path / "plain")
    with pytest.raises(tributary.InvalidInputError, match="no change log"):
        plain.write_change_log()
