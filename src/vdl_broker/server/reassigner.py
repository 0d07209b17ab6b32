"""Stream reassignments, carried out by each stream's leader.

The metadata records where a stream is going (cluster/membership.py: `reassign_stream`); every
node hosting a replica of it opens one (a node being added opens an empty replica that knows no
configuration and waits for the leader: raft/membership.py). The stream's leader, on each pass,
asks raft/reconfigure.py for the next step toward the target and takes it: new nodes join its
Raft group as learners and catch up (paced by the catch-up throttle, so producers keep going),
each is promoted once caught up, then the nodes not in the target are removed, one voter at a
time; a leader that must leave hands leadership to a target voter first, and the new leader
carries on. The stream stays writable throughout: every step is an ordinary Raft entry.

When the configuration equals the target and is committed, the leader reports it to the
metadata leader (`reassignment_done`); the metadata then makes the target the replica set, and
the nodes no longer in it drop their replica (replica_manager.py). A leader that dies mid-way
leaves the next one to go on from whatever configuration its log holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from typing import TYPE_CHECKING, Any

from vdl_broker.cluster.membership import Reassignment, complete_reassignment_command
from vdl_broker.cluster.metadata import ApplyResult, Outcome, changes_placement
from vdl_broker.raft.membership import ConfigChangeError
from vdl_broker.raft.reconfigure import next_step
from vdl_broker.raft.types import RaftError
from vdl_broker.server.handlers import vdl_nodes
from vdl_wire.messages import VdlNodesRequest

if TYPE_CHECKING:
    from vdl_broker.server.broker import Broker

log = logging.getLogger(__name__)


class StreamReassigner:
    def __init__(self, broker: Broker, interval_s: float = 0.5, catchup_lag: int = 100,
                 settle_s: float = 1.0, active_interval_s: float = 0.05) -> None:
        self.broker = broker
        self.interval_s = interval_s
        # While this node leads a stream being moved, look again soon: each step is committed
        # within milliseconds, and a learner's catching up is not announced by any event.
        self.active_interval_s = active_interval_s
        self._active = False
        self.catchup_lag = catchup_lag
        self.settle_s = settle_s
        self._wake = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._reporting: dict[str, asyncio.Task[None]] = {}
        # Reassignments whose completion the metadata leader accepted, until this node's metadata
        # shows them done: a pass meanwhile would report (and log) the same completion again. By
        # identity: a new reassignment of the same stream, even to the same target, is reported.
        self._reported_done: dict[str, Reassignment] = {}
        self._last_reason: dict[str, str] = {}

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="stream-reassigner")

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        for task in [self._task, *self._reporting.values()]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    def poke(self, *_: object) -> None:
        self._wake.set()

    def on_metadata_change(self, results: list[ApplyResult]) -> None:
        """MetadataService listener: a pass now, unless the entry only holds commands of
        transactions or consumer groups (no stream moves for them; the timer's passes go on)."""
        if changes_placement(results):
            self._wake.set()

    async def _run(self) -> None:
        while not self._stopping:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
            # arrives as the event is set, and stop() would then wait for this task forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.active_interval_s if self._active else self.interval_s):
                    await self._wake.wait()
            if self._stopping:
                return
            self._wake.clear()
            try:
                self.step()
            except Exception:
                log.exception("reassignment pass failed")

    def step(self) -> None:
        state = self.broker.metadata.state
        self._active = False
        for name in [n for n, r in self._reported_done.items() if state.membership.reassignments.get(n) is not r]:
            del self._reported_done[name]
        for name, moving in list(state.membership.reassignments.items()):
            stream = state.streams.get(name)
            partition = self.broker.replicas.local(name)
            if stream is None or partition is None or partition.group is None:
                continue
            group = partition.group
            if group.name != f"{name}#{stream.created_index}" or not group.leader_ready:
                continue
            self._active = True
            if group.leader_age_s < self.settle_s or group.node.conf_pending:
                continue
            step = next_step(group.conf, moving.target, group.node_id, group.peer_status(), group.last_index,
                             min(self.catchup_lag, group.promotion_lag()),
                             conf_index=group.node.membership.last_index)
            if step.reason and self._last_reason.get(name) != step.reason:
                self._last_reason[name] = step.reason
                log.info("stream %s: reassignment to %s: %s", name, list(moving.target), step.reason)
            try:
                if step.kind == "change" and step.conf is not None:
                    group.propose_conf_change(step.conf)
                elif step.kind == "transfer":
                    group.transfer_leadership(step.target)
                elif (step.kind == "done" and name not in self._reporting
                      and self._reported_done.get(name) is not moving):
                    task = asyncio.get_running_loop().create_task(
                        self._report(name, stream.created_index, moving))
                    self._reporting[name] = task
                    task.add_done_callback(functools.partial(self._reported, name))
            except (ConfigChangeError, RaftError, ValueError) as error:
                log.debug("stream %s: reassignment step not now: %s", name, error)

    def _reported(self, name: str, _task: asyncio.Task[None]) -> None:
        self._reporting.pop(name, None)

    async def _report(self, name: str, created_index: int, moving: Reassignment) -> None:
        """Tell the metadata leader the stream's configuration is the target (retried by later
        passes until it accepts)."""
        broker = self.broker
        replicas = list(moving.target)
        try:
            if broker.metadata.is_leader:
                result = await broker.metadata.submit(complete_reassignment_command(name, created_index, replicas))
                ok = result.outcome is Outcome.OK
                message: Any = result.message
            else:
                response = await vdl_nodes.run(broker, VdlNodesRequest(
                    action="reassignment_done", stream=name, created_index=created_index, replicas=replicas))
                ok, message = response.error_code == 0, response.error_message
        except (RaftError, OSError, TimeoutError) as error:
            ok, message = False, str(error)
        if ok:
            self._reported_done[name] = moving
            log.info("stream %s: reassignment done, replicas %s", name, replicas)
        else:
            log.info("stream %s: reporting the reassignment failed (%s): retrying", name, message)
            await asyncio.sleep(self.interval_s)
