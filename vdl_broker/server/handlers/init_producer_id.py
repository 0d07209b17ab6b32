"""InitProducerId (key 22): producer ids for idempotent producers (KIP-98).

A null transactional id gets a fresh id; a transactional id gets an id derived from it, epoch 0,
so a restarted writer keyed by it keeps its id (Spark's exactly-once sink keys each task so).
"""

from __future__ import annotations

from typing import Any

from vdl_broker.protocol.errors import ErrorCode
from vdl_broker.protocol.messages import InitProducerIdRequest, InitProducerIdResponse

API_KEY = InitProducerIdRequest.DECL.api_key
NAME = "InitProducerId"


def handle(broker: Any, context: Any, request: Any) -> Any:
    producer_id, epoch = broker.producer_ids.allocate(request.transactional_id)
    return InitProducerIdResponse(error_code=0, producer_id=producer_id, producer_epoch=epoch)


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return InitProducerIdResponse(error_code=int(code), producer_id=-1, producer_epoch=-1)
