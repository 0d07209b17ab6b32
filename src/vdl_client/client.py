"""The blocking Kafka-protocol client, built on vdl_wire only.

One connection per broker node, no threads, no asyncio: Spark tasks are single-threaded and
open their own client inside read()/write(), and the CLI runs one command at a time. Every
call that targets a stream goes to that stream's leader (found with Metadata) and is retried
through leader changes and connection errors (Metadata refresh + backoff) until a deadline.

Modules that speak other APIs build on the public plumbing: send (one attempt along a route,
see routes.py), call (retried until a deadline), retrying, check_error, connection/disconnect;
nothing outside this module touches the client's private state.

Each API is spoken at the highest version vdl_wire declares for it (see
connection.default_version); Fetch answers at those versions are always RecordBatch v2.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from vdl_client.connection import Connection
from vdl_client.pipeline import ProducePipeline
from vdl_client.requests import LEADER_FETCH_VERSION, Batch, fetch_request, produce_request
from vdl_client.routes import (
    ANY_NODE,
    CONTROLLER,
    GROUP_KEY,
    AnyNode,
    Controller,
    CoordinatorOf,
    LeaderOf,
    Node,
    Route,
)
from vdl_client.settings import (
    LEADER_ERRORS,
    BrokerUnreachableError,
    ClientSettings,
    RetriableError,
    StreamExistsError,
    StreamNotFoundError,
    VdlClientError,
    with_message,
)
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import (
    ApiVersionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeProducersRequest,
    FetchRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    VdlWriterIdRequest,
)
from vdl_wire.software import software_version

log = logging.getLogger("vdl_client")
T = TypeVar("T")

EARLIEST_TIMESTAMP = -2  # ListOffsets: the log start offset
LATEST_TIMESTAMP = -1  # ListOffsets: the high watermark
CLIENT_SOFTWARE_NAME = "vdl-client"  # ApiVersions' ClientSoftwareName (KIP-511)


@dataclass
class FetchResult:
    error: ErrorCode
    records: memoryview | None
    high_watermark: int
    log_start_offset: int
    # READ_COMMITTED only: (producer id, first offset) of each aborted transaction in the range.
    aborted: tuple[tuple[int, int], ...] = ()


def api_versions_request() -> ApiVersionsRequest:
    """ApiVersions naming this client and its release (KIP-511), the release's characters a
    broker refuses ('+' of a local version, ...) made '-', as librdkafka does."""
    release = re.sub(r"[^a-zA-Z0-9.-]", "-", software_version()).strip(".-") or "unknown"
    return ApiVersionsRequest(client_software_name=CLIENT_SOFTWARE_NAME, client_software_version=release)


def aborted_of(partition: Any) -> tuple[tuple[int, int], ...]:
    """A Fetch response partition's aborted transactions (null below READ_COMMITTED)."""
    return tuple((a.producer_id, a.first_offset) for a in partition.aborted_transactions or ())


class VdlClient:
    """Blocking client; use as a context manager. Not thread-safe (one per task)."""

    def __init__(self, settings: ClientSettings, connect: Callable[[str], Connection] | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        """`connect(address)` opens a connection (default: a Connection with the settings'
        timeout, client id and security) and `sleep` waits out a retry's backoff; tests pass
        ones that answer without a network and without waiting."""
        self.settings = settings
        self._connect = connect or self._open_connection
        self._sleep = sleep
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

    # -- plumbing: routes, retries, connections (the public API for modules built on the client) --

    @property
    def _timeout_s(self) -> float:
        return self.settings.request_timeout_ms / 1000

    def send(self, route: Route, request: Any, timeout_s: float | None = None, version: int | None = None) -> Any:
        """One attempt: `request` to the node `route` resolves to, its decoded response (whatever
        its error codes say; see call). `timeout_s` defaults to the request timeout, `version`
        to the highest one declared.

        Raises RetriableError when the route does not resolve now (no leader yet, node unknown,
        nothing reachable) or the node does not answer; the connection is then closed and what
        the route resolved to (a stream's leader, the controller) forgotten. StreamNotFoundError
        for the leader of a stream that does not exist.
        """
        if isinstance(route, AnyNode):
            return self._send_any(request, timeout_s, version)
        if isinstance(route, Controller):
            if self._controller < 0 or self._controller not in self._nodes:
                self._metadata([])
            if self._controller not in self._nodes:  # none elected yet: any node forwards admin requests
                return self._send_any(request, timeout_s, version)
            node_id = self._controller
        elif isinstance(route, LeaderOf):
            node_id = self._leader(route.stream)
        elif isinstance(route, CoordinatorOf):
            node_id, _ = self._find_coordinator(route.key, route.key_type)
        else:
            node_id = route.node_id
        if node_id not in self._nodes:
            self._metadata([])
        try:
            return self._send_node(node_id, request, timeout_s, version)
        except RetriableError:
            self._forget(route)
            raise

    def call(self, route: Route, request: Any, what: str | None = None, *,
             error_of: Callable[[Any], int] | None = None, deadline: float | None = None,
             timeout_s: float | None = None, version: int | None = None) -> Any:
        """`request` along `route`, retried (see retrying) until `deadline` (default: now plus
        the settings' deadline_ms). `error_of(response)` picks the error code that decides: a
        retriable one (settings.LEADER_ERRORS) forgets what the route resolved to and retries;
        any other comes back with the response, for the caller to read (check_error)."""
        what = what or type(request).__name__.removesuffix("Request")

        def attempt() -> Any:
            response = self.send(route, request, timeout_s, version)
            code = 0 if error_of is None else error_of(response)
            if code and ErrorCode(code) in LEADER_ERRORS:
                self._forget(route)
                raise RetriableError(f"{what}: {ErrorCode(code).name}")
            return response

        return self.retrying(what, attempt, deadline)

    def retrying(self, what: str, attempt: Callable[[], T], deadline: float | None = None) -> T:
        """attempt() until it returns, at most until `deadline` (time.monotonic(); default: now
        plus the settings' deadline_ms). RetriableError means: forget every stream leader and
        the controller learned (the next attempt asks Metadata again), back off (retry_backoff_ms,
        doubling up to 1 s) and try again; VdlClientError("<what>: gave up ...") once the next
        try would start past the deadline. Any other exception ends it at once."""
        deadline = deadline if deadline is not None else time.monotonic() + self.settings.deadline_ms / 1000
        backoff = max(self.settings.retry_backoff_ms, 1) / 1000
        while True:
            try:
                return attempt()
            except RetriableError as exc:
                if time.monotonic() + backoff > deadline:
                    raise VdlClientError(f"{what}: gave up after retries until the deadline: {exc}") from None
                log.debug("%s: retrying: %s", what, exc)
                self._leaders.clear()
                # A controller that died stays in the node list: only a new Metadata answer moves on.
                self._controller = -1
                self._sleep(backoff)
                backoff = min(backoff * 2, 1.0)

    @staticmethod
    def check_error(error_code: int, what: str) -> None:
        """Nothing for 0; RetriableError for the errors a retry may cure (settings.LEADER_ERRORS),
        StreamNotFoundError for UNKNOWN_TOPIC_OR_PARTITION, VdlClientError for the rest."""
        if error_code == 0:
            return
        error = ErrorCode(error_code)
        if error in LEADER_ERRORS:
            raise RetriableError(f"{what}: {error.name}")
        if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise StreamNotFoundError(f"{what}: stream does not exist")
        raise VdlClientError(f"{what}: {error.name} ({error_code})")

    def connection(self, node_id: int, key: Hashable | None = None) -> Connection:
        """The client's connection to a node named in the last Metadata answer, opened when
        there is none. It is kept under `key` (default: the node id, the connection send uses);
        another key gives a connection of one's own, e.g. to pipeline requests on it. Raises
        OSError when the node cannot be reached (then disconnect(key))."""
        return self._connection(node_id if key is None else key, self._address(node_id))

    def connected(self, key: Hashable) -> Connection | None:
        """The connection kept under `key`, if it is still open (not dropped since)."""
        return self._connections.get(key)

    def disconnect(self, key: Hashable) -> None:
        """Close the connection kept under `key` (a node id, or the key given to connection)."""
        connection = self._connections.pop(key, None)
        if connection is not None:
            connection.close()

    def knows_node(self, node_id: int, refresh: bool = False) -> bool:
        """Whether the last Metadata answer names `node_id`; with `refresh`, one more Metadata
        request first when it did not (False when no node answers it)."""
        if node_id in self._nodes or not refresh:
            return node_id in self._nodes
        try:
            self._metadata([])
        except (RetriableError, BrokerUnreachableError):
            return False
        return node_id in self._nodes

    def forget_leader(self, stream: str) -> None:
        """Ask Metadata for `stream`'s leader again before the next request to it."""
        self._leaders.pop(stream, None)

    def _forget(self, route: Route) -> None:
        if isinstance(route, LeaderOf):
            self._leaders.pop(route.stream, None)
        elif isinstance(route, Controller):
            self._controller = -1

    def _open_connection(self, address: str) -> Connection:
        return Connection(address, self._timeout_s, self.settings.client_id, self.settings.security)

    def _connection(self, key: Hashable, address: str) -> Connection:
        connection = self._connections.get(key)
        if connection is None:
            connection = self._connect(address)
            self._connections[key] = connection
        return connection

    def _address(self, node_id: int) -> str:
        host, port = self._nodes[node_id]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def _send_any(self, request: Any, timeout_s: float | None = None, version: int | None = None) -> Any:
        """To any reachable node: known nodes first, then the bootstrap servers in order."""
        errors = []
        targets: list[tuple[Hashable, str]] = [(n, self._address(n)) for n in self._nodes]
        targets += [(f"bootstrap:{server}", server) for server in self.settings.bootstrap_servers]
        for key, address in targets:
            try:
                return self._connection(key, address).request(request, timeout_s or self._timeout_s, version)
            except OSError as exc:
                self.disconnect(key)
                errors.append(f"{address}: {exc.strerror or exc}")
        if self.settings.fail_fast_when_unreachable and not self._nodes:
            raise BrokerUnreachableError("cannot connect to " + "; ".join(errors))
        raise RetriableError("no broker reachable: " + "; ".join(errors))

    def _send_node(self, node_id: int, request: Any, timeout_s: float | None = None, version: int | None = None) -> Any:
        if node_id not in self._nodes:
            raise RetriableError(f"node {node_id} unknown")
        address = self._address(node_id)
        try:
            return self._connection(node_id, address).request(request, timeout_s or self._timeout_s, version)
        except OSError as exc:
            self.disconnect(node_id)
            raise RetriableError(f"node {node_id} ({address}): {exc}") from exc

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
                if topic.name != stream or topic.error_code == 0:
                    continue
                if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    raise StreamNotFoundError(f"stream {stream!r} does not exist")
                if ErrorCode(topic.error_code) not in LEADER_ERRORS:
                    # TOPIC_AUTHORIZATION_FAILED, INVALID_TOPIC_EXCEPTION, ...: no retry cures
                    # them (a retry loop would end at the deadline saying "no leader yet").
                    self.check_error(topic.error_code, f"Metadata {stream!r}")
            if stream not in self._leaders:
                raise RetriableError(f"stream {stream!r} has no leader yet")
        return self._leaders[stream]

    def _find_coordinator(self, key: str, key_type: int) -> tuple[int, str]:
        response = self._send_any(FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]))
        found = response.coordinators[0]
        self.check_error(found.error_code, f"FindCoordinator {key!r}")
        host = f"[{found.host}]" if ":" in found.host else found.host
        return found.node_id, f"{host}:{found.port}"

    # -- metadata and admin --------------------------------------------------------------------

    def metadata(self, streams: Sequence[str] | None = None) -> Any:
        """The MetadataResponse for `streams` (None: every stream), from any reachable node."""
        return self.retrying("Metadata", lambda: self._metadata(streams))

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
        return self.retrying(f"Metadata {stream!r}", lambda: self._leader(stream))

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """What a broker serves: api key -> (min version, max version)."""
        response = self.call(ANY_NODE, api_versions_request(), "ApiVersions", error_of=lambda r: r.error_code)
        self.check_error(response.error_code, "ApiVersions")
        return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    def find_coordinator(self, group_id: str) -> tuple[int, str]:
        """The node coordinating a consumer group: (node id, host:port)."""
        return self.retrying(f"FindCoordinator {group_id!r}", lambda: self.find_coordinator_once(group_id))

    def find_coordinator_once(self, group_id: str) -> tuple[int, str]:
        """One FindCoordinator (v4+: a list of keys) to any node; raises on an error
        (RetriableError while the coordinator is not available)."""
        return self._find_coordinator(group_id, GROUP_KEY)

    def request_node(self, node_id: int, request: Any, timeout_s: float | None = None) -> Any:
        """One request to one node named in the last Metadata answer, no retry; raises
        BrokerUnreachableError when it cannot be reached or does not answer in time."""
        try:
            return self.send(Node(node_id), request, timeout_s)
        except RetriableError as error:
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
            for result in self.send(CONTROLLER, request).topics:
                if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
                    if not exist_ok:
                        raise StreamExistsError(f"stream {result.name!r} already exists")
                elif result.error_code != 0:
                    self.check_error(result.error_code, with_message(f"CreateTopics {result.name!r}", result.error_message))

        self.retrying("CreateTopics", attempt)
        for stream in wanted:  # wait until each stream has a leader, so the first write succeeds
            self.forget_leader(stream)
            self.retrying(f"leader of new stream {stream!r}", functools.partial(self._leader, stream))

    def delete_streams(self, streams: Iterable[str], missing_ok: bool = True) -> None:
        """Delete streams; a missing one raises StreamNotFoundError unless `missing_ok`."""
        names = list(streams)
        request = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=name) for name in names],
                                      timeout_ms=self.settings.request_timeout_ms)

        def attempt() -> None:
            for result in self.send(CONTROLLER, request).responses:
                if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    if not missing_ok:
                        raise StreamNotFoundError(f"stream {result.name!r} does not exist")
                elif result.error_code != 0:
                    self.check_error(result.error_code, f"DeleteTopics {result.name!r}")

        self.retrying("DeleteTopics", attempt)
        for stream in names:
            self.forget_leader(stream)

    def admin(self, request: Any, what: str) -> Any:
        """An admin request (ACLs, users) answered by the metadata leader, retried through
        leader changes; the caller reads the response's error codes."""
        return self.call(CONTROLLER, request, what)

    # -- offsets -------------------------------------------------------------------------------

    def list_offsets(self, streams: Sequence[str], timestamp: int | None,
                     timestamps: dict[str, int] | None = None) -> dict[str, int]:
        """ListOffsets per stream: EARLIEST_TIMESTAMP (-2) the log start offset, LATEST_TIMESTAMP
        (-1) the high watermark, else the first offset whose timestamp is >= the stream's entry in
        `timestamps` (-1: none)."""
        result: dict[str, int] = {}
        for stream in streams:
            wanted = timestamp if timestamp is not None else (timestamps or {})[stream]
            result[stream] = self.retrying(f"ListOffsets {stream!r}",
                                           functools.partial(self._list_offset, stream, wanted))
        return result

    def list_offset(self, stream: str, timestamp: int) -> int:
        """One stream's offset for `timestamp` (see list_offsets)."""
        return self.list_offsets([stream], timestamp)[stream]

    def _list_offset(self, stream: str, timestamp: int) -> int:
        # READ_COMMITTED: LATEST_TIMESTAMP answers the last stable offset, not the high watermark.
        request = ListOffsetsRequest(replica_id=-1, isolation_level=self.settings.isolation_level, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=stream, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])
        partition = self.send(LeaderOf(stream), request).topics[0].partitions[0]
        self.check_error(partition.error_code, f"ListOffsets {stream!r}")
        offset: int = partition.offset
        return offset

    # -- fetch ---------------------------------------------------------------------------------

    def fetch(self, stream: str, offset: int, partition_max_bytes: int, max_bytes: int, max_wait_ms: int,
              deadline: float) -> FetchResult:
        """Records from `offset` (whole stored batches, possibly a partial one at the end).

        OFFSET_OUT_OF_RANGE and UNKNOWN_TOPIC_OR_PARTITION come back to the caller, which decides
        about data loss; leader changes and dead connections are retried until `deadline`.
        """
        request = fetch_request(stream, offset, partition_max_bytes, max_bytes, max_wait_ms,
                                self.settings.isolation_level)

        def attempt() -> FetchResult:
            try:
                leader = self._leader(stream)
            except StreamNotFoundError:
                return FetchResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, -1, -1)
            response = self._send_node(leader, request, self._timeout_s + max_wait_ms / 1000, LEADER_FETCH_VERSION)
            self.check_error(response.error_code, f"Fetch {stream!r}")
            partition = response.responses[0].partitions[0]
            error = ErrorCode(partition.error_code)
            if error in (ErrorCode.OFFSET_OUT_OF_RANGE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                self.forget_leader(stream)
                if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and self.stream_exists(stream):
                    raise RetriableError(f"Fetch {stream!r}: node {leader} does not know the stream (yet)")
                return FetchResult(error, None, partition.high_watermark, partition.log_start_offset)
            self.check_error(partition.error_code, f"Fetch {stream!r}")
            return FetchResult(error, partition.records, partition.high_watermark, partition.log_start_offset,
                               aborted_of(partition))

        return self.retrying(f"Fetch {stream!r} at {offset}", attempt, deadline)

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
            connection = self.connection(leader)
            pending.correlation = connection.send(
                fetch_request(stream, offset, partition_max_bytes, max_bytes, max_wait_ms,
                              self.settings.isolation_level),
                self._timeout_s + max_wait_ms / 1000, LEADER_FETCH_VERSION)
            pending.node = leader
        except OSError:
            self.disconnect(leader)
        return pending

    def fetch_finish(self, pending: PendingFetch, deadline: float) -> FetchResult:
        node = pending.node
        connection = None if node is None else self.connected(node)
        if pending.correlation is not None and node is not None and connection is not None:
            try:
                response = connection.receive(
                    FetchRequest, pending.correlation, self._timeout_s + pending.args[4] / 1000, LEADER_FETCH_VERSION)
                partition = response.responses[0].partitions[0]
                if response.error_code == 0 and partition.error_code == 0:
                    return FetchResult(ErrorCode.NONE, partition.records, partition.high_watermark,
                                       partition.log_start_offset, aborted_of(partition))
            except OSError:
                self.disconnect(node)
        return self.fetch(*pending.args, deadline)

    # -- produce -------------------------------------------------------------------------------

    def init_producer_id(self) -> tuple[int, int]:
        """A fresh producer id and epoch for an idempotent producer (InitProducerId, no transactional id)."""
        request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000)

        response = self.call(ANY_NODE, request, "InitProducerId", error_of=lambda r: r.error_code)
        self.check_error(response.error_code, "InitProducerId")
        return response.producer_id, response.producer_epoch

    def writer_id(self, writer_key: str) -> tuple[int, int]:
        """The producer id and epoch the broker derives from `writer_key` (VdlWriterId, VDL's own):
        the same for every call, on every node, so a retried writer keyed the same way re-sends
        its batches under the same producer id and sequences and they are stored once."""
        request = VdlWriterIdRequest(writer_key=writer_key)
        response = self.call(ANY_NODE, request, "VdlWriterId", error_of=lambda r: r.error_code)
        self.check_error(response.error_code, "VdlWriterId")
        return response.producer_id, response.producer_epoch

    def last_sequence(self, stream: str, producer_id: int) -> int | None:
        """The last sequence `producer_id` stored in `stream`, -1 if none (DescribeProducers at
        its leader, KIP-664: from the batches the leader committed, about this producer only);
        None without READ on the stream."""
        request = DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(
            name=stream, partition_indexes=[0])], vdl_producer_ids=[producer_id])
        what = f"DescribeProducers {stream!r}"
        response = self.call(LeaderOf(stream), request, what,
                             error_of=lambda r: r.topics[0].partitions[0].error_code)
        partition = response.topics[0].partitions[0]
        if partition.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            return None
        self.check_error(partition.error_code, what)
        return next((p.last_sequence for p in partition.active_producers if p.producer_id == producer_id), -1)

    def pipeline(self, stream: str, timeout_ms: int, delivery_timeout_ms: int, window: int,
                 transactional_id: str | None = None,
                 acknowledged: Callable[[Batch], None] | None = None) -> ProducePipeline:
        return ProducePipeline(self, stream, timeout_ms, delivery_timeout_ms, window, transactional_id, acknowledged)

    def produce(self, stream: str, batch: Batch, timeout_ms: int, deadline: float,
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
            response = self.send(LeaderOf(stream), request, self._timeout_s + timeout_ms / 1000)
            partition = response.responses[0].partition_responses[0]
            if partition.error_code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                return -1
            self.check_error(partition.error_code, with_message(f"Produce to {stream!r}", partition.error_message))
            base_offset: int = partition.base_offset
            return base_offset

        return self.retrying(f"Produce to {stream!r}", attempt, deadline)

    def _send_unanswered(self, node_id: int, request: Any) -> int:
        """acks=0: the broker sends no answer, so only sending can fail."""
        if node_id not in self._nodes:
            raise RetriableError(f"node {node_id} unknown")
        address = self._address(node_id)
        try:
            self._connection(node_id, address).send(request, self._timeout_s)
        except OSError as exc:
            self.disconnect(node_id)
            raise RetriableError(f"node {node_id} ({address}): {exc}") from exc
        return -1


@dataclass
class PendingFetch:
    args: tuple[str, int, int, int, int]  # stream, offset, partition max bytes, max bytes, max wait
    node: int | None = None
    correlation: int | None = None


