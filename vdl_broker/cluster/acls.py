"""ACLs in the cluster metadata (pure: no I/O), with Kafka's model and codes.

An ACL binding = resource pattern (type, name, LITERAL or PREFIXED) + entry (principal
`User:name` or `User:*`, host `*` or an address, operation, ALLOW or DENY). Evaluation as
Kafka's AclAuthorizer: a matching DENY wins; else a matching ALLOW (for the operation, for ALL,
or for DESCRIBE when READ, WRITE, DELETE or ALTER is allowed); no match = denied. A LITERAL `*`
matches every resource of its type. Enum codes: Kafka's ResourceType, PatternType, AclOperation,
AclPermissionType (clients/src/main/java/org/apache/kafka/common/{resource,acl}).

Commands: {"op": "create_acls", "acls": [binding, ...]}, {"op": "delete_acls", "acls": [...]},
a binding being [resource_type, name, pattern_type, principal, host, operation, permission].
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
ACL_OPS = frozenset({"create_acls", "delete_acls"})
_CONCRETE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID)
# Allowing one of these implies DESCRIBE (Kafka's AclAuthorizer).
_IMPLY_DESCRIBE = (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER)


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
        if not self.principal.startswith("User:") or len(self.principal) == len("User:"):
            return f"principal must be User:<name> or User:*, got {self.principal!r}"
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


@dataclass
class AclsState:
    bindings: set[AclBinding] = field(default_factory=set)
    version: int = 0  # bumped by every change (authorizer caches key on it)

    def matching(self, acl_filter: AclFilter) -> list[AclBinding]:
        return sorted(b for b in self.bindings if acl_filter.matches(b))

    def allows(self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        allowed = False
        for acl in self.bindings:
            if not acl.covers(resource_type, name) or acl.principal not in (principal, "User:*") \
                    or acl.host not in (host, WILDCARD):
                continue
            if acl.permission == Permission.DENY:
                if acl.operation in (operation, Operation.ALL):
                    return False  # DENY wins over any ALLOW
            elif acl.operation in (operation, Operation.ALL) or (
                    operation == Operation.DESCRIBE and acl.operation in _IMPLY_DESCRIBE) or (
                    operation == Operation.DESCRIBE_CONFIGS and acl.operation == Operation.ALTER_CONFIGS):
                allowed = True
        return allowed

    def allows_any(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """Is `operation` allowed on some resource of the type (Kafka's authorizeByResourceType,
        used for an idempotent producer: WRITE on any topic)? A DENY on the wildcard refuses."""
        for acl in self.bindings:
            if (acl.resource_type == resource_type and acl.permission == Permission.DENY
                    and acl.name == WILDCARD and acl.pattern_type == PatternType.LITERAL
                    and acl.principal in (principal, "User:*") and acl.host in (host, WILDCARD)
                    and acl.operation in (operation, Operation.ALL)):
                return False
        return any(acl.resource_type == resource_type and acl.permission == Permission.ALLOW
                   and acl.principal in (principal, "User:*") and acl.host in (host, WILDCARD)
                   and acl.operation in (operation, Operation.ALL)
                   and self.allows(principal, host, operation, resource_type, _example_name(acl))
                   for acl in self.bindings)

    def apply(self, op: str, command: dict[str, Any]) -> str | None:
        try:
            bindings = [AclBinding.from_json(raw) for raw in command.get("acls", [])]
        except (TypeError, ValueError) as error:
            return f"{op}: {error}"
        if op == "create_acls":
            bad = next((b.problem() for b in bindings if b.problem() is not None), None)
            if bad is not None:
                return f"create_acls: {bad}"
            self.bindings.update(bindings)
        else:
            self.bindings.difference_update(bindings)
        self.version += 1
        return None


def _example_name(acl: AclBinding) -> str:
    """A resource name the binding covers (to check it against DENYs)."""
    return acl.name if acl.name != WILDCARD or acl.pattern_type == PatternType.PREFIXED else "\x00any"


def create_acls_command(bindings: list[AclBinding]) -> dict[str, Any]:
    return {"op": "create_acls", "acls": [b.to_json() for b in bindings]}


def delete_acls_command(bindings: list[AclBinding]) -> dict[str, Any]:
    return {"op": "delete_acls", "acls": [b.to_json() for b in bindings]}
