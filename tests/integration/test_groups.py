"""Consumer groups: three consumers subscribed to three streams share them one each; when one
leaves, the other two take over its stream. With kafka-python and with confluent-kafka."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

from tests.support.cluster import BrokerProcess
from tests.support.kafka import client, make_batch

DEADLINE_S = 40.0


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


def test_kafka_python_group_shares_streams_and_takes_over(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    streams = [f"kp-group-{i}" for i in range(3)]
    _create(broker, streams)
    assignments: dict[int, set[str]] = {}
    seen: dict[int, set[bytes]] = {i: set() for i in range(3)}
    stops = [threading.Event() for _ in range(3)]
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            consumer = KafkaConsumer(*streams, bootstrap_servers=broker.bootstrap, group_id="kp-group",
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
              lambda: (assignments, errors, broker.recent_output(30)))
    _wait(lambda: len(assignments) == 3 and all(len(a) == 1 for a in assignments.values())
          and set().union(*assignments.values()) == set(streams), "three consumers with one stream each",
          lambda: (assignments, errors, broker.recent_output(30)))
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


def test_confluent_group_shares_streams_and_takes_over(broker: BrokerProcess) -> None:
    import confluent_kafka

    streams = [f"ck-group-{i}" for i in range(3)]
    _create(broker, streams)
    group = f"ck-group-{uuid.uuid4().hex[:6]}"
    consumers = [confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
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
