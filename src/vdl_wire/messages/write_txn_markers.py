"""WriteTxnMarkers (key 27), versions 0-1; flexible from 1. # message defs: WriteTxnMarkersRequest.json

Between nodes: the transaction coordinator asks a stream leader to write commit/abort markers.
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, INT16, INT32, INT64, STRING, Array, Field, message, struct

WRITE_TXN_MARKERS_REQUEST = message(
    "WriteTxnMarkersRequest",
    27,
    "0-1",
    "1+",
    Field(
        "markers",
        Array(
            struct(
                "WritableTxnMarker",
                Field("producer_id", INT64),
                Field("producer_epoch", INT16),
                Field("transaction_result", BOOL),
                Field(
                    "topics",
                    Array(
                        struct(
                            "WritableTxnMarkerTopic",
                            Field("name", STRING),
                            Field("partition_indexes", Array(INT32)),
                        )
                    ),
                ),
                Field("coordinator_epoch", INT32),
            )
        ),
    ),
)

WRITE_TXN_MARKERS_RESPONSE = message(
    "WriteTxnMarkersResponse",
    27,
    "0-1",
    "1+",
    Field(
        "markers",
        Array(
            struct(
                "WritableTxnMarkerResult",
                Field("producer_id", INT64),
                Field(
                    "topics",
                    Array(
                        struct(
                            "WritableTxnMarkerTopicResult",
                            Field("name", STRING),
                            Field(
                                "partitions",
                                Array(
                                    struct(
                                        "WritableTxnMarkerPartitionResult",
                                        Field("partition_index", INT32),
                                        Field("error_code", INT16),
                                    )
                                ),
                            ),
                        )
                    ),
                ),
            )
        ),
    ),
)

WriteTxnMarkersRequest = build_message(WRITE_TXN_MARKERS_REQUEST, __name__)
WriteTxnMarkersResponse = build_message(WRITE_TXN_MARKERS_RESPONSE, __name__)
