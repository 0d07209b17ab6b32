"""The main job's Delta MERGE of one micro-batch's window aggregates: the job's settings against
Delta's and Spark's defaults.

    .venv/bin/python -m benchmarks.bench_delta_merge [--quick] [--merges 30] [--rounds 2]

What `vdl demo --follow` pays per micro-batch besides its enriched write: MainJobBatch.merge_aggregates
into a DeltaMergeSink (delta-spark's DeltaTable.merge, idempotent by txnAppId/txnVersion, the key
bounds in its condition). Each side runs in a fresh local session with the demo's settings
(vdl_dev.session.create_spark_session), one after the other, the order alternating by round:

- job settings: the MERGE run under SMALL_MERGE_CONF, the table created with
  AGGREGATE_TABLE_PROPERTIES (vdl_dev/pipeline.py);
- defaults: only the MERGE's materializeSource=none (what the job set before), Spark's code
  generation and Delta's checkpoint every 10 commits.

Each side makes `--merges` MERGEs into a new table, one micro-batch's aggregates each (8
categories of one 1-minute window; the window moves every 12 batches, as at 5,000 events/s with
~5-s micro-batches), after 3 unrecorded ones. Per side: seconds per MERGE (median and max over
every round's MERGEs; their percentiles in the plot) and the session JVM's CPU seconds per MERGE
(user + system, all its threads). No goal of its own: the follow loop's freshness (bench_mainjob)
is what it serves.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from benchmarks.report import Report, percentile

SIDES = ("job settings", "defaults")
WARM_UP_MERGES = 3
CATEGORIES = ("books", "toys", "food", "garden", "music", "sports", "tools", "beauty")


def _orders(spark, batch: int):  # noqa: ANN001, ANN202 - a pyspark session and DataFrame
    """One micro-batch's orders: two per category, in the minute window of `batch`."""
    from pyspark.sql import functions as F

    from vdl_dev.pipeline import order_schema

    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=batch // 12, seconds=batch % 12)
    rows = [(f"o{batch}-{c}-{i}", f"c{i}", at, c, "p1", 1 + i, Decimal("12.50"), Decimal(12.5 * (1 + i)), "DE", "card")
            for c in CATEGORIES for i in range(2)]
    return (spark.createDataFrame(rows, order_schema())
            .withColumn("source_offset", F.lit(batch).cast("long"))
            .withColumn("produced_at", F.current_timestamp()))


def run_side(side: str, merges: int) -> dict[str, object]:
    """In this process: a session, `merges` + warm-up MERGEs; seconds of each, JVM CPU per MERGE."""
    import psutil

    from vdl_dev.delta_sink import DeltaMergeSink
    from vdl_dev.pipeline import (
        ACCUMULATE,
        AGGREGATE_TABLE_PROPERTIES,
        INTERPRETED_CONF,
        SMALL_MERGE_CONF,
        MainJobBatch,
        aggregate_orders,
    )
    from vdl_dev.session import create_spark_session

    def jvm_cpu() -> float:
        return sum(sum(p.cpu_times()[:2]) for p in psutil.Process().children(recursive=True) if p.name() == "java")

    with tempfile.TemporaryDirectory(prefix="bench-delta-merge-") as scratch:
        base = Path(scratch)
        spark = create_spark_session(base, app_name=f"bench-delta-merge ({side})")
        try:
            job_settings = side == SIDES[0]
            sink = DeltaMergeSink(str(base / "orders_per_minute"), app_id="bench", combine=ACCUMULATE,
                                  table_properties=AGGREGATE_TABLE_PROPERTIES if job_settings else {})
            # The defaults' side keeps what the job set before: all but the code generation settings.
            settings = {key: value for key, value in SMALL_MERGE_CONF.items()
                        if job_settings or key not in INTERPRETED_CONF}
            job = MainJobBatch(sink, "unused:9092", "unused", merge_settings=settings)
            seconds, cpu = [], 0.0
            for batch in range(WARM_UP_MERGES + merges):
                orders = _orders(spark, batch)
                table = aggregate_orders(orders).toArrow()
                before, started = jvm_cpu(), time.monotonic()
                job.merge_aggregates(table, orders, batch)
                if batch >= WARM_UP_MERGES:
                    seconds.append(time.monotonic() - started)
                    cpu += jvm_cpu() - before
        finally:
            spark.stop()
    return {"seconds": seconds, "cpu_per_merge": cpu / merges}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_delta_merge", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke-sized: 1 round of 5 MERGEs")
    parser.add_argument("--merges", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.merges, args.rounds = 5, 1
    if args.child:
        print(json.dumps(run_side(args.child, args.merges)))
        return 0

    seen: dict[str, list[dict]] = {side: [] for side in SIDES}
    for round_index in range(args.rounds):
        order = SIDES if round_index % 2 == 0 else tuple(reversed(SIDES))
        for side in order:
            out = subprocess.run([sys.executable, "-m", "benchmarks.bench_delta_merge", "--child", side,
                                  "--merges", str(args.merges)], check=True, capture_output=True, text=True).stdout
            seen[side].append(json.loads(out.strip().splitlines()[-1]))
            print(f"round {round_index + 1}, {side}: median {statistics.median(seen[side][-1]['seconds']):.2f} s, "
                  f"JVM CPU {seen[side][-1]['cpu_per_merge']:.2f} s per MERGE", flush=True)

    report = Report("bench_delta_merge")
    medians, cpus = {}, {}
    for side in SIDES:
        every = [s for run in seen[side] for s in run["seconds"]]
        medians[side] = statistics.median(every)
        cpus[side] = statistics.median(run["cpu_per_merge"] for run in seen[side])
        report.add(f"MERGE s, median ({side})", medians[side], "s", higher_is_better=False)
        report.add(f"MERGE s, max ({side})", percentile(every, 1.0), "s", higher_is_better=False,
                   note=f"{len(every)} MERGEs")
        report.add(f"JVM CPU s per MERGE ({side})", cpus[side], "s", higher_is_better=False)
        report.latency(f"MERGE ({side})", every, "s", baseline=side != SIDES[0])
        last = seen[side][-1]["seconds"]
        series = report.throughput(side, [(WARM_UP_MERGES + i, s) for i, s in enumerate(last)], "s per MERGE",
                                   baseline=side != SIDES[0])
        series.x_label, series.title = "table version (last round)", "seconds per MERGE"
    report.add("MERGE s, job settings / defaults", medians[SIDES[0]] / medians[SIDES[1]], "x", higher_is_better=False)
    report.add("JVM CPU per MERGE, job settings / defaults", cpus[SIDES[0]] / cpus[SIDES[1]], "x",
               higher_is_better=False)
    report.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
