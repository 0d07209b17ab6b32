"""Schema equality with Spark's Arrow view, offset planning and read limits (pure)."""

from __future__ import annotations

import pickle

import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from vdl_client.replicas import ReplicaSet
from vdl_connector.arrow import arrow_read_schema
from vdl_connector.options import ReplicaPreference, VdlOptionError
from vdl_connector.planning import OffsetRange, TriggerDelay, plan_ranges, rate_limit, spread_over_replicas
from vdl_connector.schema import read_schema, validate_write_schema


@pytest.mark.parametrize("headers", [False, True])
def test_arrow_schema_equals_sparks(headers: bool) -> None:
    spark_view = to_arrow_schema(read_schema(headers), timezone="UTC")
    assert spark_view.equals(arrow_read_schema(headers))


def test_read_schema_matches_kafka_source() -> None:
    schema = read_schema(True)
    assert schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>")
    assert all(f.nullable for f in schema.fields)


def test_plan_ranges_plain_and_empty() -> None:
    ranges = plan_ranges({"a": 0, "b": 5}, {"a": 10, "b": 5, "c": 3})
    assert ranges == [OffsetRange("a", 0, 10)]  # b empty; c missing from start = nothing


def test_plan_ranges_min_partitions_covers_exactly() -> None:
    ranges = plan_ranges({"a": 0, "b": 0}, {"a": 100, "b": 10}, min_partitions=5)
    assert len(ranges) >= 5
    for stream, end in (("a", 100), ("b", 10)):
        pieces = [r for r in ranges if r.stream == stream]
        assert pieces[0].start == 0 and pieces[-1].end == end
        assert all(x.end == y.start for x, y in zip(pieces, pieces[1:], strict=False))


def test_plan_ranges_max_records() -> None:
    ranges = plan_ranges({"a": 3}, {"a": 26}, max_records_per_partition=10)
    assert [(r.start, r.end) for r in ranges] == [(3, 10), (10, 18), (18, 26)]
    assert all(r.size <= 10 for r in ranges)


def test_offset_range_pickles() -> None:
    rng = OffsetRange("s", 1, 2, True)
    assert pickle.loads(pickle.dumps(rng)) == rng


def test_rate_limit_proportional() -> None:
    assert rate_limit(100, {"a": 0}, {"a": 50}) == {"a": 50}
    assert rate_limit(10, {"a": 0, "b": 0}, {"a": 90, "b": 10}) == {"a": 9, "b": 1}
    assert rate_limit(10, {"a": 0, "b": 0}, {"a": 1000, "b": 1}) == {"a": 9, "b": 1}


def test_trigger_delay() -> None:
    delay = TriggerDelay(min_rows=100, max_delay_ms=1000, last_trigger_ms=0)
    assert delay.should_delay(10, 500) is True
    assert delay.should_delay(100, 600) is False  # enough rows
    assert delay.should_delay(1, 1000) is True
    assert delay.should_delay(1, 1700) is False  # waited long enough


def schema(*fields: StructField) -> StructType:
    return StructType(list(fields))


def test_write_schema_validation() -> None:
    columns = validate_write_schema(schema(StructField("value", StringType()), StructField("key", BinaryType()),
                                           StructField("extra", LongType())), "out")
    assert columns.value == 0 and columns.value_is_string and columns.key == 1 and columns.topic is None
    headers = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
    columns = validate_write_schema(schema(StructField("topic", StringType()), StructField("value", BinaryType()),
                                           StructField("headers", headers),
                                           StructField("partition", IntegerType())), None)
    assert (columns.topic, columns.value, columns.headers, columns.partition) == (0, 1, 2, 3)


@pytest.mark.parametrize("fields, topic, match", [
    ([StructField("key", BinaryType())], "t", "column 'value'"),
    ([StructField("value", LongType())], "t", "column 'value' must be binary or string"),
    ([StructField("value", BinaryType()), StructField("topic", LongType())], None, "column 'topic' must be string"),
    ([StructField("value", BinaryType())], None, "option 'topic'"),
    ([StructField("value", BinaryType()), StructField("headers", StringType())], "t", "column 'headers'"),
    ([StructField("value", BinaryType()), StructField("partition", StringType())], "t", "column 'partition'"),
])
def test_write_schema_errors(fields: list[StructField], topic: str | None, match: str) -> None:
    with pytest.raises(VdlOptionError, match=match):
        validate_write_schema(StructType(fields), topic)


def test_spread_over_in_sync_replicas() -> None:
    ranges = [OffsetRange("a", 100 * i, 100 * (i + 1)) for i in range(6)] + [OffsetRange("b", 0, 10)]
    placements = {"a": ReplicaSet(2, (1, 2, 3), {1: "r1", 2: "r2", 3: "r1"}), "b": ReplicaSet(1, (1, 3))}
    spread = spread_over_replicas(ranges, placements, ReplicaPreference("any"))
    # Each task reads from one in-sync replica first, the others after it (the leader, found at
    # read time, last); the same offsets as planned.
    assert [r.replicas for r in spread] == [(1, 2, 3), (2, 3, 1), (3, 1, 2), (1, 2, 3), (2, 3, 1), (3, 1, 2),
                                            (1, 3)]
    assert [(r.stream, r.start, r.end) for r in spread] == [(r.stream, r.start, r.end) for r in ranges]
    in_rack = spread_over_replicas(ranges, placements, ReplicaPreference("rack", "r1"))
    assert [r.replicas for r in in_rack] == [(1, 3), (3, 1)] * 3 + [()]  # b has no replica in r1
    assert spread_over_replicas(ranges, placements, ReplicaPreference("leader")) == ranges
    assert spread_over_replicas(ranges, {}, ReplicaPreference("any")) == ranges  # no placement: the leader
    assert pickle.loads(pickle.dumps(spread[0])) == spread[0]  # travels to the executors
