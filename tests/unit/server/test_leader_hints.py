"""KIP-951 leader discovery: a Produce (v10+) or Fetch (v12+) refused NOT_LEADER_OR_FOLLOWER
names the stream's current leader and its leader epoch in the partition's CurrentLeader, and a
Produce answer the leader's address on the client's listener in NodeEndpoints, as Kafka 3.7+
answers (ProduceResponse.json, FetchResponse.json), so clients go there without a Metadata round
trip. Older versions, other errors and an unknown leader carry none.

The Produce and Fetch handlers over a stand-in node: this is node 1, with no replica of stream
"s" (or a follower's), led by node 2 at term 7. The answers are encoded and decoded with the wire
codec, so what is checked is what the client reads.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from vdl_broker.cluster.membership import MembershipState
from vdl_broker.cluster.metadata import NodeInfo, StreamInfo
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.handlers import fetch, produce
from vdl_broker.server.partition import RemotePartition
from vdl_wire.codec import decode_message, encode_message
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import FetchRequest, FetchResponse, ProduceRequest, ProduceResponse
from vdl_wire.records.record_batch import RecordBatchBuilder

pytestmark = pytest.mark.unit

STREAM = "s"
TERM = 7
NODES = {n: NodeInfo(n, f"10.0.0.{n}:9092", f"10.0.0.{n}:9093",
                     listeners=(f"PLAINTEXT://10.0.0.{n}:9092", f"SSL://vdl-{n}.example:9094"), rack=f"rack-{n}")
         for n in (1, 2, 3)}


def node(leader: int = 2, follower: bool = False, learned: int = TERM) -> Any:
    """Node 1. `follower`: it holds a replica following `leader` (its term is TERM); else it
    holds none, and `learned` is the epoch the leader last reported to it (-1: none yet)."""
    state = SimpleNamespace(streams={STREAM: StreamInfo(STREAM, (2, 3, 1) if follower else (2, 3))},
                            membership=MembershipState(), nodes=NODES)
    local = SimpleNamespace(leader_epoch=TERM, leader_id=leader) if follower else None
    replicas = SimpleNamespace(
        get=lambda name: RemotePartition(name, leader) if name == STREAM else None,
        leader_view=lambda name, info, first_hand: (leader, [leader] if leader > 0 else []),
        local=lambda name: local,
        learned_leader_epoch=lambda name, known: learned if known == leader else -1)
    return SimpleNamespace(node_id=1, cut_off=False, metadata=SimpleNamespace(state=state), replicas=replicas,
                           config=SimpleNamespace(max_batch_bytes=1 << 20, rack=None), metrics=None,
                           authorizer=SimpleNamespace(allows=lambda *args: True),
                           transactions=SimpleNamespace(produce_chain={}))


def context(version: int, protocol: str = "PLAINTEXT") -> RequestContext:
    return RequestContext(SimpleNamespace(request_api_version=version), "127.0.0.1", None,  # type: ignore[arg-type]
                          protocol=protocol)


def on_the_wire(cls: type, version: int, value: Any) -> Any:
    data = b"".join(bytes(b) for b in encode_message(cls, version, value))
    return decode_message(cls, version, data, exact=True)[0]


def produce_answer(stand_in: Any, version: int, protocol: str = "PLAINTEXT") -> ProduceResponse:
    builder = RecordBatchBuilder()
    builder.append(1_700_000_000_000, None, b"v")
    data = ProduceRequest.PartitionProduceData(index=0, records=builder.build())
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=1000,
                             topic_data=[ProduceRequest.TopicProduceData(name=STREAM, partition_data=[data])])
    response = asyncio.run(produce.handle(stand_in, context(version, protocol), request))
    assert response is not None
    return on_the_wire(ProduceResponse, version, response)


def fetch_answer(stand_in: Any, version: int) -> FetchResponse:
    part = FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
    request = FetchRequest(max_wait_ms=0, min_bytes=1, topics=[FetchRequest.FetchTopic(topic=STREAM,
                                                                                      partitions=[part])])
    return on_the_wire(FetchResponse, version, asyncio.run(fetch.handle(stand_in, context(version), request)))


@pytest.mark.parametrize("follower", [False, True])
@pytest.mark.parametrize("version", [10, 11, 12])
def test_a_produce_refused_names_the_leader_its_epoch_and_its_address(version: int, follower: bool) -> None:
    answer = produce_answer(node(follower=follower), version)
    [part] = answer.responses[0].partition_responses
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert part.current_leader == ProduceResponse.LeaderIdAndEpoch(leader_id=2, leader_epoch=TERM)
    assert answer.node_endpoints == [ProduceResponse.NodeEndpoint(node_id=2, host="10.0.0.2", port=9092,
                                                                  rack="rack-2")]


def test_the_leader_address_is_the_one_of_the_clients_listener() -> None:
    answer = produce_answer(node(), 10, protocol="SSL")
    assert answer.node_endpoints == [ProduceResponse.NodeEndpoint(node_id=2, host="vdl-2.example", port=9094,
                                                                  rack="rack-2")]


def test_an_epoch_not_learned_yet_is_named_unknown() -> None:
    answer = produce_answer(node(learned=-1), 10)
    [part] = answer.responses[0].partition_responses
    assert part.current_leader == ProduceResponse.LeaderIdAndEpoch(leader_id=2, leader_epoch=-1)
    assert [e.node_id for e in answer.node_endpoints] == [2]


def test_no_hint_before_produce_v10_or_for_an_unknown_leader() -> None:
    none = ProduceResponse.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    for stand_in, version in ((node(), 9), (node(leader=-1), 10)):
        answer = produce_answer(stand_in, version)
        [part] = answer.responses[0].partition_responses
        assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert part.current_leader == none
        assert answer.node_endpoints == []


@pytest.mark.parametrize("follower", [False, True])
def test_a_fetch_refused_names_the_leader_and_its_epoch(follower: bool) -> None:
    [part] = fetch_answer(node(follower=follower), 12).responses[0].partitions
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert part.current_leader == FetchResponse.LeaderIdAndEpoch(leader_id=2, leader_epoch=TERM)


def test_no_hint_before_fetch_v12_or_for_an_unknown_leader() -> None:
    none = FetchResponse.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    for stand_in, version in ((node(), 11), (node(leader=-1), 12)):
        [part] = fetch_answer(stand_in, version).responses[0].partitions
        assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert part.current_leader == none


@pytest.mark.parametrize("version", [3, 9, 12])
def test_a_produce_at_a_node_without_a_replica_is_refused_as_not_leader_whatever_its_timestamps(version: int) -> None:
    """Leadership is checked before the data, as Kafka does: the timestamp check against the
    limits of a stream this node holds no replica of answered INVALID_TIMESTAMP, which producers
    do not retry (the batch failed where it should have gone to the leader)."""
    [part] = produce_answer(node(), version).responses[0].partition_responses
    assert (part.error_code, part.error_message) == (ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                                     None if version < 8 else "this node holds no replica of stream s")
