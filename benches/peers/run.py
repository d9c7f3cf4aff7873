"""Tributary beside its peers, Apache Paimon and Delta Lake: one command.

    python3 benches/peers/run.py               # the full workload (1.2 M rows)
    python3 benches/peers/run.py --scale 0.05  # everything 20 times smaller

From a clean checkout with Rust and Python 3 (3.10 or later): the script
makes its own virtualenv, `benches/peers/.venv`, and installs the peers there
from PyPI: pypaimon 2.1.0 with pypaimon-rust 0.4.0 (Paimon's Rust
writer and reader), deltalake 1.6.6 (delta-rs), pyarrow, hudi 0.5.0 (the
official Hudi reader) and datafusion 54.1.0 (DataFusion's Python package,
which hudi 0.5.0's table provider plugs into: the `sql` case). Then it
builds Tributary's driver (`cargo build --release --bench peers`,
benches/peers/driver.rs) and the `tributary` binary, re-runs itself under
the virtualenv, builds and installs Tributary's Python package there when
the `python` case runs (below), generates the workload, runs every case,
checks every table's contents, prints a ratio table and writes the raw
figures to benches/peers/results.json.

The workload (benches/peers/workload.py; seeded, so every run writes the
same rows): 10 columns, `id` over 200,000 keys, `region` (3 values derived
from the key; the partition column), `ts` epoch milliseconds with +-10
minutes of jitter (out-of-order events), four longs, two doubles, a 10-30
character `note`. Steps: 800,000 rows (the initial ingest), 200,000 rows
(one upsert commit), then 40 commits of 5,000 rows. `--scale` multiplies
every row and key count (the 40 commits and 4 writers stay).

Every table is partitioned by `region`, keyed by `id`, and keeps the row with
the largest `ts` per key, with the same number of buckets per partition in
Tributary and Paimon (`--buckets`, 16). Tributary: Hudi v8 Merge-on-Read,
event-time merging, hybrid-logical instants (what `init` records by
default; a table shared with Hudi's Java writers records wait-for-skew). What each peer calls is in engines.py's
docstring: Paimon through pypaimon-rust's Rust writer/reader (primary-key
table, `sequence.field = ts`); Delta through delta-rs (append, then MERGE on
`id` keeping the larger `ts`).

Cases, each run `--reps` times (3) interleaved (tributary, paimon, delta,
tributary, ...), each run a fresh process (Tributary: the driver; peers:
engines.py), the median reported. CPU is user + system time of that
process; the clock covers the write or read itself, not start-up, reading
the input file or opening the table:

1. `ingest`: a new table, one commit of the 800,000 rows, Arrow in (an
   Arrow IPC file written by pyarrow): rows/s and rows per CPU-second.
2. `ingest-json`: the same rows as JSON lines into a new table: Tributary's
   CLI (`tributary write --input F`, process start-up and parsing included;
   CPU from wait4) against each peer parsing the file with pyarrow's JSON
   reader, then writing: rows/s.
3. `upsert`: one commit of the 200,000 rows into the ingested table: rows/s.
4. `commits`: then 40 commits of 5,000 rows, one after the other:
   commits/s, p50 and p99 commit latency.
5. `concurrent`: 4 writer processes commit the same 40 batches, 10 each,
   into a copy of the table as it was before `commits`, all started at
   once: failed attempts (a commit that errors with a conflict and is
   retried), commits lost (a commit reported done whose snapshot is not in
   the table), and the wall time against case 4's one writer.
6. `read`: a snapshot read of the table after case 4: rows/s, by
   Tributary's `Table::scan` (its batches, as delta-rs's chunked table), by the official Hudi reader on Tributary's
   table (a second row), by Paimon's and by delta-rs's reader.
7. `compact`: one compaction of Tributary's table after all that: input
   rows per CPU-second. Delta's nearest thing, `optimize.compact()`
   (bin-packing small files; versions are already merged on write), is
   timed beside it but not compared; Paimon's Python packages cannot
   compact (engines.py), so its table stays as it was.
8. `sql`: four SQL queries, on the tables after case 4 (`sql/commits`)
   and again after case 7 (`sql/compact`): `SELECT count(*)`; a group-by
   on region with `count(*)` and `sum(l1)`; a lookup of 100 keys
   (`id IN (...)`, spread evenly over the key space, every column); and a
   projection of every row's `id` and `ts`. Engines: Tributary's DataFusion
   provider (`tributary::sql::TributaryTable`, in the driver's process),
   hudi-rs's DataFusion provider (`hudi.HudiDataFusionDataSource`, with
   DataFusion's Python package) on Tributary's table, Paimon's DataFusion
   session (`pypaimon_rust.datafusion.SQLContext`) and delta-rs's
   (`deltalake.QueryBuilder`); engines.py says exactly how. Each process
   opens its table, warms its session with `SELECT 1` (untimed), then
   runs each query once, in order, collecting every row: wall and CPU
   time of each query alone, the median over the repetitions. Count,
   group-by and projection are reported in table rows per second (the
   rows the query covers), the lookup in queries per second; hudi-rs
   counts as a peer here. Every answer is checked against the model:
   the count, each region's count and sum, the 100 rows (every column)
   and the projection's row count; a wrong answer is printed loudly
   after the table, as a content mismatch is.
9. `python`: Tributary's Python package (`tributary`, in engines.py's
   process: the engine `tributary-py`) against the peers' Python APIs, on
   tables of its own, in four steps, each measured as the cases above are
   (every step `--reps` times interleaved, each run a fresh engines.py
   process, the medians of rows/s and of rows per CPU-second):
   `python/write`, the 800,000 ingest rows as a pyarrow Table into a new
   table (`table.write(rows)`; Paimon and Delta write as in `ingest`);
   `python/pandas`, the same rows as a pandas DataFrame into another new
   table, the DataFrame made before the clock starts and the conversion
   each engine needs timed (engines.py's `--from pandas` says which);
   `python/upsert`, the 200,000 upsert rows as a pyarrow Table into the
   first table (`table.write` against Delta's MERGE and Paimon's commit);
   `python/read`, that table read into a pyarrow Table
   (`table.to_pyarrow()` against `DeltaTable(DIR).to_pyarrow_table()` and
   Paimon's read). The package is built first, from python/, as a release
   wheel (`maturin build --release`, cargo's target folder target-py/ as
   python/build.sh uses: some 15 to 20 minutes on a 2-core machine from
   cold, 21 minutes with DataFusion in it),
   with maturin (1.x) and pandas installed into the virtualenv, and the
   wheel installed there by `pip install --force-reinstall --no-deps`:
   never with its `datafusion` extra, whose DataFusion-Python 55 would
   replace the 54.1.0 that hudi 0.5.0's provider needs (`sql`), and with
   nothing else moved (its one dependency, pyarrow, is there). Other cases
   do not build it.

`--cases a,b` runs some of the cases, and the cases they need (NEEDS:
every case after `upsert` needs its tables, `read`, `compact` and `sql`
the commits', `sql` the compaction; `python` needs none, it makes its
own tables), for trying a change quickly; the content check then covers
the tables the cases chosen made.

Then every table (ingested, concurrent and JSON-ingested, every repetition;
the `python` case's two) must hold one row per key carrying its newest
event (largest `ts`) of all the input it was given, compared with a model
kept in plain Python (workload.py): after the commits, or after the
ingest (JSON-ingested, `python/pandas`), or after the upsert
(`python/write`'s table, upserted into). Tributary's tables are read both
by the official Hudi reader and by the driver (those of the `python` case
by the package's `to_pyarrow()` instead of the driver). TABLE_KINDS lists
them. A mismatch is printed loudly after the table; the script exits with
status 1 when one of Tributary's tables fails (a peer's failure is a
finding about the peer, reported, not a failed run).

The ratios, not the absolute figures, carry over between machines: this
benchmark runs each engine on the same machine at the same time, but
absolute figures depend on cores, disk and what else runs.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VENV = HERE / ".venv"
VENV_PYTHON = VENV / "bin" / "python"
REQUIREMENTS = {
    "pypaimon": "2.1.0",
    "pypaimon-rust": "0.4.0",
    "deltalake": "1.6.6",
    "pyarrow": None,
    "hudi": "0.5.0",
    # The DataFusion hudi 0.5.0 is built on: its table provider crosses
    # DataFusion's FFI, which holds only between equal major versions.
    "datafusion": "54.1.0",
}
PEERS = ["paimon", "delta"]
# The `sql` case's peers: hudi-rs's provider on Tributary's table too.
SQL_PEERS = ["hudi", *PEERS]
SQL_LABEL = {
    "tributary": "Tributary (DataFusion provider)",
    "hudi": "hudi-rs DataFusion provider",
    "paimon": "Paimon SQLContext",
    "delta": "delta-rs QueryBuilder",
}
# The tables' states the `sql` case queries: after case `commits`, and
# after case `compact`.
SQL_STATES = {"commits": "after the commits", "compact": "after compaction"}
SQL_QUERIES = {
    "count": "SELECT count(*)",
    "group_by": "group-by region: count(*), sum(l1)",
    "lookup": "lookup of 100 keys, every column",
    "projection": "projection of id, ts, every row",
}
LOOKUP_KEYS = 100
CASES = ["ingest", "ingest-json", "upsert", "commits", "concurrent", "read", "compact", "sql", "python"]
# What each case needs run before it.
NEEDS = {
    "upsert": ["ingest"],
    "commits": ["upsert"],
    "concurrent": ["upsert"],
    "read": ["commits"],
    "compact": ["commits"],
    "sql": ["commits", "compact"],
}
LABEL = {
    "tributary": "Tributary",
    "tributary-cli": "Tributary (CLI)",
    "tributary-py": "Tributary (Python)",
    "hudi": "official Hudi reader",
    "paimon": "Paimon",
    "delta": "Delta",
}
# The `python` case's engines and steps (run name -> what it measures).
PYTHON_ENGINES = ["tributary-py", *PEERS]
PYTHON_STEPS = {
    "python/write": "write of {ingest:,} rows, a pyarrow Table, into a new table",
    "python/pandas": "write of {ingest:,} rows, a pandas DataFrame (conversion timed), into a new table",
    "python/upsert": "upsert of {upsert:,} rows, a pyarrow Table",
    "python/read": "read into a pyarrow Table after the upsert",
}
# What the `python` case installs into the virtualenv besides REQUIREMENTS:
# maturin, which builds Tributary's wheel, and pandas, its DataFrames.
PYTHON_REQUIREMENTS = ["maturin>=1.9,<2", "pandas"]
# The tables whose contents are checked: kind -> (the case that makes it,
# the Tributary engine that writes it, the Tributary reader besides the
# official one, the model it must equal: a Workload attribute).
TABLE_KINDS = {
    "main": ("commits", "tributary", "tributary", "expected_all"),
    "concurrent": ("concurrent", "tributary", "tributary", "expected_all"),
    "json": ("ingest-json", "tributary-cli", "tributary", "expected_ingest"),
    "python": ("python", "tributary-py", "tributary-py", "expected_upsert"),
    "pandas": ("python", "tributary-py", "tributary-py", "expected_ingest"),
}


# ---------------------------------------------------------------- set-up


def missing_requirements() -> list:
    """Requirements the virtualenv lacks, as pip arguments."""
    if not VENV_PYTHON.exists():
        return [f"{n}=={v}" if v else n for n, v in REQUIREMENTS.items()]
    probe = (
        "import importlib.metadata as m, json, sys\n"
        "out = {}\n"
        "for n in json.loads(sys.argv[1]):\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: out[n] = None\n"
        "print(json.dumps(out))\n"
    )
    found = json.loads(
        subprocess.run(
            [str(VENV_PYTHON), "-c", probe, json.dumps(list(REQUIREMENTS))], check=True, capture_output=True, text=True
        ).stdout
    )
    return [
        f"{n}=={v}" if v else n
        for n, v in REQUIREMENTS.items()
        if found.get(n) is None or (v is not None and found[n] != v)
    ]


def bootstrap():
    """Makes the virtualenv and installs the peers if needed, then re-runs
    this script under the virtualenv's Python."""
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    if not VENV_PYTHON.exists():
        print(f"making the virtualenv {VENV} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    need = missing_requirements()
    if need:
        print(f"installing {' '.join(need)} into {VENV} ...", flush=True)
        pip = [str(VENV_PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run(pip + need, check=True)
    os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), str(Path(__file__).resolve()), *sys.argv[1:]])


def build() -> dict:
    """Builds the driver and the `tributary` binary (release); their paths,
    from cargo's JSON messages."""
    print("building Tributary's driver and CLI (cargo build --release --bench peers --bin tributary) ...", flush=True)
    cmd = ["cargo", "build", "--release", "--bench", "peers", "--bin", "tributary", "--message-format=json"]
    done = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"cargo build failed ({done.returncode}); see its messages above")
    found = {}
    for line in done.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            found[msg["target"]["name"]] = msg["executable"]
    missing = {"peers", "tributary"} - set(found)
    if missing:
        sys.exit(f"cargo built no executable for {sorted(missing)}")
    return {"driver": found["peers"], "cli": found["tributary"]}


def install_python_package(wheels: Path) -> str:
    """Builds Tributary's Python package as a release wheel into `wheels`
    and installs it into the virtualenv (this script runs under it) without
    dependencies; the wheel's file name."""
    pip = [str(VENV_PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run(pip + PYTHON_REQUIREMENTS, check=True)
    print(
        "building Tributary's Python package (maturin build --release in python/; some 15-20 minutes on 2 cores) ...",
        flush=True,
    )
    shutil.rmtree(wheels, ignore_errors=True)
    cmd = [str(VENV / "bin" / "maturin"), "build", "--release", "--out", str(wheels)]
    env = {**os.environ, "CARGO_TARGET_DIR": str(ROOT / "target-py")}
    done = subprocess.run(cmd, cwd=ROOT / "python", env=env)
    if done.returncode != 0:
        sys.exit(f"maturin build failed ({done.returncode}); see its messages above")
    (wheel,) = wheels.glob("tributary-*.whl")
    subprocess.run(pip + ["--force-reinstall", "--no-deps", str(wheel)], check=True)
    return wheel.name


# ---------------------------------------------------------------- running cases


class CaseFailed(Exception):
    """A case's process failed; the message says how."""


def last_json(stdout: str, what: str) -> dict:
    for line in reversed(stdout.splitlines()):
        if line.strip().startswith("{"):
            return json.loads(line)
    raise CaseFailed(f"{what} printed no figures")


def failure(what: str, code, stderr: str) -> CaseFailed:
    lines = [l for l in stderr.splitlines() if l.strip() and not l.startswith("note: run with")]
    tail = " | ".join(lines[-3:]) if lines else "no message"
    return CaseFailed(f"{what} exited with {code}: {tail}")


def run_json(cmd: list, what: str) -> dict:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if done.returncode != 0:
        raise failure(what, done.returncode, done.stderr)
    return last_json(done.stdout, what)


def lookup_keys(keys: int) -> list:
    """The `sql` case's lookup: LOOKUP_KEYS ids spread evenly over the key space."""
    n = min(LOOKUP_KEYS, keys)
    return [f"key-{i * keys // n:08d}" for i in range(n)]


def sql_answers(model, keys: int) -> dict:
    """What each `sql` query must answer, from the model (one row per key,
    its newest event), in plain Python."""
    rows = model.to_pylist()
    regions = {}
    for r in rows:
        n, total = regions.get(r["region"], (0, 0))
        regions[r["region"]] = (n + 1, total + r["l1"])
    wanted = set(lookup_keys(keys))
    return {
        "count": [{"n": len(rows)}],
        "group_by": [{"region": k, "n": n, "l1_sum": t} for k, (n, t) in sorted(regions.items())],
        "lookup": sorted((r for r in rows if r["id"] in wanted), key=lambda r: r["id"]),
        "projection": len(rows),
    }


def answer_diff(query: str, figures: dict, expected):
    """None when an engine's answer to `query` is the model's, else what differs."""
    if query == "projection":
        return None if figures["rows"] == expected else f"{figures['rows']:,} rows, the model has {expected:,}"
    got = figures["answer"]
    if query == "group_by":
        got = sorted(got, key=lambda r: r["region"])
    if query == "lookup":
        got = sorted(got, key=lambda r: r["id"])
    if got == expected:
        return None
    if query == "lookup":
        got_ids, want_ids = [r["id"] for r in got], [r["id"] for r in expected]
        if got_ids != want_ids:
            differ = sorted(set(got_ids) ^ set(want_ids))
            return f"{len(got)} rows, the model has {len(expected)} (keys {differ[:3]} differ)"
        wrong = [g["id"] for g, w in zip(got, expected) if g != w]
        return f"{len(wrong)} rows differ from the model's (e.g. {wrong[0]})"
    return f"{got} where the model has {expected}"


class Bench:
    """Runs the cases and keeps every figure."""

    def __init__(self, args, exes: dict, files: dict, work: Path, workload):
        self.args = args
        self.exes = exes
        self.files = files
        self.work = work
        self.wl = workload
        self.runs = []  # every run: case, engine, rep, figures or error
        self.broken = set()  # (engine, rep, table kind) whose table a failed step left unusable
        self.notes = []
        self.check_results = []

    # -- paths and commands

    def table(self, engine: str, rep: int, kind: str = "main") -> Path:
        owner = "tributary" if engine in ("hudi", "tributary-cli") else engine
        if kind == "json" and owner == "tributary":
            owner = "tributary-cli"
        return self.work / "tables" / f"rep{rep}" / owner / kind

    def driver_cmd(self, case: str, table: Path, *extra) -> list:
        return [self.exes["driver"], case, "--table", table, *extra]

    def peer_cmd(self, engine: str, case: str, table: Path, *extra) -> list:
        return [sys.executable, HERE / "engines.py", engine, case, "--table", table, *extra]

    def cmd(self, engine: str, case: str, table: Path, *extra) -> list:
        if engine == "tributary":
            return self.driver_cmd(case, table, *extra)
        return self.peer_cmd(engine, case, table, *extra)

    # -- bookkeeping

    def record(self, case: str, engine: str, rep: int, fn, needs=None, breaks=None):
        """Runs `fn()` (figures) unless a table it needs is broken; keeps the
        figures or the error. `breaks`: the table kind a failure leaves unusable."""
        if needs is not None and (engine, rep, needs) in self.broken:
            entry = {"case": case, "engine": engine, "rep": rep, "error": f"not run: its {needs} table failed earlier"}
        else:
            label = (SQL_LABEL if case.startswith("sql/") else LABEL).get(engine, engine)
            print(f"  {case:<13} rep {rep + 1}  {label:<31}", end="", flush=True)
            started = time.perf_counter()
            try:
                figures = fn()
                entry = {"case": case, "engine": engine, "rep": rep, "figures": figures}
                took = time.perf_counter() - started
                print(f" {figures['wall']:8.3f} s measured ({took:.2f} s with start-up and set-up)", flush=True)
            except CaseFailed as e:
                entry = {"case": case, "engine": engine, "rep": rep, "error": str(e)}
                print(f" FAILED: {e}", flush=True)
                if breaks is not None:
                    self.broken.add((engine, rep, breaks))
        self.runs.append(entry)
        return entry.get("figures")

    def figures(self, case: str, engine: str) -> list:
        return [r["figures"] for r in self.runs if r["case"] == case and r["engine"] == engine and "figures" in r]

    def errors(self, case: str, engine: str) -> list:
        return [r["error"] for r in self.runs if r["case"] == case and r["engine"] == engine and "error" in r]

    # -- the cases

    def reps(self):
        return range(self.args.reps)

    def case_ingest(self):
        for rep in self.reps():
            for e in ["tributary", *PEERS]:
                t = self.table(e, rep)
                extra = ["--input", self.files["ingest"], "--buckets", self.args.buckets]
                if e == "tributary":
                    ours = self.driver_cmd("ingest", t, *extra, "--schema", self.files["avro_schema"])
                    self.record("ingest", e, rep, lambda: run_json(ours, e), breaks="main")
                else:
                    self.record(
                        "ingest", e, rep, lambda: run_json(self.peer_cmd(e, "ingest", t, *extra), e), breaks="main"
                    )

    def tributary_cli_json(self, table: Path) -> dict:
        cli = self.exes["cli"]
        init = [cli, "init", table, "--schema", self.files["avro_schema"], "--record-key", "id"]
        init += ["--ordering-field", "ts", "--partition-field", "region", "--buckets", self.args.buckets]
        run = subprocess.run([str(c) for c in init], capture_output=True, text=True)
        if run.returncode != 0:
            raise failure("tributary init", run.returncode, run.stderr)
        write = [cli, "write", table, "--input", self.files["ingest_json"]]
        started = time.perf_counter()
        proc = subprocess.Popen([str(c) for c in write], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        stderr = proc.stderr.read()
        proc.stderr.close()
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise failure("tributary write", code, stderr)
        rows = self.wl.sizes.ingest
        return {"rows": rows, "commits": 1, "failed": 0, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime}

    def case_ingest_json(self):
        for rep in self.reps():
            for e in ["tributary-cli", *PEERS]:
                t = self.table(e, rep, "json")
                if e == "tributary-cli":
                    self.record("ingest-json", e, rep, lambda: self.tributary_cli_json(t), breaks="json")
                else:
                    extra = ["--input", self.files["ingest_json"], "--buckets", self.args.buckets]
                    self.record(
                        "ingest-json",
                        e,
                        rep,
                        lambda: run_json(self.peer_cmd(e, "ingest-json", t, *extra), e),
                        breaks="json",
                    )

    def case_upsert(self):
        for rep in self.reps():
            for e in ["tributary", *PEERS]:
                t = self.table(e, rep)
                cmd = self.cmd(e, "upsert", t, "--input", self.files["upsert"])
                self.record("upsert", e, rep, lambda: run_json(cmd, e), needs="main", breaks="main")

    def copy_for_concurrent(self):
        """The concurrent writers start from the table as it was after the
        upsert, as the one writer of `commits` does."""
        for rep in self.reps():
            for e in ["tributary", *PEERS]:
                if (e, rep, "main") in self.broken:
                    self.broken.add((e, rep, "concurrent"))
                    continue
                shutil.copytree(self.table(e, rep), self.table(e, rep, "concurrent"))

    def case_commits(self):
        for rep in self.reps():
            for e in ["tributary", *PEERS]:
                t = self.table(e, rep)
                cmd = self.cmd(e, "commits", t, "--input", self.files["small"])
                self.record("commits", e, rep, lambda: run_json(cmd, e), needs="main", breaks="main")

    def committed(self, engine: str, table: Path) -> int:
        """Commits the table holds: Tributary's completed delta commits in
        its timeline; a peer's latest snapshot id or version."""
        if engine == "tributary":
            return sum(1 for f in (table / ".hoodie" / "timeline").glob("*_*.deltacommit"))
        return run_json(self.peer_cmd(engine, "snapshot", table), f"{engine} snapshot")["snapshot"]

    def concurrent_writers(self, engine: str, table: Path) -> dict:
        """Starts the writers, lets them go at once once all are ready, and
        times from the start signal to the last writer's figures."""
        writers, per = self.wl.sizes.writers, self.wl.sizes.small_commits // self.wl.sizes.writers
        before = self.committed(engine, table)
        procs = []
        for w in range(writers):
            extra = ["--input", self.files["small"], "--first", w * per, "--count", per, "--barrier"]
            if engine == "tributary":
                extra += ["--writer-id", f"bench-{w}"]
            cmd = [str(c) for c in self.cmd(engine, "commits", table, *extra)]
            procs.append(
                subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            )
        try:
            for p in procs:
                line = p.stdout.readline()
                if not line.strip().startswith("{"):
                    p.wait()
                    raise failure(f"{engine} writer", p.returncode, p.stderr.read())
            outputs = [None] * writers
            finished = [None] * writers

            def collect(i, p):
                outputs[i] = p.stdout.read()
                finished[i] = time.perf_counter()

            threads = [threading.Thread(target=collect, args=(i, p)) for i, p in enumerate(procs)]
            for t in threads:
                t.start()
            started = time.perf_counter()
            for p in procs:
                p.stdin.write("go\n")
                p.stdin.flush()
            for t in threads:
                t.join()
            wall = max(finished) - started
            results = []
            for i, p in enumerate(procs):
                p.wait()
                if p.returncode != 0:
                    raise failure(f"{engine} writer {i}", p.returncode, p.stderr.read())
                results.append(last_json(outputs[i], f"{engine} writer {i}"))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
                for f in (p.stdin, p.stdout, p.stderr):
                    f.close()
        commits = sum(r["commits"] for r in results)
        after = self.committed(engine, table)
        latencies = sorted(x for r in results for x in r["latencies_ms"])
        return {
            "writers": writers,
            "commits": commits,
            "failed": sum(r["failed"] for r in results),
            "lost": commits - (after - before),
            "wall": wall,
            "cpu": sum(r["cpu"] for r in results),
            "rows": sum(r["rows"] for r in results),
            "p50_ms": latencies[round((len(latencies) - 1) * 0.5)],
            "p99_ms": latencies[round((len(latencies) - 1) * 0.99)],
        }

    def case_concurrent(self):
        for rep in self.reps():
            for e in ["tributary", *PEERS]:
                t = self.table(e, rep, "concurrent")
                self.record(
                    "concurrent", e, rep, lambda: self.concurrent_writers(e, t), needs="concurrent", breaks="concurrent"
                )

    def case_read(self):
        for rep in self.reps():
            for e in ["tributary", "hudi", *PEERS]:
                t = self.table(e, rep)
                needs_engine = "tributary" if e == "hudi" else e
                if (needs_engine, rep, "main") in self.broken:
                    self.broken.add((e, rep, "main"))
                self.record("read", e, rep, lambda: run_json(self.cmd(e, "read", t), e), needs="main")

    def case_compact(self):
        for rep in self.reps():
            t = self.table("tributary", rep)
            figures = self.record(
                "compact", "tributary", rep, lambda: run_json(self.driver_cmd("compact", t), "compact"), needs="main"
            )
            if figures is not None:
                figures["rows_in"] = self.wl.total_rows()
            d = self.table("delta", rep)
            optimize = self.peer_cmd("delta", "compact", d)
            self.record("compact", "delta", rep, lambda: run_json(optimize, "delta"), needs="main")

    def write_queries(self) -> Path:
        """The `sql` case's queries, as a JSON file every engine reads."""
        path = self.work / "input" / "queries.json"
        keys = ", ".join(f"'{k}'" for k in lookup_keys(self.wl.sizes.keys))
        queries = {
            "count": "SELECT count(*) AS n FROM t",
            "group_by": "SELECT region, count(*) AS n, sum(l1) AS l1_sum FROM t GROUP BY region",
            "lookup": f"SELECT id, region, ts, l1, l2, l3, l4, d1, d2, note FROM t WHERE id IN ({keys})",
            "projection": "SELECT id, ts FROM t",
        }
        assert list(queries) == list(SQL_QUERIES)
        path.write_text(json.dumps(queries, indent=1))
        return path

    def case_sql(self, state: str):
        """The queries on every engine's table as it is now (`state`)."""
        if "queries" not in self.files:
            self.files["queries"] = self.write_queries()
        queries = self.files["queries"]
        for rep in self.reps():
            for e in ["tributary", *SQL_PEERS]:
                t = self.table(e, rep)
                needs_engine = "tributary" if e == "hudi" else e
                if (needs_engine, rep, "main") in self.broken:
                    self.broken.add((e, rep, "main"))
                cmd = self.cmd(e, "sql", t, "--queries", queries)
                self.record(f"sql/{state}", e, rep, lambda: run_json(cmd, e), needs="main")

    def case_python(self):
        """Tributary's Python package against the peers' Python APIs, step by
        step, each step's repetitions interleaved; every run is engines.py."""
        ingest = ["--input", self.files["ingest"], "--buckets", self.args.buckets]
        # step: (its table, engines.py's case and arguments, the table it
        # needs, the table its failure leaves unusable)
        steps = {
            "python/write": ("python", ["ingest", *ingest], None, "python"),
            "python/pandas": ("pandas", ["ingest", *ingest, "--from", "pandas"], None, "pandas"),
            "python/upsert": ("python", ["upsert", "--input", self.files["upsert"]], "python", "python"),
            "python/read": ("python", ["read"], "python", None),
        }
        assert list(steps) == list(PYTHON_STEPS)
        for step, (kind, (case, *extra), needs, breaks) in steps.items():
            for rep in self.reps():
                for e in PYTHON_ENGINES:
                    cmd = self.peer_cmd(e, case, self.table(e, rep, kind), *extra)
                    self.record(step, e, rep, lambda: run_json(cmd, e), needs=needs, breaks=breaks)

    def check_sql(self) -> list:
        """Every `sql` run's answers against the model; the mismatches, as
        (table owner, message)."""
        expected = sql_answers(self.wl.expected_all, self.wl.sizes.keys)
        problems, results = [], []
        runs = [r for r in self.runs if r["case"].startswith("sql/") and "figures" in r]
        if runs:
            print("\nchecking every SQL answer against the model ...", flush=True)
        for r in runs:
            owner = "tributary" if r["engine"] in ("tributary", "hudi") else r["engine"]
            for q, fig in r["figures"]["queries"].items():
                what = f"{SQL_LABEL[r['engine']]}, {r['case']} rep {r['rep'] + 1}, {q}"
                diff = answer_diff(q, fig, expected[q])
                results.append({"query": what, "ok": diff is None, "diff": diff})
                if diff is not None:
                    problems.append((owner, f"{what}: {diff}"))
                    print(f"  MISMATCH: {what}: {diff}")
        ok = sum(1 for x in results if x["ok"])
        if runs:
            print(f"  {ok} of {len(results)} answers equal the model's")
        self.check_results += results
        return problems

    # -- checks

    def checked_kinds(self) -> list:
        """The tables whose contents the model knows once the cases chosen ran."""
        return [k for k, (case, *_) in TABLE_KINDS.items() if case in self.args.cases]

    def check(self) -> list:
        """Every table's contents against the model; the mismatches, as
        (table owner, message). Each read runs in its own process (the
        driver, or engines.py), which writes the rows to an Arrow IPC file
        for this one to compare."""
        import pyarrow as pa

        import workload

        print("\nchecking every table's contents against the model ...", flush=True)
        problems = []
        results = []
        dump = self.work / "dump.arrow"
        for rep in self.reps():
            for kind in self.checked_kinds():
                _, ours, our_reader, model = TABLE_KINDS[kind]
                expected = getattr(self.wl, model)
                for owner in [ours, *PEERS]:
                    table = self.table(owner, rep, kind)
                    if (owner, rep, kind) in self.broken or not table.exists():
                        continue
                    for reader in ["hudi", our_reader] if owner == ours else [owner]:
                        what = f"{LABEL[owner]} {kind} table, rep {rep + 1}, read by {LABEL[reader]}"
                        try:
                            run_json(self.cmd(reader, "read", table, "--dump", dump), f"{reader} read")
                            diff = workload.compare(pa.Table.from_batches(workload.read_ipc(dump)), expected)
                        except CaseFailed as err:
                            diff = f"could not read: {err}"
                        results.append({"table": what, "ok": diff is None, "diff": diff})
                        if diff is None:
                            print(f"  ok: {what}: {expected.num_rows:,} rows, each key's newest event")
                        else:
                            problems.append((owner, f"{what}: {diff}"))
                            print(f"  MISMATCH: {what}: {diff}")
        self.check_results += results
        return problems


# ---------------------------------------------------------------- report


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt_rate(v, unit=""):
    if v is None:
        return "n/a"
    if v >= 100:
        return f"{v:,.0f}{unit}"
    if v >= 10:
        return f"{v:,.1f}{unit}"
    return f"{v:,.2f}{unit}"


class Summary:
    """Medians per case and engine, and the ratio table."""

    def __init__(self, bench: Bench):
        self.b = bench

    def med(self, case, engine, key, per=None):
        """Median over the repetitions of figure `key` (or of `per` / `key`)."""
        vals = []
        for f in self.b.figures(case, engine):
            if per is None:
                vals.append(f.get(key))
            elif f.get(key):
                vals.append(f[per] / f[key])
        return median(vals)

    def why_not(self, case, engine):
        errors = self.b.errors(case, engine)
        return f"n/a ({errors[0]})" if errors else "n/a"

    def best_peer(self, case, value):
        """(engine, value) of the peer with the largest `value(engine)`."""
        best = None
        for e in PEERS:
            v = value(e)
            if v is not None and (best is None or v > best[1]):
                best = (e, v)
        return best

    def rows(self) -> list:
        s = self.b.wl.sizes
        out = []

        def throughput(label, case, per, key, unit, trib="tributary"):
            t = self.med(case, trib, key, per=per)
            best = self.best_peer(case, lambda e: self.med(case, e, key, per=per))
            peer = f"{LABEL[best[0]]}: {fmt_rate(best[1], unit)}" if best else self.why_not(case, PEERS[0])
            ratio = t / best[1] if (t and best) else None
            out.append(
                {
                    "case": case,
                    "measure": label,
                    "tributary": fmt_rate(t, unit) if t else self.why_not(case, trib),
                    "peer": peer,
                    "ratio": ratio,
                }
            )

        throughput(f"ingest, Arrow in, one commit of {s.ingest:,} rows", "ingest", "rows", "wall", " rows/s")
        throughput("ingest, Arrow in: rows per CPU-second", "ingest", "rows", "cpu", " rows/CPU-s")
        throughput(
            f"ingest, JSON lines in ({s.ingest:,} rows; Tributary: `tributary write`)",
            "ingest-json",
            "rows",
            "wall",
            " rows/s",
            trib="tributary-cli",
        )
        throughput(f"upsert, one commit of {s.upsert:,} rows", "upsert", "rows", "wall", " rows/s")

        def commits_cell(case, e):
            rate = self.med(case, e, "wall", per="commits")
            if rate is None:
                return None, self.why_not(case, e)
            p50, p99 = self.med(case, e, "p50_ms"), self.med(case, e, "p99_ms")
            return rate, f"{fmt_rate(rate)} commits/s, p50 {p50:,.0f} ms, p99 {p99:,.0f} ms"

        t_rate, t_cell = commits_cell("commits", "tributary")
        best = self.best_peer("commits", lambda e: commits_cell("commits", e)[0])
        out.append(
            {
                "case": "commits",
                "measure": f"{s.small_commits} sequential {s.small_rows:,}-row commits",
                "tributary": t_cell,
                "peer": f"{LABEL[best[0]]}: {commits_cell('commits', best[0])[1]}" if best else "n/a",
                "ratio": t_rate / best[1] if (t_rate and best) else None,
            }
        )

        def concurrent_cell(e):
            figs = self.b.figures("concurrent", e)
            if not figs:
                return None, self.why_not("concurrent", e)
            wall = median([f["wall"] for f in figs])
            one = self.med("commits", e, "wall")
            rel = f" = {wall / one:.2f}× one writer's time" if one else ""
            failed = median([f["failed"] for f in figs])
            lost = [f["lost"] for f in figs if f["lost"]]
            text = f"{s.small_commits} commits in {wall:,.2f} s{rel}; {failed:,.0f} failed attempts"
            if lost:
                text += (
                    f"; {sum(lost)} commits LOST in {len(lost)} of {len(figs)} runs "
                    "(reported done, absent from the table)"
                )
            return s.small_commits / wall, text

        def lost_commits(e):
            return any(f["lost"] for f in self.b.figures("concurrent", e))

        # A peer that lost commits is no peer for speed: the best is chosen
        # among the others, and the lossy one is named beside it.
        t_rate, t_cell = concurrent_cell("tributary")
        best = self.best_peer("concurrent", lambda e: None if lost_commits(e) else concurrent_cell(e)[0])
        peer = f"{LABEL[best[0]]}: {concurrent_cell(best[0])[1]}" if best else "n/a"
        for e in PEERS:
            if lost_commits(e):
                peer += f" (not counted, {LABEL[e]}: {concurrent_cell(e)[1]})"
        out.append(
            {
                "case": "concurrent",
                "measure": f"{s.writers} concurrent writers × {s.small_commits // s.writers} commits (separate processes)",
                "tributary": t_cell,
                "peer": peer,
                "ratio": t_rate / best[1] if (t_rate and best) else None,
            }
        )
        throughput("snapshot read after the commits: Tributary `Table::scan`", "read", "rows", "wall", " rows/s")
        throughput(
            "snapshot read: official Hudi reader (hudi-rs 0.5.0) on Tributary's table",
            "read",
            "rows",
            "wall",
            " rows/s",
            trib="hudi",
        )
        c = self.med("compact", "tributary", "cpu", per="rows_in")
        w = self.med("compact", "tributary", "wall")
        dw, dc = self.med("compact", "delta", "wall"), self.med("compact", "delta", "cpu")
        delta = f"Delta `optimize.compact()`: {self.why_not('compact', 'delta')}"
        if dw is not None:
            m = self.b.figures("compact", "delta")[0].get("metrics", {})
            delta = (
                f"Delta `optimize.compact()`, not compared (it bin-packs files; MERGE merged already): "
                f"{dw:,.2f} s, {dc:,.2f} CPU-s, {m.get('numFilesAdded', '?')} files written of "
                f"{m.get('totalConsideredFiles', '?')} considered"
            )
        out.append(
            {
                "case": "compact",
                "measure": f"compaction of Tributary's table ({self.b.wl.total_rows():,} rows in)",
                "tributary": f"{fmt_rate(c)} rows in per CPU-s, {w:,.2f} s" if c else self.why_not("compact", "tributary"),
                "peer": f"{delta}; Paimon: none (pypaimon-rust 0.4.0 and pypaimon 2.1.0 cannot compact)",
                "ratio": None,
            }
        )
        for state in SQL_STATES:
            out += self.sql_rows(state)
        for step, label in PYTHON_STEPS.items():
            label = f"Python: {label.format(ingest=s.ingest, upsert=s.upsert)}"
            throughput(label, step, "rows", "wall", " rows/s", trib="tributary-py")
            throughput(f"{label}: rows per CPU-second", step, "rows", "cpu", " rows/CPU-s", trib="tributary-py")
        return [r for r in out if r["case"].split("/")[0] in self.b.args.cases]

    # -- the sql case

    def sql_med(self, state: str, engine: str, query: str, key: str):
        """Median over the repetitions of one query's figure `key`."""
        figs = self.b.figures(f"sql/{state}", engine)
        return median([f["queries"][query][key] for f in figs if query in f.get("queries", {})])

    def sql_rate(self, state: str, engine: str, query: str):
        """(rate, unit): queries per second for the lookup, else table rows
        per second."""
        wall = self.sql_med(state, engine, query, "wall")
        if not wall:
            return None, ""
        if query == "lookup":
            return 1 / wall, " queries/s"
        return self.b.wl.expected_all.num_rows / wall, " rows/s"

    def sql_cell(self, state: str, engine: str, query: str) -> str:
        rate, unit = self.sql_rate(state, engine, query)
        if rate is None:
            return self.why_not(f"sql/{state}", engine)
        wall = self.sql_med(state, engine, query, "wall")
        cpu = self.sql_med(state, engine, query, "cpu")
        return f"{fmt_rate(rate, unit)} ({wall * 1e3:,.1f} ms, CPU {cpu * 1e3:,.0f} ms)"

    def sql_rows(self, state: str) -> list:
        out = []
        for q, label in SQL_QUERIES.items():
            t = self.sql_rate(state, "tributary", q)[0]
            best = None
            for e in SQL_PEERS:
                v = self.sql_rate(state, e, q)[0]
                if v is not None and (best is None or v > best[1]):
                    best = (e, v)
            peer = f"{SQL_LABEL[best[0]]}: {self.sql_cell(state, best[0], q)}" if best else "n/a"
            if best and best[0] == "paimon" and state == "compact":
                peer += " (not compacted: Paimon cannot compact here)"
            out.append(
                {
                    "case": "sql",
                    "measure": f"SQL {SQL_STATES[state]}: {label}",
                    "tributary": self.sql_cell(state, "tributary", q),
                    "peer": peer,
                    "ratio": t / best[1] if (t and best) else None,
                }
            )
        return out

    def sql_detail(self) -> list:
        """Every engine's medians per query and state."""
        lines = [
            "| table | query | engine | runs | median wall ms | median CPU ms | rows returned | rate |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for state, state_label in SQL_STATES.items():
            for q in SQL_QUERIES:
                for e in ["tributary", *SQL_PEERS]:
                    figs = self.b.figures(f"sql/{state}", e)
                    errs = self.b.errors(f"sql/{state}", e)
                    if not figs:
                        if errs:
                            lines.append(f"| {state_label} | {q} | {SQL_LABEL[e]} | 0 | n/a: {errs[0]} | | | |")
                        continue
                    wall = self.sql_med(state, e, q, "wall")
                    cpu = self.sql_med(state, e, q, "cpu")
                    rows = figs[0]["queries"][q]["rows"]
                    rate, unit = self.sql_rate(state, e, q)
                    note = " (not compacted)" if (e == "paimon" and state == "compact") else ""
                    lines.append(
                        f"| {state_label} | {q} | {SQL_LABEL[e]}{note} | {len(figs)} | {wall * 1e3:,.1f} | "
                        f"{cpu * 1e3:,.0f} | {rows:,} | {fmt_rate(rate, unit)} |"
                    )
        return lines

    def sql_medians(self) -> dict:
        """The SQL medians for results.json: state -> query -> engine -> figures."""
        out = {}
        for state in SQL_STATES:
            for q in SQL_QUERIES:
                for e in ["tributary", *SQL_PEERS]:
                    wall = self.sql_med(state, e, q, "wall")
                    if wall is None:
                        continue
                    rate, unit = self.sql_rate(state, e, q)
                    out.setdefault(state, {}).setdefault(q, {})[e] = {
                        "wall": wall,
                        "cpu": self.sql_med(state, e, q, "cpu"),
                        "rate": rate,
                        "unit": unit.strip(),
                    }
        return out

    def detail(self) -> list:
        """Every engine's medians per case, for the record."""
        lines = ["| case | engine | runs | median wall s | median CPU s | rows | failed attempts |", "|---|---|---|---|---|---|---|"]
        for case in ["ingest", "ingest-json", "upsert", "commits", "concurrent", "read", "compact", *PYTHON_STEPS]:
            for e in ["tributary", "tributary-cli", "tributary-py", "hudi", *PEERS]:
                figs = self.b.figures(case, e)
                errs = self.b.errors(case, e)
                if not figs and not errs:
                    continue
                if not figs:
                    lines.append(f"| {case} | {LABEL[e]} | 0 | n/a: {errs[0]} | | | |")
                    continue
                cpu = median([f.get("cpu") for f in figs])
                rows = figs[0].get("rows", figs[0].get("rows_in"))
                failed = median([f.get("failed") for f in figs])
                lines.append(
                    f"| {case} | {LABEL[e]} | {len(figs)} | {median([f['wall'] for f in figs]):.3f} | "
                    f"{'' if cpu is None else f'{cpu:.3f}'} | {'' if rows is None else f'{rows:,}'} | "
                    f"{'' if failed is None else f'{failed:.0f}'} |"
                )
        return lines


def print_report(bench: Bench, summary: Summary, rows: list):
    s = bench.wl.sizes
    print()
    print(
        f"Tributary beside its peers: scale {s.scale} ({bench.wl.total_rows():,} rows, {s.keys:,} keys, "
        f"{bench.args.buckets} buckets per region), median of {bench.args.reps} interleaved runs"
    )
    print("Ratio: Tributary's figure over the best peer's (above 1× Tributary is ahead; for the concurrent row,")
    print("commits per second). Ratios, not absolute figures, carry over between machines.")
    print()
    print("| measure | Tributary | best peer (which) | ratio |")
    print("|---|---|---|---|")
    for r in rows:
        ratio = f"{r['ratio']:.2f}×" if r["ratio"] else "—"
        print(f"| {r['measure']} | {r['tributary']} | {r['peer']} | {ratio} |")
    print()
    print("Every engine's medians:")
    print()
    for line in summary.detail():
        print(line)
    if "sql" in bench.args.cases:
        print()
        print("SQL, every engine's medians (each query timed alone; rate: table rows/s, the lookup queries/s):")
        print()
        for line in summary.sql_detail():
            print(line)
    if bench.notes:
        print()
        for n in bench.notes:
            print(f"note: {n}")


def machine() -> dict:
    info = {"cpus": os.cpu_count()}
    try:
        info["loadavg"] = Path("/proc/loadavg").read_text().split()[:3]
    except OSError:
        pass
    return info


def with_needs(parser, cases: list) -> list:
    """`cases` and every case they need, in CASES' order."""
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown cases {unknown}; the cases: {', '.join(CASES)}")
    wanted, todo = set(), list(cases)
    while todo:
        c = todo.pop()
        if c not in wanted:
            wanted.add(c)
            todo += NEEDS.get(c, [])
    return [c for c in CASES if c in wanted]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=1.0, help="multiply every row and key count (default 1)")
    p.add_argument("--reps", type=int, default=3, help="interleaved repetitions of each case (default 3)")
    p.add_argument("--buckets", type=int, default=16, help="buckets per partition, Tributary and Paimon (default 16)")
    p.add_argument("--dir", type=Path, help="work folder, kept afterwards (default: a temporary one, removed)")
    p.add_argument("--results", type=Path, default=HERE / "results.json", help="where the raw figures go")
    p.add_argument(
        "--cases",
        type=lambda v: v.split(","),
        default=CASES,
        help=f"comma-separated cases to run, with the cases they need (default all: {','.join(CASES)})",
    )
    args = p.parse_args()
    args.cases = with_needs(p, args.cases)

    bootstrap()
    exes = build()
    sys.path.insert(0, str(HERE))
    import workload

    work = args.dir or Path(tempfile.mkdtemp(prefix="tributary-peers-"))
    work.mkdir(parents=True, exist_ok=True)
    if (work / "tables").exists():
        sys.exit(f"{work}/tables exists: give an empty --dir")
    try:
        wheel = install_python_package(work / "wheel") if "python" in args.cases else None
        sizes = workload.Sizes(args.scale)
        print(f"generating the workload ({json.dumps(sizes.as_dict())}) into {work} ...", flush=True)
        wl = workload.Workload(sizes)
        files = wl.write_files(work / "input")
        bench = Bench(args, exes, files, work, wl)
        at_start = machine()
        print(f"running each case {args.reps} times, interleaved; load average {at_start.get('loadavg')}", flush=True)
        if at_start.get("loadavg") and float(at_start["loadavg"][0]) > 0.5 * (at_start["cpus"] or 1):
            print(
                f"warning: other work is running ({at_start['loadavg'][0]} on {at_start['cpus']} CPUs); "
                "figures will be skewed, ratios less so",
                flush=True,
            )
        ran = args.cases
        print(f"cases: {', '.join(ran)}", flush=True)
        for case, step in [
            ("ingest", bench.case_ingest),
            ("ingest-json", bench.case_ingest_json),
            ("upsert", bench.case_upsert),
            ("concurrent", bench.copy_for_concurrent),
            ("commits", bench.case_commits),
            ("concurrent", bench.case_concurrent),
            ("read", bench.case_read),
            ("sql", lambda: bench.case_sql("commits")),
            ("compact", bench.case_compact),
            ("sql", lambda: bench.case_sql("compact")),
            ("python", bench.case_python),
        ]:
            if case in ran:
                step()
        problems = bench.check() + bench.check_sql()

        summary = Summary(bench)
        rows = summary.rows()
        for e in PEERS:
            lost = [f["lost"] for f in bench.figures("concurrent", e) if f.get("lost")]
            if lost:
                bench.notes.append(
                    f"{LABEL[e]}: the concurrent writers lost {sum(lost)} commits over {len(lost)} runs: "
                    "each was reported committed, but the table's snapshots count fewer"
                )
        bench.notes.append(
            "Paimon runs on pypaimon-rust's Rust writer and reader (no pure-Python fallback was needed); "
            "that writer does no compaction, so each commit adds sorted runs which reads merge."
        )
        bench.notes.append(
            "Delta has no key: each write keeps the newest row per id of its input first (timed), then appends "
            "(first ingest) or MERGEs on id, updating only where the new ts is larger."
        )
        if "sql" in args.cases:
            bench.notes.append(
                "SQL: hudi-rs's provider runs in DataFusion's Python package 54.1.0 (its FFI matches hudi 0.5.0's "
                "DataFusion 54.1); Paimon's SQLContext and delta-rs's QueryBuilder carry their own DataFusion "
                "(54.0 and 55.1), Tributary's is 55.2. Paimon's table is not compacted for `sql/compact`: neither "
                "pypaimon-rust 0.4.0 nor pypaimon 2.1.0 can compact a primary-key table."
            )
        if wheel is not None:
            bench.notes.append(
                f"Python: Tributary's package is {wheel} (release, built from python/ now), in engines.py's "
                "process; Delta and Paimon convert a DataFrame with pa.Table.from_pandas inside the clock."
            )
        print_report(bench, summary, rows)
        args.results.write_text(
            json.dumps(
                {
                    "workload": sizes.as_dict(),
                    "buckets": args.buckets,
                    "reps": args.reps,
                    "machine": {"at_start": at_start, "at_end": machine()},
                    "cases": args.cases,
                    "table": rows,
                    "sql": {"queries": SQL_QUERIES, "medians": summary.sql_medians()},
                    "runs": bench.runs,
                    "checks": bench.check_results,
                    "notes": bench.notes,
                },
                indent=1,
            )
        )
        print(f"\nraw figures: {args.results}")
        our_engines = ("tributary", "tributary-cli", "tributary-py", "hudi")
        failed_runs = [r for r in bench.runs if "error" in r and r["engine"] in our_engines]
        if problems:
            print("\n" + "!" * 78)
            print(f"CONTENT CHECK FAILED for {len(problems)} table reads or SQL answers:")
            for _, prob in problems:
                print(f"  {prob}")
            owners = sorted({LABEL[o] for o, _ in problems})
            ours = [o for o, _ in problems if o.startswith("tributary")]
            print(f"(tables of: {', '.join(owners)}; Tributary's tables {'FAILED' if ours else 'all passed'})")
            print("!" * 78)
            if ours:
                sys.exit(1)
        if failed_runs:
            print(f"\n{len(failed_runs)} runs of Tributary or the official reader failed (see above)")
            sys.exit(1)
        if not problems:
            print("\nall tables checked: one row per key, each its newest event")
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
