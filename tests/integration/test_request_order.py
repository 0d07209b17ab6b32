"""A connection's requests take effect in the order they were sent (Kafka protocol guide: "the
server guarantees that on a single TCP connection, requests will be processed in the order they
are sent"): a request pipelined right behind a write sees that write, as on Apache Kafka, whose
broker handles one request of a connection at a time. Clients rely on it: librdkafka's admin
sends DeleteRecords and a ListOffsets behind it on the leader's connection (confluent-kafka's own
integration test, test_delete_records, checks the answer), and an asynchronous commit followed by
committed() goes to the coordinator on one connection."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, DeletedRecords, NewTopic, OffsetSpec

from tests.support.cluster import BrokerProcess
from tests.support.kafka import (
    LATEST,
    client,
    encode,
    make_batch,
    offset_commit_request,
    raw_socket,
    read_frame,
)
from vdl_client.connection import api_spec
from vdl_dev.dev_cluster import DevCluster
from vdl_wire import api
from vdl_wire import messages as m

ROUNDS = 10


@pytest.fixture(params=["1-node", "3-node"])
def bootstrap(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "1-node":
        broker: BrokerProcess = request.getfixturevalue("module_broker")
        yield broker.bootstrap
    else:
        cluster: DevCluster = request.getfixturevalue("cluster")
        yield cluster.bootstrap_servers


def new_stream(admin: AdminClient, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, 1, -1)])[name].result(30)
    return name


def test_list_offsets_pipelined_behind_delete_records_sees_the_new_start(bootstrap: str) -> None:
    """confluent-kafka's test_delete_records: delete_records() then list_offsets(earliest) without
    waiting for the first; ListOffsets used to answer before the deletion committed (0, not 2)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    stream = new_stream(admin, "order-delete")
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in (b"m0", b"m1", b"m2", b"m3"):
        producer.produce(stream, value)
    assert producer.flush(30) == 0
    partition = TopicPartition(stream, 0)
    starts = []
    for offset in (1, 2, 3):
        deleted = admin.delete_records([TopicPartition(stream, 0, offset)])
        listed = admin.list_offsets({partition: OffsetSpec.earliest()})
        result = deleted[TopicPartition(stream, 0, offset)].result(30)
        assert isinstance(result, DeletedRecords)
        starts.append((result.low_watermark, listed[partition].result(30).offset))
    assert starts == [(1, 1), (2, 2), (3, 3)]


def test_committed_behind_an_asynchronous_commit_sees_it(bootstrap: str) -> None:
    """commit(asynchronous=True) then committed(): both go to the coordinator on one connection,
    so the OffsetFetch answers the offset just committed (it used to answer the one before)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    stream = new_stream(admin, "order-commit")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"order-{stream}",
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(stream, 0, 0)], asynchronous=False)  # the coordinator is known
        seen = []
        for offset in range(1, ROUNDS + 1):
            consumer.commit(offsets=[TopicPartition(stream, 0, offset)], asynchronous=True)
            seen.append(consumer.committed([TopicPartition(stream, 0)], timeout=30)[0].offset)
    finally:
        consumer.close()
    assert seen == list(range(1, ROUNDS + 1))


def test_pipelined_reads_see_the_writes_sent_before_them(module_broker: BrokerProcess) -> None:
    """On one socket, in one write: Produce (acks=all), ListOffsets(latest), OffsetCommit,
    OffsetFetch. Each read answers what the writes before it did."""
    with client(module_broker.bootstrap) as c:
        c.create_stream("order-raw")
    produce = m.ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[m.ProduceRequest.TopicProduceData(
        name="order-raw", partition_data=[m.ProduceRequest.PartitionProduceData(
            index=0, records=make_batch([b"a", b"b", b"c"]))])])
    latest = m.ListOffsetsRequest(replica_id=-1, topics=[m.ListOffsetsRequest.ListOffsetsTopic(
        name="order-raw", partitions=[m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0,
                                                                                timestamp=LATEST)])])
    commit = offset_commit_request("order-raw-group", {"order-raw": 3})
    fetch = m.OffsetFetchRequest(groups=[m.OffsetFetchRequest.OffsetFetchRequestGroup(
        group_id="order-raw-group",
        topics=[m.OffsetFetchRequest.OffsetFetchRequestTopics(name="order-raw", partition_indexes=[0])])])
    requests = [produce, latest, commit, fetch]
    with raw_socket(module_broker.bootstrap, timeout=30) as sock:
        sock.sendall(b"".join(encode(request, correlation_id=i) for i, request in enumerate(requests)))
        answers = []
        for i, request in enumerate(requests):
            spec = api_spec(type(request))
            correlation_id, response = api.decode_response(spec.api_key, spec.max_version, read_frame(sock))
            assert correlation_id == i
            answers.append(response)
    produced = answers[0].responses[0].partition_responses[0]
    assert (produced.error_code, produced.base_offset) == (0, 0)
    listed = answers[1].topics[0].partitions[0]
    assert (listed.error_code, listed.offset) == (0, 3)
    assert answers[2].topics[0].partitions[0].error_code == 0
    fetched = answers[3].groups[0].topics[0].partitions[0]
    assert (fetched.error_code, fetched.committed_offset) == (0, 3)
