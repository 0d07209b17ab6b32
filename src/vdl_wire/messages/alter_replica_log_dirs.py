"""AlterReplicaLogDirs (key 34), versions 0-2; v2 is flexible (v0 and v1 are the same, v1 adds
throttling). # message defs: AlterReplicaLogDirsRequest.json, AlterReplicaLogDirsResponse.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, STRING, Array, Field, message, struct

ALTER_REPLICA_LOG_DIRS_REQUEST = message(
    "AlterReplicaLogDirsRequest",
    34,
    "0-2",
    "2+",
    Field(
        "dirs",
        Array(
            struct(
                "AlterReplicaLogDir",
                Field("path", STRING),
                Field(
                    "topics",
                    Array(struct("AlterReplicaLogDirTopic", Field("name", STRING),
                                 Field("partitions", Array(INT32)))),
                ),
            )
        ),
    ),
)

ALTER_REPLICA_LOG_DIRS_RESPONSE = message(
    "AlterReplicaLogDirsResponse",
    34,
    "0-2",
    "2+",
    Field("throttle_time_ms", INT32),
    Field(
        "results",
        Array(
            struct(
                "AlterReplicaLogDirTopicResult",
                Field("topic_name", STRING),
                Field(
                    "partitions",
                    Array(struct("AlterReplicaLogDirPartitionResult", Field("partition_index", INT32),
                                 Field("error_code", INT16))),
                ),
            )
        ),
    ),
)

AlterReplicaLogDirsRequest = build_message(ALTER_REPLICA_LOG_DIRS_REQUEST, __name__)
AlterReplicaLogDirsResponse = build_message(ALTER_REPLICA_LOG_DIRS_RESPONSE, __name__)
