# Databricks notebook source
# MAGIC %md
# MAGIC # Recovery: stop the query, kill the stream's leader, restart from the checkpoint
# MAGIC
# MAGIC The source keeps its position in Spark's checkpoint (one next-offset per stream) and reads only committed
# MAGIC records (below the high watermark), which never go backwards, even across leader elections. So a query stopped
# MAGIC half-way and restarted after the stream's leader died continues exactly where it stopped: nothing lost, nothing
# MAGIC read twice.
# MAGIC
# MAGIC **Killing the leader.** Next to a local dev cluster (`cluster_state` = the `cluster.json` written by `vdl demo`
# MAGIC or the notebook tests) this notebook kills the leader's process itself. Against remote brokers (Databricks) leave
# MAGIC `cluster_state` empty: the notebook names the leader node and waits until you have stopped it and another node
# MAGIC has taken over.

# COMMAND ----------

dbutils.widgets.text("bootstrap_servers", "127.0.0.1:9092", "VDL bootstrap servers")
dbutils.widgets.text("cluster_state", "", "cluster.json of a local dev cluster (empty: kill the leader by hand)")
dbutils.widgets.text("records", "40000", "Order events to produce")
dbutils.widgets.text("output_dir", "/tmp/vdl-notebook-03", "Directory for the Delta table and checkpoint")

import os
import uuid

bootstrap = dbutils.widgets.get("bootstrap_servers")
cluster_state = dbutils.widgets.get("cluster_state").strip()
records = int(dbutils.widgets.get("records"))
run = uuid.uuid4().hex[:8]
stream = f"recovery-{run}"
base = os.path.join(dbutils.widgets.get("output_dir"), run)
output_path, checkpoint = os.path.join(base, "events"), os.path.join(base, "checkpoint")
print(f"stream {stream}; output {output_path}")

# COMMAND ----------

import vdl_connector
from vdl_dev.workload import WorkloadConfig, events, produce_workload
from vdl_client import VdlClient
from vdl_client import ClientSettings

vdl_connector.register(spark)
with VdlClient(ClientSettings.from_bootstrap(bootstrap)) as client:
    client.create_streams([stream])
workload = WorkloadConfig(records=records, seed=3)
half = records // 2
print(f"produced {produce_workload(bootstrap, stream, WorkloadConfig(records=half, seed=3), progress=False).records} records (first half)")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Start a streaming query and stop it half-way
# MAGIC Into a Delta table with `writeStream.format("delta")`: Delta's streaming sink is exactly-once by itself (each
# MAGIC micro-batch commits with the query id and batch id as an app transaction, so a replayed batch is skipped).

# COMMAND ----------

import time


def start_query(trigger):
    stream_df = (spark.readStream.format("vdl")
                 .option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", stream)
                 .option("startingOffsets", "earliest")
                 .option("maxOffsetsPerTrigger", str(max(1000, records // 10)))
                 .load()
                 .selectExpr("offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value"))
    return (stream_df.writeStream.format("delta")
            .option("checkpointLocation", checkpoint)
            .trigger(**trigger)
            .start(output_path))


query = start_query({"processingTime": "1 second"})
deadline = time.time() + 300
while sum(p["numInputRows"] for p in query.recentProgress) < records // 4:
    assert time.time() < deadline and query.isActive, f"the query made no progress: {query.exception()}"
    time.sleep(0.5)
query.stop()
before = spark.read.format("delta").load(output_path).count()
print(f"stopped the query after {before} records")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Kill the stream's leader

# COMMAND ----------

import json
import signal

from vdl_dev.dev_cluster import fetch_metadata


def metadata():
    for address in bootstrap.split(","):
        try:
            return fetch_metadata(address.strip(), [stream])
        except OSError:
            continue
    raise RuntimeError("no node answers")


def leader():
    for topic in metadata().topics:
        if topic.name == stream and topic.error_code == 0 and topic.partitions:
            return topic.partitions[0].leader_id
    return -1


old_leader, nodes = leader(), len(metadata().brokers)
print(f"stream {stream}: leader node {old_leader} of {nodes}")
if nodes < 3:
    print(f"only {nodes} node(s): no other replica can take over, so the leader stays up")
elif cluster_state:
    pid = json.load(open(cluster_state))["nodes"][str(old_leader)]["pid"]
    os.killpg(pid, signal.SIGKILL)  # each dev-cluster node runs in its own process group
    print(f"killed node {old_leader} (pid {pid}) with SIGKILL")
else:
    print(f"stop VDL node {old_leader} now (kill -9 its process); waiting for a new leader...")

# COMMAND ----------

started = time.time()
new_leader = old_leader
while nodes >= 3 and new_leader in (old_leader, -1):
    assert time.time() - started < 300, "no new leader within 300 s"
    time.sleep(0.2)
    try:
        new_leader = leader()
    except (OSError, RuntimeError, ValueError):
        new_leader = -1
print(f"leader: node {old_leader} -> node {new_leader} after {time.time() - started:.1f} s")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Write the second half, then restart the query from its checkpoint

# COMMAND ----------

second = produce_workload(bootstrap, stream, workload, start=half, progress=False)
print(f"produced {second.records} more records through the new leader")
query = start_query({"availableNow": True})
query.awaitTermination()

# COMMAND ----------

# MAGIC %md
# MAGIC ## Nothing lost, nothing duplicated

# COMMAND ----------

from pyspark.sql import functions as F

result = spark.read.format("delta").load(output_path)
summary = result.agg(F.count("*").alias("rows"), F.countDistinct("offset").alias("offsets"),
                     F.min("offset").alias("first"), F.max("offset").alias("last")).first()
display(result.groupBy((F.col("offset") / 10000).cast("int").alias("offset_block")).count().orderBy("offset_block"))
got = [(r.key.encode(), r.value.encode()) for r in result.orderBy("offset").collect()]
identical = got == list(events(workload))
print(f"recovery OK: {summary.rows} rows, {summary.offsets} distinct offsets {summary.first}..{summary.last}, "
      f"{before} before the stop; identical to the produced events: {identical}")
assert (summary.rows, summary.offsets, summary.first, summary.last) == (records, records, 0, records - 1) and identical
