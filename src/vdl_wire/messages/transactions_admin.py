"""The transaction admin APIs. # message defs: DescribeProducersRequest.json,
DescribeTransactionsRequest.json, ListTransactionsRequest.json (KIP-664)

DescribeProducers (key 61) v0: a partition's active producers, at its leader (or only those a
VDL client names in a tagged field of VDL's own).
DescribeTransactions (key 65) v0: transactional ids' state, at their coordinator.
ListTransactions (key 66) v0-1: the transactions a coordinator knows; v1 adds a duration filter.
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, INT64, STRING, Array, Field, message, struct

# VDL's own tagged field (Kafka's brokers skip tags they do not know, KIP-482): only these
# producers' states, so that a client asking about its own producer id does not get (and the
# broker does not read the last batch of) every producer a stream remembers.
VDL_PRODUCER_IDS_TAG = 10_000

DESCRIBE_PRODUCERS_REQUEST = message(
    "DescribeProducersRequest",
    61,
    "0",
    "0+",
    Field("topics", Array(struct("TopicRequest", Field("name", STRING), Field("partition_indexes", Array(INT32))))),
    Field("vdl_producer_ids", Array(INT64), versions="0+", nullable_versions="0+", tagged_versions="0+",
          tag=VDL_PRODUCER_IDS_TAG, default=None),
)

DESCRIBE_PRODUCERS_RESPONSE = message(
    "DescribeProducersResponse",
    61,
    "0",
    "0+",
    Field("throttle_time_ms", INT32),
    Field("topics", Array(struct(
        "TopicResponse",
        Field("name", STRING),
        Field("partitions", Array(struct(
            "PartitionResponse",
            Field("partition_index", INT32),
            Field("error_code", INT16),
            Field("error_message", STRING, nullable_versions="0+", default=None),
            Field("active_producers", Array(struct(
                "ProducerState",
                Field("producer_id", INT64),
                Field("producer_epoch", INT32),
                Field("last_sequence", INT32, default=-1),
                Field("last_timestamp", INT64, default=-1),
                Field("coordinator_epoch", INT32),
                Field("current_txn_start_offset", INT64, default=-1),
            ))),
        ))),
    ))),
)

DESCRIBE_TRANSACTIONS_REQUEST = message(
    "DescribeTransactionsRequest",
    65,
    "0",
    "0+",
    Field("transactional_ids", Array(STRING)),
)

DESCRIBE_TRANSACTIONS_RESPONSE = message(
    "DescribeTransactionsResponse",
    65,
    "0",
    "0+",
    Field("throttle_time_ms", INT32),
    Field("transaction_states", Array(struct(
        "TransactionState",
        Field("error_code", INT16),
        Field("transactional_id", STRING),
        Field("transaction_state", STRING),
        Field("transaction_timeout_ms", INT32),
        Field("transaction_start_time_ms", INT64),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("topics", Array(struct("TopicData", Field("topic", STRING), Field("partitions", Array(INT32))))),
    ))),
)

LIST_TRANSACTIONS_REQUEST = message(
    "ListTransactionsRequest",
    66,
    "0-2",
    "0+",
    Field("state_filters", Array(STRING)),
    Field("producer_id_filters", Array(INT64)),
    Field("duration_filter", INT64, versions="1+", default=-1),
    # KIP-1152: a regular expression (RE2/J) the whole transactional id matches; null or empty: any.
    Field("transactional_id_pattern", STRING, versions="2+", nullable_versions="2+", default=None),
)

LIST_TRANSACTIONS_RESPONSE = message(
    "ListTransactionsResponse",
    66,
    "0-2",
    "0+",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("unknown_state_filters", Array(STRING)),
    Field("transaction_states", Array(struct(
        "TransactionState",
        Field("transactional_id", STRING),
        Field("producer_id", INT64),
        Field("transaction_state", STRING),
    ))),
)

DescribeProducersRequest = build_message(DESCRIBE_PRODUCERS_REQUEST, __name__)
DescribeProducersResponse = build_message(DESCRIBE_PRODUCERS_RESPONSE, __name__)
DescribeTransactionsRequest = build_message(DESCRIBE_TRANSACTIONS_REQUEST, __name__)
DescribeTransactionsResponse = build_message(DESCRIBE_TRANSACTIONS_RESPONSE, __name__)
ListTransactionsRequest = build_message(LIST_TRANSACTIONS_REQUEST, __name__)
ListTransactionsResponse = build_message(LIST_TRANSACTIONS_RESPONSE, __name__)
