"""Invalid options fail on the driver, at load()/save(), with a message naming the option."""

from __future__ import annotations

import pytest

BOOT = {"bootstrap.servers": "127.0.0.1:1"}  # never contacted: validation comes first


@pytest.mark.parametrize("options, named", [
    ({"subscribe": "a", "subscribePattern": "a.*"}, "'subscribe', 'subscribePattern', 'assign'"),
    ({"subscribe": "a", "startingOffsets": '{"a":{"0":1}'}, "'startingOffsets' is not valid JSON"),
    ({"subscribe": "a", "startingOffsets": "soonest"}, "'startingOffsets' accepts"),
    ({"subscribe": "a", "maxOffsetsPerTrigger": "-5"}, "'maxOffsetsPerTrigger' must be an integer >= 1"),
    ({"subscribe": "a", "failOnDataLoss": "maybe"}, "'failOnDataLoss'"),
    ({"subscribe": "a", "endingOffsets": "earliest"}, "'endingOffsets'"),
    ({"subscribe": "a", "preferReplicas": "nearest"}, "'preferReplicas' accepts 'leader', 'any' or 'rack:<name>'"),
    ({"subscribe": "a", "kafka.isolation.level": "read_latest"},
     "'kafka.isolation.level' accepts 'read_uncommitted' or 'read_committed', got 'read_latest'"),
    # A misspelt name fails instead of being ignored (format("kafka") ignores it).
    ({"subscribe": "a", "startingOffset": "earliest"},
     "unknown option 'startingoffset' \\(did you mean 'startingOffsets'\\?\\); format\\(\"vdl\"\\) reads with "
     "bootstrap.servers, kafka.bootstrap.servers, subscribe, subscribePattern, assign, startingOffsets"),
    ({"subscribe": "a", "maxOffsetPerTrigger": "5"}, "unknown option 'maxoffsetpertrigger' \\(did you mean "
                                                     "'maxOffsetsPerTrigger'"),
])
@pytest.mark.parametrize("streaming", [False, True])
def test_invalid_read_options_fail_at_load(spark, options: dict, named: str, streaming: bool) -> None:  # noqa: ANN001
    reader = (spark.readStream if streaming else spark.read).format("vdl").options(**(BOOT | options))
    with pytest.raises(Exception, match=named):
        reader.load()


@pytest.mark.parametrize("streaming", [False, True])
def test_missing_bootstrap_fails_at_load(spark, streaming: bool) -> None:  # noqa: ANN001
    reader = (spark.readStream if streaming else spark.read).format("vdl").option("subscribe", "a")
    with pytest.raises(Exception, match="'bootstrap.servers'"):
        reader.load()


def test_schema_is_kafka_schema(spark) -> None:  # noqa: ANN001
    df = spark.read.format("vdl").options(**BOOT, subscribe="a", includeHeaders="true").load()
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>")


def test_wrong_write_schema_fails_on_driver(spark) -> None:  # noqa: ANN001
    df = spark.createDataFrame([(1,)], "value long")
    with pytest.raises(Exception, match="column 'value' must be binary or string"):
        df.write.format("vdl").options(**BOOT, topic="t").mode("append").save()
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(Exception, match="option 'topic'"):
        df.write.format("vdl").options(**BOOT).mode("append").save()


def test_register_function(spark) -> None:  # noqa: ANN001
    import vdl_connector

    vdl_connector.register(spark)
    assert spark.read.format("vdl").options(**BOOT, subscribe="a").load().columns[:2] == ["key", "value"]


def test_misspelt_write_option_fails(spark) -> None:  # noqa: ANN001
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(Exception, match="unknown option 'exactlyonse' \\(did you mean 'exactlyOnce'\\?\\)"):
        df.write.format("vdl").options(**BOOT, topic="t", exactlyonse="false").mode("append").save()


def test_kafka_only_options_are_taken(spark) -> None:  # noqa: ANN001
    """A Kafka job's options move unchanged: Kafka client configs and groupIdPrefix are not errors."""
    df = (spark.read.format("vdl").options(**BOOT, subscribe="a", groupIdPrefix="g")
          .option("kafka.max.poll.records", "10").load())
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def test_overwrite_mode_fails(spark) -> None:  # noqa: ANN001
    """Not an append in disguise (format("kafka") refuses SaveMode.Overwrite too)."""
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(Exception, match=r"save mode 'overwrite' is not supported: a stream is append-only; "
                                        r"use mode\('append'\)"):
        df.write.format("vdl").options(**BOOT, topic="t").mode("overwrite").save()


def test_create_table_using_vdl_fails_naming_the_temporary_view(spark) -> None:  # noqa: ANN001
    """Spark would create the catalog table and then fail every SELECT from it (it reads no
    catalog table of a Python data source): the CREATE fails, naming what works."""
    with pytest.raises(Exception, match="Spark cannot read a catalog table of a Python data source; use CREATE "
                                        "TEMPORARY VIEW name USING vdl OPTIONS"):
        spark.sql("CREATE TABLE vdl_orders USING vdl OPTIONS ('bootstrap.servers' '127.0.0.1:1', 'subscribe' 'a')")
    assert not spark.catalog.tableExists("vdl_orders")
