"""Broker semantics through the wire: idempotent produce, long-poll fetch, down-conversion,
ListOffsets, CreateTopics validation, Metadata auto-creation."""

from __future__ import annotations

import select
import socket
import time

from tests.support.cluster import BrokerProcess, wait_until
from tests.support.kafka import (
    client,
    encode,
    make_batch,
    numbered_batch,
    produce_partition,
    raw_request,
    raw_socket,
    read_frame,
)
from vdl_wire import api
from vdl_wire import messages as m
from vdl_wire.errors import ErrorCode
from vdl_wire.records.message_set import iter_message_set
from vdl_wire.records.record_batch import iter_batches, read_records


def test_idempotent_retry_is_acked_with_original_offset_and_gaps_refused(module_broker: BrokerProcess) -> None:
    with client(module_broker.bootstrap) as c:
        c.create_stream("idem")
        init = c.request(m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1), 1)
        pid, epoch = init.producer_id, init.producer_epoch
        assert init.error_code == 0 and pid >= 0
        c.produce("idem", make_batch([b"pre"]))
        first = make_batch([b"a", b"b", b"c"], pid, epoch, 0)
        assert c.produce("idem", first) == 1
        assert c.produce("idem", first) == 1  # a retry: same offset, not stored twice
        assert c.produce("idem", make_batch([b"d"], pid, epoch, 3)) == 4
        gap = produce_partition(c, "idem", make_batch([b"z"], pid, epoch, 9))
        assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert c.list_offset("idem", -1) == 5
        # A transactional id keeps its producer id; each new instance gets the next epoch.
        one = c.request(m.InitProducerIdRequest(transactional_id="writer-1", transaction_timeout_ms=60000), 1)
        two = c.request(m.InitProducerIdRequest(transactional_id="writer-1", transaction_timeout_ms=60000), 1)
        assert (one.error_code, two.error_code) == (0, 0)
        assert one.producer_id == two.producer_id and (one.producer_epoch, two.producer_epoch) == (0, 1)


def test_idempotence_state_survives_restart(broker: BrokerProcess) -> None:
    with client(broker.bootstrap) as c:
        c.create_stream("idem2")
        batch = make_batch([b"a", b"b"], 77, 0, 0)
        assert c.produce("idem2", batch) == 0
    broker.restart()
    with client(broker.bootstrap) as c:
        assert c.produce("idem2", batch) == 0  # rebuilt from the log: still a duplicate
        assert c.produce("idem2", make_batch([b"c"], 77, 0, 2)) == 2


def test_fetch_long_poll_wakes_on_append(module_broker: BrokerProcess) -> None:
    with client(module_broker.bootstrap) as c:
        c.create_stream("poll")
    partition = m.FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
    long_poll = m.FetchRequest(replica_id=-1, max_wait_ms=10_000, min_bytes=1, max_bytes=1 << 20,
                               topics=[m.FetchRequest.FetchTopic(topic="poll", partitions=[partition])])
    with raw_socket(module_broker.bootstrap, timeout=15) as sock:
        sock.sendall(encode(long_poll, 11, correlation_id=3))
        started = time.monotonic()
        # A fence instead of a guessed delay: the fetch was on the wire before this round trip
        # began, so the broker has read it (and parked it: the stream is empty) by the time it
        # answers; the append comes only after that.
        raw_request(module_broker.bootstrap, m.ApiVersionsRequest(), 0)
        assert not readable_now(sock), "the fetch was answered before any data existed"
        with client(module_broker.bootstrap) as writer:
            writer.produce("poll", make_batch([b"wake"]))
        correlation_id, response = api.decode_response(m.FetchRequest.DECL.api_key, 11, read_frame(sock))
        elapsed = time.monotonic() - started
    part = response.responses[0].partitions[0]
    assert correlation_id == 3 and part.error_code == 0
    assert [r.value for r in read_records(bytes(part.records))] == [b"wake"]
    assert elapsed < 5  # woken by the append, not by max_wait_ms
    with client(module_broker.bootstrap) as c:
        started = time.monotonic()
        _, records = c.fetch("poll", 1, max_wait_ms=300)  # nothing comes: waits max_wait_ms
        assert not records and time.monotonic() - started >= 0.25


def test_a_short_request_right_after_a_long_produce_is_answered_at_once(module_broker: BrokerProcess) -> None:
    """The broker asks the kernel to wake it once a long request's body is in (SO_RCVLOWAT), and
    at the first byte of the next one once it is whole: a mark left at the long body's rest would
    hold a short request after it (a producer's next small batch, a Metadata) until that many
    more bytes came, which a client waiting for its answer never sends."""
    values = [bytes([65 + i]) * 300_000 for i in range(3)]  # a ~900 KB request: read in several parts
    with client(module_broker.bootstrap, timeout=5.0) as c:
        c.create_stream("long-then-short")
        for round_number in range(3):
            assert c.produce("long-then-short", make_batch(values)) == 4 * round_number
            assert c.request(m.ApiVersionsRequest(), 0).error_code == ErrorCode.NONE
            assert c.produce("long-then-short", make_batch([b"small"])) == 4 * round_number + 3
        _, records = c.fetch("long-then-short", 0)
    assert [r.value for _, batch in iter_batches(bytes(records)) for r in read_records(batch)] == (
        values + [b"small"]) * 3


def test_api_versions_refuses_software_names_kafka_refuses(module_broker: BrokerProcess) -> None:
    """KIP-511: from v3 the client's software name and version are letters and digits with '-'
    and '.' inside; anything else is INVALID_REQUEST listing no APIs, on a connection that stays
    usable (as Kafka's broker answers)."""
    supported = [(k.api_key, k.min_version, k.max_version) for k in api.api_versions_response().api_keys]
    with raw_socket(module_broker.bootstrap) as sock:
        for correlation, (name, version) in enumerate((("", "1.0"), ("vdl", ""), ("-vdl", "1"), ("vdl", "1.0-"),
                                                       ("my client", "1"), ("vdl", "1_0"), ("vdl", "ü"))):
            sock.sendall(encode(m.ApiVersionsRequest(client_software_name=name, client_software_version=version),
                                3, correlation_id=correlation))
            got, refused = api.decode_response(m.ApiVersionsRequest.DECL.api_key, 3, read_frame(sock))
            assert (got, refused.error_code, refused.api_keys) == (correlation, ErrorCode.INVALID_REQUEST, []), name
        for correlation, (name, version) in enumerate((("apache-kafka-java", "4.4.0"), ("librdkafka", "v2.6.1"),
                                                       ("a", "0"), ("kgo", "1.18.0-rc.1")), start=10):
            sock.sendall(encode(m.ApiVersionsRequest(client_software_name=name, client_software_version=version),
                                3, correlation_id=correlation))
            got, answer = api.decode_response(m.ApiVersionsRequest.DECL.api_key, 3, read_frame(sock))
            assert (got, answer.error_code) == (correlation, ErrorCode.NONE), name
            assert [(k.api_key, k.min_version, k.max_version) for k in answer.api_keys] == supported
        # Before v3 the request has no names: nothing to refuse.
        sock.sendall(encode(m.ApiVersionsRequest(), 2, correlation_id=20))
        got, old = api.decode_response(m.ApiVersionsRequest.DECL.api_key, 2, read_frame(sock))
        assert (got, old.error_code, len(old.api_keys)) == (20, ErrorCode.NONE, len(supported))


def readable_now(sock: socket.socket) -> bool:
    """Whether `sock` has something to read right now (an answer, or the peer's close)."""
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)


def test_fetch_errors_and_down_conversion(module_broker: BrokerProcess) -> None:
    with client(module_broker.bootstrap) as c:
        c.create_stream("old")
        c.produce("old", make_batch([b"v0", b"v1"], keys=[b"k0", b"k1"]))
        for version, magic in ((0, 0), (3, 1)):
            request = m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
                m.FetchRequest.FetchTopic(topic="old", partitions=[
                    m.FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
            part = c.request(request, version).responses[0].partitions[0]
            entries = list(iter_message_set(bytes(part.records)))
            records = [r for e in entries for r in e.records]
            assert [e.magic for e in entries] == [magic] * len(entries)
            assert [(r.offset, r.key, r.value) for r in records] == [(0, b"k0", b"v0"), (1, b"k1", b"v1")]
        request = m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
            m.FetchRequest.FetchTopic(topic="old", partitions=[
                m.FetchRequest.FetchPartition(partition=0, fetch_offset=99, partition_max_bytes=1 << 20)])])
        response = c.request(request, 11)
        assert response.session_id == 0
        assert response.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_a_full_fetch_naming_a_session_is_answered_in_full(module_broker: BrokerProcess) -> None:
    """KIP-227: epoch 0 or -1 makes a fetch full whatever session id it names (kafka-go's Client
    sends id -1, epoch -1); only an incremental fetch (epoch above 0) needs the session VDL
    never creates."""
    with client(module_broker.bootstrap) as c:
        c.create_stream("sessions")
        c.produce("sessions", make_batch([b"s0", b"s1"]))
        for version in (7, 11, 12):
            for session_id, epoch in ((-1, -1), (0, -1), (0, 0), (7, 0), (7, -1)):
                request = m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                         session_id=session_id, session_epoch=epoch, topics=[
                    m.FetchRequest.FetchTopic(topic="sessions", partitions=[
                        m.FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
                response = c.request(request, version)
                assert (response.error_code, response.session_id) == (ErrorCode.NONE, 0), (version, session_id, epoch)
                [topic] = response.responses
                [part] = topic.partitions
                assert (topic.topic, part.error_code, part.high_watermark) == ("sessions", ErrorCode.NONE, 2)
                assert [r.value for r in read_records(bytes(part.records))] == [b"s0", b"s1"]
            incremental = m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                         session_id=7, session_epoch=1, topics=[])
            response = c.request(incremental, version)
            assert (response.error_code, response.responses) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, [])


def test_list_offsets(module_broker: BrokerProcess) -> None:
    with client(module_broker.bootstrap) as c:
        c.create_stream("times")
        assert c.list_offset("times", -2) == 0 and c.list_offset("times", -1) == 0
        c.produce("times", make_batch([b"a", b"b"]))
        stamp = int(time.time() * 1000) + 1
        # the second batch must carry a later timestamp than `stamp`: wait for the clock, not a guess
        wait_until(lambda: int(time.time() * 1000) >= stamp, timeout=5, message="the clock to pass the stamp")
        c.produce("times", make_batch([b"c"]))
        assert c.list_offset("times", -1) == 3
        assert c.list_offset("times", stamp) == 2
        assert c.list_offset("times", stamp + 3_600_000) == -1


def test_list_offsets_by_time_finds_the_record_inside_a_batch(module_broker: BrokerProcess) -> None:
    """Kafka answers the first record at or after the time, not the first batch: a batch of ten
    records stamped 1000..1009 ms answers 1005 ms with offset 5 (it answered the batch, 0)."""
    with client(module_broker.bootstrap) as c:
        c.create_stream("stamped")
        c.produce("stamped", numbered_batch(10))
        c.produce("stamped", numbered_batch(2))  # 1000, 1001 again, at offsets 10, 11
        request = m.ListOffsetsRequest(replica_id=-1, topics=[m.ListOffsetsRequest.ListOffsetsTopic(
            name="stamped", partitions=[m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=t)
                                        for t in (999, 1000, 1005, 1009, 1010)])])
        answers = [(p.offset, p.timestamp) for p in c.request(request, 1).topics[0].partitions]
        assert answers == [(0, 1000), (0, 1000), (5, 1005), (9, 1009), (-1, -1)]


def test_create_topics_validation(module_broker: BrokerProcess) -> None:
    Topic = m.CreateTopicsRequest.CreatableTopic
    with client(module_broker.bootstrap) as c:
        response = c.request(m.CreateTopicsRequest(topics=[
            Topic(name="three", num_partitions=3, replication_factor=1),
            Topic(name="rf3", num_partitions=1, replication_factor=3),
            Topic(name="bad/name", num_partitions=1, replication_factor=1),
            Topic(name="only-checked", num_partitions=-1, replication_factor=-1),
        ], timeout_ms=1000, validate_only=True), 4)
        results = {t.name: (t.error_code, t.error_message) for t in response.topics}
        assert results["three"] == (ErrorCode.INVALID_PARTITIONS, "a VDL log stream has exactly one partition")
        assert results["rf3"][0] == ErrorCode.INVALID_REPLICATION_FACTOR
        assert results["bad/name"][0] == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert results["only-checked"][0] == 0
        assert c.metadata(["only-checked"]).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        c.create_stream("dup")
        again = c.request(m.CreateTopicsRequest(topics=[Topic(name="dup", num_partitions=1,
                                                                      replication_factor=1)], timeout_ms=1000), 1)
        assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_metadata_auto_create(broker_factory) -> None:
    auto = broker_factory(auto_create_streams=True)
    with client(auto.bootstrap) as c:
        request = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="made")],
                                    allow_auto_topic_creation=False)
        assert c.request(request, 8).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        request.allow_auto_topic_creation = True
        # The request that creates the stream answers once its first leader is known (Kafka
        # answers it LEADER_NOT_AVAILABLE, with the leader already chosen for the next ask).
        [topic] = c.request(request, 8).topics
        assert (topic.error_code, topic.name) == (ErrorCode.NONE, "made")
        assert [(p.error_code, p.leader_id, p.replica_nodes) for p in topic.partitions] == [(ErrorCode.NONE, 1, [1])]
        assert c.metadata(None).topics[0].name == "made"
