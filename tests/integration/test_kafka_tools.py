"""Apache Kafka 4.4's command-line tools (bin/kafka-*.sh, run by their main class) against a
3-node cluster: what each prints, parsed, and what the cluster holds afterwards, read back with
other clients (librdkafka's admin client, VDL's own client, raw requests).

The cluster has two listeners: PLAINTEXT, where the tools run as User:ANONYMOUS, and SASL_SSL
(TLS + SCRAM-SHA-512). It runs the ACL authorizer with ANONYMOUS as a super user, so the tools on
the plain listener may do anything while ACLs added by kafka-acls decide what a SCRAM user may do
on the secured one. No leader balancing runs by itself, so only kafka-leader-election moves a
leader to its preferred replica here.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.support.cluster import start_cluster
from tests.support.java_client import ToolResult, kafka_tool, write_properties
from tests.support.kafka import raw_request
from tests.support.security import ADMIN_PASSWORD, ADMIN_PASSWORD_ENV, ADMIN_USER, TlsMaterial
from tests.support.waiting import wait_until
from vdl_broker.listeners import parse_bootstrap_users
from vdl_client import ClientSettings, VdlClient
from vdl_dev.dev_cluster import DevCluster
from vdl_wire import messages as m

ALICE, ALICE_PASSWORD = "alice", "alice-Pa55-tools"
DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs' config source
TOPIC = 2  # DescribeConfigs' resource type


@pytest.fixture(scope="module")
def tools_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                  tls_material: TlsMaterial) -> DevCluster:
    bootstrap = parse_bootstrap_users([{"name": ADMIN_USER, "mechanism": "SCRAM-SHA-512",
                                        "password_env": ADMIN_PASSWORD_ENV}], "bootstrap_users")
    # No group waits for more members: every group here has one, and each wait costs seconds.
    settings = {"authorizer": "acl", "super_users": [ADMIN_USER, "ANONYMOUS"], "bootstrap_users": bootstrap,
                "leader_balance_interval_ms": 0, "group_initial_rebalance_delay_ms": 0}
    return start_cluster(tmp_path_factory.mktemp("kafka-tools"), nodes=3, settings=settings,
                         protocols=("PLAINTEXT", "SASL_SSL"), tls_dir=tls_material.directory,
                         env={ADMIN_PASSWORD_ENV: ADMIN_PASSWORD},
                         register=lambda cluster: request.addfinalizer(cluster.kill_all))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, tls_material: TlsMaterial) -> Path:
    """Where the tools' input files go: admin.properties and alice.properties log in over
    SASL_SSL (the JVM reads the CA's PEM file as its trust store)."""
    directory = tmp_path_factory.mktemp("tool-files")
    for name, user, password in (("admin", ADMIN_USER, ADMIN_PASSWORD), ("alice", ALICE, ALICE_PASSWORD)):
        write_properties(directory / f"{name}.properties", {
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": f'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                f'username="{user}" password="{password}";',
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(tls_material.ca)})
    return directory


@pytest.fixture(scope="module")
def vdl(tools_cluster: DevCluster) -> Iterator[VdlClient]:
    with VdlClient(ClientSettings.from_bootstrap(tools_cluster.bootstrap_servers, deadline_ms=30_000)) as client:
        yield client


def run(tool: str, *args: str, input: str | None = None, ok: bool = True) -> ToolResult:
    result = kafka_tool(tool, *args, input=input, timeout_s=120)
    if ok:
        assert result.returncode == 0, f"{tool} {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n" \
                                       f"{result.stderr[-4000:]}"
    return result


def parallel(*calls: Callable[[], Any]) -> list[Any]:
    """Independent tool runs at once: most of each is a JVM starting, and they overlap well."""
    with ThreadPoolExecutor(len(calls)) as pool:
        return [future.result() for future in [pool.submit(call) for call in calls]]


def confluent_admin(cluster: DevCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def settle_configs(cluster: DevCluster, stream: str, expected: dict[str, str]) -> None:
    """Wait until every node answers DescribeConfigs with the stream's configs `expected`: a
    change is answered once the metadata group committed it, and each node applies it a moment
    later (then a tool describes the same whichever node it asks)."""
    request = m.DescribeConfigsRequest(resources=[m.DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=TOPIC, resource_name=stream, configuration_keys=None)])

    def on_each_node() -> list[dict[str, str]]:
        results = [raw_request(cluster.address(i), request).results[0] for i in cluster.node_ids()]
        return [{c.name: c.value for c in r.configs if c.config_source == DYNAMIC_TOPIC_CONFIG} for r in results]

    wait_until(lambda: on_each_node() == [expected] * 3, timeout=10, message=lambda: f"{on_each_node()}")


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


def test_topics_create_describe_list_delete(tools_cluster: DevCluster, vdl: VdlClient) -> None:
    bs = tools_cluster.bootstrap_servers
    created, refused, placed, compacted = parallel(
        lambda: run("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "tools-topic",
                    "--config", "retention.ms=3600000", "--config", "max.message.bytes=200000"),
        lambda: run("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "tools-three",
                    "--partitions", "3", ok=False),
        lambda: run("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "tools-placed",
                    "--replica-assignment", "1:2:3", ok=False),
        lambda: run("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "tools-compacted",
                    "--config", "cleanup.policy=compact", ok=False))
    assert created.stdout == "Created topic tools-topic.\n"
    assert (refused.returncode, refused.stdout) == (
        1, "Error while executing topic command : a VDL log stream has exactly one partition\n")
    assert (placed.returncode, placed.stdout) == (
        1, "Error while executing topic command : VDL places replicas itself: give a replication factor\n")
    assert compacted.returncode == 1
    assert compacted.stdout.startswith("Error while executing topic command : unknown stream config 'cleanup.policy'")
    assert not any(vdl.stream_exists(name) for name in ("tools-three", "tools-placed", "tools-compacted"))
    settle_configs(tools_cluster, "tools-topic", {"retention.ms": "3600000", "max.message.bytes": "200000"})
    assert stream_configs(tools_cluster, "tools-topic") == {"retention.ms": ("3600000", DYNAMIC_TOPIC_CONFIG),
                                                            "max.message.bytes": ("200000", DYNAMIC_TOPIC_CONFIG)}

    described, listed = parallel(
        lambda: run("kafka-topics", "--bootstrap-server", bs, "--describe", "--topic", "tools-topic"),
        lambda: run("kafka-topics", "--bootstrap-server", bs, "--list"))
    topic, partitions = describe_topic(described.stdout)
    leader, nodes = replicas(vdl, "tools-topic")
    assert topic == {"Topic": "tools-topic", "TopicId": topic["TopicId"], "PartitionCount": "1",
                     "ReplicationFactor": "3", "Configs": "max.message.bytes=200000,retention.ms=3600000"}
    assert [(p["Partition"], p["Leader"], p["Replicas"]) for p in partitions] == [
        ("0", str(leader), ",".join(map(str, nodes)))]
    assert sorted(partitions[0]["Isr"].split(",")) == ["1", "2", "3"]
    assert "tools-topic" in listed.stdout.splitlines()

    grown = run("kafka-topics", "--bootstrap-server", bs, "--alter", "--topic", "tools-topic", "--partitions", "3",
                ok=False)
    assert (grown.returncode, grown.stdout) == (1, (
        "Error while executing topic command : VDL streams have exactly one partition (each is one Raft group): "
        "stream 'tools-topic' has 1 and cannot have 3\n"))
    assert len(vdl.metadata(["tools-topic"]).topics[0].partitions) == 1

    deleted = run("kafka-topics", "--bootstrap-server", bs, "--delete", "--topic", "tools-topic")
    assert deleted.stdout == ""
    # Answered once the metadata group committed the deletion; a node may apply it a moment later.
    wait_until(lambda: "tools-topic" not in vdl.list_streams(), timeout=10, message="the stream to go")


# ------------------------------------------------------------------------ console producer/consumer


def test_console_producer_and_consumer_with_keys(tools_cluster: DevCluster, vdl: VdlClient) -> None:
    bs = tools_cluster.bootstrap_servers
    vdl.create_stream("tools-console", exist_ok=False)
    records = [("k1", "first value"), ("k2", "zwei | the separator again"), ("k3", "третий"), ("k1", "  padded  ")]
    produced = run("kafka-console-producer", "--bootstrap-server", bs, "--topic", "tools-console",
                   "--reader-property", "parse.key=true", "--reader-property", "key.separator=|",
                   "--command-property", "acks=all", input="".join(f"{k}|{v}\n" for k, v in records))
    assert produced.stdout == ""
    assert consume_all(tools_cluster, "tools-console", len(records)) == records
    consumed = run("kafka-console-consumer", "--bootstrap-server", bs, "--topic", "tools-console",
                   "--from-beginning", "--max-messages", "3", "--formatter-property", "print.key=true",
                   "--formatter-property", "key.separator=|")
    assert consumed.stdout == "".join(f"{k}|{v}\n" for k, v in records[:3])
    assert "Processed a total of 3 messages" in consumed.stderr


# --------------------------------------------------------------------------- kafka-consumer-groups


def test_consumer_groups_list_describe_reset_delete(tools_cluster: DevCluster, vdl: VdlClient) -> None:
    bs = tools_cluster.bootstrap_servers
    vdl.create_stream("tools-grouped", exist_ok=False)
    produce(tools_cluster, "tools-grouped", [f"v{i}" for i in range(5)])
    # One record per poll, so the offset committed as the consumer closes is exactly what it read.
    consumed = run("kafka-console-consumer", "--bootstrap-server", bs, "--topic", "tools-grouped",
                   "--group", "tools-group", "--from-beginning", "--max-messages", "2",
                   "--command-property", "max.poll.records=1")
    assert consumed.stdout == "v0\nv1\n"

    listed, described = parallel(
        lambda: run("kafka-consumer-groups", "--bootstrap-server", bs, "--list"),
        lambda: run("kafka-consumer-groups", "--bootstrap-server", bs, "--describe", "--group", "tools-group"))
    assert "tools-group" in listed.stdout.splitlines()
    assert table(described.stdout) == [{"GROUP": "tools-group", "TOPIC": "tools-grouped", "PARTITION": "0",
                                        "CURRENT-OFFSET": "2", "LOG-END-OFFSET": "5", "LAG": "3",
                                        "CONSUMER-ID": "-", "HOST": "-", "CLIENT-ID": "-"}]
    assert "Consumer group 'tools-group' has no active members." in described.stderr

    def reset(*how: str) -> list[dict[str, str]]:
        return table(run("kafka-consumer-groups", "--bootstrap-server", bs, "--group", "tools-group",
                         "--topic", "tools-grouped", "--reset-offsets", *how, "--execute").stdout)

    def committed() -> int:
        client = confluent_admin(tools_cluster)
        wanted = ConsumerGroupTopicPartitions("tools-group", [TopicPartition("tools-grouped", 0)])
        [future] = client.list_consumer_group_offsets([wanted]).values()
        [partition] = future.result(timeout=30).topic_partitions
        return partition.offset

    assert reset("--to-earliest") == [{"GROUP": "tools-group", "TOPIC": "tools-grouped", "PARTITION": "0",
                                       "NEW-OFFSET": "0"}]
    assert committed() == 0
    assert reset("--to-offset", "4") == [{"GROUP": "tools-group", "TOPIC": "tools-grouped", "PARTITION": "0",
                                          "NEW-OFFSET": "4"}]
    assert committed() == 4

    deleted = run("kafka-consumer-groups", "--bootstrap-server", bs, "--delete", "--group", "tools-group")
    assert deleted.stdout == "Deletion of requested consumer groups ('tools-group') was successful.\n"
    assert committed() == -1001  # librdkafka's OFFSET_INVALID: the group has no offset any more


# ------------------------------------------------------------------------------------ kafka-configs


def test_configs_alter_and_describe(tools_cluster: DevCluster, vdl: VdlClient) -> None:
    bs = tools_cluster.bootstrap_servers
    vdl.create_stream("tools-configured", config={"max.message.bytes": "100000"}, exist_ok=False)
    added = run("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "topics",
                "--entity-name", "tools-configured", "--add-config", "retention.ms=7200000,segment.bytes=1048576")
    assert added.stdout == "Completed updating config for topic tools-configured.\n"
    removed = run("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "topics",
                  "--entity-name", "tools-configured", "--delete-config", "max.message.bytes")
    assert removed.stdout == "Completed updating config for topic tools-configured.\n"
    settle_configs(tools_cluster, "tools-configured", {"retention.ms": "7200000", "segment.bytes": "1048576"})
    assert stream_configs(tools_cluster, "tools-configured") == {
        "retention.ms": ("7200000", DYNAMIC_TOPIC_CONFIG), "segment.bytes": ("1048576", DYNAMIC_TOPIC_CONFIG)}

    topic, broker, brokers, users = parallel(
        lambda: run("kafka-configs", "--bootstrap-server", bs, "--describe", "--entity-type", "topics",
                    "--entity-name", "tools-configured"),
        lambda: run("kafka-configs", "--bootstrap-server", bs, "--describe", "--entity-type", "brokers",
                    "--entity-name", "2", "--all"),
        lambda: run("kafka-configs", "--bootstrap-server", bs, "--describe", "--entity-type", "brokers"),
        lambda: run("kafka-configs", "--bootstrap-server", bs, "--describe", "--entity-type", "users", ok=False))
    # Describing users asks for their client quotas too, an API VDL does not serve.
    assert users.returncode == 1
    assert ("org.apache.kafka.common.errors.UnsupportedVersionException: The node does not support "
            "DESCRIBE_CLIENT_QUOTAS") in users.stderr
    assert topic.stdout.splitlines() == [
        "Dynamic configs for topic tools-configured are:",
        "  retention.ms=7200000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=7200000, "
        "DEFAULT_CONFIG:log.retention.ms=-1}",
        "  segment.bytes=1048576 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.bytes=1048576, "
        "DEFAULT_CONFIG:log.segment.bytes=1073741824}"]
    node_configs = dict(re.findall(r"^  (\S+?)=(\S*) sensitive=", broker.stdout, re.MULTILINE))
    assert broker.stdout.splitlines()[0] == "All configs for broker 2 are:"
    assert node_configs["broker.id"] == "2"
    assert node_configs["listeners"] == (f"PLAINTEXT://{tools_cluster.address(2, 'PLAINTEXT')},"
                                         f"SASL_SSL://{tools_cluster.address(2, 'SASL_SSL')}")
    assert node_configs["num.partitions"] == "1"
    # Node settings are static (node.toml and flags): no node has a dynamic one.
    assert brokers.stdout.splitlines() == ["Dynamic configs for broker 1 are:", "Dynamic configs for broker 2 are:",
                                           "Dynamic configs for broker 3 are:",
                                           "Default configs for brokers in the cluster are:"]


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


def test_acls_decide_what_a_scram_user_does_on_the_secured_listener(tools_cluster: DevCluster, vdl: VdlClient,
                                                                     files: Path) -> None:
    bs, secured = tools_cluster.bootstrap_servers, tools_cluster.bootstrap_for("SASL_SSL")
    admin_login, alice_login = str(files / "admin.properties"), str(files / "alice.properties")
    for stream in ("app-orders", "tools-private"):
        vdl.create_stream(stream, exist_ok=False)
    user = run("kafka-configs", "--bootstrap-server", secured, "--command-config", admin_login, "--alter",
               "--entity-type", "users", "--entity-name", ALICE,
               "--add-config", f"SCRAM-SHA-512=[iterations=4096,password={ALICE_PASSWORD}]")
    assert user.stdout == f"Completed updating config for user {ALICE}.\n"

    # One after the other: kafka-acls looks for the ACLs that exist already and adds only the others.
    producer_acls = run("kafka-acls", "--bootstrap-server", bs, "--add", "--allow-principal", f"User:{ALICE}",
                        "--producer", "--topic", "app-", "--resource-pattern-type", "prefixed")
    assert acl_listing(producer_acls.stdout) == {("TOPIC", "app-", "PREFIXED"): {
        (f"User:{ALICE}", "*", op, "ALLOW") for op in ("DESCRIBE", "CREATE", "WRITE")}}
    consumer_acls = run("kafka-acls", "--bootstrap-server", bs, "--add", "--allow-principal", f"User:{ALICE}",
                        "--consumer", "--topic", "app-", "--group", "app-", "--resource-pattern-type", "prefixed")
    assert consumer_acls.stdout.splitlines()[0] == (
        f"Acl (pattern=ResourcePattern(resourceType=TOPIC, name=app-, patternType=PREFIXED), entry=(principal="
        f"User:{ALICE}, host=*, operation=DESCRIBE, permissionType=ALLOW)) already exists.")
    assert acl_listing(consumer_acls.stdout) == {
        ("TOPIC", "app-", "PREFIXED"): {(f"User:{ALICE}", "*", "READ", "ALLOW")},
        ("GROUP", "app-", "PREFIXED"): {(f"User:{ALICE}", "*", "READ", "ALLOW")}}
    expected = {("TOPIC", "app-", "PREFIXED"): {(f"User:{ALICE}", "*", op, "ALLOW")
                                                for op in ("DESCRIBE", "CREATE", "WRITE", "READ")},
                ("GROUP", "app-", "PREFIXED"): {(f"User:{ALICE}", "*", "READ", "ALLOW")}}
    listed = run("kafka-acls", "--bootstrap-server", bs, "--list")
    assert acl_listing(listed.stdout) == expected

    # Alice on the SASL_SSL listener: she sees, writes and reads app-* only.
    alice_topics, produced = parallel(
        lambda: run("kafka-topics", "--bootstrap-server", secured, "--command-config", alice_login, "--list"),
        lambda: run("kafka-console-producer", "--bootstrap-server", secured, "--command-config", alice_login,
                    "--topic", "app-orders", "--command-property", "acks=all", input="order-1\norder-2\n"))
    assert alice_topics.stdout.split() == ["app-orders"]
    assert produced.returncode == 0
    consumed = run("kafka-console-consumer", "--bootstrap-server", secured, "--command-config", alice_login,
                   "--topic", "app-orders", "--group", "app-readers", "--from-beginning", "--max-messages", "2")
    assert consumed.stdout == "order-1\norder-2\n"
    assert consume_all(tools_cluster, "app-orders", 2) == [(None, "order-1"), (None, "order-2")]

    removed = run("kafka-acls", "--bootstrap-server", bs, "--remove", "--force", "--allow-principal",
                  f"User:{ALICE}", "--operation", "Write", "--operation", "Create", "--topic", "app-",
                  "--resource-pattern-type", "prefixed")
    assert removed.returncode == 0
    remaining, refused = parallel(
        lambda: run("kafka-acls", "--bootstrap-server", bs, "--list", "--principal", f"User:{ALICE}"),
        lambda: run("kafka-console-producer", "--bootstrap-server", secured, "--command-config", alice_login,
                    "--topic", "app-orders", "--command-property", "acks=all", "--command-property",
                    "max.block.ms=10000", input="order-3\n", ok=False))
    assert acl_listing(remaining.stdout) == {
        ("TOPIC", "app-", "PREFIXED"): {(f"User:{ALICE}", "*", op, "ALLOW") for op in ("DESCRIBE", "READ")},
        ("GROUP", "app-", "PREFIXED"): {(f"User:{ALICE}", "*", "READ", "ALLOW")}}
    # An idempotent producer (the default) needs WRITE on some topic for InitProducerId, as in
    # Kafka (KIP-679): without one it is refused before it sends anything.
    assert "org.apache.kafka.common.errors.ClusterAuthorizationException: Cluster authorization failed." in \
        refused.stderr.splitlines()
    assert vdl.list_offset("app-orders", -1) == 2


# ------------------------------------------------------- kafka-reassign-partitions, kafka-leader-election


def test_reassign_partitions_moves_a_stream(tools_cluster: DevCluster, vdl: VdlClient, tmp_path: Path) -> None:
    bs = tools_cluster.bootstrap_servers
    vdl.create_stream("tools-moved", replication_factor=1, exist_ok=False)
    produce(tools_cluster, "tools-moved", ["a", "b", "c"])
    [source] = replicas(vdl, "tools-moved")[1]
    target = next(node for node in tools_cluster.node_ids() if node != source)
    (tmp_path / "move.json").write_text(json.dumps({"version": 1, "topics": [{"topic": "tools-moved"}]}))
    generated = run("kafka-reassign-partitions", "--bootstrap-server", bs, "--generate",
                    "--topics-to-move-json-file", str(tmp_path / "move.json"), "--broker-list", "1,2,3")
    current, proposed = (json.loads(line) for line in generated.stdout.splitlines() if line.startswith("{"))
    data_dir = tools_cluster.nodes[source].config.data_dir
    assert current == {"version": 1, "partitions": [{"topic": "tools-moved", "partition": 0, "replicas": [source],
                                                     "log_dirs": [str(data_dir)]}]}
    assert [(p["topic"], len(p["replicas"])) for p in proposed["partitions"]] == [("tools-moved", 1)]

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "tools-moved", "partition": 0,
                                                              "replicas": [target], "log_dirs": ["any"]}]}))
    # VDL has no replication throttles (a move copies at the node's recovery_rate_bytes): setting
    # them is refused, before the tool asks for the move.
    throttled = run("kafka-reassign-partitions", "--bootstrap-server", bs, "--execute",
                    "--reassignment-json-file", str(plan), "--throttle", "1000000", ok=False)
    assert throttled.returncode == 1
    assert ("Error: org.apache.kafka.common.errors.InvalidConfigurationException: unknown stream config "
            "'leader.replication.throttled.replicas'") in throttled.stdout
    assert replicas(vdl, "tools-moved")[1] == [source]
    executed = run("kafka-reassign-partitions", "--bootstrap-server", bs, "--execute",
                   "--reassignment-json-file", str(plan))
    assert executed.stdout.splitlines()[-1] == "Successfully started partition reassignment for tools-moved-0"

    def verified() -> str | None:
        out = run("kafka-reassign-partitions", "--bootstrap-server", bs, "--verify",
                  "--reassignment-json-file", str(plan)).stdout
        return out if "Reassignment of partition tools-moved-0 is completed." in out else None

    out = wait_until(verified, timeout=60, message="the move to complete")
    assert out.splitlines() == ["Status of partition reassignment:",
                                "Reassignment of partition tools-moved-0 is completed.", "",
                                "Clearing broker-level throttles on brokers 1,2,3",
                                "Clearing topic-level throttles on topic tools-moved"]
    # The stream's one replica moved, so its leader did too: Metadata may name none for a moment
    # after the move completes, until the new replica's election is known.
    wait_until(lambda: replicas(vdl, "tools-moved") == (target, [target]), timeout=10,
               message=lambda: f"{target} to lead alone, not {replicas(vdl, 'tools-moved')}")
    assert consume_all(tools_cluster, "tools-moved", 3) == [(None, "a"), (None, "b"), (None, "c")]


def test_leader_election_moves_the_leader_to_the_preferred_replica(tools_cluster: DevCluster, vdl: VdlClient,
                                                                   tmp_path: Path) -> None:
    bs = tools_cluster.bootstrap_servers
    vdl.create_stream("tools-elected", exist_ok=False)
    leader, nodes = replicas(vdl, "tools-elected")
    # Reorder the replicas (kafka-reassign-partitions) so that a follower is the preferred one.
    preferred = next(node for node in nodes if node != leader)
    order = [preferred, *(node for node in nodes if node != preferred)]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "tools-elected", "partition": 0,
                                                              "replicas": order, "log_dirs": ["any"] * 3}]}))
    run("kafka-reassign-partitions", "--bootstrap-server", bs, "--execute", "--reassignment-json-file", str(plan))
    wait_until(lambda: replicas(vdl, "tools-elected")[1] == order, timeout=30, message="the new replica order")
    assert replicas(vdl, "tools-elected")[0] == leader

    elected = run("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "preferred",
                  "--topic", "tools-elected", "--partition", "0")
    assert elected.stdout == "Successfully completed leader election (PREFERRED) for partitions tools-elected-0\n"
    assert wait_until(lambda: replicas(vdl, "tools-elected")[0] == preferred, timeout=30,
                      message=lambda: f"{preferred} to lead, not {replicas(vdl, 'tools-elected')}")
    again, unclean = parallel(
        lambda: run("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "preferred",
                    "--topic", "tools-elected", "--partition", "0"),
        lambda: run("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "unclean",
                    "--topic", "tools-elected", "--partition", "0", ok=False))
    assert again.stdout == "Valid replica already elected for partitions tools-elected-0\n"
    assert (unclean.returncode, unclean.stdout) == (1, (
        "Error completing leader election (UNCLEAN) for partition: tools-elected-0: org.apache.kafka.common.errors."
        "InvalidRequestException: only preferred-replica elections (type 0): Raft elects with a majority\n"))
    assert replicas(vdl, "tools-elected")[0] == preferred


# ------------------------------------------------------------------- kafka-log-dirs, kafka-get-offsets


def test_log_dirs_describe(tools_cluster: DevCluster, vdl: VdlClient) -> None:
    vdl.create_stream("tools-sized", exist_ok=False)
    produce(tools_cluster, "tools-sized", ["x" * 100] * 3)

    def described() -> dict[str, Any] | None:
        """The report once every replica has all of the stream (acks=all waits for two of three)."""
        out = run("kafka-log-dirs", "--bootstrap-server", tools_cluster.bootstrap_servers, "--describe",
                  "--topic-list", "tools-sized").stdout.splitlines()
        assert out[:2] == ["Querying brokers for log directories information",
                           "Received log directory information from brokers 1,2,3"]
        report = json.loads(out[2])
        sizes = {p["size"] for b in report["brokers"] for d in b["logDirs"] for p in d["partitions"]}
        return report if len(sizes) == 1 else None

    report = wait_until(described, timeout=30, message="the replicas to hold the same bytes")
    assert [b["broker"] for b in report["brokers"]] == [1, 2, 3]
    sizes = set()
    for broker in report["brokers"]:
        [log_dir] = broker["logDirs"]
        assert (log_dir["logDir"], log_dir["error"]) == (str(tools_cluster.nodes[broker["broker"]].config.data_dir),
                                                         None)
        [partition] = log_dir["partitions"]
        assert (partition["partition"], partition["offsetLag"], partition["isFuture"]) == ("tools-sized-0", 0, False)
        sizes.add(partition["size"])
    [size] = sizes  # every replica holds the same entries
    assert size > 300


def test_get_offsets_earliest_latest_and_by_time(tools_cluster: DevCluster, vdl: VdlClient) -> None:
    vdl.create_stream("tools-timed", exist_ok=False)
    base = 1_700_000_000_000
    produce(tools_cluster, "tools-timed", ["a", "b", "c", "d"], timestamps=[base, base + 1000, base + 3000, base + 2000])
    bs = tools_cluster.bootstrap_servers

    def offsets(time_spec: str) -> Callable[[], str]:
        return lambda: run("kafka-get-offsets", "--bootstrap-server", bs, "--topic", "tools-timed",
                           "--time", time_spec).stdout

    answers = parallel(offsets("earliest"), offsets("latest"), offsets(str(base + 500)), offsets("max-timestamp"))
    assert answers == ["tools-timed:0:0\n", "tools-timed:0:4\n", "tools-timed:0:1\n", "tools-timed:0:2\n"]


def test_delete_records_moves_the_log_start(tools_cluster: DevCluster, vdl: VdlClient, tmp_path: Path) -> None:
    bs = tools_cluster.bootstrap_servers
    vdl.create_stream("tools-trimmed", exist_ok=False)
    produce(tools_cluster, "tools-trimmed", ["a", "b", "c", "d", "e"])
    (tmp_path / "offsets.json").write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "tools-trimmed", "partition": 0, "offset": 3}]}))
    deleted = run("kafka-delete-records", "--bootstrap-server", bs, "--offset-json-file",
                  str(tmp_path / "offsets.json"))
    assert deleted.stdout.splitlines() == ["Executing records delete operation", "Records delete operation completed:",
                                           "partition: tools-trimmed-0\tlow_watermark: 3"]
    earliest = run("kafka-get-offsets", "--bootstrap-server", bs, "--topic", "tools-trimmed", "--time", "earliest")
    assert earliest.stdout == "tools-trimmed:0:3\n"
    assert vdl.list_offset("tools-trimmed", -2) == 3
    consumed = run("kafka-console-consumer", "--bootstrap-server", bs, "--topic", "tools-trimmed",
                   "--from-beginning", "--max-messages", "2")
    assert consumed.stdout == "d\ne\n"


# ------------------------------------------------------------------------------------ perf tests


def test_producer_and_consumer_perf_tests(tools_cluster: DevCluster, vdl: VdlClient) -> None:
    bs = tools_cluster.bootstrap_servers
    vdl.create_stream("tools-perf", exist_ok=False)
    produce(tools_cluster, "tools-perf", ["before"])
    before = vdl.list_offset("tools-perf", -1)
    sent = run("kafka-producer-perf-test", "--topic", "tools-perf", "--num-records", "3000", "--record-size", "100",
               "--throughput", "-1", "--command-property", f"bootstrap.servers={bs}", "acks=all")
    summary = sent.stdout.splitlines()[-1]
    match = re.fullmatch(r"(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
                         r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.", summary)
    assert match is not None, summary
    assert int(match.group(1)) == 3000
    assert vdl.list_offset("tools-perf", -1) == before + 3000

    read = run("kafka-consumer-perf-test", "--bootstrap-server", bs, "--topic", "tools-perf",
               "--num-records", str(before + 3000), "--timeout", "60000")
    header, values = read.stdout.splitlines()[-2:]
    stats = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in values.split(",")], strict=True))
    assert int(stats["data.consumed.in.nMsg"]) == before + 3000
    assert float(stats["data.consumed.in.MB"]) == pytest.approx((3000 * 100 + len("before")) / (1 << 20), abs=1e-4)
