"""InitProducerId (key 22): producer ids for idempotent producers (KIP-98).

A null transactional id gets a fresh id; a transactional id gets an id derived from it, epoch 0,
so a restarted writer keyed by it keeps its id (Spark's exactly-once sink keys each task so).
"""

from __future__ import annotations

from typing import Any

from vdl_broker.server.authorizer import Operation, ResourceType, authorized, authorized_cluster
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import InitProducerIdRequest, InitProducerIdResponse

API_KEY = InitProducerIdRequest.DECL.api_key
NAME = "InitProducerId"


def _refusal(broker: Any, context: Any, transactional_id: str | None) -> ErrorCode | None:
    if transactional_id is not None:
        if not authorized(broker, context, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return None
    # An idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679).
    if authorized_cluster(broker, context, Operation.IDEMPOTENT_WRITE) or broker.authorizer.allows_any(
            context.principal, context.client_host, Operation.WRITE, ResourceType.TOPIC):
        return None
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def handle(broker: Any, context: Any, request: Any) -> Any:
    refused = _refusal(broker, context, request.transactional_id)
    if refused is not None:
        return error_response(request, context.api_version, refused)
    if request.transactional_id is not None:
        producer_id, epoch = broker.producer_ids.derived(request.transactional_id)
    else:
        producer_id, epoch = broker.producer_ids.allocate(), 0
    return InitProducerIdResponse(error_code=0, producer_id=producer_id, producer_epoch=epoch)


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return InitProducerIdResponse(error_code=int(code), producer_id=-1, producer_epoch=-1)
