# Databricks notebook source
# MAGIC %md
# MAGIC # VDL for Spark: quickstart
# MAGIC
# MAGIC VDL is a Raft-replicated log service that speaks the Kafka protocol; each **log stream** looks like a topic
# MAGIC with one partition. This notebook writes records to a stream (with Spark and with a plain Kafka client),
# MAGIC reads them back with `spark.read.format("vdl")`, and streams them into the memory sink with
# MAGIC `spark.readStream.format("vdl")`.
# MAGIC
# MAGIC **Before you start:** install the `vdl-for-spark` package on the cluster (it provides `format("vdl")`) and set
# MAGIC the `bootstrap_servers` widget to your VDL nodes (`host:port,host:port,...`). Locally, `vdl dev-cluster --nodes 3`
# MAGIC prints them.

# COMMAND ----------

dbutils.widgets.text("bootstrap_servers", "127.0.0.1:9092", "VDL bootstrap servers")
dbutils.widgets.text("stream_prefix", "quickstart", "Stream name prefix")

bootstrap = dbutils.widgets.get("bootstrap_servers")
import uuid

# A fresh stream per run, so the notebook can be re-run as is.
stream = f"{dbutils.widgets.get('stream_prefix')}-{uuid.uuid4().hex[:8]}"
print(f"bootstrap servers: {bootstrap}; stream: {stream}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Make `format("vdl")` available
# MAGIC Installing the package is enough (Spark discovers `pyspark_vdl`); registering explicitly does no harm and also
# MAGIC works in a session that started before the package was installed.

# COMMAND ----------

import vdl_connector

vdl_connector.register(spark)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Write 1,000 records with Spark
# MAGIC The writer takes the columns of Spark's Kafka sink: `value` (required), `key`, `topic`, `headers`.
# MAGIC `createStreams` creates the stream if it does not exist yet.

# COMMAND ----------

from pyspark.sql import functions as F

readings = spark.range(1000).select(
    F.concat(F.lit("sensor-"), (F.col("id") % 7).cast("string")).alias("key"),
    F.to_json(F.struct(F.col("id"), (F.col("id") % 7).alias("sensor"), (F.col("id") * 0.5).alias("reading"))).alias("value"),
)
(readings.write.format("vdl")
 .option("kafka.bootstrap.servers", bootstrap)
 .option("topic", stream)
 .option("createStreams", "true")
 .mode("append")
 .save())

# COMMAND ----------

# MAGIC %md
# MAGIC ## ...and 100 more with a plain Kafka client
# MAGIC Any Kafka client works: here kafka-python (librdkafka-based clients and kcat too).

# COMMAND ----------

import json

from kafka import KafkaProducer

producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all")
for i in range(1000, 1100):
    producer.send(stream, key=f"sensor-{i % 7}".encode(), value=json.dumps({"id": i, "sensor": i % 7, "reading": i * 0.5}).encode())
producer.flush()
producer.close()

# COMMAND ----------

# MAGIC %md
# MAGIC ## Batch read
# MAGIC Same schema and option names as Spark's Kafka source: `key`, `value`, `topic`, `partition`, `offset`,
# MAGIC `timestamp`, `timestampType`.

# COMMAND ----------

raw = (spark.read.format("vdl")
       .option("kafka.bootstrap.servers", bootstrap)
       .option("subscribe", stream)
       .option("startingOffsets", "earliest")
       .load())
raw.printSchema()
display(raw.selectExpr("offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "timestamp").orderBy("offset").limit(5))

# COMMAND ----------

batch_count = raw.count()
offsets = raw.agg(F.min("offset"), F.max("offset"), F.countDistinct("offset")).first()
print(f"batch read: {batch_count} records, offsets {offsets[0]}..{offsets[1]}")
assert batch_count == 1100 and tuple(offsets) == (0, 1099, 1100)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Streaming read into the memory sink
# MAGIC `trigger(availableNow=True)` processes everything in the stream now (in batches of at most
# MAGIC `maxOffsetsPerTrigger` records) and stops. The offsets live in the checkpoint.

# COMMAND ----------

import tempfile

checkpoint = tempfile.mkdtemp(prefix="vdl-quickstart-checkpoint-")
query = (spark.readStream.format("vdl")
         .option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", stream)
         .option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", "400")
         .load()
         .selectExpr("offset", "CAST(key AS STRING) AS sensor_key", "CAST(value AS STRING) AS json")
         .writeStream.format("memory").queryName("quickstart_events")
         .option("checkpointLocation", checkpoint)
         .trigger(availableNow=True)
         .start())
query.awaitTermination()
batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
print(f"micro-batches: {batches}")

# COMMAND ----------

streamed = spark.table("quickstart_events")
readings_by_sensor = (streamed
                      .select(F.from_json("json", "id LONG, sensor INT, reading DOUBLE").alias("r"))
                      .groupBy("r.sensor").agg(F.count("*").alias("records"), F.round(F.avg("r.reading"), 2).alias("avg_reading"))
                      .orderBy("sensor"))
display(readings_by_sensor)

# COMMAND ----------

streamed_count = streamed.count()
print(f"quickstart OK: {batch_count} records read in batch, {streamed_count} streamed in {len(batches)} micro-batches")
assert streamed_count == 1100 and batches == [400, 400, 300]
