"""Transactions with real clients on a 3-node cluster: confluent-kafka's (librdkafka),
kafka-python's and aiokafka's transactional producers; read_committed and read_uncommitted readers
see exactly the records they should; zombies are fenced; consume-transform-produce commits its
offsets with its output; a kill -9 of the coordinator between transactions and mid-commit; an abort
pipelined behind the next transaction's add follows it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.cluster import DevCluster
from tests.support.kafka import make_batch, read_to_end
from vdl_client.client import VdlClient
from vdl_client.settings import ClientSettings

DEADLINE_S = 30


def admin(cluster: DevCluster) -> VdlClient:
    return VdlClient(ClientSettings.from_bootstrap(cluster.bootstrap_servers, deadline_ms=30_000))


def read_all(bootstrap: str, stream: str, isolation: str, expected_count: int) -> list[bytes]:
    """Every value of `stream` a confluent-kafka consumer with `isolation` reads, until it holds
    `expected_count` values and has reached the partition's end, or the deadline."""
    return [value for _, value in read_to_end(bootstrap, stream, isolation, expected_count, DEADLINE_S)]


def confluent_transactions(bootstrap: str, stream: str, txn_id: str) -> None:
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                                         "linger.ms": 5})
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    for value in (b"c1", b"c2", b"c3"):
        producer.produce(stream, value)
    producer.commit_transaction(DEADLINE_S)
    producer.begin_transaction()
    for value in (b"a1", b"a2"):
        producer.produce(stream, value)
    producer.flush(DEADLINE_S)
    producer.abort_transaction(DEADLINE_S)
    producer.begin_transaction()
    producer.produce(stream, b"c4")
    producer.commit_transaction(DEADLINE_S)


def kafka_python_transactions(bootstrap: str, stream: str, txn_id: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for value in (b"c1", b"c2", b"c3"):
            producer.send(stream, value)
        producer.commit_transaction()
        producer.begin_transaction()
        for value in (b"a1", b"a2"):
            producer.send(stream, value)
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(stream, b"c4")
        producer.commit_transaction()
    finally:
        producer.close(timeout=5)


def aiokafka_transactions(bootstrap: str, stream: str, txn_id: str) -> None:
    import asyncio

    import aiokafka

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id,
                                             enable_idempotence=True)
        await producer.start()
        try:
            async with producer.transaction():
                for value in (b"c1", b"c2", b"c3"):
                    await producer.send_and_wait(stream, value)
            await producer.begin_transaction()
            for value in (b"a1", b"a2"):
                await producer.send_and_wait(stream, value)
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send_and_wait(stream, b"c4")
        finally:
            await producer.stop()

    asyncio.run(run())


def check_commit_and_abort(cluster: DevCluster, stream: str, write: Callable[[str, str, str], None]) -> None:
    with admin(cluster) as c:
        c.create_stream(stream)
    write(cluster.bootstrap_servers, stream, f"{stream}-txn")
    assert read_all(cluster.bootstrap_servers, stream, "read_committed", 4) == [b"c1", b"c2", b"c3", b"c4"]
    assert read_all(cluster.bootstrap_servers, stream, "read_uncommitted", 6) == \
        [b"c1", b"c2", b"c3", b"a1", b"a2", b"c4"]


def test_confluent_kafka_commit_and_abort(cluster: DevCluster) -> None:
    check_commit_and_abort(cluster, "txn-confluent", confluent_transactions)


def test_kafka_python_commit_and_abort(cluster: DevCluster) -> None:
    check_commit_and_abort(cluster, "txn-kafkapython", kafka_python_transactions)


def test_aiokafka_commit_and_abort(cluster: DevCluster) -> None:
    check_commit_and_abort(cluster, "txn-aiokafka", aiokafka_transactions)


def test_an_open_transaction_holds_read_committed_back(cluster: DevCluster) -> None:
    import confluent_kafka

    with admin(cluster) as c:
        c.create_stream("txn-open")
        c.produce("txn-open", make_batch([b"before"]), 10_000, time.monotonic() + DEADLINE_S)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                         "transactional.id": "txn-open-1"})
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    producer.produce("txn-open", b"open")
    producer.flush(DEADLINE_S)
    # The open transaction's record is visible to read_uncommitted only.
    assert read_all(cluster.bootstrap_servers, "txn-open", "read_uncommitted", 2) == [b"before", b"open"]
    assert read_all(cluster.bootstrap_servers, "txn-open", "read_committed", 1) == [b"before"]
    producer.commit_transaction(DEADLINE_S)
    assert read_all(cluster.bootstrap_servers, "txn-open", "read_committed", 2) == [b"before", b"open"]


def test_a_zombie_producer_is_fenced_by_a_new_instance(cluster: DevCluster) -> None:
    import confluent_kafka

    with admin(cluster) as c:
        c.create_stream("txn-zombie")
    config = {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "txn-zombie-1"}
    zombie = confluent_kafka.Producer(config)
    zombie.init_transactions(DEADLINE_S)
    zombie.begin_transaction()
    zombie.produce("txn-zombie", b"zombie")
    zombie.flush(DEADLINE_S)
    successor = confluent_kafka.Producer(config)
    successor.init_transactions(DEADLINE_S)  # aborts the zombie's open transaction and fences it
    try:
        zombie.commit_transaction(DEADLINE_S)
        raised = None
    except confluent_kafka.KafkaException as error:
        raised = error.args[0]
    assert raised is not None and raised.fatal()
    successor.begin_transaction()
    successor.produce("txn-zombie", b"successor")
    successor.commit_transaction(DEADLINE_S)
    assert read_all(cluster.bootstrap_servers, "txn-zombie", "read_committed", 1) == [b"successor"]
    assert read_all(cluster.bootstrap_servers, "txn-zombie", "read_uncommitted", 2) == [b"zombie", b"successor"]


def test_consume_transform_produce_commits_offsets_with_the_output(cluster: DevCluster) -> None:
    import confluent_kafka

    with admin(cluster) as c:
        c.create_stream("ctp-in")
        c.create_stream("ctp-out")
        for value in (b"x", b"y", b"z"):
            c.produce("ctp-in", make_batch([value]), 10_000, time.monotonic() + DEADLINE_S)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "ctp",
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                         "isolation.level": "read_committed"})
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                         "transactional.id": "ctp-1"})
    producer.init_transactions(DEADLINE_S)
    consumer.assign([confluent_kafka.TopicPartition("ctp-in", 0, confluent_kafka.OFFSET_BEGINNING)])
    try:
        taken: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(taken) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                taken.append(message.value())
        taken = taken[:2]
        producer.begin_transaction()
        for value in taken:
            producer.produce("ctp-out", value.upper())
        producer.send_offsets_to_transaction([confluent_kafka.TopicPartition("ctp-in", 0, 2)],
                                             consumer.consumer_group_metadata(), DEADLINE_S)
        # Before the commit the group has no offset; after it, exactly the one sent.
        assert consumer.committed([confluent_kafka.TopicPartition("ctp-in", 0)], 10)[0].offset < 0
        producer.commit_transaction(DEADLINE_S)
        assert consumer.committed([confluent_kafka.TopicPartition("ctp-in", 0)], 10)[0].offset == 2
    finally:
        consumer.close()
    assert read_all(cluster.bootstrap_servers, "ctp-out", "read_committed", 2) == [b"X", b"Y"]


def coordinator(cluster: DevCluster) -> int:
    """The node coordinating transactions (the metadata leader), as FindCoordinator says."""
    from tests.support.cluster import node_address, running_nodes
    from tests.support.kafka import raw_request
    from tests.support.waiting import wait_until
    from vdl_wire import messages as m

    def ask() -> int | None:
        for node_id in running_nodes(cluster):
            try:
                found = raw_request(node_address(cluster, node_id),
                                    m.FindCoordinatorRequest(key="any", key_type=1), 3)
            except OSError:
                continue
            if found.error_code == 0 and found.node_id in running_nodes(cluster):
                return found.node_id
        return None

    return wait_until(ask, 30, "a transaction coordinator")


def test_kill_9_of_the_coordinator_between_transactions(cluster: DevCluster) -> None:
    import confluent_kafka

    with admin(cluster) as c:
        c.create_stream("txn-failover")
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                         "transactional.id": "txn-failover-1"})
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    producer.produce("txn-failover", b"one")
    producer.commit_transaction(DEADLINE_S)
    cluster.kill(coordinator(cluster))
    producer.begin_transaction()
    producer.produce("txn-failover", b"two")
    producer.commit_transaction(60)
    producer.begin_transaction()
    producer.produce("txn-failover", b"three")
    producer.flush(60)
    producer.abort_transaction(60)
    assert read_all(cluster.bootstrap_servers, "txn-failover", "read_committed", 2) == [b"one", b"two"]


def test_kill_9_of_the_coordinator_mid_commit_the_transaction_still_completes(cluster: DevCluster) -> None:
    import threading

    import confluent_kafka

    with admin(cluster) as c:
        c.create_stream("txn-midcommit")
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                         "transactional.id": "txn-midcommit-1", "transaction.timeout.ms": 10_000})
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    for value in (b"m1", b"m2", b"m3"):
        producer.produce("txn-midcommit", value)
    producer.flush(DEADLINE_S)
    target = coordinator(cluster)
    outcome: list[object] = []

    def commit() -> None:
        try:
            producer.commit_transaction(60)
            outcome.append("committed")
        except confluent_kafka.KafkaException as error:
            outcome.append(error.args[0])

    committing = threading.Thread(target=commit)
    committing.start()
    cluster.kill(target)  # while EndTxn is on its way or being decided
    committing.join(90)
    assert outcome, "commit_transaction did not return"
    # Whatever the client heard, the transaction ends whole: committed (the decision was made and
    # the new coordinator finished it) or aborted (not decided: aborted by its timeout), never half.
    committed = read_all(cluster.bootstrap_servers, "txn-midcommit", "read_committed", 3)
    if outcome == ["committed"]:
        assert committed == [b"m1", b"m2", b"m3"]
    else:
        assert committed in ([b"m1", b"m2", b"m3"], [])
    # Nothing stays open: the last stable offset reaches the end (the marker after m1..m3).
    from tests.support.waiting import wait_until

    wait_until(lambda: read_all(cluster.bootstrap_servers, "txn-midcommit", "read_uncommitted", 3)
               == [b"m1", b"m2", b"m3"] and lso(cluster, "txn-midcommit") == 4, 60, "the transaction completes")


def lso(cluster: DevCluster, stream: str) -> int:
    """The stream's last stable offset as its leader answers ListOffsets read_committed (-1: none yet)."""
    from tests.support.cluster import node_address, running_nodes
    from tests.support.kafka import raw_request
    from vdl_wire import messages as m

    request = m.ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=[m.ListOffsetsRequest.ListOffsetsTopic(
        name=stream, partitions=[m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    for node_id in running_nodes(cluster):
        try:
            partition = raw_request(node_address(cluster, node_id), request, 5).topics[0].partitions[0]
        except OSError:
            continue
        if partition.error_code == 0:
            return partition.offset
    return -1


def test_pipelined_produce_v12_to_a_stream_leader_away_from_the_coordinator_keeps_order(cluster: DevCluster) -> None:
    """Transaction version 2 (KIP-890 part 2): a stream leader that is not the coordinator asks it
    to add the stream for a Produce v12; a client's pipelined first batches of a transaction each
    wait for that and must still be appended in the order sent (the Java client failed with
    OutOfOrderSequenceException when a later one overtook an earlier one)."""
    from tests.integration.test_transactions import end_v5, txn_batch
    from tests.support.cluster import node_address
    from tests.support.kafka import client, encode, raw_socket, read_frame
    from vdl_wire import api
    from vdl_wire import messages as m

    coordinator_id = coordinator(cluster)
    with admin(cluster) as c:
        names = [f"tv2-pipe-{i}" for i in range(6)]
        for name in names:
            c.create_stream(name)
    leaders = {name: cluster.leader_of(name, 30) for name in names}
    stream, leader = next((n, lead) for n, lead in leaders.items() if lead not in (None, coordinator_id))
    assert leader is not None
    with client(node_address(cluster, coordinator_id)) as c:
        pid = c.request(m.InitProducerIdRequest(transactional_id="tv2-pipe", transaction_timeout_ms=60_000,
                                                producer_id=-1, producer_epoch=-1), 4).producer_id
    rounds, per_round = 3, 8
    with raw_socket(node_address(cluster, leader), timeout=30) as sock:
        for epoch in range(rounds):
            frames = [encode(m.ProduceRequest(transactional_id="tv2-pipe", acks=-1, timeout_ms=10_000, topic_data=[
                m.ProduceRequest.TopicProduceData(name=stream, partition_data=[m.ProduceRequest.PartitionProduceData(
                    index=0, records=txn_batch([b"%d-%d" % (epoch, i)], pid, epoch, i))])]), 12, i)
                for i in range(per_round)]
            sock.sendall(b"".join(frames))
            answers = [api.decode_response(0, 12, read_frame(sock))[1].responses[0].partition_responses[0]
                       for _ in range(per_round)]
            assert [a.error_code for a in answers] == [0] * per_round, [a.error_message for a in answers]
            with client(node_address(cluster, coordinator_id)) as c:
                assert end_v5(c, "tv2-pipe", pid, epoch, True) == (0, pid, epoch + 1)
    assert read_all(cluster.bootstrap_servers, stream, "read_committed", rounds * per_round) == [
        b"%d-%d" % (epoch, i) for epoch in range(rounds) for i in range(per_round)]


def kafka_python_read(bootstrap: str, stream: str, isolation: str, expected_count: int) -> list[bytes]:
    """Every value of `stream` a kafka-python consumer with `isolation` reads (no group), until it
    holds `expected_count` values and has reached the end offset it answers, or the deadline."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False)
    partition = TopicPartition(stream, 0)
    try:
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                values.extend(record.value for record in records)
            if len(values) >= expected_count and consumer.position(partition) >= \
                    consumer.end_offsets([partition])[partition]:
                break
        return values
    finally:
        consumer.close()


def test_kafka_python_consume_transform_produce_with_read_committed(cluster: DevCluster) -> None:
    """kafka-python on both sides: a read_committed group consumer, a transactional producer
    sending its output and the consumed offsets in one transaction (send_offsets_to_transaction
    with the consumer's group metadata), an aborted attempt; readers with kafka-python see exactly
    the committed records, and the group's offset moves only with the commit."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import CommitFailedError
    from kafka.structs import OffsetAndMetadata

    with admin(cluster) as c:
        c.create_stream("kp-ctp-in")
        c.create_stream("kp-ctp-out")
    bootstrap = cluster.bootstrap_servers
    source = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-ctp-source")
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="kp-ctp", enable_auto_commit=False,
                             auto_offset_reset="earliest", isolation_level="read_committed")
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-ctp-1")
    partition = TopicPartition("kp-ctp-in", 0)
    try:
        # The input: one committed transaction, one aborted, one committed.
        source.init_transactions()
        for values, commit in (([b"x", b"y"], True), ([b"dropped"], False), ([b"z"], True)):
            source.begin_transaction()
            for value in values:
                source.send("kp-ctp-in", value)
            source.flush()
            source.commit_transaction() if commit else source.abort_transaction()
        assert kafka_python_read(bootstrap, "kp-ctp-in", "read_committed", 3) == [b"x", b"y", b"z"]
        assert kafka_python_read(bootstrap, "kp-ctp-in", "read_uncommitted", 4) == [b"x", b"y", b"dropped", b"z"]

        consumer.subscribe(["kp-ctp-in"])
        taken: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(taken) < 3 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                taken.extend((record.offset, record.value) for record in records)
        # read_committed: the aborted record is skipped (its offset, 2, and the markers' are gaps).
        assert [value for _, value in taken] == [b"x", b"y", b"z"], taken
        next_offset = taken[-1][0] + 1
        producer.init_transactions()
        # An attempt that aborts: neither its output nor its offsets count.
        producer.begin_transaction()
        producer.send("kp-ctp-out", b"ABORTED")
        producer.send_offsets_to_transaction({partition: OffsetAndMetadata(next_offset, "", -1)},
                                             consumer.group_metadata())
        producer.flush()  # stored, then aborted (an abort drops records not sent yet)
        producer.abort_transaction()
        assert consumer.committed(partition) is None
        producer.begin_transaction()
        for _, value in taken:
            producer.send("kp-ctp-out", value.upper())
        producer.send_offsets_to_transaction({partition: OffsetAndMetadata(next_offset, "", -1)},
                                             consumer.group_metadata())
        assert consumer.committed(partition) is None  # not before the commit
        producer.commit_transaction()
        assert consumer.committed(partition) == next_offset
        # The consumer leaves the group (as one a rebalance fenced out): its group metadata names
        # a member that is gone, so offsets sent with it are refused (KIP-447, as by Kafka) and
        # the transaction can only abort: a zombie's output and position never commit.
        stale = consumer.group_metadata()
        consumer.close()
        producer.begin_transaction()
        producer.send("kp-ctp-out", b"ZOMBIE")
        producer.flush()
        with pytest.raises(CommitFailedError):
            producer.send_offsets_to_transaction({partition: OffsetAndMetadata(1, "", -1)}, stale)
            producer.commit_transaction()
        producer.abort_transaction()
        checker = KafkaConsumer(bootstrap_servers=bootstrap, group_id="kp-ctp", enable_auto_commit=False)
        assert checker.committed(partition) == next_offset
        checker.close()
    finally:
        for client in (source, producer):
            client.close(timeout=5)
        consumer.close()
    assert kafka_python_read(bootstrap, "kp-ctp-out", "read_committed", 3) == [b"X", b"Y", b"Z"]
    assert kafka_python_read(bootstrap, "kp-ctp-out", "read_uncommitted", 5) == [b"ABORTED", b"X", b"Y", b"Z",
                                                                                 b"ZOMBIE"]


def test_an_abort_pipelined_behind_the_next_transactions_add_follows_it(cluster: DevCluster) -> None:
    """librdkafka's sequence when the next transaction's records time out while its
    AddPartitionsToTxn waits for the previous transaction's markers: the add, then EndTxn(abort),
    on one connection. Kafka handles them in that order (the abort aborts the new transaction);
    the abort used to overtake the waiting add and meet the committed transaction:
    INVALID_TXN_STATE, fatal to librdkafka (the fault campaign's transactions of unknown
    outcome). Each round pipelines both right behind the commit's answer, while its markers are
    being written on the 3 nodes."""
    from tests.support.cluster import node_address
    from tests.support.kafka import encode, raw_socket, read_frame
    from vdl_wire import api
    from vdl_wire import messages as m

    with admin(cluster) as c:
        c.create_stream("txn-pipelined-abort")
    address = node_address(cluster, coordinator(cluster))
    topics = [m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="txn-pipelined-abort", partitions=[0])]

    def add(pid: int, correlation_id: int) -> bytes:
        return encode(m.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="pipelined", v3_and_below_producer_id=pid, v3_and_below_producer_epoch=0,
            v3_and_below_topics=topics), 3, correlation_id)

    def end(pid: int, commit: bool, correlation_id: int) -> bytes:
        return encode(m.EndTxnRequest(transactional_id="pipelined", producer_id=pid, producer_epoch=0,
                                      committed=commit), 3, correlation_id)

    def answer(sock: Any, key: int, version: int) -> Any:
        return api.decode_response(key, version, read_frame(sock))[1]

    with raw_socket(address, timeout=30) as sock:
        sock.sendall(encode(m.InitProducerIdRequest(transactional_id="pipelined", transaction_timeout_ms=60_000,
                                                    producer_id=-1, producer_epoch=-1), 4, 1))
        init = answer(sock, 22, 4)
        assert (init.error_code, init.producer_epoch) == (0, 0)
        pid = init.producer_id
        sock.sendall(add(pid, 2))
        assert [p.partition_error_code for t in answer(sock, 24, 3).results_by_topic_v3_and_below
                for p in t.results_by_partition] == [0]
        for round_ in range(5):
            sock.sendall(end(pid, True, 10 * round_ + 3))
            assert answer(sock, 26, 3).error_code == 0
            sock.sendall(add(pid, 10 * round_ + 4) + end(pid, False, 10 * round_ + 5))  # one write
            added = [p.partition_error_code for t in answer(sock, 24, 3).results_by_topic_v3_and_below
                     for p in t.results_by_partition]
            assert (round_, added, answer(sock, 26, 3).error_code) == (round_, [0], 0)
            sock.sendall(add(pid, 10 * round_ + 6))  # the next round's transaction
            assert [p.partition_error_code for t in answer(sock, 24, 3).results_by_topic_v3_and_below
                    for p in t.results_by_partition] == [0]


def serving_leader(cluster: DevCluster, stream: str, skip: int) -> int | None:
    """The stream's leader as the running nodes but `skip` (stopped) name it."""
    from tests.support.cluster import running_nodes
    from vdl_dev.dev_cluster import fetch_metadata

    for node_id in running_nodes(cluster):
        if node_id == skip:
            continue
        try:
            response = fetch_metadata(node_address_of(cluster, node_id), [stream], 1.0)
        except (OSError, ValueError):
            continue
        for topic in response.topics:
            for partition in topic.partitions or []:
                if topic.error_code == 0 and partition.leader_id >= 0:
                    return int(partition.leader_id)
    return None


def node_address_of(cluster: DevCluster, node_id: int) -> str:
    from tests.support.cluster import node_address

    return node_address(cluster, node_id)


MARKERS_AFTER_ELECTION_S = 3.0  # the stalled commit completes this soon after a new leader is elected


def test_sigstop_of_a_stream_leader_as_a_transaction_commits_its_markers_go_to_the_new_leader(
        cluster: DevCluster) -> None:
    """The leader of one of the transaction's streams (not the coordinator) freezes (SIGSTOP) as
    EndTxn commits: the markers' call to it hangs. They go to the stream's new leader once it is
    elected -- not after the call's 15 s timeout -- so the producer's next transaction (whose
    AddPartitionsToTxn waits for those markers; it writes another stream, so the client's own view
    of the frozen leader plays no part) commits within MARKERS_AFTER_ELECTION_S of the election,
    and read_committed readers see exactly the committed records."""
    import signal

    import confluent_kafka

    from tests.support.waiting import wait_until

    coordinator_id = coordinator(cluster)
    names = [f"txn-frozen-{i}" for i in range(6)]
    with admin(cluster) as c:
        for name in names:
            c.create_stream(name)
    leaders = {name: wait_until(lambda n=name: cluster.leader_of(n), 30, f"a leader of {name}") for name in names}
    stream, frozen = next((n, lead) for n, lead in leaders.items() if lead != coordinator_id)
    other = next(n for n, lead in leaders.items() if lead != frozen)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                         "transactional.id": "txn-frozen-1", "linger.ms": 1})
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    producer.produce(stream, b"one")
    producer.commit_transaction(DEADLINE_S)
    producer.begin_transaction()
    producer.produce(stream, b"two")
    producer.produce(other, b"two")
    producer.flush(DEADLINE_S)
    cluster.stop(frozen, signal.SIGSTOP)
    try:
        frozen_at = time.monotonic()
        producer.commit_transaction(DEADLINE_S)  # decided by the coordinator; the markers to come
        new_leader = wait_until(lambda: (lead := serving_leader(cluster, stream, frozen)) not in (None, frozen)
                                and lead, 30, f"a new leader of {stream}")
        elected_at = time.monotonic()
        producer.begin_transaction()
        producer.produce(other, b"three")
        producer.commit_transaction(DEADLINE_S)
        committed_at = time.monotonic()
        print(f"SIGSTOP of node {frozen} (stream {stream}, new leader {new_leader}): new leader after "
              f"{elected_at - frozen_at:.2f} s, next transaction committed after {committed_at - frozen_at:.2f} s")
        assert committed_at - elected_at <= MARKERS_AFTER_ELECTION_S, (elected_at - frozen_at,
                                                                       committed_at - frozen_at)
        assert read_all(cluster.bootstrap_servers, other, "read_committed", 2) == [b"two", b"three"]
        assert read_all(cluster.bootstrap_servers, stream, "read_committed", 2) == [b"one", b"two"]
    finally:
        cluster.stop(frozen, signal.SIGCONT)
