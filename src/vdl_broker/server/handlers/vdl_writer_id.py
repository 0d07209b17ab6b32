"""VdlWriterId (key 10001, VDL's own; vdl_wire/messages/vdl_writer_id.py): the producer id a writer
key maps to, epoch 0, the same on every node and after every restart, so a replayed Spark task
re-sends its batches under the same producer id and sequences and the broker stores them once.

Authorized like the transactional ids the sink used before (WRITE on TRANSACTIONAL_ID named by the
key), so existing ACLs for `vdl-spark/` keep working.
"""

from __future__ import annotations

from vdl_broker.server.authorizer import Operation, ResourceType, authorized
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import VdlWriterIdRequest, VdlWriterIdResponse

API_KEY = VdlWriterIdRequest.DECL.api_key
NAME = "VdlWriterId"


def handle(node: NodeView, context: RequestContext, request: VdlWriterIdRequest) -> VdlWriterIdResponse:
    if not request.writer_key:
        return error_response(request, context.api_version, ErrorCode.INVALID_REQUEST)
    if not authorized(node, context, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.writer_key):
        return error_response(request, context.api_version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    producer_id, epoch = node.producer_ids.derived(request.writer_key)
    return VdlWriterIdResponse(error_code=0, producer_id=producer_id, producer_epoch=epoch)


def error_response(request: VdlWriterIdRequest, version: int, code: ErrorCode) -> VdlWriterIdResponse:
    return VdlWriterIdResponse(error_code=int(code), producer_id=-1, producer_epoch=-1)
