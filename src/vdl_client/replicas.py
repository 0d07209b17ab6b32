"""Reads from a chosen replica (KIP-392 follower reads) through a VdlClient, and the replica
sets to choose from.

A replica read is Fetch v11 sent to one node: any in-sync replica serves it below its own high
watermark. Unlike VdlClient.fetch (the leader, retried through leader changes until a
deadline), it is one attempt whose problems come back as the result's error, for the caller
to move on to another replica (the leader last):

- NOT_LEADER_OR_FOLLOWER: the node holds no replica (any more), or cannot serve now;
- OFFSET_NOT_AVAILABLE: the offset is past the high watermark the replica has learned;
- OFFSET_OUT_OF_RANGE: the offset is outside the replica's log (only the leader's word on that
  counts as data loss);
- NETWORK_EXCEPTION: the node did not answer within the replica timeout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vdl_client.client import FetchResult, PendingFetch, VdlClient, aborted_of
from vdl_client.requests import REPLICA_FETCH_VERSION, fetch_request
from vdl_client.routes import Node
from vdl_client.settings import RetriableError, VdlClientError
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import FetchRequest, MetadataRequest

# A replica that does not answer within this (plus the fetch's max wait) is left for another.
REPLICA_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ReplicaSet:
    """A stream's replicas as its leader's Metadata answer describes them."""

    leader: int
    in_sync: tuple[int, ...]
    racks: Mapping[int, str | None] = field(default_factory=dict, hash=False)


def replica_sets(client: VdlClient, streams: Sequence[str]) -> dict[str, ReplicaSet]:
    """Each stream's leader, in-sync replicas and their racks, asked of the leaders themselves
    (the nodes that know their followers' progress): one Metadata request per leader. A stream
    whose leader does not answer as its leader is left out (the caller reads it from the leader)."""
    by_leader: dict[int, list[str]] = {}
    if streams:
        client.metadata(list(streams))  # every stream's leader in one request
    for stream in streams:
        by_leader.setdefault(client.leader_of(stream), []).append(stream)
    result: dict[str, ReplicaSet] = {}
    for leader, names in by_leader.items():
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=s) for s in names],
                                  allow_auto_topic_creation=False)
        try:
            response = client.send(Node(leader), request)
        except (RetriableError, VdlClientError):  # unreachable now: its streams are read from the leader
            continue
        racks = {broker.node_id: broker.rack for broker in response.brokers}
        for topic in response.topics:
            for partition in topic.partitions:
                if topic.name in names and partition.partition_index == 0 and partition.leader_id == leader:
                    result[topic.name] = ReplicaSet(leader, tuple(sorted(partition.isr_nodes)), racks)
    return result


def _timeout_s(client: VdlClient, max_wait_ms: int) -> float:
    return min(client.settings.request_timeout_ms / 1000, REPLICA_TIMEOUT_S) + max_wait_ms / 1000


def _result(response: Any) -> FetchResult:
    if response.error_code:
        return FetchResult(ErrorCode(response.error_code), None, -1, -1)
    partition = response.responses[0].partitions[0]
    return FetchResult(ErrorCode(partition.error_code), partition.records if partition.error_code == 0 else None,
                       partition.high_watermark, partition.log_start_offset, aborted_of(partition))


def fetch_replica(client: VdlClient, node: int, stream: str, offset: int, partition_max_bytes: int, max_bytes: int,
                  max_wait_ms: int) -> FetchResult:
    """One Fetch v11 of `stream` from `offset` at `node` (see the module docstring)."""
    if not client.knows_node(node, refresh=True):
        return FetchResult(ErrorCode.NETWORK_EXCEPTION, None, -1, -1)
    request = fetch_request(stream, offset, partition_max_bytes, max_bytes, max_wait_ms, client.settings.isolation_level)
    try:
        return _result(client.send(Node(node), request, _timeout_s(client, max_wait_ms), REPLICA_FETCH_VERSION))
    except RetriableError:  # the connection is closed: the next fetch here opens a new one
        return FetchResult(ErrorCode.NETWORK_EXCEPTION, None, -1, -1)


def fetch_replica_start(client: VdlClient, node: int, stream: str, offset: int, partition_max_bytes: int,
                        max_bytes: int, max_wait_ms: int) -> PendingFetch:
    """Send the Fetch now, read its answer with fetch_replica_finish (nothing else may use the
    client in between)."""
    pending = PendingFetch((stream, offset, partition_max_bytes, max_bytes, max_wait_ms))
    if not client.knows_node(node):
        return pending
    try:
        connection = client.connection(node)
        pending.correlation = connection.send(fetch_request(stream, offset, partition_max_bytes, max_bytes, max_wait_ms,
                                                            client.settings.isolation_level),
                                              _timeout_s(client, max_wait_ms), REPLICA_FETCH_VERSION)
        pending.node = node
    except OSError:
        client.disconnect(node)
    return pending


def fetch_replica_finish(client: VdlClient, node: int, pending: PendingFetch) -> FetchResult:
    connection = client.connected(node)
    if pending.correlation is not None and pending.node == node and connection is not None:
        try:
            return _result(connection.receive(
                FetchRequest, pending.correlation, _timeout_s(client, pending.args[4]), REPLICA_FETCH_VERSION))
        except OSError:
            client.disconnect(node)
            return FetchResult(ErrorCode.NETWORK_EXCEPTION, None, -1, -1)
    return fetch_replica(client, node, *pending.args)


__all__ = ["REPLICA_TIMEOUT_S", "ReplicaSet", "fetch_replica", "fetch_replica_finish", "fetch_replica_start",
           "replica_sets"]
