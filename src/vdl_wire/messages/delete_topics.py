"""DeleteTopics (key 20), versions 0-3, non-flexible (flexible from 4). # message defs: DeleteTopicsRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, STRING, Array, Field, message, struct

DELETE_TOPICS_REQUEST = message(
    "DeleteTopicsRequest",
    20,
    "0-3",
    "4+",
    Field("topic_names", Array(STRING), versions="0-5"),
    Field("timeout_ms", INT32),
)

DELETE_TOPICS_RESPONSE = message(
    "DeleteTopicsResponse",
    20,
    "0-3",
    "4+",
    Field("throttle_time_ms", INT32, versions="1+"),
    Field(
        "responses",
        Array(struct("DeletableTopicResult", Field("name", STRING), Field("error_code", INT16))),
    ),
)

DeleteTopicsRequest = build_message(DELETE_TOPICS_REQUEST, __name__)
DeleteTopicsResponse = build_message(DELETE_TOPICS_RESPONSE, __name__)
