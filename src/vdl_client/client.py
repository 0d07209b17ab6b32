"""The blocking Kafka-protocol client, built on vdl_wire only.

One connection per broker node, no threads, no asyncio: Spark tasks are single-threaded and
open their own client inside read()/write(), and the CLI runs one command at a time. Every
call that targets a stream goes to that stream's leader (found with Metadata) and is retried
through leader changes and connection errors (Metadata refresh + backoff) until a deadline.

Each API is spoken at the highest version vdl_wire declares for it (see
connection.default_version); Fetch answers at those versions are always RecordBatch v2.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from vdl_client.connection import Connection
from vdl_client.pipeline import ProducePipeline
from vdl_client.requests import LEADER_FETCH_VERSION, fetch_request, produce_request
from vdl_client.settings import (
    LEADER_ERRORS,
    BrokerUnreachableError,
    ClientSettings,
    StreamExistsError,
    StreamNotFoundError,
    VdlClientError,
)
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import (
    ApiVersionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    FetchRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    VdlWriterIdRequest,
)

log = logging.getLogger("vdl_client")
T = TypeVar("T")

EARLIEST_TIMESTAMP = -2  # ListOffsets: the log start offset
LATEST_TIMESTAMP = -1  # ListOffsets: the high watermark


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
            connection = Connection(address, self._timeout_s, self.settings.client_id, self.settings.security)
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

    def _send_node(self, node_id: int, request: Any, timeout_s: float | None = None, version: int | None = None) -> Any:
        if node_id not in self._nodes:
            raise _Retry(f"node {node_id} unknown")
        address = self._address(node_id)
        try:
            return self._connection(node_id, address).request(request, timeout_s or self._timeout_s, version)
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
        return self._retrying(f"FindCoordinator {group_id!r}", lambda: self.find_coordinator_once(group_id))

    def find_coordinator_once(self, group_id: str) -> tuple[int, str]:
        """One FindCoordinator (v4+: a list of keys) to any node; raises on an error."""
        response = self._send_any(FindCoordinatorRequest(key_type=0, coordinator_keys=[group_id]))
        found = response.coordinators[0]
        self._check(found.error_code, f"FindCoordinator {group_id!r}")
        host = f"[{found.host}]" if ":" in found.host else found.host
        return found.node_id, f"{host}:{found.port}"

    def request_node(self, node_id: int, request: Any, timeout_s: float | None = None) -> Any:
        """One request to one node named in the last Metadata answer, no retry; raises
        BrokerUnreachableError when it cannot be reached or does not answer in time."""
        try:
            return self._send_node(node_id, request, timeout_s)
        except _Retry as error:
            raise BrokerUnreachableError(str(error)) from None

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
        names = list(streams)
        request = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=name) for name in names],
                                      timeout_ms=self.settings.request_timeout_ms)

        def attempt() -> None:
            for result in self._to_controller(request).responses:
                if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    if not missing_ok:
                        raise StreamNotFoundError(f"stream {result.name!r} does not exist")
                elif result.error_code != 0:
                    self._check(result.error_code, f"DeleteTopics {result.name!r}")

        self._retrying("DeleteTopics", attempt)
        for stream in names:
            self._leaders.pop(stream, None)

    def admin(self, request: Any, what: str) -> Any:
        """An admin request (ACLs, users) answered by the metadata leader, retried through
        leader changes; the caller reads the response's error codes."""
        def attempt() -> Any:
            try:
                return self._to_controller(request)
            except _Retry:
                self._controller = -1  # ask Metadata who leads now
                raise

        return self._retrying(what, attempt)

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
            response = self._send_node(leader, request, self._timeout_s + max_wait_ms / 1000, LEADER_FETCH_VERSION)
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
                self._timeout_s + max_wait_ms / 1000, LEADER_FETCH_VERSION)
            pending.node = leader
        except OSError:
            self._drop(leader)
        return pending

    def fetch_finish(self, pending: PendingFetch, deadline: float) -> FetchResult:
        if pending.correlation is not None and pending.node in self._connections:
            try:
                response = self._connections[pending.node].receive(
                    FetchRequest, pending.correlation, self._timeout_s + pending.args[4] / 1000, LEADER_FETCH_VERSION)
                partition = response.responses[0].partitions[0]
                if response.error_code == 0 and partition.error_code == 0:
                    return FetchResult(ErrorCode.NONE, partition.records, partition.high_watermark,
                                       partition.log_start_offset)
            except OSError:
                self._drop(pending.node)
        return self.fetch(*pending.args, deadline)

    # -- produce -------------------------------------------------------------------------------

    def init_producer_id(self) -> tuple[int, int]:
        """A fresh producer id and epoch for an idempotent producer (InitProducerId, no transactional id)."""
        request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000)

        def attempt() -> tuple[int, int]:
            response = self._send_any(request)
            self._check(response.error_code, "InitProducerId")
            return response.producer_id, response.producer_epoch

        return self._retrying("InitProducerId", attempt)

    def writer_id(self, writer_key: str) -> tuple[int, int]:
        """The producer id and epoch the broker derives from `writer_key` (VdlWriterId, VDL's own):
        the same for every call, on every node, so a retried writer keyed the same way re-sends
        its batches under the same producer id and sequences and they are stored once."""
        request = VdlWriterIdRequest(writer_key=writer_key)

        def attempt() -> tuple[int, int]:
            response = self._send_any(request)
            self._check(response.error_code, "VdlWriterId")
            return response.producer_id, response.producer_epoch

        return self._retrying("VdlWriterId", attempt)

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


