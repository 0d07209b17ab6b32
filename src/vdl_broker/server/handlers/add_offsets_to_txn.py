"""AddOffsetsToTxn (key 25): a producer adds a consumer group to its ongoing transaction, so
its TxnOffsetCommit offsets commit or abort with it (on the coordinator: the metadata leader,
which coordinates groups too)."""

from __future__ import annotations

from vdl_broker.server.authorizer import Operation, ResourceType, authorized, authorized_group
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_broker.transactions.coordinator import error_of
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

API_KEY = AddOffsetsToTxnRequest.DECL.api_key
NAME = "AddOffsetsToTxn"
FENCED_VERSION = 2


async def handle(node: NodeView, context: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    version = context.api_version
    if not authorized(node, context, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return error_response(request, version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not authorized_group(node, context, Operation.READ, request.group_id):
        return error_response(request, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not node.transactions.active():
        return error_response(request, version, ErrorCode.NOT_COORDINATOR)
    result = await node.transactions.add_offsets(request.transactional_id, request.producer_id,
                                                   request.producer_epoch, request.group_id)
    return error_response(request, version, error_of(result))


def error_response(request: AddOffsetsToTxnRequest, version: int, code: ErrorCode) -> AddOffsetsToTxnResponse:
    if code is ErrorCode.PRODUCER_FENCED and version < FENCED_VERSION:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return AddOffsetsToTxnResponse(error_code=int(code))
