"""DescribeUserScramCredentials (key 50): which SCRAM mechanisms (and iterations) each user
has -- never a salt or key. Needs DESCRIBE on the cluster. No users named = every user."""

from __future__ import annotations

from collections import Counter

from vdl_broker.server.authorizer import Operation, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from vdl_wire.sasl import MECHANISM_CODES

API_KEY = DescribeUserScramCredentialsRequest.DECL.api_key
NAME = "DescribeUserScramCredentials"

Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
Info = DescribeUserScramCredentialsResponse.CredentialInfo


def handle(node: NodeView, context: RequestContext,
           request: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse:
    if not authorized_cluster(node, context, Operation.DESCRIBE):
        return error_response(request, context.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    credentials = node.metadata.state.users.credentials
    names = [u.name for u in request.users] if request.users else sorted(credentials)
    counts = Counter(names)
    results = []
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            results.append(Result(user=name, error_code=int(ErrorCode.DUPLICATE_RESOURCE),
                                  error_message="the user is named more than once in the request"))
        elif name not in credentials:
            results.append(Result(user=name, error_code=int(ErrorCode.RESOURCE_NOT_FOUND),
                                  error_message=f"user {name!r} has no SCRAM credential"))
        else:
            results.append(Result(user=name, error_code=0, credential_infos=[
                Info(mechanism=MECHANISM_CODES[m], iterations=c.iterations)
                for m, c in sorted(credentials[name].items())]))
    return DescribeUserScramCredentialsResponse(error_code=0, results=results)


def error_response(request: DescribeUserScramCredentialsRequest, version: int,
                   code: ErrorCode) -> DescribeUserScramCredentialsResponse:
    return DescribeUserScramCredentialsResponse(error_code=int(code), results=[])
