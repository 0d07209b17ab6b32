"""Committed offsets across a kill -9 of the coordinator, with kafka-python, confluent-kafka and
aiokafka: a consumer auto-commits and commits explicitly, the node coordinating its group (the
metadata leader) is killed, the same consumer goes on reading and committing under the new
coordinator without losing its membership for more than one rejoin, and a consumer started
afterwards resumes exactly at the committed offset. The new coordinator's own request counters
(/metrics) show the member back within one session timeout of the kill and at most one
successful JoinGroup.

One 3-node dev cluster for the module.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from tests.faults.harness import (
    create_topic_raw,
    node_address,
    produce_raw,
    raw_request,
    running_nodes,
    wait_until,
)
from tests.support.kafka import committed_raw, coordinator_raw, make_batch
from tests.support.metrics import Scrape, try_scrape
from vdl_dev.dev_cluster import DevCluster
from vdl_wire import messages as m

pytestmark = pytest.mark.timeout(180)

SESSION_MS = 10_000
COMMIT_INTERVAL_MS = 200
DEADLINE_S = 40.0


@dataclass
class Consumer:
    """One client library's group consumer behind a uniform, synchronous face."""

    poll: Callable[[], list[tuple[int, bytes]]]
    commit: Callable[[], None]
    close: Callable[[], None]


def _kafka_python(bootstrap: str, group: str, stream: str) -> Consumer:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(stream, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=True, auto_commit_interval_ms=COMMIT_INTERVAL_MS,
                             session_timeout_ms=SESSION_MS, heartbeat_interval_ms=300)

    def poll() -> list[tuple[int, bytes]]:
        return [(r.offset, r.value) for rs in consumer.poll(timeout_ms=100).values() for r in rs]

    return Consumer(poll, consumer.commit, consumer.close)


def _confluent(bootstrap: str, group: str, stream: str) -> Consumer:
    import confluent_kafka

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": True, "auto.commit.interval.ms": COMMIT_INTERVAL_MS,
        "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 300})
    consumer.subscribe([stream])

    def poll() -> list[tuple[int, bytes]]:
        # Everything fetched so far, as the other libraries' polls return it: one message per
        # call would pay wait_until's pause per record.
        return [(message.offset(), message.value()) for message in consumer.consume(num_messages=500, timeout=0.1)
                if message.error() is None]

    def commit() -> None:
        consumer.commit(asynchronous=False)

    return Consumer(poll, commit, consumer.close)


def _aiokafka(bootstrap: str, group: str, stream: str) -> Consumer:
    from aiokafka import AIOKafkaConsumer

    loop = asyncio.new_event_loop()

    async def create() -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(stream, bootstrap_servers=bootstrap, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=True,
                                    auto_commit_interval_ms=COMMIT_INTERVAL_MS, session_timeout_ms=SESSION_MS,
                                    heartbeat_interval_ms=300)
        await consumer.start()
        return consumer

    consumer = loop.run_until_complete(create())

    def poll() -> list[tuple[int, bytes]]:
        batches = loop.run_until_complete(consumer.getmany(timeout_ms=100))
        return [(r.offset, r.value) for records in batches.values() for r in records]

    def close() -> None:
        loop.run_until_complete(consumer.stop())
        loop.close()

    return Consumer(poll, lambda: loop.run_until_complete(consumer.commit()), close)


CLIENTS = {"kafka-python": _kafka_python, "confluent-kafka": _confluent, "aiokafka": _aiokafka}


def _values(start: int, end: int) -> list[tuple[int, bytes]]:
    return [(i, f"v{i}".encode()) for i in range(start, end)]


def _produce(cluster: DevCluster, stream: str, start: int, end: int) -> None:
    """Records v<start>..v<end-1> at exactly those offsets, through whichever node leads."""
    batch = make_batch([value for _, value in _values(start, end)])

    def attempt() -> bool:
        leader = cluster.leader_of(stream)
        if leader is None or not cluster.nodes[leader].running:
            return False
        try:
            code, offset = produce_raw(node_address(cluster, leader), stream, batch, acks=-1, timeout_ms=2000)
        except (OSError, ValueError):
            return False
        assert code != 0 or offset == start, f"batch landed at {offset}, not {start}"
        return code == 0

    wait_until(attempt, DEADLINE_S, f"records {start}..{end - 1} of {stream} to be acknowledged")


def _coordinator(cluster: DevCluster, group: str) -> int:
    """The node FindCoordinator names, once it is a running node that answers for the group."""
    def ask() -> int | None:
        for node_id in running_nodes(cluster):
            try:
                error, coordinator = coordinator_raw(node_address(cluster, node_id), group)
            except (OSError, ValueError):
                continue
            if error == 0 and coordinator in running_nodes(cluster):
                if committed_raw(node_address(cluster, coordinator), group, [])[0] == 0:
                    return coordinator
        return None

    return wait_until(ask, DEADLINE_S, f"a coordinator for {group}")


def _committed(cluster: DevCluster, group: str, stream: str) -> int | None:
    try:
        error, offsets = committed_raw(node_address(cluster, _coordinator(cluster, group)), group, [stream])
    except (OSError, ValueError):
        return None
    return offsets[stream][0] if error == 0 else None


def _polling(consumer: Consumer, seen: list[tuple[int, bytes]], condition: Callable[[], bool], what: str) -> None:
    """Wait for `condition` while polling the consumer (aiokafka's heartbeats run only then)."""
    wait_until(lambda: seen.extend(consumer.poll()) or condition(), DEADLINE_S, what)


def _members(cluster: DevCluster, group: str) -> list[str]:
    response = raw_request(node_address(cluster, _coordinator(cluster, group)), m.DescribeGroupsRequest(groups=[group]))
    return [member.member_id for member in response.groups[0].members]


def _served(scraped: Scrape | None, apis: set[str]) -> float:
    """Requests of these APIs a node answered without error (every version)."""
    if scraped is None:
        return 0.0
    return sum(value for labels, value in scraped.samples.get("vdl_requests_total", [])
               if labels["api"] in apis and labels["error"] == "NONE")


def _read(consumer: Consumer, seen: list[tuple[int, bytes]], until: int) -> None:
    _polling(consumer, seen, lambda: bool(seen) and seen[-1][0] >= until - 1,
             f"the consumer to read up to offset {until - 1}")


@pytest.mark.parametrize("library", sorted(CLIENTS))
def test_commit_and_resume_across_a_coordinator_kill(cluster: DevCluster, library: str) -> None:
    stream = f"resume-{library}-{uuid.uuid4().hex[:6]}"
    group = f"{stream}-group"
    assert create_topic_raw(node_address(cluster, 1), stream, 3)[0] == 0
    _produce(cluster, stream, 0, 10)
    consumer = CLIENTS[library](cluster.bootstrap_servers, group, stream)
    try:
        seen: list[tuple[int, bytes]] = []
        _read(consumer, seen, 10)
        _polling(consumer, seen, lambda: _committed(cluster, group, stream) == 10, "auto-commit of offset 10")
        _produce(cluster, stream, 10, 20)
        _read(consumer, seen, 20)
        consumer.commit()
        assert _committed(cluster, group, stream) == 20
        members = _members(cluster, group)
        assert len(members) == 1
        victim = _coordinator(cluster, group)
        member_requests = {"Heartbeat", "OffsetCommit"}
        before = {i: try_scrape(cluster, i) for i in cluster.node_ids() if i != victim}
        cluster.kill(victim)
        killed = time.monotonic()
        # The member carries on under the new coordinator: reads and auto-commits go on.
        _polling(consumer, seen, lambda: _coordinator(cluster, group) != victim, "a new coordinator")
        successor = _coordinator(cluster, group)
        _polling(consumer, seen, lambda: _served(try_scrape(cluster, successor), member_requests)
                 > _served(before[successor], member_requests), "the member's first heartbeat or commit there")
        assert time.monotonic() - killed < SESSION_MS / 1000, "the member was not back within a session timeout"
        _produce(cluster, stream, 20, 30)
        _read(consumer, seen, 30)
        consumer.commit()
        _polling(consumer, seen, lambda: _committed(cluster, group, stream) == 30, "commit of offset 30 after the kill")
        # The new coordinator took the member over: same member id, not a new member, and it
        # joined at most once there.
        assert _members(cluster, group) == members
        joins = _served(try_scrape(cluster, successor), {"JoinGroup"}) - _served(before[successor], {"JoinGroup"})
        assert joins <= 1, f"{joins:.0f} JoinGroups completed at the new coordinator"
        # Whatever a rejoin made the client re-read, it read every record, in order, and no other.
        assert sorted(set(seen)) == _values(0, 30)
    finally:
        consumer.close()
    # A consumer started now resumes at the committed offset, not at auto.offset.reset=earliest.
    _produce(cluster, stream, 30, 35)
    resumed = CLIENTS[library](cluster.bootstrap_servers, group, stream)
    try:
        again: list[tuple[int, bytes]] = []
        _read(resumed, again, 35)
        assert again == _values(30, 35)
    finally:
        resumed.close()
