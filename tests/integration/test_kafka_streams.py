"""Kafka Streams 4.4 (the Java library) on a 3-node VDL cluster, stateful and exactly-once, as a
Kafka user runs it: tests/support/java/WordCountApp.java (groupBy + count, processing.guarantee=
exactly_once_v2) creates its own repartition topic and compacted changelog topic, reads lines a
Python producer writes and writes each word's new count; a read_committed reader of the output
sees every word's counts 1, 2, 3... exactly once, across a kill -9 of the app's JVM and a restart
that restores the counts from the changelog."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kafka import stream_set_configs
from tests.support.kafka_streams import StreamsApp
from tests.support.waiting import wait_until
from vdl_dev.dev_cluster import DevCluster

pytestmark = pytest.mark.timeout(300)

APP = "wordcount"
INPUT, OUTPUT = "wc-lines", "wc-counts"
REPARTITION, CHANGELOG = f"{APP}-words-repartition", f"{APP}-counts-changelog"
WORDS = ("apple", "berry", "cherry", "damson", "elder", "fig", "grape", "hazel")


def lines(first: int, count: int) -> list[str]:
    """Lines `first`..`first + count - 1`: one to five words each, in mixed case."""
    return [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)].upper() if j % 2 else WORDS[(i * 7 + j * 3) % len(WORDS)]
                     for j in range(1 + i % 5)) for i in range(first, first + count)]


def counts(text: list[str]) -> Counter[str]:
    return Counter(word.lower() for line in text for word in line.split())


def word_count_app(cluster: DevCluster, state_dir: Path, log: Path) -> StreamsApp:
    """The app's JVM (tests/support/java/WordCountApp.java)."""
    return StreamsApp("WordCountApp", [cluster.bootstrap_servers, APP, INPUT, OUTPUT, str(state_dir), "instance-1"], log)


class CountsReader:
    """The output stream from offset 0, read_committed: every (word, count) in order."""

    def __init__(self, cluster: DevCluster) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"reader-{uuid.uuid4()}",
                                  "isolation.level": "read_committed", "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(OUTPUT, 0, OFFSET_BEGINNING)])
        self.seen: dict[str, list[int]] = {}

    def read_until(self, expected: Counter[str], timeout: float = 90) -> None:
        def complete() -> bool:
            for message in self.consumer.consume(500, 0.2):
                assert message.error() is None, message.error()
                self.seen.setdefault(message.key().decode(), []).append(int(message.value()))
            return all(self.seen.get(word, [0])[-1] >= count for word, count in expected.items())
        wait_until(complete, timeout, lambda: f"the counts {dict(expected)}; last seen "
                                              f"{ {w: c[-1] for w, c in self.seen.items()} }")

    def close(self) -> None:
        self.consumer.close()


@pytest.fixture
def reader(cluster: DevCluster) -> Iterator[CountsReader]:
    committed = CountsReader(cluster)
    yield committed
    committed.close()


def produce(cluster: DevCluster, text: list[str]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5})
    errors: list[object] = []
    for line in text:
        producer.produce(INPUT, value=line.encode(), on_delivery=lambda e, _: e and errors.append(e))
    assert producer.flush(60) == 0 and not errors, errors[:3]



def log_start(cluster: DevCluster, stream: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "offsets"})
    try:
        low, _ = consumer.get_watermark_offsets(TopicPartition(stream, 0), timeout=10)
        return int(low)
    finally:
        consumer.close()


def test_word_count_exactly_once_across_a_kill(cluster: DevCluster, reader: CountsReader, tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for future in admin.create_topics([NewTopic(INPUT, 1, 3), NewTopic(OUTPUT, 1, 3)]).values():
        future.result(timeout=30)

    app = word_count_app(cluster, tmp_path / "state-1", tmp_path / "app-1.log")
    try:
        app.wait_running()
        first = lines(0, 200)
        produce(cluster, first)
        reader.read_until(counts(first))
        assert reader.seen == {word: list(range(1, n + 1)) for word, n in counts(first).items()}

        # The internal topics Streams created, with the configs it asked for: the changelog
        # compacted (kept whole here), the repartition topic deleted by retention and DeleteRecords.
        bootstrap = cluster.bootstrap_servers
        assert stream_set_configs(bootstrap, CHANGELOG) == {"cleanup.policy": "compact",
                                                            "message.timestamp.type": "CreateTime"}
        assert stream_set_configs(bootstrap, REPARTITION) == {"cleanup.policy": "delete", "segment.bytes": "52428800",
                                                              "retention.ms": "-1", "message.timestamp.type": "CreateTime"}
        # Streams purges the repartition records its tasks committed past (repartition.purge.interval.ms).
        wait_until(lambda: log_start(cluster, REPARTITION) > 0, 30, "Streams deleting consumed repartition records")
        assert log_start(cluster, CHANGELOG) == 0

        # More lines, and the app killed -9 while counting them: its open transaction (output,
        # changelog and input offsets together) never becomes visible.
        second = lines(200, 300)
        produce(cluster, second)
        total = counts(first) + counts(second)
        # killed once some of the new lines are counted and committed, the rest under way
        reader.read_until(Counter({"apple": counts(first)["apple"] + 1}))
        app.kill()
    finally:
        app.close()

    # A new instance with an empty state directory: its counts come from the changelog.
    restarted = word_count_app(cluster, tmp_path / "state-2", tmp_path / "app-2.log")
    try:
        restarted.wait_running()
        reader.read_until(total)
        assert reader.seen == {word: list(range(1, n + 1)) for word, n in total.items()}
    finally:
        restarted.close()
    assert restarted.process.returncode == 0, restarted.log_tail()
