"""Preferred leaders: the first replica of a stream (the target's first during a reassignment) is
its preferred leader, and placement spreads preferred leaders evenly (cluster/metadata.py). After
failovers and restarts the actual leaders drift; two things bring them back:

- the balancer: every `leader_balance_interval_ms` (default 5 min, 0 = off) a node that leads
  more than its share of the streams (ceil(streams / active nodes)) hands the excess to their
  preferred leaders, those that are caught-up voters, by a Raft leadership transfer (the
  preferred leader gets TimeoutNow once it holds the whole log, so no write is lost and the
  stream is without a leader only for the length of one election);
- `elect_preferred` for one stream right now: ElectLeaders (key 43), `vdl streams elect-preferred`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from typing import TYPE_CHECKING

from vdl_broker.raft.reconfigure import caught_up
from vdl_broker.raft.types import RaftError
from vdl_wire.errors import ErrorCode

if TYPE_CHECKING:
    from vdl_broker.server.broker import Broker
    from vdl_broker.server.node_view import NodeView
    from vdl_broker.server.partition import Partition

log = logging.getLogger(__name__)

CATCHUP_LAG_ENTRIES = 100  # a preferred leader this close to the log takes over at once


def preferred_leader(node: NodeView, name: str) -> int:
    state = node.metadata.state
    stream = state.streams.get(name)
    return state.membership.target_of(stream)[0] if stream is not None else -1


def ready_to_lead(partition: Partition, node: int) -> bool:
    """`node` votes in the stream's group and has (nearly) all of the leader's log."""
    group = partition.group
    if group is None or node not in group.voters:
        return False
    return caught_up(group.peer_status(), node, group.last_index, CATCHUP_LAG_ENTRIES)


async def elect_preferred(node: NodeView, name: str, timeout_s: float) -> tuple[ErrorCode, str | None]:
    """Hand leadership of `name` (led here) to its preferred leader and wait for it to lead."""
    partition = node.replicas.local(name)
    if partition is None or partition.group is None or not partition.is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, f"node {node.node_id} does not lead stream {name}"
    preferred = preferred_leader(node, name)
    if preferred == node.node_id:
        return ErrorCode.ELECTION_NOT_NEEDED, f"node {preferred}, the preferred leader, leads stream {name}"
    if not ready_to_lead(partition, preferred):
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, \
            f"preferred leader {preferred} of stream {name} is not a caught-up replica"
    group = partition.group
    try:
        group.transfer_leadership(preferred)
    except (RaftError, ValueError) as error:
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, str(error)
    if await group.wait_for(lambda g: g.leader_id == preferred, timeout_s):
        log.info("stream %s: leadership handed to its preferred leader %d", name, preferred)
        return ErrorCode.NONE, None
    return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, f"node {preferred} did not take over stream {name} in time"


class LeaderBalancer:
    def __init__(self, broker: Broker, interval_ms: int) -> None:
        self.broker = broker
        self.interval_s = interval_ms / 1000
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.interval_s > 0:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="leader-balancer")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.balance()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("leader balancing failed")

    def share(self) -> int:
        state = self.broker.metadata.state
        active = max(1, len(state.membership.placeable(state.nodes)))
        return math.ceil(len(state.streams) / active)

    async def balance(self) -> int:
        """Hand streams led here beyond our share to their preferred leaders; how many moved."""
        broker = self.broker
        led = sorted((p for p in broker.replicas.all() if p.is_leader), key=lambda p: p.name)
        excess = len(led) - self.share()
        moves = []
        for partition in led:
            if excess <= 0:
                break
            preferred = preferred_leader(broker, partition.name)
            if preferred != broker.node_id and ready_to_lead(partition, preferred):
                moves.append(elect_preferred(broker, partition.name, 5.0))
                excess -= 1
        results = await asyncio.gather(*moves)
        moved = sum(code is ErrorCode.NONE for code, _ in results)
        if moved:
            log.info("node %d led %d streams (share %d): handed %d to their preferred leaders", broker.node_id,
                     len(led), self.share(), moved)
        return moved
