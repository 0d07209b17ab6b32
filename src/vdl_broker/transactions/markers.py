"""Writing decided transactions' markers, routed to each stream's current leader.

Markers asked of one stream leader meanwhile travel in one WriteTxnMarkers (transactions
completing together share it, as Kafka's TransactionMarkerChannelManager drains a queue per
broker), one call per node at a time. The leader's own node handles it in place; another node gets
it over the node-to-node channel (server/internal.py).

Each stream's marker is routed on its own and routed again, as Kafka's channel manager re-resolves
a partition's leader when a send fails or the leader moves:
- while a call is pending, its streams are looked at again (every RECHECK_S, and at once when node
  liveness changes): a stream whose leader is now another node, or whose leader's node is known
  down, leaves the call -- its answer no longer counts for it -- and goes to the new leader's queue
  (or waits, parked, for one), instead of waiting out the call's CALL_TIMEOUT_S;
- a node answering NOT_LEADER_OR_FOLLOWER for a stream, or that cannot be reached, is not asked
  for that stream again for AVOID_S unless the leader view names another node first;
- a stream with no reachable leader waits parked, looked at again with the others, for at most
  PARK_LIMIT_S: then it counts as not written and the coordinator tries again.
A marker sent twice this way (the old leader's call went through after all) is harmless: a stream
writes a decision's marker once and answers a repeat as written (Partition.append).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from vdl_broker.cluster.transactions import TxnMeta
from vdl_broker.server import internal
from vdl_broker.server.handlers.write_txn_markers import write_markers
from vdl_broker.server.partition import Partition
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse

if TYPE_CHECKING:
    from vdl_broker.server.broker import Broker

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 15.0
VERSION = 1
RECHECK_S = 0.1  # while markers are outstanding, their streams' leaders are looked at this often
AVOID_S = 1.0  # a node that refused a stream (or could not be reached) is not asked again this soon
PARK_LIMIT_S = CALL_TIMEOUT_S  # a marker with no reachable leader counts as not written after this
# Answers meaning "not here": the marker goes to wherever the stream's leader is now.
_ELSEWHERE = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT,
              ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND}

NOWHERE = -1


class MarkerRoutes(Protocol):
    """What the writer needs of the node it runs on."""

    @property
    def node_id(self) -> int: ...

    def exists(self, stream: str) -> bool:
        """False once the stream is deleted (its marker counts as written)."""
        ...

    def leader_of(self, stream: str) -> int:
        """The node serving the stream as leader as this node knows it; NOWHERE if none."""
        ...

    def is_alive(self, node: int) -> bool:
        """Node liveness (raft/liveness.py): False once nothing came from the node for a while."""
        ...

    async def send(self, node: int, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        """The node's answer; ConnectionError / TimeoutError / OSError when there is none."""
        ...


@dataclass(eq=False)
class _Job:
    """One stream's marker of one decision."""

    marker: WriteTxnMarkersRequest.WritableTxnMarker  # its topics are not used (one per stream below)
    stream: str
    done: asyncio.Future[bool]
    started: float
    node: int = NOWHERE  # the node whose queue or pending call holds it; NOWHERE: parked
    avoid: int = NOWHERE  # a node that refused it ...
    avoid_until: float = 0.0  # ... not asked again before this


@dataclass
class _NodeChannel:
    queued: list[_Job] = field(default_factory=list)
    in_call: set[_Job] = field(default_factory=set)  # jobs whose answer the pending call gives
    call: asyncio.Task[None] | None = None


def _request(jobs: list[_Job]) -> WriteTxnMarkersRequest:
    """One request for `jobs`: one marker per decision, with every stream of it in this batch."""
    by_decision: dict[tuple[int, int, bool, int], list[str]] = {}
    for job in jobs:
        m = job.marker
        by_decision.setdefault((m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch),
                               []).append(job.stream)
    return WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=result, coordinator_epoch=coordinator_epoch,
        topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=s, partition_indexes=[0]) for s in streams])
        for (pid, epoch, result, coordinator_epoch), streams in by_decision.items()])


def _codes(response: WriteTxnMarkersResponse) -> dict[tuple[int, str], ErrorCode]:
    codes: dict[tuple[int, str], ErrorCode] = {}
    for result in response.markers:
        for topic in result.topics:
            errors = [p.error_code for p in topic.partitions if p.error_code != 0]
            code = ErrorCode(errors[0]) if errors else ErrorCode.NONE
            if codes.get((result.producer_id, topic.name), ErrorCode.NONE) == ErrorCode.NONE:
                codes[(result.producer_id, topic.name)] = code
    return codes


class RoutingMarkerWriter:
    """The coordinator's MarkerWriter (coordinator.py) over `routes`. `recheck_s` None: no timer
    of its own (a unit test calls `reroute()`)."""

    def __init__(self, routes: MarkerRoutes, recheck_s: float | None = RECHECK_S,
                 clock: Callable[[], float] | None = None) -> None:
        self.routes = routes
        self.recheck_s = recheck_s
        self._clock = clock
        self._channels: dict[int, _NodeChannel] = {}
        self._parked: list[_Job] = []
        self._watcher: asyncio.Task[None] | None = None

    def _now(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    async def write_markers(self, meta: TxnMeta, commit: bool, streams: list[str]) -> set[str]:
        """The streams of `streams` that now hold `meta`'s marker (committed by their groups);
        a deleted stream counts as done."""
        done = {s for s in streams if not self.routes.exists(s)}
        loop = asyncio.get_running_loop()
        marker = WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=meta.producer_id, producer_epoch=meta.epoch, transaction_result=commit,
            coordinator_epoch=meta.marker_epoch, topics=[])
        now = self._now()
        jobs = [_Job(marker, s, loop.create_future(), now) for s in dict.fromkeys(streams) if s not in done]
        for job in jobs:
            self._route(job)
        self._start_calls()
        self._watch()
        for job, written in zip(jobs, await asyncio.gather(*(job.done for job in jobs)), strict=True):
            if written:
                done.add(job.stream)
        return done

    # -- routing

    def _target(self, job: _Job, now: float) -> int:
        leader = self.routes.leader_of(job.stream)
        if leader < 0 or (leader != self.routes.node_id and not self.routes.is_alive(leader)):
            return NOWHERE
        if leader == job.avoid and now < job.avoid_until:
            return NOWHERE
        return leader

    def _route(self, job: _Job) -> None:
        """Queue the (detached) job at its stream's leader, or park it."""
        if job.done.done():
            return
        job.node = self._target(job, self._now())
        if job.node == NOWHERE:
            self._parked.append(job)
        else:
            self._channels.setdefault(job.node, _NodeChannel()).queued.append(job)

    def reroute(self) -> None:
        """Look at every marker not answered yet again: one whose stream's leader is now another
        node (or whose node is known down) leaves its queue or pending call for the new leader;
        a parked one goes to its leader once there is one, or counts as not written after
        PARK_LIMIT_S."""
        now = self._now()
        moving: list[_Job] = []
        for node, channel in self._channels.items():
            for job in list(channel.in_call):
                if job.done.done() or self._target(job, now) != node:
                    channel.in_call.discard(job)  # the pending call's answer no longer counts for it
                    moving.append(job)
            staying: list[_Job] = []
            for job in channel.queued:
                (staying if not job.done.done() and self._target(job, now) == node else moving).append(job)
            channel.queued = staying
        parked, self._parked = self._parked, []
        for job in parked:
            if not job.done.done() and now - job.started >= PARK_LIMIT_S:
                log.info("no reachable leader for stream %s: its transaction marker is not written yet", job.stream)
                job.done.set_result(False)
        for job in [*moving, *parked]:
            self._route(job)
        self._start_calls()

    def _outstanding(self) -> bool:
        return bool(self._parked) or any(c.queued or c.in_call for c in self._channels.values())

    def _watch(self) -> None:
        if self.recheck_s is None or not self._outstanding():
            return
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.get_running_loop().create_task(self._recheck(), name="txn-markers-recheck")

    async def _recheck(self) -> None:
        assert self.recheck_s is not None
        while self._outstanding():
            await asyncio.sleep(self.recheck_s)
            try:
                self.reroute()
            except Exception:  # the next pass tries again; the waiters must not hang on a dead task
                log.exception("rerouting transaction markers failed")

    # -- calls

    def _start_calls(self) -> None:
        loop = asyncio.get_running_loop()
        for node, channel in self._channels.items():
            if channel.queued and (channel.call is None or channel.call.done()):
                channel.call = loop.create_task(self._drain(node, channel), name=f"txn-markers-{node}")

    async def _drain(self, node: int, channel: _NodeChannel) -> None:
        while channel.queued:
            batch, channel.queued = channel.queued, []
            channel.in_call.update(batch)
            codes: dict[tuple[int, str], ErrorCode] = {}
            try:
                codes = _codes(await self.routes.send(node, _request(batch)))
            except (ConnectionError, TimeoutError, OSError) as error:
                log.info("transaction markers to node %d not written yet (%s)", node, error)
            except Exception:  # the coordinator retries; its waiters must not hang on a dead task
                log.exception("transaction markers to node %d failed", node)
            now = self._now()
            for job in batch:
                if job not in channel.in_call:
                    continue  # moved to another leader meanwhile: answered there
                channel.in_call.discard(job)
                if job.done.done():
                    continue
                code = codes.get((job.marker.producer_id, job.stream))
                if code == ErrorCode.NONE:
                    job.done.set_result(True)
                elif code is None or code in _ELSEWHERE:  # no answer, or "not here": its leader now
                    job.avoid, job.avoid_until = node, now + AVOID_S
                    self._route(job)
                else:
                    job.done.set_result(False)
        self._start_calls()
        self._watch()


class BrokerRoutes:
    """MarkerRoutes of a broker: its stream replicas' leader views and its node liveness."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    @property
    def node_id(self) -> int:
        return self.broker.node_id

    def exists(self, stream: str) -> bool:
        return stream in self.broker.metadata.state.streams

    def leader_of(self, stream: str) -> int:
        partition = self.broker.replicas.get(stream)
        if partition is None:
            return NOWHERE
        if isinstance(partition, Partition):
            if partition.is_leader:
                return self.node_id
            # Elected here but not serving before its no-op commits: wait for it, not refused by it.
            return NOWHERE if partition.leader_id in (0, self.node_id) else partition.leader_id
        return partition.leader_id or NOWHERE

    def is_alive(self, node: int) -> bool:
        # A node liveness has not heard of yet (just joined) is tried: its call tells.
        return node == self.node_id or not self.broker.host.liveness.is_down(node)

    async def send(self, node: int, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        if node == self.node_id:
            return await write_markers(self.broker, request)
        response: WriteTxnMarkersResponse = await internal.call(self.broker, node, request, VERSION, CALL_TIMEOUT_S)
        return response


class BrokerMarkerWriter(RoutingMarkerWriter):
    def __init__(self, broker: Broker) -> None:
        super().__init__(BrokerRoutes(broker))
        # A node going down or coming back: its markers move at once, not at the next recheck.
        broker.host.liveness_listeners.append(self._liveness_changed)

    def _liveness_changed(self) -> None:
        if self._outstanding():
            self.reroute()
