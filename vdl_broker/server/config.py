"""Broker configuration: a TOML file (--config) overridden by command-line flags.

TOML keys are the dataclass field names (``data_dir = "/var/vdl"``, ``listen = "0.0.0.0:9092"``,
``auto_create_streams = true`` ...); a flag given on the command line wins over the file.
"""

from __future__ import annotations

import argparse
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from vdl_broker.cluster.config import CLUSTER_KEYS, NodeAddress, NodeConfigError, parse_cluster_section

MIB = 1024 * 1024
DEFAULT_PORT = 9092


@dataclass
class BrokerConfig:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    node_id: int = 1
    # The host clients are told to connect to (Metadata, FindCoordinator); defaults to `host`,
    # or 127.0.0.1 when listening on all interfaces.
    advertised_host: str | None = None
    auto_create_streams: bool = False
    # Kafka's socket.request.max.bytes default: checked from the length prefix, before the body.
    max_request_bytes: int = 100 * MIB
    # Kafka's message.max.bytes is ~1 MiB; librdkafka batches up to 1 MB, so allow headroom.
    max_batch_bytes: int = 16 * MIB
    # Per-connection bound on request bytes received but not yet answered (pipelining window).
    max_inflight_bytes: int = 64 * MIB
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = -1
    retention_bytes: int = -1
    retention_check_ms: int = 60_000
    fsync: bool = True
    group_min_session_timeout_ms: int = 1_000
    group_max_session_timeout_ms: int = 1_800_000
    # Kafka waits 3 s for more members on a new group; 0 keeps tests and the demo quick.
    group_initial_rebalance_delay_ms: int = 0
    log_level: str = "INFO"
    # Cluster mode (node.toml, issue 5): this node's Raft address and every member; None = one
    # node without Raft (the direct single-node path).
    raft_listen: str | None = None
    peers: list[NodeAddress] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def cluster_mode(self) -> bool:
        return self.raft_listen is not None

    @property
    def listen(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def client_host(self) -> str:
        if self.advertised_host:
            return self.advertised_host
        return "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host


class ConfigError(ValueError):
    """A bad configuration value; the message names the key."""


def parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"listen: expected HOST:PORT, got {value!r}")
    port_number = int(port)
    if not 0 <= port_number <= 65535:
        raise ConfigError(f"listen: port out of range in {value!r}")
    return host.strip("[]") or "0.0.0.0", port_number


def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vdl-broker", description="VDL broker (Kafka protocol)")
    parser.add_argument("--config", type=Path, help="TOML configuration file")
    parser.add_argument("--data-dir", type=Path, help="directory holding one subdirectory per stream")
    parser.add_argument("--listen", help="HOST:PORT to listen on (default 127.0.0.1:9092)")
    parser.add_argument("--advertised-host", help="host name given to clients in Metadata")
    parser.add_argument("--node-id", type=int)
    parser.add_argument("--segment-bytes", type=int)
    parser.add_argument("--segment-ms", type=int)
    parser.add_argument("--retention-ms", type=int)
    parser.add_argument("--retention-bytes", type=int)
    parser.add_argument("--auto-create-streams", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--max-request-bytes", type=int)
    parser.add_argument("--no-fsync", dest="fsync", action="store_false", default=None,
                        help="skip fsync (tests only: acknowledged data may be lost on power failure)")
    parser.add_argument("--log-level")
    return parser


_INT_KEYS = {f.name for f in fields(BrokerConfig) if f.type in ("int", int)}
_BOOL_KEYS = {f.name for f in fields(BrokerConfig) if f.type in ("bool", bool)}


def _apply(values: dict[str, Any], key: str, value: Any, source: str) -> None:
    if key == "listen":
        values["host"], values["port"] = parse_listen(str(value))
        return
    if key == "data_dir":
        if not isinstance(value, str | Path):
            raise ConfigError(f"{source}: data_dir must be a path string")
        values[key] = Path(value)
        return
    names = {f.name for f in fields(BrokerConfig)} - {"extra"}
    if key not in names:
        raise ConfigError(f"{source}: unknown setting {key!r}")
    if key in _BOOL_KEYS and not isinstance(value, bool):
        raise ConfigError(f"{source}: {key} must be true or false")
    if key in _INT_KEYS and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{source}: {key} must be an integer")
    values[key] = value


def _apply_cluster_keys(values: dict[str, Any], table: dict[str, Any], source: str) -> None:
    """node.toml's cluster keys (vdl_broker.cluster.config): client_listen becomes host/port;
    raft_listen or peers switch the broker to cluster mode."""
    if "raft_listen" not in table and "peers" not in table:
        if "client_listen" in table:
            _apply(values, "listen", table["client_listen"], source)
        return
    try:
        client, raft, peers = parse_cluster_section(table, source)
    except NodeConfigError as error:
        raise ConfigError(str(error)) from None
    values["host"], values["port"] = parse_listen(client)
    values["raft_listen"] = raft
    values["peers"] = peers


def load_config(argv: list[str] | None = None) -> BrokerConfig:
    """Parse flags (and the TOML file they name); raises ConfigError with a one-line reason."""
    args = build_arg_parser().parse_args(argv)
    values: dict[str, Any] = {}
    if args.config is not None:
        try:
            with open(args.config, "rb") as handle:
                table = tomllib.load(handle)
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise ConfigError(f"cannot read config file {args.config}: {error}") from error
        table = {key.replace("-", "_"): value for key, value in table.items()}
        _apply_cluster_keys(values, table, str(args.config))
        for key, value in table.items():
            if key not in CLUSTER_KEYS:
                _apply(values, key, value, str(args.config))
    for key, value in vars(args).items():
        if key != "config" and value is not None:
            _apply(values, key, value, "--" + key.replace("_", "-"))
    if "data_dir" not in values:
        raise ConfigError("data_dir is required (--data-dir DIR or data_dir in the config file)")
    config = BrokerConfig(**values)
    validate(config)
    return config


def validate(config: BrokerConfig) -> None:
    if config.max_request_bytes < 1024:
        raise ConfigError("max_request_bytes must be at least 1024")
    if config.segment_bytes < 1024:
        raise ConfigError("segment_bytes must be at least 1024")
    if config.node_id < 0:
        raise ConfigError("node_id must be >= 0")
