"""The peers benchmark's workload and its model of the right answer.

Rows have 10 columns: `id` (a string over K keys), `region` (one of three
values, derived from the key: the partition column), `ts` (epoch
milliseconds: an event clock that advances 1 ms per row, plus up to +-10
minutes of jitter, so events arrive out of order), four longs, two doubles
and a 10-30 character `note` (URL-safe base64 letters). Everything comes from one seeded
`random.Random`, so a run at a given scale always writes the same rows.

The model: per key, the row with the largest `ts` of all rows written so
far. No two rows of a key share that largest `ts` (a row that would tie
with its key's newest so far gets 1 ms more), so the answer does not depend
on how an engine breaks ties. The model is kept with plain dicts while the
rows are made, independent of every engine and of pyarrow's compute
functions.
"""

import base64
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc

COLUMNS = ["id", "region", "ts", "l1", "l2", "l3", "l4", "d1", "d2", "note"]
SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("region", pa.string(), nullable=False),
        pa.field("ts", pa.int64(), nullable=False),
        *(pa.field(f"l{i}", pa.int64(), nullable=False) for i in range(1, 5)),
        pa.field("d1", pa.float64(), nullable=False),
        pa.field("d2", pa.float64(), nullable=False),
        pa.field("note", pa.string(), nullable=False),
    ]
)
# The same columns as an Avro schema, for `tributary init`.
AVRO_SCHEMA = {
    "type": "record",
    "name": "peers_bench",
    "namespace": "tributary.bench",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "region", "type": "string"},
        {"name": "ts", "type": "long"},
        *({"name": f"l{i}", "type": "long"} for i in range(1, 5)),
        {"name": "d1", "type": "double"},
        {"name": "d2", "type": "double"},
        {"name": "note", "type": "string"},
    ],
}
REGIONS = ["eu", "us", "apac"]
BASE_TS = 1_760_000_000_000
JITTER_MS = 600_000
SEED = 20_251_201


class Sizes:
    """Row counts of each step at a scale (1.0: the full workload)."""

    def __init__(self, scale: float, small_commits: int = 40, writers: int = 4):
        def scaled(n):
            return max(1, round(n * scale))

        self.scale = scale
        self.keys = scaled(200_000)
        self.ingest = scaled(800_000)
        self.upsert = scaled(200_000)
        self.small_rows = scaled(5_000)
        self.small_commits = small_commits
        self.writers = writers
        if small_commits % writers:
            raise ValueError(f"{small_commits} commits do not split evenly over {writers} writers")

    def as_dict(self):
        return {
            "scale": self.scale,
            "keys": self.keys,
            "ingest_rows": self.ingest,
            "upsert_rows": self.upsert,
            "small_commit_rows": self.small_rows,
            "small_commits": self.small_commits,
            "concurrent_writers": self.writers,
        }


class Workload:
    """The generated steps (pyarrow Tables) and the model after each."""

    def __init__(self, sizes: Sizes):
        self.sizes = sizes
        rng = random.Random(SEED)
        self._newest_ts = {}  # key number -> newest ts so far
        self._newest_row = {}  # key number -> that row, as a tuple
        self._row = 0
        self.ingest = self._make(rng, sizes.ingest)
        self.expected_ingest = self._model()
        self.upsert = self._make(rng, sizes.upsert)
        self.expected_upsert = self._model()
        self.small = [self._make(rng, sizes.small_rows) for _ in range(sizes.small_commits)]
        self.expected_all = self._model()

    def _make(self, rng: random.Random, n: int) -> pa.Table:
        rows = []
        for _ in range(n):
            k = rng.randrange(self.sizes.keys)
            ts = BASE_TS + self._row + rng.randrange(-JITTER_MS, JITTER_MS + 1)
            newest = self._newest_ts.get(k)
            if newest == ts:
                ts += 1
            row = (
                f"key-{k:08d}",
                REGIONS[k % 3],
                ts,
                rng.getrandbits(40),
                rng.getrandbits(40),
                rng.getrandbits(20),
                rng.randrange(1000),
                rng.random() * 1000,
                rng.random(),
                base64.urlsafe_b64encode(rng.randbytes(24))[: rng.randrange(10, 31)].decode(),
            )
            if newest is None or ts > newest:
                self._newest_ts[k] = ts
                self._newest_row[k] = row
            rows.append(row)
            self._row += 1
        return columns_table(dict(zip(COLUMNS, (list(c) for c in zip(*rows)))))

    def _model(self) -> pa.Table:
        """One row per key written so far: its newest event, sorted by id."""
        rows = sorted(self._newest_row.values())
        return columns_table({c: [r[i] for r in rows] for i, c in enumerate(COLUMNS)})

    def total_rows(self) -> int:
        return self.sizes.ingest + self.sizes.upsert + self.sizes.small_rows * self.sizes.small_commits

    def write_files(self, folder: Path) -> dict:
        """The input files every engine reads: Arrow IPC files (the small
        commits one record batch each) and the ingest rows as JSON lines."""
        folder.mkdir(parents=True, exist_ok=True)
        files = {
            "ingest": folder / "ingest.arrow",
            "upsert": folder / "upsert.arrow",
            "small": folder / "small.arrow",
            "ingest_json": folder / "ingest.jsonl",
            "avro_schema": folder / "peers.avsc",
        }
        write_ipc(files["ingest"], self.ingest.to_batches(max_chunksize=65_536))
        write_ipc(files["upsert"], self.upsert.to_batches(max_chunksize=65_536))
        write_ipc(files["small"], [t.combine_chunks().to_batches()[0] for t in self.small])
        with files["ingest_json"].open("w") as out:
            # The values need no escaping (ids, regions and notes are ASCII
            # letters, digits, `-` and `_`); repr round-trips a double.
            columns = [self.ingest.column(c).to_pylist() for c in COLUMNS]
            for i, r, ts, l1, l2, l3, l4, d1, d2, note in zip(*columns):
                out.write(
                    f'{{"id":"{i}","region":"{r}","ts":{ts},"l1":{l1},"l2":{l2},"l3":{l3},"l4":{l4},'
                    f'"d1":{d1!r},"d2":{d2!r},"note":"{note}"}}\n'
                )
        files["avro_schema"].write_text(json.dumps(AVRO_SCHEMA))
        return files


def columns_table(cols: dict) -> pa.Table:
    """A table of the schema's columns from Python lists."""
    return pa.Table.from_arrays([pa.array(cols[f.name], type=f.type) for f in SCHEMA], schema=SCHEMA)


def write_ipc(path: Path, batches, schema: pa.Schema = SCHEMA) -> None:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for b in batches:
            writer.write_batch(b)


def read_ipc(path: Path) -> list:
    """The record batches of an Arrow IPC file, in order."""
    with pa.memory_map(str(path)) as source:
        reader = pa.ipc.open_file(source)
        return [reader.get_batch(i) for i in range(reader.num_record_batches)]


def normalise(table: pa.Table) -> pa.Table:
    """The table's own columns in the model's order and types, sorted by id."""
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise ValueError(f"columns {missing} missing (has {table.column_names})")
    cols = []
    for field in SCHEMA:
        col = table.column(field.name)
        if col.type != field.type:
            col = col.cast(field.type)
        cols.append(col)
    plain = pa.table(cols, names=COLUMNS)
    return plain.sort_by([("id", "ascending")]).combine_chunks()


def compare(got: pa.Table, expected: pa.Table):
    """None when `got` holds exactly the model's rows, else what differs."""
    try:
        got = normalise(got)
    except ValueError as e:
        return str(e)
    expected = pa.table([expected.column(c) for c in COLUMNS], names=COLUMNS)
    if got.equals(expected):
        return None
    got_rows = {}
    duplicates = 0
    for r in got.to_pylist():
        if r["id"] in got_rows:
            duplicates += 1
        got_rows[r["id"]] = r
    want_rows = {r["id"]: r for r in expected.to_pylist()}
    missing = sorted(set(want_rows) - set(got_rows))
    extra = sorted(set(got_rows) - set(want_rows))
    wrong = sorted(k for k in set(want_rows) & set(got_rows) if got_rows[k] != want_rows[k])
    parts = [f"{got.num_rows:,} rows, the model has {expected.num_rows:,}"]
    if duplicates:
        parts.append(f"{duplicates:,} duplicate keys")
    if missing:
        parts.append(f"{len(missing):,} keys missing (e.g. {missing[:3]})")
    if extra:
        parts.append(f"{len(extra):,} keys not in the input (e.g. {extra[:3]})")
    if wrong:
        k = wrong[0]
        parts.append(
            f"{len(wrong):,} keys with another version than their newest (e.g. {k}: "
            f"ts {got_rows[k]['ts']}, newest {want_rows[k]['ts']})"
        )
    return "; ".join(parts)
