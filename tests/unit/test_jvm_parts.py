"""The JVM parts `make jars` fetched are where the project looks for them, and their versions
match the Python packages they go with (a Spark of one version loading another's connector fails
at the first query, not at start-up)."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import pytest

from vdl_dev.jvm import kafka_classpath, spark_jars, spark_session_conf

pytestmark = pytest.mark.unit

POM = Path(__file__).resolve().parents[2] / "jvm" / "pom.xml"


def pom_property(name: str) -> str:
    match = re.search(rf"<{re.escape(name)}>([^<]+)</{re.escape(name)}>", POM.read_text())
    assert match, f"{name} not in {POM}"
    return match.group(1)


def test_spark_gets_the_kafka_connector_and_delta_of_its_own_version() -> None:
    names = {jar.name for jar in spark_jars()}
    spark = pom_property("spark.version")
    assert f"spark-sql-kafka-0-10_2.13-{spark}.jar" in names
    assert f"delta-spark_2.13-{pom_property('delta.version')}.jar" in names
    assert version("pyspark") == spark


def test_no_jar_handed_to_spark_is_one_pyspark_ships() -> None:
    import pyspark

    shipped = {re.sub(r"-\d+\.\d.*\.jar$", "", jar.name) for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    assert {re.sub(r"-\d+\.\d.*\.jar$", "", jar.name) for jar in spark_jars()} & shipped == set()


def test_kafka_classpath_holds_broker_tools_and_client_of_one_version() -> None:
    folder = Path(kafka_classpath()).parent
    kafka = pom_property("kafka.version")
    for artifact in ("kafka_2.13", "kafka-tools", "kafka-clients", "kafka-server"):
        assert (folder / f"{artifact}-{kafka}.jar").exists(), artifact


def test_delta_sql_extension_and_catalog_are_classes_of_the_delta_jar() -> None:
    """A misspelled class in spark.sql.extensions is only a warning at start-up, after which every
    Delta SQL statement fails: the names must be classes of the jar handed to Spark."""
    import zipfile

    conf = spark_session_conf()
    assert conf["spark.jars"].split(",") == [str(jar) for jar in spark_jars()]
    delta = next(jar for jar in spark_jars() if jar.name.startswith("delta-spark_"))
    classes = set(zipfile.ZipFile(delta).namelist())
    for key in ("spark.sql.extensions", "spark.sql.catalog.spark_catalog"):
        assert conf[key].replace(".", "/") + ".class" in classes, conf[key]


def test_the_demo_jvm_keeps_a_code_cache_that_c1_alone_does_not_fill() -> None:
    """With C1 alone the JVM reserves 48 MB of code cache, which a minute of Spark and Delta
    fills; then it stops compiling for good. The demo's session asks for the tiered default."""
    from vdl_dev.session import JVM_OPTIONS

    sizes = [option.split("=", 1)[1] for option in JVM_OPTIONS if option.startswith("-XX:ReservedCodeCacheSize=")]
    assert "-XX:TieredStopAtLevel=1" in JVM_OPTIONS
    assert sizes and sizes[-1].endswith("m") and int(sizes[-1][:-1]) >= 240, JVM_OPTIONS


def test_the_driver_jvm_maps_the_class_archive_only_when_it_is_built(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from vdl_dev.jvm import JVM_LIB_VARIABLE, QUIET_CLASS_SHARING, class_archive_options

    monkeypatch.setenv(JVM_LIB_VARIABLE, str(tmp_path))
    assert class_archive_options() == ()
    (tmp_path / "spark-classes.jsa").write_bytes(b"archive")
    assert class_archive_options() == (f"-XX:SharedArchiveFile={tmp_path / 'spark-classes.jsa'}", QUIET_CLASS_SHARING)
