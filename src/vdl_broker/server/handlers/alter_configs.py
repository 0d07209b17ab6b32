"""AlterConfigs (key 33), the API before IncrementalAlterConfigs (KIP-339): the request gives a
resource's whole config, so a stream key not listed returns to its default (Kafka semantics).
Validation, storage through the metadata group, authorization and the answer for node settings
(BROKER resources) are IncrementalAlterConfigs' (handlers/incremental_alter_configs.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from functools import partial

from vdl_broker.cluster import group_configs
from vdl_broker.cluster.group_configs import GroupConfigBounds
from vdl_broker.cluster.stream_configs import ConfigProblem, validated
from vdl_broker.raft.types import NotLeaderError, RaftError
from vdl_broker.server.authorizer import Operation
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.forwarding import on_metadata_leader
from vdl_broker.server.handlers.describe_configs import ResourceType, refusal
from vdl_broker.server.handlers.incremental_alter_configs import alter_resource, local_resource_problem
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import AlterConfigsRequest, AlterConfigsResponse

API_KEY = AlterConfigsRequest.DECL.api_key
NAME = "AlterConfigs"

Result = AlterConfigsResponse.AlterConfigsResourceResponse


def replaced(resource: AlterConfigsRequest.AlterConfigsResource, current: Mapping[str, str],
             replication_factor: int) -> tuple[dict[str, str], list[str]]:
    """(keys to set, keys to delete) that make the stream's config exactly the resource's
    list; raises ConfigProblem (a key twice, an unknown key, a bad or missing value)."""
    names = [c.name for c in resource.configs]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:
        raise ConfigProblem(f"{twice}: named more than once in the request")
    config = validated({c.name: c.value for c in resource.configs}, replication_factor)
    to_set = {name: value for name, value in config.items() if current.get(name) != value}
    return to_set, sorted(name for name in current if name not in config)


def replaced_group(resource: AlterConfigsRequest.AlterConfigsResource, current: Mapping[str, str],
                   bounds: GroupConfigBounds) -> dict[str, str]:
    """A group's config exactly as the resource's list; raises ConfigProblem."""
    return group_configs.replaced([(c.name, c.value) for c in resource.configs], bounds)


async def _alter_here(node: NodeView, request: AlterConfigsRequest) -> AlterConfigsResponse:
    counts = Counter((r.resource_type, r.resource_name) for r in request.resources)
    results: list[Result] = []
    message: str | None
    for resource in request.resources:
        if counts[(resource.resource_type, resource.resource_name)] > 1:
            code, message = ErrorCode.INVALID_REQUEST, "the resource is named more than once in the request"
        else:
            try:
                code, message = await alter_resource(node, resource.resource_type, resource.resource_name,
                                                     [c.name for c in resource.configs], partial(replaced, resource),
                                                     partial(replaced_group, resource), request.validate_only)
            except RaftError as error:
                if isinstance(error, NotLeaderError) and not results:
                    raise  # nothing done yet: the caller retries on the new leader
                code, message = ErrorCode.NOT_CONTROLLER, str(error)
        results.append(Result(error_code=int(code), error_message=message, resource_type=resource.resource_type,
                              resource_name=resource.resource_name))
    return AlterConfigsResponse(responses=results)


async def handle(node: NodeView, context: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    refused = {id(r): refusal(node, context, r, Operation.ALTER_CONFIGS) for r in request.resources}
    answered = [Result(error_code=int(code), resource_type=r.resource_type, resource_name=r.resource_name)
                for r in request.resources if (code := refused[id(r)]) is not None]
    # The node's own settings are answered here, on the node asked, another node's id refused first.
    counts = Counter((r.resource_type, r.resource_name) for r in request.resources)
    here = [r for r in request.resources if refused[id(r)] is None and r.resource_type == ResourceType.BROKER]
    message: str | None
    for resource in here:
        problem = local_resource_problem(node, context, counts[(resource.resource_type, resource.resource_name)],
                                         resource.resource_type, resource.resource_name)
        if problem is not None:
            code, message = ErrorCode.INVALID_REQUEST, problem
        else:
            code, message = await alter_resource(node, resource.resource_type, resource.resource_name,
                                                 [c.name for c in resource.configs], partial(replaced, resource),
                                                 partial(replaced_group, resource), request.validate_only)
        answered.append(Result(error_code=int(code), error_message=message, resource_type=resource.resource_type,
                               resource_name=resource.resource_name))
    response = AlterConfigsResponse(responses=[])
    local = {id(r) for r in here}
    request.resources = [r for r in request.resources if refused[id(r)] is None and id(r) not in local]
    if request.resources:
        response = await on_metadata_leader(node, context.api_version, request, _alter_here, error_response,
                                            context)
    response.responses += answered
    return response


def error_response(request: AlterConfigsRequest, version: int, code: ErrorCode) -> AlterConfigsResponse:
    return AlterConfigsResponse(responses=[
        Result(error_code=int(code), resource_type=r.resource_type, resource_name=r.resource_name)
        for r in request.resources])
