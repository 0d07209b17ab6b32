"""The metadata leader's membership work (cluster/membership.py says what, this does it).

Runs on every node; acts only on the metadata leader, once it has led for a moment (its view of
which peers are alive needs a heartbeat round or two). Every pass (on each metadata commit, and
at least every `interval_s`):

1. The metadata group's own configuration moves toward "every registered node except those
   being removed" (raft/reconfigure.py): a joining node becomes a learner, is promoted once
   caught up; a removed or `removing` node leaves it; one voter at a time, as for streams.
2. A joining node that votes now is marked active: it takes replicas from then on.
3. Every stream with a replica on a decommissioning or removing node gets a reassignment that
   puts another node in its place (the active node holding the fewest replicas, same position
   in the list, so a preferred leader is replaced by the newcomer); at most
   `max_concurrent_moves` such reassignments run at once. A removed node with no replacement
   available leaves the stream smaller; a decommissioning one waits.
4. A draining node no stream involves any more is removed (`remove_node`); a decommissioning
   node is still a voter then, so it learns it was removed, and leaves the group at the next pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from vdl_broker.cluster.membership import (
    DECOMMISSIONING,
    JOINING,
    REMOVING,
    reassign_stream_command,
    remove_node_command,
    set_node_state_command,
)
from vdl_broker.raft.membership import ConfigChangeError
from vdl_broker.raft.reconfigure import next_step
from vdl_broker.raft.types import RaftError

if TYPE_CHECKING:
    from vdl_broker.cluster.metadata import ClusterState, StreamInfo
    from vdl_broker.cluster.service import MetadataService

log = logging.getLogger(__name__)


def metadata_target(state: ClusterState) -> list[int]:
    """The metadata group's voters-to-be: every registered node but those being removed."""
    return sorted(n for n in state.nodes if state.membership.state_of(n) != REMOVING)


def replacement(state: ClusterState, stream: StreamInfo, leaving: int) -> list[int] | None:
    """The stream's replica list with `leaving` replaced by the active node holding the fewest
    replicas (counting where reassignments are going), or without it when no node is free and
    it is gone for good; None when it must wait."""
    membership = state.membership
    current = list(membership.target_of(stream))
    if leaving not in current:
        return None
    holds = dict.fromkeys(membership.placeable(state.nodes), 0)
    for other in state.streams.values():
        for node in membership.target_of(other):
            if node in holds:
                holds[node] += 1
    free = sorted((count, node) for node, count in holds.items() if node not in membership.hosts(stream))
    if free:
        return [free[0][1] if node == leaving else node for node in current]
    if membership.state_of(leaving) == REMOVING and len(current) > 1:
        return [node for node in current if node != leaving]
    return None


# A voter being removed while it runs stops once it applied its own `removing` state (it then asks
# the metadata leader whether it was removed: server/joining.py watch_departure). Taken out of the
# group at once, it would never hear the commit of that entry (a configuration takes effect on
# append) and would run on, serving nothing. So a live one stays a voter until it holds the log up
# to the commit index of when it was first seen leaving, then TOLD_S more (heartbeats every tick
# carry the commit index), and at most LEAVING_NOTICE_S in all.
TOLD_S = 0.3
LEAVING_NOTICE_S = 5.0


class MembershipController:
    def __init__(self, metadata: MetadataService, interval_s: float = 0.5, catchup_lag: int = 100,
                 settle_s: float = 1.0, max_concurrent_moves: int = 8) -> None:
        self.metadata = metadata
        self.interval_s = interval_s
        self.catchup_lag = catchup_lag
        self.settle_s = settle_s
        self.max_concurrent_moves = max_concurrent_moves
        self._wake = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._stuck: set[tuple[str, int]] = set()  # (stream, node) moves reported as waiting
        self._leaving: dict[int, tuple[int, float]] = {}  # removed voter -> (commit index, time) first seen
        self._told: dict[int, float] = {}  # removed voter -> when it first held that commit index

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="membership-controller")

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def poke(self, *_: object) -> None:
        self._wake.set()

    async def _run(self) -> None:
        while not self._stopping:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
            # arrives as the event is set, and stop() would then wait for this task forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval_s):
                    await self._wake.wait()
            if self._stopping:
                return
            self._wake.clear()
            try:
                await self.step()
            except asyncio.CancelledError:
                raise
            except (RaftError, OSError, TimeoutError) as error:
                log.info("membership controller: %s", error)
            except Exception:
                log.exception("membership controller pass failed")

    async def step(self) -> None:
        metadata = self.metadata
        group = metadata.group
        if group is None or not metadata.is_leader or group.leader_age_s < self.settle_s:
            return
        state = metadata.state
        self._reconfigure_metadata_group()
        conf = group.conf
        for node, node_state in sorted(state.membership.node_states.items()):
            if node_state == JOINING and node in conf.voters and not group.node.conf_pending:
                log.info("node %d votes in the metadata group: active", node)
                await metadata.submit(set_node_state_command(node, "active"))
        await self._drain(state)

    def _reconfigure_metadata_group(self) -> None:
        group = self.metadata.group
        assert group is not None
        node = group.node
        if node.conf_pending or not node.current_term_committed:
            return
        step = next_step(group.conf, self._until_told(metadata_target(self.metadata.state)), group.node_id,
                         group.peer_status(),
                         group.last_index, min(self.catchup_lag, group.promotion_lag()),
                         conf_index=group.node.membership.last_index)
        try:
            if step.kind == "change" and step.conf is not None:
                log.info("metadata group: %s (%s -> %s)", step.reason, group.conf, step.conf)
                group.propose_conf_change(step.conf)
            elif step.kind == "transfer":
                log.info("metadata group: %s", step.reason)
                group.transfer_leadership(step.target)
        except ConfigChangeError as error:
            log.debug("metadata group change not now: %s", error)

    def _until_told(self, target: list[int]) -> list[int]:
        """`target` with the live voters it leaves out that may not know yet (TOLD_S above)."""
        group = self.metadata.group
        assert group is not None
        now = time.monotonic()
        status = group.peer_status()
        kept = list(target)
        for node in group.conf.voters:
            if node in target:
                continue
            commit, since = self._leaving.setdefault(node, (group.node.commit_index, now))
            peer = status.get(node)
            if peer is None or not peer.alive or now - since > LEAVING_NOTICE_S:
                continue
            if peer.match >= commit:
                self._told.setdefault(node, now)
            if now - self._told.get(node, now) < TOLD_S:
                kept.append(node)
        return sorted(kept)

    async def _drain(self, state: ClusterState) -> None:
        membership = state.membership
        draining = [n for n, s in sorted(membership.node_states.items()) if s in (DECOMMISSIONING, REMOVING)]
        moving = len(membership.reassignments)
        for node in draining:
            streams = state.streams_on(node)
            if not streams:
                log.info("node %d holds no replica any more: removing it", node)
                await self.metadata.submit(remove_node_command(node))
                continue
            for stream in streams:
                if stream.name in membership.reassignments or moving >= self.max_concurrent_moves:
                    continue
                target = replacement(state, stream, node)
                if target is None:
                    if (stream.name, node) not in self._stuck:
                        self._stuck.add((stream.name, node))
                        log.warning("stream %s: no active node can take the replica of node %d yet",
                                    stream.name, node)
                    continue
                log.info("stream %s: moving its replica off node %d: %s -> %s", stream.name, node,
                         list(stream.replicas), target)
                await self.metadata.submit(reassign_stream_command(stream.name, stream.created_index, target))
                moving += 1
