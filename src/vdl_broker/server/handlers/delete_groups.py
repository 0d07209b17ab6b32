"""DeleteGroups (key 42): removes groups without members, offsets and all; a group with members
is NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND."""

from __future__ import annotations

from vdl_broker.server.authorizer import (
    Operation,
    authorized_group,
)
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import DeleteGroupsRequest, DeleteGroupsResponse

API_KEY = DeleteGroupsRequest.DECL.api_key
NAME = "DeleteGroups"

Result = DeleteGroupsResponse.DeletableGroupResult


async def handle(node: NodeView, context: RequestContext,
                 request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    if node.groups.active() is None:
        return error_response(request, context.api_version, ErrorCode.NOT_COORDINATOR)
    results = []
    for group_id in request.groups_names:
        if not authorized_group(node, context, Operation.DELETE, group_id):
            results.append(Result(group_id=group_id, error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED)))
            continue
        code = await node.groups.delete_group(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        results.append(Result(group_id=group_id, error_code=int(code)))
    return DeleteGroupsResponse(results=results)


def error_response(request: DeleteGroupsRequest, version: int, code: ErrorCode) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(results=[Result(group_id=g, error_code=int(code)) for g in request.groups_names])
