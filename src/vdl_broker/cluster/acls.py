"""ACLs in the cluster metadata (pure: no I/O); the model is Kafka's (protocol/acls.py).

An ACL binding = resource pattern (type, name, LITERAL or PREFIXED) + entry (principal
`User:name` or `User:*`, host `*` or an address, operation, ALLOW or DENY). Evaluation as
Kafka's AclAuthorizer: a matching DENY wins; else a matching ALLOW (for the operation, for ALL,
or for DESCRIBE when READ, WRITE, DELETE or ALTER is allowed); no match = denied. A LITERAL `*`
matches every resource of its type.

Commands: {"op": "create_acls", "acls": [binding, ...]}, {"op": "delete_acls", "acls": [...]},
a binding being [resource_type, name, pattern_type, principal, host, operation, permission].
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vdl_wire.acls import (
    CLUSTER_NAME,
    WILDCARD,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

__all__ = ["ACL_OPS", "CLUSTER_NAME", "AclBinding", "AclFilter", "AclsState", "Operation", "PatternType",
           "Permission", "ResourceType", "create_acls_command", "delete_acls_command"]

ACL_OPS = frozenset({"create_acls", "delete_acls"})
# Allowing one of these implies DESCRIBE (Kafka's AclAuthorizer).
_IMPLY_DESCRIBE = (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER)


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
