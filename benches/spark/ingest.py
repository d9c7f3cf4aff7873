"""Spark's Hudi writer and Tributary ingest the same rows, side by side.

The workload (deterministic, seeded): N rows (default 1,000,000) of 10
columns over K keys (default 200,000): `id` strings, `region` (3 values,
derived from the key), `ts` epoch milliseconds with +-10 minutes of jitter,
four longs, two doubles and a 10-30 character `note`. Both engines write a
version-8 Merge-on-Read table partitioned by `region`, with the simple
bucket index at the same bucket count, the same record key and the same
ordering field (`ts`):

1. `ingest`: all N rows in one commit, into a new table.
2. `commits`: then C commits (default 40) of 5,000 rows each, upserts into
   that table, one after the other.

Spark runs in local[2] with Apache Hudi's Spark bundle (the versions in
tests/spark/env.py), as an NBCC writer with the in-process lock and metadata
table off, as a table shared with Tributary would be configured; its input
is a DataFrame read from Parquet and cached before timing, so its figures
exclude parsing the input. Tributary runs its release binary on JSON lines
(`tributary write`), so its figures include parsing them. CPU time is the
writer process's user + system time (Spark: the JVM's, read from /proc).
At the end both tables are read by Spark and must hold the same rows: one
per key, carrying its newest event.

Usage: python3 benches/spark/ingest.py [--rows N] [--keys K] [--buckets B]
       [--commits C] [--dir DIR]
"""

import argparse
import json
import os
import random
import resource
import shutil
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "spark"))

import env  # noqa: E402
from support import nbcc_options  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
BASE_TS = 1_760_000_000_000

SCHEMA = {
    "type": "record",
    "name": "bench",
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
SPARK_SCHEMA = "id string, region string, ts long, l1 long, l2 long, l3 long, l4 long, d1 double, d2 double, note string"
REGIONS = ["eu", "us", "apac"]


def rows(rng: random.Random, n: int, keys: int):
    letters = string.ascii_letters
    for _ in range(n):
        k = rng.randrange(keys)
        yield {
            "id": f"key-{k:08d}",
            "region": REGIONS[k % 3],
            "ts": BASE_TS + rng.randrange(-600_000, 600_000),
            "l1": rng.randrange(2**40),
            "l2": rng.randrange(2**40),
            "l3": rng.randrange(2**20),
            "l4": rng.randrange(1000),
            "d1": rng.random() * 1000,
            "d2": rng.random(),
            "note": "".join(rng.choices(letters, k=rng.randrange(10, 31))),
        }


def write_inputs(folder: Path, args) -> list[Path]:
    """The JSON-lines files of each step: the bulk file, then one per small
    commit. The same files feed Spark (through Parquet)."""
    rng = random.Random(13)
    files = []
    for name, n in [("bulk", args.rows)] + [(f"c{i:03d}", 5000) for i in range(args.commits)]:
        f = folder / f"{name}.jsonl"
        with f.open("w") as out:
            for r in rows(rng, n, args.keys):
                out.write(json.dumps(r))
                out.write("\n")
        files.append(f)
    return files


def children_cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Result:
    def __init__(self, engine, case, rows, commits, wall, cpu):
        self.engine, self.case, self.rows, self.commits, self.wall, self.cpu = engine, case, rows, commits, wall, cpu

    def line(self):
        return (
            f"| {self.engine} | {self.case} | {self.rows:,} | {self.commits} | {self.wall:.2f} | "
            f"{self.rows / self.wall:,.0f} | {self.rows / self.cpu:,.0f} | {self.commits / self.wall:.2f} |"
        )


def build_cli() -> str:
    """The release `tributary` binary, built."""
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "tributary"], cwd=ROOT, check=True)
    return str(ROOT / "target" / "release" / "tributary")


def init_table(exe: str, table: Path, folder: Path, buckets: int, *extra) -> None:
    """`tributary init` of the workload's table as Spark's writers lay it
    out (same key, ordering and partition fields, Hudi's Java bucket hash),
    with `extra` flags."""
    schema = folder / "bench.avsc"
    schema.write_text(json.dumps(SCHEMA))
    init = [exe, "init", table, "--schema", schema, "--record-key", "id", "--ordering-field", "ts"]
    init += ["--partition-field", "region", "--buckets", buckets, "--bucket-hash", "hudi-java", *extra]
    subprocess.run(list(map(str, init)), check=True, capture_output=True)


def tributary_run(files, folder: Path, args) -> list[Result]:
    exe = build_cli()
    table = folder / "tributary_table"
    init_table(exe, table, folder, args.buckets)
    out = []

    def write(f, mode):
        cmd = [exe, "write", str(table), "--input", str(f), "--time-mode", mode, "--commit-every", str(args.rows)]
        subprocess.run(cmd, check=True, capture_output=True)

    cpu0, t0 = children_cpu(), time.perf_counter()
    write(files[0], args.time_mode)
    out.append(Result("Tributary", "ingest", args.rows, 1, time.perf_counter() - t0, children_cpu() - cpu0))
    cpu0, t0 = children_cpu(), time.perf_counter()
    for f in files[1:]:
        write(f, args.time_mode)
    n = len(files) - 1
    out.append(Result("Tributary", "5,000-row commits", 5000 * n, n, time.perf_counter() - t0, children_cpu() - cpu0))
    return out


def spark_run(spark, files, folder: Path, args) -> list[Result]:
    pid = spark.sparkContext._gateway.proc.pid
    frames = []
    for f in files:
        # Parse once, untimed: Spark's figures exclude reading the input.
        pq = folder / (f.stem + ".parquet")
        spark.read.schema(SPARK_SCHEMA).json(str(f)).write.mode("overwrite").parquet(str(pq))
        df = spark.read.parquet(str(pq)).cache()
        df.count()
        frames.append(df)
    table = str(folder / "spark_table")
    opts = nbcc_options("spark_table", buckets=args.buckets, metadata=False)
    out = []
    cpu0, t0 = proc_cpu(pid), time.perf_counter()
    frames[0].write.format("hudi").options(**opts).mode("overwrite").save(table)
    out.append(Result("Spark + Hudi", "ingest", args.rows, 1, time.perf_counter() - t0, proc_cpu(pid) - cpu0))
    cpu0, t0 = proc_cpu(pid), time.perf_counter()
    for df in frames[1:]:
        df.write.format("hudi").options(**opts).mode("append").save(table)
    n = len(frames) - 1
    out.append(Result("Spark + Hudi", "5,000-row commits", 5000 * n, n, time.perf_counter() - t0, proc_cpu(pid) - cpu0))
    return out


def newest_per_key(files) -> dict:
    """The model: per key, the row with the largest `ts` (the later row on a tie)."""
    best = {}
    for f in files:
        with f.open() as lines:
            for line in lines:
                r = json.loads(line)
                b = best.get(r["id"])
                if b is None or r["ts"] >= b["ts"]:
                    best[r["id"]] = r
    return best


def check(spark, folder: Path, files) -> None:
    cols = [f["name"] for f in SCHEMA["fields"]]
    model = sorted(tuple(r[c] for c in cols) for r in newest_per_key(files).values())
    for name in ["tributary_table", "spark_table"]:
        got = sorted(
            tuple(r) for r in spark.read.format("hudi").option("hoodie.metadata.enable", "false").load(str(folder / name)).select(*cols).collect()
        )
        if got != model:
            diff = sorted(set(got) ^ set(model))[:4]
            sys.exit(f"{name}: {len(got)} rows, the model has {len(model)}; they differ, for example in {diff}")
        print(f"checked: {name} holds one row per key ({len(got):,}), each its newest event")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--keys", type=int, default=200_000)
    p.add_argument("--buckets", type=int, default=16)
    p.add_argument("--commits", type=int, default=40)
    p.add_argument("--time-mode", default="wait-for-skew", choices=["wait-for-skew", "hybrid-logical"])
    p.add_argument("--dir", type=Path, help="work folder (default: a new temporary one, removed at the end)")
    args = p.parse_args()
    left = env.missing()
    if left:
        sys.exit("; ".join(left) + " (python3 tests/spark/env.py install)")
    folder = args.dir or Path(tempfile.mkdtemp(prefix="spark-ingest-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        files = write_inputs(folder, args)
        results = tributary_run(files, folder, args)
        spark = env.session("ingest-bench", "6g", folder / "spark-warehouse")
        results += spark_run(spark, files, folder, args)
        print(f"\n{args.rows:,} rows, {args.keys:,} keys, 10 columns, {args.buckets} buckets per region; Tributary time mode {args.time_mode}\n")
        print("| engine | case | rows | commits | seconds | rows/s | rows per CPU-s | commits/s |")
        print("|---|---|---|---|---|---|---|---|")
        for r in results:
            print(r.line())
        print()
        check(spark, folder, files)
        spark.stop()
    finally:
        if args.dir is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
