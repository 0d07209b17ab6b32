"""One table, two engines: a stream's Delta table is written by the brokers (delta-rs) and used by
Spark with delta-spark as a Databricks user would: batch reads with history and time travel, a
streaming read following the brokers' appends, OPTIMIZE and VACUUM of the brokers' table, and
tables delta-spark created first then named as a stream's vdl.table.path. Every check is on the
exact rows (chispa)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable

from tests.spark.kafka_helpers import Produced, admin, record
from tests.support.cluster import BrokerProcess, start_broker
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(300)

# The table's columns as delta-spark sees the brokers' raw tables.
TABLE_DDL = ("`offset` BIGINT NOT NULL, `timestamp` TIMESTAMP, key BINARY, value BINARY, "
             "headers ARRAY<STRUCT<key: STRING, value: BINARY>>")
TABLE_SCHEMA = ("struct<offset:bigint,timestamp:timestamp,key:binary,value:binary,"
                "headers:array<struct<key:string,value:binary>>>")
# Tiering commits often (small files for OPTIMIZE) and never compacts or vacuums by itself, so
# the table's history holds only what the brokers append and what Spark does.
TIERING = {"vdl.table.lag.ms": "200", "vdl.table.compact.interval.ms": "0", "vdl.table.vacuum.interval.ms": "0"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("broker"), fsync=False, retention_check_ms=100)
    yield process
    process.kill()


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lake")


def create_tiered(broker: BrokerProcess, stream: str, path: str, **config: str) -> None:
    with admin(broker.bootstrap) as client:
        client.create_stream(stream, config={"vdl.table.path": path, **TIERING, **config})


def produce(broker: BrokerProcess, stream: str, first: int, count: int, tag: str) -> list[Produced]:
    """`count` records (keys, null keys, headers) acknowledged by the stream, in one producer."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5, batch_size=4096, acks="all")
    try:
        sent = []
        for i in range(first, first + count):
            key, value, ts, headers = record(i, tag, null_header=False)
            sent.append((producer.send(stream, key=key, value=value, timestamp_ms=ts, partition=0, headers=headers),
                         key, value, ts, headers))
        producer.flush()
        return [Produced(stream, f.get(timeout=30).offset, k, v, ts, tuple(h)) for f, k, v, ts, h in sent]
    finally:
        producer.close()


def table_count(path: str) -> int:
    try:
        return DeltaTable(path).to_pyarrow_table(columns=["offset"]).num_rows
    except Exception:  # not created yet
        return 0


def wait_for_table(path: str, count: int, timeout: float = 60) -> None:
    wait_until(lambda: table_count(path) == count, timeout,
               lambda: f"{count} rows in {path} (has {table_count(path)})")


def table_df(spark, rows: list[Produced]):  # noqa: ANN001, ANN201
    """The table rows the brokers write for `rows`: headers null when a record has none."""
    data = [(p.offset, datetime.fromtimestamp(p.timestamp_ms / 1000, UTC), p.key, p.value,
             [(k, v) for k, v in p.headers] or None) for p in sorted(rows, key=lambda p: p.offset)]
    return spark.createDataFrame(data, TABLE_DDL)


def delta(spark, path: str, **options: str):  # noqa: ANN001, ANN201
    reader = spark.read.format("delta")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(path).orderBy("offset")


def history(spark, path: str) -> list:  # noqa: ANN001
    return spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()


def test_batch_read_history_and_time_travel(spark, broker, lake) -> None:  # noqa: ANN001
    path = str(lake / "batch")
    create_tiered(broker, "batch", path)
    first = produce(broker, "batch", 0, 300, "a")
    wait_for_table(path, 300)
    version = DeltaTable(path).version()
    second = produce(broker, "batch", 300, 200, "b")
    wait_for_table(path, 500)

    df = delta(spark, path)
    assert df.schema.simpleString() == TABLE_SCHEMA
    assert_df_equality(df, table_df(spark, first + second), ignore_nullable=True)
    commits = history(spark, path)
    assert [c.version for c in commits] == list(range(DeltaTable(path).version() + 1))
    assert commits[0].operation == "CREATE TABLE" and {c.operation for c in commits[1:]} == {"WRITE"}
    assert_df_equality(delta(spark, path, versionAsOf=str(version)), table_df(spark, first), ignore_nullable=True)


def test_streaming_read_follows_the_brokers_appends(spark, broker, lake, tmp_path: Path) -> None:  # noqa: ANN001
    path = str(lake / "follow")
    create_tiered(broker, "follow", path)
    rows = produce(broker, "follow", 0, 200, "a")
    wait_for_table(path, 200)
    query = (spark.readStream.format("delta").load(path).writeStream.format("memory").queryName("delta_follow")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(processingTime="500 milliseconds")
             .start())
    try:
        def seen() -> int:
            assert query.exception() is None, query.exception()
            return spark.table("delta_follow").count()

        wait_until(lambda: seen() == 200, 120, "the stream reading the table as it was")
        # The brokers append while the query runs: it picks up each of their commits.
        for start in (200, 350):
            rows += produce(broker, "follow", start, 150, f"b{start}")
            total = len(rows)
            wait_until(lambda total=total: seen() == total, 120, f"the stream following the table to {total} rows")
    finally:
        query.stop()
    assert_df_equality(spark.table("delta_follow").orderBy("offset"), table_df(spark, rows), ignore_nullable=True)

