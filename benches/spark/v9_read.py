"""Reads and compaction of version-9 tables Spark made, beside Spark's own
read and the official reader's (hudi-rs).

1. Spark (Apache Hudi 1.2.0 in local[2], no version pin, so table version
   9; non-blocking concurrency control, simple bucket index, metadata table
   off) writes N rows (default 1,000,000) of the 10-column workload of
   `ingest.py` over K keys (default 200,000) in one commit, then U upsert
   commits (default 10) of R rows each (default 20,000), which land in log
   files.
2. Snapshot reads of that table, best of 3 each: Spark (every column, into
   the `noop` sink), the official reader (`hudi` 0.5.0, `read()` into
   Arrow), and Tributary (`Table::read`, the peers driver's `read` case).
3. Tributary compacts a copy (`Compactor::run_once`, 256 MiB budget): log
   records per CPU-second; then Spark reads the compacted copy and must
   count the same rows.
4. The same read and compaction on each v9 table of
   `../shared/hudi-corpus-next` (tiny: they show that it works, not speed).

Wall seconds are end to end for one read; CPU seconds are Tributary's
process (user + system). Usage:
python3 benches/spark/v9_read.py [--rows N] [--keys K] [--upserts U]
[--upsert-rows R] [--buckets B] [--dir DIR]
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "spark"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import env  # noqa: E402
from ingest import SPARK_SCHEMA, rows  # noqa: E402
from support import HUDI_VERSION_8, nbcc_options  # noqa: E402

CORPUS_NEXT = ROOT.parent / "shared" / "hudi-corpus-next"


def build_driver() -> str:
    cmd = ["cargo", "build", "--release", "--bench", "peers", "--message-format=json"]
    done = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, check=True)
    for line in done.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable") and msg["target"]["name"] == "peers":
            return msg["executable"]
    sys.exit("cargo built no peers driver")


def driver(exe: str, case: str, table: Path, *extra) -> dict:
    done = subprocess.run([exe, case, "--table", str(table), *map(str, extra)], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"driver {case} on {table} failed: {done.stderr[-2000:]}")
    return json.loads([l for l in done.stdout.splitlines() if l.startswith("{")][-1])


def best(runs: list[dict]) -> dict:
    return min(runs, key=lambda r: r["wall"])


def official_read(table: Path) -> dict:
    script = (
        "import sys, time, json\n"
        "from hudi import HudiTableBuilder\n"
        "t0 = time.perf_counter()\n"
        "b = HudiTableBuilder.from_base_uri(sys.argv[1]).build().read()\n"
        "print(json.dumps({'wall': time.perf_counter() - t0, 'rows': sum(x.num_rows for x in b)}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(table)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def spark_read(spark, table: Path) -> dict:
    t0 = time.perf_counter()
    df = spark.read.format("hudi").option("hoodie.metadata.enable", "false").load(str(table))
    df.write.format("noop").mode("overwrite").save()
    wall = time.perf_counter() - t0
    return {"wall": wall, "rows": df.count()}


def make_table(spark, folder: Path, args) -> Path:
    import random

    rng = random.Random(29)
    table = folder / "spark_v9"
    opts = {k: v for k, v in nbcc_options("spark_v9", buckets=args.buckets, metadata=False).items() if k not in HUDI_VERSION_8}
    for i, n in enumerate([args.rows] + [args.upsert_rows] * args.upserts):
        f = folder / f"in{i}.jsonl"
        f.write_text("".join(json.dumps(r) + "\n" for r in rows(rng, n, args.keys)))
        df = spark.read.schema(SPARK_SCHEMA).json(str(f))
        df.write.format("hudi").options(**opts).mode("overwrite" if i == 0 else "append").save(str(table))
        print(f"Spark commit {i + 1}: {n:,} rows", flush=True)
    props = (table / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.version=9" in props.splitlines(), props
    return table


def line(table: str, reader: str, r: dict, cpu=None) -> str:
    cpu_col = f"{r['rows'] / cpu:,.0f}" if cpu else "-"
    return f"| {table} | {reader} | {r['rows']:,} | {r['wall']:.3f} | {r['rows'] / r['wall']:,.0f} | {cpu_col} |"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--keys", type=int, default=200_000)
    p.add_argument("--upserts", type=int, default=10)
    p.add_argument("--upsert-rows", type=int, default=20_000)
    p.add_argument("--buckets", type=int, default=16)
    p.add_argument("--dir", type=Path)
    args = p.parse_args()
    folder = args.dir or Path(tempfile.mkdtemp(prefix="tributary-v9-"))
    folder.mkdir(parents=True, exist_ok=True)
    exe = build_driver()
    spark = env.session("v9-read", "4g", folder / "warehouse")
    table = make_table(spark, folder, args)

    reads = ["| table | reader | rows | seconds | rows/s | rows per CPU-s |", "|---|---|---|---|---|---|"]
    ours = best([driver(exe, "read", table) for _ in range(3)])
    reads.append(line("Spark-made v9", "Tributary", ours, ours["cpu"]))
    reads.append(line("Spark-made v9", "hudi-rs 0.5.0", best([official_read(table) for _ in range(3)])))
    theirs = best([spark_read(spark, table) for _ in range(3)])
    reads.append(line("Spark-made v9", "Spark 3.5 + Hudi 1.2", theirs))
    assert ours["rows"] == theirs["rows"], (ours, theirs)

    compactions = ["| table | log records | groups | seconds | CPU seconds | log records per CPU-s |", "|---|---|---|---|---|---|"]
    copy = folder / "compacted"
    shutil.copytree(table, copy)
    c = driver(exe, "compact", copy)
    log_records = args.upserts * args.upsert_rows
    compactions.append(
        f"| Spark-made v9 | {log_records:,} | {c['groups']} | {c['wall']:.2f} | {c['cpu']:.2f} | {log_records / c['cpu']:,.0f} |"
    )
    after = spark_read(spark, copy)
    assert after["rows"] == theirs["rows"], (after, theirs)

    for z in sorted(CORPUS_NEXT.glob("**/v9_*.zip")):
        into = folder / "corpus"
        zipfile.ZipFile(z).extractall(into)
        t = into / z.stem
        r = best([driver(exe, "read", t) for _ in range(3)])
        reads.append(line(z.stem, "Tributary", r, r["cpu"]))
        reads.append(line(z.stem, "hudi-rs 0.5.0", best([official_read(t) for _ in range(3)])))
        c = driver(exe, "compact", t)
        compactions.append(f"| {z.stem} | - | {c['groups']} | {c['wall']:.3f} | {c['cpu']:.3f} | - |")
    spark.stop()
    print("\n".join(reads))
    print()
    print("\n".join(compactions))


if __name__ == "__main__":
    main()
