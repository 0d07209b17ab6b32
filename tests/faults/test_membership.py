"""Process tests of membership changes under acks=all load: a 3-node cluster grows to 5 (new
nodes started with `join = true`) and half its streams move onto the new nodes; a node is
killed -9 in the middle of a reassignment; a node is decommissioned. Every acknowledged record
stays at its offset, no reader sees an offset with two values, every replica of a moved stream
ends byte-identical to the leader, and a replica moved away is deleted.

One cluster for the module (it grows in the first test; each test makes sure of what it needs).
Catch-up is throttled low (recovery_rate_bytes) so a reassignment lasts long enough to be hit.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.harness import (
    ProbeLog,
    check_acknowledged,
    check_consumed,
    create_stream,
    high_watermark,
    node_address,
    partition_view,
    probe_write,
    produce_raw,
    read_all,
    wait_logs_converged,
    wait_until,
)
from tests.faults.workload import ConsumerThread, Workload
from tests.support.cluster import start_cluster
from tests.support.kafka import metadata_raw
from vdl_client.client import VdlClient
from vdl_client.cluster_admin import (
    decommission_node,
    list_nodes,
    list_reassignments,
    reassign_stream,
    remove_node,
)
from vdl_client.settings import ClientSettings
from vdl_dev.dev_cluster import DevCluster
from vdl_wire.records.record_batch import RecordBatchBuilder

pytestmark = pytest.mark.timeout(240)

RECOVERY_RATE = 256 << 10  # bytes/s: a 1.5 MB catch-up takes ~6 s
JOIN_LIMIT_S = 15.0  # a new node is listed (active, voting in the metadata group) within this
# Records/s of each producer of a workload: acks=all writes at every moment of a move or kill
# (wait_progress asks 20-30 more of each), light enough to leave the CPU to the nodes' moves.
LOAD_RATE = 40


@pytest.fixture(scope="module")
def grown(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    clusters: list[DevCluster] = []
    cluster = start_cluster(tmp_path_factory.mktemp("membership"), 3, register=clusters.append,
                            settings={"recovery_rate_bytes": RECOVERY_RATE, "leader_balance_interval_ms": 0})
    try:
        yield cluster
    finally:
        for c in clusters:
            c.kill_all()


def live(cluster: DevCluster) -> list[int]:
    """The nodes running (the ones removed or decommissioned by earlier tests have stopped)."""
    return [i for i in cluster.node_ids() if cluster.nodes[i].running]


def at_least(cluster: DevCluster, count: int) -> list[int]:
    """Make sure `count` nodes run (joining new ones if needed); the running nodes."""
    missing = count - len(live(cluster))
    if missing > 0:
        add_nodes(cluster, missing)
    return live(cluster)


def admin(cluster: DevCluster) -> VdlClient:
    running = [n.client_address for n in cluster.nodes.values() if n.running]
    return VdlClient(ClientSettings.from_bootstrap(",".join(running), deadline_ms=60_000))


def add_nodes(cluster: DevCluster, count: int) -> list[int]:
    """Start `count` nodes that join by themselves; wait until each is active and votes."""
    first = max(cluster.nodes) + 1
    added = [cluster.add_node(timeout_s=60, rack=f"rack-{first + k}") for k in range(count)]
    with admin(cluster) as client:
        def joined() -> bool:
            nodes = {n.node_id: n for n in list_nodes(client)}
            return all(i in nodes and nodes[i].state == "active" and nodes[i].metadata_role == "voter"
                       and nodes[i].rack == f"rack-{i}" and nodes[i].client == cluster.nodes[i].client_address
                       for i in added)
        wait_until(joined, JOIN_LIMIT_S, f"nodes {added} active and voting in the metadata group")
    return added


def wait_moved(cluster: DevCluster, streams: list[str], timeout: float = 90.0) -> None:
    with admin(cluster) as client:
        wait_until(lambda: not list_reassignments(client, streams), timeout, f"{streams} reassigned")


def replicas_of(cluster: DevCluster, stream: str) -> tuple[int, ...]:
    for node_id in cluster.node_ids():
        if cluster.nodes[node_id].running:
            view = partition_view(node_address(cluster, node_id), stream)
            if view is not None and view.replicas:
                return view.replicas
    return ()


def preload(cluster: DevCluster, stream: str, megabytes: float) -> list[tuple[str, int, bytes]]:
    """acks=-1 batches of 200 records of 100 bytes, about `megabytes` MB; every acknowledgement."""
    acked = []
    for n in range(math.ceil(megabytes * 1e6 / 20_000)):
        leader = high_watermark(cluster, stream, timeout=30)[0]
        builder = RecordBatchBuilder()
        values = [f"pre-{n:04d}-{i:03d}".encode().ljust(100, b"p") for i in range(200)]
        for value in values:
            builder.append(0, None, value)
        code, base = produce_raw(node_address(cluster, leader), stream, builder.build(), acks=-1, timeout_ms=10_000)
        if code != 0:
            continue  # a leader change: the next batch goes to the new one
        acked += [("preload", base + i, value) for i, value in enumerate(values)]
    return acked


def verify(cluster: DevCluster, stream: str, acked: list[tuple[str, int, bytes]], replicas: tuple[int, ...],
           consumer: ConsumerThread | None = None) -> None:
    """Acknowledged records at their offsets, consumers consistent, every replica byte-identical."""
    leader, hw = high_watermark(cluster, stream)
    assert leader in replicas
    fetched = {o: v for o, (_, v) in read_all(node_address(cluster, leader), stream, 0, hw).items()}
    assert sorted(fetched) == list(range(hw)), "the leader's committed log has holes"
    assert check_acknowledged(acked, fetched) == []
    if consumer is not None:
        assert check_consumed(consumer.finish(hw), fetched) == []
    images = wait_logs_converged(cluster, stream, nodes=replicas)
    for node_id, image in images.items():
        on_disk = {o: v for o, v in image.records().items() if o < hw}
        assert on_disk == fetched, f"node {node_id}'s replica differs from what the leader serves"
    for node_id in live(cluster):  # a node that stopped while it held one keeps its files
        if node_id not in replicas:
            data = Path(cluster.nodes[node_id].config.data_dir)
            assert not (data / stream).exists(), f"node {node_id} kept a replica of {stream} it no longer holds"


def test_grow_to_five_under_load_and_move_half_the_streams(grown: DevCluster) -> None:
    cluster = grown
    streams = [f"grow-{i}" for i in range(4)]
    probes = {stream: ProbeLog() for stream in streams}  # offsets are per stream
    for i, stream in enumerate(streams):
        create_stream(cluster, stream, via=1 + i % 3, probes=probes[stream])
    moved = streams[:2]
    workloads = {s: Workload(cluster.bootstrap_servers, s, rate_per_s=LOAD_RATE, tag=f"g{i}",
                             kinds=("confluent", "kafka-python")).start() for i, s in enumerate(moved)}
    consumer = ConsumerThread(cluster.bootstrap_servers, moved[0])
    consumer.start()
    try:
        for workload in workloads.values():
            workload.wait_progress(30)
        new = add_nodes(cluster, 2)
        assert sorted(cluster.node_ids()) == [1, 2, 3, *new]
        targets = {moved[0]: (new[0], new[1], 1), moved[1]: (new[1], new[0], 2)}
        with admin(cluster) as client:
            for stream, target in targets.items():
                reassign_stream(client, stream, list(target))
            moving = {m.stream: m for m in list_reassignments(client)}
            assert set(moving) <= set(moved)
        wait_moved(cluster, moved)
        for workload in workloads.values():
            workload.wait_progress(30)  # still writable, now on the new replica sets
    finally:
        for workload in workloads.values():
            workload.stop()
    for stream, target in targets.items():
        assert replicas_of(cluster, stream) == tuple(sorted(target))
        acked = workloads[stream].acks.snapshot() + [("probe", o, v) for v, o in probes[stream].acked]
        assert not workloads[stream].acks.errors, workloads[stream].acks.errors[:5]
        verify(cluster, stream, acked, target, consumer if stream == moved[0] else None)
    for stream in streams[2:]:
        assert replicas_of(cluster, stream) == (1, 2, 3)  # the other half stayed


def test_kill_9_the_leader_and_the_new_replica_in_the_middle_of_a_reassignment(grown: DevCluster) -> None:
    cluster = grown
    nodes = at_least(cluster, 4)
    probes = ProbeLog()
    stream = "kill-mid-move"
    create_stream(cluster, stream, via=nodes[1], probes=probes)
    replicas = replicas_of(cluster, stream)
    acked = preload(cluster, stream, 1.5)
    newcomer = next(i for i in nodes if i not in replicas)
    leaving = replicas[-1]
    target = tuple(r for r in replicas if r != leaving) + (newcomer,)
    workload = Workload(cluster.bootstrap_servers, stream, rate_per_s=LOAD_RATE, tag="k",
                        kinds=("confluent", "kafka-python")).start()
    try:
        workload.wait_progress(20)
        with admin(cluster) as client:
            reassign_stream(client, stream, list(target))
        joining = Path(cluster.nodes[newcomer].config.data_dir) / stream
        wait_until(lambda: any(joining.glob("*.log")), 30, f"node {newcomer} receiving {stream}")
        leader = high_watermark(cluster, stream)[0]
        cluster.kill(leader)  # the leader feeding the learner
        probe_write(cluster, stream, probes, timeout=20, tag="after-kill")
        cluster.restart(leader, timeout_s=60)
        with admin(cluster) as client:
            still_moving = bool(list_reassignments(client, [stream]))
        if still_moving:
            cluster.kill(newcomer)  # and the learner itself, before it is done
            cluster.restart(newcomer, timeout_s=60)
        wait_moved(cluster, [stream])
        workload.wait_progress(30)
    finally:
        workload.stop()
    assert replicas_of(cluster, stream) == tuple(sorted(target))
    assert not workload.acks.errors, workload.acks.errors[:5]
    everything = acked + workload.acks.snapshot() + [("probe", o, v) for v, o in probes.acked]
    verify(cluster, stream, everything, target)


def test_decommission_moves_every_replica_off_and_removes_the_node(grown: DevCluster) -> None:
    cluster = grown
    nodes = at_least(cluster, 4)
    probes = ProbeLog()
    stream = "decommission"
    create_stream(cluster, stream, via=nodes[0], probes=probes)
    # A follower in the metadata group: the leader drops it from the group right after its
    # removal commits, before it may have heard of that commit; it must stop all the same.
    controller = metadata_raw(node_address(cluster, nodes[0]), []).controller_id
    victim = next(n for n in replicas_of(cluster, stream) if n != controller)
    workload = Workload(cluster.bootstrap_servers, stream, rate_per_s=LOAD_RATE, tag="d",
                        kinds=("confluent", "kafka-python")).start()
    try:
        workload.wait_progress(30)
        with admin(cluster) as client:
            held = [s for s in client.list_streams() if victim in replicas_of(cluster, s)]
            decommission_node(client, victim)
        # Once it holds nothing, it is removed from the metadata group and stops by itself.
        wait_until(lambda: not cluster.nodes[victim].running, 120, f"node {victim} removed and stopped")
        workload.wait_progress(30)
    finally:
        workload.stop()
    assert cluster.nodes[victim].process is not None and cluster.nodes[victim].process.poll() == 0
    with admin(cluster) as client:
        nodes = {n.node_id: n for n in list_nodes(client)}
        assert victim not in nodes and all(n.metadata_role == "voter" for n in nodes.values())
        for name in held:
            assert victim not in replicas_of(cluster, name), f"{name} still on node {victim}"
    replicas = replicas_of(cluster, stream)
    assert victim not in replicas and len(replicas) == 3
    assert not workload.acks.errors, workload.acks.errors[:5]
    verify(cluster, stream, workload.acks.snapshot() + [("probe", o, v) for v, o in probes.acked], replicas)


def test_every_node_killed_and_restarted_keeps_the_changed_membership(grown: DevCluster) -> None:
    """Membership lives in the logs and the saved configuration records: after kill -9 of every
    node (joined ones, whose node.toml names only older nodes, included) the cluster comes back
    with the same nodes and replica sets, and writes go on."""
    cluster = grown
    running = at_least(cluster, 4)
    with admin(cluster) as client:
        before = {n.node_id: n.metadata_role for n in list_nodes(client)}
        streams = {s: replicas_of(cluster, s) for s in client.list_streams()}
    assert sorted(before) == running
    for node_id in running:
        cluster.kill(node_id)
    for node_id in running:
        cluster.restart(node_id, wait=False)
    cluster.wait_ready(running, timeout_s=90)
    with admin(cluster) as client:
        wait_until(lambda: {n.node_id: n.metadata_role for n in list_nodes(client)} == before, 60,
                   "the same nodes voting in the metadata group")
    for stream, replicas in streams.items():
        probe_write(cluster, stream, ProbeLog(), timeout=60, tag="after-restart")
        assert replicas_of(cluster, stream) == replicas



def test_remove_a_node_gone_for_good_and_it_never_comes_back(grown: DevCluster) -> None:
    """`vdl nodes remove`: the node is stopped (gone); the cluster drops it from the metadata
    group and recreates its replicas elsewhere; started again by mistake, it stops by itself."""
    cluster = grown
    running = at_least(cluster, 5)
    with admin(cluster) as client:
        streams = client.list_streams()
    gone = max(running, key=lambda n: sum(n in replicas_of(cluster, s) for s in streams))
    cluster.stop(gone)
    with admin(cluster) as client:
        remove_node(client, gone)
        wait_until(lambda: gone not in {n.node_id for n in list_nodes(client)}, 120, f"node {gone} removed")
    for stream in streams:
        replicas = replicas_of(cluster, stream)
        assert gone not in replicas and len(replicas) == 3, (stream, replicas)
        probe_write(cluster, stream, ProbeLog(), timeout=30, tag="after-remove")
    cluster.restart(gone, wait=False)
    wait_until(lambda: not cluster.nodes[gone].running, 60, f"the removed node {gone} stopping by itself")
    assert cluster.nodes[gone].process is not None and cluster.nodes[gone].process.poll() == 0


ROUNDS = int(os.environ.get("VDL_MEMBERSHIP_ROUNDS", "2"))  # `make membership-soak`: many more
SEED = int(os.environ.get("VDL_MEMBERSHIP_SEED", "7"))


@pytest.mark.timeout(120 + 90 * ROUNDS)
def test_random_moves_under_load_and_kill_9(grown: DevCluster) -> None:
    """Random reassignments of one stream in a row, each with a random node of the old or new
    replica set killed -9 and restarted half-way, under acks=all load (seed VDL_MEMBERSHIP_SEED)."""
    cluster = grown
    nodes = at_least(cluster, 4)
    rng = random.Random(SEED)
    probes = ProbeLog()
    stream = "random-moves"
    create_stream(cluster, stream, via=nodes[0], probes=probes)
    workload = Workload(cluster.bootstrap_servers, stream, rate_per_s=LOAD_RATE, tag="r",
                        kinds=("confluent", "kafka-python")).start()
    target: tuple[int, ...] = replicas_of(cluster, stream)
    try:
        for round_number in range(ROUNDS):
            workload.wait_progress(20)
            current = replicas_of(cluster, stream)
            target = tuple(rng.sample(nodes, 3))
            print(f"round {round_number} (seed {SEED}): {current} -> {target}")
            with admin(cluster) as client:
                reassign_stream(client, stream, list(target))
            victim = rng.choice(sorted(set(current) | set(target)))
            cluster.kill(victim)
            probe_write(cluster, stream, probes, timeout=30, tag=f"round{round_number}")
            cluster.restart(victim, timeout_s=60)
            wait_moved(cluster, [stream], timeout=120)
        workload.wait_progress(20)
    finally:
        workload.stop()
    assert replicas_of(cluster, stream) == tuple(sorted(target))
    assert not workload.acks.errors, workload.acks.errors[:5]
    verify(cluster, stream, workload.acks.snapshot() + [("probe", o, v) for v, o in probes.acked], target)
