"""Process-level fault-test harness: partition views, probes, acks=all batches that record every
acknowledgement, reads at the leader, and offline reads of each node's stream log (a copy of its
directory opened with StreamLog). Clusters and raw requests come from tests/support (cluster.py,
kafka.py); client workloads running through faults from workload.py.

Every wait here is a condition polled against a deadline; nothing sleeps blindly.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import struct
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.cluster import (  # noqa: F401 - re-exported for the fault tests
    DEFAULT_CLUSTER_SETTINGS,
    VDL_CLI,
    ensure_all_running,
    node_address,
    running_nodes,
    start_cluster,
    wait_until,
)
from tests.support.kafka import (  # noqa: F401 - re-exported for the fault tests
    EARLIEST,
    LATEST,
    create_topic_raw,
    delete_topic_raw,
    fetch_raw,
    list_offset_raw,
    metadata_raw,
    one_record_batch,
    produce_raw,
    raw_request,
)
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.raft.types import EntryType
from vdl_dev.dev_cluster import DevCluster
from vdl_wire import messages as m
from vdl_wire.errors import ErrorCode
from vdl_wire.records.record_batch import RecordBatchBuilder, iter_batches, read_records

# Kafka protocol guide: RecordBatch -- baseOffset int64 at 0, lastOffsetDelta int32 at 23.
_BASE_OFFSET = struct.Struct(">q")
_LAST_DELTA = struct.Struct(">i")


@dataclass(frozen=True)
class PartitionView:
    """Partition 0 of a stream as one node's Metadata describes it."""

    error_code: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def partition_view(address: str, stream: str) -> PartitionView | None:
    """None when the node cannot be asked (down, refusing, timing out)."""
    try:
        response = metadata_raw(address, [stream])
    except (OSError, ValueError):
        return None
    for topic in response.topics:
        if topic.name == stream:
            if topic.error_code != 0 or not topic.partitions:
                return PartitionView(int(topic.error_code), -1, (), ())
            p = next(p for p in topic.partitions if p.partition_index == 0)
            return PartitionView(int(p.error_code), int(p.leader_id), tuple(sorted(p.replica_nodes)),
                                 tuple(sorted(p.isr_nodes)))
    return None


# ------------------------------------------------------------------------------ leader probes


@dataclass
class ProbeLog:
    """Every acks=-1 probe write that was acknowledged: (value, offset)."""

    acked: list[tuple[bytes, int]] = field(default_factory=list)
    counter: Iterator[int] = field(default_factory=itertools.count)

    def next_value(self, tag: str) -> bytes:
        return f"probe-{tag}-{next(self.counter):06d}".encode()


def probe_write(cluster: DevCluster, stream: str, probes: ProbeLog, timeout: float, tag: str = "p",
                exclude: Iterable[int] = ()) -> tuple[int, int]:
    """Write one record with acks=-1 until some running node (not in `exclude`) acknowledges it;
    returns (node id, offset). Asks the node Metadata names first, then the others."""
    skip = set(exclude)
    deadline = time.monotonic() + timeout
    last_errors: dict[int, str] = {}
    while time.monotonic() < deadline:
        candidates = [i for i in running_nodes(cluster) if i not in skip]
        named = [v.leader for i in candidates if (v := _quick_view(cluster, i, stream)) is not None]
        ordered = sorted(candidates, key=lambda i: (i not in named, i))
        for node_id in ordered:
            value = probes.next_value(tag)
            try:
                code, offset = produce_raw(node_address(cluster, node_id), stream, one_record_batch(value),
                                           acks=-1, timeout_ms=1000, socket_timeout=2.0)
            except (OSError, ValueError) as error:
                last_errors[node_id] = repr(error)
                continue
            if code == 0:
                probes.acked.append((value, offset))
                return node_id, offset
            last_errors[node_id] = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
        time.sleep(0.02)
    raise AssertionError(f"no node acknowledged an acks=-1 write to {stream} within {timeout} s: {last_errors}")


def _quick_view(cluster: DevCluster, node_id: int, stream: str) -> PartitionView | None:
    try:
        response = raw_request(node_address(cluster, node_id),
                               m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=stream)]),
                               timeout=0.5)
    except (OSError, ValueError):
        return None
    for topic in response.topics:
        for p in topic.partitions:
            if topic.name == stream and p.partition_index == 0 and p.leader_id >= 0:
                return PartitionView(int(p.error_code), int(p.leader_id), tuple(sorted(p.replica_nodes)),
                                     tuple(sorted(p.isr_nodes)))
    return None


def wait_for_full_isr(cluster: DevCluster, stream: str, timeout: float = 30.0, replicas: int = 3) -> PartitionView:
    """Wait until a running node that is the leader reports all `replicas` replicas in sync."""
    def check() -> PartitionView | None:
        for node_id in running_nodes(cluster):
            view = _quick_view(cluster, node_id, stream)
            if (view is not None and view.leader == node_id and len(view.replicas) == replicas
                    and tuple(sorted(view.isr)) == tuple(sorted(view.replicas))):
                return view
        return None
    try:
        return wait_until(check, timeout, f"leader of {stream} reporting all {replicas} replicas in sync")
    except AssertionError as error:
        views = {i: _quick_view(cluster, i, stream) for i in running_nodes(cluster)}
        raise AssertionError(f"{error}; views (node: leader, replicas, isr): {views}") from None


def create_stream(cluster: DevCluster, stream: str, via: int, probes: ProbeLog, timeout: float = 30.0,
                  replication_factor: int = 3) -> int:
    """CreateTopics through node `via`; returns the leader once it acknowledged an acks=-1 write."""
    code, message = create_topic_raw(node_address(cluster, via), stream, replication_factor)
    assert code == 0, f"CreateTopics {stream} via node {via}: {ErrorCode(code).name} {message}"
    leader, _ = probe_write(cluster, stream, probes, timeout, tag="create")
    return leader


def high_watermark(cluster: DevCluster, stream: str, timeout: float = 10.0) -> tuple[int, int]:
    """(leader node, high watermark) from a Fetch at the node that answers as leader."""
    def ask() -> tuple[int, int] | None:
        for node_id in running_nodes(cluster):
            address = node_address(cluster, node_id)
            try:  # Fetch at the log start: only the leader serves it (retention moves the start)
                code, start = list_offset_raw(address, stream, EARLIEST)
                if code != 0:
                    continue
                code, hw, _ = fetch_raw(address, stream, start, max_bytes=1)
            except (OSError, ValueError):
                continue
            if code == 0:
                return node_id, hw
        return None
    return wait_until(ask, timeout, f"a leader of {stream} answering Fetch")


def fetch_at_leader(address: str, stream: str, offset: int, max_bytes: int = 4 << 20,
                    timeout: float = 10.0) -> tuple[int, int, bytes]:
    """Fetch from the node believed to lead, retrying while it answers NOT_LEADER_OR_FOLLOWER
    (its read lease lapsed for a moment, as on a loaded machine); (code, high watermark, records)."""
    def attempt() -> tuple[int, int, bytes] | None:
        result = fetch_raw(address, stream, offset, max_bytes=max_bytes)
        return None if result[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER else result
    try:
        return wait_until(attempt, timeout, f"{address} serving Fetch {stream}@{offset}")
    except AssertionError:
        return fetch_raw(address, stream, offset, max_bytes=max_bytes)


def read_all(address: str, stream: str, start: int, end: int) -> dict[int, tuple[bytes | None, bytes | None]]:
    """offset -> (key, value) for [start, end) fetched from `address` (a leader)."""
    out: dict[int, tuple[bytes | None, bytes | None]] = {}
    offset = start
    deadline = time.monotonic() + 60
    while offset < end:
        assert time.monotonic() < deadline, f"reading {stream} [{start}, {end}) stalled at {offset}"
        code, _, records = fetch_at_leader(address, stream, offset, max_bytes=8 << 20)
        assert code == 0, f"Fetch {stream}@{offset} from {address}: {ErrorCode(code).name}"
        for _, batch in iter_batches(memoryview(records)):
            for record in read_records(batch):
                if offset <= record.offset < end:
                    out[record.offset] = (_b(record.key), _b(record.value))
                    offset = max(offset, record.offset + 1)
    return out


def _b(value: bytes | memoryview | None) -> bytes | None:
    return None if value is None else bytes(value)


_NOT_LEADER = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE)


def produce_batches(cluster: DevCluster, stream: str, batches: int, tag: str, leader: int | None = None,
                    records_per_batch: int = 20) -> list[tuple[str, int, bytes]]:
    """`batches` acks=-1 batches of 100-byte records `<tag>-<batch>-<record>` at `leader` (else
    at whichever node answers as leader, asked before each batch and again when that node
    answers that it does not lead); every (tag, offset, value) acknowledged."""
    acked: list[tuple[str, int, bytes]] = []
    for n in range(batches):
        builder = RecordBatchBuilder()
        values = [f"{tag}-{n:05d}-{i:02d}".encode().ljust(100, b".") for i in range(records_per_batch)]
        for value in values:
            builder.append(0, None, value)
        deadline = time.monotonic() + 30
        while True:
            target = leader if leader is not None else high_watermark(cluster, stream, timeout=30)[0]
            code, base = produce_raw(node_address(cluster, target), stream, builder.build(), acks=-1, timeout_ms=5000)
            # The node that answered as leader may stop leading before the batch reaches it (it
            # found damage in its log and reopens it; an election): asked again, as a client would.
            if leader is not None or code not in _NOT_LEADER or time.monotonic() > deadline:
                break
        assert code == 0, f"batch {n} of {tag} at node {target}: {ErrorCode(code).name}"
        acked += [(tag, base + i, value) for i, value in enumerate(values)]
    return acked


# ---------------------------------------------------------------------------- on-disk logs


@dataclass
class LogImage:
    """One node's stream log, read from a copy of its directory."""

    node_id: int
    first_index: int
    last_index: int
    log_start_offset: int
    log_end_offset: int
    entries: dict[int, tuple[int, int, bytes]]  # index -> (term, type, payload bytes)

    def data_entry_for_offset(self, offset: int) -> int | None:
        """Raft index of the DATA entry holding Kafka offset `offset` (None if absent)."""
        for index, (_, kind, payload) in self.entries.items():
            if kind == EntryType.DATA:
                base = _BASE_OFFSET.unpack_from(payload, 0)[0]
                if base <= offset <= base + _LAST_DELTA.unpack_from(payload, 23)[0]:
                    return index
        return None

    def records(self) -> dict[int, bytes | None]:
        """Kafka offset -> record value for every DATA entry of this copy."""
        out: dict[int, bytes | None] = {}
        for _, kind, payload in self.entries.values():
            if kind == EntryType.DATA:
                for record in read_records(memoryview(payload)):
                    out[record.offset] = _b(record.value)
        return out


def stream_directory(data_dir: Path, stream: str) -> Path:
    """Where a node keeps `stream`'s log: DATA_DIR/<stream> (the single-node layout), else the
    one directory named `stream` below DATA_DIR that holds segment files."""
    direct = Path(data_dir) / stream
    if direct.is_dir():
        return direct
    found = [p for p in Path(data_dir).rglob(stream) if p.is_dir() and any(p.glob("*.log"))]
    if len(found) != 1:
        raise FileNotFoundError(f"no unique log directory for stream {stream} under {data_dir}: {found}")
    return found[0]


def read_log_image(cluster: DevCluster, node_id: int, stream: str) -> LogImage:
    """Copy the node's stream directory (the node may be running: the copy is recovered like
    after a crash, cutting a torn tail) and read every entry of the copy."""
    source = stream_directory(cluster.nodes[node_id].config.data_dir, stream)
    with tempfile.TemporaryDirectory(prefix="vdl-log-copy-") as scratch:
        copy = Path(scratch) / stream
        copy.mkdir()
        for item in sorted(source.iterdir()):
            if item.is_file():
                with contextlib.suppress(FileNotFoundError):  # retention may delete meanwhile
                    shutil.copyfile(item, copy / item.name)
        log = StreamLog.open(copy, LogConfig(fsync=False, tail_cache_bytes=0))
        try:
            entries: dict[int, tuple[int, int, bytes]] = {}
            index = log.first_index
            while index <= log.last_index:
                batch = log.entries(index, log.last_index + 1, 8 << 20)
                for entry in batch:
                    entries[entry.index] = (entry.term, int(entry.type), bytes(entry.data))
                index = batch[-1].index + 1
            return LogImage(node_id, log.first_index, log.last_index, log.log_start_offset,
                            log.log_end_offset, entries)
        finally:
            log.close()


def committed_prefix_problems(images: dict[int, LogImage], leader: int, hw: int) -> list[str]:
    """Differences between each node's copy and the leader's over the committed entries (up to
    the one holding offset hw - 1), compared byte for byte from the later of the two log starts."""
    reference = images[leader]
    if hw <= reference.log_start_offset:
        return []
    last = reference.data_entry_for_offset(hw - 1)
    if last is None:
        return [f"leader {leader}'s log has no entry for committed offset {hw - 1}"]
    problems: list[str] = []
    for node_id, image in images.items():
        if image.last_index < last:
            problems.append(f"node {node_id} ends at index {image.last_index}, committed entries reach {last}")
            continue
        for index in range(max(image.first_index, reference.first_index), last + 1):
            if image.entries.get(index) != reference.entries.get(index):
                mine, theirs = image.entries.get(index), reference.entries.get(index)
                problems.append(f"node {node_id} index {index}: (term, type) "
                                f"{mine[:2] if mine else None} vs leader's {theirs[:2] if theirs else None}"
                                f"{'' if mine is None or theirs is None else ', payloads differ'}")
                break
    return problems


def wait_logs_converged(cluster: DevCluster, stream: str, timeout: float = 30.0,
                        nodes: Sequence[int] | None = None) -> dict[int, LogImage]:
    """Wait (writes stopped) until every node's (or every one of `nodes`') committed log equals
    the leader's byte for byte; returns the images. Raises with the last differences at the
    deadline."""
    leader, hw = high_watermark(cluster, stream)
    state: dict[str, Any] = {}
    holders = list(nodes) if nodes is not None else cluster.node_ids()

    def converged() -> bool:
        images = {i: read_log_image(cluster, i, stream) for i in holders}
        state["images"], state["problems"] = images, committed_prefix_problems(images, leader, hw)
        return not state["problems"]

    try:
        wait_until(converged, timeout, f"every replica of {stream} holding the leader's committed log",
                   interval=0.25)
    except AssertionError as error:
        raise AssertionError(f"{error}: {state.get('problems')}") from None
    return state["images"]


def check_acknowledged(acked: Iterable[tuple[str, int, bytes]], log: dict[int, bytes | None]) -> list[str]:
    """Every acknowledged (client, offset, value) must be the record at that offset; no offset
    may have been acknowledged for two different values."""
    problems: list[str] = []
    by_offset: dict[int, bytes] = {}
    for client, offset, value in acked:
        earlier = by_offset.setdefault(offset, value)
        if earlier != value:
            problems.append(f"offset {offset} acknowledged for two records: {earlier[:24]!r} and {value[:24]!r}")
        stored = log.get(offset)
        if stored != value:
            problems.append(f"{client}: acknowledged offset {offset} holds "
                            f"{None if stored is None else stored[:24]!r}, not {value[:24]!r}")
    return problems


def check_consumed(seen: Sequence[tuple[int, bytes | None]], log: dict[int, bytes | None], start: int = 0) -> list[str]:
    """Offsets strictly consecutive from `start` (no gap, never backwards) and equal to the log."""
    problems: list[str] = []
    expected = start
    for offset, value in seen:
        if offset != expected:
            problems.append(f"consumer got offset {offset} after {expected - 1} (expected {expected})")
            if len(problems) > 5:
                break
        elif log.get(offset) != value:
            problems.append(f"consumer saw {value!r} at {offset}, the log holds {log.get(offset)!r}")
        expected = offset + 1
    return problems


def read_committed_log(address: str, stream: str, start: int, end: int) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record a read_committed consumer keeps in [start, end) (end at or
    below the last stable offset), by Fetch v11 with isolation_level 1 at `address` (a leader)
    and the consumer's rule of KIP-98: a producer's records from an aborted transaction's first
    offset up to its abort marker are dropped."""
    out: list[tuple[int, bytes | None]] = []
    offset = start
    deadline = time.monotonic() + 60
    while offset < end:
        assert time.monotonic() < deadline, f"reading {stream} [{start}, {end}) read_committed stalled at {offset}"
        partition = m.FetchRequest.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=8 << 20)
        request = m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=8 << 20, isolation_level=1,
                                 topics=[m.FetchRequest.FetchTopic(topic=stream, partitions=[partition])])
        answer = raw_request(address, request, 11).responses[0].partitions[0]
        if answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            continue  # its read lease lapsed for a moment: ask again
        assert answer.error_code == 0, f"Fetch {stream}@{offset}: {ErrorCode(answer.error_code).name}"
        pending = sorted((a.first_offset, a.producer_id) for a in answer.aborted_transactions)
        aborted: set[int] = set()
        for header, batch in iter_batches(memoryview(bytes(answer.records or b""))):
            while pending and pending[0][0] <= header.last_offset:
                aborted.add(pending.pop(0)[1])
            if header.is_control:
                aborted.discard(header.producer_id)  # its abort marker ends what is dropped
            elif not (header.is_transactional and header.producer_id in aborted):
                out += [(r.offset, _b(r.value)) for r in read_records(batch) if start <= r.offset < end]
            offset = max(offset, header.next_offset)
    return out
