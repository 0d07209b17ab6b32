"""Build the Spark driver's class-data-sharing archive (vdl_dev/jvm.py: class_archive):

    .venv/bin/python -m vdl_dev.class_archive      (run by `make jars`)

A dynamic archive (JEP 350) holds the classes one JVM loaded, as that JVM ends: this one runs
the main job's warm-up (vdl_dev.pipeline.warm_up: format("vdl") read and write, foreachBatch,
delta-rs's append and MERGE) against a one-node VDL cluster, then delta-spark's append, MERGE and
reads (exercise_delta_spark), so the archive holds what the demo's, the jobs' and the tests'
sessions load first. It is written beside the jars, replaced whole.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from vdl_dev.jvm import QUIET_CLASS_SHARING, class_archive

JVM_EXIT_TIMEOUT_S = 300  # the JVM writes the archive (~200 MB) as it exits


def stop_jvm(spark: Any) -> None:
    """Stop the session and its JVM, and wait for the JVM to end (pyspark leaves it running for
    the next session until this process exits; it ends when its stdin closes)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway  # noqa: SLF001 - pyspark keeps the JVM's process only there
    spark.stop()
    if gateway is None:
        return
    process = gateway.proc
    gateway.shutdown()
    SparkContext._gateway = SparkContext._jvm = None  # noqa: SLF001
    process.stdin.close()
    process.wait(timeout=JVM_EXIT_TIMEOUT_S)


def exercise_delta_spark(spark: Any, work: Path) -> None:
    """delta-spark's part of a session: a table of the main job's aggregates written (an append,
    then a MERGE) and read back (spark.read.format("delta"), DESCRIBE HISTORY), as the notebooks
    and the tests use it."""
    from datetime import datetime
    from decimal import Decimal

    from vdl_dev.delta_sink import history, read_delta_table
    from vdl_dev.pipeline import ACCUMULATE, DeltaMergeSink, aggregate_orders

    table = str(work / "aggregates")
    sink = DeltaMergeSink(table, app_id="vdl-class-archive", combine=ACCUMULATE)
    order = (datetime(2026, 1, 1), "books", 2, Decimal("19.98"), datetime(2026, 1, 1))
    orders = spark.createDataFrame(
        [order], "event_time timestamp, category string, quantity int, amount decimal(10,2), produced_at timestamp")
    for batch_id in (0, 1):
        sink.merge(aggregate_orders(orders).drop("newest_produced"), batch_id)
    read_delta_table(spark, table).collect()
    history(spark, table).collect()


def build(target: Path) -> float:
    """Write the archive to `target`; returns the seconds it took."""
    from vdl_dev.cluster import start_cluster
    from vdl_dev.pipeline import warm_up
    from vdl_dev.session import JVM_OPTIONS, create_spark_session

    started = time.monotonic()
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="vdl-class-archive-") as tmp:
        base = Path(tmp)
        cluster = start_cluster(1, base, log=lambda _line: None)
        try:
            spark = create_spark_session(base, "vdl-class-archive",
                                         (*JVM_OPTIONS, f"-XX:ArchiveClassesAtExit={partial}", QUIET_CLASS_SHARING))
            try:
                warm_up(spark, cluster.bootstrap_servers, base / "warm-up")
                exercise_delta_spark(spark, base)
            finally:
                stop_jvm(spark)
        finally:
            cluster.stop()
    if not partial.is_file():
        raise RuntimeError(f"the Spark driver JVM wrote no class archive to {partial}")
    os.replace(partial, target)
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vdl_dev.class_archive", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=None, help=f"where to write it (default {class_archive()})")
    args = parser.parse_args(argv)
    target = args.output or class_archive()
    seconds = build(target)
    print(f"wrote {target} ({target.stat().st_size / 1e6:.0f} MB) in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
