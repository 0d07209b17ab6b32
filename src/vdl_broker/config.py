"""A node's configuration: one TOML file (`--config`) overridden by command-line flags.

Every node is a Raft cluster member; a node with no cluster section is a cluster of one.

    node_id = 1
    data_dir = "/var/lib/vdl/node1"
    listen = "127.0.0.1:9092"          # Kafka clients (`client_listen` is accepted too)
    retention_ms = 604800000           # any other NodeConfig field, by its name
    # The cluster section (optional): this node's Raft address and every member.
    raft_listen = "127.0.0.1:19092"    # all Raft groups between two nodes share one connection
    rack = "eu-west-1a"                # optional: this node's rack (Kafka's broker.rack)
    [[peers]]                          # every node of the cluster, this one included or not
    id = 2
    client = "127.0.0.1:9093"
    raft = "127.0.0.1:19093"
    rack = "eu-west-1b"                # optional: each node registers its own rack when it starts

TOML keys are the dataclass field names (a `-` in a key reads as `_`); a flag given on the
command line wins over the file. Every error is a ConfigError whose message names the setting.
"""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from vdl_broker.cluster.stream_configs import CONFIG_KEYS, KAFKA_COMPRESSION_TYPES
from vdl_broker.listeners import (
    AUTHORIZERS,
    PLAINTEXT,
    SASL_MECHANISMS,
    SSL_CLIENT_AUTH,
    BootstrapUser,
    Listener,
    parse_bootstrap_users,
    parse_choice,
    parse_listeners,
    parse_mechanisms,
    parse_string_list,
    security_problem,
)
from vdl_wire.address import AddressError
from vdl_wire.address import split_host_port as split_listen_address
from vdl_wire.software import VersionAction

MIB = 1024 * 1024
DEFAULT_PORT = 9092


class ConfigError(ValueError):
    """A bad configuration value; the message names the setting."""


def split_host_port(value: str, setting: str) -> tuple[str, int]:
    """("host", port) of a "HOST:PORT" setting to listen on (an empty host: every interface)."""
    try:
        return split_listen_address(value, setting, listening=True)
    except AddressError as error:
        raise ConfigError(str(error)) from None


@dataclass(frozen=True)
class NodeAddress:
    """One cluster member as every node knows it."""

    id: int
    client: str  # host:port for Kafka clients (the first listener's)
    raft: str  # host:port for Raft traffic
    listeners: tuple[str, ...] = ()  # PROTOCOL://host:port, when the node has several
    rack: str | None = None  # Kafka's broker.rack: consumers with a matching client.rack read here

    @property
    def raft_address(self) -> tuple[str, int]:
        return split_host_port(self.raft, "raft")


@dataclass
class NodeConfig:
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
    # Kafka's broker compression.type: the default of streams' compression.type (producer: each
    # batch stored as produced; a codec: the leader recompresses to it).
    compression_type: str = "producer"
    # Each stream's producer state is snapshotted at every segment roll and after this many bytes
    # of batches since the last snapshot: what a restart after a crash replays (log/config.py).
    producer_state_snapshot_bytes: int = 64 * MIB
    fsync: bool = True
    group_min_session_timeout_ms: int = 1_000
    group_max_session_timeout_ms: int = 1_800_000
    # Kafka's group.initial.rebalance.delay.ms: a new group waits this long for more members, so
    # consumers started together form one generation (see vdl_broker/groups/coordinator.py).
    group_initial_rebalance_delay_ms: int = 3_000
    # Kafka's group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms: the
    # KIP-848 groups' session and heartbeat interval (the coordinator's, not the client's).
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    # Kafka's offsets.retention.minutes: committed offsets of a group without members are
    # deleted this long after its last commit (or after it became empty, whichever is later).
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_ms: int = 600_000
    # Kafka's transactional.id.expiration.ms: a transactional id without a transaction (Empty,
    # CompleteCommit, CompleteAbort) and unchanged this long is forgotten; the metadata leader looks
    # every transaction.remove.expired.transaction.cleanup.interval.ms (transactions/coordinator.py).
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    # Kafka's producer.id.expiration.ms and producer.id.expiration.check.interval.ms (KIP-854): a
    # stream's replica forgets an idempotent producer without a batch this long (server/producer_state.py).
    producer_id_expiration_ms: int = 24 * 3600 * 1000
    producer_id_expiration_check_interval_ms: int = 600_000
    # Kafka's offset.metadata.max.bytes: longer commit metadata gets OFFSET_METADATA_TOO_LARGE.
    offset_metadata_max_bytes: int = 4096
    # The metadata state is snapshotted after this many metadata entries, or this many bytes of
    # them, since the last snapshot; its log is truncated behind (raft/snapshotting.py).
    metadata_snapshot_entries: int = 20_000
    metadata_snapshot_bytes: int = 16 * MIB
    # How long a starting node waits for the cluster metadata (a metadata leader, its own
    # registration) and then for its one-replica streams to lead, before it serves clients anyway
    # (answering LEADER_NOT_AVAILABLE for what it does not know yet): each wait at most this long.
    metadata_wait_ms: int = 10_000
    # Stream replicas a node may hold: CreateTopics that would place one more on a node at the
    # limit is refused (POLICY_VIOLATION) instead of overloading it. Checked by the metadata leader.
    max_streams_per_node: int = 10_000
    # The tail caches of all the logs of this node together (recent entries kept in memory for
    # tailing readers and followers): each log holds up to 64 MiB of it, and when they are over
    # it, those holding more than an equal share give back, the least recently appended first.
    # Counted in memory, not payload: each entry's payload and its objects' ENTRY_OVERHEAD.
    tail_cache_bytes: int = 256 * MIB
    log_level: str = "INFO"
    # Kafka's broker.rack: Metadata reports it, and a consumer whose Fetch names the same rack
    # (client.rack) is sent to a replica here (KIP-392).
    rack: str | None = None
    # The cluster section: this node's Raft address and every member. Without it the node is
    # a cluster of one (its Raft groups have one voter and no Raft port is opened).
    raft_listen: str | None = None
    peers: list[NodeAddress] = field(default_factory=list)
    # Prometheus text at http://HOST:PORT/metrics (vdl_broker/metrics); None: no endpoint.
    metrics_listen: str | None = None
    # A new node joining a running cluster: `peers` names at least one member; the node asks
    # it to be added (learner of the metadata group, then voter: vdl_broker/cluster/membership.py).
    join: bool = False
    # Bytes per second this node sends to replicas catching up (learners of a reassignment, a
    # follower far behind), so a reassignment does not starve producers (raft/throttle.py).
    recovery_rate_bytes: int = 100 * MIB
    # How often a node leading more than its share of streams hands some to their preferred
    # leaders (server/leader_balancer.py); 0: never by itself (`vdl streams elect-preferred`).
    leader_balance_interval_ms: int = 300_000
    # Security (vdl_broker/listeners.py). No `listeners`: one PLAINTEXT listener on host:port
    # (`listen`); with them, host:port is the first one's.
    listeners: list[Listener] = field(default_factory=list)
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_cafile: str | None = None
    ssl_client_auth: str = "none"
    sasl_mechanisms: list[str] = field(default_factory=lambda: list(SASL_MECHANISMS))
    authorizer: str = "none"
    super_users: list[str] = field(default_factory=list)
    bootstrap_users: list[BootstrapUser] = field(default_factory=list)

    @property
    def listen(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def client_host(self) -> str:
        if self.advertised_host:
            return self.advertised_host
        return "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host

    @property
    def client_address(self) -> str:
        """Where clients reach this node ("host:port"), as Metadata advertises it."""
        return f"{self.client_host}:{self.port}"

    @property
    def client_listeners(self) -> list[Listener]:
        return list(self.listeners) or [Listener(PLAINTEXT, self.host, self.port)]

    def advertised_address(self, listener: Listener, port: int | None = None) -> str:
        """Where clients reach `listener` ("host:port"), as Metadata advertises it."""
        host = self.advertised_host or ("127.0.0.1" if listener.host in ("", "0.0.0.0", "::") else listener.host)
        host = f"[{host}]" if ":" in host else host
        return f"{host}:{listener.port if port is None else port}"

    @property
    def advertised_listeners(self) -> tuple[str, ...]:
        """PROTOCOL://host:port of every listener, when `listeners` is set (else ())."""
        return tuple(f"{lst.protocol}://{self.advertised_address(lst)}" for lst in self.listeners)

    @property
    def raft_tls(self) -> bool:
        """Raft traffic is mutual TLS when the node has a certificate, its key and a CA."""
        return bool(self.ssl_certfile and self.ssl_keyfile and self.ssl_cafile)

    @property
    def members(self) -> list[NodeAddress]:
        """Every node of the cluster, this one included (from its own addresses if `peers`
        does not name it)."""
        nodes = {peer.id: peer for peer in self.peers}
        own = nodes.get(self.node_id)
        if own is None:
            nodes[self.node_id] = NodeAddress(self.node_id, self.client_address, self.raft_listen or "",
                                              self.advertised_listeners, self.rack)
        elif own.rack is None and self.rack is not None:
            nodes[self.node_id] = replace(own, rack=self.rack)
        return [nodes[node_id] for node_id in sorted(nodes)]

    @property
    def own_address(self) -> NodeAddress:
        """This node as it registers itself in the cluster metadata at every start (Kafka's
        broker registration): from its own settings, whatever other nodes' `peers` say of it."""
        return NodeAddress(self.node_id, self.client_address, self.raft_listen or "", self.advertised_listeners,
                           self.rack)

    @property
    def voter_ids(self) -> list[int]:
        """The metadata group's voters when this node creates it; none for a joining node (it
        learns them from the members it joins)."""
        return [] if self.join else [member.id for member in self.members]

    def raft_peers(self) -> dict[int, tuple[str, int]]:
        """Raft addresses of the other nodes."""
        return {member.id: member.raft_address for member in self.members if member.id != self.node_id}


_SETTINGS = {f.name: f for f in fields(NodeConfig)}
_INT_KEYS = {name for name, f in _SETTINGS.items() if f.type in ("int", int)}
_BOOL_KEYS = {name for name, f in _SETTINGS.items() if f.type in ("bool", bool)}
_STRING_KEYS = {"log_level", "advertised_host", "ssl_certfile", "ssl_keyfile", "ssl_cafile", "rack"}
# Settings whose values are lists (TOML arrays, or comma-separated flag values).
_LIST_PARSERS = {
    "listeners": parse_listeners,
    "sasl_mechanisms": parse_mechanisms,
    "super_users": parse_string_list,
    "bootstrap_users": parse_bootstrap_users,
}
_CHOICES = {"ssl_client_auth": SSL_CLIENT_AUTH, "authorizer": AUTHORIZERS, "compression_type": KAFKA_COMPRESSION_TYPES}
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL", "FATAL")


def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vdl-broker", description="VDL broker (Kafka protocol)")
    parser.add_argument("--version", action=VersionAction)
    parser.add_argument("--config", type=Path, help="TOML configuration file")
    parser.add_argument("--data-dir", type=Path, help="directory holding one subdirectory per stream")
    parser.add_argument("--listen", help="HOST:PORT for Kafka clients (default 127.0.0.1:9092)")
    parser.add_argument("--advertised-host", help="host name given to clients in Metadata")
    parser.add_argument("--node-id", type=int)
    parser.add_argument("--raft-listen", help="HOST:PORT for the other nodes (with [[peers]] in --config)")
    parser.add_argument("--metrics-listen", help="HOST:PORT serving Prometheus metrics at /metrics (default: off)")
    parser.add_argument("--listeners", help="PROTOCOL://HOST:PORT[,...], PROTOCOL one of PLAINTEXT, SSL, "
                                            "SASL_PLAINTEXT, SASL_SSL (instead of --listen)")
    parser.add_argument("--ssl-certfile", help="this node's certificate (PEM)")
    parser.add_argument("--ssl-keyfile", help="its private key (PEM)")
    parser.add_argument("--ssl-cafile", help="the CA certificate (PEM): client certificates and Raft mutual TLS")
    parser.add_argument("--ssl-client-auth", help="none | requested | required")
    parser.add_argument("--sasl-mechanisms", help="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512 (a comma list)")
    parser.add_argument("--authorizer", help="none | acl")
    parser.add_argument("--super-users", help="user names allowed everything (a comma list)")
    parser.add_argument("--segment-bytes", type=int)
    parser.add_argument("--segment-ms", type=int)
    parser.add_argument("--retention-ms", type=int)
    parser.add_argument("--retention-bytes", type=int)
    parser.add_argument("--retention-check-ms", type=int)
    parser.add_argument("--compression-type", help=f"default compression.type of streams: {' | '.join(KAFKA_COMPRESSION_TYPES)}")
    parser.add_argument("--auto-create-streams", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--max-request-bytes", type=int)
    parser.add_argument("--max-streams-per-node", type=int)
    parser.add_argument("--offsets-retention-minutes", type=int)
    parser.add_argument("--offsets-retention-check-ms", type=int)
    parser.add_argument("--transactional-id-expiration-ms", type=int)
    parser.add_argument("--transaction-remove-expired-transaction-cleanup-interval-ms", type=int)
    parser.add_argument("--producer-id-expiration-ms", type=int)
    parser.add_argument("--producer-id-expiration-check-interval-ms", type=int)
    parser.add_argument("--join", action=argparse.BooleanOptionalAction, default=None,
                        help="join the running cluster named by [[peers]] (a new node)")
    parser.add_argument("--recovery-rate-bytes", type=int)
    parser.add_argument("--leader-balance-interval-ms", type=int)
    parser.add_argument("--no-fsync", dest="fsync", action="store_false", default=None,
                        help="skip fsync (tests only: acknowledged data may be lost on power failure)")
    parser.add_argument("--log-level")
    parser.add_argument("--rack", help="this node's rack (Kafka's broker.rack), for consumers' client.rack")
    return parser


def _positive_int(table: Mapping[str, Any], key: str, source: str) -> int:
    value = table.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{source}: {key} must be a positive integer, got {value!r}")
    return value


def _address(table: Mapping[str, Any], key: str, source: str) -> str:
    value = table.get(key)
    if not isinstance(value, str):
        raise ConfigError(f"{source}: {key} must be a \"HOST:PORT\" string, got {value!r}")
    split_host_port(value, f"{source}: {key}")
    return value


def _rack(value: Any, source: str) -> str | None:
    """A rack name: a non-empty string (Kafka compares client.rack with it as is)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        raise ConfigError(f"{source} must be a non-empty string without surrounding spaces, got {value!r}")
    return value


def _peer_listeners(item: Mapping[str, Any], where: str) -> tuple[str, ...]:
    if "listeners" not in item:
        return ()
    try:
        listeners = parse_listeners(item["listeners"], f"{where}: listeners")
    except ValueError as error:
        raise ConfigError(str(error)) from None
    for listener in listeners:
        if listener.port == 0 or listener.host in ("", "0.0.0.0", "::"):
            raise ConfigError(f"{where}: listeners must be addresses clients connect to, got {listener}")
    return tuple(str(listener) for listener in listeners)


def _parse_peers(raw_peers: Any, source: str) -> list[NodeAddress]:
    if not isinstance(raw_peers, list):
        raise ConfigError(f"{source}: peers must be an array of tables ([[peers]])")
    peers: list[NodeAddress] = []
    seen: set[int] = set()
    for number, item in enumerate(raw_peers):
        where = f"{source}: peers[{number}]"
        if not isinstance(item, dict):
            raise ConfigError(f"{where} must be a table with id, client (or listeners), raft (and optionally rack)")
        unknown = set(item) - {"id", "client", "raft", "listeners", "rack"}
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; accepted: id, client, raft, listeners, rack")
        listeners = _peer_listeners(item, where)
        client = (_address(item, "client", where) if "client" in item or not listeners
                  else listeners[0].partition("://")[2])
        peer = NodeAddress(_positive_int(item, "id", where), client, _address(item, "raft", where), listeners,
                           _rack(item.get("rack"), f"{where}: rack"))
        if peer.id in seen:
            raise ConfigError(f"{where}: duplicate peer id {peer.id}")
        seen.add(peer.id)
        peers.append(peer)
    return peers


def _apply(values: dict[str, Any], key: str, value: Any, source: str) -> None:
    if key in ("listen", "client_listen"):
        values["host"], values["port"] = split_host_port(str(value), f"{source}: {key}")
        return
    if key == "data_dir":
        if not isinstance(value, str | Path) or not str(value):
            raise ConfigError(f"{source}: data_dir must be a non-empty path string")
        values[key] = Path(value)
        return
    if key == "peers":
        values[key] = _parse_peers(value, source)
        return
    if key in ("raft_listen", "metrics_listen"):
        values[key] = _address({key: value}, key, source)
        return
    if key == "rack":
        values[key] = _rack(value, f"{source}: rack" if not source.startswith("--") else source)
        return
    if key in _LIST_PARSERS or key in _CHOICES:
        where = source if source.startswith("--") else f"{source}: {key}"  # a flag names itself
        try:
            values[key] = (_LIST_PARSERS[key](value, where) if key in _LIST_PARSERS
                           else parse_choice(value, where, _CHOICES[key]))
        except ValueError as error:
            raise ConfigError(str(error)) from None
        return
    if key not in _SETTINGS or key in ("host", "port"):
        raise ConfigError(f"{source}: unknown setting {key!r}")
    if key in _BOOL_KEYS and not isinstance(value, bool):
        raise ConfigError(f"{source}: {key} must be true or false")
    if key in _INT_KEYS and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{source}: {key} must be an integer")
    if key in _STRING_KEYS and not isinstance(value, str):
        raise ConfigError(f"{source}: {key} must be a string")
    if key == "log_level" and value.upper() not in LOG_LEVELS:
        # Python's level names, in any case: logging.basicConfig would stop the start with a traceback
        raise ConfigError(f"{source}: log_level accepts {' | '.join(LOG_LEVELS)}, got {value!r}")
    values[key] = value


def config_from_table(table: Mapping[str, Any], source: str = "node.toml") -> NodeConfig:
    """A NodeConfig from a parsed TOML table (no flags)."""
    values: dict[str, Any] = {}
    _apply_table(values, table, source)
    return _finish(values)


def _apply_table(values: dict[str, Any], table: Mapping[str, Any], source: str) -> None:
    normalized = {key.replace("-", "_"): value for key, value in table.items()}
    if "listen" in normalized and "client_listen" in normalized:
        raise ConfigError(f"{source}: give listen or client_listen, not both (they are one setting)")
    if "listeners" in normalized and ("listen" in normalized or "client_listen" in normalized):
        raise ConfigError(f"{source}: give listeners or listen, not both (listen is one PLAINTEXT listener)")
    for key, value in normalized.items():
        _apply(values, key, value, source)


def _finish(values: dict[str, Any]) -> NodeConfig:
    if "data_dir" not in values:
        raise ConfigError("data_dir is required (--data-dir DIR or data_dir in the config file)")
    if values.get("listeners"):
        # A --listeners flag replaces a listen of the file (and the other way round): the one
        # given last wins, as for any other setting.
        first = values["listeners"][0]
        values["host"], values["port"] = first.host, first.port
    config = NodeConfig(**values)
    validate(config)
    return config


def load_config(argv: list[str] | None = None) -> NodeConfig:
    """Parse flags (and the TOML file they name); raises ConfigError with a one-line reason."""
    args = build_arg_parser().parse_args(argv)
    values: dict[str, Any] = {}
    if args.config is not None:
        _apply_table(values, read_toml(args.config), str(args.config))
    for key, value in vars(args).items():
        if key != "config" and value is not None:
            if key == "listen":
                values.pop("listeners", None)
            _apply(values, key, value, "--" + key.replace("_", "-"))
    return _finish(values)


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"cannot read config file {path}: {error}") from error


def load_node_config(path: Path) -> NodeConfig:
    """The node.toml at `path` alone (no flags)."""
    return config_from_table(read_toml(path), str(path))


def validate(config: NodeConfig) -> None:
    if config.max_request_bytes < 1024:
        raise ConfigError("max_request_bytes must be at least 1024")
    for key in CONFIG_KEYS.values():
        # A node setting that is the default of a stream config takes that config's range: a value
        # the stream config refuses would fail every replica opened with it, after the start.
        if key.node_setting is None:
            continue
        value = getattr(config, key.node_setting)
        if (key.minimum is not None and value < key.minimum) or (key.maximum is not None and value > key.maximum):
            raise ConfigError(f"{key.node_setting} must be {key.accepted()} (the default of streams' {key.name}), "
                              f"got {value}")
    if config.retention_check_ms < 1:
        raise ConfigError(f"retention_check_ms must be >= 1, got {config.retention_check_ms}")
    if config.producer_state_snapshot_bytes < 1:
        raise ConfigError(f"producer_state_snapshot_bytes must be positive, got {config.producer_state_snapshot_bytes}")
    if config.metadata_wait_ms < 0:
        raise ConfigError(f"metadata_wait_ms must be >= 0, got {config.metadata_wait_ms}")
    if config.metadata_snapshot_entries < 1 or config.metadata_snapshot_bytes < 1:
        raise ConfigError(f"metadata_snapshot_entries and metadata_snapshot_bytes must be positive, got "
                          f"{config.metadata_snapshot_entries} and {config.metadata_snapshot_bytes}")
    if config.offsets_retention_minutes < 0 or config.offsets_retention_check_ms < 1:
        raise ConfigError("offsets_retention_minutes must be >= 0 and offsets_retention_check_ms >= 1")
    for name in ("transactional_id_expiration_ms", "transaction_remove_expired_transaction_cleanup_interval_ms",
                 "producer_id_expiration_ms", "producer_id_expiration_check_interval_ms"):
        if getattr(config, name) < 1:
            raise ConfigError(f"{name} must be >= 1, got {getattr(config, name)}")
    if config.node_id < 1:
        raise ConfigError(f"node_id must be a positive integer, got {config.node_id}")
    if config.tail_cache_bytes < 0:
        raise ConfigError(f"tail_cache_bytes must be >= 0 (0: no tail cache), got {config.tail_cache_bytes}")
    if config.max_streams_per_node < 1:
        raise ConfigError(f"max_streams_per_node must be a positive integer, got {config.max_streams_per_node}")
    if config.peers and config.raft_listen is None:
        raise ConfigError("raft_listen is required when peers are given (the address other nodes reach this one at)")
    if config.join and not any(peer.id != config.node_id for peer in config.peers):
        raise ConfigError("join = true needs peers naming at least one member of the cluster to join")
    if config.recovery_rate_bytes < 1024:
        raise ConfigError(f"recovery_rate_bytes must be at least 1024 (bytes per second), "
                          f"got {config.recovery_rate_bytes}")
    if config.leader_balance_interval_ms < 0:
        raise ConfigError(f"leader_balance_interval_ms must be >= 0 (0: off), got {config.leader_balance_interval_ms}")
    for peer in config.peers:
        if peer.id == config.node_id and (peer.client not in (config.listen, config.client_address)
                                          or peer.raft != config.raft_listen):
            raise ConfigError(f"peers entry for this node ({config.node_id}) disagrees with listen/raft_listen "
                              f"({peer.client}, {peer.raft} vs {config.client_address}, {config.raft_listen})")
        if peer.id == config.node_id and peer.rack is not None and peer.rack != config.rack:
            raise ConfigError(f"peers entry for this node ({config.node_id}) names rack {peer.rack!r}, "
                              f"but its rack setting is {config.rack!r}")
    problem = security_problem(config)
    if problem is not None:
        raise ConfigError(problem)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(str(v) if isinstance(v, Listener) else v) for v in value) + "]"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | Path):
        text = str(value).replace("\\", "\\\\").replace('"', '\\"')
        return f'"{text}"'
    raise TypeError(f"cannot write {value!r} to TOML")


def dump_node_config(config: NodeConfig) -> str:
    """node.toml text that load_node_config reads back to an equal NodeConfig."""
    defaults = NodeConfig(config.data_dir)
    lines = [f"node_id = {config.node_id}", f"data_dir = {_toml_value(config.data_dir)}"]
    if not config.listeners:
        lines.append(f"listen = {_toml_value(config.listen)}")
    if config.raft_listen is not None:
        lines.append(f"raft_listen = {_toml_value(config.raft_listen)}")
    for name in _SETTINGS:
        if name in ("data_dir", "host", "port", "node_id", "raft_listen", "peers", "bootstrap_users"):
            continue
        value = getattr(config, name)
        if value != getattr(defaults, name):
            lines.append(f"{name} = {_toml_value(value)}")
    for peer in config.peers:
        lines += ["", "[[peers]]", f"id = {peer.id}", f"client = {_toml_value(peer.client)}",
                  f"raft = {_toml_value(peer.raft)}"]
        if peer.rack is not None:
            lines.append(f"rack = {_toml_value(peer.rack)}")
        if peer.listeners:
            lines.append(f"listeners = {_toml_value(peer.listeners)}")
    for user in config.bootstrap_users:
        lines += ["", "[[bootstrap_users]]", f"name = {_toml_value(user.name)}",
                  f"mechanism = {_toml_value(user.mechanism)}", f"password_env = {_toml_value(user.password_env)}"]
    return "\n".join(lines) + "\n"
