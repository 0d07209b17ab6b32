"""`vdl demo [--records N] [--data-dir DIR] [--nodes N] [--follow ...]`: the whole product in one command.

Starts Spark and, meanwhile, a local VDL cluster; creates the streams and produces the order
workload; the Spark job (vdl_dev/pipeline.py) starts as soon as Spark is up and runs micro-batches
back to back on what has been produced until it has processed every record; then it prints what
happened and the top rows of the Delta table, and stops everything. `--follow` keeps producing at
a steady rate instead and prints each batch's freshness (vdl_dev/follow.py). Ctrl-C or SIGTERM at
any point stops the query, Spark and every broker (try/finally; brokers in their own process
groups) and exits with 130.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vdl_dev.cluster import DemoCluster, end_offset, start_cluster
from vdl_dev.raw_table import raw_table_config, raw_table_path, raw_table_rows
from vdl_dev.session import (
    Background,
    create_spark_session,
    interrupt_handler,
    is_interrupt,
    prepare,
    quiet_interrupts,
    raise_if_interrupted,
    shutdown,
    sigterm_as_interrupt,
)
from vdl_dev.session import prepare as _prepare  # noqa: F401 - the name tests use

DESCRIPTION = ("Start a local VDL cluster, produce order events, run a Spark structured-streaming job from "
               "format('vdl') to a Delta table and back to a log stream, print what happened, stop everything.")
SOURCE_STREAM = "orders"
ENRICHED_STREAM = "orders-enriched"
READ_TASKS = 2  # minPartitions: each micro-batch is read and parsed by one task per core
WARM_UP_DIR = "warm-up"  # the warm-up's scratch table and checkpoint (vdl_dev.pipeline.warm_up)
# Micro-batches of half the records, at most BATCH_RECORDS_MOST each: every micro-batch pays ~2-3 s
# whatever its size (the Delta MERGE's planning and commit, the jobs' start), so fewer, larger
# ones finish sooner. 1M events: 2 micro-batches in 40.0-50.3 s wall, 4 in 46.2-57.3 s
# (alternating pairs); the cap bounds the batch Spark caches for its two outputs.
BATCH_RECORDS_MOST = 500_000
BATCH_RECORDS_LEAST = 10_000


def default_batch_records(records: int) -> int:
    """maxOffsetsPerTrigger of the demo's job for `records` events (--max-offsets-per-trigger)."""
    return max(BATCH_RECORDS_LEAST, min(BATCH_RECORDS_MOST, -(-records // 2)))


@dataclass
class DemoReport:
    records_in: int = 0
    produce_seconds: float = 0.0
    pipeline_seconds: float = 0.0
    batches: int = 0
    delta_rows: int = 0
    delta_version: int = -1
    delta_orders: int = 0
    enriched_out: int = 0
    raw_rows: int = 0  # rows of the orders stream's own Delta table (vdl_dev/raw_table.py)

    @property
    def ok(self) -> bool:
        return self.records_in == self.delta_orders == self.enriched_out == self.raw_rows


def create_streams(bootstrap: str, base: Path | None = None) -> None:
    """The demo's streams; with `base`, the orders stream is also a raw Delta table under it."""
    from vdl_client import ClientSettings, VdlClient

    with VdlClient(ClientSettings.from_bootstrap(bootstrap, client_id="vdl-demo")) as client:
        client.create_stream(SOURCE_STREAM, config=raw_table_config(base) if base is not None else None)
        client.create_streams([ENRICHED_STREAM])


def processed_through(query: Any, stream: str) -> int:
    """The source offset of `stream` the query's last completed micro-batch ended at."""
    progress = query.lastProgress
    if not progress or not progress.get("sources"):
        return 0
    end = progress["sources"][0].get("endOffset") or {}
    if isinstance(end, str):
        end = json.loads(end)
    return int(end.get(stream, 0))


def _wait_for(query: Any, total: int, progress: bool) -> None:
    """Until the query has processed the source's offsets [0, total); a bar follows them."""
    from tqdm import tqdm

    with tqdm(total=total, unit=" records", unit_scale=True, desc="spark job", disable=not progress) as bar:
        while True:
            raise_if_interrupted()
            ended = query.awaitTermination(0.5)
            through = min(processed_through(query, SOURCE_STREAM), total)
            bar.update(max(0, through - bar.n))
            if ended or through >= total:
                break
    if query.exception() is not None:
        raise RuntimeError(f"query {query.name} failed: {query.exception()}")
    if through < total:
        raise RuntimeError(f"query {query.name} stopped at offset {through} of {total}")


def batch_lines(pipeline: Any, most: int = 8) -> list[str]:
    """Where each micro-batch's time went (the first `most`): Spark's progress (trigger total) and
    the parts of foreachBatch (enriched write, window aggregates, Delta MERGE)."""
    progress = {p["batchId"]: p for p in pipeline.query.recentProgress if p.get("numInputRows")}
    lines = []
    batches = pipeline.batch.times
    for times in batches[:most]:
        total = progress.get(times.batch_id, {}).get("durationMs", {}).get("triggerExecution", 0) / 1000
        lines.append(f"  micro-batch {times.batch_id}: {times.events:,} events in {total:.1f} s (enriched write "
                     f"{times.enrich_s:.1f} s, window aggregates {times.aggregate_s:.1f} s, Delta MERGE "
                     f"{times.delta_s:.2f} s)")
    if len(batches) > most:
        lines.append(f"  ... and {len(batches) - most} micro-batches more")
    return lines


def read_results(table_path: str, raw_path: str, raw_rows: int,
                 say: Callable[[str], None]) -> tuple[int, int, int, int]:
    """The demo's end, read by delta-rs (`deltalake`, the engine of the aggregates' MERGEs and of
    the brokers' raw table): the aggregates table shown (show_table) and the raw table's rows once
    it holds `raw_rows` (raw_table_rows); returns (rows, table version, total orders, raw rows).
    delta-spark took 2.3-3.0 s of Spark jobs for these reads of two small tables (each table's
    log replayed and its query planned), delta-rs ~0.06 s."""
    rows, version, orders = show_table(table_path, say)
    return rows, version, orders, raw_table_rows(raw_path, raw_rows)


def show_table(table_path: str, say: Callable[[str], None], top: int = 10) -> tuple[int, int, int]:
    """Print the top windows by revenue and the table's history (DESCRIBE HISTORY's columns);
    returns (rows, table version, total orders)."""
    import pandas as pd
    from deltalake import DeltaTable

    from vdl_dev.delta_sink import history_frame, query_delta

    table = DeltaTable(table_path)
    frame = query_delta(table, "SELECT * FROM t").to_pandas()
    for column, dtype in frame.dtypes.items():
        if isinstance(dtype, pd.DatetimeTZDtype):  # shown as Spark shows them: UTC, its session's zone
            frame[column] = frame[column].dt.tz_convert(None)
    rows, orders = len(frame), frame["orders"].sum()
    best = frame.sort_values("revenue", ascending=False, kind="stable").head(top)
    version = table.version()
    say(f"\ntop {top} of {rows} rows of {table_path} (Delta version {version}), by revenue:")
    say(best.to_string(index=False))
    say(f"\nDESCRIBE HISTORY delta.`{table_path}`:")
    say(history_frame(table).to_string(index=False))
    return rows, version, int(orders)


def run_demo(records: int = 1_000_000, data_dir: Path | None = None, nodes: int = 3, *, seed: int = 42,
             keep: bool = False, max_offsets_per_trigger: int | None = None, progress: bool = True,
             say: Callable[[str], None] = print) -> int:
    """Run the demo end to end; 0 when the Delta table and the enriched stream account for every
    record, 1 when they do not, 130 on Ctrl-C/SIGTERM."""
    from vdl_dev.workload import WorkloadConfig, produce_workload  # numpy/pyarrow: keep `vdl` fast

    base, temporary = prepare(data_dir)
    report = DemoReport()
    cluster: DemoCluster | None = None
    spark: Any = None  # the session, or the Background starting it
    pipeline = None
    started = time.monotonic()
    try:
        with sigterm_as_interrupt(), quiet_interrupts():
            try:
                say(f"VDL demo: {records:,} order events, data in {base} (Spark starts meanwhile)")
                spark = Background("vdl-demo-spark", lambda: create_spark_session(base))
                cluster = start_cluster(nodes, base, log=say)
                cluster.write_state()
                bootstrap = cluster.bootstrap_servers
                create_streams(bootstrap, base)
                say(f"created streams {SOURCE_STREAM!r} (also a Delta table: {raw_table_path(base)}) and "
                    f"{ENRICHED_STREAM!r}")

                say(f"producing {records:,} order events while starting Spark (local[2])...")
                producer = Background("vdl-demo-producer", lambda: produce_workload(
                    bootstrap, SOURCE_STREAM, WorkloadConfig(records=records, seed=seed), progress=False))
                from vdl_dev.pipeline import PipelinePaths, read_orders, start_pipeline, warm_read_tasks

                spark = spark.result()
                # PySpark's own SIGINT handler (installed by SparkContext) cancels jobs through
                # py4j from inside the interrupted py4j call: tracebacks, sometimes a hang. A plain
                # KeyboardInterrupt lets the finally below stop everything.
                signal.signal(signal.SIGINT, interrupt_handler)
                raise_if_interrupted()
                paths = PipelinePaths.under(base)
                # The job starts as soon as Spark is up and runs micro-batches back to back on the
                # events produced so far: its start-up (Python workers, plans, the JVM's compiled
                # code) overlaps the producing, instead of delaying the first micro-batch after it.
                # No warm-up run first (vdl_dev.pipeline.warm_up, as --follow does): it pays the same
                # start-up plus two micro-batches and a query's start and stop, all before the job
                # (measured slower end to end).
                per_trigger = max_offsets_per_trigger or default_batch_records(records)
                job_started = time.monotonic()
                raw = read_orders(spark, bootstrap, SOURCE_STREAM, per_trigger, min_partitions=READ_TASKS)
                # While the query starts (its planners run one after the other on one core), its
                # read tasks' Python workers start beside it (vdl_dev.pipeline.warm_read_tasks).
                warming = Background("vdl-demo-warm-reads",
                                     lambda: warm_read_tasks(spark, bootstrap, SOURCE_STREAM, READ_TASKS))
                pipeline = start_pipeline(spark, raw, bootstrap, paths, enriched=ENRICHED_STREAM)
                stats = producer.result()
                report.records_in, report.produce_seconds = stats.records, stats.seconds
                say(f"produced {stats.records:,} records in {stats.batches} batches "
                    f"({stats.bytes / 1e6:.1f} MB zstd) in {stats.seconds:.1f} s "
                    f"({stats.records_per_second:,.0f} records/s, acks=all)")
                produced_at = time.monotonic()
                _wait_for(pipeline.query, stats.records, progress)
                pipeline.stop()
                report.pipeline_seconds = time.monotonic() - job_started
                try:
                    warming.result()
                except Exception as error:  # noqa: BLE001 - only the first micro-batch needed it
                    say(f"warming the read tasks up failed ({type(error).__name__}: "
                        f"{str(error).splitlines()[0][:200]}); the first micro-batch started them itself")
                rows_in = processed_through(pipeline.query, SOURCE_STREAM)
                report.batches = len(pipeline.batch.times)
                report.enriched_out = end_offset(bootstrap, ENRICHED_STREAM)
                rate = rows_in / report.pipeline_seconds if report.pipeline_seconds else 0
                say(f"spark: {rows_in:,} records in, {report.batches} micro-batches "
                    f"(maxOffsetsPerTrigger={per_trigger:,}), {report.pipeline_seconds:.1f} s from its start "
                    f"({rate:,.0f} rows/s), done {time.monotonic() - produced_at:.1f} s after the last event was "
                    f"produced; Delta commits {len(pipeline.sink.committed)}, replayed batches skipped "
                    f"{len(pipeline.sink.skipped)}")
                for line in batch_lines(pipeline):
                    say(line)
                say(f"enriched: {report.enriched_out:,} records out to stream {ENRICHED_STREAM!r}")
                (report.delta_rows, report.delta_version, report.delta_orders,
                 report.raw_rows) = read_results(paths.delta_table, raw_table_path(base), report.records_in, say)
                say(f"stream {SOURCE_STREAM!r} as a Delta table: {report.raw_rows:,} rows in {raw_table_path(base)}")
                verdict = "OK" if report.ok else "MISMATCH"
                say(f"\n{verdict}: {report.records_in:,} produced, {report.delta_orders:,} counted in Delta, "
                    f"{report.enriched_out:,} enriched, {report.raw_rows:,} in the raw table; "
                    f"total {time.monotonic() - started:.1f} s")
                where = ("(a temporary directory, removed now: pass --data-dir DIR or --keep to keep it)"
                         if temporary and not keep else "")
                say(f"Delta table: {paths.delta_table} {where}".rstrip())
                return 0 if report.ok else 1
            finally:
                shutdown(pipeline, spark, cluster, say)
    except BaseException as error:
        if not is_interrupt(error):
            raise
        say("\ninterrupted: everything stopped")
        return 130
    finally:
        if temporary and not keep:
            shutil.rmtree(base, ignore_errors=True)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=1_000_000, help="order events to produce (default 1,000,000)")
    parser.add_argument("--data-dir", type=Path, help="keep the cluster's data, checkpoints and the Delta table here "
                        "(default: a temporary directory removed at the end)")
    parser.add_argument("--nodes", type=int, default=3, help="cluster nodes (default 3)")
    parser.add_argument("--seed", type=int, default=42, help="workload seed (same seed, same events)")
    parser.add_argument("--max-offsets-per-trigger", type=int,
                        help=f"records per micro-batch (default half the records, at most {BATCH_RECORDS_MOST:,})")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    follow = parser.add_argument_group("follow mode (freshness)")
    follow.add_argument("--follow", action="store_true",
                        help="keep producing at --rate and print each micro-batch's end-to-end freshness "
                             "until Ctrl-C (or --duration); --records is not used")
    follow.add_argument("--rate", type=int, default=5_000, help="events per second in follow mode (default 5,000)")
    follow.add_argument("--trigger", type=float, default=1.0, metavar="SECONDS",
                        help="trigger(processingTime) interval in follow mode (default 1 s)")
    follow.add_argument("--duration", type=float, metavar="SECONDS", help="stop following after this long")


def run_from_args(args: argparse.Namespace) -> int:
    if args.records < 1 or args.nodes < 1:
        print("vdl demo: error: --records and --nodes must be >= 1", file=sys.stderr)
        return 2
    if args.follow and (args.rate < 1 or args.trigger <= 0 or (args.duration is not None and args.duration <= 0)):
        print("vdl demo: error: --rate, --trigger and --duration must be > 0", file=sys.stderr)
        return 2
    try:
        if args.follow:
            from vdl_dev.follow import run_follow

            return run_follow(args.rate, args.trigger, args.duration, args.data_dir, args.nodes, seed=args.seed,
                              keep=args.keep)
        return run_demo(args.records, args.data_dir, args.nodes, seed=args.seed, keep=args.keep,
                        max_offsets_per_trigger=args.max_offsets_per_trigger, progress=not args.no_progress)
    except Exception as error:  # everything is stopped by now (run_demo's finally): one line, exit 1
        print(f"vdl demo: error: {type(error).__name__}: {error}", file=sys.stderr)
        return 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vdl demo", description=DESCRIPTION)
    _add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_from_args(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
