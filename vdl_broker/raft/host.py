"""One node's Raft side: `RaftHost` owns the transport (listening on the raft address), one
ticker for every group (so one tick's heartbeats to a peer leave as one frame) and the groups
by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Sequence

from vdl_broker.log import StreamLog
from vdl_broker.raft.group import ApplyFn, GroupConfig, LatencyFn, RaftGroup, SnapshotFn
from vdl_broker.raft.throttle import CatchUpThrottle
from vdl_broker.raft.transport import Address, Identify, RaftTransport, TlsContexts, TransportConfig
from vdl_broker.raft.types import Message

log = logging.getLogger(__name__)


class RaftHost:
    """One node's Raft side: the transport (listening on the raft address), one ticker for all
    groups (so one tick's heartbeats to a peer leave as one frame), and the groups by name.

    A cluster of one has no raft address: its groups have one voter and nobody to talk to."""

    def __init__(self, node_id: int, raft_listen: Address | None, peers: dict[int, Address] | None = None, *,
                 tick_interval_s: float = 0.1, group_config: GroupConfig | None = None,
                 transport_config: TransportConfig | None = None,
                 on_unknown_group: Callable[[str, Message], None] | None = None,
                 commit_latency: LatencyFn | None = None, sync_latency: LatencyFn | None = None,
                 tls: TlsContexts | None = None, identify: Identify | None = None,
                 recovery_rate_bytes: int | None = None) -> None:
        self.node_id = node_id
        # Metrics hooks (vdl_broker.metrics), given to every group and its log.
        self.commit_latency = commit_latency
        self.sync_latency = sync_latency
        self.tick_interval_s = tick_interval_s
        self.group_config = dataclasses.replace(group_config or GroupConfig(), tick_interval_s=tick_interval_s)
        self.groups: dict[str, RaftGroup] = {}
        self.on_unknown_group = on_unknown_group
        others = {peer: address for peer, address in (peers or {}).items() if peer != node_id}
        if raft_listen is None and others:
            raise ValueError("a node with peers needs a raft address")
        self.transport = (RaftTransport(node_id, raft_listen, self._deliver, others, transport_config,
                                        tls=tls, identify=identify)
                          if raft_listen is not None else None)
        self._ticker: asyncio.Task[None] | None = None
        # Catch-up appends (replicas far behind) are paced; None: as fast as they go.
        self.throttle = CatchUpThrottle(recovery_rate_bytes, self._send) if recovery_rate_bytes else None

    async def start(self) -> None:
        if self.transport is not None:
            await self.transport.start()
        self._ticker = asyncio.get_running_loop().create_task(self._tick_loop(), name=f"raft-ticker:{self.node_id}")

    @property
    def raft_port(self) -> int | None:
        return self.transport.port if self.transport is not None else None

    def add_peer(self, peer_id: int, address: Address) -> None:
        if self.transport is None:
            raise ValueError("a node without a raft address cannot have peers")
        self.transport.add_peer(peer_id, address)

    def _send(self, group: str, message: Message) -> bool:
        return self.transport.send(group, message) if self.transport is not None else False

    def _send_catchup(self, group: str, message: Message) -> bool:
        return self.throttle.submit(group, message) if self.throttle is not None else self._send(group, message)

    def create_group(self, name: str, voters: Sequence[int], stream_log: StreamLog, *,
                     apply: ApplyFn | None = None, on_snapshot: SnapshotFn | None = None,
                     config: GroupConfig | None = None, resume_from_commit_point: bool = False) -> RaftGroup:
        """Create and start the group `name` over `stream_log`. `voters`: the group's configuration
        at creation (empty for a replica joining an existing group: RaftGroup)."""
        if name in self.groups:
            raise ValueError(f"raft group {name} already exists")
        group = RaftGroup(name, self.node_id, voters, stream_log, self._send,
                          config=dataclasses.replace(config, tick_interval_s=self.tick_interval_s) if config
                          else self.group_config, apply=apply, on_snapshot=on_snapshot,
                          resume_from_commit_point=resume_from_commit_point, commit_latency=self.commit_latency,
                          send_catchup=self._send_catchup)
        if self.sync_latency is not None:
            stream_log.observe_syncs(self.sync_latency)
        self.groups[name] = group
        group.start()
        return group

    async def remove_group(self, name: str, transfer: bool = False) -> None:
        group = self.groups.pop(name, None)
        if group is not None:
            await group.stop(transfer=transfer)

    async def stop(self, transfer: bool = True, timeout_s: float = 2.0) -> None:
        """Graceful: leaders hand over their groups first (concurrently), then everything stops."""
        groups = list(self.groups.values())
        if transfer:
            await asyncio.gather(*(g.stop(transfer=True, timeout_s=timeout_s) for g in groups),
                                 return_exceptions=True)
        for group in groups:
            await group.stop(transfer=False)
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        if self.throttle is not None:
            await self.throttle.close()
        if self.transport is not None:
            await self.transport.stop()

    def _deliver(self, name: str, message: Message) -> None:
        group = self.groups.get(name)
        if group is not None:
            group.step(message)
        elif self.on_unknown_group is not None:
            self.on_unknown_group(name, message)

    async def _tick_loop(self) -> None:
        loop = asyncio.get_running_loop()
        next_tick = loop.time() + self.tick_interval_s
        while True:
            await asyncio.sleep(max(0.0, next_tick - loop.time()))
            # Never two ticks closer than the interval, even after a late wake-up: the read
            # lease (RaftGroup.has_read_lease) counts on every node's ticks being that far apart.
            next_tick = max(next_tick + self.tick_interval_s, loop.time() + self.tick_interval_s)
            for group in list(self.groups.values()):
                try:
                    group.tick()
                except Exception:  # one broken group must not stop the clock of every other
                    log.exception("node %d: tick of group %s failed", self.node_id, group.name)
