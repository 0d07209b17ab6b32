"""Reassignments and preferred leaders through Kafka's admin clients (kafka-python:
alter_partition_reassignments, list_partition_reassignments, elect_leaders; confluent-kafka:
elect_leaders) and through `vdl nodes` / `vdl streams reassign|reassignments|elect-preferred`,
against a real 3-node cluster."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.cluster import VDL_CLI, node_address, start_cluster, wait_until
from tests.support.kafka import EARLIEST, fetch_raw, list_offset_raw, one_record_batch, produce_raw
from vdl_client.client import VdlClient
from vdl_client.settings import ClientSettings
from vdl_dev.dev_cluster import DevCluster
from vdl_wire.records.record_batch import iter_batches, read_records

pytestmark = pytest.mark.timeout(120)


def vdl(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*VDL_CLI, *args], capture_output=True, timeout=60)


def client_for(cluster: DevCluster) -> VdlClient:
    return VdlClient(ClientSettings.from_bootstrap(cluster.bootstrap_servers, deadline_ms=30_000))


def view(cluster: DevCluster, stream: str) -> tuple[int, list[int]]:
    """(leader, replicas) as Metadata says, once the stream has a leader."""
    def ask() -> tuple[int, list[int]] | None:
        with client_for(cluster) as client:
            for topic in client.metadata([stream]).topics:
                for p in topic.partitions:
                    if p.leader_id >= 0:
                        return int(p.leader_id), list(p.replica_nodes)
        return None
    return wait_until(ask, 30, f"a leader of {stream}")


def produce(cluster: DevCluster, stream: str, values: list[bytes]) -> None:
    for value in values:
        def once(value: bytes = value) -> bool:
            leader = view(cluster, stream)[0]
            code, _ = produce_raw(node_address(cluster, leader), stream, one_record_batch(value), acks=-1)
            return code == 0
        wait_until(once, 30, f"{value!r} acknowledged")


def read(cluster: DevCluster, stream: str) -> list[bytes]:
    """Every record's value, from offset 0, at the leader."""
    def fetch() -> bytes | None:
        address = node_address(cluster, view(cluster, stream)[0])
        code, start = list_offset_raw(address, stream, EARLIEST)
        assert start == 0
        code, _, records = fetch_raw(address, stream, 0)
        return bytes(records) if code == 0 else None  # a read lease just taken: ask again
    records = wait_until(fetch, 30, f"a fetch of {stream}")
    return [bytes(r.value) for _, batch in iter_batches(memoryview(records)) for r in read_records(batch)]


def create(cluster: DevCluster, stream: str, replication_factor: int) -> None:
    with client_for(cluster) as client:
        client.create_stream(stream, replication_factor)


def test_kafka_python_moves_a_replica_lists_it_and_elects_the_preferred_leader(cluster: DevCluster) -> None:
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError

    create(cluster, "kp-move", 1)
    values = [b"kp-%03d" % i for i in range(30)]
    produce(cluster, "kp-move", values)
    _, [home] = view(cluster, "kp-move")
    away = next(n for n in cluster.node_ids() if n != home)
    tp = TopicPartition("kp-move", 0)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers.split(","))
    try:
        assert admin.alter_partition_reassignments({tp: [away]}) == {tp: None}
        def moved() -> bool:
            return admin.list_partition_reassignments() == {} and view(cluster, "kp-move") == (away, [away])
        wait_until(moved, 60, f"kp-move moved to node {away}")
        assert read(cluster, "kp-move") == values  # the same records at the same offsets
        assert admin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}
        assert admin.alter_partition_reassignments({tp: [away, 99]}) == {tp: InvalidReplicationAssignmentError}

        # Preferred leader: reorder a 3-replica stream's list, then elect.
        create(cluster, "kp-elect", 3)
        leader, replicas = view(cluster, "kp-elect")
        other = next(n for n in replicas if n != leader)
        target = [other] + [n for n in replicas if n != other]
        assert admin.alter_partition_reassignments({TopicPartition("kp-elect", 0): target}) \
            == {TopicPartition("kp-elect", 0): None}
        wait_until(lambda: admin.list_partition_reassignments() == {}, 30, "the reorder done")
        admin.elect_leaders(0, {"kp-elect": [0]})
        wait_until(lambda: view(cluster, "kp-elect")[0] == other, 30, f"node {other} leading kp-elect")
        response = admin.elect_leaders(0, {"kp-elect": [0]})  # nothing to do now: not an error
        [result] = response.replica_election_results
        assert result.partition_result[0].error_code == 84  # ELECTION_NOT_NEEDED
    finally:
        admin.close()


def test_confluent_kafka_elects_preferred_leaders(cluster: DevCluster) -> None:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient

    create(cluster, "ck-elect", 3)
    leader, replicas = view(cluster, "ck-elect")
    preferred = replicas[0]
    if leader == preferred:  # move leadership away first, as a failover would
        with client_for(cluster) as client:
            from vdl_client.cluster_admin import reassign_stream
            reassign_stream(client, "ck-elect", [n for n in replicas if n != leader] + [leader])
        wait_until(lambda: view(cluster, "ck-elect")[1][0] != leader, 30, "the new preferred leader")
        preferred = view(cluster, "ck-elect")[1][0]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    partition = confluent_kafka.TopicPartition("ck-elect", 0)
    result = admin.elect_leaders(confluent_kafka.ElectionType.PREFERRED, [partition]).result(30)
    assert list(result) == [partition] and result[partition] is None
    assert view(cluster, "ck-elect")[0] == preferred
    unclean = admin.elect_leaders(confluent_kafka.ElectionType.UNCLEAN, [partition]).result(30)
    # Raft has no unclean elections: one with a leader is not needed, as Kafka answers a live leader.
    assert unclean[partition].code() == confluent_kafka.KafkaError.ELECTION_NOT_NEEDED


def test_cli_nodes_and_reassign(cluster: DevCluster) -> None:
    b = ["--bootstrap", cluster.bootstrap_servers]
    listed = vdl("nodes", "list", *b)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.decode().splitlines()
    assert lines[0].split() == ["id", "client", "raft", "rack", "state", "metadata", "reachable", "leads", "replicas"]
    rows = [line.split() for line in lines[1:]]
    assert [row[0] for row in rows] == ["1", "2", "3"]
    assert all(row[4:7] == ["active", "voter", "yes"] for row in rows), rows
    create(cluster, "cli-move", 1)
    produce(cluster, "cli-move", [b"a", b"b"])
    _, [home] = view(cluster, "cli-move")
    away = next(n for n in cluster.node_ids() if n != home)
    moved = vdl("streams", "reassign", "cli-move", "--replicas", str(away), "--wait", *b)
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout.decode().splitlines() == [f"stream cli-move: moving to replicas {away}", "stream cli-move: done"]
    assert view(cluster, "cli-move") == (away, [away]) and read(cluster, "cli-move") == [b"a", b"b"]
    assert vdl("streams", "reassignments", *b).stdout == b""
    elected = vdl("streams", "elect-preferred", "cli-move", *b)
    assert elected.returncode == 0 and b"already led by its preferred leader" in elected.stdout
    for args, words in ((("nodes", "decommission", "9"), b"no node 9"),
                        (("streams", "reassign", "cli-move", "--replicas", "1,1"), b"INVALID_REPLICA_ASSIGNMENT"),
                        (("streams", "reassign", "cli-move", "--replicas", "x"), b"--replicas"),
                        (("streams", "reassign", "cli-move"), b"--replicas N,N,... or --cancel"),
                        (("streams", "reassign", "cli-move", "--cancel"), b"NO_REASSIGNMENT_IN_PROGRESS")):
        failed = vdl(*args, *b)
        lines = failed.stderr.strip().splitlines()
        assert failed.returncode != 0 and len(lines) == 1 and words in lines[0], (args, failed.stderr)


def test_bad_membership_requests_get_an_error_naming_the_problem(cluster: DevCluster) -> None:
    from tests.support.kafka import raw_request
    from vdl_wire import messages as m
    from vdl_wire.errors import ErrorCode

    address = node_address(cluster, 2)  # not necessarily the metadata leader: forwarded
    cases = [
        (m.VdlNodesRequest(action="explode"), ErrorCode.INVALID_REQUEST, "accepted: list, join"),
        (m.VdlNodesRequest(action="join", node_id=0, client="h:1", raft="h:2"), ErrorCode.INVALID_REQUEST,
         "node id must be positive"),
        (m.VdlNodesRequest(action="join", node_id=9, client="nohost", raft="h:2"), ErrorCode.INVALID_REQUEST,
         "client"),
        (m.VdlNodesRequest(action="remove", node_id=42), ErrorCode.BROKER_ID_NOT_REGISTERED, "no node 42"),
        (m.VdlNodesRequest(action="reassignment_done", stream="nope", replicas=[1]), ErrorCode.INVALID_REQUEST,
         "no stream 'nope'"),
    ]
    for request, code, words in cases:
        response = raw_request(address, request)
        assert (response.error_code, words in (response.error_message or "")) == (code, True), \
            (request.action, response.error_code, response.error_message)
    # Reassignments: a partition other than 0, an unknown stream, a node that does not exist.
    request = m.AlterPartitionReassignmentsRequest(topics=[
        m.AlterPartitionReassignmentsRequest.ReassignableTopic(name="nope", partitions=[
            m.AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition(
                partition_index=0, replicas=[1])])])
    [topic] = raw_request(address, request).responses
    assert topic.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    listed = raw_request(address, m.ListPartitionReassignmentsRequest(topics=None))
    assert listed.error_code == 0 and listed.topics == []


def test_the_last_active_node_cannot_be_removed_or_decommissioned(tmp_path: Path,
                                                                  request: pytest.FixtureRequest) -> None:
    """A cluster of one: nothing could take its replicas or the cluster metadata, so removing or
    decommissioning its node is refused, naming why. `remove` was accepted and left the node
    "removing" for good (its streams warned that no node could take their replicas)."""
    single = start_cluster(tmp_path / "single", nodes=1, register=lambda c: request.addfinalizer(c.kill_all))
    b = ["--bootstrap", single.bootstrap_servers]
    create(single, "only-here", 1)
    for action in ("remove", "decommission"):
        refused = vdl("nodes", action, "1", *b)
        assert (refused.returncode, refused.stdout, refused.stderr.decode()) == (
            1, b"", f"vdl: error: {action} node 1: INVALID_REQUEST: node 1 is the cluster's last active node: "
                    f"{action} it after another node has joined\n")
    listed = vdl("nodes", "list", *b)
    assert [line.split()[4] for line in listed.stdout.decode().splitlines()[1:]] == ["active"], listed.stdout
    produce(single, "only-here", [b"still", b"here"])
    assert read(single, "only-here") == [b"still", b"here"]


def test_a_removed_node_stops_by_itself_and_started_again_stops_without_serving(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A node removed while it runs stops by itself (exit code 0), as a decommissioned one does;
    it ran on, cut off from the metadata group, serving nothing. Its id cannot join again:
    started again on its data directory, the node stops at once, saying so, and never listens for
    clients. It used to log that it was stopping, wait 10 s for a registration that could not
    come, listen and print `vdl-broker listening on` anyway, and only then stop."""
    trio = start_cluster(tmp_path / "trio", nodes=3, register=lambda c: request.addfinalizer(c.kill_all))
    b = ["--bootstrap", ",".join(node_address(trio, n) for n in (1, 2))]
    removed = vdl("nodes", "remove", "3", *b)
    assert (removed.returncode, removed.stdout) == (
        0, b"node 3: removing (out of the metadata group, its replicas recreated elsewhere)\n"), removed.stderr
    wait_until(lambda: b"\n3 " not in vdl("nodes", "list", *b).stdout, 60, "node 3 to leave the node list")
    node = trio.nodes[3]
    wait_until(lambda: node.process is not None and node.process.poll() is not None, 30,
               lambda: "node 3 to stop by itself:\n" + "\n".join(list(node.output)[-20:]))
    assert node.process is not None and node.process.returncode == 0
    assert any("node 3 was removed from the cluster: stopping" in line for line in node.output), list(node.output)[-20:]
    node.output.clear()
    trio.restart(3, wait=False)
    wait_until(lambda: node.process is not None and node.process.poll() is not None, 60,
               lambda: "node 3 to stop again:\n" + "\n".join(node.output))
    assert node.process is not None and node.process.returncode == 0
    assert [line for line in node.output if not line.startswith("20")] == [
        "vdl-broker: node 3 was removed from the cluster: not starting (its id cannot join again: a new node needs "
        "a new node_id and an empty data directory)"]


def test_a_joining_node_logs_its_own_replicas_and_the_metadata_voters(tmp_path: Path,
                                                                       request: pytest.FixtureRequest) -> None:
    """A node joining a 3-node cluster with `peers` naming one member (and itself) logs, once it
    serves, the replicas it holds (none yet) and the metadata group's voters (3, or 4 once it is
    promoted). It logged the cluster's streams (2) and its `peers` entries (2 voters)."""
    trio = start_cluster(tmp_path / "trio", nodes=3, settings={"log_level": "INFO"},
                         register=lambda c: request.addfinalizer(c.kill_all))
    create(trio, "elsewhere-1", 1)
    create(trio, "elsewhere-2", 1)
    joined = trio.add_node(timeout_s=60, peers=[1])
    node = trio.nodes[joined]
    wait_until(lambda: any(" streams from " in line for line in node.output), 30,
               lambda: "node 4 to log that it serves:\n" + "\n".join(node.output))
    serving = [line.split(" ", 2)[2] for line in node.output if line.startswith("20") and " serving " in line]
    # A learner first, a voter once caught up: either may be the metadata group's state then.
    expected = [[f"INFO vdl_broker.server.broker: node 4: serving PLAINTEXT://{node.client_address} ({voters} voters, "
                 f"raft {node.config.raft_listen})",
                 f"INFO vdl_broker: node 4 serving 0 streams from {node.config.data_dir}"] for voters in (3, 4)]
    assert serving in expected, serving
