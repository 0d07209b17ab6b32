"""DeleteTopics (key 20), versions 0-6, flexible from 4. # message defs: DeleteTopicsRequest.json

v5 adds an error message; v6 names topics by name or by id (KIP-516).
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, STRING, UUID, Array, Field, message, struct

DELETE_TOPICS_REQUEST = message(
    "DeleteTopicsRequest",
    20,
    "0-6",
    "4+",
    Field(
        "topics",
        Array(
            struct(
                "DeleteTopicState",
                Field("name", STRING, versions="6+", nullable_versions="6+", default=None),
                Field("topic_id", UUID, versions="6+"),
            )
        ),
        versions="6+",
    ),
    Field("topic_names", Array(STRING), versions="0-5"),
    Field("timeout_ms", INT32),
)

DELETE_TOPICS_RESPONSE = message(
    "DeleteTopicsResponse",
    20,
    "0-6",
    "4+",
    Field("throttle_time_ms", INT32, versions="1+"),
    Field(
        "responses",
        Array(
            struct(
                "DeletableTopicResult",
                Field("name", STRING, nullable_versions="6+"),
                Field("topic_id", UUID, versions="6+"),
                Field("error_code", INT16),
                Field("error_message", STRING, versions="5+", nullable_versions="5+", default=None),
            )
        ),
    ),
)

DeleteTopicsRequest = build_message(DELETE_TOPICS_REQUEST, __name__)
DeleteTopicsResponse = build_message(DELETE_TOPICS_RESPONSE, __name__)
