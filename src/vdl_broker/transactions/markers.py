"""Writing a decided transaction's markers: one WriteTxnMarkers per stream leader, carrying every
marker that leader is asked for (its own node: handled in place; another: over the node-to-node
channel, server/internal.py)."""

from __future__ import annotations

import asyncio
import logging
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


class BrokerMarkerWriter:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

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
        results = await asyncio.gather(*(self._send(node, meta, commit, names) for node, names in by_leader.items()))
        for written in results:
            done |= written
        return done

    async def _send(self, node: int, meta: TxnMeta, commit: bool, streams: list[str]) -> set[str]:
        marker = WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=meta.producer_id, producer_epoch=meta.epoch, transaction_result=commit, coordinator_epoch=0,
            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=s, partition_indexes=[0]) for s in streams])
        request = WriteTxnMarkersRequest(markers=[marker])
        try:
            if node == self.broker.node_id:
                response = await write_markers(self.broker, request)
            else:
                response = await internal.call(self.broker, node, request, VERSION, CALL_TIMEOUT_S)
        except (ConnectionError, TimeoutError, OSError) as error:
            log.info("transaction %s: markers to node %d not written yet (%s)", meta.transactional_id, node, error)
            return set()
        return {t.name for m in response.markers for t in m.topics if all(p.error_code == 0 for p in t.partitions)}
