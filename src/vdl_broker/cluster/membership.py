"""Cluster membership in the metadata: node states and replica reassignments (pure: no I/O).

Nodes. A node is `active` unless recorded otherwise:

    joining          registered by its own join request (node.toml `join = true`); the metadata
                     leader adds it to the metadata group as a learner, promotes it to voter once
                     it has caught up, then marks it active (vdl_broker/cluster/controller.py)
    decommissioning  `vdl nodes decommission`: its replicas move to other nodes, then it is
                     removed (it still votes in the metadata group meanwhile)
    removing         `vdl nodes remove` (gone for good): it leaves the metadata group first, then
                     its replicas move
Removed nodes are forgotten (no NodeInfo) and their ids refused for good: a node that comes
back under a removed id cannot rejoin with stale data. Only active nodes get new replicas.

Reassignments. A stream's replica set changes through its own Raft group, one voter at a time
(vdl_broker/raft/membership.py); the metadata only says where it is going:

    Reassignment(target, original, involved)
        target    the replica set asked for (target[0]: the next preferred leader)
        original  StreamInfo.replicas when it started (what a cancel goes back to)
        involved  every node named by the original or any target since: all of them keep (or
                  open) a replica until the reassignment completes, because the stream's Raft
                  configuration may still count any of them

The stream's leader drives its group's configuration toward `target` (learners first, promoted
once caught up, then the others removed: vdl_broker/server/reassigner.py) and, once the
configuration equals the target and is committed, reports it; `complete_reassignment` then
makes the target the stream's replica set, and the nodes no longer in it drop their replica.

Commands (applying checks structure and the current state; proposers validate node ids and
sizes first, so a refused command is a race, answered alike on every node):

    {"op": "join_node", "id": n, "client": "h:p", "raft": "h:p", "listeners": [...], "rack": r, "own": true}
    {"op": "set_node_state", "id": n, "state": "active" | "decommissioning" | "removing"}
    {"op": "remove_node", "id": n}                            once no stream involves it
    {"op": "reassign_stream", "name": s, "created_index": i, "target": [n, ...] | null (cancel)}
    {"op": "complete_reassignment", "name": s, "created_index": i, "replicas": [n, ...]}
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field, replace
from typing import Any

ACTIVE = "active"
JOINING = "joining"
DECOMMISSIONING = "decommissioning"
REMOVING = "removing"
NODE_STATES = (ACTIVE, JOINING, DECOMMISSIONING, REMOVING)

MEMBERSHIP_OPS = frozenset({"join_node", "set_node_state", "remove_node", "reassign_stream",
                            "complete_reassignment"})


def node_command(op: str, node_id: int, client: str, raft: str, listeners: tuple[str, ...] = (),
                 rack: str | None = None, own: bool = False) -> dict[str, Any]:
    """A node's registration: `register_node` (cluster/metadata.py) or `join_node`. `own`: the
    node describes itself, from its own config (its word wins over any other node's)."""
    command: dict[str, Any] = {"op": op, "id": node_id, "client": client, "raft": raft}
    if listeners:
        command["listeners"] = list(listeners)
    if rack is not None:
        command["rack"] = rack
    if own:
        command["own"] = True
    return command


def join_node_command(node_id: int, client: str, raft: str, listeners: tuple[str, ...] = (),
                      rack: str | None = None, own: bool = False) -> dict[str, Any]:
    """Registered like register_node, as a joining node. It is always the node's own request:
    `own` says so from the feature level that knows it (cluster/features.py)."""
    return node_command("join_node", node_id, client, raft, listeners, rack, own=own)


def set_node_state_command(node_id: int, state: str) -> dict[str, Any]:
    return {"op": "set_node_state", "id": node_id, "state": state}


def remove_node_command(node_id: int) -> dict[str, Any]:
    return {"op": "remove_node", "id": node_id}


def reassign_stream_command(name: str, created_index: int, target: list[int] | None) -> dict[str, Any]:
    return {"op": "reassign_stream", "name": name, "created_index": created_index, "target": target}


def complete_reassignment_command(name: str, created_index: int, replicas: list[int]) -> dict[str, Any]:
    return {"op": "complete_reassignment", "name": name, "created_index": created_index, "replicas": replicas}


@dataclass(frozen=True)
class Reassignment:
    target: tuple[int, ...]
    original: tuple[int, ...]
    involved: tuple[int, ...]

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(n for n in self.target if n not in self.original)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(n for n in self.original if n not in self.target)


def _node_id(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _node_list(value: Any) -> tuple[int, ...] | None:
    """A non-empty list of distinct node ids (order kept), else None."""
    if not isinstance(value, list) or not value:
        return None
    ids = tuple(_node_id(v) for v in value)
    if any(i is None for i in ids) or len(set(ids)) != len(ids):
        return None
    return ids  # type: ignore[return-value]


@dataclass
class MembershipState:
    node_states: dict[int, str] = field(default_factory=dict)  # absent: active
    removed: set[int] = field(default_factory=set)
    reassignments: dict[str, Reassignment] = field(default_factory=dict)

    # -- queries

    def state_of(self, node_id: int) -> str:
        return self.node_states.get(node_id, ACTIVE)

    def placeable(self, nodes: Mapping[int, Any]) -> dict[int, Any]:
        """The nodes that may receive new replicas (active ones)."""
        return {n: info for n, info in nodes.items() if self.state_of(n) == ACTIVE}

    def hosts(self, stream: Any) -> tuple[int, ...]:
        """Every node that holds (or is to hold) a replica of `stream` (a StreamInfo) now."""
        moving = self.reassignments.get(stream.name)
        if moving is None:
            return tuple(stream.replicas)
        return tuple(dict.fromkeys((*stream.replicas, *moving.involved)))

    def target_of(self, stream: Any) -> tuple[int, ...]:
        """Where the stream's replicas are going: the target, else its replica set."""
        moving = self.reassignments.get(stream.name)
        return moving.target if moving is not None else tuple(stream.replicas)

    def drop_stream(self, name: str) -> None:
        self.reassignments.pop(name, None)

    # -- applying

    def apply(self, op: str, command: dict[str, Any], nodes: MutableMapping[int, Any],
              streams: MutableMapping[str, Any]) -> str | None:
        """Apply one command (the caller registers a joining node's NodeInfo after this returns
        None); an error message when the command is refused (state unchanged)."""
        if op in ("join_node", "set_node_state", "remove_node"):
            return self._apply_node(op, command, nodes, streams)
        return self._apply_stream(op, command, nodes, streams)

    def _apply_node(self, op: str, command: dict[str, Any], nodes: MutableMapping[int, Any],
                    streams: MutableMapping[str, Any]) -> str | None:
        node_id = _node_id(command.get("id"))
        if node_id is None:
            return f"{op}: bad node id {command.get('id')!r}"
        if node_id in self.removed:
            return f"node {node_id} was removed from the cluster: its id cannot come back"
        if op == "join_node":
            if not isinstance(command.get("client"), str) or not isinstance(command.get("raft"), str):
                return "join_node: client and raft must be host:port strings"
            if node_id not in nodes:
                self.node_states[node_id] = JOINING
            return None
        if node_id not in nodes:
            return f"{op}: no node {node_id}"
        if op == "set_node_state":
            state = command.get("state")
            if state not in NODE_STATES:
                return f"set_node_state: state must be one of {NODE_STATES}, got {state!r}"
            if state == ACTIVE:
                self.node_states.pop(node_id, None)
            else:
                self.node_states[node_id] = state
            return None
        involved = sorted(s.name for s in streams.values() if node_id in self.hosts(s))
        if involved:
            return f"node {node_id} still holds replicas of {', '.join(involved[:5])}"
        del nodes[node_id]
        self.node_states.pop(node_id, None)
        self.removed.add(node_id)
        return None

    def _apply_stream(self, op: str, command: dict[str, Any], nodes: Mapping[int, Any],
                      streams: MutableMapping[str, Any]) -> str | None:
        name = command.get("name")
        stream = streams.get(name) if isinstance(name, str) else None
        if stream is None or not isinstance(name, str) or command.get("created_index") != stream.created_index:
            return f"{op}: no stream {name!r} of incarnation {command.get('created_index')!r}"
        moving = self.reassignments.get(name)
        if op == "complete_reassignment":
            replicas = _node_list(command.get("replicas"))
            if moving is None or replicas != moving.target:
                return f"complete_reassignment: {name} is not being moved to {command.get('replicas')!r}"
            streams[name] = replace(stream, replicas=moving.target)
            del self.reassignments[name]
            return None
        raw = command.get("target")
        target: tuple[int, ...] | None
        if raw is None:  # cancel: back to where it started
            if moving is None:
                return f"reassign_stream: no reassignment of {name} in progress"
            target = moving.original
        else:
            target = _node_list(raw)
            if target is None:
                return f"reassign_stream: target must be a list of distinct node ids, got {raw!r}"
            unknown = [n for n in target if n not in nodes]
            if unknown:
                return f"reassign_stream: unknown node(s) {unknown}"
        original = moving.original if moving is not None else tuple(stream.replicas)
        involved = tuple(dict.fromkeys((*(moving.involved if moving else original), *target)))
        if moving is None and target == tuple(stream.replicas):
            return None  # already there: nothing to move
        self.reassignments[name] = Reassignment(target, original, involved)
        return None
