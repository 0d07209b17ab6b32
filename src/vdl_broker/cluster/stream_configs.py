"""Per-stream configs (Kafka's topic configs) in the cluster metadata (pure: no I/O, no clock).

A stream's config is `StreamInfo.config`: key -> string value, only the keys set for it (Kafka
stores topic overrides as strings too); a key not set takes the node's default. The keys are
Kafka's topic-config names where Kafka has the idea, plus `vdl.table.*` for streams that are
Delta tables (vdl_broker/tables). Every key is declared once, in CONFIG_KEYS.

Validation happens where a change is proposed (CreateTopics, IncrementalAlterConfigs), against
CONFIG_KEYS: an unknown key or a bad value is refused there with INVALID_CONFIG naming it.
Applying checks structure only, so every node replaying the metadata log reaches the same state
whatever version it runs (entries written before this module carry arbitrary config objects).

    {"op": "alter_stream_config", "name": s, "set": {"retention.ms": "60000"}, "delete": ["segment.ms"]}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from vdl_broker.tables.ddl import DdlError, parse_schema
from vdl_wire.records.compression import Compression

MAX_SEGMENT_BYTES = (1 << 31) - 1  # index files store positions as uint32 (vdl_broker/log/config.py)
LONG_MAX = (1 << 63) - 1
LONG_MIN = -(1 << 63)
INT_MIN = -(1 << 31)
INT_MAX = (1 << 31) - 1
MIB = 1 << 20
TIMESTAMP_AFTER_MAX_MS = 3_600_000  # Kafka 4's log.message.timestamp.after.max.ms default
URI_SCHEMES = ("file", "s3", "s3a", "gs", "az", "abfs", "abfss", "adl", "lakefs", "memory")


class ConfigType(IntEnum):
    """DescribeConfigs v3+ ConfigType. # message defs: DescribeConfigsResponse.json"""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: ConfigType
    doc: str
    default: str | None = None  # built-in default (None: unset, or `node_setting` gives it)
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    node_setting: str | None = None  # NodeConfig field holding the node's default
    # The Kafka broker config a topic config defaults to (its DEFAULT_CONFIG synonym), None for
    # VDL's own (# Kafka: ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS).
    broker_name: str | None = None
    # Kafka names no DEFAULT_CONFIG synonym when its broker config has no default of its own
    # (log.retention.ms, log.roll.ms: the *.hours form holds it): only a value the node sets.
    broker_default_listed: bool = True
    check: Callable[[str], str | None] | None = None  # extra check: why the value is bad, or None
    canonical: Callable[[str], str] | None = None  # the value as stored, once `check` passed it
    accepts: str | None = None  # what `check` accepts, in words

    def accepted(self) -> str:
        if self.accepts is not None:
            return self.accepts
        if self.choices:
            return " | ".join(self.choices)
        if self.type == ConfigType.BOOLEAN:
            return "true | false"
        if self.minimum in (LONG_MIN, INT_MIN) and self.maximum in (LONG_MAX, INT_MAX):
            return "an integer"
        if self.minimum is not None:
            if self.type == ConfigType.DOUBLE:
                return f"a number in {self.minimum}..{self.maximum}"
            if self.maximum in (None, LONG_MAX):
                return f"an integer >= {self.minimum}"
            return f"an integer in {self.minimum}..{self.maximum}"
        return "a string"


def _check_path(value: str) -> str | None:
    if not value.strip():
        return "must not be empty"
    scheme = value.split("://", 1)[0].lower() if "://" in value else None
    if scheme is None:
        return None if value.startswith("/") else "must be an absolute local path or a URI (s3://, gs://, az://, file://...)"
    return None if scheme in URI_SCHEMES else f"URI scheme {scheme!r} is not one of {', '.join(URI_SCHEMES)}"


# Kafka's cleanup.policy is a list of `delete` and `compact` (LogConfig: ValidList.in, no
# duplicates, empty allowed: "an empty list means infinite retention"), described joined with
# "," in the order given. VDL never compacts: a policy without `delete` keeps every record.
CLEANUP_POLICIES = ("delete", "compact")
CLEANUP_POLICY_ACCEPTS = "delete, compact, compact,delete (either order) or empty (keep every record)"


def _cleanup_policies(value: str) -> list[str]:
    return [item.strip().lower() for item in value.split(",")] if value.strip() else []


def _check_cleanup_policy(value: str) -> str | None:
    policies = _cleanup_policies(value)
    if any(p not in CLEANUP_POLICIES for p in policies) or len(set(policies)) != len(policies):
        return f"{value!r} is not one of {CLEANUP_POLICY_ACCEPTS}"
    return None


def _canonical_cleanup_policy(value: str) -> str:
    return ",".join(_cleanup_policies(value))


def retention_deletes(cleanup_policy: str) -> bool:
    """Whether retention.ms / retention.bytes delete old segments of a stream with this policy:
    only with `delete` in it (Kafka's LogConfig.delete). `compact` alone keeps every record:
    VDL does not compact, so the latest value of every key stays readable by keeping them all."""
    return "delete" in _cleanup_policies(cleanup_policy)


# Keys and values a release before feature level 3 does not know (features.KEEP_ALL_POLICY_LEVEL).
COMPACTION_KEYS = frozenset({"min.compaction.lag.ms", "max.compaction.lag.ms", "delete.retention.ms"})


def sets_unreleased_config(to_set: Mapping[str, str]) -> bool:
    """Whether canonical `to_set` names a cleanup.policy other than `delete`, a compaction
    setting, a compression.type other than `producer` or message.timestamp.type=LogAppendTime:
    what only nodes at feature level 3 read alike (a release before it reads them as unset, so
    its leader would store batches as produced, with their CreateTime)."""
    return (to_set.get("cleanup.policy", "delete") != "delete" or not COMPACTION_KEYS.isdisjoint(to_set)
            or to_set.get("compression.type", "producer") != "producer"
            or to_set.get("message.timestamp.type", "CreateTime") != "CreateTime")


# Kafka's broker-side codecs (# Kafka: BrokerCompressionType): `producer` stores each batch as its
# producer compressed it; any other value has the leader recompress every produced batch of another
# codec before it goes into the stream's Raft log (vdl_wire rewrite_batch), as Kafka's LogValidator.
KAFKA_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
CODECS = {"uncompressed": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
          "lz4": Compression.LZ4, "zstd": Compression.ZSTD}
# KIP-390's level config of each codec that has one.
LEVEL_KEYS = {Compression.GZIP: "compression.gzip.level", Compression.LZ4: "compression.lz4.level",
              Compression.ZSTD: "compression.zstd.level"}


def _check_gzip_level(value: str) -> str | None:
    """Kafka: GZIP's level validator, 1..9 or -1 (the JDK's default level)."""
    try:
        level = int(value.strip())
    except ValueError:
        return f"{value!r} is not an integer"
    return None if level == -1 or 1 <= level <= 9 else f"{value!r} is not in 1..9 or -1"


def _throttled_items(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _check_throttled_replicas(value: str) -> str | None:
    """Kafka's ThrottledReplicaListValidator: `*`, or partitionId:brokerId pairs (or none)."""
    items = _throttled_items(value)
    if items == ["*"]:
        return None
    for item in items:
        partition, colon, broker = item.partition(":")
        if not (colon and partition.strip().isdigit() and broker.strip().isdigit()):
            return f"{value!r} is not the literal '*' or a list [partitionId]:[brokerId],[partitionId]:[brokerId],..."
    return None


def _canonical_list(value: str) -> str:
    return ",".join(_throttled_items(value))


REMOTE_STORAGE_ACCEPTS = "false (VDL has no Kafka tiered storage: a stream tiers to a Delta table, vdl.table.path)"


def _no_effect(kafka: str, why: str) -> str:
    return f"Kafka: {kafka}; {why} (no effect on VDL)"


NO_INDEX = "VDL indexes a segment at its own fixed interval (4096 bytes), the index growing with it"
FSYNC = "VDL fsyncs every write before it is acknowledged"
NO_TIERED = "VDL has no Kafka tiered storage (a stream tiers to a Delta table: vdl.table.path)"


RESERVED_COLUMNS = ("offset", "timestamp", "day")  # a json table's own columns


def _kinds(ddl_type: tuple[Any, ...]) -> list[str]:
    kind = ddl_type[0]
    if kind == "struct":
        return [kind] + [k for column in ddl_type[1] for k in _kinds(column.type)]
    if kind in ("array", "map"):
        return [kind] + [k for inner in ddl_type[1:] for k in _kinds(inner)]
    return [kind]


def _check_schema(value: str) -> str | None:
    try:
        columns = parse_schema(value)
    except DdlError as error:
        return f"not a Spark DDL schema: {error}"
    for column in columns:
        if column.name.lower() in RESERVED_COLUMNS:
            return f"column {column.name!r} is reserved (a json table has its own {', '.join(RESERVED_COLUMNS)})"
        if "map" in _kinds(column.type):
            return f"column {column.name!r}: MAP is not supported in json tables (use STRUCT)"
    return None


_KEYS = (
    ConfigKey("retention.ms", ConfigType.LONG, "delete whole segments whose newest record is older than this; "
              "-1 keeps them", minimum=-1, maximum=LONG_MAX, node_setting="retention_ms",
              broker_name="log.retention.ms", broker_default_listed=False),
    # Kafka takes any long here (a negative one: no limit, # Kafka: LogConfig).
    ConfigKey("retention.bytes", ConfigType.LONG, "delete the oldest segments while the log is larger than this; "
              "-1 (any negative): no limit", minimum=LONG_MIN, maximum=LONG_MAX, node_setting="retention_bytes",
              broker_name="log.retention.bytes"),
    ConfigKey("segment.bytes", ConfigType.INT, "segment file size at which the log rolls", minimum=1024,
              maximum=MAX_SEGMENT_BYTES, node_setting="segment_bytes", broker_name="log.segment.bytes"),
    ConfigKey("segment.ms", ConfigType.LONG, "segment age at which the log rolls", minimum=1, maximum=LONG_MAX,
              node_setting="segment_ms", broker_name="log.roll.ms", broker_default_listed=False),
    ConfigKey("max.message.bytes", ConfigType.INT, "largest record batch a producer may send (MESSAGE_TOO_LARGE "
              "beyond)", minimum=0, maximum=INT_MAX, node_setting="max_batch_bytes", broker_name="message.max.bytes"),
    # Kafka Streams' changelogs ask for compact (windowed: compact,delete), Connect's internal
    # topics for compact: accepted; VDL keeps every record where Kafka would compact (README).
    ConfigKey("cleanup.policy", ConfigType.LIST, "what happens to old segments: delete: retention.ms and "
              "retention.bytes delete them; compact: every record is kept (VDL never compacts, so the latest "
              "value of every key stays readable; retention deletes nothing); compact,delete: as delete",
              default="delete", check=_check_cleanup_policy, canonical=_canonical_cleanup_policy,
              accepts=CLEANUP_POLICY_ACCEPTS, broker_name="log.cleanup.policy"),
    # Kafka's compaction settings (Kafka Streams' versioned stores set min.compaction.lag.ms):
    # accepted and described; VDL never compacts, so they change nothing.
    ConfigKey("min.compaction.lag.ms", ConfigType.LONG, "Kafka: the least time a record stays uncompacted; "
              "VDL never compacts (no effect)", default="0", minimum=0, maximum=LONG_MAX,
              broker_name="log.cleaner.min.compaction.lag.ms"),
    ConfigKey("max.compaction.lag.ms", ConfigType.LONG, "Kafka: the longest time a record stays ineligible for "
              "compaction; VDL never compacts (no effect)", default=str(LONG_MAX), minimum=1, maximum=LONG_MAX,
              broker_name="log.cleaner.max.compaction.lag.ms"),
    ConfigKey("delete.retention.ms", ConfigType.LONG, "Kafka: how long compaction keeps tombstones; VDL never "
              "compacts, so tombstones stay like every record (no effect)", default="86400000", minimum=0,
              maximum=LONG_MAX, broker_name="log.cleaner.delete.retention.ms"),
    # Kafka topic configs whose default is all a VDL log does: accepted and described with that one
    # value, so tools, Kafka Streams (its internal topics name message.timestamp.type) and
    # provisioning scripts that pass them work; any other value is refused naming what is accepted.
    ConfigKey("message.timestamp.type", ConfigType.STRING, "CreateTime: records keep the timestamp their producer "
              "gave them; LogAppendTime: the leader stamps each batch with the time it appends it",
              default="CreateTime", choices=("CreateTime", "LogAppendTime"), broker_name="log.message.timestamp.type"),
    # KIP-937 (Kafka 4.0 defaults): on a CreateTime stream, a produce whose timestamps lie further from the
    # leader's clock than these is refused with INVALID_TIMESTAMP (vdl_broker/server/handlers/produce.py).
    ConfigKey("message.timestamp.before.max.ms", ConfigType.LONG, "a record whose timestamp is more than this "
              "before the leader's clock is refused (INVALID_TIMESTAMP)", default=str(LONG_MAX), minimum=0,
              maximum=LONG_MAX, broker_name="log.message.timestamp.before.max.ms"),
    ConfigKey("message.timestamp.after.max.ms", ConfigType.LONG, "a record whose timestamp is more than this "
              "after the leader's clock is refused (INVALID_TIMESTAMP)", default=str(TIMESTAMP_AFTER_MAX_MS),
              minimum=0, maximum=LONG_MAX, broker_name="log.message.timestamp.after.max.ms"),
    ConfigKey("compression.type", ConfigType.STRING, "producer: batches are stored compressed as their producer "
              "sent them; uncompressed, gzip, snappy, lz4, zstd: the leader recompresses every batch of another "
              "codec to this one", choices=KAFKA_COMPRESSION_TYPES, node_setting="compression_type",
              broker_name="compression.type"),
    ConfigKey("unclean.leader.election.enable", ConfigType.BOOLEAN, "false: only a replica holding every "
              "acknowledged write can lead (Raft); VDL never elects another", default="false", choices=("false",),
              broker_name="unclean.leader.election.enable"),
    # Every other Kafka 4.4 topic config (# Kafka: LogConfig CONFIG, ServerTopicConfigSynonyms),
    # with Kafka's type, range and default, so provisioning tools (Terraform, Strimzi's topic
    # operator, kafka-topics --config) that pass them work: stored and described as Kafka does;
    # what each does not change on VDL is in its doc and the README.
    ConfigKey("compression.gzip.level", ConfigType.INT, "the gzip level of recompression (compression.type=gzip); "
              "-1: zlib's default (6)", default="-1", check=_check_gzip_level, accepts="an integer in 1..9, or -1",
              broker_name="compression.gzip.level"),
    ConfigKey("compression.lz4.level", ConfigType.INT, "the lz4 level of recompression (compression.type=lz4): 1 is "
              "LZ4's fast mode, above it LZ4 HC", default="9", minimum=1, maximum=17, broker_name="compression.lz4.level"),
    ConfigKey("compression.zstd.level", ConfigType.INT, "the zstd level of recompression (compression.type=zstd)",
              default="3", minimum=-131072, maximum=22,
              broker_name="compression.zstd.level"),
    ConfigKey("errors.deadletterqueue.group.enable", ConfigType.BOOLEAN, _no_effect(
              "whether share groups may use the topic as a dead-letter queue", "VDL has no share groups"),
              default="false"),
    ConfigKey("file.delete.delay.ms", ConfigType.LONG, _no_effect("how long a deleted segment file stays on disk",
              "VDL deletes a segment's files at once"), default="60000", minimum=0, maximum=LONG_MAX,
              broker_name="log.segment.delete.delay.ms"),
    ConfigKey("flush.messages", ConfigType.LONG, _no_effect("records appended between fsyncs", FSYNC),
              default=str(LONG_MAX), minimum=1, maximum=LONG_MAX, broker_name="log.flush.interval.messages"),
    ConfigKey("flush.ms", ConfigType.LONG, _no_effect("time between fsyncs", FSYNC), default=str(LONG_MAX),
              minimum=0, maximum=LONG_MAX),
    ConfigKey("follower.replication.throttled.replicas", ConfigType.LIST, _no_effect(
              "replicas whose replication is throttled on followers", "VDL has no replication throttles "
              "(a replica move copies at the node's recovery_rate_bytes)"), default="",
              check=_check_throttled_replicas, canonical=_canonical_list,
              accepts="* or [partitionId]:[brokerId],..."),
    ConfigKey("index.interval.bytes", ConfigType.INT, _no_effect("bytes between offset index entries", NO_INDEX),
              default="4096", minimum=0, maximum=INT_MAX, broker_name="log.index.interval.bytes"),
    ConfigKey("leader.replication.throttled.replicas", ConfigType.LIST, _no_effect(
              "replicas whose replication is throttled on the leader", "VDL has no replication throttles "
              "(a replica move copies at the node's recovery_rate_bytes)"), default="",
              check=_check_throttled_replicas, canonical=_canonical_list,
              accepts="* or [partitionId]:[brokerId],..."),
    ConfigKey("local.retention.bytes", ConfigType.LONG, _no_effect("local retention with tiered storage", NO_TIERED),
              default="-2", minimum=-2, maximum=LONG_MAX, broker_name="log.local.retention.bytes"),
    ConfigKey("local.retention.ms", ConfigType.LONG, _no_effect("local retention with tiered storage", NO_TIERED),
              default="-2", minimum=-2, maximum=LONG_MAX, broker_name="log.local.retention.ms"),
    ConfigKey("max.decompressed.message.bytes", ConfigType.INT, _no_effect(
              "largest decompressed batch the broker accepts", "VDL stores batches as produced"),
              default="2147483639", minimum=1, maximum=2147483639, broker_name="max.decompressed.message.bytes"),
    ConfigKey("min.cleanable.dirty.ratio", ConfigType.DOUBLE, _no_effect(
              "the share of a log not yet compacted before compaction runs", "VDL never compacts"), default="0.5",
              minimum=0, maximum=1, broker_name="log.cleaner.min.cleanable.ratio"),
    ConfigKey("preallocate", ConfigType.BOOLEAN, _no_effect("preallocate a new segment file",
              "VDL's segments grow as written"), default="false", broker_name="log.preallocate"),
    ConfigKey("remote.copy.lag.bytes", ConfigType.LONG, _no_effect("tiered storage copy lag", NO_TIERED),
              default="-1", minimum=-1, maximum=LONG_MAX, broker_name="log.remote.copy.lag.bytes"),
    ConfigKey("remote.copy.lag.ms", ConfigType.LONG, _no_effect("tiered storage copy lag", NO_TIERED),
              default="0", minimum=-1, maximum=LONG_MAX, broker_name="log.remote.copy.lag.ms"),
    ConfigKey("remote.log.copy.disable", ConfigType.BOOLEAN, _no_effect("stop copying to tiered storage",
              NO_TIERED), default="false"),
    ConfigKey("remote.log.delete.on.disable", ConfigType.BOOLEAN, _no_effect(
              "delete tiered data when tiered storage is turned off", NO_TIERED), default="false"),
    # Kafka itself refuses true where the broker has no tiered storage, as VDL has none.
    ConfigKey("remote.storage.enable", ConfigType.BOOLEAN, "Kafka's tiered storage; " + NO_TIERED + ": false only",
              default="false", choices=("false",), accepts=REMOTE_STORAGE_ACCEPTS),
    ConfigKey("segment.index.bytes", ConfigType.INT, _no_effect("the size of a segment's offset index", NO_INDEX),
              default="10485760", minimum=4, maximum=INT_MAX, broker_name="log.index.size.max.bytes"),
    ConfigKey("segment.jitter.ms", ConfigType.LONG, _no_effect("a random time taken off segment.ms",
              "VDL rolls at segment.ms"), default="0", minimum=0, maximum=LONG_MAX),
    ConfigKey("vdl.table.path", ConfigType.STRING, "the stream's Delta table: an absolute local path or a URI the "
              "deltalake package can write; set = tiering on", check=_check_path),
    ConfigKey("vdl.table.format", ConfigType.STRING, "raw: columns offset, timestamp, key, value, headers; json: the "
              "value parsed with vdl.table.schema, plus offset and timestamp", default="raw", choices=("raw", "json")),
    ConfigKey("vdl.table.schema", ConfigType.STRING, "Spark DDL schema of the JSON values (vdl.table.format=json)",
              check=_check_schema),
    ConfigKey("vdl.table.lag.ms", ConfigType.LONG, "freshness target: a committed record is in the table this "
              "soon", default="5000", minimum=100, maximum=LONG_MAX),
    ConfigKey("vdl.table.partition.by", ConfigType.STRING, "none, or day: partitioned by the UTC day of the record "
              "timestamp (column `day`)", default="none", choices=("none", "day")),
    ConfigKey("vdl.table.compact.interval.ms", ConfigType.LONG, "how often small files are compacted "
              "(optimize.compact); 0 = never", default="600000", minimum=0, maximum=LONG_MAX),
    ConfigKey("vdl.table.compact.target.bytes", ConfigType.LONG, "file size compaction aims at",
              default=str(128 * MIB), minimum=MIB, maximum=LONG_MAX),
    ConfigKey("vdl.table.vacuum.interval.ms", ConfigType.LONG, "how often files no longer in the table are deleted "
              "(vacuum); 0 = never", default="3600000", minimum=0, maximum=LONG_MAX),
    ConfigKey("vdl.table.vacuum.retention.ms", ConfigType.LONG, "vacuum deletes only files removed from the table "
              "longer ago than this (readers of older versions still find theirs)", default="604800000",
              minimum=0, maximum=LONG_MAX),
)
CONFIG_KEYS: dict[str, ConfigKey] = {key.name: key for key in _KEYS}
TABLE_PREFIX = "vdl.table."


class ConfigProblem(ValueError):
    """A config change refused (INVALID_CONFIG); the message names the key and what it accepts."""


MIN_INSYNC_REPLICAS = "min.insync.replicas"


def majority(replication_factor: int) -> int:
    """Replicas that hold a write before it is acknowledged (a Raft commit): a stream's
    min.insync.replicas, in Kafka's words."""
    return replication_factor // 2 + 1


def check_min_insync(value: Any, replication_factor: int) -> None:
    """min.insync.replicas given at a create or an alter (Kafka guides set 2 for 3 replicas): a
    minimum at or below the majority is what the stream gives anyway, so it is accepted and
    nothing is stored; above it is refused, naming what is accepted."""
    most = majority(replication_factor)
    text = str(value).strip() if value is not None else ""
    if not (text.isdigit() and 1 <= int(text) <= most):
        raise ConfigProblem(f"{MIN_INSYNC_REPLICAS}: {value!r} is not an integer in 1..{most}: a write is "
                            f"acknowledged once a majority of the stream's {replication_factor} replica(s) hold it "
                            f"(Raft), never fewer or more")


def known_key(name: str) -> ConfigKey:
    key = CONFIG_KEYS.get(name)
    if key is None and name == MIN_INSYNC_REPLICAS:
        # DescribeConfigs shows it (read-only), so say why it cannot be set, not that it is unknown.
        raise ConfigProblem("min.insync.replicas is read-only: a write is acknowledged once a majority of the "
                            f"stream's replicas hold it (Raft); the settable stream configs: {', '.join(CONFIG_KEYS)}")
    if key is None:
        raise ConfigProblem(f"unknown stream config {name!r} (accepted: {', '.join(CONFIG_KEYS)})")
    return key


# How a key without a default (vdl.table.path, vdl.table.schema) is described while unset, and
# what sets it back to unset: "", as Kafka describes an empty list config. Not null: clients
# that read a topic's configs and write them all back (librdkafka refuses a null value) would
# fail on it.
UNSET = ""


def unsets(name: str, value: Any) -> bool:
    """Whether `value` given for `name` means the key unset (as a DELETE would)."""
    key = known_key(name)
    return key.default is None and key.node_setting is None and value is not None and not str(value).strip()


def canonical_value(name: str, value: Any) -> str:
    """The value as stored, or ConfigProblem naming the key."""
    key = known_key(name)
    if value is None:
        raise ConfigProblem(f"{name} needs a value ({key.accepted()})")
    text = str(value).strip()
    if key.type in (ConfigType.INT, ConfigType.LONG):
        try:
            number = int(text)
        except ValueError:
            raise ConfigProblem(f"{name}: {value!r} is not {key.accepted()}") from None
        if (key.minimum is not None and number < key.minimum) or (key.maximum is not None and number > key.maximum):
            raise ConfigProblem(f"{name}: {value!r} is not {key.accepted()}")
        reason = key.check(text) if key.check is not None else None
        if reason is not None:
            raise ConfigProblem(f"{name}: {reason}")
        return str(number)
    if key.type == ConfigType.DOUBLE:
        try:
            number_ = float(text)
        except ValueError:
            raise ConfigProblem(f"{name}: {value!r} is not {key.accepted()}") from None
        if not (number_ == number_ and (key.minimum is None or number_ >= key.minimum)
                and (key.maximum is None or number_ <= key.maximum)):
            raise ConfigProblem(f"{name}: {value!r} is not {key.accepted()}")
        return text  # as given, as Kafka stores and describes it
    if key.type == ConfigType.BOOLEAN and not key.choices:
        # Kafka: ConfigDef parses a boolean case-insensitively, anything else is refused.
        if text.lower() not in ("true", "false"):
            raise ConfigProblem(f"{name}: {value!r} is not {key.accepted()}")
        return text.lower()
    if key.choices:
        # Kafka's own spelling is stored (CreateTime), whatever the case given.
        choice = next((c for c in key.choices if c.lower() == text.lower()), None)
        if choice is None:
            raise ConfigProblem(f"{name}: {value!r} is not one of {key.accepted()}")
        return choice
    reason = key.check(str(value)) if key.check is not None else None
    if reason is not None:
        raise ConfigProblem(f"{name}: {reason}")
    return key.canonical(str(value)) if key.canonical is not None else str(value)


def check_combination(config: Mapping[str, str]) -> None:
    """Rules across keys; raises ConfigProblem."""
    if config.get("vdl.table.format", "raw") == "json" and not config.get("vdl.table.schema"):
        raise ConfigProblem("vdl.table.schema: required when vdl.table.format=json (a Spark DDL schema)")


def validated(config: Mapping[str, Any], replication_factor: int) -> dict[str, str]:
    """A whole config (CreateTopics, AlterConfigs) of a stream of `replication_factor` replicas,
    checked and canonical, as stored; raises ConfigProblem."""
    if MIN_INSYNC_REPLICAS in config:
        check_min_insync(config[MIN_INSYNC_REPLICAS], replication_factor)
    result = {name: canonical_value(name, value) for name, value in config.items()
              if name != MIN_INSYNC_REPLICAS and not unsets(name, value)}
    check_combination(result)
    return result


class AlterOp(IntEnum):
    """IncrementalAlterConfigs operations. # message defs: IncrementalAlterConfigsRequest.json"""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def _list_altered(name: str, operation: int, value: str | None, current: Mapping[str, Any]) -> str:
    """A list config after APPEND (the items not in it yet, at its end) or SUBTRACT (every item
    given taken out) of comma-separated `value`, from the stream's value, else the built-in
    default: Kafka's ConfigAdminManager.prepareIncrementalConfigs (its config default, not the
    node's setting)."""
    key = known_key(name)
    if key.type != ConfigType.LIST:
        raise ConfigProblem(f"{name}: {AlterOp(operation).name} applies to list configs only "
                            f"({', '.join(k.name for k in CONFIG_KEYS.values() if k.type == ConfigType.LIST)}); use SET")
    if value is None:
        raise ConfigProblem(f"{name}: {AlterOp(operation).name} needs a value ({key.accepted()})")
    old = str(current[name]) if name in current else (key.default or "")
    items = [item.strip() for item in old.split(",") if item.strip()]
    given = [item.strip() for item in value.split(",") if item.strip()]
    if operation == AlterOp.APPEND:
        return ",".join(items + [item for item in dict.fromkeys(given) if item not in items])
    return ",".join(item for item in items if item not in given)


def altered(current: Mapping[str, Any], changes: list[tuple[str, int, str | None]],
            replication_factor: int) -> tuple[dict[str, str], list[str]]:
    """(set, delete) for changes (name, operation, value) to the config of a stream of
    `replication_factor` replicas; raises ConfigProblem."""
    to_set: dict[str, str] = {}
    to_delete: list[str] = []
    names = [name for name, _, _ in changes]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:
        raise ConfigProblem(f"{twice}: named more than once in the request")
    for name, operation, value in changes:
        if name == MIN_INSYNC_REPLICAS and operation in (AlterOp.SET, AlterOp.DELETE):
            if operation == AlterOp.SET:
                check_min_insync(value, replication_factor)
            continue  # never stored: the stream's is its majority whatever was asked
        if operation == AlterOp.SET and not unsets(name, value):
            to_set[name] = canonical_value(name, value)
        elif operation in (AlterOp.SET, AlterOp.DELETE):
            known_key(name)
            to_delete.append(name)
        elif operation in (AlterOp.APPEND, AlterOp.SUBTRACT):
            to_set[name] = canonical_value(name, _list_altered(name, operation, value, current))
        else:
            raise ConfigProblem(f"{name}: unknown operation {operation} (0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT)")
    merged = {k: str(v) for k, v in current.items() if k not in to_delete}
    merged.update(to_set)
    check_combination(merged)
    return to_set, to_delete


# ---------------------------------------------------------------------------------- commands


def alter_stream_config_command(name: str, to_set: Mapping[str, str], to_delete: list[str]) -> dict[str, Any]:
    return {"op": "alter_stream_config", "name": name, "set": dict(to_set), "delete": sorted(to_delete)}


CONFIG_OPS = frozenset({"alter_stream_config"})


def apply_alter(current: Mapping[str, Any], command: Mapping[str, Any]) -> dict[str, Any] | str:
    """The stream's new config after an alter command, or why the command is malformed."""
    to_set, to_delete = command.get("set"), command.get("delete")
    if not isinstance(to_set, dict) or not isinstance(to_delete, list):
        return "alter_stream_config: set must be an object and delete a list"
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in to_set.items()):
        return "alter_stream_config: set must map names to strings"
    config = {k: v for k, v in current.items() if k not in to_delete}
    config.update(to_set)
    return config


# ---------------------------------------------------------------------------------- effective settings


@dataclass(frozen=True)
class TableSettings:
    """A stream's Delta table (vdl_broker/tables)."""

    path: str
    format: str
    schema: str | None
    lag_ms: int
    partition_by: str
    compact_interval_ms: int
    compact_target_bytes: int
    vacuum_interval_ms: int
    vacuum_retention_ms: int

    @property
    def dead_letter_path(self) -> str:
        return self.path.rstrip("/") + "_dlq"


@dataclass(frozen=True)
class StreamSettings:
    """What a replica applies: the stream's values, else the node's defaults."""

    retention_ms: int
    retention_bytes: int
    segment_bytes: int
    segment_ms: int
    max_message_bytes: int
    table: TableSettings | None = None
    retention_deletes: bool = True  # cleanup.policy has delete (else retention deletes nothing)
    timestamp_before_max_ms: int = LONG_MAX
    timestamp_after_max_ms: int = TIMESTAMP_AFTER_MAX_MS
    # compression.type: the codec every produced batch is stored with (None: `producer`, as sent),
    # at its KIP-390 level (None: the codec has none).
    compression: Compression | None = None
    compression_level: int | None = None
    log_append_time: bool = False  # message.timestamp.type=LogAppendTime


def value_of(name: str, config: Mapping[str, Any], node_defaults: Mapping[str, Any]) -> str | None:
    """The effective value of one key: the stream's, else the node's, else the built-in default.
    A stored value this version does not accept (an old entry) counts as unset."""
    key = CONFIG_KEYS[name]
    if name in config:
        try:
            return canonical_value(name, config[name])
        except ConfigProblem:
            pass
    if key.node_setting is not None and key.node_setting in node_defaults:
        return str(node_defaults[key.node_setting])
    return key.default


def stream_settings(config: Mapping[str, Any], node_defaults: Mapping[str, Any]) -> StreamSettings:
    def number(name: str) -> int:
        return int(value_of(name, config, node_defaults) or 0)

    table = None
    path = value_of("vdl.table.path", config, node_defaults)
    if path:
        table = TableSettings(path, value_of("vdl.table.format", config, node_defaults) or "raw",
                              value_of("vdl.table.schema", config, node_defaults), number("vdl.table.lag.ms"),
                              value_of("vdl.table.partition.by", config, node_defaults) or "none",
                              number("vdl.table.compact.interval.ms"), number("vdl.table.compact.target.bytes"),
                              number("vdl.table.vacuum.interval.ms"), number("vdl.table.vacuum.retention.ms"))
    codec = CODECS.get(value_of("compression.type", config, node_defaults) or "producer")
    level_key = LEVEL_KEYS.get(codec) if codec is not None else None
    return StreamSettings(number("retention.ms"), number("retention.bytes"), number("segment.bytes"),
                          number("segment.ms"), number("max.message.bytes"), table,
                          retention_deletes(value_of("cleanup.policy", config, node_defaults) or ""),
                          number("message.timestamp.before.max.ms"), number("message.timestamp.after.max.ms"),
                          codec, number(level_key) if level_key is not None else None,
                          value_of("message.timestamp.type", config, node_defaults) == "LogAppendTime")
