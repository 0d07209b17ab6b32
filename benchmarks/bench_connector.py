"""Spark connector throughput next to what Spark's Python Data Source API takes at best, and next
to Spark's own Kafka connector (spark-sql-kafka-0-10) on VDL and on Apache Kafka.

Run: `.venv/bin/python -m benchmarks.bench_connector [--quick] [--rounds N] [--groups write,...] [--no-kafka]
[--profile] [--memory-limit SIZE]` (--quick: 1M records, not 10M; --groups: some of read, write,
realtime, exactly-once; --no-kafka: leave Apache Kafka and format("kafka") out; --profile: one
more run of the vdl writes with py-spy on the broker and Spark's Python workers, flame graphs
beside the JSON; --memory-limit: the run in a memory cgroup of SIZE, root only, the page cache
reclaimed and reused as on a broker that has run a while: benchmarks/memory_limit.py).

Measured in one run on this machine, one single-node VDL broker (fsync on) and one Apache Kafka
node (vdl_dev.kafka_peer, its defaults), the same N 100-byte records loaded into both by the
same client; each group side by side in alternating rounds (medians, median of per-round ratios),
with the broker CPU per record of each run:
- read: spark.readStream.format("vdl") on VDL, format("kafka") on VDL and format("kafka") on
  Kafka (Trigger.AvailableNow, noop sink, the same options, minPartitions=2), next to the same
  query over a synthetic Python data source whose read() yields prebuilt Arrow batches of the
  same schema -- goals: >= 0.6x the synthetic source, >= 1.0x format("kafka") on the same VDL
  stream, >= 0.9x format("kafka") reading the same data from Kafka;
- write: df.write.format("vdl") of N rows (acks=-1), format("kafka") to VDL and to Kafka (the
  Java producer's defaults: acks=all, idempotent; to Kafka both with its defaults, acknowledged
  from the page cache, and with topic flush.messages=1, fsync after every batch as VDL), next to
  a Python data source whose Arrow writer discards every batch -- goal >= 0.7x the discarding
  writer; the same write exactly-once (exactlyOnce=true, inside foreachBatch of a
  one-micro-batch streaming query) next to the discarding writer inside the same foreachBatch --
  goal >= 0.7x; and the same write exactlyOnce=transactional (one Kafka transaction per task,
  committed by the driver) next to exactlyOnce=true; and, to tell the connector's CPU from
  Spark's, the writer's producer alone in this process, fed the same values in Arrow batches of
  Spark's size (no Spark);
- Spark's real-time mode (trigger(realTime=...)), format("kafka") -> format("kafka") on VDL and
  on Kafka at 5,000 events/s: end-to-end latency from the producer's send to the arrival at a
  consumer of the copy (benchmarks/realtime.py) -- goal p99 <= 200 ms on VDL;
- exactly-once cost: a streaming copy stream -> stream with exactlyOnce=true vs false.
Spark queries get both cores (local[2], two tasks); the brokers share them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)

from benchmarks import memory_limit
from benchmarks.peers import Target, kafka_needs, kafka_targets, per_record_us, vdl_target
from benchmarks.profile import Profiler, spark_python_workers
from benchmarks.realtime import copy_latencies, start_copy
from benchmarks.report import Report, cpu_seconds, percentile
from vdl_dev.jvm import spark_jars_setting
from vdl_dev.kafka_peer import KafkaPeer

RECORD_BYTES = 100
LOAD_BATCH_RECORDS = 10_000
KAFKA_LOAD_BATCH_RECORDS = 5_000  # 600 KB batches: Kafka's default max.message.bytes is 1 MiB
REALTIME_RATE = 5_000
CEILING_BATCH_ROWS = 100_000
SPARK_ARROW_BATCH_ROWS = 10_000  # spark.sql.execution.arrow.maxRecordsPerBatch's default
ALONE_DISTINCT_ROWS = 1_000_000  # the producer alone cycles through this many rows' batches
GROUPS = ("read", "write", "realtime", "exactly-once")


class CeilingSource(DataSource):
    """Synthetic source: the same schema, prebuilt Arrow batches, no I/O, no decoding."""

    @classmethod
    def name(cls) -> str:
        return "vdl_bench_ceiling"

    def schema(self):  # noqa: ANN201
        from vdl_connector.schema import read_schema

        return read_schema(False)

    def streamReader(self, schema):  # noqa: ANN001, ANN201
        return CeilingReader(int(self.options["rows"]), int(self.options.get("partitions", "2")))

    def writer(self, schema, overwrite: bool):  # noqa: ANN001, ANN201
        return DiscardWriter()


class DiscardWriter(DataSourceArrowWriter):
    """The write ceiling: takes every Arrow batch Spark hands a Python writer and drops it."""

    def write(self, iterator):  # noqa: ANN001, ANN201
        for _ in iterator:
            pass
        return WriterCommitMessage()


class CeilingReader(DataSourceStreamReader):
    def __init__(self, rows: int, partitions: int) -> None:
        self.rows = rows
        self.partition_count = partitions

    def initialOffset(self) -> dict:
        return {"row": 0}

    def latestOffset(self, start: dict, limit) -> dict:  # noqa: ANN001
        return {"row": self.rows}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        total = end["row"] - start["row"]
        bounds = [start["row"] + total * i // self.partition_count for i in range(self.partition_count + 1)]
        return [InputPartition((bounds[i], bounds[i + 1])) for i in range(self.partition_count)]

    def read(self, partition: InputPartition):  # noqa: ANN201
        import numpy as np

        from vdl_connector.arrow import arrow_read_schema

        low, high = partition.value
        n = CEILING_BATCH_ROWS
        values = pa.array([b"x" * RECORD_BYTES] * n, pa.binary())
        batch = pa.RecordBatch.from_arrays([
            pa.nulls(n, pa.binary()), values, pa.array(["bench"] * n, pa.string()),
            pa.array(np.zeros(n, np.int32)), pa.array(np.arange(n, dtype=np.int64)),
            pa.array(np.zeros(n, np.int64), pa.timestamp("us", tz="UTC")), pa.array(np.zeros(n, np.int32)),
        ], schema=arrow_read_schema(False))
        position = low
        while position < high:
            take = min(n, high - position)
            yield batch if take == n else batch.slice(0, take)
            position += take

    def commit(self, end: dict) -> None:
        pass


def load(bootstrap: str, stream: str, records: int, batch_records: int = LOAD_BATCH_RECORDS) -> float:
    """Append `records` 100-byte records as batches of `batch_records` (one prebuilt batch,
    re-sent; the default ones are 1 MiB-ish)."""
    from vdl_client import ClientSettings, VdlClient
    from vdl_connector.arrow import RecordColumns, build_batch

    values = pa.array([b"v" * RECORD_BYTES] * batch_records, pa.binary())
    columns = RecordColumns(None, values)
    batch = build_batch(columns.encode(0, batch_records), batch_records, int(time.time() * 1000), -1, -1, -1)
    start = time.perf_counter()
    with VdlClient(ClientSettings((bootstrap,))) as client:
        client.create_streams([stream])
        for _ in range(records // batch_records):
            client.produce(stream, batch, 30_000, time.monotonic() + 60)
    return time.perf_counter() - start


def timed_query(start_query, rows: int | None = None) -> float:  # noqa: ANN001
    """Seconds until the AvailableNow query ends; with `rows`, refuses a run that read another count
    (a query resuming from a checkpoint that is already at the end reads nothing, very fast)."""
    start = time.perf_counter()
    query = start_query()
    query.awaitTermination()
    elapsed = time.perf_counter() - start
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    if rows is not None:
        read = sum(progress["numInputRows"] for progress in query.recentProgress)
        if read != rows:
            raise RuntimeError(f"query {query.name or query.id} read {read:,} rows, expected {rows:,}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1M records instead of 10M, shorter latency runs")
    parser.add_argument("--records", type=int, help="number of records (overrides --quick)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds per comparison (default 2)")
    parser.add_argument("--groups", default=",".join(GROUPS),
                        help=f"comma-separated groups to run, of {', '.join(GROUPS)} (default: all)")
    parser.add_argument("--no-kafka", action="store_true", help="leave Apache Kafka and format('kafka') out")
    parser.add_argument("--profile", action="store_true",
                        help="one more run of the vdl writes with py-spy on the broker and Spark's Python "
                             "workers: flame graphs (SVG) beside the JSON, top frames in the table")
    parser.add_argument("--realtime-rate", type=int, default=REALTIME_RATE,
                        help=f"events/s of the real-time mode latency runs (default {REALTIME_RATE:,})")
    memory_limit.add_argument(parser)
    args = parser.parse_args(argv)
    memory_limit.apply(args, "vdl-bench-connector", () if args.no_kafka else (
        ("Spark, its Python workers and VDL's node (a --no-kafka run's limit)", 4 << 30), kafka_needs(1)))
    chosen = [g.strip() for g in args.groups.split(",") if g.strip()]
    unknown = sorted(set(chosen) - set(GROUPS))
    if unknown:
        parser.error(f"--groups: unknown {', '.join(unknown)}; accepted: {', '.join(GROUPS)}")
    with_kafka = not args.no_kafka
    rounds = args.rounds
    records = args.records or (1_000_000 if args.quick else 10_000_000)
    records -= records % LOAD_BATCH_RECORDS
    realtime_seconds = 5.0 if args.quick else 20.0

    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.support.cluster import start_broker

    work = Path(tempfile.mkdtemp(prefix="bench-connector-"))
    broker = start_broker(work / "broker")
    peer = KafkaPeer(1, work / "kafka") if with_kafka else None
    spark = (SparkSession.builder.master("local[2]").appName("bench-connector")
             .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.jars", spark_jars_setting())
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(CeilingSource)
    report = Report("bench_connector")
    memory_limit.add_row(report, args)
    profiler = Profiler("bench_connector", args.profile)
    try:
        vdl = vdl_target(broker.bootstrap, lambda: [broker.process.pid])
        kafka: Target | None = None
        kafka_flush: Target | None = None
        if peer is not None:
            peer.start()
            [kafka, kafka_flush] = kafka_targets(peer)
        cpu_of: dict[str, Target | None] = {
            "vdl": vdl, "kafka_on_vdl": vdl, "kafka_on_kafka": kafka, "ceiling": None,
            "write_vdl": vdl, "write_vdl_eo": vdl, "write_vdl_txn": vdl, "write_alone": vdl, "write_kafka_on_vdl": vdl, "write_kafka_on_kafka": kafka,
            "write_kafka_on_kafka_flush": kafka_flush,
            "discard": None, "discard_eo": None}
        # Batches under Kafka's default max.message.bytes (1 MiB), the same into both
        load_s = {target.key: load(target.bootstrap, "bench", records, KAFKA_LOAD_BATCH_RECORDS)
                  for target in (vdl, kafka) if target is not None and ("read" in chosen or "exactly-once" in chosen)}
        if load_s:
            report.add(f"load via client (Produce, {KAFKA_LOAD_BATCH_RECORDS:,}-record batches)",
                       records / load_s["vdl"], "rows/s",
                       note=f"the same batches into Kafka: {records / load_s['kafka']:,.0f} rows/s" if kafka else "")

        def read_query(fmt: str, target: Target, run: str):  # noqa: ANN202
            # A checkpoint per format *and* system: format("kafka") on Kafka resuming from the
            # offsets format("kafka") on VDL reached would read nothing.
            return (spark.readStream.format(fmt).option("kafka.bootstrap.servers", target.bootstrap)
                    .option("subscribe", "bench").option("startingOffsets", "earliest").option("minPartitions", "2")
                    .load().writeStream.format("noop").trigger(availableNow=True)
                    .option("checkpointLocation", str(work / f"read-{fmt}-{target.key}-{run}")).start())

        def ceiling_query(run: str):  # noqa: ANN202
            return (spark.readStream.format("vdl_bench_ceiling").option("rows", str(records)).option("partitions", "2")
                    .load().writeStream.format("noop").trigger(availableNow=True)
                    .option("checkpointLocation", str(work / f"ceiling-{run}")).start())

        frame = spark.range(records, numPartitions=2).select(
            F.concat(F.lpad(F.col("id").cast("string"), 20, "0"), F.lit("x" * (RECORD_BYTES - 20)))
            .cast("binary").alias("value"))

        def write(fmt: str, target: Target, run: str) -> None:
            topic = target.topic(f"bench-write-{fmt}-{run}")  # Kafka's two targets share its cluster
            target.create(topic)
            (frame.write.format(fmt).option("kafka.bootstrap.servers", target.bootstrap).option("topic", topic)
             .mode("append").save())

        def write_discard(run: str) -> None:
            frame.write.format("vdl_bench_ceiling").mode("append").save()

        alone_batches: list[pa.Array] = []

        def write_alone(run: str) -> None:
            """The writer's producer (StreamProducer) in this process, fed `frame`'s values in
            Arrow batches of Spark's size: the connector's and the broker's CPU without Spark's."""
            from vdl_client import ClientSettings, VdlClient
            from vdl_connector.options import SinkOptions
            from vdl_connector.producing import StreamProducer

            if not alone_batches:
                alone_batches.extend(frame_values(min(records, ALONE_DISTINCT_ROWS), SPARK_ARROW_BATCH_ROWS))
            topic = f"bench-write-alone-{run}"
            vdl.create(topic)
            options = SinkOptions(ClientSettings((vdl.bootstrap,)), topic=topic)
            with VdlClient(options.client) as client:
                producer = StreamProducer(client, options, None)
                for index in range(records // SPARK_ARROW_BATCH_ROWS):
                    producer.add(topic, None, alone_batches[index % len(alone_batches)], None)
                producer.flush()

        def in_micro_batch(run: str, write_frame: Callable[[], None]) -> None:
            """write_frame() inside foreachBatch of a streaming query of one one-row micro-batch: the
            running query and batch id are what an exactly-once df.write takes its producer ids from."""
            def each(_batch, _batch_id: int) -> None:  # noqa: ANN001
                write_frame()

            # A file source (JVM only): a Python streaming source starts a runner process per query,
            # which fails to connect back to a loaded machine's JVM in time now and then.
            one_row = work / "one-row"
            if not one_row.exists():
                one_row.mkdir()
                (one_row / "row.txt").write_text("row\n")
            timed_query(lambda: spark.readStream.format("text").load(str(one_row)).writeStream.foreachBatch(each)
                        .option("checkpointLocation", str(work / f"micro-batch-{run}"))
                        .trigger(availableNow=True).start())

        def write_exactly_once(run: str, mode: str = "true") -> None:
            topic = f"bench-write-eo-{mode}-{run}"
            vdl.create(topic)
            in_micro_batch(f"eo-{mode}-{run}", lambda: frame.write.format("vdl").option("bootstrap.servers", vdl.bootstrap)
                           .option("topic", topic).option("exactlyOnce", mode).mode("append").save())

        measures: dict[str, Callable[[str], object]] = {}
        groups: list[tuple[str, ...]] = []
        if "read" in chosen:
            groups.append(("ceiling", "vdl", "kafka_on_vdl", "kafka_on_kafka") if kafka else ("ceiling", "vdl"))
            measures["ceiling"] = lambda r: timed_query(lambda: ceiling_query(r), records)
            measures["vdl"] = lambda r: timed_query(lambda: read_query("vdl", vdl, r), records)
            if kafka is not None:
                kafka_target = kafka
                measures["kafka_on_vdl"] = lambda r: timed_query(lambda: read_query("kafka", vdl, r), records)
                measures["kafka_on_kafka"] = lambda r: timed_query(
                    lambda: read_query("kafka", kafka_target, r), records)
        if "write" in chosen:
            groups.append(("discard", "write_vdl", "discard_eo", "write_vdl_eo", "write_vdl_txn", "write_alone")
                          + (("write_kafka_on_vdl", "write_kafka_on_kafka", "write_kafka_on_kafka_flush") if kafka
                             else ()))
            measures["discard"] = lambda r: timed_query_batch(lambda: write_discard(r))
            measures["write_alone"] = lambda r: timed_query_batch(lambda: write_alone(r))
            measures["write_vdl"] = lambda r: timed_query_batch(lambda: write("vdl", vdl, r))
            measures["discard_eo"] = lambda r: timed_query_batch(lambda: in_micro_batch(r, lambda: write_discard(r)))
            measures["write_vdl_eo"] = lambda r: timed_query_batch(lambda: write_exactly_once(r))
            measures["write_vdl_txn"] = lambda r: timed_query_batch(lambda: write_exactly_once(r, "transactional"))
            if kafka is not None and kafka_flush is not None:
                kafka_target, flush_target = kafka, kafka_flush
                measures["write_kafka_on_vdl"] = lambda r: timed_query_batch(lambda: write("kafka", vdl, r))
                measures["write_kafka_on_kafka"] = lambda r: timed_query_batch(
                    lambda: write("kafka", kafka_target, r))
                measures["write_kafka_on_kafka_flush"] = lambda r: timed_query_batch(
                    lambda: write("kafka", flush_target, r))
        for key, measure in measures.items():  # warm up Python workers, the JIT, both connectors
            measure(f"warm-{key}")
        # Alternating rounds, each group side by side: the machine is shared, so load drifts.
        started = time.perf_counter()
        seconds: dict[str, list[float]] = {key: [] for key in measures}
        cpu: dict[str, list[float]] = {key: [] for key in measures}
        client_cpu: dict[str, list[float]] = {key: [] for key in measures}
        points: dict[str, list[tuple[float, float]]] = {key: [] for key in measures}
        for run in range(rounds):
            for group in groups:
                for key in group[run % len(group):] + group[:run % len(group)]:
                    target = cpu_of[key]
                    pids = target.pids() if target else []
                    before = cpu_seconds(pids)
                    # The producer alone runs in this process; every other measure in Spark's.
                    clock = time.process_time if key == "write_alone" else spark_cpu_seconds
                    client_before = clock()
                    seconds[key].append(float(measures[key](str(run))))  # type: ignore[arg-type]
                    cpu[key].append(per_record_us(cpu_seconds(pids) - before, records))
                    client_cpu[key].append(per_record_us(clock() - client_before, records))
                    points[key].append((time.perf_counter() - started, records / seconds[key][-1]))
        if args.profile:  # after the rounds: py-spy's sampling takes CPU from what it watches
            targets = {"broker": lambda: [broker.process.pid], "spark-workers": spark_python_workers}
            for key in ("write_vdl", "write_vdl_eo", "write_vdl_txn"):
                if key in measures:
                    with profiler.recording(key, targets):
                        measures[key]("profile")
        rate = {key: statistics.median(records / s for s in values) for key, values in seconds.items()}

        def ratio(measured: str, base: str) -> float:
            return statistics.median(b / a for a, b in zip(seconds[measured], seconds[base], strict=True))

        def listed(key: str) -> str:
            return "rounds: " + ", ".join(f"{records / s:,.0f}" for s in seconds[key])

        def broker_cpu(key: str) -> str:
            return f"broker CPU {statistics.median(cpu[key]):.2f} us/record; " if cpu_of[key] else ""

        labels = {"ceiling": "ceiling: synthetic Arrow source -> noop",
                  "vdl": 'readStream.format("vdl") on VDL -> noop',
                  "kafka_on_vdl": 'readStream.format("kafka") on VDL -> noop',
                  "kafka_on_kafka": 'readStream.format("kafka") on Kafka -> noop',
                  "discard": "ceiling: rows -> discarding Arrow writer",
                  "write_vdl": 'df.write.format("vdl") to VDL (at-least-once)',
                  "discard_eo": "ceiling: rows -> discarding Arrow writer, in foreachBatch",
                  "write_vdl_eo": 'df.write.format("vdl") to VDL, exactlyOnce, in foreachBatch',
                  "write_vdl_txn": 'df.write.format("vdl") to VDL, exactlyOnce=transactional, in foreachBatch',
                  "write_alone": "the vdl writer's producer alone (no Spark), the same rows in Spark's Arrow batches",
                  "write_kafka_on_vdl": 'df.write.format("kafka") to VDL',
                  "write_kafka_on_kafka": 'df.write.format("kafka") to Kafka',
                  "write_kafka_on_kafka_flush": 'df.write.format("kafka") to Kafka (flush.messages=1)'}
        labels = {key: label for key, label in labels.items() if key in measures}
        goals = {"vdl": 1_000_000, "write_vdl": 500_000}
        for key, label in labels.items():
            report.add(label, rate[key], "rows/s", goal=goals.get(key), note=broker_cpu(key) + listed(key))
            if cpu_of[key]:
                report.add(f"{label}, broker CPU", statistics.median(cpu[key]), "us/record", higher_is_better=False)
            if key == "write_alone":
                report.add(f"{label}, its CPU", statistics.median(client_cpu[key]), "us/record",
                           higher_is_better=False)
            elif key.startswith(("write", "discard")):
                report.add(f"{label}, Spark CPU (driver JVM + Python workers)", statistics.median(client_cpu[key]),
                           "us/record", higher_is_better=False)
        for measured, base, goal in (("vdl", "ceiling", 0.6), ("vdl", "kafka_on_vdl", 1.0), ("vdl", "kafka_on_kafka", 0.9),
                                     ("kafka_on_vdl", "kafka_on_kafka", None),
                                     ("write_vdl", "discard", 0.7), ("write_vdl_eo", "discard_eo", 0.7),
                                     ("write_vdl_eo", "discard", None), ("write_vdl_txn", "write_vdl_eo", None),
                                     ("write_vdl_txn", "discard_eo", None), ("write_vdl", "write_kafka_on_vdl", None),
                                     ("write_vdl", "write_kafka_on_kafka", None),
                                     ("write_kafka_on_vdl", "write_kafka_on_kafka", None),
                                     ("write_vdl", "write_kafka_on_kafka_flush", None),
                                     ("write_kafka_on_vdl", "write_kafka_on_kafka_flush", None)):
            if measured in measures and base in measures:
                report.add(f"{labels[measured]} / {labels[base]}", ratio(measured, base), "x", goal=goal,
                           note="median of per-round ratios")
        for key in labels:
            report.throughput(labels[key], points[key], "rows/s",
                              baseline=key not in ("vdl", "write_vdl", "write_vdl_eo", "write_vdl_txn", "write_alone"))
        if kafka is not None and "read" in chosen and "write" in chosen:
            report.side_by_side(
                f"Spark connectors, {records:,} 100-byte records, alternating rounds (medians of {rounds}); "
                "broker CPU per record in brackets",
                ["", 'format("vdl") on VDL', 'format("kafka") on VDL', 'format("kafka") on Kafka (defaults)',
                 'vdl / kafka on VDL', 'vdl / kafka on Kafka'],
                [[f"{what} (rows/s)", *(f"{rate[k]:,.0f} ({statistics.median(cpu[k]):.2f})" for k in keys),
                  f"{ratio(keys[0], keys[1]):.2f}x", f"{ratio(keys[0], keys[2]):.2f}x"]
                 for what, keys in (("streaming read, AvailableNow -> noop", ("vdl", "kafka_on_vdl", "kafka_on_kafka")),
                                    ("batch write", ("write_vdl", "write_kafka_on_vdl", "write_kafka_on_kafka")))])

        if "realtime" in chosen:
            realtime_targets = {"VDL": vdl} if kafka is None else {"VDL": vdl, "Kafka (defaults)": kafka}
            realtime_rows(report, spark, realtime_targets, work, args.realtime_rate, realtime_seconds, rounds)
        if "exactly-once" in chosen:
            exactly_once_rows(report, spark, vdl.bootstrap, work, records)
        profiler.add_to(report)
    finally:
        spark.stop()
        broker.kill()
        if peer is not None:
            peer.stop_all()
        # The logs written (GBs at 10M records a run) would stay in /tmp, which other runs share.
        shutil.rmtree(work, ignore_errors=True)
    report.finish()
    return 0


def spark_cpu_seconds() -> float:
    """CPU seconds of this SparkSession's JVM and Python workers so far: every process this benchmark
    started, less the brokers (counted apart) and py-spy. A process's reaped children count in it
    (cutime/cstime): a Python worker that exits moves into its daemon's count, not out of the sum."""
    import psutil

    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            command = " ".join(child.cmdline())
            if "vdl_broker" in command or "kafka.Kafka" in command or "py-spy" in command:
                continue
            times = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total

def realtime_rows(report: Report, spark, targets: dict[str, Target], work: Path, rate: int,  # noqa: ANN001
                  seconds: float, rounds: int) -> None:
    """Spark's real-time mode, format("kafka") -> format("kafka") on VDL and on Kafka, in turns."""
    samples: dict[str, list[list[float]]] = {name: [] for name in targets}
    for run in range(rounds):
        for name in (list(targets) if run % 2 == 0 else list(targets)[::-1]):
            target = targets[name]
            source, copy = f"bench-rtm-{run}", f"bench-rtm-copy-{run}"
            target.create(source, copy)
            query = start_copy(spark, target.bootstrap, source, copy, work / f"rtm-{target.key}-{run}")
            try:
                samples[name].append(copy_latencies(target.bootstrap, source, copy, rate, seconds))
            finally:
                query.stop()
    for name, runs in samples.items():
        every = [v for values in runs for v in values]
        report.latency(f"real-time mode, format('kafka') on {name}, {rate:,} events/s", every, baseline=name != "VDL")
        for label, fraction, goal in (("p50", 0.5, None), ("p99", 0.99, 200.0)):
            per_run = [percentile(values, fraction) for values in runs]
            report.add(f"real-time mode end to end {label}, format('kafka') on {name}", statistics.median(per_run), "ms",
                       goal=goal if name == "VDL" else None, higher_is_better=False,
                       note=f"{rate:,} events/s, {len(every):,} events; rounds: "
                            + ", ".join(f"{v:.0f}" for v in per_run))


def exactly_once_rows(report: Report, spark, bootstrap: str, work: Path, records: int) -> None:  # noqa: ANN001
    """Alternate the two modes of the vdl sink and keep each one's best run: the first runs pay warm-up costs."""
    rates: dict[str, float] = {"false": 0.0, "true": 0.0}
    for run, exactly_once in enumerate(("false", "true", "false", "true")):
        def copy_query(run: int = run, exactly_once: str = exactly_once):  # noqa: ANN202
            return (spark.readStream.format("vdl").option("bootstrap.servers", bootstrap)
                    .option("subscribe", "bench").option("startingOffsets", "earliest")
                    .option("minPartitions", "2").load().select("key", "value")
                    .writeStream.format("vdl").option("bootstrap.servers", bootstrap)
                    .option("topic", f"bench-copy-{run}").option("createStreams", "true")
                    .option("exactlyOnce", exactly_once)
                    .option("checkpointLocation", str(work / f"copy-{run}"))
                    .trigger(availableNow=True).start())

        rates[exactly_once] = max(rates[exactly_once], records / timed_query(copy_query, records))
    for exactly_once in ("false", "true"):
        report.add(f"stream copy vdl -> vdl, exactlyOnce={exactly_once}", rates[exactly_once], "rows/s",
                   note="best of 2")
    report.add("exactlyOnce=true / false", 100 * rates["true"] / rates["false"], "%", goal=80)


def frame_values(rows: int, batch_rows: int) -> list[pa.Array]:
    """The benchmark's write rows (the id, zero-padded to 20 digits, then "x"s to RECORD_BYTES) in
    Arrow arrays of batch_rows, as Spark hands them to a Python writer."""
    import pyarrow.compute as pc

    ids = pc.utf8_lpad(pc.cast(pa.array(range(rows), pa.int64()), pa.string()), 20, "0")
    values = pc.binary_join_element_wise(ids, pa.scalar("x" * (RECORD_BYTES - 20)), "").cast(pa.binary())
    return [values.slice(start, batch_rows) for start in range(0, rows, batch_rows)]


def timed_query_batch(action) -> float:  # noqa: ANN001
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


if __name__ == "__main__":
    raise SystemExit(main())
