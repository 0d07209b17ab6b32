"""Produce (key 0), versions 0-12, flexible from 9. # message defs: ProduceRequest.json

v0-2 carry MessageSet magic 0/1 in `records`, v3+ RecordBatch v2; v3 adds transactional_id;
v10 (KIP-951) lets a NOT_LEADER_OR_FOLLOWER answer name the new leader and its address; v11
(KIP-890) may answer TRANSACTION_ABORTABLE; v12 (KIP-890 part 2) is v11 whose transactional
batches add their partition to the transaction implicitly (transaction.version 2 clients only).
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, INT64, RECORDS, STRING, Array, Field, message, struct

PRODUCE_REQUEST = message(
    "ProduceRequest",
    0,
    "0-12",
    "9+",
    Field("transactional_id", STRING, versions="3+", nullable_versions="3+", default=None),
    Field("acks", INT16),
    Field("timeout_ms", INT32),
    Field(
        "topic_data",
        Array(
            struct(
                "TopicProduceData",
                Field("name", STRING, versions="0-12"),
                Field(
                    "partition_data",
                    Array(
                        struct(
                            "PartitionProduceData",
                            Field("index", INT32),
                            Field("records", RECORDS, nullable_versions="0+"),
                        )
                    ),
                ),
            )
        ),
    ),
)

PRODUCE_RESPONSE = message(
    "ProduceResponse",
    0,
    "0-12",
    "9+",
    Field(
        "responses",
        Array(
            struct(
                "TopicProduceResponse",
                Field("name", STRING, versions="0-12"),
                Field(
                    "partition_responses",
                    Array(
                        struct(
                            "PartitionProduceResponse",
                            Field("index", INT32),
                            Field("error_code", INT16),
                            Field("base_offset", INT64),
                            Field("log_append_time_ms", INT64, versions="2+", default=-1),
                            Field("log_start_offset", INT64, versions="5+", default=-1),
                            Field(
                                "record_errors",
                                Array(
                                    struct(
                                        "BatchIndexAndErrorMessage",
                                        Field("batch_index", INT32, versions="8+"),
                                        Field(
                                            "batch_index_error_message",
                                            STRING,
                                            versions="8+",
                                            nullable_versions="8+",
                                            default=None,
                                        ),
                                    )
                                ),
                                versions="8+",
                            ),
                            Field(
                                "error_message", STRING, versions="8+", nullable_versions="8+", default=None
                            ),
                            Field("current_leader", struct("LeaderIdAndEpoch",
                                                           Field("leader_id", INT32, versions="10+", default=-1),
                                                           Field("leader_epoch", INT32, versions="10+", default=-1)),
                                  versions="10+", tagged_versions="10+", tag=0),
                        )
                    ),
                ),
            )
        ),
    ),
    Field("throttle_time_ms", INT32, versions="1+"),
    Field(
        "node_endpoints",
        Array(
            struct(
                "NodeEndpoint",
                Field("node_id", INT32, versions="10+"),
                Field("host", STRING, versions="10+"),
                Field("port", INT32, versions="10+"),
                Field("rack", STRING, versions="10+", nullable_versions="10+", default=None),
            )
        ),
        versions="10+",
        tagged_versions="10+",
        tag=0,
    ),
)

ProduceRequest = build_message(PRODUCE_REQUEST, __name__)
ProduceResponse = build_message(PRODUCE_RESPONSE, __name__)
