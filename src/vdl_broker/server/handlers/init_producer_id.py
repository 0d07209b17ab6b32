"""InitProducerId (key 22): producer ids (KIP-98).

Without a transactional id: a fresh id for an idempotent producer, from any node. With one: the
transaction coordinator (the metadata leader; NOT_COORDINATOR elsewhere) gives the id's producer
id and a bumped epoch, which fences every older instance; an ongoing transaction of the old
instance is aborted first (CONCURRENT_TRANSACTIONS until then: the client retries). v3+ carry the
producer's own id and epoch (KIP-360): a producer bumping its own epoch.
"""

from __future__ import annotations

from vdl_broker.server.authorizer import Operation, ResourceType, authorized, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_broker.transactions.coordinator import error_of
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import InitProducerIdRequest, InitProducerIdResponse

API_KEY = InitProducerIdRequest.DECL.api_key
NAME = "InitProducerId"
FENCED_VERSION = 4  # older clients know PRODUCER_FENCED as INVALID_PRODUCER_EPOCH (KIP-588)


def _refusal(node: NodeView, context: RequestContext, transactional_id: str | None) -> ErrorCode | None:
    if transactional_id is not None:
        if not authorized(node, context, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return None
    # An idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679).
    if authorized_cluster(node, context, Operation.IDEMPOTENT_WRITE) or node.authorizer.allows_any(
            context.principal, context.client_host, Operation.WRITE, ResourceType.TOPIC):
        return None
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


async def handle(node: NodeView, context: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    refused = _refusal(node, context, request.transactional_id)
    if refused is not None:
        return error_response(request, context.api_version, refused)
    if request.transactional_id is None:
        return InitProducerIdResponse(error_code=0, producer_id=node.producer_ids.allocate(), producer_epoch=0)
    if request.transactional_id == "":
        return error_response(request, context.api_version, ErrorCode.INVALID_REQUEST)
    if not node.transactions.active():
        return error_response(request, context.api_version, ErrorCode.NOT_COORDINATOR)
    expected = None
    if context.api_version >= 3 and request.producer_id >= 0:
        expected = (request.producer_id, request.producer_epoch)
    result = await node.transactions.init_producer(request.transactional_id, request.transaction_timeout_ms,
                                                   expected)
    code = error_of(result)
    if code is not ErrorCode.NONE or isinstance(result, ErrorCode) or result.meta is None:
        return error_response(request, context.api_version, code)
    return InitProducerIdResponse(error_code=0, producer_id=result.meta.producer_id,
                                  producer_epoch=result.meta.epoch)


def error_response(request: InitProducerIdRequest, version: int, code: ErrorCode) -> InitProducerIdResponse:
    if code is ErrorCode.PRODUCER_FENCED and version < FENCED_VERSION:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return InitProducerIdResponse(error_code=int(code), producer_id=-1, producer_epoch=-1)
