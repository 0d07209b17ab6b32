"""InitProducerId (key 22), versions 0-4; flexible from 2. # message defs: InitProducerIdRequest.json

v3 adds the producer's current id and epoch (KIP-360: a producer bumps its own epoch and keeps
its id); v4 lets the client handle PRODUCER_FENCED.
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, INT64, STRING, Field, message

INIT_PRODUCER_ID_REQUEST = message(
    "InitProducerIdRequest",
    22,
    "0-4",
    "2+",
    Field("transactional_id", STRING, nullable_versions="0+", default=None),
    Field("transaction_timeout_ms", INT32),
    Field("producer_id", INT64, versions="3+", default=-1),
    Field("producer_epoch", INT16, versions="3+", default=-1),
)

INIT_PRODUCER_ID_RESPONSE = message(
    "InitProducerIdResponse",
    22,
    "0-4",
    "2+",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("producer_id", INT64, default=-1),
    Field("producer_epoch", INT16),
)

InitProducerIdRequest = build_message(INIT_PRODUCER_ID_REQUEST, __name__)
InitProducerIdResponse = build_message(INIT_PRODUCER_ID_RESPONSE, __name__)
