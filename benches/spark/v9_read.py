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
5. Layout: Tributary writes the same data in the same commits into a
   table of its own (`tributary init --table-version 9`, the same record
   key, ordering field, partition field and bucket count, Hudi's Java
   bucket hash, so that each key lands in the bucket Spark put it in;
   then `tributary write` of each of the JSON-lines files `make_table`
   wrote). The script mirrors what Spark's first commit left and says
   which: had it written base Parquet files, `tributary compact` would run
   after Tributary's first commit. It writes none: Hudi 1.2's simple
   bucket index under NBCC writes even the inserts of new file groups into
   log files (one per file group, one Avro data block each), and nothing
   compacts them (`hoodie.compact.inline` is off), so both tables hold log
   files only, 1 + U per file group, and Tributary does not compact either.
   (Section 3 shows the compacted table.) Both tables are then read by
   the official reader, Spark and Tributary (best of 3 each; the
   Spark-made table's figures are those of step 2), must count
   the same rows and hold the same rows (compared in full through Spark,
   and with the model: per key its newest event); then their layouts are
   printed: log and base files, their sizes, the blocks in each log (from
   the headers of Hudi's log format), codecs.

Wall seconds are end to end for one read; CPU seconds are Tributary's
process (user + system). Usage:
python3 benches/spark/v9_read.py [--rows N] [--keys K] [--upserts U]
[--upsert-rows R] [--buckets B] [--dir DIR]
"""

import argparse
import io
import json
import shutil
import statistics
import struct
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
from ingest import SCHEMA, SPARK_SCHEMA, build_cli, init_table, newest_per_key, rows  # noqa: E402
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


def make_table(spark, folder: Path, args) -> tuple[Path, dict]:
    """Spark's table, and what its first commit left: `layout` of the
    table right after it."""
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
        if i == 0:
            first = layout(table)
    props = (table / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.version=9" in props.splitlines(), props
    return table, first


def tributary_table(cli: str, folder: Path, args, compact_first: bool) -> Path:
    """Tributary's table of the same data: the JSON-lines files of
    `make_table`, one `tributary write` (one commit) each, in order; with
    `compact_first`, `tributary compact` after the first."""
    table = folder / "tributary_v9"
    shutil.rmtree(table, ignore_errors=True)
    init_table(cli, table, folder, args.buckets, "--table-version", "9")
    for i in range(1 + args.upserts):
        subprocess.run([cli, "write", str(table), "--input", str(folder / f"in{i}.jsonl")], check=True, capture_output=True)
        print(f"Tributary commit {i + 1}", flush=True)
        if i == 0 and compact_first:
            subprocess.run([cli, "compact", str(table)], check=True, capture_output=True)
            print("Tributary compacted its first commit", flush=True)
    props = (table / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.version=9" in props.splitlines(), props
    return table


#: Hudi's log format: each block starts with this magic.
LOG_MAGIC = b"#HUDI#"
#: Block types by their ordinal in Hudi's `HoodieLogBlockType`.
BLOCK_TYPES = ["command", "delete", "corrupt", "avro", "hfile", "parquet", "cdc"]
#: Header keys by their ordinal in Hudi's `HeaderMetadataType`.
HEADER_KEYS = ["INSTANT_TIME", "TARGET_INSTANT_TIME", "SCHEMA", "COMMAND_BLOCK_TYPE", "COMPACTED_BLOCK_TIMES"]
HEADER_KEYS += ["RECORD_POSITIONS", "BLOCK_IDENTIFIER", "IS_PARTIAL", "BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS"]


def log_blocks(path: Path) -> list[dict]:
    """The blocks of a Hudi log file, read from their headers: magic, block
    length (long), format version and block type (ints), the header (an
    int count of (int key, int length, UTF-8 value) entries), the content
    length (long) and the content. An Avro data block's content starts with
    its version and record count (ints); a Parquet data block's is a
    Parquet file."""
    import pyarrow.parquet as pq

    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        assert data[pos : pos + 6] == LOG_MAGIC, f"{path}: no block magic at {pos}"
        (length,) = struct.unpack_from(">q", data, pos + 6)
        at = pos + 14
        version, kind = struct.unpack_from(">ii", data, at)
        at += 8
        keys = []
        if version >= 1:
            (entries,) = struct.unpack_from(">i", data, at)
            at += 4
            for _ in range(entries):
                key, size = struct.unpack_from(">ii", data, at)
                keys.append(HEADER_KEYS[key] if key < len(HEADER_KEYS) else str(key))
                at += 8 + size
        header = at - (pos + 22)
        (content_len,) = struct.unpack_from(">q", data, at)
        content = data[at + 8 : at + 8 + content_len]
        block = {"type": BLOCK_TYPES[kind], "header": header, "keys": keys, "content": content_len, "records": None, "codec": None}
        if block["type"] == "avro":
            block["records"] = struct.unpack_from(">ii", content)[1]
            block["codec"] = "Avro binary, uncompressed"
        elif block["type"] == "parquet":
            meta = pq.ParquetFile(io.BytesIO(content)).metadata
            block["records"] = meta.num_rows
            block["codec"] = "Parquet " + "/".join(sorted(parquet_codecs(meta)))
        out.append(block)
        pos += 14 + length
    return out


def parquet_codecs(meta) -> set[str]:
    return {meta.row_group(g).column(c).compression for g in range(meta.num_row_groups) for c in range(meta.num_columns)}


def file_id(name: str) -> str:
    """The file group of a base file (`<id>_<token>_<instant>.parquet`) or a
    log file (`.<id>_<instant>.log.<version>_<token>`)."""
    return name.lstrip(".").split("_")[0]


def layout(table: Path) -> dict:
    """The table's base and log files (outside `.hoodie`, without Hadoop's
    `.crc` files): every one on disk, so superseded slices too (neither
    table here is compacted or cleaned)."""
    logs, bases = [], []
    for f in sorted(table.rglob("*")):
        if ".hoodie" in f.relative_to(table).parts or not f.is_file() or f.name.endswith(".crc"):
            continue
        if ".log." in f.name:
            logs.append(f)
        elif f.name.endswith(".parquet"):
            bases.append(f)
    return {"logs": logs, "bases": bases}


def spread(values) -> str:
    """min / median / max of `values`."""
    if not values:
        return "-"
    return f"{min(values):,.0f} / {statistics.median(values):,.0f} / {max(values):,.0f}"


def layout_facts(table: Path) -> dict[str, str]:
    """What could make one table slower to read than another: log and base
    files, their sizes and counts per file group, the blocks in each log,
    codecs."""
    import pyarrow.parquet as pq

    files = layout(table)
    logs, bases = files["logs"], files["bases"]
    groups = {(f.parent, file_id(f.name)) for f in logs + bases}
    per_group = {}
    for f in logs:
        g = (f.parent, file_id(f.name))
        per_group[g] = per_group.get(g, 0) + 1
    blocks = [log_blocks(f) for f in logs]
    flat = [b for bs in blocks for b in bs]
    log_sizes = [f.stat().st_size for f in logs]
    base_sizes = [f.stat().st_size for f in bases]
    metas = [pq.read_metadata(f) for f in bases]
    base_codecs = set().union(*(parquet_codecs(m) for m in metas)) if metas else set()
    kinds = {}
    for b in flat:
        kinds[b["type"]] = kinds.get(b["type"], 0) + 1
    keys = sorted({k for b in flat for k in b["keys"]})
    return {
        "file groups": f"{len(groups)}",
        "log files": f"{len(logs)}",
        "log files per file group (min / median / max)": spread([per_group.get(g, 0) for g in groups]),
        "log bytes, total": f"{sum(log_sizes) / 1e6:,.2f} MB",
        "log file bytes (min / median / max)": spread(log_sizes),
        "blocks per log file (min / median / max)": spread([len(bs) for bs in blocks]),
        "block types": ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "-",
        "records per data block (min / median / max)": spread([b["records"] for b in flat if b["records"] is not None]),
        "header bytes per block (min / median / max)": spread([b["header"] for b in flat]),
        "header keys": ", ".join(keys) or "-",
        "log data codec": ", ".join(sorted({b["codec"] for b in flat if b["codec"]})) or "-",
        "base files": f"{len(bases)}",
        "base bytes, total": f"{sum(base_sizes) / 1e6:,.2f} MB",
        "base file bytes (min / median / max)": spread(base_sizes),
        "rows per base file (min / median / max)": spread([m.num_rows for m in metas]),
        "row groups per base file (min / median / max)": spread([m.num_row_groups for m in metas]),
        "base file codec": ", ".join(sorted(base_codecs)) or "-",
        "base file writer": ", ".join(sorted({m.created_by for m in metas})) or "-",
    }


def spark_rows(spark, table: Path) -> set[tuple]:
    cols = [f["name"] for f in SCHEMA["fields"]]
    df = spark.read.format("hudi").option("hoodie.metadata.enable", "false").load(str(table)).select(*cols)
    return {tuple(r) for r in df.collect()}


def same_rows(spark, spark_table: Path, ours: Path, folder: Path, args) -> str:
    """Both tables' rows, read by Spark, compared in full with each other
    and with the model (per key its newest event, the later row on a tie);
    fails with the keys that differ."""
    cols = [f["name"] for f in SCHEMA["fields"]]
    files = [folder / f"in{i}.jsonl" for i in range(1 + args.upserts)]
    model = {tuple(r[c] for c in cols) for r in newest_per_key(files).values()}
    theirs, mine = spark_rows(spark, spark_table), spark_rows(spark, ours)
    if theirs != mine:
        only = sorted(theirs ^ mine)[:6]
        where = [("Spark-made" if r in theirs else "Tributary-made", "model" if r in model else "not the model", r) for r in only]
        sys.exit(f"the tables differ in {len(theirs ^ mine):,} rows ({len(theirs):,} against {len(mine):,}), for example {where}")
    off = len(theirs ^ model)
    return f"both tables hold the same {len(mine):,} rows; {'they equal the model' if off == 0 else f'{off:,} rows differ from the model'}"


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
    exe, cli = build_driver(), build_cli()
    spark = env.session("v9-read", "4g", folder / "warehouse")
    table, first = make_table(spark, folder, args)

    reads = ["| table | reader | rows | seconds | rows/s | rows per CPU-s |", "|---|---|---|---|---|---|"]
    ours = best([driver(exe, "read", table) for _ in range(3)])
    reads.append(line("Spark-made v9", "Tributary", ours, ours["cpu"]))
    official = best([official_read(table) for _ in range(3)])
    reads.append(line("Spark-made v9", "hudi-rs 0.5.0", official))
    theirs = best([spark_read(spark, table) for _ in range(3)])
    reads.append(line("Spark-made v9", "Spark 3.5 + Hudi 1.2", theirs))
    assert ours["rows"] == theirs["rows"], (ours, theirs)

    # 5. Layout: the same data written by Tributary, read by each reader.
    compact_first = bool(first["bases"])
    holds = f"{len(first['bases'])} base files and {len(first['logs'])} log files"
    print(f"Spark's first commit left {holds}: Tributary {'compacts' if compact_first else 'does not compact'} after its first", flush=True)
    mine = tributary_table(cli, folder, args, compact_first)
    layouts = ["| table | reader | rows | seconds | rows/s |", "|---|---|---|---|---|"]
    by_table = {"Spark-made": {"Tributary": ours, "hudi-rs 0.5.0": official, "Spark 3.5 + Hudi 1.2": theirs}}
    by_table["Tributary-made"] = {
        "Tributary": best([driver(exe, "read", mine) for _ in range(3)]),
        "hudi-rs 0.5.0": best([official_read(mine) for _ in range(3)]),
        "Spark 3.5 + Hudi 1.2": best([spark_read(spark, mine) for _ in range(3)]),
    }
    for name, readers in by_table.items():
        for reader, r in readers.items():
            layouts.append(f"| {name} | {reader} | {r['rows']:,} | {r['wall']:.3f} | {r['rows'] / r['wall']:,.0f} |")
    counts = {(name, reader): r["rows"] for name, readers in by_table.items() for reader, r in readers.items()}
    assert len(set(counts.values())) == 1, counts
    checked = same_rows(spark, table, mine, folder, args)
    facts = {name: layout_facts(t) for name, t in [("Spark-made", table), ("Tributary-made", mine)]}
    layout_lines = ["| | Spark-made | Tributary-made |", "|---|---|---|"]
    layout_lines += [f"| {k} | {facts['Spark-made'][k]} | {facts['Tributary-made'][k]} |" for k in facts["Spark-made"]]

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
    print()
    print(f"Spark's first commit left {holds}; Tributary {'compacted' if compact_first else 'did not compact'} after its first.")
    print("\n".join(layouts))
    print(checked)
    print()
    print("\n".join(layout_lines))


if __name__ == "__main__":
    main()
