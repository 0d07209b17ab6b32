"""format("vdl")'s JVM provider (jvm/connector/): a plain read runs on Spark's own Kafka source,
everything else on the Python data source, which the test session also reaches by its own name
(vdl_connector.PYTHON_SOURCE_NAME). Both paths give the same rows, and a streaming query's
checkpoint written on one path goes on on the other with no row lost or read twice."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality

from tests.spark.kafka_helpers import create_streams, expected_df, produce_confluent, produce_kafka_python
from vdl_connector import PYTHON_SOURCE_NAME

KAFKA_SCAN = "KafkaScan"  # Spark's Kafka source in a plan (its Scan's description)


@pytest.fixture(scope="module")
def produced(broker):  # noqa: ANN001, ANN201
    """Two streams, headers on every third record (some null-valued), timestamps 17 ms apart."""
    create_streams(broker.bootstrap, "jp-a", "jp-b")
    return (produce_kafka_python(broker.bootstrap, "jp-a", 90, "lz4", "a")
            + produce_confluent(broker.bootstrap, "jp-b", 70, "zstd", "b"))


def plan(df) -> str:  # noqa: ANN001
    return df._jdf.queryExecution().executedPlan().toString()


def ordered(df):  # noqa: ANN001, ANN201
    return df.orderBy("topic", "offset")


def read(spark, broker, name: str = "vdl", **options: str):  # noqa: ANN001, ANN201
    return spark.read.format(name).option("bootstrap.servers", broker.bootstrap).options(**options).load()


def test_the_session_has_the_jvm_provider(spark, broker, produced) -> None:  # noqa: ANN001
    assert KAFKA_SCAN in plan(read(spark, broker, subscribe="jp-a"))
    assert KAFKA_SCAN not in plan(read(spark, broker, PYTHON_SOURCE_NAME, subscribe="jp-a"))


@pytest.mark.parametrize("options", [
    {"preferReplicas": "leader"},  # a VDL-only option
    {"endingOffsets": '{"jp-a":{"0":10}}'},  # checked against the latest offsets on the driver
    # Spark's Kafka source wants every stream it reads named in such JSON
    {"subscribe": "jp-a,jp-b", "startingOffsets": '{"jp-b":{"0":70}}'},
], ids=["preferReplicas", "endingOffsets-json", "json-naming-some-streams"])
def test_reads_the_kafka_source_cannot_serve_go_to_python(spark, broker, produced, options) -> None:  # noqa: ANN001
    df = read(spark, broker, **{"subscribe": "jp-a", **options})
    assert KAFKA_SCAN not in plan(df)
    wanted = [p for p in produced if p.topic == "jp-a"]
    if "endingOffsets" in options:
        wanted = wanted[:10]
    assert_df_equality(ordered(df), expected_df(spark, wanted, include_headers=False))


def test_batch_rows_equal_the_python_path(spark, broker, produced) -> None:  # noqa: ANN001
    options = {"subscribePattern": "jp-[ab]", "includeHeaders": "true",
               "startingOffsetsByTimestamp": f'{{"jp-a":{{"0":{1_700_000_000_000 + 17 * 20}}},"jp-b":{{"0":0}}}}'}
    fast, python = read(spark, broker, **options), read(spark, broker, PYTHON_SOURCE_NAME, **options)
    assert KAFKA_SCAN in plan(fast)
    wanted = [p for p in produced if p.topic == "jp-b" or p.offset >= 20]
    assert_df_equality(ordered(fast), expected_df(spark, wanted))
    assert_df_equality(ordered(fast), ordered(python))
    # naming only some of the streams: the Python path, the same rows
    options["startingOffsetsByTimestamp"] = f'{{"jp-a":{{"0":{1_700_000_000_000 + 17 * 20}}}}}'
    options["subscribe"] = "jp-a,jp-b"
    del options["subscribePattern"]
    some = read(spark, broker, **options)
    assert KAFKA_SCAN not in plan(some)
    assert_df_equality(ordered(some), expected_df(spark, wanted))


def run_available_now(spark, broker, name: str, output: str, checkpoint: str, **options: str) -> None:  # noqa: ANN001
    stream = (spark.readStream.format(name).option("bootstrap.servers", broker.bootstrap)
              .option("startingOffsets", "earliest").option("includeHeaders", "true").options(**options).load())
    query = (stream.writeStream.format("parquet").option("path", output).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None


def test_streaming_rows_equal_the_python_path(spark, broker, produced, tmp_path) -> None:  # noqa: ANN001
    schema = expected_df(spark, produced).schema
    results = []
    for name in ("vdl", PYTHON_SOURCE_NAME):
        output = str(tmp_path / name / "out")
        run_available_now(spark, broker, name, output, str(tmp_path / name / "checkpoint"),
                          subscribe="jp-a,jp-b", maxOffsetsPerTrigger="50")
        results.append(ordered(spark.read.schema(schema).parquet(output)))
    assert_df_equality(results[0], expected_df(spark, produced), ignore_nullable=True)
    assert_df_equality(results[0], results[1])


def test_a_checkpoint_goes_on_across_the_two_paths(spark, broker, tmp_path) -> None:  # noqa: ANN001
    """Python -> JVM -> Python on one checkpoint: {"s": n} and Kafka's {"s": {"0": n}} offsets are
    read by both."""
    create_streams(broker.bootstrap, "jp-switch")
    output, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    produced = []
    for step, name in enumerate((PYTHON_SOURCE_NAME, "vdl", PYTHON_SOURCE_NAME, "vdl")):
        produced += produce_kafka_python(broker.bootstrap, "jp-switch", 25 + step, "gzip", f"s{step}")
        run_available_now(spark, broker, name, output, checkpoint, subscribe="jp-switch", maxOffsetsPerTrigger="10")
        result = spark.read.schema(expected_df(spark, produced).schema).parquet(output)
        assert_df_equality(ordered(result), expected_df(spark, produced), ignore_nullable=True)
