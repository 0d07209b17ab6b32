"""Option parsing and validation for format("vdl"), on the driver, before any job starts.

Option names follow Spark's Kafka source/sink ("Structured Streaming + Kafka Integration Guide")
so a job only changes format("kafka") to format("vdl"). Spark hands options to a Python data
source lower-cased, so every lookup is by the lower-cased name while every message names the
option in its documented spelling.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from vdl_client import BootstrapError, ClientSettings, parse_bootstrap
from vdl_connector.security_options import SECURITY_OPTIONS, SecurityOptionError, parse_security_options

EARLIEST = -2  # Spark Kafka JSON offsets: -2 means earliest
LATEST = -1  # ... and -1 means latest


class VdlOptionError(ValueError):
    """An option is missing, unknown in its combination, or has a value it does not accept."""


@dataclass(frozen=True)
class Subscription:
    """Which streams a reader reads: exactly one of subscribe, subscribePattern, assign."""

    kind: str  # "subscribe" | "subscribePattern" | "assign"
    streams: tuple[str, ...] = ()
    pattern: str | None = None

    def select(self, existing: list[str]) -> list[str]:
        """Streams to read given the streams that exist now (pattern: sorted matches)."""
        if self.kind == "subscribePattern":
            regex = re.compile(self.pattern or "")
            return sorted(name for name in existing if regex.fullmatch(name))
        return list(self.streams)


@dataclass(frozen=True)
class OffsetSpec:
    """A starting or ending position: a word, per-stream offsets, or timestamps.

    kind: "earliest" | "latest" | "offsets" (per_stream: offset, -2 earliest, -1 latest) |
    "timestamp" (one timestamp for all streams) | "timestamps" (per_stream: timestamp ms).
    """

    kind: str
    per_stream: Mapping[str, int] = field(default_factory=dict)
    timestamp: int | None = None
    option: str = ""  # documented name of the option it came from, for messages


@dataclass(frozen=True)
class ReplicaPreference:
    """preferReplicas: which replicas a stream's tasks read from (KIP-392 follower reads).

    "leader": the leader only; "any": the tasks of a stream spread over its in-sync replicas;
    "rack": over its in-sync replicas in `rack` (the leader alone when none is there)."""

    kind: str = "any"
    rack: str | None = None


PREFER_REPLICAS_ACCEPTS = "'leader', 'any' or 'rack:<name>'"
# Kafka's consumer isolation.level (KIP-98) -> the Fetch / ListOffsets isolation_level field.
ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}


@dataclass(frozen=True)
class SourceOptions:
    client: ClientSettings
    subscription: Subscription
    starting: OffsetSpec | None  # None: earliest for batch, latest for streaming (as Spark)
    ending: OffsetSpec | None  # batch only; None: latest
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    fetch_max_bytes: int = 64 * 1024 * 1024
    max_partition_fetch_bytes: int = 16 * 1024 * 1024
    fetch_max_wait_ms: int = 500
    poll_timeout_ms: int = 120_000
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 10
    timestamp_strategy: str = "error"  # startingOffsetsByTimestampStrategy: error | latest
    commit_group: str | None = None  # commitOffsetsToGroup: report progress as this group's offsets
    prefer_replicas: ReplicaPreference = ReplicaPreference()
    value_json_schema: str | None = None  # valueJsonSchema: parse the value into a struct (json_values.py)


# The sink's batch size (kafka.batch.size) unless set: a broker's CPU per record fell ~22% from 1
# MiB batches to 4 MiB (benchmarks/bench_connector.py, write group: its costs per request and per
# fsync spread over 4x the records). A stream's max.message.bytes, when lower, caps it (producing.py).
# Rows that name their streams (the `topic` column, no `topic` option) keep 1 MiB: a task holds a
# batch being filled, and ~8 MiB in flight, for every stream it meets.
DEFAULT_BATCH_SIZE = 4 * 1024 * 1024
FAN_OUT_BATCH_SIZE = 1024 * 1024


@dataclass(frozen=True)
class SinkOptions:
    client: ClientSettings
    topic: str | None = None
    create_streams: bool = False
    exactly_once: bool = True
    # exactlyOnce=transactional: each task writes in a Kafka transaction the driver commits
    transactional: bool = False
    transaction_timeout_ms: int = 900_000
    batch_size: int = DEFAULT_BATCH_SIZE
    compression: str = "none"
    delivery_timeout_ms: int = 120_000
    # Spark's own option on a streaming sink: where the query keeps its id (see sink.py)
    checkpoint_location: str | None = None


# Documented spellings; the key is what Spark hands us (lower-cased).
SOURCE_OPTIONS = (
    "bootstrap.servers", "kafka.bootstrap.servers", "subscribe", "subscribePattern", "assign",
    "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
    "minPartitions", "maxRecordsPerPartition", "includeHeaders", "kafka.fetch.max.bytes",
    "fetch.max.bytes", "kafka.max.partition.fetch.bytes", "max.partition.fetch.bytes",
    "kafka.fetch.max.wait.ms", "fetch.max.wait.ms", "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries", "fetchOffset.retryIntervalMs", "kafka.request.timeout.ms",
    "request.timeout.ms", "kafka.retry.backoff.ms", "retry.backoff.ms", "kafka.client.id",
    "client.id", "commitOffsetsToGroup", "preferReplicas", "kafka.isolation.level", "isolation.level",
    "valueJsonSchema", *SECURITY_OPTIONS,
)
SINK_OPTIONS = (
    "bootstrap.servers", "kafka.bootstrap.servers", "topic", "createStreams", "exactlyOnce",
    "kafka.batch.size", "batch.size", "kafka.compression.type", "compression.type",
    "kafka.delivery.timeout.ms", "delivery.timeout.ms", "kafka.transaction.timeout.ms", "transaction.timeout.ms",
    "kafka.request.timeout.ms", "request.timeout.ms", "kafka.retry.backoff.ms", "retry.backoff.ms", "kafka.client.id", "client.id",
    *SECURITY_OPTIONS,
)
# Spark's Kafka options that format("vdl") has no use for, taken so a Kafka job moves unchanged
# (every other `kafka.`-prefixed name is a Kafka client config, which format("kafka") passes on).
KAFKA_ONLY_OPTIONS = ("groupIdPrefix",)
# What Spark itself adds to a data source's options: load(path)/save(path), and a streaming
# sink's checkpointLocation and queryName.
SPARK_OPTIONS = ("path", "checkpointLocation", "queryName")
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
EXACTLY_ONCE_MODES = ("true", "false", "transactional")
# The coordinator refuses longer ones (Kafka's transaction.max.timeout.ms default, 15 minutes).
MAX_TRANSACTION_TIMEOUT_MS = 900_000
_DURATION = re.compile(r"^\s*(\d+)\s*(us|ms|s|m|min|h|d)?\s*$")
_DURATION_MS = {"us": 0.001, "ms": 1, None: 1, "s": 1000, "m": 60_000, "min": 60_000,
                "h": 3_600_000, "d": 86_400_000}


class _Options:
    """Lower-cased lookup that reports errors with the documented spelling."""

    def __init__(self, raw: Mapping[str, str]) -> None:
        self._raw = {str(k).lower(): v for k, v in raw.items()}

    def get(self, name: str) -> str | None:
        value = self._raw.get(name.lower())
        return None if value is None else str(value)

    def first(self, *names: str) -> tuple[str, str | None]:
        """The first of several synonyms that is set (prefixed Kafka configs first)."""
        for name in names:
            value = self.get(name)
            if value is not None:
                return name, value
        return names[0], None

    def has(self, name: str) -> bool:
        return self.get(name) is not None


# A catalog table's OPTIONS reach its provider under this prefix, beside the table's properties
# (TableCatalog.OPTION_PREFIX and TableCatalog.PROP_PROVIDER in Spark's connector catalog API).
_TABLE_OPTION_PREFIX = "option."
_TABLE_PROVIDER = "provider"


def check_known_options(raw: Mapping[str, str]) -> None:
    """A misspelt option (startingOffset, maxOffsetPerTrigger) fails instead of being ignored.

    Spark's Kafka source ignores unknown names silently; here only `kafka.`-prefixed client configs
    and Spark's own Kafka options are taken without use."""
    keys = {str(k).lower() for k in raw}
    if _TABLE_PROVIDER in keys and any(k.startswith(_TABLE_OPTION_PREFIX) for k in keys):
        # Spark creates such a table, then fails every SELECT from it ("vdl is not a valid Spark
        # SQL Data Source"): it reads no catalog table of a Python data source.
        raise VdlOptionError("CREATE TABLE ... USING vdl: Spark cannot read a catalog table of a Python data "
                             "source; use CREATE TEMPORARY VIEW name USING vdl OPTIONS (...), or "
                             "spark.read.format(\"vdl\")")
    known = {n.lower() for n in (*SOURCE_OPTIONS, *SINK_OPTIONS, *KAFKA_ONLY_OPTIONS, *SPARK_OPTIONS)}
    unknown = sorted(str(k) for k in raw if str(k).lower() not in known and not str(k).lower().startswith("kafka."))
    if not unknown:
        return
    spelled = {n.lower(): n for n in (*SOURCE_OPTIONS, *SINK_OPTIONS)}
    close = difflib.get_close_matches(unknown[0].lower(), list(spelled), n=1, cutoff=0.75)
    hint = f" (did you mean '{spelled[close[0]]}'?)" if close else ""
    sink_only = [n for n in SINK_OPTIONS if n not in SOURCE_OPTIONS]
    # Spark hands the names lower-cased (options are case-insensitive).
    raise VdlOptionError(
        f"unknown option '{unknown[0]}'{hint}; format(\"vdl\") reads with {', '.join(SOURCE_OPTIONS)}; "
        f"writes with the client and security options among those and {', '.join(sink_only)} "
        "(any other 'kafka.' client config is ignored)")


def _bool(name: str, value: str | None, default: bool) -> bool:
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise VdlOptionError(f"option '{name}' must be 'true' or 'false', got {value!r}")


def _int(name: str, value: str | None, default: int | None, minimum: int = 1) -> int | None:
    if value is None:
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise VdlOptionError(f"option '{name}' must be an integer >= {minimum}, got {value!r}") from None
    if number < minimum:
        raise VdlOptionError(f"option '{name}' must be an integer >= {minimum}, got {value!r}")
    return number


def parse_duration_ms(name: str, value: str) -> int:
    """Spark's time strings (JavaUtils.timeStringAsMs): '15m', '10s', '500ms', '1h'; bare = ms."""
    match = _DURATION.match(value.lower())
    if not match:
        raise VdlOptionError(
            f"option '{name}' must be a duration such as '500ms', '10s', '15m', '1h', got {value!r}")
    return int(int(match.group(1)) * _DURATION_MS[match.group(2)])


def _bootstrap(options: _Options) -> tuple[str, ...]:
    name, value = options.first("kafka.bootstrap.servers", "bootstrap.servers")
    if value is None or not value.strip():
        raise VdlOptionError(
            "option 'bootstrap.servers' (or 'kafka.bootstrap.servers') is required: "
            "a comma-separated list of host:port")
    try:
        return parse_bootstrap(value)
    except BootstrapError:
        raise VdlOptionError(
            f"option '{name}' must be a comma-separated list of host:port, got {value!r}") from None


def _client(options: _Options, deadline_ms: int) -> ClientSettings:
    name, value = options.first("kafka.request.timeout.ms", "request.timeout.ms")
    request_timeout = _int(name, value, 30_000)
    name, value = options.first("kafka.retry.backoff.ms", "retry.backoff.ms")
    backoff = _int(name, value, 100, minimum=0)
    _, client_id = options.first("kafka.client.id", "client.id")
    try:
        security = parse_security_options(options.get)
    except SecurityOptionError as error:
        raise VdlOptionError(str(error)) from None
    return ClientSettings(_bootstrap(options), request_timeout or 30_000, backoff or 0,
                          deadline_ms, client_id or "vdl-spark", security=security)


def _stream_list(name: str, value: str) -> tuple[str, ...]:
    streams = tuple(s.strip() for s in value.split(",") if s.strip())
    if not streams:
        raise VdlOptionError(f"option '{name}' must be a comma-separated list of stream names, got {value!r}")
    return streams


def _json_object(name: str, value: str, accepts: str) -> dict:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise VdlOptionError(f"option '{name}' is not valid JSON ({exc.msg}); it accepts {accepts}") from None
    if not isinstance(parsed, dict) or not parsed:
        raise VdlOptionError(f"option '{name}' must be a non-empty JSON object; it accepts {accepts}")
    return parsed


def _subscription(options: _Options) -> Subscription:
    given = [n for n in ("subscribe", "subscribePattern", "assign") if options.has(n)]
    if len(given) != 1:
        which = ", ".join(f"'{n}'" for n in given) if given else "none"
        raise VdlOptionError(
            "exactly one of the options 'subscribe', 'subscribePattern', 'assign' must be set, "
            f"got {which}")
    kind = given[0]
    value = options.get(kind) or ""
    if kind == "subscribe":
        return Subscription(kind, _stream_list(kind, value))
    if kind == "subscribePattern":
        try:
            re.compile(value)
        except re.error as exc:
            raise VdlOptionError(f"option 'subscribePattern' is not a valid regular expression: {exc}") from None
        if not value.strip():
            raise VdlOptionError("option 'subscribePattern' must be a non-empty regular expression")
        return Subscription(kind, pattern=value)
    accepts = 'a JSON object of stream to partition list, e.g. {"events":[0]}'
    parsed = _json_object("assign", value, accepts)
    for stream, partitions in parsed.items():
        if partitions != [0]:
            raise VdlOptionError(
                f"option 'assign': stream {stream!r} has exactly one partition (0); "
                f"it accepts {accepts}, got {partitions!r}")
    return Subscription(kind, tuple(parsed))


def _per_stream_numbers(name: str, value: str, accepts: str) -> dict[str, int]:
    """Spark's {"topic":{"0":n}} form (partition must be "0"); {"stream": n} is accepted too."""
    parsed = _json_object(name, value, accepts)
    result: dict[str, int] = {}
    for stream, entry in parsed.items():
        if isinstance(entry, dict):
            if set(entry) != {"0"}:
                raise VdlOptionError(
                    f"option '{name}': stream {stream!r} has exactly one partition, \"0\"; "
                    f"it accepts {accepts}, got {json.dumps(entry)}")
            entry = entry["0"]
        if isinstance(entry, bool) or not isinstance(entry, int):
            raise VdlOptionError(f"option '{name}': stream {stream!r} needs an integer; it accepts {accepts}")
        result[stream] = entry
    return result


def parse_offset_spec(name: str, value: str) -> OffsetSpec:
    """startingOffsets / endingOffsets: earliest | latest | JSON (-2 earliest, -1 latest)."""
    accepts = "'earliest', 'latest' or JSON such as {\"events\":{\"0\":42}} (-2 = earliest, -1 = latest)"
    word = value.strip().lower()
    if word in ("earliest", "latest"):
        return OffsetSpec(word, option=name)
    if not word.startswith("{"):
        raise VdlOptionError(f"option '{name}' accepts {accepts}, got {value!r}")
    offsets = _per_stream_numbers(name, value, accepts)
    for stream, offset in offsets.items():
        if offset < EARLIEST:
            raise VdlOptionError(f"option '{name}': offset {offset} for stream {stream!r} is invalid; it accepts {accepts}")
    return OffsetSpec("offsets", offsets, option=name)


def _timestamp_spec(options: _Options, prefix: str) -> OffsetSpec | None:
    global_name = f"{prefix}Timestamp"
    per_name = f"{prefix}OffsetsByTimestamp"
    if options.has(global_name):
        ts = _int(global_name, options.get(global_name), None, minimum=0)
        return OffsetSpec("timestamp", timestamp=ts, option=global_name)
    if options.has(per_name):
        accepts = 'JSON such as {"events":{"0":1700000000000}} (milliseconds since the epoch)'
        stamps = _per_stream_numbers(per_name, options.get(per_name) or "", accepts)
        for stream, ts in stamps.items():
            if ts < 0:
                raise VdlOptionError(f"option '{per_name}': timestamp {ts} for stream {stream!r} is negative; it accepts {accepts}")
        return OffsetSpec("timestamps", stamps, option=per_name)
    return None


def _position(options: _Options, prefix: str) -> OffsetSpec | None:
    # Spark's precedence: xTimestamp > xOffsetsByTimestamp > xOffsets.
    spec = _timestamp_spec(options, prefix)
    if spec is not None:
        return spec
    name = f"{prefix}Offsets"
    value = options.get(name)
    return None if value is None else parse_offset_spec(name, value)


def parse_replica_preference(value: str | None) -> ReplicaPreference:
    """preferReplicas: 'leader' | 'any' (the default) | 'rack:<name>'."""
    if value is None:
        return ReplicaPreference()
    word = value.strip()
    if word.lower() in ("leader", "any"):
        return ReplicaPreference(word.lower())
    if word[:5].lower() == "rack:" and word[5:].strip():
        return ReplicaPreference("rack", word[5:].strip())
    raise VdlOptionError(f"option 'preferReplicas' accepts {PREFER_REPLICAS_ACCEPTS}, got {value!r}")


def _isolation_level(options: _Options) -> int:
    """kafka.isolation.level (or isolation.level): read_uncommitted (the default) | read_committed."""
    name, value = options.first("kafka.isolation.level", "isolation.level")
    if value is None:
        return ISOLATION_LEVELS["read_uncommitted"]
    level = ISOLATION_LEVELS.get(value.strip().lower())
    if level is None:
        raise VdlOptionError(f"option '{name}' accepts {' or '.join(repr(k) for k in ISOLATION_LEVELS)}, "
                             f"got {value!r}")
    return level


def parse_source_options(raw: Mapping[str, str]) -> SourceOptions:
    options = _Options(raw)
    poll_timeout = _int("kafkaConsumer.pollTimeoutMs", options.get("kafkaConsumer.pollTimeoutMs"), 120_000)
    client = replace(_client(options, poll_timeout or 120_000), isolation_level=_isolation_level(options))
    subscription = _subscription(options)
    starting = _position(options, "starting")
    ending = _position(options, "ending")
    if ending is not None and ending.kind == "earliest":
        raise VdlOptionError("option 'endingOffsets' accepts 'latest' or JSON offsets; 'earliest' is not allowed")
    if ending is not None and ending.kind == "offsets" and EARLIEST in ending.per_stream.values():
        raise VdlOptionError("option 'endingOffsets': -2 (earliest) is not allowed as an ending offset")
    strategy = (options.get("startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise VdlOptionError("option 'startingOffsetsByTimestampStrategy' accepts 'error' or 'latest', "
                             f"got {options.get('startingOffsetsByTimestampStrategy')!r}")
    commit_group = options.get("commitOffsetsToGroup")
    if commit_group is not None and not commit_group.strip():
        raise VdlOptionError("option 'commitOffsetsToGroup' must be a consumer group id (a non-empty string)")
    delay_value = options.get("maxTriggerDelay")
    delay = 15 * 60 * 1000 if delay_value is None else parse_duration_ms("maxTriggerDelay", delay_value)
    fetch_name, fetch_value = options.first("kafka.fetch.max.bytes", "fetch.max.bytes")
    part_name, part_value = options.first("kafka.max.partition.fetch.bytes", "max.partition.fetch.bytes")
    wait_name, wait_value = options.first("kafka.fetch.max.wait.ms", "fetch.max.wait.ms")
    return SourceOptions(
        client=client,
        subscription=subscription,
        starting=starting,
        ending=ending,
        fail_on_data_loss=_bool("failOnDataLoss", options.get("failOnDataLoss"), True),
        max_offsets_per_trigger=_int("maxOffsetsPerTrigger", options.get("maxOffsetsPerTrigger"), None),
        min_offsets_per_trigger=_int("minOffsetsPerTrigger", options.get("minOffsetsPerTrigger"), None),
        max_trigger_delay_ms=delay,
        min_partitions=_int("minPartitions", options.get("minPartitions"), None),
        max_records_per_partition=_int("maxRecordsPerPartition", options.get("maxRecordsPerPartition"), None),
        include_headers=_bool("includeHeaders", options.get("includeHeaders"), False),
        fetch_max_bytes=_int(fetch_name, fetch_value, 64 * 1024 * 1024) or 0,
        max_partition_fetch_bytes=_int(part_name, part_value, 16 * 1024 * 1024) or 0,
        fetch_max_wait_ms=_int(wait_name, wait_value, 500, minimum=0) or 0,
        poll_timeout_ms=poll_timeout or 120_000,
        fetch_offset_num_retries=_int("fetchOffset.numRetries", options.get("fetchOffset.numRetries"), 3,
                                      minimum=0) or 0,
        fetch_offset_retry_interval_ms=_int("fetchOffset.retryIntervalMs",
                                            options.get("fetchOffset.retryIntervalMs"), 10, minimum=0) or 0,
        timestamp_strategy=strategy,
        commit_group=commit_group.strip() if commit_group else None,
        prefer_replicas=parse_replica_preference(options.get("preferReplicas")),
        value_json_schema=_value_json_schema(options.get("valueJsonSchema")),
    )


def _value_json_schema(text: str | None) -> str | None:
    """valueJsonSchema, checked here (on the driver, at load()); kept as its text."""
    if text is None:
        return None
    from vdl_connector.json_values import parse_value_schema  # it imports this module

    parse_value_schema(text)
    return text


def check_batch_source(options: SourceOptions) -> None:
    """Spark's batch rules: reading cannot start at 'latest' (it would read nothing)."""
    start = options.starting
    if start is not None and start.kind == "latest":
        raise VdlOptionError("option 'startingOffsets': 'latest' is not allowed for batch queries "
                             "(use 'earliest' or JSON offsets)")
    if start is not None and start.kind == "offsets" and LATEST in start.per_stream.values():
        raise VdlOptionError("option 'startingOffsets': -1 (latest) is not allowed for batch queries")
    if options.commit_group is not None:
        raise VdlOptionError("option 'commitOffsetsToGroup' is only valid for streaming queries (spark.readStream)")


def check_streaming_source(options: SourceOptions) -> None:
    """Spark's streaming rules: there is no end to a stream."""
    if options.ending is not None:
        raise VdlOptionError(
            f"option '{options.ending.option}' is only valid for batch queries (spark.read), "
            "not for streaming queries")


def parse_sink_options(raw: Mapping[str, str]) -> SinkOptions:
    options = _Options(raw)
    name, value = options.first("kafka.delivery.timeout.ms", "delivery.timeout.ms")
    delivery = _int(name, value, 120_000) or 120_000
    client = _client(options, delivery)
    topic = options.get("topic")
    if topic is not None and not topic.strip():
        raise VdlOptionError("option 'topic' must be a non-empty stream name")
    batch_name, batch_value = options.first("kafka.batch.size", "batch.size")
    comp_name, comp_value = options.first("kafka.compression.type", "compression.type")
    compression = (comp_value or "none").strip().lower()
    if compression not in COMPRESSIONS:
        raise VdlOptionError(f"option '{comp_name}' accepts {', '.join(COMPRESSIONS)}, got {comp_value!r}")
    mode_value = options.get("exactlyOnce")
    mode = "true" if mode_value is None else mode_value.strip().lower()
    if mode not in EXACTLY_ONCE_MODES:
        raise VdlOptionError(f"option 'exactlyOnce' accepts {', '.join(repr(m) for m in EXACTLY_ONCE_MODES)}, "
                             f"got {mode_value!r}")
    timeout_name, timeout_value = options.first("kafka.transaction.timeout.ms", "transaction.timeout.ms")
    timeout = _int(timeout_name, timeout_value, MAX_TRANSACTION_TIMEOUT_MS) or MAX_TRANSACTION_TIMEOUT_MS
    if timeout > MAX_TRANSACTION_TIMEOUT_MS:
        raise VdlOptionError(f"option '{timeout_name}' must be at most {MAX_TRANSACTION_TIMEOUT_MS} (the "
                             f"coordinator's transaction.max.timeout.ms), got {timeout_value!r}")
    return SinkOptions(
        client=client,
        topic=topic.strip() if topic else None,
        create_streams=_bool("createStreams", options.get("createStreams"), False),
        exactly_once=mode != "false",
        transactional=mode == "transactional",
        transaction_timeout_ms=timeout,
        batch_size=_int(batch_name, batch_value, None) or (DEFAULT_BATCH_SIZE if topic else FAN_OUT_BATCH_SIZE),
        compression=compression,
        delivery_timeout_ms=delivery,
        checkpoint_location=options.get("checkpointLocation"),
    )
