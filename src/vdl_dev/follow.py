"""`vdl demo --follow [--rate N] [--trigger S] [--duration S]`: the main job, kept fresh.

Orders keep arriving at a steady rate (default 5,000 events/s, event times on the wall clock)
while the same job as `vdl demo` (vdl_dev/pipeline.py) runs with trigger(processingTime=...).
After each micro-batch's Delta commit it prints the end-to-end freshness: the age of the newest
event visible in the Delta table (now minus the time that event was produced). Ctrl-C (or
--duration) stops the producer; the job then processes what was produced, the totals are checked
as in `vdl demo`, and a summary gives the freshness percentiles. A second Ctrl-C, or SIGTERM,
stops everything at once (exit 130).
"""

from __future__ import annotations

import shutil
import signal
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from vdl_dev.cluster import DemoCluster, end_offset, start_cluster
from vdl_dev.session import (
    create_spark_session,
    deferred_interrupts,
    is_interrupt,
    prepare,
    quiet_interrupts,
    shutdown,
    sigterm_as_interrupt,
)

DEFAULT_RATE = 5_000
DEFAULT_TRIGGER_S = 1.0


@dataclass
class FollowReport:
    """What a follow run saw: per-batch freshness and the end-of-run totals."""

    produced: int = 0
    batches: list[Any] = field(default_factory=list)  # pipeline.BatchTimes, in commit order
    delta_orders: int = 0
    enriched_out: int = 0

    @property
    def freshness(self) -> list[float]:
        return [b.freshness_s for b in self.batches if b.freshness_s is not None]

    @property
    def ok(self) -> bool:
        return self.produced > 0 and self.delta_orders == self.produced and self.enriched_out == self.produced


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))] if ordered else float("nan")


def batch_line(times: Any) -> str:
    fresh = times.freshness_s
    freshness = f"{fresh:.2f} s" if fresh is not None else "n/a"
    return (f"batch {times.batch_id}: {times.events:,} events in {times.work_s:.2f} s (enriched write "
            f"{times.enrich_s:.2f} s, window aggregates {times.aggregate_s:.2f} s, Delta MERGE {times.delta_s:.2f} s), "
            f"{times.windows} windows merged; freshness {freshness} (age of the newest event visible in Delta)")


def summary_line(report: FollowReport, seconds: float) -> str:
    values = report.freshness
    if not values:
        return f"follow: {report.produced:,} events in {seconds:.1f} s, no batch committed"
    return (f"follow: {report.produced:,} events in {seconds:.1f} s, {len(report.batches)} micro-batches; "
            f"freshness p50 {statistics.median(values):.2f} s, p99 {percentile(values, 0.99):.2f} s, "
            f"max {max(values):.2f} s; a micro-batch's work p50 "
            f"{statistics.median(b.work_s for b in report.batches):.2f} s")


class _StopRequest:
    """The first Ctrl-C asks for a clean stop (no more events, process what was produced, check);
    a second one interrupts at once."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._previous: Any = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.event.is_set():
            raise KeyboardInterrupt(f"signal {signum}")
        self.event.set()

    def __enter__(self) -> _StopRequest:
        self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self._previous)


# StreamExecution's status once its sources are open and it looks for data.
_LISTENING = ("Waiting for data to arrive", "Waiting for next trigger")


def _wait_until_listening(query: Any, timeout_s: float = 120.0) -> None:
    """Until the query has started and looked for data once (or stopped, or the time is up:
    producing then starts anyway, and the query catches up)."""
    deadline = time.monotonic() + timeout_s
    while query.isActive and query.status.get("message") not in _LISTENING and time.monotonic() < deadline:
        query.awaitTermination(0.1)


def delta_orders(table_path: str | Path) -> int:
    """The orders the job's table counts (0 without a table), read with delta-rs as the demo's end
    reads it (vdl_dev.run.show_table): no Spark job."""
    from vdl_dev.delta_sink import query_delta_value

    return int(query_delta_value(table_path, "SELECT sum(orders) FROM t") or 0)


def follow(spark: Any, bootstrap: str, base: Path, *, source: str, enriched: str, rate: int = DEFAULT_RATE,
           trigger_s: float = DEFAULT_TRIGGER_S, duration_s: float | None = None, seed: int = 42,
           stop: threading.Event | None = None, say: Callable[[str], None] = print,
           config: Any = None) -> FollowReport:
    """Produce at `rate` into `source` and run the main job on it until `stop` is set or
    `duration_s` passed; then drain and fill in the totals. The streams must exist."""
    from vdl_dev.pipeline import PipelinePaths, read_orders, start_pipeline
    from vdl_dev.run import READ_TASKS
    from vdl_dev.workload import SteadyProducer, WorkloadConfig

    stop = stop or threading.Event()
    report = FollowReport()
    paths = PipelinePaths.under(base)

    def on_batch(times: Any) -> None:
        report.batches.append(times)
        say(batch_line(times))

    # The query starts first (its source's Python process, the stream's start offset) and waits
    # for events, as a job that runs all along would: the first event does not wait for it.
    raw = read_orders(spark, bootstrap, source, min_partitions=READ_TASKS)
    pipeline = start_pipeline(spark, raw, bootstrap, paths, enriched=enriched, name="main_job_follow",
                              trigger={"processingTime": f"{trigger_s:g} seconds"}, on_batch=on_batch)
    config = config or WorkloadConfig(records=10**12, seed=seed, start_ms=int(time.time() * 1000),
                                      events_per_second=rate)
    producer = SteadyProducer(bootstrap, source, config, rate)
    try:
        _wait_until_listening(pipeline.query)
        producer.start()
        deadline = None if duration_s is None else time.monotonic() + duration_s
        while not stop.wait(0.25):
            if deadline is not None and time.monotonic() >= deadline:
                break
            if not pipeline.query.isActive:
                raise RuntimeError(f"query {pipeline.query.name} failed: {pipeline.query.exception()}")
        report.produced = producer.stop()
        say(f"stopped producing after {report.produced:,} events; processing what is left...")
        pipeline.query.processAllAvailable()  # every produced event is acknowledged, so available
    finally:
        producer.halt()
        pipeline.stop()
    report.delta_orders = delta_orders(paths.delta_table)
    report.enriched_out = end_offset(bootstrap, enriched)
    return report


def run_follow(rate: int = DEFAULT_RATE, trigger_s: float = DEFAULT_TRIGGER_S, duration_s: float | None = None,
               data_dir: Path | None = None, nodes: int = 3, *, seed: int = 42, keep: bool = False,
               say: Callable[[str], None] = print) -> int:
    """`vdl demo --follow`: 0 when Delta and the enriched stream account for every event produced."""
    from vdl_dev.pipeline import warm_up_or_say
    from vdl_dev.run import ENRICHED_STREAM, SOURCE_STREAM, WARM_UP_DIR, create_streams

    base, temporary = prepare(data_dir)
    cluster: DemoCluster | None = None
    spark = None
    started = time.monotonic()
    try:
        with sigterm_as_interrupt(), quiet_interrupts():
            try:
                say(f"VDL demo --follow: {rate:,} order events/s, a micro-batch every {trigger_s:g} s, "
                    f"data in {base}" + ("" if duration_s is None else f", for {duration_s:g} s"))
                cluster = start_cluster(nodes, base, log=say)
                cluster.write_state()
                bootstrap = cluster.bootstrap_servers
                create_streams(bootstrap)
                say("starting Spark (local[2])...")
                with deferred_interrupts():
                    spark = create_spark_session(base)
                # Before the first event: freshness counts from it, and a cold first micro-batch
                # would add Spark's start-up to it (vdl_dev.pipeline.warm_up).
                warm_up_or_say(spark, bootstrap, base / WARM_UP_DIR, say)
                say("producing and processing; Ctrl-C stops producing, processes the rest and checks")
                with _StopRequest() as request:
                    report = follow(spark, bootstrap, base, source=SOURCE_STREAM, enriched=ENRICHED_STREAM,
                                    rate=rate, trigger_s=trigger_s, duration_s=duration_s, seed=seed,
                                    stop=request.event, say=say)
                say(summary_line(report, time.monotonic() - started))
                verdict = "OK" if report.ok else "MISMATCH"
                say(f"{verdict}: {report.produced:,} produced, {report.delta_orders:,} counted in Delta, "
                    f"{report.enriched_out:,} enriched")
                return 0 if report.ok else 1
            finally:
                shutdown(None, spark, cluster, say)
    except BaseException as error:
        if not is_interrupt(error):
            raise
        say("\ninterrupted: everything stopped")
        return 130
    finally:
        if temporary and not keep:
            shutil.rmtree(base, ignore_errors=True)

