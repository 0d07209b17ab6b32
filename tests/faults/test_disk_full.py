"""Disk full: a broker whose data directory sits on a small tmpfs.

A produce that cannot be stored answers KAFKA_STORAGE_ERROR and is not acknowledged; reads keep
working while the disk is full; writes resume by themselves once space returns; the log holds
exactly the acknowledged records, with no gap and no corrupt entry (checked offline and after a
restart). With three nodes, one follower's full disk does not stop acks=all writes, and that
follower catches up byte for byte once it has space again.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaStorageError

from tests.faults.harness import ProbeLog, create_stream, read_log_image, wait_logs_converged
from tests.support.cluster import BrokerProcess, start_broker, start_cluster, wait_until
from tests.support.disk import TmpfsUnavailable, fill, mount_tmpfs, release, unmount
from vdl_broker.log import StreamLog
from vdl_broker.log.config import LogConfig
from vdl_broker.log.offset_index import OffsetIndex
from vdl_broker.raft.types import EntryType
from vdl_dev.dev_cluster import DevCluster
from vdl_wire.records.record_batch import read_records, validate_batch

VALUE_BYTES = 2000
RECORDS_PER_SEND = 8


def _mount_tmpfs(directory: Path, size: str) -> None:
    try:
        mount_tmpfs(directory, size)
    except TmpfsUnavailable as error:
        pytest.skip(str(error))


@contextlib.contextmanager
def tmpfs(directory: Path, size: str) -> Iterator[Path]:
    _mount_tmpfs(directory, size)
    try:
        yield directory
    finally:
        unmount(directory)


def value(n: int, i: int) -> bytes:
    return f"{n:06d}-{i}-".encode() + b"x" * VALUE_BYTES


def producer(bootstrap: str) -> KafkaProducer:
    # No retries: each send's outcome is exactly what the broker answered to it.
    return KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=0, linger_ms=0,
                         enable_idempotence=False, max_in_flight_requests_per_connection=1,
                         request_timeout_ms=10000, max_block_ms=10000)


def send_batch(prod: KafkaProducer, topic: str, n: int) -> tuple[int | None, BaseException | None]:
    """One produce request of RECORDS_PER_SEND records; (base offset, None) or (None, error)."""
    futures = [prod.send(topic, value(n, i)) for i in range(RECORDS_PER_SEND)]
    prod.flush()
    try:
        offsets = [f.get(timeout=15).offset for f in futures]
    except Exception as error:  # noqa: BLE001 - the error is what the test looks at
        return None, error
    assert offsets == list(range(offsets[0], offsets[0] + RECORDS_PER_SEND))
    return offsets[0], None


def read_back(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             consumer_timeout_ms=3000, fetch_max_wait_ms=100)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        consumer.seek_to_beginning(tp)
        rows: list[tuple[int, bytes]] = []
        while not rows or rows[-1][0] < end - 1:
            batch = consumer.poll(timeout_ms=2000)
            records = batch.get(tp, [])
            if not records and consumer.position(tp) >= end:
                break
            rows += [(r.offset, r.value) for r in records]
        return rows
    finally:
        consumer.close()


def offline_rows(stream_dir: Path) -> list[tuple[int, bytes]]:
    """Every record of a stream log opened offline; every DATA entry's batch CRC is checked."""
    log = StreamLog.open(stream_dir, LogConfig(fsync=False))
    try:
        rows: list[tuple[int, bytes]] = []
        expected = log.log_start_offset
        for entry in log.entries(log.first_index, log.last_index + 1):
            if entry.type != EntryType.DATA:
                continue
            header = validate_batch(bytes(entry.data))  # raises on a corrupt batch
            assert header.base_offset == expected, f"gap before offset {header.base_offset}"
            for record in read_records(bytes(entry.data)):
                rows.append((record.offset, record.value or b""))
            expected = header.base_offset + header.last_offset_delta + 1
        return rows
    finally:
        log.close()


def expected_rows(acked: list[tuple[int, int]]) -> list[tuple[int, bytes]]:
    return [(base + i, value(n, i)) for n, base in acked for i in range(RECORDS_PER_SEND)]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "data", "8m") as mount:
        yield mount


def test_single_node_disk_full_refuses_then_recovers(tmp_path: Path, small_disk: Path) -> None:
    broker: BrokerProcess = start_broker(tmp_path, auto_create_streams=True, fsync=False)
    try:
        topic = "full"
        prod = producer(broker.bootstrap)
        acked: list[tuple[int, int]] = []  # (send number, base offset)
        n = 0
        base, error = send_batch(prod, topic, n)  # creates the stream
        assert error is None, error
        acked.append((n, base))
        filler = small_disk / "filler"
        fill(filler)
        # Leave room for a few sends, so the log itself runs into the wall mid-write.
        release(filler, os.path.getsize(filler) - 200_000)
        errors: list[BaseException] = []
        while len(errors) < 5:
            n += 1
            assert n < 500, "the disk never filled up"
            base, error = send_batch(prod, topic, n)
            if error is None:
                assert not errors, "a send succeeded on a disk that refused the one before"
                acked.append((n, base))
            else:
                errors.append(error)
        assert all(isinstance(e, KafkaStorageError) for e in errors), errors
        assert len(acked) > 1
        # Reads keep working while the disk is full, and show exactly what was acknowledged.
        assert read_back(broker.bootstrap, topic) == expected_rows(acked)
        # Space returns: writes resume by themselves.
        release(filler)
        n += 1
        base, error = wait_until(lambda: _send_ok(prod, topic, n), timeout=15, message="writes to resume")
        acked.append((n, base))
        assert base == acked[-2][1] + RECORDS_PER_SEND  # no gap where the refused sends were
        for _ in range(3):
            n += 1
            base, error = send_batch(prod, topic, n)
            assert error is None, error
            acked.append((n, base))
        assert read_back(broker.bootstrap, topic) == expected_rows(acked)
        prod.close()
        assert broker.terminate() == 0
        assert offline_rows(broker.data_dir / topic) == expected_rows(acked)
        broker.start()
        assert read_back(broker.bootstrap, topic) == expected_rows(acked)
    finally:
        broker.kill()


def _output(cluster: DevCluster, node_id: int) -> str:
    return "\n".join(cluster.nodes[node_id].output)


def _send_ok(prod: KafkaProducer, topic: str, n: int) -> tuple[int, None] | None:
    base, error = send_batch(prod, topic, n)
    if error is None:
        assert base is not None
        return base, None
    assert isinstance(error, KafkaStorageError), error
    return None


def test_follower_with_full_disk_stops_acknowledging_then_catches_up(tmp_path: Path, probes: ProbeLog) -> None:
    mounts: list[Path] = []

    def on_tmpfs(cluster: DevCluster) -> None:
        for node in cluster.nodes.values():
            _mount_tmpfs(node.config.data_dir, "16m")
            mounts.append(node.config.data_dir)

    cluster = start_cluster(tmp_path / "cluster", 3, register=on_tmpfs)
    try:
        topic = "replicated"
        leader = create_stream(cluster, topic, via=1, probes=probes)
        follower = next(i for i in cluster.node_ids() if i != leader)
        filler = cluster.nodes[follower].config.data_dir / "filler"
        fill(filler)
        prod = producer(cluster.bootstrap_servers)
        acked: list[tuple[int, int]] = []
        for n in range(40):  # ~640 KB: far more than the full follower has room for
            base, error = send_batch(prod, topic, n)
            assert error is None, f"acks=all send {n} failed while only one follower is full: {error!r}"
            acked.append((n, base))
        assert cluster.nodes[follower].running
        end = acked[-1][1] + RECORDS_PER_SEND
        behind = read_log_image(cluster, follower, topic)
        assert behind.log_end_offset < end, "the full follower stored everything: the disk was not full"
        probe_rows = [(offset, v) for offset, v in read_back(cluster.bootstrap_servers, topic)
                      if not v.startswith(b"create")]
        assert probe_rows[-len(expected_rows(acked)):] == expected_rows(acked)
        # kill -9 of the full follower, and a restart before anyone frees space (a supervisor
        # restarting a crashed broker): it starts -- a start that writes what it need not (an
        # unchanged record, the recovery point) exited with ENOSPC -- and acks=all goes on.
        cluster.kill(follower)
        started = time.monotonic()
        cluster.restart(follower, timeout_s=30)
        restart_s = time.monotonic() - started
        for n in range(40, 44):
            base, error = send_batch(prod, topic, n)
            assert error is None, f"acks=all send {n} failed after the full follower restarted: {error!r}"
            acked.append((n, base))
        end = acked[-1][1] + RECORDS_PER_SEND
        assert cluster.nodes[follower].running, f"the full follower exited (it started in {restart_s:.1f} s)"
        # A stream created meanwhile with a replica on the full node: the others carry it, the
        # full node tries again to open its replica (one line per try, no traceback).
        create_stream(cluster, "created-while-full", via=leader, probes=probes)
        wait_until(lambda: "cannot open the replica of stream created-while-full" in _output(cluster, follower), 10,
                   "the full node's attempt to open the new replica")
        # Space returns: the follower catches up by itself, byte for byte.
        release(filler)
        images = wait_logs_converged(cluster, topic, timeout=30)
        reference = images[leader].entries
        assert images[follower].log_end_offset == end
        for node_id, image in images.items():
            assert image.entries == reference, f"node {node_id}'s log differs from the leader's"
        created = wait_logs_converged(cluster, "created-while-full", timeout=30)
        assert created[follower].entries  # its replica opened there, with the probe's write
        assert "Traceback" not in _output(cluster, follower)
        prod.close()
    finally:
        cluster.kill_all()
        for mount in mounts:
            unmount(mount)


def test_an_index_flushed_onto_a_filling_disk_is_refused_not_left_with_a_hole(tmp_path: Path) -> None:
    """An index file written when the file system has room for part of it: the write was short,
    the flush took it for done and extended the file to its length, a hole where the rest
    should be -- and a sealed segment's index is mapped: on tmpfs, reading that hole with the
    file system full kills the process with SIGBUS (a node of the short chaos campaign exited
    so, its disk filled while it caught up). Now the flush fails (ENOSPC), leaving no hole; the
    log's callers drop the index or undo the append, as for any full disk."""
    with tmpfs(tmp_path / "disk", "1m") as disk:
        ballast = disk / "ballast"
        fill(ballast)
        release(ballast, os.path.getsize(ballast) - 6000)  # room for one page of the index, not eight
        index = OffsetIndex(disk / "00000000000000000001.index")
        for record in range(4000):  # 32,000 bytes
            index.append(record, record * 100)
        with pytest.raises(OSError) as refused:
            index.flush()
        assert refused.value.errno == errno.ENOSPC
        written = os.stat(index.path)
        assert written.st_size <= written.st_blocks * 512, "a hole past the written bytes"
        # What a mapping of the file reads, as a sealed segment's lookups do, on the full disk.
        reader = subprocess.run([sys.executable, "-c", "import mmap, sys\n"
                                 "with open(sys.argv[1], 'rb') as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:\n"
                                 "    print(bytes(m) == open(sys.argv[1], 'rb').read())", str(index.path)],
                                capture_output=True, text=True, timeout=60)
        assert (reader.returncode, reader.stdout.strip()) == (0, "True")
        release(ballast)
        index.flush()  # with room again: whole
        assert os.path.getsize(index.path) == 4000 * 8
