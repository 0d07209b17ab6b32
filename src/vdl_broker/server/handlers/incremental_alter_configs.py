"""IncrementalAlterConfigs (key 44): change a stream's configs (TOPIC resources) by a command
committed through the metadata group (on its leader: forwarded there from any other node), so
every replica applies the change (server/stream_settings.py).

Each change is checked first (cluster/stream_configs.py): an unknown key, a bad value or an
operation that does not fit gets INVALID_CONFIG naming the key, and nothing of that resource
changes. A consumer group's own configs (GROUP resources, cluster/group_configs.py) are checked
and stored the same way, whether or not the group exists. Node settings (BROKER resources) come
from node.toml and flags: setting one gets INVALID_CONFIG; deleting is a no-op (none is ever set
dynamically). As in Kafka, a BROKER resource
naming another node than the one asked is INVALID_REQUEST first.

A node's loggers (BROKER_LOGGER resources, KIP-412) are this node's alone: the node the request
reaches sets their levels itself (server/loggers.py), unstored, without the metadata group, as a
Kafka broker does; the resource name must be its id.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping
from functools import partial

from vdl_broker.cluster import group_configs
from vdl_broker.cluster.group_configs import GROUP_CONFIGS_OP, GroupConfigBounds, group_configs_command
from vdl_broker.cluster.stream_configs import AlterOp, ConfigProblem, altered
from vdl_broker.raft.types import NotLeaderError, RaftError
from vdl_broker.server import loggers
from vdl_broker.server.authorizer import Operation
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.forwarding import on_metadata_leader
from vdl_broker.server.handlers.create_topics import OUTCOME_ERRORS
from vdl_broker.server.handlers.describe_configs import GROUP_NAME_EMPTY, ResourceType, refusal
from vdl_broker.server.node_view import NodeView
from vdl_broker.tables import table_problem
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
from vdl_wire.messages.list_config_resources import CLIENT_METRICS

API_KEY = IncrementalAlterConfigsRequest.DECL.api_key
NAME = "IncrementalAlterConfigs"

Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse

log = logging.getLogger(__name__)


# How a stream's config changes, given its current config and replication factor: (keys to
# set, keys to delete); raises ConfigProblem. AlterConfigs (key 33) computes its own and shares
# the rest.
Changes = Callable[[Mapping[str, str], int], tuple[dict[str, str], list[str]]]
# A group's whole config after the change, given its current one and what bounds it.
GroupChanges = Callable[[Mapping[str, str], GroupConfigBounds], dict[str, str]]


async def _alter_group(node: NodeView, group: str, changes: GroupChanges,
                       validate_only: bool) -> tuple[ErrorCode, str | None]:
    if not group:
        return ErrorCode.INVALID_REQUEST, GROUP_NAME_EMPTY
    state = node.metadata.state
    stored = state.groups.configs.get(group, {})
    try:
        config = changes(stored, GroupConfigBounds.of(node.config))
    except ConfigProblem as invalid:
        return ErrorCode.INVALID_CONFIG, str(invalid)
    if (too_new := state.features.refuses(GROUP_CONFIGS_OP)) is not None:
        return ErrorCode.INVALID_CONFIG, too_new
    if validate_only or config == stored:
        return ErrorCode.NONE, None
    result = await node.metadata.submit(group_configs_command(group, config))
    return OUTCOME_ERRORS[result.outcome], result.message or None


async def alter_resource(node: NodeView, resource_type: int, resource_name: str, config_names: list[str],
                         changes: Changes, group_changes: GroupChanges,
                         validate_only: bool) -> tuple[ErrorCode, str | None]:
    """Check and store one resource's change on the metadata leader: (error, message)."""
    if resource_type == ResourceType.BROKER:
        names = ", ".join(config_names) or "(none)"
        return ErrorCode.INVALID_CONFIG, (f"{names}: node settings are static (node.toml or flags); a stream's "
                                          f"own settings are altered on its TOPIC resource")
    if resource_type == ResourceType.GROUP:
        return await _alter_group(node, resource_name, group_changes, validate_only)
    if resource_type == ResourceType.BROKER_LOGGER:
        # Only legacy AlterConfigs gets here (IncrementalAlterConfigs sets loggers on the node
        # asked): Kafka's AlterConfigs has no BROKER_LOGGER either (KIP-412).
        return ErrorCode.INVALID_REQUEST, (f"resource type {resource_type} (BROKER_LOGGER) is altered by "
                                           f"IncrementalAlterConfigs only")
    if resource_type == CLIENT_METRICS:
        return ErrorCode.INVALID_REQUEST, ("VDL collects no client metrics (KIP-714): a client-metrics resource "
                                           "cannot be set")
    if resource_type != ResourceType.TOPIC:
        return ErrorCode.INVALID_REQUEST, f"resource type {resource_type} is not supported (2 = TOPIC)"
    info = node.metadata.state.streams.get(resource_name)
    if info is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown stream {resource_name!r}"
    try:
        to_set, to_delete = changes(info.config, len(info.replicas))
    except ConfigProblem as invalid:
        return ErrorCode.INVALID_CONFIG, str(invalid)
    problem = table_problem(to_set) or node.metadata.state.config_level_problem(to_set)
    if problem is not None:
        return ErrorCode.INVALID_CONFIG, problem
    if validate_only or not (to_set or to_delete):
        return ErrorCode.NONE, None
    result = await node.metadata.alter_stream_config(info.name, to_set, to_delete)
    return OUTCOME_ERRORS[result.outcome], result.message or None


def _incremental(resource: IncrementalAlterConfigsRequest.AlterConfigsResource, current: Mapping[str, str],
                 replication_factor: int) -> tuple[dict[str, str], list[str]]:
    return altered(current, [(c.name, c.config_operation, c.value) for c in resource.configs], replication_factor)


def _incremental_group(resource: IncrementalAlterConfigsRequest.AlterConfigsResource, current: Mapping[str, str],
                       bounds: GroupConfigBounds) -> dict[str, str]:
    return group_configs.altered(current, [(c.name, c.config_operation, c.value) for c in resource.configs], bounds)


async def _alter_one(node: NodeView, resource: IncrementalAlterConfigsRequest.AlterConfigsResource,
                     validate_only: bool) -> tuple[ErrorCode, str | None]:
    if resource.resource_type == ResourceType.BROKER and resource.configs and all(
            c.config_operation == AlterOp.DELETE for c in resource.configs):
        # Nothing is ever set dynamically on a node, so there is nothing to delete: Kafka answers
        # success for deleting an unset config, and kafka-reassign-partitions --verify deletes
        # the replication throttles of every node it moved replicas to.
        return ErrorCode.NONE, None
    return await alter_resource(node, resource.resource_type, resource.resource_name,
                                [c.name for c in resource.configs], partial(_incremental, resource),
                                partial(_incremental_group, resource), validate_only)


def node_id_problem(node: NodeView, resource_type: int, resource_name: str) -> str | None:
    """Why a BROKER resource does not name the node asked (nor "", the cluster-wide defaults), in
    Kafka's words: checked by the node the request reaches, before any config (# Kafka:
    ConfigAdminManager.validateResourceNameIsCurrentNodeId)."""
    if resource_type != ResourceType.BROKER or resource_name == "":
        return None
    try:
        asked = int(resource_name)
    except ValueError:
        return f"Node id must be an integer, but it is: {resource_name}"
    return None if asked == node.node_id else (f"Unexpected broker id, expected {node.node_id}, "
                                               f"but received {resource_name}")


def local_resource_problem(node: NodeView, context: RequestContext, named_times: int, resource_type: int,
                           resource_name: str) -> str | None:
    """Why a resource answered on the node asked (BROKER, BROKER_LOGGER) is INVALID_REQUEST before
    any of its configs is looked at: named more than once, or another node's id (not checked on a
    forwarded request, which the node it names sent)."""
    if named_times > 1:
        return "the resource is named more than once in the request"
    return None if context.forwarded else node_id_problem(node, resource_type, resource_name)


def _alter_loggers(node: NodeView, resource: IncrementalAlterConfigsRequest.AlterConfigsResource,
                   validate_only: bool) -> tuple[ErrorCode, str | None]:
    """Check every change of a BROKER_LOGGER resource, then (not validate_only) apply them
    (# Kafka: ConfigAdminManager.preprocess, RuntimeLoggerManager)."""
    names = [c.name for c in resource.configs]
    if len(set(names)) < len(names):
        return ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"
    unset = [c.name for c in resource.configs if c.config_operation != AlterOp.DELETE and c.value is None]
    if unset:
        return ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(unset)}"
    try:
        asked = int(resource.resource_name)
    except ValueError:
        return ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {resource.resource_name}"
    if asked != node.node_id:
        return ErrorCode.INVALID_REQUEST, f"Unexpected node id. Expected {node.node_id}, but received {asked}"
    changes = [loggers.LoggerChange(c.name, c.config_operation, c.value) for c in resource.configs]
    try:
        loggers.check(changes)
    except loggers.LoggerProblem as problem:
        return (ErrorCode.INVALID_CONFIG if problem.invalid_config else ErrorCode.INVALID_REQUEST), str(problem)
    if not validate_only:
        for line in loggers.apply(changes):
            log.warning("%s", line)
    return ErrorCode.NONE, None


async def _alter_here(node: NodeView,
                      request: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    counts = Counter((r.resource_type, r.resource_name) for r in request.resources)
    results: list[Result] = []
    message: str | None
    for resource in request.resources:
        if counts[(resource.resource_type, resource.resource_name)] > 1:
            code, message = ErrorCode.INVALID_REQUEST, "the resource is named more than once in the request"
        else:
            try:
                code, message = await _alter_one(node, resource, request.validate_only)
            except RaftError as error:
                if isinstance(error, NotLeaderError) and not results:
                    raise  # nothing done yet: the caller retries on the new leader
                code, message = ErrorCode.NOT_CONTROLLER, str(error)
        results.append(Result(error_code=int(code), error_message=message, resource_type=resource.resource_type,
                              resource_name=resource.resource_name))
    return IncrementalAlterConfigsResponse(responses=results)


async def handle(node: NodeView, context: RequestContext,
                 request: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    refused = {id(r): refusal(node, context, r, Operation.ALTER_CONFIGS) for r in request.resources}
    answered = [Result(error_code=int(code), resource_type=r.resource_type, resource_name=r.resource_name)
                for r in request.resources if (code := refused[id(r)]) is not None]
    # A node's loggers are set here, on the node asked; streams' configs go to the metadata leader.
    counts = Counter((r.resource_type, r.resource_name) for r in request.resources)
    message: str | None
    # So are its settings (BROKER: static, nothing to store), another node's id refused first.
    here: set[int] = set()
    for resource in request.resources:
        if refused[id(resource)] is not None or resource.resource_type not in (ResourceType.BROKER_LOGGER,
                                                                                ResourceType.BROKER):
            continue
        problem = local_resource_problem(node, context, counts[(resource.resource_type, resource.resource_name)],
                                         resource.resource_type, resource.resource_name)
        if problem is not None:
            code, message = ErrorCode.INVALID_REQUEST, problem
        elif resource.resource_type == ResourceType.BROKER:
            code, message = await _alter_one(node, resource, request.validate_only)
        else:
            code, message = _alter_loggers(node, resource, request.validate_only)
        here.add(id(resource))
        answered.append(Result(error_code=int(code), error_message=message, resource_type=resource.resource_type,
                               resource_name=resource.resource_name))
    response = IncrementalAlterConfigsResponse(responses=[])
    request.resources = [r for r in request.resources if refused[id(r)] is None and id(r) not in here]
    if request.resources:
        response = await on_metadata_leader(node, context.api_version, request, _alter_here, error_response,
                                            context)
    response.responses += answered
    return response


def error_response(request: IncrementalAlterConfigsRequest, version: int,
                   code: ErrorCode) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(responses=[
        Result(error_code=int(code), resource_type=r.resource_type, resource_name=r.resource_name)
        for r in request.resources])
