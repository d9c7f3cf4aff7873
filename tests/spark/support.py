"""What the Spark interoperability tests share: the `tributary` CLI, Spark's
Hudi options, rows as each engine reads them, and the event-time model that
both must equal."""

import json
import os
import random
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Every Spark write pins table version 8 and never upgrades a table: Hudi
#: 1.1 and later default to version 9.
HUDI_VERSION_8 = {
    "hoodie.write.table.version": "8",
    "hoodie.write.auto.upgrade": "false",
}

#: The columns of the tests' tables (besides the meta columns).
COLUMNS = ["id", "region", "ts", "v", "n"]

SCHEMA = {
    "type": "record",
    "name": "events",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "region", "type": "string"},
        {"name": "ts", "type": "long"},
        {"name": "v", "type": ["null", "string"], "default": None},
        {"name": "n", "type": ["null", "long"], "default": None},
    ],
}

SPARK_SCHEMA = "id string, region string, ts long, v string, n long, _hoodie_is_deleted boolean"


def tributary_bin() -> Path:
    return Path(os.environ.get("TRIBUTARY_BIN", ROOT / "target" / "debug" / "tributary"))


def tributary(*args, check=True, input_file=None) -> str:
    """Runs the `tributary` CLI; returns its stdout (raises with stderr on
    failure when `check`)."""
    out = subprocess.run([str(tributary_bin()), *map(str, args)], capture_output=True, text=True)
    if check and out.returncode != 0:
        raise AssertionError(f"tributary {' '.join(map(str, args))} failed ({out.returncode}):\n{out.stderr}")
    return out.stdout


def init_table(path: Path, partitioned=True, buckets=4, bucket_hash="hudi-java") -> Path:
    """A new Tributary table of the tests' schema at `path`."""
    schema = path.parent / f"{path.name}.avsc"
    schema.write_text(json.dumps(SCHEMA))
    args = ["init", path, "--schema", schema, "--record-key", "id", "--ordering-field", "ts"]
    args += ["--buckets", buckets, "--bucket-hash", bucket_hash]
    if partitioned:
        args += ["--partition-field", "region"]
    tributary(*args)
    return path


def write_jsonl(path: Path, events) -> Path:
    path.write_text("".join(json.dumps(e.record()) + "\n" for e in events))
    return path


@dataclass(frozen=True)
class Event:
    """One input record: an upsert of `id` at event time `ts`, or a delete."""

    id: str
    ts: int
    region: str
    v: str | None = None
    n: int | None = None
    deleted: bool = False

    def record(self) -> dict:
        r = {"id": self.id, "region": self.region, "ts": self.ts, "v": self.v, "n": self.n}
        if self.deleted:
            r["_hoodie_is_deleted"] = True
        return r

    def spark_row(self) -> tuple:
        return (self.id, self.region, self.ts, self.v, self.n, self.deleted)


def region_of(key: str) -> str:
    return ["eu", "us", "apac"][int(key[1:]) % 3]


@dataclass
class Model:
    """Event-time merging of the committed input: per key the event with the
    largest `ts` wins (later commits win ties); a winning delete removes it."""

    winners: dict = field(default_factory=dict)

    def commit(self, events) -> None:
        for e in events:
            w = self.winners.get(e.id)
            if w is None or e.ts >= w.ts:
                self.winners[e.id] = e

    def rows(self) -> list[dict]:
        return sorted(
            ({c: getattr(e, c) for c in COLUMNS} for e in self.winners.values() if not e.deleted),
            key=lambda r: r["id"],
        )


def random_events(rng: random.Random, keys: int, count: int, base_ts: int, delete_share=0.1) -> list[Event]:
    """`count` events over `keys` keys, out of order in event time (±10
    minutes around `base_ts`), about `delete_share` of them deletes. Event
    times are unique per key, so the model has no ties to break."""
    out = []
    for _ in range(count):
        k = f"k{rng.randrange(keys):04d}"
        ts = base_ts + rng.randrange(-600_000, 600_000) * 1000 + rng.randrange(1000)
        deleted = rng.random() < delete_share
        v = None if deleted else f"v{rng.randrange(10**6)}"
        out.append(Event(k, ts, region_of(k), v, rng.randrange(10**9), deleted))
    return out


def data_rows(rows) -> list[dict]:
    """Rows cut to the data columns, sorted by key."""
    return sorted(({c: r.get(c) for c in COLUMNS} for r in rows), key=lambda r: r["id"])


def our_rows(table, *extra) -> list[dict]:
    """`tributary read --meta` rows of `table` with `extra` options."""
    out = tributary("read", table, "--format", "jsonl", "--meta", *extra)
    return [json.loads(line) for line in out.splitlines()]


def timeline(table) -> list[dict]:
    """`tributary timeline` as a list of `{requested, action, state, completed}`."""
    rows = []
    for line in tributary("timeline", table).splitlines():
        parts = line.split()
        if len(parts) >= 3:
            rows.append({"requested": parts[0], "action": parts[1], "state": parts[2], "completed": parts[3] if len(parts) > 3 else None})
    return rows


def spark_rows(spark, path, **options) -> list[dict]:
    """Spark's rows of the Hudi table at `path`, read with Hudi `options`."""
    reader = spark.read.format("hudi")
    for k, v in options.items():
        reader = reader.option(k, v)
    return [r.asDict() for r in reader.load(str(path)).collect()]


META = ["_hoodie_commit_time", "_hoodie_record_key", "_hoodie_partition_path"]


def meta_rows(rows) -> list[tuple]:
    """Rows as `(record key, partition, commit time, data columns...)`,
    sorted: what two engines' reads of one table must agree on."""
    return sorted(tuple(r.get(c) for c in META + COLUMNS) for r in rows)


def nbcc_options(name: str, buckets=4, partitioned=True, metadata=True) -> dict:
    """Hudi options of a Spark writer that upserts into a version-8 MOR table
    with the simple bucket index under non-blocking concurrency control (a
    single Spark process: the in-process lock)."""
    opts = {
        "hoodie.table.name": name,
        "hoodie.datasource.write.table.type": "MERGE_ON_READ",
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.datasource.write.operation": "upsert",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.partitionpath.field": "region" if partitioned else "",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator"
        if partitioned
        else "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
        "hoodie.index.type": "BUCKET",
        "hoodie.index.bucket.engine": "SIMPLE",
        "hoodie.bucket.index.num.buckets": str(buckets),
        "hoodie.write.concurrency.mode": "NON_BLOCKING_CONCURRENCY_CONTROL",
        "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.InProcessLockProvider",
        "hoodie.metadata.enable": "true" if metadata else "false",
        "hoodie.compact.inline": "false",
        "hoodie.table.timeline.timezone": "UTC",
        **HUDI_VERSION_8,
    }
    return opts


def spark_write(spark, path, events, options, mode="append") -> None:
    """Writes `events` (deletes among them, by `_hoodie_is_deleted`) to the
    Hudi table at `path` with Spark."""
    df = spark.createDataFrame([e.spark_row() for e in events], SPARK_SCHEMA)
    df.write.format("hudi").options(**options).mode(mode).save(str(path))
