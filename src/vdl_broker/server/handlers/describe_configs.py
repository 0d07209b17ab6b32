"""DescribeConfigs (key 32): a stream's configs (TOPIC resources) and a node's settings (BROKER).

TOPIC: every stream config key (cluster/stream_configs.py) with its effective value, answered by
any node from its copy of the replicated metadata: the stream's own value (DYNAMIC_TOPIC_CONFIG),
else this node's setting (STATIC_BROKER_CONFIG when node.toml or a flag sets it) or the built-in
default (DEFAULT_CONFIG); and `min.insync.replicas`, the cluster's default as Kafka 4 describes
it (DYNAMIC_DEFAULT_BROKER_CONFIG, not read-only): a majority of the stream's replicas, the number Raft needs on disk before an acks=all write is acknowledged (Kafka's tools
read it: kafka-topics --describe --at-min-isr-partitions / --under-min-isr-partitions compare each
partition's in-sync replicas with it). A node holding a replica of a stream with a Delta table adds the table's
state as read-only entries (`vdl.table.status.*`, vdl_broker/tables).

BROKER: as Kafka, the resource name is this node's id (clients send it to that node) or "" for
the cluster-wide dynamic defaults (none here); another id is INVALID_REQUEST. Node settings come
from node.toml and flags, so they are all read-only, named as Kafka names them.

BROKER_LOGGER (KIP-412): the resource name is this node's id, as Kafka (empty, not a number or
another id is INVALID_REQUEST); the answer is the node's loggers and their levels
(server/loggers.py), settable by IncrementalAlterConfigs.

CLIENT_METRICS (KIP-714): a named subscription's configs are Kafka's defaults, as Kafka answers for
a name none was set under: VDL collects no client metrics, so none ever is (read-only here).

GROUP (Kafka 4's group configs, cluster/group_configs.py): the group's own value (GROUP_CONFIG),
else the node's setting, named as Kafka's broker config it defaults to; settable (DESCRIBE_CONFIGS
on the group, as Kafka asks). An empty group name is INVALID_REQUEST, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import IntEnum

from vdl_broker.cluster.group_configs import HEARTBEAT_INTERVAL, SESSION_TIMEOUT
from vdl_broker.cluster.stream_configs import CONFIG_KEYS, MIN_INSYNC_REPLICAS, UNSET, ConfigType, majority
from vdl_broker.config import NodeConfig
from vdl_broker.server import loggers
from vdl_broker.server.authorizer import Operation, authorized, authorized_cluster
from vdl_broker.server.authorizer import ResourceType as AclResource
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_broker.server.stream_settings import node_defaults
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
)
from vdl_wire.messages.list_config_resources import CLIENT_METRICS

API_KEY = DescribeConfigsRequest.DECL.api_key
NAME = "DescribeConfigs"

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym


class ResourceType(IntEnum):
    """# message defs: DescribeConfigsRequest.json (ResourceType); Kafka's ConfigResource.Type"""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    GROUP = 32  # KIP-848's group configs


class Source(IntEnum):
    """DescribeConfigs v1+ ConfigSource."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    GROUP_CONFIG = 8


@dataclass(frozen=True)
class Described:
    """One config as answered: name, value, source, type, doc, read-only, synonyms."""

    name: str
    value: str | None
    source: Source
    type: ConfigType
    doc: str | None
    read_only: bool = False
    synonyms: tuple[tuple[str, str | None, Source], ...] = ()


_BUILT_IN = {f.name: f.default for f in fields(NodeConfig)}


def _node_source(setting: str, value: object) -> Source:
    return Source.DEFAULT_CONFIG if _BUILT_IN.get(setting) == value else Source.STATIC_BROKER_CONFIG


def min_insync_replicas(replication_factor: int) -> Described:
    """Kafka's min.insync.replicas of a stream of `replication_factor` replicas: its Raft majority.
    Kafka 4 describes a topic's as the cluster's dynamic default (the controller sets one at
    bootstrap), settable: here too, as a create or an alter may name it (up to the majority,
    stored nothing: check_min_insync), though no setting changes what a commit needs."""
    value = str(majority(replication_factor))
    return Described(MIN_INSYNC_REPLICAS, value, Source.DYNAMIC_DEFAULT_BROKER_CONFIG, ConfigType.INT,
                     "replicas that hold a write before it is acknowledged: a majority of the stream's replicas "
                     "(Raft); a create or alter may ask for 1 up to it, more is refused",
                     synonyms=((MIN_INSYNC_REPLICAS, value, Source.DYNAMIC_DEFAULT_BROKER_CONFIG),))


def stream_configs(stream_config: Mapping[str, object], node: NodeConfig, replication_factor: int) -> list[Described]:
    """Every stream config key with its effective value and where it comes from, then the
    stream's min.insync.replicas."""
    defaults = node_defaults(node)
    described = []
    for key in CONFIG_KEYS.values():
        synonyms: list[tuple[str, str | None, Source]] = []
        own = stream_config.get(key.name)
        if own is not None:
            synonyms.append((key.name, str(own), Source.DYNAMIC_TOPIC_CONFIG))
        # The node-wide value is the Kafka broker config's (none for VDL's own keys, as Kafka lists
        # no synonym for a topic config without a broker one).
        if key.node_setting is not None and key.broker_name is not None:
            node_value = defaults[key.node_setting]
            node_source = _node_source(key.node_setting, node_value)
            if node_source is Source.STATIC_BROKER_CONFIG:
                synonyms.append((key.broker_name, str(node_value), node_source))
            if key.broker_default_listed:
                synonyms.append((key.broker_name, str(_BUILT_IN[key.node_setting]), Source.DEFAULT_CONFIG))
        elif key.default is not None and key.broker_name is not None:
            synonyms.append((key.broker_name, key.default, Source.DEFAULT_CONFIG))
        if synonyms:
            value, source = synonyms[0][1], synonyms[0][2]
        else:  # the built-in default, as a Kafka topic config without a synonym
            value = str(_BUILT_IN[key.node_setting]) if key.node_setting is not None else key.default
            source = Source.DEFAULT_CONFIG
        if value is None:  # a key without a default, unset
            value = UNSET
        described.append(Described(key.name, value, source, key.type, key.doc, synonyms=tuple(synonyms)))
    described.append(min_insync_replicas(replication_factor))
    return described


def broker_configs(node: NodeConfig, replication_factor: int) -> list[Described]:
    """This node's settings under Kafka's broker config names (read-only: node.toml and flags)."""
    listener = ",".join(str(lst) for lst in node.client_listeners)
    advertised = ",".join(f"{lst.protocol}://{node.advertised_address(lst)}" for lst in node.client_listeners)
    settings: list[tuple[str, str | None, ConfigType, str | None, str]] = [
        # (Kafka name, value, type, NodeConfig field or None, doc)
        ("broker.id", str(node.node_id), ConfigType.INT, "node_id", "this node's id"),
        ("node.id", str(node.node_id), ConfigType.INT, "node_id", "this node's id"),
        ("log.dirs", str(node.data_dir), ConfigType.STRING, None, "the data directory"),
        ("listeners", listener, ConfigType.STRING, None, "the client listeners"),
        ("advertised.listeners", advertised, ConfigType.STRING, None, "the address Metadata gives clients"),
        ("num.partitions", "1", ConfigType.INT, None, "a stream is a topic with exactly one partition"),
        ("default.replication.factor", str(replication_factor), ConfigType.INT, None,
         "replicas of a new stream: 3, or every node of a smaller cluster"),
    ]
    named: list[tuple[str, str, ConfigType, str]] = [
        ("log.retention.ms", "retention_ms", ConfigType.LONG, "default retention.ms of streams"),
        ("log.retention.bytes", "retention_bytes", ConfigType.LONG, "default retention.bytes of streams"),
        ("log.segment.bytes", "segment_bytes", ConfigType.INT, "default segment.bytes of streams"),
        ("log.roll.ms", "segment_ms", ConfigType.LONG, "default segment.ms of streams"),
        ("log.retention.check.interval.ms", "retention_check_ms", ConfigType.LONG, "how often retention runs"),
        ("compression.type", "compression_type", ConfigType.STRING, "default compression.type of streams"),
        ("message.max.bytes", "max_batch_bytes", ConfigType.INT, "default max.message.bytes of streams"),
        ("socket.request.max.bytes", "max_request_bytes", ConfigType.INT, "largest request accepted"),
        ("auto.create.topics.enable", "auto_create_streams", ConfigType.BOOLEAN, "create streams on first use"),
        ("group.min.session.timeout.ms", "group_min_session_timeout_ms", ConfigType.INT, "consumer groups"),
        ("group.max.session.timeout.ms", "group_max_session_timeout_ms", ConfigType.INT, "consumer groups"),
        ("group.initial.rebalance.delay.ms", "group_initial_rebalance_delay_ms", ConfigType.INT, "consumer groups"),
        ("offsets.retention.minutes", "offsets_retention_minutes", ConfigType.INT, "committed offsets"),
        ("offsets.retention.check.interval.ms", "offsets_retention_check_ms", ConfigType.LONG, "committed offsets"),
        ("offset.metadata.max.bytes", "offset_metadata_max_bytes", ConfigType.INT, "committed offsets"),
        ("transactional.id.expiration.ms", "transactional_id_expiration_ms", ConfigType.INT,
         "idle transactional ids are forgotten"),
        ("transaction.remove.expired.transaction.cleanup.interval.ms",
         "transaction_remove_expired_transaction_cleanup_interval_ms", ConfigType.INT,
         "how often expired transactional ids are looked for"),
        ("producer.id.expiration.ms", "producer_id_expiration_ms", ConfigType.INT,
         "idle idempotent producers are forgotten"),
        ("producer.id.expiration.check.interval.ms", "producer_id_expiration_check_interval_ms", ConfigType.INT,
         "how often idle producers are looked for"),
    ]
    for name, attribute, config_type, doc in named:
        current = getattr(node, attribute)
        settings.append((name, str(current).lower() if isinstance(current, bool) else str(current), config_type,
                         attribute, doc))
    described = []
    for name, value, config_type, setting, doc in settings:
        source = _node_source(setting, getattr(node, setting)) if setting is not None else Source.STATIC_BROKER_CONFIG
        described.append(Described(name, value, source, config_type, doc, read_only=True,
                                   synonyms=((name, value, source),)))
    return described


GROUP_NAME_EMPTY = "Group name must not be empty"  # Kafka's words (# Kafka: ConfigHelper.describeConfigs)


def group_configs(node: NodeConfig, stored: Mapping[str, str]) -> list[Described]:
    """A consumer group's configs (KIP-848): its own (`stored`), else the node's settings, each
    with the broker config it defaults to as a synonym (# Kafka: ConfigHelper.createGroupConfigEntry)."""
    described = []
    for name, setting, doc in (
            (SESSION_TIMEOUT, "group_consumer_session_timeout_ms",
             "a KIP-848 member without a heartbeat this long is removed"),
            (HEARTBEAT_INTERVAL, "group_consumer_heartbeat_interval_ms", "how often KIP-848 members heartbeat")):
        default = str(getattr(node, setting))
        synonyms: tuple[tuple[str, str, Source], ...] = ((f"group.{name}", default,
                                                         _node_source(setting, getattr(node, setting))),)
        if name in stored:
            synonyms = ((name, stored[name], Source.GROUP_CONFIG), *synonyms)
        value, source = synonyms[0][1], synonyms[0][2]
        described.append(Described(name, value, source, ConfigType.INT, doc, read_only=False, synonyms=synonyms))
    return described


def logger_configs() -> list[Described]:
    """The node's loggers and their levels, as Kafka describes a broker's: settable, no type,
    doc or synonyms (# Kafka: ConfigHelper.describeConfigs, BROKER_LOGGER)."""
    return [Described(name, level, Source.DYNAMIC_BROKER_LOGGER_CONFIG, ConfigType.UNKNOWN, None)
            for name, level in loggers.loggers().items()]


# Kafka's client-metrics configs and their defaults (# Kafka: ClientMetricsConfigs).
_CLIENT_METRICS = (("metrics", "", ConfigType.LIST, "Telemetry metric name prefix list"),
                   ("interval.ms", "300000", ConfigType.INT, "Metrics push interval in milliseconds"),
                   ("match", "", ConfigType.LIST, "Client match criteria"))


def client_metrics_configs() -> list[Described]:
    """A client-metrics subscription's configs: Kafka's defaults, what Kafka answers for a name
    none was set under (VDL sets none: read-only)."""
    return [Described(name, value, Source.DEFAULT_CONFIG, config_type, doc, read_only=True)
            for name, value, config_type, doc in _CLIENT_METRICS]


def _broker_id_problem(name: str, node_id: int) -> str | None:
    """Why a BROKER_LOGGER resource name is not this node's id, in Kafka's words (# Kafka:
    ConfigHelper.describeConfigs), or None."""
    if name == "":
        return "Broker id must not be empty"
    try:
        asked = int(name)
    except ValueError:
        return f"Broker id must be an integer, but it is: {name}"
    return None if asked == node_id else f"Unexpected broker id, expected {node_id} but received {name}"


def _entry(described: Described, synonyms: bool,
           documentation: bool) -> DescribeConfigsResponse.DescribeConfigsResourceResult:
    return Entry(name=described.name, value=described.value, read_only=described.read_only,
                 is_default=described.source is Source.DEFAULT_CONFIG, config_source=int(described.source),
                 is_sensitive=False, config_type=int(described.type),
                 documentation=described.doc if documentation else None,
                 synonyms=[Synonym(name=n, value=v, source=int(s)) for n, v, s in described.synonyms]
                 if synonyms else [])


def _result(resource: DescribeConfigsRequest.DescribeConfigsResource, code: ErrorCode = ErrorCode.NONE,
            message: str | None = None,
            configs: list[DescribeConfigsResponse.DescribeConfigsResourceResult] | None = None
            ) -> DescribeConfigsResponse.DescribeConfigsResult:
    return Result(error_code=int(code), error_message=message, resource_type=resource.resource_type,
                  resource_name=resource.resource_name, configs=configs or [])


def _describe(node: NodeView,
              resource: DescribeConfigsRequest.DescribeConfigsResource) -> tuple[ErrorCode, str | None, list[Described]]:
    if resource.resource_type == ResourceType.TOPIC:
        info = node.metadata.state.streams.get(resource.resource_name)
        if info is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown stream {resource.resource_name!r}", []
        described = stream_configs(info.config, node.config, len(info.replicas))
        for name, value, doc in node.tables.status(info.name):
            described.append(Described(name, value, Source.DEFAULT_CONFIG, ConfigType.STRING, doc, read_only=True))
        return ErrorCode.NONE, None, described
    if resource.resource_type == ResourceType.BROKER:
        name = resource.resource_name
        if name == "":
            return ErrorCode.NONE, None, []  # no cluster-wide dynamic broker defaults
        try:
            asked = int(name)
        except ValueError:
            return ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}", []
        if asked != node.node_id:  # in Kafka's words (# Kafka: ConfigHelper.describeConfigs)
            return ErrorCode.INVALID_REQUEST, (f"Unexpected broker id, expected {node.node_id} or empty string, "
                                               f"but received {name}"), []
        return ErrorCode.NONE, None, broker_configs(node.config, node.metadata.state.default_replication_factor())
    if resource.resource_type == ResourceType.BROKER_LOGGER:
        problem = _broker_id_problem(resource.resource_name, node.node_id)
        if problem is not None:
            return ErrorCode.INVALID_REQUEST, problem, []
        return ErrorCode.NONE, None, logger_configs()
    if resource.resource_type == CLIENT_METRICS:
        if not resource.resource_name:
            return ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty", []
        return ErrorCode.NONE, None, client_metrics_configs()
    if resource.resource_type == ResourceType.GROUP:
        if not resource.resource_name:
            return ErrorCode.INVALID_REQUEST, GROUP_NAME_EMPTY, []
        return ErrorCode.NONE, None, group_configs(node.config,
                                                   node.metadata.state.groups.configs.get(resource.resource_name, {}))
    return ErrorCode.INVALID_REQUEST, (f"resource type {resource.resource_type} is not supported "
                                       f"(2 = TOPIC, 4 = BROKER, 8 = BROKER_LOGGER, 16 = CLIENT_METRICS, "
                                       f"32 = GROUP)"), []


def refusal(node: NodeView, context: RequestContext,
            resource: DescribeConfigsRequest.DescribeConfigsResource
            | IncrementalAlterConfigsRequest.AlterConfigsResource | AlterConfigsRequest.AlterConfigsResource,
            operation: Operation) -> ErrorCode | None:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on the stream (TOPIC), on the group (GROUP) or on the
    cluster (BROKER, BROKER_LOGGER, CLIENT_METRICS), as Kafka asks."""
    if resource.resource_type == ResourceType.TOPIC:
        if not authorized(node, context, operation, AclResource.TOPIC, resource.resource_name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif resource.resource_type == ResourceType.GROUP:
        if not authorized(node, context, operation, AclResource.GROUP, resource.resource_name):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif not authorized_cluster(node, context, operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return None


def handle(node: NodeView, context: RequestContext,
           request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    results = []
    for resource in request.resources:
        refused = refusal(node, context, resource, Operation.DESCRIBE_CONFIGS)
        if refused is not None:
            results.append(_result(resource, refused))
            continue
        code, message, described = _describe(node, resource)
        keys = resource.configuration_keys
        if keys:  # null or empty: every config (# Kafka: ConfigHelper.describeConfigs)
            wanted = set(keys)
            described = [d for d in described if d.name in wanted]
        results.append(_result(resource, code, message, [
            _entry(d, request.include_synonyms, request.include_documentation) for d in described]))
    return DescribeConfigsResponse(results=results)


def error_response(request: DescribeConfigsRequest, version: int, code: ErrorCode) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(results=[_result(resource, code) for resource in request.resources])
