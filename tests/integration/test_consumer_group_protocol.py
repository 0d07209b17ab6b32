"""KIP-848's consumer group protocol on the wire, one node: ConsumerGroupHeartbeat joins,
fences, revokes before reassigning, leaves and expires members; OffsetCommit v9 and OffsetFetch
v9 check the member epoch; ConsumerGroupDescribe, ListGroups v5 and DescribeGroups show the
group; a group id is either a classic group or a consumer group while it has members.
(Kafka's Java client runs the same protocol in test_java_client.py.)"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support.cluster import start_cluster
from tests.support.kafka import commit_raw, create_topic_raw, raw_request
from tests.support.waiting import wait_until
from vdl_dev.dev_cluster import DevCluster
from vdl_wire import messages as m
from vdl_wire.errors import ErrorCode

SESSION_MS = 3_000
SETTINGS = {"group_consumer_session_timeout_ms": SESSION_MS, "group_consumer_heartbeat_interval_ms": 400,
            "group_initial_rebalance_delay_ms": 0}


@pytest.fixture(scope="module")
def node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cluster: DevCluster = start_cluster(tmp_path_factory.mktemp("kip848"), nodes=1, settings=SETTINGS,
                                        register=lambda c: request.addfinalizer(c.kill_all))
    yield cluster.nodes[1].client_address


def streams(address: str, prefix: str, count: int) -> list[str]:
    names = [f"{prefix}-{i}-{uuid.uuid4().hex[:6]}" for i in range(count)]
    for name in names:
        assert create_topic_raw(address, name, 1)[0] == 0
    return names


def topic_ids(address: str, names: list[str]) -> dict[str, uuid.UUID]:
    metadata = raw_request(address, m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=n)
                                                              for n in names]))
    return {t.name: t.topic_id for t in metadata.topics}


def heartbeat(address: str, group: str, member: str, epoch: int, subscribed: list[str] | None = None,
              owned: list[uuid.UUID] | None = None, **fields: object) -> object:
    owned_field = None if owned is None else [
        m.ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=t, partitions=[0]) for t in owned]
    request = m.ConsumerGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch,
                                              rebalance_timeout_ms=30_000 if epoch == 0 else -1,
                                              subscribed_topic_names=subscribed, topic_partitions=owned_field,
                                              **fields)
    return raw_request(address, request, version=1)


def assigned(response: object) -> list[uuid.UUID] | None:
    assignment = response.assignment  # type: ignore[attr-defined]
    if assignment is None:
        return None
    return sorted((t.topic_id for t in assignment.topic_partitions), key=str)


def ids(mapping: dict[str, uuid.UUID], *names: str) -> list[uuid.UUID]:
    return sorted((mapping[n] for n in names), key=str)


def summary(response: object) -> tuple[int, int, list[uuid.UUID] | None]:
    return response.error_code, response.member_epoch, assigned(response)  # type: ignore[attr-defined]


def test_join_share_revoke_leave_and_describe(node: str) -> None:
    names = streams(node, "kip848", 2)
    tid = topic_ids(node, names)
    group = f"g-{uuid.uuid4().hex[:6]}"
    first = heartbeat(node, group, "member-a", 0, subscribed=names)
    assert (first.error_code, first.member_id, first.member_epoch, first.heartbeat_interval_ms, assigned(first)) \
        == (0, "member-a", 1, 400, ids(tid, *names))
    # A second member: its stream is still the first's, so it gets nothing yet at epoch 2.
    assert summary(heartbeat(node, group, "member-b", 0, subscribed=names)) == (0, 2, [])
    # The first is told to give one stream up, at its own epoch.
    revoke = heartbeat(node, group, "member-a", 1, owned=ids(tid, *names))
    assert revoke.error_code == 0 and revoke.member_epoch == 1 and len(assigned(revoke) or []) == 1
    kept = (assigned(revoke) or [])[0]
    lost = next(t for t in tid.values() if t != kept)
    described = raw_request(node, m.ConsumerGroupDescribeRequest(group_ids=[group]), version=1).groups[0]
    assert (described.error_code, described.group_state, described.group_epoch, described.assignment_epoch,
            described.assignor_name) == (0, "Reconciling", 2, 2, "uniform")
    assert sorted((x.member_id, x.member_epoch, [t.topic_id for t in x.assignment.topic_partitions],
                   [t.topic_id for t in x.target_assignment.topic_partitions], x.member_type)
                  for x in described.members) == [("member-a", 1, [kept], [kept], 1),
                                                  ("member-b", 2, [], [lost], 1)]
    # Once the first says it let go, it is at epoch 2 and the second gets the stream.
    assert summary(heartbeat(node, group, "member-a", 1, owned=[kept])) == (0, 2, None)
    assert summary(heartbeat(node, group, "member-b", 2, owned=[])) == (0, 2, [lost])
    listed = raw_request(node, m.ListGroupsRequest(types_filter=["consumer"]), version=5).groups
    assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed if g.group_id == group] == [
        (group, "consumer", "Stable", "consumer")]
    assert [g.group_id for g in raw_request(node, m.ListGroupsRequest(types_filter=["classic"]), version=5).groups
            if g.group_id == group] == []
    classic_view = raw_request(node, m.DescribeGroupsRequest(groups=[group]), version=5).groups[0]
    assert (classic_view.error_code, classic_view.group_state, classic_view.protocol_type,
            classic_view.protocol_data, sorted(x.member_id for x in classic_view.members)) == (
        0, "Stable", "consumer", "uniform", ["member-a", "member-b"])
    # The second leaves: the first gets everything at epoch 3; then it leaves too.
    assert summary(heartbeat(node, group, "member-b", -1)) == (0, -1, None)
    assert summary(heartbeat(node, group, "member-a", 2, owned=[kept])) == (0, 3, ids(tid, *names))
    assert summary(heartbeat(node, group, "member-a", -1)) == (0, -1, None)
    gone = raw_request(node, m.ConsumerGroupDescribeRequest(group_ids=[group]), version=1).groups[0]
    assert gone.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_fencing_commits_and_session_expiry(node: str) -> None:
    (name,) = streams(node, "kip848-fence", 1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    assert summary(heartbeat(node, group, "m", 0, subscribed=[name]))[:2] == (0, 1)
    assert heartbeat(node, group, "m", 7, owned=[]).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert heartbeat(node, group, "stranger", 1, owned=[]).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    # OffsetCommit v9 at the member epoch; below it stale, above it fenced; v8 says generation.
    assert commit_raw(node, group, {name: 5}, version=9, generation=1, member_id="m") == {name: 0}
    assert commit_raw(node, group, {name: 6}, version=9, generation=0, member_id="m") == {
        name: ErrorCode.STALE_MEMBER_EPOCH}
    assert commit_raw(node, group, {name: 6}, version=9, generation=2, member_id="m") == {
        name: ErrorCode.FENCED_MEMBER_EPOCH}
    assert commit_raw(node, group, {name: 6}, version=8, generation=0, member_id="m") == {
        name: ErrorCode.ILLEGAL_GENERATION}
    assert commit_raw(node, group, {name: 6}, version=9) == {name: ErrorCode.UNKNOWN_MEMBER_ID}
    fetch = m.OffsetFetchRequest(groups=[m.OffsetFetchRequest.OffsetFetchRequestGroup(
        group_id=group, member_id="m", member_epoch=0, topics=None)])
    assert raw_request(node, fetch, version=9).groups[0].error_code == ErrorCode.STALE_MEMBER_EPOCH
    fetch.groups[0].member_epoch = 1
    answer = raw_request(node, fetch, version=9).groups[0]
    assert [(t.name, p.committed_offset) for t in answer.topics for p in t.partitions] == [(name, 5)]
    # Silent for a session timeout: removed; the group, Empty, stays a consumer group while its
    # offsets stay (as in Kafka), at the group epoch the removal took it to.
    wait_until(lambda: raw_request(node, m.ConsumerGroupDescribeRequest(group_ids=[group]), version=1)
               .groups[0].group_state == "Empty", 3 * SESSION_MS / 1000, "the member's session to expire")
    described = raw_request(node, m.ConsumerGroupDescribeRequest(group_ids=[group]), version=1).groups[0]
    assert (described.error_code, described.group_epoch, described.assignment_epoch, described.assignor_name,
            described.members) == (0, 2, 2, "uniform", [])
    assert [(g.protocol_type, g.group_state, g.group_type)
            for g in raw_request(node, m.ListGroupsRequest(), version=5).groups if g.group_id == group] == [
        ("consumer", "Empty", "consumer")]
    assert heartbeat(node, group, "m", 1, owned=[]).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    fetch.groups[0].member_id, fetch.groups[0].member_epoch = None, -1
    answer = raw_request(node, fetch, version=9).groups[0]
    assert [(t.name, p.committed_offset) for t in answer.topics for p in t.partitions] == [(name, 5)]


def test_a_group_known_by_offsets_alone_is_a_classic_group(node: str) -> None:
    """Offsets committed without a generation (an admin client's, Spark's) make a classic group,
    Empty, as Kafka's OffsetCommit does: ConsumerGroupDescribe says it is not a consumer group."""
    (name,) = streams(node, "kip848-offsets", 1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    assert commit_raw(node, group, {name: 4}, version=9) == {name: 0}
    described = raw_request(node, m.ConsumerGroupDescribeRequest(group_ids=[group, "nobody"]), version=1).groups
    assert [(d.group_id, d.error_code, d.error_message) for d in described] == [
        (group, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group} is not a consumer group."),
        ("nobody", ErrorCode.GROUP_ID_NOT_FOUND, "Group nobody not found.")]
    classic = raw_request(node, m.DescribeGroupsRequest(groups=[group]), version=5).groups[0]
    assert (classic.error_code, classic.group_state, classic.protocol_type, classic.members) == (0, "Empty", "", [])
    assert [(g.protocol_type, g.group_state, g.group_type)
            for g in raw_request(node, m.ListGroupsRequest(), version=5).groups if g.group_id == group] == [
        ("", "Empty", "classic")]


def test_a_group_id_is_one_kind_while_it_has_members(node: str) -> None:
    (name,) = streams(node, "kip848-kind", 1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    assert heartbeat(node, group, "m", 0, subscribed=[name]).error_code == 0
    join = m.JoinGroupRequest(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
                              protocol_type="consumer",
                              protocols=[m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])
    assert raw_request(node, join).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert heartbeat(node, group, "m", -1).error_code == 0
    # Empty again: a classic member may take the id over; then the new protocol may not.
    joined = raw_request(node, join, version=3)
    assert joined.error_code == 0
    refused = heartbeat(node, group, "m2", 0, subscribed=[name])
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group} is not a consumer group.")
    assert raw_request(node, m.LeaveGroupRequest(group_id=group, member_id=joined.member_id),
                       version=0).error_code == 0
    assert heartbeat(node, group, "m2", 0, subscribed=[name]).error_code == 0


def test_a_confluent_static_member_restart_keeps_its_stream(node: str) -> None:
    """librdkafka with `group.protocol=consumer` and `group.instance.id`: a static member that
    closes leaves with epoch -2 and keeps its stream, which the other member is not given; its
    restart under a new member id takes the stream back without either member's assignment
    changing (KIP-345 under KIP-848). The session timeout still removes one that stays away."""
    import confluent_kafka
    from confluent_kafka.admin import AdminClient

    names = streams(node, "static848", 2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    events: dict[str, list[tuple[str, list[str]]]] = {}

    def consumer(name: str, instance: str) -> confluent_kafka.Consumer:
        events[name] = []

        def on_assign(c: confluent_kafka.Consumer, parts: list[confluent_kafka.TopicPartition]) -> None:
            events[name].append(("assign", sorted(p.topic for p in parts)))
            c.incremental_assign(parts)

        def on_revoke(c: confluent_kafka.Consumer, parts: list[confluent_kafka.TopicPartition]) -> None:
            events[name].append(("revoke", sorted(p.topic for p in parts)))
            c.incremental_unassign(parts)
        c = confluent_kafka.Consumer({"bootstrap.servers": node, "group.id": group, "group.protocol": "consumer",
                                      "group.instance.id": instance, "enable.auto.commit": False})
        c.subscribe(names, on_assign=on_assign, on_revoke=on_revoke)
        return c

    def held(*consumers: confluent_kafka.Consumer) -> list[list[str]]:
        for c in consumers:
            c.poll(0.05)
        return [sorted(p.topic for p in c.assignment()) for c in consumers]

    a, b = consumer("a", "instance-a"), consumer("b", "instance-b")
    wait_until(lambda: all(len(s) == 1 for s in held(a, b)), 20, lambda: f"one stream each: {events}")
    a_stream, b_stream = held(a, b)[0][0], held(a, b)[1][0]
    assert {a_stream, b_stream} == set(names)
    settled = list(events["a"])  # its first assignment, and a revoke if it joined first
    b.close()  # static: leaves with epoch -2

    admin = AdminClient({"bootstrap.servers": node})
    away = admin.describe_consumer_groups([group])[group].result(timeout=20)
    assert sorted((x.group_instance_id, [p.topic for p in x.assignment.topic_partitions]) for x in away.members) == [
        ("instance-a", [a_stream]), ("instance-b", [b_stream])]

    restarted = consumer("b2", "instance-b")
    wait_until(lambda: held(a, restarted) == [[a_stream], [b_stream]], 20, lambda: f"b back: {events}")
    assert events["a"] == settled  # nothing moved while b was away and back
    assert events["b2"] == [("assign", [b_stream])]
    back = admin.describe_consumer_groups([group])[group].result(timeout=20)
    assert sorted(x.group_instance_id for x in back.members) == ["instance-a", "instance-b"]

    restarted.close()
    # Gone for longer than its session: removed, and the other member takes its stream.
    wait_until(lambda: held(a) == [sorted(names)], SESSION_MS / 1000 + 10, lambda: f"a takes over: {events}")
    a.close()


def offset_delete(address: str, group: str, *names: str) -> dict[str, int]:
    """OffsetDelete of partition 0 of each stream: stream -> its partition's error code."""
    topics = [m.OffsetDeleteRequest.OffsetDeleteRequestTopic(
        name=n, partitions=[m.OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)]) for n in names]
    response = raw_request(address, m.OffsetDeleteRequest(group_id=group, topics=topics))
    assert response.error_code == 0
    return {t.name: t.partitions[0].error_code for t in response.topics}


def test_offset_delete_refuses_streams_members_subscribe_to(node: str) -> None:
    """As Kafka's ConsumerGroup.isSubscribedToTopic: the offsets of a stream some member of a
    KIP-848 group subscribes to (by name or by regular expression) are in use,
    GROUP_SUBSCRIBED_TO_TOPIC; those of the group's other streams are deleted; once the members
    left, every stream's are (kafka-consumer-groups --delete-offsets)."""
    by_name, by_regex, other = streams(node, "kip848-offdel", 3)
    group = f"g-{uuid.uuid4().hex[:6]}"
    assert summary(heartbeat(node, group, "a", 0, subscribed=[by_name]))[:2] == (0, 1)
    joined = heartbeat(node, group, "b", 0, subscribed_topic_regex=f"{by_regex}|no-such-stream")
    assert (joined.error_code, joined.member_epoch) == (0, 2)
    assert commit_raw(node, group, {by_name: 1, by_regex: 2, other: 3}, version=9, generation=1,
                      member_id="a") == {by_name: 0, by_regex: 0, other: 0}
    assert offset_delete(node, group, by_name, by_regex, other) == {
        by_name: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, by_regex: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, other: 0}
    fetch = m.OffsetFetchRequest(groups=[m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)])
    answer = raw_request(node, fetch).groups[0]
    assert sorted((t.name, p.committed_offset) for t in answer.topics for p in t.partitions) == sorted(
        [(by_name, 1), (by_regex, 2)])
    assert heartbeat(node, group, "a", -1).error_code == 0
    assert heartbeat(node, group, "b", -1).error_code == 0
    assert offset_delete(node, group, by_name, by_regex) == {by_name: 0, by_regex: 0}
    assert raw_request(node, fetch).groups[0].topics == []


GROUP_RESOURCE = 32  # Kafka's ConfigResource.Type.GROUP
SET, DELETE = 0, 1


def alter_group(address: str, group: str, changes: list[tuple[str, int, str | None]],
                validate_only: bool = False) -> tuple[int, str | None]:
    resource = m.IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=GROUP_RESOURCE, resource_name=group,
        configs=[m.IncrementalAlterConfigsRequest.AlterableConfig(name=n, config_operation=op, value=v)
                 for n, op, v in changes])
    result = raw_request(address, m.IncrementalAlterConfigsRequest(resources=[resource],
                                                                   validate_only=validate_only), 1).responses[0]
    return result.error_code, result.error_message


def group_configs(address: str, group: str) -> list[tuple[str, str, int, bool, list[tuple[str, str, int]]]]:
    resource = m.DescribeConfigsRequest.DescribeConfigsResource(resource_type=GROUP_RESOURCE, resource_name=group)
    result = raw_request(address, m.DescribeConfigsRequest(resources=[resource], include_synonyms=True), 4).results[0]
    assert (result.error_code, result.error_message) == (0, None)
    return [(c.name, c.value, c.config_source, c.read_only, [(s.name, s.value, s.source) for s in c.synonyms])
            for c in result.configs]


def test_a_groups_own_configs_set_its_heartbeat_interval_and_session(node: str) -> None:
    """Kafka 4's group configs: consumer.heartbeat.interval.ms and consumer.session.timeout.ms
    set for one group (IncrementalAlterConfigs, AlterConfigs) are what its members get, described
    as the group's own, listed by ListConfigResources; the other groups keep the node's."""
    (name,) = streams(node, "kip848-configs", 1)
    own, other = f"g-own-{uuid.uuid4().hex[:6]}", f"g-other-{uuid.uuid4().hex[:6]}"
    session, heartbeat_ms = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
    node_synonyms = {session: [(f"group.{session}", str(SESSION_MS), 4)],
                     heartbeat_ms: [(f"group.{heartbeat_ms}", "400", 4)]}
    assert group_configs(node, own) == [(session, str(SESSION_MS), 4, False, node_synonyms[session]),
                                        (heartbeat_ms, "400", 4, False, node_synonyms[heartbeat_ms])]
    # Set before the group exists, as Kafka allows; validate_only changes nothing.
    assert alter_group(node, own, [(heartbeat_ms, SET, "250")], validate_only=True) == (0, None)
    assert group_configs(node, own)[1][1] == "400"
    assert alter_group(node, own, [(session, SET, "60000"), (heartbeat_ms, SET, "250")]) == (0, None)
    assert group_configs(node, own) == [
        (session, "60000", 8, False, [(session, "60000", 8), *node_synonyms[session]]),
        (heartbeat_ms, "250", 8, False, [(heartbeat_ms, "250", 8), *node_synonyms[heartbeat_ms]])]
    listed = raw_request(node, m.ListConfigResourcesRequest(resource_types=[GROUP_RESOURCE]), 1)
    assert own in [r.resource_name for r in listed.config_resources]
    assert other not in [r.resource_name for r in listed.config_resources]

    joined = heartbeat(node, own, "m-own", 0, subscribed=[name])
    assert (joined.error_code, joined.heartbeat_interval_ms) == (0, 250)
    joined_other = heartbeat(node, other, "m-other", 0, subscribed=[name])
    assert (joined_other.error_code, joined_other.heartbeat_interval_ms) == (0, 400)
    # Both silent: the other group's member goes after the node's 3 s session (the group, without
    # offsets, with it); the own group's, whose session is 60 s, stays.
    wait_until(lambda: raw_request(node, m.ConsumerGroupDescribeRequest(group_ids=[other]), version=1)
               .groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND, 3 * SESSION_MS / 1000,
               "the other group's session to expire")
    described = raw_request(node, m.ConsumerGroupDescribeRequest(group_ids=[own]), version=1).groups[0]
    assert [member.member_id for member in described.members] == ["m-own"]

    # Refusals name what is accepted, and leave the group's configs as they were.
    for changes, message in (
            ([(heartbeat_ms, SET, "60000")],
             "consumer.heartbeat.interval.ms (60000) must be less than consumer.session.timeout.ms (60000)"),
            ([(session, SET, "10")], "consumer.session.timeout.ms: '10' is not an integer in [1000, 1800000] "
                                     "(the node's group_min_session_timeout_ms and group_max_session_timeout_ms)"),
            ([("share.record.lock.duration.ms", SET, "1000")],
             "share.record.lock.duration.ms: a share group config (KIP-932): VDL has no share groups (the group "
             "configs: consumer.session.timeout.ms, consumer.heartbeat.interval.ms)")):
        assert alter_group(node, own, changes) == (ErrorCode.INVALID_CONFIG, message)
    assert alter_group(node, "", [(session, SET, "60000")]) == (ErrorCode.INVALID_REQUEST,
                                                                "Group name must not be empty")
    # Deleted, a config is the node's again, from the member's next heartbeat.
    assert alter_group(node, own, [(heartbeat_ms, DELETE, None)]) == (0, None)
    assert heartbeat(node, own, "m-own", 1, owned=[]).heartbeat_interval_ms == 400
    # AlterConfigs gives the whole config: what it does not list returns to the node's.
    legacy = m.AlterConfigsRequest(resources=[m.AlterConfigsRequest.AlterConfigsResource(
        resource_type=GROUP_RESOURCE, resource_name=own,
        configs=[m.AlterConfigsRequest.AlterableConfig(name=heartbeat_ms, value="300")])])
    assert [(r.error_code, r.error_message) for r in raw_request(node, legacy, 2).responses] == [(0, None)]
    assert [(c[0], c[1], c[2]) for c in group_configs(node, own)] == [(session, str(SESSION_MS), 4),
                                                                        (heartbeat_ms, "300", 8)]
    assert heartbeat(node, own, "m-own", 1, owned=[]).heartbeat_interval_ms == 300
    legacy.resources[0].configs = []
    assert [(r.error_code, r.error_message) for r in raw_request(node, legacy, 2).responses] == [(0, None)]
    listed = raw_request(node, m.ListConfigResourcesRequest(resource_types=[GROUP_RESOURCE]), 1)
    assert own not in [r.resource_name for r in listed.config_resources]
