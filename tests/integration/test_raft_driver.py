"""RaftGroup/RaftHost carrying a stream: three nodes in one process over real loopback
transports and real StreamLogs in tmp dirs, a Partition over each node's group (Kafka offsets
and the high watermark live there, the group knows entries). Every wait has a deadline and a
condition; no blind sleeps.

The driver's behaviour is tested on the in-memory network and virtual clock
(tests/unit/raft/test_driver.py); these few scenarios check it over real TCP and real time:
connections, coalesced frames, restarts on the same port."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.support import raft_groups
from tests.support.raft_groups import TICK, batch, produce
from tests.support.waiting import within
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.raft.config import RaftConfig
from vdl_broker.raft.host import RaftHost
from vdl_broker.raft.transport import Address, TransportConfig
from vdl_broker.raft.types import EntryType
from vdl_broker.server.partition import PartitionError
from vdl_wire.records.record_batch import read_records

pytestmark = pytest.mark.timeout(60)

FAST_TRANSPORT = TransportConfig(backoff_min_s=0.01, backoff_max_s=0.05)


class Cluster(raft_groups.Cluster):
    """The unit tests' cluster (tests/support/raft_groups.py) over real loopback transports and
    real time; a restarted node listens on its old port again."""

    def __init__(self, tmp: Path, n: int = 3, log_config: LogConfig | None = None) -> None:
        super().__init__(tmp, n, log_config)
        self.ports: dict[int, int] = {}

    async def start_host(self, i: int) -> RaftHost:
        host = RaftHost(i, ("127.0.0.1", self.ports.get(i, 0)), raft_config=self.raft_config,
                        transport_config=FAST_TRANSPORT, recovery_rate_bytes=self.recovery_rate)
        await host.start()
        self.ports[i] = host.raft_port
        return host

    def address(self, i: int) -> Address:
        return "127.0.0.1", self.ports[i]


def run(tmp_path: Path, body: Callable[[Cluster], Awaitable[None]], n: int = 3,
        log_config: LogConfig | None = None, resume: bool = False) -> None:
    async def main() -> None:
        cluster = Cluster(tmp_path, n, log_config)
        cluster.resume = resume
        await cluster.start()
        try:
            await body(cluster)
        finally:
            await cluster.close()
    asyncio.run(main())


def test_elect_replicate_commit(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        leader = await c.leader()
        assert sum(g.is_leader for g in c.groups()) == 1
        for g in c.groups():
            assert await g.wait_for(lambda g: g.leader_id == leader.node_id, 5)
        with pytest.raises(PartitionError, match="does not lead"):
            c.partition(next(g for g in c.groups() if not g.is_leader).node_id).append(batch(b"x"))
        offsets = await produce(c, leader, [f"v{i}".encode() for i in range(200)])
        assert offsets == list(range(200))
        # Many proposals share few syncs/appends: far fewer Readys than proposals.
        last = leader.last_index
        await c.all_committed(last)
        for g in c.groups():
            assert c.partition(g.node_id).high_watermark == 200
            assert c.applied[g.node_id][-1] == last
        reference = c.entries(leader.node_id, last)
        for i in c.ids:
            assert c.entries(i, last) == reference
        values = [r.value for e in reference if e[2] == EntryType.DATA for r in read_records(e[3])]
        assert values == [f"v{i}".encode() for i in range(200)]
        # Followers may have learned the commit before their acknowledgements reached the leader.
        assert await leader.wait_for(lambda g: all(s.match == last for s in g.peer_status().values()), 5)
        assert leader.in_sync_replicas() == [1, 2, 3]
        durable = c.partition(leader.node_id).append(batch(b"d")).proposal
        assert durable is not None
        assert await within(durable.durable, 5) == durable.index
        await within(durable.committed, 5)
    run(tmp_path, body)


def test_graceful_leader_stop_transfers_and_restart_rejoins(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        leader = await c.leader()
        await produce(c, leader, [b"x"] * 10)
        old = leader.node_id
        roles: list[tuple[int, str]] = []
        for g in c.groups():
            g.add_role_listener(lambda g: roles.append((g.node_id, g.role.name)))
        loop = asyncio.get_running_loop()
        started = loop.time()
        await c.stop_node(old, transfer=True)
        new = await c.leader(timeout=5)
        assert new.node_id != old
        assert (old, "FOLLOWER") in roles and (new.node_id, "LEADER") in roles
        # A transfer needs no election timeout (TimeoutNow skips PreVote and the lease).
        assert loop.time() - started < 1.5
        assert await produce(c, new, [b"y"] * 5) == list(range(10, 15))
        await c.start_node(old)
        last = new.last_index
        await c.all_committed(last)
        assert c.entries(old, last) == c.entries(new.node_id, last)
    run(tmp_path, body)


def test_many_groups_share_connections_and_coalesce_heartbeats(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        names = [f"s{k}" for k in range(24)]
        logs: list[StreamLog] = []
        awake = RaftConfig(election_ticks=10, quiesce_after_heartbeats=0)  # heartbeats all along
        for i, host in c.hosts.items():
            for name in names:
                log = StreamLog.open(c.tmp / f"node{i}" / name, LogConfig(fsync=False))
                logs.append(log)
                host.create_group(name, c.ids, log, config=awake)
        try:
            groups = [h.groups[n] for h in c.hosts.values() for n in names]

            async def all_led() -> None:
                while not all(any(g.leader_ready for g in groups if g.name == n) for n in names):
                    await asyncio.sleep(TICK)
            await within(all_led(), 10)
            t1 = c.hosts[1].transport
            before = (t1.stats(2).frames_sent, t1.stats(2).messages_sent)
            start = asyncio.get_running_loop().time()
            await asyncio.sleep(TICK * 10)  # observe ten ticks of idle heartbeating
            elapsed_ticks = (asyncio.get_running_loop().time() - start) / TICK
            frames = t1.stats(2).frames_sent - before[0]
            messages = t1.stats(2).messages_sent - before[1]
            # 24 groups between nodes 1 and 2: per tick a heartbeat or a response for most of
            # them, in a couple of frames (our heartbeats; responses to the peer's heartbeats).
            assert messages >= 24 * elapsed_ticks * 0.3
            assert frames <= 3 * (elapsed_ticks + 2)
            assert messages / max(frames, 1) >= 4
            for t in (h.transport for h in c.hosts.values()):
                for peer in c.ids:
                    if peer != t.node_id:
                        assert t.stats(peer).connects == 1
        finally:
            for host in c.hosts.values():
                for name in names:
                    await host.remove_group(name)
            for log in logs:
                log.close()
    run(tmp_path, body)


def test_crashed_leader_is_replaced_and_catches_up_after_recovery(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        leader = await c.leader()
        await produce(c, leader, [b"before"] * 10)
        old = leader.node_id
        await c.stop_node(old, crash=True)
        new = await c.leader(timeout=10)
        assert new.node_id != old and c.partition(new.node_id).high_watermark >= 10
        assert await produce(c, new, [b"after"] * 10) == list(range(10, 20))
        await c.start_node(old)
        last = new.last_index
        await c.all_committed(last)
        assert c.entries(old, last) == c.entries(new.node_id, last)
        assert c.partition(old).high_watermark == 20
    run(tmp_path, body)
