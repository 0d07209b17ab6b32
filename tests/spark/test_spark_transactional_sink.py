"""exactlyOnce=transactional: each task of a micro-batch writes every stream it touches in one
Kafka transaction, which the driver commits once the whole micro-batch succeeded.

Read back with confluent-kafka (librdkafka's read_committed: up to the last stable offset,
without aborted transactions' records) and read_uncommitted, to the partition's end.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from chispa import assert_df_equality

from tests.spark.kafka_helpers import create_streams, high_watermark, produce_kafka_python
from tests.support.kafka import read_to_end
from tests.support.waiting import wait_until

COUNT = 100
SOURCE = "txs-src"


@pytest.fixture(scope="module")
def source(broker) -> list[bytes]:  # noqa: ANN001
    create_streams(broker.bootstrap, SOURCE)
    return [p.value for p in produce_kafka_python(broker.bootstrap, SOURCE, COUNT, "none", "txs", with_headers=False)]


def values_df(spark, values: list[bytes]):  # noqa: ANN001, ANN201
    return spark.createDataFrame([(v,) for v in values], "value binary").orderBy("value")


def assert_values(spark, got: list[tuple[int, bytes]], want: list[bytes]) -> None:  # noqa: ANN001
    assert_df_equality(values_df(spark, [v for _, v in got]), values_df(spark, want))


def split_two_streams(prefix: str):  # noqa: ANN201
    """Rows with an even source offset go to <prefix>-a, odd ones to <prefix>-b (a topic column)."""
    def transform(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            offsets = batch.column("offset").to_pylist()
            topics = pa.array([f"{prefix}-a" if o % 2 == 0 else f"{prefix}-b" for o in offsets])
            yield pa.RecordBatch.from_arrays([topics, batch.column("value")], names=["topic", "value"])
    return transform


def copy_query(spark, broker, checkpoint: str, transform):  # noqa: ANN001, ANN201
    """One micro-batch of two tasks (offsets 0-49 and 50-99), each writing both streams."""
    reader = (spark.readStream.format("vdl").option("bootstrap.servers", broker.bootstrap)
              .option("subscribe", SOURCE).option("startingOffsets", "earliest").option("minPartitions", "2"))
    frame = reader.load().select("offset", "value").mapInArrow(transform, "topic string, value binary")
    return (frame.writeStream.format("vdl").option("bootstrap.servers", broker.bootstrap)
            .option("exactlyOnce", "transactional").option("kafka.batch.size", "1024")
            .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())


def run(query) -> None:  # noqa: ANN001
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()


def test_a_micro_batch_over_two_streams_is_invisible_until_committed_and_a_replay_writes_nothing(  # noqa: ANN001
        spark, broker, source, tmp_path: Path) -> None:
    """Task 0 finishes and leaves its transaction open; task 1 waits on a gate file: meanwhile
    read_uncommitted sees task 0's rows in both streams and read_committed nothing. Once the
    gate opens, the driver commits both tasks' transactions: every row once, in its stream.

    Then the driver "died after committing the transactions and before Spark's commit log said
    so": the restarted query replays the micro-batch, whose tasks find their replay marker and
    write nothing (not even a transaction marker: the streams' ends stay where they were)."""
    prefix = "txs-gate"
    create_streams(broker.bootstrap, f"{prefix}-a", f"{prefix}-b")
    gate = tmp_path / "gate"
    split = split_two_streams(prefix)

    def second_task_waits_for_the_gate(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        if TaskContext.get().partitionId() == 1:
            deadline = time.monotonic() + 180
            while not gate.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        yield from split(batches)

    checkpoint = str(tmp_path / "checkpoint")
    query = copy_query(spark, broker, checkpoint, second_task_waits_for_the_gate)
    try:
        quarter = COUNT // 4  # task 0 reads offsets 0-49: 25 rows to each stream
        for s in "ab":
            # (a query that died, e.g. its source's Python runner not starting, ends the wait)
            wait_until(lambda s=s: query.exception() is not None
                       or len(read_to_end(broker.bootstrap, f"{prefix}-{s}", "read_uncommitted")) >= quarter,
                       150, f"task 0's rows in {prefix}-{s}", interval=0.5)  # each look: a new consumer
            assert query.exception() is None, query.exception()
            assert read_to_end(broker.bootstrap, f"{prefix}-{s}", "read_committed") == []
    finally:
        gate.touch()
    run(query)
    committed = {s: read_to_end(broker.bootstrap, f"{prefix}-{s}", "read_committed", COUNT // 2) for s in "ab"}
    assert_values(spark, committed["a"], source[0::2])
    assert_values(spark, committed["b"], source[1::2])
    ends = {s: high_watermark(broker.bootstrap, f"{prefix}-{s}") for s in "ab"}

    commits = sorted((Path(checkpoint) / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    assert [c.name for c in commits] == ["0"]
    commits[-1].unlink()
    (Path(checkpoint) / "commits" / ".0.crc").unlink(missing_ok=True)
    run(copy_query(spark, broker, checkpoint, split))  # replays micro-batch 0
    assert (Path(checkpoint) / "commits" / "0").exists()
    for s in "ab":
        assert high_watermark(broker.bootstrap, f"{prefix}-{s}") == ends[s]
        assert read_to_end(broker.bootstrap, f"{prefix}-{s}", "read_committed", COUNT // 2) == committed[s]


def test_a_failed_micro_batch_is_aborted_in_every_stream(spark, broker, source, tmp_path: Path) -> None:  # noqa: ANN001
    """Task 1 fails on every attempt after writing rows; task 0 either succeeded and left its
    transaction open or, still running when task 1 failed for the last time, was killed with it
    open: Spark aborts the micro-batch and the driver aborts (or fences) task 0's transaction, so
    read_committed readers see nothing of it, and a record written afterwards is readable (the
    last stable offset moved past the aborted transactions: none is left open)."""
    prefix = "txs-fail"
    create_streams(broker.bootstrap, f"{prefix}-a", f"{prefix}-b")
    split = split_two_streams(prefix)

    def second_task_always_fails_half_way(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        fails = TaskContext.get().partitionId() == 1
        for batch in split(batches):
            yield pa.RecordBatch.from_arrays([batch.column(0), batch.column(1), pa.nulls(batch.num_rows, pa.int32())],
                                             names=["topic", "value", "partition"])
            if fails:
                # a row the writer rejects (partition 1) after it wrote the rows before it
                yield pa.RecordBatch.from_arrays([pa.array([f"{prefix}-a"]), pa.array([b"bad"]),
                                                  pa.array([1], pa.int32())], names=["topic", "value", "partition"])

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "5")
    try:
        reader = (spark.readStream.format("vdl").option("bootstrap.servers", broker.bootstrap)
                  .option("subscribe", SOURCE).option("startingOffsets", "earliest").option("minPartitions", "2"))
        frame = (reader.load().select("offset", "value")
                 .mapInArrow(second_task_always_fails_half_way, "topic string, value binary, partition int"))
        query = (frame.writeStream.format("vdl").option("bootstrap.servers", broker.bootstrap)
                 .option("exactlyOnce", "transactional").option("kafka.batch.size", "100")
                 .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
        with pytest.raises(Exception, match="column 'partition' must be null or 0"):
            query.awaitTermination(180)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for stream in (f"{prefix}-a", f"{prefix}-b"):
        uncommitted = read_to_end(broker.bootstrap, stream, "read_uncommitted", 1)
        assert {v for _, v in uncommitted} <= set(source)  # rows were written, then aborted
        producer.send(stream, b"after", partition=0).get(timeout=30)
    producer.close()
    for stream in (f"{prefix}-a", f"{prefix}-b"):
        assert [v for _, v in read_to_end(broker.bootstrap, stream, "read_committed", 1)] == [b"after"]


# A task's Python worker as Spark kills it when another task fails the stage: its transaction
# open, its process gone without a word (SIGKILL), no commit message for the driver.
KILLED_TASK = """
import sys
import confluent_kafka
producer = confluent_kafka.Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2]})
producer.init_transactions(30)
producer.begin_transaction()
producer.produce(sys.argv[3], b"of a killed task", partition=0)
assert producer.flush(30) == 0
print("open", flush=True)
sys.stdin.read()
"""


def test_an_aborted_micro_batch_fences_the_transactions_of_killed_tasks(broker, tmp_path: Path) -> None:  # noqa: ANN001
    """Both tasks of a micro-batch die with their transactions open (the stage failed, Spark killed
    their workers): the driver's abort gets no message from either, and still aborts both by
    fencing their transactional ids (read from the query id in the checkpoint), so a
    read_committed reader is not held up to the transaction timeout (15 minutes)."""
    import signal
    import subprocess
    import sys
    import uuid

    from pyspark.sql.types import BinaryType, StructField, StructType

    from pyspark_vdl import DefaultSource

    stream = "txs-killed"
    create_streams(broker.bootstrap, stream)
    query = str(uuid.uuid4())
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text(f'{{"id":"{query}"}}\n')  # as Spark writes it at a query's start
    for partition in (0, 1):
        task = subprocess.Popen([sys.executable, "-c", KILLED_TASK, broker.bootstrap,
                                 f"vdl-spark/txn/{query}/{partition}", stream],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert task.stdout.readline() == "open\n"
        finally:
            task.send_signal(signal.SIGKILL)
            task.wait(30)
    assert [v for _, v in read_to_end(broker.bootstrap, stream, "read_uncommitted", 2)] == [b"of a killed task"] * 2

    writer = DefaultSource({"kafka.bootstrap.servers": broker.bootstrap, "topic": stream,
                            "exactlyOnce": "transactional", "checkpointLocation": str(checkpoint)}
                           ).streamWriter(StructType([StructField("value", BinaryType())]), False)
    writer.abort([None, None], 0)

    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    producer.send(stream, b"after", partition=0).get(timeout=30)
    producer.close()
    assert read_to_end(broker.bootstrap, stream, "read_committed", 1) == [(4, b"after")]  # 2 records, 2 abort markers
