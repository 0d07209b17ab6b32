"""`vdl demo [--records N] [--data-dir DIR] [--nodes N]`: the whole product in one command.

Starts a local VDL cluster, creates the streams, produces the order workload, runs the Spark job
(vdl_dev/pipeline.py) until every record is processed (trigger availableNow), prints
what happened and the top rows of the Delta table, and stops everything. Ctrl-C or SIGTERM at
any point stops the queries, Spark and every broker (try/finally; brokers in their own process
groups) and exits with 130.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from vdl_dev.cluster import DemoCluster, start_cluster
from vdl_dev.raw_table import raw_table_config, raw_table_path, raw_table_rows

DESCRIPTION = ("Start a local VDL cluster, produce order events, run a Spark structured-streaming job from "
               "format('vdl') to a Delta table and back to a log stream, print what happened, stop everything.")
SOURCE_STREAM = "orders"
ENRICHED_STREAM = "orders-enriched"
OUR_SUBDIRS = ("cluster", "delta", "checkpoints", "spark-warehouse", "cluster.json", "log4j2.properties")


@dataclass
class DemoReport:
    records_in: int = 0
    produce_seconds: float = 0.0
    pipeline_seconds: float = 0.0
    aggregate_batches: int = 0
    enrich_batches: int = 0
    delta_rows: int = 0
    delta_version: int = -1
    delta_orders: int = 0
    enriched_out: int = 0
    raw_rows: int = 0  # rows of the orders stream's own Delta table (vdl_dev/raw_table.py)

    @property
    def ok(self) -> bool:
        return self.records_in == self.delta_orders == self.enriched_out == self.raw_rows


LOG4J2 = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def create_spark_session(data_dir: Path, app_name: str = "vdl-demo") -> Any:
    """A local Spark (2 cores) whose Python workers run this interpreter (it has vdl_connector),
    logging only errors (the JVM reads its log4j2 file at launch: PYSPARK_SUBMIT_ARGS)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only (and no hostname warning)
    if "PYSPARK_SUBMIT_ARGS" not in os.environ:
        log4j = data_dir / "log4j2.properties"
        log4j.write_text(LOG4J2)
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--driver-java-options -Dlog4j2.configurationFile={log4j} pyspark-shell"
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName(app_name)
             .config("spark.sql.shuffle.partitions", "2")  # tiny state: 2 state-store partitions
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.warehouse.dir", str(data_dir / "spark-warehouse"))
             .config("spark.python.worker.reuse", "true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class _DropBrokenPy4jCalls(logging.Filter):
    """py4j logs a traceback at the root logger when Ctrl-C breaks a call to the JVM: expected."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "while sending command" not in record.getMessage()


@contextmanager
def _quiet_interrupts() -> Iterator[None]:
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_DropBrokenPy4jCalls())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


@contextmanager
def _deferred_interrupts() -> Iterator[None]:
    """Hold Ctrl-C/SIGTERM until the block ends, then raise KeyboardInterrupt.

    For Spark's start-up: a driver interrupted while its JVM is still starting loses the handle
    to that JVM, whose py4j server thread then keeps it alive forever. Deferred, the session
    exists when the interrupt is raised and run_demo's finally stops it."""
    pending: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        pending.append(signum)

    previous = {sig: signal.signal(sig, hold) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if pending:
        raise KeyboardInterrupt(f"signal {pending[0]}")


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C, so the same finally blocks stop everything."""
    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _prepare(data_dir: Path | None) -> tuple[Path, bool]:
    if data_dir is None:
        return Path(tempfile.mkdtemp(prefix="vdl-demo-")), True
    data_dir.mkdir(parents=True, exist_ok=True)
    for name in OUR_SUBDIRS:  # a previous run's state: the demo always starts from scratch
        path = data_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    return data_dir, False


def _create_streams(bootstrap: str, base: Path) -> None:
    from vdl_client import ClientSettings, VdlClient

    with VdlClient(ClientSettings.from_bootstrap(bootstrap, client_id="vdl-demo")) as client:
        client.create_stream(SOURCE_STREAM, config=raw_table_config(base))
        client.create_streams([ENRICHED_STREAM])


def _end_offset(bootstrap: str, stream: str) -> int:
    from vdl_client import ClientSettings, VdlClient

    with VdlClient(ClientSettings.from_bootstrap(bootstrap, client_id="vdl-demo")) as client:
        return client.list_offsets([stream], -1)[stream]


def _wait_for(queries: tuple[Any, ...], total: int, progress: bool) -> None:
    """Until both availableNow queries finish; a bar follows the aggregate query's input rows."""
    from tqdm import tqdm

    from vdl_dev.pipeline import query_stats

    with tqdm(total=total, unit=" records", unit_scale=True, desc="spark job", disable=not progress) as bar:
        while True:
            done = [q.awaitTermination(0.5) for q in queries]
            bar.update(max(0, query_stats(queries[0]).input_rows - bar.n))
            if all(done):
                break
    for query in queries:
        if query.exception() is not None:
            raise RuntimeError(f"query {query.name} failed: {query.exception()}")


def _show_table(table_path: str, say: Callable[[str], None], top: int = 10) -> tuple[int, int, int]:
    """Print the top windows by revenue; returns (rows, table version, total orders)."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    from vdl_dev.pipeline import read_delta_table

    table = read_delta_table(table_path)
    version = DeltaTable(table_path).version()
    orders = int(pc.sum(table["orders"]).as_py() or 0)
    frame = table.sort_by([("revenue", "descending")]).slice(0, top).to_pandas()
    say(f"\ntop {top} of {table.num_rows} rows of {table_path} (Delta version {version}), by revenue:")
    say(frame.to_string(index=False))
    return table.num_rows, version, orders


def run_demo(records: int = 1_000_000, data_dir: Path | None = None, nodes: int = 3, *, seed: int = 42,
             keep: bool = False, max_offsets_per_trigger: int | None = None, progress: bool = True,
             say: Callable[[str], None] = print) -> int:
    """Run the demo end to end; 0 when the Delta table and the enriched stream account for every
    record, 1 when they do not, 130 on Ctrl-C/SIGTERM."""
    from vdl_dev.workload import WorkloadConfig, produce_workload  # numpy/pyarrow: keep `vdl` fast

    base, temporary = _prepare(data_dir)
    report = DemoReport()
    cluster: DemoCluster | None = None
    spark = None
    pipeline = None
    started = time.monotonic()
    try:
        with _sigterm_as_interrupt(), _quiet_interrupts():
            try:
                say(f"VDL demo: {records:,} order events, data in {base}")
                cluster = start_cluster(nodes, base, log=say)
                cluster.write_state()
                bootstrap = cluster.bootstrap_servers
                _create_streams(bootstrap, base)
                say(f"created streams {SOURCE_STREAM!r} (also a Delta table: {raw_table_path(base)}) and "
                    f"{ENRICHED_STREAM!r}")

                stats = produce_workload(bootstrap, SOURCE_STREAM, WorkloadConfig(records=records, seed=seed),
                                         progress=progress)
                report.records_in, report.produce_seconds = stats.records, stats.seconds
                say(f"produced {stats.records:,} records in {stats.batches} batches "
                    f"({stats.bytes / 1e6:.1f} MB zstd) in {stats.seconds:.1f} s "
                    f"({stats.records_per_second:,.0f} records/s, acks=all)")

                from vdl_dev.pipeline import PipelinePaths, query_stats, start_pipeline

                say("starting Spark (local[2])...")
                with _deferred_interrupts():
                    spark = create_spark_session(base)
                # PySpark's own SIGINT handler (installed by SparkContext) cancels jobs through
                # py4j from inside the interrupted py4j call: tracebacks, sometimes a hang. A plain
                # KeyboardInterrupt lets the finally below stop everything.
                signal.signal(signal.SIGINT, signal.default_int_handler)
                paths = PipelinePaths.under(base)
                per_trigger = max_offsets_per_trigger or max(10_000, -(-records // 4))
                job_started = time.monotonic()
                pipeline = start_pipeline(spark, bootstrap, paths, source=SOURCE_STREAM, enriched=ENRICHED_STREAM,
                                          max_offsets_per_trigger=per_trigger)
                _wait_for(pipeline.queries, records, progress)
                report.pipeline_seconds = time.monotonic() - job_started
                aggregate, enrich = query_stats(pipeline.aggregate), query_stats(pipeline.enrich)
                report.aggregate_batches, report.enrich_batches = aggregate.batches, enrich.batches
                report.enriched_out = _end_offset(bootstrap, ENRICHED_STREAM)
                rate = aggregate.input_rows / report.pipeline_seconds if report.pipeline_seconds else 0
                say(f"spark: {aggregate.input_rows:,} records in, {aggregate.batches} micro-batches "
                    f"(maxOffsetsPerTrigger={per_trigger:,}), {report.pipeline_seconds:.1f} s, {rate:,.0f} rows/s; "
                    f"Delta commits {len(pipeline.sink.committed)}, replayed batches skipped "
                    f"{len(pipeline.sink.skipped)}")
                say(f"enriched: {report.enriched_out:,} records out to stream {ENRICHED_STREAM!r} "
                    f"in {enrich.batches} micro-batches")
                report.delta_rows, report.delta_version, report.delta_orders = _show_table(paths.delta_table, say)
                report.raw_rows = raw_table_rows(raw_table_path(base), report.records_in)
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
                _shutdown(pipeline, spark, cluster, say)
    except KeyboardInterrupt:
        say("\ninterrupted: everything stopped")
        return 130
    finally:
        if temporary and not keep:
            shutil.rmtree(base, ignore_errors=True)


def _shutdown(pipeline: Any, spark: Any, cluster: DemoCluster | None, say: Callable[[str], None]) -> None:
    """Stop queries, Spark and the brokers; a second Ctrl-C must not cut this short."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if pipeline is not None:
            pipeline.stop()
        if spark is None and "pyspark.sql" in sys.modules:  # interrupted right after Spark started
            spark = sys.modules["pyspark.sql"].SparkSession.getActiveSession()
        if spark is not None:
            try:
                spark.stop()
            except Exception as error:  # noqa: BLE001 - the brokers must still be stopped
                say(f"stopping Spark: {error}")
        if cluster is not None:
            cluster.stop()
            say(f"stopped the {cluster.kind}")
    finally:
        signal.signal(signal.SIGINT, previous)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=1_000_000, help="order events to produce (default 1,000,000)")
    parser.add_argument("--data-dir", type=Path, help="keep the cluster's data, checkpoints and the Delta table here "
                        "(default: a temporary directory removed at the end)")
    parser.add_argument("--nodes", type=int, default=3, help="cluster nodes (default 3)")
    parser.add_argument("--seed", type=int, default=42, help="workload seed (same seed, same events)")
    parser.add_argument("--max-offsets-per-trigger", type=int, help="records per micro-batch (default records/4)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def run_from_args(args: argparse.Namespace) -> int:
    if args.records < 1 or args.nodes < 1:
        print("vdl demo: error: --records and --nodes must be >= 1", file=sys.stderr)
        return 2
    try:
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
