"""Many streams at once, the way a cluster test or a benchmark drives them: create them, find
their leaders, write one batch to each and read it back -- with one request per node for all
the streams it leads, not one request per stream.

Every function takes the nodes' client addresses ({node id: "host:port"}) of the nodes to ask
and answers from the leaders' own word (a node that names itself leader), so a view a follower
learned second hand never counts.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vdl_client.connection import request_once
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import CreateTopicsRequest, FetchRequest, MetadataRequest, ProduceRequest
from vdl_wire.records.record_batch import RecordBatchBuilder, iter_batches, read_records

CLIENT_ID = "vdl-bulk"


@dataclass(frozen=True)
class StreamView:
    """One stream as its leader reports it."""

    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def in_sync(self) -> bool:
        return sorted(self.isr) == sorted(self.replicas)


def create_streams(addresses: Mapping[int, str], names: Sequence[str], *, chunk: int = 100,
                   timeout_s: float = 60.0, replication_factor: int = -1) -> dict[str, int]:
    """CreateTopics for every name, `chunk` streams per request, sent to the metadata leader
    (asked for with Metadata; NOT_CONTROLLER answers are retried until `timeout_s`); {name:
    error code}, where 0 and TOPIC_ALREADY_EXISTS mean created."""
    deadline = time.monotonic() + timeout_s
    errors: dict[str, int] = {}
    pending = list(names)
    while pending:
        batch, pending = pending[:chunk], pending[chunk:]
        topics = [CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1,
                                                     replication_factor=replication_factor, assignments=[],
                                                     configs=[]) for name in batch]
        request = CreateTopicsRequest(topics=topics, timeout_ms=int(max(1.0, deadline - time.monotonic()) * 1000))
        try:
            response = request_once(controller_address(addresses), request,
                                    max(1.0, deadline - time.monotonic()) + 5, client_id=CLIENT_ID)
        except (OSError, ValueError):
            response = None
        retry = [name for name in batch] if response is None else []
        for result in response.topics if response is not None else []:
            if result.error_code == ErrorCode.NOT_CONTROLLER:
                retry.append(result.name)
            else:
                errors[result.name] = result.error_code
        if retry:
            if time.monotonic() > deadline:
                errors.update({name: int(ErrorCode.NOT_CONTROLLER) for name in retry})
                continue
            pending = retry + pending
            time.sleep(0.1)
    return errors


def controller_address(addresses: Mapping[int, str], timeout_s: float = 2.0) -> str:
    """The client address of the metadata leader as the first answering node names it (else
    any node: it forwards)."""
    for address in addresses.values():
        try:
            response = request_once(address, MetadataRequest(topics=[]), timeout_s, client_id=CLIENT_ID)
        except (OSError, ValueError):
            continue
        return addresses.get(response.controller_id, address)
    return next(iter(addresses.values()))


def stream_views(addresses: Mapping[int, str], names: Sequence[str] | None = None,
                 timeout_s: float = 30.0) -> dict[str, StreamView]:
    """{stream: view} for the streams whose leader (among `addresses`) answered as leader."""
    request = MetadataRequest(topics=None if names is None else
                              [MetadataRequest.MetadataRequestTopic(name=name) for name in names])
    views: dict[str, StreamView] = {}
    for node_id, address in addresses.items():
        try:
            response = request_once(address, request, timeout_s, client_id=CLIENT_ID)
        except (OSError, ValueError):
            continue
        for topic in response.topics:
            for partition in topic.partitions or []:
                if partition.leader_id == node_id and partition.error_code == 0:
                    views[topic.name] = StreamView(node_id, tuple(partition.replica_nodes),
                                                   tuple(partition.isr_nodes))
    return views


def wait_for_views(addresses: Mapping[int, str], names: Sequence[str], timeout_s: float, *,
                   in_sync: bool = False, poll_s: float = 0.1) -> dict[str, StreamView]:
    """Wait until every stream has a leader among `addresses` (and, with `in_sync`, all its
    replicas in sync); the views. TimeoutError names how many are missing."""
    deadline = time.monotonic() + timeout_s
    wanted = set(names)
    while True:
        views = stream_views(addresses)
        missing = [name for name in wanted if name not in views or (in_sync and not views[name].in_sync)]
        if not missing:
            return {name: views[name] for name in names}
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(missing)} of {len(wanted)} streams without "
                               f"{'an in-sync leader' if in_sync else 'a leader'} after {timeout_s} s, "
                               f"e.g. {sorted(missing)[:5]}")
        time.sleep(poll_s)


def one_record_batch(value: bytes, key: bytes | None = None) -> bytes:
    builder = RecordBatchBuilder()
    builder.append(int(time.time() * 1000), key, value)
    return builder.build()


def produce_each(addresses: Mapping[int, str], batches: Mapping[str, bytes], leaders: Mapping[str, int], *,
                 acks: int = -1, timeout_ms: int = 5000) -> dict[str, tuple[int, int]]:
    """Send batches[stream] to each stream's leader, one Produce per node for all its streams;
    {stream: (error code, base offset)} for the streams whose node answered."""
    by_node: dict[int, list[str]] = {}
    for name in batches:
        by_node.setdefault(leaders[name], []).append(name)
    results: dict[str, tuple[int, int]] = {}
    for node_id, names in by_node.items():
        request = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
            ProduceRequest.TopicProduceData(name=name, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batches[name])]) for name in names])
        try:
            response = request_once(addresses[node_id], request, timeout_ms / 1000 + 5, client_id=CLIENT_ID)
        except (OSError, ValueError, KeyError):
            continue
        for topic in response.responses:
            for partition in topic.partition_responses:
                results[topic.name] = (partition.error_code, partition.base_offset)
    return results


def fetch_each(addresses: Mapping[int, str], offsets: Mapping[str, int], leaders: Mapping[str, int], *,
               max_bytes: int = 1 << 20) -> dict[str, tuple[int, list[tuple[int, bytes | None]]]]:
    """Read from offsets[stream] at each stream's leader, one Fetch per node (no wait);
    {stream: (error code, [(offset, value), ...])} for the streams whose node answered."""
    by_node: dict[int, list[str]] = {}
    for name in offsets:
        by_node.setdefault(leaders[name], []).append(name)
    results: dict[str, tuple[int, list[tuple[int, bytes | None]]]] = {}
    for node_id, names in by_node.items():
        request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes * len(names),
                               isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                   FetchRequest.FetchTopic(topic=name, partitions=[
                                       FetchRequest.FetchPartition(partition=0, fetch_offset=offsets[name],
                                                                   partition_max_bytes=max_bytes)])
                                   for name in names], forgotten_topics_data=[], rack_id="")
        try:
            response = request_once(addresses[node_id], request, 10.0, client_id=CLIENT_ID)
        except (OSError, ValueError, KeyError):
            continue
        for topic in response.responses:
            for partition in topic.partitions:
                results[topic.topic] = (partition.error_code, _records(partition.records))
    return results


def _records(data: Any) -> list[tuple[int, bytes | None]]:
    if not data:
        return []
    out: list[tuple[int, bytes | None]] = []
    for _header, batch in iter_batches(data):
        out += [(record.offset, record.value) for record in read_records(batch)]
    return out


def acknowledged(results: Mapping[str, tuple[int, int]]) -> set[str]:
    return {name for name, (error, _) in results.items() if error == ErrorCode.NONE}


def names_for(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i:05d}" for i in range(count)]


def chunks(items: Iterable[str], size: int) -> list[list[str]]:
    items = list(items)
    return [items[i:i + size] for i in range(0, len(items), size)]
