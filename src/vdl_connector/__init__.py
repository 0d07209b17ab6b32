"""Spark connector for VDL: format("vdl") for spark.read/readStream and df.write/writeStream.

Installing the package is enough (Spark finds `pyspark_vdl.DefaultSource`); `register(spark)`
registers the data source explicitly, e.g. in a session started before the package was installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["JVM_CONNECTOR_JAR", "PYTHON_SOURCE_NAME", "PYTHON_SOURCE_NAME_VARIABLE", "register"]

# format("vdl")'s JVM provider (jvm/connector/, io.vdl.spark.VdlProvider) serves plain reads on
# Spark's Kafka source and hands the rest to this Python data source, which then goes by
# PYTHON_SOURCE_NAME: Spark refuses a name that both a JVM provider and a Python data source claim.
# Spark's lookup worker, launched by the JVM, reads the name from PYTHON_SOURCE_NAME_VARIABLE,
# set (vdl_dev.session.spark_launch_environment) when the JVM starts with JVM_CONNECTOR_JAR.
JVM_CONNECTOR_JAR = "vdl-spark-connector.jar"
PYTHON_SOURCE_NAME = "vdl-python"
PYTHON_SOURCE_NAME_VARIABLE = "VDL_SPARK_PYTHON_SOURCE"


def register(spark: SparkSession) -> None:
    """Make format("vdl") available in `spark` (beside the JVM provider when its jar is there)."""
    from vdl_connector.source import VdlDataSource, named_source

    jars = spark.sparkContext.getConf().get("spark.jars", "") or ""
    with_provider = any(jar.endswith(JVM_CONNECTOR_JAR) for jar in jars.split(","))
    spark.dataSource.register(named_source(PYTHON_SOURCE_NAME) if with_provider else VdlDataSource)
