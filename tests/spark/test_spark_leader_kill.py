"""A leader kill during a streaming read and write on a 3-node dev cluster: nothing lost, nothing
duplicated."""

from __future__ import annotations

import json
import time
from pathlib import Path

from chispa import assert_df_equality

from tests.spark.kafka_helpers import admin, consume_all, expected_df, produce_kafka_python
from tests.support.cluster import start_cluster, wait_until

COUNT = 1000


def done(query) -> bool:  # noqa: ANN001
    """The query's last micro-batch ended at the end of the source stream."""
    progress = query.lastProgress
    return bool(progress) and json.loads(progress["sources"][0]["endOffset"]) == {"kill-src": COUNT}


def test_leader_kill_during_streaming_read_and_write(spark, tmp_path: Path) -> None:  # noqa: ANN001
    cluster = start_cluster(tmp_path / "cluster", nodes=3)
    try:
        bootstrap = cluster.bootstrap_servers
        with admin(bootstrap) as client:
            client.create_streams(["kill-src", "kill-dst"])
        produced = produce_kafka_python(bootstrap, "kill-src", COUNT, "lz4", "kill")
        output = str(tmp_path / "out")
        frame = (spark.readStream.format("vdl").option("bootstrap.servers", bootstrap).option("subscribe", "kill-src")
                 .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "250")
                 .option("includeHeaders", "true").load())
        read_query = (frame.writeStream.format("parquet").option("path", output)
                      .option("checkpointLocation", str(tmp_path / "checkpoint-read"))
                      .trigger(processingTime="200 milliseconds").start())
        write_query = (frame.select("key", "value", "headers").writeStream.format("vdl")
                       .option("bootstrap.servers", bootstrap).option("topic", "kill-dst")
                       .option("checkpointLocation", str(tmp_path / "checkpoint-write"))
                       .trigger(processingTime="200 milliseconds").start())
        try:
            wait_until(lambda: read_query.lastProgress and write_query.lastProgress, 60,
                       "both queries to complete a micro-batch", interval=0.2)
            leader = cluster.leader_of("kill-src")
            assert leader is not None
            cluster.kill(leader)  # SIGKILL the source's leader mid-query (the sink's too if it is the same)
            deadline = time.monotonic() + 120
            while not (done(read_query) and done(write_query)):
                assert read_query.exception() is None and write_query.exception() is None
                assert time.monotonic() < deadline, "the queries did not reach the end after the leader kill"
                time.sleep(0.5)
            read_query.processAllAvailable()
            write_query.processAllAvailable()
        finally:
            read_query.stop()
            write_query.stop()
        result = spark.read.schema(expected_df(spark, produced).schema).parquet(output)
        assert_df_equality(result.orderBy("offset"), expected_df(spark, produced), ignore_nullable=True)
        copied = consume_all(bootstrap, "kill-dst", COUNT)
        assert_df_equality(spark.createDataFrame([(r.value,) for r in copied], "value binary").orderBy("value"),
                           spark.createDataFrame([(p.value,) for p in produced], "value binary").orderBy("value"))
    finally:
        cluster.kill_all()
