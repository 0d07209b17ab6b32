"""The one authorizer every handler asks before acting.

`authorizer = none` (the default) allows everything, as before security existed. `acl` allows
super users everything and everyone else what the replicated ACLs allow (cluster/acls.py: deny
wins, no matching ACL = denied). Answers are cached per (principal, host, operation, resource)
until the ACLs change, so a produce costs a dict lookup, not a scan of every ACL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vdl_broker.cluster.acls import CLUSTER_NAME, AclsState, Operation, ResourceType
from vdl_broker.listeners import user_name

if TYPE_CHECKING:
    from vdl_broker.server.connection import RequestContext
    from vdl_broker.server.node_view import NodeView

ANONYMOUS = "User:ANONYMOUS"
_CACHE_LIMIT = 65_536

__all__ = ["ANONYMOUS", "Authorizer", "Operation", "ResourceType", "authorized", "authorized_cluster",
           "authorized_group", "authorized_operations"]

# Kafka's AclEntry.supportedOperations per resource type (the delegation-token and two-phase
# commit ones VDL lacks left out): what KIP-430's authorized-operations bit fields may hold.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE, Operation.ALTER,
                         Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DELETE, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS,
                         Operation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                           Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE),
}


class Authorizer:
    def __init__(self, mode: str, super_users: list[str], acls: Callable[[], AclsState]) -> None:
        self.enabled = mode == "acl"
        self.super_users = frozenset(f"User:{user_name(name)}" for name in super_users)
        self._acls = acls
        self._cache: dict[tuple[Any, ...], bool] = {}
        self._cache_version = -1

    def _unrestricted(self, principal: str) -> bool:
        # `Node:<id>`: a node's own request over the node-to-node channel (server/internal.py).
        return not self.enabled or principal in self.super_users or principal.startswith("Node:")

    def allows(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
               name: str) -> bool:
        if self._unrestricted(principal):
            return True
        acls = self._acls()
        if acls.version != self._cache_version or len(self._cache) > _CACHE_LIMIT:
            self._cache.clear()
            self._cache_version = acls.version
        key = (principal, host, operation, resource_type, name)
        answer = self._cache.get(key)
        if answer is None:
            answer = self._cache[key] = acls.allows(principal, host, operation, resource_type, name)
        return answer

    def allows_any(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        if self._unrestricted(principal):
            return True
        return self._acls().allows_any(principal, host, operation, resource_type)


def authorized(node: NodeView, context: RequestContext, operation: Operation, resource_type: ResourceType,
               name: str) -> bool:
    """May the request's principal do `operation` on the resource?"""
    return node.authorizer.allows(context.principal, context.client_host, operation, resource_type, name)


def authorized_cluster(node: NodeView, context: RequestContext, operation: Operation) -> bool:
    return authorized(node, context, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def authorized_group(node: NodeView, context: RequestContext, operation: Operation, group_id: str) -> bool:
    return authorized(node, context, operation, ResourceType.GROUP, group_id)


def authorized_operations(node: NodeView, context: RequestContext, resource_type: ResourceType, name: str) -> int:
    """KIP-430's bit field: bit `operation` set for each supported operation the request's
    principal may do on the resource (without an authorizer, every one, as Kafka answers)."""
    return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type]
               if authorized(node, context, op, resource_type, name))
