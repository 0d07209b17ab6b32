"""node.toml: one node's identity and its peers.

    node_id = 1
    data_dir = "/var/lib/vdl/node1"
    client_listen = "127.0.0.1:9092"    # Kafka clients
    raft_listen = "127.0.0.1:19092"     # other nodes (all Raft groups share one connection)
    [[peers]]                           # every node of the cluster, this one included or not
    id = 2
    client = "127.0.0.1:9093"
    raft = "127.0.0.1:19093"

Kept separate from server/config.py's BrokerConfig (which rejects unknown keys): the broker
takes CLUSTER_KEYS out of the table and hands them to `parse_cluster_section`, the rest stays
its own. Every other BrokerConfig key may appear in node.toml too.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLUSTER_KEYS = frozenset({"client_listen", "raft_listen", "peers"})


class NodeConfigError(ValueError):
    """A bad node.toml value; the message names the key."""


@dataclass(frozen=True)
class NodeAddress:
    """One cluster member as every node knows it."""

    id: int
    client: str  # host:port for Kafka clients
    raft: str  # host:port for Raft traffic

    @property
    def client_address(self) -> tuple[str, int]:
        return split_host_port(self.client, "client")

    @property
    def raft_address(self) -> tuple[str, int]:
        return split_host_port(self.raft, "raft")


@dataclass
class NodeConfig:
    node_id: int
    data_dir: Path
    client_listen: str
    raft_listen: str
    peers: list[NodeAddress] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # other keys (BrokerConfig settings)

    @property
    def members(self) -> list[NodeAddress]:
        """Every node of the cluster (this one first added from its own listen addresses)."""
        nodes = {p.id: p for p in self.peers}
        nodes.setdefault(self.node_id, NodeAddress(self.node_id, self.client_listen, self.raft_listen))
        return [nodes[i] for i in sorted(nodes)]

    @property
    def voter_ids(self) -> list[int]:
        return [n.id for n in self.members]

    def raft_peers(self) -> dict[int, tuple[str, int]]:
        """Raft addresses of the other nodes (RaftHost's `peers`)."""
        return {n.id: n.raft_address for n in self.members if n.id != self.node_id}


def split_host_port(value: str, key: str) -> tuple[str, int]:
    host, sep, port = str(value).rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise NodeConfigError(f"{key}: expected HOST:PORT, got {value!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def _int(table: Mapping[str, Any], key: str, source: str) -> int:
    value = table.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise NodeConfigError(f"{source}: {key} must be a positive integer, got {value!r}")
    return value


def _address(table: Mapping[str, Any], key: str, source: str) -> str:
    value = table.get(key)
    if not isinstance(value, str):
        raise NodeConfigError(f"{source}: {key} must be a \"HOST:PORT\" string, got {value!r}")
    split_host_port(value, f"{source}: {key}")
    return value


def parse_cluster_section(table: Mapping[str, Any], source: str = "node.toml") -> tuple[str, str, list[NodeAddress]]:
    """(client_listen, raft_listen, peers) from a TOML table holding CLUSTER_KEYS."""
    client = _address(table, "client_listen", source)
    raft = _address(table, "raft_listen", source)
    raw_peers = table.get("peers", [])
    if not isinstance(raw_peers, list):
        raise NodeConfigError(f"{source}: peers must be an array of tables ([[peers]])")
    peers: list[NodeAddress] = []
    seen: set[int] = set()
    for n, item in enumerate(raw_peers):
        where = f"{source}: peers[{n}]"
        if not isinstance(item, dict):
            raise NodeConfigError(f"{where} must be a table with id, client, raft")
        unknown = set(item) - {"id", "client", "raft"}
        if unknown:
            raise NodeConfigError(f"{where}: unknown key(s) {sorted(unknown)}")
        peer = NodeAddress(_int(item, "id", where), _address(item, "client", where), _address(item, "raft", where))
        if peer.id in seen:
            raise NodeConfigError(f"{where}: duplicate peer id {peer.id}")
        seen.add(peer.id)
        peers.append(peer)
    return client, raft, peers


def parse_node_config(table: Mapping[str, Any], source: str = "node.toml") -> NodeConfig:
    node_id = _int(table, "node_id", source)
    data_dir = table.get("data_dir")
    if not isinstance(data_dir, str) or not data_dir:
        raise NodeConfigError(f"{source}: data_dir must be a non-empty string")
    client, raft, peers = parse_cluster_section(table, source)
    for peer in peers:
        if peer.id == node_id and (peer.client != client or peer.raft != raft):
            raise NodeConfigError(f"{source}: peers entry for this node ({node_id}) disagrees with "
                                  "client_listen/raft_listen")
    extra = {k: v for k, v in table.items() if k not in CLUSTER_KEYS | {"node_id", "data_dir"}}
    return NodeConfig(node_id, Path(data_dir), client, raft, peers, extra)


def load_node_config(path: Path) -> NodeConfig:
    try:
        with open(path, "rb") as handle:
            table = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise NodeConfigError(f"cannot read {path}: {error}") from error
    return parse_node_config(table, str(path))


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | Path):
        text = str(value).replace("\\", "\\\\").replace('"', '\\"')
        return f'"{text}"'
    raise TypeError(f"cannot write {value!r} to TOML")


def dump_node_config(config: NodeConfig) -> str:
    """node.toml text that load_node_config reads back to an equal NodeConfig."""
    lines = [f"node_id = {config.node_id}", f"data_dir = {_toml_value(config.data_dir)}",
             f"client_listen = {_toml_value(config.client_listen)}",
             f"raft_listen = {_toml_value(config.raft_listen)}"]
    lines += [f"{key} = {_toml_value(value)}" for key, value in config.extra.items()]
    for peer in config.peers:
        lines += ["", "[[peers]]", f"id = {peer.id}", f"client = {_toml_value(peer.client)}",
                  f"raft = {_toml_value(peer.raft)}"]
    return "\n".join(lines) + "\n"
