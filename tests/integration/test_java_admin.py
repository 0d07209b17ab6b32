"""Apache Kafka's Java AdminClient (kafka-clients 4.4) against VDL: every Admin API a Kafka
operator uses, on one node and on a 3-node cluster, each over PLAINTEXT and over SASL_SSL
(SCRAM-SHA-512, ACL authorizer), with exact answers. One JVM (JavaClients) and the clusters
are shared by the whole module (tests/integration/conftest.py): a JVM start takes seconds here.

Kafka 4.x removed Admin.alterConfigs (the non-incremental AlterConfigs, key 33), so that API is
driven here by confluent-kafka's AdminClient.alter_configs, which still sends it.

The Java consumer's epoch validation (KIP-320) runs across a leader change on the 3-node cluster:
Metadata reports the stream's Raft term as its leader epoch, so after the leader dies the
consumer checks its position with OffsetForLeaderEpoch at the new leader and reads on, nothing
lost or duplicated."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.support.java_client import JavaClients, JavaError
from tests.support.java_targets import JavaTarget
from tests.support.kafka import list_offset_raw, metadata_raw
from tests.support.metrics import scrape
from tests.support.waiting import wait_until
from vdl_dev.dev_cluster import DevCluster

pytestmark = pytest.mark.usefixtures("admins")

ALL_CLUSTER_OPERATIONS = ["ALTER", "ALTER_CONFIGS", "CLUSTER_ACTION", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS",
                          "IDEMPOTENT_WRITE"]


def topic(target: JavaTarget, name: str) -> str:
    return f"{target.name}-{name}"


def create(java: JavaClients, target: JavaTarget, name: str) -> str:
    result = java.call("create_topics", name=target.name, topics=[{"name": name}])
    assert list(result) == [name] and "ok" in result[name], result
    return result[name]["ok"]["topic_id"]


def send(java: JavaClients, target: JavaTarget, stream: str, values: list[str]) -> list[dict]:
    producer = f"{target.name}-producer"
    java.producer(producer, target.bootstrap, target.security, acks="all")
    try:
        return java.send(producer, stream, values)
    finally:
        java.call("close", name=producer)


# ---- topics ---------------------------------------------------------------------------------------


def test_create_describe_list_delete_topics(java: JavaClients, target: JavaTarget) -> None:
    name = topic(target, "topics")
    result = java.call("create_topics", name=target.name, topics=[{"name": name}])
    replication = len(target.cluster.node_ids())
    topic_id = result[name]["ok"]["topic_id"]
    assert result == {name: {"ok": {"topic_id": topic_id, "partitions": 1, "replication": replication}}}
    again = java.call("create_topics", name=target.name, topics=[{"name": name}])
    assert again[name]["error"] == "TopicExistsException"
    two = java.call("create_topics", name=target.name, topics=[{"name": topic(target, "two"), "partitions": 2}])
    assert two[topic(target, "two")]["error"] == "InvalidPartitionsException"
    assert name in java.call("list_topics", name=target.name)
    described = java.call("describe_topics", name=target.name, topics=[name])[name]["ok"]
    [partition] = described["partitions"]
    assert (described["name"], described["topic_id"], described["internal"]) == (name, topic_id, False)
    assert partition["partition"] == 0 and partition["leader"] in target.cluster.node_ids()
    assert sorted(partition["replicas"]) == target.cluster.node_ids()
    assert java.call("delete_topics", name=target.name, topics=[name]) == {name: {"ok": None}}
    wait_until(lambda: name not in java.call("list_topics", name=target.name), timeout=20,
               message=f"{name} still listed")
    missing = java.call("describe_topics", name=target.name, topics=[name])[name]
    assert missing["error"] == "UnknownTopicOrPartitionException"


def test_describe_topics_by_id(java: JavaClients, target: JavaTarget) -> None:
    # Admin.describeTopics(TopicCollection.ofTopicIds) sends Metadata v12+ topics with an id and
    # the name "" (the Java default, not null): asked for by id, as Kafka answers them.
    name = topic(target, "by-id")
    topic_id = create(java, target, name)
    unknown = "AAAAAAAAAAAAAAAAAAAAAQ"  # Uuid.ONE_UUID: never a topic's id
    described = java.call("describe_topics", name=target.name, topic_ids=[topic_id, unknown])
    assert described[unknown]["error"] == "UnknownTopicIdException"
    by_id = described[topic_id]["ok"]
    assert (by_id["name"], by_id["topic_id"], by_id["internal"]) == (name, topic_id, False)
    assert sorted(by_id["partitions"][0]["replicas"]) == target.cluster.node_ids()


def test_create_partitions_is_refused(java: JavaClients, target: JavaTarget) -> None:
    name = topic(target, "partitions")
    create(java, target, name)
    result = java.call("create_partitions", name=target.name, counts={name: 3, topic(target, "absent"): 2})
    assert result == {
        name: {"error": "InvalidPartitionsException",
               "message": f"VDL streams have exactly one partition (each is one Raft group): stream '{name}' has 1 "
                          f"and cannot have 3"},
        topic(target, "absent"): {"error": "UnknownTopicOrPartitionException",
                                  "message": f"unknown stream '{topic(target, 'absent')}'"}}


# ---- cluster --------------------------------------------------------------------------------------


def test_describe_cluster(java: JavaClients, target: JavaTarget) -> None:
    metadata = metadata_raw(target.plain, [])
    described = java.call("describe_cluster", name=target.name, authorized_operations=True)
    assert described == {
        "cluster_id": metadata.cluster_id, "controller": metadata.controller_id,
        "authorized_operations": ALL_CLUSTER_OPERATIONS,
        "nodes": [{"id": n, "host": host, "port": port, "rack": None} for n, host, port in target.addresses()]}
    assert java.call("describe_cluster", name=target.name)["authorized_operations"] is None


def test_describe_log_dirs(java: JavaClients, target: JavaTarget) -> None:
    name = topic(target, "log-dirs")
    create(java, target, name)
    send(java, target, name, ["a", "b"])
    brokers = target.cluster.node_ids()
    described = java.call("describe_log_dirs", name=target.name, brokers=brokers)
    assert sorted(described) == [str(n) for n in brokers]
    for node_id in brokers:
        [(directory, info)] = described[str(node_id)].items()
        assert Path(directory) == Path(target.cluster.nodes[node_id].config.data_dir).resolve()
        assert info["error"] is None and info["total_bytes"] > 0 and 0 < info["usable_bytes"] <= info["total_bytes"]
        wait_until(lambda n=node_id, d=directory: java.call("describe_log_dirs", name=target.name, brokers=[n])[
            str(n)][d]["replicas"].get(name, 0) > 0, timeout=20, message=f"node {node_id} has no bytes of {name}")


def test_elect_leaders_and_reassignments(java: JavaClients, target: JavaTarget) -> None:
    name = topic(target, "leaders")
    create(java, target, name)
    result = java.call("elect_leaders", name=target.name, topics=[name])
    # the stream's first leader is its preferred replica already, or becomes it now
    assert result in ({name: None}, {name: "ElectionNotNeededException"})
    unclean = java.call("elect_leaders", name=target.name, topics=[name], type="UNCLEAN")
    assert unclean == {name: "ElectionNotNeededException"}  # a leader exists: as Kafka for a live leader
    replicas = java.call("describe_topics", name=target.name, topics=[name])[name]["ok"]["partitions"][0]["replicas"]
    moved = java.call("alter_partition_reassignments", name=target.name, moves={name: replicas})
    assert moved == {name: {"ok": None}}
    wait_until(lambda: java.call("list_partition_reassignments", name=target.name) == {}, timeout=30,
               message="a reassignment to the same replicas still listed")


# ---- records and offsets ------------------------------------------------------------------------


def test_delete_records_and_list_offsets(java: JavaClients, target: JavaTarget) -> None:
    name = topic(target, "records")
    create(java, target, name)
    sent = send(java, target, name, [f"v{i}" for i in range(10)])
    assert [s["offset"] for s in sent] == list(range(10))
    assert java.call("delete_records", name=target.name, before={name: 4}) == {name: {"ok": 4}}
    offsets = {spec: java.call("list_offsets", name=target.name, specs={name: spec})[name]["ok"]["offset"]
               for spec in ("earliest", "latest", "earliest_local")}
    assert offsets == {"earliest": 4, "latest": 10, "earliest_local": 4}
    too_far = java.call("delete_records", name=target.name, before={name: 11})[name]
    assert too_far["error"] == "OffsetOutOfRangeException"
    assert java.call("delete_records", name=target.name, before={name: 2}) == {name: {"ok": 4}}  # never back
    assert java.call("delete_records", name=target.name, before={name: 10}) == {name: {"ok": 10}}
    assert java.call("list_offsets", name=target.name, specs={name: "earliest"})[name]["ok"]["offset"] == 10


# ---- configs ------------------------------------------------------------------------------------


def own_configs(java: JavaClients, target: JavaTarget, name: str) -> dict[str, str]:
    described = java.call("describe_configs", name=target.name, resources=[["TOPIC", name]])[name]["ok"]
    return {key: entry["value"] for key, entry in described.items() if entry["source"] == "DYNAMIC_TOPIC_CONFIG"}


def wait_configs(java: JavaClients, target: JavaTarget, name: str, expected: dict[str, str]) -> None:
    """The stream's own configs as DescribeConfigs answers them: any node answers, and a node
    other than the metadata leader applies a committed change a moment later."""
    wait_until(lambda: own_configs(java, target, name) == expected, timeout=10,
               message=lambda: f"{name}: {own_configs(java, target, name)}, expected {expected}")


def test_describe_and_incremental_alter_configs(java: JavaClients, target: JavaTarget) -> None:
    name = topic(target, "configs")
    create(java, target, name)
    described = java.call("describe_configs", name=target.name, resources=[["TOPIC", name]])[name]["ok"]
    assert described["retention.ms"]["source"] == "DEFAULT_CONFIG" and not described["retention.ms"]["read_only"]
    java.call("incremental_alter_configs", name=target.name, type="TOPIC", resource=name,
              set={"retention.ms": "3600000", "segment.bytes": "1048576"})
    wait_configs(java, target, name, {"retention.ms": "3600000", "segment.bytes": "1048576"})
    java.call("incremental_alter_configs", name=target.name, type="TOPIC", resource=name, delete=["segment.bytes"])
    wait_configs(java, target, name, {"retention.ms": "3600000"})
    with pytest.raises(JavaError) as refused:
        java.call("incremental_alter_configs", name=target.name, type="TOPIC", resource=name,
                  set={"retention.ms": "soon"})
    assert refused.value.error == "InvalidConfigurationException"
    assert refused.value.message == "retention.ms: 'soon' is not an integer >= -1"
    broker = java.call("describe_configs", name=target.name, resources=[["BROKER", "1"]])["1"]["ok"]
    assert broker["log.retention.ms"]["read_only"] is True


def test_incremental_alter_configs_append_and_subtract_cleanup_policy(java: JavaClients, target: JavaTarget) -> None:
    # cleanup.policy is a LIST config: APPEND adds the items not in it yet, SUBTRACT takes items
    # out, from the stream's value else the default `delete` (Kafka's ConfigAdminManager).
    name = topic(target, "policy-list")
    create(java, target, name)

    def alter(**ops: dict[str, str]) -> None:
        java.call("incremental_alter_configs", name=target.name, type="TOPIC", resource=name, **ops)

    alter(append={"cleanup.policy": "compact"})
    wait_configs(java, target, name, {"cleanup.policy": "delete,compact"})
    alter(append={"cleanup.policy": "compact"})  # already there: unchanged
    wait_configs(java, target, name, {"cleanup.policy": "delete,compact"})
    alter(subtract={"cleanup.policy": "delete"})
    wait_configs(java, target, name, {"cleanup.policy": "compact"})
    alter(subtract={"cleanup.policy": "compact"})  # empty: keep every record
    wait_configs(java, target, name, {"cleanup.policy": ""})
    alter(append={"cleanup.policy": "delete"})
    wait_configs(java, target, name, {"cleanup.policy": "delete"})
    with pytest.raises(JavaError) as bogus:
        alter(append={"cleanup.policy": "bogus"})
    assert (bogus.value.error, bogus.value.message) == (
        "InvalidConfigurationException", "cleanup.policy: 'delete,bogus' is not one of delete, compact, "
        "compact,delete (either order) or empty (keep every record)")
    with pytest.raises(JavaError) as not_list:
        alter(append={"retention.ms": "1000"})
    assert (not_list.value.error, not_list.value.message) == (
        "InvalidConfigurationException", "retention.ms: APPEND applies to list configs only (cleanup.policy, "
        "follower.replication.throttled.replicas, leader.replication.throttled.replicas); use SET")
    wait_configs(java, target, name, {"cleanup.policy": "delete"})


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")  # the API under test
def test_alter_configs_replaces_the_whole_config(java: JavaClients, target: JavaTarget) -> None:
    # Admin.alterConfigs is gone from Kafka 4's Java client: librdkafka's still sends AlterConfigs
    name = topic(target, "alter-configs")
    create(java, target, name)
    java.call("incremental_alter_configs", name=target.name, type="TOPIC", resource=name,
              set={"retention.ms": "3600000", "segment.bytes": "1048576"})
    client = AdminClient(target.confluent())
    resource = ConfigResource("TOPIC", name, set_config={"retention.bytes": "1000000"})
    for future in client.alter_configs([resource], request_timeout=30).values():  # type: ignore[attr-defined]
        future.result(30)
    wait_configs(java, target, name, {"retention.bytes": "1000000"})  # the others back to their defaults
    bad = ConfigResource("TOPIC", name, set_config={"retention.bytes": "lots"})
    [future] = client.alter_configs([bad], request_timeout=30).values()  # type: ignore[attr-defined]
    with pytest.raises(Exception) as refused:
        future.result(30)
    assert refused.value.args[0].name() == "INVALID_CONFIG"
    wait_configs(java, target, name, {"retention.bytes": "1000000"})


# ---- consumer groups ----------------------------------------------------------------------------


def test_consumer_group_admin(java: JavaClients, target: JavaTarget) -> None:
    name, group = topic(target, "group-stream"), topic(target, "group")
    create(java, target, name)
    send(java, target, name, [f"v{i}" for i in range(5)])
    consumer = f"{target.name}-group-consumer"
    java.consumer(consumer, target.bootstrap, target.security, **{"group.id": group, "auto.offset.reset": "earliest",
                                                                   "enable.auto.commit": "false"})
    java.call("subscribe", name=consumer, topics=[name])
    assert [r["value"] for r in java.poll(consumer, min_records=5)] == [f"v{i}" for i in range(5)]
    java.call("commit", name=consumer)
    listed = [g for g in java.call("list_groups", name=target.name) if g["group_id"] == group]
    assert listed == [{"group_id": group, "type": "Classic", "protocol": "consumer", "state": "Stable"}]
    described = java.call("describe_consumer_groups", name=target.name, groups=[group])[group]["ok"]
    assert (described["state"], described["type"], len(described["members"])) == ("Stable", "Classic", 1)
    assert described["members"][0]["assignment"] == [f"{name}-0"]
    java.call("close", name=consumer)
    epoch = metadata_raw(target.plain, [name]).topics[0].partitions[0].leader_epoch
    assert java.call("list_consumer_group_offsets", name=target.name, group=group) == {
        name: {"offset": 5, "metadata": "", "leader_epoch": epoch}}
    java.call("alter_consumer_group_offsets", name=target.name, group=group, offsets={name: 2})
    assert java.call("list_consumer_group_offsets", name=target.name, group=group) == {
        name: {"offset": 2, "metadata": "", "leader_epoch": -1}}
    assert java.call("delete_consumer_groups", name=target.name, groups=[group]) == {group: {"ok": None}}
    assert [g for g in java.call("list_groups", name=target.name) if g["group_id"] == group] == []
    missing = java.call("delete_consumer_groups", name=target.name, groups=[group])[group]
    assert missing["error"] == "GroupIdNotFoundException"


def test_remove_members_from_a_consumer_group(java: JavaClients, target: JavaTarget) -> None:
    # Admin.removeMembersFromConsumerGroup sends LeaveGroup v3+; Kafka 4 fences the named members
    # of a KIP-848 consumer group out too (the group epoch moves on; a removed member rejoins).
    name, group = topic(target, "remove-stream"), topic(target, "remove-group")
    create(java, target, name)
    send(java, target, name, ["v0"])
    consumers = [f"{target.name}-remove-{i}" for i in (1, 2)]
    for i, consumer in enumerate(consumers):
        static = {"group.instance.id": "static-1"} if i == 0 else {}
        java.consumer(consumer, target.bootstrap, target.security, **{
            "group.id": group, "group.protocol": "consumer", "auto.offset.reset": "earliest", **static})
        java.call("subscribe", name=consumer, topics=[name])
    assert [r["value"] for r in java.poll(consumers[0], min_records=1)] == ["v0"]

    def described() -> dict:
        return java.call("describe_consumer_groups", name=target.name, groups=[group])[group]["ok"]

    def both_joined() -> bool:
        java.poll(consumers[1], min_records=0, timeout_ms=200)  # a KIP-848 consumer joins in poll
        return len(described()["members"]) == 2

    wait_until(both_joined, timeout=30, message=lambda: f"{described()}")
    before = described()
    assert before["type"] == "Consumer"
    with pytest.raises(JavaError) as unknown:
        java.call("remove_members", name=target.name, group=group, instance_ids=["no-such-instance"])
    assert unknown.value.error == "UnknownMemberIdException", unknown.value
    assert java.call("remove_members", name=target.name, group=group, instance_ids=["static-1"]) is None
    after = described()
    assert after["type"] == "Consumer" and after["group_epoch"] > before["group_epoch"], (before, after)
    for consumer in consumers:
        java.call("close", name=consumer)


# ---- security -----------------------------------------------------------------------------------


def test_acls(java: JavaClients, target: JavaTarget) -> None:
    principal = f"User:{target.name}-acl-user"
    acl = {"resource_type": "TOPIC", "resource": topic(target, "acl"), "pattern": "PREFIXED", "principal": principal,
           "host": "*", "operation": "READ", "permission": "ALLOW"}
    java.call("create_acls", name=target.name, acls=[acl])
    # any node answers DescribeAcls: one other than the metadata leader applies a change a moment later
    wait_until(lambda: java.call("describe_acls", name=target.name, principal=principal) == [acl], timeout=10,
               message="the ACL is not described")
    assert java.call("delete_acls", name=target.name, principal=principal) == [acl]
    wait_until(lambda: java.call("describe_acls", name=target.name, principal=principal) == [], timeout=10,
               message="the deleted ACL is still described")


def test_user_scram_credentials(java: JavaClients, target: JavaTarget) -> None:
    user = f"{target.name}-scram-user"
    java.call("alter_user_scram_credentials", name=target.name,
              upsert=[{"user": user, "mechanism": "SCRAM-SHA-256", "password": "Pa55-word", "iterations": 8192}])
    wait_until(lambda: java.call("describe_user_scram_credentials", name=target.name, users=[user]) == {
        user: [{"mechanism": "SCRAM-SHA-256", "iterations": 8192}]}, timeout=10, message=f"{user} not described")
    java.call("alter_user_scram_credentials", name=target.name,
              delete=[{"user": user, "mechanism": "SCRAM-SHA-256"}])
    # VDL answers RESOURCE_NOT_FOUND for the user; Kafka's client reports it without credentials (any
    # node answers: one other than the metadata leader applies the deletion a moment later)
    wait_until(lambda: java.call("describe_user_scram_credentials", name=target.name, users=[user]) == {user: []},
               timeout=10, message=f"{user} still has credentials")
    # describing every user may be answered by yet another node, which also applies the deletion a moment later
    wait_until(lambda: user not in java.call("describe_user_scram_credentials", name=target.name), timeout=10,
               message=f"{user} still listed among every user's credentials")


# ---- the Java consumer across a leader change (KIP-320) -----------------------------------------


def test_java_consumer_validates_its_position_across_a_leader_change(java: JavaClients,
                                                                     java_targets: dict[str, JavaTarget]) -> None:
    target = java_targets["3-nodes-plain"]
    cluster = target.cluster
    name = topic(target, "epochs")
    create(java, target, name)
    first = send(java, target, name, [f"a{i}" for i in range(20)])
    assert [s["offset"] for s in first] == list(range(20))
    consumer = "epoch-consumer"
    java.consumer(consumer, target.bootstrap, **{"auto.offset.reset": "earliest", "max.poll.records": "20"})
    java.call("assign", name=consumer, partitions=[name])
    seen = java.poll(consumer, min_records=20)
    leader = metadata_raw(target.plain, [name]).topics[0].partitions[0].leader_id
    old_epoch = metadata_raw(target.plain, [name]).topics[0].partitions[0].leader_epoch
    cluster.kill(leader)
    try:
        others = [n for n in cluster.node_ids() if n != leader]

        def new_leader() -> int:
            found = metadata_raw(cluster.address(others[0], "PLAINTEXT"), [name]).topics[0].partitions[0]
            return found.leader_id if found.leader_id in others and found.leader_epoch > old_epoch and \
                list_offset_raw(cluster.address(found.leader_id, "PLAINTEXT"), name, -1)[0] == 0 else -1

        wait_until(lambda: new_leader() > 0, timeout=30, message=f"no new leader of {name}")
        elected = new_leader()
        validations = epoch_requests(cluster, elected)
        second = send(java, target, name, [f"b{i}" for i in range(20)])
        assert [s["offset"] for s in second] == list(range(20, 40))
        seen += java.poll(consumer, min_records=20)
        assert [(r["offset"], r["value"]) for r in seen] == [(i, f"a{i}") for i in range(20)] + [
            (20 + i, f"b{i}") for i in range(20)]
        # the consumer saw the new epoch in Metadata and checked its position at the new leader
        assert epoch_requests(cluster, elected) > validations
        assert java.call("position", name=consumer, topic=name) == 40
    finally:
        java.call("close", name=consumer)
        cluster.restart(leader, timeout_s=60)


def epoch_requests(cluster: DevCluster, node_id: int) -> float:
    """OffsetForLeaderEpoch requests node `node_id` answered, every version and outcome."""
    return sum(value for labels, value in scrape(cluster, node_id).samples.get("vdl_requests_total", [])
               if labels.get("api") == "OffsetForLeaderEpoch")
