"""Spark's incremental reads (Apache Hudi's Java reader) against Tributary's
on small one-file-group histories that tell the possible semantics apart
(docs/design.md, "Merge semantics"): window versions that lose to older
commits, several window versions of a key, window deletes that win or lose,
compactions in and out of the window, and a cleaned table (Hudi's full-scan
fallback). Every window between two completion times, and windows bounded
by requested times, are read by both engines; `tests/it/incremental.rs`
pins the rows."""

import json

import pytest

from support import Event, init_table, spark_rows, timeline, tributary, write_jsonl


def up(key, ts):
    return Event(key, ts, "eu", f"{key}@{ts}", 0)


def delete(key, ts):
    return Event(key, ts, "eu", None, 0, deleted=True)


LOGS_ONLY = [
    [up("k0", 100), up("k1", 100), up("k2", 100), up("k3", 100), up("k4", 100)],
    [up("k1", 50), up("k2", 200), delete("k3", 200), delete("k4", 50), up("k5", 10), up("k6", 100), delete("k9", 100)],
    [up("k2", 150), up("k5", 20), delete("k6", 150), up("k7", 100), up("k8", 100), up("k9", 50)],
    [delete("k7", 50), delete("k8", 150), up("k10", 5)],
]

COMPACTED = [
    [up("a", 100), up("b", 100), up("c", 100), up("d", 100), up("e", 100), up("f", 100), up("k", 100)],
    [up("a", 150), up("g", 100), delete("f", 200), up("k", 50)],
    "compact",
    [up("a", 50), up("b", 200), delete("c", 50), up("h", 100), delete("e", 200), up("f", 150)],
    [up("b", 120), delete("h", 50)],
]

CLEANED = [
    [up("a", 100)],
    [up("b", 100), up("z", 100)],
    "compact",
    [up("z", 150)],
    "compact",
    [up("b", 200), up("y", 100)],
    "clean",
]


def build(tmp, steps):
    """A one-file-group table written by `steps`: commits, `compact`, `clean`."""
    table = init_table(tmp / "t", partitioned=False, buckets=1)
    for n, step in enumerate(steps):
        if step == "compact":
            tributary("compact", table)
        elif step == "clean":
            tributary("clean", table, "--retain-commits", "1")
        else:
            tributary("write", table, "--input", write_jsonl(tmp / f"{n}.jsonl", step), "--writer-id", "w")
    return table


def windows(table):
    """Every window between two completion times (or before everything),
    and each requested time as a bound against its neighbouring ones."""
    done = [i for i in timeline(table) if i["action"] in ("deltacommit", "compaction") and i["state"] == "COMPLETED"]
    completed = sorted({"20000101000000000"} | {i["completed"] for i in done})
    out = {(b, e) for n, b in enumerate(completed) for e in completed[n + 1 :]}
    for r in (i["requested"] for i in done):
        before, after = [c for c in completed if c < r], [c for c in completed if c > r]
        out |= {(r, after[0]), (before[-1], r)} if before and after else set()
    return sorted(out)


def rows(rs):
    return sorted((r["_hoodie_commit_time"], r["id"], r["ts"], r["v"]) for r in rs)


def ours(table, begin, end):
    out = tributary("read", table, "--format", "jsonl", "--meta", "--query", "incremental", "--begin", begin, "--end", end)
    return rows(json.loads(line) for line in out.splitlines())


def theirs(spark, table, begin, end, metadata):
    opts = {
        "hoodie.datasource.query.type": "incremental",
        "hoodie.datasource.read.begin.instanttime": begin,
        "hoodie.datasource.read.end.instanttime": end,
        "hoodie.metadata.enable": "true" if metadata else "false",
    }
    return rows(spark_rows(spark, table, **opts))


@pytest.mark.parametrize("steps", [LOGS_ONLY, COMPACTED, CLEANED], ids=["logs-only", "compacted", "cleaned"])
def test_incremental_reads_agree_on_every_window(spark, tmp_path, steps):
    table = build(tmp_path, steps)
    shown = 0
    for n, (begin, end) in enumerate(windows(table)):
        want = ours(table, begin, end)
        shown += bool(want)
        # The metadata table's listing on a few windows, the file system's on all.
        for metadata in (False, True) if n % 7 == 0 else (False,):
            got = theirs(spark, table, begin, end, metadata)
            assert got == want, f"({begin}, {end}] metadata {metadata}: Spark {got}, Tributary {want}"
    assert shown > n // 3, "most windows hold rows, or the comparison proves little"
