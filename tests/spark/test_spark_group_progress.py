"""A Spark streaming query's progress as a consumer group (commitOffsetsToGroup): `vdl groups
describe` and the broker's lag metric show lag 0 once the query caught up, the lag of a stopped
query grows as records arrive, each progress reports its offsets behind latest, and a group the
broker refuses commits for (it has a live member) costs the query nothing.

One single-node broker serving metrics for the module; the session's one SparkSession.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer

from tests.support.cluster import VDL_CLI, BrokerProcess, free_port, start_broker, wait_until
from tests.support.kafka import client, make_batch
from tests.support.metrics import scrape_url

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    port = free_port()
    process = start_broker(tmp_path_factory.mktemp("broker"), fsync=False, metrics_listen=f"127.0.0.1:{port}")
    process.metrics_url = f"http://127.0.0.1:{port}/metrics"  # type: ignore[attr-defined]
    yield process
    process.kill()


def _produce(broker: BrokerProcess, stream: str, count: int, tag: str) -> None:
    with client(broker.bootstrap) as c:
        c.produce(stream, make_batch([f"{tag}-{i}".encode() for i in range(count)]))


def _describe(broker: BrokerProcess, group: str) -> str:
    result = subprocess.run([*VDL_CLI, "groups", "describe", group, "--bootstrap", broker.bootstrap],
                            capture_output=True, text=True, timeout=60)
    return result.stdout


def _lag(broker: BrokerProcess, group: str, stream: str) -> float | None:
    return scrape_url(broker.metrics_url).value("vdl_consumer_group_lag", group=group, stream=stream)  # type: ignore[attr-defined]


def _query(spark, broker: BrokerProcess, stream: str, group: str, checkpoint: str):  # noqa: ANN001, ANN202
    frame = (spark.readStream.format("vdl").option("bootstrap.servers", broker.bootstrap)
             .option("subscribe", stream).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "30").option("commitOffsetsToGroup", group).load())
    return (frame.writeStream.format("noop").option("checkpointLocation", checkpoint)
            .trigger(processingTime="100 milliseconds").start())


def _caught_up(query, stream: str, end: int) -> bool:  # noqa: ANN001
    progress = query.lastProgress
    return bool(progress) and json.loads(progress["sources"][0]["endOffset"]) == {stream: end}


def test_query_lag_as_a_group(spark, broker: BrokerProcess, checkpoint: str) -> None:  # noqa: ANN001
    stream, group = "progress-src", "spark-progress"
    with client(broker.bootstrap) as c:
        c.create_stream(stream)
    _produce(broker, stream, 100, "a")
    query = _query(spark, broker, stream, group, checkpoint)
    try:
        wait_until(lambda: _caught_up(query, stream, 100), 120, "the query to read the 100 records", interval=0.2)
        # Caught up: the group's committed offset is the end, without waiting for new data.
        wait_until(lambda: _describe(broker, group) == (
            "group spark-progress: Empty, 0 member(s)\n"
            "STREAM        COMMITTED  HIGH-WATERMARK  LAG  OWNER\n"
            "progress-src  100        100             0    -\n"), 60, "lag 0 in vdl groups describe", interval=0.5)
        assert _lag(broker, group, stream) == 0
        # Every micro-batch reported how far it was behind the latest offset, as Spark's Kafka source does.
        reports = [(json.loads(p["sources"][0]["latestOffset"]), json.loads(p["sources"][0]["endOffset"]))
                   for p in query.recentProgress if p["numInputRows"] > 0]
        assert [latest[stream] - end[stream] for latest, end in reports][:1] == [70]  # 30 of 100 read first
        for latest, end in reports:
            behind = latest[stream] - end[stream]
            assert (latest["avgOffsetsBehindLatest"], latest["maxOffsetsBehindLatest"],
                    latest["minOffsetsBehindLatest"]) == (float(behind), behind, behind)
        assert query.exception() is None
    finally:
        query.stop()
    # Stopped: nothing commits any more, so the lag grows with every record produced.
    _produce(broker, stream, 25, "b")
    assert _describe(broker, group) == ("group spark-progress: Empty, 0 member(s)\n"
                                        "STREAM        COMMITTED  HIGH-WATERMARK  LAG  OWNER\n"
                                        "progress-src  100        125             25   -\n")
    assert _lag(broker, group, stream) == 25
    _produce(broker, stream, 5, "c")
    assert _lag(broker, group, stream) == 30


def test_refused_commits_do_not_disturb_the_query(spark, broker: BrokerProcess, checkpoint: str) -> None:  # noqa: ANN001
    stream, group = "progress-busy", "busy-group"
    with client(broker.bootstrap) as c:
        c.create_stream(stream)
    _produce(broker, stream, 40, "a")
    # A live member owns the group: the broker refuses the query's standalone commits.
    member = KafkaConsumer(stream, bootstrap_servers=broker.bootstrap, group_id=group, auto_offset_reset="earliest",
                           enable_auto_commit=False)
    try:
        seen: list[int] = []
        wait_until(lambda: seen.extend(r.offset for rs in member.poll(200).values() for r in rs) or len(seen) == 40,
                   30, "the member to read 40 records")
        member.commit()
        query = _query(spark, broker, stream, group, checkpoint)
        try:
            wait_until(lambda: _caught_up(query, stream, 40), 120, "the query to read the 40 records", interval=0.2)
            _produce(broker, stream, 10, "b")
            wait_until(lambda: _caught_up(query, stream, 50), 60, "the query to read 10 more", interval=0.2)
            assert query.exception() is None and query.isActive
        finally:
            query.stop()
        assert scrape_url(broker.metrics_url).value(  # type: ignore[attr-defined]
            "vdl_consumer_group_lag", group=group, stream=stream) == 10  # the member's commit (40) stands
    finally:
        member.close()
