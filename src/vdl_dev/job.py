"""`python -m vdl_dev.job --bootstrap HOST:PORT --data-dir DIR`: the main job alone, as its own process.

The same job as `vdl demo` (vdl_dev/pipeline.py: orders -> enriched stream + window aggregates
MERGEd into Delta), against a cluster that is already running (`vdl dev-cluster`, or any VDL),
with its checkpoint and Delta table under DIR (delta/orders_per_minute, checkpoints/main_job),
kept across runs: started again after a crash -- even a kill -9 of this driver mid-batch -- it
resumes from its checkpoint, and each output still holds every event once. It runs with
trigger(availableNow): every record in the source when it starts, then it exits (0). One line
per committed micro-batch on stdout ("batch N: E events, W windows merged").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vdl_dev.session import (
    create_spark_session,
    is_interrupt,
    quiet_interrupts,
    shutdown,
    sigterm_as_interrupt,
)

READ_TASKS = 2  # minPartitions: as in `vdl demo`


def run_job(bootstrap: str, data_dir: Path, source: str, enriched: str, max_offsets_per_trigger: int | None,
            read_tasks: int = READ_TASKS) -> int:
    from vdl_dev.pipeline import PipelinePaths, read_orders, start_pipeline

    data_dir.mkdir(parents=True, exist_ok=True)
    spark = pipeline = None
    try:
        with sigterm_as_interrupt(), quiet_interrupts():
            try:
                spark = create_spark_session(data_dir, app_name="vdl-main-job")
                paths = PipelinePaths.under(data_dir)
                raw = read_orders(spark, bootstrap, source, max_offsets_per_trigger, min_partitions=read_tasks)
                pipeline = start_pipeline(
                    spark, raw, bootstrap, paths, enriched=enriched, trigger={"availableNow": True},
                    on_batch=lambda t: print(f"batch {t.batch_id}: {t.events} events, {t.windows} windows merged",
                                             flush=True))
                pipeline.query.awaitTermination()
                error = pipeline.query.exception()
                if error is not None:
                    print(f"vdl job: the query failed: {error}", file=sys.stderr)
                    return 1
                print(f"done: Delta commits {pipeline.sink.committed}, replayed batches skipped "
                      f"{pipeline.sink.skipped}", flush=True)
                return 0
            finally:
                shutdown(pipeline, spark, None, print)
    except BaseException as error:
        if not is_interrupt(error):
            raise
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m vdl_dev.job", description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True, help="bootstrap servers of a running cluster")
    parser.add_argument("--data-dir", type=Path, required=True,
                        help="the job's checkpoint and Delta table go (and stay) here")
    parser.add_argument("--source", default="orders", help="the orders stream (default orders)")
    parser.add_argument("--enriched", default="orders-enriched",
                        help="the enriched stream, which must exist (default orders-enriched)")
    parser.add_argument("--max-offsets-per-trigger", type=int, help="records per micro-batch (default: all)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.max_offsets_per_trigger is not None and args.max_offsets_per_trigger < 1:
        print("vdl job: error: --max-offsets-per-trigger must be >= 1", file=sys.stderr)
        return 2
    return run_job(args.bootstrap, args.data_dir, args.source, args.enriched, args.max_offsets_per_trigger)


if __name__ == "__main__":
    sys.exit(main())
