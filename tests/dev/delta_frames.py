"""The main job's Delta table and its independent oracle as Spark DataFrames, for chispa."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vdl_dev.workload import expected_aggregates


def table_schema() -> Any:
    from pyspark.sql.types import DecimalType, LongType, StringType, StructField, StructType, TimestampType

    return StructType([StructField("window_start", TimestampType()), StructField("window_end", TimestampType()),
                       StructField("category", StringType()), StructField("orders", LongType()),
                       StructField("units", LongType()), StructField("revenue", DecimalType(20, 2)),
                       StructField("max_amount", DecimalType(10, 2))])


def delta_frame(spark: Any, path: Path) -> Any:
    """The table at `path` (spark.read.format("delta")), in the order of its key (window, category)."""
    columns = [field.name for field in table_schema().fields]
    return spark.read.format("delta").load(str(path)).select(*columns).orderBy("window_start", "category")


def oracle_frame(spark: Any, values: Iterable[bytes]) -> Any:
    """What the table must hold for these event values (vdl_dev.workload.expected_aggregates)."""
    as_time = lambda ms: datetime.fromtimestamp(ms / 1000, UTC)  # noqa: E731
    data = [(as_time(r.window_start_ms), as_time(r.window_end_ms), r.category, r.orders, r.units, r.revenue,
             r.max_amount) for r in expected_aggregates(values)]
    return spark.createDataFrame(data, schema=table_schema()).orderBy("window_start", "category")
