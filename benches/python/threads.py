"""Threads of one Python process writing one table at once: does releasing
the GIL let them write in parallel?

    python3 benches/python/threads.py [--rows 2000000] [--batches 16] [--threads 1,2]

Needs the `tributary` package (a release build: `PROFILE=release bash
python/build.sh`, or `pip install ./python`) and pyarrow in the running
Python. For each thread count T, a new table (16 buckets, partitioned by
`region`) takes `--batches` commits of `--rows / --batches` rows each
(the batches made before the clock starts), shared out among T threads
that write at once, each commit under the thread's own writer id. Printed:
wall seconds, rows per second and the speed-up over one thread, and the
process's CPU seconds (user + system) per row written, which stays flat
when the threads really run in parallel.
"""

from __future__ import annotations

import argparse
import random
import resource
import tempfile
import threading
import time

import pyarrow as pa

import tributary

SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("region", pa.string(), nullable=False),
        ("l1", pa.int64()),
        ("d1", pa.float64()),
        ("note", pa.string()),
    ]
)


def batches(rows: int, count: int) -> list[pa.Table]:
    rng = random.Random(5)
    per = rows // count
    out = []
    for b in range(count):
        keys = [rng.randrange(rows // 4) for _ in range(per)]
        out.append(
            pa.table(
                {
                    "id": [f"k{k}" for k in keys],
                    "ts": [b * per + i for i in range(per)],
                    "region": [("eu", "us", "ap")[k % 3] for k in keys],
                    "l1": [rng.randrange(1 << 40) for _ in range(per)],
                    "d1": [rng.random() for _ in range(per)],
                    "note": [f"note {k % 97}" for k in keys],
                },
                schema=SCHEMA,
            )
        )
    return out


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(threads: int, data: list[pa.Table]) -> tuple[float, float]:
    """Wall and CPU seconds of writing `data` from `threads` threads."""
    path = tempfile.mkdtemp(prefix="tributary-threads-") + "/t"
    table = tributary.create(path, SCHEMA, record_key="id", ordering_field="ts", partition_by="region", buckets=16)
    shares = [data[t::threads] for t in range(threads)]
    errors: list[BaseException] = []

    def write(t: int) -> None:
        try:
            for n, b in enumerate(shares[t]):
                table.write(b, writer_id=f"thread-{t}", checkpoint=str(n))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
    cpu0, start = cpu(), time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall, spent = time.perf_counter() - start, cpu() - cpu0
    if errors:
        raise errors[0]
    return wall, spent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--batches", type=int, default=16)
    p.add_argument("--threads", default="1,2")
    args = p.parse_args()
    data = batches(args.rows, args.batches)
    rows = sum(b.num_rows for b in data)
    print(f"{rows:,} rows in {args.batches} commits; tributary {tributary.__version__}")
    print(f"{'threads':>7} {'wall s':>8} {'rows/s':>12} {'speed-up':>9} {'CPU µs/row':>11}")
    base = None
    for t in (int(x) for x in args.threads.split(",")):
        wall, spent = run(t, data)
        base = base or wall
        print(f"{t:>7} {wall:>8.2f} {rows / wall:>12,.0f} {base / wall:>8.2f}× {spent / rows * 1e6:>11.2f}")


if __name__ == "__main__":
    main()
