"""Per-stream configs: validation at the proposer, structural apply, effective settings."""

from __future__ import annotations

import pytest

from tests.unit.cluster.test_cluster_metadata import apply, state_with
from vdl_broker.cluster.metadata import Outcome, create_stream_command, decode_command, encode_command
from vdl_broker.cluster.stream_configs import (
    CONFIG_KEYS,
    AlterOp,
    ConfigProblem,
    StreamSettings,
    TableSettings,
    alter_stream_config_command,
    altered,
    canonical_value,
    stream_settings,
    validated,
)
from vdl_broker.log import LogConfig
from vdl_broker.server.stream_settings import with_settings

NODE = {"retention_ms": -1, "retention_bytes": -1, "segment_bytes": 1 << 30, "segment_ms": 604800000,
        "max_batch_bytes": 16 << 20, "compression_type": "producer"}


@pytest.mark.parametrize(("name", "value", "stored"), [
    ("retention.ms", " 60000", "60000"), ("retention.ms", "-1", "-1"), ("retention.bytes", "0", "0"),
    ("segment.bytes", "1024", "1024"), ("segment.ms", "1", "1"), ("max.message.bytes", "0", "0"),
    ("cleanup.policy", "Delete", "delete"), ("cleanup.policy", "compact", "compact"),
    ("cleanup.policy", "compact,delete", "compact,delete"), ("cleanup.policy", " Delete , compact", "delete,compact"),
    ("cleanup.policy", "", ""), ("min.compaction.lag.ms", "86400000", "86400000"),
    ("max.compaction.lag.ms", "1", "1"), ("delete.retention.ms", "0", "0"), ("vdl.table.format", "JSON", "json"), ("vdl.table.partition.by", "day", "day"),
    ("vdl.table.path", "/data/orders", "/data/orders"), ("vdl.table.path", "s3://bucket/orders", "s3://bucket/orders"),
    ("vdl.table.schema", "id BIGINT, amount DOUBLE", "id BIGINT, amount DOUBLE"),
])
def test_accepted_values_are_stored_canonical(name: str, value: str, stored: str) -> None:
    assert canonical_value(name, value) == stored


@pytest.mark.parametrize(("name", "value", "message"), [
    ("retention.ms", "soon", "retention.ms: 'soon' is not an integer >= -1"),
    ("retention.ms", "-2", "retention.ms: '-2' is not an integer >= -1"),
    ("segment.bytes", "1023", "segment.bytes: '1023' is not an integer in 1024..2147483647"),
    ("segment.bytes", "2147483648", "segment.bytes: '2147483648' is not an integer in 1024..2147483647"),
    ("segment.ms", "0", "segment.ms: '0' is not an integer >= 1"),
    ("max.message.bytes", "1.5", "max.message.bytes: '1.5' is not an integer in 0..2147483647"),
    ("vdl.table.format", "avro", "vdl.table.format: 'avro' is not one of raw | json"),
    ("vdl.table.partition.by", "hour", "vdl.table.partition.by: 'hour' is not one of none | day"),
    ("vdl.table.path", "relative/dir", "vdl.table.path: must be an absolute local path or a URI"),
    ("vdl.table.path", "ftp://host/x", "vdl.table.path: URI scheme 'ftp' is not one of"),
    ("vdl.table.schema", "id BIGNUM", "vdl.table.schema: not a Spark DDL schema: unknown type"),
    ("vdl.table.lag.ms", "99", "vdl.table.lag.ms: '99' is not an integer >= 100"),
    ("retention.ms", None, "retention.ms needs a value (an integer >= -1)"),
    ("cleanup.policy", "shrink", "cleanup.policy: 'shrink' is not one of delete, compact, compact,delete (either "
     "order) or empty (keep every record)"),
    ("cleanup.policy", "compact,compact", "cleanup.policy: 'compact,compact' is not one of delete, compact, "),
    ("cleanup.policy", "compact,", "cleanup.policy: 'compact,' is not one of delete, compact, "),
    ("cleanup.policy", None, "cleanup.policy needs a value (delete, compact, compact,delete (either order) or empty"),
    ("min.compaction.lag.ms", "-1", "min.compaction.lag.ms: '-1' is not an integer >= 0"),
    ("max.compaction.lag.ms", "0", "max.compaction.lag.ms: '0' is not an integer >= 1"),
    ("unclean.leader.election.enable", "true", "unclean.leader.election.enable: 'true' is not one of false"),
    ("message.timestamp.type", "ArrivalTime",
     "message.timestamp.type: 'ArrivalTime' is not one of CreateTime | LogAppendTime"),
    ("compression.type", "brotli", "compression.type: 'brotli' is not one of uncompressed | zstd | lz4 | snappy | "
     "gzip | producer"),
    ("nope.nope", "true", "unknown stream config 'nope.nope' (accepted: retention.ms, retention.bytes"),
    # Kafka 4.4's own refusals of these (# Kafka: LogConfig), each naming the range it accepts.
    ("file.delete.delay.ms", "-1", "file.delete.delay.ms: '-1' is not an integer >= 0"),
    ("file.delete.delay.ms", "x", "file.delete.delay.ms: 'x' is not an integer >= 0"),
    ("compression.gzip.level", "0", "compression.gzip.level: '0' is not in 1..9 or -1"),
    ("compression.zstd.level", "23", "compression.zstd.level: '23' is not an integer in -131072..22"),
    ("compression.lz4.level", "18", "compression.lz4.level: '18' is not an integer in 1..17"),
    ("min.cleanable.dirty.ratio", "1.5", "min.cleanable.dirty.ratio: '1.5' is not a number in 0..1"),
    ("min.cleanable.dirty.ratio", "NaN", "min.cleanable.dirty.ratio: 'NaN' is not a number in 0..1"),
    ("preallocate", "yes", "preallocate: 'yes' is not true | false"),
    ("segment.index.bytes", "3", "segment.index.bytes: '3' is not an integer in 4..2147483647"),
    ("local.retention.ms", "-3", "local.retention.ms: '-3' is not an integer >= -2"),
    ("flush.messages", "0", "flush.messages: '0' is not an integer >= 1"),
    ("max.decompressed.message.bytes", "2147483647", "max.decompressed.message.bytes: '2147483647' is not an "
     "integer in 1..2147483639"),
    ("leader.replication.throttled.replicas", "x", "leader.replication.throttled.replicas: 'x' is not the literal "
     "'*' or a list [partitionId]:[brokerId],[partitionId]:[brokerId],..."),
    ("remote.storage.enable", "true", "remote.storage.enable: 'true' is not one of false (VDL has no Kafka tiered "
     "storage: a stream tiers to a Delta table, vdl.table.path)"),
])
def test_bad_values_name_the_key_and_what_it_accepts(name: str, value: str | None, message: str) -> None:
    with pytest.raises(ConfigProblem) as caught:
        canonical_value(name, value)
    assert str(caught.value).startswith(message)


def test_kafkas_defaults_that_are_all_a_vdl_log_does_are_accepted_in_kafkas_spelling() -> None:
    """Kafka Streams names message.timestamp.type=CreateTime on its internal topics; provisioning
    scripts pass Kafka's defaults: stored as Kafka spells them, whatever the case given."""
    assert validated({"message.timestamp.type": "createtime", "compression.type": "PRODUCER",
                      "unclean.leader.election.enable": "False", "cleanup.policy": "Delete"}, 3) == {
        "message.timestamp.type": "CreateTime", "compression.type": "producer",
        "unclean.leader.election.enable": "false", "cleanup.policy": "delete"}


@pytest.mark.parametrize(("policy", "deletes"), [
    (None, True), ("delete", True), ("compact", False), ("compact,delete", True), ("delete,compact", True), ("", False),
])
def test_retention_deletes_only_with_the_delete_policy(policy: str | None, deletes: bool) -> None:
    """VDL never compacts: a stream whose policy lacks delete keeps every record (its
    retention.ms / retention.bytes stay described, as in Kafka, and delete nothing)."""
    config = {"retention.ms": "1000", "retention.bytes": "10"} | ({} if policy is None else {"cleanup.policy": policy})
    settings = stream_settings(config, NODE)
    assert (settings.retention_ms, settings.retention_bytes, settings.retention_deletes) == (1000, 10, deletes)
    log_config = with_settings(LogConfig(), settings)
    assert (log_config.retention_ms, log_config.retention_bytes) == ((1000, 10) if deletes else (-1, -1))


def test_json_format_needs_a_schema() -> None:
    with pytest.raises(ConfigProblem, match=r"^vdl.table.schema: required when vdl.table.format=json"):
        validated({"vdl.table.path": "/t", "vdl.table.format": "json"}, 3)
    assert validated({"vdl.table.format": "json", "vdl.table.schema": "a INT"}, 3) == {
        "vdl.table.format": "json", "vdl.table.schema": "a INT"}
    with pytest.raises(ConfigProblem, match="vdl.table.schema: required"):
        altered({"vdl.table.format": "json", "vdl.table.schema": "a INT"}, [("vdl.table.schema", AlterOp.DELETE, None)], 3)


def test_an_empty_value_unsets_a_key_without_a_default_and_is_refused_where_it_means_nothing() -> None:
    # "" is how such a key is described while unset: a config read back and written whole
    # (AlterConfigs, CreateTopics) or set alone (IncrementalAlterConfigs) leaves it unset.
    assert validated({"vdl.table.path": "", "vdl.table.schema": " ", "retention.ms": "5"}, 3) == {"retention.ms": "5"}
    assert altered({"vdl.table.path": "/t", "vdl.table.schema": "a INT"}, [("vdl.table.schema", AlterOp.SET, "")],
                   3) == ({}, ["vdl.table.schema"])
    with pytest.raises(ConfigProblem, match=r"^retention.ms: '' is not an integer >= -1$"):
        validated({"retention.ms": ""}, 3)
    with pytest.raises(ConfigProblem, match=r"^vdl.table.schema: required when vdl.table.format=json"):
        altered({"vdl.table.format": "json", "vdl.table.schema": "a INT"}, [("vdl.table.schema", AlterOp.SET, "")], 3)


def test_altered_sets_and_deletes_and_refuses_list_operations_on_other_keys() -> None:
    current = {"retention.ms": "1000", "segment.ms": "5"}
    to_set, to_delete = altered(current, [("retention.ms", AlterOp.SET, "2000"), ("segment.ms", AlterOp.DELETE, None)],
                                3)
    assert (to_set, to_delete) == ({"retention.ms": "2000"}, ["segment.ms"])
    with pytest.raises(ConfigProblem, match=r"^retention.ms: APPEND applies to list configs only \(cleanup.policy, "
                       r"follower.replication.throttled.replicas, leader.replication.throttled.replicas\); use SET$"):
        altered(current, [("retention.ms", AlterOp.APPEND, "1")], 3)
    with pytest.raises(ConfigProblem, match="^unknown stream config 'nope'"):
        altered(current, [("nope", AlterOp.DELETE, None)], 3)
    with pytest.raises(ConfigProblem, match="^retention.ms: named more than once"):
        altered(current, [("retention.ms", AlterOp.SET, "1"), ("retention.ms", AlterOp.DELETE, None)], 3)
    with pytest.raises(ConfigProblem, match="unknown operation 7"):
        altered(current, [("retention.ms", 7, "1")], 3)


@pytest.mark.parametrize(("current", "operation", "value", "result"), [
    ({}, AlterOp.APPEND, "compact", "delete,compact"),  # from the default `delete`
    ({"cleanup.policy": "compact"}, AlterOp.APPEND, "delete,compact", "compact,delete"),
    ({"cleanup.policy": "delete,compact"}, AlterOp.APPEND, "compact", "delete,compact"),
    ({"cleanup.policy": "compact,delete"}, AlterOp.SUBTRACT, "delete", "compact"),
    ({"cleanup.policy": "compact"}, AlterOp.SUBTRACT, "compact", ""),
    ({}, AlterOp.SUBTRACT, "compact", "delete"),
])
def test_append_and_subtract_on_the_list_config(current: dict[str, str], operation: AlterOp, value: str,
                                                result: str) -> None:
    """Kafka's ConfigAdminManager: APPEND adds what is missing at the end, SUBTRACT removes."""
    assert altered(current, [("cleanup.policy", operation, value)], 3) == ({"cleanup.policy": result}, [])


@pytest.mark.parametrize(("replicas", "accepted", "refused"), [(1, ["1"], ["2", "0"]), (3, ["1", "2"], ["3", "-1", "x"]),
                                                               (5, ["1", "2", "3"], ["4", "5"])])
def test_min_insync_replicas_up_to_the_majority_is_accepted_and_not_stored(
        replicas: int, accepted: list[str], refused: list[str]) -> None:
    """Kafka guides create topics with min.insync.replicas=2 for 3 replicas: what a Raft stream
    gives anyway. Accepted at a create and an alter, never stored; above the majority refused."""
    for value in accepted:
        assert validated({"min.insync.replicas": value, "retention.ms": "1000"}, replicas) == {"retention.ms": "1000"}
        assert altered({"segment.ms": "5"}, [("min.insync.replicas", AlterOp.SET, value)], replicas) == ({}, [])
    assert altered({"segment.ms": "5"}, [("min.insync.replicas", AlterOp.DELETE, None)], replicas) == ({}, [])
    most = replicas // 2 + 1
    for value in refused:
        message = (f"min.insync.replicas: {value!r} is not an integer in 1..{most}: a write is acknowledged once a "
                   f"majority of the stream's {replicas} replica(s) hold it (Raft), never fewer or more")
        with pytest.raises(ConfigProblem) as caught:
            validated({"min.insync.replicas": value}, replicas)
        assert str(caught.value) == message
        with pytest.raises(ConfigProblem) as caught:
            altered({}, [("min.insync.replicas", AlterOp.SET, value)], replicas)
        assert str(caught.value) == message


def test_replication_throttles_are_kafkas_list_configs() -> None:
    """kafka-reassign-partitions --throttle APPENDs them and --verify deletes them; VDL has no
    throttles, but stores and describes them as Kafka does."""
    assert altered({}, [("leader.replication.throttled.replicas", AlterOp.APPEND, "0:1, 0:2")], 3) == (
        {"leader.replication.throttled.replicas": "0:1,0:2"}, [])
    assert altered({"follower.replication.throttled.replicas": "*"},
                   [("follower.replication.throttled.replicas", AlterOp.DELETE, None)], 3) == ({}, [
                       "follower.replication.throttled.replicas"])


# Every Kafka 4.4 topic config VDL refused before, with a value Kafka 4.4 accepts (a real broker:
# vdl_dev.kafka_peer) and the value stored.
KAFKA_ONLY_VALUES = {
    "file.delete.delay.ms": ("0", "0"), "flush.messages": ("1", "1"), "flush.ms": ("1000", "1000"),
    "index.interval.bytes": ("0", "0"), "segment.index.bytes": ("4", "4"), "segment.jitter.ms": ("10", "10"),
    "preallocate": ("TRUE", "true"), "min.cleanable.dirty.ratio": ("0.25", "0.25"),
    "compression.gzip.level": ("-1", "-1"), "compression.lz4.level": ("17", "17"),
    "compression.zstd.level": ("-131072", "-131072"), "local.retention.ms": ("-2", "-2"),
    "local.retention.bytes": ("1024", "1024"), "remote.copy.lag.ms": ("-1", "-1"),
    "remote.copy.lag.bytes": ("-1", "-1"), "remote.log.copy.disable": ("true", "true"),
    "remote.log.delete.on.disable": ("false", "false"), "remote.storage.enable": ("false", "false"),
    "message.timestamp.after.max.ms": ("0", "0"), "message.timestamp.before.max.ms": ("5", "5"),
    "max.decompressed.message.bytes": ("1023", "1023"), "errors.deadletterqueue.group.enable": ("true", "true"),
    "leader.replication.throttled.replicas": ("*", "*"), "follower.replication.throttled.replicas": ("0:1", "0:1"),
    "retention.bytes": ("-5", "-5"),
}


def test_every_kafka_topic_config_kafka_accepts_is_accepted_and_stored() -> None:
    assert validated({name: given for name, (given, _) in KAFKA_ONLY_VALUES.items()}, 3) == {
        name: stored for name, (_, stored) in KAFKA_ONLY_VALUES.items()}


def test_metadata_applies_alter_commands_on_every_node_alike() -> None:
    state, log = state_with(3)
    assert apply(state, log, create_stream_command("events", 3, {"retention.ms": "1000"})).ok
    result = apply(state, log, alter_stream_config_command("events", {"segment.bytes": "4096"}, ["retention.ms"]))
    assert result.ok and result.op == "alter_stream_config"
    assert state.streams["events"].config == {"segment.bytes": "4096"}
    assert result.stream == state.streams["events"]
    assert apply(state, log, alter_stream_config_command("missing", {"segment.ms": "1"}, [])).outcome is Outcome.UNKNOWN
    assert apply(state, log, {"op": "alter_stream_config", "name": "events", "set": ["x"], "delete": []}).outcome \
        is Outcome.INVALID_COMMAND
    assert apply(state, log, {"op": "alter_stream_config", "name": "events", "set": {"a": 1}, "delete": []}).outcome \
        is Outcome.INVALID_COMMAND
    assert state.streams["events"].config == {"segment.bytes": "4096"}
    # Replaying the same log elsewhere reaches the same state.
    replica, _ = state_with(0)
    for index, payload in enumerate(log, start=1):
        replica.apply_entry(index, [decode_command(payload)])
    assert replica.streams == state.streams


def test_old_entries_with_any_config_still_apply() -> None:
    """Entries written before configs were checked carry whatever a client sent (ints, unknown
    keys): they still create the stream, and unknown or bad values count as unset."""
    state, log = state_with(1)
    assert apply(state, log, create_stream_command("old", 1, {"retention.ms": 1000, "cleanup.policy": "delete",
                                                              "segment.bytes": "tiny"})).ok
    settings = stream_settings(state.streams["old"].config, NODE)
    assert settings.retention_ms == 1000 and settings.segment_bytes == 1 << 30


def test_proposer_refuses_a_bad_create_config() -> None:
    state, _ = state_with(1)
    refused = state.check_create("events", None, {"retention.ms": "x"})
    assert refused is not None and refused.outcome is Outcome.INVALID_CONFIG
    assert refused.message == "retention.ms: 'x' is not an integer >= -1"
    assert state.check_create("events", None, {"retention.ms": "5"}) is None
    assert decode_command(encode_command(create_stream_command("e", None, {"retention.ms": "5"})))["config"] == {
        "retention.ms": "5"}


def test_effective_settings_take_the_stream_value_else_the_node_default() -> None:
    assert stream_settings({}, NODE) == StreamSettings(-1, -1, 1 << 30, 604800000, 16 << 20, None)
    settings = stream_settings({"retention.bytes": "100", "max.message.bytes": "2048", "vdl.table.path": "/t",
                                "vdl.table.partition.by": "day"}, NODE | {"retention_ms": 5})
    assert settings == StreamSettings(5, 100, 1 << 30, 604800000, 2048, TableSettings(
        "/t", "raw", None, 5000, "day", 600000, 128 << 20, 3600000, 604800000))
    assert settings.table is not None and settings.table.dead_letter_path == "/t_dlq"


def test_every_key_documents_itself() -> None:
    for key in CONFIG_KEYS.values():
        assert key.doc and key.type
        assert key.node_setting is None or key.node_setting in NODE


def test_compression_type_and_log_append_time_settings() -> None:
    """compression.type's codec with its KIP-390 level (the codec's own key: gzip's default is
    zlib's, -1), none for producer and snappy's level; LogAppendTime as a flag."""
    from vdl_wire.records.compression import Compression

    def of(config: dict[str, str]) -> tuple[Compression | None, int | None, bool]:
        settings = stream_settings(config, NODE)
        return settings.compression, settings.compression_level, settings.log_append_time

    assert of({}) == (None, None, False)
    assert of({"compression.type": "producer", "compression.zstd.level": "9"}) == (None, None, False)
    assert of({"compression.type": "gzip"}) == (Compression.GZIP, -1, False)
    assert of({"compression.type": "zstd", "compression.zstd.level": "-7", "compression.gzip.level": "9"}) == (
        Compression.ZSTD, -7, False)
    assert of({"compression.type": "lz4"}) == (Compression.LZ4, 9, False)
    assert of({"compression.type": "snappy"}) == (Compression.SNAPPY, None, False)
    assert of({"compression.type": "uncompressed", "message.timestamp.type": "LogAppendTime"}) == (
        Compression.NONE, None, True)
    # The node's compression_type (Kafka's broker compression.type) when the stream sets none.
    assert stream_settings({}, NODE | {"compression_type": "lz4"}).compression == Compression.LZ4
    assert stream_settings({"compression.type": "producer"}, NODE | {"compression_type": "lz4"}).compression is None
    assert validated({"compression.type": "GZIP", "message.timestamp.type": "logappendtime"}, 3) == {
        "compression.type": "gzip", "message.timestamp.type": "LogAppendTime"}
