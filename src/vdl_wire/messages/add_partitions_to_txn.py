"""AddPartitionsToTxn (key 24), versions 0-4; flexible from 3. # message defs: AddPartitionsToTxnRequest.json

v0-3 are the client's (one transaction); v4 batches transactions and adds verify_only, which
brokers send to the coordinator to check a partition is in a transaction (KIP-890 part 1).
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, INT16, INT32, INT64, STRING, Array, Field, message, struct

_TOPIC = struct(
    "AddPartitionsToTxnTopic",
    Field("name", STRING),
    Field("partitions", Array(INT32)),
)

ADD_PARTITIONS_TO_TXN_REQUEST = message(
    "AddPartitionsToTxnRequest",
    24,
    "0-4",
    "3+",
    Field(
        "transactions",
        Array(
            struct(
                "AddPartitionsToTxnTransaction",
                Field("transactional_id", STRING),
                Field("producer_id", INT64),
                Field("producer_epoch", INT16),
                Field("verify_only", BOOL, default=False),
                Field("topics", Array(_TOPIC)),
            )
        ),
        versions="4+",
    ),
    Field("v3_and_below_transactional_id", STRING, versions="0-3"),
    Field("v3_and_below_producer_id", INT64, versions="0-3"),
    Field("v3_and_below_producer_epoch", INT16, versions="0-3"),
    Field("v3_and_below_topics", Array(_TOPIC), versions="0-3"),
)

_TOPIC_RESULT = struct(
    "AddPartitionsToTxnTopicResult",
    Field("name", STRING),
    Field(
        "results_by_partition",
        Array(
            struct(
                "AddPartitionsToTxnPartitionResult",
                Field("partition_index", INT32),
                Field("partition_error_code", INT16),
            )
        ),
    ),
)

ADD_PARTITIONS_TO_TXN_RESPONSE = message(
    "AddPartitionsToTxnResponse",
    24,
    "0-4",
    "3+",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16, versions="4+"),
    Field(
        "results_by_transaction",
        Array(
            struct(
                "AddPartitionsToTxnResult",
                Field("transactional_id", STRING),
                Field("topic_results", Array(_TOPIC_RESULT)),
            )
        ),
        versions="4+",
    ),
    Field("results_by_topic_v3_and_below", Array(_TOPIC_RESULT), versions="0-3"),
)

AddPartitionsToTxnRequest = build_message(ADD_PARTITIONS_TO_TXN_REQUEST, __name__)
AddPartitionsToTxnResponse = build_message(ADD_PARTITIONS_TO_TXN_RESPONSE, __name__)
