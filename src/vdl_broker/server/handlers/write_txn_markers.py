"""WriteTxnMarkers (key 27; between nodes): a stream leader writes the commit/abort markers the
transaction coordinator sends (KIP-98). Every marker of the request is proposed at once, in one
synchronous pass (one Raft round carries them all), then the answer waits for their commits.

Before writing, the leader lets its copy of the cluster metadata show the decision: from then on
its produce check (handlers/produce.py) refuses the transaction's late batches, so none can
land after its marker and hold the last stable offset back. Each marker's coordinator epoch names
its decision; the stream (Partition.append) writes a decision's marker once and refuses an
earlier decision's (TRANSACTION_COORDINATOR_FENCED), whatever the metadata copy shows.

An operator's WriteTxnMarkers (Kafka's Admin.abortTransaction: `kafka-transactions abort`, KIP-664)
comes from a client, not from a node: it aborts the transaction in the stream there and then, as
Kafka's broker does, whatever the coordinator holds; the guard against a deposed coordinator's
late request is for the coordinators' requests only, and so is the "this decision's marker is
written already" of a marker at the producer's last coordinator epoch (the one DescribeProducers
shows the operator).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from vdl_broker.cluster.transactions import TxnState
from vdl_broker.server.authorizer import Operation, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.internal import NODE_PRINCIPAL_PREFIX
from vdl_broker.server.node_view import NodeView
from vdl_broker.server.partition import AppendHandle, Partition, PartitionError
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from vdl_wire.records.control import end_txn_marker

API_KEY = WriteTxnMarkersRequest.DECL.api_key
NAME = "WriteTxnMarkers"
DECISION_WAIT_S = 5.0
COMMIT_WAIT_MS = 10_000

R = WriteTxnMarkersResponse


def _response(request: WriteTxnMarkersRequest, code: Callable[[int, str, int], ErrorCode]) -> WriteTxnMarkersResponse:
    return R(markers=[R.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=[
        R.WritableTxnMarkerTopicResult(name=t.name, partitions=[
            R.WritableTxnMarkerPartitionResult(partition_index=p, error_code=int(code(marker.producer_id, t.name, p)))
            for p in t.partition_indexes]) for t in marker.topics]) for marker in request.markers])


async def write_markers(node: NodeView, request: WriteTxnMarkersRequest,
                        from_coordinator: bool = True) -> WriteTxnMarkersResponse:
    """`from_coordinator`: a transaction coordinator's markers (a node's), which wait for the
    decision in the metadata; False: an operator's abort (module docstring)."""
    producers = {marker.producer_id for marker in request.markers}

    def ongoing() -> set[int]:
        return {t.producer_id for t in node.metadata.state.transactions.txns.values()
                if t.producer_id in producers and t.state is TxnState.ONGOING}

    group = node.metadata.group
    if group is not None and from_coordinator:
        await group.wait_for(lambda _: not ongoing(), DECISION_WAIT_S)
    # Still ongoing here: a late request of a deposed coordinator for an earlier transaction of
    # the producer; its marker would end the producer's next transaction in these streams.
    stale = ongoing() if from_coordinator else set()
    codes: dict[tuple[int, str, int], ErrorCode] = {}
    handles: list[tuple[tuple[int, str, int], AppendHandle]] = []
    now = int(time.time() * 1000)
    for marker in request.markers:
        batch = end_txn_marker(marker.producer_id, marker.producer_epoch, marker.transaction_result,
                               marker.coordinator_epoch, now)
        for topic in marker.topics:
            for index in topic.partition_indexes:
                key = (marker.producer_id, topic.name, index)
                if marker.producer_id in stale:
                    codes[key] = ErrorCode.TRANSACTION_COORDINATOR_FENCED
                    continue
                partition = node.replicas.get(topic.name)
                if not isinstance(partition, Partition) or index != 0:
                    codes[key] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if partition is None or index != 0
                                  else ErrorCode.NOT_LEADER_OR_FOLLOWER)
                    continue
                try:
                    handles.append((key, partition.append(batch, operator_marker=not from_coordinator)))
                except PartitionError as error:
                    codes[key] = error.code
    for key, handle in handles:
        try:
            await handle.wait(-1, COMMIT_WAIT_MS)
            codes[key] = ErrorCode.NONE
        except PartitionError as error:
            codes[key] = error.code
    return _response(request, lambda pid, name, index: codes.get((pid, name, index), ErrorCode.UNKNOWN_SERVER_ERROR))


async def handle(node: NodeView, context: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    # Kafka: CLUSTER_ACTION on the cluster (inter-broker); a node's own requests always pass.
    if not authorized_cluster(node, context, Operation.CLUSTER_ACTION):
        return error_response(request, context.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return await write_markers(node, request, from_coordinator=context.principal.startswith(NODE_PRINCIPAL_PREFIX))


def error_response(request: WriteTxnMarkersRequest, version: int, code: ErrorCode) -> WriteTxnMarkersResponse:
    return _response(request, lambda pid, name, index: code)
