"""Several ordering fields: a version-9 table Tributary makes ordered by
`ts,n` (`hoodie.table.ordering.fields=ts,n`), written by concurrent
processes with event times that often tie, so the second field decides.
Spark (Apache Hudi 1.2.0, which compares the fields element by element)
reads it equal to the model and to `tributary read`, before and after a
compaction: both engines merge one history the same way."""

import random

from support import (
    Event,
    data_rows,
    init_table,
    meta_rows,
    our_rows,
    region_of,
    spark_rows,
    tributary,
    write_concurrently,
)

BASE_TS = 1_760_000_000_000


def events(rng, keys, count):
    """Events whose `ts` takes one of 3 values, so that keys tie on it and
    `n` decides; about a tenth are deletes, which carry both values."""
    out = []
    for _ in range(count):
        k = f"k{rng.randrange(keys):04d}"
        deleted = rng.random() < 0.1
        ts = BASE_TS + rng.randrange(3)
        out.append(Event(k, ts, region_of(k), None if deleted else f"v{rng.randrange(10**6)}", rng.randrange(10**6), deleted))
    return out


class Model:
    """Per key the event with the largest `(ts, n)`, the later on a tie; a
    winning delete removes the key."""

    def __init__(self):
        self.winners = {}

    def commit(self, batch):
        for e in batch:
            w = self.winners.get(e.id)
            if w is None or (e.ts, e.n) >= (w.ts, w.n):
                self.winners[e.id] = e

    def rows(self):
        return sorted(
            ({"id": e.id, "region": e.region, "ts": e.ts, "v": e.v, "n": e.n} for e in self.winners.values() if not e.deleted),
            key=lambda r: r["id"],
        )


def test_spark_reads_a_table_ordered_by_two_fields(spark, tmp_path):
    table = tmp_path / "two"
    init_table(table, partitioned=True, buckets=4, table_version=9, ordering="ts,n")
    props = (table / ".hoodie" / "hoodie.properties").read_text().splitlines()
    assert "hoodie.table.ordering.fields=ts,n" in props, props
    rng = random.Random(36)
    model = Model()
    for phase in range(2):
        # Distinct `(ts, n)` per key across writers, so concurrent commits
        # never tie and the model needs no commit order.
        batches = [events(rng, 60, 150) for _ in range(3)]
        seen = set()
        batches = [[e for e in b if (e.id, e.ts, e.n) not in seen and not seen.add((e.id, e.ts, e.n))] for b in batches]
        write_concurrently(table, tmp_path, batches, f"p{phase}")
        for b in batches:
            model.commit(b)
        ours = our_rows(table)
        assert data_rows(ours) == model.rows(), f"phase {phase}: tributary read vs the model"
        for md in ("false", "true"):
            theirs = spark_rows(spark, table, **{"hoodie.metadata.enable": md})
            assert meta_rows(theirs) == meta_rows(ours), f"phase {phase}: Spark (metadata {md}) vs tributary read"
        tributary("compact", table)
        ours = our_rows(table)
        assert data_rows(ours) == model.rows(), f"phase {phase}: tributary read after compaction"
        theirs = spark_rows(spark, table)
        assert meta_rows(theirs) == meta_rows(ours), f"phase {phase}: Spark after compaction"
