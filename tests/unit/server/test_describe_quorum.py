"""DescribeQuorum (KIP-595 / 836 / 853) from a stand-in node: the metadata group as partition 0 of
`__cluster_metadata` (leader, term as epoch, commit index as high watermark, each member's log
end offset as the leader knows it, learners as observers, the voters' listeners in v2), the
answer of a node that does not lead, a request for anything else, and the cluster permission.
Each side's bytes go through the codec at every version, as the Java admin client reads them."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from vdl_broker.cluster.metadata import NodeInfo
from vdl_broker.raft.progress import PeerStatus, ProgressState
from vdl_broker.raft.types import ConfState
from vdl_broker.server.handlers import describe_quorum
from vdl_wire.codec import decode_message, encode_message
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import DescribeQuorumRequest

pytestmark = pytest.mark.unit

ZERO = uuid.UUID(int=0)
NOW_MS = 1_767_000_000_000
Topic = DescribeQuorumRequest.TopicData
Part = DescribeQuorumRequest.PartitionData


def status(match: int, learner: bool = False, heard: int = -1, caught_up: int = -1) -> PeerStatus:
    return PeerStatus(match, match + 1, ProgressState.REPLICATE, True, learner, True, heard, caught_up)


class Authorizer:
    def __init__(self, allow: bool) -> None:
        self.allow = allow
        self.asked: list[tuple[str, str, str]] = []

    def allows(self, principal: str, host: str, operation: Any, resource_type: Any, name: str) -> bool:
        self.asked.append((operation.name, resource_type.name, name))
        return self.allow


def three_nodes(node_id: int = 2, leading: bool = True, allow: bool = True) -> Any:
    """Node 2 leads voters 1-3 in term 7 (commit index 41); node 4 is a learner."""
    group = SimpleNamespace(
        is_leader=leading, term=7, commit_index=41, conf=ConfState(voters=(3, 1, 2), learners=(4,)),
        config=SimpleNamespace(tick_interval_s=0.1),
        # 1 answered 2 ticks ago holding everything; 3 answered 1 tick ago, last caught up 15
        # ticks ago; learner 4 never answered this term.
        peer_status=lambda: {1: status(41, heard=2, caught_up=2), 2: status(42, heard=0, caught_up=0),
                             3: status(30, heard=1, caught_up=15), 4: status(12, learner=True)}
        if leading else {})
    nodes = {1: NodeInfo(1, "h1:9092", "h1:9100"),
             2: NodeInfo(2, "h2:9092", "h2:9100", listeners=("PLAINTEXT://h2:9092", "SASL_SSL://h2:9093")),
             3: NodeInfo(3, "h3:9092", "h3:9100"),
             4: NodeInfo(4, "h4:9092", "h4:9100")}
    metadata = SimpleNamespace(group=group, state=SimpleNamespace(nodes=nodes), leader_id=2, is_leader=leading)
    return SimpleNamespace(node_id=node_id, metadata=metadata, authorizer=Authorizer(allow),
                           own_address=lambda protocol: f"h{node_id}:9092")


def wire(message: Any, version: int) -> Any:
    cls = type(message)
    return decode_message(cls, version, b"".join(bytes(b) for b in encode_message(cls, version, message)),
                          exact=True)[0]


def ask(node: Any, version: int, topics: list[Any] | None = None, forwarded: bool = False) -> Any:
    if topics is None:
        topics = [Topic(topic_name="__cluster_metadata", partitions=[Part(partition_index=0)])]
    request = wire(DescribeQuorumRequest(topics=topics), version)
    context = SimpleNamespace(api_version=version, principal="User:alice", client_host="127.0.0.1",
                              protocol="PLAINTEXT", forwarded=forwarded)
    return wire(asyncio.run(describe_quorum.handle(node, context, request)), version)


def replicas(states: list[Any]) -> list[tuple[int, uuid.UUID, int, int, int]]:
    return [(s.replica_id, s.replica_directory_id, s.log_end_offset, s.last_fetch_timestamp,
             s.last_caught_up_timestamp) for s in states]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_the_leader_describes_the_metadata_group(version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(describe_quorum.time, "time", lambda: NOW_MS / 1000)
    response = ask(three_nodes(), version)
    assert (response.error_code, response.error_message) == (0, None)
    [topic] = response.topics
    [partition] = topic.partitions
    assert (topic.topic_name, partition.partition_index, partition.error_code, partition.error_message) == (
        "__cluster_metadata", 0, 0, None)
    assert (partition.leader_id, partition.leader_epoch, partition.high_watermark) == (2, 7, 41)
    # v0 has no timestamps (-1 is the decoded default); v1+: the leader's are now, a follower's
    # when the leader last heard from it and last saw it hold its whole log (one tick 100 ms).
    def at(ms: int) -> int:
        return ms if version >= 1 else -1

    assert replicas(partition.current_voters) == [(1, ZERO, 41, at(NOW_MS - 200), at(NOW_MS - 200)),
                                                  (2, ZERO, 42, at(NOW_MS), at(NOW_MS)),
                                                  (3, ZERO, 30, at(NOW_MS - 100), at(NOW_MS - 1500))]
    assert replicas(partition.observers) == [(4, ZERO, 12, -1, -1)]
    listeners = [(n.node_id, [(lst.name, lst.host, lst.port) for lst in n.listeners]) for n in response.nodes]
    assert listeners == ([] if version < 2 else [
        (1, [("PLAINTEXT", "h1", 9092)]),
        (2, [("PLAINTEXT", "h2", 9092), ("SASL_SSL", "h2", 9093)]),
        (3, [("PLAINTEXT", "h3", 9092)])])


def test_a_forwarded_request_on_a_node_that_does_not_lead_is_not_leader_or_follower() -> None:
    """A KRaft voter that does not lead answers this in the partition; VDL names the leader."""
    response = ask(three_nodes(node_id=3, leading=False), 2, forwarded=True)
    assert response.error_code == 0
    [partition] = response.topics[0].partitions
    assert (response.topics[0].topic_name, partition.partition_index, partition.error_code,
            partition.leader_id, partition.error_message, partition.current_voters) == (
        "__cluster_metadata", 0, int(ErrorCode.NOT_LEADER_OR_FOLLOWER), 2,
        "node 3 does not lead the metadata group (node 2 does)", [])


@pytest.mark.parametrize("topics", [
    [Topic(topic_name="__cluster_metadata", partitions=[Part(partition_index=1)])],
    [Topic(topic_name="stream", partitions=[Part(partition_index=0)])],
    [Topic(topic_name="__cluster_metadata", partitions=[Part(partition_index=0), Part(partition_index=0)])],
    [],
], ids=["partition-1", "other-topic", "two-partitions", "none"])
def test_anything_but_the_metadata_partition_is_unknown_topic_or_partition(topics: list[Any]) -> None:
    response = ask(three_nodes(), 2, topics)
    assert response.error_code == 0
    assert [(t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in response.topics] == [
        (t.topic_name, [(p.partition_index, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)) for p in t.partitions])
        for t in topics]


def test_describe_on_the_cluster_is_needed() -> None:
    node = three_nodes(allow=False)
    response = ask(node, 2)
    assert (response.error_code, response.topics) == (int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), [])
    assert node.authorizer.asked == [("DESCRIBE", "CLUSTER", "kafka-cluster")]
