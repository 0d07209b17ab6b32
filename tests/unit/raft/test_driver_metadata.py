"""The metadata group over three RaftHosts on the in-memory network and the virtual clock
(tests/support/raft_groups.py): registration, create/delete through the leader, the same state
on every node, replay from the log after a restart. Over real TCP:
tests/integration/test_raft_driver_metadata.py."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from tests.support import virtual_time
from tests.support.raft_groups import MemoryNetwork, until
from vdl_broker.cluster.metadata import METADATA_GROUP, ApplyResult, Outcome
from vdl_broker.cluster.service import MetadataService
from vdl_broker.config import NodeAddress, NodeConfig
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.raft.config import RaftConfig
from vdl_broker.raft.host import RaftHost
from vdl_broker.raft.types import NotLeaderError

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


class Node:
    def __init__(self, config: NodeConfig, network: MemoryNetwork) -> None:
        self.config = config
        self.network = network
        self.host: RaftHost | None = None
        self.service: MetadataService | None = None
        self.log: StreamLog | None = None
        self.changes: list[ApplyResult] = []

    async def start(self) -> None:
        host, port = self.config.raft_listen.rsplit(":", 1)
        self.host = RaftHost(self.config.node_id, (host, int(port)), self.config.raft_peers(),
                             raft_config=RaftConfig(election_ticks=10, tick_interval_s=0.02),
                             transport_factory=self.network.transport, clock=asyncio.get_running_loop().time,
                             rng=random.Random(self.network.rng.getrandbits(64)))
        await self.host.start()
        self.log = StreamLog.open(self.config.data_dir / METADATA_GROUP, LogConfig(fsync=False))
        self.changes = []
        self.service = MetadataService(self.host, self.config, on_change=self.changes.extend)
        self.service.start(self.log)

    async def stop(self) -> None:
        assert self.host is not None and self.log is not None
        await self.host.stop()
        self.log.close()


def make_nodes(tmp: Path, network: MemoryNetwork) -> list[Node]:
    """Three nodes; their addresses are names on the network (nothing listens)."""
    members = [NodeAddress(i, f"node{i}:{9091 + i}", f"node{i}:{7000 + i}") for i in (1, 2, 3)]
    return [Node(NodeConfig(tmp / f"node{m.id}", f"node{m.id}", 9091 + m.id, m.id, raft_listen=m.raft, peers=members),
                 network) for m in members]


def test_metadata_group_end_to_end(tmp_path: Path) -> None:
    async def main() -> None:
        nodes = make_nodes(tmp_path, MemoryNetwork(seed=3))
        for node in nodes:
            await node.start()
        try:
            await until(lambda: any(n.service.is_leader for n in nodes)
                       and all(len(n.service.state.nodes) == 3 and n.service.state.cluster_id for n in nodes))
            # One cluster id, created once when the cluster formed, the same on every node.
            assert len({n.service.state.cluster_id for n in nodes}) == 1
            leader = next(n for n in nodes if n.service.is_leader)
            follower = next(n for n in nodes if n is not leader)
            with pytest.raises(NotLeaderError) as info:
                await follower.service.create_stream("events")
            assert info.value.leader_id == leader.config.node_id
            created = await leader.service.create_stream("events", config={"retention.ms": 1000})
            assert created.ok and len(created.stream.replicas) == 3
            assert (await leader.service.create_stream("events")).outcome is Outcome.EXISTS
            assert (await leader.service.create_stream("x", 5)).outcome is Outcome.INVALID_REPLICATION_FACTOR
            one = await leader.service.create_stream("solo", 1)
            assert one.ok and one.stream.replicas[0] != created.stream.replicas[0]  # leaders spread
            assert (await leader.service.delete_stream("solo")).ok
            await until(lambda: all(set(n.service.state.streams) == {"events"} for n in nodes))
            assert all(n.service.state.streams == leader.service.state.streams for n in nodes)
            assert [r.op for r in follower.changes if r.ok][-3:] == ["create_stream", "create_stream", "delete_stream"]
            # A restarted node replays the metadata log from its start.
            await follower.stop()
            await leader.service.create_stream("later")
            await follower.start()
            await until(lambda: set(follower.service.state.streams) == {"events", "later"})
            assert follower.service.state.streams == leader.service.state.streams
            assert follower.service.state.cluster_id == leader.service.state.cluster_id
        finally:
            for node in nodes:
                if node.host is not None and node.host.groups:
                    await node.stop()
    virtual_time.run(main())


def test_a_node_whose_metadata_group_fails_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A node's whole view of the cluster hangs on its metadata group: when the group stops on
    an error it cannot recover from (its log's append raising what no storage error is: a bug
    nobody foresaw), the node stops as kill -9 would (service._halt, recorded here instead of
    exiting) -- it served a view that no longer moved before. The others go on without it."""
    halted: list[str] = []
    monkeypatch.setattr("vdl_broker.cluster.service._halt", halted.append)

    def failing_append(entries: object) -> None:
        raise RuntimeError("a bug nobody foresaw")

    async def main() -> None:
        nodes = make_nodes(tmp_path, MemoryNetwork(seed=5))
        for node in nodes:
            await node.start()
        try:
            await until(lambda: any(n.service.is_leader for n in nodes)
                       and all(len(n.service.state.nodes) == 3 for n in nodes))
            leader = next(n for n in nodes if n.service.is_leader)
            follower = next(n for n in nodes if n is not leader)
            assert follower.log is not None
            monkeypatch.setattr(follower.log, "append", failing_append)
            assert (await leader.service.create_stream("events")).ok
            await until(lambda: halted != [])
            assert halted == ["the metadata group failed (a bug nobody foresaw); start the node again: it replays "
                              "its log and catches up"]
            await until(lambda: all(n is follower or set(n.service.state.streams) == {"events"} for n in nodes))
        finally:
            for node in nodes:
                if node.host is not None and node.host.groups:
                    await node.stop()
    virtual_time.run(main())
