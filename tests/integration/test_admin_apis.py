"""DeleteRecords (21), OffsetForLeaderEpoch (23), AlterConfigs (33), CreatePartitions (37),
DescribeCluster (60) and the BROKER_LOGGER and CLIENT_METRICS resources of DescribeConfigs (32) and
IncrementalAlterConfigs (44) with raw requests, on one node and on a 3-node cluster: the exact answers
Kafka's clients read."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.support.cluster import BrokerProcess
from tests.support.kafka import (
    create_topic_raw,
    fetch_partition,
    list_offset_raw,
    metadata_raw,
    one_record_batch,
    produce_raw,
    raw_request,
    record_values,
)
from tests.support.waiting import wait_until
from vdl_broker.server.handlers.create_partitions import refusal
from vdl_dev.dev_cluster import DevCluster
from vdl_wire import messages as m
from vdl_wire.errors import ErrorCode
from vdl_wire.records.batch_header import parse_batch_header
from vdl_wire.records.record_batch import iter_batches

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS = 2, 4, 8, 16  # config resource types
SET, DELETE, APPEND = 0, 1, 2  # IncrementalAlterConfigs operations
ZERO_ID = uuid.UUID(int=0)  # Kafka's "no topic id"


def describe_cluster(address: str, version: int = 1, operations: bool = False, endpoint_type: int = 1) -> Any:
    request = m.DescribeClusterRequest(include_cluster_authorized_operations=operations, endpoint_type=endpoint_type)
    return raw_request(address, request, version)


def stream_config(address: str, stream: str) -> dict[str, str]:
    """The stream's own settings (source 1, DYNAMIC_TOPIC_CONFIG)."""
    resource = m.DescribeConfigsRequest.DescribeConfigsResource(resource_type=TOPIC, resource_name=stream)
    result = raw_request(address, m.DescribeConfigsRequest(resources=[resource]), 4).results[0]
    assert result.error_code == 0
    return {c.name: c.value for c in result.configs if c.config_source == 1}


def alter_configs(address: str, stream: str, configs: dict[str, str | None], validate_only: bool = False,
                  version: int = 2, resource_type: int = TOPIC) -> tuple[int, str | None]:
    resource = m.AlterConfigsRequest.AlterConfigsResource(
        resource_type=resource_type, resource_name=stream,
        configs=[m.AlterConfigsRequest.AlterableConfig(name=k, value=v) for k, v in configs.items()])
    result = raw_request(address, m.AlterConfigsRequest(resources=[resource], validate_only=validate_only),
                         version).responses[0]
    assert (result.resource_type, result.resource_name) == (resource_type, stream)
    return result.error_code, result.error_message


def create_partitions(address: str, counts: dict[str, int], validate_only: bool = False, version: int = 3) -> list[
        tuple[str, int, str | None]]:
    request = m.CreatePartitionsRequest(topics=[
        m.CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=count) for name, count in counts.items()],
        timeout_ms=5000, validate_only=validate_only)
    return [(r.name, r.error_code, r.error_message) for r in raw_request(address, request, version).results]


def delete_records(address: str, offsets: dict[tuple[str, int], int], version: int = 2,
                   timeout_ms: int = 10_000) -> list[tuple[str, int, int, int]]:
    """(stream, partition, error code, low watermark) per partition asked."""
    streams = list(dict.fromkeys(name for name, _ in offsets))
    request = m.DeleteRecordsRequest(timeout_ms=timeout_ms, topics=[m.DeleteRecordsRequest.DeleteRecordsTopic(
        name=name, partitions=[m.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=p, offset=o)
                               for (n, p), o in offsets.items() if n == name]) for name in streams])
    response = raw_request(address, request, version, timeout=timeout_ms / 1000 + 5)
    return [(t.name, p.partition_index, p.error_code, p.low_watermark) for t in response.topics for p in t.partitions]


def produce_values(address: str, stream: str, count: int) -> None:
    """`count` one-record batches v0.., so every offset starts a batch."""
    for i in range(count):
        assert produce_raw(address, stream, one_record_batch(b"v%d" % i))[0] == 0


def epoch_end(address: str, stream: str, leader_epoch: int, current: int = -1, version: int = 4,
              partition: int = 0) -> tuple[int, int, int]:
    """(error code, leader epoch, end offset) of an OffsetForLeaderEpoch for one partition."""
    request = m.OffsetForLeaderEpochRequest(replica_id=-1, topics=[m.OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
        topic=stream, partitions=[m.OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
            partition=partition, current_leader_epoch=current, leader_epoch=leader_epoch)])])
    response = raw_request(address, request, version)
    assert [t.topic for t in response.topics] == [stream]
    result = response.topics[0].partitions[0]
    assert result.partition == partition
    return result.error_code, result.leader_epoch, result.end_offset


def metadata_epoch(address: str, stream: str) -> int:
    return metadata_raw(address, [stream]).topics[0].partitions[0].leader_epoch


# ---- one node -----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_offset_for_leader_epoch_one_node(module_broker: BrokerProcess, version: int) -> None:
    stream, address = f"ofle-{version}", module_broker.bootstrap
    assert create_topic_raw(address, stream) == (0, None)
    produce_values(address, stream, 3)
    epoch = metadata_epoch(address, stream)
    assert epoch >= 1
    # batches carry the term they were written in
    assert {parse_batch_header(b).partition_leader_epoch
            for _, b in iter_batches(memoryview(fetch_partition(address, stream, 0).records))} == {epoch}
    listed = m.ListOffsetsRequest(replica_id=-1, topics=[m.ListOffsetsRequest.ListOffsetsTopic(name=stream, partitions=[
        m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=t) for t in (-1, -2)])])
    assert [(p.offset, p.leader_epoch) for p in raw_request(address, listed, 4).topics[0].partitions] == [
        (3, epoch), (0, epoch)]
    answered_epoch = epoch if version >= 1 else -1  # v0 has no epoch in the answer
    assert epoch_end(address, stream, epoch, epoch, version) == (0, answered_epoch, 3)
    # Older than every entry (what releases before leader epochs stored carries the producer's
    # stamp): no truncation to report, the log end (Partition.end_offset_for_epoch).
    assert epoch_end(address, stream, epoch - 1, -1, version) == (0, epoch - 1 if version >= 1 else -1, 3)
    assert epoch_end(address, stream, epoch + 1, -1, version) == (0, -1, -1)
    if version >= 2:  # the current leader epoch fences stale and future clients
        assert epoch_end(address, stream, epoch, epoch - 1, version) == (ErrorCode.FENCED_LEADER_EPOCH, -1, -1)
        assert epoch_end(address, stream, epoch, epoch + 1, version) == (ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1)
    assert epoch_end(address, stream, epoch, -1, version, partition=1)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert epoch_end(address, "ofle-none", epoch, -1, version)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION



@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_records_moves_the_log_start(module_broker: BrokerProcess, version: int) -> None:
    stream, address = f"dr-{version}", module_broker.bootstrap
    assert create_topic_raw(address, stream) == (0, None)
    produce_values(address, stream, 10)
    assert delete_records(address, {(stream, 0): 4}, version) == [(stream, 0, 0, 4)]
    assert list_offset_raw(address, stream, -2) == (0, 4)
    below = fetch_partition(address, stream, 3)
    assert (below.error_code, below.log_start_offset, below.high_watermark) == (ErrorCode.OFFSET_OUT_OF_RANGE, 4, 10)
    at = fetch_partition(address, stream, 4)
    assert (at.error_code, at.log_start_offset, record_values(at.records)) == (
        0, 4, [(i, b"v%d" % i) for i in range(4, 10)])
    # below the start: nothing changes; -1: the high watermark
    assert delete_records(address, {(stream, 0): 2}, version) == [(stream, 0, 0, 4)]
    assert delete_records(address, {(stream, 0): -1}, version) == [(stream, 0, 0, 10)]
    assert list_offset_raw(address, stream, -2) == (0, 10)
    assert list_offset_raw(address, stream, -1) == (0, 10)
    produce_values(address, stream, 1)
    assert record_values(fetch_partition(address, stream, 10).records) == [(10, b"v0")]


def test_delete_records_refuses_bad_offsets_and_partitions(module_broker: BrokerProcess) -> None:
    address = module_broker.bootstrap
    assert create_topic_raw(address, "dr-bad") == (0, None)
    produce_values(address, "dr-bad", 3)
    assert delete_records(address, {("dr-bad", 0): 4, ("dr-bad", 1): 1, ("dr-none", 0): 1}) == [
        ("dr-bad", 0, ErrorCode.OFFSET_OUT_OF_RANGE, -1), ("dr-bad", 1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        ("dr-none", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]
    assert delete_records(address, {("dr-bad", 0): -2}) == [("dr-bad", 0, ErrorCode.OFFSET_OUT_OF_RANGE, -1)]
    assert delete_records(address, {("dr-bad", 0): 3}) == [("dr-bad", 0, 0, 3)]  # the high watermark itself


def test_delete_records_survives_a_restart(broker: BrokerProcess) -> None:
    address = broker.bootstrap
    assert create_topic_raw(address, "dr-restart") == (0, None)
    produce_values(address, "dr-restart", 5)
    assert delete_records(address, {("dr-restart", 0): 3}) == [("dr-restart", 0, 0, 3)]
    broker.restart()
    wait_until(lambda: list_offset_raw(address, "dr-restart", -2) == (0, 3), timeout=20,
               message=lambda: f"earliest {list_offset_raw(address, 'dr-restart', -2)}")
    assert record_values(fetch_partition(address, "dr-restart", 3).records) == [(3, b"v3"), (4, b"v4")]



@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster_one_node(module_broker: BrokerProcess, version: int) -> None:
    metadata = metadata_raw(module_broker.bootstrap, [])
    response = describe_cluster(module_broker.bootstrap, version)
    assert (response.error_code, response.error_message, response.cluster_id, response.controller_id) == (
        0, None, metadata.cluster_id, 1)
    assert [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers] == [(1, "127.0.0.1", module_broker.port,
                                                                                   None)]
    assert response.cluster_authorized_operations == -(1 << 31)  # not asked for
    assert response.endpoint_type == 1  # v0 has none: its default


def test_describe_cluster_authorized_operations_without_authorizer(module_broker: BrokerProcess) -> None:
    # Without an authorizer everything is allowed: CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
    # IDEMPOTENT_WRITE, ALTER, DESCRIBE (bits 5, 9, 10, 11, 12, 7, 8)
    response = describe_cluster(module_broker.bootstrap, operations=True)
    assert response.cluster_authorized_operations == sum(1 << b for b in (5, 7, 8, 9, 10, 11, 12)) == 0x1FA0


def test_describe_cluster_controllers_are_not_served(module_broker: BrokerProcess) -> None:
    response = describe_cluster(module_broker.bootstrap, endpoint_type=2)
    assert (response.error_code, response.endpoint_type, response.brokers) == (
        ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, 2, [])
    assert response.error_message == "VDL nodes are brokers only (endpoint type 1); their metadata leader is the controller"


def test_list_config_resources(module_broker: BrokerProcess) -> None:
    """ListConfigResources: v0 lists client-metrics resources (none: VDL collects no client
    metrics); v1 the types asked for, every type served when none is (topics are the streams,
    brokers and broker loggers the nodes, groups with dynamic configs none); a type not served
    is UNSUPPORTED_VERSION, as Kafka answers it."""
    address = module_broker.bootstrap
    assert create_topic_raw(address, "lcr-one") == (0, None)

    def listed(version: int, *types: int) -> tuple[int, list[tuple[str, int]]]:
        answer = raw_request(address, m.ListConfigResourcesRequest(resource_types=list(types)), version)
        return answer.error_code, [(r.resource_name, r.resource_type) for r in answer.config_resources]

    streams = sorted((t.name, 2) for t in metadata_raw(address, None).topics)
    assert ("lcr-one", 2) in streams
    assert listed(0) == (0, [])
    assert listed(1, 16) == (0, [])
    assert listed(1, 32) == (0, [])
    assert listed(1, 4) == (0, [("1", 4)])
    assert listed(1, 8) == (0, [("1", 8)])
    assert listed(1, 2) == (0, streams)
    assert listed(1) == (0, [("1", 8), ("1", 4), *streams])
    assert listed(1, 2, 0) == (ErrorCode.UNSUPPORTED_VERSION, [])


def test_create_partitions_is_refused(module_broker: BrokerProcess) -> None:
    assert create_topic_raw(module_broker.bootstrap, "cp-one") == (0, None)
    for validate_only in (False, True):
        assert create_partitions(module_broker.bootstrap, {"cp-one": 1, "cp-none": 2, "cp-one-more": 0},
                                 validate_only) == [
            ("cp-one", ErrorCode.INVALID_PARTITIONS,
             "VDL streams have exactly one partition (each is one Raft group): stream 'cp-one' has 1 and cannot have 1"),
            ("cp-none", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "unknown stream 'cp-none'"),
            ("cp-one-more", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "unknown stream 'cp-one-more'")]
    assert create_partitions(module_broker.bootstrap, {"cp-one": 4}, version=0) == [
        ("cp-one", ErrorCode.INVALID_PARTITIONS, refusal("cp-one", 4))]
    assert [p.partition_index for p in metadata_raw(module_broker.bootstrap, ["cp-one"]).topics[0].partitions] == [0]


def test_create_partitions_names_a_duplicate(module_broker: BrokerProcess) -> None:
    request = m.CreatePartitionsRequest(topics=[m.CreatePartitionsRequest.CreatePartitionsTopic(name="cp-twice", count=2)
                                                for _ in range(2)], timeout_ms=5000)
    results = raw_request(module_broker.bootstrap, request).results
    assert [(r.name, r.error_code, r.error_message) for r in results] == [
        ("cp-twice", ErrorCode.INVALID_REQUEST, "duplicate topic 'cp-twice' in the request")] * 2


@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_configs_replaces_the_whole_config(module_broker: BrokerProcess, version: int) -> None:
    stream = f"ac-whole-{version}"
    address = module_broker.bootstrap
    assert create_topic_raw(address, stream) == (0, None)
    assert alter_configs(address, stream, {"retention.ms": "60000", "segment.bytes": "1048576"},
                         version=version) == (0, None)
    assert stream_config(address, stream) == {"retention.ms": "60000", "segment.bytes": "1048576"}
    # Kafka semantics: what is not listed returns to its default
    assert alter_configs(address, stream, {"retention.bytes": "1000000"}, version=version) == (0, None)
    assert stream_config(address, stream) == {"retention.bytes": "1000000"}
    assert alter_configs(address, stream, {}, version=version) == (0, None)
    assert stream_config(address, stream) == {}


def test_alter_configs_validate_only_changes_nothing(module_broker: BrokerProcess) -> None:
    address = module_broker.bootstrap
    assert create_topic_raw(address, "ac-validate") == (0, None)
    assert alter_configs(address, "ac-validate", {"retention.ms": "1000"}) == (0, None)
    assert alter_configs(address, "ac-validate", {"segment.ms": "5000"}, validate_only=True) == (0, None)
    assert stream_config(address, "ac-validate") == {"retention.ms": "1000"}


def test_alter_configs_refuses_bad_input_and_changes_nothing(module_broker: BrokerProcess) -> None:
    address = module_broker.bootstrap
    assert create_topic_raw(address, "ac-bad") == (0, None)
    assert alter_configs(address, "ac-bad", {"retention.ms": "1000"}) == (0, None)
    assert alter_configs(address, "ac-bad", {"retention.ms": "soon"}) == (
        ErrorCode.INVALID_CONFIG, "retention.ms: 'soon' is not an integer >= -1")
    assert alter_configs(address, "ac-bad", {"cleanup.policy": "shrink"}) == (
        ErrorCode.INVALID_CONFIG, "cleanup.policy: 'shrink' is not one of delete, compact, compact,delete (either "
                                  "order) or empty (keep every record)")
    assert alter_configs(address, "ac-bad", {"unclean.leader.election.enable": "true"}) == (
        ErrorCode.INVALID_CONFIG, "unclean.leader.election.enable: 'true' is not one of false")
    code, message = alter_configs(address, "ac-bad", {"colour": "blue"})
    assert (code, message.split(" (accepted")[0]) == (ErrorCode.INVALID_CONFIG, "unknown stream config 'colour'")
    # Kafka 4.4's topic configs, refused where Kafka refuses them, naming what is accepted
    assert alter_configs(address, "ac-bad", {"preallocate": "yes"}) == (
        ErrorCode.INVALID_CONFIG, "preallocate: 'yes' is not true | false")
    assert alter_configs(address, "ac-bad", {"compression.zstd.level": "23"}) == (
        ErrorCode.INVALID_CONFIG, "compression.zstd.level: '23' is not an integer in -131072..22")
    assert alter_configs(address, "ac-bad", {"compression.type": "brotli"}) == (
        ErrorCode.INVALID_CONFIG, "compression.type: 'brotli' is not one of uncompressed | zstd | lz4 | snappy | "
                                  "gzip | producer")
    assert alter_configs(address, "ac-bad", {"message.timestamp.type": "ArrivalTime"}) == (
        ErrorCode.INVALID_CONFIG, "message.timestamp.type: 'ArrivalTime' is not one of CreateTime | LogAppendTime")
    assert alter_configs(address, "ac-bad", {"follower.replication.throttled.replicas": "0-1"}) == (
        ErrorCode.INVALID_CONFIG, "follower.replication.throttled.replicas: '0-1' is not the literal '*' or a list "
                                  "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    assert alter_configs(address, "ac-bad", {"retention.ms": None}) == (
        ErrorCode.INVALID_CONFIG, "retention.ms needs a value (an integer >= -1)")
    assert alter_configs(address, "ac-bad", {"vdl.table.format": "json"}) == (
        ErrorCode.INVALID_CONFIG, "vdl.table.schema: required when vdl.table.format=json (a Spark DDL schema)")
    assert alter_configs(address, "ac-none", {"retention.ms": "1"}) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "unknown stream 'ac-none'")
    assert stream_config(address, "ac-bad") == {"retention.ms": "1000"}


def test_alter_configs_answers_broker_resources_as_incremental_alter_configs(module_broker: BrokerProcess) -> None:
    assert alter_configs(module_broker.bootstrap, "1", {"log.retention.ms": "1"}, resource_type=BROKER) == (
        ErrorCode.INVALID_CONFIG, "log.retention.ms: node settings are static (node.toml or flags); a stream's own "
                                  "settings are altered on its TOPIC resource")


def test_describe_configs_with_an_empty_key_list_answers_every_config(module_broker: BrokerProcess) -> None:
    """An empty configuration key list is every config, as a null one (Kafka: ConfigHelper); it
    answered none. Each topic config's default synonym is named by the Kafka broker config it
    defaults to (ServerTopicConfigSynonyms), message.timestamp.type's too (it was named by the
    topic config); VDL's own configs have none, as a Kafka topic config without a broker one, and
    so have retention.ms and segment.ms while the node sets no default (Kafka 4.4 answers so: its
    log.retention.ms and log.roll.ms have no default of their own)."""
    address = module_broker.bootstrap
    assert create_topic_raw(address, "dc-all") == (0, None)
    every = describe_resource(address, TOPIC, "dc-all")
    empty = describe_resource(address, TOPIC, "dc-all", keys=[])
    assert (empty.error_code, empty.configs) == (0, every.configs)
    assert {c.name: [(s.name, s.value, s.source) for s in c.synonyms] for c in every.configs} == {
        "retention.ms": [],  # Kafka: log.retention.ms has no default (log.retention.hours has)
        "retention.bytes": [("log.retention.bytes", "-1", 5)],
        "segment.bytes": [("log.segment.bytes", "1073741824", 5)],
        "segment.ms": [],  # Kafka: log.roll.ms has no default (log.roll.hours has)
        "max.message.bytes": [("message.max.bytes", "16777216", 5)],
        "cleanup.policy": [("log.cleanup.policy", "delete", 5)],
        "min.compaction.lag.ms": [("log.cleaner.min.compaction.lag.ms", "0", 5)],
        "max.compaction.lag.ms": [("log.cleaner.max.compaction.lag.ms", "9223372036854775807", 5)],
        "delete.retention.ms": [("log.cleaner.delete.retention.ms", "86400000", 5)],
        "message.timestamp.type": [("log.message.timestamp.type", "CreateTime", 5)],
        "message.timestamp.before.max.ms": [("log.message.timestamp.before.max.ms", "9223372036854775807", 5)],
        "message.timestamp.after.max.ms": [("log.message.timestamp.after.max.ms", "3600000", 5)],
        "compression.type": [("compression.type", "producer", 5)],
        "unclean.leader.election.enable": [("unclean.leader.election.enable", "false", 5)],
        # Kafka 4.4's other topic configs, with the synonyms a Kafka 4.4 broker answers (its defaults)
        **KAFKA_DEFAULT_SYNONYMS,
        # Kafka 4.4: the cluster's dynamic default (3); VDL's is the stream's Raft majority
        "min.insync.replicas": [("min.insync.replicas", "1", 3)],
        **{name: [] for name in ("vdl.table.path", "vdl.table.format", "vdl.table.schema", "vdl.table.lag.ms",
                                 "vdl.table.partition.by", "vdl.table.compact.interval.ms",
                                 "vdl.table.compact.target.bytes", "vdl.table.vacuum.interval.ms",
                                 "vdl.table.vacuum.retention.ms")}}
    assert [(c.name, c.value, c.config_source) for c in every.configs
            if c.name in ("retention.ms", "segment.ms", "vdl.table.path", "vdl.table.format")] == [
        ("retention.ms", "-1", 5), ("segment.ms", "604800000", 5), ("vdl.table.path", "", 5),
        ("vdl.table.format", "raw", 5)]


# Kafka 4.4's topic configs VDL did not know, with the synonyms (name, value, source) and the
# type a Kafka 4.4 broker describes them with on a new topic (vdl_dev.kafka_peer, 1 node).
KAFKA_DEFAULT_SYNONYMS = {
    "compression.gzip.level": [("compression.gzip.level", "-1", 5)],
    "compression.lz4.level": [("compression.lz4.level", "9", 5)],
    "compression.zstd.level": [("compression.zstd.level", "3", 5)],
    "errors.deadletterqueue.group.enable": [],
    "file.delete.delay.ms": [("log.segment.delete.delay.ms", "60000", 5)],
    "flush.messages": [("log.flush.interval.messages", "9223372036854775807", 5)],
    "flush.ms": [],
    "follower.replication.throttled.replicas": [],
    "index.interval.bytes": [("log.index.interval.bytes", "4096", 5)],
    "leader.replication.throttled.replicas": [],
    "local.retention.bytes": [("log.local.retention.bytes", "-2", 5)],
    "local.retention.ms": [("log.local.retention.ms", "-2", 5)],
    "max.decompressed.message.bytes": [("max.decompressed.message.bytes", "2147483639", 5)],
    "message.timestamp.after.max.ms": [("log.message.timestamp.after.max.ms", "3600000", 5)],
    "message.timestamp.before.max.ms": [("log.message.timestamp.before.max.ms", "9223372036854775807", 5)],
    "min.cleanable.dirty.ratio": [("log.cleaner.min.cleanable.ratio", "0.5", 5)],
    "preallocate": [("log.preallocate", "false", 5)],
    "remote.copy.lag.bytes": [("log.remote.copy.lag.bytes", "-1", 5)],
    "remote.copy.lag.ms": [("log.remote.copy.lag.ms", "0", 5)],
    "remote.log.copy.disable": [],
    "remote.log.delete.on.disable": [],
    "remote.storage.enable": [],
    "segment.index.bytes": [("log.index.size.max.bytes", "10485760", 5)],
    "segment.jitter.ms": [],
}
# DescribeConfigs ConfigType: 1 BOOLEAN, 3 INT, 5 LONG, 6 DOUBLE, 7 LIST (# Kafka: LogConfig)
KAFKA_TYPES = {
    "compression.gzip.level": 3, "compression.lz4.level": 3, "compression.zstd.level": 3,
    "errors.deadletterqueue.group.enable": 1, "file.delete.delay.ms": 5, "flush.messages": 5, "flush.ms": 5,
    "follower.replication.throttled.replicas": 7, "index.interval.bytes": 3, "leader.replication.throttled.replicas": 7,
    "local.retention.bytes": 5, "local.retention.ms": 5, "max.decompressed.message.bytes": 3,
    "message.timestamp.after.max.ms": 5, "message.timestamp.before.max.ms": 5, "min.cleanable.dirty.ratio": 6,
    "preallocate": 1, "remote.copy.lag.bytes": 5, "remote.copy.lag.ms": 5, "remote.log.copy.disable": 1,
    "remote.log.delete.on.disable": 1, "remote.storage.enable": 1, "segment.index.bytes": 3, "segment.jitter.ms": 5,
    "min.insync.replicas": 3, "retention.bytes": 5,
}


def test_kafka_topic_configs_are_stored_and_described_as_kafka_describes_them(module_broker: BrokerProcess) -> None:
    """Every Kafka 4.4 topic config VDL refused as unknown (file.delete.delay.ms, preallocate,
    flush.*...) is accepted in Kafka's range, stored and described with Kafka's type, settable
    (not read-only) and with VDL's documentation saying what it does on VDL; min.insync.replicas
    as Kafka 4.4 describes its own: the cluster's dynamic default, not read-only."""
    address = module_broker.bootstrap
    assert create_topic_raw(address, "dc-kafka") == (0, None)
    assert alter_configs(address, "dc-kafka", {"file.delete.delay.ms": "0", "preallocate": "TRUE",
                                               "min.cleanable.dirty.ratio": "0.75", "retention.bytes": "-5"}) == (0, None)
    assert stream_config(address, "dc-kafka") == {"file.delete.delay.ms": "0", "preallocate": "true",
                                                  "min.cleanable.dirty.ratio": "0.75", "retention.bytes": "-5"}
    every = {c.name: c for c in describe_resource(address, TOPIC, "dc-kafka").configs}
    assert {name: every[name].config_type for name in KAFKA_TYPES} == KAFKA_TYPES
    assert [(c.name, c.read_only) for c in every.values() if c.read_only] == []
    assert [(s.name, s.value, s.source) for s in every["preallocate"].synonyms] == [
        ("preallocate", "true", 1), ("log.preallocate", "false", 5)]
    assert (every["min.insync.replicas"].value, every["min.insync.replicas"].config_source,
            every["min.insync.replicas"].is_default) == ("1", 3, False)
    assert every["file.delete.delay.ms"].documentation == (
        "Kafka: how long a deleted segment file stays on disk; VDL deletes a segment's files at once (no effect on VDL)")
    assert every["flush.messages"].documentation == (
        "Kafka: records appended between fsyncs; VDL fsyncs every write before it is acknowledged (no effect on VDL)")


def describe_resource(address: str, resource_type: int, name: str,
                      keys: list[str] | None = None) -> m.DescribeConfigsResponse.DescribeConfigsResult:
    resource = m.DescribeConfigsRequest.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                                                configuration_keys=keys)
    request = m.DescribeConfigsRequest(resources=[resource], include_synonyms=True, include_documentation=True)
    result = raw_request(address, request, 4).results[0]
    assert (result.resource_type, result.resource_name) == (resource_type, name)
    return result


def alter_loggers(address: str, name: str, changes: list[tuple[str, int, str | None]], validate_only: bool = False,
                  resource_type: int = BROKER_LOGGER) -> tuple[int, str | None]:
    resource = m.IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[m.IncrementalAlterConfigsRequest.AlterableConfig(name=n, config_operation=op, value=v)
                 for n, op, v in changes])
    request = m.IncrementalAlterConfigsRequest(resources=[resource], validate_only=validate_only)
    result = raw_request(address, request, 1).responses[0]
    assert (result.resource_type, result.resource_name) == (resource_type, name)
    return result.error_code, result.error_message


def test_broker_loggers_as_kafka_answers_them(module_broker: BrokerProcess) -> None:
    """BROKER_LOGGER (KIP-412): the node's loggers (root and the vdl_broker hierarchy) at their
    levels, settable, no type or synonyms; the resource is the node's id; each refusal in Kafka's
    words, and a refused or validate-only request changes nothing; legacy AlterConfigs has no
    BROKER_LOGGER (INVALID_REQUEST), as in Kafka."""
    address, logger = module_broker.bootstrap, "vdl_broker.groups.coordinator"
    described = describe_resource(address, BROKER_LOGGER, "1")
    levels = {c.name: c.value for c in described.configs}
    root = levels["root"]
    assert described.error_code == 0 and levels[logger] == root and "vdl_broker.server.handlers" in levels
    assert {name for name in levels if name != "root" and not name.startswith("vdl_broker")} == set()
    entry = next(c for c in described.configs if c.name == logger)
    assert (entry.config_source, entry.read_only, entry.is_sensitive, entry.config_type, entry.synonyms,
            entry.documentation) == (6, False, False, 0, [], None)
    assert [(c.name, c.value) for c in describe_resource(address, BROKER_LOGGER, "1", [logger]).configs] == [
        (logger, root)]
    for name, message in (("", "Broker id must not be empty"), ("one", "Broker id must be an integer, but it is: one"),
                          ("2", "Unexpected broker id, expected 1 but received 2")):
        refused = describe_resource(address, BROKER_LOGGER, name)
        assert (refused.error_code, refused.error_message, refused.configs) == (ErrorCode.INVALID_REQUEST, message, [])

    debug = [(logger, SET, "DEBUG")]
    assert alter_loggers(address, "1", debug, validate_only=True) == (0, None)
    assert {c.name: c.value for c in describe_resource(address, BROKER_LOGGER, "1").configs} == levels
    for name, changes, answer in (
            ("2", debug, (ErrorCode.INVALID_REQUEST, "Unexpected node id. Expected 1, but received 2")),
            ("one", debug, (ErrorCode.INVALID_REQUEST, "Node id must be an integer, but it is: one")),
            ("1", debug + [("vdl_broker.nope", SET, "DEBUG")],
             (ErrorCode.INVALID_CONFIG, "Logger vdl_broker.nope does not exist!")),
            ("1", debug + [("vdl_broker", SET, "VERBOSE")],
             (ErrorCode.INVALID_CONFIG, "Cannot set the log level of vdl_broker to VERBOSE as it is not a supported "
                                        "log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN")),
            ("1", debug + [("root", DELETE, None)],
             (ErrorCode.INVALID_REQUEST, "Removing the log level of the root logger is not allowed")),
            ("1", debug + [("vdl_broker", APPEND, "DEBUG")],
             (ErrorCode.INVALID_REQUEST, "APPEND operation is not allowed for the BROKER_LOGGER resource")),
            ("1", debug + [(logger, DELETE, None)], (ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")),
            ("1", [(logger, SET, None)], (ErrorCode.INVALID_REQUEST, f"Null value not supported for : {logger}"))):
        assert alter_loggers(address, name, changes) == answer, changes
    assert {c.name: c.value for c in describe_resource(address, BROKER_LOGGER, "1").configs} == levels
    assert alter_configs(address, "1", {logger: "DEBUG"}, resource_type=BROKER_LOGGER) == (
        ErrorCode.INVALID_REQUEST, "resource type 8 (BROKER_LOGGER) is altered by IncrementalAlterConfigs only")

    # vdl_broker.groups set: the coordinator under it logs at its level; unset, at root's again
    assert alter_loggers(address, "1", [("vdl_broker.groups", SET, "TRACE")]) == (0, None)
    assert {c.name: c.value for c in describe_resource(address, BROKER_LOGGER, "1").configs} == levels | {
        name: "TRACE" for name in levels if name.startswith("vdl_broker.groups")}
    assert alter_loggers(address, "1", [("vdl_broker.groups", DELETE, None)]) == (0, None)
    assert {c.name: c.value for c in describe_resource(address, BROKER_LOGGER, "1").configs} == levels


def test_a_client_metrics_resource_describes_as_kafkas_defaults(module_broker: BrokerProcess) -> None:
    """DescribeConfigs of a named client-metrics resource: Kafka's defaults, as Kafka answers for a
    name no subscription was set under (VDL sets none); an empty name is INVALID_REQUEST."""
    described = describe_resource(module_broker.bootstrap, CLIENT_METRICS, "producers")
    assert described.error_code == 0
    assert [(c.name, c.value, c.config_source, c.config_type, c.synonyms, c.documentation)
            for c in described.configs] == [
        ("metrics", "", 5, 7, [], "Telemetry metric name prefix list"),
        ("interval.ms", "300000", 5, 3, [], "Metrics push interval in milliseconds"),
        ("match", "", 5, 7, [], "Client match criteria")]
    empty = describe_resource(module_broker.bootstrap, CLIENT_METRICS, "")
    assert (empty.error_code, empty.error_message) == (ErrorCode.INVALID_REQUEST,
                                                       "Client metrics subscription name must not be empty")


# ---- three nodes --------------------------------------------------------------------------------


def test_describe_cluster_three_nodes_any_node(dev_cluster: DevCluster) -> None:
    for node_id in dev_cluster.node_ids():
        address = dev_cluster.nodes[node_id].client_address
        metadata = metadata_raw(address, [])
        response = describe_cluster(address)
        assert (response.error_code, response.cluster_id, response.controller_id) == (
            0, metadata.cluster_id, metadata.controller_id)
        assert response.controller_id in (1, 2, 3)
        assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [
            (b.node_id, b.host, b.port) for b in metadata.brokers]
        assert [b.broker_id for b in response.brokers] == [1, 2, 3]


def test_metadata_names_leader_and_isr_at_a_node_asked_first(dev_cluster: DevCluster) -> None:
    """The first Metadata a node answers about a stream it does not lead names the leader and the
    leader's ISR: it used to name no leader for a stream with no replica there (and only the
    leader as the ISR of a stream it follows, its view of it a few seconds old) until a background
    refresh served a later request (kafka-topics --describe --under-replicated-partitions and
    --unavailable-partitions listed healthy streams). 1 s."""
    addresses = {n: dev_cluster.nodes[n].client_address for n in dev_cluster.node_ids()}

    def view(node_id: int, stream: str) -> tuple[int, list[int]]:
        [partition] = metadata_raw(addresses[node_id], [stream]).topics[0].partitions
        return partition.leader_id, sorted(partition.isr_nodes)

    def in_sync(node_id: int, stream: str, replication: int) -> tuple[int, list[int]] | None:
        answer = view(node_id, stream)
        return answer if len(answer[1]) == replication else None

    for stream, replication in (("md-first-three", 3), ("md-first-one", 1)):
        assert create_topic_raw(addresses[1], stream, replication) == (0, None)
        leader = wait_until(lambda s=stream: view(1, s)[0] if view(1, s)[0] > 0 else None, timeout=10,
                            message="a leader")
        # The leader's own word, once every replica is in sync (node 1 handled the create).
        expected = wait_until(lambda s=stream, r=replication, n=leader: in_sync(n, s, r), timeout=10,
                              message=f"{stream}'s replicas in sync")
        others = [n for n in addresses if n not in (1, leader)]
        assert others
        assert {n: view(n, stream) for n in others} == {n: expected for n in others}


def test_a_stream_created_without_waiting_has_its_leader_in_every_nodes_first_metadata(
        dev_cluster: DevCluster) -> None:
    """A client that asks any node about a stream right after creating it gets the stream's
    leader, even from a CreateTopics that did not wait for it (timeout_ms 0): a node whose replica
    of a new stream has no leader yet waits for the first election before answering. It answered
    "no leader" at once, and kafka-go's Writer, which keeps a Metadata answer for 6 s, failed all
    of its attempts to write right after a create ("topic partition has no leader"). A node that
    has not applied the create yet does not know the stream: it answers so, as a Kafka broker the
    new topic's record has not reached yet does, and clients ask again."""
    addresses = {n: dev_cluster.nodes[n].client_address for n in dev_cluster.node_ids()}
    not_known_yet = {int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), int(ErrorCode.LEADER_NOT_AVAILABLE)}
    for attempt in range(3):
        stream = f"md-first-leader-{attempt}"
        topic = m.CreateTopicsRequest.CreatableTopic(name=stream, num_partitions=1, replication_factor=3)
        created = raw_request(addresses[1], m.CreateTopicsRequest(topics=[topic], timeout_ms=0), timeout=35.0)
        assert created.topics[0].error_code == 0
        with ThreadPoolExecutor(len(addresses)) as pool:
            answers = dict(zip(addresses, pool.map(lambda a, s=stream: metadata_raw(a, [s]).topics[0],
                                                   addresses.values()), strict=True))
        views = {n: [(p.error_code, p.leader_id) for p in t.partitions] for n, t in answers.items()}
        listed = {n: view for n, view in views.items() if view or answers[n].error_code not in not_known_yet}
        assert listed, views
        leader = next(iter(listed.values()))[0][1]
        assert leader in addresses and listed == {n: [(0, leader)] for n in listed}, views


def test_alter_configs_through_a_follower_applies_everywhere(dev_cluster: DevCluster) -> None:
    addresses = [dev_cluster.nodes[n].client_address for n in dev_cluster.node_ids()]
    controller = metadata_raw(addresses[0], []).controller_id
    follower = next(dev_cluster.nodes[n].client_address for n in dev_cluster.node_ids() if n != controller)
    assert create_topic_raw(follower, "ac-cluster") == (0, None)
    assert alter_configs(follower, "ac-cluster", {"retention.ms": "123456"}) == (0, None)
    assert alter_configs(follower, "ac-cluster", {"max.message.bytes": "2000000"}) == (0, None)
    for address in addresses:  # the metadata leader committed it before answering: every node
        wait_config(address, "ac-cluster", {"max.message.bytes": "2000000"})


def wait_config(address: str, stream: str, expected: dict[str, str]) -> None:
    wait_until(lambda: stream_config(address, stream) == expected, timeout=10,
               message=lambda: f"{address}: {stream_config(address, stream)}")


def test_delete_records_three_nodes_every_replica_agrees(cluster: DevCluster) -> None:
    address = cluster.nodes[1].client_address
    assert create_topic_raw(address, "dr-cluster") == (0, None)
    leader = wait_for_leader(cluster, "dr-cluster")
    leader_address = cluster.nodes[leader].client_address
    produce_values(leader_address, "dr-cluster", 6)
    for node_id in cluster.node_ids():
        if node_id != leader:
            assert delete_records(cluster.nodes[node_id].client_address, {("dr-cluster", 0): 2}) == [
                ("dr-cluster", 0, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)]
    assert delete_records(leader_address, {("dr-cluster", 0): 5}) == [("dr-cluster", 0, 0, 5)]
    cluster.kill(leader)  # the next leader has the new start from the Raft log
    new_leader = wait_for_leader(cluster, "dr-cluster", other_than=leader)
    new_address = cluster.nodes[new_leader].client_address
    wait_until(lambda: list_offset_raw(new_address, "dr-cluster", -2) == (0, 5), timeout=20,
               message=lambda: f"earliest at node {new_leader}: {list_offset_raw(new_address, 'dr-cluster', -2)}")
    assert fetch_partition(new_address, "dr-cluster", 4).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert record_values(fetch_partition(new_address, "dr-cluster", 5).records) == [(5, b"v5")]


def test_offset_for_leader_epoch_across_a_leader_change(cluster: DevCluster) -> None:
    assert create_topic_raw(cluster.nodes[1].client_address, "ofle-cluster") == (0, None)
    leader = wait_for_leader(cluster, "ofle-cluster")
    address = cluster.nodes[leader].client_address
    produce_values(address, "ofle-cluster", 4)
    old = metadata_epoch(address, "ofle-cluster")
    for node_id in cluster.node_ids():
        if node_id != leader:  # followers know the term, but only the leader answers
            follower = cluster.nodes[node_id].client_address
            assert metadata_epoch(follower, "ofle-cluster") == old
            assert epoch_end(follower, "ofle-cluster", old, old) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1)
    cluster.kill(leader)
    new_leader = wait_for_leader(cluster, "ofle-cluster", other_than=leader)
    new_address = cluster.nodes[new_leader].client_address
    new = metadata_epoch(new_address, "ofle-cluster")
    assert new > old
    produce_values(new_address, "ofle-cluster", 2)
    # the old term ends where the new leader's records begin; the new one at the log end
    assert epoch_end(new_address, "ofle-cluster", old, new) == (0, old, 4)
    assert epoch_end(new_address, "ofle-cluster", new, new) == (0, new, 6)
    assert epoch_end(new_address, "ofle-cluster", old, old) == (ErrorCode.FENCED_LEADER_EPOCH, -1, -1)
    epochs = [parse_batch_header(b).partition_leader_epoch
              for _, b in iter_batches(memoryview(fetch_partition(new_address, "ofle-cluster", 0).records))]
    assert epochs == [old] * 4 + [new] * 2


def wait_for_leader(cluster: DevCluster, stream: str, other_than: int | None = None) -> int:
    found: list[int] = []

    def led() -> bool:
        for node_id in cluster.node_ids():
            if node_id == other_than or not cluster.nodes[node_id].running:
                continue
            leader = metadata_raw(cluster.nodes[node_id].client_address, [stream]).topics[0].partitions[0].leader_id
            if leader > 0 and leader != other_than and list_offset_raw(
                    cluster.nodes[leader].client_address, stream, -1)[0] == 0:
                found[:] = [leader]
                return True
        return False

    wait_until(led, timeout=30, message=f"no leader of {stream}")
    return found[0]


def test_altering_another_nodes_settings_is_refused_by_the_node_asked(dev_cluster: DevCluster) -> None:
    """A BROKER resource names the node the request is sent to (or is "", the cluster-wide
    defaults): as Kafka, the node asked refuses another id with INVALID_REQUEST before looking at
    the configs (Kafka: ConfigAdminManager.validateResourceNameIsCurrentNodeId). It was forwarded
    to the metadata leader and answered INVALID_CONFIG, the answer for the node's own id."""
    static = ("log.retention.ms: node settings are static (node.toml or flags); a stream's own settings are "
              "altered on its TOPIC resource")
    for node_id in dev_cluster.node_ids():
        address = dev_cluster.nodes[node_id].client_address
        other = next(n for n in dev_cluster.node_ids() if n != node_id)
        for name, answer in ((str(node_id), (ErrorCode.INVALID_CONFIG, static)), ("", (ErrorCode.INVALID_CONFIG, static)),
                             (str(other), (ErrorCode.INVALID_REQUEST,
                                           f"Unexpected broker id, expected {node_id}, but received {other}")),
                             ("one", (ErrorCode.INVALID_REQUEST, "Node id must be an integer, but it is: one"))):
            assert alter_loggers(address, name, [("log.retention.ms", SET, "1")], resource_type=BROKER) == answer
            assert alter_configs(address, name, {"log.retention.ms": "1"}, resource_type=BROKER) == answer
        # Another node's id is refused even when every change is a deletion (a no-op on its own id).
        assert alter_loggers(address, str(other), [("log.retention.ms", DELETE, None)], resource_type=BROKER) == (
            ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {node_id}, but received {other}")
        assert alter_loggers(address, str(node_id), [("log.retention.ms", DELETE, None)],
                             resource_type=BROKER) == (0, None)
        # Describing one: Kafka's words too (ConfigHelper.describeConfigs).
        for name, message in ((str(other), f"Unexpected broker id, expected {node_id} or empty string, but "
                                           f"received {other}"),
                              ("one", "Broker id must be an integer, but it is: one")):
            described = describe_resource(address, BROKER, name)
            assert (described.error_code, described.error_message, described.configs) == (
                ErrorCode.INVALID_REQUEST, message, [])


def test_create_partitions_three_nodes(dev_cluster: DevCluster) -> None:
    address = dev_cluster.nodes[2].client_address
    assert create_topic_raw(address, "cp-cluster") == (0, None)
    assert create_partitions(address, {"cp-cluster": 3}) == [
        ("cp-cluster", ErrorCode.INVALID_PARTITIONS, refusal("cp-cluster", 3))]


def test_acl_apis_without_an_authorizer_are_security_disabled(module_broker: BrokerProcess) -> None:
    """A node with `authorizer = none` keeps no ACLs: each ACL API says so (Kafka's answer with
    no authorizer configured), which the Java AdminClient raises as SecurityDisabledException."""
    no_authorizer = "no authorizer is configured on the broker (authorizer = none)"
    creation = m.CreateAclsRequest.AclCreation(resource_type=2, resource_name="s", resource_pattern_type=3,
                                               principal="User:alice", host="*", operation=3, permission_type=3)
    created = raw_request(module_broker.bootstrap, m.CreateAclsRequest(creations=[creation]), 3)
    assert [(r.error_code, r.error_message) for r in created.results] == [(ErrorCode.SECURITY_DISABLED, no_authorizer)]
    described = raw_request(module_broker.bootstrap, m.DescribeAclsRequest(
        resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1), 3)
    assert (described.error_code, described.error_message) == (ErrorCode.SECURITY_DISABLED, no_authorizer)
    deleted = raw_request(module_broker.bootstrap, m.DeleteAclsRequest(filters=[m.DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1)]), 3)
    assert [(r.error_code, r.error_message) for r in deleted.filter_results] == [
        (ErrorCode.SECURITY_DISABLED, no_authorizer)]


def test_alter_replica_log_dirs_to_the_nodes_one_directory(module_broker: BrokerProcess, tmp_path: Any) -> None:
    """AlterReplicaLogDirs (34), through kafka-python's admin as its own integration test calls it:
    a replica "moved" to the directory DescribeLogDirs names is NONE (a node has one), another
    directory LOG_DIR_NOT_FOUND, a stream not held there REPLICA_NOT_AVAILABLE. The broker closed
    the connection (an API it did not serve)."""
    from kafka import KafkaAdminClient
    from kafka.errors import LogDirNotFoundError, NoError, ReplicaNotAvailableError
    from kafka.structs import TopicPartitionReplica

    assert create_topic_raw(module_broker.bootstrap, "log-dir-move") == (0, None)
    admin = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    try:
        described = admin.describe_log_dirs()
        directory = described[0]["log_dirs"][0]["log_dir"]
        broker_id = described[0]["broker"]
        here = TopicPartitionReplica("log-dir-move", 0, broker_id)
        missing = TopicPartitionReplica("no-such-stream", 0, broker_id)
        assert admin.alter_replica_log_dirs({here: directory, missing: directory}) == {
            here: NoError, missing: ReplicaNotAvailableError}
        assert admin.alter_replica_log_dirs({here: str(tmp_path)}) == {here: LogDirNotFoundError}
    finally:
        admin.close()


# Every TOPIC operation (KIP-430 bits: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
# ALTER_CONFIGS), what a node without an authorizer allows, as Kafka's answers.
EVERY_TOPIC_OPERATION = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


def describe_topic_partitions(address: str, names: list[str], limit: int = 2000,
                              cursor: tuple[str, int] | None = None) -> Any:
    request = m.DescribeTopicPartitionsRequest(
        topics=[m.DescribeTopicPartitionsRequest.TopicRequest(name=name) for name in names],
        response_partition_limit=limit,
        cursor=None if cursor is None else m.DescribeTopicPartitionsRequest.Cursor(topic_name=cursor[0],
                                                                                   partition_index=cursor[1]))
    return raw_request(address, request, 0)


def paged(response: Any) -> tuple[list[tuple[Any, ...]], tuple[str, int] | None]:
    """Each topic's (error, name, id, internal, operations, partitions) and the next cursor."""
    topics = [(t.error_code, t.name, t.topic_id, t.is_internal, t.topic_authorized_operations,
               [(p.error_code, p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes,
                 p.eligible_leader_replicas, p.last_known_elr, p.offline_replicas) for p in t.partitions])
              for t in response.topics]
    cursor = response.next_cursor
    return topics, None if cursor is None else (cursor.topic_name, cursor.partition_index)


def test_describe_topic_partitions_pages_by_name(module_broker: BrokerProcess) -> None:
    """DescribeTopicPartitions (75): the named topics in name order, each as Metadata describes it
    (empty ELR lists), at most the partition limit of them (0 is 1), the next cursor naming the
    first left out; from a cursor the page starts at its topic and partition (past a stream's one
    partition: none of it); an unknown name is UNKNOWN_TOPIC_OR_PARTITION, an invalid one
    INVALID_TOPIC_EXCEPTION; a cursor outside the names or negative is INVALID_REQUEST."""
    address = module_broker.bootstrap
    names = ["dtp-b", "dtp-a", "dtp-c"]
    for name in names:
        assert create_topic_raw(address, name) == (0, None)
    wait_until(lambda: all(t.partitions[0].leader_id == 1 for t in metadata_raw(address, names).topics),
               timeout=10, message="a leader for each stream")
    known = {t.name: t for t in metadata_raw(address, names).topics}

    def described(name: str, partitions: bool = True) -> tuple[Any, ...]:
        epoch = known[name].partitions[0].leader_epoch
        assert epoch >= 1
        return (0, name, known[name].topic_id, False, EVERY_TOPIC_OPERATION,
                [(0, 0, 1, epoch, [1], [1], [], [], [])] if partitions else [])

    unknown = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "dtp-missing", ZERO_ID, False, EVERY_TOPIC_OPERATION, [])
    asked = [*names, "dtp-missing"]
    assert paged(describe_topic_partitions(address, asked)) == (
        [described("dtp-a"), described("dtp-b"), described("dtp-c"), unknown], None)
    assert paged(describe_topic_partitions(address, asked, limit=2)) == (
        [described("dtp-a"), described("dtp-b")], ("dtp-c", 0))
    assert paged(describe_topic_partitions(address, asked, limit=2, cursor=("dtp-c", 0))) == (
        [described("dtp-c"), unknown], None)
    assert paged(describe_topic_partitions(address, asked, limit=0)) == ([described("dtp-a")], ("dtp-b", 0))
    assert paged(describe_topic_partitions(address, asked, cursor=("dtp-b", 1))) == (
        [described("dtp-b", partitions=False), described("dtp-c"), unknown], None)
    # An unknown topic takes no room on the page: the cursor is the next one's.
    assert paged(describe_topic_partitions(address, ["dtp-missing", "dtp-c", "dtp-a"], limit=1)) == (
        [described("dtp-a")], ("dtp-c", 0))
    assert paged(describe_topic_partitions(address, ["dtp-a", "bad/name"])) == (
        [(ErrorCode.INVALID_TOPIC_EXCEPTION, "bad/name", ZERO_ID, False, EVERY_TOPIC_OPERATION, []),
         described("dtp-a")], None)
    refused = [(ErrorCode.INVALID_REQUEST, name, ZERO_ID, False, -(2**31), []) for name in asked]
    assert paged(describe_topic_partitions(address, asked, cursor=("dtp-z", 0))) == (refused, None)
    assert paged(describe_topic_partitions(address, asked, cursor=("dtp-a", -1))) == (refused, None)
    assert paged(describe_topic_partitions(address, [], cursor=("dtp-a", -1))) == ([], None)


def test_describe_topic_partitions_of_every_stream(module_broker: BrokerProcess) -> None:
    """An empty topic list is every stream, in name order, paged the same way; the cursor's topic
    need not exist."""
    address = module_broker.bootstrap
    for name in ("dtp-all-1", "dtp-all-2", "dtp-all-3"):
        assert create_topic_raw(address, name) == (0, None)
    streams = sorted(t.name for t in metadata_raw(address, None).topics)
    topics, cursor = paged(describe_topic_partitions(address, []))
    assert ([t[1] for t in topics], cursor) == (streams, None)
    assert all(t[0] == 0 and len(t[5]) == 1 for t in topics)
    topics, cursor = paged(describe_topic_partitions(address, [], limit=2, cursor=("dtp-all-0", 0)))
    assert ([t[1] for t in topics], cursor) == (["dtp-all-1", "dtp-all-2"], ("dtp-all-3", 0))
    topics, cursor = paged(describe_topic_partitions(address, [], limit=1, cursor=("dtp-all-3", 0)))
    after = [name for name in streams if name > "dtp-all-3"]
    assert ([t[1] for t in topics], cursor) == (["dtp-all-3"], (after[0], 0) if after else None)


def test_describe_topic_partitions_through_kafka_python(module_broker: BrokerProcess) -> None:
    """kafka-python's admin `describe_topic_partitions`, as its own test_describe_topic_partitions
    and test_describe_topic_partitions_pagination call it (their topic has 4 partitions, a
    stream one: a page of 1 partition over two streams ends at the second). It fails on a broker
    without the API (it sends the request unasked)."""
    from kafka import KafkaAdminClient

    address = module_broker.bootstrap
    for name in ("dtp-kp-1", "dtp-kp-2"):
        assert create_topic_raw(address, name) == (0, None)
    wait_until(lambda: all(t.partitions[0].leader_id == 1
                           for t in metadata_raw(address, ["dtp-kp-1", "dtp-kp-2"]).topics),
               timeout=10, message="a leader for each stream")
    known = {t.name: t for t in metadata_raw(address, ["dtp-kp-1", "dtp-kp-2"]).topics}

    def described(name: str) -> dict[str, Any]:
        partition = {"error_code": 0, "partition_index": 0, "leader_id": 1,
                     "leader_epoch": known[name].partitions[0].leader_epoch, "replica_nodes": [1], "isr_nodes": [1],
                     "eligible_leader_replicas": None, "last_known_elr": None,  # kafka-python's None for empty
                     "offline_replicas": []}
        return {"error_code": 0, "name": name, "topic_id": known[name].topic_id, "is_internal": False,
                "partitions": [partition], "topic_authorized_operations": EVERY_TOPIC_OPERATION}

    admin = KafkaAdminClient(bootstrap_servers=address)
    try:
        assert admin.describe_topic_partitions(["dtp-kp-1"]) == {"topics": [described("dtp-kp-1")],
                                                                 "next_cursor": None}
        first = admin.describe_topic_partitions(["dtp-kp-2", "dtp-kp-1"], response_partition_limit=1)
        assert first == {"topics": [described("dtp-kp-1")],
                         "next_cursor": {"topic_name": "dtp-kp-2", "partition_index": 0}}
        second = admin.describe_topic_partitions(["dtp-kp-2", "dtp-kp-1"], response_partition_limit=10,
                                                 cursor=first["next_cursor"])
        assert second == {"topics": [described("dtp-kp-2")], "next_cursor": None}
    finally:
        admin.close()
