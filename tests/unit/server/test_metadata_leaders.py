"""A Metadata answer never names a leader (or an in-sync replica) that is not one of its
brokers: a view of a stream's leader learned before that node left the cluster (decommissioned
or removed) is answered as "no leader", which clients ask again about. kafka-python 3's sender
otherwise looked the leader up among the brokers on every loop and failed each time, for good
(seen in tests/faults/test_membership.py's decommission under load)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from vdl_broker.server.handlers import metadata
from vdl_wire.errors import ErrorCode

pytestmark = pytest.mark.unit

TOPIC_ID = uuid.UUID(int=7)


def node(view: tuple[int, list[int]], nodes: tuple[int, ...] = (1, 2, 3), node_id: int = 2,
         learned: dict[int, int] | None = None) -> Any:
    """`learned`: the leader epoch each leader last reported to this node (no replica here)."""
    membership = SimpleNamespace(target_of=lambda info: [], hosts=lambda info: [1, 3, 4])
    state = SimpleNamespace(streams={"orders": object()}, membership=membership, nodes=dict.fromkeys(nodes),
                            topic_id=lambda name: TOPIC_ID)
    replicas = SimpleNamespace(leader_view=lambda name, info, first_hand: view, local=lambda name: None,
                               learned_leader_epoch=lambda name, leader: (learned or {}).get(leader, -1))
    return SimpleNamespace(node_id=node_id, metadata=SimpleNamespace(state=state), replicas=replicas)


def answer(stand_in: Any) -> tuple[int, int, list[int]]:
    [partition] = metadata._topic(stand_in, "orders").partitions
    return partition.error_code, partition.leader_id, partition.isr_nodes


def test_a_leader_that_left_the_cluster_is_no_leader() -> None:
    assert answer(node((4, [4, 1]))) == (ErrorCode.LEADER_NOT_AVAILABLE, -1, [1])


def test_a_registered_leader_and_this_node_are_named() -> None:
    assert answer(node((3, [3, 1]))) == (ErrorCode.NONE, 3, [3, 1])
    # A node not registered yet (it lists itself among the brokers) may name itself.
    assert answer(node((5, [5]), node_id=5)) == (ErrorCode.NONE, 5, [5])


def test_a_node_without_a_replica_answers_the_epoch_the_leader_reported() -> None:
    """KIP-320: clients fence Fetch and ListOffsets with the leader epoch Metadata gives."""
    [partition] = metadata._topic(node((3, [3, 1]), learned={3: 9, 1: 4}), "orders").partitions
    assert (partition.leader_id, partition.leader_epoch) == (3, 9)
    [partition] = metadata._topic(node((3, [3, 1])), "orders").partitions  # not heard yet
    assert (partition.leader_id, partition.leader_epoch) == (3, -1)
