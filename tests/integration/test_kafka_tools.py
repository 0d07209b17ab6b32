"""Apache Kafka 4.4's command-line tools (bin/kafka-*.sh, run by their main class) against VDL,
on one node and on three, over the PLAINTEXT listener and over SASL_SSL (TLS + SCRAM-SHA-512 as
the `admin` super user, the tools' --command-config): what each prints, parsed, and what the
cluster holds afterwards, read back with other clients (librdkafka, VDL's own client, raw
requests) over the plain listener.

The tools run inside the module's harness JVM (JavaClients.tool: each tool's main, its exit
caught, its stdout and stderr captured), since a JVM start per run costs seconds here; one test
runs tools as JVMs of their own, as their bin/ scripts do. The clusters run the ACL authorizer
with the plain listener's User:ANONYMOUS as a super user, so ACLs added by kafka-acls decide
what another SCRAM user may do on the secured listener. No leader balancing runs by itself, so
only kafka-leader-election moves a leader to its preferred replica here.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.support.java_client import JavaClients, ToolResult, kafka_tool, write_properties
from tests.support.java_targets import JavaTarget, java_login
from tests.support.kafka import coordinator_raw, metadata_raw, raw_request
from tests.support.security import ADMIN_USER
from tests.support.waiting import wait_until
from vdl_client import ClientSettings, VdlClient
from vdl_dev.dev_cluster import DevCluster
from vdl_wire import messages as m
from vdl_wire.errors import ErrorCode

DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs' config source
TOPIC = 2  # DescribeConfigs' resource type


@pytest.fixture
def vdl(target: JavaTarget) -> Iterator[VdlClient]:
    """VDL's own client on the target's cluster, over the plain listener."""
    settings = ClientSettings.from_bootstrap(target.cluster.bootstrap_servers, deadline_ms=30_000)
    with VdlClient(settings) as client:
        yield client


# The console consumer's: it closes after --max-messages, and a consumer's close waits for its
# fetch in flight, which the broker holds up to fetch.max.wait.ms when no record comes (500 ms by
# default, paid at every run).
FETCH_WAIT = ("--command-property", "fetch.max.wait.ms=100")


def run(java: JavaClients, tool: str, *args: str, input: str | None = None, ok: bool = True) -> ToolResult:
    result = java.tool(tool, *args, input=input, timeout_s=120)
    if ok:
        assert result.returncode == 0, f"{tool} {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n" \
                                       f"{result.stderr[-4000:]}"
    return result


def named(target: JavaTarget, name: str) -> str:
    """A stream or group name of this target's (a cluster serves two targets)."""
    return f"{target.name}-{name}"


def confluent_admin(cluster: DevCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def settle(cluster: DevCluster, request: Any, answer: Callable[[Any], object], expected: object) -> None:
    """Wait until every node's answer to `request` is `expected`: a change to the cluster's
    metadata (configs, ACLs, users) is answered once the metadata group committed it, and each
    node applies it a moment later, as Kafka's brokers apply their metadata log (a tool run
    right after asks any node)."""
    def on_each_node() -> list[object]:
        return [answer(raw_request(cluster.address(i), request)) for i in cluster.node_ids()]

    wait_until(lambda: on_each_node() == [expected] * len(cluster.node_ids()), timeout=10,
               message=lambda: f"each node's answer {on_each_node()}, expected {expected}")


def settle_configs(cluster: DevCluster, stream: str, expected: dict[str, str]) -> None:
    request = m.DescribeConfigsRequest(resources=[m.DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=TOPIC, resource_name=stream, configuration_keys=None)])
    settle(cluster, request, lambda r: {c.name: c.value for c in r.results[0].configs
                                        if c.config_source == DYNAMIC_TOPIC_CONFIG}, expected)


def settle_acls(cluster: DevCluster, principal: str, count: int) -> None:
    """Every node has `count` ACLs of `principal`."""
    request = m.DescribeAclsRequest(resource_type_filter=1, pattern_type_filter=1, principal_filter=principal,
                                    operation=1, permission_type=1)  # 1: ANY
    settle(cluster, request, lambda r: sum(len(x.acls) for x in r.resources), count)


def settle_reassignments(cluster: DevCluster) -> None:
    """No node lists a reassignment in progress (the tool refuses a new one while any is)."""
    settle(cluster, m.ListPartitionReassignmentsRequest(timeout_ms=10_000), lambda r: (r.error_code, len(r.topics)),
           (0, 0))


def settle_user(cluster: DevCluster, user: str) -> None:
    """Every node knows `user`'s SCRAM credential."""
    request = m.DescribeUserScramCredentialsRequest(users=[
        m.DescribeUserScramCredentialsRequest.UserName(name=user)])
    settle(cluster, request, lambda r: r.results[0].error_code, 0)


def stream_configs(cluster: DevCluster, stream: str) -> dict[str, tuple[str, int]]:
    """DescribeConfigs through librdkafka: the configs set on the stream, name -> (value, source)."""
    client = confluent_admin(cluster)  # held: a collected client cancels its futures
    [future] = client.describe_configs([ConfigResource("topic", stream)]).values()
    return {name: (entry.value, int(entry.source)) for name, entry in future.result(timeout=30).items()
            if int(entry.source) == DYNAMIC_TOPIC_CONFIG}


def table(stdout: str) -> list[dict[str, str]]:
    """The whitespace-aligned table kafka-consumer-groups prints (a header line, then rows)."""
    lines = [line.split() for line in stdout.splitlines() if line.strip()]
    header = next(i for i, fields in enumerate(lines) if fields and fields[0] == "GROUP")
    return [dict(zip(lines[header], fields, strict=True)) for fields in lines[header + 1:]]


def describe_topic(stdout: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """kafka-topics --describe: the topic line's fields and each partition line's fields."""
    lines = [line for line in stdout.splitlines() if line.strip()]

    def fields(line: str) -> dict[str, str]:
        return dict(re.findall(r"(\w+): ?(\S*)", line))

    return fields(lines[0]), [fields(line) for line in lines[1:]]


def topic_id_string(topic_id: uuid.UUID) -> str:
    """A topic id as Kafka's tools print it (Uuid.toString: URL-safe base64, unpadded)."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def produce(cluster: DevCluster, stream: str, values: list[str], timestamps: list[int] | None = None) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0})
    for i, value in enumerate(values):
        producer.produce(stream, value.encode(), partition=0, timestamp=timestamps[i] if timestamps else 0)
        producer.flush(30)  # one batch per record: each record's timestamp is its batch's
    assert producer.flush(30) == 0


def consume_all(cluster: DevCluster, stream: str, count: int) -> list[tuple[str | None, str]]:
    """(key, value) of the stream's first `count` records, read by librdkafka."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "tools-checker",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(stream, 0, 0)])
        records: list[tuple[str | None, str]] = []
        deadline = time.monotonic() + 30
        while len(records) < count and time.monotonic() < deadline:
            for message in consumer.consume(count - len(records), timeout=1):
                assert message.error() is None, message.error()
                key = message.key()
                records.append((key.decode() if key is not None else None, message.value().decode()))
        return records
    finally:
        consumer.close()


def replicas(vdl: VdlClient, stream: str) -> tuple[int, list[int]]:
    """(leader, replica nodes in order) as Metadata names them."""
    [topic] = vdl.metadata([stream]).topics
    [partition] = topic.partitions
    return partition.leader_id, list(partition.replica_nodes)


# ------------------------------------------------------------------------------------ kafka-topics


def test_topics_create_describe_list_delete(java: JavaClients, target: JavaTarget, vdl: VdlClient) -> None:
    way_in = target.tool_args()
    stream = named(target, "topic")
    # cleanup.policy=delete, message.timestamp.type=CreateTime and min.insync.replicas up to the
    # majority, as Kafka guides and Kafka Streams create topics: accepted (the last is what the
    # stream gives anyway and is not stored).
    created = run(java, "kafka-topics", *way_in, "--create", "--topic", stream,
                  "--config", "retention.ms=3600000", "--config", "max.message.bytes=200000",
                  "--config", "cleanup.policy=delete", "--config", "message.timestamp.type=CreateTime",
                  "--config", f"min.insync.replicas={target.replication // 2 + 1}",
                  # Kafka topic configs with no effect on VDL (README), as provisioning tools pass them
                  "--config", "file.delete.delay.ms=0", "--config", "preallocate=true",
                  "--config", "segment.index.bytes=4096")
    assert created.stdout == f"Created topic {stream}.\n"
    # A codec to recompress to (Kafka's broker-side compression.type) and LogAppendTime: accepted.
    recompressed = run(java, "kafka-topics", *way_in, "--create", "--topic", named(target, "zstd"),
                       "--config", "compression.type=zstd", "--config", "message.timestamp.type=LogAppendTime")
    assert recompressed.stdout == f"Created topic {named(target, 'zstd')}.\n"
    refused = run(java, "kafka-topics", *way_in, "--create", "--topic", named(target, "three"), "--partitions", "3",
                  ok=False)
    assert (refused.returncode, refused.stdout) == (
        1, "Error while executing topic command : a VDL log stream has exactly one partition\n")
    placed = run(java, "kafka-topics", *way_in, "--create", "--topic", named(target, "placed"),
                 "--replica-assignment", "1", ok=False)
    assert (placed.returncode, placed.stdout) == (
        1, "Error while executing topic command : VDL places replicas itself: give a replication factor\n")
    # cleanup.policy=compact, as Kafka Streams' changelogs and Connect's internal topics ask:
    # accepted (VDL keeps every record of it); a policy Kafka does not have the tool itself
    # refuses (LogConfig.validate), before asking (VDL's refusal: test_admin_apis.py).
    compacted = named(target, "compacted")
    created_compacted = run(java, "kafka-topics", *way_in, "--create", "--topic", compacted,
                            "--config", "cleanup.policy=compact")
    assert created_compacted.stdout == f"Created topic {compacted}.\n"
    shrunk = run(java, "kafka-topics", *way_in, "--create", "--topic", named(target, "shrunk"),
                 "--config", "cleanup.policy=shrink", ok=False)
    assert (shrunk.returncode, shrunk.stdout) == (1, (
        "Error while executing topic command : Invalid value shrink for configuration cleanup.policy: String must "
        "be one of: compact, delete\n"))
    assert not any(vdl.stream_exists(named(target, name)) for name in ("three", "placed", "shrunk"))
    recompressing = {"compression.type": "zstd", "message.timestamp.type": "LogAppendTime"}
    settle_configs(target.cluster, named(target, "zstd"), recompressing)
    assert stream_configs(target.cluster, named(target, "zstd")) == {
        name: (value, DYNAMIC_TOPIC_CONFIG) for name, value in recompressing.items()}
    run(java, "kafka-topics", *way_in, "--delete", "--topic", named(target, "zstd"))
    settle_configs(target.cluster, compacted, {"cleanup.policy": "compact"})
    assert stream_configs(target.cluster, compacted) == {"cleanup.policy": ("compact", DYNAMIC_TOPIC_CONFIG)}
    run(java, "kafka-topics", *way_in, "--delete", "--topic", compacted)
    own = {"retention.ms": "3600000", "max.message.bytes": "200000", "cleanup.policy": "delete",
           "message.timestamp.type": "CreateTime", "file.delete.delay.ms": "0", "preallocate": "true",
           "segment.index.bytes": "4096"}
    settle_configs(target.cluster, stream, own)
    assert stream_configs(target.cluster, stream) == {name: (value, DYNAMIC_TOPIC_CONFIG) for name, value in own.items()}

    described = run(java, "kafka-topics", *way_in, "--describe", "--topic", stream)
    listed = run(java, "kafka-topics", *way_in, "--list")
    topic, partitions = describe_topic(described.stdout)
    leader, nodes = replicas(vdl, stream)
    # The tool lists the configs in its map's order, every one not at its default: as Kafka 4.4's
    # (`Configs: min.insync.replicas=1,...`), min.insync.replicas too, the cluster's dynamic default.
    assert sorted(topic.pop("Configs").split(",")) == [
        "cleanup.policy=delete", "file.delete.delay.ms=0", "max.message.bytes=200000",
        "message.timestamp.type=CreateTime", f"min.insync.replicas={target.replication // 2 + 1}", "preallocate=true",
        "retention.ms=3600000", "segment.index.bytes=4096"]
    assert topic == {"Topic": stream, "TopicId": topic["TopicId"], "PartitionCount": "1",
                     "ReplicationFactor": str(target.replication)}
    assert [(p["Partition"], p["Leader"], p["Replicas"]) for p in partitions] == [
        ("0", str(leader), ",".join(map(str, nodes)))]
    assert sorted(partitions[0]["Isr"].split(",")) == [str(n) for n in target.cluster.node_ids()]
    assert stream in listed.stdout.splitlines()

    grown = run(java, "kafka-topics", *way_in, "--alter", "--topic", stream, "--partitions", "3", ok=False)
    assert (grown.returncode, grown.stdout) == (1, (
        "Error while executing topic command : VDL streams have exactly one partition (each is one Raft group): "
        f"stream '{stream}' has 1 and cannot have 3\n"))
    assert len(vdl.metadata([stream]).topics[0].partitions) == 1

    deleted = run(java, "kafka-topics", *way_in, "--delete", "--topic", stream)
    assert deleted.stdout == ""
    # Answered once the metadata group committed the deletion; a node may apply it a moment later.
    wait_until(lambda: stream not in vdl.list_streams(), timeout=10, message="the stream to go")


def test_topics_describe_pages_through_describe_topic_partitions(java: JavaClients,
                                                                java_targets: dict[str, JavaTarget]) -> None:
    """kafka-topics --describe on 3 nodes, exactly: Kafka 4's tool describes topics with
    DescribeTopicPartitions once the broker advertises it, so each partition line ends with the
    eligible leader replicas, empty (`Elr: N/A` came from the Metadata fallback). A page of one
    partition makes the AdminClient follow the cursor from stream to stream."""
    target = java_targets["3-nodes-plain"]
    way_in = target.tool_args()
    names = [named(target, "dtp-1"), named(target, "dtp-2")]
    settings = ClientSettings.from_bootstrap(target.cluster.bootstrap_servers, deadline_ms=30_000)
    with VdlClient(settings) as vdl:
        for name in names:
            vdl.create_stream(name, exist_ok=False)
        wait_until(lambda: all(len(t.partitions[0].isr_nodes) == 3 for t in vdl.metadata(names).topics),
                   timeout=20, message="every replica in sync")
        topics = {t.name: t for t in vdl.metadata(names).topics}

    def block(name: str) -> str:
        topic = topics[name]
        [partition] = topic.partitions
        return (f"Topic: {name}\tTopicId: {topic_id_string(topic.topic_id)}\tPartitionCount: 1\t"
                f"ReplicationFactor: 3\tConfigs: min.insync.replicas=2\n"
                f"\tTopic: {name}\tPartition: 0\tLeader: {partition.leader_id}\t"
                f"Replicas: {','.join(map(str, partition.replica_nodes))}\t"
                f"Isr: {','.join(map(str, partition.isr_nodes))}\tElr: \tLastKnownElr: \n")

    one = run(java, "kafka-topics", *way_in, "--describe", "--topic", names[0])
    assert one.stdout == block(names[0])
    both = run(java, "kafka-topics", *way_in, "--describe", "--topic", f"{named(target, 'dtp-')}.*",
               "--partition-size-limit-per-response", "1")
    # The tool prints the topics in its map's order.
    assert sorted(re.split(r"(?=^Topic: )", both.stdout, flags=re.MULTILINE)[1:]) == [block(n) for n in names]


def test_a_tool_runs_as_a_jvm_of_its_own(java_targets: dict[str, JavaTarget]) -> None:
    """As bin/kafka-console-producer.sh runs it (the other tests run the tools in the harness
    JVM): its own JVM, its stdin to its end, its producer closed as the JVM exits."""
    target = java_targets["3-nodes-sasl-ssl"]
    stream = named(target, "own-jvm")
    settings = ClientSettings.from_bootstrap(target.cluster.bootstrap_servers, deadline_ms=30_000)
    with VdlClient(settings) as vdl:
        vdl.create_stream(stream, exist_ok=False)
    produced = kafka_tool("kafka-console-producer", *target.tool_args(), "--topic", stream, input="one\ntwo\n",
                          timeout_s=120)
    assert (produced.returncode, produced.stdout) == (0, "")
    assert consume_all(target.cluster, stream, 2) == [(None, "one"), (None, "two")]


def test_topics_describe_min_isr_partitions(java: JavaClients, target: JavaTarget, vdl: VdlClient) -> None:
    """--at-min-isr-partitions / --under-min-isr-partitions compare each partition's ISR with the
    topic's min.insync.replicas, which DescribeConfigs did not list (the tool failed on a null):
    a stream's is its Raft majority, so a one-replica stream is at its minimum, a healthy one of
    three above it. About 1 s a target."""
    way_in = target.tool_args()
    single, default = named(target, "min-isr-one"), named(target, "min-isr-default")
    vdl.create_stream(single, replication_factor=1, exist_ok=False)
    vdl.create_stream(default, exist_ok=False)
    [node] = replicas(vdl, single)[1]
    at_min = run(java, "kafka-topics", *way_in, "--describe", "--at-min-isr-partitions", "--topic", single)
    # Partition lines only: describe_topic takes its first line for the topic's.
    assert [(p["Topic"], p["Partition"], p["Leader"], p["Isr"]) for p in describe_topic("x\n" + at_min.stdout)[1]
            ] == [(single, "0", str(node), str(node))]
    # A healthy stream of three replicas is above its minimum of two (wait until all are in sync).
    wait_until(lambda: len(vdl.metadata([default]).topics[0].partitions[0].isr_nodes) == target.replication,
               timeout=10, message="every replica in sync")
    above = run(java, "kafka-topics", *way_in, "--describe", "--at-min-isr-partitions", "--topic", default)
    under = run(java, "kafka-topics", *way_in, "--describe", "--under-min-isr-partitions", "--topic", default)
    leader = str(replicas(vdl, default)[0])
    # On one node the default stream has one replica: at its minimum too.
    assert [(p["Topic"], p["Isr"]) for p in describe_topic("x\n" + above.stdout)[1]] == (
        [] if target.replication > 1 else [(default, leader)])
    assert under.stdout == ""
    client = confluent_admin(target.cluster)  # held: a collected client cancels its futures
    [future] = client.describe_configs([ConfigResource("topic", default)]).values()
    entry = future.result(timeout=30)["min.insync.replicas"]
    # As Kafka 4.4 describes its own: the cluster's dynamic default, settable (not read-only)
    assert (entry.value, entry.is_read_only, int(entry.source)) == (str(target.replication // 2 + 1), False, 3)
    # Asking for the majority (as Kafka guides do) is accepted and changes nothing; more is refused.
    most = target.replication // 2 + 1
    accepted = run(java, "kafka-configs", *way_in, "--alter", "--entity-type", "topics", "--entity-name", default,
                   "--add-config", f"min.insync.replicas={most}")
    assert accepted.stdout == f"Completed updating config for topic {default}.\n"
    refused = run(java, "kafka-configs", *way_in, "--alter", "--entity-type", "topics", "--entity-name", default,
                  "--add-config", f"min.insync.replicas={target.replication + 1}", ok=False)
    assert refused.returncode == 1
    assert (f"InvalidConfigurationException: min.insync.replicas: '{target.replication + 1}' is not an integer in "
            f"1..{most}: a write is acknowledged once a majority of the stream's {target.replication} replica(s) "
            "hold it (Raft), never fewer or more") in refused.stderr
    assert stream_configs(target.cluster, default) == {}


# ------------------------------------------------------------------------ console producer/consumer


def test_console_producer_and_consumer_with_keys(java: JavaClients, target: JavaTarget, vdl: VdlClient) -> None:
    stream = named(target, "console")
    vdl.create_stream(stream, exist_ok=False)
    records = [("k1", "first value"), ("k2", "zwei | the separator again"), ("k3", "третий"), ("k1", "  padded  ")]
    produced = run(java, "kafka-console-producer", *target.tool_args(), "--topic", stream,
                   "--reader-property", "parse.key=true", "--reader-property", "key.separator=|",
                   "--command-property", "acks=all", input="".join(f"{k}|{v}\n" for k, v in records))
    assert produced.stdout == ""
    assert consume_all(target.cluster, stream, len(records)) == records
    consumed = run(java, "kafka-console-consumer", *FETCH_WAIT, *target.tool_args(), "--topic", stream,
                   "--from-beginning", "--max-messages", "3", "--formatter-property", "print.key=true",
                   "--formatter-property", "key.separator=|")
    assert consumed.stdout == "".join(f"{k}|{v}\n" for k, v in records[:3])
    assert "Processed a total of 3 messages" in consumed.stderr


# --------------------------------------------------------------------------- kafka-consumer-groups


def test_consumer_groups_list_describe_reset_delete(java: JavaClients, target: JavaTarget, vdl: VdlClient) -> None:
    way_in = target.tool_args()
    stream, group = named(target, "grouped"), named(target, "group")
    vdl.create_stream(stream, exist_ok=False)
    produce(target.cluster, stream, [f"v{i}" for i in range(5)])
    # One record per poll, so the offset committed as the consumer closes is exactly what it read.
    consumed = run(java, "kafka-console-consumer", *FETCH_WAIT, *way_in, "--topic", stream, "--group", group,
                   "--from-beginning", "--max-messages", "2", "--command-property", "max.poll.records=1")
    assert consumed.stdout == "v0\nv1\n"

    listed = run(java, "kafka-consumer-groups", *way_in, "--list")
    described = run(java, "kafka-consumer-groups", *way_in, "--describe", "--group", group)
    assert group in listed.stdout.splitlines()
    assert table(described.stdout) == [{"GROUP": group, "TOPIC": stream, "PARTITION": "0",
                                        "CURRENT-OFFSET": "2", "LOG-END-OFFSET": "5", "LAG": "3",
                                        "CONSUMER-ID": "-", "HOST": "-", "CLIENT-ID": "-"}]
    assert f"Consumer group '{group}' has no active members." in described.stderr
    # The console consumer's group is a classic one, emptied: described as such (DescribeGroups,
    # no protocol), as ListGroups lists it, not as an Empty KIP-848 group with its assignor.
    [state] = table(run(java, "kafka-consumer-groups", *way_in, "--describe", "--group", group, "--state").stdout)
    assert (state["ASSIGNMENT-STRATEGY"], state["STATE"], state["#MEMBERS"]) == ("-", "Empty", "0")

    def reset(*how: str) -> list[dict[str, str]]:
        return table(run(java, "kafka-consumer-groups", *way_in, "--group", group, "--topic", stream,
                         "--reset-offsets", *how, "--execute").stdout)

    def committed() -> int:
        client = confluent_admin(target.cluster)
        wanted = ConsumerGroupTopicPartitions(group, [TopicPartition(stream, 0)])
        [future] = client.list_consumer_group_offsets([wanted]).values()
        [partition] = future.result(timeout=30).topic_partitions
        return partition.offset

    assert reset("--to-earliest") == [{"GROUP": group, "TOPIC": stream, "PARTITION": "0", "NEW-OFFSET": "0"}]
    assert committed() == 0
    assert reset("--to-offset", "4") == [{"GROUP": group, "TOPIC": stream, "PARTITION": "0", "NEW-OFFSET": "4"}]
    assert committed() == 4

    deleted = run(java, "kafka-consumer-groups", *way_in, "--delete", "--group", group)
    assert deleted.stdout == f"Deletion of requested consumer groups ('{group}') was successful.\n"
    assert committed() == -1001  # librdkafka's OFFSET_INVALID: the group has no offset any more


def test_a_group_is_of_one_kind_everywhere_once_empty(java: JavaClients, java_targets: dict[str, JavaTarget]) -> None:
    """As in Kafka 4: offsets committed without a generation (an admin's, Spark's) make a classic
    group, Empty; a KIP-848 group whose members all left stays a consumer group, Empty, while it
    has offsets. kafka-consumer-groups, the Java AdminClient and librdkafka all see that one kind
    (the Java and librdkafka admins ask ConsumerGroupDescribe, then DescribeGroups for a classic
    group)."""
    target = java_targets["1-node-plain"]
    stream, simple, modern = named(target, "kinds"), named(target, "offsets-only"), named(target, "emptied")
    admin = named(target, "kinds-admin")
    java.admin(admin, target.bootstrap, target.security)
    settings = ClientSettings.from_bootstrap(target.cluster.bootstrap_servers, deadline_ms=30_000)
    with VdlClient(settings) as vdl:
        vdl.create_stream(stream, exist_ok=False)
    produce(target.cluster, stream, ["a", "b", "c"])
    java.call("alter_consumer_group_offsets", name=admin, group=simple, offsets={stream: 2})
    consumer = named(target, "kinds-consumer")
    java.consumer(consumer, target.bootstrap, target.security, **{
        "group.id": modern, "group.protocol": "consumer", "auto.offset.reset": "earliest",
        "enable.auto.commit": "false", "fetch.max.wait.ms": "100"})
    java.call("subscribe", name=consumer, topics=[stream])
    assert [r["value"] for r in java.poll(consumer, min_records=3)] == ["a", "b", "c"]
    java.call("commit", name=consumer)
    java.call("close", name=consumer)  # leaves the group: its last member

    way_in = target.tool_args()

    def state(group: str) -> list[list[str]]:
        out = run(java, "kafka-consumer-groups", *way_in, "--describe", "--state", "--group", group).stdout
        return [line.split() for line in out.splitlines() if line.strip()]

    header = ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    coordinator = [target.cluster.address(1), "(1)"]
    assert state(simple) == [header, [simple, *coordinator, "-", "Empty", "0"]]
    assert state(modern) == [header, [modern, *coordinator, "uniform", "Empty", "0"]]
    listed = run(java, "kafka-consumer-groups", *way_in, "--list", "--type").stdout
    assert [line.split() for line in listed.splitlines() if line.split()[0] in ("GROUP", simple, modern)] == [
        ["GROUP", "TYPE"], [modern, "Consumer"], [simple, "Classic"]]

    described = java.call("describe_consumer_groups", name=admin, groups=[simple, modern])
    assert described == {
        simple: {"ok": {"group_id": simple, "state": "Empty", "type": "Classic", "assignor": "", "coordinator": 1,
                        "group_epoch": -1, "target_assignment_epoch": -1, "members": []}},
        # Joined at group epoch 1, left at 2.
        modern: {"ok": {"group_id": modern, "state": "Empty", "type": "Consumer", "assignor": "uniform",
                        "coordinator": 1, "group_epoch": 2, "target_assignment_epoch": 2, "members": []}}}
    assert [g for g in java.call("list_groups", name=admin) if g["group_id"] in (simple, modern)] == [
        {"group_id": modern, "type": "Consumer", "protocol": "consumer", "state": "Empty"},
        {"group_id": simple, "type": "Classic", "protocol": "", "state": "Empty"}]
    client = confluent_admin(target.cluster)  # held: a collected client cancels its futures
    seen = {group: future.result(timeout=30) for group, future in client.describe_consumer_groups([simple,
                                                                                                  modern]).items()}
    assert {group: (d.type, d.state, d.partition_assignor, d.members, d.is_simple_consumer_group)
            for group, d in seen.items()} == {
        simple: (ConsumerGroupType.CLASSIC, ConsumerGroupState.EMPTY, "", [], True),
        modern: (ConsumerGroupType.CONSUMER, ConsumerGroupState.EMPTY, "uniform", [], False)}
    epoch = metadata_raw(target.cluster.address(1), [stream]).topics[0].partitions[0].leader_epoch
    assert java.call("list_consumer_group_offsets", name=admin, group=simple) == {
        stream: {"offset": 2, "metadata": "", "leader_epoch": -1}}
    assert java.call("list_consumer_group_offsets", name=admin, group=modern) == {
        stream: {"offset": 3, "metadata": "", "leader_epoch": epoch}}

    # Its offsets deleted, the emptied KIP-848 group stays until the next retention pass (as
    # Kafka's cleanup), so the tool still describes it and deletes it.
    deleted = run(java, "kafka-consumer-groups", *way_in, "--delete-offsets", "--group", modern, "--topic", stream)
    assert [line.split() for line in deleted.stdout.splitlines() if line.strip()][-2:] == [
        ["TOPIC", "PARTITION", "STATUS"], [stream, "0", "Successful"]]
    assert state(modern) == [header, [modern, *coordinator, "uniform", "Empty", "0"]]
    assert java.call("list_consumer_group_offsets", name=admin, group=modern) == {}
    removed = run(java, "kafka-consumer-groups", *way_in, "--delete", "--group", modern)
    assert removed.stdout.strip() == f"Deletion of requested consumer groups ('{modern}') was successful."


# ------------------------------------------------------------------------------------ kafka-configs


def test_configs_alter_and_describe(java: JavaClients, target: JavaTarget, vdl: VdlClient) -> None:
    way_in = target.tool_args()
    stream = named(target, "configured")
    vdl.create_stream(stream, config={"max.message.bytes": "100000"}, exist_ok=False)
    added = run(java, "kafka-configs", *way_in, "--alter", "--entity-type", "topics", "--entity-name", stream,
                "--add-config", "retention.ms=7200000,segment.bytes=1048576,cleanup.policy=[compact,delete]")
    assert added.stdout == f"Completed updating config for topic {stream}.\n"
    removed = run(java, "kafka-configs", *way_in, "--alter", "--entity-type", "topics", "--entity-name", stream,
                  "--delete-config", "max.message.bytes")
    assert removed.stdout == f"Completed updating config for topic {stream}.\n"
    settle_configs(target.cluster, stream, {"retention.ms": "7200000", "segment.bytes": "1048576",
                                            "cleanup.policy": "compact,delete"})
    assert stream_configs(target.cluster, stream) == {
        "retention.ms": ("7200000", DYNAMIC_TOPIC_CONFIG), "segment.bytes": ("1048576", DYNAMIC_TOPIC_CONFIG),
        "cleanup.policy": ("compact,delete", DYNAMIC_TOPIC_CONFIG)}

    topic = run(java, "kafka-configs", *way_in, "--describe", "--entity-type", "topics", "--entity-name", stream)
    assert topic.stdout.splitlines() == [
        f"Dynamic configs for topic {stream} are:",
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  retention.ms=7200000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=7200000}",
        "  segment.bytes=1048576 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.bytes=1048576, "
        "DEFAULT_CONFIG:log.segment.bytes=1073741824}"]
    # --all: a default's synonym is the Kafka broker config it comes from (ServerTopicConfigSynonyms;
    # message.timestamp.type's was named by the topic config); VDL's own configs have none.
    every = run(java, "kafka-configs", *way_in, "--describe", "--all", "--entity-type", "topics", "--entity-name",
                stream).stdout.splitlines()
    # Kafka 4.4's other topic configs likewise (file.delete.delay.ms: no effect on VDL, README), and
    # min.insync.replicas, as Kafka 4.4 describes it: the cluster's dynamic default.
    assert [line for line in every if line.startswith(("  message.timestamp.type=", "  compression.type=",
                                                       "  unclean", "  vdl.table.format=", "  file.delete.delay.ms=",
                                                       "  min.insync.replicas=", "  message.timestamp.after.max.ms=",
                                                       "  message.timestamp.before.max.ms="))] == [
        "  compression.type=producer sensitive=false synonyms={DEFAULT_CONFIG:compression.type=producer}",
        "  file.delete.delay.ms=60000 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.delete.delay.ms=60000}",
        "  message.timestamp.after.max.ms=3600000 sensitive=false "
        "synonyms={DEFAULT_CONFIG:log.message.timestamp.after.max.ms=3600000}",
        "  message.timestamp.before.max.ms=9223372036854775807 sensitive=false "
        "synonyms={DEFAULT_CONFIG:log.message.timestamp.before.max.ms=9223372036854775807}",
        "  message.timestamp.type=CreateTime sensitive=false "
        "synonyms={DEFAULT_CONFIG:log.message.timestamp.type=CreateTime}",
        f"  min.insync.replicas={target.replication // 2 + 1} sensitive=false "
        f"synonyms={{DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas={target.replication // 2 + 1}}}",
        "  unclean.leader.election.enable=false sensitive=false "
        "synonyms={DEFAULT_CONFIG:unclean.leader.election.enable=false}",
        "  vdl.table.format=raw sensitive=false synonyms={}"]
    last = target.cluster.node_ids()[-1]
    broker = run(java, "kafka-configs", *way_in, "--describe", "--entity-type", "brokers", "--entity-name", str(last),
                 "--all")
    node_configs = dict(re.findall(r"^  (\S+?)=(\S*) sensitive=", broker.stdout, re.MULTILINE))
    assert broker.stdout.splitlines()[0] == f"All configs for broker {last} are:"
    assert node_configs["broker.id"] == str(last)
    assert node_configs["listeners"] == (f"PLAINTEXT://{target.cluster.address(last, 'PLAINTEXT')},"
                                         f"SASL_SSL://{target.cluster.address(last, 'SASL_SSL')}")
    assert node_configs["num.partitions"] == "1"
    # Node settings are static (node.toml and flags): no node has a dynamic one.
    brokers = run(java, "kafka-configs", *way_in, "--describe", "--entity-type", "brokers")
    assert brokers.stdout.splitlines() == [f"Dynamic configs for broker {n} are:" for n in target.cluster.node_ids()
                                           ] + ["Default configs for brokers in the cluster are:"]


def test_configs_broker_loggers_describe_set_and_unset(java: JavaClients, target: JavaTarget) -> None:
    """kafka-configs --entity-type broker-loggers: a node's loggers and their levels; setting one
    makes the node log at that level (its output shows the DEBUG line), deleting it returns it to
    its parent's; a level Kafka does not accept is INVALID_CONFIG naming the valid ones, a logger
    the node does not have is refused by the tool (it describes the node's loggers first)."""
    way_in = target.tool_args()
    group, logger = named(target, "logged-group"), "vdl_broker.groups.coordinator"
    error, coordinator = coordinator_raw(target.plain, group)
    assert error == 0
    node = str(coordinator)
    address = target.cluster.address(coordinator, "PLAINTEXT")
    describe = ["--describe", "--entity-type", "broker-loggers", "--entity-name", node]

    def line(name: str, level: str) -> str:
        return f"  {name}={level} sensitive=false synonyms={{}}"

    before = run(java, "kafka-configs", *way_in, *describe).stdout.splitlines()
    root = before[1].removeprefix("  root=").removesuffix(" sensitive=false synonyms={}")
    assert before[:2] == [f"Dynamic configs for broker-logger {node} are:", line("root", root)]
    assert root == target.cluster.nodes[coordinator].config.log_level.upper().replace("WARNING", "WARN")
    assert {line(n, root) for n in ("vdl_broker", "vdl_broker.groups", logger)} <= set(before)

    added = run(java, "kafka-configs", *way_in, "--alter", "--entity-type", "broker-loggers", "--entity-name", node,
                "--add-config", f"{logger}=DEBUG")
    assert added.stdout == f"Completed updating config for broker-logger {node}.\n"
    during = run(java, "kafka-configs", *way_in, *describe).stdout.splitlines()
    assert during == [line(logger, "DEBUG") if entry == line(logger, root) else entry for entry in before]
    join = m.JoinGroupRequest(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                              member_id="while-debug", protocol_type="consumer",
                              protocols=[m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])
    assert raw_request(address, join).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    output = target.cluster.nodes[coordinator].output
    wait_until(lambda: any(entry.endswith(f" DEBUG {logger}: join {group} member='while-debug'")
                           for entry in list(output)), message=lambda: "\n".join(list(output)[-20:]))

    removed = run(java, "kafka-configs", *way_in, "--alter", "--entity-type", "broker-loggers", "--entity-name",
                  node, "--delete-config", logger)
    assert removed.stdout == f"Completed updating config for broker-logger {node}.\n"
    assert run(java, "kafka-configs", *way_in, *describe).stdout.splitlines() == before

    loud = run(java, "kafka-configs", *way_in, "--alter", "--entity-type", "broker-loggers", "--entity-name", node,
               "--add-config", f"{logger}=LOUD", ok=False)
    assert loud.returncode == 1
    assert (f"org.apache.kafka.common.errors.InvalidConfigurationException: Cannot set the log level of {logger} "
            f"to LOUD as it is not a supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, "
            f"WARN") in loud.stderr
    unknown = run(java, "kafka-configs", *way_in, "--alter", "--entity-type", "broker-loggers", "--entity-name",
                  node, "--add-config", "kafka.server.ReplicaManager=DEBUG", ok=False)
    assert (unknown.returncode, unknown.stderr) == (1, "Invalid broker logger(s): kafka.server.ReplicaManager\n")


def test_configs_users_clients_groups_and_quotas(java: JavaClients, target: JavaTarget, admins: None) -> None:
    """Users and clients: their SCRAM credentials, and client quotas, which VDL does not enforce:
    none is described, setting one is refused saying so; groups: their configs, the nodes' settings
    unless a group has its own."""
    way_in = target.tool_args()
    user = run(java, "kafka-configs", *way_in, "--describe", "--entity-type", "users", "--entity-name", ADMIN_USER)
    admin_line = f"SCRAM credential configs for user-principal '{ADMIN_USER}' are SCRAM-SHA-512=iterations=8192"
    assert user.stdout == admin_line + "\n"
    users = run(java, "kafka-configs", *way_in, "--describe", "--entity-type", "users")
    assert admin_line in users.stdout.splitlines()
    assert "Quota configs" not in users.stdout
    for entity in (["--entity-type", "clients"], ["--entity-type", "clients", "--entity-name", "app"],
                   ["--entity-type", "users", "--entity-name", ADMIN_USER, "--entity-type", "clients"],
                   ["--entity-type", "ips"]):
        described = run(java, "kafka-configs", *way_in, "--describe", *entity)
        assert (described.stdout, described.stderr) == ("", ""), entity

    # Group configs (KIP-848) are the nodes' settings until a group has its own. The tool
    # describes a group that exists (here by its committed offset), as against Kafka.
    absent = named(target, "absent-group")
    assert run(java, "kafka-configs", *way_in, "--describe", "--entity-type", "groups", "--entity-name",
               absent).stdout == f"The group '{absent}' doesn't exist and doesn't have dynamic config.\n"
    group, stream = named(target, "configured-group"), named(target, "configured-group-stream")
    assert "ok" in java.call("create_topics", name=target.name, topics=[{"name": stream}])[stream]
    java.call("alter_consumer_group_offsets", name=target.name, group=group, offsets={stream: 0})
    assert run(java, "kafka-configs", *way_in, "--describe", "--entity-type", "groups", "--entity-name",
               group).stdout == f"Dynamic configs for group {group} are:\n"
    assert run(java, "kafka-configs", *way_in, "--describe", "--entity-type", "groups", "--entity-name", group,
               "--all").stdout.splitlines() == [
        f"All configs for group {group} are:",
        "  consumer.heartbeat.interval.ms=500 sensitive=false "
        "synonyms={STATIC_BROKER_CONFIG:group.consumer.heartbeat.interval.ms=500}",
        "  consumer.session.timeout.ms=45000 sensitive=false "
        "synonyms={DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}"]
    # A group's own configs: set (as Kafka allows, for a group that does not exist too), described
    # as the group's, listed among the groups with configs, refused naming why, deleted.
    for name in (group, absent):
        assert run(java, "kafka-configs", *way_in, "--alter", "--entity-type", "groups", "--entity-name", name,
                   "--add-config", "consumer.session.timeout.ms=30000").stdout == (
            f"Completed updating config for group {name}.\n")
    own_session = ("  consumer.session.timeout.ms=30000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
                   "consumer.session.timeout.ms=30000, DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}")
    assert run(java, "kafka-configs", *way_in, "--describe", "--entity-type", "groups", "--entity-name",
               absent).stdout.splitlines() == [f"Dynamic configs for group {absent} are:", own_session]
    every_group = run(java, "kafka-configs", *way_in, "--describe", "--entity-type", "groups").stdout.splitlines()
    assert every_group[every_group.index(f"Dynamic configs for group {group} are:") + 1] == own_session
    refused = run(java, "kafka-configs", *way_in, "--alter", "--entity-type", "groups", "--entity-name", group,
                  "--add-config", "consumer.heartbeat.interval.ms=30000", ok=False)
    assert refused.returncode == 1
    assert ("org.apache.kafka.common.errors.InvalidConfigurationException: consumer.heartbeat.interval.ms (30000) "
            "must be less than consumer.session.timeout.ms (30000)") in refused.stderr
    for name in (group, absent):
        assert run(java, "kafka-configs", *way_in, "--alter", "--entity-type", "groups", "--entity-name", name,
                   "--delete-config", "consumer.session.timeout.ms").returncode == 0
    assert run(java, "kafka-configs", *way_in, "--describe", "--entity-type", "groups", "--entity-name",
               group).stdout == f"Dynamic configs for group {group} are:\n"
    assert run(java, "kafka-configs", *way_in, "--describe", "--entity-type", "groups", "--entity-name",
               absent).stdout == f"The group '{absent}' doesn't exist and doesn't have dynamic config.\n"

    limited = run(java, "kafka-configs", *way_in, "--alter", "--entity-type", "users", "--entity-name", ADMIN_USER,
                  "--add-config", "producer_byte_rate=1048576", ok=False)
    assert limited.returncode == 1
    assert ("org.apache.kafka.common.errors.UnsupportedVersionException: VDL enforces no client quotas (no produce, "
            "fetch, request or connection throttling): a quota set here would not be applied") in limited.stderr
    unknown = run(java, "kafka-configs", *way_in, "--alter", "--entity-type", "clients", "--entity-name", "app",
                  "--delete-config", "consumer_byte_rate", ok=False)
    assert unknown.returncode == 1
    # the tool checks what it deletes exists: no quota does
    assert unknown.stderr == "Invalid config(s): consumer_byte_rate\n"


def test_client_metrics_lists_none_and_refuses_a_subscription(java: JavaClients, target: JavaTarget) -> None:
    """VDL collects no client metrics (KIP-714): kafka-client-metrics and kafka-configs list no
    client-metrics resource (ListConfigResources), as Kafka where none was set, and describe a
    named one with Kafka's defaults; setting one is refused saying why."""
    way_in = target.tool_args()
    for args in (["--list"], ["--describe"]):
        listed = run(java, "kafka-client-metrics", *way_in, *args)
        assert (listed.stdout.strip(), listed.stderr) == ("", ""), args
    named_one = run(java, "kafka-client-metrics", *way_in, "--describe", "--name", "producers")
    assert named_one.stdout == "The client metric resource producers doesn't exist and doesn't have dynamic config.\n"
    configs = run(java, "kafka-configs", *way_in, "--describe", "--entity-type", "client-metrics")
    assert (configs.stdout, configs.stderr) == ("", "")
    # --all describes the name without listing first: Kafka's defaults, as Kafka answers for a
    # name no subscription was set under
    defaults = run(java, "kafka-configs", *way_in, "--describe", "--all", "--entity-type", "client-metrics",
                   "--entity-name", "producers")
    assert (defaults.stdout.splitlines(), defaults.stderr) == ([
        "All configs for client-metric producers are:",
        "  interval.ms=300000 sensitive=false synonyms={}",
        "  match= sensitive=false synonyms={}",
        "  metrics= sensitive=false synonyms={}"], "")
    subscribed = run(java, "kafka-client-metrics", *way_in, "--alter", "--name", "producers", "--metrics",
                     "org.apache.kafka.producer.", "--interval", "1000", ok=False)
    assert (subscribed.returncode, subscribed.stdout) == (
        1, "Error while executing client metrics command : VDL collects no client metrics (KIP-714): a "
           "client-metrics resource cannot be set\n")


# ------------------------------------------------------------------- kafka-acls and the SASL_SSL listener


def acl_listing(stdout: str) -> dict[tuple[str, str, str], set[tuple[str, str, str, str]]]:
    """kafka-acls' listing: (resource type, name, pattern type) -> {(principal, host, operation, permission)}."""
    listing: dict[tuple[str, str, str], set[tuple[str, str, str, str]]] = {}
    current: set[tuple[str, str, str, str]] = set()
    for line in stdout.splitlines():
        if resource := re.search(r"ResourcePattern\(resourceType=(\w+), name=(\S+), patternType=(\w+)\)", line):
            current = listing.setdefault(resource.groups(), set())
        elif entry := re.search(r"\(principal=(\S+), host=(\S+), operation=(\w+), permissionType=(\w+)\)", line):
            current.add(entry.groups())
    return listing


def test_acls_decide_what_a_scram_user_does_on_the_secured_listener(java: JavaClients, target: JavaTarget,
                                                                     vdl: VdlClient, tmp_path: Path) -> None:
    """An operator (on the target's listener) gives a SCRAM user ACLs; the user, on the SASL_SSL
    listener, may do what they allow and nothing else."""
    way_in = target.tool_args()
    secured = target.cluster.bootstrap_for("SASL_SSL")
    alice, password = named(target, "alice"), "alice-Pa55-tools"
    alice_login = str(write_properties(tmp_path / "alice.properties", java_login(target.tls, alice, password)))
    prefix = named(target, "app-")
    orders = f"{prefix}orders"
    for stream in (orders, named(target, "private")):
        vdl.create_stream(stream, exist_ok=False)
    user = run(java, "kafka-configs", *way_in, "--alter", "--entity-type", "users", "--entity-name", alice,
               "--add-config", f"SCRAM-SHA-512=[iterations=4096,password={password}]")
    assert user.stdout == f"Completed updating config for user {alice}.\n"
    settle_user(target.cluster, alice)

    # One after the other: kafka-acls looks for the ACLs that exist already and adds only the others.
    producer_acls = run(java, "kafka-acls", *way_in, "--add", "--allow-principal", f"User:{alice}",
                        "--producer", "--topic", prefix, "--resource-pattern-type", "prefixed")
    assert acl_listing(producer_acls.stdout) == {("TOPIC", prefix, "PREFIXED"): {
        (f"User:{alice}", "*", op, "ALLOW") for op in ("DESCRIBE", "CREATE", "WRITE")}}
    consumer_acls = run(java, "kafka-acls", *way_in, "--add", "--allow-principal", f"User:{alice}",
                        "--consumer", "--topic", prefix, "--group", prefix, "--resource-pattern-type", "prefixed")
    assert (f"Acl (pattern=ResourcePattern(resourceType=TOPIC, name={prefix}, patternType=PREFIXED), entry=(principal="
            f"User:{alice}, host=*, operation=DESCRIBE, permissionType=ALLOW)) already exists.") in \
        consumer_acls.stdout.splitlines()
    assert acl_listing(consumer_acls.stdout) == {
        ("TOPIC", prefix, "PREFIXED"): {(f"User:{alice}", "*", "READ", "ALLOW")},
        ("GROUP", prefix, "PREFIXED"): {(f"User:{alice}", "*", "READ", "ALLOW")}}
    expected = {("TOPIC", prefix, "PREFIXED"): {(f"User:{alice}", "*", op, "ALLOW")
                                                for op in ("DESCRIBE", "CREATE", "WRITE", "READ")},
                ("GROUP", prefix, "PREFIXED"): {(f"User:{alice}", "*", "READ", "ALLOW")}}
    settle_acls(target.cluster, f"User:{alice}", 5)
    listed = run(java, "kafka-acls", *way_in, "--list", "--principal", f"User:{alice}")
    assert acl_listing(listed.stdout) == expected

    # Alice on the SASL_SSL listener: she sees, writes and reads her prefix's streams only.
    as_alice = ["--bootstrap-server", secured, "--command-config", alice_login]
    alice_topics = run(java, "kafka-topics", *as_alice, "--list")
    assert alice_topics.stdout.split() == [orders]
    run(java, "kafka-console-producer", *as_alice, "--topic", orders, "--command-property", "acks=all",
        input="order-1\norder-2\n")
    consumed = run(java, "kafka-console-consumer", *FETCH_WAIT, *as_alice, "--topic", orders, "--group", f"{prefix}readers",
                   "--from-beginning", "--max-messages", "2")
    assert consumed.stdout == "order-1\norder-2\n"
    assert consume_all(target.cluster, orders, 2) == [(None, "order-1"), (None, "order-2")]

    run(java, "kafka-acls", *way_in, "--remove", "--force", "--allow-principal", f"User:{alice}",
        "--operation", "Write", "--operation", "Create", "--topic", prefix, "--resource-pattern-type", "prefixed")
    settle_acls(target.cluster, f"User:{alice}", 3)
    remaining = run(java, "kafka-acls", *way_in, "--list", "--principal", f"User:{alice}")
    assert acl_listing(remaining.stdout) == {
        ("TOPIC", prefix, "PREFIXED"): {(f"User:{alice}", "*", op, "ALLOW") for op in ("DESCRIBE", "READ")},
        ("GROUP", prefix, "PREFIXED"): {(f"User:{alice}", "*", "READ", "ALLOW")}}
    refused = run(java, "kafka-console-producer", *as_alice, "--topic", orders, "--command-property", "acks=all",
                  "--command-property", "max.block.ms=10000", input="order-3\n", ok=False)
    # An idempotent producer (the default) needs WRITE on some topic for InitProducerId, as in
    # Kafka (KIP-679): without one it is refused before it sends anything (the send fails, or
    # the producer fails first, then the tool: either way the cause is printed).
    assert "org.apache.kafka.common.errors.ClusterAuthorizationException: Cluster authorization failed." in \
        refused.stderr
    assert vdl.list_offset(orders, -1) == 2


# ------------------------------------------------------- kafka-reassign-partitions, kafka-leader-election


def test_reassign_partitions_moves_a_stream(java: JavaClients, target: JavaTarget, vdl: VdlClient,
                                            tmp_path: Path) -> None:
    """A one-replica stream moved to another node (on one node: to the node it is on already),
    its records kept."""
    way_in = target.tool_args()
    stream = named(target, "moved")
    vdl.create_stream(stream, replication_factor=1, exist_ok=False)
    produce(target.cluster, stream, ["a", "b", "c"])
    [source] = replicas(vdl, stream)[1]
    nodes = target.cluster.node_ids()
    destination = next((node for node in nodes if node != source), source)
    (tmp_path / "move.json").write_text(json.dumps({"version": 1, "topics": [{"topic": stream}]}))
    generated = run(java, "kafka-reassign-partitions", *way_in, "--generate",
                    "--topics-to-move-json-file", str(tmp_path / "move.json"),
                    "--broker-list", ",".join(map(str, nodes)))
    current, proposed = (json.loads(line) for line in generated.stdout.splitlines() if line.startswith("{"))
    data_dir = target.cluster.nodes[source].config.data_dir
    assert current == {"version": 1, "partitions": [{"topic": stream, "partition": 0, "replicas": [source],
                                                     "log_dirs": [str(data_dir)]}]}
    assert [(p["topic"], len(p["replicas"])) for p in proposed["partitions"]] == [(stream, 1)]

    def plan(to: list[int]) -> str:
        path = tmp_path / f"plan-{'-'.join(map(str, to))}.json"
        path.write_text(json.dumps({"version": 1, "partitions": [{"topic": stream, "partition": 0, "replicas": to,
                                                                  "log_dirs": ["any"] * len(to)}]}))
        return str(path)

    # VDL has no replication throttles (a move copies at the node's recovery_rate_bytes): the
    # brokers' throttle rates the tool sets first are refused (node settings are static), before
    # it asks for the move. (The topic configs naming the throttled replicas are accepted, as Kafka's.)
    throttled = run(java, "kafka-reassign-partitions", *way_in, "--execute", "--reassignment-json-file",
                    plan([destination]), "--throttle", "1000000", ok=False)
    assert throttled.returncode == 1
    assert ("Error: org.apache.kafka.common.errors.InvalidConfigurationException: leader.replication.throttled.rate, "
            "follower.replication.throttled.rate: node settings are static (node.toml or flags); a stream's own "
            "settings are altered on its TOPIC resource") in throttled.stdout
    absent = run(java, "kafka-reassign-partitions", *way_in, "--execute", "--reassignment-json-file", plan([9]),
                 ok=False)
    assert (absent.returncode, absent.stdout.splitlines()[0]) == (1, "Error: Unknown broker id 9")  # the tool's check
    assert replicas(vdl, stream)[1] == [source]
    executed = run(java, "kafka-reassign-partitions", *way_in, "--execute", "--reassignment-json-file",
                   plan([destination]))
    assert executed.stdout.splitlines()[-1] == f"Successfully started partition reassignment for {stream}-0"

    def verified() -> str | None:
        out = run(java, "kafka-reassign-partitions", *way_in, "--verify", "--reassignment-json-file",
                  plan([destination])).stdout
        return out if f"Reassignment of partition {stream}-0 is completed." in out else None

    out = wait_until(verified, timeout=60, message="the move to complete")
    assert out.splitlines() == ["Status of partition reassignment:",
                                f"Reassignment of partition {stream}-0 is completed.", "",
                                f"Clearing broker-level throttles on broker{'s' if len(nodes) > 1 else ''} "
                                f"{','.join(map(str, nodes))}",
                                f"Clearing topic-level throttles on topic {stream}"]
    # The stream's one replica moved, so its leader did too: Metadata may name none for a moment
    # after the move completes, until the new replica's election is known.
    wait_until(lambda: replicas(vdl, stream) == (destination, [destination]), timeout=10,
               message=lambda: f"{destination} to lead alone, not {replicas(vdl, stream)}")
    assert consume_all(target.cluster, stream, 3) == [(None, "a"), (None, "b"), (None, "c")]
    settle_reassignments(target.cluster)


def test_leader_election_moves_the_leader_to_the_preferred_replica(java: JavaClients, target: JavaTarget,
                                                                   vdl: VdlClient, tmp_path: Path) -> None:
    """With several replicas: reordered so that a follower is preferred, then elected. On one
    node the one replica is the preferred one already."""
    way_in = target.tool_args()
    stream = named(target, "elected")
    vdl.create_stream(stream, exist_ok=False)
    leader, nodes = replicas(vdl, stream)
    preferred = next((node for node in nodes if node != leader), leader)
    if preferred != leader:
        # Reorder the replicas (kafka-reassign-partitions) so that a follower is the preferred one.
        order = [preferred, *(node for node in nodes if node != preferred)]
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": stream, "partition": 0,
                                                                  "replicas": order, "log_dirs": ["any"] * 3}]}))
        run(java, "kafka-reassign-partitions", *way_in, "--execute", "--reassignment-json-file", str(plan))
        wait_until(lambda: replicas(vdl, stream)[1] == order, timeout=30, message="the new replica order")
        settle_reassignments(target.cluster)
        assert replicas(vdl, stream)[0] == leader

        elected = run(java, "kafka-leader-election", *way_in, "--election-type", "preferred",
                      "--topic", stream, "--partition", "0")
        assert elected.stdout == f"Successfully completed leader election (PREFERRED) for partitions {stream}-0\n"
        assert wait_until(lambda: replicas(vdl, stream)[0] == preferred, timeout=30,
                          message=lambda: f"{preferred} to lead, not {replicas(vdl, stream)}")
    again = run(java, "kafka-leader-election", *way_in, "--election-type", "preferred", "--topic", stream,
                "--partition", "0")
    assert again.stdout == f"Valid replica already elected for partitions {stream}-0\n"
    # An unclean election of a stream with a leader is not needed, as Kafka answers for a live leader.
    unclean = run(java, "kafka-leader-election", *way_in, "--election-type", "unclean", "--topic", stream,
                  "--partition", "0")
    assert unclean.stdout == f"Valid replica already elected for partitions {stream}-0\n"
    assert replicas(vdl, stream)[0] == preferred


# -------------------------------------------------------------------------- kafka-metadata-quorum


ZERO_DIRECTORY_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # Uuid.ZERO_UUID as the tool prints it: VDL has no directory ids


def test_metadata_quorum_describe_status_and_replication(java: JavaClients, target: JavaTarget) -> None:
    """kafka-metadata-quorum sees VDL's metadata group as the quorum (DescribeQuorum, asked of any
    node, answered by the metadata leader): its leader, every node a voter with its listeners, no
    observers; --replication one row per voter, the leader first, with the followers' last fetch
    and caught-up times. About 0.3 s a target."""
    way_in = target.tool_args()
    described = raw_request(target.plain, m.DescribeClusterRequest())
    started_ms = int(time.time() * 1000)
    status_out = run(java, "kafka-metadata-quorum", *way_in, "describe", "--status").stdout
    replication_out = run(java, "kafka-metadata-quorum", *way_in, "describe", "--replication").stdout
    ended_ms = int(time.time() * 1000)
    leader, nodes = described.controller_id, target.cluster.node_ids()
    assert leader in nodes

    status = dict(line.split(":", 1) for line in status_out.splitlines())
    status = {key: value.strip() for key, value in status.items()}
    assert list(status) == ["ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag",
                            "MaxFollowerLagTimeMs", "CurrentVoters", "CurrentObservers"]
    assert (status["ClusterId"], status["LeaderId"]) == (described.cluster_id, str(leader))
    assert int(status["LeaderEpoch"]) >= 1
    high_watermark = int(status["HighWatermark"])
    assert high_watermark > 0
    assert int(status["MaxFollowerLag"]) >= 0
    configs = {i: target.cluster.nodes[i].config for i in nodes}
    assert json.loads(status["CurrentVoters"]) == [
        {"id": i,  # no "directoryId": Kafka 4.4's tool leaves a zero one out
         "endpoints": [f"{lst.protocol}://{configs[i].advertised_address(lst)}" for lst in configs[i].client_listeners]}
        for i in nodes]
    assert status["CurrentObservers"] == "[]"

    lines = [line.split() for line in replication_out.splitlines()]
    assert lines[0] == ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                        "LastCaughtUpTimestamp", "Status"]
    rows = [dict(zip(lines[0], fields, strict=True)) for fields in lines[1:]]
    assert [(int(r["NodeId"]), r["Status"], r["DirectoryId"]) for r in rows] == (
        [(leader, "Leader", ZERO_DIRECTORY_ID)] + [(i, "Follower", ZERO_DIRECTORY_ID) for i in nodes if i != leader])
    leader_end = int(rows[0]["LogEndOffset"])
    assert leader_end >= high_watermark  # asked after --status: the leader's log only grows
    assert [int(r["Lag"]) for r in rows] == [leader_end - int(r["LogEndOffset"]) for r in rows]
    # The leader reports its own timestamps as now, a follower's when the leader last heard from it
    # (heartbeats: well within 5 s on a healthy cluster) and last saw it hold the whole log.
    assert started_ms <= int(rows[0]["LastFetchTimestamp"]) == int(rows[0]["LastCaughtUpTimestamp"]) <= ended_ms
    for row in rows[1:]:
        assert started_ms - 5000 <= int(row["LastCaughtUpTimestamp"]) <= int(row["LastFetchTimestamp"]) <= ended_ms
    assert 0 <= int(status["MaxFollowerLagTimeMs"]) <= 5000

    # Every node answers as the leader does: a follower forwards the request there.
    request = m.DescribeQuorumRequest(topics=[m.DescribeQuorumRequest.TopicData(
        topic_name="__cluster_metadata", partitions=[m.DescribeQuorumRequest.PartitionData(partition_index=0)])])
    for i in nodes:
        [partition] = raw_request(target.cluster.address(i, "PLAINTEXT"), request).topics[0].partitions
        assert (partition.error_code, partition.leader_id, [v.replica_id for v in partition.current_voters]) == (
            0, leader, nodes)


# ------------------------------------------------------------------- kafka-log-dirs, kafka-get-offsets


def test_log_dirs_describe(java: JavaClients, target: JavaTarget, vdl: VdlClient) -> None:
    stream = named(target, "sized")
    vdl.create_stream(stream, exist_ok=False)
    produce(target.cluster, stream, ["x" * 100] * 3)
    nodes = target.cluster.node_ids()

    def described() -> dict[str, Any] | None:
        """The report once every replica has all of the stream (acks=all waits for two of three)."""
        out = run(java, "kafka-log-dirs", *target.tool_args(), "--describe",
                  "--topic-list", stream).stdout.splitlines()
        assert out[:2] == ["Querying brokers for log directories information",
                           f"Received log directory information from brokers {','.join(map(str, nodes))}"]
        report = json.loads(out[2])
        sizes = {p["size"] for b in report["brokers"] for d in b["logDirs"] for p in d["partitions"]}
        return report if len(sizes) == 1 else None

    report = wait_until(described, timeout=30, message="the replicas to hold the same bytes")
    assert [b["broker"] for b in report["brokers"]] == nodes
    sizes = set()
    for broker in report["brokers"]:
        [log_dir] = broker["logDirs"]
        assert (log_dir["logDir"], log_dir["error"]) == (
            str(target.cluster.nodes[broker["broker"]].config.data_dir), None)
        [partition] = log_dir["partitions"]
        assert (partition["partition"], partition["offsetLag"], partition["isFuture"]) == (f"{stream}-0", 0, False)
        sizes.add(partition["size"])
    [size] = sizes  # every replica holds the same entries
    assert size > 300


def test_get_offsets_earliest_latest_and_by_time(java: JavaClients, target: JavaTarget, vdl: VdlClient) -> None:
    stream = named(target, "timed")
    vdl.create_stream(stream, exist_ok=False)
    base = 1_700_000_000_000
    produce(target.cluster, stream, ["a", "b", "c", "d"], timestamps=[base, base + 1000, base + 3000, base + 2000])
    answers = [run(java, "kafka-get-offsets", *target.tool_args(), "--topic", stream, "--time", spec).stdout
               for spec in ("earliest", "latest", str(base + 500), "max-timestamp")]
    assert answers == [f"{stream}:0:0\n", f"{stream}:0:4\n", f"{stream}:0:1\n", f"{stream}:0:2\n"]


def test_delete_records_moves_the_log_start(java: JavaClients, target: JavaTarget, vdl: VdlClient,
                                            tmp_path: Path) -> None:
    way_in = target.tool_args()
    stream = named(target, "trimmed")
    vdl.create_stream(stream, exist_ok=False)
    produce(target.cluster, stream, ["a", "b", "c", "d", "e"])
    (tmp_path / "offsets.json").write_text(json.dumps({"version": 1, "partitions": [
        {"topic": stream, "partition": 0, "offset": 3}]}))
    deleted = run(java, "kafka-delete-records", *way_in, "--offset-json-file", str(tmp_path / "offsets.json"))
    assert deleted.stdout.splitlines() == ["Executing records delete operation", "Records delete operation completed:",
                                           f"partition: {stream}-0\tlow_watermark: 3"]
    earliest = run(java, "kafka-get-offsets", *way_in, "--topic", stream, "--time", "earliest")
    assert earliest.stdout == f"{stream}:0:3\n"
    assert vdl.list_offset(stream, -2) == 3
    consumed = run(java, "kafka-console-consumer", *FETCH_WAIT, *way_in, "--topic", stream, "--from-beginning",
                   "--max-messages", "2")
    assert consumed.stdout == "d\ne\n"


# ------------------------------------------------------------------------------ kafka-transactions


def test_transactions_describe_producers_and_find_hanging_at_every_replica(java: JavaClients, target: JavaTarget,
                                                                           vdl: VdlClient) -> None:
    """describe-producers --broker-id N and find-hanging --broker-id N ask node N about its own
    replicas, followers included (as a Kafka broker answers DescribeProducers wherever it has the
    log): every replica names the idempotent producer that wrote the stream. About 2 s a target."""
    way_in = target.tool_args()
    stream = named(target, "producers")
    vdl.create_stream(stream, exist_ok=False)
    run(java, "kafka-console-producer", *way_in, "--topic", stream, "--command-property", "acks=all",
        input="one\ntwo\n")  # the Java producer is idempotent by default: one producer id, sequences 0 and 1

    def producers(node: int) -> list[dict[str, str]]:
        out = run(java, "kafka-transactions", *way_in, "describe-producers", "--topic", stream, "--partition", "0",
                  "--broker-id", str(node)).stdout
        header, *rows = (line.split("\t") for line in out.splitlines())
        return [{h.strip(): v.strip() for h, v in zip(header, row, strict=False) if h.strip()} for row in rows]

    printed = run(java, "kafka-console-consumer", *FETCH_WAIT, *way_in, "--topic", stream, "--from-beginning", "--max-messages",
                  "2", "--formatter-property", "print.timestamp=true").stdout
    timestamps = [int(line.split("\t")[0].removeprefix("CreateTime:")) for line in printed.splitlines()]
    leader, nodes = replicas(vdl, stream)
    [at_leader] = producers(leader)
    # LastTimestamp: the max timestamp of the producer's last batch ("two"'s, or both records' if
    # they went in one batch), the same at every replica.
    assert (at_leader["ProducerEpoch"], at_leader["LastSequence"], at_leader["LastTimestamp"],
            at_leader["CurrentTransactionStartOffset"]) == ("0", "1", str(max(timestamps)), "None")
    for node in nodes:  # a follower applies the batches a moment after the leader committed them
        wait_until(lambda n=node: producers(n) == [at_leader], timeout=10,
                   message=lambda n=node: f"node {n}: {producers(n)}")
        hanging = run(java, "kafka-transactions", *way_in, "find-hanging", "--broker-id", str(node))
        assert hanging.stdout.split() == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                                          "StartOffset", "LastTimestamp", "Duration(min)"]


# ------------------------------------------------------------------------------------ perf tests


def test_producer_and_consumer_perf_tests(java: JavaClients, target: JavaTarget, vdl: VdlClient) -> None:
    way_in = target.tool_args()
    stream = named(target, "perf")
    vdl.create_stream(stream, exist_ok=False)
    produce(target.cluster, stream, ["before"])
    before = vdl.list_offset(stream, -1)
    sent = run(java, "kafka-producer-perf-test", *way_in, "--topic", stream, "--num-records", "3000",
               "--record-size", "100", "--throughput", "-1", "--command-property", "acks=all")
    summary = sent.stdout.splitlines()[-1]
    match = re.fullmatch(r"(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
                         r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.", summary)
    assert match is not None, summary
    assert int(match.group(1)) == 3000
    assert vdl.list_offset(stream, -1) == before + 3000

    read = run(java, "kafka-consumer-perf-test", *way_in, "--topic", stream, "--num-records", str(before + 3000),
               "--timeout", "60000")
    header, values = read.stdout.splitlines()[-2:]
    stats = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in values.split(",")], strict=True))
    assert int(stats["data.consumed.in.nMsg"]) == before + 3000
    assert float(stats["data.consumed.in.MB"]) == pytest.approx((3000 * 100 + len("before")) / (1 << 20), abs=1e-4)
