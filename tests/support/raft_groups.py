"""Real Raft drivers on an in-memory network and a virtual clock: the unit tier's harness.

Real RaftHosts, RaftGroups and StreamLogs (in tmp dirs), and a Partition over each replica, run on
a VirtualLoop (tests/support/virtual_time.py); their transports are MemoryTransports delivering
frames through a MemoryNetwork instead of TCP. Every choice a run makes comes from the seed
(election timeouts, dropped frames) or from virtual time, so a scenario replays exactly:
`network.trace` lists every frame delivered, with its virtual time.

The network keeps what TCP gives the real transport: frames between two nodes arrive in the
order they were sent, each after `latency_s`; messages queued for a peer within one loop
iteration leave as one frame (the real transport's coalescing); and messages are encoded and
decoded with the real wire codec, so nodes never share objects. On top of that, a test can cut
links (`partition`, `isolate`, `cut`; `heal`) and drop frames at random (`drop_rate`): a frame in
flight when its link is cut is lost, like the bytes of a broken connection.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import virtual_time
from tests.support.waiting import within
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.raft.config import RaftConfig
from vdl_broker.raft.group import RaftGroup
from vdl_broker.raft.host import RaftHost
from vdl_broker.raft.transport import Address, CallHandler, Handler, PeerStats, TransportConfig
from vdl_broker.raft.types import Message
from vdl_broker.raft.wire import (
    KIND_HEARTBEAT,
    KIND_MESSAGES,
    decode_frame,
    encode_frame,
    encode_heartbeat,
    encode_leaving,
)
from vdl_broker.server.partition import Partition
from vdl_wire.records.record_batch import RecordBatchBuilder

TICK = 0.02  # 20 ms ticks, election_ticks 10: elections in 200-400 ms of virtual time
GROUP = "events"


@dataclass(frozen=True)
class Delivery:
    """One message as it reached its destination (a trace line)."""

    time: float
    sender: int
    to: int
    group: str
    type: str
    term: int
    index: int
    log_term: int
    commit: int
    entries: tuple[int, ...]  # the indexes of the entries carried
    reject: bool


class MemoryNetwork:
    """Links between the nodes' MemoryTransports, on the running loop's clock."""

    def __init__(self, seed: int = 0, latency_s: float = 0.001) -> None:
        self.rng = random.Random(seed)
        self.latency_s = latency_s
        self.drop_rate = 0.0  # the fraction of frames lost on every link (from the seeded rng)
        self.transports: dict[int, MemoryTransport] = {}
        self.trace: list[Delivery] = []
        # Told of every message as it arrives, before its destination steps it.
        self.on_delivery: Callable[[Delivery], None] | None = None
        self._cut: set[tuple[int, int]] = set()  # (from, to): that direction carries nothing
        self._links: dict[tuple[int, int], deque[tuple[bytes, int]]] = {}

    # ------------------------------------------------------------------ faults

    def cut(self, a: int, b: int, both: bool = True) -> None:
        self._cut.add((a, b))
        if both:
            self._cut.add((b, a))

    def isolate(self, node: int) -> None:
        """Nothing reaches `node` and nothing it sends arrives."""
        for other in self._nodes() - {node}:
            self.cut(node, other)

    def partition(self, *sides: Iterable[int]) -> None:
        """Cut every link between two different sides."""
        sets = [set(side) for side in sides]
        for i, side in enumerate(sets):
            for other in sets[i + 1:]:
                for a in side:
                    for b in other:
                        self.cut(a, b)

    def heal(self) -> None:
        self._cut.clear()

    def linked(self, a: int, b: int) -> bool:
        return (a, b) not in self._cut and a in self.transports and b in self.transports

    def _nodes(self) -> set[int]:
        nodes = set(self.transports)
        for transport in self.transports.values():
            nodes.update(transport.peer_ids())
        return nodes

    # ------------------------------------------------------------------ carrying frames

    def transport(self, node_id: int, listen: Address, handler: Handler, peers: dict[int, Address] | None = None,
                  config: TransportConfig | None = None, *, tls: Any = None, identify: Any = None) -> MemoryTransport:
        """RaftHost's transport_factory."""
        return MemoryTransport(self, node_id, listen, handler, peers)

    def send(self, sender: MemoryTransport, to: int, frame: bytes) -> None:
        if not self.linked(sender.node_id, to) or (self.drop_rate and self.rng.random() < self.drop_rate):
            return
        loop = asyncio.get_running_loop()
        self._links.setdefault((sender.node_id, to), deque()).append((frame, sender.incarnation))
        loop.call_at(loop.time() + self.latency_s, self._arrive, sender.node_id, to)

    def _arrive(self, sender: int, to: int) -> None:
        # FIFO per link whatever order the loop runs equal-time timers in: take the oldest.
        frame, incarnation = self._links[(sender, to)].popleft()
        destination = self.transports.get(to)
        decoded = decode_frame(frame)
        # The leaving notice is written just before its sender closes the connection (a
        # graceful stop): TCP still delivers it after the sender stopped. Any other frame in
        # flight is lost with the connection.
        stopped_gracefully = decoded.leaving and (sender, to) not in self._cut
        if destination is None or not (self.linked(sender, to) or stopped_gracefully):
            return
        now = asyncio.get_running_loop().time()
        if decoded.kind == KIND_MESSAGES:
            for group, m in decoded.messages:
                delivery = Delivery(round(now, 6), m.sender, m.to, group, m.type.name, m.term, m.index, m.log_term,
                                    m.commit, tuple(e.index for e in m.entries), m.reject)
                self.trace.append(delivery)
                if self.on_delivery is not None:
                    self.on_delivery(delivery)
        destination.receive(sender, decoded.kind, decoded.messages, incarnation, decoded.leaving)


@dataclass
class _Peer:
    stats: PeerStats = field(default_factory=PeerStats)
    queue: list[tuple[str, Message]] = field(default_factory=list)
    wrote: bool = False  # a message frame went out since the last send_heartbeats()
    incarnation: int | None = None
    leaving: bool = False


class MemoryTransport:
    """RaftTransport's interface (what RaftHost and the server use) over a MemoryNetwork."""

    def __init__(self, network: MemoryNetwork, node_id: int, listen: Address, handler: Handler,
                 peers: dict[int, Address] | None) -> None:
        self.network = network
        self.node_id = node_id
        self.listen = listen
        self.handler = handler
        self.call_handler: CallHandler | None = None
        self.on_leaving: Callable[[int], None] | None = None
        self.incarnation = network.rng.getrandbits(63)  # new at every start, as a new process's
        self._peers: dict[int, _Peer] = {}
        self._pending = list(peers or {})
        self._started = False

    async def start(self) -> None:
        self._started = True
        self.network.transports[self.node_id] = self
        for peer in self._pending:
            self.add_peer(peer, None)

    @property
    def port(self) -> int:
        return self.listen[1]

    async def stop(self) -> None:
        if self.network.transports.get(self.node_id) is self:
            del self.network.transports[self.node_id]
        self._started = False

    def add_peer(self, peer_id: int, address: Address | None) -> None:
        if peer_id != self.node_id and peer_id not in self._peers:
            self._peers[peer_id] = _Peer()
            self._peers[peer_id].stats.connects = 1

    def send(self, group: str, message: Message) -> bool:
        peer = self._peers.get(message.to)
        if peer is None or not self._started:
            return False
        if not self.network.linked(self.node_id, message.to):
            peer.stats.dropped += 1  # no connection: dropped, as by the real transport
            return False
        if not peer.queue:
            asyncio.get_running_loop().call_soon(self._flush, message.to)
        peer.queue.append((group, message))
        return True

    def _flush(self, to: int) -> None:
        peer = self._peers[to]
        batch, peer.queue = peer.queue, []
        if not batch or not self._started:
            return
        frame = b"".join(bytes(part) for part in encode_frame(self.node_id, batch))
        peer.wrote = True
        peer.stats.frames_sent += 1
        peer.stats.messages_sent += len(batch)
        peer.stats.bytes_sent += len(frame)
        self.network.send(self, to, frame)

    def send_heartbeats(self) -> None:
        for peer_id, peer in self._peers.items():
            if not peer.wrote and self.network.linked(self.node_id, peer_id):
                peer.stats.heartbeats_sent += 1
                self.network.send(self, peer_id, encode_heartbeat(self.node_id, self.incarnation))
            peer.wrote = False

    def receive(self, sender: int, kind: int, messages: list[tuple[str, Message]], incarnation: int,
                leaving: bool = False) -> None:
        peer = self._peers.get(sender)
        if peer is None:
            return  # an unknown node: the real transport refuses its connection
        if incarnation != peer.incarnation:
            peer.leaving = False  # a restarted peer: the real transport sees a new connection
        peer.incarnation = incarnation
        if kind == KIND_HEARTBEAT:
            peer.stats.heartbeats_received += 1
            return
        peer.stats.frames_received += 1
        peer.stats.messages_received += len(messages)
        if leaving and not peer.leaving:
            peer.leaving = True
            if self.on_leaving is not None:
                self.on_leaving(sender)
        for group, message in messages:
            self.handler(group, message)

    def heard_from(self, peer_id: int) -> tuple[int, int | None]:
        peer = self._peers.get(peer_id)
        if peer is None:
            return 0, None
        return peer.stats.frames_received + peer.stats.heartbeats_received, peer.incarnation

    def peer_ids(self) -> list[int]:
        return list(self._peers)

    def announce_leaving(self) -> None:
        for peer_id in self._peers:
            if self._started and self.network.linked(self.node_id, peer_id):
                self.network.send(self, peer_id, encode_leaving(self.node_id))

    def is_leaving(self, peer_id: int) -> bool:
        peer = self._peers.get(peer_id)
        return peer is not None and peer.leaving

    def stats(self, peer_id: int) -> PeerStats:
        peer = self._peers.get(peer_id)
        return peer.stats if peer is not None else PeerStats()

    def is_connected(self, peer_id: int) -> bool:
        return peer_id in self._peers and self.network.linked(self.node_id, peer_id)

    async def call(self, peer_id: int, payload: bytes, timeout_s: float) -> bytes:
        other = self.network.transports.get(peer_id)
        if not self.is_connected(peer_id) or other is None or other.call_handler is None:
            raise ConnectionError(f"node {peer_id} is not connected")
        await asyncio.sleep(self.network.latency_s)
        answer = await within(other.call_handler(self.node_id, payload), timeout_s)
        await asyncio.sleep(self.network.latency_s)
        return answer


def batch(value: bytes, count: int = 1) -> bytes:
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(1_700_000_000_000 + i, None, value)
    return builder.build()


def address(node: int) -> Address:
    """Node `node`'s raft address on the MemoryNetwork: only a name."""
    return f"node{node}", node


class Cluster:
    """n RaftHosts on one MemoryNetwork, one group GROUP over a StreamLog per node, a Partition
    over each; restartable nodes. `ids` are the voters a starting node creates the group with."""

    def __init__(self, tmp: Path, n: int = 3, log_config: LogConfig | None = None, seed: int = 0,
                 raft_config: RaftConfig | None = None) -> None:
        self.tmp = tmp
        self.log_config = log_config or LogConfig(fsync=False)
        self.raft_config = raft_config or RaftConfig(election_ticks=10, tick_interval_s=TICK)
        self.ids = list(range(1, n + 1))
        self.network = MemoryNetwork(seed)
        self.rng = random.Random(seed)
        self.hosts: dict[int, RaftHost] = {}
        self.logs: dict[int, StreamLog] = {}
        self.applied: dict[int, list[int]] = {i: [] for i in self.ids}
        self.partitions: dict[int, Partition] = {}
        self.resume = False
        self.recovery_rate: int | None = None  # the hosts' catch-up throttle (None: off)

    async def start(self) -> None:
        for i in self.ids:
            await self.start_node(i)

    async def start_host(self, i: int) -> RaftHost:
        """Node `i`'s RaftHost, started: on the memory network and the loop's (virtual) clock."""
        loop = asyncio.get_running_loop()
        host = RaftHost(i, address(i), raft_config=self.raft_config, recovery_rate_bytes=self.recovery_rate,
                        transport_factory=self.network.transport, clock=loop.time,
                        rng=random.Random(self.rng.getrandbits(64)))
        await host.start()
        return host

    def address(self, i: int) -> Address:
        """Where node `i`'s peers reach it (once started)."""
        return address(i)

    async def start_node(self, i: int) -> None:
        host = await self.start_host(i)
        for j, other in self.hosts.items():  # as the real nodes learn of each other
            other.add_peer(i, self.address(i))
            host.add_peer(j, self.address(j))
        self.hosts[i] = host
        self.logs[i] = StreamLog.open(self.tmp / f"node{i}" / GROUP, self.log_config)
        self.applied[i] = []
        partition = Partition(GROUP, self.logs[i], i)

        def apply(entries: list, i: int = i, partition: Partition = partition) -> None:
            partition.on_apply(entries)
            self.applied[i].extend(entry.index for entry in entries)
        group = host.create_group(GROUP, self.ids, self.logs[i], apply=apply, on_snapshot=partition.on_snapshot,
                                  resume_from_commit_point=self.resume)
        partition.attach(group)
        self.partitions[i] = partition

    async def stop_node(self, i: int, transfer: bool = False, crash: bool = False) -> None:
        host = self.hosts.pop(i)
        await host.stop(transfer=transfer)
        log = self.logs.pop(i)
        if crash:
            log._release()  # like kill -9: no clean-shutdown marker, the next open recovers
        else:
            log.close()

    def partition(self, i: int) -> Partition:
        return self.partitions[i]

    def group(self, i: int) -> RaftGroup:
        return self.hosts[i].groups[GROUP]

    def groups(self) -> list[RaftGroup]:
        return [h.groups[GROUP] for h in self.hosts.values()]

    async def leader(self, timeout: float = 10.0, exclude: int | None = None) -> RaftGroup:
        """The first leader whose partition takes appends (its own-term no-op committed and applied
        there), not `exclude`, within `timeout` virtual seconds."""
        async def find() -> RaftGroup:
            while True:
                ready = [g for g in self.groups() if self.partitions[g.node_id].is_leader and g.node_id != exclude]
                if ready:
                    return ready[0]
                await asyncio.wait([asyncio.ensure_future(g.changed_future()) for g in self.groups()],
                                   timeout=TICK * 5, return_when=asyncio.FIRST_COMPLETED)
        return await within(find(), timeout)

    async def all_committed(self, index: int, timeout: float = 10.0) -> None:
        for g in self.groups():
            assert await g.wait_for(lambda g: g.applied_index >= index, timeout), (g.node_id, g.applied_index)

    def entries(self, i: int, upto: int) -> list[tuple[int, int, int, bytes]]:
        log = self.logs[i]
        out = []
        index = log.first_index
        while index <= upto:
            chunk = log.entries(index, upto + 1)
            out += [(e.index, e.term, int(e.type), bytes(e.data)) for e in chunk]
            index = chunk[-1].index + 1
        return out

    async def close(self) -> None:
        for i in list(self.hosts):
            await self.stop_node(i)


def run(tmp_path: Path, body: Callable[[Cluster], Awaitable[None]], n: int = 3,
        log_config: LogConfig | None = None, resume: bool = False, seed: int = 0,
        raft_config: RaftConfig | None = None) -> Cluster:
    """Start the cluster on a virtual clock, run `body`, stop every node; the stopped cluster
    is returned (its network's trace)."""
    cluster = Cluster(tmp_path, n, log_config, seed, raft_config)
    cluster.resume = resume

    async def main() -> None:
        await cluster.start()
        try:
            await body(cluster)
        finally:
            await cluster.close()
    virtual_time.run(main())
    return cluster


async def produce(c: Cluster, leader: RaftGroup, values: list[bytes]) -> list[int]:
    """Append all at once (one group-commit window), await all commits; returns base offsets."""
    handles = [c.partition(leader.node_id).append(batch(v)) for v in values]
    await within(asyncio.gather(*(h.wait(-1, 10_000) for h in handles)), 10)
    return [h.base_offset for h in handles]


async def until(condition: Callable[[], object], timeout: float = 10.0, message: str = "") -> None:
    """Let the loop run until `condition()` holds, checking every millisecond of virtual time;
    AssertionError after `timeout` virtual seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.1f} virtual s waiting for {message or condition}")
        await asyncio.sleep(0.001)


def stored(stream_log: StreamLog) -> list[tuple[int, int, bytes]]:
    """(index, term, payload) of every entry of the log."""
    return [(e.index, e.term, bytes(e.data)) for e in stream_log.entries(stream_log.first_index,
                                                                         stream_log.last_index + 1)]


@asynccontextmanager
async def ticking(groups: Mapping[int, RaftGroup], logs: Iterable[StreamLog],
                  every_s: float = 0.01) -> AsyncIterator[None]:
    """Start RaftGroups wired to each other without a transport (their `send` steps the
    destination group) and tick them every `every_s` while the block runs; then stop them and
    close their logs."""

    async def tick() -> None:
        while True:
            await asyncio.sleep(every_s)
            for group in groups.values():
                group.tick()

    for group in groups.values():
        group.start()
    ticker = asyncio.get_running_loop().create_task(tick())
    try:
        yield
    finally:
        ticker.cancel()
        for group in groups.values():
            await group.stop(transfer=False)
        for stream_log in logs:
            stream_log.close()
