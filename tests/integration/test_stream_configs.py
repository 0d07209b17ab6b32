"""Per-stream configs on a 3-node cluster, through real admin clients: confluent-kafka's and
kafka-python's AdminClient create, describe and alter them; every replica applies them (segments
roll at segment.bytes and retention deletes them on every node); max.message.bytes refuses a
larger batch with MESSAGE_TOO_LARGE; the `vdl` CLI sets and shows them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.cluster import VDL_CLI, node_address, wait_until
from tests.support.kafka import raw_request
from vdl_dev.dev_cluster import DevCluster
from vdl_wire import messages as m
from vdl_wire.errors import ErrorCode

pytestmark = pytest.mark.timeout(180)

CLUSTER_SETTINGS = {"retention_check_ms": 200}
TOPIC, BROKER = 2, 4

# (value, source, read-only) of every stream config of a stream created with retention.ms=60000
# and cleanup.policy=delete and
# min.insync.replicas=2 (what a Raft stream of 3 gives; accepted, not stored) on nodes with the default settings (5 = DEFAULT_CONFIG, 1 = DYNAMIC_TOPIC_CONFIG).
EXPECTED = {
    "retention.ms": ("60000", 1), "retention.bytes": ("-1", 5), "segment.bytes": ("1073741824", 5),
    "segment.ms": ("604800000", 5), "max.message.bytes": ("16777216", 5), "cleanup.policy": ("delete", 1),
    "min.compaction.lag.ms": ("0", 5), "max.compaction.lag.ms": ("9223372036854775807", 5),
    "delete.retention.ms": ("86400000", 5), "message.timestamp.type": ("CreateTime", 5),
    "message.timestamp.before.max.ms": ("9223372036854775807", 5), "message.timestamp.after.max.ms": ("3600000", 5),
    "compression.type": ("producer", 5),
    "unclean.leader.election.enable": ("false", 5),
    # Kafka 4.4's other topic configs, at Kafka's defaults (no effect on VDL: README)
    "compression.gzip.level": ("-1", 5), "compression.lz4.level": ("9", 5), "compression.zstd.level": ("3", 5),
    "errors.deadletterqueue.group.enable": ("false", 5), "file.delete.delay.ms": ("60000", 5),
    "flush.messages": ("9223372036854775807", 5), "flush.ms": ("9223372036854775807", 5),
    "follower.replication.throttled.replicas": ("", 5), "index.interval.bytes": ("4096", 5),
    "leader.replication.throttled.replicas": ("", 5), "local.retention.bytes": ("-2", 5),
    "local.retention.ms": ("-2", 5), "max.decompressed.message.bytes": ("2147483639", 5),
    "min.cleanable.dirty.ratio": ("0.5", 5), "preallocate": ("false", 5), "remote.copy.lag.bytes": ("-1", 5),
    "remote.copy.lag.ms": ("0", 5), "remote.log.copy.disable": ("false", 5),
    "remote.log.delete.on.disable": ("false", 5), "remote.storage.enable": ("false", 5),
    "segment.index.bytes": ("10485760", 5), "segment.jitter.ms": ("0", 5),
    "vdl.table.path": ("", 5),
    "vdl.table.format": ("raw", 5), "vdl.table.schema": ("", 5), "vdl.table.lag.ms": ("5000", 5),
    "vdl.table.partition.by": ("none", 5), "vdl.table.compact.interval.ms": ("600000", 5),
    "vdl.table.compact.target.bytes": ("134217728", 5), "vdl.table.vacuum.interval.ms": ("3600000", 5),
    "vdl.table.vacuum.retention.ms": ("604800000", 5),
    # the majority of 3 replicas, as Kafka 4.4 describes its own: the cluster's dynamic default (3)
    "min.insync.replicas": ("2", 3),
}
# Kafka 4.4 topic configs VDL refused (confluent-kafka-python's admin tests, Terraform and
# Strimzi pass them), as a create gives them and as they are then described (source 1).
KAFKA_ONLY = {"file.delete.delay.ms": "0", "preallocate": "true", "flush.messages": "1", "flush.ms": "1000",
              "segment.index.bytes": "4096", "index.interval.bytes": "1024", "min.cleanable.dirty.ratio": "0.1",
              "compression.gzip.level": "9", "segment.jitter.ms": "100", "message.timestamp.after.max.ms": "0",
              "leader.replication.throttled.replicas": "*"}


def admin(cluster: DevCluster):  # noqa: ANN201 - confluent_kafka imported lazily
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def confluent_describe(client, stream: str) -> dict[str, tuple[str | None, int]]:  # noqa: ANN001
    from confluent_kafka.admin import ConfigResource

    [future] = client.describe_configs([ConfigResource("topic", stream)]).values()
    return {name: (entry.value, int(entry.source)) for name, entry in future.result(timeout=30).items()}


def confluent_alter(client, stream: str, changes: dict[str, str | None]) -> None:  # noqa: ANN001
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    entries = [ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET if value is not None
                           else AlterConfigOpType.DELETE) for name, value in changes.items()]
    [future] = client.incremental_alter_configs([ConfigResource("topic", stream, incremental_configs=entries)]).values()
    future.result(timeout=30)


def describe_at(address: str, stream: str) -> dict[str, tuple[str | None, int]]:
    request = m.DescribeConfigsRequest(resources=[m.DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=TOPIC, resource_name=stream, configuration_keys=None)])
    result = raw_request(address, request).results[0]
    assert result.error_code == 0, result.error_message
    return {c.name: (c.value, c.config_source) for c in result.configs}


def segments(cluster: DevCluster, node_id: int, stream: str) -> list[Path]:
    directory = cluster.nodes[node_id].config.data_dir / stream
    return sorted(directory.glob("*.log")) if directory.is_dir() else []


def produce(cluster: DevCluster, stream: str, count: int, size: int) -> None:
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5,
                                         "batch.size": 4096, "acks": "all"})
    errors: list[object] = []
    for i in range(count):
        producer.produce(stream, value=b"%08d" % i + b"x" * (size - 8), on_delivery=lambda e, _: e and errors.append(e))
        producer.poll(0)
    assert producer.flush(60) == 0 and not errors, errors[:3]


def test_confluent_admin_creates_describes_and_alters(cluster: DevCluster) -> None:
    from confluent_kafka.admin import ConfigResource, NewTopic

    client = admin(cluster)
    futures = client.create_topics([NewTopic("configured", 1, 3, config={"retention.ms": "60000",
                                                                         "cleanup.policy": "delete",
                                                                         "min.insync.replicas": "2"}),
                                    NewTopic("compacted", 1, 3, config={"cleanup.policy": "delete, compact",
                                                                        "min.compaction.lag.ms": "86400000"}),
                                    NewTopic("shrunk", 1, 3, config={"cleanup.policy": "shrink"}),
                                    NewTopic("unknown-key", 1, 3, config={"colour": "blue"}),
                                    NewTopic("bad-value", 1, 3, config={"segment.bytes": "12"}),
                                    NewTopic("kafka-only", 1, 3, config=KAFKA_ONLY),
                                    NewTopic("recompressed", 1, 3, config={"compression.type": "zstd"}),
                                    NewTopic("bad-codec", 1, 3, config={"compression.type": "brotli"}),
                                    NewTopic("bad-delay", 1, 3, config={"file.delete.delay.ms": "-1"}),
                                    NewTopic("bad-ratio", 1, 3, config={"min.cleanable.dirty.ratio": "1.5"})])
    futures["configured"].result(timeout=30)
    futures["compacted"].result(timeout=30)
    futures["kafka-only"].result(timeout=30)
    futures["recompressed"].result(timeout=30)  # Kafka's broker-side codecs: the leader recompresses
    for name, words in (("shrunk", "cleanup.policy: 'shrink' is not one of delete, compact, compact,delete (either "
                                   "order) or empty (keep every record)"),
                        ("unknown-key", "unknown stream config 'colour'"),
                        ("bad-value", "segment.bytes: '12' is not an integer in 1024..2147483647"),
                        ("bad-codec", "compression.type: 'brotli' is not one of uncompressed | zstd | lz4 | snappy | "
                                      "gzip | producer"),
                        ("bad-delay", "file.delete.delay.ms: '-1' is not an integer >= 0"),
                        ("bad-ratio", "min.cleanable.dirty.ratio: '1.5' is not a number in 0..1")):
        with pytest.raises(Exception) as caught:
            futures[name].result(timeout=30)
        error = caught.value.args[0]
        assert error.code() == ErrorCode.INVALID_CONFIG and words in error.str()
    assert confluent_describe(client, "configured") == EXPECTED
    wait_until(lambda: describe_at(node_address(cluster, cluster.node_ids()[-1]), "kafka-only") == EXPECTED | {
        "retention.ms": ("-1", 5), "cleanup.policy": ("delete", 5), **{name: (value, 1) for name, value in
                                                                       KAFKA_ONLY.items()}}, 10,
        "the Kafka topic configs stored and described")
    # Stored and described as Kafka does: the list joined with "," in the order given.
    wait_until(lambda: describe_at(node_address(cluster, cluster.node_ids()[0]), "compacted") == EXPECTED | {
        "retention.ms": ("-1", 5), "cleanup.policy": ("delete,compact", 1), "min.compaction.lag.ms": ("86400000", 1)},
        10, "the compacted stream's configs")
    # Every node answers the same from its copy of the metadata.
    for node_id in cluster.node_ids():
        wait_until(lambda n=node_id: describe_at(node_address(cluster, n), "configured") == EXPECTED, 10,
                   f"node {node_id} describing the new stream's configs")

    confluent_alter(client, "configured", {"retention.ms": None, "max.message.bytes": "1000",
                                           "flush.messages": "1", "remote.copy.lag.ms": "-1"})
    expected = EXPECTED | {"retention.ms": ("-1", 5), "max.message.bytes": ("1000", 1), "flush.messages": ("1", 1),
                           "remote.copy.lag.ms": ("-1", 1)}
    # librdkafka may ask a node other than the metadata leader, which applies the change a moment later
    wait_until(lambda: confluent_describe(client, "configured") == expected, 10, "the altered configs described")
    for node_id in cluster.node_ids():
        wait_until(lambda n=node_id: describe_at(node_address(cluster, n), "configured") == expected, 10,
                   f"node {node_id} seeing the altered configs")

    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry
    bad = ConfigResource("topic", "configured", incremental_configs=[
        ConfigEntry("retention.ms", "yesterday", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception) as caught:
        list(client.incremental_alter_configs([bad]).values())[0].result(timeout=30)
    assert caught.value.args[0].code() == ErrorCode.INVALID_CONFIG
    assert "retention.ms: 'yesterday' is not an integer >= -1" in caught.value.args[0].str()
    ratio = ConfigResource("topic", "configured", incremental_configs=[
        ConfigEntry("min.cleanable.dirty.ratio", "half", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception) as caught:
        list(client.incremental_alter_configs([ratio]).values())[0].result(timeout=30)
    assert (caught.value.args[0].code(), caught.value.args[0].str()) == (
        ErrorCode.INVALID_CONFIG, "min.cleanable.dirty.ratio: 'half' is not a number in 0..1")
    assert confluent_describe(client, "configured") == expected  # nothing of a refused change applied


def test_every_config_read_back_can_be_written_back(cluster: DevCluster) -> None:
    """What librdkafka's own admin test does: describe a topic, then AlterConfigs (which replaces
    the whole config) with every entry read. A key without a default is described "" while
    unset (librdkafka refuses a null value), and "" written to it unsets it."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    client = admin(cluster)
    client.create_topics([NewTopic("round-trip", 1, 3, config={"retention.ms": "60000",
                                                               "vdl.table.schema": "id BIGINT"})])["round-trip"].result(30)
    expected = EXPECTED | {"cleanup.policy": ("delete", 5), "vdl.table.schema": ("id BIGINT", 1)}
    wait_until(lambda: confluent_describe(client, "round-trip") == expected, 10, "the new stream's configs")
    read_back = confluent_describe(client, "round-trip")
    assert read_back["vdl.table.path"] == ("", 5)

    resource = ConfigResource("topic", "round-trip", set_config={name: value for name, (value, _) in read_back.items()})
    [future] = client.alter_configs([resource]).values()
    future.result(timeout=30)
    # Every value as it was; each is now the stream's own, but "" (still unset) and
    # min.insync.replicas (never stored: the stream's majority).
    rewritten = {name: (value, 5 if name == "vdl.table.path" else source if name == "min.insync.replicas" else 1)
                 for name, (value, source) in expected.items()}
    wait_until(lambda: confluent_describe(client, "round-trip") == rewritten, 10, "every config written back")

    unset = ConfigResource("topic", "round-trip", incremental_configs=[
        ConfigEntry("vdl.table.schema", "", incremental_operation=AlterConfigOpType.SET)])
    list(client.incremental_alter_configs([unset]).values())[0].result(timeout=30)
    wait_until(lambda: confluent_describe(client, "round-trip") == rewritten | {"vdl.table.schema": ("", 5)}, 10,
               'vdl.table.schema set to "": unset')


def test_max_message_bytes_refuses_larger_batches(cluster: DevCluster) -> None:
    import confluent_kafka
    from confluent_kafka.admin import NewTopic

    client = admin(cluster)
    client.create_topics([NewTopic("small-records", 1, 3, config={"max.message.bytes": "2000"})])["small-records"] \
        .result(timeout=30)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0,
                                         "acks": "all"})
    outcomes: list[object] = []
    producer.produce("small-records", value=b"s" * 500, on_delivery=lambda e, msg: outcomes.append(e or msg.offset()))
    producer.flush(30)
    producer.produce("small-records", value=b"L" * 3000, on_delivery=lambda e, msg: outcomes.append(e or msg.offset()))
    producer.flush(30)
    assert outcomes[0] == 0
    assert outcomes[1].code() == confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE
    confluent_alter(client, "small-records", {"max.message.bytes": "10000"})

    def accepted() -> bool:
        outcomes.clear()
        producer.produce("small-records", value=b"L" * 3000, on_delivery=lambda e, msg: outcomes.append(e or msg))
        producer.flush(30)
        return not isinstance(outcomes[0], confluent_kafka.KafkaError)
    wait_until(accepted, 10, "the leader applying the larger max.message.bytes")


def test_segment_size_and_retention_set_by_admin_client_apply_on_every_replica(cluster: DevCluster) -> None:
    from confluent_kafka.admin import NewTopic

    client = admin(cluster)
    client.create_topics([NewTopic("retained", 1, 3)])["retained"].result(timeout=30)
    confluent_alter(client, "retained", {"segment.bytes": "16384"})
    # As in Kafka, a config reaches each node a little after the answer: wait for every node.
    for node_id in cluster.node_ids():
        wait_until(lambda n=node_id: describe_at(node_address(cluster, n), "retained")["segment.bytes"]
                   == ("16384", 1), 10, f"node {node_id} applying segment.bytes")
    produce(cluster, "retained", 600, 200)  # ~150 KB: ~10 segments of 16 KiB
    for node_id in cluster.node_ids():
        try:
            wait_until(lambda n=node_id: len(segments(cluster, n, "retained")) >= 6, 30,
                       f"node {node_id} rolling segments at 16 KiB")
        except AssertionError as timeout:
            views = {n: (describe_at(node_address(cluster, n), "retained")["segment.bytes"],
                         [(p.name, p.stat().st_size) for p in segments(cluster, n, "retained")])
                     for n in cluster.node_ids()}
            raise AssertionError(f"{timeout}; segment.bytes and segments per node: {views}") from None
        assert all(path.stat().st_size <= 16384 for path in segments(cluster, node_id, "retained")[1:])
    first = {n: segments(cluster, n, "retained")[0].name for n in cluster.node_ids()}
    assert set(first.values()) == {"00000000000000000001.log"}

    confluent_alter(client, "retained", {"retention.bytes": "32768"})
    for node_id in cluster.node_ids():
        wait_until(lambda n=node_id: 0 < len(segments(cluster, n, "retained")) <= 4
                   and segments(cluster, n, "retained")[0].name != first[n], 30,
                   f"retention deleting old segments on node {node_id}")
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
    partition = TopicPartition("retained", 0)
    start = consumer.beginning_offsets([partition])[partition]
    end = consumer.end_offsets([partition])[partition]
    consumer.close()
    assert 0 < start < end == 600


def test_retention_deletes_nothing_of_a_compact_stream_and_applies_to_compact_delete(cluster: DevCluster) -> None:
    """VDL never compacts: a stream with cleanup.policy=compact keeps every record whatever its
    retention (as a compacted Kafka topic keeps the latest value of every key, and offsets never
    change); DeleteRecords on it is POLICY_VIOLATION, as in Kafka. compact,delete deletes old
    segments by retention exactly like delete, and so does compact once altered to delete."""
    from confluent_kafka.admin import NewTopic
    from kafka import KafkaConsumer, TopicPartition

    client = admin(cluster)
    retained = {"segment.bytes": "16384", "retention.bytes": "32768"}
    futures = client.create_topics([NewTopic("kept", 1, 3, config=retained | {"cleanup.policy": "compact"}),
                                    NewTopic("windowed", 1, 3, config=retained | {"cleanup.policy": "compact,delete"})])
    for future in futures.values():
        future.result(timeout=30)
    for stream in ("kept", "windowed"):
        for node_id in cluster.node_ids():
            wait_until(lambda n=node_id, s=stream: describe_at(node_address(cluster, n), s)["segment.bytes"]
                       == ("16384", 1), 10, f"node {node_id} applying {stream}'s configs")
        produce(cluster, stream, 600, 200)  # ~150 KB: ~10 segments of 16 KiB
    # Retention runs every 200 ms on each node and deletes the compact,delete stream's old
    # segments; the compact stream's, judged in the same passes, all stay.
    for node_id in cluster.node_ids():
        wait_until(lambda n=node_id: 0 < len(segments(cluster, n, "windowed")) <= 4, 30,
                   f"retention deleting old segments of the compact,delete stream on node {node_id}")
        kept = segments(cluster, node_id, "kept")
        assert len(kept) >= 6 and kept[0].name == "00000000000000000001.log", [p.name for p in kept]

    def offsets(stream: str) -> tuple[int, int]:
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
        partition = TopicPartition(stream, 0)
        try:
            return consumer.beginning_offsets([partition])[partition], consumer.end_offsets([partition])[partition]
        finally:
            consumer.close()

    start, end = offsets("windowed")
    assert 0 < start < end == 600
    assert offsets("kept") == (0, 600)
    consumer = KafkaConsumer("kept", bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest",
                             consumer_timeout_ms=10_000)
    records = []
    for record in consumer:
        records.append((record.offset, record.value))
        if len(records) == 600:
            break
    consumer.close()
    assert records == [(i, b"%08d" % i + b"x" * 192) for i in range(600)]

    from confluent_kafka import KafkaException
    from confluent_kafka import TopicPartition as Partition

    [deleting] = client.delete_records([Partition("kept", 0, 300)]).values()
    with pytest.raises(KafkaException) as refused:
        deleting.result(timeout=30)
    assert refused.value.args[0].code() == ErrorCode.POLICY_VIOLATION
    assert offsets("kept") == (0, 600)

    confluent_alter(client, "kept", {"cleanup.policy": "delete"})
    for node_id in cluster.node_ids():
        wait_until(lambda n=node_id: 0 < len(segments(cluster, n, "kept")) <= 4, 30,
                   f"retention deleting old segments of the stream altered to delete on node {node_id}")
    start, end = offsets("kept")
    assert 0 < start < end == 600


def test_retention_ms_deletes_every_expired_record_the_last_segment_too(cluster: DevCluster) -> None:
    """As Kafka: once the newest record of the active segment is older than retention.ms, it goes
    too (the log rolls a new empty segment first), on every replica: a stream whose records all
    expired keeps none -- a windowed changelog of Kafka Streams with event times a day old, say.
    The stream goes on at its end offset. VDL kept the last segment whatever its age."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import NewTopic

    client = admin(cluster)
    config = {"cleanup.policy": "compact,delete", "retention.ms": "86400000"}
    client.create_topics([NewTopic("expired", 1, 3, config=config)])["expired"].result(timeout=30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    day_old = 1_700_000_000_000  # 2023: years older than a day
    for i in range(3):
        producer.produce("expired", key=b"k%d" % i, value=b"v%d" % i, timestamp=day_old + i)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "expired-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    partition = TopicPartition("expired", 0)
    try:
        wait_until(lambda: consumer.get_watermark_offsets(partition, timeout=10, cached=False) == (3, 3), 30,
                   lambda: f"retention deleting every record: {consumer.get_watermark_offsets(partition, 10)}")
        for node_id in cluster.node_ids():
            wait_until(lambda n=node_id: len(names := [p.name for p in segments(cluster, n, "expired")]) == 1
                       and names != ["00000000000000000001.log"], 30, f"node {node_id} deleting the expired segment")
        producer.produce("expired", key=b"new", value=b"now")
        assert producer.flush(30) == 0
        consumer.assign([TopicPartition("expired", 0, 0)])  # below the log start: reset to earliest
        messages = wait_until(lambda: consumer.consume(10, 0.5), 30, "the new record")
        assert [(m.offset(), m.key(), m.value()) for m in messages] == [(3, b"new", b"now")]
    finally:
        consumer.close()


def test_kafka_python_admin_alters_and_describes(cluster: DevCluster) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        client.create_topics([NewTopic("kp-configured", 1, 3, topic_configs={"segment.ms": "3600000"})])

        def described() -> dict[str, tuple[str, str]]:
            answer = client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-configured")])
            return {k: (v["value"], v["config_source"]) for k, v in answer["topic"]["kp-configured"].items()}

        # kafka-python asks any node; one other than the metadata leader applies a change a moment
        # later (as Kafka's brokers apply the controller's records), so each answer is awaited
        wait_until(lambda: described() == {"segment.ms": ("3600000", "DYNAMIC_TOPIC_CONFIG")}, 10,
                   "the created topic's config described")
        assert client.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-configured",
                                                    {"retention.bytes": "1048576"})]) == {"topic": {"kp-configured": "OK"}}
        wait_until(lambda: described() == {"segment.ms": ("3600000", "DYNAMIC_TOPIC_CONFIG"),
                                           "retention.bytes": ("1048576", "DYNAMIC_TOPIC_CONFIG")}, 10,
                   "the altered config described")
        # A Kafka 4.4 topic config VDL refused before (it has no effect on VDL: README)
        assert client.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-configured", {
            "segment.bytes": "1048576", "segment.index.bytes": "65536"})]) == {"topic": {"kp-configured": "OK"}}
        wait_until(lambda: described() == {"segment.ms": ("3600000", "DYNAMIC_TOPIC_CONFIG"),
                                           "retention.bytes": ("1048576", "DYNAMIC_TOPIC_CONFIG"),
                                           "segment.bytes": ("1048576", "DYNAMIC_TOPIC_CONFIG"),
                                           "segment.index.bytes": ("65536", "DYNAMIC_TOPIC_CONFIG")}, 10,
                   "the Kafka topic config described")
        refused = client.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-configured",
                                                       {"vdl.table.format": "parquet"})], raise_on_unknown=False)
        assert "vdl.table.format: 'parquet' is not one of raw | json" in refused["topic"]["kp-configured"]
        assert "InvalidConfigurationError" in refused["topic"]["kp-configured"]
    finally:
        client.close()


def test_broker_resources_describe_each_node(cluster: DevCluster) -> None:
    from confluent_kafka.admin import ConfigResource

    client = admin(cluster)
    for node_id in cluster.node_ids():
        [future] = client.describe_configs([ConfigResource("broker", str(node_id))]).values()
        configs = future.result(timeout=30)
        address = node_address(cluster, node_id)
        assert configs["broker.id"].value == str(node_id)
        assert configs["listeners"].value == f"PLAINTEXT://{address}"
        assert configs["log.retention.check.interval.ms"].value == "200"
        assert int(configs["log.retention.check.interval.ms"].source) == 4  # STATIC_BROKER_CONFIG
        assert configs["num.partitions"].value == "1"
        assert configs["log.retention.ms"].value == "-1" and int(configs["log.retention.ms"].source) == 5
        assert all(entry.is_read_only for entry in configs.values())
    other = m.DescribeConfigsRequest(resources=[m.DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=BROKER, resource_name="2", configuration_keys=None)])
    result = raw_request(node_address(cluster, 1), other).results[0]
    assert result.error_code == ErrorCode.INVALID_REQUEST and "expected 1" in result.error_message
    alter = m.IncrementalAlterConfigsRequest(resources=[m.IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=BROKER, resource_name="1", configs=[m.IncrementalAlterConfigsRequest.AlterableConfig(
            name="log.retention.ms", config_operation=0, value="1")])])
    answer = raw_request(node_address(cluster, 1), alter).responses[0]
    assert answer.error_code == ErrorCode.INVALID_CONFIG and answer.error_message.startswith("log.retention.ms: ")
    # Deleting is a no-op (nothing is set dynamically on a node), as Kafka answers for an unset
    # config: kafka-reassign-partitions --verify deletes the replication throttles this way.
    clear = m.IncrementalAlterConfigsRequest(resources=[m.IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=BROKER, resource_name="1", configs=[m.IncrementalAlterConfigsRequest.AlterableConfig(
            name=name, config_operation=1, value=None) for name in (
            "leader.replication.throttled.rate", "follower.replication.throttled.rate",
            "replica.alter.log.dirs.io.max.bytes.per.second")])])
    cleared = raw_request(node_address(cluster, 1), clear).responses[0]
    assert (cleared.error_code, cleared.error_message) == (ErrorCode.NONE, None)


def vdl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*VDL_CLI, *args], capture_output=True, text=True, timeout=60)


def test_cli_sets_and_shows_configs(cluster: DevCluster) -> None:
    b = ["--bootstrap", cluster.bootstrap_servers]
    created = vdl("streams", "create", "cli-configured", "--config", "retention.ms=86400000",
                  "--config", "segment.bytes=1048576", *b)
    assert created.returncode == 0, created.stderr
    altered = vdl("streams", "alter-config", "cli-configured", "--set", "max.message.bytes=65536",
                  "--delete", "segment.bytes", *b)
    assert altered.stdout == "altered stream cli-configured: max.message.bytes=65536, segment.bytes (default)\n"

    def described() -> str:
        result = vdl("streams", "describe", "cli-configured", *b)
        assert result.returncode == 0, result.stderr
        return result.stdout
    rows = [("retention.ms", "86400000", "stream"), ("retention.bytes", "-1", "default"),
            ("segment.bytes", "1073741824", "default"), ("segment.ms", "604800000", "default"),
            ("max.message.bytes", "65536", "stream"), ("cleanup.policy", "delete", "default"),
            ("min.compaction.lag.ms", "0", "default"), ("max.compaction.lag.ms", "9223372036854775807", "default"),
            ("delete.retention.ms", "86400000", "default"), ("message.timestamp.type", "CreateTime", "default"),
            ("message.timestamp.before.max.ms", "9223372036854775807", "default"),
            ("message.timestamp.after.max.ms", "3600000", "default"), ("compression.type", "producer", "default"), ("unclean.leader.election.enable", "false", "default"),
            *((name, value or "-", "default") for name, (value, _) in EXPECTED.items()
              if name not in ("retention.ms", "retention.bytes", "segment.bytes", "segment.ms", "max.message.bytes",
                              "cleanup.policy", "min.compaction.lag.ms", "max.compaction.lag.ms",
                              "delete.retention.ms", "message.timestamp.type", "message.timestamp.before.max.ms",
                              "message.timestamp.after.max.ms", "compression.type",
                              "unclean.leader.election.enable", "min.insync.replicas")),
            ("min.insync.replicas", "2", "cluster")]
    width, value_width = max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)
    expected = "configs:\n" + "".join(f"  {name:<{width}}  {value:<{value_width}}  ({source})\n"
                                       for name, value, source in rows)
    output = wait_until(lambda: (text := described()).endswith(expected) and text, 10, "describe showing the change")
    assert output.startswith("stream cli-configured: partition 0, leader node ")
    assert output.splitlines()[0].endswith("offsets 0..0 (0 records)")
    for args, words in ((["alter-config", "cli-configured", "--set", "retention.ms=often"],
                         "vdl: error: INVALID_CONFIG: retention.ms: 'often' is not an integer >= -1"),
                        (["alter-config", "cli-configured", "--set", "colour=blue"],
                         "vdl: error: INVALID_CONFIG: unknown stream config 'colour'"),
                        (["alter-config", "cli-configured", "--set", "novalue"],
                         "vdl: error: --set takes KEY=VALUE, got 'novalue'"),
                        (["alter-config", "missing-stream", "--set", "retention.ms=1"], "does not exist"),
                        (["create", "cli-bad", "--config", "segment.ms=0"], "segment.ms: '0' is not an integer >= 1")):
        result = vdl("streams", *args, *b)
        assert result.returncode != 0
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], result.stderr
