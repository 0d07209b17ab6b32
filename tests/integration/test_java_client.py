"""Apache Kafka's Java client (kafka-clients 4.4) against VDL: the producer with its defaults
(idempotent, acks=all) and every codec, read back exactly; group consumers with the classic
protocol and with KIP-848's `group.protocol=consumer`, alone and two sharing several streams
(disjoint assignments, a rebalance when one leaves); an assign-mode consumer with seek,
offsetsForTimes and committed offsets.

Each test runs on one node and on a 3-node cluster, each over PLAINTEXT and over SASL_SSL with
SCRAM-SHA-512 (tests/integration/conftest.py). One JVM (`JavaClients`) and both clusters serve
the whole module.
"""

from __future__ import annotations

import pytest

from tests.support.java_client import JavaClients
from tests.support.java_targets import (
    FETCH_WAIT,
    JavaTarget,
    create_streams,
    produce_every_codec_and_read_back,
    unique,
)
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("admins")]

PROTOCOLS = ("classic", "consumer")
SESSION_MS = 10_000


def consumer_props(protocol: str, group: str) -> dict[str, str]:
    props = {"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": "false",
             "group.protocol": protocol} | FETCH_WAIT
    if protocol == "classic":
        # The default (range first) gives every one-partition stream to the same member.
        props |= {"session.timeout.ms": str(SESSION_MS), "heartbeat.interval.ms": "500",
                  "partition.assignment.strategy": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"}
    return props


def values_of(records: list[dict]) -> list[tuple[str, int, str | None, str]]:
    return [(r["topic"], r["offset"], r["key"], r["value"]) for r in records]


def test_producer_defaults_every_codec(java: JavaClients, target: JavaTarget) -> None:
    """A producer per codec, each with its own stream, read back by one consumer."""
    produce_every_codec_and_read_back(java, target, "java", 200)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_group_consumer_reads_commits_and_resumes(java: JavaClients, target: JavaTarget, protocol: str) -> None:
    stream = unique(f"java-group-{protocol}")
    group = unique("group")
    create_streams(java, target, stream)
    producer = unique("producer")
    java.producer(producer, target.bootstrap, target.security)
    consumer = unique("consumer")
    try:
        java.send(producer, stream, [f"v{i}" for i in range(10)])
        java.consumer(consumer, target.bootstrap, target.security, **consumer_props(protocol, group))
        java.call("subscribe", name=consumer, topics=[stream])
        got = java.poll(consumer, min_records=10)
        assert [(r["offset"], r["value"]) for r in got] == [(i, f"v{i}") for i in range(10)]
        assert java.call("assignment", name=consumer) == [f"{stream}-0"]
        java.call("commit", name=consumer)
        assert java.call("committed", name=consumer, partitions=[stream]) == {
            stream: {"offset": 10, "metadata": "", "leader_epoch": got[-1]["leader_epoch"]}}
        metadata = java.call("group_metadata", name=consumer)
        assert metadata["group_id"] == group and metadata["member_id"] != "" and metadata["generation_id"] >= 1
        # The admin client lists and describes the group as the kind it is (ListGroups v5 type;
        # ConsumerGroupDescribe for a KIP-848 group, DescribeGroups for a classic one).
        admin = target.name
        kind = "Consumer" if protocol == "consumer" else "Classic"
        listed = [g for g in java.call("list_groups", name=admin) if g["group_id"] == group]
        assert listed == [{"group_id": group, "type": kind, "protocol": "consumer", "state": "Stable"}]
        described = java.call("describe_consumer_groups", name=admin, groups=[group])[group]["ok"]
        members = [(m["member_id"], m["member_epoch"], m["assignment"], m["target_assignment"])
                   for m in described["members"]]
        if protocol == "consumer":
            assert (described["state"], described["type"], described["assignor"], described["group_epoch"]) == (
                "Stable", kind, "uniform", metadata["generation_id"])
            assert members == [(metadata["member_id"], metadata["generation_id"], [f"{stream}-0"], [f"{stream}-0"])]
        else:
            assert (described["state"], described["type"], described["assignor"]) == (
                "Stable", kind, "cooperative-sticky")
            assert members == [(metadata["member_id"], -1, [f"{stream}-0"], None)]
    finally:
        java.call("close", name=consumer)
    # A new member of the group resumes at the committed offset.
    java.send(producer, stream, ["v10", "v11"])
    java.call("close", name=producer)
    resumed = unique("consumer")
    java.consumer(resumed, target.bootstrap, target.security, **consumer_props(protocol, group))
    try:
        java.call("subscribe", name=resumed, topics=[stream])
        got = java.poll(resumed, min_records=2)
        assert [(r["offset"], r["value"]) for r in got] == [(10, "v10"), (11, "v11")]
    finally:
        java.call("close", name=resumed)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_two_members_share_streams_and_rebalance(java: JavaClients, target: JavaTarget, protocol: str) -> None:
    streams = [unique(f"java-share-{protocol}-{i}") for i in range(4)]
    group = unique("group")
    create_streams(java, target, *streams)
    producer = unique("producer")
    java.producer(producer, target.bootstrap, target.security)
    first, second = unique("first"), unique("second")
    try:
        java.consumer(first, target.bootstrap, target.security, **consumer_props(protocol, group))
        java.consumer(second, target.bootstrap, target.security, **consumer_props(protocol, group))
        java.call("subscribe", name=first, topics=streams)
        java.call("subscribe", name=second, topics=streams)
        seen: dict[str, list[dict]] = {first: [], second: []}

        held: list[list[str]] = []

        def split_evenly() -> bool:
            for member in (first, second):
                seen[member] += java.poll(member, min_records=0, timeout_ms=200)
            held[:] = [java.call("assignment", name=member) for member in (first, second)]
            return len(held[0]) == 2 and len(held[1]) == 2

        wait_until(split_evenly, 60, lambda: f"the two members to hold two streams each (they hold {held})")
        assignments = [set(java.call("assignment", name=member)) for member in (first, second)]
        assert assignments[0].isdisjoint(assignments[1])
        assert assignments[0] | assignments[1] == {f"{stream}-0" for stream in streams}
        # Written once the split settled: a stream read by the first member before the second
        # joined would be read again by the second (nothing committed yet).
        assert seen == {first: [], second: []}
        for stream in streams:
            java.send(producer, stream, [f"{stream}/a", f"{stream}/b"])

        def read_everything() -> bool:
            for member in (first, second):
                seen[member] += java.poll(member, min_records=0, timeout_ms=200)
            return sum(len(records) for records in seen.values()) >= 8

        wait_until(read_everything, 60, "every record to be read")
        for member in (first, second):
            java.call("commit", name=member)
        # Each record read once, by the member holding its stream.
        for member, held in zip((first, second), assignments, strict=True):
            assert sorted(values_of(seen[member])) == sorted(
                (stream, offset, None, f"{stream}/{value}") for stream in streams if f"{stream}-0" in held
                for offset, value in enumerate("ab"))
        # The first leaves: the second takes every stream over and reads what follows from the
        # committed offsets.
        java.call("close", name=first)
        for stream in streams:
            java.send(producer, stream, [f"{stream}/c"])
        later: list[dict] = []

        def took_over() -> bool:
            later.extend(java.poll(second, min_records=0, timeout_ms=200))
            return len(java.call("assignment", name=second)) == 4 and len(later) >= 4

        wait_until(took_over, 60, "the second member to take every stream over")
        assert sorted(values_of(later)) == sorted((stream, 2, None, f"{stream}/c") for stream in streams)
    finally:
        java.call("close", name=second)
        java.call("close", name=producer)


def test_assign_seek_offsets_for_times_and_committed(java: JavaClients, target: JavaTarget) -> None:
    stream = unique("java-assign")
    group = unique("group")
    create_streams(java, target, stream)
    producer = unique("producer")
    java.producer(producer, target.bootstrap, target.security)
    base = 1_700_000_000_000
    try:
        records = [{"value": f"t{i}", "timestamp": base + 1000 * i} for i in range(10)]
        sent = java.call("send", name=producer, topic=stream, records=records)
        assert [(s["offset"], s["timestamp"]) for s in sent] == [(i, base + 1000 * i) for i in range(10)]
    finally:
        java.call("close", name=producer)
    consumer = unique("consumer")
    java.consumer(consumer, target.bootstrap, target.security,
                  **{"group.id": group, "enable.auto.commit": "false"} | FETCH_WAIT)
    try:
        java.call("assign", name=consumer, partitions=[stream])
        assert java.call("committed", name=consumer, partitions=[stream]) == {stream: None}
        assert java.call("beginning_offsets", name=consumer, partitions=[stream]) == {stream: 0}
        assert java.call("end_offsets", name=consumer, partitions=[stream]) == {stream: 10}
        found = java.call("offsets_for_times", name=consumer, timestamps={stream: base + 4500})
        assert {k: (v["offset"], v["timestamp"]) for k, v in found.items()} == {stream: (5, base + 5000)}
        assert java.call("offsets_for_times", name=consumer, timestamps={stream: base + 60_000}) == {stream: None}
        java.call("seek", name=consumer, topic=stream, offset=found[stream]["offset"])
        got = java.poll(consumer, min_records=5)
        assert [(r["offset"], r["value"], r["timestamp"]) for r in got] == [
            (i, f"t{i}", base + 1000 * i) for i in range(5, 10)]
        java.call("commit", name=consumer, offsets={stream: {"offset": 7, "metadata": "seven"}})
        assert java.call("committed", name=consumer, partitions=[stream]) == {
            stream: {"offset": 7, "metadata": "seven", "leader_epoch": -1}}
        java.call("seek", name=consumer, topic=stream, offset=2)
        assert java.call("position", name=consumer, topic=stream) == 2
        got = java.poll(consumer, min_records=8)
        assert [r["value"] for r in got] == [f"t{i}" for i in range(2, 10)]
    finally:
        java.call("close", name=consumer)
