"""`vdl groups` and `vdl cluster status` against a 3-node cluster, output checked line by line:
a standalone group and a live kafka-python group (list, describe with lag and owner), resets to
earliest/latest/an offset/a time (refused while the group has members), and the cluster's
health before and while a node is down (exit code 1 then).

One cluster for the module (tests/conftest.py), holding only this module's streams and groups.
"""

from __future__ import annotations

import re
import subprocess

import confluent_kafka
import pytest
from kafka import KafkaConsumer

from tests.support.cluster import VDL_CLI, node_address, running_nodes, wait_until
from tests.support.kafka import (
    CLIENT_API_VERSIONS,
    coordinator_raw,
    create_topic_raw,
    numbered_batch,
    produce_raw,
    raw_request,
)
from vdl_broker.cluster import features
from vdl_client import ClientSettings, VdlClient
from vdl_client.groups import commit_offsets
from vdl_dev.dev_cluster import DevCluster
from vdl_wire import messages as m
from vdl_wire.errors import ErrorCode

pytestmark = pytest.mark.timeout(240)


def vdl(cluster: DevCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*VDL_CLI, *args, "--bootstrap", cluster.bootstrap_servers], capture_output=True,
                          text=True, timeout=60)


def _stream(cluster: DevCluster, name: str, records: int) -> None:
    assert create_topic_raw(node_address(cluster, 1), name, 3)[0] == 0

    def produced() -> bool:
        leader = cluster.leader_of(name)
        return leader is not None and produce_raw(node_address(cluster, leader), name, numbered_batch(records))[0] == 0

    wait_until(produced, 30, f"{records} records in {name}")


def _member_id(cluster: DevCluster, group: str) -> str:
    """The one member of `group`, as its coordinator describes it."""
    _, coordinator = coordinator_raw(node_address(cluster, running_nodes(cluster)[0]), group)
    described = raw_request(node_address(cluster, coordinator), m.DescribeGroupsRequest(groups=[group]))
    [member] = described.groups[0].members
    return member.member_id


@pytest.fixture(scope="module")
def streams(dev_cluster: DevCluster) -> None:
    _stream(dev_cluster, "orders", 10)  # record i has timestamp 1000 + i ms
    _stream(dev_cluster, "payments", 4)


def test_groups_list_describe_and_reset(cluster: DevCluster, streams: None) -> None:
    with VdlClient(ClientSettings.from_bootstrap(cluster.bootstrap_servers)) as client:
        commit_offsets(client, "billing", {"orders": 3, "payments": 4})
    consumer = KafkaConsumer("orders", bootstrap_servers=cluster.bootstrap_servers, group_id="web",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    # A KIP-848 group (group.protocol=consumer) beside the classic ones.
    modern = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "modern",
                                       "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    try:
        modern.subscribe(["payments"])
        wait_until(lambda: (modern.poll(0.2), bool(modern.assignment()))[1], 30,
                   "the modern group's member to be assigned payments")
        seen: list[int] = []
        wait_until(lambda: seen.extend(r.offset for rs in consumer.poll(200).values() for r in rs) or len(seen) == 10,
                   30, "the web group's member to read 10 records")
        consumer.commit()
        # TYPE is the group's type, as Kafka's tools print it (it showed the protocol type);
        # PROTOCOL the members' protocol type, none for offsets committed without members.
        # (The modern member's acknowledgement of its assignment makes its group Stable.)
        listed = wait_until(lambda: (done := vdl(cluster, "groups", "list")).returncode == 0
                            and "\nmodern   Stable" in done.stdout and done, 30, "the modern group to be Stable")
        assert (listed.returncode, listed.stdout) == (0, "GROUP    STATE   TYPE      PROTOCOL\n"
                                                         "billing  Empty   Classic   -\n"
                                                         "modern   Stable  Consumer  consumer\n"
                                                         "web      Stable  Classic   consumer\n")
        member = _member_id(cluster, "web")
        web = vdl(cluster, "groups", "describe", "web")
        assert web.stdout == ("group web: Stable, 1 member(s) (consumer, range)\n"
                              "STREAM  COMMITTED  HIGH-WATERMARK  LAG  OWNER\n"
                              f"orders  10         10              0    {member}\n")
        refused = vdl(cluster, "groups", "reset-offsets", "web", "--to", "earliest")
        assert (refused.returncode, refused.stdout, refused.stderr) == (
            1, "", "vdl: error: group 'web' has 1 member(s) (Stable): stop its consumers before resetting its offsets\n")
    finally:
        consumer.close()  # leaves the group: Empty
        modern.close()
    billing = vdl(cluster, "groups", "describe", "billing")
    assert (billing.returncode, billing.stdout) == (0, "group billing: Empty, 0 member(s)\n"
                                                       "STREAM    COMMITTED  HIGH-WATERMARK  LAG  OWNER\n"
                                                       "orders    3          10              7    -\n"
                                                       "payments  4          4               0    -\n")
    earliest = vdl(cluster, "groups", "reset-offsets", "web", "--to", "earliest")
    assert (earliest.returncode, earliest.stdout) == (0, "group web: offsets reset to earliest\n"
                                                         "STREAM  PREVIOUS  NEW\n"
                                                         "orders  10        0\n")
    assert vdl(cluster, "groups", "describe", "web").stdout == ("group web: Empty, 0 member(s)\n"
                                                                "STREAM  COMMITTED  HIGH-WATERMARK  LAG  OWNER\n"
                                                                "orders  0          10              10   -\n")
    # An offset beyond the end is kept inside the stream; a time finds the first record at or after it.
    assert vdl(cluster, "groups", "reset-offsets", "billing", "--to", "99", "--stream", "orders").stdout == (
        "group billing: offsets reset to 99\nSTREAM  PREVIOUS  NEW\norders  3         10\n")
    assert vdl(cluster, "groups", "reset-offsets", "billing", "--to", "1970-01-01T00:00:01.005Z").stdout == (
        "group billing: offsets reset to 1970-01-01T00:00:01.005Z\n"
        "STREAM    PREVIOUS  NEW\n"
        "orders    10        5\n"
        "payments  4         4\n")  # payments' records are at 1000..1003 ms: none after, so its end
    assert vdl(cluster, "groups", "reset-offsets", "billing", "--to", "latest", "--stream", "orders").stdout == (
        "group billing: offsets reset to latest\nSTREAM  PREVIOUS  NEW\norders  5         10\n")
    # A new group gets offsets for the streams named.
    assert vdl(cluster, "groups", "reset-offsets", "fresh", "--to", "earliest", "--stream", "payments").stdout == (
        "group fresh: offsets reset to earliest\nSTREAM    PREVIOUS  NEW\npayments  -         0\n")


def test_a_groups_configs_set_shown_and_removed(cluster: DevCluster) -> None:
    """`vdl groups configs` and `alter-config`: a group's own configs, else the nodes' settings
    (this module's cluster sets none: Kafka's defaults), on any node of the cluster."""
    defaults = ("configs:\n"
                "  consumer.session.timeout.ms     45000  (default)\n"
                "  consumer.heartbeat.interval.ms  5000   (default)\n")
    assert vdl(cluster, "groups", "configs", "tuned").stdout == defaults
    assert vdl(cluster, "groups", "alter-config", "tuned", "--set", "consumer.session.timeout.ms=30000",
               "--set", "consumer.heartbeat.interval.ms=1000").stdout == (
        "altered group tuned: consumer.session.timeout.ms=30000, consumer.heartbeat.interval.ms=1000\n")
    own = ("configs:\n"
           "  consumer.session.timeout.ms     30000  (group)\n"
           "  consumer.heartbeat.interval.ms  1000   (group)\n")
    for node in running_nodes(cluster):  # each answers from its copy of the metadata
        wait_until(lambda n=node: subprocess.run(
            [*VDL_CLI, "groups", "configs", "tuned", "--bootstrap", node_address(cluster, n)], capture_output=True,
            text=True, timeout=60).stdout == own, 10, f"node {node} to describe the group's own configs")
    assert vdl(cluster, "groups", "alter-config", "tuned", "--delete", "consumer.session.timeout.ms",
               "--delete", "consumer.heartbeat.interval.ms").stdout == (
        "altered group tuned: consumer.session.timeout.ms (default), consumer.heartbeat.interval.ms (default)\n")
    assert vdl(cluster, "groups", "configs", "tuned").stdout == defaults


@pytest.mark.parametrize(("args", "error", "code"), [
    (["groups", "alter-config", "tuned", "--set", "consumer.heartbeat.interval.ms=45000"],
     "vdl: error: INVALID_CONFIG: consumer.heartbeat.interval.ms (45000) must be less than consumer.session.timeout.ms "
     "(45000)\n", 1),
    (["groups", "alter-config", "tuned"], "vdl: error: alter-config needs --set KEY=VALUE or --delete KEY\n", 2),
    (["groups", "describe", "nobody"], "vdl: error: group 'nobody' does not exist\n", 1),
    (["groups", "reset-offsets", "nobody", "--to", "earliest"],
     "vdl: error: group 'nobody' has no committed offsets: name the streams with --stream\n", 1),
    (["groups", "reset-offsets", "nobody", "--to", "soon", "--stream", "orders"],
     "vdl: error: --to must be earliest, latest, an offset or an ISO-8601 time (2026-01-31T12:00:00Z; no zone = UTC), "
     "got 'soon'\n", 2),  # a bad command line: exit code 2, as argparse's errors
    (["groups", "reset-offsets", "nobody", "--to", "earliest", "--stream", "missing"],
     "vdl: error: stream 'missing' does not exist\n", 1),
    (["cluster", "status", "--min-disk-free", "101"],
     "vdl: error: --min-disk-free must be a percentage from 0 to 100, got 101.0\n", 2),
])
def test_wrong_group_commands_fail_in_one_line(cluster: DevCluster, streams: None, args: list[str],
                                               error: str, code: int) -> None:
    result = vdl(cluster, *args)
    assert (result.returncode, result.stdout, result.stderr) == (code, "", error)


DISK = r"\d+\.\d GiB of \d+\.\d GiB \(\d+%\)"


def _status_pattern(cluster: DevCluster, down: int | None, leads: dict[int, int], summary: str) -> str:
    """The whole screen as a regular expression: only the cluster id, the metadata leader and
    the disk figures vary."""
    rows = ""
    for i in cluster.node_ids():
        state, led = ("down", "-") if i == down else ("up", str(leads[i]))
        rows += re.escape(f"{i:<4}  127.0.0.1:{cluster.nodes[i].config.port}  {state:<5}  {led:<5}  ")
        rows += (re.escape("-") if i == down else DISK) + r"\n"
    up = 3 if down is None else 2
    return (rf"cluster [\w-]+: 3 nodes \({up} up\), 2 streams, metadata leader node \d\n"
            r"NODE  ADDRESS          STATE  LEADS  DISK FREE\n" + rows + re.escape(summary))


def _leads(cluster: DevCluster) -> dict[int, int]:
    leaders = [cluster.leader_of(s) for s in ("orders", "payments")]
    return {i: leaders.count(i) for i in cluster.node_ids()}


def test_cluster_status_healthy_and_with_a_node_down(cluster: DevCluster, streams: None) -> None:
    # `--min-disk-free 0` everywhere but the disk rule's own check: the node-state checks must not
    # depend on how full the disk running the test is (below the default 10% they all fail).
    last: list[str] = []

    def status() -> subprocess.CompletedProcess[str]:
        result = vdl(cluster, "cluster", "status", "--min-disk-free", "0")
        last[:] = [result.stdout + result.stderr]
        return result

    healthy = wait_until(lambda: (r := status()).returncode == 0 and r, 30,
                         lambda: f"healthy; last status:\n{last[0] if last else ''}")
    expected = _status_pattern(cluster, None, _leads(cluster), "under-replicated streams: 0\n"
                                                               "unavailable streams: 0\nhealthy\n")
    assert re.fullmatch(expected, healthy.stdout), healthy.stdout
    full = vdl(cluster, "cluster", "status", "--min-disk-free", "100")
    assert full.returncode == 1 and re.search(r"\nunhealthy: node 1 disk \d+% free; node 2 disk", full.stdout)
    victim = cluster.leader_of("orders")
    cluster.kill(victim)

    def degraded() -> subprocess.CompletedProcess[str] | None:
        result = status()
        return result if result.stdout.endswith("unavailable streams: 0\nunhealthy: node "
                                                f"{victim} down; 2 under-replicated stream(s)\n") else None

    down = wait_until(degraded, 60, lambda: f"status with node {victim} down and both streams led "
                                            f"elsewhere; last status:\n{last[0]}")
    assert down.returncode == 1
    summary = ("under-replicated streams: 2 (orders, payments)\nunavailable streams: 0\n"
               f"unhealthy: node {victim} down; 2 under-replicated stream(s)\n")
    pattern = _status_pattern(cluster, victim, _leads(cluster), summary)
    assert re.fullmatch(pattern, down.stdout), down.stdout


def test_the_feature_level_in_api_versions_and_vdl_cluster_upgrade(cluster: DevCluster, streams: None) -> None:
    level = features.SUPPORTED_LEVEL
    for node_id in cluster.node_ids():
        answer = raw_request(node_address(cluster, node_id), CLIENT_API_VERSIONS, 4)
        assert [(f.name, f.min_version, f.max_version) for f in answer.supported_features] == [
            ("vdl.metadata.version", 1, level), ("transaction.version", 0, 2)]
        # Below v4 a feature whose range starts at 0 is left out, as Kafka does: clients before
        # 3.9 throw on such a range (their admin and producer threads died on VDL).
        older = raw_request(node_address(cluster, node_id), CLIENT_API_VERSIONS, 3)
        assert [(f.name, f.min_version, f.max_version) for f in older.supported_features] == [
            ("vdl.metadata.version", 1, level)]
        assert older.finalized_features == answer.finalized_features
        # A new cluster starts at its release's level: finalized by nothing since.
        assert [(f.name, f.min_version_level, f.max_version_level) for f in answer.finalized_features] == [
            ("vdl.metadata.version", level, level), ("transaction.version", 2, 2)]
        assert answer.finalized_features_epoch == 0
    same = vdl(cluster, "cluster", "upgrade")
    assert (same.returncode, same.stdout) == (0, f"vdl.metadata.version is at level {level} already\n"), same.stderr
    above = vdl(cluster, "cluster", "upgrade", "--level", str(level + 1))
    assert above.returncode != 0
    assert above.stderr.strip().endswith(
        f"raise vdl.metadata.version to level {level + 1}: INVALID_UPDATE_VERSION: vdl.metadata.version level "
        f"{level + 1} is above what this node's release supports ({level})"), above.stderr
    key = m.UpdateFeaturesRequest.FeatureUpdateKey
    request = m.UpdateFeaturesRequest(timeout_ms=5000, validate_only=False, feature_updates=[
        key(feature="metadata.version", max_version_level=20, upgrade_type=1),
        key(feature="vdl.metadata.version", max_version_level=level - 1, upgrade_type=2),
        key(feature="transaction.version", max_version_level=1, upgrade_type=2)])
    answer = raw_request(node_address(cluster, 2), request, 1)
    assert answer.error_code == 0
    assert [(r.feature, r.error_code, r.error_message) for r in answer.results] == [
        ("metadata.version", ErrorCode.INVALID_UPDATE_VERSION, "unknown feature 'metadata.version': VDL has "
                                                               "vdl.metadata.version and transaction.version"),
        ("vdl.metadata.version", ErrorCode.INVALID_UPDATE_VERSION, f"vdl.metadata.version is at level {level}: "
                                                                   "downgrades are not possible, the metadata may "
                                                                   "already use it"),
        ("transaction.version", ErrorCode.INVALID_UPDATE_VERSION, "transaction.version follows "
                                                                  "vdl.metadata.version: it is at level 2 and cannot "
                                                                  "be set on its own")]
    # Asking transaction.version's own level (as `kafka-features upgrade` may) is a no-op.
    same = raw_request(node_address(cluster, 2), m.UpdateFeaturesRequest(timeout_ms=5000, feature_updates=[
        key(feature="transaction.version", max_version_level=2, upgrade_type=1)]), 1)
    assert [(r.feature, r.error_code) for r in same.results] == [("transaction.version", 0)]
