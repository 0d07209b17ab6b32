"""IncrementalAlterConfigs (key 44): change a stream's configs (TOPIC resources) by a command
committed through the metadata group (on its leader: forwarded there from any other node), so
every replica applies the change (server/stream_settings.py).

Each change is checked first (cluster/stream_configs.py): an unknown key, a bad value or an
operation that does not fit gets INVALID_CONFIG naming the key, and nothing of that resource
changes. Node settings (BROKER resources) come from node.toml and flags: setting one gets
INVALID_CONFIG; deleting is a no-op (none is ever set dynamically).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from vdl_broker.cluster.stream_configs import AlterOp, ConfigProblem, altered
from vdl_broker.raft.types import NotLeaderError, RaftError
from vdl_broker.server.authorizer import Operation
from vdl_broker.server.forwarding import on_metadata_leader
from vdl_broker.server.handlers.create_topics import OUTCOME_ERRORS
from vdl_broker.server.handlers.describe_configs import ResourceType, refusal
from vdl_broker.tables import table_problem
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

API_KEY = IncrementalAlterConfigsRequest.DECL.api_key
NAME = "IncrementalAlterConfigs"

Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse

# How a resource's configs change: (the stream's current config, the request's resource) ->
# (keys to set, keys to delete); raises ConfigProblem. AlterConfigs (key 33) shares the rest.
Changes = Callable[[Mapping[str, str], Any], tuple[dict[str, str], list[str]]]


def _incremental(current: Mapping[str, str], resource: Any) -> tuple[dict[str, str], list[str]]:
    return altered(current, [(c.name, c.config_operation, c.value) for c in resource.configs])


async def _alter_one(broker: Any, resource: Any, validate_only: bool, changes: Changes) -> tuple[ErrorCode, str | None]:
    if resource.resource_type == ResourceType.BROKER:
        # Nothing is ever set dynamically on a node, so there is nothing to delete: Kafka answers
        # success for deleting an unset config, and kafka-reassign-partitions --verify deletes
        # the replication throttles of every node it moved replicas to. (AlterConfigs has no
        # operations: each of its configs is set.)
        if resource.configs and all(getattr(c, "config_operation", AlterOp.SET) == AlterOp.DELETE
                                    for c in resource.configs):
            return ErrorCode.NONE, None
        names = ", ".join(c.name for c in resource.configs) or "(none)"
        return ErrorCode.INVALID_CONFIG, (f"{names}: node settings are static (node.toml or flags); a stream's "
                                          f"own settings are altered on its TOPIC resource")
    if resource.resource_type != ResourceType.TOPIC:
        return ErrorCode.INVALID_REQUEST, f"resource type {resource.resource_type} is not supported (2 = TOPIC)"
    info = broker.metadata.state.streams.get(resource.resource_name)
    if info is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown stream {resource.resource_name!r}"
    try:
        to_set, to_delete = changes(info.config, resource)
    except ConfigProblem as problem:
        return ErrorCode.INVALID_CONFIG, str(problem)
    problem = table_problem(to_set)
    if problem is not None:
        return ErrorCode.INVALID_CONFIG, problem
    if validate_only or not (to_set or to_delete):
        return ErrorCode.NONE, None
    result = await broker.metadata.alter_stream_config(info.name, to_set, to_delete)
    return OUTCOME_ERRORS[result.outcome], result.message or None


async def _alter_here(broker: Any, request: Any, changes: Changes, response_class: Any) -> Any:
    counts = Counter((r.resource_type, r.resource_name) for r in request.resources)
    result_class = response_class.AlterConfigsResourceResponse
    results = []
    for resource in request.resources:
        if counts[(resource.resource_type, resource.resource_name)] > 1:
            code, message = ErrorCode.INVALID_REQUEST, "the resource is named more than once in the request"
        else:
            try:
                code, message = await _alter_one(broker, resource, request.validate_only, changes)
            except RaftError as error:
                if isinstance(error, NotLeaderError) and not results:
                    raise  # nothing done yet: the caller retries on the new leader
                code, message = ErrorCode.NOT_CONTROLLER, str(error)
        results.append(result_class(error_code=int(code), error_message=message,
                                    resource_type=resource.resource_type, resource_name=resource.resource_name))
    return response_class(responses=results)


async def alter_configs(broker: Any, context: Any, request: Any, changes: Changes, response_class: Any) -> Any:
    """Authorize each resource here, then change the authorized ones on the metadata leader."""
    result_class = response_class.AlterConfigsResourceResponse
    refused = {id(r): refusal(broker, context, r, Operation.ALTER_CONFIGS) for r in request.resources}
    denied = [result_class(error_code=int(code), resource_type=r.resource_type, resource_name=r.resource_name)
              for r in request.resources if (code := refused[id(r)]) is not None]
    response = response_class(responses=[])
    request.resources = [r for r in request.resources if refused[id(r)] is None]
    if request.resources:
        async def here(broker: Any, request: Any) -> Any:
            return await _alter_here(broker, request, changes, response_class)

        def failed(request: Any, version: int, code: ErrorCode) -> Any:
            return response_class(responses=[
                result_class(error_code=int(code), resource_type=r.resource_type, resource_name=r.resource_name)
                for r in request.resources])

        response = await on_metadata_leader(broker, context.api_version, request, here, failed, context)
    response.responses += denied
    return response


async def handle(broker: Any, context: Any, request: Any) -> Any:
    return await alter_configs(broker, context, request, _incremental, IncrementalAlterConfigsResponse)


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return IncrementalAlterConfigsResponse(responses=[
        Result(error_code=int(code), resource_type=r.resource_type, resource_name=r.resource_name)
        for r in request.resources])
