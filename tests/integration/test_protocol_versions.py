"""The newer request versions on one real broker: what each adds is answered as Kafka answers
it (topic ids, batched coordinator and offset lookups, deletes by id, the largest-timestamp and
tiered-storage ListOffsets sentinels, KIP-1043's DescribeGroups errors, KIP-559's SyncGroup
protocol checks, KIP-860's replication-factor guard), and kafka-python pinned to a broker
version (no ApiVersions probe) works against it."""

from __future__ import annotations

import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic

from tests.support.cluster import BrokerProcess
from tests.support.kafka import (
    client,
    commit_raw,
    committed_raw,
    coordinator_raw,
    create_topic_raw,
    make_batch,
    raw_request,
)
from tests.support.waiting import wait_until
from vdl_client.requests import produce_request
from vdl_wire import messages as m
from vdl_wire.errors import ErrorCode
from vdl_wire.records.record_batch import RecordBatchBuilder

ZERO_ID = uuid.UUID(int=0)


def _stream(broker: BrokerProcess, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    assert create_topic_raw(broker.bootstrap, name)[0] == 0
    return name


def _metadata(broker: BrokerProcess, topics: list[m.MetadataRequest.MetadataRequestTopic] | None,
              version: int | None = None) -> m.MetadataResponse:
    return raw_request(broker.bootstrap, m.MetadataRequest(topics=topics), version)


def test_topic_ids_in_metadata_create_and_delete(module_broker: BrokerProcess) -> None:
    name = f"ids-{uuid.uuid4().hex[:6]}"
    topic = m.CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=-1, configs=[
        m.CreateTopicsRequest.CreatableTopicConfig(name="retention.ms", value="86400000")])
    created = raw_request(module_broker.bootstrap, m.CreateTopicsRequest(topics=[topic], timeout_ms=30_000),
                          timeout=35.0).topics[0]
    # CreateTopics v5+ answer what was created (KIP-525), v7 the topic id (KIP-516).
    assert (created.error_code, created.num_partitions, created.replication_factor) == (0, 1, 1)
    assert created.topic_id != ZERO_ID
    configs = {c.name: (c.value, c.config_source) for c in created.configs}
    assert configs["retention.ms"] == ("86400000", 1)  # DYNAMIC_TOPIC_CONFIG
    assert configs["max.message.bytes"][1] in (4, 5)  # the node's setting or the default

    by_name = _metadata(module_broker, [m.MetadataRequest.MetadataRequestTopic(name=name)]).topics
    assert [(t.name, t.topic_id, t.error_code) for t in by_name] == [(name, created.topic_id, 0)]
    # Metadata v12 asks by id alone; an unknown id is UNKNOWN_TOPIC_ID with a null name.
    unknown = uuid.uuid4()
    by_id = _metadata(module_broker, [m.MetadataRequest.MetadataRequestTopic(topic_id=created.topic_id, name=None),
                                      m.MetadataRequest.MetadataRequestTopic(topic_id=unknown, name=None)]).topics
    assert [(t.name, t.topic_id, t.error_code) for t in by_id] == [
        (name, created.topic_id, 0), (None, unknown, ErrorCode.UNKNOWN_TOPIC_ID)]
    # Metadata v9 and older carry no id.
    assert _metadata(module_broker, [m.MetadataRequest.MetadataRequestTopic(name=name)], 9).topics[0].topic_id == ZERO_ID

    # DeleteTopics v6 deletes by id; the id of a deleted stream is unknown afterwards, and a
    # stream created again under the same name has a new id.
    deleted = raw_request(module_broker.bootstrap, m.DeleteTopicsRequest(
        topics=[m.DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=created.topic_id)], timeout_ms=30_000),
        timeout=35.0).responses
    assert [(d.name, d.topic_id, d.error_code) for d in deleted] == [(name, created.topic_id, 0)]
    again = raw_request(module_broker.bootstrap, m.DeleteTopicsRequest(
        topics=[m.DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=created.topic_id)], timeout_ms=30_000),
        timeout=35.0).responses
    assert [(d.topic_id, d.error_code) for d in again] == [(created.topic_id, ErrorCode.UNKNOWN_TOPIC_ID)]
    assert create_topic_raw(module_broker.bootstrap, name)[0] == 0
    recreated = _metadata(module_broker, [m.MetadataRequest.MetadataRequestTopic(name=name)]).topics[0]
    assert recreated.topic_id not in (ZERO_ID, created.topic_id)
    both = raw_request(module_broker.bootstrap, m.DeleteTopicsRequest(
        topics=[m.DeleteTopicsRequest.DeleteTopicState(name=name, topic_id=recreated.topic_id)], timeout_ms=30_000),
        timeout=35.0).responses
    assert [d.error_code for d in both] == [ErrorCode.INVALID_REQUEST]


def test_batched_coordinator_and_offset_lookups(module_broker: BrokerProcess) -> None:
    stream = _stream(module_broker, "batched")
    assert commit_raw(module_broker.bootstrap, "g-one", {stream: 5}) == {stream: 0}
    found = raw_request(module_broker.bootstrap, m.FindCoordinatorRequest(
        key_type=0, coordinator_keys=["g-one", "g-two"])).coordinators
    assert [(c.key, c.node_id, c.error_code) for c in found] == [("g-one", 1, 0), ("g-two", 1, 0)]
    share = raw_request(module_broker.bootstrap, m.FindCoordinatorRequest(key_type=2, coordinator_keys=["s"]), 6)
    assert share.coordinators[0].error_code == ErrorCode.INVALID_REQUEST
    assert coordinator_raw(module_broker.bootstrap, "g-one") == (0, 1)
    # OffsetFetch v8: several groups, each with its own answer (an unknown group has none).
    request = m.OffsetFetchRequest(groups=[
        m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g-one", topics=None),
        m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g-two", topics=[
            m.OffsetFetchRequest.OffsetFetchRequestTopics(name=stream, partition_indexes=[0])]),
        m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id="", topics=None)])
    groups = raw_request(module_broker.bootstrap, request, 8).groups
    answered = {g.group_id: (g.error_code, [(t.name, p.committed_offset) for t in g.topics for p in t.partitions])
                for g in groups}
    assert answered == {"g-one": (0, [(stream, 5)]), "g-two": (0, [(stream, -1)]),
                        "": (ErrorCode.INVALID_GROUP_ID, [])}
    for version in (1, 7, 9):  # the single-group shape and the batched one give the same offsets
        assert committed_raw(module_broker.bootstrap, "g-one", [stream], version)[1][stream][0] == 5


def _produce(broker: BrokerProcess, stream: str, timestamps: list[int]) -> None:
    builder = RecordBatchBuilder()
    for i, timestamp in enumerate(timestamps):
        builder.append(timestamp, None, f"v{i}".encode())
    response = raw_request(broker.bootstrap, produce_request(stream, builder.build(), 5000))
    assert response.responses[0].partition_responses[0].error_code == 0


def _list_offset(broker: BrokerProcess, stream: str, timestamp: int, version: int) -> tuple[int, int, int]:
    partition = m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp)
    request = m.ListOffsetsRequest(replica_id=-1, topics=[m.ListOffsetsRequest.ListOffsetsTopic(
        name=stream, partitions=[partition])], timeout_ms=5000)
    answer = raw_request(broker.bootstrap, request, version).topics[0].partitions[0]
    return answer.error_code, answer.offset, answer.timestamp


def test_list_offsets_sentinels(module_broker: BrokerProcess) -> None:
    stream = _stream(module_broker, "sentinels")
    assert _list_offset(module_broker, stream, -3, 7) == (0, -1, -1)  # empty: no record has a timestamp
    _produce(module_broker, stream, [1_000, 5_000, 3_000])
    _produce(module_broker, stream, [5_000, 2_000])  # the largest timestamp again: the first record wins
    assert _list_offset(module_broker, stream, -3, 7) == (0, 1, 5_000)  # KIP-734
    assert _list_offset(module_broker, stream, -4, 8) == (0, 0, -1)  # earliest local: the log start
    assert _list_offset(module_broker, stream, -5, 9) == (0, -1, -1)  # no tiered storage: no offset
    assert _list_offset(module_broker, stream, -6, 11) == (0, -1, -1)
    assert _list_offset(module_broker, stream, -1, 11) == (0, 5, -1)
    assert _list_offset(module_broker, stream, 4_000, 11) == (0, 1, 5_000)
    # A sentinel needs the version that introduced it; an unknown negative one is refused.
    assert _list_offset(module_broker, stream, -3, 6)[0] == ErrorCode.UNSUPPORTED_VERSION
    assert _list_offset(module_broker, stream, -6, 10)[0] == ErrorCode.UNSUPPORTED_VERSION
    assert _list_offset(module_broker, stream, -7, 11)[0] == ErrorCode.INVALID_REQUEST


def test_describe_groups_v6_and_sync_group_protocol_checks(module_broker: BrokerProcess) -> None:
    stream = _stream(module_broker, "kip1043")
    assert commit_raw(module_broker.bootstrap, "with-offsets", {stream: 1}) == {stream: 0}
    described = raw_request(module_broker.bootstrap, m.DescribeGroupsRequest(groups=["with-offsets", "absent"])).groups
    assert [(g.group_id, g.error_code, g.error_message, g.group_state) for g in described] == [
        ("with-offsets", 0, None, "Empty"),
        ("absent", ErrorCode.GROUP_ID_NOT_FOUND, "Group absent not found.", "Dead")]
    old = raw_request(module_broker.bootstrap, m.DescribeGroupsRequest(groups=["absent"]), 5).groups
    assert [(g.error_code, g.group_state) for g in old] == [(0, "Dead")]

    with client(module_broker.bootstrap) as c:
        join = m.JoinGroupRequest(group_id="kip559", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                  member_id="", protocol_type="consumer",
                                  protocols=[m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])
        member = c.request(join, 9).member_id  # MEMBER_ID_REQUIRED first (KIP-394)
        join.member_id = member
        joined = c.request(join, 9)
        assert (joined.error_code, joined.protocol_type, joined.protocol_name) == (0, "consumer", "range")
        sync = m.SyncGroupRequest(group_id="kip559", generation_id=joined.generation_id, member_id=member,
                                  protocol_type="consumer", protocol_name="roundrobin", assignments=[])
        assert c.request(sync, 5).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        sync.protocol_name = "range"
        sync.assignments = [m.SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=b"a")]
        synced = c.request(sync, 5)
        assert (synced.error_code, synced.protocol_type, synced.protocol_name, bytes(synced.assignment)) == \
            (0, "consumer", "range", b"a")
        listed = c.request(m.ListGroupsRequest(types_filter=["classic"]), 5).groups
        assert ("kip559", "Stable", "classic") in [(g.group_id, g.group_state, g.group_type) for g in listed]
        assert c.request(m.ListGroupsRequest(types_filter=["consumer"]), 5).groups == []
        leave = m.LeaveGroupRequest(group_id="kip559", members=[
            m.LeaveGroupRequest.MemberIdentity(member_id=member, reason="the test is done")])
        assert [x.error_code for x in c.request(leave, 5).members] == [0]


def test_reassignment_may_forbid_a_replication_factor_change(module_broker: BrokerProcess) -> None:
    stream = _stream(module_broker, "kip860")

    def move(replicas: list[int], allow: bool) -> tuple[int, int]:
        request = m.AlterPartitionReassignmentsRequest(allow_replication_factor_change=allow, topics=[
            m.AlterPartitionReassignmentsRequest.ReassignableTopic(name=stream, partitions=[
                m.AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition(
                    partition_index=0, replicas=replicas)])])
        answer = raw_request(module_broker.bootstrap, request, 1)
        return answer.error_code, answer.responses[0].partitions[0].error_code

    assert move([1, 2], allow=False) == (0, ErrorCode.INVALID_REPLICATION_FACTOR)
    assert move([1], allow=False) == (0, 0)  # the same single replica: nothing to do


@pytest.mark.parametrize("api_version", [(2, 4), (3, 0), (3, 9), (4, 0)])
def test_kafka_python_pinned_to_a_broker_version(module_broker: BrokerProcess, api_version: tuple[int, int]) -> None:
    """kafka-python with api_version set sends the versions that Kafka release serves without
    asking ApiVersions first: metadata, admin, a group consumer and its commits all work."""
    stream = f"pinned-{'-'.join(map(str, api_version))}-{uuid.uuid4().hex[:4]}"
    admin = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap, api_version=api_version)
    try:
        admin.create_topics([NewTopic(stream, 1, 1)])
        assert stream in admin.list_topics()
        with client(module_broker.bootstrap) as c:
            assert c.produce(stream, make_batch([b"a", b"b", b"c"])) == 0
        group = f"g-{stream}"
        consumer = KafkaConsumer(stream, bootstrap_servers=module_broker.bootstrap, api_version=api_version,
                                 group_id=group, auto_offset_reset="earliest", enable_auto_commit=False)
        try:
            seen: list[bytes] = []
            wait_until(lambda: seen.extend(r.value for rs in consumer.poll(200).values() for r in rs) or len(seen) >= 3,
                       30, "the pinned consumer to read 3 records")
            assert seen == [b"a", b"b", b"c"]
            consumer.commit()
            assert consumer.committed(TopicPartition(stream, 0)) == 3
            assert consumer.end_offsets([TopicPartition(stream, 0)]) == {TopicPartition(stream, 0): 3}
        finally:
            consumer.close()
        assert group in [g["group_id"] for g in admin.list_groups()]
        assert admin.list_group_offsets({group: None})[group][TopicPartition(stream, 0)].offset == 3
        admin.delete_topics([stream])
    finally:
        admin.close()
