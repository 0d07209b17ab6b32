"""The main job (VDL -> Spark -> Delta) next to the same job fed by Spark's own file source.

    .venv/bin/python -m benchmarks.bench_mainjob [--quick] [--records N] [--rounds 2]
                                                 [--demo-runs 2] [--follow-seconds 60]

In one run, on the demo's 3-node cluster (fsync on) and the demo's Spark settings (local[2]):
- the main job (vdl_dev/pipeline.py: read once, from_json, foreachBatch -> exactly-once enriched
  write + window aggregates MERGEd into Delta with delta-spark's DeltaTable.merge, idempotent by
  txnAppId/txnVersion) over the `orders` stream, and the same job over the same events as
  JSON-lines files (Spark's text source), both writing Delta the same way, alternately,
  `--rounds` each: rows/s (medians) and their ratio -- goal >= 0.9x. The same number of
  micro-batches for both.
- where each micro-batch's time goes: StreamingQueryProgress durationMs (latestOffset, getBatch,
  queryPlanning, addBatch, walCommit, commitOffsets), inside foreachBatch (enriched write,
  aggregation, delta-spark MERGE + commit), CPU seconds per process (Spark's JVM, its Python workers
  by kind, brokers), and one VdlWriterId round trip (what each exactly-once write task pays);
- freshness: `vdl demo --follow`'s loop at 5,000 events/s with a 1 s trigger: p50/p99 of the age
  of the newest event visible in Delta at each commit -- goal p99 <= 5 s; and the median
  micro-batch's work (foreachBatch: enriched write, aggregates, MERGE) -- goal under the trigger;
- `vdl demo --records N` wall time, start to exit (a fresh process each) -- goal <= 30 s for 1M.
Clients, brokers and Spark share the machine's cores; rounds alternate to share its noise.
"""

from __future__ import annotations

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.report import Report, percentile

DURATION_KEYS = ("latestOffset", "getBatch", "queryPlanning", "addBatch", "walCommit", "commitOffsets")


@dataclass
class Run:
    """One pipeline run: wall time, per-batch progress and foreachBatch timings, CPU by process."""

    kind: str
    seconds: float
    rows: int
    progress: list[dict[str, Any]]
    batches: list[Any]
    cpu: dict[str, float]
    timeline: list[tuple[float, float]] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.rows / self.seconds


def cpu_by_process() -> dict[int, tuple[str, float]]:
    """CPU seconds of this process's descendants, by pid, with their kind (reaped children count
    with their parent)."""
    import psutil

    found: dict[int, tuple[str, float]] = {}
    for process in psutil.Process().children(recursive=True):
        try:
            times = process.cpu_times()
            command = " ".join(process.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if "vdl_broker" in command or "vdl-broker" in command:
            kind = "brokers"
        elif "java" in process.name():
            kind = "spark JVM"
        elif "pyspark.daemon" in command or "pyspark" in command:
            kind = "python " + command.split()[-1].split(".")[-1]
        else:
            kind = "other"
        found[process.pid] = (kind, times.user + times.system + times.children_user + times.children_system)
    return found


def cpu_between(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds by kind spent between two samples, per process alive at the second one: a short
    worker that started and exited between them is not counted (an undercount, never a negative
    figure from a process that was sampled once and then gone)."""
    totals: dict[str, float] = {}
    for pid, (kind, seconds) in after.items():
        totals[kind] = totals.get(kind, 0.0) + seconds - before.get(pid, (kind, 0.0))[1]
    return totals


def write_files(directory: Path, config: Any) -> int:
    """The workload's events as JSON lines, one file per generator chunk; returns the file count."""
    from vdl_dev.workload import generate

    directory.mkdir(parents=True)
    count = 0
    for count, chunk in enumerate(generate(config), start=1):
        (directory / f"part-{count:05d}.json").write_bytes(b"\n".join(chunk.values.to_pylist()) + b"\n")
    return count


def file_source(spark: Any, directory: Path, files_per_trigger: int) -> Any:
    """Spark's text source over the JSON lines, shaped like the log stream (value, offset)."""
    from pyspark.sql import functions as F

    return (spark.readStream.format("text").option("maxFilesPerTrigger", str(files_per_trigger)).load(str(directory))
            .select(F.col("value").cast("binary").alias("value"), F.lit(-1).cast("long").alias("offset")))


def run_pipeline(spark: Any, kind: str, raw: Any, bootstrap: str, work: Path, records: int) -> Run:
    from vdl_client import ClientSettings, VdlClient
    from vdl_dev.pipeline import PipelinePaths, start_pipeline

    name = f"{kind}-{time.monotonic_ns()}"
    enriched = f"enriched-{name}"
    with VdlClient(ClientSettings.from_bootstrap(bootstrap)) as client:
        client.create_streams([enriched])
    before = cpu_by_process()
    started = time.perf_counter()
    pipeline = start_pipeline(spark, raw, bootstrap, PipelinePaths.under(work / name), enriched=enriched,
                              trigger={"availableNow": True}, name=name.replace("-", "_"))
    pipeline.query.awaitTermination()
    seconds = time.perf_counter() - started
    if pipeline.query.exception() is not None:
        raise RuntimeError(f"{kind} pipeline failed: {pipeline.query.exception()}")
    after = cpu_by_process()
    progress = [p for p in pipeline.query.recentProgress if p["numInputRows"]]
    rows = sum(int(p["numInputRows"]) for p in progress)
    if rows != records or sum(b.events for b in pipeline.batch.times) != records:
        raise RuntimeError(f"{kind} pipeline read {rows} rows, counted {sum(b.events for b in pipeline.batch.times)}, "
                           f"expected {records}")
    timeline = []
    elapsed = 0.0
    for p in progress:
        batch_seconds = p["durationMs"]["triggerExecution"] / 1000
        elapsed += batch_seconds
        timeline.append((elapsed, p["numInputRows"] / batch_seconds))
    cpu = cpu_between(before, after)
    return Run(kind, seconds, rows, progress, pipeline.batch.times, cpu, timeline)


def breakdown(runs: list[Run]) -> dict[str, float]:
    """Median over runs of each run's summed per-batch durations (s) and foreachBatch parts."""
    values: dict[str, list[float]] = {}
    for run in runs:
        for key in DURATION_KEYS:
            values.setdefault(key, []).append(sum(p["durationMs"].get(key, 0) for p in run.progress) / 1000)
        values.setdefault("first batch", []).append(run.progress[0]["durationMs"]["triggerExecution"] / 1000)
        for part in ("enrich_s", "aggregate_s", "delta_s"):
            values.setdefault(part, []).append(sum(getattr(b, part) for b in run.batches))
        for kind, seconds in run.cpu.items():
            values.setdefault(f"cpu {kind}", []).append(seconds)
    return {key: statistics.median(v) for key, v in values.items()}


def init_producer_id_ms(bootstrap: str, samples: int = 50) -> list[float]:
    from vdl_client import ClientSettings, VdlClient

    times = []
    with VdlClient(ClientSettings.from_bootstrap(bootstrap)) as client:
        for i in range(samples):
            started = time.perf_counter()
            client.writer_id(f"vdl-spark/bench/{i}/0")
            times.append((time.perf_counter() - started) * 1000)
    return times


def follow_freshness(spark: Any, bootstrap: str, work: Path, seconds: float, rate: int) -> Any:
    from vdl_client import ClientSettings, VdlClient
    from vdl_dev.follow import follow

    with VdlClient(ClientSettings.from_bootstrap(bootstrap)) as client:
        client.create_streams(["follow-orders", "follow-enriched"])
    return follow(spark, bootstrap, work / "follow", source="follow-orders", enriched="follow-enriched", rate=rate,
                  trigger_s=1.0, duration_s=seconds, stop=threading.Event(), say=lambda line: None)


def demo_wall_seconds(records: int) -> float:
    """`vdl demo --records N` as a user runs it (a fresh process), start to exit."""
    command = [str(Path(sys.executable).with_name("vdl")), "demo", "--records", str(records), "--no-progress"]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    seconds = time.perf_counter() - started
    if result.returncode != 0 or "OK:" not in result.stdout:
        raise RuntimeError(f"vdl demo failed ({result.returncode}): {result.stdout[-2000:]}{result.stderr[-2000:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="200,000 events, 1 round, short follow (a smoke run)")
    parser.add_argument("--records", type=int, help="events per pipeline run (default 1,000,000)")
    parser.add_argument("--rounds", type=int, help="rounds of (main job, file-source job), alternating (default 2)")
    parser.add_argument("--demo-runs", type=int, help="`vdl demo` runs for the wall time (default 2, quick 1)")
    parser.add_argument("--follow-seconds", type=float, help="freshness run length (default 60, quick 15)")
    parser.add_argument("--rate", type=int, default=5_000, help="freshness run: events per second (default 5,000)")
    args = parser.parse_args(argv)
    records = args.records or (200_000 if args.quick else 1_000_000)
    rounds = args.rounds or (1 if args.quick else 2)
    demo_runs = args.demo_runs if args.demo_runs is not None else (1 if args.quick else 2)
    follow_seconds = args.follow_seconds or (15.0 if args.quick else 60.0)

    from vdl_client import ClientSettings, VdlClient
    from vdl_dev.cluster import start_cluster
    from vdl_dev.pipeline import read_orders
    from vdl_dev.run import READ_TASKS, create_streams
    from vdl_dev.session import create_spark_session
    from vdl_dev.workload import CHUNK, WorkloadConfig, produce_workload

    report = Report("bench_mainjob" + ("_quick" if args.quick else ""))
    # First, as a user runs it: run after the benchmark's own session (whose JVM pyspark keeps
    # until this process exits), each demo took 32-33.5 s where the same code alone took 28-30 s.
    demo_seconds = [demo_wall_seconds(records) for _ in range(demo_runs)]
    work = Path(tempfile.mkdtemp(prefix="bench-mainjob-"))
    config = WorkloadConfig(records=records)
    runs: dict[str, list[Run]] = {"vdl": [], "file": []}
    spark = None
    cluster = start_cluster(3, work, log=lambda line: None)
    try:
        bootstrap = cluster.bootstrap_servers
        create_streams(bootstrap)  # orders, orders-enriched
        warm = WorkloadConfig(records=CHUNK, seed=7)
        with VdlClient(ClientSettings.from_bootstrap(bootstrap)) as client:
            client.create_streams(["orders-warmup"])
        produce_workload(bootstrap, "orders", config, progress=False)
        produce_workload(bootstrap, "orders-warmup", warm, progress=False)
        files = write_files(work / "files", config)
        write_files(work / "files-warmup", warm)
        spark = create_spark_session(work)
        per_trigger = -(-records // 4)
        files_per_trigger = max(1, -(-files // 4))

        def source(kind: str, warmup: bool = False) -> Any:
            if kind == "vdl":
                return read_orders(spark, bootstrap, "orders-warmup" if warmup else "orders", per_trigger,
                                   min_partitions=READ_TASKS)
            return file_source(spark, work / ("files-warmup" if warmup else "files"), files_per_trigger)

        for kind in ("vdl", "file"):  # JIT, Python workers, data source lookup: not measured
            run_pipeline(spark, kind, source(kind, warmup=True), bootstrap, work, CHUNK)
        for round_number in range(rounds):
            for kind in (("vdl", "file") if round_number % 2 == 0 else ("file", "vdl")):
                runs[kind].append(run_pipeline(spark, kind, source(kind), bootstrap, work, records))
                print(f"round {round_number + 1} {kind}: {runs[kind][-1].seconds:.1f} s, "
                      f"{runs[kind][-1].rate:,.0f} rows/s", flush=True)
        producer_ids = init_producer_id_ms(bootstrap)
        follow_report = follow_freshness(spark, bootstrap, work, follow_seconds, args.rate)
    finally:
        if spark is not None:
            spark.stop()
        cluster.stop()
    shutil.rmtree(work, ignore_errors=True)

    vdl_rates = [r.rate for r in runs["vdl"]]
    file_rates = [r.rate for r in runs["file"]]
    ratios = [v / f for v, f in zip(vdl_rates, file_rates, strict=True)]
    listed = lambda values, fmt: ", ".join(format(v, fmt) for v in values)  # noqa: E731
    batches = len(runs["vdl"][0].progress)
    report.add("main job: vdl -> Spark -> Delta + vdl", statistics.median(vdl_rates), "rows/s",
               note=f"{records:,} events, {batches} micro-batches; rounds: {listed(vdl_rates, ',.0f')}")
    report.add("same job fed by Spark's file source (JSON lines)", statistics.median(file_rates), "rows/s",
               note=f"rounds: {listed(file_rates, ',.0f')}")
    report.add("main job / file-source job", statistics.median(ratios), "x", 0.9,
               note=f"median of per-round ratios: {listed(ratios, '.2f')}")
    freshness = follow_report.freshness
    report.add("freshness p50 (follow, 1 s trigger)", statistics.median(freshness), "s", higher_is_better=False,
               note=f"{args.rate:,} events/s for {follow_seconds:g} s, {len(freshness)} batches")
    report.add("freshness p99 (follow, 1 s trigger)", percentile(freshness, 0.99), "s", 5.0, higher_is_better=False,
               note=f"max {max(freshness):.2f} s; all counted once: {follow_report.ok}")
    work = [b.work_s for b in follow_report.batches]
    report.add("micro-batch work p50 (follow, 1 s trigger)", statistics.median(work), "s", 1.0,
               higher_is_better=False,
               note=f"foreachBatch: enriched write through Delta commit; p99 {percentile(work, 0.99):.2f} s")
    if demo_seconds:
        report.add(f"vdl demo --records {records:,}: wall, start to exit", statistics.median(demo_seconds), "s",
                   30.0 if records == 1_000_000 else None, higher_is_better=False,
                   note=f"runs: {listed(demo_seconds, '.1f')}")
    report.add("VdlWriterId round trip (once per exactly-once write task)", statistics.median(producer_ids), "ms",
               higher_is_better=False, note=f"p99 {percentile(producer_ids, 0.99):.2f} ms")
    parts = {kind: breakdown(runs[kind]) for kind in runs}
    for key in sorted(set(parts["vdl"]) | set(parts["file"]), key=_order):
        report.add(f"breakdown: {key}", parts["vdl"].get(key, 0.0), "s",
                   note=f"file-source job: {parts['file'].get(key, 0.0):.2f} s (sum over the run's batches)")
    middle = rounds // 2
    report.throughput("main job, per micro-batch", runs["vdl"][middle].timeline, "rows/s")
    report.throughput("file-source job, per micro-batch", runs["file"][middle].timeline, "rows/s", baseline=True)
    report.latency("main job micro-batch duration", [p["durationMs"]["triggerExecution"] / 1000
                                                     for r in runs["vdl"] for p in r.progress], "s")
    report.latency("file-source job micro-batch duration", [p["durationMs"]["triggerExecution"] / 1000
                                                            for r in runs["file"] for p in r.progress], "s",
                   baseline=True)
    report.latency("freshness (follow mode)", freshness, "s")
    path = report.finish()
    details = json.loads(path.read_text())
    details["breakdown"] = parts
    details["follow"] = [{"batch": b.batch_id, "events": b.events, "freshness_s": b.freshness_s}
                         for b in follow_report.batches]
    path.write_text(json.dumps(details, indent=2))
    return 0


def _order(key: str) -> tuple[int, str]:
    ranking = [*DURATION_KEYS, "first batch", "enrich_s", "aggregate_s", "delta_s"]
    return (ranking.index(key), key) if key in ranking else (len(ranking), key)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
