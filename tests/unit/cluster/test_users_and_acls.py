"""Users and ACLs in the metadata state machine: credentials without passwords, bootstrap users
applied once, Kafka's ACL semantics (deny wins, no match = denied, prefixes, wildcards, implied
DESCRIBE), filters, and replay giving the same state."""

from __future__ import annotations

from vdl_broker.cluster.acls import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    create_acls_command,
    delete_acls_command,
)
from vdl_broker.cluster.metadata import ClusterState, Outcome, decode_command, encode_command
from vdl_broker.cluster.users import bootstrap_user_command, delete_scram_command, upsert_scram_command
from vdl_broker.server.authorizer import Authorizer
from vdl_wire.sasl import ScramCredential

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def acl(kind: int, name: str, principal: str, operation: int, permission: int = ALLOW, pattern: int = LIT,
        host: str = "*") -> AclBinding:
    return AclBinding(kind, name, pattern, principal, host, operation, permission)


def apply(state: ClusterState, *commands: dict) -> list[Outcome]:
    return [state.apply_entry(i + 1 + state.applied_index, [decode_command(encode_command(c))])[0].outcome
            for i, c in enumerate(commands)]


def test_scram_credentials_replicate_without_the_password() -> None:
    credential = ScramCredential.from_password("SCRAM-SHA-256", "pencil-123", 4096)
    command = upsert_scram_command("alice", credential)
    assert "pencil-123" not in encode_command(command).decode()
    state = ClusterState()
    assert apply(state, command) == [Outcome.OK]
    stored = state.users.credential("alice", "SCRAM-SHA-256")
    assert stored == credential and stored.matches_password("pencil-123")
    assert apply(state, delete_scram_command("alice", "SCRAM-SHA-256"), delete_scram_command("alice", "SCRAM-SHA-256")) \
        == [Outcome.OK, Outcome.INVALID_COMMAND]
    assert state.users.credentials == {}


def test_weak_or_bad_credentials_are_refused_by_every_node() -> None:
    weak = upsert_scram_command("bob", ScramCredential.from_password("SCRAM-SHA-256", "x", 4096)) | {"iterations": 1000}
    unknown = upsert_scram_command("bob", ScramCredential.from_password("SCRAM-SHA-256", "x", 4096)) | {"mechanism": "MD5"}
    state = ClusterState()
    assert apply(state, weak, unknown, {"op": "upsert_scram", "user": ""}) == [Outcome.INVALID_COMMAND] * 3
    assert state.users.credentials == {}


def test_a_bootstrap_user_is_applied_once() -> None:
    first = ScramCredential.from_password("SCRAM-SHA-512", "one", 4096)
    changed = ScramCredential.from_password("SCRAM-SHA-512", "two", 4096)
    state = ClusterState()
    apply(state, bootstrap_user_command("admin", first), upsert_scram_command("admin", changed),
          bootstrap_user_command("admin", first))
    assert state.users.credential("admin", "SCRAM-SHA-512") == changed  # the admin's change stays


def test_acl_evaluation_is_kafkas() -> None:
    state = ClusterState()
    assert apply(state, create_acls_command([
        acl(TOPIC, "orders", "User:alice", Operation.WRITE),
        acl(TOPIC, "pay-", "User:alice", Operation.READ, pattern=PRE),
        acl(TOPIC, "pay-secret", "User:alice", Operation.ALL, DENY),
        acl(TOPIC, "*", "User:bob", Operation.ALL),
        acl(TOPIC, "public", "User:*", Operation.READ),
        acl(GROUP, "g", "User:alice", Operation.READ, host="10.0.0.1"),
    ])) == [Outcome.OK]
    acls = state.acls

    def allows(principal: str, op: int, kind: int, name: str, host: str = "127.0.0.1") -> bool:
        return acls.allows(principal, host, Operation(op), ResourceType(kind), name)

    assert allows("User:alice", Operation.WRITE, TOPIC, "orders")
    assert not allows("User:alice", Operation.READ, TOPIC, "orders")  # no match = denied
    assert allows("User:alice", Operation.DESCRIBE, TOPIC, "orders")  # WRITE implies DESCRIBE
    assert allows("User:alice", Operation.READ, TOPIC, "pay-eu") and not allows("User:alice", Operation.READ, TOPIC, "pa")
    assert not allows("User:alice", Operation.READ, TOPIC, "pay-secret")  # DENY beats the prefixed ALLOW
    assert allows("User:bob", Operation.DELETE, TOPIC, "anything") and not allows("User:bob", Operation.READ, GROUP, "g")
    assert allows("User:carol", Operation.READ, TOPIC, "public") and not allows("User:carol", Operation.WRITE, TOPIC, "public")
    assert allows("User:alice", Operation.READ, GROUP, "g", "10.0.0.1") and not allows("User:alice", Operation.READ, GROUP, "g")
    assert acls.allows_any("User:alice", "h", Operation.WRITE, TOPIC)
    assert not acls.allows_any("User:carol", "h", Operation.WRITE, TOPIC)


def test_authorizer_modes_super_users_and_node_requests() -> None:
    state = ClusterState()
    off = Authorizer("none", [], lambda: state.acls)
    on = Authorizer("acl", ["admin", "User:root"], lambda: state.acls)
    args = ("h", Operation.WRITE, TOPIC, "t")
    assert off.allows("User:ANONYMOUS", *args)
    assert not on.allows("User:ANONYMOUS", *args) and not on.allows("User:alice", *args)
    assert on.allows("User:admin", *args) and on.allows("User:root", *args) and on.allows("Node:2", *args)
    apply(state, create_acls_command([acl(TOPIC, "t", "User:alice", Operation.WRITE)]))
    assert on.allows("User:alice", *args)  # the cache follows the ACLs' version
    apply(state, delete_acls_command([acl(TOPIC, "t", "User:alice", Operation.WRITE)]))
    assert not on.allows("User:alice", *args)


def test_bad_bindings_are_refused_whole() -> None:
    state = ClusterState()
    bad = [acl(CLUSTER, "my-cluster", "User:a", Operation.ALTER), acl(TOPIC, "t", "alice", Operation.READ),
           acl(TOPIC, "t", "User:a", Operation.ANY), acl(TOPIC, "t", "User:a", Operation.READ, Permission.ANY),
           acl(ResourceType.ANY, "t", "User:a", Operation.READ), acl(TOPIC, "t", "User:a", Operation.READ,
                                                                      pattern=PatternType.MATCH)]
    for binding in bad:
        assert binding.problem() is not None
        assert apply(state, create_acls_command([acl(TOPIC, "ok", "User:a", Operation.READ), binding])) \
            == [Outcome.INVALID_COMMAND]
    assert state.acls.bindings == set()


def test_filters_as_describe_and_delete_use_them() -> None:
    bindings = [acl(TOPIC, "orders", "User:a", Operation.READ), acl(TOPIC, "ord", "User:b", Operation.WRITE, pattern=PRE),
                acl(TOPIC, "*", "User:c", Operation.READ), acl(GROUP, "orders", "User:a", Operation.READ)]
    state = ClusterState()
    apply(state, create_acls_command(bindings))
    match = state.acls.matching
    # The default pattern filter is LITERAL with any name: every literal binding.
    assert match(AclFilter()) == sorted([bindings[0], bindings[2], bindings[3]])
    assert match(AclFilter(pattern_type=PatternType.ANY)) == sorted(bindings)
    assert match(AclFilter(TOPIC, "orders", PatternType.MATCH)) == sorted(bindings[:3])
    assert match(AclFilter(ResourceType.ANY, "orders", LIT)) == sorted([bindings[0], bindings[3]])
    assert match(AclFilter(pattern_type=PatternType.ANY, principal="User:b")) == [bindings[1]]
    assert match(AclFilter(pattern_type=PatternType.ANY, operation=Operation.WRITE)) == [bindings[1]]
    assert AclFilter(resource_type=ResourceType.UNKNOWN).problem() is not None
