"""The JVM parts `make jars` fetched (jvm/pom.xml): where they are and how to use them.

    jvm/lib/kafka/   Apache Kafka: broker, command-line tools and the Java client, one classpath
    jvm/lib/kafka-client-3/
                     an older Java client, kafka-clients 3.4 (the tests of Kafka 3.x's clients)
    jvm/lib/spark/   what a SparkSession needs beside pyspark's jars: Spark's Kafka connector
                     (format("kafka")) and Delta (delta-spark), handed to Spark as spark.jars,
                     with Delta's SQL extension and catalog (spark_session_conf)
    jvm/lib/spark-classes.jsa
                     the Spark driver's class-data-sharing archive (vdl_dev/class_archive.py)

They live in the checkout (git-ignored), found relative to this file, or wherever VDL_JVM_LIB
points (an installed package has no checkout). Nothing here downloads: a missing folder is an
error that says to run `make jars`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

JVM_LIB_VARIABLE = "VDL_JVM_LIB"


class JarsMissingError(RuntimeError):
    """The JVM parts are not where they should be."""


def jvm_lib() -> Path:
    setting = os.environ.get(JVM_LIB_VARIABLE)
    return Path(setting) if setting else Path(__file__).resolve().parents[2] / "jvm" / "lib"


def _jars(part: str) -> list[Path]:
    folder = jvm_lib() / part
    jars = sorted(folder.glob("*.jar"))
    if not jars:
        raise JarsMissingError(f"no jars in {folder}: run `make jars` in the checkout "
                               f"(or point {JVM_LIB_VARIABLE} at a folder holding kafka/ and spark/)")
    return jars


def kafka_classpath() -> str:
    """Apache Kafka's classpath (broker, tools, Java client), as a Kafka distribution's libs/*."""
    _jars("kafka")
    return str(jvm_lib() / "kafka" / "*")


def kafka3_client_classpath() -> str:
    """kafka-clients 3.4 alone (no broker, no tools): the Java client Kafka 3.x users and Spark
    3.5's Kafka connector run, which speaks older protocol versions than 4.4's."""
    _jars("kafka-client-3")
    return str(jvm_lib() / "kafka-client-3" / "*")


def spark_jars() -> list[Path]:
    """The jars to hand Spark (`spark.jars`): spark-sql-kafka-0-10, delta-spark and their own
    dependencies that pyspark lacks."""
    return _jars("spark")


def spark_jars_setting() -> str:
    """`spark.jars` as Spark takes it: comma-separated paths."""
    return ",".join(str(jar) for jar in spark_jars())


# Delta's SQL (MERGE, DESCRIBE HISTORY, OPTIMIZE, VACUUM, delta.`path`) and its catalog, as Delta's
# quickstart configures a session; static settings: they must be given when the session starts.
DELTA_SQL_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}

# Delta rebuilds a table's state from its log in 50 tasks by default, sized for a cluster: on the
# two cores of a local session that stage is most of a small MERGE's time (measured 5-10x). One
# task, not two: the state is a few hundred actions, and each task of that stage generates its
# own projections (Delta's plan is too wide for whole-stage code generation), which is most of
# its CPU (a main-job MERGE: 1.5 -> 1.25 JVM CPU s, alternating runs).
LOCAL_DELTA_CONF = {"spark.databricks.delta.snapshotPartitions": "1"}


def spark_session_conf() -> dict[str, str]:
    """The settings a local SparkSession builder needs to use these parts: the jars, Delta's SQL
    extension and catalog (a Databricks cluster has both already) and Delta sized for two cores."""
    return {"spark.jars": spark_jars_setting(), **DELTA_SQL_CONF, **LOCAL_DELTA_CONF}


# Class data sharing (JEP 350, dynamic archives): a Spark driver JVM that maps the classes a main
# job loaded, already parsed and verified, from an archive instead of reading ~16,000 of them out
# of ~290 jars. Measured here: a session ready in 2.8-3.9 s instead of 5.2-5.8, its first query
# 1.2-1.8 s instead of 2.6-2.8. A JVM for which the archive does not fit (another JDK, changed
# jars) runs without it; the -Xlog setting keeps it from saying so on the job's output.
CLASS_ARCHIVE = "spark-classes.jsa"
QUIET_CLASS_SHARING = "-Xlog:cds=off,cds+dynamic=off"


def class_archive() -> Path:
    return jvm_lib() / CLASS_ARCHIVE


def class_archive_options() -> tuple[str, ...]:
    """The Spark driver JVM's options that map the class archive, when `make jars` built it."""
    archive = class_archive()
    return (f"-XX:SharedArchiveFile={archive}", QUIET_CLASS_SHARING) if archive.is_file() else ()


def java() -> str:
    """The java executable: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise JarsMissingError("no java found: install Java 17 (or set JAVA_HOME)")
    return found


def kafka_command(main_class: str, *args: str, heap: str = "512m", jvm_options: Sequence[str] = ()) -> list[str]:
    """A command line running one of Kafka's main classes (a tool, the broker, a Java harness)
    on Kafka's classpath, as Kafka's bin/*.sh scripts do."""
    return [java(), f"-Xmx{heap}", *jvm_options, "-cp", kafka_classpath(), main_class, *args]
