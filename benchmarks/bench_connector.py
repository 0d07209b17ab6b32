"""Spark connector throughput next to what Spark's Python Data Source API takes at best.

Run: `.venv/bin/python -m benchmarks.bench_connector [--quick] [--rounds N]` (--quick: 1M records, not 10M).

Measured in one run on this machine, one single-node broker (fsync on), each pair side by side
in alternating rounds (medians, median of per-round ratios):
- read: spark.readStream.format("vdl") of N 100-byte records, Trigger.AvailableNow, noop sink,
  next to the same query over a synthetic Python data source whose read() yields prebuilt
  Arrow batches of the same schema -- goal >= 0.6x;
- write: df.write.format("vdl") of N 100-byte rows (acks=-1), next to the same rows written to
  a Python data source whose Arrow writer discards every batch -- goal >= 0.6x;
- exactly-once cost: a streaming copy stream -> stream with exactlyOnce=true vs false.
Spark queries get both cores (local[2], two tasks); the broker shares them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)

from benchmarks.report import Report

RECORD_BYTES = 100
LOAD_BATCH_RECORDS = 10_000
CEILING_BATCH_ROWS = 100_000


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

        from vdl_connector.schema import arrow_read_schema

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


def load(bootstrap: str, stream: str, records: int) -> float:
    """Append `records` 100-byte records as 1 MiB-ish batches (one prebuilt batch, re-sent)."""
    from vdl_client import ClientSettings, VdlClient
    from vdl_connector.arrow import RecordColumns, build_batch

    values = pa.array([b"v" * RECORD_BYTES] * LOAD_BATCH_RECORDS, pa.binary())
    columns = RecordColumns(None, values)
    batch = build_batch(columns.encode(0, LOAD_BATCH_RECORDS), LOAD_BATCH_RECORDS, int(time.time() * 1000),
                        -1, -1, -1)
    start = time.perf_counter()
    with VdlClient(ClientSettings((bootstrap,))) as client:
        client.create_streams([stream])
        for _ in range(records // LOAD_BATCH_RECORDS):
            client.produce(stream, batch, 30_000, time.monotonic() + 60)
    return time.perf_counter() - start


def timed_query(start_query) -> float:  # noqa: ANN001
    start = time.perf_counter()
    query = start_query()
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1M records instead of 10M")
    parser.add_argument("--records", type=int, help="number of records (overrides --quick)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds per pair (default 2)")
    args = parser.parse_args(argv)
    rounds = args.rounds
    records = args.records or (1_000_000 if args.quick else 10_000_000)
    records -= records % LOAD_BATCH_RECORDS

    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.support.cluster import start_broker

    work = Path(tempfile.mkdtemp(prefix="bench-connector-"))
    broker = start_broker(work / "broker")
    spark = (SparkSession.builder.master("local[2]").appName("bench-connector")
             .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(CeilingSource)
    report = Report("bench_connector")
    try:
        load_s = load(broker.bootstrap, "bench", records)
        report.add("load via client (Produce, 10k-record batches)", records / load_s, "rows/s")

        def read_query(run: int):  # noqa: ANN202
            return (spark.readStream.format("vdl").option("bootstrap.servers", broker.bootstrap)
                    .option("subscribe", "bench").option("startingOffsets", "earliest").option("minPartitions", "2")
                    .load().writeStream.format("noop").trigger(availableNow=True)
                    .option("checkpointLocation", str(work / f"read-{run}")).start())

        def ceiling_query(run: int):  # noqa: ANN202
            return (spark.readStream.format("vdl_bench_ceiling").option("rows", str(records)).option("partitions", "2")
                    .load().writeStream.format("noop").trigger(availableNow=True)
                    .option("checkpointLocation", str(work / f"ceiling-{run}")).start())

        frame = spark.range(records, numPartitions=2).select(
            F.concat(F.lpad(F.col("id").cast("string"), 20, "0"), F.lit("x" * (RECORD_BYTES - 20)))
            .cast("binary").alias("value"))

        def write_vdl(run: int) -> None:
            (frame.write.format("vdl").option("bootstrap.servers", broker.bootstrap).option("topic", f"bench-write-{run}")
             .option("createStreams", "true").mode("append").save())

        def write_discard(run: int) -> None:
            frame.write.format("vdl_bench_ceiling").mode("append").save()

        timed_query(lambda: ceiling_query(0))  # warm up Python workers and the JIT
        timed_query(lambda: read_query(0))
        write_discard(0)
        # Alternating rounds, each pair side by side: the machine is shared, so load drifts.
        started = time.perf_counter()
        seconds: dict[str, list[float]] = {"read": [], "ceiling": [], "write": [], "discard": []}
        points: dict[str, list[tuple[float, float]]] = {key: [] for key in seconds}
        runs = {"read": lambda r: timed_query(lambda: read_query(r)),
                "ceiling": lambda r: timed_query(lambda: ceiling_query(r)),
                "write": lambda r: timed_query_batch(lambda: write_vdl(r)),
                "discard": lambda r: timed_query_batch(lambda: write_discard(r))}
        for run in range(1, rounds + 1):
            pairs = (("ceiling", "read"), ("discard", "write"))
            for pair in pairs:
                for key in (pair if run % 2 else pair[::-1]):
                    seconds[key].append(runs[key](run))
                    points[key].append((time.perf_counter() - started, records / seconds[key][-1]))
        rate = {key: statistics.median(records / s for s in values) for key, values in seconds.items()}
        ratio = {measured: statistics.median(b / a for a, b in zip(seconds[measured], seconds[base], strict=True))
                 for measured, base in (("read", "ceiling"), ("write", "discard"))}
        listed = lambda key: "rounds: " + ", ".join(f"{records / s:,.0f}" for s in seconds[key])  # noqa: E731
        report.add("ceiling: synthetic Arrow source -> noop", rate["ceiling"], "rows/s", note=listed("ceiling"))
        report.add("readStream vdl -> noop", rate["read"], "rows/s", goal=1_000_000, note=listed("read"))
        report.add("read / synthetic Arrow source", ratio["read"], "x", goal=0.6, note="median of per-round ratios")
        report.add("ceiling: rows -> discarding Arrow writer", rate["discard"], "rows/s", note=listed("discard"))
        report.add("df.write.format('vdl')", rate["write"], "rows/s", goal=500_000, note=listed("write"))
        report.add("write / discarding Arrow writer", ratio["write"], "x", goal=0.6, note="median of per-round ratios")
        for measured, base in (("read", "ceiling"), ("write", "discard")):
            label = {"read": "readStream vdl", "write": "df.write vdl"}[measured]
            report.throughput(f"{label}, per run", points[measured], "rows/s")
            report.throughput(f"{base}, per run", points[base], "rows/s", baseline=True)
            report.latency(f"{label}: run time", seconds[measured], "s")
            report.latency(f"{base}: run time", seconds[base], "s", baseline=True)

        # Alternate the two modes and keep each one's best run: the first runs pay warm-up costs.
        rates: dict[str, float] = {"false": 0.0, "true": 0.0}
        for run, exactly_once in enumerate(("false", "true", "false", "true")):
            def copy_query(run: int = run, exactly_once: str = exactly_once):  # noqa: ANN202
                return (spark.readStream.format("vdl").option("bootstrap.servers", broker.bootstrap)
                        .option("subscribe", "bench").option("startingOffsets", "earliest")
                        .option("minPartitions", "2").load().select("key", "value")
                        .writeStream.format("vdl").option("bootstrap.servers", broker.bootstrap)
                        .option("topic", f"bench-copy-{run}").option("createStreams", "true")
                        .option("exactlyOnce", exactly_once)
                        .option("checkpointLocation", str(work / f"copy-{run}"))
                        .trigger(availableNow=True).start())

            rates[exactly_once] = max(rates[exactly_once], records / timed_query(copy_query))
        for exactly_once in ("false", "true"):
            report.add(f"stream copy vdl -> vdl, exactlyOnce={exactly_once}", rates[exactly_once], "rows/s",
                       note="best of 2")
        report.add("exactlyOnce=true / false", 100 * rates["true"] / rates["false"], "%", goal=80)
    finally:
        spark.stop()
        broker.kill()
    report.finish()
    return 0


def timed_query_batch(action) -> float:  # noqa: ANN001
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


if __name__ == "__main__":
    raise SystemExit(main())
