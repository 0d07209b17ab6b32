"""TxnOffsetCommit (key 28), versions 0-5; flexible from 3. # message defs: TxnOffsetCommitRequest.json

v2 adds the committed leader epoch; v3 the member id, group instance id and generation; v4 (KIP-890) may
answer TRANSACTION_ABORTABLE; v5 (KIP-890 part 2) is v4 that adds the group to the transaction
implicitly (AddOffsetsToTxn's work, transaction.version 2 clients only).
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, INT64, STRING, Array, Field, message, struct

TXN_OFFSET_COMMIT_REQUEST = message(
    "TxnOffsetCommitRequest",
    28,
    "0-5",
    "3+",
    Field("transactional_id", STRING),
    Field("group_id", STRING),
    Field("producer_id", INT64),
    Field("producer_epoch", INT16),
    Field("generation_id", INT32, versions="3+", default=-1),
    Field("member_id", STRING, versions="3+", default=""),
    Field("group_instance_id", STRING, versions="3+", nullable_versions="3+", default=None),
    Field(
        "topics",
        Array(
            struct(
                "TxnOffsetCommitRequestTopic",
                Field("name", STRING),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "TxnOffsetCommitRequestPartition",
                            Field("partition_index", INT32),
                            Field("committed_offset", INT64),
                            Field("committed_leader_epoch", INT32, versions="2+", default=-1),
                            Field("committed_metadata", STRING, nullable_versions="0+", default=None),
                        )
                    ),
                ),
            )
        ),
    ),
)

TXN_OFFSET_COMMIT_RESPONSE = message(
    "TxnOffsetCommitResponse",
    28,
    "0-5",
    "3+",
    Field("throttle_time_ms", INT32),
    Field(
        "topics",
        Array(
            struct(
                "TxnOffsetCommitResponseTopic",
                Field("name", STRING),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "TxnOffsetCommitResponsePartition",
                            Field("partition_index", INT32),
                            Field("error_code", INT16),
                        )
                    ),
                ),
            )
        ),
    ),
)

TxnOffsetCommitRequest = build_message(TXN_OFFSET_COMMIT_REQUEST, __name__)
TxnOffsetCommitResponse = build_message(TXN_OFFSET_COMMIT_RESPONSE, __name__)
