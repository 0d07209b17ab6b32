"""DescribeClientQuotas (key 48, KIP-546): VDL enforces no client quotas, so no entity has one and
a valid filter matches nothing: the answer is an empty list (what Kafka answers a cluster where
no quota was set), so `kafka-configs --describe --entity-type users` (or `clients`) lists none.
The filter is checked as Kafka checks it (ClientQuotasImage.describe), with its error codes.
Needs DESCRIBE_CONFIGS on the cluster, as in Kafka."""

from __future__ import annotations

from vdl_broker.server.authorizer import Operation, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import DescribeClientQuotasRequest, DescribeClientQuotasResponse
from vdl_wire.messages.client_quotas import MATCH_DEFAULT, MATCH_EXACT, MATCH_SPECIFIED

API_KEY = DescribeClientQuotasRequest.DECL.api_key
NAME = "DescribeClientQuotas"

# Kafka's ClientQuotaEntity types; an ip is never combined with the others.
USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)


def filter_error(components: list[DescribeClientQuotasRequest.ComponentData]) -> tuple[ErrorCode, str] | None:
    """Why a filter is invalid, as Kafka words it, or None."""
    seen: set[str] = set()
    for component in components:
        kind = component.entity_type
        if not kind:
            return ErrorCode.INVALID_REQUEST, "Invalid empty entity type."
        if kind in seen:
            return ErrorCode.INVALID_REQUEST, f"Entity type {kind} cannot appear more than once in the filter."
        seen.add(kind)
        if kind not in ENTITY_TYPES:
            # Kafka's answer to an entity type it does not know (UnsupportedVersionException)
            return ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {kind} (the types are {', '.join(ENTITY_TYPES)})"
        match_type, match = component.match_type, component.match
        if match_type == MATCH_EXACT and match is None:
            return ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null."
        if match_type == MATCH_DEFAULT and match is not None:
            return ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
        if match_type == MATCH_SPECIFIED and match is not None:
            return ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            return ErrorCode.INVALID_REQUEST, (f"Unknown match type {match_type} (0 exact name, 1 default, "
                                               f"2 any specified name)")
    if IP in seen and seen & {USER, CLIENT_ID}:
        return ErrorCode.INVALID_REQUEST, ("Invalid entity filter component combination. IP filter component should "
                                           "not be used with user or clientId filter component.")
    return None


def handle(node: NodeView, context: RequestContext,
           request: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    if not authorized_cluster(node, context, Operation.DESCRIBE_CONFIGS):
        return error_response(request, context.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    problem = filter_error(request.components)
    if problem is not None:
        code, message = problem
        return DescribeClientQuotasResponse(error_code=int(code), error_message=message, entries=None)
    return DescribeClientQuotasResponse(error_code=0, entries=[])


def error_response(request: DescribeClientQuotasRequest, version: int,
                   code: ErrorCode) -> DescribeClientQuotasResponse:
    return DescribeClientQuotasResponse(error_code=int(code), entries=None)
