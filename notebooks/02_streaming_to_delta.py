# Databricks notebook source
# MAGIC %md
# MAGIC # Streaming from VDL to Delta
# MAGIC
# MAGIC The pipeline `vdl demo` runs, step by step: one streaming query reads the log stream once per micro-batch,
# MAGIC parses the JSON once, and `foreachBatch` feeds both outputs from that batch:
# MAGIC
# MAGIC ```
# MAGIC orders (log stream) --readStream.format("vdl")--> from_json --foreachBatch--+--> enrich (join dimensions)
# MAGIC                                                                            |     --write.format("vdl"), exactly once--> orders-enriched
# MAGIC                                                                            +--> orders per 1-minute window and category
# MAGIC                                                                                  --Delta MERGE (add to the window's row + app transaction)--> orders_per_minute
# MAGIC ```
# MAGIC
# MAGIC **Delta.** Here the Delta table is written with the `deltalake` package from `foreachBatch`, so it works on any
# MAGIC Spark. On a Spark with Delta installed (Databricks) `writeStream.format("delta")` works unchanged with this source,
# MAGIC for example `aggregates.writeStream.format("delta").outputMode("append").option("checkpointLocation", ...).toTable("orders_per_minute")`.
# MAGIC
# MAGIC The last part, **freshness**, keeps events coming at a steady rate and prints for every micro-batch how old the
# MAGIC newest event visible in the Delta table is (what `vdl demo --follow` does).
# MAGIC
# MAGIC `output_dir` must be a path that both Spark and plain Python (deltalake) can use: locally any directory, on
# MAGIC Databricks a Unity Catalog volume (`/Volumes/<catalog>/<schema>/<volume>/...`).

# COMMAND ----------

dbutils.widgets.text("bootstrap_servers", "127.0.0.1:9092", "VDL bootstrap servers")
dbutils.widgets.text("records", "50000", "Order events to produce")
dbutils.widgets.text("output_dir", "/tmp/vdl-notebook-02", "Directory for the Delta table and checkpoints")
dbutils.widgets.text("follow_rate", "5000", "Freshness part: events per second")
dbutils.widgets.text("follow_seconds", "20", "Freshness part: seconds to follow")

import os
import uuid

bootstrap = dbutils.widgets.get("bootstrap_servers")
records = int(dbutils.widgets.get("records"))
run = uuid.uuid4().hex[:8]  # fresh streams, table and checkpoints per run
source_stream, enriched_stream = f"orders-{run}", f"orders-enriched-{run}"
base = os.path.join(dbutils.widgets.get("output_dir"), run)
delta_path = os.path.join(base, "delta", "orders_per_minute")
print(f"streams {source_stream}, {enriched_stream}; Delta table {delta_path}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## 1. Produce the order events
# MAGIC Realistic orders as JSON, keyed by customer id, with event times up to 5 s out of order. The generator is
# MAGIC deterministic (same seed, same events), which lets the last cell check the result independently.

# COMMAND ----------

import vdl_connector
from vdl_dev.workload import WorkloadConfig, produce_workload
from vdl_client import VdlClient
from vdl_client import ClientSettings

vdl_connector.register(spark)
with VdlClient(ClientSettings.from_bootstrap(bootstrap)) as client:
    client.create_streams([source_stream, enriched_stream])
workload = WorkloadConfig(records=records, seed=2026)
stats = produce_workload(bootstrap, source_stream, workload, progress=False)
print(f"produced {stats.records} records in {stats.seconds:.1f} s")

# COMMAND ----------

# MAGIC %md
# MAGIC ## 2. Read the stream and parse the JSON
# MAGIC `format("vdl")` takes the options of Spark's Kafka source. Money is parsed as DECIMAL, so sums are exact.

# COMMAND ----------

from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, IntegerType, StringType, StructField, StructType, TimestampType

order_schema = StructType([
    StructField("order_id", StringType()), StructField("customer_id", StringType()),
    StructField("event_time", TimestampType()), StructField("category", StringType()),
    StructField("product_id", StringType()), StructField("quantity", IntegerType()),
    StructField("unit_price", DecimalType(10, 2)), StructField("amount", DecimalType(10, 2)),
    StructField("country", StringType()), StructField("payment", StringType()),
])
raw = (spark.readStream.format("vdl")
       .option("kafka.bootstrap.servers", bootstrap)
       .option("subscribe", source_stream)
       .option("startingOffsets", "earliest")
       .option("maxOffsetsPerTrigger", str(max(5000, records // 4)))
       .option("minPartitions", "2")  # a stream is one partition: split each micro-batch over both cores
       .load())
# The record timestamp says when the event was produced: kept for the freshness part.
orders = (raw.select(F.from_json(F.col("value").cast("string"), order_schema).alias("order"),
                     F.col("offset").alias("source_offset"), F.col("timestamp").alias("produced_at"))
          .select("order.*", "source_offset", "produced_at"))
orders.printSchema()

# COMMAND ----------

# MAGIC %md
# MAGIC ## 3. Each micro-batch: enrich, and aggregate into Delta
# MAGIC `foreachBatch` gets each micro-batch as a DataFrame, cached so the source is read once for both outputs.
# MAGIC
# MAGIC * **Enriched events** are joined with two small dimension tables and written back to a log stream with
# MAGIC   `write.format("vdl")` and `exactlyOnce=true`: inside `foreachBatch` the writer takes its idempotent-producer ids
# MAGIC   from the query and batch id, so a micro-batch Spark replays after a failure re-sends batches the broker already
# MAGIC   holds, and nothing is stored twice.
# MAGIC * **Window aggregates** (orders, units, revenue, largest order per 1-minute event-time window and category) of the
# MAGIC   micro-batch are partial sums: `DeltaMergeSink` MERGEs them into the table, adding to the row of each window the
# MAGIC   batch touched, and commits together with Delta's **app transaction** `(query id, batch id)`. A replayed batch
# MAGIC   finds its id already committed and is skipped. The table is the aggregation state: a late order still counts.

# COMMAND ----------

import pyarrow.compute as pc
from vdl_dev.pipeline import ACCUMULATE, DeltaMergeSink

departments = spark.createDataFrame(
    [("books", "media"), ("electronics", "tech"), ("fashion", "apparel"), ("garden", "outdoor"),
     ("grocery", "food"), ("home", "household"), ("sports", "outdoor"), ("toys", "kids")], "category string, department string")
regions = spark.createDataFrame(
    [(c, "EMEA") for c in ("DE", "FR", "GB", "ES", "IT", "NL", "PL", "SE")] + [("US", "AMER"), ("JP", "APAC")],
    "country string, region string")
order_columns = ["order_id", "customer_id", "event_time", "category", "product_id", "quantity", "unit_price", "amount",
                 "country", "payment"]
checkpoint = os.path.join(base, "checkpoints", "orders")
sink = DeltaMergeSink(delta_path, checkpoint=checkpoint, combine=ACCUMULATE)


def process_batch(batch, batch_id):
    sink.adopt_running_query(batch)  # the app id of the Delta transactions: this query's id
    batch.persist()
    try:
        enriched = (batch.join(F.broadcast(departments), "category", "left").join(F.broadcast(regions), "country", "left")
                    .withColumn("amount_tier", F.when(F.col("amount") >= 500, "large").when(F.col("amount") >= 50, "medium").otherwise("small")))
        (enriched.select(F.col("customer_id").alias("key"),
                         F.to_json(F.struct(*order_columns, "department", "region", "amount_tier", "source_offset")).alias("value"))
         .write.format("vdl").option("kafka.bootstrap.servers", bootstrap).option("topic", enriched_stream)
         .option("exactlyOnce", "true").mode("append").save())
        aggregates = (batch.groupBy(F.window("event_time", "1 minute"), "category")
                      .agg(F.count(F.lit(1)).alias("orders"), F.sum("quantity").cast("long").alias("units"),
                           F.sum("amount").alias("revenue"), F.max("amount").alias("max_amount"))
                      .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                              "category", "orders", "units", "revenue", "max_amount")).toArrow()
    finally:
        batch.unpersist()
    sink.write_arrow(aggregates, batch_id)

# COMMAND ----------

# MAGIC %md
# MAGIC ## 4. Run it
# MAGIC `trigger(availableNow=True)` processes what the stream holds now, in micro-batches of `maxOffsetsPerTrigger`, and stops.

# COMMAND ----------

query = (orders.writeStream.queryName(f"orders_{run}").option("checkpointLocation", checkpoint)
         .foreachBatch(process_batch).trigger(availableNow=True).start())
query.awaitTermination()
rows = sum(p["numInputRows"] for p in query.recentProgress)
print(f"{query.name}: {rows} records in {sum(1 for p in query.recentProgress if p['numInputRows'])} micro-batches")
print(f"Delta commits for batches {sink.committed}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## 5. The Delta table
# MAGIC Read with `deltalake` (or `spark.read.format("delta")` where Delta is installed).

# COMMAND ----------

from deltalake import DeltaTable

table = DeltaTable(delta_path)
result = table.to_pandas().sort_values(["window_start", "category"]).reset_index(drop=True)
print(f"Delta table version {table.version()}: {len(result)} rows, {int(result['orders'].sum())} orders")
display(spark.createDataFrame(result).orderBy(F.desc("revenue")).limit(10))

# COMMAND ----------

import matplotlib.pyplot as plt

revenue = result.assign(revenue=result["revenue"].astype(float)).pivot(index="window_start", columns="category", values="revenue")
fig, ax = plt.subplots(figsize=(10, 4))
revenue.plot(ax=ax, linewidth=1.2)
ax.set_title("Revenue per 1-minute event-time window")
ax.set_xlabel("event time (UTC)")
ax.set_ylabel("revenue")
ax.legend(ncol=4, fontsize="small")
fig.tight_layout()
display(fig)

# COMMAND ----------

# MAGIC %md
# MAGIC ## 6. A replayed batch is skipped
# MAGIC Delta records the last batch id per app id. Calling the sink again with an old batch id (as Spark does after a
# MAGIC crash between the Delta commit and its own checkpoint commit) changes nothing.

# COMMAND ----------

import pyarrow as pa

last = table.transaction_version(sink.app_id)
version_before = table.version()
skipped = not sink.write_arrow(pa.Table.from_pandas(result.head(1), preserve_index=False), last)
print(f"app {sink.app_id}: last batch {last}; replaying it skipped: {skipped}; "
      f"table version {version_before} -> {DeltaTable(delta_path).version()}")
assert skipped and DeltaTable(delta_path).version() == version_before

# COMMAND ----------

# MAGIC %md
# MAGIC ## 7. Check against an independent computation
# MAGIC The expected aggregates are recomputed in plain Python from the produced events.

# COMMAND ----------

from vdl_dev.workload import events, expected_aggregates

expected = [(r.window_start_ms, r.category, r.orders, r.units, r.revenue, r.max_amount)
            for r in expected_aggregates(v for _, v in events(workload))]
actual = [(int(row.window_start.timestamp() * 1000), row.category, int(row.orders), int(row.units), row.revenue, row.max_amount)
          for row in result.itertuples()]
with VdlClient(ClientSettings.from_bootstrap(bootstrap)) as client:
    enriched_count = client.list_offsets([enriched_stream], -1)[enriched_stream]
print(f"streaming to Delta OK: {len(actual)} rows match the expected aggregates: {actual == expected}; "
      f"{enriched_count} enriched events in {enriched_stream}")
assert actual == expected and enriched_count == records

# COMMAND ----------

# MAGIC %md
# MAGIC ## 8. Freshness
# MAGIC Now events keep arriving at a steady rate (`follow_rate` per second, event times on the wall clock) and the same
# MAGIC job runs with `trigger(processingTime="1 second")`. After each micro-batch's Delta commit it prints the
# MAGIC end-to-end **freshness**: the age of the newest event visible in the Delta table (the commit time minus the time
# MAGIC that event was produced; the commit records it as `vdl.newest_produced_ms`). After `follow_seconds` the producer
# MAGIC stops, the job processes the rest, and every event is accounted for once. `vdl demo --follow` runs the same.

# COMMAND ----------

import threading
from vdl_dev.follow import follow, summary_line

follow_source, follow_enriched = f"follow-{run}", f"follow-enriched-{run}"
with VdlClient(ClientSettings.from_bootstrap(bootstrap)) as client:
    client.create_streams([follow_source, follow_enriched])
follow_report = follow(spark, bootstrap, os.path.join(base, "follow"), source=follow_source, enriched=follow_enriched,
                       rate=int(dbutils.widgets.get("follow_rate")), trigger_s=1.0,
                       duration_s=float(dbutils.widgets.get("follow_seconds")), stop=threading.Event())
print(summary_line(follow_report, float(dbutils.widgets.get("follow_seconds"))))
print(f"freshness check: {follow_report.produced} produced, {follow_report.delta_orders} counted in Delta, "
      f"{follow_report.enriched_out} enriched: {follow_report.ok}")
assert follow_report.ok
