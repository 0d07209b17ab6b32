"""DescribeAcls (key 29): the ACLs matching a filter (Kafka's AclBindingFilter), from this
node's copy of the replicated metadata. Needs DESCRIBE on the cluster; SECURITY_DISABLED when
the node runs without an authorizer (authorizer = none), as Kafka answers."""

from __future__ import annotations

from itertools import groupby

from vdl_broker.cluster.acls import AclFilter, PatternType
from vdl_broker.server.authorizer import Operation, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import DeleteAclsRequest, DescribeAclsRequest, DescribeAclsResponse

API_KEY = DescribeAclsRequest.DECL.api_key
NAME = "DescribeAcls"

Resource = DescribeAclsResponse.DescribeAclsResource
Description = DescribeAclsResponse.AclDescription
NO_AUTHORIZER = "no authorizer is configured on the broker (authorizer = none)"


def acl_filter(item: DescribeAclsRequest | DeleteAclsRequest.DeleteAclsFilter, version: int) -> AclFilter:
    """A DescribeAcls request or DeleteAcls filter as the model's filter (v0: LITERAL only)."""
    return AclFilter(item.resource_type_filter, item.resource_name_filter,
                     item.pattern_type_filter if version >= 1 else PatternType.LITERAL,
                     item.principal_filter, item.host_filter, item.operation, item.permission_type)


def handle(node: NodeView, context: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    if not node.authorizer.enabled:
        return error_response(request, context.api_version, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not authorized_cluster(node, context, Operation.DESCRIBE):
        return error_response(request, context.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    wanted = acl_filter(request, context.api_version)
    problem = wanted.problem()
    if problem is not None:
        return error_response(request, context.api_version, ErrorCode.INVALID_REQUEST, problem)
    resources = []
    matching = node.metadata.state.acls.matching(wanted)
    for (kind, name, pattern), acls in groupby(matching, key=lambda b: (b.resource_type, b.name, b.pattern_type)):
        resources.append(Resource(resource_type=kind, resource_name=name, pattern_type=pattern, acls=[
            Description(principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission)
            for a in acls]))
    return DescribeAclsResponse(error_code=0, resources=resources)


def error_response(request: DescribeAclsRequest, version: int, code: ErrorCode,
                   message: str | None = None) -> DescribeAclsResponse:
    return DescribeAclsResponse(error_code=int(code), error_message=message, resources=[])
