"""Kafka's ACL model as the admin APIs speak it: the enum codes, a binding (resource pattern +
entry) and a binding filter (DescribeAcls/DeleteAcls). Codes: Kafka's ResourceType, PatternType,
AclOperation, AclPermissionType (clients/src/main/java/org/apache/kafka/common/{resource,acl});
filter semantics: Kafka's AclBindingFilter / ResourcePatternFilter.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name, as in Kafka
WILDCARD = "*"
_CONCRETE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID)
# The operations an ACL on each resource type can name (ALL besides), as kafka-acls accepts them
# (# Kafka: AclEntry.supportedOperations, AclCommand.validateOperation). Brokers store any
# concrete operation, as Kafka's do: only the command line refuses the others.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE, Operation.ALTER,
                         Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DELETE, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS,
                         Operation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.ALTER, Operation.DESCRIBE, Operation.CLUSTER_ACTION,
                           Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE),
    ResourceType.TRANSACTIONAL_ID: (Operation.WRITE, Operation.DESCRIBE),
}


def principal_problem(principal: str) -> str | None:
    """Why `principal` is not one an ACL names (Kafka's KafkaPrincipal, type User)."""
    if not principal.startswith("User:") or len(principal) == len("User:"):
        return f"principal must be User:<name> or User:*, got {principal!r}"
    return None


@dataclass(frozen=True, order=True)
class AclBinding:
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def to_json(self) -> list[Any]:
        return [self.resource_type, self.name, self.pattern_type, self.principal, self.host, self.operation,
                self.permission]

    @classmethod
    def from_json(cls, raw: Any) -> AclBinding:
        if not isinstance(raw, list) or len(raw) != 7:
            raise ValueError(f"bad ACL binding {raw!r:.100}")
        kind, name, pattern, principal, host, operation, permission = raw
        return cls(int(kind), str(name), int(pattern), str(principal), str(host), int(operation), int(permission))

    def problem(self) -> str | None:
        """Why this binding cannot be created (None when it can)."""
        if self.resource_type not in _CONCRETE_TYPES:
            return f"resource type must be one of {', '.join(t.name for t in _CONCRETE_TYPES)}"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return "pattern type must be LITERAL or PREFIXED"
        if not self.name:
            return "resource name must not be empty"
        if self.resource_type == ResourceType.CLUSTER and self.name != CLUSTER_NAME:
            return f"the CLUSTER resource is named {CLUSTER_NAME!r}"
        if (problem := principal_problem(self.principal)) is not None:
            return problem
        if not self.host:
            return "host must be * or an address"
        if self.operation in (Operation.UNKNOWN, Operation.ANY) or self.operation not in Operation._value2member_map_:
            return "operation must be a concrete operation (READ, WRITE, ..., ALL)"
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            return "permission type must be ALLOW or DENY"
        return None

    def covers(self, resource_type: int, name: str) -> bool:
        """Does the pattern match the resource?"""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name in (name, WILDCARD)


@dataclass(frozen=True)
class AclFilter:
    """DescribeAcls/DeleteAcls filters: None or ANY matches everything (Kafka's AclBindingFilter)."""

    resource_type: int = ResourceType.ANY
    name: str | None = None
    pattern_type: int = PatternType.LITERAL
    principal: str | None = None
    host: str | None = None
    operation: int = Operation.ANY
    permission: int = Permission.ANY

    def problem(self) -> str | None:
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN \
                or self.operation == Operation.UNKNOWN or self.permission == Permission.UNKNOWN:
            return "a filter cannot contain UNKNOWN"
        return None

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if not self._pattern_matches(acl):
            return False
        return ((self.principal is None or acl.principal == self.principal)
                and (self.host is None or acl.host == self.host)
                and (self.operation == Operation.ANY or acl.operation == self.operation)
                and (self.permission == Permission.ANY or acl.permission == self.permission))

    def _pattern_matches(self, acl: AclBinding) -> bool:
        if self.pattern_type == PatternType.ANY:
            return self.name is None or acl.name == self.name
        if self.pattern_type == PatternType.MATCH:
            # The patterns that would apply to the resource named by the filter.
            return self.name is None or acl.covers(acl.resource_type, self.name)
        return acl.pattern_type == self.pattern_type and (self.name is None or acl.name == self.name)
