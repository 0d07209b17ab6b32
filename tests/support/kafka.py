"""Requests to a broker from tests, through vdl_client's connection (framing, correlation ids,
API keys from the request classes).

`client(bootstrap)` is one connection to one broker with no retries and no leader discovery, so
a test sees exactly what that broker answers; `raw_request` is one request on a fresh
connection; the `*_raw` helpers return error codes instead of raising. Tests that must send
malformed bytes use `raw_socket`/`read_frame` (no codec in the way).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence
from typing import Any

from tests.support.waiting import wait_until
from vdl_client.connection import Connection, api_spec, request_once, split_address
from vdl_wire import api
from vdl_wire import messages as m
from vdl_wire.errors import ErrorCode
from vdl_wire.records.record_batch import RecordBatchBuilder, iter_batches, read_records

TEST_CLIENT_ID = "vdl-tests"
# ApiVersions v3+ as a client sends it: KIP-511 software name and version (empty ones are refused)
CLIENT_API_VERSIONS = m.ApiVersionsRequest(client_software_name=TEST_CLIENT_ID, client_software_version="1.0")
EARLIEST, LATEST = -2, -1  # ListOffsets timestamps


class RequestFailed(Exception):
    """The broker answered with an error code."""

    def __init__(self, error_code: int, detail: str) -> None:
        name = ErrorCode(error_code).name if error_code in ErrorCode._value2member_map_ else f"error {error_code}"
        super().__init__(f"{name}: {detail}")
        self.error_code = error_code


class BrokerClient:
    """One connection to one broker; helpers raise RequestFailed for an error answer and OSError
    when the connection fails."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self._connection = Connection(bootstrap, timeout, TEST_CLIENT_ID)

    def __enter__(self) -> BrokerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._connection.close()

    def request(self, request: Any, version: int | None = None) -> Any:
        """The decoded answer to `request` at `version` (default: the highest declared)."""
        return self._connection.request(request, self.timeout, version)

    def metadata(self, topics: list[str] | None = None) -> Any:
        return self.request(m.MetadataRequest(
            topics=None if topics is None else [m.MetadataRequest.MetadataRequestTopic(name=t) for t in topics]))

    def create_stream(self, name: str, replication_factor: int = -1) -> None:
        topic = m.CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1,
                                                     replication_factor=replication_factor)
        result = self.request(m.CreateTopicsRequest(topics=[topic], timeout_ms=30_000)).topics[0]
        _check(result.error_code, result.error_message or name)
        # CreateTopics may answer before the stream has a leader (after its wait for one, on a
        # loaded machine), as Kafka's does: a producer retries NOT_LEADER_OR_FOLLOWER, these
        # helpers do not, so the stream is waited for here, as vdl_client's create_stream does.
        wait_until(lambda: self._leader_of(name) > 0, 30.0, f"a leader of new stream {name!r}")

    def _leader_of(self, name: str) -> int:
        partitions = self.metadata([name]).topics[0].partitions
        return partitions[0].leader_id if partitions and partitions[0].error_code == 0 else -1

    def delete_stream(self, name: str) -> None:
        result = self.request(delete_topics_request(name)).responses[0]
        _check(result.error_code, name)

    def list_offset(self, stream: str, timestamp: int) -> int:
        partition = m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp)
        topic = m.ListOffsetsRequest.ListOffsetsTopic(name=stream, partitions=[partition])
        result = self.request(m.ListOffsetsRequest(replica_id=-1, topics=[topic])).topics[0].partitions[0]
        _check(result.error_code, stream)
        return result.offset

    def produce(self, stream: str, batch: bytes, acks: int = -1) -> int:
        result = self.request(produce_request(stream, batch, acks)).responses[0].partition_responses[0]
        _check(result.error_code, result.error_message or stream)
        return result.base_offset

    def fetch(self, stream: str, offset: int, max_wait_ms: int = 500) -> tuple[int, Any]:
        """(high watermark, records) of partition 0 from `offset`."""
        partition = m.FetchRequest.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=4 << 20)
        request = m.FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=16 << 20,
                                 topics=[m.FetchRequest.FetchTopic(topic=stream, partitions=[partition])])
        response = self._connection.request(request, self.timeout + max_wait_ms / 1000, LEADER_FETCH_VERSION)
        result = response.responses[0].partitions[0]
        _check(result.error_code, stream)
        return result.high_watermark, result.records


def _check(error_code: int, detail: str) -> None:
    if error_code != 0:
        raise RequestFailed(error_code, detail)


def client(bootstrap: str, timeout: float = 10.0) -> BrokerClient:
    return BrokerClient(bootstrap, timeout)


def raw_request(address: str, request: Any, version: int | None = None, timeout: float = 5.0) -> Any:
    """One request on a fresh connection; the decoded response."""
    return request_once(address, request, timeout, version, TEST_CLIENT_ID)


# -- record batches -------------------------------------------------------------------------------


def make_batch(values: list[bytes], producer_id: int = -1, epoch: int = -1, base_sequence: int = -1,
               keys: list[bytes] | None = None) -> bytes:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=epoch, base_sequence=base_sequence)
    now = int(time.time() * 1000)
    for i, value in enumerate(values):
        builder.append(now, keys[i] if keys else None, value)
    return builder.build()


def numbered_batch(n: int, producer_id: int = -1, seq: int = -1) -> bytes:
    """A RecordBatch of `n` values b"v0".. with fixed timestamps (idempotent when producer_id >= 0)."""
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                 base_sequence=seq)
    for i in range(n):
        builder.append(1_000 + i, None, b"v%d" % i)
    return builder.build()


def one_record_batch(value: bytes, key: bytes | None = None) -> bytes:
    builder = RecordBatchBuilder()
    builder.append(int(time.time() * 1000), key, value)
    return builder.build()


# -- one request, error codes returned (for tests of error answers and of followers) ---------------


def produce_request(stream: str, records: bytes, acks: int = -1, partition: int = 0,
                    timeout_ms: int = 10_000) -> Any:
    data = m.ProduceRequest.PartitionProduceData(index=partition, records=records)
    return m.ProduceRequest(acks=acks, timeout_ms=timeout_ms,
                            topic_data=[m.ProduceRequest.TopicProduceData(name=stream, partition_data=[data])])


def produce_partition(c: BrokerClient, stream: str, records: bytes, version: int | None = None,
                      partition: int = 0) -> Any:
    """The partition response of one produce on an open client (no error checking)."""
    response = c.request(produce_request(stream, records, partition=partition), version)
    return response.responses[0].partition_responses[0]


def produce_raw(address: str, stream: str, batch: bytes, acks: int = -1, timeout_ms: int = 2000,
                socket_timeout: float = 5.0, version: int | None = None) -> tuple[int, int]:
    """(error code, base offset) of a one-partition Produce on a fresh connection."""
    response = raw_request(address, produce_request(stream, batch, acks, timeout_ms=timeout_ms), version,
                           socket_timeout)
    result = response.responses[0].partition_responses[0]
    return int(result.error_code), int(result.base_offset)


# Fetch v10: only a stream's leader serves it; v11+ (KIP-392) any replica serves below its own
# high watermark. Tests asking "the leader's view" send v10.
LEADER_FETCH_VERSION = 10
REPLICA_FETCH_VERSION = 11


def fetch_partition(address: str, stream: str, offset: int, max_wait_ms: int = 0, max_bytes: int = 4 << 20,
                    socket_timeout: float = 5.0, version: int | None = REPLICA_FETCH_VERSION, rack: str = "") -> Any:
    """The partition answer of a one-partition Fetch (v11 unless told: any replica may serve it),
    with every field (preferred_read_replica, log_start_offset, ...)."""
    partition = m.FetchRequest.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=max_bytes)
    topic = m.FetchRequest.FetchTopic(topic=stream, partitions=[partition])
    request = m.FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
                             topics=[topic], rack_id=rack)
    response = raw_request(address, request, version, timeout=socket_timeout + max_wait_ms / 1000)
    return response.responses[0].partitions[0]


def fetch_raw(address: str, stream: str, offset: int, max_wait_ms: int = 0, max_bytes: int = 4 << 20,
              socket_timeout: float = 5.0, version: int | None = LEADER_FETCH_VERSION) -> tuple[int, int, bytes]:
    """(error code, high watermark, records bytes) of a one-partition Fetch (v10 unless told:
    answered by the leader only)."""
    result = fetch_partition(address, stream, offset, max_wait_ms, max_bytes, socket_timeout, version)
    return int(result.error_code), int(result.high_watermark), bytes(result.records or b"")


def stored_batches(bootstrap: str, stream: str) -> list[tuple[int, int, int, int]]:
    """(base offset, codec, timestamp type, max timestamp) of every batch a raw Fetch returns."""
    batches: list[tuple[int, int, int, int]] = []
    offset = 0
    while True:
        error, high_watermark, records = fetch_raw(bootstrap, stream, offset)
        assert error == 0
        parsed = list(iter_batches(records))
        batches += [(h.base_offset, h.compression, h.timestamp_type, h.max_timestamp) for h, _ in parsed]
        if not parsed or parsed[-1][0].next_offset >= high_watermark:
            return batches
        offset = parsed[-1][0].next_offset


def record_values(records: bytes | memoryview | None) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in Fetch answer bytes."""
    return [(r.offset, None if r.value is None else bytes(r.value))
            for _, batch in iter_batches(memoryview(records or b"")) for r in read_records(batch)]


def list_offset_raw(address: str, stream: str, timestamp: int) -> tuple[int, int]:
    """(error code, offset) of a ListOffsets for partition 0."""
    partition = m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp)
    topic = m.ListOffsetsRequest.ListOffsetsTopic(name=stream, partitions=[partition])
    result = raw_request(address, m.ListOffsetsRequest(replica_id=-1, topics=[topic])).topics[0].partitions[0]
    return int(result.error_code), int(result.offset)


def metadata_raw(address: str, topics: Sequence[str] | None) -> Any:
    request = m.MetadataRequest(
        topics=None if topics is None else [m.MetadataRequest.MetadataRequestTopic(name=t) for t in topics])
    return raw_request(address, request)


def create_topic_raw(address: str, name: str, replication_factor: int = -1) -> tuple[int, str | None]:
    """(error code, message) of a CreateTopics for one stream."""
    topic = m.CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=replication_factor)
    result = raw_request(address, m.CreateTopicsRequest(topics=[topic], timeout_ms=30_000), timeout=35.0).topics[0]
    return int(result.error_code), result.error_message


def delete_topics_request(name: str) -> Any:
    """DeleteTopics naming one stream (v6+: by name in the topics list)."""
    return m.DeleteTopicsRequest(topics=[m.DeleteTopicsRequest.DeleteTopicState(name=name)], timeout_ms=30_000)


def delete_topic_raw(address: str, name: str) -> int:
    response = raw_request(address, delete_topics_request(name), timeout=35.0)
    return int(response.responses[0].error_code)


# -- raw bytes (malformed input) ------------------------------------------------------------------


def raw_socket(bootstrap: str, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection(split_address(bootstrap), timeout=timeout)


def encode(request: Any, version: int | None = None, correlation_id: int = 1) -> bytes:
    """A whole request frame (size prefix included), for tests that write bytes themselves."""
    spec = api_spec(type(request))
    version = spec.max_version if version is None else version
    return b"".join(api.encode_request(spec.api_key, version, correlation_id, TEST_CLIENT_ID, request))


def read_frame(sock: socket.socket) -> bytes:
    """One response frame body; b"" if the broker closed the connection."""
    head = _recv_exact(sock, 4)
    if len(head) < 4:
        return b""
    return _recv_exact(sock, int.from_bytes(head, "big", signed=True))


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        try:
            chunk = sock.recv(size)
        except ConnectionResetError:
            return b""
        if not chunk:
            return b""
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True when the broker closes the connection (EOF or reset) within `timeout`."""
    sock.settimeout(timeout)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


# -- consumer groups -------------------------------------------------------------------------------

def offset_commit_request(group: str, offsets: dict[str, int], generation: int = -1, member_id: str = "",
                          leader_epoch: int = -1, metadata: str | None = None, partition: int = 0) -> Any:
    topics = [m.OffsetCommitRequest.OffsetCommitRequestTopic(name=stream, partitions=[
        m.OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=partition, committed_offset=offset,
                                                           committed_leader_epoch=leader_epoch,
                                                           committed_metadata=metadata)])
        for stream, offset in offsets.items()]
    return m.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
                                 topics=topics)


def commit_raw(address: str, group: str, offsets: dict[str, int], version: int | None = None,
               **kwargs: Any) -> dict[str, int]:
    """OffsetCommit on one fresh connection: stream -> error code."""
    response = raw_request(address, offset_commit_request(group, offsets, **kwargs), version)
    return {t.name: t.partitions[0].error_code for t in response.topics}


def committed_raw(address: str, group: str, streams: Sequence[str] | None,
                  version: int | None = None) -> tuple[int, dict[str, tuple[int, int, str | None, int]]]:
    """OffsetFetch: (top-level error, stream -> (offset, leader epoch, metadata, error)); v8+ (the
    default) ask for the one group in the groups list."""
    if version is None or version >= 8:
        topics = None if streams is None else [
            m.OffsetFetchRequest.OffsetFetchRequestTopics(name=s, partition_indexes=[0]) for s in streams]
        request = m.OffsetFetchRequest(groups=[m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group,
                                                                                               topics=topics)])
        answer = raw_request(address, request, version).groups[0]
    else:
        old_topics = None if streams is None else [
            m.OffsetFetchRequest.OffsetFetchRequestTopic(name=s, partition_indexes=[0]) for s in streams]
        answer = raw_request(address, m.OffsetFetchRequest(group_id=group, topics=old_topics), version)
    return answer.error_code, {t.name: (p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
                               for t in answer.topics for p in t.partitions}


def coordinator_raw(address: str, group: str) -> tuple[int, int]:
    """FindCoordinator for a group (one key, v4+): (error code, node id)."""
    found = raw_request(address, m.FindCoordinatorRequest(key_type=0, coordinator_keys=[group])).coordinators[0]
    return found.error_code, found.node_id


def wait_for_stable_offset(bootstrap: str, stream: str, offset: int, timeout_s: float = 30.0) -> None:
    """Wait until `stream`'s last stable offset (ListOffsets read_committed of partition 0) is
    `offset`. EndTxn answers once the decision is durable, as Kafka's does, and the markers follow:
    a test that needs a transaction's marker in place (its offset, its records readable) waits."""
    import confluent_kafka

    from tests.support.cluster import wait_until

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "vdl-tests-stable-offset",
                                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        partition = confluent_kafka.TopicPartition(stream, 0)
        wait_until(lambda: consumer.get_watermark_offsets(partition, timeout=5, cached=False)[1] == offset,
                   timeout_s, f"{stream}'s last stable offset reaching {offset}")
    finally:
        consumer.close()


def read_to_end(bootstrap: str, stream: str, isolation: str, at_least: int = 0,
                timeout_s: float = 30) -> list[tuple[int, bytes]]:
    """(offset, value) of every record a confluent-kafka consumer with `isolation` reads from the
    start up to the partition's end (the last stable offset for read_committed), once it holds at
    least `at_least` records."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"txs-{stream}-{isolation}",
                                         "isolation.level": isolation, "enable.auto.commit": False,
                                         "enable.partition.eof": True, "fetch.wait.max.ms": 10})
    consumer.assign([confluent_kafka.TopicPartition(stream, 0, confluent_kafka.OFFSET_BEGINNING)])
    records: list[tuple[int, bytes]] = []
    at_end = False
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and not (at_end and len(records) >= at_least):
            message = consumer.poll(0.1)
            if message is None:
                continue
            if message.error():
                at_end = message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF
                continue
            at_end = False
            records.append((message.offset(), message.value()))
    finally:
        consumer.close()
    assert at_end and len(records) >= at_least, (stream, isolation, at_end, len(records))
    return records


DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs' config source of a config set on the topic


def stream_set_configs(bootstrap: str, stream: str) -> dict[str, str]:
    """The configs set on the stream itself (DescribeConfigs through librdkafka): name -> value."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    client = AdminClient({"bootstrap.servers": bootstrap})  # held: a collected client cancels its futures
    [future] = client.describe_configs([ConfigResource("topic", stream)]).values()
    return {name: entry.value for name, entry in future.result(timeout=30).items()
            if int(entry.source) == DYNAMIC_TOPIC_CONFIG}
