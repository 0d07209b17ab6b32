"""ElectLeaders of type 1 (unclean) from a stand-in node: Raft never elects a replica that could
lack acknowledged writes, so a stream with a leader is answered ELECTION_NOT_NEEDED (as Kafka's
controller answers for a live leader: `kafka-leader-election` says "Valid replica already
elected") and one without ELIGIBLE_LEADERS_NOT_AVAILABLE; no election is started either way."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from vdl_broker.server.handlers import elect_leaders
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import ElectLeadersRequest

pytestmark = pytest.mark.unit

UNCLEAN = 1


class Allow:
    def allows(self, *args: Any) -> bool:
        return True


def node_with_leaders(leaders: dict[str, int]) -> Any:
    async def wait_for_leader(name: str, timeout_s: float) -> None:
        return None

    replicas = SimpleNamespace(wait_for_leader=wait_for_leader, local=lambda name: None,
                               leader_view=lambda name, info: (leaders[name], []))
    metadata = SimpleNamespace(state=SimpleNamespace(streams=dict.fromkeys(leaders, object())))
    return SimpleNamespace(node_id=1, metadata=metadata, replicas=replicas, authorizer=Allow())


def test_an_unclean_election_is_not_needed_with_a_leader_and_impossible_without() -> None:
    node = node_with_leaders({"led": 3, "leaderless": -1})
    request = ElectLeadersRequest(election_type=UNCLEAN, timeout_ms=1000, topic_partitions=[
        ElectLeadersRequest.TopicPartitions(topic="led", partitions=[0]),
        ElectLeadersRequest.TopicPartitions(topic="leaderless", partitions=[0]),
        ElectLeadersRequest.TopicPartitions(topic="absent", partitions=[0])])
    context = SimpleNamespace(api_version=2, principal="User:alice", client_host="127.0.0.1", protocol="PLAINTEXT",
                              forwarded=False)
    response = asyncio.run(elect_leaders.handle(node, context, request))
    answers = {r.topic: [(p.partition_id, p.error_code, p.error_message) for p in r.partition_result]
               for r in response.replica_election_results}
    assert answers == {
        "absent": [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no stream absent partition 0")],
        "led": [(0, ErrorCode.ELECTION_NOT_NEEDED,
                 "stream led has a leader (node 3) holding every acknowledged write: Raft needs no unclean election")],
        "leaderless": [(0, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                        "stream leaderless has no leader now: Raft elects only a replica holding every "
                        "acknowledged write, never an unclean one")]}
