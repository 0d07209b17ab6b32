"""CreateAcls (key 30): ACL bindings added to the replicated metadata, on the metadata leader
(forwarded there from any node). Needs ALTER on the cluster; a binding Kafka would refuse gets
INVALID_REQUEST naming why, the others are created together."""

from __future__ import annotations

from vdl_broker.cluster.acls import AclBinding, create_acls_command
from vdl_broker.server.authorizer import Operation, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.forwarding import on_metadata_leader
from vdl_broker.server.handlers.describe_acls import NO_AUTHORIZER
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import CreateAclsRequest, CreateAclsResponse

API_KEY = CreateAclsRequest.DECL.api_key
NAME = "CreateAcls"

Result = CreateAclsResponse.AclCreationResult


def _binding(creation: CreateAclsRequest.AclCreation) -> AclBinding:
    return AclBinding(creation.resource_type, creation.resource_name, creation.resource_pattern_type,
                      creation.principal, creation.host, creation.operation, creation.permission_type)


async def _create_here(node: NodeView, request: CreateAclsRequest) -> CreateAclsResponse:
    bindings = [_binding(c) for c in request.creations]
    problems = [b.problem() for b in bindings]
    valid = [b for b, problem in zip(bindings, problems, strict=True) if problem is None]
    failure = None
    if valid:
        result = await node.metadata.submit(create_acls_command(valid))
        failure = None if result.ok else result.message
    results = []
    for problem in problems:
        if problem is not None:
            results.append(Result(error_code=int(ErrorCode.INVALID_REQUEST), error_message=problem))
        elif failure is not None:
            results.append(Result(error_code=int(ErrorCode.UNKNOWN_SERVER_ERROR), error_message=failure))
        else:
            results.append(Result(error_code=0))
    return CreateAclsResponse(results=results)


async def handle(node: NodeView, context: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    if not node.authorizer.enabled:
        return error_response(request, context.api_version, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not authorized_cluster(node, context, Operation.ALTER):
        return error_response(request, context.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return await on_metadata_leader(node, context.api_version, request, _create_here, error_response, context)


def error_response(request: CreateAclsRequest, version: int, code: ErrorCode,
                   message: str | None = None) -> CreateAclsResponse:
    return CreateAclsResponse(results=[Result(error_code=int(code), error_message=message)
                                       for _ in request.creations])
