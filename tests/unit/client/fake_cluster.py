"""A cluster that answers a VdlClient without a network or waiting:
VdlClient(settings(), connect=cluster.connect, sleep=cluster.sleep).

Nodes are "n<id>:9092"; the test sets who leads, who is the controller, which nodes are down,
and queues error codes a node answers once per request type, and the configs DescribeConfigs
reports for a stream (`configs`). Every request is recorded as
(address, request class name), for tests that assert where the client sent what.

Produce appends to one replicated log per stream (`stored`: the batches in log order) with
idempotent producers' bookkeeping as KIP-98/KIP-360 have it: an unknown producer's first batch
is taken at any sequence, then a batch is appended only in sequence, a retry of a remembered
batch is a duplicate, an older one DUPLICATE_SEQUENCE_NUMBER, a gap OUT_OF_ORDER_SEQUENCE_NUMBER.
Requests sent on a connection are answered in order (send, then receive), as a broker does.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Any

from vdl_client.settings import ClientSettings
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import (
    AddPartitionsToTxnResponse,
    ApiVersionsResponse,
    CreateTopicsResponse,
    DescribeConfigsResponse,
    EndTxnResponse,
    FindCoordinatorResponse,
    InitProducerIdResponse,
    MetadataResponse,
    OffsetFetchResponse,
    ProduceResponse,
)
from vdl_wire.records.batch_header import parse_batch_header

BOOTSTRAP = "n1:9092"


def settings(**overrides: Any) -> ClientSettings:
    # Backoff and deadline small: a give-up test takes a few milliseconds.
    defaults: dict[str, Any] = {"retry_backoff_ms": 1, "deadline_ms": 200, "request_timeout_ms": 1000}
    return ClientSettings((BOOTSTRAP,), **{**defaults, **overrides})


def address(node_id: int) -> str:
    return f"n{node_id}:9092"


class FakeCluster:
    def __init__(self, nodes: tuple[int, ...] = (1, 2, 3)) -> None:
        self.nodes = nodes
        self.down: set[int] = set()
        self.controller = nodes[0]
        self.leaders: dict[str, int] = {}
        self.coordinator = nodes[0]
        self.committed: dict[str, dict[str, int]] = {}
        self.errors: dict[tuple[int, str], list[int]] = defaultdict(list)  # (node, request) -> codes, once each
        self.sent: list[tuple[str, str]] = []
        self.versions: list[tuple[str, int | None]] = []  # (request, the version the client asked for)
        self.slept: list[float] = []  # the client's backoffs, in seconds
        self.stored: dict[str, list[bytes]] = defaultdict(list)  # stream -> batches, in log order
        self.configs: dict[str, dict[str, str]] = defaultdict(dict)  # stream -> the configs set for it
        self._sequences: dict[tuple[str, int], list[tuple[int, int]]] = {}  # (stream, producer) -> (first, last)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)

    def connect(self, addr: str) -> FakeConnection:
        node = int(addr.removeprefix("n").split(":")[0])
        if node in self.down:
            raise ConnectionRefusedError(111, "Connection refused")
        return FakeConnection(self, node, addr)

    def answer(self, node: int, request: Any) -> Any:
        name = type(request).__name__
        queued = self.errors[(node, name)]
        error = queued.pop(0) if queued else 0
        if name == "MetadataRequest":
            return self._metadata(request)
        if name == "ApiVersionsRequest":
            return ApiVersionsResponse(error_code=error, api_keys=[])
        if name == "CreateTopicsRequest":
            if not error:
                for topic in request.topics:
                    self.leaders.setdefault(topic.name, self.controller)
            return CreateTopicsResponse(topics=[CreateTopicsResponse.CreatableTopicResult(
                name=topic.name, error_code=error) for topic in request.topics])
        if name == "FindCoordinatorRequest":
            return FindCoordinatorResponse(coordinators=[FindCoordinatorResponse.Coordinator(
                key=request.coordinator_keys[0], node_id=self.coordinator, host=f"n{self.coordinator}", port=9092,
                error_code=error)])
        if name == "ProduceRequest":
            topic = request.topic_data[0]
            code = error or self._append(topic.name, bytes(topic.partition_data[0].records))
            return ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name=topic.name, partition_responses=[
                ProduceResponse.PartitionProduceResponse(index=0, error_code=code)])])
        if name == "OffsetFetchRequest":
            group = request.groups[0].group_id
            return OffsetFetchResponse(groups=[OffsetFetchResponse.OffsetFetchResponseGroup(
                group_id=group, error_code=error, topics=[] if error else [
                    OffsetFetchResponse.OffsetFetchResponseTopics(name=stream, partitions=[
                        OffsetFetchResponse.OffsetFetchResponsePartitions(partition_index=0, committed_offset=offset)])
                    for stream, offset in sorted(self.committed.get(group, {}).items())])])
        if name == "InitProducerIdRequest":
            return InitProducerIdResponse(error_code=error, producer_id=7, producer_epoch=3)
        if name == "AddPartitionsToTxnRequest":
            R = AddPartitionsToTxnResponse  # noqa: N806
            return R(results_by_topic_v3_and_below=[R.AddPartitionsToTxnTopicResult(name=t.name, results_by_partition=[
                R.AddPartitionsToTxnPartitionResult(partition_index=0, partition_error_code=error)])
                for t in request.v3_and_below_topics])
        if name == "EndTxnRequest":
            return EndTxnResponse(error_code=error)
        if name == "DescribeConfigsRequest":
            R = DescribeConfigsResponse  # noqa: N806
            return R(results=[R.DescribeConfigsResult(
                resource_type=r.resource_type, resource_name=r.resource_name,
                error_code=error or (0 if r.resource_name in self.leaders else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                configs=[R.DescribeConfigsResourceResult(name=k, value=v) for k, v in self.configs[r.resource_name].items()
                         if r.configuration_keys is None or k in r.configuration_keys])
                for r in request.resources])
        raise AssertionError(f"the fake cluster does not answer {name}")

    def _append(self, stream: str, batch: bytes) -> int:
        header = parse_batch_header(batch)
        first, last = header.base_sequence, header.base_sequence + header.last_offset_delta
        if self.leaders.get(stream) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        known = self._sequences.get((stream, header.producer_id))
        if known is not None:
            if (first, last) in known[-5:]:
                return 0  # a retry of a remembered batch: acknowledged, not stored again
            if first != known[-1][1] + 1:
                return (ErrorCode.DUPLICATE_SEQUENCE_NUMBER if last <= known[-1][1]
                        else ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        self._sequences.setdefault((stream, header.producer_id), []).append((first, last))
        self.stored[stream].append(batch)
        return 0

    def _metadata(self, request: Any) -> Any:
        wanted = list(self.leaders) if request.topics is None else [t.name for t in request.topics]
        topics = []
        for stream in wanted:
            if stream not in self.leaders:
                topics.append(MetadataResponse.MetadataResponseTopic(
                    name=stream, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            topics.append(MetadataResponse.MetadataResponseTopic(name=stream, partitions=[
                MetadataResponse.MetadataResponsePartition(partition_index=0, leader_id=self.leaders[stream],
                                                           replica_nodes=list(self.nodes),
                                                           isr_nodes=list(self.nodes))]))
        return MetadataResponse(
            brokers=[MetadataResponse.MetadataResponseBroker(node_id=n, host=f"n{n}", port=9092) for n in self.nodes],
            controller_id=self.controller, topics=topics)


class FakeConnection:
    def __init__(self, cluster: FakeCluster, node: int, addr: str) -> None:
        self.cluster, self.node, self.address = cluster, node, addr
        self._answers: deque[tuple[int, Any]] = deque()
        self._correlation = 0

    def request(self, request: Any, timeout_s: float, version: int | None = None) -> Any:
        if self.node in self.cluster.down:
            raise ConnectionResetError(104, "Connection reset by peer")
        self.cluster.sent.append((self.address, type(request).__name__))
        self.cluster.versions.append((type(request).__name__, version))
        return self.cluster.answer(self.node, request)

    def send(self, request: Any, timeout_s: float, version: int | None = None) -> int:
        """The node handles the request now; its answer waits for receive(), in order."""
        if self.node in self.cluster.down:
            raise ConnectionResetError(104, "Connection reset by peer")
        self.cluster.sent.append((self.address, type(request).__name__))
        self._correlation += 1
        answer = None if getattr(request, "acks", -1) == 0 else self.cluster.answer(self.node, request)
        if answer is not None:
            self._answers.append((self._correlation, answer))
        return self._correlation

    def receive(self, request_class: type, correlation: int, timeout_s: float, version: int | None = None) -> Any:
        got, answer = self._answers.popleft()
        assert got == correlation, (got, correlation)
        return answer

    def close(self) -> None:
        pass
