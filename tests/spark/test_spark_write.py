"""Batch and streaming writes land byte-exact (read back with kafka-python)."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from tests.spark.kafka_helpers import admin, consume_all, create_streams, produce_confluent
from tests.support.kafka import stored_batches
from vdl_wire.records.compression import Compression

WRITE_SCHEMA = "key binary, value binary, headers array<struct<key: string, value: binary>>"


def source_rows(count: int, tag: str) -> list[tuple]:
    rows = []
    for i in range(count):
        key = None if i % 4 == 0 else f"k-{tag}-{i}".encode()
        value = bytes([i % 256, 0, 255]) + f"v-{tag}-{i}".encode() * (1 + i % 5)
        headers = [("a", f"{i}".encode()), ("b", None)] if i % 3 == 0 else None
        rows.append((key, value, headers))
    return rows


def read_back(spark, bootstrap: str, topic: str, count: int):  # noqa: ANN001, ANN201
    records = consume_all(bootstrap, topic, count)
    rows = [(r.key, r.value, [(k, v) for k, v in r.headers] or None) for r in records]
    return spark.createDataFrame(rows, WRITE_SCHEMA)


def by_value(df):  # noqa: ANN001, ANN201
    return df.orderBy("value")


def test_batch_write_byte_exact(spark, broker) -> None:  # noqa: ANN001
    create_streams(broker.bootstrap, "w-batch")
    df = spark.createDataFrame(source_rows(300, "b"), WRITE_SCHEMA).repartition(3)
    df.write.format("vdl").option("bootstrap.servers", broker.bootstrap).option("topic", "w-batch").mode(
        "append").save()
    assert_df_equality(by_value(read_back(spark, broker.bootstrap, "w-batch", 300)), by_value(df))


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_batch_write_compressed_byte_exact(spark, broker, codec: str) -> None:  # noqa: ANN001
    """kafka.compression.type: every batch stored with that codec, the rows read back exactly."""
    topic = f"w-{codec}"
    create_streams(broker.bootstrap, topic)
    df = spark.createDataFrame(source_rows(300, codec), WRITE_SCHEMA).repartition(2)
    (df.write.format("vdl").option("bootstrap.servers", broker.bootstrap).option("topic", topic)
     .option("kafka.compression.type", codec).mode("append").save())
    assert_df_equality(by_value(read_back(spark, broker.bootstrap, topic, 300)), by_value(df))
    assert {stored_codec for _, stored_codec, _, _ in stored_batches(broker.bootstrap, topic)} == {Compression[codec.upper()]}


def test_batches_fit_a_stream_that_takes_kafkas_default_max_message_bytes(spark, broker) -> None:  # noqa: ANN001
    # Kafka's default max.message.bytes (1048588) is below the sink's default batch size (4 MiB):
    # the batches are cut to fit the stream, not refused with MESSAGE_TOO_LARGE.
    with admin(broker.bootstrap) as client:
        client.create_streams(["w-kafka-limit"], {"max.message.bytes": "1048588"})
    values = [f"{i:08d}".encode() * 25 for i in range(12_000)]  # 2.4 MB in one task
    df = spark.createDataFrame([(v,) for v in values], "value binary").coalesce(1)
    df.write.format("vdl").option("bootstrap.servers", broker.bootstrap).option("topic", "w-kafka-limit").mode(
        "append").save()
    records = consume_all(broker.bootstrap, "w-kafka-limit", len(values))
    assert [(r.offset, r.value) for r in records] == list(enumerate(values))


def test_topic_column_versus_option(spark, broker) -> None:  # noqa: ANN001
    create_streams(broker.bootstrap, "w-a", "w-b", "w-opt")
    df = spark.createDataFrame([("w-a" if i % 2 else "w-b", f"s{i}", i) for i in range(40)],
                               "topic string, value string, n int")
    df.write.format("vdl").option("bootstrap.servers", broker.bootstrap).mode("append").save()
    for topic in ("w-a", "w-b"):
        got = read_back(spark, broker.bootstrap, topic, 20).select(F.col("value").cast("string").alias("value"))
        want = df.where(F.col("topic") == topic).select("value")
        assert_df_equality(by_value(got), by_value(want), ignore_nullable=True)
    # the option wins over the column
    df.write.format("vdl").option("bootstrap.servers", broker.bootstrap).option("topic", "w-opt").mode(
        "append").save()
    got = read_back(spark, broker.bootstrap, "w-opt", 40).select(F.col("value").cast("string").alias("value"))
    assert_df_equality(by_value(got), by_value(df.select("value")), ignore_nullable=True)


def test_missing_stream_fails_on_driver_unless_created(spark, broker) -> None:  # noqa: ANN001
    df = spark.createDataFrame([("x",)], "value string")
    writer = df.write.format("vdl").option("bootstrap.servers", broker.bootstrap).option("topic", "w-missing")
    with pytest.raises(Exception, match="stream 'w-missing' does not exist.*'createStreams'"):
        writer.mode("append").save()
    writer.option("createStreams", "true").mode("append").save()
    assert [r.value for r in consume_all(broker.bootstrap, "w-missing", 1)] == [b"x"]


def test_partition_other_than_zero_fails(spark, broker) -> None:  # noqa: ANN001
    create_streams(broker.bootstrap, "w-part")
    df = spark.createDataFrame([("x", 1)], "value string, partition int")
    with pytest.raises(Exception, match="'partition' must be null or 0"):
        df.write.format("vdl").option("bootstrap.servers", broker.bootstrap).option("topic", "w-part").mode(
            "append").save()


def test_streaming_write_byte_exact(spark, broker, checkpoint) -> None:  # noqa: ANN001
    create_streams(broker.bootstrap, "w-src", "w-sink")
    produced = produce_confluent(broker.bootstrap, "w-src", 150, "lz4", "src")
    stream = (spark.readStream.format("vdl").option("bootstrap.servers", broker.bootstrap)
              .option("subscribe", "w-src").option("startingOffsets", "earliest").option("includeHeaders", "true")
              .load().select("key", "value", "headers"))
    query = (stream.writeStream.format("vdl").option("bootstrap.servers", broker.bootstrap).option("topic", "w-sink")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    want = spark.createDataFrame([(p.key, p.value, [(k, v) for k, v in p.headers] or None) for p in produced],
                                 WRITE_SCHEMA)
    assert_df_equality(by_value(read_back(spark, broker.bootstrap, "w-sink", 150)), by_value(want))
