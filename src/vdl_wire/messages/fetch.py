"""Fetch (key 1), versions 0-12, flexible from 12. # message defs: FetchRequest.json

v0-3 responses carry MessageSet magic 0/1; v7+ add fetch sessions (we answer session_id 0);
v13+ name topics by id (KIP-516), which streams do not have.
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT8, INT16, INT32, INT64, RECORDS, STRING, Array, Field, message, struct

FETCH_REQUEST = message(
    "FetchRequest",
    1,
    "0-12",
    "12+",
    Field("cluster_id", STRING, versions="12+", nullable_versions="12+", tagged_versions="12+", tag=0,
          default=None),
    Field("replica_id", INT32, versions="0-14", default=-1),
    Field("max_wait_ms", INT32),
    Field("min_bytes", INT32),
    Field("max_bytes", INT32, versions="3+", default=0x7FFFFFFF),
    Field("isolation_level", INT8, versions="4+", default=0),
    Field("session_id", INT32, versions="7+", default=0),
    Field("session_epoch", INT32, versions="7+", default=-1),
    Field(
        "topics",
        Array(
            struct(
                "FetchTopic",
                Field("topic", STRING, versions="0-12"),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "FetchPartition",
                            Field("partition", INT32),
                            Field("current_leader_epoch", INT32, versions="9+", default=-1),
                            Field("fetch_offset", INT64),
                            Field("last_fetched_epoch", INT32, versions="12+", default=-1),
                            Field("log_start_offset", INT64, versions="5+", default=-1),
                            Field("partition_max_bytes", INT32),
                        )
                    ),
                ),
            )
        ),
    ),
    Field(
        "forgotten_topics_data",
        Array(
            struct(
                "ForgottenTopic",
                Field("topic", STRING, versions="7-12"),
                Field("partitions", Array(INT32), versions="7+"),
            )
        ),
        versions="7+",
    ),
    Field("rack_id", STRING, versions="11+", default=""),
)

FETCH_RESPONSE = message(
    "FetchResponse",
    1,
    "0-12",
    "12+",
    Field("throttle_time_ms", INT32, versions="1+"),
    Field("error_code", INT16, versions="7+"),
    Field("session_id", INT32, versions="7+", default=0),
    Field(
        "responses",
        Array(
            struct(
                "FetchableTopicResponse",
                Field("topic", STRING, versions="0-12"),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "PartitionData",
                            Field("partition_index", INT32),
                            Field("error_code", INT16),
                            Field("high_watermark", INT64),
                            Field("last_stable_offset", INT64, versions="4+", default=-1),
                            Field("log_start_offset", INT64, versions="5+", default=-1),
                            # KIP-320: where a fetcher's log diverges from the leader's.
                            Field("diverging_epoch", struct("EpochEndOffset",
                                                            Field("epoch", INT32, versions="12+", default=-1),
                                                            Field("end_offset", INT64, versions="12+", default=-1)),
                                  versions="12+", tagged_versions="12+", tag=0),
                            Field("current_leader", struct("LeaderIdAndEpoch",
                                                           Field("leader_id", INT32, versions="12+", default=-1),
                                                           Field("leader_epoch", INT32, versions="12+", default=-1)),
                                  versions="12+", tagged_versions="12+", tag=1),
                            Field("snapshot_id", struct("SnapshotId",
                                                        Field("end_offset", INT64, default=-1),
                                                        Field("epoch", INT32, default=-1)),
                                  versions="12+", tagged_versions="12+", tag=2),
                            Field(
                                "aborted_transactions",
                                Array(
                                    struct(
                                        "AbortedTransaction",
                                        Field("producer_id", INT64, versions="4+"),
                                        Field("first_offset", INT64, versions="4+"),
                                    )
                                ),
                                versions="4+",
                                nullable_versions="4+",
                            ),
                            Field("preferred_read_replica", INT32, versions="11+", default=-1),
                            Field("records", RECORDS, nullable_versions="0+"),
                        )
                    ),
                ),
            )
        ),
    ),
)

FetchRequest = build_message(FETCH_REQUEST, __name__)
FetchResponse = build_message(FETCH_RESPONSE, __name__)
