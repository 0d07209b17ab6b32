"""DeleteAcls (key 31): every ACL matching each filter is removed from the replicated metadata,
on the metadata leader (forwarded there from any node); the answer lists what each filter
matched. Needs ALTER on the cluster."""

from __future__ import annotations

from vdl_broker.cluster.acls import delete_acls_command
from vdl_broker.server.authorizer import Operation, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.forwarding import on_metadata_leader
from vdl_broker.server.handlers.describe_acls import NO_AUTHORIZER, acl_filter
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import DeleteAclsRequest, DeleteAclsResponse

API_KEY = DeleteAclsRequest.DECL.api_key
NAME = "DeleteAcls"

FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
Matching = DeleteAclsResponse.DeleteAclsMatchingAcl


async def _delete_here(node: NodeView, request: DeleteAclsRequest, version: int) -> DeleteAclsResponse:
    state = node.metadata.state.acls
    results, doomed = [], set()
    for item in request.filters:
        wanted = acl_filter(item, version)
        problem = wanted.problem()
        if problem is not None:
            results.append(FilterResult(error_code=int(ErrorCode.INVALID_REQUEST), error_message=problem))
            continue
        matching = state.matching(wanted)
        doomed.update(matching)
        results.append(FilterResult(error_code=0, matching_acls=[
            Matching(error_code=0, resource_type=b.resource_type, resource_name=b.name, pattern_type=b.pattern_type,
                     principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission)
            for b in matching]))
    if doomed:
        result = await node.metadata.submit(delete_acls_command(sorted(doomed)))
        if not result.ok:
            return error_response(request, version, ErrorCode.UNKNOWN_SERVER_ERROR, result.message)
    return DeleteAclsResponse(filter_results=results)


async def handle(node: NodeView, context: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    if not node.authorizer.enabled:
        return error_response(request, context.api_version, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not authorized_cluster(node, context, Operation.ALTER):
        return error_response(request, context.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    version = context.api_version
    return await on_metadata_leader(node, version, request, lambda b, r: _delete_here(b, r, version),
                                    error_response, context)


def error_response(request: DeleteAclsRequest, version: int, code: ErrorCode,
                   message: str | None = None) -> DeleteAclsResponse:
    return DeleteAclsResponse(filter_results=[FilterResult(error_code=int(code), error_message=message)
                                              for _ in request.filters])
