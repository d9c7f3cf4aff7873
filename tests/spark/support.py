"""What the Spark interoperability tests share: the `tributary` CLI, Spark's
Hudi options, rows as each engine reads them, and the event-time model that
both must equal."""

import fcntl
import json
import os
import random
import subprocess
import time
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


def tributary(*args, check=True) -> str:
    """Runs the `tributary` CLI; returns its stdout (raises with stderr on
    failure when `check`)."""
    out = subprocess.run([str(tributary_bin()), *map(str, args)], capture_output=True, text=True)
    if check and out.returncode != 0:
        raise AssertionError(f"tributary {' '.join(map(str, args))} failed ({out.returncode}):\n{out.stderr}")
    return out.stdout


def init_table(
    path: Path,
    partitioned=True,
    buckets=4,
    bucket_hash="hudi-java",
    time_mode="hybrid-logical",
    table_version=8,
    ordering="ts",
    change_log=False,
) -> Path:
    """A new Tributary table of the tests' schema at `path`, of Hudi table
    version `table_version`, ordered by `ordering` (one field, or several
    separated by `,`); a table Spark's writers share at the same time
    records `time_mode="wait-for-skew"`."""
    schema = path.parent / f"{path.name}.avsc"
    schema.write_text(json.dumps(SCHEMA))
    args = ["init", path, "--schema", schema, "--record-key", "id", "--ordering-field", ordering]
    args += ["--buckets", buckets, "--bucket-hash", bucket_hash, "--time-mode", time_mode, "--table-version", table_version]
    if partitioned:
        args += ["--partition-field", "region"]
    if change_log:
        args += ["--change-log"]
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

    def forget_deletes(self) -> None:
        """What a compaction that keeps no tombstones (Hudi's own) does: the
        deleted keys are gone, so a later event of any time brings one back."""
        self.winners = {k: e for k, e in self.winners.items() if not e.deleted}

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
    """`tributary read --meta --sort` rows of `table` with `extra` options."""
    out = tributary("read", table, "--format", "jsonl", "--meta", "--sort", *extra)
    return [json.loads(line) for line in out.splitlines()]


def timeline(table) -> list[dict]:
    """`tributary timeline` as a list of `{requested, action, state, completed}`."""
    rows = []
    for line in tributary("timeline", table).splitlines():
        parts = line.split()
        if len(parts) >= 3:
            rows.append({"requested": parts[0], "action": parts[1], "state": parts[2], "completed": parts[3] if len(parts) > 3 else None})
    return rows


def timeline_rows(table) -> list[dict]:
    """`tributary timeline` with its `archived` column: instants in the LSM
    history are marked `archived`."""
    rows = []
    for line in tributary("timeline", table).splitlines():
        p = line.split()
        rows.append(
            {"requested": p[0], "action": p[1], "state": p[2], "completed": p[3], "archived": p[4:] == ["archived"]}
        )
    return rows


def archived(table) -> list[dict]:
    """The instants `tributary timeline` marks archived."""
    return [i for i in timeline_rows(table) if i["archived"]]


def history_folder(table) -> Path:
    return Path(table) / ".hoodie" / "timeline" / "history"


def history_rows(table) -> list[dict]:
    """The instants of the history's latest snapshot (the files the manifest
    `_version_` names lists), read with pyarrow, sorted by requested time."""
    import pyarrow.parquet as pq

    folder = history_folder(table)
    version = (folder / "_version_").read_text().strip()
    manifest = json.loads((folder / f"manifest_{version}").read_text())
    rows = []
    for f in manifest["files"]:
        t = pq.read_table(folder / f["fileName"], columns=["instantTime", "completionTime", "action"])
        rows += t.to_pylist()
    return sorted(rows, key=lambda r: r["instantTime"])


def spark_rows(spark, path, **options) -> list[dict]:
    """Spark's rows of the Hudi table at `path`, read with Hudi `options`."""
    reader = spark.read.format("hudi")
    for k, v in options.items():
        reader = reader.option(k, v)
    return [r.asDict() for r in reader.load(str(path)).collect()]


META = ["_hoodie_commit_time", "_hoodie_record_key", "_hoodie_partition_path"]


def official_rows(table) -> list[dict]:
    """The official Rust reader's (`hudi` 0.5.0) snapshot of `table`."""
    import pyarrow as pa
    from hudi import HudiTableBuilder

    batches = HudiTableBuilder.from_base_uri(str(table.resolve())).build().read()
    return pa.Table.from_batches(batches).to_pylist() if batches else []


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


def start_writers(table, tmp, batches, tag, *args, id_prefix="w"):
    """Starts one `tributary write` process per batch, all at once, writer
    ids `<id_prefix><i>`, `args` after the input's. Each logs to a file, not
    a pipe: a full pipe nobody reads would stall a writer in the middle of a
    commit, holding the lock. Returns (process, log) pairs for
    `wait_writers`."""
    writers = []
    for i, events in enumerate(batches):
        f = write_jsonl(tmp / f"{tag}-{i}.jsonl", events)
        cmd = [tributary_bin(), "write", table, "--input", f, "--writer-id", f"{id_prefix}{i}", *args]
        log = tmp / f"{tag}-{i}.log"
        with open(log, "w") as out:
            writers.append((subprocess.Popen([str(c) for c in cmd], stderr=out), log))
    return writers


def wait_writers(writers) -> None:
    """Waits for the writers `start_writers` started; when one failed, fails
    with every writer's log."""
    codes = [p.wait() for p, _ in writers]
    assert not any(codes), "\n".join(f"writer {i} (exit {c}):\n{log.read_text()}" for i, (c, (_, log)) in enumerate(zip(codes, writers)))


def write_concurrently(table, tmp, batches, tag):
    """Each batch written by its own `tributary write` process, all at once,
    with several commits each; returns when all have committed."""
    wait_writers(start_writers(table, tmp, batches, tag, "--commit-every", "60", "--tasks", "2"))


def completed_deltacommits(table):
    return [i for i in timeline(table) if i["action"] == "deltacommit" and i["state"] == "COMPLETED"]


class History:
    """A table written through its states, with the model and instants each
    state's checks need."""

    def __init__(self, table, tmp, seed, partitioned, table_version=8):
        self.table, self.tmp, self.rng = table, tmp, random.Random(seed)
        self.model = Model()
        self.base_ts = 1_760_000_000_000
        bucket_hash = "murmur3" if partitioned else "hudi-java"
        init_table(table, partitioned=partitioned, bucket_hash=bucket_hash, table_version=table_version)

    def phase(self, tag, events_per_writer=200, writers=3):
        """Each of `writers` processes writes `events_per_writer` events at once."""
        batches = [random_events(self.rng, 150, events_per_writer, self.base_ts) for _ in range(writers)]
        write_concurrently(self.table, self.tmp, batches, tag)
        for b in batches:
            self.model.commit(b)


def kill_a_writer_midway(h):
    """Starts a one-commit write and kills it once its instant is inflight
    with log files written; returns that instant. From when the instant
    appears the test holds the table lock (the OS lock a local table's
    writers take, `.hoodie/.aux/tributary.lock`), so the write cannot
    complete before the kill. A write that completed before the lock was
    taken is committed input (the model takes it), and the next attempt
    tries again."""
    lock_path = Path(h.table) / ".hoodie" / ".aux" / "tributary.lock"
    for attempt in range(5):
        events = random_events(h.rng, 150, 20_000, h.base_ts)
        f = write_jsonl(h.tmp / f"killed-{attempt}.jsonl", events)
        before = {i["requested"] for i in timeline(h.table)}
        args = ["write", h.table, "--input", f, "--writer-id", "doomed", "--tasks", "2"]
        p = subprocess.Popen([str(tributary_bin()), *map(str, args)], stderr=subprocess.DEVNULL)
        with open(lock_path, "a") as lock:
            try:
                deadline = time.monotonic() + 60
                held = False
                while p.poll() is None and time.monotonic() < deadline:
                    new = [i["requested"] for i in timeline(h.table) if i["requested"] not in before]
                    if new and not held:
                        fcntl.flock(lock, fcntl.LOCK_EX)
                        held = True
                    if new and has_logs(h.table, new[0]):
                        break
                    time.sleep(0.01)
            finally:
                p.kill()
                p.wait()
        new = [i for i in timeline(h.table) if i["requested"] not in before and i["action"] == "deltacommit"]
        assert len(new) == 1, f"expected one instant of the killed write, found {new}"
        if new[0]["state"] != "COMPLETED":
            assert has_logs(h.table, new[0]["requested"]), f"the killed write {new[0]} wrote no log file"
            return new[0]["requested"]
        h.model.commit(events)
    raise AssertionError("five writes completed before they could be killed")


def has_logs(table, instant):
    return any(instant in p.name for p in table.rglob(".*.log.*"))


def spark_metadata(on):
    """Spark's option for metadata-table reads on or off."""
    return {"hoodie.metadata.enable": "true" if on else "false"}


def check_snapshot(spark, h, what):
    """Tributary's and Spark's snapshot (metadata reads off and on) equal
    the model, meta columns included between the two engines."""
    ours = our_rows(h.table)
    assert data_rows(ours) == h.model.rows(), f"{what}: tributary read vs the model"
    for md in (False, True):
        theirs = spark_rows(spark, h.table, **spark_metadata(md))
        assert data_rows(theirs) == h.model.rows(), f"{what}: Spark snapshot (metadata {md}) vs the model"
        assert meta_rows(theirs) == meta_rows(ours), f"{what}: Spark snapshot (metadata {md}) vs tributary read"


def check_read_optimized(spark, h, what):
    """Spark's read-optimized rows (metadata reads off and on) equal
    Tributary's; returns Tributary's."""
    ours = our_rows(h.table, "--query", "read-optimized")
    for md in (False, True):
        theirs = spark_rows(spark, h.table, **{"hoodie.datasource.query.type": "read_optimized"}, **spark_metadata(md))
        assert meta_rows(theirs) == meta_rows(ours), f"{what}: Spark read-optimized (metadata {md}) vs tributary"
    return ours


def read_quietly(table, *extra):
    """`tributary read` rows, checking it warned about nothing (a Spark
    table on local disk holds a Hadoop `.crc` sidecar beside every file)."""
    out = subprocess.run(
        [str(tributary_bin()), "read", str(table), "--format", "jsonl", "--meta", *extra], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "WARN" not in out.stderr and "warning" not in out.stderr, out.stderr
    return our_rows(table, *extra)


def check_both_engines(spark, table, model, what):
    """Tributary's snapshot and Spark's snapshot and read-optimized reads,
    metadata reads on and off, against the model and each other."""
    ours = read_quietly(table)
    assert data_rows(ours) == model.rows(), f"{what}: tributary read vs the model"
    ours_ro = our_rows(table, "--query", "read-optimized")
    for md in ("false", "true"):
        theirs = spark_rows(spark, table, **{"hoodie.metadata.enable": md})
        assert data_rows(theirs) == model.rows(), f"{what}: Spark snapshot (metadata {md}) vs the model"
        assert meta_rows(theirs) == meta_rows(ours), f"{what}: Spark snapshot (metadata {md}) vs tributary read"
        ro = spark_rows(spark, table, **{"hoodie.metadata.enable": md, "hoodie.datasource.query.type": "read_optimized"})
        assert meta_rows(ro) == meta_rows(ours_ro), f"{what}: Spark read-optimized (metadata {md}) vs tributary"
    return ours_ro
