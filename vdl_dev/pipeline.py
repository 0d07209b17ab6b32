"""The demo's structured-streaming job, as reusable steps (run.py and notebook 02 use them).

    orders (log stream) --readStream.format("vdl")--> from_json --+--> watermark + 1-minute window
                                                                 |    per category (update mode)
                                                                 |    --foreachBatch--> Delta MERGE
                                                                 |       (app transaction: query id,
                                                                 |        batch id)
                                                                 +--> enrich (join dimensions)
                                                                      --writeStream.format("vdl")-->
                                                                      orders-enriched (log stream)

Delta is written with the `deltalake` package (delta-rs) from foreachBatch: delta-spark has no
release for Spark 4.3 and its JARs cannot be fetched here. Each batch's MERGE commits together
with the Delta app transaction (app id = the streaming query's id, version = the batch id), so a
micro-batch Spark replays after a failure finds its version already committed and is skipped.
On a Spark with Delta installed (Databricks) `writeStream.format("delta")` works unchanged with
this source.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vdl_dev.workload import CATEGORIES, DEPARTMENTS, REGIONS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("vdl_demo")

WATERMARK_DELAY = "30 seconds"  # > the workload's max lateness (5 s): no event is dropped
WINDOW = "1 minute"
QUERY_ID_PROPERTY = "sql.streaming.queryId"  # Spark's StreamExecution.QUERY_ID_KEY
ORDER_COLUMNS = ("order_id", "customer_id", "event_time", "category", "product_id", "quantity",
                 "unit_price", "amount", "country", "payment")


def order_schema() -> Any:
    """The JSON events' schema (money as DECIMAL: exact sums, as the oracle computes them)."""
    from pyspark.sql.types import (
        DecimalType,
        IntegerType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    return StructType([
        StructField("order_id", StringType()),
        StructField("customer_id", StringType()),
        StructField("event_time", TimestampType()),
        StructField("category", StringType()),
        StructField("product_id", StringType()),
        StructField("quantity", IntegerType()),
        StructField("unit_price", DecimalType(10, 2)),
        StructField("amount", DecimalType(10, 2)),
        StructField("country", StringType()),
        StructField("payment", StringType()),
    ])


def read_orders(spark: SparkSession, bootstrap: str, stream: str = "orders",
                max_offsets_per_trigger: int | None = None, starting_offsets: str = "earliest") -> DataFrame:
    """The raw log stream, exactly as with format("kafka"): key, value, topic, offset, timestamp..."""
    reader = (spark.readStream.format("vdl")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", stream)
              .option("startingOffsets", starting_offsets))
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    return reader.load()


def parse_orders(raw: DataFrame) -> DataFrame:
    """JSON value -> typed columns; the log offset is kept (lineage back to the stream)."""
    from pyspark.sql import functions as F

    parsed = raw.select(F.from_json(F.col("value").cast("string"), order_schema()).alias("order"),
                        F.col("offset").alias("source_offset"))
    return parsed.select("order.*", "source_offset")


def aggregate_orders(orders: DataFrame, watermark: str = WATERMARK_DELAY, window: str = WINDOW) -> DataFrame:
    """Orders, units, revenue and the largest order per 1-minute event-time window and category."""
    from pyspark.sql import functions as F

    return (orders.withWatermark("event_time", watermark)
            .groupBy(F.window("event_time", window), F.col("category"))
            .agg(F.count(F.lit(1)).alias("orders"), F.sum("quantity").cast("long").alias("units"),
                 F.sum("amount").alias("revenue"), F.max("amount").alias("max_amount"))
            .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                    "category", "orders", "units", "revenue", "max_amount"))


def dimensions(spark: SparkSession) -> tuple[DataFrame, DataFrame]:
    """Small static lookup tables (category -> department, country -> region)."""
    departments = spark.createDataFrame([(c, DEPARTMENTS[c]) for c in CATEGORIES], "category string, department string")
    regions = spark.createDataFrame(sorted(REGIONS.items()), "country string, region string")
    return departments, regions


def enrich_orders(orders: DataFrame, spark: SparkSession) -> DataFrame:
    """Orders joined with the dimensions plus an amount tier, as (key, value) JSON for a log stream."""
    from pyspark.sql import functions as F

    departments, regions = dimensions(spark)
    tier = (F.when(F.col("amount") >= 500, "large").when(F.col("amount") >= 50, "medium").otherwise("small"))
    enriched = (orders.join(F.broadcast(departments), "category", "left")
                .join(F.broadcast(regions), "country", "left")
                .withColumn("amount_tier", tier))
    columns = [*ORDER_COLUMNS, "department", "region", "amount_tier", "source_offset"]
    return enriched.select(F.col("customer_id").alias("key"), F.to_json(F.struct(*columns)).alias("value"))


# -- the Delta sink ------------------------------------------------------------------------------


def query_id_from_checkpoint(checkpoint: str | Path) -> str:
    """The streaming query's id: Spark writes it to <checkpoint>/metadata when the query first
    starts and keeps it across restarts from that checkpoint (unlike the run id)."""
    text = (Path(checkpoint) / "metadata").read_text()
    return str(json.loads(text.splitlines()[0])["id"])


def _running_query_id(batch: DataFrame) -> str | None:
    """The id of the query running this foreachBatch call: Spark sets it as a local property of
    the thread that calls the function (StreamExecution.QUERY_ID_KEY). None where the
    SparkContext is not reachable (Spark Connect); then the checkpoint's metadata file is used."""
    try:
        return batch.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return None


def last_committed_batch(table_path: str | Path, app_id: str) -> int | None:
    """The latest batch id this app committed to the table (Delta's `txn` action), if any."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(str(table_path)).transaction_version(app_id)
    except TableNotFoundError:
        return None


@dataclass
class DeltaMergeSink:
    """foreachBatch function: MERGE each micro-batch into a Delta table, exactly once.

    The merge and the app transaction (app_id, batch_id) commit atomically; a batch whose id is
    at or below the table's recorded version for app_id was committed before (Spark replays the
    last batch after a crash) and is skipped. app_id defaults to the streaming query's id, which
    Spark keeps across restarts from the same checkpoint, so a restarted query keeps its identity
    and a new query (new checkpoint) starts its own sequence. The id comes from the running query
    (a local property Spark sets for the foreachBatch call) or else from <checkpoint>/metadata.
    """

    table_path: str
    key_columns: tuple[str, ...] = ("window_start", "category")
    checkpoint: str | None = None
    app_id: str | None = None
    committed: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    rows_written: int = 0

    def resolve_app_id(self) -> str:
        if self.app_id is None:
            if self.checkpoint is None:
                raise ValueError("DeltaMergeSink needs app_id or the query's checkpoint location")
            self.app_id = f"vdl-demo/{query_id_from_checkpoint(self.checkpoint)}"
        return self.app_id

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self.app_id is None:
            query_id = _running_query_id(batch)
            if query_id is not None:
                self.app_id = f"vdl-demo/{query_id}"
        self.write_arrow(batch.toArrow(), batch_id)

    def write_arrow(self, data: Any, batch_id: int) -> bool:
        """Merge one batch (a pyarrow Table); False when it was already committed (skipped)."""
        from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

        if data.num_rows == 0:
            return False  # nothing to merge (e.g. the batch that only advances the watermark)
        app_id = self.resolve_app_id()
        done = last_committed_batch(self.table_path, app_id)
        if done is not None and batch_id <= done:
            log.info("batch %d already in %s (app %s at %d): skipped", batch_id, self.table_path, app_id, done)
            self.skipped.append(batch_id)
            return False
        commit = CommitProperties(app_transactions=[Transaction(app_id, batch_id)],
                                  custom_metadata={"vdl.batch_id": str(batch_id)})
        if not DeltaTable.is_deltatable(self.table_path):
            write_deltalake(self.table_path, data, mode="append", commit_properties=commit)
        else:
            predicate = " AND ".join(f"t.{c} = s.{c}" for c in self.key_columns)
            (DeltaTable(self.table_path)
             .merge(data, predicate, source_alias="s", target_alias="t", commit_properties=commit)
             .when_matched_update_all().when_not_matched_insert_all().execute())
        self.committed.append(batch_id)
        self.rows_written += data.num_rows
        return True


# -- the whole job -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PipelinePaths:
    delta_table: str
    aggregate_checkpoint: str
    enrich_checkpoint: str

    @classmethod
    def under(cls, base: str | Path) -> PipelinePaths:
        base = Path(base)
        return cls(str(base / "delta" / "orders_per_minute"), str(base / "checkpoints" / "orders_per_minute"),
                   str(base / "checkpoints" / "orders_enriched"))


@dataclass
class RunningPipeline:
    aggregate: StreamingQuery
    enrich: StreamingQuery
    sink: DeltaMergeSink

    @property
    def queries(self) -> tuple[StreamingQuery, StreamingQuery]:
        return self.aggregate, self.enrich

    def stop(self) -> None:
        for query in self.queries:
            try:
                query.stop()
            except Exception as error:  # noqa: BLE001 - stopping must reach every query
                log.warning("stopping %s: %s", query.name, error)


def start_pipeline(spark: SparkSession, bootstrap: str, paths: PipelinePaths, *, source: str = "orders",
                   enriched: str = "orders-enriched", max_offsets_per_trigger: int | None = None,
                   available_now: bool = True) -> RunningPipeline:
    """Start both queries (aggregate -> Delta, enrich -> log stream) over the same source stream."""
    orders = parse_orders(read_orders(spark, bootstrap, source, max_offsets_per_trigger))
    sink = DeltaMergeSink(paths.delta_table, checkpoint=paths.aggregate_checkpoint)

    def trigger(writer: Any) -> Any:
        return writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="2 seconds")

    aggregate = trigger(aggregate_orders(orders).writeStream.queryName("orders_per_minute")
                        .outputMode("update").option("checkpointLocation", paths.aggregate_checkpoint)
                        .foreachBatch(sink)).start()
    enrich = trigger(enrich_orders(orders, spark).writeStream.queryName("orders_enriched").format("vdl")
                     .option("kafka.bootstrap.servers", bootstrap).option("topic", enriched)
                     .option("checkpointLocation", paths.enrich_checkpoint)).start()
    return RunningPipeline(aggregate, enrich, sink)


@dataclass
class QueryStats:
    name: str
    batches: int
    input_rows: int


def query_stats(query: StreamingQuery) -> QueryStats:
    """Batches that read data and rows read, from the query's progress reports."""
    progress = [p for p in query.recentProgress if p.get("numInputRows", 0) > 0] if query.recentProgress else []
    return QueryStats(query.name or str(query.id), len(progress), sum(int(p["numInputRows"]) for p in progress))


def read_delta_table(table_path: str | Path) -> Any:
    """The Delta table as a pyarrow Table sorted by window and category."""
    from deltalake import DeltaTable

    return DeltaTable(str(table_path)).to_pyarrow_table().sort_by([("window_start", "ascending"),
                                                                   ("category", "ascending")])
