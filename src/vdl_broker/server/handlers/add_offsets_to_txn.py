"""AddOffsetsToTxn (key 25): a producer adds a consumer group to its ongoing transaction, so
its TxnOffsetCommit offsets commit or abort with it (on the coordinator: the metadata leader,
which coordinates groups too)."""

from __future__ import annotations

from typing import Any

from vdl_broker.server.authorizer import Operation, ResourceType, authorized, authorized_group
from vdl_broker.transactions.coordinator import error_of
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

API_KEY = AddOffsetsToTxnRequest.DECL.api_key
NAME = "AddOffsetsToTxn"
FENCED_VERSION = 2


async def handle(broker: Any, context: Any, request: Any) -> Any:
    version = context.api_version
    if not authorized(broker, context, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return error_response(request, version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not authorized_group(broker, context, Operation.READ, request.group_id):
        return error_response(request, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not broker.transactions.active():
        return error_response(request, version, ErrorCode.NOT_COORDINATOR)
    result = await broker.transactions.add_offsets(request.transactional_id, request.producer_id,
                                                   request.producer_epoch, request.group_id)
    return error_response(request, version, error_of(result))


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    if code is ErrorCode.PRODUCER_FENCED and version < FENCED_VERSION:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return AddOffsetsToTxnResponse(error_code=int(code))
