"""AlterConfigs (key 33), the API before IncrementalAlterConfigs (KIP-339): the request gives a
resource's whole config, so a stream key not listed returns to its default (Kafka semantics).
Validation, storage through the metadata group, authorization and the answer for node settings
(BROKER resources) are IncrementalAlterConfigs' (handlers/incremental_alter_configs.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vdl_broker.cluster.stream_configs import ConfigProblem, validated
from vdl_broker.server.handlers.incremental_alter_configs import alter_configs
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import AlterConfigsRequest, AlterConfigsResponse

API_KEY = AlterConfigsRequest.DECL.api_key
NAME = "AlterConfigs"

Result = AlterConfigsResponse.AlterConfigsResourceResponse


def replaced(current: Mapping[str, str], resource: Any) -> tuple[dict[str, str], list[str]]:
    """(keys to set, keys to delete) that make the stream's config exactly the resource's
    list; raises ConfigProblem (a key twice, an unknown key, a bad or missing value)."""
    names = [c.name for c in resource.configs]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:
        raise ConfigProblem(f"{twice}: named more than once in the request")
    config = validated({c.name: c.value for c in resource.configs})
    to_set = {name: value for name, value in config.items() if current.get(name) != value}
    return to_set, sorted(name for name in current if name not in config)


async def handle(broker: Any, context: Any, request: Any) -> Any:
    return await alter_configs(broker, context, request, replaced, AlterConfigsResponse)


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return AlterConfigsResponse(responses=[
        Result(error_code=int(code), resource_type=r.resource_type, resource_name=r.resource_name)
        for r in request.resources])
