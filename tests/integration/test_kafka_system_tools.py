"""The tools Apache Kafka's own system tests (ducktape) drive brokers with, run against a 3-node
cluster: kafka-verifiable-producer and kafka-verifiable-consumer (classic and KIP-848 groups),
TransactionalMessageCopier, and the timestamp bounds of KIP-937 that a producer's
`--message-create-time` meets. Their JSON event lines are parsed and compared exactly.

One cluster for the module. The verifiable producer and consumer stop through a JVM shutdown
hook of their own (Runtime.addShutdownHook, not Kafka's Exit), so each runs as a JVM of its own,
as in Kafka's system tests, several at once; the rest runs in the module's harness JVM.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.support.cluster import node_address, wait_until
from tests.support.java_client import TOOLS, JavaClients, ToolResult, java_command, write_properties
from tests.support.kafka import LATEST, list_offset_raw, produce_request, raw_request
from vdl_dev.dev_cluster import DevCluster
from vdl_wire.errors import ErrorCode
from vdl_wire.records.record_batch import RecordBatchBuilder

pytestmark = pytest.mark.timeout(300)

CLUSTER_SETTINGS = {"group_initial_rebalance_delay_ms": 0, "group_consumer_heartbeat_interval_ms": 500}
IDEMPOTENT = {"enable.idempotence": "true", "retries": "2147483647", "max.in.flight.requests.per.connection": "5"}
LONG_MAX = (1 << 63) - 1
HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaClients]:
    with JavaClients(tmp_path_factory.mktemp("java")) as clients:
        yield clients


@pytest.fixture(scope="module")
def configs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("configs")
    write_properties(directory / "idempotent.properties", IDEMPOTENT)
    write_properties(directory / "read_committed.properties", {"isolation.level": "read_committed"})
    return directory


def _events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def _run_jvms(directory: Path, runs: Sequence[tuple[str, Sequence[str]]], timeout_s: float = 120.0) -> list[ToolResult]:
    """Each (tool, args) as a JVM of its own, all at once; their results in the same order."""
    started = []
    for i, (tool, args) in enumerate(runs):
        out, err = (directory / f"jvm-{time.monotonic_ns()}-{i}.{kind}" for kind in ("out", "err"))
        with out.open("w") as stdout, err.open("w") as stderr:
            started.append((subprocess.Popen(java_command(TOOLS[tool], *args), stdout=stdout, stderr=stderr), out, err))
    results = []
    for process, out, err in started:
        try:
            returncode = process.wait(timeout_s)
        finally:
            process.kill()
            process.wait()
        results.append(ToolResult(returncode, out.read_text(), err.read_text()))
    return results


def _create(java: JavaClients, cluster: DevCluster, stream: str, *configs: str) -> None:
    done = java.tool("kafka-topics", "--bootstrap-server", cluster.bootstrap_servers, "--create", "--topic", stream,
                     "--replication-factor", "3", *[arg for config in configs for arg in ("--config", config)])
    assert (done.returncode, done.stdout) == (0, f"Created topic {stream}.\n"), done.stderr


def _producer(cluster: DevCluster, configs: Path, stream: str, count: int, *extra: str) -> tuple[str, list[str]]:
    """A kafka-verifiable-producer run: idempotent, acks=all, `count` records valued 0, 1, ..."""
    return "kafka-verifiable-producer", ["--bootstrap-server", cluster.bootstrap_servers, "--topic", stream,
                                         "--max-messages", str(count), "--acks", "-1", "--command-config",
                                         str(configs / "idempotent.properties"), *extra]


def _events_of(done: ToolResult) -> list[dict]:
    assert done.returncode == 0, done.stderr
    return _events(done.stdout)


def test_verifiable_producer_and_consumers_of_every_assignor(dev_cluster: DevCluster, java: JavaClients,
                                                            configs: Path) -> None:
    """Kafka's consumer_test.py pattern: what the idempotent acks=all producer acknowledged is
    what each group reads, once, at the acknowledged offsets, whatever the protocol and assignor."""
    stream = "verifiable"
    _create(java, dev_cluster, stream)
    [produced] = _run_jvms(configs, [_producer(dev_cluster, configs, stream, 300)])
    events = _events_of(produced)
    acked = [(e["offset"], e["value"]) for e in events if e["name"] == "producer_send_success"]
    assert acked == [(i, str(i)) for i in range(300)]
    assert events[-1] | {"timestamp": 0, "avg_throughput": 0} == {
        "timestamp": 0, "name": "tool_data", "sent": 300, "acked": 300, "target_throughput": -1, "avg_throughput": 0}
    # the classic assignors run in the client: an eager one and the cooperative one (its own
    # rebalance protocol) stand for them
    classic = [("classic", "--assignment-strategy", f"org.apache.kafka.clients.consumer.{name}")
               for name in ("RangeAssignor", "CooperativeStickyAssignor")]
    kip848 = [("consumer", "--group-remote-assignor", name) for name in ("uniform", "range")]
    groups = [f"verifiable-{protocol}-{assignor.rsplit('.', 1)[-1]}" for protocol, _, assignor in classic + kip848]
    runs = [("kafka-verifiable-consumer", ["--bootstrap-server", dev_cluster.bootstrap_servers, "--topic", stream,
                                           "--group-id", group, "--group-protocol", protocol, option, assignor,
                                           "--max-messages", "300", "--verbose"])
            for group, (protocol, option, assignor) in zip(groups, classic + kip848, strict=True)]
    for group, done in zip(groups, _run_jvms(configs, runs), strict=True):
        events = _events_of(done)
        assert [(e["offset"], e["value"]) for e in events if e["name"] == "record_data"] == acked, group
        # (shutdown_requested: printed by its JVM shutdown hook, before or after it closed)
        names = [e["name"] for e in events if e["name"] not in ("record_data", "records_consumed", "offsets_committed",
                                                                 "shutdown_requested")]
        assert names == ["startup_complete", "partitions_assigned", "partitions_revoked", "shutdown_complete"], group
        commits = [e for e in events if e["name"] == "offsets_committed"]
        assert commits[-1]["offsets"] == [{"topic": stream, "partition": 0, "offset": 300}], group
        assert all(commit["success"] for commit in commits), group


def test_transactional_message_copier_copies_exactly_once(dev_cluster: DevCluster, java: JavaClients) -> None:
    """Kafka's transactions_test.py: the copier (group mode, random aborts, its input offsets
    committed in its transactions) leaves a read_committed reader exactly the input, once each."""
    source, copy = "copier-in", "copier-out"
    _create(java, dev_cluster, source)
    _create(java, dev_cluster, copy)
    java.producer("copier-source", dev_cluster.bootstrap_servers)
    values = [str(i) for i in range(1000)]
    java.send("copier-source", source, values)
    java.call("close", name="copier-source")
    done = java.tool("transactional-message-copier", "--broker-list", dev_cluster.bootstrap_servers,
                     "--input-topic", source, "--input-partition", "0", "--output-topic", copy,
                     "--transactional-id", "copier", "--consumer-group", "copier-group", "--transaction-size", "50",
                     "--enable-random-aborts", "--use-group-metadata", "--group-mode")
    last = _events_of(done)[-1]
    assert (last["stage"], last["totalProcessed"], last["remaining"]) == ("ShutdownComplete", 1000, 0)
    java.consumer("copy-reader", dev_cluster.bootstrap_servers, **{"isolation.level": "read_committed"})
    java.call("assign", name="copy-reader", partitions=[copy])
    java.call("seek_to_beginning", name="copy-reader", partitions=[copy])
    copied: list[dict] = []
    end = 0

    def read_to_end() -> bool:
        """Every value, and on to the last transaction's commit marker (the log's last offset).
        The copier's last commit returned once it was decided, before its markers were written
        (KIP-98, as Kafka): until they are, the stable end is before that transaction."""
        nonlocal end
        copied.extend(java.poll("copy-reader", min_records=1, timeout_ms=2000))
        end = java.call("end_offsets", name="copy-reader", partitions=[copy])[copy]
        return len(copied) >= len(values) and copied[-1]["offset"] >= end - 2

    wait_until(read_to_end, 60, lambda: f"the reader to read {len(values)} values up to offset {end - 2} "
                                        f"({len(copied)} read, at {copied[-1:]})")
    java.call("close", name="copy-reader")
    assert sorted(record["value"] for record in copied) == sorted(values)


def _refusals(events: list[dict]) -> list[tuple[str, str, int, int, int]]:
    """(exception, value, timestamp, lower, upper) of each producer_send_error."""
    found = []
    for event in events:
        if event["name"] == "producer_send_error":
            match = re.fullmatch(r"Timestamp (\d+) of message with offset \d+ is out of range\. "
                                 r"The timestamp should be within \[(-?\d+), (-?\d+)\]", event["message"])
            assert match is not None, event["message"]
            found.append((event["exception"], event["value"], *map(int, match.groups())))
    return found


def test_producer_timestamps_out_of_bounds_are_refused(dev_cluster: DevCluster, java: JavaClients,
                                                       configs: Path) -> None:
    """KIP-937, as Kafka 4 answers: a CreateTime more than message.timestamp.after.max.ms (1 hour)
    ahead of the leader's clock, or more than message.timestamp.before.max.ms (no limit) behind,
    fails the batch with INVALID_TIMESTAMP naming each such record and the accepted range; the
    stream configs move the bounds."""
    future_stream, lenient, strict = "ts-future", "ts-lenient", "ts-strict"
    _create(java, dev_cluster, future_stream)
    _create(java, dev_cluster, lenient, f"message.timestamp.after.max.ms={3 * HOUR_MS}")
    _create(java, dev_cluster, strict, "message.timestamp.before.max.ms=60000")
    now = int(time.time() * 1000)
    future = now + 2 * HOUR_MS
    future_run, strict_run = (_events_of(done) for done in _run_jvms(configs, [
        _producer(dev_cluster, configs, future_stream, 2, "--message-create-time", str(future)),
        _producer(dev_cluster, configs, strict, 1, "--message-create-time", "1000")]))
    refused = _refusals(future_run)
    # The Java producer names a refused record's exception by its batch (Kafka's Sender.failBatch):
    # InvalidRecordException when the batch had several refused records, the partition error's own
    # (InvalidTimestampException) when it had one. The two records share a batch unless the
    # producer sent the first before the second was added (within its linger, on a loaded machine).
    assert [value for _, value, *_ in refused] == ["0", "1"]
    assert [exception for exception, *_ in refused] in (
        ["class org.apache.kafka.common.InvalidRecordException"] * 2,
        ["class org.apache.kafka.common.errors.InvalidTimestampException"] * 2), refused
    for _, _, timestamp, lower, upper in refused:
        # the bounds are the leader's clock minus Long.MAX_VALUE and plus one hour
        assert (lower, timestamp > upper) == (upper - HOUR_MS - LONG_MAX, True)
    assert future_run[-1]["acked"] == 0
    assert [(value, timestamp, upper - lower) for _, value, timestamp, lower, upper in _refusals(strict_run)] == [
        ("0", 1000, 60000 + HOUR_MS)]
    # The answer itself: the batch's record indexes, Kafka's error message; nothing stored.
    builder = RecordBatchBuilder()
    for timestamp, value in ((now, b"now"), (future, b"later"), (1000, b"old"), (future + 1, b"later still")):
        builder.append(timestamp, None, value)
    batch = builder.build()
    leader = node_address(dev_cluster, wait_until(lambda: dev_cluster.leader_of(future_stream), 30))
    answer = raw_request(leader, produce_request(future_stream, batch)).responses[0].partition_responses[0]
    assert (answer.error_code, answer.error_message, answer.base_offset, answer.log_start_offset) == (
        ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp", -1, 0)
    assert [(e.batch_index, _refused_timestamp(e.batch_index_error_message)) for e in answer.record_errors] == [
        (1, future), (3, future + 1)]
    assert list_offset_raw(leader, future_stream, LATEST) == (0, 0)
    # two hours ahead is within the lenient stream's three
    leader = node_address(dev_cluster, wait_until(lambda: dev_cluster.leader_of(lenient), 30))
    answer = raw_request(leader, produce_request(lenient, batch)).responses[0].partition_responses[0]
    assert (answer.error_code, answer.base_offset, answer.record_errors) == (0, 0, [])


def _refused_timestamp(message: str) -> int:
    match = re.fullmatch(r"Timestamp (\d+) of message with offset \d+ is out of range\. "
                         r"The timestamp should be within \[-?\d+, \d+\]", message)
    assert match is not None, message
    return int(match.group(1))
