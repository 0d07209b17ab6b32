"""Process tests: a byte flipped in a *running* node's segment never leaves that node.

The open checks every entry it does not know to be intact (test_corruption.py); a file that
changes afterwards is found by the read that meets it (vdl_broker/log/reading.py): a consumer's
fetch, or the leader reading entries for a follower that is catching up. Unchecked, the first
would hand the damaged batch to a client that does not check CRCs (librdkafka's default), and the
second would give it to the follower, which stores it under a CRC of its own: two damaged copies
of an acknowledged record. Checked, the node stops the replica, opens it again (cutting the log
at the damage and recording it), another replica leads, and the damaged one gets the range back
and ends byte-identical.

The nodes keep no tail cache here, so reads of recent entries come from the segments too (with
one, only entries older than the cache reach the disk).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.faults.harness import (
    ProbeLog,
    create_stream,
    high_watermark,
    node_address,
    produce_batches,
    wait_logs_converged,
    wait_until,
)
from tests.faults.test_corruption import (
    HEADER,
    converge,
    create_small_segments,
    directory,
    entry_position,
    others,
)
from tests.support.disk import cut_at_page, flip_byte
from tests.support.kafka import create_topic_raw, list_offset_raw, metadata_raw, produce_raw
from vdl_broker.cluster.metadata import METADATA_GROUP
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.log.damage import DAMAGE_FILE
from vdl_dev.dev_cluster import DevCluster
from vdl_wire.errors import ErrorCode
from vdl_wire.records.record_batch import RecordBatchBuilder

pytestmark = pytest.mark.timeout(150)

CLUSTER_SETTINGS = {"metadata_wait_ms": 3_000, "tail_cache_bytes": 0}


def consume_from_start(cluster: DevCluster, stream: str, end: int) -> dict[int, bytes]:
    """offset -> value of every record below `end`, read by librdkafka with its default
    check.crcs=false: a damaged batch it were given would show as a wrong value."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "unused",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    try:
        consumer.assign([TopicPartition(stream, 0, 0)])
        seen: dict[int, bytes] = {}
        errors: list[str] = []

        def caught_up() -> bool:
            # All the messages fetched so far in one call: one per call, with wait_until's pause
            # between calls, took 12 s for a few hundred records.
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                if message.error() is not None:
                    errors.append(str(message.error()))
                else:
                    seen[message.offset()] = message.value()
            return len(seen) >= end

        wait_until(caught_up, 60, f"a consumer reading offsets 0..{end - 1} of {stream} (errors: {errors})")
        return seen
    finally:
        consumer.close()


def wait_damage_logged(cluster: DevCluster, node: int, file_name: str, problem: str = "fails its CRC") -> None:
    """The node logs `problem` naming `file_name` (its output comes in by a thread: wait for it)."""
    def logged() -> bool:
        output = list(cluster.nodes[node].output)  # appended by the thread reading the node: read a copy
        return any(problem in line and file_name in line for line in output)

    wait_until(logged, 10, f"node {node} logging that {file_name} {problem}")


@dataclass(frozen=True)
class Damage:
    """A way to damage an acknowledged entry's segment under a running node, and what the node
    logs when a read meets it."""

    name: str
    logged: str
    apply: Callable[[Path, int], None]  # (segment file, the entry's position in it)


def _flip_in_records(path: Path, position: int) -> None:
    flip_byte(path, position + HEADER + 200)  # in the records of the batch


def _flip_in_length(path: Path, position: int) -> None:
    flip_byte(path, position + HEADER - 1)  # the length's high byte: the entry claims gigabytes


CUT_SHORT = "lies past the end of the file"
# Cut at a page boundary: before the size check, the leader died of SIGBUS reading the cut range.
# A damaged length sends the walk past the segment's end: before, every read of it failed with a
# ValueError, which is no damage, and the reader was stuck there for good.
DAMAGES = pytest.mark.parametrize("damage", [Damage("flipped", "fails its CRC", _flip_in_records),
                                             Damage("cut", CUT_SHORT, cut_at_page),
                                             Damage("length", "is unreadable", _flip_in_length)],
                                  ids=lambda d: d.name)


@DAMAGES
def test_a_damaged_segment_under_a_leader_is_found_by_a_consumers_read(cluster: DevCluster, probes: ProbeLog,
                                                                       damage: Damage) -> None:
    stream = f"{damage.name}-under-reads"
    create_small_segments(cluster, stream, probes)
    acked = produce_batches(cluster, stream, 12, "acked")
    wait_logs_converged(cluster, stream, timeout=60)
    leader, end = high_watermark(cluster, stream)
    path, position = entry_position(directory(cluster, leader, stream), acked[len(acked) // 2][1])
    damage.apply(path, position)

    seen = consume_from_start(cluster, stream, end)
    assert {offset: seen[offset] for _, offset, _ in acked} == {offset: value for _, offset, value in acked}
    assert cluster.nodes[leader].running
    wait_damage_logged(cluster, leader, path.name, damage.logged)
    assert high_watermark(cluster, stream, timeout=30)[0] != leader
    converge(cluster, stream, leader, acked)


@DAMAGES
def test_a_damaged_segment_under_a_leader_is_not_replicated_to_a_follower_catching_up(
        cluster: DevCluster, probes: ProbeLog, damage: Damage) -> None:
    stream = f"{damage.name}-under-replication"
    create_small_segments(cluster, stream, probes)
    acked = produce_batches(cluster, stream, 3, "early")
    leader, _ = high_watermark(cluster, stream)
    behind = others(cluster, leader)[0]
    cluster.kill(behind)
    acked += produce_batches(cluster, stream, 12, "acked")  # on the leader and the other follower only
    leader, _ = high_watermark(cluster, stream)
    path, position = entry_position(directory(cluster, leader, stream), acked[len(acked) // 2][1])
    damage.apply(path, position)

    cluster.restart(behind, timeout_s=60)  # the leader reads the damaged entry to send it there
    converge(cluster, stream, leader, acked)  # byte-identical logs: the damage reached no follower
    assert cluster.nodes[leader].running
    wait_damage_logged(cluster, leader, path.name, damage.logged)
    seen = consume_from_start(cluster, stream, high_watermark(cluster, stream)[1])
    assert {offset: seen[offset] for _, offset, _ in acked} == {offset: value for _, offset, value in acked}


def last_entry_position(source: Path) -> tuple[Path, int]:
    """(segment file, position) of the last entry of the log in `source`, found in a copy."""
    with tempfile.TemporaryDirectory(prefix="vdl-corrupt-") as scratch:
        copy = Path(scratch) / "copy"
        shutil.copytree(source, copy)
        log = StreamLog.open(copy, LogConfig(fsync=False, tail_cache_bytes=0))
        try:
            segment = log._ensure_loaded(log._segment_for_index(log.last_index))
            return source / segment.log_path.name, segment.position_of(log.last_index)
        finally:
            log.close()


def test_a_byte_flipped_in_the_metadata_log_stops_the_node_and_its_restart_recovers(
        cluster: DevCluster, probes: ProbeLog) -> None:
    """The metadata log's leader meets the damage sending a follower the entries it missed: the
    node stops at once (exit code 1); started again, it cuts the log there, records the damage,
    gets the range back, and every node knows every stream."""
    leader = int(metadata_raw(node_address(cluster, 1), []).controller_id)
    behind, intact = others(cluster, leader)
    cluster.kill(behind)
    names = [f"created-while-{behind}-was-down-{n}" for n in range(3)]
    for name in names:
        assert create_topic_raw(node_address(cluster, leader), name) == (0, None)
    path, position = last_entry_position(directory(cluster, leader, METADATA_GROUP))
    flip_byte(path, position + HEADER + 5)

    cluster.restart(behind, wait=False)  # the metadata leader reads the damaged entry to send it
    node = cluster.nodes[leader]
    wait_until(lambda: not node.running, 60, f"node {leader} stopping on its damaged metadata log")
    assert node.process is not None and node.process.returncode == 1
    assert any("the metadata log is damaged" in line and "fails its CRC" in line for line in list(node.output))

    cluster.wait_ready([behind], timeout_s=60)
    cluster.restart(leader, timeout_s=60)
    wait_until(lambda: not (directory(cluster, leader, METADATA_GROUP) / DAMAGE_FILE).exists(), 60,
               f"node {leader} getting the damaged range of its metadata log back")

    def every_node_knows_every_stream() -> bool:
        for node_id in (leader, behind, intact):
            topics = metadata_raw(node_address(cluster, node_id), names).topics
            if sorted((t.name, t.error_code) for t in topics) != [(name, 0) for name in sorted(names)]:
                return False
        return True

    wait_until(every_node_knows_every_stream, 60, "every node listing the streams created")


def test_a_segment_cut_short_under_a_leader_answers_a_timestamp_lookup_with_a_storage_error(
        cluster: DevCluster, probes: ProbeLog) -> None:
    """ListOffsets by timestamp reads the segments too (their time index, rebuilt from the log,
    then the batches): the lookup that meets the cut gets KAFKA_STORAGE_ERROR, as a fetch does,
    and the replica recovers. Before: the rebuild quietly dropped the entries past the cut from
    the open log."""
    stream = "cut-under-lookups"
    leader = create_small_segments(cluster, stream, probes)
    acked: list[tuple[str, int, bytes]] = []
    # After the creation's probe record, within Kafka's message.timestamp.after.max.ms (an hour)
    timestamp_base = int(time.time() * 1000) + 60_000
    for n in range(12):  # a timestamp of its own per batch: the lookup lands on one batch
        builder = RecordBatchBuilder()
        values = [f"timed-{n:02d}-{i:02d}".encode().ljust(100, b".") for i in range(20)]
        for value in values:
            builder.append(timestamp_base + n, None, value)
        code, base = produce_raw(node_address(cluster, leader), stream, builder.build(), acks=-1, timeout_ms=5000)
        assert code == 0, ErrorCode(code).name
        acked += [("timed", base + i, value) for i, value in enumerate(values)]
    wait_logs_converged(cluster, stream, timeout=60)
    assert high_watermark(cluster, stream)[0] == leader
    first = acked[0][1]
    path, position = entry_position(directory(cluster, leader, stream), first + 6 * 20)  # batch 6's
    cut_at_page(path, position)

    assert list_offset_raw(node_address(cluster, leader), stream, timestamp_base + 6) == (
        ErrorCode.KAFKA_STORAGE_ERROR, -1)
    wait_damage_logged(cluster, leader, path.name, CUT_SHORT)
    assert cluster.nodes[leader].running
    converge(cluster, stream, leader, acked)
    new_leader, _ = high_watermark(cluster, stream)
    assert list_offset_raw(node_address(cluster, new_leader), stream, timestamp_base + 6) == (ErrorCode.NONE, first + 6 * 20)


def test_an_index_file_cut_short_under_a_leader_is_rebuilt(cluster: DevCluster, probes: ProbeLog) -> None:
    """A sealed segment's indexes are read through mappings too: one cut short is rebuilt from
    the log (nothing is lost: an index is derived data) and the reads go on. Before: SIGBUS."""
    stream = "index-cut-under-reads"
    create_small_segments(cluster, stream, probes)
    acked = produce_batches(cluster, stream, 12, "acked")
    wait_logs_converged(cluster, stream, timeout=60)
    leader, end = high_watermark(cluster, stream)
    path, _ = entry_position(directory(cluster, leader, stream), acked[len(acked) // 2][1])
    consume_from_start(cluster, stream, end)  # the leader maps the sealed segments' indexes
    for suffix in (".index", ".ridx", ".timeindex"):
        os.truncate(path.with_suffix(suffix), 0)

    seen = consume_from_start(cluster, stream, end)
    assert {offset: seen[offset] for _, offset, _ in acked} == {offset: value for _, offset, value in acked}
    assert cluster.nodes[leader].running and high_watermark(cluster, stream)[0] == leader
    wait_damage_logged(cluster, leader, path.with_suffix(".ridx").name, "cut short")


def produce_at_leader(cluster: DevCluster, stream: str, batches: int, tag: str) -> list[tuple[str, int, bytes]]:
    """produce_batches, each batch retried at whichever node leads until one acknowledges it."""
    acked: list[tuple[str, int, bytes]] = []
    for n in range(batches):
        acked += wait_until(lambda n=n: _try_batch(cluster, stream, f"{tag}{n}"), 30, f"batch {n} acknowledged")
    return acked


def _try_batch(cluster: DevCluster, stream: str, tag: str) -> list[tuple[str, int, bytes]] | None:
    try:
        return produce_batches(cluster, stream, 1, tag)
    except AssertionError:  # NOT_LEADER_OR_FOLLOWER while leadership moves
        return None


def test_the_active_segment_cut_short_under_a_leader_is_found_by_its_next_append(
        cluster: DevCluster, probes: ProbeLog) -> None:
    """The leader appends at its active segment's end (O_APPEND): after a cut, the next entry
    lands where the cut ones were, and the first read of it (sending it to a follower) meets the
    cut before the entry is applied. The replica is closed and opened again, which cuts the log
    there and records the damage. Before: that close saved the producer state at the last
    applied entry, reading the log past the cut, failed, and the replica was never opened again
    (NOT_LEADER_OR_FOLLOWER there until a restart)."""
    stream = "active-cut-under-appends"
    leader = create_stream(cluster, stream, 1, probes)
    acked = produce_batches(cluster, stream, 6, "before", leader=leader)
    wait_logs_converged(cluster, stream, timeout=60)
    path = sorted(directory(cluster, leader, stream).glob("*.log"))[-1]  # the active segment
    cut_at_page(path, path.stat().st_size // 2)

    # Straight to the leader: a Fetch first (produce_batches asks who leads) would meet the cut
    # before the append does.
    builder = RecordBatchBuilder()
    builder.append(0, None, b"first-after-cut")
    code, base = produce_raw(node_address(cluster, leader), stream, builder.build(), acks=-1, timeout_ms=5000)
    if code == ErrorCode.NONE:
        acked.append(("first-after-cut", base, b"first-after-cut"))
    acked += produce_at_leader(cluster, stream, 3, "after-cut")
    wait_damage_logged(cluster, leader, path.name, CUT_SHORT)
    assert cluster.nodes[leader].running
    seen = consume_from_start(cluster, stream, high_watermark(cluster, stream)[1])
    assert {offset: seen[offset] for _, offset, _ in acked} == {offset: value for _, offset, value in acked}
    converge(cluster, stream, leader, acked)
