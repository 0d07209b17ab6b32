"""A node's configuration: TOML file plus flags, flags win; node.toml round trip; bad values
give one-line errors that name the setting."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vdl_broker.config import (
    ConfigError,
    NodeAddress,
    NodeConfig,
    config_from_table,
    dump_node_config,
    load_config,
    load_node_config,
)
from vdl_broker.server.stream_settings import log_config_for


def test_flags_only_make_a_cluster_of_one() -> None:
    config = load_config(["--data-dir", "/tmp/x", "--listen", "127.0.0.1:9999", "--auto-create-streams"])
    assert config.data_dir == Path("/tmp/x") and (config.host, config.port) == ("127.0.0.1", 9999)
    assert config.auto_create_streams is True and config.node_id == 1
    assert config.raft_listen is None and config.peers == []
    assert config.members == [NodeAddress(1, "127.0.0.1:9999", "")]
    assert config.raft_peers() == {}


def test_toml_then_flags(tmp_path: Path) -> None:
    path = tmp_path / "vdl.toml"
    path.write_text('data_dir = "/data"\nlisten = "0.0.0.0:9092"\nsegment_bytes = 4096\nmax_request_bytes = 2048\n')
    config = load_config(["--config", str(path), "--max-request-bytes", "4096"])
    assert config.data_dir == Path("/data") and config.host == "0.0.0.0" and config.client_host == "127.0.0.1"
    assert config.segment_bytes == 4096 and config.max_request_bytes == 4096


def sample(tmp_path: Path) -> NodeConfig:
    peers = [NodeAddress(i, f"127.0.0.1:{9090 + i}", f"127.0.0.1:{19090 + i}") for i in (1, 2, 3)]
    return NodeConfig(tmp_path / "n2", "127.0.0.1", 9092, 2, raft_listen="127.0.0.1:19092", peers=peers,
                      fsync=False, retention_ms=1000)


def test_node_toml_round_trip(tmp_path: Path) -> None:
    config = sample(tmp_path)
    path = tmp_path / "node.toml"
    path.write_text(dump_node_config(config))
    loaded = load_node_config(path)
    assert loaded == config
    assert loaded.voter_ids == [1, 2, 3]
    assert loaded.raft_peers() == {1: ("127.0.0.1", 19091), 3: ("127.0.0.1", 19093)}
    # The same file through the broker's command line, with a flag on top.
    assert load_config(["--config", str(path), "--retention-ms", "5"]).retention_ms == 5


def test_client_listen_is_the_listen_setting() -> None:
    config = config_from_table({"data_dir": "d", "client_listen": "h:1"})
    assert (config.host, config.port) == ("h", 1)
    with pytest.raises(ConfigError, match="listen or client_listen, not both"):
        config_from_table({"data_dir": "d", "client_listen": "h:1", "listen": "h:2"})


def test_members_include_self_when_peers_omit_it() -> None:
    table = {"node_id": 4, "data_dir": "d", "listen": "h:1", "raft_listen": "h:2",
             "peers": [{"id": 1, "client": "a:1", "raft": "a:2"}]}
    config = config_from_table(table)
    assert [m.id for m in config.members] == [1, 4]
    assert config.members[1] == NodeAddress(4, "h:1", "h:2")


def test_rack_from_toml_flag_and_peers(tmp_path: Path) -> None:
    table = {"node_id": 2, "data_dir": "d", "listen": "h:1", "raft_listen": "h:2", "rack": "r2",
             "peers": [{"id": 1, "client": "a:1", "raft": "a:2", "rack": "r1"}, {"id": 2, "client": "h:1", "raft": "h:2"},
                       {"id": 3, "client": "c:1", "raft": "c:2"}]}
    config = config_from_table(table)
    # Its own entry takes the rack setting; a peer without one has no known rack.
    assert [(m.id, m.rack) for m in config.members] == [(1, "r1"), (2, "r2"), (3, None)]
    path = tmp_path / "node.toml"
    path.write_text(dump_node_config(config))
    assert load_node_config(path) == config
    assert load_config(["--config", str(path), "--rack", "r9", "--data-dir", "d"]).rack == "r9"


@pytest.mark.parametrize(("change", "message"), [
    ({"rack": ""}, "rack must be a non-empty string"),
    ({"rack": " r1"}, "rack must be a non-empty string"),
    ({"rack": 7}, "rack must be a non-empty string"),
    ({"rack": "r1", "peers": [{"id": 2, "client": "h:1", "raft": "h:2", "rack": "r2"}]}, "names rack 'r2'"),
    ({"peers": [{"id": 1, "client": "a:1", "raft": "a:2", "rack": ""}]}, r"peers\[0\]: rack must be"),
    ({"node_id": 0}, "node_id must be a positive integer"),
    ({"node_id": True}, "node_id must be an integer"),
    ({"data_dir": 3}, "data_dir"),
    ({"listen": "nohost"}, "listen: expected HOST:PORT"),
    ({"raft_listen": "h:99999"}, "raft_listen"),
    ({"metrics_listen": "nohost"}, "metrics_listen: expected HOST:PORT"),
    ({"metrics_listen": 9100}, "metrics_listen must be a \"HOST:PORT\" string"),
    ({"peers": {"id": 1}}, "peers must be an array"),
    ({"peers": [{"id": 1, "client": "a:1"}]}, "raft"),
    ({"peers": [{"id": 1, "client": "a:1", "raft": "a:2", "x": 1}]}, "unknown key"),
    ({"peers": [{"id": 1, "client": "a:1", "raft": "a:2"}] * 2}, "duplicate peer id 1"),
    ({"peers": [{"id": 2, "client": "a:1", "raft": "a:2"}]}, "disagrees"),
    ({"raft_listen": None, "peers": [{"id": 1, "client": "a:1", "raft": "a:2"}]}, "raft_listen is required"),
    ({"segment_bytes": "big"}, "segment_bytes must be an integer"),
    ({"mystery": 1}, "unknown setting 'mystery'"),
    ({"log_level": 3}, "log_level must be a string"),
    ({"log_level": "loud"}, "log_level accepts DEBUG | INFO | WARNING | WARN | ERROR | CRITICAL | FATAL, got 'loud'"),
    ({"join": True}, "join = true needs peers naming at least one member"),
    ({"join": True, "peers": [{"id": 2, "client": "h:1", "raft": "h:2"}]}, "join = true needs peers"),
    ({"join": "yes"}, "join must be true or false"),
    ({"recovery_rate_bytes": 0}, "recovery_rate_bytes must be at least 1024"),
    ({"leader_balance_interval_ms": -1}, "leader_balance_interval_ms must be >= 0"),
    ({"tail_cache_bytes": -1}, r"tail_cache_bytes must be >= 0 \(0: no tail cache\), got -1"),
    ({"producer_state_snapshot_bytes": 0}, "producer_state_snapshot_bytes must be positive, got 0"),
    ({"metadata_wait_ms": -1}, r"^metadata_wait_ms must be >= 0, got -1$"),
    # The defaults of stream configs take the stream config's range: before, a node started with
    # them and then failed to open every replica (a stream created there hung its client).
    ({"segment_bytes": 3_000_000_000},
     r"^segment_bytes must be an integer in 1024..2147483647 \(the default of streams' segment.bytes\), "
     r"got 3000000000$"),
    ({"segment_bytes": 100}, r"^segment_bytes must be an integer in 1024..2147483647 .*got 100$"),
    ({"segment_ms": 0}, r"^segment_ms must be an integer >= 1 \(the default of streams' segment.ms\), got 0$"),
    ({"retention_ms": -5}, r"^retention_ms must be an integer >= -1 \(the default of streams' retention.ms\), got -5$"),
    # any long, as Kafka's (a negative one: no limit)
    ({"retention_bytes": 1 << 63}, r"^retention_bytes must be an integer .*retention.bytes\), got 9223372036854775808$"),
    ({"max_batch_bytes": -1}, r"^max_batch_bytes must be an integer in 0..2147483647 .*max.message.bytes\), got -1$"),
])
def test_errors_name_the_setting(change: dict, message: str) -> None:
    table = {"node_id": 2, "data_dir": "d", "listen": "h:1", "raft_listen": "h:2", **change}
    table = {key: value for key, value in table.items() if value is not None}
    with pytest.raises(ConfigError, match=message):
        config_from_table(table)


def test_membership_settings_default_and_round_trip(tmp_path: Path) -> None:
    defaults = config_from_table({"data_dir": "d"})
    assert (defaults.join, defaults.recovery_rate_bytes, defaults.leader_balance_interval_ms) == \
        (False, 100 * 1024 * 1024, 300_000)
    table = {"node_id": 4, "data_dir": str(tmp_path), "listen": "h:1", "raft_listen": "h:2", "join": True,
             "recovery_rate_bytes": 1 << 20, "leader_balance_interval_ms": 0,
             "peers": [{"id": 1, "client": "a:1", "raft": "a:2"}]}
    config = config_from_table(table)
    assert config.voter_ids == []  # a joining node creates no metadata group of its own
    (tmp_path / "node.toml").write_text(dump_node_config(config))
    assert load_node_config(tmp_path / "node.toml") == config
    flags = load_config(["--data-dir", str(tmp_path), "--recovery-rate-bytes", "4096",
                         "--leader-balance-interval-ms", "1000"])
    assert (flags.recovery_rate_bytes, flags.leader_balance_interval_ms) == (4096, 1000)


def test_metrics_listen_is_off_by_default_and_round_trips(tmp_path: Path) -> None:
    assert config_from_table({"data_dir": "d"}).metrics_listen is None
    config = load_config(["--data-dir", str(tmp_path), "--metrics-listen", "127.0.0.1:9100"])
    assert config.metrics_listen == "127.0.0.1:9100"
    (tmp_path / "node.toml").write_text(dump_node_config(config))
    assert load_node_config(tmp_path / "node.toml") == config


def test_data_dir_is_required(tmp_path: Path) -> None:
    path = tmp_path / "vdl.toml"
    path.write_text("listen = '127.0.0.1:1'\n")
    with pytest.raises(ConfigError, match="data_dir is required"):
        load_config(["--config", str(path)])


def test_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text("node_id = = 1")
    with pytest.raises(ConfigError, match="cannot read"):
        load_node_config(tmp_path / "bad.toml")


def test_listeners_and_security_settings(tmp_path: Path) -> None:
    pem = tmp_path / "node.pem"
    pem.write_text("x")
    table = {"data_dir": "d", "listeners": ["SASL_SSL://0.0.0.0:9093", "plaintext://127.0.0.1:9092"],
             "ssl_certfile": str(pem), "ssl_keyfile": str(pem), "ssl_cafile": str(pem), "ssl_client_auth": "required",
             "sasl_mechanisms": ["scram-sha-512"], "authorizer": "acl", "super_users": ["admin", "User:ops"],
             "bootstrap_users": [{"name": "admin", "mechanism": "SCRAM-SHA-512", "password_env": "VDL_ADMIN"}]}
    config = config_from_table(table)
    assert [str(listener) for listener in config.client_listeners] == ["SASL_SSL://0.0.0.0:9093",
                                                                      "PLAINTEXT://127.0.0.1:9092"]
    assert (config.host, config.port) == ("0.0.0.0", 9093) and config.raft_tls
    assert config.advertised_listeners == ("SASL_SSL://127.0.0.1:9093", "PLAINTEXT://127.0.0.1:9092")
    assert config.sasl_mechanisms == ["SCRAM-SHA-512"] and config.super_users == ["admin", "User:ops"]
    path = tmp_path / "node.toml"
    path.write_text(dump_node_config(config))
    assert load_node_config(path) == config
    # The old `listen` is one PLAINTEXT listener.
    plain = config_from_table({"data_dir": "d", "listen": "127.0.0.1:9092"})
    assert [str(listener) for listener in plain.client_listeners] == ["PLAINTEXT://127.0.0.1:9092"]
    flags = load_config(["--data-dir", "d", "--listeners", "SSL://127.0.0.1:1,PLAINTEXT://127.0.0.1:2",
                         "--ssl-certfile", str(pem), "--ssl-keyfile", str(pem), "--authorizer", "acl"])
    assert [lst.protocol for lst in flags.client_listeners] == ["SSL", "PLAINTEXT"] and flags.port == 1


@pytest.mark.parametrize(("table", "message"), [
    ({"listeners": ["HTTP://h:1"]}, "unknown protocol 'HTTP'.*PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ({"listeners": ["SSL://h:1"]}, "ssl_certfile and ssl_keyfile are required by the TLS listener"),
    ({"listeners": ["SASL_PLAINTEXT://h:1", "SASL_PLAINTEXT://h:2"]}, "one listener per protocol"),
    ({"listeners": ["PLAINTEXT://h:1"], "listen": "h:2"}, "listeners or listen, not both"),
    ({"ssl_client_auth": "maybe"}, "ssl_client_auth accepts none | requested | required"),
    ({"ssl_client_auth": "required"}, "ssl_client_auth = required needs ssl_cafile"),
    ({"authorizer": "opa"}, "authorizer accepts none | acl"),
    ({"sasl_mechanisms": ["GSSAPI"]}, "sasl_mechanisms accepts PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512"),
    ({"ssl_cafile": "/no/such/ca.pem"}, "ssl_cafile: no such file"),
    ({"bootstrap_users": [{"name": "a", "mechanism": "PLAIN", "password_env": "X"}]},
     r"bootstrap_users\[0\].mechanism accepts SCRAM-SHA-256 \| SCRAM-SHA-512"),
    ({"bootstrap_users": [{"name": "a", "mechanism": "SCRAM-SHA-256", "password": "oops"}]},
     "exactly name, mechanism, password_env"),
])
def test_bad_security_settings_name_the_setting(table: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_table({"data_dir": "d", **table})


def test_producer_state_snapshot_bytes_reaches_every_stream_log() -> None:
    assert config_from_table({"data_dir": "d"}).producer_state_snapshot_bytes == 64 << 20
    config = config_from_table({"data_dir": "d", "producer_state_snapshot_bytes": 1 << 20})
    assert log_config_for(config).state_snapshot_bytes == 1 << 20


def test_compression_type_is_a_node_setting_of_kafkas_codecs(tmp_path: Path) -> None:
    """Kafka's broker compression.type: the default of streams' compression.type."""
    assert load_config(["--data-dir", "/tmp/x"]).compression_type == "producer"
    assert load_config(["--data-dir", "/tmp/x", "--compression-type", "zstd"]).compression_type == "zstd"
    assert config_from_table({"data_dir": "/d", "compression_type": "gzip"}).compression_type == "gzip"
    with pytest.raises(ConfigError, match=re.escape("compression_type accepts uncompressed | zstd | lz4 | snappy | "
                                                    "gzip | producer, got 'brotli'")):
        config_from_table({"data_dir": "/d", "compression_type": "brotli"})
    path = tmp_path / "node.toml"
    path.write_text(dump_node_config(NodeConfig(data_dir=tmp_path, compression_type="lz4")))
    assert load_node_config(path).compression_type == "lz4"
