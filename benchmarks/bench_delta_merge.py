"""The main job's Delta MERGE of one micro-batch's window aggregates: delta-rs in the driver (the
job's) against delta-spark's DeltaTable.merge (what it ran before).

    .venv/bin/python -m benchmarks.bench_delta_merge [--quick] [--merges 30] [--rounds 2]

What `vdl demo --follow` pays per micro-batch besides its enriched write and aggregates: the
batch's aggregates, collected as an Arrow table, into a DeltaMergeSink (idempotent by the app
transaction, the key bounds in its condition). Each side runs in a fresh local session with the
demo's settings (vdl_dev.session.create_spark_session), one after the other, the order
alternating by round:

- delta-rs: MainJobBatch.merge_aggregates, the job's (DeltaMergeSink.merge_arrow);
- delta-spark: the same rows as a DataFrame through DeltaMergeSink.merge under SMALL_MERGE_CONF
  (below: the settings the job tuned that MERGE with), the key bounds passed.

Both create the table with AGGREGATE_TABLE_PROPERTIES. Each side makes `--merges` MERGEs into a
new table, one micro-batch's aggregates each (8 categories of one 1-minute window; the window
moves every 12 batches, as at 5,000 events/s with ~5-s micro-batches), after 3 unrecorded ones.
Per side: seconds per MERGE (median and max over every round's MERGEs; their percentiles in the
plot) and CPU seconds per MERGE (user + system, all threads) of the session's JVM and of the
driver's Python process (where delta-rs runs). No goal of its own: the follow loop's micro-batch
(bench_mainjob) is what it serves.
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

SIDES = ("delta-rs", "delta-spark")
# delta-spark's MERGE of a few hundred rows, tuned (its defaults are sized for more): the batch is
# rows in the driver's memory, the same on every read, so Delta need not copy it before the MERGE
# reads it twice (its "auto" mode copies any source it cannot prove deterministic: one more Spark
# job per MERGE; DeltaSQLConf: all/auto/none); and no code generation: generating and compiling
# Java for each operator, and in every task for each projection over the log's wide schema, costs
# more than running a query over a few hundred rows interpreted (the MERGE of 8 rows 1.43 s
# instead of 1.92 s). SQLConf: codegen.factoryMode FALLBACK (the default), CODEGEN_ONLY or
# NO_CODEGEN.
SMALL_MERGE_CONF = {"spark.databricks.delta.merge.materializeSource": "none",
                    "spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
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
    """In this process: a session, `merges` + warm-up MERGEs; seconds of each, CPU per MERGE."""
    import psutil
    import pyarrow.compute as pc

    from vdl_dev.delta_sink import DeltaMergeSink, session_settings
    from vdl_dev.pipeline import ACCUMULATE, AGGREGATE_TABLE_PROPERTIES, MainJobBatch, aggregate_orders
    from vdl_dev.session import create_spark_session

    driver = psutil.Process()

    def cpu() -> tuple[float, float]:
        jvm = sum(sum(p.cpu_times()[:2]) for p in driver.children(recursive=True) if p.name() == "java")
        return jvm, sum(driver.cpu_times()[:2])

    with tempfile.TemporaryDirectory(prefix="bench-delta-merge-") as scratch:
        base = Path(scratch)
        spark = create_spark_session(base, app_name=f"bench-delta-merge ({side})")
        try:
            sink = DeltaMergeSink(str(base / "orders_per_minute"), app_id="bench", combine=ACCUMULATE,
                                  table_properties=AGGREGATE_TABLE_PROPERTIES)
            job = MainJobBatch(sink, "unused:9092", "unused")
            # The table's columns in Spark's types (not Arrow's round trip of them), for the DataFrame.
            schema = aggregate_orders(_orders(spark, 0)).drop("newest_produced").schema
            seconds, jvm_cpu, driver_cpu = [], 0.0, 0.0
            for batch in range(WARM_UP_MERGES + merges):
                orders = _orders(spark, batch)
                table = aggregate_orders(orders).toArrow()
                before, started = cpu(), time.monotonic()
                if side == "delta-rs":
                    job.merge_aggregates(table, batch)
                else:
                    rows = spark.createDataFrame(table.drop_columns(["newest_produced"]), schema=schema)
                    bounds = pc.min_max(table["window_start"])
                    with session_settings(spark, SMALL_MERGE_CONF):
                        sink.merge(rows, batch, key_bounds={"window_start": (bounds["min"].as_py(),
                                                                             bounds["max"].as_py())})
                if batch >= WARM_UP_MERGES:
                    seconds.append(time.monotonic() - started)
                    after = cpu()
                    jvm_cpu += after[0] - before[0]
                    driver_cpu += after[1] - before[1]
        finally:
            spark.stop()
    return {"seconds": seconds, "jvm_cpu_per_merge": jvm_cpu / merges, "driver_cpu_per_merge": driver_cpu / merges}


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
            last = seen[side][-1]
            print(f"round {round_index + 1}, {side}: median {statistics.median(last['seconds']):.3f} s, CPU per "
                  f"MERGE: JVM {last['jvm_cpu_per_merge']:.3f} s, driver {last['driver_cpu_per_merge']:.3f} s",
                  flush=True)

    report = Report("bench_delta_merge")
    medians, cpus = {}, {}
    for side in SIDES:
        every = [s for run in seen[side] for s in run["seconds"]]
        medians[side] = statistics.median(every)
        jvm = statistics.median(run["jvm_cpu_per_merge"] for run in seen[side])
        driver = statistics.median(run["driver_cpu_per_merge"] for run in seen[side])
        cpus[side] = jvm + driver
        report.add(f"MERGE s, median ({side})", medians[side], "s", higher_is_better=False)
        report.add(f"MERGE s, max ({side})", percentile(every, 1.0), "s", higher_is_better=False,
                   note=f"{len(every)} MERGEs")
        report.add(f"CPU s per MERGE, JVM + driver ({side})", cpus[side], "s", higher_is_better=False,
                   note=f"JVM {jvm:.3f}, driver {driver:.3f}")
        report.latency(f"MERGE ({side})", every, "s", baseline=side != SIDES[0])
        last = seen[side][-1]["seconds"]
        series = report.throughput(side, [(WARM_UP_MERGES + i, s) for i, s in enumerate(last)], "s per MERGE",
                                   baseline=side != SIDES[0])
        series.x_label, series.title = "table version (last round)", "seconds per MERGE"
    report.add("MERGE s, delta-rs / delta-spark", medians[SIDES[0]] / medians[SIDES[1]], "x", higher_is_better=False)
    report.add("CPU per MERGE, delta-rs / delta-spark", cpus[SIDES[0]] / cpus[SIDES[1]], "x",
               higher_is_better=False)
    report.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
