"""Stored group offsets on one broker, request by request: OffsetCommit (every version),
OffsetFetch, DescribeGroups, ListGroups, OffsetDelete, DeleteGroups, and the error code that
names each wrong request -- standalone commits, a live group's generation checks included."""

from __future__ import annotations

import uuid

import pytest

from tests.support.cluster import BrokerProcess, wait_until
from tests.support.kafka import client, commit_raw, committed_raw, make_batch, metadata_raw, raw_request
from vdl_wire import messages as m
from vdl_wire.errors import ErrorCode

NONE = ErrorCode.NONE


def _stream(broker: BrokerProcess, records: int = 10) -> str:
    name = f"go-{uuid.uuid4().hex[:8]}"
    with client(broker.bootstrap) as c:
        c.create_stream(name)
        c.produce(name, make_batch([f"v{i}".encode() for i in range(records)]))
    return name


@pytest.mark.parametrize("version", range(0, 9))
def test_standalone_commit_and_fetch_every_version(module_broker: BrokerProcess, version: int) -> None:
    stream = _stream(module_broker)
    group = f"standalone-{version}"
    epoch = 3 if version >= 6 else -1  # message defs: CommittedLeaderEpoch from v6
    assert commit_raw(module_broker.bootstrap, group, {stream: 7}, version=version, leader_epoch=epoch,
                      metadata="why") == {stream: NONE}
    error, offsets = committed_raw(module_broker.bootstrap, group, [stream])
    assert error == NONE and offsets == {stream: (7, epoch, "why", NONE)}
    # v1 asks by name; v2+ may ask for everything (null topics).
    assert committed_raw(module_broker.bootstrap, group, [stream], version=1)[1] == {stream: (7, -1, "why", NONE)}
    assert committed_raw(module_broker.bootstrap, group, None, version=5)[1] == {stream: (7, epoch, "why", NONE)}


def test_fetch_without_a_commit_answers_minus_one(module_broker: BrokerProcess) -> None:
    stream = _stream(module_broker)
    assert committed_raw(module_broker.bootstrap, "never-committed", [stream]) == (NONE, {stream: (-1, -1, "", NONE)})
    assert committed_raw(module_broker.bootstrap, "never-committed", None) == (NONE, {})


def test_wrong_commits_get_the_error_naming_them(module_broker: BrokerProcess) -> None:
    address = module_broker.bootstrap
    stream = _stream(module_broker)
    assert commit_raw(address, "", {stream: 1}) == {stream: ErrorCode.INVALID_GROUP_ID}
    assert commit_raw(address, "g-wrong", {"no-such-stream": 1}) == {"no-such-stream": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert commit_raw(address, "g-wrong", {stream: 1}, partition=1) == {stream: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert commit_raw(address, "g-wrong", {stream: 1}, metadata="x" * 5000) == {stream: ErrorCode.OFFSET_METADATA_TOO_LARGE}
    # A generation no coordinator knows: the group is gone (or never was).
    assert commit_raw(address, "g-wrong", {stream: 1}, generation=4, member_id="ghost") == {stream: ErrorCode.ILLEGAL_GENERATION}
    assert committed_raw(address, "g-wrong", [stream])[1] == {stream: (-1, -1, "", NONE)}
    assert committed_raw(address, "", [stream])[0] == ErrorCode.INVALID_GROUP_ID


def _describe(address: str, group: str) -> object:
    return raw_request(address, m.DescribeGroupsRequest(groups=[group])).groups[0]


def _list(address: str, version: int = 4) -> dict[str, tuple[str, str]]:
    response = raw_request(address, m.ListGroupsRequest(), version)
    assert response.error_code == NONE
    return {g.group_id: (g.protocol_type, g.group_state) for g in response.groups}


def _delete_groups(address: str, *groups: str) -> dict[str, int]:
    response = raw_request(address, m.DeleteGroupsRequest(groups_names=list(groups)))
    return {r.group_id: r.error_code for r in response.results}


def _offset_delete(address: str, group: str, stream: str) -> tuple[int, int | None]:
    topic = m.OffsetDeleteRequest.OffsetDeleteRequestTopic(
        name=stream, partitions=[m.OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])
    response = raw_request(address, m.OffsetDeleteRequest(group_id=group, topics=[topic]))
    partition = response.topics[0].partitions[0].error_code if response.topics else None
    return response.error_code, partition


def test_offset_only_group_describe_list_delete(module_broker: BrokerProcess) -> None:
    address = module_broker.bootstrap
    a, b = _stream(module_broker), _stream(module_broker)
    group = f"offsets-only-{uuid.uuid4().hex[:6]}"
    assert commit_raw(address, group, {a: 1, b: 2}) == {a: NONE, b: NONE}
    described = _describe(address, group)
    assert (described.error_code, described.group_state, described.members) == (NONE, "Empty", [])
    assert _describe(address, "nobody-knows").group_state == "Dead"
    assert _list(address)[group] == ("", "Empty")
    assert group in _list(address, version=0)
    assert _offset_delete(address, group, a) == (NONE, NONE)
    assert committed_raw(address, group, None)[1] == {b: (2, -1, "", NONE)}
    assert _offset_delete(address, "no-such-group", a) == (ErrorCode.GROUP_ID_NOT_FOUND, None)
    assert _delete_groups(address, group, "no-such-group", "") == {
        group: NONE, "no-such-group": ErrorCode.GROUP_ID_NOT_FOUND, "": ErrorCode.INVALID_GROUP_ID}
    assert group not in _list(address) and committed_raw(address, group, None)[1] == {}


def test_live_group_generation_checks_and_refusals(module_broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, TopicPartition

    address = module_broker.bootstrap
    stream, other = _stream(module_broker), _stream(module_broker)
    group = f"live-{uuid.uuid4().hex[:6]}"
    consumer = KafkaConsumer(stream, bootstrap_servers=address, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=200)
    try:
        values: list[bytes] = []
        wait_until(lambda: values.extend(r.value for rs in consumer.poll(timeout_ms=100).values() for r in rs)
                   or len(values) == 10, 30, "the consumer to read its stream")
        consumer.commit()
        assert consumer.committed(TopicPartition(stream, 0)) == 10
        # kafka-python commits the leader epoch of the last record it read: the stream's term.
        [partition] = metadata_raw(address, [stream]).topics[0].partitions
        assert partition.leader_epoch >= 1
        assert committed_raw(address, group, [stream])[1] == {stream: (10, partition.leader_epoch, "", NONE)}
        described = _describe(address, group)
        assert (described.group_state, described.protocol_type, described.protocol_data) == ("Stable", "consumer", "range")
        [member] = described.members
        generation = consumer._coordinator._generation.generation_id
        assert _list(address)[group] == ("consumer", "Stable")
        # Commits from outside the current generation, and standalone ones, are refused.
        assert commit_raw(address, group, {stream: 3}, generation=generation - 1, member_id=member.member_id) == {
            stream: ErrorCode.ILLEGAL_GENERATION}
        assert commit_raw(address, group, {stream: 3}, generation=generation, member_id="intruder") == {
            stream: ErrorCode.UNKNOWN_MEMBER_ID}
        assert commit_raw(address, group, {stream: 3}) == {stream: ErrorCode.UNKNOWN_MEMBER_ID}
        assert commit_raw(address, group, {stream: 4}, generation=generation, member_id=member.member_id) == {stream: NONE}
        assert _delete_groups(address, group) == {group: ErrorCode.NON_EMPTY_GROUP}
        assert _offset_delete(address, group, stream) == (NONE, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
        assert commit_raw(address, group, {other: 5}, generation=generation, member_id=member.member_id) == {other: NONE}
        assert _offset_delete(address, group, other) == (NONE, NONE)
        assert committed_raw(address, group, None)[1] == {stream: (4, -1, "", NONE)}
    finally:
        consumer.close()
    wait_until(lambda: _describe(address, group).group_state == "Empty", 10, "the group to empty")
    assert _delete_groups(address, group) == {group: NONE}


def test_offsets_of_groups_without_members_expire(broker_factory) -> None:
    from kafka import KafkaConsumer

    broker = broker_factory(offsets_retention_minutes=0, offsets_retention_check_ms=100)
    address = broker.bootstrap
    stream = _stream(broker)
    consumer = KafkaConsumer(stream, bootstrap_servers=address, group_id="with-members", auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=200)
    try:
        values: list[bytes] = []
        wait_until(lambda: values.extend(r.value for rs in consumer.poll(timeout_ms=100).values() for r in rs)
                   or len(values) == 10, 30, "the consumer to read its stream")
        consumer.commit()
        assert commit_raw(address, "standalone", {stream: 3}) == {stream: NONE}
        # A retention pass expired the standalone group's offsets, not those of the group with a member.
        wait_until(lambda: committed_raw(address, "standalone", [stream])[1][stream][0] == -1, 10,
                   "the standalone group's offsets to expire")
        assert committed_raw(address, "with-members", [stream])[1][stream][0] == 10
    finally:
        consumer.close()
    wait_until(lambda: committed_raw(address, "with-members", [stream])[1][stream][0] == -1, 10,
               "the emptied group's offsets to expire")
