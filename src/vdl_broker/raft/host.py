"""One node's Raft side: `RaftHost` owns the transport (listening on the raft address), one
ticker for every group that is awake (so one tick's heartbeats to a peer leave as one frame),
the node's liveness view of its peers, and the groups by name.

Per tick the host: sends a node heartbeat to every peer that got nothing else
(RaftTransport.send_heartbeats), feeds what it heard to NodeLiveness and hands any change to every
group (vdl_broker.raft.liveness), ticks the awake groups -- a quiescent group costs nothing until
a message, a proposal, a read or a liveness change wakes it -- and starts the campaigns of the
groups whose leader's node it just lost and that it is the designated successor of.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
from collections.abc import Callable, Sequence

from vdl_broker.log import StreamLog
from vdl_broker.raft.config import RaftConfig
from vdl_broker.raft.group import ApplyFn, LatencyFn, RaftGroup, SnapshotFn
from vdl_broker.raft.liveness import (
    CAMPAIGN_DELAY_TICKS,
    CAMPAIGN_RETRIES,
    LivenessChange,
    NodeLiveness,
    may_campaign_again,
)
from vdl_broker.raft.snapshotting import StateMachine
from vdl_broker.raft.throttle import CatchUpThrottle
from vdl_broker.raft.transport import Address, Identify, RaftTransport, TlsContexts, TransportConfig
from vdl_broker.raft.types import NONE, Message

log = logging.getLogger(__name__)

# Builds a node's transport: RaftTransport's signature (node id, listen address, handler, peers,
# config, tls=, identify=). Tests put an in-memory network behind it.
TransportFactory = Callable[..., RaftTransport]


class RaftHost:
    """One node's Raft side: the transport (listening on the raft address), one ticker for the
    awake groups (so one tick's heartbeats to a peer leave as one frame), node liveness, and the
    groups by name.

    A cluster of one has no raft address: its groups have one voter and nobody to talk to.

    The ticker runs on the event loop's clock; `clock` (the groups' read lease, the catch-up
    throttle) must agree with it, `rng` seeds every group's election timeouts, and
    `transport_factory` replaces the TCP transport: a test drives the real driver on a virtual
    clock over an in-memory network (tests/support/raft_groups.py)."""

    def __init__(self, node_id: int, raft_listen: Address | None, peers: dict[int, Address] | None = None, *,
                 raft_config: RaftConfig | None = None,
                 transport_config: TransportConfig | None = None,
                 on_unknown_group: Callable[[str, Message], None] | None = None,
                 commit_latency: LatencyFn | None = None, sync_latency: LatencyFn | None = None,
                 tls: TlsContexts | None = None, identify: Identify | None = None,
                 recovery_rate_bytes: int | None = None,
                 transport_factory: TransportFactory = RaftTransport,
                 clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None) -> None:
        self.node_id = node_id
        self.clock = clock
        self._rng = rng
        # Metrics hooks (vdl_broker.metrics), given to every group and its log.
        self.commit_latency = commit_latency
        self.sync_latency = sync_latency
        self.raft_config = raft_config or RaftConfig()
        self.tick_interval_s = self.raft_config.tick_interval_s
        self.groups: dict[str, RaftGroup] = {}
        self._awake: dict[str, RaftGroup] = {}  # the groups the ticker ticks
        self.on_unknown_group = on_unknown_group
        others = {peer: address for peer, address in (peers or {}).items() if peer != node_id}
        if raft_listen is None and others:
            raise ValueError("a node with peers needs a raft address")
        self.transport = (transport_factory(node_id, raft_listen, self._deliver, others, transport_config,
                                            tls=tls, identify=identify)
                          if raft_listen is not None else None)
        if self.transport is not None:
            self.transport.on_leaving = self._peer_leaving
        # Silence of election_ticks of our ticks (not less: see vdl_broker.raft.quiescence, "Safety").
        self.liveness = NodeLiveness(self.raft_config.election_ticks)
        for peer in others:
            self.liveness.add_peer(peer)
        self._frames_heard: dict[int, int] = {}
        # Called after every change of the liveness view (a peer down, up or restarted): the
        # server checks whether this node is now cut off from the cluster (server/cut_off.py).
        self.liveness_listeners: list[Callable[[], None]] = []
        self._ticks = 0
        self._campaigns: list[tuple[int, str, int]] = []  # (tick due, group name, attempts so far)
        self._ticker: asyncio.Task[None] | None = None
        # Catch-up appends (replicas far behind) are paced; None: as fast as they go.
        self.throttle = (CatchUpThrottle(recovery_rate_bytes, self._send_paced, clock=clock, obsolete=self._paced_obsolete)
                         if recovery_rate_bytes else None)

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
        self.liveness.add_peer(peer_id)

    def _send(self, group: str, message: Message) -> bool:
        return self.transport.send(group, message) if self.transport is not None else False

    def _send_catchup(self, group: str, message: Message) -> bool:
        # Unpaced, it leaves now: its group must hear so (paced_left), or a loss is never noticed.
        return self.throttle.submit(group, message) if self.throttle is not None else self._send_paced(group, message)

    def _send_paced(self, group: str, message: Message) -> bool:
        """The throttle lets `message` go: its group's leader counts it as on its way from now."""
        raft_group = self.groups.get(group)
        if raft_group is not None:
            raft_group.paced_left(message)
        return self._send(group, message)

    def _paced_obsolete(self, group: str, message: Message) -> bool:
        raft_group = self.groups.get(group)
        return raft_group is None or raft_group.paced_obsolete(message)

    def create_group(self, name: str, voters: Sequence[int], stream_log: StreamLog, *,
                     apply: ApplyFn | None = None, on_snapshot: SnapshotFn | None = None,
                     config: RaftConfig | None = None, resume_from_commit_point: bool = False,
                     state_machine: StateMachine | None = None,
                     may_truncate: Callable[[], bool] | None = None,
                     on_failure: Callable[[BaseException], None] | None = None) -> RaftGroup:
        """Create and start the group `name` over `stream_log`. `voters`: the group's configuration
        at creation (empty for a replica joining an existing group: RaftGroup)."""
        if name in self.groups:
            raise ValueError(f"raft group {name} already exists")
        group = RaftGroup(name, self.node_id, voters, stream_log, self._send,
                          config=dataclasses.replace(config, tick_interval_s=self.tick_interval_s) if config
                          else self.raft_config, apply=apply, on_snapshot=on_snapshot,
                          resume_from_commit_point=resume_from_commit_point, commit_latency=self.commit_latency,
                          on_awake=self._wake_up, peer_alive=self.liveness.is_alive,
                          peer_leaving=self._is_leaving,
                          send_catchup=self._send_catchup, state_machine=state_machine,
                          may_truncate=may_truncate, on_failure=on_failure, clock=self.clock,
                          rng=random.Random(self._rng.getrandbits(64)) if self._rng is not None else None)
        if self.sync_latency is not None:
            stream_log.observe_syncs(self.sync_latency)
        self.groups[name] = group
        group.start()
        return group

    async def remove_group(self, name: str, transfer: bool = False) -> None:
        group = self.groups.pop(name, None)
        if group is not None:
            self._awake.pop(name, None)
            await group.stop(transfer=transfer)

    async def stop(self, transfer: bool = True, timeout_s: float = 2.0) -> None:
        """Graceful: leaders hand over their groups first (concurrently), then everything stops.

        The peers hear first that this node is leaving: their leaders stop handing groups to it
        (it no longer answers TIMEOUT_NOW), so a whole cluster stopped at once does not wait out
        every transfer's timeout."""
        groups = list(self.groups.values())
        if transfer:
            if self.transport is not None:
                self.transport.announce_leaving()
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

    def _is_leaving(self, peer: int) -> bool:
        return self.transport is not None and self.transport.is_leaving(peer)

    def _peer_leaving(self, peer: int) -> None:
        # Only a leader handing its group over waits on this (RaftGroup.stop): wake its wait.
        for group in list(self.groups.values()):
            group.peer_leaving(peer)

    def awake_groups(self) -> int:
        """How many groups the ticker ticks (the others are quiescent)."""
        return len(self._awake)

    def _wake_up(self, group: RaftGroup) -> None:
        if self.groups.get(group.name) is group:
            self._awake[group.name] = group

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
            self._ticks += 1
            try:
                self._liveness_tick()
            except Exception:
                log.exception("node %d: node liveness failed", self.node_id)
            for group in list(self._awake.values()):
                try:
                    group.tick()
                except Exception:  # one broken group must not stop the clock of every other
                    log.exception("node %d: tick of group %s failed", self.node_id, group.name)
                if group.quiescent or group.stopped:
                    self._awake.pop(group.name, None)
            self._start_campaigns()

    def _liveness_tick(self) -> None:
        transport = self.transport
        if transport is None:
            return
        transport.send_heartbeats()
        for peer in transport.peer_ids():
            frames, incarnation = transport.heard_from(peer)
            if frames != self._frames_heard.get(peer, 0):
                self._frames_heard[peer] = frames
                self.liveness.heard(peer, incarnation)
        change = self.liveness.tick()
        if change:
            self._react(change)
            for listener in self.liveness_listeners:
                try:
                    listener()
                except Exception:
                    log.exception("node %d: a liveness listener failed", self.node_id)

    def _react(self, change: LivenessChange) -> None:
        log.info("node %d: peers down %s, back %s, restarted %s", self.node_id, list(change.down),
                 list(change.up), list(change.restarted))
        is_alive = self.liveness.is_alive
        alive = [self.node_id, *(p for p in (self.transport.peer_ids() if self.transport else []) if is_alive(p))]
        for group in list(self.groups.values()):
            try:
                forgotten = group.react(change, is_alive)
            except Exception:
                log.exception("node %d: group %s failed to react to peer liveness", self.node_id, group.name)
                continue
            if forgotten and group.leader_lost(forgotten, alive):
                self._campaigns.append((self._ticks + CAMPAIGN_DELAY_TICKS, group.name, 0))

    def _start_campaigns(self) -> None:
        if not self._campaigns:
            return
        due = [(name, attempts) for tick, name, attempts in self._campaigns if tick <= self._ticks]
        self._campaigns = [campaign for campaign in self._campaigns if campaign[0] > self._ticks]
        for name, attempts in due:
            group = self.groups.get(name)
            if group is None or group.stopped or group.leader_id != NONE:
                continue
            if may_campaign_again(group.role):
                group.campaign()
            if attempts < CAMPAIGN_RETRIES:
                self._campaigns.append((self._ticks + CAMPAIGN_DELAY_TICKS, name, attempts + 1))
