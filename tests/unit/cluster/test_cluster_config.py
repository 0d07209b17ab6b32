"""node.toml parsing and writing."""

from __future__ import annotations

from pathlib import Path

import pytest

from vdl_broker.cluster.config import (
    NodeAddress,
    NodeConfig,
    NodeConfigError,
    dump_node_config,
    load_node_config,
    parse_node_config,
)


def sample(tmp_path: Path) -> NodeConfig:
    peers = [NodeAddress(i, f"127.0.0.1:{9090 + i}", f"127.0.0.1:{19090 + i}") for i in (1, 2, 3)]
    return NodeConfig(2, tmp_path / "n2", "127.0.0.1:9092", "127.0.0.1:19092", peers, {"fsync": False})


def test_round_trip(tmp_path: Path) -> None:
    config = sample(tmp_path)
    path = tmp_path / "node.toml"
    path.write_text(dump_node_config(config))
    loaded = load_node_config(path)
    assert loaded == config
    assert loaded.voter_ids == [1, 2, 3]
    assert loaded.raft_peers() == {1: ("127.0.0.1", 19091), 3: ("127.0.0.1", 19093)}


def test_members_include_self_when_peers_omit_it(tmp_path: Path) -> None:
    table = {"node_id": 4, "data_dir": "d", "client_listen": "h:1", "raft_listen": "h:2",
             "peers": [{"id": 1, "client": "a:1", "raft": "a:2"}]}
    config = parse_node_config(table)
    assert [m.id for m in config.members] == [1, 4]


@pytest.mark.parametrize(("change", "message"), [
    ({"node_id": 0}, "node_id"),
    ({"node_id": True}, "node_id"),
    ({"data_dir": 3}, "data_dir"),
    ({"client_listen": "nohost"}, "client_listen"),
    ({"raft_listen": "h:99999"}, "raft_listen"),
    ({"peers": {"id": 1}}, "peers"),
    ({"peers": [{"id": 1, "client": "a:1"}]}, "raft"),
    ({"peers": [{"id": 1, "client": "a:1", "raft": "a:2", "x": 1}]}, "unknown"),
    ({"peers": [{"id": 1, "client": "a:1", "raft": "a:2"}] * 2}, "duplicate"),
    ({"peers": [{"id": 2, "client": "a:1", "raft": "a:2"}]}, "disagrees"),
])
def test_errors_name_the_key(change: dict, message: str) -> None:
    table = {"node_id": 2, "data_dir": "d", "client_listen": "h:1", "raft_listen": "h:2", **change}
    with pytest.raises(NodeConfigError, match=message):
        parse_node_config(table)


def test_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text("node_id = = 1")
    with pytest.raises(NodeConfigError, match="cannot read"):
        load_node_config(tmp_path / "bad.toml")
