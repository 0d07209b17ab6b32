"""One table, two engines: a stream's Delta table is written by the brokers (delta-rs) and used by
Spark with delta-spark as a Databricks user would: batch reads with history and time travel, a
streaming read following the brokers' appends, OPTIMIZE and VACUUM of the brokers' table, and
tables delta-spark created first then named as a stream's vdl.table.path. Every check is on the
exact rows (chispa)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable

from tests.spark.kafka_helpers import Produced, admin, expected_df, record
from tests.support.cluster import BrokerProcess, start_broker
from tests.support.waiting import wait_until
from vdl_client.configs import alter_stream_configs, describe_stream_configs

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
    """Rows in the table, from its files' record counts in the Delta log: deltalake's reader
    refuses tables with deletion vectors enabled, and the brokers only append (no file of theirs
    has rows deleted)."""
    try:
        return sum(pa.table(DeltaTable(path).get_add_actions(flatten=True)).column("num_records").to_pylist())
    except Exception:  # not created yet
        return 0


def wait_for_table(path: str, count: int, timeout: float = 60) -> None:
    # Each look loads the table's log afresh; the brokers commit every vdl.table.lag.ms (200).
    wait_until(lambda: table_count(path) == count, timeout,
               lambda: f"{count} rows in {path} (has {table_count(path)})", interval=0.2)


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

        # Each look is a Spark job: once per trigger is often enough.
        wait_until(lambda: seen() == 200, 120, "the stream reading the table as it was", interval=0.5)
        # The brokers append while the query runs: it picks up each of their commits.
        for start in (200, 350):
            rows += produce(broker, "follow", start, 150, f"b{start}")
            total = len(rows)
            wait_until(lambda total=total: seen() == total, 120, f"the stream following the table to {total} rows",
                       interval=0.5)
    finally:
        query.stop()
    assert_df_equality(spark.table("delta_follow").orderBy("offset"), table_df(spark, rows), ignore_nullable=True)


def overlapping_optimize(spark, path: str):  # noqa: ANN001, ANN201
    """The latest OPTIMIZE commit if a broker's WRITE committed between the version OPTIMIZE read
    and its own (the two really ran at once), else None."""
    commits = history(spark, path)
    optimize = [c for c in commits if c.operation == "OPTIMIZE"]
    if not optimize:
        return None
    last = optimize[-1]
    between = [c for c in commits if last.readVersion < c.version < last.version and c.operation == "WRITE"]
    return last if between else None


HOLD_GROUP, OPTIMIZE_GROUP = "vdl-test-hold", "vdl-test-optimize"


def hold_both_task_slots(spark, gate: Path, held: Path) -> threading.Thread:  # noqa: ANN001
    """A job whose two tasks take the session's two task slots (local[2]) until `gate` exists: a
    job submitted meanwhile waits for a slot. Returns once both tasks run."""
    gate_name, held_name = str(gate), str(held)

    def task(index: int) -> None:
        import time
        from pathlib import Path

        Path(held_name, str(index)).touch()
        deadline = time.monotonic() + 300  # the test opens the gate in a finally; never a stuck slot
        # A wait on the gate (a file the test creates), with a deadline: this runs in a Spark
        # task, where the tests' wait helpers are not imported.
        while not Path(gate_name).exists() and time.monotonic() < deadline:
            time.sleep(0.02)

    def hold() -> None:
        spark.sparkContext.setJobGroup(HOLD_GROUP, "both task slots held by the test")
        spark.sparkContext.parallelize(range(2), 2).foreach(task)

    held.mkdir()
    holder = threading.Thread(target=hold, name="hold-task-slots")
    holder.start()
    wait_until(lambda: len(list(held.iterdir())) == 2, 120, "both task slots held")
    return holder


@pytest.mark.timeout(600)  # OPTIMIZE, VACUUM and three reads: minutes on a loaded machine
def test_optimize_and_vacuum_while_the_brokers_append(spark, broker, lake, tmp_path: Path) -> None:  # noqa: ANN001
    stream, path = "compacted", str(lake / "compacted")
    create_tiered(broker, stream, path, **{"segment.bytes": "8192"})
    rows: list[Produced] = []
    for start in (0, 100):  # two commits at least: small files for OPTIMIZE to compact
        rows += produce(broker, stream, start, 100, f"a{start}")
        wait_for_table(path, len(rows))
    # The brokers commit while OPTIMIZE runs, by construction rather than by luck: OPTIMIZE reads
    # the table's version as it starts its transaction, then compacts in Spark jobs, then commits.
    # Spark reads the table first, so OPTIMIZE finds that version's snapshot loaded and starts its
    # transaction without a job of its own; its first job then waits behind a job holding both
    # task slots while the brokers commit twice (the test waits for each commit's rows).
    # Delta checks the brokers' appends against OPTIMIZE's files and commits after them.
    assert delta(spark, path).count() == len(rows)
    gate = tmp_path / "gate"
    holder = hold_both_task_slots(spark, gate, tmp_path / "held")
    failures: list[BaseException] = []

    def optimize() -> None:
        try:
            spark.sparkContext.setJobGroup(OPTIMIZE_GROUP, "OPTIMIZE under test")
            spark.sql(f"OPTIMIZE delta.`{path}`").collect()
        except BaseException as error:  # reported by the test thread  # noqa: BLE001
            failures.append(error)

    optimizer = threading.Thread(target=optimize, name="optimize")
    try:
        optimizer.start()
        tracker = spark.sparkContext.statusTracker()
        wait_until(lambda: failures or tracker.getJobIdsForGroup(OPTIMIZE_GROUP), 120, "OPTIMIZE's first job")
        assert not failures, failures
        for start in (200, 220):  # two of the brokers' commits while OPTIMIZE waits
            rows += produce(broker, stream, start, 20, f"b{start}")
            wait_for_table(path, len(rows))
    finally:
        gate.touch()
        optimizer.join(300)
        holder.join(60)
    assert not failures, failures
    assert not optimizer.is_alive() and not holder.is_alive()
    overlapped = overlapping_optimize(spark, path)
    assert overlapped is not None, [(c.version, c.operation, c.readVersion) for c in history(spark, path)]
    # The brokers append onto the table as OPTIMIZE left it.
    rows += produce(broker, stream, len(rows), 100, "c")
    wait_for_table(path, len(rows))

    # VACUUM deletes every file the table no longer references (retention 0: the check is off for
    # this test only). It runs once the brokers have committed what they hold: a file a broker
    # wrote but has not committed yet is not in the table either, so VACUUM RETAIN 0 HOURS would
    # delete it (why Delta refuses short retentions by default).
    live = {Path(uri.removeprefix("file://")).name for uri in DeltaTable(path).file_uris()}
    on_disk = {p.name for p in Path(path).glob("*.parquet")}
    assert live < on_disk  # OPTIMIZE left the compacted files behind
    # VACUUM lists the table's directory in a job of spark.sql.sources.parallelPartitionDiscovery
    # .parallelism tasks, 10000 by default: minutes of scheduling on two cores for a few dozen
    # files. The same listing in as many tasks as the session has slots.
    vacuum_conf = {"spark.databricks.delta.retentionDurationCheck.enabled": "false",
                   "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2"}
    for key, value in vacuum_conf.items():
        spark.conf.set(key, value)
    try:
        spark.sql(f"VACUUM delta.`{path}` RETAIN 0 HOURS").collect()
    finally:
        for key in vacuum_conf:
            spark.conf.unset(key)
    assert {p.name for p in Path(path).glob("*.parquet")} == live
    rows += produce(broker, stream, len(rows), 200, "d")  # the brokers go on appending after VACUUM
    wait_for_table(path, len(rows))
    # Exactly the stream's records, each once: the overlapped OPTIMIZE neither lost nor repeated any.
    assert_df_equality(delta(spark, path), table_df(spark, rows), ignore_nullable=True)

    # format("vdl") from offset 0 reads the compacted, vacuumed table below the log start.
    with admin(broker.bootstrap) as client:
        alter_stream_configs(client, stream, {"retention.bytes": "8192"})
        wait_until(lambda: client.list_offset(stream, -2) > 100, 60, "retention deleting most of the log")
    df = (spark.read.format("vdl").option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", stream)
          .option("includeHeaders", "true").load().orderBy("offset"))
    assert_df_equality(df, expected_df(spark, rows))


@pytest.mark.parametrize("properties", [
    "",
    "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
], ids=["plain", "deletion-vectors"])
def test_brokers_append_to_a_table_delta_spark_created(spark, broker, lake, properties: str,  # noqa: ANN001
                                                       request: pytest.FixtureRequest) -> None:
    stream = f"made-{request.node.callspec.id}"
    path = str(lake / stream)
    spark.sql(f"CREATE TABLE delta.`{path}` ({TABLE_DDL}) USING DELTA {properties}")
    create_tiered(broker, stream, path)
    rows = produce(broker, stream, 0, 150, "a")
    wait_for_table(path, 150)
    assert_df_equality(delta(spark, path), table_df(spark, rows), ignore_nullable=True)


@pytest.mark.parametrize(("properties", "reason"), [
    # Row tracking (with the domain metadata it needs) is a writer feature delta-rs lacks.
    ("'delta.enableRowTracking' = 'true'", "Unsupported table features required: "),
    # delta-rs could append, but format("vdl") could not read the stream's history back.
    ("'delta.columnMapping.mode' = 'name'", "uses column mapping (delta.columnMapping.mode = name)"),
], ids=["row-tracking", "column-mapping"])
def test_a_table_feature_the_brokers_cannot_write_is_refused(spark, broker, lake, properties: str,  # noqa: ANN001
                                                             reason: str, request: pytest.FixtureRequest) -> None:
    """The brokers write nothing to such a table and say why in the stream's table status."""
    stream = f"refused-{request.node.callspec.id}"
    path = str(lake / stream)
    spark.sql(f"CREATE TABLE delta.`{path}` ({TABLE_DDL}) USING DELTA TBLPROPERTIES ({properties})")
    create_tiered(broker, stream, path)
    produce(broker, stream, 0, 50, "a")

    def error() -> str | None:
        with admin(broker.bootstrap) as client:
            status = {c.name: c.value for c in describe_stream_configs(client, stream)}
        return status.get("vdl.table.status.error")

    message = wait_until(error, 60, "the table's error", interval=0.2)
    assert reason in message, message
    if "enableRowTracking" in properties:  # delta-rs names both features, in either order
        assert "RowTracking" in message and "DomainMetadata" in message, message
    assert delta(spark, path).count() == 0
    assert list(Path(path).glob("*.parquet")) == []
