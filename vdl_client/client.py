"""The blocking Kafka-protocol client, built on vdl_broker.protocol only.

One connection per broker node, no threads, no asyncio: Spark tasks are single-threaded and
open their own client inside read()/write(), and the CLI runs one command at a time. Every
call that targets a stream goes to that stream's leader (found with Metadata) and is retried
through leader changes and connection errors (Metadata refresh + backoff) until a deadline.

Each API is spoken at the highest version vdl_broker.protocol declares for it (see
connection.default_version); Fetch answers at those versions are always RecordBatch v2.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from vdl_broker.protocol.errors import ErrorCode
from vdl_broker.protocol.messages import (
    ApiVersionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    FetchRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from vdl_client.connection import DEFAULT_CLIENT_ID, Connection, parse_bootstrap

log = logging.getLogger("vdl_client")
T = TypeVar("T")

EARLIEST_TIMESTAMP = -2  # ListOffsets: the log start offset
LATEST_TIMESTAMP = -1  # ListOffsets: the high watermark


@dataclass(frozen=True)
class ClientSettings:
    """How to reach the cluster; picklable (it travels to Spark executors)."""

    bootstrap_servers: tuple[str, ...]  # tried in this order until one answers
    request_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100
    deadline_ms: int = 120_000  # give up on leader discovery / retries after this long
    client_id: str = DEFAULT_CLIENT_ID
    # A command-line user wants "cannot connect" at once rather than retries until the deadline;
    # a Spark job started with its cluster wants the retries.
    fail_fast_when_unreachable: bool = False

    @classmethod
    def from_bootstrap(cls, servers: str | Sequence[str], **settings: Any) -> ClientSettings:
        """Settings for a `host:port,host:port` bootstrap list (validated)."""
        return cls(parse_bootstrap(servers), **settings)

# Errors after which the same request is sent again once the leader is known again.
LEADER_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.BROKER_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.NETWORK_EXCEPTION, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.NOT_CONTROLLER, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.FENCED_LEADER_EPOCH,
})


class VdlClientError(RuntimeError):
    """A request failed for good (non-retriable error, or retries ran past the deadline)."""


class StreamNotFoundError(VdlClientError):
    """The stream does not exist."""


class StreamExistsError(VdlClientError):
    """Creating a stream that already exists (when the caller asked to be told)."""


class BrokerUnreachableError(VdlClientError):
    """No bootstrap server accepted a connection."""


class _Retry(Exception):
    """Internal: the request hit a leader change or a dead connection; refresh and retry."""


@dataclass
class FetchResult:
    error: ErrorCode
    records: memoryview | None
    high_watermark: int
    log_start_offset: int


class VdlClient:
    """Blocking client; use as a context manager. Not thread-safe (one per task)."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self._nodes: dict[int, tuple[str, int]] = {}
        self._leaders: dict[str, int] = {}
        self._controller = -1
        self._connections: dict[object, Connection] = {}

    def __enter__(self) -> VdlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    # -- plumbing ------------------------------------------------------------------------------

    @property
    def _timeout_s(self) -> float:
        return self.settings.request_timeout_ms / 1000

    def _connection(self, key: object, address: str) -> Connection:
        connection = self._connections.get(key)
        if connection is None:
            connection = Connection(address, self._timeout_s, self.settings.client_id)
            self._connections[key] = connection
        return connection

    def _drop(self, key: object) -> None:
        connection = self._connections.pop(key, None)
        if connection is not None:
            connection.close()

    def _address(self, node_id: int) -> str:
        host, port = self._nodes[node_id]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def _send_any(self, request: Any) -> Any:
        """To any reachable node: known nodes first, then the bootstrap servers in order."""
        errors = []
        targets: list[tuple[object, str]] = [(n, self._address(n)) for n in self._nodes]
        targets += [(f"bootstrap:{server}", server) for server in self.settings.bootstrap_servers]
        for key, address in targets:
            try:
                return self._connection(key, address).request(request, self._timeout_s)
            except OSError as exc:
                self._drop(key)
                errors.append(f"{address}: {exc.strerror or exc}")
        if self.settings.fail_fast_when_unreachable and not self._nodes:
            raise BrokerUnreachableError("cannot connect to " + "; ".join(errors))
        raise _Retry("no broker reachable: " + "; ".join(errors))

    def _send_node(self, node_id: int, request: Any, timeout_s: float | None = None) -> Any:
        if node_id not in self._nodes:
            raise _Retry(f"node {node_id} unknown")
        address = self._address(node_id)
        try:
            return self._connection(node_id, address).request(request, timeout_s or self._timeout_s)
        except OSError as exc:
            self._drop(node_id)
            raise _Retry(f"node {node_id} ({address}): {exc}") from exc

    def _retrying(self, what: str, attempt: Callable[[], T], deadline: float | None = None) -> T:
        """Call attempt() until it returns; _Retry means refresh metadata, back off and retry."""
        deadline = deadline if deadline is not None else time.monotonic() + self.settings.deadline_ms / 1000
        backoff = max(self.settings.retry_backoff_ms, 1) / 1000
        while True:
            try:
                return attempt()
            except _Retry as exc:
                if time.monotonic() + backoff > deadline:
                    raise VdlClientError(f"{what}: gave up after retries until the deadline: {exc}") from None
                log.debug("%s: retrying: %s", what, exc)
                self._leaders.clear()
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)

    def _metadata(self, streams: Sequence[str] | None) -> Any:
        request = MetadataRequest(
            topics=None if streams is None else [MetadataRequest.MetadataRequestTopic(name=s) for s in streams],
            allow_auto_topic_creation=False)
        response = self._send_any(request)
        self._nodes = {b.node_id: (b.host, b.port) for b in response.brokers}
        self._controller = response.controller_id
        for topic in response.topics:
            for partition in topic.partitions:
                if partition.partition_index == 0 and partition.error_code == 0 and partition.leader_id >= 0:
                    self._leaders[topic.name] = partition.leader_id
        return response

    def _leader(self, stream: str) -> int:
        if stream not in self._leaders:
            response = self._metadata([stream])
            for topic in response.topics:
                if topic.name == stream and topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    raise StreamNotFoundError(f"stream {stream!r} does not exist")
            if stream not in self._leaders:
                raise _Retry(f"stream {stream!r} has no leader yet")
        return self._leaders[stream]

    @staticmethod
    def _check(error_code: int, what: str) -> None:
        if error_code == 0:
            return
        error = ErrorCode(error_code)
        if error in LEADER_ERRORS:
            raise _Retry(f"{what}: {error.name}")
        if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise StreamNotFoundError(f"{what}: stream does not exist")
        raise VdlClientError(f"{what}: {error.name} ({error_code})")

    # -- metadata and admin --------------------------------------------------------------------

    def metadata(self, streams: Sequence[str] | None = None) -> Any:
        """The MetadataResponse for `streams` (None: every stream), from any reachable node."""
        return self._retrying("Metadata", lambda: self._metadata(streams))

    def list_streams(self) -> list[str]:
        response = self.metadata(None)
        return sorted(t.name for t in response.topics if t.error_code == 0 and not t.is_internal)

    def stream_exists(self, stream: str) -> bool:
        try:
            self.leader_of(stream)
            return True
        except StreamNotFoundError:
            return False

    def leader_of(self, stream: str) -> int:
        """The node id leading `stream` (waits through elections until the deadline)."""
        return self._retrying(f"Metadata {stream!r}", lambda: self._leader(stream))

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """What a broker serves: api key -> (min version, max version)."""
        request = ApiVersionsRequest(client_software_name="vdl-client", client_software_version="0")

        def attempt() -> dict[int, tuple[int, int]]:
            response = self._send_any(request)
            self._check(response.error_code, "ApiVersions")
            return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

        return self._retrying("ApiVersions", attempt)

    def find_coordinator(self, group_id: str) -> tuple[int, str]:
        """The node coordinating a consumer group: (node id, host:port)."""
        request = FindCoordinatorRequest(key=group_id, key_type=0)

        def attempt() -> tuple[int, str]:
            response = self._send_any(request)
            self._check(response.error_code, f"FindCoordinator {group_id!r}")
            host = f"[{response.host}]" if ":" in response.host else response.host
            return response.node_id, f"{host}:{response.port}"

        return self._retrying(f"FindCoordinator {group_id!r}", attempt)

    def address_of(self, node_id: int) -> str:
        """host:port of a node named in the last Metadata answer."""
        return self._address(node_id)

    def create_stream(self, stream: str, replication_factor: int = -1, config: dict[str, str] | None = None,
                      exist_ok: bool = True) -> None:
        """Create one stream (one partition) and wait until it has a leader. An existing stream
        raises StreamExistsError unless `exist_ok`."""
        self._create([stream], replication_factor, config, exist_ok)

    def create_streams(self, streams: Iterable[str], config: dict[str, str] | None = None) -> None:
        """Create streams (one partition each); existing ones are fine."""
        self._create(list(streams), -1, config, exist_ok=True)

    def _create(self, wanted: list[str], replication_factor: int, config: dict[str, str] | None,
                exist_ok: bool) -> None:
        configs = [CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (config or {}).items()]
        request = CreateTopicsRequest(
            topics=[CreateTopicsRequest.CreatableTopic(name=s, num_partitions=1,
                                                       replication_factor=replication_factor,
                                                       assignments=[], configs=configs) for s in wanted],
            timeout_ms=self.settings.request_timeout_ms)

        def attempt() -> None:
            for result in self._to_controller(request).topics:
                if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
                    if not exist_ok:
                        raise StreamExistsError(f"stream {result.name!r} already exists")
                elif result.error_code != 0:
                    self._check(result.error_code, f"CreateTopics {result.name!r} ({result.error_message})")

        self._retrying("CreateTopics", attempt)
        for stream in wanted:  # wait until each stream has a leader, so the first write succeeds
            self._leaders.pop(stream, None)
            self._retrying(f"leader of new stream {stream!r}", lambda s=stream: self._leader(s))

    def delete_streams(self, streams: Iterable[str], missing_ok: bool = True) -> None:
        """Delete streams; a missing one raises StreamNotFoundError unless `missing_ok`."""
        request = DeleteTopicsRequest(topic_names=list(streams), timeout_ms=self.settings.request_timeout_ms)

        def attempt() -> None:
            for result in self._to_controller(request).responses:
                if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    if not missing_ok:
                        raise StreamNotFoundError(f"stream {result.name!r} does not exist")
                elif result.error_code != 0:
                    self._check(result.error_code, f"DeleteTopics {result.name!r}")

        self._retrying("DeleteTopics", attempt)
        for stream in request.topic_names:
            self._leaders.pop(stream, None)

    def _to_controller(self, request: Any) -> Any:
        """Admin requests go to the metadata leader (any node forwards, but that costs a hop)."""
        if self._controller < 0 or self._controller not in self._nodes:
            self._metadata([])
        if self._controller in self._nodes:
            return self._send_node(self._controller, request)
        return self._send_any(request)

    # -- offsets -------------------------------------------------------------------------------

    def list_offsets(self, streams: Sequence[str], timestamp: int | None,
                     timestamps: dict[str, int] | None = None) -> dict[str, int]:
        """ListOffsets per stream: EARLIEST_TIMESTAMP (-2) the log start offset, LATEST_TIMESTAMP
        (-1) the high watermark, else the first offset whose timestamp is >= the stream's entry in
        `timestamps` (-1: none)."""
        result: dict[str, int] = {}
        for stream in streams:
            wanted = timestamp if timestamp is not None else (timestamps or {})[stream]
            result[stream] = self._retrying(f"ListOffsets {stream!r}",
                                            lambda s=stream, t=wanted: self._list_offset(s, t))
        return result

    def list_offset(self, stream: str, timestamp: int) -> int:
        """One stream's offset for `timestamp` (see list_offsets)."""
        return self.list_offsets([stream], timestamp)[stream]

    def _list_offset(self, stream: str, timestamp: int) -> int:
        request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=stream, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])
        response = self._send_node(self._leader(stream), request)
        partition = response.topics[0].partitions[0]
        self._check(partition.error_code, f"ListOffsets {stream!r}")
        return partition.offset

    # -- fetch ---------------------------------------------------------------------------------

    def fetch(self, stream: str, offset: int, partition_max_bytes: int, max_bytes: int, max_wait_ms: int,
              deadline: float) -> FetchResult:
        """Records from `offset` (whole stored batches, possibly a partial one at the end).

        OFFSET_OUT_OF_RANGE and UNKNOWN_TOPIC_OR_PARTITION come back to the caller, which decides
        about data loss; leader changes and dead connections are retried until `deadline`.
        """
        request = fetch_request(stream, offset, partition_max_bytes, max_bytes, max_wait_ms)

        def attempt() -> FetchResult:
            try:
                leader = self._leader(stream)
            except StreamNotFoundError:
                return FetchResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, -1, -1)
            response = self._send_node(leader, request, self._timeout_s + max_wait_ms / 1000)
            self._check(response.error_code, f"Fetch {stream!r}")
            partition = response.responses[0].partitions[0]
            error = ErrorCode(partition.error_code)
            if error in (ErrorCode.OFFSET_OUT_OF_RANGE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                self._leaders.pop(stream, None)
                if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and self.stream_exists(stream):
                    raise _Retry(f"Fetch {stream!r}: node {leader} does not know the stream (yet)")
                return FetchResult(error, None, partition.high_watermark, partition.log_start_offset)
            self._check(partition.error_code, f"Fetch {stream!r}")
            return FetchResult(error, partition.records, partition.high_watermark, partition.log_start_offset)

        return self._retrying(f"Fetch {stream!r} at {offset}", attempt, deadline)

    def fetch_start(self, stream: str, offset: int, partition_max_bytes: int, max_bytes: int,
                    max_wait_ms: int) -> PendingFetch:
        """Send a Fetch now and read its answer later with fetch_finish, so the broker prepares
        the next records while the caller decodes the last ones. Nothing else may use the client
        in between. Any problem is left to fetch_finish, which falls back to fetch()."""
        pending = PendingFetch((stream, offset, partition_max_bytes, max_bytes, max_wait_ms))
        leader = self._leaders.get(stream)
        if leader is None or leader not in self._nodes:
            return pending
        try:
            connection = self._connection(leader, self._address(leader))
            pending.correlation = connection.send(
                fetch_request(stream, offset, partition_max_bytes, max_bytes, max_wait_ms),
                self._timeout_s + max_wait_ms / 1000)
            pending.node = leader
        except OSError:
            self._drop(leader)
        return pending

    def fetch_finish(self, pending: PendingFetch, deadline: float) -> FetchResult:
        if pending.correlation is not None and pending.node in self._connections:
            try:
                response = self._connections[pending.node].receive(
                    FetchRequest, pending.correlation, self._timeout_s + pending.args[4] / 1000)
                partition = response.responses[0].partitions[0]
                if response.error_code == 0 and partition.error_code == 0:
                    return FetchResult(ErrorCode.NONE, partition.records, partition.high_watermark,
                                       partition.log_start_offset)
            except OSError:
                self._drop(pending.node)
        return self.fetch(*pending.args, deadline)

    # -- produce -------------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str | None = None) -> tuple[int, int]:
        """A producer id and epoch; with a transactional id the broker derives them from it
        deterministically (InitProducerId with a transactional id), so a retried writer keyed the same way gets the same."""
        request = InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=60_000)

        def attempt() -> tuple[int, int]:
            response = self._send_any(request)
            self._check(response.error_code, "InitProducerId")
            return response.producer_id, response.producer_epoch

        return self._retrying("InitProducerId", attempt)

    def pipeline(self, stream: str, timeout_ms: int, delivery_timeout_ms: int, window: int) -> ProducePipeline:
        return ProducePipeline(self, stream, timeout_ms, delivery_timeout_ms, window)

    def produce(self, stream: str, batch: bytes, timeout_ms: int, deadline: float,
                transactional_id: str | None = None, acks: int = -1) -> int:
        """Append one RecordBatch; returns its base offset (-1 when unknown).

        acks=-1 answers once the batch is committed, 1 after the leader's append, 0 never (the
        offset is then unknown). The same bytes (same producer id/epoch/sequence) are sent again
        after a leader change or a lost answer, so the broker's idempotence deduplicates a batch
        it already stored: DUPLICATE_SEQUENCE_NUMBER means it is stored (offset unknown).
        """
        request = produce_request(stream, batch, timeout_ms, transactional_id, acks)

        def attempt() -> int:
            leader = self._leader(stream)
            if acks == 0:
                return self._send_unanswered(leader, request)
            response = self._send_node(leader, request, self._timeout_s + timeout_ms / 1000)
            partition = response.responses[0].partition_responses[0]
            if partition.error_code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                return -1
            self._check(partition.error_code, f"Produce to {stream!r} ({partition.error_message})")
            return partition.base_offset

        return self._retrying(f"Produce to {stream!r}", attempt, deadline)

    def _send_unanswered(self, node_id: int, request: Any) -> int:
        """acks=0: the broker sends no answer, so only sending can fail."""
        address = self._address(node_id)
        try:
            self._connection(node_id, address).send(request, self._timeout_s)
        except OSError as exc:
            self._drop(node_id)
            raise _Retry(f"node {node_id} ({address}): {exc}") from exc
        return -1


@dataclass
class PendingFetch:
    args: tuple[str, int, int, int, int]  # stream, offset, partition max bytes, max bytes, max wait
    node: int | None = None
    correlation: int | None = None


def fetch_request(stream: str, offset: int, partition_max_bytes: int, max_bytes: int, max_wait_ms: int) -> Any:
    """A Fetch for partition 0, READ_UNCOMMITTED (everything below the high watermark)."""
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=[
                            FetchRequest.FetchTopic(topic=stream, partitions=[
                                FetchRequest.FetchPartition(partition=0, fetch_offset=offset,
                                                            partition_max_bytes=partition_max_bytes)])],
                        forgotten_topics_data=[], rack_id="")


def produce_request(stream: str, batch: bytes, timeout_ms: int, transactional_id: str | None = None,
                    acks: int = -1) -> Any:
    """A Produce of one batch to partition 0 (acks=-1: answered once the batch is committed)."""
    return ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, topic_data=[
        ProduceRequest.TopicProduceData(name=stream, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=batch)])])


class ProducePipeline:
    """Up to `window` Produce requests in flight to one stream's leader, on a connection of its
    own, so the client encodes the next batch while the broker appends and syncs the last.

    Safe with the idempotent producer (KIP-98 allows 5 in flight): the broker handles one
    connection's requests in order. On any failure every unacknowledged batch is sent again, in
    order, one at a time through the retrying path; batches the broker already stored come back
    as duplicates (acknowledged, not stored again).
    """

    def __init__(self, client: VdlClient, stream: str, timeout_ms: int, delivery_timeout_ms: int,
                 window: int) -> None:
        self._client = client
        self._stream = stream
        self._timeout_ms = timeout_ms
        self._delivery_timeout_ms = delivery_timeout_ms
        self._window = max(1, window)
        self._inflight: deque[tuple[bytes, int]] = deque()
        self._key = ("pipeline", stream)
        self._connection: Connection | None = None

    @property
    def _timeout_s(self) -> float:
        return self._client.settings.request_timeout_ms / 1000 + self._timeout_ms / 1000

    def _open(self) -> Connection:
        if self._connection is None:
            leader = self._client.leader_of(self._stream)
            self._connection = self._client._connection(self._key, self._client.address_of(leader))
        return self._connection

    def submit(self, batch: bytes) -> None:
        while len(self._inflight) >= self._window:
            self._complete_oldest()
        try:
            correlation = self._open().send(produce_request(self._stream, batch, self._timeout_ms),
                                            self._timeout_s)
        except (OSError, VdlClientError) as exc:
            log.debug("pipeline to %r: send failed (%s); resending in order", self._stream, exc)
            self._recover([batch])
            return
        self._inflight.append((batch, correlation))

    def _complete_oldest(self) -> None:
        _, correlation = self._inflight[0]
        try:
            assert self._connection is not None
            response = self._connection.receive(ProduceRequest, correlation, self._timeout_s)
        except OSError as exc:
            log.debug("pipeline to %r: %s; resending in order", self._stream, exc)
            self._recover([])
            return
        partition = response.responses[0].partition_responses[0]
        error = partition.error_code
        if error in (0, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
            self._inflight.popleft()
            return
        if ErrorCode(error) in LEADER_ERRORS:
            self._recover([])
            return
        raise VdlClientError(f"Produce to {self._stream!r}: {ErrorCode(error).name} ({partition.error_message})")

    def _recover(self, extra: list[bytes]) -> None:
        pending = [batch for batch, _ in self._inflight] + extra
        self._inflight.clear()
        self._client._drop(self._key)
        self._client._leaders.pop(self._stream, None)
        self._connection = None
        for batch in pending:
            deadline = time.monotonic() + self._delivery_timeout_ms / 1000
            self._client.produce(self._stream, batch, self._timeout_ms, deadline)

    def finish(self) -> None:
        while self._inflight:
            self._complete_oldest()
