"""Shared fixtures: real `vdl-broker` processes and 3-node clusters (see tests/support/cluster.py),
and the one SparkSession of the run."""

from __future__ import annotations

import compileall
import contextlib
import functools
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import (
    BrokerProcess,
    ensure_all_running,
    start_broker,
    start_cluster,
)
from tests.support.security import TlsMaterial, make_tls_material
from vdl_dev.dev_cluster import PORT_RANGE_VARIABLE, DevCluster, port_range

NODE_OUTPUT_LINES = 200


def pytest_configure(config: pytest.Config) -> None:
    """Parallel workers pick cluster ports in disjoint slices of the range (inherited by the
    processes they start): a worker restarting a node must find its port free, not taken by
    another worker. A range set by the user is sliced the same way."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        compile_sources()
        return
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(worker.removeprefix("gw"))
    low, high = port_range()
    width = (high - low) // workers
    os.environ[PORT_RANGE_VARIABLE] = f"{low + index * width}-{low + (index + 1) * width}"


# The tests start many Python processes of this tree: brokers (hundreds of starts and restarts
# in a run), the CLI, Spark's Python workers, the workers of xdist. With PYTHONDONTWRITEBYTECODE
# set (as on the CI machine) Python never writes bytecode of the editable src/ layout, so every
# one of them compiled all of vdl_broker again (~0.2 s of CPU per broker start; a module that
# restarts nodes ran 15-30 % longer). Python still reads bytecode that exists: compile once here,
# before any worker or process starts, as pip does for an installed (not editable) package. Up
# to date, this is a quarter of a second; a file that fails to compile fails at its import.
COMPILED_TREES = ("src", "tests", "benchmarks")


def compile_sources() -> None:
    for tree in COMPILED_TREES:
        compileall.compile_dir(TESTS.parent / tree, quiet=2)


# The test modules pytest imports are rewritten (their asserts explained), and pytest keeps the
# rewritten bytecode beside the plain one -- unless sys.dont_write_bytecode, which
# PYTHONDONTWRITEBYTECODE sets: then every run, in each xdist worker, rewrote every test module
# again (~8 s of CPU per worker collecting the suite, half of tests/unit's collection). Pytest
# reads such bytecode whenever it is current: write it while collecting, as pytest does by default
# (atomically, so two workers writing the same module is safe).
@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> object:
    writes = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = writes


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--reverse`: run the collected tests in reverse order, to catch tests that pass only after
    (or before) others. The pytest-reverse plugin, when installed, owns the option instead.
    `--record-durations`: write each module's measured time into tests/durations.txt."""
    with contextlib.suppress(ValueError):  # pytest-reverse defined it
        parser.addoption("--reverse", action="store_true", default=False,
                         help="run the tests in reverse order of collection")
    parser.addoption("--record-durations", action="store_true", default=False,
                     help=f"update {DURATIONS.name} with the time each module run took (its tests' setup, call "
                          "and teardown), for the parallel workers' schedule")


# The tiers (setup.cfg's markers) follow from where a test lives. tests/unit is `unit` -- pure
# logic, run without sockets, processes, threads or sleeps, which _unit_tests_stay_pure refuses
# while it runs -- unless its module sets TIER = "component" (real sockets, threads or event
# loops in this process). tests/integration, tests/faults and tests/dev start broker processes
# (`process`); a test using the SparkSession, or living in tests/spark or tests/notebooks, is
# `spark`; a module that sets SLOW = True takes minutes (`slow`).
TESTS = Path(__file__).resolve().parent
PROCESS_DIRS = frozenset({"integration", "faults", "dev"})
SPARK_DIRS = frozenset({"spark", "notebooks"})

# The parallel schedule. `--dist loadfile` hands a worker one whole module at a time (its
# module-scoped cluster is started once), in collection order (setup.cfg turns off xdist's own
# reordering by test count, which put the long modules of few tests last: one worker then ran
# a minutes-long module while the other sat idle). The workers collect the longest modules
# first, from the times in tests/durations.txt (`pytest --record-durations` updates it), so the
# run ends on short ones and both workers finish together. A module missing from the file is
# placed by its tier's typical time. Only the order changes: every test still runs.
DURATIONS = TESTS / "durations.txt"
TIER_SECONDS = {"slow": 240.0, "spark": 120.0, "process": 60.0, "component": 5.0, "unit": 1.0}


# Spark's modules run one after another on one worker, as one unit of the schedule: each worker
# running them would start a Spark JVM of its own (its start and JIT warm-up paid twice), and two
# Spark modules side by side, each with local[2] on this 2-core machine, ran about twice as long as
# alone. The controller schedules by node id only, so which modules use Spark is read from their
# source (a test or fixture taking `spark`); the workers check it against the markers they give.
SPARK_UNIT = "spark"
_SIGNATURES = re.compile(r"^\s*(?:async\s+)?def \w+\(([^)]*)\)", re.M)


@functools.cache
def runs_spark(module: str) -> bool:
    path = TESTS.parent / module
    if Path(module).parts[1] in SPARK_DIRS:
        return True
    return any(re.search(r"\bspark\b", params) for params in _SIGNATURES.findall(path.read_text()))


@pytest.hookimpl(optionalhook=True)  # an xdist hook: a run without xdist has no schedule
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadFileScheduling

    class SparkTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = module_of(nodeid)
            return SPARK_UNIT if runs_spark(module) else module

    return SparkTogether(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        top = Path(str(item.fspath)).relative_to(TESTS).parts[0]
        module = getattr(item, "module", None)
        if top == "unit":
            tier = getattr(module, "TIER", "unit")
            if tier not in ("unit", "component"):
                raise pytest.UsageError(f"{item.nodeid}: TIER must be 'unit' or 'component', not {tier!r}")
            item.add_marker(tier)
        elif top in PROCESS_DIRS:
            item.add_marker("process")
        if top in SPARK_DIRS or "spark" in getattr(item, "fixturenames", ()):
            item.add_marker("spark")
            if not runs_spark(module_of(item.nodeid)):
                raise pytest.UsageError(f"{item.nodeid} uses Spark through a fixture that does not take `spark` "
                                        "by that name: the schedule would run it beside the Spark unit")
        if getattr(module, "SLOW", False):
            item.add_marker("slow")
    if hasattr(config, "workerinput"):  # an xdist worker: its collection is the schedule
        items[:] = longest_modules_first(items)
    if config.getoption("--reverse") and not config.pluginmanager.hasplugin("reverse"):
        items.reverse()


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def read_durations(path: Path = DURATIONS) -> dict[str, float]:
    """Seconds per module ("SECONDS tests/PATH.py" lines; # comments)."""
    durations: dict[str, float] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                seconds, module = line.split()
                durations[module] = float(seconds)
    return durations


def longest_modules_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The items with their modules in decreasing expected time (ties in collection order), each
    module's tests in their own order."""
    known = read_durations()
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(module_of(item.nodeid), []).append(item)

    def expected(module: str) -> float:
        if module in known:
            return known[module]
        markers = {mark.name for item in modules[module] for mark in item.iter_markers()}
        return max((seconds for tier, seconds in TIER_SECONDS.items() if tier in markers), default=1.0)

    order = sorted(modules, key=lambda module: -expected(module))
    return [item for module in order for item in modules[module]]


_measured: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Sum each module's time (in the controller, the workers' reports) for --record-durations."""
    _measured[module_of(report.nodeid)] = _measured.get(module_of(report.nodeid), 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if not config.getoption("--record-durations") or hasattr(config, "workerinput") or not _measured:
        return
    durations = read_durations() | {module: round(seconds, 1) for module, seconds in _measured.items()}
    lines = [f"{seconds:g} {module}" for module, seconds in sorted(durations.items(), key=lambda kv: (-kv[1], kv[0]))]
    DURATIONS.write_text("# Seconds per test module in a full run (setup, call and teardown of its tests), longest\n"
                         "# first: the parallel workers take the longest modules first (tests/conftest.py).\n"
                         "# `pytest --record-durations` updates it; a module not listed is placed by its tier.\n"
                         + "\n".join(lines) + "\n")


@pytest.fixture(autouse=True)
def _unit_tests_stay_pure(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `unit` test that sleeps, starts a thread or a process, or connects or binds a socket
    fails, naming what it did: such a test belongs in the component tier."""
    if request.node.get_closest_marker("unit") is None:
        return

    test_thread = threading.current_thread()

    def refuse(owner: object, name: str, what: str) -> None:
        original = getattr(owner, name)

        def refused(*args: Any, **kwargs: Any) -> Any:
            # Only the test's own thread: a worker that ran a Spark module before keeps py4j's
            # threads, which sleep and connect while a unit test runs.
            if threading.current_thread() is not test_thread:
                return original(*args, **kwargs)
            raise AssertionError(f"a unit test may not {what}: set TIER = 'component' in its module")
        monkeypatch.setattr(owner, name, refused)

    refuse(time, "sleep", "sleep")
    refuse(threading.Thread, "start", "start a thread")
    refuse(subprocess.Popen, "__init__", "start a process")
    refuse(socket.socket, "connect", "connect a socket")
    refuse(socket.socket, "connect_ex", "connect a socket")
    refuse(socket.socket, "bind", "bind a socket")


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """Start brokers (`broker_factory(**config)`); every one is stopped at the end of the test."""
    started: list[BrokerProcess] = []
    counter = iter(range(1000))

    def factory(**config: Any) -> BrokerProcess:
        broker = start_broker(tmp_path / f"node{next(counter)}", **config)
        started.append(broker)
        return broker

    yield factory
    for broker in started:
        broker.kill()


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory()


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by the tests of a module (they use distinct stream names)."""
    broker = start_broker(tmp_path_factory.mktemp("broker"), auto_create_streams=False)
    yield broker
    broker.kill()


@pytest.fixture(scope="module")
def dev_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> DevCluster:
    """One 3-node cluster per test module. A module may set CLUSTER_SETTINGS (extra node.toml
    keys, e.g. tiny segments for retention) and CLUSTER_RACKS (node id -> rack). Every node runs
    in its own process group and the finalizer SIGKILLs those groups, so no broker outlives the
    module, whatever a test did."""
    settings = getattr(request.module, "CLUSTER_SETTINGS", {})
    directory = tmp_path_factory.mktemp("dev-cluster")
    return start_cluster(directory, nodes=3, settings=settings, racks=getattr(request.module, "CLUSTER_RACKS", None),
                         register=lambda cluster: request.addfinalizer(cluster.kill_all))


@pytest.fixture
def cluster(dev_cluster: DevCluster) -> Iterator[DevCluster]:
    """The module's cluster, with every node running before and after the test."""
    ensure_all_running(dev_cluster)
    yield dev_cluster
    ensure_all_running(dev_cluster)


@pytest.fixture(scope="session")
def tls_material(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    """A CA, node and client certificates (and a foreign CA), made once per run."""
    return make_tls_material(tmp_path_factory.mktemp("tls"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test that used the module's cluster gets the tail of every node's output."""
    outcome = yield
    report = outcome.get_result()
    cluster = getattr(item, "funcargs", {}).get("dev_cluster")
    if report.failed and isinstance(cluster, DevCluster):
        for node in cluster.nodes.values():
            tail = "\n".join(list(node.output)[-NODE_OUTPUT_LINES:])
            state = "running" if node.running else f"exited {node.exit_codes}"
            report.sections.append((f"node {node.node_id} output ({state})", tail))


# One SparkSession for the whole run (tests/spark, tests/dev): a session takes ~10 s to start
# here. PYSPARK_PYTHON points the Python workers at this interpreter (the venv holding
# vdl_connector and pyspark_vdl); spark.jars adds Spark's own Kafka connector and Delta
# (jvm/lib/spark, fetched by `make jars`), with Delta's SQL extension and catalog as a Databricks
# cluster has them, so every test may use format("delta"), DeltaTable and Delta's SQL. Defined
# once, here: getOrCreate would silently hand a second definition the first one's settings.
@pytest.fixture(scope="session")
def spark():  # noqa: ANN201 - pyspark imported lazily so collection stays fast
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from vdl_dev.jvm import spark_session_conf
    from vdl_dev.session import environment, spark_jvm_options, spark_launch_environment

    builder = (
        SparkSession.builder.master("local[2, 4]")  # 2 cores; a failed task is retried (the exactly-once tests need it)
        .appName("vdl-connector-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.python.worker.reuse", "true")
        # The demo's JIT settings (vdl_dev/session.py: C1 only): the run's many short jobs are
        # planning and generated code run a few times each, where C2's compiles cost more CPU than
        # they return on two cores (tests/spark, delta_interop and kafka_format and read: 249 ->
        # 203 CPU s), and the class archive `make jars` built. The JVM is not started yet:
        # pyspark passes this to spark-submit.
        .config("spark.driver.extraJavaOptions", " ".join(spark_jvm_options()))
    )
    for key, value in spark_session_conf().items():  # the jars, Delta's SQL extension and catalog
        builder = builder.config(key, value)
    with environment(spark_launch_environment()):  # workers import pyspark's bytecode, not the zip's sources
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel(os.environ.get("VDL_TEST_SPARK_LOG_LEVEL", "ERROR"))
    yield session
    session.stop()
