"""Spark's own Kafka connector (spark-sql-kafka-0-10, the Java client inside) against a 3-node VDL
cluster, unchanged: the same options given to format("kafka") and format("vdl") give the same rows.

Batch and streaming reads and writes, includeHeaders, startingOffsetsByTimestamp, failOnDataLoss
after retention deleted what a query still needed, a leader killed under a streaming copy, and
Spark's real-time mode (trigger(realTime=...), which only Spark's Kafka source can join)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from chispa import assert_df_equality

from tests.faults.harness import wait_for_full_isr
from tests.spark.kafka_helpers import Produced, admin, expected_df, produce_confluent, produce_kafka_python
from tests.support.cluster import wait_until
from tests.support.kafka import wait_for_stable_offset
from tests.support.metrics import scrape
from vdl_dev.dev_cluster import DevCluster

pytestmark = pytest.mark.timeout(300)

# Retention runs often, so the data-loss test's tiny per-stream segments are deleted at once.
CLUSTER_SETTINGS = {"retention_check_ms": 200}
CLUSTER_RACKS = {1: "rack-1", 2: "rack-2", 3: "rack-3"}  # for kafka.client.rack (follower reads)
HEADERS_FIRST = "kk-batch"
TIMESTAMP_BASE = 1_700_000_000_000  # record i of kafka_helpers.record() has TIMESTAMP_BASE + 17 i


def read(spark, fmt: str, bootstrap: str, **options: str):  # noqa: ANN001, ANN201
    """spark.read.format(fmt) with the same options for both connectors."""
    reader = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def read_stream(spark, fmt: str, bootstrap: str, **options: str):  # noqa: ANN001, ANN201
    reader = spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def ordered(df):  # noqa: ANN001, ANN201
    return df.orderBy("topic", "offset")


def collect_available(frame, checkpoint: str) -> list:  # noqa: ANN001
    """Every row a streaming DataFrame has now (Trigger.AvailableNow into foreachBatch)."""
    rows: list = []
    query = (frame.writeStream.foreachBatch(lambda df, _: rows.extend(df.collect()))
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    try:
        query.awaitTermination(120)
    except Exception:  # noqa: BLE001 - the failure is inspected through query.exception()
        pass
    if query.exception() is not None:
        raise AssertionError(str(query.exception()))
    return rows


@pytest.fixture(scope="module")
def headers_stream(dev_cluster: DevCluster) -> list[Produced]:
    """One stream written by confluent-kafka (lz4; keys, null keys, headers with null values)."""
    with admin(dev_cluster.bootstrap_servers) as client:
        client.create_streams([HEADERS_FIRST])
    return produce_confluent(dev_cluster.bootstrap_servers, HEADERS_FIRST, 300, "lz4", "kk")


def test_batch_read_with_headers_equals_vdl(spark, cluster, headers_stream) -> None:  # noqa: ANN001
    options = {"subscribe": HEADERS_FIRST, "includeHeaders": "true"}
    kafka = read(spark, "kafka", cluster.bootstrap_servers, **options)
    vdl = read(spark, "vdl", cluster.bootstrap_servers, **options)
    assert_df_equality(ordered(kafka), ordered(vdl))
    assert_df_equality(ordered(kafka), expected_df(spark, headers_stream))
    # offsets as JSON, both ends
    ranged = {"subscribe": HEADERS_FIRST, "startingOffsets": json.dumps({HEADERS_FIRST: {"0": 17}}),
              "endingOffsets": json.dumps({HEADERS_FIRST: {"0": 230}})}
    assert_df_equality(ordered(read(spark, "kafka", cluster.bootstrap_servers, **ranged)),
                       ordered(read(spark, "vdl", cluster.bootstrap_servers, **ranged)))
    assert read(spark, "kafka", cluster.bootstrap_servers, **ranged).count() == 230 - 17


@pytest.mark.parametrize("options", [
    {"assign": json.dumps({HEADERS_FIRST: [0]}), "minPartitions": "3"},
    {"subscribePattern": "kk-b.*", "endingOffsetsByTimestamp": json.dumps({HEADERS_FIRST: {"0": TIMESTAMP_BASE + 17 * 250}})},
    {"subscribe": HEADERS_FIRST, "startingTimestamp": str(TIMESTAMP_BASE + 17 * 40), "endingOffsets": "latest"},
    {"subscribe": HEADERS_FIRST, "startingTimestamp": str(TIMESTAMP_BASE + 17 * 40 + 3),
     "endingTimestamp": str(TIMESTAMP_BASE + 17 * 260 - 3)},
    {"subscribe": HEADERS_FIRST, "startingOffsets": json.dumps({HEADERS_FIRST: {"0": 5}}),
     "maxRecordsPerPartition": "40"},
], ids=["assign-minPartitions", "pattern-endingOffsetsByTimestamp", "startingTimestamp", "endingTimestamp",
        "maxRecordsPerPartition"])
def test_same_options_same_rows(spark, cluster, headers_stream, options: dict[str, str]) -> None:  # noqa: ANN001
    kafka = read(spark, "kafka", cluster.bootstrap_servers, **options)
    assert kafka.count() > 0
    assert_df_equality(ordered(kafka), ordered(read(spark, "vdl", cluster.bootstrap_servers, **options)))


def test_client_rack_reads_from_the_follower_in_that_rack(spark, cluster, headers_stream) -> None:  # noqa: ANN001
    """KIP-392 through the Java consumer: the leader names the in-sync replica of the consumer's
    rack (preferred_read_replica) and the records come from there."""
    wait_for_full_isr(cluster, HEADERS_FIRST, timeout=60)
    leader = cluster.leader_of(HEADERS_FIRST)
    follower = min(n for n in CLUSTER_RACKS if n != leader)
    before = _bytes_out(cluster, HEADERS_FIRST)
    kafka = read(spark, "kafka", cluster.bootstrap_servers, subscribe=HEADERS_FIRST, includeHeaders="true",
                 **{"kafka.client.rack": CLUSTER_RACKS[follower]})
    assert_df_equality(ordered(kafka), expected_df(spark, headers_stream))
    after = _bytes_out(cluster, HEADERS_FIRST)
    assert [n for n in CLUSTER_RACKS if after[n] > before[n]] == [follower], (before, after)


def _bytes_out(cluster: DevCluster, stream: str) -> dict[int, float]:
    """vdl_bytes_out of the stream on every node (what its Fetch answers carried)."""
    return {node_id: scrape(cluster, node_id).get("vdl_bytes_out_total", stream=stream) for node_id in CLUSTER_RACKS}


TXN_STREAM = "kk-txn"
TXN_DEADLINE_S = 30


def transactional_producer(bootstrap: str, txn_id: str):  # noqa: ANN201
    from confluent_kafka import Producer

    # A transaction here stays open while Spark reads around it: more than librdkafka's default
    # 60 s timeout on a loaded machine, and the coordinator would abort it (and fence the producer).
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5,
                         "transaction.timeout.ms": 600_000})
    producer.init_transactions(TXN_DEADLINE_S)
    return producer


def offsets_values(spark, rows: list[tuple[int, bytes]]):  # noqa: ANN001, ANN201
    return spark.createDataFrame(rows, "offset long, value binary")


def test_read_committed_skips_aborted_and_open_transactions(spark, cluster, tmp_path: Path) -> None:  # noqa: ANN001
    """Committed, aborted and open transactions in one stream: format("vdl") with read_committed
    gives the committed records only, the rows format("kafka") gives, and an open transaction's
    records once it commits (a streaming query's next batch); read_uncommitted gives every data
    record; markers are never rows."""
    with admin(cluster.bootstrap_servers) as client:
        client.create_streams([TXN_STREAM])
    first = transactional_producer(cluster.bootstrap_servers, "kk-txn-first")
    first.begin_transaction()
    for value in (b"c1", b"c2", b"c3"):
        first.produce(TXN_STREAM, value, partition=0)
    first.commit_transaction(TXN_DEADLINE_S)  # data 0-2, commit marker 3
    first.begin_transaction()
    for value in (b"a1", b"a2"):
        first.produce(TXN_STREAM, value, partition=0)
    first.flush(TXN_DEADLINE_S)
    first.abort_transaction(TXN_DEADLINE_S)  # data 4-5, abort marker 6
    first.begin_transaction()
    first.produce(TXN_STREAM, b"c4", partition=0)
    first.commit_transaction(TXN_DEADLINE_S)  # data 7, commit marker 8
    wait_for_stable_offset(cluster.bootstrap_servers, TXN_STREAM, 9)  # the marker at 8 before o1
    second = transactional_producer(cluster.bootstrap_servers, "kk-txn-second")
    second.begin_transaction()
    second.produce(TXN_STREAM, b"o1", partition=0)
    second.flush(TXN_DEADLINE_S)  # data 9, left open: the last stable offset stays at 9

    committed = {"subscribe": TXN_STREAM, "kafka.isolation.level": "read_committed"}
    vdl = read(spark, "vdl", cluster.bootstrap_servers, **committed)
    assert_df_equality(ordered(read(spark, "kafka", cluster.bootstrap_servers, **committed)), ordered(vdl))
    assert_df_equality(ordered(vdl).select("offset", "value"),
                       offsets_values(spark, [(0, b"c1"), (1, b"c2"), (2, b"c3"), (7, b"c4")]),
                       ignore_nullable=True)
    # the short spelling, read_uncommitted: every data record, the open one too, no marker
    uncommitted = read(spark, "vdl", cluster.bootstrap_servers, subscribe=TXN_STREAM,
                       **{"isolation.level": "read_uncommitted"})
    assert_df_equality(ordered(uncommitted).select("offset", "value"), offsets_values(spark, [
        (0, b"c1"), (1, b"c2"), (2, b"c3"), (4, b"a1"), (5, b"a2"), (7, b"c4"), (9, b"o1")]), ignore_nullable=True)

    stream = read_stream(spark, "vdl", cluster.bootstrap_servers, startingOffsets="earliest", **committed)
    checkpoint = str(tmp_path / "txn-checkpoint")
    before = collect_available(stream.select("offset", "value"), checkpoint)
    assert sorted((r.offset, r.value) for r in before) == [(0, b"c1"), (1, b"c2"), (2, b"c3"), (7, b"c4")]
    second.commit_transaction(TXN_DEADLINE_S)  # commit marker 10
    wait_for_stable_offset(cluster.bootstrap_servers, TXN_STREAM, 11)
    after = collect_available(stream.select("offset", "value"), checkpoint)
    assert [(r.offset, r.value) for r in after] == [(9, b"o1")]


def test_starting_offsets_by_timestamp(spark, cluster, headers_stream, tmp_path: Path) -> None:  # noqa: ANN001
    # record i has timestamp TIMESTAMP_BASE + 17 i: start at i = 100 (a timestamp between two
    # records starts at the next one)
    options = {"subscribe": HEADERS_FIRST,
               "startingOffsetsByTimestamp": json.dumps({HEADERS_FIRST: {"0": TIMESTAMP_BASE + 17 * 100 - 5}})}
    kafka = read(spark, "kafka", cluster.bootstrap_servers, **options)
    wanted = [p for p in headers_stream if p.offset >= 100]
    assert_df_equality(ordered(kafka), expected_df(spark, wanted, include_headers=False))
    assert_df_equality(ordered(kafka), ordered(read(spark, "vdl", cluster.bootstrap_servers, **options)))
    # streaming: the query's first micro-batch starts there too
    rows = collect_available(read_stream(spark, "kafka", cluster.bootstrap_servers, **options),
                             str(tmp_path / "checkpoint"))
    assert_df_equality(ordered(spark.createDataFrame(rows, kafka.schema)), ordered(kafka))


def test_a_starting_timestamp_after_the_last_record(spark, cluster, headers_stream) -> None:  # noqa: ANN001
    """No record at or after the timestamp: an error by default, the end of the stream with
    startingOffsetsByTimestampStrategy=latest -- in both connectors."""
    after = json.dumps({HEADERS_FIRST: {"0": TIMESTAMP_BASE + 17 * 1000}})
    options = {"subscribe": HEADERS_FIRST, "startingOffsetsByTimestamp": after}
    refusals = {"kafka": "No offset matched from request of topic-partition",
                "vdl": "set 'startingOffsetsByTimestampStrategy' to 'latest' to start at the end"}
    for fmt, refusal in refusals.items():
        with pytest.raises(Exception, match=refusal):
            read(spark, fmt, cluster.bootstrap_servers, **options).collect()
        latest = read(spark, fmt, cluster.bootstrap_servers, **options, startingOffsetsByTimestampStrategy="latest")
        assert latest.collect() == []


def test_batch_write_then_read_back(spark, cluster) -> None:  # noqa: ANN001
    with admin(cluster.bootstrap_servers) as client:
        client.create_streams(["kk-written"])
    rows = [(None if i % 4 == 0 else f"k{i}".encode(), f"value-{i}".encode() * (1 + i % 5),
             [("h", f"{i}".encode()), ("none", None)] if i % 3 == 0 else None) for i in range(500)]
    frame = spark.createDataFrame(rows, "key binary, value binary, headers array<struct<key: string, value: binary>>")
    (frame.repartition(3).write.format("kafka").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
     .option("topic", "kk-written").save())
    back = read(spark, "vdl", cluster.bootstrap_servers, subscribe="kk-written", includeHeaders="true")
    assert back.count() == 500  # at-least-once: but a clean write stores each row once
    assert_df_equality(back.select("key", "value", "headers").orderBy("value"), frame.orderBy("value"),
                       ignore_nullable=True)
    assert sorted(r.offset for r in back.collect()) == list(range(500))


def test_streaming_copy_kafka_to_kafka(spark, cluster, tmp_path: Path) -> None:  # noqa: ANN001
    """readStream.format("kafka") -> writeStream.format("kafka"), records arriving while it runs."""
    bootstrap = cluster.bootstrap_servers
    with admin(bootstrap) as client:
        client.create_streams(["kk-live", "kk-live-copy"])
    first = produce_kafka_python(bootstrap, "kk-live", 200, "zstd", "live-a", with_headers=False)
    frame = read_stream(spark, "kafka", bootstrap, subscribe="kk-live", startingOffsets="earliest",
                        includeHeaders="true", maxOffsetsPerTrigger="150")
    query = (frame.select("key", "value", "headers").writeStream.format("kafka")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", "kk-live-copy")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        wait_until(lambda: query.lastProgress, 90, "the first micro-batch", interval=0.2)
        more = produce_confluent(bootstrap, "kk-live", 250, "snappy", "live-b")
        wait_until(lambda: _end_offset(query) == {"kk-live": {"0": 450}}, 90, "the copy to reach offset 450",
                   interval=0.2)
        assert query.exception() is None
    finally:
        query.stop()
    source = read(spark, "vdl", bootstrap, subscribe="kk-live", includeHeaders="true")
    copied = read(spark, "vdl", bootstrap, subscribe="kk-live-copy", includeHeaders="true")
    assert len(first + more) == 450
    assert_df_equality(copied.select("key", "value", "headers").orderBy("value"),
                       source.select("key", "value", "headers").orderBy("value"))
    # the streaming source's rows are the batch source's
    rows = collect_available(read_stream(spark, "kafka", bootstrap, subscribe="kk-live", startingOffsets="earliest",
                                         includeHeaders="true"), str(tmp_path / "checkpoint-read"))
    assert_df_equality(ordered(spark.createDataFrame(rows, source.schema)), ordered(source))


def _end_offset(query) -> dict | None:  # noqa: ANN001
    progress = query.lastProgress
    return json.loads(progress["sources"][0]["endOffset"]) if progress else None


def test_fail_on_data_loss_after_retention(spark, cluster, tmp_path: Path) -> None:  # noqa: ANN001
    bootstrap = cluster.bootstrap_servers
    with admin(bootstrap) as client:
        client.create_stream("kk-lossy", config={"segment.bytes": "1024", "retention.bytes": "3072"})
    first = produce_kafka_python(bootstrap, "kk-lossy", 10, "none", "a", with_headers=False)
    checkpoints = {fmt: str(tmp_path / f"checkpoint-{fmt}") for fmt in ("kafka", "vdl")}

    def run(fmt: str, fail_on_data_loss: bool) -> list:
        frame = read_stream(spark, fmt, bootstrap, subscribe="kk-lossy", startingOffsets="earliest",
                            failOnDataLoss=str(fail_on_data_loss).lower())
        return collect_available(frame, checkpoints[fmt])

    schema = read(spark, "vdl", bootstrap, subscribe="kk-lossy").schema
    for fmt in ("kafka", "vdl"):
        assert_df_equality(ordered(spark.createDataFrame(run(fmt, True), schema)),
                           expected_df(spark, first, include_headers=False))

    more = produce_kafka_python(bootstrap, "kk-lossy", 150, "none", "b" * 40, with_headers=False)
    with admin(bootstrap) as client:
        # retention deleted the first records, and then settled (stopped moving)
        state = {"previous": -1}

        def settled() -> int | None:
            earliest = client.list_offsets(["kk-lossy"], -2)["kk-lossy"]
            still = earliest == state["previous"]
            state["previous"] = earliest
            return earliest if earliest > 10 and still else None

        earliest = wait_until(settled, 30, "retention to delete the first segments", interval=0.5)

    with pytest.raises(AssertionError) as failure:
        run("kafka", True)
    assert "failOnDataLoss" in str(failure.value) and "kk-lossy" in str(failure.value)
    kept = [p for p in more if p.offset >= earliest]
    rows = {fmt: spark.createDataFrame(run(fmt, False), schema) for fmt in ("kafka", "vdl")}
    assert_df_equality(ordered(rows["kafka"]), expected_df(spark, kept, include_headers=False))
    assert_df_equality(ordered(rows["kafka"]), ordered(rows["vdl"]))


def test_leader_kills_under_streaming_copy(spark, cluster, tmp_path: Path) -> None:  # noqa: ANN001
    """The Java consumer and producer inside Spark follow new leaders: the source's leader is
    killed, restarted, then the sink's current leader is killed; every record is copied, none
    twice (the idempotent producer's retries are deduplicated by the new leader)."""
    bootstrap = cluster.bootstrap_servers
    with admin(bootstrap) as client:
        client.create_streams(["kk-kill", "kk-kill-copy"])
    produced = produce_kafka_python(bootstrap, "kk-kill", 1000, "lz4", "kill")
    # After a kill -9 of a leader, the Java AdminClient (3.9) on Spark's driver waits out
    # default.api.timeout.ms (60 s) on a listOffsets bound for the dead node before Spark retries;
    # Apache Kafka's brokers get the same wait (measured side by side). 10 s keeps this test short
    # (request.timeout.ms may not exceed it).
    timeouts = {"kafka.default.api.timeout.ms": "10000", "kafka.request.timeout.ms": "5000"}
    frame = read_stream(spark, "kafka", bootstrap, subscribe="kk-kill", startingOffsets="earliest",
                        includeHeaders="true", maxOffsetsPerTrigger="125", **timeouts)
    query = (frame.select("key", "value", "headers").writeStream.format("kafka")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", "kk-kill-copy")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="200 milliseconds").start())

    def copied_up_to(offset: int) -> bool:
        assert query.exception() is None, str(query.exception())
        end = _end_offset(query)
        return end is not None and end["kk-kill"]["0"] >= offset

    try:
        wait_until(lambda: copied_up_to(125), 90, "the first micro-batch", interval=0.2)
        source_leader = cluster.leader_of("kk-kill")
        assert source_leader is not None
        cluster.kill(source_leader)  # SIGKILL mid-query
        wait_until(lambda: copied_up_to(375), 90, "two micro-batches after the first kill", interval=0.2)
        cluster.restart(source_leader, timeout_s=60)
        sink_leader = wait_until(lambda: cluster.leader_of("kk-kill-copy"), 30, "the sink stream's leader")
        cluster.kill(sink_leader)
        wait_until(lambda: copied_up_to(1000), 150, "the copy to reach the end after the second kill",
                   interval=0.5)
    finally:
        query.stop()
    copied = read(spark, "vdl", bootstrap, subscribe="kk-kill-copy", includeHeaders="true")
    assert_df_equality(copied.select("key", "value", "headers").orderBy("value"),
                       expected_df(spark, produced).select("key", "value", "headers").orderBy("value"))


def test_real_time_mode_copy(spark, cluster, tmp_path: Path) -> None:  # noqa: ANN001
    """trigger(realTime=...): Spark's long-running tasks read with the Java consumer and write with
    the producer as records arrive; the copy holds exactly the records produced meanwhile."""
    bootstrap = cluster.bootstrap_servers
    with admin(bootstrap) as client:
        client.create_streams(["kk-rtm", "kk-rtm-copy"])
    frame = read_stream(spark, "kafka", bootstrap, subscribe="kk-rtm", startingOffsets="earliest",
                        includeHeaders="true")
    query = (frame.select("key", "value", "headers").writeStream.format("kafka")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", "kk-rtm-copy")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).outputMode("update")
             .trigger(realTime="5 seconds").start())
    try:
        produced = produce_confluent(bootstrap, "kk-rtm", 200, "none", "rtm")
        with admin(bootstrap) as client:
            wait_until(lambda: query.exception() is not None or client.list_offsets(["kk-rtm-copy"], -1)["kk-rtm-copy"]
                       >= 200, 120, "the real-time copy to hold 200 records", interval=0.2)
        assert query.exception() is None, str(query.exception())
    finally:
        query.stop()
    copied = read(spark, "vdl", bootstrap, subscribe="kk-rtm-copy", includeHeaders="true")
    assert_df_equality(copied.select("key", "value", "headers").orderBy("value"),
                       expected_df(spark, produced).select("key", "value", "headers").orderBy("value"))
