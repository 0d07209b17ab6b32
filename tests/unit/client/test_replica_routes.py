"""Replica reads on the client's public API: replica sets asked of the leaders, and a replica
that does not answer given up at once (the caller moves on), against a fake cluster."""

from __future__ import annotations

import pytest

from tests.unit.client.fake_cluster import FakeCluster, settings
from vdl_client.client import FetchResult, VdlClient
from vdl_client.replicas import ReplicaSet, fetch_replica, replica_sets
from vdl_wire.errors import ErrorCode

pytestmark = pytest.mark.unit


def test_replica_sets_are_asked_of_each_leader() -> None:
    cluster = FakeCluster()
    cluster.leaders.update(a=2, b=3, c=2)
    client = VdlClient(settings(), connect=cluster.connect, sleep=cluster.sleep)
    assert replica_sets(client, ["a", "b", "c"]) == {
        "a": ReplicaSet(2, (1, 2, 3), {1: None, 2: None, 3: None}),
        "b": ReplicaSet(3, (1, 2, 3), {1: None, 2: None, 3: None}),
        "c": ReplicaSet(2, (1, 2, 3), {1: None, 2: None, 3: None})}
    assert cluster.sent == [("n1:9092", "MetadataRequest"), ("n2:9092", "MetadataRequest"),
                            ("n3:9092", "MetadataRequest")]


def test_a_leader_that_does_not_answer_is_left_out_of_the_replica_sets() -> None:
    cluster = FakeCluster()
    cluster.leaders.update(a=2, b=3)
    cluster.down.add(3)
    client = VdlClient(settings(), connect=cluster.connect, sleep=cluster.sleep)
    assert replica_sets(client, ["a", "b"]) == {"a": ReplicaSet(2, (1, 2, 3), {1: None, 2: None, 3: None})}


def test_a_replica_that_does_not_answer_is_a_network_exception_at_once() -> None:
    cluster = FakeCluster()
    cluster.leaders["s"] = 1
    cluster.down.add(3)
    client = VdlClient(settings(), connect=cluster.connect, sleep=cluster.sleep)
    assert fetch_replica(client, 3, "s", 0, 1024, 1024, 0) == FetchResult(ErrorCode.NETWORK_EXCEPTION, None, -1, -1)
    assert fetch_replica(client, 7, "s", 0, 1024, 1024, 0) == FetchResult(ErrorCode.NETWORK_EXCEPTION, None, -1, -1)
    assert cluster.sent == [("n1:9092", "MetadataRequest"), ("n1:9092", "MetadataRequest")]  # 3 known, 7 not
    assert client.connected(3) is None
