"""Users and ACLs through the Kafka admin APIs (AlterUserScramCredentials,
DescribeUserScramCredentials, CreateAcls, DescribeAcls, DeleteAcls), on a VdlClient.

A password never leaves this process: the client salts and hashes it (PBKDF2, as Kafka's admin
client does) and sends the salted password; the broker keeps only the SCRAM keys derived from it.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TypedDict

from vdl_client.client import VdlClient
from vdl_client.settings import VdlClientError
from vdl_wire.acls import AclBinding, AclFilter
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import (
    AlterUserScramCredentialsRequest,
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
    DescribeUserScramCredentialsRequest,
)
from vdl_wire.sasl import DEFAULT_ITERATIONS, MECHANISM_CODES, MECHANISMS_BY_CODE, salted_password


@dataclass(frozen=True)
class UserInfo:
    name: str
    mechanisms: tuple[tuple[str, int], ...]  # (mechanism, iterations)


def _check(code: int, message: str | None, what: str) -> None:
    if code != 0:
        raise VdlClientError(f"{what}: {ErrorCode(code).name}" + (f" ({message})" if message else ""))


def upsert_user(client: VdlClient, name: str, mechanism: str, password: str,
                iterations: int = DEFAULT_ITERATIONS) -> None:
    if mechanism not in MECHANISM_CODES:
        raise VdlClientError(f"mechanism must be one of {', '.join(MECHANISM_CODES)}, got {mechanism!r}")
    salt = secrets.token_bytes(32)
    upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name=name, mechanism=MECHANISM_CODES[mechanism], iterations=iterations, salt=salt,
        salted_password=salted_password(mechanism, password, salt, iterations))
    response = client.admin(AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsertion]),
                            f"AlterUserScramCredentials {name!r}")
    for result in response.results:
        _check(result.error_code, result.error_message, f"user {result.user!r}")


def list_users(client: VdlClient) -> list[UserInfo]:
    response = client.admin(DescribeUserScramCredentialsRequest(users=None), "DescribeUserScramCredentials")
    _check(response.error_code, response.error_message, "DescribeUserScramCredentials")
    return [UserInfo(r.user, tuple((MECHANISMS_BY_CODE.get(c.mechanism, "?"), c.iterations)
                                   for c in r.credential_infos)) for r in response.results if r.error_code == 0]


def delete_user(client: VdlClient, name: str, mechanism: str | None = None) -> None:
    """Delete the user's credential for `mechanism`, or all of them."""
    users = {u.name: u for u in list_users(client)}
    if name not in users:
        raise VdlClientError(f"user {name!r} does not exist")
    mechanisms = [m for m, _ in users[name].mechanisms if mechanism in (None, m)]
    if not mechanisms:
        raise VdlClientError(f"user {name!r} has no {mechanism} credential")
    deletions = [AlterUserScramCredentialsRequest.ScramCredentialDeletion(name=name, mechanism=MECHANISM_CODES[m])
                 for m in mechanisms]
    response = client.admin(AlterUserScramCredentialsRequest(deletions=deletions, upsertions=[]),
                            f"AlterUserScramCredentials {name!r}")
    for result in response.results:
        _check(result.error_code, result.error_message, f"user {result.user!r}")


def create_acls(client: VdlClient, bindings: list[AclBinding]) -> None:
    creations = [CreateAclsRequest.AclCreation(resource_type=b.resource_type, resource_name=b.name,
                                               resource_pattern_type=b.pattern_type, principal=b.principal,
                                               host=b.host, operation=b.operation, permission_type=b.permission)
                 for b in bindings]
    response = client.admin(CreateAclsRequest(creations=creations), "CreateAcls")
    for result in response.results:
        _check(result.error_code, result.error_message, "CreateAcls")


class _FilterFields(TypedDict):
    """The fields DescribeAcls and a DeleteAcls filter share, under their names there."""

    resource_type_filter: int
    resource_name_filter: str | None
    pattern_type_filter: int
    principal_filter: str | None
    host_filter: str | None
    operation: int
    permission_type: int


def _filter_fields(acl_filter: AclFilter) -> _FilterFields:
    return {"resource_type_filter": acl_filter.resource_type, "resource_name_filter": acl_filter.name,
            "pattern_type_filter": acl_filter.pattern_type, "principal_filter": acl_filter.principal,
            "host_filter": acl_filter.host, "operation": acl_filter.operation,
            "permission_type": acl_filter.permission}


def describe_acls(client: VdlClient, acl_filter: AclFilter) -> list[AclBinding]:
    response = client.admin(DescribeAclsRequest(**_filter_fields(acl_filter)), "DescribeAcls")
    _check(response.error_code, response.error_message, "DescribeAcls")
    return [AclBinding(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                       a.permission_type) for r in response.resources for a in r.acls]


def delete_acls(client: VdlClient, acl_filter: AclFilter) -> list[AclBinding]:
    """Delete every ACL the filter matches; the deleted bindings."""
    request = DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(**_filter_fields(acl_filter))])
    response = client.admin(request, "DeleteAcls")
    deleted = []
    for result in response.filter_results:
        _check(result.error_code, result.error_message, "DeleteAcls")
        deleted += [AclBinding(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
                               m.permission_type) for m in result.matching_acls]
    return deleted
