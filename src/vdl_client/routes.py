"""Where a VdlClient sends a request: a route names the node by its role, and the client turns it
into a node id from what it learned (Metadata, FindCoordinator) when it sends.

ANY_NODE          any reachable node: the known nodes first, then the bootstrap servers in order
CONTROLLER        the metadata leader (Metadata's controller id); any node while none is known
LeaderOf(s)       the leader of stream `s` (its one partition), from Metadata
CoordinatorOf(k)  the coordinator of group (or transactional id) `k`, asked with FindCoordinator
Node(n)           node `n` as the last Metadata answer names it

What a route resolved to is remembered (leaders, the controller) and forgotten when it fails:
see VdlClient.send and VdlClient.call.
"""

from __future__ import annotations

from dataclasses import dataclass

GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types


@dataclass(frozen=True)
class AnyNode:
    pass


@dataclass(frozen=True)
class Controller:
    pass


@dataclass(frozen=True)
class LeaderOf:
    stream: str


@dataclass(frozen=True)
class CoordinatorOf:
    key: str
    key_type: int = GROUP_KEY


@dataclass(frozen=True)
class Node:
    node_id: int


Route = AnyNode | Controller | LeaderOf | CoordinatorOf | Node

ANY_NODE = AnyNode()
CONTROLLER = Controller()

__all__ = ["ANY_NODE", "CONTROLLER", "GROUP_KEY", "TRANSACTION_KEY", "AnyNode", "Controller", "CoordinatorOf",
           "LeaderOf", "Node", "Route"]
