"""DeleteRecords (key 21), versions 0-2; v2 is flexible (KIP-107).
# message defs: DeleteRecordsRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, INT64, STRING, Array, Field, message, struct

HIGH_WATERMARK = -1  # an offset of -1 deletes up to the high watermark

DELETE_RECORDS_REQUEST = message(
    "DeleteRecordsRequest",
    21,
    "0-2",
    "2+",
    Field(
        "topics",
        Array(
            struct(
                "DeleteRecordsTopic",
                Field("name", STRING),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "DeleteRecordsPartition",
                            Field("partition_index", INT32),
                            Field("offset", INT64),
                        )
                    ),
                ),
            )
        ),
    ),
    Field("timeout_ms", INT32, default=60000),
)

DELETE_RECORDS_RESPONSE = message(
    "DeleteRecordsResponse",
    21,
    "0-2",
    "2+",
    Field("throttle_time_ms", INT32),
    Field(
        "topics",
        Array(
            struct(
                "DeleteRecordsTopicResult",
                Field("name", STRING),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "DeleteRecordsPartitionResult",
                            Field("partition_index", INT32),
                            Field("low_watermark", INT64),
                            Field("error_code", INT16),
                        )
                    ),
                ),
            )
        ),
    ),
)

DeleteRecordsRequest = build_message(DELETE_RECORDS_REQUEST, __name__)
DeleteRecordsResponse = build_message(DELETE_RECORDS_RESPONSE, __name__)
