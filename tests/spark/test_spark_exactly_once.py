"""Exactly-once streaming sink: replayed micro-batches and retried tasks never duplicate.

Each test also runs with exactlyOnce=false and shows the duplicates, so the mechanism (producer
ids derived from query id, batch id and task partition) is what prevents them.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from chispa import assert_df_equality

from tests.spark.kafka_helpers import consume_all, create_streams, high_watermark, produce_kafka_python

COUNT = 100
BATCH = 50  # maxOffsetsPerTrigger: two micro-batches, the second replayed


@pytest.fixture(scope="module")
def source(broker) -> list[bytes]:  # noqa: ANN001
    create_streams(broker.bootstrap, "eo-src")
    return [p.value for p in produce_kafka_python(broker.bootstrap, "eo-src", COUNT, "none", "eo", with_headers=False)]


def values_df(spark, values: list[bytes]):  # noqa: ANN001, ANN201
    return spark.createDataFrame([(v,) for v in values], "value binary").orderBy("value")


def copy_query(spark, broker, target: str, checkpoint: str, exactly_once: bool, transform=None,  # noqa: ANN001, ANN201
               batch_size: str | None = "1024"):
    frame = (spark.readStream.format("vdl").option("bootstrap.servers", broker.bootstrap)
             .option("subscribe", "eo-src").option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", str(BATCH)).load().select("key", "value"))
    if transform is not None:
        frame = frame.mapInArrow(transform, "key binary, value binary, partition int")
    writer = (frame.writeStream.format("vdl").option("bootstrap.servers", broker.bootstrap).option("topic", target)
              .option("exactlyOnce", str(exactly_once).lower()))
    if batch_size is not None:
        writer = writer.option("kafka.batch.size", batch_size)
    return writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start()


def run(query) -> None:  # noqa: ANN001
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()


@pytest.mark.parametrize("exactly_once", [True, False])
def test_replayed_batch_is_not_duplicated(spark, broker, source, tmp_path: Path, exactly_once: bool) -> None:  # noqa: ANN001
    target = f"eo-replay-{exactly_once}".lower()
    create_streams(broker.bootstrap, target)
    checkpoint = str(tmp_path / "checkpoint")
    run(copy_query(spark, broker, target, checkpoint, exactly_once))
    # The query "failed after its writes and before its commit": forget the last batch's commit.
    commits = sorted((Path(checkpoint) / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    assert [c.name for c in commits] == ["0", "1"]
    commits[-1].unlink()
    shutil.rmtree(Path(checkpoint) / "commits" / ".1.crc", ignore_errors=True)
    (Path(checkpoint) / "commits" / ".1.crc").unlink(missing_ok=True)
    run(copy_query(spark, broker, target, checkpoint, exactly_once))  # replays batch 1
    replayed = source[BATCH:] if not exactly_once else []
    got = [r.value for r in consume_all(broker.bootstrap, target, COUNT + len(replayed))]
    assert_df_equality(values_df(spark, got), values_df(spark, source + replayed))


def fail_first_attempt_half_way(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Make the first attempt of every write task fail half-way through its write: row 21 of the
    attempt gets partition 1, which the writer rejects after it produced the rows before it.
    (The failure has to happen inside the writer: rows reach it only when upstream succeeds.)"""
    from pyspark import TaskContext

    first_attempt = TaskContext.get().attemptNumber() == 0
    seen = 0
    for batch in batches:
        partition = pa.array([1 if first_attempt and seen + i == 20 else 0 for i in range(batch.num_rows)],
                             pa.int32())
        seen += batch.num_rows
        yield pa.RecordBatch.from_arrays([batch.column(0), batch.column(1), partition],
                                         names=["key", "value", "partition"])


@pytest.mark.parametrize("exactly_once", [True, False])
def test_retried_task_attempt_is_not_duplicated(spark, broker, source, tmp_path: Path, exactly_once: bool) -> None:  # noqa: ANN001
    target = f"eo-retry-{exactly_once}".lower()
    create_streams(broker.bootstrap, target)
    # Small Arrow batches, so the writer receives (and produces) rows before the attempt dies.
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "5")
    try:
        run(copy_query(spark, broker, target, str(tmp_path / "checkpoint"), exactly_once,
                       fail_first_attempt_half_way))
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    got = [r.value for r in consume_all(broker.bootstrap, target, COUNT)]
    if exactly_once:
        assert_df_equality(values_df(spark, got), values_df(spark, source))
    else:
        assert len(got) > COUNT, len(got)  # the dead attempts' rows are there twice
        assert sorted(set(got)) == sorted(source)


def fail_every_attempt_half_way(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Every attempt of every write task fails at its row 21, after producing the rows before it."""
    seen = 0
    for batch in batches:
        partition = pa.array([1 if seen + i == 20 else 0 for i in range(batch.num_rows)], pa.int32())
        seen += batch.num_rows
        yield pa.RecordBatch.from_arrays([batch.column(0), batch.column(1), partition],
                                         names=["key", "value", "partition"])


def test_micro_batch_replayed_in_other_batches_is_not_duplicated(spark, broker, source, tmp_path: Path) -> None:  # noqa: ANN001
    """A micro-batch that failed half-written, replayed with another kafka.batch.size (the option
    changed, or a release with another default): its writer goes on after the records the failed
    attempts stored, in batches of its own, and stores every row once (before, the replay's first
    batch was refused with OUT_OF_ORDER_SEQUENCE_NUMBER, and the query could not go on)."""
    target = "eo-rebatched"
    create_streams(broker.bootstrap, target)
    checkpoint = str(tmp_path / "checkpoint")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "5")
    try:
        failing = copy_query(spark, broker, target, checkpoint, True, fail_every_attempt_half_way, batch_size="100")
        with pytest.raises(Exception, match="column 'partition' must be null or 0"):
            failing.awaitTermination(180)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    stored = [r.value for r in consume_all(broker.bootstrap, target, high_watermark(broker.bootstrap, target))]
    # Some of the failed attempts' rows before row 21, each once (the last ones may have waited in
    # a batch not full yet, or in flight when the attempt died).
    assert 0 < len(stored) <= 20 and stored == source[:len(stored)], len(stored)
    run(copy_query(spark, broker, target, checkpoint, True, batch_size=None))  # the default batch size
    got = [r.value for r in consume_all(broker.bootstrap, target, COUNT)]
    assert got == source


def foreach_batch_copy(spark, broker, target: str, checkpoint: str, exactly_once: bool | None):  # noqa: ANN001, ANN201
    """The same copy as a df.write inside foreachBatch (exactlyOnce=true set explicitly, or not set)."""
    def write(batch, batch_id: int) -> None:  # noqa: ANN001
        writer = (batch.write.format("vdl").option("bootstrap.servers", broker.bootstrap).option("topic", target)
                  .option("kafka.batch.size", "1024").mode("append"))
        if exactly_once is not None:
            writer = writer.option("exactlyOnce", str(exactly_once).lower())
        writer.save()

    frame = (spark.readStream.format("vdl").option("bootstrap.servers", broker.bootstrap)
             .option("subscribe", "eo-src").option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", str(BATCH)).option("minPartitions", "2").load().select("key", "value"))
    return (frame.writeStream.foreachBatch(write).option("checkpointLocation", checkpoint)
            .trigger(availableNow=True).start())


@pytest.mark.parametrize("exactly_once", [True, None])
def test_foreach_batch_write_replayed_is_not_duplicated(spark, broker, source, tmp_path: Path,  # noqa: ANN001
                                                         exactly_once: bool | None) -> None:
    """df.write with exactlyOnce=true inside foreachBatch takes its producer ids from the running
    query and batch, so a replayed micro-batch adds nothing; without the option it duplicates."""
    target = f"eo-foreach-{exactly_once}".lower()
    create_streams(broker.bootstrap, target)
    checkpoint = str(tmp_path / "checkpoint")
    run(foreach_batch_copy(spark, broker, target, checkpoint, exactly_once))
    commits = sorted((Path(checkpoint) / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    assert [c.name for c in commits] == ["0", "1"]
    commits[-1].unlink()
    (Path(checkpoint) / "commits" / ".1.crc").unlink(missing_ok=True)
    run(foreach_batch_copy(spark, broker, target, checkpoint, exactly_once))  # replays batch 1
    replayed = source[BATCH:] if not exactly_once else []
    got = [r.value for r in consume_all(broker.bootstrap, target, COUNT + len(replayed))]
    assert_df_equality(values_df(spark, got), values_df(spark, source + replayed))


def test_exactly_once_df_write_outside_a_micro_batch_is_refused(spark, broker, source) -> None:  # noqa: ANN001
    create_streams(broker.bootstrap, "eo-batch-refused")
    frame = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(Exception, match="option 'exactlyOnce' is true on df.write") as caught:
        (frame.write.format("vdl").option("bootstrap.servers", broker.bootstrap).option("topic", "eo-batch-refused")
         .option("exactlyOnce", "true").mode("append").save())
    assert "foreachBatch" in str(caught.value)
    assert consume_all(broker.bootstrap, "eo-batch-refused", 0) == []
