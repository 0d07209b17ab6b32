"""The demo's SparkSession (vdl_dev/session.py): what its Python processes import, which of them
a warm read starts for its query, and its JVM's class archive."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.cluster import BrokerProcess
from tests.support.processes import mapped_files
from vdl_dev.jvm import class_archive

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import sys
from pathlib import Path
import psutil
from pyspark import SparkContext
from vdl_client import ClientSettings, VdlClient
from vdl_dev.pipeline import warm_read_tasks
from vdl_dev.session import create_spark_session, spark_jvm_options
from vdl_dev.workload import WorkloadConfig, produce_workload
work, bootstrap = Path(sys.argv[1]), sys.argv[2]
spark = create_spark_session(work, jvm_options=(*spark_jvm_options(),
                                                f"-Xlog:class+load=info:file={work / 'classes.log'}"))
try:
    spark.range(3).write.format("delta").save(str(work / "table"))
    spark.read.format("delta").load(str(work / "table")).count()
    where = spark.sparkContext.parallelize([0], 1).map(
        lambda _: (__import__("pyspark").__file__, __import__("py4j").__file__)).collect()
    print("WORKER", *where[0])

    def python_workers():  # the processes the JVM runs: pid -> the module each runs
        found = {}
        for process in psutil.Process(SparkContext._gateway.proc.pid).children(recursive=True):
            try:
                found[process.pid] = process.cmdline()[-1]
            except psutil.Error:  # it has exited (a zombie until reaped)
                pass
        return found

    with VdlClient(ClientSettings.from_bootstrap(bootstrap)) as client:
        client.create_streams(["empty", "orders"])
    print("WARM EMPTY", warm_read_tasks(spark, bootstrap, "empty", 2))
    produce_workload(bootstrap, "orders", WorkloadConfig(records=50), progress=False)
    print("WARM", warm_read_tasks(spark, bootstrap, "orders", 2))
    warmed = python_workers()
    query = (spark.readStream.format("vdl").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", "orders").option("startingOffsets", "earliest").option("minPartitions", "2")
             .load().writeStream.format("noop").trigger(availableNow=True)
             .option("checkpointLocation", str(work / "checkpoint")).start())
    query.awaitTermination()
    print("READ", query.lastProgress["numInputRows"])
    print("STARTED BY THE QUERY", *sorted(m for pid, m in python_workers().items() if pid not in warmed), flush=True)
    print("JVM", SparkContext._gateway.proc.pid, flush=True)
    sys.stdin.readline()  # the test reads the JVM's memory map meanwhile
finally:
    spark.stop()
"""


@dataclass
class DemoSession:
    stdout: str
    stderr: str
    jvm_mapped: set[str]  # the files the session's JVM had mapped
    classes_loaded: str  # its -Xlog:class+load lines: each class and where it came from


@pytest.fixture(scope="module")
def demo_session(tmp_path_factory: pytest.TempPathFactory, module_broker: BrokerProcess) -> DemoSession:
    """The demo's session created in a process of its own (as `vdl demo` does)."""
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "PYSPARK_SUBMIT_ARGS")}
    work = tmp_path_factory.mktemp("session")
    errors = work / "stderr"  # a file, not a pipe: nobody reads a pipe while the probe runs
    command = [sys.executable, "-c", PROBE, str(work), module_broker.bootstrap]
    with errors.open("w") as stderr, subprocess.Popen(command, cwd=REPO, env=env,
                                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                                      text=True) as probe:
        assert probe.stdin is not None and probe.stdout is not None
        lines = []
        mapped: set[str] = set()
        for line in probe.stdout:
            lines.append(line)
            if line.startswith("JVM "):
                mapped = mapped_files(int(line.split()[1]))
                probe.stdin.close()
        returncode = probe.wait(timeout=200)
    assert returncode == 0, errors.read_text()
    return DemoSession("".join(lines), errors.read_text(), mapped, (work / "classes.log").read_text())


@pytest.mark.timeout(240)
def test_spark_workers_import_pyspark_from_site_packages_not_the_zip(demo_session: DemoSession) -> None:
    """Spark puts SPARK_HOME/python/lib/pyspark.zip first on its Python workers' path; a
    pip-installed pyspark's zip holds sources only, compiled anew in every worker. The demo's
    session hands the JVM a SPARK_HOME without python/, so workers import the installed package."""
    import py4j
    import pyspark

    lines = [line.split() for line in demo_session.stdout.splitlines() if line.startswith("WORKER ")]
    assert lines == [["WORKER", pyspark.__file__, py4j.__file__]], demo_session.stdout + demo_session.stderr


@pytest.mark.timeout(240)
def test_the_session_jvm_maps_the_class_archive_make_built(demo_session: DemoSession) -> None:
    """`make jars` builds the class archive (vdl_dev/class_archive.py) for the jars and JDK the
    sessions run: the demo's JVM maps it (a JVM for which it does not fit runs without it, and
    says nothing), and prints nothing about it."""
    archive = str(class_archive())
    assert archive in demo_session.jvm_mapped, sorted(p for p in demo_session.jvm_mapped if p.endswith(".jsa"))
    assert "cds" not in demo_session.stderr, demo_session.stderr


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", ["org.apache.spark.sql.delta.DeltaLog", "org.apache.spark.sql.delta.Snapshot",
                                  "org.apache.spark.sql.delta.actions.Action$"])
def test_the_class_archive_holds_delta_sparks_classes(demo_session: DemoSession, name: str) -> None:
    """A session's first delta-spark read (the notebooks', the tests', a job's): the classes of a
    Delta table's log and snapshot come from the archive, not from the jars."""
    line = next((line for line in demo_session.classes_loaded.splitlines() if f"] {name} source:" in line), None)
    assert line is not None and line.endswith("source: shared objects file (top)"), line


@pytest.mark.timeout(240)
def test_a_warm_read_starts_the_python_workers_a_querys_read_tasks_take(demo_session: DemoSession) -> None:
    """`vdl demo` reads a record per read task (warm_read_tasks) while its query starts: the
    read planner and pyspark.worker's daemon and workers start then, beside the query's own
    planning, and the query's read tasks take those workers. Run after it, a streaming read of
    the stream starts no Python process but its source runner (gone when the query ends)."""
    lines = demo_session.stdout.splitlines()
    assert "WARM EMPTY 0" in lines and "WARM 2" in lines and "READ 50" in lines, demo_session.stdout
    started = next(line for line in lines if line.startswith("STARTED BY THE QUERY")).split()[4:]
    assert set(started) - {"pyspark.sql.streaming.python_streaming_source_runner"} == set(), demo_session.stdout
