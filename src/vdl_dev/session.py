"""What the demo's processes need around the job: the Spark session the demo owns, signal
handling (Ctrl-C and SIGTERM stop everything, never half of it), and the data directory.

run.py (the batch demo) and follow.py (`vdl demo --follow`) share it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shlex
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from vdl_dev.cluster import DemoCluster
from vdl_dev.jvm import class_archive_options, spark_session_conf

OUR_SUBDIRS = ("cluster", "delta", "checkpoints", "spark-warehouse", "cluster.json", "log4j2.properties", "warm-up")
# Spark settings the demo owns (local[2]: two cores shared with the brokers).
SPARK_CONF = {
    "spark.sql.shuffle.partitions": "2",  # the window aggregates are tiny: one task per core
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.python.worker.reuse": "true",
    # Micro-batches are small and planned anew each time: adaptive re-planning costs more than
    # it saves on a two-task shuffle of a few hundred rows.
    "spark.sql.adaptive.enabled": "false",
    # Each micro-batch is cached for one use by two jobs: encoding its columns compactly (a
    # dictionary scan of every string column) costs more than the memory it saves.
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
}

# The demo's JVM lives for a minute or so and runs most of its code a few times (Spark's and
# Delta's planning, each micro-batch's generated code): C2's optimizing compiles cost more CPU
# than they return on two cores shared with the brokers. Measured on `vdl demo`'s 1M events (two
# demos side by side): JVM 65 -> 48 CPU seconds, all processes 96 -> 74; the compiler threads
# 31 -> 4, while the tasks' own code, less optimized, took 15 -> 25.
# Measured again on the 1M-event demo (load 10-13): C1 alone spends its Java threads' time in
# from_json (~28%), the batch's columnar cache (~16%) and to_json (~14%), code C2 runs 2-3x faster
# (that work alone on 4 x 250,000 events: 70 -> 49 JVM CPU s). Over the whole demo the C2 compiles
# (~49 CPU s) take that back: JVM 137 CPU s tiered, 117 with C2's thresholds raised 10x, 108-115
# with C1 alone.
#
# C1 alone gets a 48 MB code cache (the JVM sizes it for tiered compiles only): Spark's, Delta's
# and the generated classes of a session that runs a job for a minute or more fill it, and then
# the JVM disables its compiler for good ("CodeCache is full. Compiler has been disabled"): every
# later method and generated class runs interpreted (seen in `vdl demo --follow` after about
# 50 s). The cache the JVM reserves with tiered compiles on, 240 MB, is address space reserved,
# used as the code grows.
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m")


def spark_jvm_options() -> tuple[str, ...]:
    """The options of a Spark driver JVM this project starts: JVM_OPTIONS and the class archive."""
    return (*JVM_OPTIONS, *class_archive_options())


# Spark puts SPARK_HOME/python/lib/pyspark.zip (and py4j's zip) first on the path of every Python
# process it starts (PythonUtils.sparkPythonPath): a pip-installed pyspark ships that zip with
# sources only, so each worker, planner and source runner compiled pyspark from source as it
# imported it (`import pyspark.worker, pyspark.sql.datasource`: 0.9 CPU s from the zip, 0.2 s from
# site-packages' bytecode; a demo starts a dozen such processes). The session's JVM gets a
# SPARK_HOME of symlinks to the package's parts without python/: Spark finds its scripts and jars
# there, and the workers import the same pyspark from site-packages.
SPARK_HOME_VARIABLE = "SPARK_HOME"
WORKERS_PYTHON_DIR = "python"  # SPARK_HOME/python/lib: the zips Spark puts on the workers' path


def workers_spark_home() -> Path | None:
    """A SPARK_HOME for the pip-installed pyspark whose Python processes import pyspark from
    site-packages; None when SPARK_HOME is set (the user's Spark) or pyspark ships no zip."""
    if os.environ.get(SPARK_HOME_VARIABLE):
        return None
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    package = Path(spec.origin).parent
    if not (package / WORKERS_PYTHON_DIR / "lib" / "pyspark.zip").exists():
        return None
    tag = hashlib.sha256(str(package).encode()).hexdigest()[:12]
    home = Path(tempfile.gettempdir()) / f"vdl-spark-home-{os.getuid()}-{tag}"
    home.mkdir(mode=0o700, exist_ok=True)
    for part in package.iterdir():
        link = home / part.name
        if part.name == WORKERS_PYTHON_DIR or (link.is_symlink() and os.readlink(link) == str(part)):
            continue
        # Another session may be making the same links: each appears whole (rename), never half.
        staged = home / f".{part.name}.{os.getpid()}.{threading.get_ident()}"
        staged.unlink(missing_ok=True)
        staged.symlink_to(part)
        staged.replace(link)
    return home


def spark_launch_environment() -> dict[str, str]:
    """What the environment of a process launching Spark's JVM sets (workers_spark_home)."""
    home = workers_spark_home()
    return {SPARK_HOME_VARIABLE: str(home)} if home is not None else {}


@contextmanager
def environment(settings: dict[str, str]) -> Iterator[None]:
    """os.environ with `settings` for the block (the JVM that pyspark launches in it inherits them)."""
    previous = {key: os.environ.get(key) for key in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for key, old in previous.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


LOG4J2 = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def create_spark_session(data_dir: Path, app_name: str = "vdl-demo", jvm_options: Sequence[str] | None = None) -> Any:
    """A local Spark (2 cores) whose Python workers run this interpreter (it has vdl_connector),
    logging only errors (the JVM reads its log4j2 file at launch: PYSPARK_SUBMIT_ARGS).
    jvm_options: the driver JVM's, spark_jvm_options() by default."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only (and no hostname warning)
    if "PYSPARK_SUBMIT_ARGS" not in os.environ:
        log4j = data_dir / "log4j2.properties"
        log4j.write_text(LOG4J2)
        options = spark_jvm_options() if jvm_options is None else jvm_options
        java_options = " ".join((f"-Dlog4j2.configurationFile={log4j}", *options))
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--driver-java-options {shlex.quote(java_options)} pyspark-shell"
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName(app_name)
    for key, value in {**spark_session_conf(), **SPARK_CONF}.items():
        builder = builder.config(key, value)
    with environment(spark_launch_environment()):
        spark = builder.config("spark.sql.warehouse.dir", str(data_dir / "spark-warehouse")).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class _DropBrokenPy4jCalls(logging.Filter):
    """py4j logs a traceback at the root logger when Ctrl-C breaks a call to the JVM: expected."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "while sending command" not in record.getMessage()


@contextmanager
def quiet_interrupts() -> Iterator[None]:
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
def deferred_interrupts() -> Iterator[None]:
    """Hold Ctrl-C/SIGTERM until the block ends, then raise KeyboardInterrupt.

    For Spark's start-up: a driver interrupted while its JVM is still starting loses the handle
    to that JVM, whose py4j server thread then keeps it alive forever. Deferred, the session
    exists when the interrupt is raised and the caller's finally stops it."""
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


def is_interrupt(error: BaseException) -> bool:
    """Ctrl-C/SIGTERM, also when Python wrapped it: an interrupt raised inside a descriptor's
    `__set_name__` (a class being created by an import) comes out as a RuntimeError whose cause
    is the KeyboardInterrupt (Python 3.11's type_new_set_names)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        if not isinstance(seen, RuntimeError):
            return False
        seen = seen.__cause__
    return False


# The signals interrupt_handler raised: Python drops a KeyboardInterrupt raised while a weakref
# callback runs (importlib's module-lock callback during an import: "Exception ignored in ..."),
# so raise_if_interrupted raises it again at the next point that checks.
_SIGNALLED: list[int] = []


def interrupt_handler(signum: int, frame: FrameType | None) -> None:
    _SIGNALLED.append(signum)
    raise KeyboardInterrupt(f"signal {signum}")


def raise_if_interrupted() -> None:
    if _SIGNALLED:
        raise KeyboardInterrupt(f"signal {_SIGNALLED[0]}")


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C, so the same finally blocks stop everything; both are recorded
    for raise_if_interrupted."""
    _SIGNALLED.clear()
    previous = {sig: signal.signal(sig, interrupt_handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def prepare(data_dir: Path | None) -> tuple[Path, bool]:
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


class Background:
    """One call on a thread, its result (or its error) handed to the main thread (the demo starts
    Spark, produces the events and stops the brokers this way, while other work goes on)."""

    def __init__(self, name: str, call: Callable[[], Any]) -> None:
        self._result: Any = None
        self._error: BaseException | None = None

        def run() -> None:
            try:
                self._result = call()
            except BaseException as error:  # noqa: BLE001 - handed to the main thread in result()
                self._error = error

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()

    def result(self) -> Any:
        """The call's result once it returned (its error, if it failed)."""
        while self._thread.is_alive():
            self._thread.join(0.2)  # short joins: Ctrl-C stays responsive
        if self._error is not None:
            raise self._error
        return self._result

    def settled(self) -> Any:
        """The result once the call returned, None if it failed (for stopping what it started)."""
        self._thread.join()
        return self._result


def shutdown(pipeline: Any, spark: Any, cluster: DemoCluster | None, say: Callable[[str], None]) -> None:
    """Stop queries, Spark (`spark`: the session, or the Background still starting it) and the
    brokers; a second Ctrl-C must not cut this short."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if pipeline is not None:
            pipeline.stop()
        # The brokers stop (each hands its leaderships over) while Spark stops.
        stopping = Background("vdl-demo-stop-cluster", cluster.stop) if cluster is not None else None
        if isinstance(spark, Background):
            spark = spark.settled()
        if spark is None and "pyspark.sql" in sys.modules:  # interrupted right after Spark started
            spark = sys.modules["pyspark.sql"].SparkSession.getActiveSession()
        if spark is not None:
            try:
                spark.stop()
            except Exception as error:  # noqa: BLE001 - the brokers must still be stopped
                say(f"stopping Spark: {error}")
        if cluster is not None and stopping is not None:
            stopping.result()
            say(f"stopped the {cluster.kind}")
    finally:
        signal.signal(signal.SIGINT, previous)
