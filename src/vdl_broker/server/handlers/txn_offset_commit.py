"""TxnOffsetCommit (key 28): offsets a transactional producer commits for a consumer group
(consume-transform-produce); they wait in the transaction and reach the group only if it
commits. On the coordinator (the metadata leader), which coordinates groups and transactions.
From v3 the request names the consumer whose position the offsets are (KIP-447): they are
refused, as by Kafka's group coordinator, unless it is still a member in that generation.

v5 (KIP-890 part 2, TxnOffsetCommitRequest.json): a transaction.version 2 client sends no
AddOffsetsToTxn; the group is added to the transaction here when it is not in it yet."""

from __future__ import annotations

from collections.abc import Callable

from vdl_broker.cluster.transactions import TxnState
from vdl_broker.server.authorizer import Operation, ResourceType, authorized, authorized_group
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_broker.transactions.coordinator import error_of
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse

API_KEY = TxnOffsetCommitRequest.DECL.api_key
NAME = "TxnOffsetCommit"
FENCED_VERSION = 2
IMPLICIT_ADD_VERSION = 5
R = TxnOffsetCommitResponse


def _response(request: TxnOffsetCommitRequest,
              code: Callable[[str, TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition], ErrorCode],
              ) -> TxnOffsetCommitResponse:
    return R(topics=[R.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
        R.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=int(code(t.name, p)))
        for p in t.partitions]) for t in request.topics])


async def handle(node: NodeView, context: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    version = context.api_version
    if not authorized(node, context, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return error_response(request, version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not authorized_group(node, context, Operation.READ, request.group_id):
        return error_response(request, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not node.transactions.active():
        return error_response(request, version, ErrorCode.NOT_COORDINATOR)
    streams = node.metadata.state.streams

    def refusal(name: str, partition: TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition) -> ErrorCode | None:
        if not authorized(node, context, Operation.READ, ResourceType.TOPIC, name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if name not in streams or partition.partition_index != 0:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return None

    offsets = {t.name: (p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
               for t in request.topics for p in t.partitions if refusal(t.name, p) is None}
    code = ErrorCode.NONE
    if offsets:
        # v3+ name the consumer (KIP-447): a member fenced out by a rebalance commits nothing.
        code = ErrorCode.NOT_COORDINATOR if node.groups.active() is None else node.groups.check_txn_commit(
            request.group_id, request.generation_id, request.member_id, request.group_instance_id)
    if offsets and code is ErrorCode.NONE and version >= IMPLICIT_ADD_VERSION:
        meta = node.transactions.state(request.transactional_id)
        if meta is None or meta.state is not TxnState.ONGOING or request.group_id not in meta.groups:
            code = error_of(await node.transactions.add_offsets(request.transactional_id, request.producer_id,
                                                                request.producer_epoch, request.group_id))
    if offsets and code is ErrorCode.NONE:
        code = error_of(await node.transactions.offset_commit(request.transactional_id, request.producer_id,
                                                                request.producer_epoch, request.group_id, offsets))
    if code is ErrorCode.PRODUCER_FENCED:
        # Kafka 4.4 answers a fenced epoch (a timeout's or a new instance's bump) so at every
        # version: its group coordinator verifies the transaction with the transaction
        # coordinator and answers its PRODUCER_FENCED as a write does (AddPartitionsToTxnManager).
        # The Java client throws ProducerFencedException for either.
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return _response(request, lambda name, p: refusal(name, p) or code)


def error_response(request: TxnOffsetCommitRequest, version: int, code: ErrorCode) -> TxnOffsetCommitResponse:
    if code is ErrorCode.PRODUCER_FENCED and version < FENCED_VERSION:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return _response(request, lambda name, p: code)
