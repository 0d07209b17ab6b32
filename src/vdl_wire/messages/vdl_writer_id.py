"""VdlWriterId (key 10001, VDL's own): a producer id derived from a writer key, version 0, flexible.

Spark's exactly-once sink needs a producer id that a replayed task gets again, so a replay re-sends
its batches under the same (producer id, epoch, sequence) and the broker stores them once. That is
not a Kafka transaction (no coordinator state, no epoch bump, no markers), so it has its own API
instead of InitProducerId with a transactional id, which means transactions.
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, INT64, STRING, Field, message

VDL_WRITER_ID_API_KEY = 10001

VDL_WRITER_ID_REQUEST = message(
    "VdlWriterIdRequest",
    VDL_WRITER_ID_API_KEY,
    "0",
    "0+",
    Field("writer_key", STRING),
)

VDL_WRITER_ID_RESPONSE = message(
    "VdlWriterIdResponse",
    VDL_WRITER_ID_API_KEY,
    "0",
    "0+",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("producer_id", INT64, default=-1),
    Field("producer_epoch", INT16),
)

VdlWriterIdRequest = build_message(VDL_WRITER_ID_REQUEST, __name__)
VdlWriterIdResponse = build_message(VDL_WRITER_ID_RESPONSE, __name__)
