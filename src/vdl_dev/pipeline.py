"""The demo's structured-streaming job, as reusable steps (run.py, follow.py, notebook 02 and the
main-job benchmark use them).

    orders (log stream) --readStream.format("vdl"), valueJsonSchema--> parsed --foreachBatch, per micro-batch:
        +--> enrich (dimension lookups) --write.format("vdl"), exactly once--> orders-enriched
        +--> orders per 1-minute event-time window and category, collected --MERGE (delta-rs in the
             driver: accumulate; idempotent: app transaction = query id, batch id)--> orders_per_minute

One query reads the source once per micro-batch and parses it once: the parsed batch is cached
and feeds both outputs. The window aggregates of a batch are partial sums that the MERGE adds to
the table's rows, so the Delta table is the aggregation state (no Spark state store, nothing to
drop: a late order still updates its window). Both outputs are exactly once: a replayed
micro-batch (same batch id after a restart) re-sends the enriched records with the same
idempotent-producer ids and sequences, which the broker stores once, and Delta skips its MERGE
(the table recorded that batch id for the query: vdl_dev/delta_sink.py).

The aggregates are a few hundred rows, collected to the driver anyway for the batch's figures;
they MERGE through delta-rs there (DeltaMergeSink.merge_arrow) rather than through delta-spark's
DeltaTable.merge, which spends ~0.9 s of Spark jobs and log replay on any commit on this machine
(delta-rs: ~0.03 s) and so set each micro-batch's length. Spark reads the table as any Delta table
(delta-spark: read_delta_table, DESCRIBE HISTORY); notebook 02 writes it with DeltaTable.merge.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vdl_dev.delta_sink import (
    NEWEST_PRODUCED_METADATA,
    DeltaMergeSink,
    last_committed_batch,
    query_id_from_checkpoint,
    read_delta_table,
)
from vdl_dev.workload import DEPARTMENTS, REGIONS

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

__all__ = ["DeltaMergeSink", "MainJobBatch", "PipelinePaths", "aggregate_orders", "enrich_orders",
           "last_committed_batch", "lookup", "parse_orders", "query_id_from_checkpoint", "read_delta_table", "read_orders",
           "start_pipeline", "warm_read_tasks", "warm_up", "warm_up_or_say"]

log = logging.getLogger("vdl_demo")

WINDOW = "1 minute"
# The enriched records as the demo's producer sends the orders: zstd batches. A million of them
# are ~300 MB of JSON and 39 MB stored, and each byte not sent is a byte three brokers do not
# receive, check and store: `vdl demo` took 29.7-31.5 s so, 33.1-34.7 s uncompressed (alternating
# runs on this 2-core machine).
ENRICHED_COMPRESSION = "zstd"
ORDER_COLUMNS = ("order_id", "customer_id", "event_time", "category", "product_id", "quantity",
                 "unit_price", "amount", "country", "payment")
# Delta checkpoints a table every 10 commits by default; at 100, a reader (and the MERGE of the
# next batch) replays up to 99 JSON commits after the last checkpoint instead of up to 9, but
# rebuilds the table's state from a Parquet checkpoint ten times less often, which in delta-spark
# costs more (projections over the log's wide schema in every task): 100 delta-spark MERGEs in a
# row took 1.4-2.0 s each at 100 (median 1.59 s), ~1.9-2.1 s and 4-5 s every 10th at 10.
AGGREGATE_TABLE_PROPERTIES = {"delta.checkpointInterval": "100"}
# A window's row accumulates the partial aggregates of every batch that saw its orders.
ACCUMULATE = {"orders": "t.orders + s.orders", "units": "t.units + s.units", "revenue": "t.revenue + s.revenue",
              "max_amount": "CASE WHEN s.max_amount > t.max_amount THEN s.max_amount ELSE t.max_amount END"}


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
                max_offsets_per_trigger: int | None = None, starting_offsets: str = "earliest",
                min_partitions: int | None = None, parse_values: bool = True) -> DataFrame:
    """The log stream, as with format("kafka"): key, value, topic, offset, timestamp...; with
    parse_values also valueJson, the value parsed as order_schema().

    parse_values: the source parses each value with valueJsonSchema as it decodes the records
    (one C++ JSON read per Arrow batch in the read task), giving what from_json computes in
    the JVM with a parser per record (the job's largest per-row cost there); parse_orders uses
    it. min_partitions splits each micro-batch's offset range over that many tasks (a stream
    is one partition, so without it one task reads and parses the whole batch on one core)."""
    reader = (spark.readStream.format("vdl")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", stream)
              .option("startingOffsets", starting_offsets))
    if parse_values:
        reader = reader.option("valueJsonSchema", order_schema().json())
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    if min_partitions:
        reader = reader.option("minPartitions", str(min_partitions))
    return reader.load()


def parse_orders(raw: DataFrame) -> DataFrame:
    """JSON value -> typed columns; the log offset is kept (lineage back to the stream) and the
    record's timestamp as produced_at (when the event was produced: the freshness reference).
    The value the source parsed already (read_orders' parse_values: valueJson) is taken where
    the source gives it."""
    from pyspark.sql import functions as F

    from vdl_connector.schema import VALUE_JSON_COLUMN

    produced = F.col("timestamp") if "timestamp" in raw.columns else F.lit(None).cast("timestamp")
    order = F.from_json(F.col("value").cast("string"), order_schema())
    if VALUE_JSON_COLUMN in raw.columns:
        # from_json runs only where the source left valueJson null (vdl_connector/json_values.py).
        order = F.coalesce(F.col(VALUE_JSON_COLUMN), order)
    parsed = raw.select(order.alias("order"),
                        F.col("offset").alias("source_offset"), produced.alias("produced_at"))
    return parsed.select("order.*", "source_offset", "produced_at")


def aggregate_orders(orders: DataFrame, window: str = WINDOW) -> DataFrame:
    """Orders, units, revenue and the largest order per 1-minute event-time window and category
    (of one micro-batch: partial aggregates), plus the newest produce time they include."""
    from pyspark.sql import functions as F

    return (orders.groupBy(F.window("event_time", window), F.col("category"))
            .agg(F.count(F.lit(1)).alias("orders"), F.sum("quantity").cast("long").alias("units"),
                 F.sum("amount").alias("revenue"), F.max("amount").alias("max_amount"),
                 F.max("produced_at").alias("newest_produced"))
            .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                    "category", "orders", "units", "revenue", "max_amount", "newest_produced"))


def lookup(mapping: Mapping[str, str], key: Column) -> Column:
    """mapping[key] as a map literal in the plan (null for a key it lacks, as a left join gives).

    For the small static dimensions: a broadcast join with them costs each micro-batch two Spark
    jobs (collecting and broadcasting each table) for what a literal in the plan answers."""
    from pyspark.sql import functions as F

    return F.create_map(*(F.lit(part) for item in sorted(mapping.items()) for part in item))[key]


def enrich_orders(orders: DataFrame) -> DataFrame:
    """Orders with their dimensions (category -> department, country -> region) and an amount
    tier, as (key, value) JSON for a log stream."""
    from pyspark.sql import functions as F

    tier = (F.when(F.col("amount") >= 500, "large").when(F.col("amount") >= 50, "medium").otherwise("small"))
    enriched = (orders.withColumn("department", lookup(DEPARTMENTS, F.col("category")))
                .withColumn("region", lookup(REGIONS, F.col("country")))
                .withColumn("amount_tier", tier))
    columns = [*ORDER_COLUMNS, "department", "region", "amount_tier", "source_offset"]
    return enriched.select(F.col("customer_id").alias("key"), F.to_json(F.struct(*columns)).alias("value"))


# -- the whole job -------------------------------------------------------------------------------


@dataclass
class BatchTimes:
    """Where one micro-batch's foreachBatch time went (seconds), and what it saw."""

    batch_id: int
    events: int
    windows: int
    enrich_s: float
    aggregate_s: float
    delta_s: float
    newest_produced_ms: int | None  # when the newest event of the batch was produced
    committed_at_ms: int  # when its Delta commit returned (the events are visible from then on)

    @property
    def work_s(self) -> float:
        """foreachBatch's time: both outputs, start to commit."""
        return self.enrich_s + self.aggregate_s + self.delta_s

    @property
    def freshness_s(self) -> float | None:
        """Age of the newest event in the Delta table when this batch made it visible."""
        if self.newest_produced_ms is None:
            return None
        return (self.committed_at_ms - self.newest_produced_ms) / 1000


@dataclass
class MainJobBatch:
    """The main job's foreachBatch function: one parsed micro-batch -> both outputs, exactly once.

    The enriched records go first (a batch write that takes its idempotent-producer ids from the
    query and batch id: exactlyOnce=true inside foreachBatch), then the window aggregates MERGE
    into Delta with the app transaction. A crash between the two is harmless: the replayed batch
    re-sends records the broker already holds and merges what Delta does not.
    """

    sink: DeltaMergeSink
    bootstrap: str
    enriched_stream: str
    times: list[BatchTimes] = field(default_factory=list)
    on_batch: Callable[[BatchTimes], None] | None = None  # called after each batch's Delta commit

    def __call__(self, orders: DataFrame, batch_id: int) -> None:
        self.sink.adopt_running_query(orders)
        started = time.monotonic()
        orders.persist()  # read and parsed once, used twice
        try:
            (enrich_orders(orders).write.format("vdl")
             .option("kafka.bootstrap.servers", self.bootstrap).option("topic", self.enriched_stream)
             .option("exactlyOnce", "true").option("kafka.compression.type", ENRICHED_COMPRESSION)
             .mode("append").save())
            enriched = time.monotonic()
            # A few hundred rows: collected once, for the batch's figures and for the MERGE in
            # the driver (merge_aggregates).
            table = aggregate_orders(orders).toArrow()
        finally:
            orders.unpersist()
        aggregated = time.monotonic()
        events, newest = self.merge_aggregates(table, batch_id)
        if not events:
            # An empty micro-batch (a query's first, started on an empty stream, runs one):
            # nothing became visible, no freshness to report.
            return
        done = time.monotonic()
        times = BatchTimes(batch_id, events, table.num_rows, enriched - started, aggregated - enriched,
                           done - aggregated, newest, int(time.time() * 1000))
        self.times.append(times)
        if self.on_batch is not None:
            self.on_batch(times)

    def merge_aggregates(self, table: pa.Table, batch_id: int) -> tuple[int, int | None]:
        """MERGE a batch's window aggregates (aggregate_orders, as an Arrow table) into Delta;
        returns the events they count and the newest one's produce time (ms)."""
        if not table.num_rows:
            return 0, None
        import pyarrow.compute as pc

        stamp = pc.max(table["newest_produced"]).as_py()
        newest = int(stamp.timestamp() * 1000) if stamp is not None else None
        metadata = {NEWEST_PRODUCED_METADATA: str(newest)} if newest is not None else {}
        self.sink.merge_arrow(table.drop_columns(["newest_produced"]), batch_id, metadata)
        return int(pc.sum(table["orders"]).as_py()), newest


@dataclass(frozen=True)
class PipelinePaths:
    delta_table: str
    checkpoint: str

    @classmethod
    def under(cls, base: str | Path) -> PipelinePaths:
        base = Path(base)
        return cls(str(base / "delta" / "orders_per_minute"), str(base / "checkpoints" / "main_job"))


@dataclass
class RunningPipeline:
    query: StreamingQuery
    batch: MainJobBatch

    @property
    def sink(self) -> DeltaMergeSink:
        return self.batch.sink

    def stop(self) -> None:
        try:
            self.query.stop()
        except Exception as error:  # noqa: BLE001 - stopping must not hide the caller's error
            log.warning("stopping %s: %s", self.query.name, error)


def start_pipeline(spark: SparkSession, raw: DataFrame, bootstrap: str, paths: PipelinePaths, *,
                   enriched: str = "orders-enriched", trigger: dict[str, Any] | None = None,
                   name: str = "main_job", on_batch: Callable[[BatchTimes], None] | None = None) -> RunningPipeline:
    """Start the main job over `raw` (read_orders, or any stream with value/offset columns).

    trigger: DataStreamWriter.trigger keywords, e.g. {"availableNow": True} or
    {"processingTime": "1 second"}; None runs micro-batches back to back."""
    sink = DeltaMergeSink(paths.delta_table, checkpoint=paths.checkpoint, combine=ACCUMULATE,
                          table_properties=AGGREGATE_TABLE_PROPERTIES)
    batch = MainJobBatch(sink, bootstrap, enriched, on_batch=on_batch)
    writer = (parse_orders(raw).writeStream.queryName(name).option("checkpointLocation", paths.checkpoint)
              .foreachBatch(batch))
    if trigger:
        writer = writer.trigger(**trigger)
    return RunningPipeline(writer.start(), batch)


@dataclass
class QueryStats:
    name: str
    batches: int
    input_rows: int


def query_stats(query: StreamingQuery) -> QueryStats:
    """Batches that read data and rows read, from the query's progress reports."""
    progress = [p for p in query.recentProgress if p.get("numInputRows", 0) > 0] if query.recentProgress else []
    return QueryStats(query.name or str(query.id), len(progress), sum(int(p["numInputRows"]) for p in progress))


# -- warming up ----------------------------------------------------------------------------------

WARM_UP_EVENTS = 2_000
WARM_UP_STREAMS = ("vdl-warm-up-orders", "vdl-warm-up-enriched")


def warm_up_or_say(spark: SparkSession, bootstrap: str, work: str | Path, say: Callable[[str], None]) -> None:
    """warm_up, reported; a warm-up that fails only costs the job its head start (the job then
    meets the same failure, or not, on its own)."""
    try:
        seconds = warm_up(spark, bootstrap, work)
    except Exception as error:  # noqa: BLE001 - the job proper decides; Ctrl-C still propagates
        say(f"warming Spark up failed ({type(error).__name__}: {str(error).splitlines()[0][:200]}); "
            "the first micro-batch pays Spark's start-up")
    else:
        say(f"warmed Spark up in {seconds:.1f} s (the job once over {WARM_UP_EVENTS:,} events on scratch streams, "
            "dropped after)")


def warm_read_tasks(spark: SparkSession, bootstrap: str, stream: str, tasks: int) -> int:
    """Read the first record of `stream` in each of `tasks` tasks, in one batch job; returns the
    records read (none while the stream is empty).

    Run on a thread while a streaming query of the stream starts, it starts what the query's
    first micro-batch would otherwise start after the query's own planning, one after the other:
    the read planner's daemon, and pyspark.worker's daemon with a worker per task, each of them
    importing pyspark, pyarrow and the connector. The query's read tasks then find those workers
    idle and take them (spark.python.worker.reuse). It only reads: on a thread of its own, a
    df.write.format("vdl") fails with DATA_SOURCE_NOT_FOUND (README: writing from a thread)."""
    from vdl_dev.cluster import end_offset

    end = min(tasks, end_offset(bootstrap, stream))
    if end == 0:
        return 0
    return len(spark.read.format("vdl").option("kafka.bootstrap.servers", bootstrap).option("subscribe", stream)
               .option("endingOffsets", json.dumps({stream: {"0": end}})).option("minPartitions", str(tasks))
               .load().select("offset").collect())


def warm_up(spark: SparkSession, bootstrap: str, work: str | Path, events: int = WARM_UP_EVENTS) -> float:
    """Run the main job once over a few events, from scratch streams into a scratch Delta table,
    then drop them all; returns the seconds it took.

    A session's first micro-batch pays for what later ones find ready: Spark's Python worker
    daemons (one per kind: data source lookup and creation, the streaming source runner, read
    and write tasks, write planning and commit, each importing pyspark, pyarrow and the
    connector), the JVM's compiled code and generated classes (whole-stage codegen caches them by
    source text, so the same plans reuse them), delta-rs's table creation and MERGE, and
    the client's first VdlWriterId. Paid on a few thousand events, before the job's first batch
    (while the demo produces; before `--follow` starts producing), it is not paid on that batch's
    records. Two micro-batches: the first creates the table (an append), the second MERGEs."""
    import shutil

    from vdl_client import ClientSettings, VdlClient
    from vdl_dev.workload import WorkloadConfig, produce_workload

    started = time.monotonic()
    source, enriched = WARM_UP_STREAMS
    work = Path(work)
    settings = ClientSettings.from_bootstrap(bootstrap, client_id="vdl-warm-up")
    with VdlClient(settings) as client:
        client.create_streams([source, enriched])
    try:
        produce_workload(bootstrap, source, WorkloadConfig(records=events), progress=False)
        raw = read_orders(spark, bootstrap, source, max_offsets_per_trigger=-(-events // 2), min_partitions=2)
        pipeline = start_pipeline(spark, raw, bootstrap, PipelinePaths.under(work), enriched=enriched,
                                  trigger={"availableNow": True}, name="vdl_warm_up")
        try:
            pipeline.query.awaitTermination()
            if pipeline.query.exception() is not None:
                raise RuntimeError(f"warm-up query failed: {pipeline.query.exception()}")
        finally:
            pipeline.stop()
    finally:
        with VdlClient(settings) as client:
            client.delete_streams([source, enriched])
        shutil.rmtree(work, ignore_errors=True)
    return time.monotonic() - started
