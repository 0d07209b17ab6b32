"""format("vdl") through Spark Connect: a client session (`SparkSession.builder.remote`) reads,
writes and streams through the server's Python workers, which find the connector as a classic
session's do. PySpark starts a local Connect server inside its own process's JVM, which the
test run's shared classic session already holds: the client runs in a process of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.spark.kafka_helpers import create_streams
from tests.support.cluster import BrokerProcess

pytestmark = pytest.mark.timeout(240)

CLIENT = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    bootstrap, checkpoint = sys.argv[1], sys.argv[2]
    spark = SparkSession.builder.remote("local[2]").getOrCreate()
    try:
        def read(stream):
            return [(row.offset, row.value.decode()) for row in
                    spark.read.format("vdl").option("bootstrap.servers", bootstrap).option("subscribe", stream)
                    .load().orderBy("offset").collect()]

        (spark.createDataFrame([("k1", "one"), ("k2", "two")], "key string, value string").coalesce(1)
         .write.format("vdl").option("bootstrap.servers", bootstrap).option("topic", "connect-in").mode("append")
         .save())
        written = read("connect-in")
        query = (spark.readStream.format("vdl").option("bootstrap.servers", bootstrap).option("subscribe", "connect-in")
                 .option("startingOffsets", "earliest").load().selectExpr("key", "upper(CAST(value AS STRING)) AS value")
                 .writeStream.format("vdl").option("bootstrap.servers", bootstrap).option("topic", "connect-out")
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        query.awaitTermination()
        print("RESULT", json.dumps({"session": type(spark).__module__, "written": written,
                                    "copied": read("connect-out")}), flush=True)
    finally:
        spark.stop()
""")


def test_read_write_and_stream_through_spark_connect(broker: BrokerProcess, tmp_path: Path) -> None:
    create_streams(broker.bootstrap, "connect-in", "connect-out")
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "PYSPARK_SUBMIT_ARGS", "SPARK_REMOTE")}
    env |= {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-c", CLIENT, broker.bootstrap, str(tmp_path / "checkpoint")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=200)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout + done.stderr
    result = json.loads(lines[0].removeprefix("RESULT "))
    assert result == {"session": "pyspark.sql.connect.session", "written": [[0, "one"], [1, "two"]],
                      "copied": [[0, "ONE"], [1, "TWO"]]}
