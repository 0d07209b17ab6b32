"""Writing decided transactions' markers: per stream leader one WriteTxnMarkers at a time, carrying
every marker that leader is asked for meanwhile (transactions completing together share it, as
Kafka's TransactionMarkerChannelManager drains a queue per broker). The leader's own node handles
it in place; another node gets it over the node-to-node channel (server/internal.py)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vdl_broker.cluster.transactions import TxnMeta
from vdl_broker.server import internal
from vdl_broker.server.handlers.write_txn_markers import write_markers
from vdl_broker.server.partition import Partition
from vdl_wire.messages import WriteTxnMarkersRequest

if TYPE_CHECKING:
    from vdl_broker.server.broker import Broker

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 15.0
VERSION = 1


@dataclass
class _Pending:
    marker: WriteTxnMarkersRequest.WritableTxnMarker
    done: asyncio.Future[set[str]]


@dataclass
class _LeaderQueue:
    pending: list[_Pending] = field(default_factory=list)
    sender: asyncio.Task[None] | None = None


class BrokerMarkerWriter:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._queues: dict[int, _LeaderQueue] = {}

    def _leader(self, stream: str) -> int:
        partition = self.broker.replicas.get(stream)
        if partition is None:
            return -1
        if isinstance(partition, Partition) and partition.is_leader:
            return self.broker.node_id
        return partition.leader_id or -1

    async def write_markers(self, meta: TxnMeta, commit: bool, streams: list[str]) -> set[str]:
        """The streams of `streams` that now hold `meta`'s marker (committed by their groups);
        a deleted stream counts as done."""
        done = {s for s in streams if s not in self.broker.metadata.state.streams}
        by_leader: dict[int, list[str]] = {}
        for stream in streams:
            if stream not in done:
                by_leader.setdefault(self._leader(stream), []).append(stream)
        by_leader.pop(-1, None)  # no leader known yet: the next attempt
        loop = asyncio.get_running_loop()
        waits = []
        for node, names in by_leader.items():
            marker = WriteTxnMarkersRequest.WritableTxnMarker(producer_id=meta.producer_id, producer_epoch=meta.epoch, transaction_result=commit,
                            coordinator_epoch=meta.marker_epoch,
                            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=s, partition_indexes=[0])
                                    for s in names])
            pending = _Pending(marker, loop.create_future())
            queue = self._queues.setdefault(node, _LeaderQueue())
            queue.pending.append(pending)
            if queue.sender is None or queue.sender.done():
                queue.sender = loop.create_task(self._drain(node, queue), name=f"txn-markers-{node}")
            waits.append(pending.done)
        for written in await asyncio.gather(*waits):
            done |= written
        return done

    async def _drain(self, node: int, queue: _LeaderQueue) -> None:
        while queue.pending:
            batch, queue.pending = queue.pending, []
            try:
                written = await self._send(node, [p.marker for p in batch])
            except Exception:  # the coordinator retries; its waiters must not hang on a dead task
                log.exception("transaction markers to node %d failed", node)
                written = {}
            for pending in batch:
                if not pending.done.done():
                    pending.done.set_result(written.get(pending.marker.producer_id, set()))

    async def _send(self, node: int, markers: list[WriteTxnMarkersRequest.WritableTxnMarker]) -> dict[int, set[str]]:
        """Per producer id, the streams whose marker is written."""
        request = WriteTxnMarkersRequest(markers=markers)
        try:
            if node == self.broker.node_id:
                response = await write_markers(self.broker, request)
            else:
                response = await internal.call(self.broker, node, request, VERSION, CALL_TIMEOUT_S)
        except (ConnectionError, TimeoutError, OSError) as error:
            log.info("transaction markers to node %d not written yet (%s)", node, error)
            return {}
        written: dict[int, set[str]] = {}
        for result in response.markers:
            written.setdefault(result.producer_id, set()).update(
                t.name for t in result.topics if all(p.error_code == 0 for p in t.partitions))
        return written
