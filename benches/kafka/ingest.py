"""`tributary ingest` from a real Kafka broker: throughput and latency.

The workload is the peers benchmark's rows (benches/peers/workload.py): the
first N (default 1,000,000) of its ingest and upsert steps, 10 columns over
200,000 keys, as JSON values keyed by `id` on a topic of 6 partitions. The
table is a version-8 Merge-on-Read table partitioned by `region`, 16
buckets, ordered by `ts`, as the peers' tables are.

1. Throughput, with 1 and then 3 `tributary ingest` processes in one group
   (release build): from their start until the table records every
   partition's end offset; records per second, and per CPU-second of the
   processes (user + system, from /proc while they run). The table then
   holds one row per key, its newest, as the workload's model says.
2. Latency from produce to visible: with one process running, records are
   produced at a steady rate (default 20,000/s for 30 s). Each record's
   produce time comes from its delivery report. It counts as visible once
   the group's Kafka offsets pass it, which a poll every 50 ms sees: the
   job commits those right after each table commit, so this errs late, by
   up to the poll interval and the group commit's round trip. At the end
   the table's own offsets must equal the topic's. p50 and p99 over all
   records.
3. Spark (with --spark, the default): Spark Structured Streaming reads the
   throughput topic with Spark's Kafka source from the earliest offsets,
   parses the values with `from_json` into the workload's columns and
   writes them with Apache Hudi's streaming sink to a table of the same
   layout (version 8, MOR, partitioned by `region`, the simple bucket index
   at 16 buckets, key `id`, ordered by `ts`), configured as
   benches/spark/ingest.py configures Spark's writer (NBCC, the in-process
   lock, metadata table off; async compaction off too, as `tributary
   ingest` does not compact), with `trigger(availableNow=True)`: what the
   topic holds when the query starts, in micro-batches of Spark's own size
   (without maxOffsetsPerTrigger, one), then it stops. local[2], the
   versions in tests/spark/env.py. Wall time from the query's start until
   it ends, and CPU seconds of the JVM (user + system, from /proc) over the
   same span, so neither counts starting the JVM. The query must end at the
   topic's end offsets, and the table, read back by Spark, must hold one
   row per key, as the model says. The last line divides Tributary's
   1-process figures by Spark's.

The broker is started with .ci/kafka.sh unless TRIBUTARY_TEST_KAFKA names
one. Needs `pip install confluent-kafka pyarrow`, and for --spark
`python3 tests/spark/env.py install` (PySpark, Hudi's Spark bundle, and
Spark's Kafka source with the jars it needs, into ~/.m2).

Usage: python3 benches/kafka/ingest.py [--rows N] [--rate R] [--seconds S]
       [--commit-records C] [--commit-interval I] [--no-spark]
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benches" / "peers"))
sys.path.insert(0, str(ROOT / "tests" / "spark"))

import env  # noqa: E402
import workload  # noqa: E402
from support import nbcc_options  # noqa: E402

BIN = ROOT / "target" / "release" / "tributary"
PARTITIONS = 6
TICKS = os.sysconf("SC_CLK_TCK")


def run(*args, **kw):
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True, **kw)


def cpu_seconds(pid):
    """User + system CPU seconds of a live process, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def make_topic(brokers, name):
    admin = AdminClient({"bootstrap.servers": brokers})
    for f in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        f.result()


def rows(n):
    """The first n rows of the peers workload, as dicts, and the model."""
    w = workload.Workload(workload.Sizes(1.0))
    out, model = [], {}
    for table in (w.ingest, w.upsert):
        for r in table.to_pylist():
            if len(out) == n:
                return out, model
            out.append(r)
            if r["id"] not in model or r["ts"] > model[r["id"]]["ts"]:
                model[r["id"]] = r
    return out, model


def producer(brokers):
    return Producer({"bootstrap.servers": brokers, "linger.ms": 5, "enable.idempotence": True})


def produce(brokers, topic, values, times=None, p=None):
    """Produces (key, JSON) pairs, with producer `p` or a new one; with
    `times`, records each delivery's (partition, offset) -> produce time.
    A new producer takes about 0.5 s to deliver its first records."""
    p = p or producer(brokers)

    def delivered(err, msg, sent=None):
        if err is not None:
            raise RuntimeError(err)
        if times is not None:
            times[(msg.partition(), msg.offset())] = sent

    for key, value in values:
        sent = time.monotonic()
        while True:
            try:
                p.produce(topic, value=value, key=key, on_delivery=lambda e, m, s=sent: delivered(e, m, s))
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    p.flush(60)


def end_offsets(brokers, topic):
    c = Consumer({"bootstrap.servers": brokers, "group.id": "bench-watermarks"})
    ends = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)]
    c.close()
    return ends


class GroupOffsets:
    """Kafka's committed offsets of a group: cheap to poll."""

    def __init__(self, brokers, group, topic):
        self.consumer = Consumer({"bootstrap.servers": brokers, "group.id": group, "enable.auto.commit": False})
        self.partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]

    def get(self):
        return [max(tp.offset, 0) for tp in self.consumer.committed(self.partitions, timeout=10)]

    def close(self):
        self.consumer.close()


def table_offsets(table, group, topic):
    """The next offset the table records for each partition."""
    out = []
    for p in range(PARTITIONS):
        text = run(BIN, "checkpoint", table, "--writer-id", f"kafka.{group}.{topic}.{p}").stdout.strip()
        out.append(int(text) if text else 0)
    return out


def init_table(folder, schema_file):
    table = folder / "table"
    run(BIN, "init", table, "--schema", schema_file, "--record-key", "id", "--ordering-field", "ts",
        "--partition-field", "region", "--buckets", 16)
    return table


def start(table, brokers, topic, group, args):
    return subprocess.Popen(
        [str(BIN), "ingest", str(table), "--brokers", brokers, "--topic", topic, "--group", group,
         "--commit-records", str(args.commit_records), "--commit-interval", args.commit_interval],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop(procs):
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(60)


def throughput(brokers, folder, schema_file, topic, ends, model, processes, args):
    table = init_table(folder / f"p{processes}", schema_file)
    group = f"bench-{processes}"
    began = time.monotonic()
    procs = [start(table, brokers, topic, group, args) for _ in range(processes)]
    cpu = {}
    offsets = GroupOffsets(brokers, group, topic)
    while offsets.get() != ends:
        for p in procs:
            cpu[p.pid] = max(cpu.get(p.pid, 0.0), cpu_seconds(p.pid))
        time.sleep(0.1)
    wall = time.monotonic() - began
    offsets.close()
    for p in procs:
        cpu[p.pid] = max(cpu.get(p.pid, 0.0), cpu_seconds(p.pid))
    stop(procs)
    assert table_offsets(table, group, topic) == ends, "the table's offsets are not the topic's end offsets"
    got = [json.loads(line) for line in run(BIN, "read", table, "--format", "jsonl").stdout.splitlines()]
    got = {r["id"]: r for r in got}
    assert got == model, f"{processes} processes: the table differs from the model ({len(got)} rows, {len(model)} keys)"
    records = sum(ends)
    return {"processes": processes, "records": records, "wall_s": round(wall, 2),
            "records_per_s": round(records / wall), "cpu_s": round(sum(cpu.values()), 2),
            "records_per_cpu_s": round(records / sum(cpu.values()))}


def spark_throughput(brokers, folder, topic, ends, model):
    """Spark Structured Streaming from the topic into a Hudi table of the
    same layout: records per second, and per CPU-second of the JVM."""
    from pyspark.sql.functions import col, from_json

    # The Avro types of the workload's columns are Spark DDL types too.
    schema = ", ".join(f"{f['name']} {f['type']}" for f in workload.AVRO_SCHEMA["fields"])
    table = folder / "spark" / "table"
    opts = nbcc_options("spark_table", buckets=16, metadata=False)
    opts["hoodie.datasource.compaction.async.enable"] = "false"
    # Hudi's streaming sink refuses a multi-writer (NBCC) table without the
    # name its checkpoints are kept under in the commits.
    opts["hoodie.datasource.write.streaming.checkpoint.identifier"] = "spark-bench"
    spark = env.session("kafka-ingest-bench", "6g", folder / "spark" / "warehouse", kafka=True)
    try:
        pid = spark.sparkContext._gateway.proc.pid
        began, cpu0 = time.monotonic(), cpu_seconds(pid)
        query = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", brokers)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
            .select(from_json(col("value").cast("string"), schema).alias("r"))
            .select("r.*")
            .writeStream.format("hudi")
            .options(**opts)
            .option("checkpointLocation", str(folder / "spark" / "checkpoint"))
            .outputMode("append")
            .trigger(availableNow=True)
            .start(str(table))
        )
        query.awaitTermination()
        wall, cpu = time.monotonic() - began, cpu_seconds(pid) - cpu0
        batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
        last = batches[-1]["sources"][0]["endOffset"][topic]
        assert [last.get(str(p), 0) for p in range(PARTITIONS)] == ends, f"Spark ended at {last}, the topic at {ends}"
        read = spark.read.format("hudi").option("hoodie.metadata.enable", "false").load(str(table))
        rows = [r.asDict() for r in read.select(*workload.COLUMNS).collect()]
        got = {r["id"]: r for r in rows}
        assert len(rows) == len(got) == len(model), f"Spark's table: {len(rows)} rows, {len(got)} keys; the model {len(model)}"
        wrong = [k for k in model if got.get(k) != model[k]]
        assert not wrong, f"Spark's table differs from the model in {len(wrong)} keys, e.g. {got.get(wrong[0])} for {model[wrong[0]]}"
    finally:
        spark.stop()
    commits = sum(1 for f in (table / ".hoodie" / "timeline").iterdir() if f.name.endswith(".deltacommit"))
    records = sum(ends)
    return {"engine": "spark-structured-streaming", "records": records, "micro_batches": len(batches),
            "commits": commits, "wall_s": round(wall, 2), "records_per_s": round(records / wall),
            "cpu_s": round(cpu, 2), "records_per_cpu_s": round(records / cpu)}


def latency(brokers, folder, schema_file, all_rows, args):
    topic = f"latency-{random.randrange(1 << 30)}"
    make_topic(brokers, topic)
    table = init_table(folder / "latency", schema_file)
    group = "bench-latency"
    proc = start(table, brokers, topic, group, args)
    times, visible = {}, {}
    n = args.rate * args.seconds
    values = [(r["id"], json.dumps(r)) for r in all_rows[:n]]
    done = threading.Event()

    offsets = GroupOffsets(brokers, group, topic)

    def watch():
        seen = [0] * PARTITIONS
        while not done.is_set():
            now = time.monotonic()
            for p, o in enumerate(offsets.get()):
                for off in range(seen[p], o):
                    visible[(p, off)] = now
                seen[p] = max(seen[p], o)
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    step = args.rate // 20
    p = producer(brokers)
    began = time.monotonic()
    for i in range(0, n, step):
        produce(brokers, topic, values[i:i + step], times, p)
        pause = began + (i + step) / args.rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    ends = end_offsets(brokers, topic)
    deadline = time.monotonic() + 120
    while sum(1 for k in times if k in visible) < sum(ends) and time.monotonic() < deadline:
        time.sleep(0.1)
    done.set()
    watcher.join()
    offsets.close()
    stop([proc])
    assert table_offsets(table, group, topic) == ends, "the table's offsets are not the topic's end offsets"
    lat = sorted((visible[k] - t) * 1000 for k, t in times.items() if k in visible)
    assert len(lat) == sum(ends), f"{len(lat)} of {sum(ends)} records became visible"
    return {"records": len(lat), "rate_per_s": args.rate, "p50_ms": round(lat[len(lat) // 2]),
            "p99_ms": round(lat[int(len(lat) * 0.99)]), "max_ms": round(lat[-1])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rate", type=int, default=20_000)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--commit-records", type=int, default=100_000)
    ap.add_argument("--commit-interval", default="1s")
    ap.add_argument("--spark", action=argparse.BooleanOptionalAction, default=True,
                    help="compare with Spark Structured Streaming writing Hudi (default: on)")
    args = ap.parse_args()
    left = env.missing(kafka=True) if args.spark else []
    if left:
        sys.exit("; ".join(left) + " (python3 tests/spark/env.py install, or --no-spark)")
    run("cargo", "build", "--release", "--bin", "tributary", cwd=ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        brokers = os.environ.get("TRIBUTARY_TEST_KAFKA")
        if not brokers:
            run(ROOT / ".ci" / "kafka.sh", "start", folder / "kafka")
            brokers = (folder / "kafka" / "env").read_text().split("=", 1)[1].strip()
        try:
            schema_file = folder / "peers.avsc"
            schema_file.write_text(json.dumps(workload.AVRO_SCHEMA))
            print(f"making {args.rows} rows ...", flush=True)
            all_rows, model = rows(args.rows)
            topic = f"bench-{random.randrange(1 << 30)}"
            make_topic(brokers, topic)
            began = time.monotonic()
            produce(brokers, topic, [(r["id"], json.dumps(r)) for r in all_rows])
            print(f"produced {args.rows} in {time.monotonic() - began:.1f} s", flush=True)
            ends = end_offsets(brokers, topic)
            results = [throughput(brokers, folder, schema_file, topic, ends, model, n, args) for n in (1, 3)]
            for r in results:
                print(json.dumps(r), flush=True)
            if args.spark:
                began = time.monotonic()
                spark = spark_throughput(brokers, folder, topic, ends, model)
                print(json.dumps(spark), flush=True)
                print(f"Spark's part (session, query, check) took {time.monotonic() - began:.1f} s", flush=True)
            print(json.dumps(latency(brokers, folder, schema_file, all_rows, args)), flush=True)
            if args.spark:
                one = results[0]
                ratio = {"tributary_1_process_over_spark": {
                    "records_per_cpu_s": round(one["records_per_cpu_s"] / spark["records_per_cpu_s"], 2),
                    "records_per_s": round(one["records_per_s"] / spark["records_per_s"], 2)}}
                print(json.dumps(ratio), flush=True)
        finally:
            if not os.environ.get("TRIBUTARY_TEST_KAFKA"):
                run(ROOT / ".ci" / "kafka.sh", "stop", folder / "kafka")


if __name__ == "__main__":
    main()
