"""AlterUserScramCredentials (key 51): create, change or delete users' SCRAM credentials in the
replicated metadata, on the metadata leader (forwarded there from any node). Needs ALTER on the
cluster. An upsertion carries the salt and salted password; the metadata keeps only the stored
and server keys derived from them. One result per user (Kafka's rules): a user named twice is
DUPLICATE_RESOURCE, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, too few or too many
iterations UNACCEPTABLE_CREDENTIAL, deleting a missing credential RESOURCE_NOT_FOUND."""

from __future__ import annotations

from collections import Counter

from vdl_broker.cluster.users import check_user_name, delete_scram_command, upsert_scram_command
from vdl_broker.server.authorizer import Operation, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.forwarding import on_metadata_leader
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse
from vdl_wire.sasl import MAX_ITERATIONS, MECHANISMS_BY_CODE, MIN_ITERATIONS, ScramCredential

API_KEY = AlterUserScramCredentialsRequest.DECL.api_key
NAME = "AlterUserScramCredentials"

Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion
Upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion


def _problem(node: NodeView, item: Deletion | Upsertion) -> tuple[ErrorCode, str] | None:
    mechanism = MECHANISMS_BY_CODE.get(item.mechanism)
    reason = check_user_name(item.name)
    if reason is not None:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, reason
    if mechanism is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"unknown SCRAM mechanism code {item.mechanism}"
    if isinstance(item, Deletion):
        if node.metadata.state.users.credential(item.name, mechanism) is None:
            return ErrorCode.RESOURCE_NOT_FOUND, f"user {item.name!r} has no {mechanism} credential"
        return None
    if not MIN_ITERATIONS <= item.iterations <= MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, \
            f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {item.iterations}"
    if not item.salt or not item.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "salt and salted password must not be empty"
    return None


async def _alter_here(node: NodeView,
                      request: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    items: list[Deletion | Upsertion] = [*request.deletions, *request.upsertions]
    counts = Counter((item.name, item.mechanism) for item in items)
    errors: dict[str, tuple[ErrorCode, str]] = {}
    for item in items:
        problem = ((ErrorCode.DUPLICATE_RESOURCE, "the same user and mechanism appear more than once")
                   if counts[(item.name, item.mechanism)] > 1 else _problem(node, item))
        if problem is not None:
            errors.setdefault(item.name, problem)
    for item in items:
        if item.name in errors:
            continue
        mechanism = MECHANISMS_BY_CODE[item.mechanism]
        if isinstance(item, Deletion):
            command = delete_scram_command(item.name, mechanism)
        else:
            credential = ScramCredential.from_salted_password(mechanism, bytes(item.salt), item.iterations,
                                                              bytes(item.salted_password))
            command = upsert_scram_command(item.name, credential)
        result = await node.metadata.submit(command)
        if not result.ok:
            errors[item.name] = (ErrorCode.UNKNOWN_SERVER_ERROR, result.message)
    users = dict.fromkeys(item.name for item in items)
    return AlterUserScramCredentialsResponse(results=[
        Result(user=user, error_code=int(errors[user][0]) if user in errors else 0,
               error_message=errors[user][1] if user in errors else None) for user in users])


async def handle(node: NodeView, context: RequestContext,
                 request: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    if not authorized_cluster(node, context, Operation.ALTER):
        return error_response(request, context.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return await on_metadata_leader(node, context.api_version, request, _alter_here, error_response, context)


def error_response(request: AlterUserScramCredentialsRequest, version: int,
                   code: ErrorCode) -> AlterUserScramCredentialsResponse:
    users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    return AlterUserScramCredentialsResponse(results=[Result(user=user, error_code=int(code)) for user in users])
