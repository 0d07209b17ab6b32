"""The replica manager at a node's start, fed the metadata views a restart sees in the order it
sees them: first the state of its last metadata snapshot (the metadata group replays only what
follows it once its leader tells the commit index), then the current one.

The case: a one-replica stream moved from node 1 to node 2; the move finished (node 1 deleted its
copy: node 2 holds the only one); node 2 restarted cleanly, its last metadata snapshot taken
half-way through the move (node 2 joining, not yet in the replica set). Opening that replica from
the snapshot's view made `_open_log` wipe it as a stale copy left from an earlier placement --
every acknowledged record lost. The replica must wait for the current view, then open with its
records, at their offsets.

Real ClusterState (the metadata snapshot taken and restored as the node does), real StreamLogs,
ReplicaRegistry, RaftHost and RaftGroups on a virtual clock; the broker around the manager is a
stand-in with the attributes it reads.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support import virtual_time
from tests.support.kafka import record_values
from tests.support.raft_groups import TICK, batch, until
from vdl_broker.cluster.membership import complete_reassignment_command, reassign_stream_command
from vdl_broker.cluster.metadata import ClusterState, create_stream_command, register_node_command
from vdl_broker.config import NodeConfig
from vdl_broker.log.damage import load_damage
from vdl_broker.log.tail_cache import CacheBudget
from vdl_broker.raft.config import RaftConfig
from vdl_broker.raft.host import RaftHost
from vdl_broker.server.replica_manager import ReplicaManager

pytestmark = pytest.mark.unit

STREAM = "orders"
NODE = 2  # the node restarted: the target of the move
VALUES = [b"first", b"second", b"third"]


def history() -> tuple[ClusterState, list[tuple[int, dict[str, Any]]]]:
    """The cluster's metadata commands, by index: three nodes, the stream created on node 1
    (one replica), moved to node 2, the move completed."""
    commands: list[tuple[int, dict[str, Any]]] = [
        (1, register_node_command(1, "h:1", "h:11")),
        (2, register_node_command(2, "h:2", "h:12")),
        (3, register_node_command(3, "h:3", "h:13")),
        (4, create_stream_command(STREAM, 1)),
        (5, reassign_stream_command(STREAM, 4, [NODE])),
        (6, complete_reassignment_command(STREAM, 4, [NODE])),
    ]
    return ClusterState(), commands


class MetadataGroup:
    """What `_metadata_current` reads of the metadata RaftGroup: not current until the leader
    (node 1) has told a commit index this node has applied."""

    def __init__(self, applied: int) -> None:
        self.leader_ready = False
        self.leader_id = 0
        self.applied_index = applied
        self.node = SimpleNamespace(leader_commit=0)

    def caught_up(self, index: int) -> None:
        self.leader_id, self.node.leader_commit, self.applied_index = 1, index, index


def stand_in(data_dir: Path, state: ClusterState, group: MetadataGroup, host: RaftHost) -> Any:
    config = NodeConfig(data_dir=data_dir, node_id=NODE, fsync=False)
    return SimpleNamespace(node_id=NODE, config=config, metadata=SimpleNamespace(state=state, group=group),
                           host=host, cache_budget=CacheBudget(config.tail_cache_bytes))


async def start_host() -> RaftHost:
    loop = asyncio.get_running_loop()
    host = RaftHost(NODE, None, raft_config=RaftConfig(election_ticks=10, tick_interval_s=TICK), clock=loop.time)
    await host.start()
    return host


async def stop(manager: ReplicaManager, host: RaftHost) -> None:
    await manager.stop()
    await host.stop()
    manager.close()


def records(manager: ReplicaManager, below: int | None = None) -> list[tuple[int, bytes | None]]:
    """(offset, value) of the records in node 2's replica of the stream (below `below`)."""
    partition = manager.local(STREAM)
    assert partition is not None
    if partition.log.log_end_offset == 0:
        return []
    read = partition.log.read(0, 1 << 20, below)
    return record_values(b"".join(bytes(b) for b in read.buffers))


def test_a_finished_move_seen_half_way_from_the_snapshot_keeps_the_only_copy(tmp_path: Path) -> None:
    async def main() -> None:
        state, commands = history()
        for index, command in commands[:5]:
            state.apply_entry(index, [command])
        snapshot_mid_move = state.snapshot()  # node 2's last metadata snapshot: after entry 5
        state.apply_entry(6, [commands[5][1]])
        assert state.streams[STREAM].replicas == (NODE,) and not state.membership.reassignments

        # Node 2 before the restart: the move done, its replica the stream's only voter; the
        # acknowledged records are committed in it.
        group = MetadataGroup(applied=6)
        group.caught_up(6)
        host = await start_host()
        manager = ReplicaManager(stand_in(tmp_path, state, group, host))
        await manager.reconcile()
        partition = manager.local(STREAM)
        assert partition is not None
        await until(lambda: partition.is_leader, 5, "node 2 leads its one-replica stream")
        handles = [partition.append(batch(value)) for value in VALUES]
        await asyncio.wait_for(asyncio.gather(*(h.wait(-1, 10_000) for h in handles)), 5)
        assert [h.base_offset for h in handles] == [0, 1, 2]
        expected = [(0, b"first"), (1, b"second"), (2, b"third")]
        assert records(manager, partition.high_watermark) == expected
        await stop(manager, host)  # a clean stop (SIGTERM)

        # The restart: the metadata state is the snapshot's (the move half-way, node 2 joining)
        # until the leader's commit index arrives and entry 6 is replayed.
        restarted = ClusterState()
        restarted.load_snapshot(snapshot_mid_move)
        assert restarted.streams[STREAM].replicas == (1,)
        assert restarted.membership.hosts(restarted.streams[STREAM]) == (1, NODE)
        group = MetadataGroup(applied=5)
        host = await start_host()
        manager = ReplicaManager(stand_in(tmp_path, restarted, group, host))
        await manager.reconcile()  # what the reconcile loop does at start, before the replay

        restarted.apply_entry(6, [commands[5][1]])
        group.caught_up(6)
        await manager.reconcile()
        partition = manager.local(STREAM)
        assert partition is not None
        assert records(manager) == expected, "the only copy of the stream was wiped"
        assert load_damage(tmp_path / STREAM) is None
        await until(lambda: partition.is_leader, 5, "node 2 leads its one-replica stream again")
        assert partition.high_watermark == 3
        assert records(manager, partition.high_watermark) == expected
        await stop(manager, host)

    virtual_time.run(main())
