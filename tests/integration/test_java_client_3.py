"""An older Java client against VDL: kafka-clients 3.4 (what Spark 3.5's Kafka connector ships,
and what many Kafka 3.x applications still run), which speaks the protocol versions of Kafka 3.x
where 4.4's client speaks newer ones (ApiVersions v3 among them). The same harness as
test_java_client.py, on 3.4's jars: its admin client creates streams, its producer with its
defaults (idempotent, acks=all) writes every codec, read back exactly, a group consumer
commits and a second one resumes from the commit, and its transactional producer commits and
aborts under a read_committed consumer.

Each test runs on one node and on a 3-node cluster, each over PLAINTEXT and over SASL_SSL with
SCRAM-SHA-512 (tests/integration/conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.java_client import JavaClients
from tests.support.java_targets import (
    FETCH_WAIT,
    JavaTarget,
    create_streams,
    produce_every_codec_and_read_back,
    unique,
)
from vdl_dev.jvm import kafka3_client_classpath

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("admins")]



@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaClients]:
    with JavaClients(tmp_path_factory.mktemp("java-3"), kafka=kafka3_client_classpath()) as clients:
        assert clients.call("client_version") == "3.4.1"
        yield clients


def test_producer_defaults_every_codec(java: JavaClients, target: JavaTarget) -> None:
    produce_every_codec_and_read_back(java, target, "java3", 100)


def test_group_consumer_commits_and_another_resumes(java: JavaClients, target: JavaTarget) -> None:
    stream = unique("java3-group")
    group = unique("group")
    create_streams(java, target, stream)
    producer = unique("producer")
    java.producer(producer, target.bootstrap, target.security)
    props = {"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": "false",
             "session.timeout.ms": "10000", "heartbeat.interval.ms": "500"} | FETCH_WAIT
    try:
        java.send(producer, stream, [f"v{i}" for i in range(10)])
        first = unique("consumer")
        java.consumer(first, target.bootstrap, target.security, **props)
        try:
            java.call("subscribe", name=first, topics=[stream])
            got = java.poll(first, min_records=10)
            assert [(r["offset"], r["value"]) for r in got] == [(i, f"v{i}") for i in range(10)]
            java.call("commit", name=first)
            assert java.call("committed", name=first, partitions=[stream]) == {
                stream: {"offset": 10, "metadata": "", "leader_epoch": got[-1]["leader_epoch"]}}
        finally:
            java.call("close", name=first)
        java.send(producer, stream, [f"v{i}" for i in range(10, 15)])
        second = unique("consumer")
        java.consumer(second, target.bootstrap, target.security, **props)
        try:
            java.call("subscribe", name=second, topics=[stream])
            assert [(r["offset"], r["value"]) for r in java.poll(second, min_records=5)] == [
                (i, f"v{i}") for i in range(10, 15)]
        finally:
            java.call("close", name=second)
    finally:
        java.call("close", name=producer)


def test_transactions_commit_abort_and_read_committed(java: JavaClients, target: JavaTarget) -> None:
    """3.4's transactional producer (InitProducerId, AddPartitionsToTxn and EndTxn at Kafka 3.x's
    versions): a read_committed consumer sees the committed records only, at the offsets the
    markers leave (a, b, marker, c, abort marker, d, marker)."""
    stream = unique("java3-txn")
    create_streams(java, target, stream)
    producer = unique("producer")
    java.producer(producer, target.bootstrap, target.security, **{"transactional.id": unique("txn")})
    reader = unique("reader")
    try:
        java.call("init_transactions", name=producer)
        for values, commit in ((["a", "b"], True), (["c"], False), (["d"], True)):
            java.call("begin_transaction", name=producer)
            java.send(producer, stream, values)
            java.call("commit_transaction" if commit else "abort_transaction", name=producer)
        java.consumer(reader, target.bootstrap, target.security, **{"isolation.level": "read_committed"} | FETCH_WAIT)
        java.call("assign", name=reader, partitions=[stream])
        java.call("seek_to_beginning", name=reader, partitions=[stream])
        assert [(r["offset"], r["value"]) for r in java.poll(reader, min_records=3)] == [(0, "a"), (1, "b"), (5, "d")]
        assert java.call("end_offsets", name=reader, partitions=[stream]) == {stream: 7}
    finally:
        java.call("close", name=producer)
        java.call("close", name=reader)
