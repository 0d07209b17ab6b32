"""Streams that are Delta tables (vdl.table.path), on one node: what tiering costs and how fresh
the table is.

    .venv/bin/python -m benchmarks.bench_tables [--quick] [--only produce,keepup,freshness,read]

- produce: 100-byte records at full speed (2 confluent-kafka producer processes, acks=1) into a
  stream without a table and into one with a table, alternating rounds on one broker; medians of
  each and of the per-round ratio (goal: with tiering >= 0.8x without). The table's lag is
  sampled during the runs.
- keepup: a steady 300,000 records/s for a while into a stream with a table: the table's lag
  (records and seconds, from `vdl streams describe`'s status) must stay bounded.
- freshness: a steady rate into a stream with the default vdl.table.lag.ms (5 s); each record's
  freshness is the time of the Delta commit that holds it minus the record's timestamp (goal:
  p99 <= lag.ms + 1 s).
- read: 10M records read by Spark (readStream, availableNow, noop sink, minPartitions 2) from a
  stream whose first half is only in its Delta table (retention deleted it from the log) and from
  a stream all in the log, alternating rounds; medians (goal: >= 0.9x), and the CPU per record of
  Spark's Python workers and of its JVM (the figure to trust on a loaded machine).

The clients run on the same machine as the broker (2 cores shared). Prints a table and writes
benchmarks/results/bench_tables.json and .png.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench_broker import RECORD_BYTES, produce_run
from benchmarks.report import Report, percentile

STATUS_KEYS = ("vdl.table.status.last.offset", "vdl.table.status.lag.records", "vdl.table.status.lag.seconds")


def client(bootstrap: str):  # noqa: ANN201
    from vdl_client import ClientSettings, VdlClient

    return VdlClient(ClientSettings.from_bootstrap(bootstrap, deadline_ms=60_000))


def create(bootstrap: str, stream: str, config: dict[str, str] | None = None) -> None:
    with client(bootstrap) as vdl:
        vdl.create_stream(stream, config=config or {})


def table_status(vdl, stream: str) -> tuple[int, int, float]:  # noqa: ANN001
    """(last offset in the table, lag in records, lag in seconds) as the leader reports them."""
    from vdl_client.configs import describe_stream_configs

    values = {c.name: c.value for c in describe_stream_configs(vdl, stream, STATUS_KEYS)}
    return (int(values.get(STATUS_KEYS[0]) or -1), int(values.get(STATUS_KEYS[1]) or 0),
            float(values.get(STATUS_KEYS[2]) or 0.0))


class LagSampler:
    """Samples a stream's table lag every `interval` s on a thread: (s since start, records, seconds)."""

    def __init__(self, bootstrap: str, stream: str, interval: float = 0.5) -> None:
        self.bootstrap, self.stream, self.interval = bootstrap, stream, interval
        self.samples: list[tuple[float, int, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        started = time.perf_counter()
        with client(self.bootstrap) as vdl:
            while not self._stop.wait(self.interval):
                _, records, seconds = table_status(vdl, self.stream)
                self.samples.append((time.perf_counter() - started, records, seconds))

    def __enter__(self) -> LagSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def max_records(self) -> int:
        return max((r for _, r, _ in self.samples), default=0)

    def max_seconds(self) -> float:
        return max((s for _, _, s in self.samples), default=0.0)


def wait_caught_up(bootstrap: str, stream: str, end: int, timeout_s: float = 300) -> float:
    """Seconds until the table holds every offset below `end`."""
    started = time.perf_counter()
    with client(bootstrap) as vdl:
        while table_status(vdl, stream)[0] < end - 1:
            if time.perf_counter() - started > timeout_s:
                raise RuntimeError(f"the table of {stream} did not reach offset {end - 1} in {timeout_s} s")
            time.sleep(0.1)
    return time.perf_counter() - started


# -------------------------------------------------------------------------------- produce


def phase_produce(report: Report, broker: Any, lake: Path, rounds: int, count: int, producers: int) -> None:
    runs: dict[str, list[float]] = {"off": [], "on": []}
    ratios, lags, drains = [], [], []
    timelines: dict[str, list[tuple[float, float]]] = {}
    for number in range(rounds):
        order = ("off", "on") if number % 2 == 0 else ("on", "off")
        rates = {}
        for which in order:
            stream = f"produce-{which}-{number}"
            config = {"vdl.table.path": str(lake / stream)} if which == "on" else {}
            create(broker.bootstrap, stream, config)
            if which == "on":
                with LagSampler(broker.bootstrap, stream) as sampler:
                    run = produce_run(broker.bootstrap, stream, count, 1, producers)
                lags.append(sampler.max_records())
                drains.append(wait_caught_up(broker.bootstrap, stream, count + producers))
            else:
                run = produce_run(broker.bootstrap, stream, count, 1, producers)
            rates[which] = run.rate
            runs[which].append(run.rate)
            if number == rounds // 2:
                timelines[which] = run.counts
        ratios.append(rates["on"] / rates["off"])
    report.timeline("produce, tiering on", timelines["on"])
    report.timeline("produce, tiering off", timelines["off"], baseline=True)
    note = f"{producers} confluent-kafka producer processes, acks=1, {count:,} records per run"
    report.add("produce, tiering off", statistics.median(runs["off"]), "records/s",
               note=f"{note}; rounds {', '.join(f'{r:,.0f}' for r in runs['off'])}")
    report.add("produce, tiering on", statistics.median(runs["on"]), "records/s",
               note=f"rounds {', '.join(f'{r:,.0f}' for r in runs['on'])}")
    report.add("produce tiering on / off", statistics.median(ratios), "x", goal=0.8,
               note=f"median of per-round ratios {', '.join(f'{r:.2f}' for r in ratios)}")
    report.add("table lag during the full-speed run, max", max(lags), "records")
    report.add("table catching up after the run", statistics.median(drains), "s",
               note=f"rounds {', '.join(f'{d:.1f}' for d in drains)}")


# -------------------------------------------------------------------------------- steady rates


def _paced_worker(bootstrap: str, stream: str, rate: float, seconds: float, start_at: float) -> tuple[int, float]:
    """Produce `rate` 100-byte records/s for `seconds` (1 ms ticks); returns (records, seconds taken)."""
    import confluent_kafka

    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1, "batch.size": 1_000_000,
        "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000,
        "enable.idempotence": False, "delivery.report.only.error": True})
    failures: list[object] = []
    producer.produce(stream, b"warm-up", on_delivery=lambda err, msg: err and failures.append(err))
    producer.flush(30)
    value = b"v" * RECORD_BYTES
    while time.time() < start_at:
        time.sleep(0.001)
    total = int(rate * seconds)
    sent = 0
    started = time.perf_counter()
    while sent < total:
        due = min(total, int((time.perf_counter() - started) * rate) + 1)
        while sent < due:
            try:
                producer.produce(stream, value)
            except BufferError:
                producer.poll(0.001)
                continue
            sent += 1
        producer.poll(0)
        ahead = sent / rate - (time.perf_counter() - started)
        if ahead > 0:
            time.sleep(ahead)
    remaining = producer.flush(120)
    if remaining or failures:
        raise RuntimeError(f"produce failed: {remaining} undelivered, errors {failures[:3]}")
    return sent, time.perf_counter() - started


def paced(bootstrap: str, stream: str, rate: float, seconds: float, processes: int = 2) -> tuple[int, float]:
    """(records, achieved records/s) of `processes` paced producers sharing `rate`."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(processes) as pool:
        start_at = time.time() + 3.0
        futures = [pool.submit(_paced_worker, bootstrap, stream, rate / processes, seconds, start_at)
                   for _ in range(processes)]
        results = [f.result() for f in futures]
    records = sum(r for r, _ in results)
    return records, records / max(s for _, s in results)


def phase_keepup(report: Report, broker: Any, lake: Path, seconds: float, rate: float = 300_000) -> None:
    stream = "keepup"
    create(broker.bootstrap, stream, {"vdl.table.path": str(lake / stream)})
    with LagSampler(broker.bootstrap, stream) as sampler:
        records, achieved = paced(broker.bootstrap, stream, rate, seconds)
    drain = wait_caught_up(broker.bootstrap, stream, records + 2)
    report.throughput("table lag at 300k records/s (records)", [(t, r) for t, r, _ in sampler.samples], "records")
    report.add("keep-up run: produced", achieved, "records/s", goal=rate * 0.95,
               note=f"{records:,} records in {seconds:.0f} s, paced, 2 producer processes")
    first = [r for t, r, _ in sampler.samples if t <= seconds / 3]
    last = [r for t, r, _ in sampler.samples if t > seconds * 2 / 3]
    report.add("keep-up run: table lag, max", sampler.max_seconds(), "s", goal=5 + 2, higher_is_better=False,
               note=f"max {sampler.max_records():,} records (vdl.table.lag.ms 5000: a commit every ~4-5 s)")
    report.add("keep-up run: lag in the last third / first third (max records)",
               max(last, default=0) / max(1, max(first, default=0)), "x", goal=1.25, higher_is_better=False,
               note="bounded: the lag does not grow while the rate holds")
    report.add("keep-up run: table caught up after the last record", drain, "s", goal=5 + 1, higher_is_better=False)


def commits(table_path: str) -> tuple[np.ndarray, np.ndarray]:
    """(last offset, commit time ms) of every Delta commit carrying a transaction, by version."""
    lasts, times = [], []
    for log_file in sorted((Path(table_path) / "_delta_log").glob("*.json")):
        last = when = None
        for line in log_file.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                last = action["txn"]["version"]
            elif "commitInfo" in action:
                when = action["commitInfo"].get("timestamp")
        if last is not None and when is not None:
            lasts.append(last)
            times.append(when)
    return np.array(lasts, dtype=np.int64), np.array(times, dtype=np.int64)


def phase_freshness(report: Report, broker: Any, lake: Path, seconds: float, rate: float = 50_000) -> None:
    from deltalake import DeltaTable

    stream = "freshness"
    path = str(lake / stream)
    create(broker.bootstrap, stream, {"vdl.table.path": path})  # vdl.table.lag.ms: the default 5000
    records, _ = paced(broker.bootstrap, stream, rate, seconds)
    wait_caught_up(broker.bootstrap, stream, records + 2)
    table = DeltaTable(path).to_pyarrow_table(columns=["offset", "timestamp"])
    offsets = table.column("offset").to_numpy()
    stamps = table.column("timestamp").cast("int64").to_numpy() // 1000  # us -> ms
    lasts, times = commits(path)
    holding = np.searchsorted(lasts, offsets, side="left")  # the first commit whose last offset >= offset
    fresh = (times[holding] - stamps).astype(float)
    values = fresh.tolist()
    report.latency("record timestamp -> Delta commit holding it", values)
    report.add("freshness p50", percentile(values, 0.5), "ms", note=f"{len(values):,} records at {rate:,.0f}/s, "
               f"{len(lasts)} commits")
    report.add("freshness p99", percentile(values, 0.99), "ms", goal=5000 + 1000, higher_is_better=False,
               note="vdl.table.lag.ms = 5000 (the default)")
    report.add("freshness max", max(values), "ms")


# -------------------------------------------------------------------------------- read


def load(bootstrap: str, stream: str, records: int, config: dict[str, str] | None = None) -> None:
    """`records` 100-byte random records in 10k-record batches (16 distinct batches, cycled)."""
    import pyarrow as pa

    from vdl_connector.arrow import RecordColumns, build_batch

    rng = np.random.default_rng(7)
    batches = []
    for _ in range(16):
        raw = rng.integers(0, 256, size=(10_000, RECORD_BYTES), dtype=np.uint8)
        values = pa.array([row.tobytes() for row in raw], pa.binary())
        columns = RecordColumns(None, values)
        batches.append(build_batch(columns.encode(0, 10_000), 10_000, int(time.time() * 1000), -1, -1, -1))
    create(bootstrap, stream, config)
    with client(bootstrap) as vdl:
        for n in range(records // 10_000):
            vdl.produce(stream, batches[n % len(batches)], 30_000, time.monotonic() + 60)


def spark_cpu_seconds() -> tuple[float, float]:
    """(Spark's Python workers, its JVM): CPU seconds so far of this process's SparkSession. A
    Python worker that exited counts in the process that reaped it (its daemon, or the JVM for the
    driver-side runners): those children's times are the Python side's too. Waits (up to 2 s) for
    exited workers to be reaped: a zombie's CPU is in no process's count."""
    import psutil

    deadline = time.monotonic() + 2
    while True:
        python = jvm = 0.0
        zombies = False
        for child in psutil.Process().children(recursive=True):
            try:
                command = child.cmdline()
                times = child.cpu_times()
                zombies = zombies or child.status() == psutil.STATUS_ZOMBIE
            except psutil.ZombieProcess:
                zombies = True
                continue
            except psutil.NoSuchProcess:
                continue
            if command and Path(command[0]).name == "java":
                jvm += times.user + times.system
                python += times.children_user + times.children_system
            elif any("pyspark" in part for part in command):
                python += times.user + times.system + times.children_user + times.children_system
        if not zombies or time.monotonic() > deadline:
            return python, jvm
        time.sleep(0.05)


def phase_read(report: Report, broker: Any, lake: Path, records: int, rounds: int, work: Path) -> None:
    data_dir = broker.data_dir
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from vdl_client.configs import alter_stream_configs

    load(broker.bootstrap, "read-log", records)
    half_path = str(lake / "read-half")
    segment = max(1 << 20, records * (RECORD_BYTES + 15) // 16)  # ~16 segments: retention can take half
    load(broker.bootstrap, "read-half", records, {"vdl.table.path": half_path, "vdl.table.lag.ms": "1000",
                                                  "segment.bytes": str(segment)})
    wait_caught_up(broker.bootstrap, "read-half", records, timeout_s=600)
    size = sum(p.stat().st_size for p in (data_dir / "read-half").glob("*.log"))
    with client(broker.bootstrap) as vdl:
        alter_stream_configs(vdl, "read-half", {"retention.bytes": str(size // 2)})
        deadline = time.monotonic() + 300
        while vdl.list_offset("read-half", -2) < records * 0.45:
            if time.monotonic() > deadline:
                raise RuntimeError("retention did not delete half of read-half")
            time.sleep(0.5)
        log_start = vdl.list_offset("read-half", -2)
    spark = (SparkSession.builder.master("local[2]").appName("bench-tables")
             .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    times: dict[str, list[float]] = {"read-log": [], "read-half": []}
    cpu: dict[str, list[tuple[float, float]]] = {"read-log": [], "read-half": []}  # (Python workers, JVM) s
    try:
        for number in range(rounds + 1):  # round 0 warms up the Python workers: not counted
            order = ("read-log", "read-half") if number % 2 == 0 else ("read-half", "read-log")
            for stream in order:
                cpu_before = spark_cpu_seconds()
                started = time.perf_counter()
                query = (spark.readStream.format("vdl").option("bootstrap.servers", broker.bootstrap)
                         .option("subscribe", stream).option("startingOffsets", "earliest")
                         .option("minPartitions", "2").load().writeStream.format("noop")
                         .trigger(availableNow=True).option("checkpointLocation", str(work / f"{stream}-{number}"))
                         .start())
                query.awaitTermination()
                if query.exception() is not None:
                    raise RuntimeError(str(query.exception()))
                if number > 0:
                    times[stream].append(time.perf_counter() - started)
                    cpu_after = spark_cpu_seconds()
                    cpu[stream].append((cpu_after[0] - cpu_before[0], cpu_after[1] - cpu_before[1]))
    finally:
        spark.stop()
    ratios = [a / b for a, b in zip(times["read-log"], times["read-half"], strict=True)]
    for stream, label in (("read-log", "all in the log"), ("read-half", f"first {log_start:,} in the table")):
        report.add(f"Spark read of {records:,} records, {label}", records / statistics.median(times[stream]),
                   "records/s", note="rounds " + ", ".join(f"{records / t:,.0f}" for t in times[stream]))
    report.add("read half table + half log / all log", statistics.median(ratios), "x", goal=0.9,
               note=f"median of per-round ratios {', '.join(f'{r:.2f}' for r in ratios)}")
    # CPU per record: the figure to trust on a shared machine (the rates follow its load).
    for stream, label in (("read-log", "all in the log"), ("read-half", "half in the table")):
        for index, kind in ((0, "Spark's Python workers"), (1, "Spark's JVM")):
            values = [used[index] / records * 1e6 for used in cpu[stream]]
            report.add(f"{kind}, CPU per record, {label}", statistics.median(values), "us/record",
                       note="rounds " + ", ".join(f"{v:.2f}" for v in values))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller counts, fewer rounds (a smoke run)")
    parser.add_argument("--only", default="produce,keepup,freshness,read", help="phases, comma-separated")
    parser.add_argument("--rounds", type=int, help="rounds of the produce and read comparisons (default 3)")
    args = parser.parse_args(argv)
    phases = set(args.only.split(","))
    unknown = phases - {"produce", "keepup", "freshness", "read"}
    if unknown:
        parser.error(f"--only: unknown phase(s) {', '.join(sorted(unknown))}")
    rounds = args.rounds or (1 if args.quick else 3)
    report = Report("bench_tables")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.support.cluster import start_broker

    with tempfile.TemporaryDirectory(prefix="vdl-bench-tables-") as tmp:
        work = Path(tmp)
        # fsync on, as in production; retention looks every second (the read phase waits for it).
        broker = start_broker(work / "broker", retention_check_ms=1000)
        try:
            if "produce" in phases:
                phase_produce(report, broker, work / "lake", rounds, 400_000 if args.quick else 2_000_000, 2)
            if "keepup" in phases:
                phase_keepup(report, broker, work / "lake", 8 if args.quick else 20)
            if "freshness" in phases:
                phase_freshness(report, broker, work / "lake", 10 if args.quick else 30)
            if "read" in phases:
                phase_read(report, broker, work / "lake", 1_000_000 if args.quick else 10_000_000, rounds, work)
        finally:
            broker.kill()
            if report.rows:
                report.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
