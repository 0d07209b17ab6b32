"""Consumer groups: three consumers subscribed to three streams share them one each; when one
leaves, the other two take over its stream. With kafka-python and with confluent-kafka; and
2, 3 or 5 members of each client library started at the same moment form one group in which
every stream has exactly one owner that reads exactly its records."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from tests.support.cluster import BrokerProcess, start_broker
from tests.support.kafka import client, make_batch

DEADLINE_S = 40.0
# Members started together form one generation through the initial rebalance delay: the broker
# completes a new group's first join once this long passed with no member joining (Kafka's
# InitialDelayedJoin). 300 ms rather than the 3 s default: members here join within
# milliseconds of each other (a slow one makes one more rebalance, which the tests wait out),
# and every new group's first join costs the whole delay.
REBALANCE_DELAY_MS = 300


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """conftest's module_broker, with the shorter initial rebalance delay (every test here uses
    its own streams and groups)."""
    directory = tmp_path_factory.mktemp("groups-broker")
    settings = directory / "node.toml"
    settings.write_text(f"group_initial_rebalance_delay_ms = {REBALANCE_DELAY_MS}\n")
    broker = start_broker(directory, auto_create_streams=False, config=str(settings))
    yield broker
    broker.kill()


def _create(broker: BrokerProcess, streams: list[str]) -> None:
    with client(broker.bootstrap) as c:
        for stream in streams:
            c.create_stream(stream)
            c.produce(stream, make_batch([f"{stream}-{i}".encode() for i in range(10)]))


def _wait(condition: Callable[[], bool], what: str, state: Callable[[], object] = lambda: None) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {state()}"
        time.sleep(0.05)


def test_kafka_python_group_shares_streams_and_takes_over(module_broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    streams = [f"kp-group-{i}" for i in range(3)]
    _create(module_broker, streams)
    assignments: dict[int, set[str]] = {}
    seen: dict[int, set[bytes]] = {i: set() for i in range(3)}
    stops = [threading.Event() for _ in range(3)]
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            consumer = KafkaConsumer(*streams, bootstrap_servers=module_broker.bootstrap, group_id="kp-group",
                                     auto_offset_reset="earliest", enable_auto_commit=False,
                                     partition_assignment_strategy=[RoundRobinPartitionAssignor],
                                     session_timeout_ms=6000, heartbeat_interval_ms=200,
                                     max_poll_interval_ms=10000)
            while not stops[index].is_set():
                for messages in consumer.poll(timeout_ms=100).values():
                    seen[index].update(m.value for m in messages)
                assignments[index] = {tp.topic for tp in consumer.assignment()}
            consumer.close()  # sends LeaveGroup
            assignments.pop(index, None)
        except BaseException as error:  # surfaced by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(3)]
    # Members join one at a time (each rebalance settles first): kafka-python 3.0's leader can
    # wedge when several rebalances overlap with its own metadata-triggered rejoin.
    for index, thread in enumerate(threads):
        thread.start()
        _wait(lambda index=index: len(assignments) == index + 1
              and set().union(*assignments.values()) == set(streams)
              and all(assignments.values()), f"consumer {index} to join",
              lambda: (assignments, errors, module_broker.recent_output(30)))
    _wait(lambda: len(assignments) == 3 and all(len(a) == 1 for a in assignments.values())
          and set().union(*assignments.values()) == set(streams), "three consumers with one stream each",
          lambda: (assignments, errors, module_broker.recent_output(30)))
    leaver = 0
    left_stream = next(iter(assignments[leaver]))
    stops[leaver].set()
    threads[leaver].join(DEADLINE_S)
    _wait(lambda: leaver not in assignments and len(assignments) == 2
          and set().union(*assignments.values()) == set(streams), "the two others to take over")
    # The stream that changed hands is read by its new owner.
    new_owner = next(i for i, a in assignments.items() if left_stream in a)
    _wait(lambda: any(v.startswith(left_stream.encode()) for v in seen[new_owner]), "the new owner to read")
    for stop in stops:
        stop.set()
    for thread in threads:
        thread.join(DEADLINE_S)
    assert not errors, errors


def test_confluent_group_shares_streams_and_takes_over(module_broker: BrokerProcess) -> None:
    import confluent_kafka

    streams = [f"ck-group-{i}" for i in range(3)]
    _create(module_broker, streams)
    group = f"ck-group-{uuid.uuid4().hex[:6]}"
    consumers = [confluent_kafka.Consumer({
        "bootstrap.servers": module_broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "partition.assignment.strategy": "roundrobin",
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 200}) for _ in range(3)]
    for consumer in consumers:
        consumer.subscribe(streams)
    seen: dict[int, set[bytes]] = {i: set() for i in range(3)}

    def poll(active: list[int]) -> dict[int, set[str]]:
        for i in active:
            message = consumers[i].poll(0.05)
            if message is not None and message.error() is None:
                seen[i].add(message.value())
        return {i: {tp.topic for tp in consumers[i].assignment()} for i in active}

    def settled(active: list[int], want_each: int | None) -> bool:
        current = poll(active)
        union = set().union(*current.values())
        return union == set(streams) and sum(map(len, current.values())) == 3 and \
            (want_each is None or all(len(a) == want_each for a in current.values()))

    _wait(lambda: settled([0, 1, 2], 1), "three confluent consumers with one stream each")
    left_stream = next(iter(poll([0])[0]))
    consumers[0].close()
    _wait(lambda: settled([1, 2], None), "the two others to take over")
    owner = next(i for i, a in poll([1, 2]).items() if left_stream in a)
    _wait(lambda: poll([1, 2]) is not None and any(v.startswith(left_stream.encode()) for v in seen[owner]),
          "the new owner to read")
    for consumer in consumers[1:]:
        consumer.close()


def test_confluent_static_member_restarts_into_its_membership(module_broker: BrokerProcess) -> None:
    """KIP-345 static membership (`group.instance.id`), as librdkafka uses it: a static member
    sends no LeaveGroup when it closes, and its restart with the same instance id takes over its
    membership at once -- not after the old member's session timeout -- and resumes from its
    commit; the group keeps one member under that instance id. A second process started with
    the same instance id fences the first (FENCED_INSTANCE_ID, fatal to it)."""
    import confluent_kafka
    from confluent_kafka.admin import AdminClient

    stream = "ck-static"
    _create(module_broker, [stream])
    group = f"ck-static-{uuid.uuid4().hex[:6]}"
    session_s = 60  # a restart must not wait for it (DEADLINE_S is shorter)
    assert DEADLINE_S < session_s

    def static_consumer() -> confluent_kafka.Consumer:
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": module_broker.bootstrap, "group.id": group, "group.instance.id": "instance-1",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": session_s * 1000, "heartbeat.interval.ms": 200})
        consumer.subscribe([stream])
        return consumer

    def read(consumer: confluent_kafka.Consumer, count: int) -> list[tuple[int, bytes]]:
        records: list[tuple[int, bytes]] = []

        def more() -> bool:
            message = consumer.poll(0.05)
            if message is not None:
                assert message.error() is None, message.error()
                records.append((message.offset(), message.value()))
            return len(records) >= count
        _wait(more, f"{count} records", lambda: (records, module_broker.recent_output(20)))
        return records

    first = static_consumer()
    assert read(first, 4) == [(i, f"{stream}-{i}".encode()) for i in range(4)]
    first.commit(asynchronous=False)
    first.close()

    restarted = static_consumer()
    assert read(restarted, 6) == [(i, f"{stream}-{i}".encode()) for i in range(4, 10)]
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(timeout=DEADLINE_S)
    assert [(m.group_instance_id, [(tp.topic, tp.partition) for tp in m.assignment.topic_partitions])
            for m in described.members] == [("instance-1", [(stream, 0)])]
    assert described.state is confluent_kafka.ConsumerGroupState.STABLE

    fatal: list[confluent_kafka.KafkaError] = []
    twin = static_consumer()

    def fenced() -> bool:
        for consumer in (restarted, twin):
            message = consumer.poll(0.05)
            if message is not None and message.error() is not None:
                fatal.append(message.error())
        return bool(fatal)
    _wait(fenced, "the older instance to be fenced", lambda: module_broker.recent_output(20))
    assert fatal[0].code() == confluent_kafka.KafkaError._FATAL and "fenced" in fatal[0].str()
    _wait(lambda: twin.poll(0.05) is None and bool(twin.assignment()), "the newer instance to hold the stream")
    assert [(tp.topic, tp.partition) for tp in twin.assignment()] == [(stream, 0)]
    twin.close()
    restarted.close()


def test_kafka_python_admin_removes_a_static_member_by_instance_id(module_broker: BrokerProcess) -> None:
    """A static member that closed is still in the group (it sends no LeaveGroup) until its
    session runs out; KafkaAdminClient.remove_group_members (LeaveGroup v3+, by instance id
    alone) takes it out at once, and an instance id the group does not have is UNKNOWN_MEMBER_ID."""
    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka.admin import MemberToRemove
    from kafka.errors import NoError, UnknownMemberIdError

    stream = "kp-static-remove"
    _create(module_broker, [stream])
    group = f"kp-static-{uuid.uuid4().hex[:6]}"
    consumer = KafkaConsumer(stream, bootstrap_servers=module_broker.bootstrap, group_id=group,
                             group_instance_id="instance-1", auto_offset_reset="earliest", session_timeout_ms=60000)
    _wait(lambda: bool(consumer.poll(timeout_ms=50) is not None and consumer.assignment()), "an assignment")
    consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    try:
        before = admin.describe_groups([group])[group]
        assert (before["group_state"], [m["group_instance_id"] for m in before["members"]]) == (
            "Stable", ["instance-1"])
        removed = admin.remove_group_members(group, [MemberToRemove(group_instance_id="instance-1"),
                                                     MemberToRemove(group_instance_id="instance-2")])
        assert removed == {"instance-1": NoError, "instance-2": UnknownMemberIdError}
        after = admin.describe_groups([group])[group]
        assert (after["group_state"], after["members"]) == ("Empty", [])
    finally:
        admin.close()


# -- members started at the same moment ---------------------------------------------------------
# Every member is constructed and subscribed before any of them polls (confluent-kafka,
# aiokafka: then polled in turn from this thread; kafka-python: threads released by a barrier),
# so the group forms from members that all race for it, as when a job starts several at once.

RECORDS = 10
SETTLE_S = 20.0


@dataclass
class GroupMember:
    """One client's consumer behind a uniform, synchronous face."""

    poll: Callable[[], list[tuple[str, int, bytes]]]
    assignment: Callable[[], set[str]]
    close: Callable[[], None]
    # records read per stream, in the order they arrived: (offset, value)
    records: dict[str, list[tuple[int, bytes]]] = field(default_factory=dict)
    closed: bool = False

    def read(self) -> None:
        for topic, offset, value in self.poll():
            self.records.setdefault(topic, []).append((offset, value))


def _expected(stream: str) -> list[tuple[int, bytes]]:
    return [(i, f"{stream}-{i}".encode()) for i in range(RECORDS)]


def _owners(members: list[GroupMember], streams: list[str]) -> dict[str, list[int]]:
    return {s: [i for i, m in enumerate(members) if not m.closed and s in m.assignment()] for s in streams}


def _problem(members: list[GroupMember], streams: list[str], must_read: set[str] | None = None) -> str | None:
    """Why the group is not (yet) settled with every stream (of `must_read`, default all) read
    exactly by its one owner, or None. A stream outside `must_read` is read fully or not at all."""
    owners = _owners(members, streams)
    if any(len(each) != 1 for each in owners.values()):
        return f"owners {owners}"
    for index, member in enumerate(members):
        if member.closed:
            continue
        owned = member.assignment()
        if set(member.records) - owned:
            return f"member {index} owns {sorted(owned)} but read {sorted(member.records)}"
        incomplete = [s for s in owned if member.records.get(s) != _expected(s)
                      and (must_read is None or s in must_read or s in member.records)]
        if incomplete:
            return f"member {index} has not read exactly {incomplete}: {[member.records.get(s) for s in incomplete]}"
    return None


def _poll_until_settled(members: list[GroupMember], streams: list[str], what: str,
                        must_read: set[str] | None = None) -> None:
    deadline = time.monotonic() + SETTLE_S
    while True:
        for member in members:
            if not member.closed:
                member.read()
        problem = _problem(members, streams, must_read)
        if problem is None:
            return
        assert time.monotonic() < deadline, f"{what}: not settled after {SETTLE_S} s: {problem}"


def _check_group_and_handover(members: list[GroupMember], streams: list[str]) -> None:
    """All members settle, then the owner of the first stream leaves and the others take its
    streams over, each new owner reading exactly their records."""
    try:
        _poll_until_settled(members, streams, f"{len(members)} members started together")
        owners = _owners(members, streams)
        assert all(len(each) == 1 for each in owners.values()), owners
        for member in members:
            assert member.records == {s: _expected(s) for s in member.assignment()}
        if len(members) < 2:
            return
        leaver = owners[streams[0]][0]
        handed_over = members[leaver].assignment()
        members[leaver].close()
        members[leaver].closed = True
        # No offsets are committed: the new owner reads a handed-over stream from the start;
        # whether a member re-reads a stream it kept is the client's business.
        for member in members:
            member.records = {}
        _poll_until_settled(members, streams, f"member {leaver} leaving", must_read=handed_over)
        owners = _owners(members, streams)
        assert all(len(each) == 1 and each[0] != leaver for each in owners.values()), owners
        for stream in handed_over:
            assert members[owners[stream][0]].records[stream] == _expected(stream)
    finally:
        for member in members:
            if not member.closed:
                member.close()
                member.closed = True


def _group_streams(broker: BrokerProcess, prefix: str) -> tuple[list[str], str]:
    streams = [f"{prefix}-{i}" for i in range(3)]
    with client(broker.bootstrap) as c:
        for stream in streams:
            c.create_stream(stream)
            c.produce(stream, make_batch([value for _, value in _expected(stream)]))
    return streams, f"{prefix}-group"


def _kafka_python_members(bootstrap: str, group: str, streams: list[str], count: int) -> list[GroupMember]:
    """One thread per consumer, all released by one barrier. kafka-python 3.0.12 must be polled
    continuously: a JoinGroup/SyncGroup that completes between two polls is dropped by the
    client (it sends a fresh JoinGroup), so members polled in turn from one thread keep the
    group rebalancing whatever the coordinator does."""
    import queue

    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    barrier = threading.Barrier(count)

    def member() -> GroupMember:
        arrived: queue.Queue[tuple[str, int, bytes]] = queue.Queue()
        assigned: list[set[str]] = [set()]
        stop = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            try:
                consumer = KafkaConsumer(*streams, bootstrap_servers=bootstrap, group_id=group,
                                         auto_offset_reset="earliest", enable_auto_commit=False,
                                         partition_assignment_strategy=[RoundRobinPartitionAssignor],
                                         session_timeout_ms=6000, heartbeat_interval_ms=200)
                barrier.wait(SETTLE_S)
                while not stop.is_set():
                    for records in consumer.poll(timeout_ms=100).values():
                        for r in records:
                            arrived.put((r.topic, r.offset, r.value))
                    assigned[0] = {tp.topic for tp in consumer.assignment()}
                consumer.close()
            except BaseException as error:  # surfaced by poll() in the test's thread
                errors.append(error)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()

        def poll() -> list[tuple[str, int, bytes]]:
            assert not errors, errors
            # Up to 50 ms for a first record, as the other clients' polls wait: returning at once
            # would spin the settling loop, taking a core (and the GIL) from the consumer threads
            # it waits on.
            try:
                drained = [arrived.get(timeout=0.05)]
            except queue.Empty:
                return []
            while not arrived.empty():
                drained.append(arrived.get_nowait())
            return drained

        def close() -> None:
            stop.set()
            thread.join(SETTLE_S)
            assert not thread.is_alive() and not errors, errors

        return GroupMember(poll, lambda: assigned[0], close)

    return [member() for _ in range(count)]


def _confluent_members(bootstrap: str, group: str, streams: list[str], count: int) -> list[GroupMember]:
    import confluent_kafka

    def member() -> GroupMember:
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "partition.assignment.strategy": "roundrobin",
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 200})
        consumer.subscribe(streams)

        def poll() -> list[tuple[str, int, bytes]]:
            message = consumer.poll(0.05)
            if message is None or message.error() is not None:
                return []
            return [(message.topic(), message.offset(), message.value())]

        return GroupMember(poll, lambda: {tp.topic for tp in consumer.assignment()}, consumer.close)

    return [member() for _ in range(count)]


def _aiokafka_members(bootstrap: str, group: str, streams: list[str], count: int) -> list[GroupMember]:
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    # One loop for all members; it runs (and so do their heartbeat tasks) whenever one polls.
    loop = asyncio.new_event_loop()

    async def create() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(*streams, bootstrap_servers=bootstrap, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                partition_assignment_strategy=[RoundRobinPartitionAssignor],
                                session_timeout_ms=6000, heartbeat_interval_ms=200)

    async def start_all() -> list[AIOKafkaConsumer]:
        consumers = [await create() for _ in range(count)]
        await asyncio.gather(*(c.start() for c in consumers))
        return consumers

    consumers = loop.run_until_complete(start_all())
    open_members = [count]

    def member(consumer: AIOKafkaConsumer) -> GroupMember:
        def poll() -> list[tuple[str, int, bytes]]:
            batches = loop.run_until_complete(consumer.getmany(timeout_ms=50))
            return [(r.topic, r.offset, r.value) for records in batches.values() for r in records]

        def close() -> None:
            loop.run_until_complete(consumer.stop())
            open_members[0] -= 1
            if not open_members[0]:
                loop.close()

        return GroupMember(poll, lambda: {tp.topic for tp in consumer.assignment()}, close)

    return [member(c) for c in consumers]


MEMBER_COUNTS = [2, 3, 5]


@pytest.mark.parametrize("count", MEMBER_COUNTS)
def test_kafka_python_members_started_together(module_broker: BrokerProcess, count: int) -> None:
    streams, group = _group_streams(module_broker, f"kp-together-{count}")
    _check_group_and_handover(_kafka_python_members(module_broker.bootstrap, group, streams, count), streams)


@pytest.mark.parametrize("count", MEMBER_COUNTS)
def test_confluent_members_started_together(module_broker: BrokerProcess, count: int) -> None:
    streams, group = _group_streams(module_broker, f"ck-together-{count}")
    _check_group_and_handover(_confluent_members(module_broker.bootstrap, group, streams, count), streams)


@pytest.mark.parametrize("count", MEMBER_COUNTS)
def test_aiokafka_members_started_together(module_broker: BrokerProcess, count: int) -> None:
    streams, group = _group_streams(module_broker, f"aio-together-{count}")
    _check_group_and_handover(_aiokafka_members(module_broker.bootstrap, group, streams, count), streams)
