"""InitProducerId (key 22), versions 0-1, non-flexible (flexible from 2). # message defs: InitProducerIdRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, INT64, STRING, Field, message

INIT_PRODUCER_ID_REQUEST = message(
    "InitProducerIdRequest",
    22,
    "0-1",
    "2+",
    Field("transactional_id", STRING, nullable_versions="0+", default=None),
    Field("transaction_timeout_ms", INT32),
)

INIT_PRODUCER_ID_RESPONSE = message(
    "InitProducerIdResponse",
    22,
    "0-1",
    "2+",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("producer_id", INT64, default=-1),
    Field("producer_epoch", INT16),
)

InitProducerIdRequest = build_message(INIT_PRODUCER_ID_REQUEST, __name__)
InitProducerIdResponse = build_message(INIT_PRODUCER_ID_RESPONSE, __name__)
