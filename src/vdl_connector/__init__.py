"""Spark connector for VDL: format("vdl") for spark.read/readStream and df.write/writeStream.

Installing the package is enough (Spark finds `pyspark_vdl.DefaultSource`); `register(spark)`
registers the data source explicitly, e.g. in a session started before the package was installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register"]


def register(spark: SparkSession) -> None:
    """Make format("vdl") available in `spark`."""
    from vdl_connector.source import VdlDataSource

    spark.dataSource.register(VdlDataSource)
