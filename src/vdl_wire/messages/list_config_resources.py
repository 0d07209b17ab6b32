"""ListConfigResources (key 74), versions 0-1; every version is flexible (v0 was KIP-714's
ListClientMetricsResources; v1 adds the resource types asked for and answered, KIP-1142).
# message defs: ListConfigResourcesRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT8, INT16, INT32, STRING, Array, Field, message, struct

CLIENT_METRICS = 16  # Kafka's ConfigResource.Type.CLIENT_METRICS: v0 lists only these

LIST_CONFIG_RESOURCES_REQUEST = message(
    "ListConfigResourcesRequest",
    74,
    "0-1",
    "0+",
    Field("resource_types", Array(INT8), versions="1+"),
)

LIST_CONFIG_RESOURCES_RESPONSE = message(
    "ListConfigResourcesResponse",
    74,
    "0-1",
    "0+",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field(
        "config_resources",
        Array(
            struct(
                "ConfigResource",
                Field("resource_name", STRING),
                Field("resource_type", INT8, versions="1+", default=CLIENT_METRICS),
            )
        ),
    ),
)

ListConfigResourcesRequest = build_message(LIST_CONFIG_RESOURCES_REQUEST, __name__)
ListConfigResourcesResponse = build_message(LIST_CONFIG_RESOURCES_RESPONSE, __name__)
