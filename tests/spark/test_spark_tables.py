"""One offset space across a stream's Delta table and its log: after retention deleted the oldest
segments of a tiered stream, batch and streaming reads from `earliest` return every record from
offset 0, exactly the rows produced (chispa), in Spark's Kafka schema; compaction and vacuum of
the table while readers read never show a record twice or lose one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable

from tests.spark.kafka_helpers import Produced, admin, expected_df, produce_confluent, produce_kafka_python
from tests.support.cluster import BrokerProcess, start_broker, wait_until
from vdl_client.configs import alter_stream_configs
from vdl_connector.options import parse_source_options
from vdl_connector.source import VdlBatchReader
from vdl_connector.tables import TableRange

pytestmark = pytest.mark.timeout(300)

STREAM = "tiered"


@pytest.fixture(scope="module")
def tiered_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("broker"), fsync=False, retention_check_ms=100)
    yield process
    process.kill()


def table_rows(path: str) -> int:
    try:
        return DeltaTable(path).to_pyarrow_table(columns=["offset"]).num_rows
    except Exception:
        return 0


@pytest.fixture(scope="module")
def produced(tiered_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Produced], str]:
    """3000 records from each of kafka-python and confluent-kafka (headers, null keys and header
    values); the table holds them all, and retention deleted more than half of the log."""
    path = str(tmp_path_factory.mktemp("lake") / STREAM)
    bootstrap = tiered_broker.bootstrap
    with admin(bootstrap) as client:
        client.create_stream(STREAM, config={"vdl.table.path": path, "vdl.table.lag.ms": "200",
                                             "vdl.table.partition.by": "day", "segment.bytes": "8192"})
        rows = produce_kafka_python(bootstrap, STREAM, 3000, "lz4", "kp")
        rows += produce_confluent(bootstrap, STREAM, 3000, "zstd", "ck")
        assert sorted(p.offset for p in rows) == list(range(6000))
        wait_until(lambda: table_rows(path) == 6000, 60, "the table holding every record")
        alter_stream_configs(client, STREAM, {"retention.bytes": "8192"})
        wait_until(lambda: client.list_offset(STREAM, -2) > 3000, 60, "retention deleting most of the log")
    return rows, path


def read(spark, bootstrap: str, **options: str):  # noqa: ANN001, ANN201
    reader = spark.read.format("vdl").option("kafka.bootstrap.servers", bootstrap).option("subscribe", STREAM)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load().orderBy("offset")


def test_batch_read_from_earliest_crosses_the_seam(spark, tiered_broker, produced) -> None:  # noqa: ANN001
    rows, _ = produced
    df = read(spark, tiered_broker.bootstrap, includeHeaders="true")
    assert_df_equality(df, expected_df(spark, rows))
    split = read(spark, tiered_broker.bootstrap, minPartitions="7")
    assert_df_equality(split, expected_df(spark, rows, include_headers=False))


def test_batch_read_of_a_range_below_and_above_the_log_start(spark, tiered_broker, produced) -> None:  # noqa: ANN001
    rows, _ = produced
    df = read(spark, tiered_broker.bootstrap, startingOffsets=f'{{"{STREAM}":{{"0":1234}}}}',
              endingOffsets=f'{{"{STREAM}":{{"0":5555}}}}', includeHeaders="true")
    assert_df_equality(df, expected_df(spark, [p for p in rows if 1234 <= p.offset < 5555]))


def test_streaming_read_from_earliest_crosses_the_seam(spark, tiered_broker, produced, checkpoint) -> None:  # noqa: ANN001
    rows, _ = produced
    stream = (spark.readStream.format("vdl").option("kafka.bootstrap.servers", tiered_broker.bootstrap)
              .option("subscribe", STREAM).option("startingOffsets", "earliest").option("includeHeaders", "true")
              .option("maxOffsetsPerTrigger", "1700").load())
    query = (stream.writeStream.format("memory").queryName("tiered_stream").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination(240)
    assert query.exception() is None
    assert_df_equality(spark.table("tiered_stream").orderBy("offset"), expected_df(spark, rows))


def test_compaction_and_vacuum_between_planning_and_reading(tiered_broker, produced) -> None:  # noqa: ANN001
    """Tasks planned against files that compaction replaced and vacuum deleted read the same
    rows from the table's newer version."""
    rows, path = produced
    options = parse_source_options({"kafka.bootstrap.servers": tiered_broker.bootstrap, "subscribe": STREAM,
                                    "minpartitions": "5"})
    reader = VdlBatchReader(options)
    tasks = reader.partitions()
    assert any(isinstance(t, TableRange) for t in tasks)
    planned = sorted((p.offset, p.value) for p in rows)
    # Then the log's start moves past every offset planned for the log: those tasks read them
    # from the table too.
    rows += produce_kafka_python(tiered_broker.bootstrap, STREAM, 3000, "none", "after")
    with admin(tiered_broker.bootstrap) as client:
        wait_until(lambda: client.list_offset(STREAM, -2) > 6000, 60, "retention passing the planned log ranges")
    # The tiering writer keeps appending the records just produced while this runs, so the check
    # is on the files the tasks were planned against, not on how many files the table has.
    planned_files = {f.uri for t in tasks if isinstance(t, TableRange) for f in t.files}
    table = DeltaTable(path)
    assert table.optimize.compact()["numFilesRemoved"] > 1
    table.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)
    gone = planned_files - set(DeltaTable(path).file_uris())
    assert gone and not any(Path(uri.removeprefix("file://")).exists() for uri in gone)
    seen = []
    for task in tasks:
        for batch in reader.read(task):
            seen += [(o, v) for o, v in zip(batch.column("offset").to_pylist(), batch.column("value").to_pylist(),
                                            strict=True)]
    assert seen == planned


def test_streaming_reader_while_the_broker_compacts_and_vacuums(spark, tiered_broker, produced,  # noqa: ANN001
                                                                tmp_path: Path) -> None:
    rows, path = produced
    with admin(tiered_broker.bootstrap) as client:
        alter_stream_configs(client, STREAM, {"vdl.table.compact.interval.ms": "300", "vdl.table.vacuum.interval.ms":
                                              "300", "vdl.table.vacuum.retention.ms": "0",
                                              "vdl.table.compact.target.bytes": "1048576"})
        try:
            more = produce_kafka_python(tiered_broker.bootstrap, STREAM, 2000, "none", "late")
            stream = (spark.readStream.format("vdl").option("kafka.bootstrap.servers", tiered_broker.bootstrap)
                      .option("subscribe", STREAM).option("startingOffsets", "earliest")
                      .option("includeHeaders", "true").option("maxOffsetsPerTrigger", "600").load())
            query = (stream.writeStream.format("memory").queryName("tiered_housekeeping")
                     .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
            query.awaitTermination(240)
            assert query.exception() is None
            assert_df_equality(spark.table("tiered_housekeeping").orderBy("offset"), expected_df(spark, rows + more))
            history = [h["operation"] for h in DeltaTable(path).history()]
            assert "OPTIMIZE" in history and "VACUUM END" in history
        finally:
            alter_stream_configs(client, STREAM, {}, ["vdl.table.compact.interval.ms", "vdl.table.vacuum.interval.ms",
                                                      "vdl.table.vacuum.retention.ms", "vdl.table.compact.target.bytes"])
