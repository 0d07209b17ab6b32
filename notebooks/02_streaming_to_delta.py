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
# MAGIC                                                                                  --DeltaTable.merge (add to the window's row), idempotent--> orders_per_minute
# MAGIC ```
# MAGIC
# MAGIC **Delta.** The table is written as on any Databricks cluster: `DeltaTable.forPath(spark, path).merge(...)` inside
# MAGIC `foreachBatch`, made exactly once by Delta's idempotent writes, and read with `spark.read.format("delta")` and
# MAGIC `DESCRIBE HISTORY`. (`writeStream.format("delta")` works with this source too, for a plain append of each row.)
# MAGIC
# MAGIC The last part, **freshness**, keeps events coming at a steady rate and prints for every micro-batch how old the
# MAGIC newest event visible in the Delta table is (what `vdl demo --follow` does).
# MAGIC
# MAGIC `output_dir` holds the Delta table and the checkpoints: locally any directory, on Databricks a Unity Catalog
# MAGIC volume (`/Volumes/<catalog>/<schema>/<volume>/...`).

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
# MAGIC   micro-batch are partial sums: `DeltaTable.merge` adds them to the row of each window the batch touched. The table
# MAGIC   is the aggregation state: a late order still counts.
# MAGIC * **Exactly once into Delta**: Delta's idempotent writes. The first batch creates the table with an append and the
# MAGIC   writer options `txnAppId` / `txnVersion`; every later batch is a MERGE, which takes the same pair from the session
# MAGIC   settings `spark.databricks.delta.write.txnAppId` / `spark.databricks.delta.write.txnVersion` (set on the
# MAGIC   micro-batch's own session, and unset after it). The commit records the pair as an app transaction; Delta skips a
# MAGIC   write whose version (the batch id) is not above the one recorded for the app id, so a micro-batch Spark replays
# MAGIC   after a failure changes nothing.

# COMMAND ----------

from delta.tables import DeltaTable

departments = spark.createDataFrame(
    [("books", "media"), ("electronics", "tech"), ("fashion", "apparel"), ("garden", "outdoor"),
     ("grocery", "food"), ("home", "household"), ("sports", "outdoor"), ("toys", "kids")], "category string, department string")
regions = spark.createDataFrame(
    [(c, "EMEA") for c in ("DE", "FR", "GB", "ES", "IT", "NL", "PL", "SE")] + [("US", "AMER"), ("JP", "APAC")],
    "country string, region string")
order_columns = ["order_id", "customer_id", "event_time", "category", "product_id", "quantity", "unit_price", "amount",
                 "country", "payment"]
checkpoint = os.path.join(base, "checkpoints", "orders")
app_id = f"orders-per-minute-{run}"  # one per pipeline: kept when the query restarts from its checkpoint
accumulate = {"orders": "t.orders + s.orders", "units": "t.units + s.units", "revenue": "t.revenue + s.revenue",
              "max_amount": "greatest(t.max_amount, s.max_amount)"}
committed = []


def merge_aggregates(aggregates, batch_id):
    """MERGE one batch's partial aggregates, exactly once; False when Delta skipped it (committed before)."""
    session = aggregates.sparkSession
    if not DeltaTable.isDeltaTable(session, delta_path):
        (aggregates.write.format("delta").option("txnAppId", app_id).option("txnVersion", batch_id)
         .save(delta_path))
        return True
    session.conf.set("spark.databricks.delta.write.txnAppId", app_id)
    session.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
    try:
        metrics = (DeltaTable.forPath(session, delta_path).alias("t")
                   .merge(aggregates.alias("s"), "t.window_start = s.window_start AND t.category = s.category")
                   .whenMatchedUpdate(set=accumulate).whenNotMatchedInsertAll()
                   .execute())
        return len(metrics.collect()) > 0  # no metrics row: Delta skipped the MERGE
    finally:
        session.conf.unset("spark.databricks.delta.write.txnAppId")
        session.conf.unset("spark.databricks.delta.write.txnVersion")


def process_batch(batch, batch_id):
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
                              "category", "orders", "units", "revenue", "max_amount"))
        if merge_aggregates(aggregates, batch_id):
            committed.append(batch_id)
    finally:
        batch.unpersist()

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
print(f"Delta commits for batches {committed}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## 5. The Delta table
# MAGIC Read with `spark.read.format("delta")`; `DESCRIBE HISTORY` lists the commits (the first batch's `WRITE`, then a
# MAGIC `MERGE` per micro-batch).

# COMMAND ----------

table = spark.read.format("delta").load(delta_path)
result = table.orderBy("window_start", "category").toPandas()
version = DeltaTable.forPath(spark, delta_path).history(1).first().version
print(f"Delta table version {version}: {len(result)} rows, {int(result['orders'].sum())} orders")
display(table.orderBy(F.desc("revenue")).limit(10))
display(spark.sql(f"DESCRIBE HISTORY delta.`{delta_path}`").select("version", "timestamp", "operation", "operationMetrics"))

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
# MAGIC Delta records the last batch id per app id. Merging again with that batch id (as Spark does after a crash between
# MAGIC the Delta commit and its own checkpoint commit) changes nothing: no commit, no window counted twice.

# COMMAND ----------

last = committed[-1]
orders_before = table.agg(F.sum("orders")).first()[0]
skipped = not merge_aggregates(spark.read.format("delta").load(delta_path).limit(1), last)
version_after = DeltaTable.forPath(spark, delta_path).history(1).first().version
orders_after = spark.read.format("delta").load(delta_path).agg(F.sum("orders")).first()[0]
print(f"app {app_id}: last batch {last}; replaying it skipped: {skipped}; table version {version} -> {version_after}; "
      f"orders {orders_before} -> {orders_after}")
assert skipped and version_after == version and orders_after == orders_before

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
