"""Batch and streaming reads return exactly the rows produced by kafka-python and confluent-kafka."""

from __future__ import annotations

import json
import time
from datetime import datetime
from decimal import Decimal

import pytest
from chispa import assert_df_equality

from tests.spark.kafka_helpers import (
    CODECS,
    Produced,
    create_streams,
    expected_df,
    produce_confluent,
    produce_kafka_python,
)
from tests.support.waiting import wait_until

PATTERN = "(kp|ck)-.*"


@pytest.fixture(scope="module")
def produced(broker) -> list[Produced]:  # noqa: ANN001
    """One stream per client and codec, 120 records each, with headers on every third record."""
    names = [f"{client}-{codec}" for client in ("kp", "ck") for codec in CODECS]
    create_streams(broker.bootstrap, *names)
    rows: list[Produced] = []
    for codec in CODECS:
        rows += produce_kafka_python(broker.bootstrap, f"kp-{codec}", 120, codec, f"kp{codec}")
        rows += produce_confluent(broker.bootstrap, f"ck-{codec}", 120, codec, f"ck{codec}")
    return rows


def ordered(df):  # noqa: ANN001, ANN201
    return df.orderBy("topic", "offset")


def test_batch_read_every_codec_with_headers(spark, broker, produced) -> None:  # noqa: ANN001
    df = (spark.read.format("vdl").option("bootstrap.servers", broker.bootstrap)
          .option("subscribePattern", PATTERN).option("includeHeaders", "true").load())
    assert_df_equality(ordered(df), expected_df(spark, produced))


def test_sql_temporary_view_using_vdl(spark, broker, produced) -> None:  # noqa: ANN001
    """Spark SQL's way to a source: CREATE TEMPORARY VIEW ... USING vdl OPTIONS (...)."""
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW vdl_read USING vdl OPTIONS ('bootstrap.servers' '{broker.bootstrap}', "
              f"'subscribePattern' '{PATTERN}', 'includeHeaders' 'true')")
    try:
        assert_df_equality(ordered(spark.sql("SELECT * FROM vdl_read")), expected_df(spark, produced))
    finally:
        spark.catalog.dropTempView("vdl_read")


def test_batch_read_without_headers_and_offsets_json(spark, broker, produced) -> None:  # noqa: ANN001
    df = (spark.read.format("vdl").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", "kp-gzip,ck-lz4")
          .option("startingOffsets", '{"kp-gzip":{"0":10},"ck-lz4":{"0":-2}}')
          .option("endingOffsets", '{"kp-gzip":{"0":50},"ck-lz4":{"0":-1}}').load())
    wanted = [p for p in produced if (p.topic == "kp-gzip" and 10 <= p.offset < 50) or p.topic == "ck-lz4"]
    assert_df_equality(ordered(df), expected_df(spark, wanted, include_headers=False))


def test_batch_read_of_nothing_is_empty(spark, broker, produced) -> None:  # noqa: ANN001
    """An empty stream, a pattern matching none, or an empty range read no rows (PySpark hands
    such a read one placeholder partition)."""
    create_streams(broker.bootstrap, "empty")
    def reader():  # noqa: ANN202
        return spark.read.format("vdl").option("bootstrap.servers", broker.bootstrap)

    assert reader().option("subscribe", "empty").load().collect() == []
    assert reader().option("subscribePattern", "no-such-.*").load().collect() == []
    assert (spark.read.format("vdl").option("bootstrap.servers", broker.bootstrap).option("subscribe", "kp-none")
            .option("startingOffsets", '{"kp-none":{"0":7}}').option("endingOffsets", '{"kp-none":{"0":7}}')
            .load().collect()) == []


@pytest.mark.parametrize("option", ["subscribe", "assign"])
def test_batch_read_of_missing_stream_fails_naming_it(spark, broker, produced, option: str) -> None:  # noqa: ANN001
    value = "kp-none,missing" if option == "subscribe" else '{"kp-none":[0],"missing":[0]}'
    reader = spark.read.format("vdl").option("bootstrap.servers", broker.bootstrap).option(option, value)
    with pytest.raises(Exception, match=rf"option '{option}': stream\(s\) \['missing'\] do not exist"):
        reader.load().collect()


def test_batch_ending_offset_past_latest_fails_on_driver(spark, broker, produced) -> None:  # noqa: ANN001
    """Not a task waiting kafkaConsumer.pollTimeoutMs (2 min) for records that are not there."""
    reader = (spark.read.format("vdl").option("bootstrap.servers", broker.bootstrap).option("subscribe", "kp-none")
              .option("endingOffsets", '{"kp-none":{"0":500}}'))
    started = time.monotonic()
    with pytest.raises(Exception, match="option 'endingOffsets': offset 500 for stream 'kp-none' is past its "
                                        "latest offset 120"):
        reader.load().collect()
    assert time.monotonic() - started < 30


def test_min_partitions_same_rows(spark, broker, produced) -> None:  # noqa: ANN001
    df = (spark.read.format("vdl").option("bootstrap.servers", broker.bootstrap)
          .option("subscribe", "kp-none").option("minPartitions", "5").option("includeHeaders", "true").load())
    assert df.rdd.getNumPartitions() >= 5
    assert_df_equality(ordered(df), expected_df(spark, [p for p in produced if p.topic == "kp-none"]))


def test_starting_timestamp(spark, broker, produced) -> None:  # noqa: ANN001
    # record i has timestamp 1_700_000_000_000 + 17 i: start at i = 100
    df = (spark.read.format("vdl").option("bootstrap.servers", broker.bootstrap).option("subscribe", "ck-none")
          .option("startingTimestamp", str(1_700_000_000_000 + 17 * 100)).load())
    wanted = [p for p in produced if p.topic == "ck-none" and p.timestamp_ms >= 1_700_000_000_000 + 1700]
    assert_df_equality(ordered(df), expected_df(spark, wanted, include_headers=False))


def test_stream_available_now(spark, broker, produced, checkpoint) -> None:  # noqa: ANN001
    stream = (spark.readStream.format("vdl").option("bootstrap.servers", broker.bootstrap)
              .option("subscribePattern", PATTERN).option("startingOffsets", "earliest")
              .option("includeHeaders", "true").load())
    query = (stream.writeStream.format("memory").queryName("available_now").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    assert_df_equality(ordered(spark.table("available_now")), expected_df(spark, produced))


def test_stream_processing_time_sees_new_records(spark, broker, checkpoint) -> None:  # noqa: ANN001
    create_streams(broker.bootstrap, "live")
    first = produce_kafka_python(broker.bootstrap, "live", 30, "none", "live-a")
    stream = (spark.readStream.format("vdl").option("bootstrap.servers", broker.bootstrap)
              .option("subscribe", "live").option("startingOffsets", "earliest").option("includeHeaders", "true").load())
    query = (stream.writeStream.format("memory").queryName("live").option("checkpointLocation", checkpoint)
             .trigger(processingTime="500 milliseconds").start())
    try:
        query.processAllAvailable()
        more = produce_confluent(broker.bootstrap, "live", 40, "zstd", "live-b")
        deadline = time.monotonic() + 60
        while spark.table("live").count() < 70 and time.monotonic() < deadline:
            time.sleep(0.5)
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    assert_df_equality(ordered(spark.table("live")), expected_df(spark, first + more))


def test_max_offsets_per_trigger_batch_sizes(spark, broker, produced, checkpoint) -> None:  # noqa: ANN001
    sizes: list[int] = []
    stream = (spark.readStream.format("vdl").option("bootstrap.servers", broker.bootstrap)
              .option("subscribe", "kp-snappy").option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "50").load())
    query = (stream.writeStream.foreachBatch(lambda df, batch_id: sizes.append(df.count()))
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    assert [s for s in sizes if s] == [50, 50, 20]


def test_restart_from_checkpoint_exactly_once(spark, broker, tmp_path) -> None:  # noqa: ANN001
    create_streams(broker.bootstrap, "restart")
    first = produce_kafka_python(broker.bootstrap, "restart", 45, "lz4", "r1")
    output, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run() -> None:
        stream = (spark.readStream.format("vdl").option("bootstrap.servers", broker.bootstrap)
                  .option("subscribe", "restart").option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", "20").option("includeHeaders", "true").load())
        query = (stream.writeStream.format("parquet").option("path", output)
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert query.exception() is None

    run()
    second = produce_confluent(broker.bootstrap, "restart", 35, "gzip", "r2")
    run()
    result = spark.read.schema(expected_df(spark, first).schema).parquet(output)
    assert_df_equality(ordered(result), expected_df(spark, first + second), ignore_nullable=True)


def test_pattern_picks_up_new_streams_from_earliest(spark, broker, checkpoint) -> None:  # noqa: ANN001
    create_streams(broker.bootstrap, "pat-a")
    produce_kafka_python(broker.bootstrap, "pat-a", 20, "none", "pa-old")  # before the query: skipped (latest)
    stream = (spark.readStream.format("vdl").option("bootstrap.servers", broker.bootstrap)
              .option("subscribePattern", "pat-.*").option("includeHeaders", "true").load())
    query = (stream.writeStream.format("memory").queryName("pattern").option("checkpointLocation", checkpoint)
             .trigger(processingTime="300 milliseconds").start())
    try:
        query.processAllAvailable()
        create_streams(broker.bootstrap, "pat-b")
        new_stream = produce_confluent(broker.bootstrap, "pat-b", 15, "gzip", "pb")
        more = produce_kafka_python(broker.bootstrap, "pat-a", 5, "none", "pa-new")
        deadline = time.monotonic() + 60
        while spark.table("pattern").count() < 20 and time.monotonic() < deadline:
            time.sleep(0.3)
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    assert_df_equality(ordered(spark.table("pattern")), expected_df(spark, new_stream + more))


def test_value_json_is_from_json_where_the_read_task_gives_it(spark, broker) -> None:  # noqa: ANN001
    """valueJsonSchema: valueJson is from_json(value, schema) for every record the read task
    parsed, and null (left to from_json) for the rest; coalescing the two is from_json's answer
    for every record, whatever the batch mixes."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType, IntegerType, StringType, StructField, StructType, TimestampType

    schema = StructType([StructField("id", StringType()), StructField("at", TimestampType()),
                         StructField("n", IntegerType()), StructField("price", DecimalType(10, 2))])
    good = ['{"id":"a","at":"2025-12-31T23:59:59.554Z","n":3,"price":32.27}', '{"n":-7,"price":5.5,"x":[1]}',
            '{"id":"b",\n"at":"2025-01-01T10:00:00+02:00"}', ' {"id":"c"} ', "{}"]
    left = [None, "{bad", "", '{"id":"d","n":"x"}', '{"id":"x","id":"y"}', '{"id":"e"}{"id":"f"}',
            '{"price":5.555}', '{"at":"2025-01-01 10:00:00"}', '{"at":1700000000}', '{"id":12}']
    values = [v for pair in zip(good * 2, left, strict=False) for v in pair]
    create_streams(broker.bootstrap, "json-values")
    (spark.createDataFrame([(str(i), v) for i, v in enumerate(values)], "key string, value string")
     .write.format("vdl").option("bootstrap.servers", broker.bootstrap).option("topic", "json-values")
     .mode("append").save())
    df = (spark.read.format("vdl").option("bootstrap.servers", broker.bootstrap).option("subscribe", "json-values")
          .option("valueJsonSchema", schema.json()).option("minPartitions", "3").load())
    assert df.columns[-1] == "valueJson" and df.schema["valueJson"].dataType == schema
    parsed = F.from_json(F.col("value").cast("string"), schema)
    rows = df.select("offset", "valueJson", parsed.alias("spark"),
                     F.coalesce("valueJson", parsed).alias("both")).orderBy("offset").collect()
    assert [r.offset for r in rows] == list(range(len(values)))
    assert [r.both for r in rows] == [r.spark for r in rows]
    assert [r.valueJson for r in rows] == [r.spark if v in good else None for r, v in zip(rows, values, strict=True)]
    assert [rows[0].valueJson.asDict(), rows[2].valueJson.asDict()] == [
        {"id": "a", "at": datetime(2025, 12, 31, 23, 59, 59, 554000), "n": 3, "price": Decimal("32.27")},
        {"id": None, "at": None, "n": -7, "price": Decimal("5.50")}]


@pytest.mark.parametrize("fmt", ["vdl", "kafka"])
def test_min_offsets_per_trigger_holds_a_micro_batch_back_until_enough_records(spark, broker, checkpoint,  # noqa: ANN001
                                                                               fmt: str) -> None:
    """minOffsetsPerTrigger with a maxTriggerDelay that does not run out here: the first micro-batch
    is not held (no batch ran before it), a later one waits while its backlog is below the minimum
    and then takes all of it -- as Spark's own Kafka source does, on the same stream."""
    topic = f"min-trigger-{fmt}"
    create_streams(broker.bootstrap, topic)
    produce_kafka_python(broker.bootstrap, topic, 4, "none", "m1")
    batches: list[list[int]] = []
    stream = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("minOffsetsPerTrigger", "10").option("maxTriggerDelay", "1h").load())
    # A trigger that runs no batch reports its progress (the latest offset it saw) at most this often.
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "100")
    try:
        query = (stream.writeStream
                 .foreachBatch(lambda df, _id: batches.append(sorted(r.offset for r in df.select("offset").collect())))
                 .option("checkpointLocation", checkpoint).trigger(processingTime="200 milliseconds").start())
    finally:
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")
    try:
        wait_until(lambda: batches, 60, "the first micro-batch")
        assert batches == [[0, 1, 2, 3]]
        produce_kafka_python(broker.bootstrap, topic, 6, "none", "m2")

        def latest(progress) -> int | None:  # noqa: ANN001
            seen = progress["sources"][0]["latestOffset"] or {}
            seen = (json.loads(seen) if isinstance(seen, str) else seen).get(topic)
            return seen["0"] if isinstance(seen, dict) else seen  # format("kafka")'s per partition

        def held_at_ten() -> bool:
            # A trigger saw the stream's end at 10 (6 new records, fewer than 10) and ran nothing.
            return any(p["numInputRows"] == 0 and latest(p) == 10 for p in query.recentProgress)

        wait_until(held_at_ten, 60, lambda: f"a held trigger; progress {query.recentProgress[-3:]}")
        assert batches == [[0, 1, 2, 3]]
        produce_kafka_python(broker.bootstrap, topic, 4, "none", "m3")
        wait_until(lambda: len(batches) >= 2, 60, "the second micro-batch")
        assert batches == [[0, 1, 2, 3], list(range(4, 14))]
    finally:
        query.stop()
