"""Spark's CDC query (`hoodie.datasource.query.incremental.format=cdc`)
over a table that keeps a change log (`init --change-log`): writer
processes commit at once with out-of-order events and late deletes, a
change-log writer runs beside them, compactions and a clean run between
phases. Spark returns exactly Tributary's change feed, window by window:
each change under the change-log commit that recorded it (`ts_ms`), with
the same operation and images; data commits and compactions add nothing.
`docs/design.md` ("Change log") and `docs/interop.md` ("Change data
capture") describe why."""

import json
import random
import threading
from collections import Counter

import pytest

from support import (
    Model,
    data_rows,
    init_table,
    our_rows,
    random_events,
    spark_rows,
    tributary,
    write_concurrently,
)

METADATA_OFF = {"hoodie.metadata.enable": "false"}


def image(value):
    """An image as comparable text: its non-null fields, sorted. Spark gives
    a JSON string (`"null"` or SQL NULL for none), `tributary changes` an
    object or nothing."""
    if isinstance(value, str):
        value = json.loads(value)
    if value is None:
        return None
    return json.dumps({k: v for k, v in value.items() if v is not None}, sort_keys=True)


def spark_changes(spark, table, begin, end=None):
    """Spark's CDC rows of `(begin, end]` (requested times), as a multiset
    of (ts_ms, op, before, after)."""
    options = {
        "hoodie.datasource.query.type": "incremental",
        "hoodie.datasource.query.incremental.format": "cdc",
        "hoodie.datasource.read.begin.instanttime": begin,
        **METADATA_OFF,
    }
    if end is not None:
        options["hoodie.datasource.read.end.instanttime"] = end
    rows = spark_rows(spark, table, **options)
    return Counter((r["ts_ms"], r["op"], image(r["before"]), image(r["after"])) for r in rows)


def our_changes(table, logged, begin, end):
    """`tributary changes` of the completion window `(begin, end]`, each
    change under the change-log commit (of `logged`, instants in order)
    whose window holds its completion time."""
    out = tributary("changes", table, "--begin", begin, "--end", end)
    got = Counter()
    for line in out.splitlines():
        c = json.loads(line)
        recorded_by = next(l for l in logged if c["completion_time"] < l)
        got[(recorded_by, c["op"], image(c.get("before")), image(c.get("after")))] += 1
    return got


def log_changes(table):
    """One change-log round; the instant it recorded at, or None."""
    out = tributary("change-log", table)
    return None if out.startswith("nothing") else out.split()[2]


def test_spark_cdc_reads_the_change_log(spark, tmp_path):
    table = init_table(tmp_path / "t", partitioned=True, bucket_hash="murmur3", change_log=True)
    rng = random.Random(41)
    model = Model()
    base_ts = 1_760_000_000_000
    logged = []

    def phase(tag):
        """Three writer processes at once, with a change-log writer running
        rounds beside them until they are done."""
        batches = [random_events(rng, 60, 150, base_ts, delete_share=0.2) for _ in range(3)]
        done = threading.Event()

        def rounds():
            while not done.is_set():
                if (at := log_changes(table)) is not None:
                    logged.append(at)

        logger = threading.Thread(target=rounds)
        logger.start()
        try:
            write_concurrently(table, tmp_path, batches, tag)
        finally:
            done.set()
            logger.join()
        for b in batches:
            model.commit(b)

    phase("a")
    tributary("compact", table)
    phase("b")
    tributary("compact", table)
    phase("c")
    if (at := log_changes(table)) is not None:
        logged.append(at)
    assert log_changes(table) is None, "nothing left to record"
    assert len(logged) >= 3, logged
    assert data_rows(our_rows(table)) == model.rows()

    # Every change-log commit's changes, and nothing else: data commits and
    # compactions yield no row.
    theirs = spark_changes(spark, table, "000")
    ours = our_changes(table, logged, "00000000000000000", logged[-1])
    assert sum(ours.values()) > 100 and {c[1] for c in ours} == {"i", "u", "d"}, ours
    assert theirs == ours, f"Spark has {theirs - ours}, misses {ours - theirs}"

    # A window of change-log commits, as a consumer that follows them reads.
    a, b = logged[len(logged) // 3], logged[2 * len(logged) // 3]
    assert spark_changes(spark, table, a, b) == our_changes(table, logged, a, b), f"({a}, {b}]"

    # Cleaning removes the oldest change data and keeps what a window from
    # the earliest retained commit reads.
    cleaned = tributary("clean", table, "--retain-commits", "2")
    assert "files deleted" in cleaned, cleaned
    assert not any(logged[0] in p.name for p in table.rglob("*.cdc")), "the first change-log files were cleaned"
    last = Counter({c: n for c, n in ours.items() if c[0] == logged[-1]})
    assert spark_changes(spark, table, logged[-2]) == last, f"after cleaning, from {logged[-2]}"
    # A window reaching back to cleaned change data fails, as Hudi's own CDC
    # query fails on a cleaned file, rather than answering in part.
    with pytest.raises(Exception, match="(?i)not exist|FileNotFound"):
        spark_changes(spark, table, "000")
    # The data reads Spark always had are unchanged.
    assert data_rows(spark_rows(spark, table, **METADATA_OFF)) == model.rows()
