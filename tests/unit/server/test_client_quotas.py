"""DescribeClientQuotas and AlterClientQuotas (KIP-546) on a node without client quotas: a valid
filter matches nothing, an invalid one gets Kafka's error and message; setting a quota is refused
with UNSUPPORTED_VERSION saying VDL enforces none, removing one succeeds (none exists); both need
their cluster permission. Each side's bytes go through the codec at every version."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from vdl_broker.server.handlers import alter_client_quotas, describe_client_quotas
from vdl_wire.codec import decode_message, encode_message
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
)

pytestmark = pytest.mark.unit

Component = DescribeClientQuotasRequest.ComponentData
AlterEntry = AlterClientQuotasRequest.EntryData
Entity = AlterClientQuotasRequest.EntityData
Op = AlterClientQuotasRequest.OpData
EXACT, DEFAULT, SPECIFIED = 0, 1, 2


class Authorizer:
    def __init__(self, allowed: set[str]) -> None:
        self.allowed = allowed
        self.asked: list[tuple[str, str, str]] = []

    def allows(self, principal: str, host: str, operation: Any, resource_type: Any, name: str) -> bool:
        self.asked.append((operation.name, resource_type.name, name))
        return operation.name in self.allowed


def node(*allowed: str) -> Any:
    return SimpleNamespace(authorizer=Authorizer(set(allowed)))


def context(version: int) -> Any:
    return SimpleNamespace(api_version=version, principal="User:alice", client_host="127.0.0.1")


def through_the_wire(message: Any, version: int) -> Any:
    """The message as the other side decodes it."""
    cls = type(message)
    return decode_message(cls, version, b"".join(bytes(b) for b in encode_message(cls, version, message)),
                          exact=True)[0]


def describe(components: list[Component], strict: bool = True, version: int = 1,
             allowed: tuple[str, ...] = ("DESCRIBE_CONFIGS",)) -> tuple[int, str | None, Any]:
    request = through_the_wire(DescribeClientQuotasRequest(components=components, strict=strict), version)
    response = through_the_wire(describe_client_quotas.handle(node(*allowed), context(version), request), version)
    return response.error_code, response.error_message, response.entries


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("components", [
    [],  # every entity (kafka-configs --describe --entity-type users asks for users only)
    [Component(entity_type="user", match_type=SPECIFIED, match=None)],
    [Component(entity_type="user", match_type=EXACT, match="alice")],
    [Component(entity_type="client-id", match_type=DEFAULT, match=None)],
    [Component(entity_type="user", match_type=EXACT, match="alice"),
     Component(entity_type="client-id", match_type=SPECIFIED, match=None)],
    [Component(entity_type="ip", match_type=EXACT, match="10.0.0.1")],
], ids=["all", "users", "alice", "default-client", "alice-clients", "ip"])
def test_a_valid_filter_matches_no_entity(components: list[Component], version: int) -> None:
    assert describe(components, version=version) == (0, None, [])
    assert describe(components, strict=False, version=version) == (0, None, [])


@pytest.mark.parametrize(("components", "code", "message"), [
    ([Component(entity_type="", match_type=SPECIFIED)], ErrorCode.INVALID_REQUEST, "Invalid empty entity type."),
    ([Component(entity_type="user", match_type=SPECIFIED), Component(entity_type="user", match_type=EXACT, match="a")],
     ErrorCode.INVALID_REQUEST, "Entity type user cannot appear more than once in the filter."),
    ([Component(entity_type="group", match_type=SPECIFIED)], ErrorCode.UNSUPPORTED_VERSION,
     "Unsupported entity type group (the types are user, client-id, ip)"),
    ([Component(entity_type="user", match_type=EXACT, match=None)], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([Component(entity_type="user", match_type=DEFAULT, match="alice")], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([Component(entity_type="user", match_type=SPECIFIED, match="alice")], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([Component(entity_type="user", match_type=3, match=None)], ErrorCode.INVALID_REQUEST,
     "Unknown match type 3 (0 exact name, 1 default, 2 any specified name)"),
    ([Component(entity_type="ip", match_type=SPECIFIED), Component(entity_type="client-id", match_type=SPECIFIED)],
     ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination. IP filter component should not be "
                                "used with user or clientId filter component."),
], ids=["empty-type", "twice", "unknown-type", "exact-null", "default-named", "specified-named", "match-type",
        "ip-and-client"])
def test_an_invalid_filter_gets_kafkas_error(components: list[Component], code: ErrorCode, message: str) -> None:
    assert describe(components) == (code, message, None)


def test_describing_needs_describe_configs_on_the_cluster() -> None:
    refused = node()
    response = describe_client_quotas.handle(refused, context(1), DescribeClientQuotasRequest(components=[]))
    assert (response.error_code, response.entries) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    assert refused.authorizer.asked == [("DESCRIBE_CONFIGS", "CLUSTER", "kafka-cluster")]


def alter(entries: list[AlterEntry], version: int = 1,
          allowed: tuple[str, ...] = ("ALTER_CONFIGS",)) -> list[tuple[int, str | None, list[tuple[str, str | None]]]]:
    request = through_the_wire(AlterClientQuotasRequest(entries=entries), version)
    response: AlterClientQuotasResponse = through_the_wire(
        alter_client_quotas.handle(node(*allowed), context(version), request), version)
    return [(e.error_code, e.error_message, [(x.entity_type, x.entity_name) for x in e.entity])
            for e in response.entries]


def entry(entity: dict[str, str | None], *ops: Op) -> AlterEntry:
    return AlterEntry(entity=[Entity(entity_type=k, entity_name=v) for k, v in entity.items()], ops=list(ops))


NO_QUOTAS = ("VDL enforces no client quotas (no produce, fetch, request or connection throttling): a quota set "
             "here would not be applied")


@pytest.mark.parametrize("version", [0, 1])
def test_setting_a_quota_is_refused_and_removing_one_succeeds(version: int) -> None:
    assert alter([
        entry({"user": "alice"}, Op(key="producer_byte_rate", value=1024.0)),
        entry({"user": None, "client-id": "app"}, Op(key="consumer_byte_rate", remove=True),
              Op(key="request_percentage", value=50.0)),
        entry({"client-id": None}, Op(key="consumer_byte_rate", remove=True)),
        entry({"ip": "10.0.0.1"}, Op(key="connection_creation_rate", remove=True)),
    ], version) == [
        (ErrorCode.UNSUPPORTED_VERSION, NO_QUOTAS, [("user", "alice")]),
        (ErrorCode.UNSUPPORTED_VERSION, NO_QUOTAS, [("user", None), ("client-id", "app")]),
        (0, None, [("client-id", None)]),
        (0, None, [("ip", "10.0.0.1")]),
    ]


@pytest.mark.parametrize(("wanted", "message"), [
    (entry({}, Op(key="producer_byte_rate", remove=True)), "Invalid empty client quota entity"),
    (entry({"group": "g"}, Op(key="producer_byte_rate", remove=True)),
     "Unhandled client quota entity type: group (the types are user, client-id, ip)"),
    (entry({"ip": "10.0.0.1", "user": "alice"}, Op(key="connection_creation_rate", remove=True)),
     "Invalid quota entity combination, IP entity should not be combined with User or ClientId"),
    (entry({"user": "alice"}, Op(key="connection_creation_rate", remove=True)),
     "Invalid configuration key connection_creation_rate (the keys are producer_byte_rate, consumer_byte_rate, "
     "request_percentage, controller_mutation_rate)"),
    (entry({"ip": "10.0.0.1"}, Op(key="producer_byte_rate", value=1.0)),
     "Invalid configuration key producer_byte_rate (the keys are connection_creation_rate)"),
], ids=["empty", "unknown-type", "ip-and-user", "ip-key-for-user", "user-key-for-ip"])
def test_an_invalid_alteration_gets_invalid_request(wanted: AlterEntry, message: str) -> None:
    [(code, got, _)] = alter([wanted])
    assert (code, got) == (ErrorCode.INVALID_REQUEST, message)


def test_altering_needs_alter_configs_on_the_cluster() -> None:
    assert alter([entry({"user": "alice"}, Op(key="producer_byte_rate", remove=True))], allowed=("DESCRIBE_CONFIGS",)) \
        == [(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, [("user", "alice")])]
