"""AlterClientQuotas (key 49, KIP-546): VDL enforces no client quotas (no produce, fetch or
request throttling), so setting one is refused rather than stored and ignored: each entry that
sets a quota answers UNSUPPORTED_VERSION saying so (Kafka's code for a feature the cluster does
not offer). An entry that only removes quotas succeeds: no entity has one. Entities and quota
keys are checked first, as Kafka checks them (ClientQuotaControlManager), with INVALID_REQUEST.
Needs ALTER_CONFIGS on the cluster, as in Kafka."""

from __future__ import annotations

from vdl_broker.server.authorizer import Operation, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.handlers.describe_client_quotas import CLIENT_ID, ENTITY_TYPES, IP, USER
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import AlterClientQuotasRequest, AlterClientQuotasResponse

API_KEY = AlterClientQuotasRequest.DECL.api_key
NAME = "AlterClientQuotas"

Entry = AlterClientQuotasResponse.EntryData
Entity = AlterClientQuotasResponse.EntityData

# Kafka's quota keys (QuotaConfig): per user and client id, and per ip.
CLIENT_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
IP_KEYS = ("connection_creation_rate",)
NO_QUOTAS = ("VDL enforces no client quotas (no produce, fetch, request or connection throttling): "
             "a quota set here would not be applied")


def entry_error(entry: AlterClientQuotasRequest.EntryData) -> tuple[ErrorCode, str] | None:
    """Why an entry cannot be applied, or None (it removes quotas only: there are none)."""
    kinds = [entity.entity_type for entity in entry.entity]
    if not kinds:
        return ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity"
    for kind in kinds:
        if kind not in ENTITY_TYPES:
            return ErrorCode.INVALID_REQUEST, (f"Unhandled client quota entity type: {kind} "
                                               f"(the types are {', '.join(ENTITY_TYPES)})")
    if len(set(kinds)) < len(kinds):
        return ErrorCode.INVALID_REQUEST, f"Entity types appear more than once: {', '.join(kinds)}"
    if IP in kinds and {USER, CLIENT_ID} & set(kinds):
        return ErrorCode.INVALID_REQUEST, ("Invalid quota entity combination, IP entity should not be combined "
                                           "with User or ClientId")
    keys = IP_KEYS if IP in kinds else CLIENT_KEYS
    for op in entry.ops:
        if op.key not in keys:
            return ErrorCode.INVALID_REQUEST, f"Invalid configuration key {op.key} (the keys are {', '.join(keys)})"
    if any(not op.remove for op in entry.ops):
        return ErrorCode.UNSUPPORTED_VERSION, NO_QUOTAS
    return None


def handle(node: NodeView, context: RequestContext, request: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    if not authorized_cluster(node, context, Operation.ALTER_CONFIGS):
        return error_response(request, context.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    entries = []
    for entry in request.entries:
        entity = [Entity(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity]
        problem = entry_error(entry)
        code, message = problem if problem is not None else (ErrorCode.NONE, None)
        entries.append(Entry(error_code=int(code), error_message=message, entity=entity))
    return AlterClientQuotasResponse(entries=entries)


def error_response(request: AlterClientQuotasRequest, version: int, code: ErrorCode) -> AlterClientQuotasResponse:
    return AlterClientQuotasResponse(entries=[
        Entry(error_code=int(code), entity=[Entity(entity_type=e.entity_type, entity_name=e.entity_name)
                                            for e in entry.entity]) for entry in request.entries])
