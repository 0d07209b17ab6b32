"""How VdlClient resolves a route, what one send does, what call retries and until when, and
what it forgets on the way: exact requests, against a fake cluster (no network)."""

from __future__ import annotations

import time

import pytest

from tests.unit.client.fake_cluster import FakeCluster, settings
from vdl_client.client import VdlClient
from vdl_client.groups import committed_offsets
from vdl_client.routes import ANY_NODE, CONTROLLER, CoordinatorOf, LeaderOf, Node
from vdl_client.settings import RetriableError, StreamNotFoundError, VdlClientError
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import ApiVersionsRequest

pytestmark = pytest.mark.unit


def error_code(response: object) -> int:
    return response.error_code  # type: ignore[attr-defined, no-any-return]


def test_a_stream_leader_is_found_with_metadata_once_then_remembered() -> None:
    cluster = FakeCluster()
    cluster.leaders["s"] = 2
    client = VdlClient(settings(), connect=cluster.connect, sleep=cluster.sleep)
    client.send(LeaderOf("s"), ApiVersionsRequest())
    client.send(LeaderOf("s"), ApiVersionsRequest())
    assert cluster.sent == [("n1:9092", "MetadataRequest"), ("n2:9092", "ApiVersionsRequest"),
                            ("n2:9092", "ApiVersionsRequest")]


def test_each_route_goes_to_its_node() -> None:
    cluster = FakeCluster()
    cluster.controller, cluster.coordinator = 3, 2
    client = VdlClient(settings(), connect=cluster.connect, sleep=cluster.sleep)
    for route in (ANY_NODE, CONTROLLER, CoordinatorOf("g"), Node(3)):
        client.send(route, ApiVersionsRequest())
    assert cluster.sent == [("n1:9092", "ApiVersionsRequest"),  # the bootstrap server: no node known yet
                            ("n1:9092", "MetadataRequest"), ("n3:9092", "ApiVersionsRequest"),
                            ("n1:9092", "FindCoordinatorRequest"), ("n2:9092", "ApiVersionsRequest"),
                            ("n3:9092", "ApiVersionsRequest")]


def test_a_stream_that_does_not_exist_and_a_node_that_does_not() -> None:
    client = VdlClient(settings(), connect=FakeCluster().connect)
    with pytest.raises(StreamNotFoundError, match="^stream 'nope' does not exist$"):
        client.send(LeaderOf("nope"), ApiVersionsRequest())
    with pytest.raises(RetriableError, match="^node 7 unknown$"):
        client.send(Node(7), ApiVersionsRequest())
    assert not client.knows_node(7)
    assert client.knows_node(3)


def test_a_node_learned_later_is_known_after_a_refresh() -> None:
    client = VdlClient(settings(), connect=FakeCluster().connect)
    assert not client.knows_node(3)
    assert client.knows_node(3, refresh=True)


def test_call_retries_at_the_new_leader_after_not_leader() -> None:
    cluster = FakeCluster()
    cluster.leaders["s"] = 2
    client = VdlClient(settings(), connect=cluster.connect, sleep=cluster.sleep)
    assert client.leader_of("s") == 2
    cluster.leaders["s"] = 3
    cluster.errors[(2, "ApiVersionsRequest")] = [ErrorCode.NOT_LEADER_OR_FOLLOWER]
    response = client.call(LeaderOf("s"), ApiVersionsRequest(), error_of=error_code)
    assert response.error_code == 0
    assert cluster.sent == [("n1:9092", "MetadataRequest"), ("n2:9092", "ApiVersionsRequest"),
                            ("n1:9092", "MetadataRequest"), ("n3:9092", "ApiVersionsRequest")]
    assert cluster.slept == [0.001]


def test_the_backoff_doubles_up_to_a_second() -> None:
    cluster = FakeCluster()
    cluster.errors[(1, "ApiVersionsRequest")] = [ErrorCode.LEADER_NOT_AVAILABLE] * 12
    client = VdlClient(settings(), connect=cluster.connect, sleep=cluster.sleep)
    assert client.call(ANY_NODE, ApiVersionsRequest(), error_of=error_code, deadline=time.monotonic() + 60).error_code == 0
    assert cluster.slept == [0.001 * 2**k for k in range(10)] + [1.0, 1.0]
    assert len(cluster.sent) == 13


def test_call_hands_back_an_error_no_retry_cures() -> None:
    cluster = FakeCluster()
    cluster.errors[(1, "ApiVersionsRequest")] = [ErrorCode.UNSUPPORTED_VERSION]
    client = VdlClient(settings(), connect=cluster.connect, sleep=cluster.sleep)
    assert client.call(ANY_NODE, ApiVersionsRequest(), error_of=error_code).error_code == ErrorCode.UNSUPPORTED_VERSION
    assert cluster.sent == [("n1:9092", "ApiVersionsRequest")]


def test_call_gives_up_at_the_deadline() -> None:
    cluster = FakeCluster()
    cluster.errors[(1, "ApiVersionsRequest")] = [ErrorCode.NOT_LEADER_OR_FOLLOWER]
    client = VdlClient(settings(), connect=cluster.connect, sleep=cluster.sleep)
    with pytest.raises(VdlClientError) as raised:
        client.call(ANY_NODE, ApiVersionsRequest(), error_of=error_code, deadline=time.monotonic())
    assert str(raised.value) == ("ApiVersions: gave up after retries until the deadline: "
                                 "ApiVersions: NOT_LEADER_OR_FOLLOWER")
    assert cluster.sent == [("n1:9092", "ApiVersionsRequest")]


def test_an_unreachable_node_is_a_retriable_error_and_its_connection_is_dropped() -> None:
    cluster = FakeCluster()
    cluster.leaders["s"] = 2
    client = VdlClient(settings(), connect=cluster.connect, sleep=cluster.sleep)
    client.send(LeaderOf("s"), ApiVersionsRequest())
    assert client.connected(2) is not None
    cluster.down.add(2)
    with pytest.raises(RetriableError, match=r"^node 2 \(n2:9092\): \[Errno 104\] Connection reset by peer$"):
        client.send(LeaderOf("s"), ApiVersionsRequest())
    assert client.connected(2) is None
    cluster.leaders["s"] = 3
    client.send(LeaderOf("s"), ApiVersionsRequest())  # the leader was forgotten: asked again
    assert cluster.sent[-2:] == [("n1:9092", "MetadataRequest"), ("n3:9092", "ApiVersionsRequest")]


def test_a_dead_controller_is_forgotten_and_the_new_one_asked() -> None:
    cluster = FakeCluster()
    client = VdlClient(settings(), connect=cluster.connect, sleep=cluster.sleep)
    client.create_stream("a")
    cluster.down.add(1)
    cluster.controller = 2
    client.create_stream("b")
    assert cluster.sent == [("n1:9092", "MetadataRequest"), ("n1:9092", "CreateTopicsRequest"),
                            ("n1:9092", "MetadataRequest"),  # a's leader
                            ("n2:9092", "MetadataRequest"),  # n1 refused: controller and its leaders forgotten
                            ("n2:9092", "CreateTopicsRequest"), ("n2:9092", "MetadataRequest")]
    assert cluster.slept == [0.001]


def test_a_retry_asks_metadata_for_the_controller_again() -> None:
    cluster = FakeCluster()
    client = VdlClient(settings(), connect=cluster.connect, sleep=cluster.sleep)
    client.create_stream("a")
    cluster.controller = 2  # the old one answers, but no longer as the controller
    cluster.errors[(1, "CreateTopicsRequest")] = [ErrorCode.NOT_CONTROLLER]
    client.create_stream("b")
    assert cluster.sent[3:] == [("n1:9092", "CreateTopicsRequest"),  # NOT_CONTROLLER
                                ("n1:9092", "MetadataRequest"), ("n2:9092", "CreateTopicsRequest"),
                                ("n1:9092", "MetadataRequest")]
    assert cluster.slept == [0.001]


def test_a_group_request_retries_a_timeout_at_the_coordinator() -> None:
    cluster = FakeCluster()
    cluster.coordinator = 3
    cluster.committed["g"] = {"s": 7}
    cluster.errors[(3, "OffsetFetchRequest")] = [ErrorCode.REQUEST_TIMED_OUT]
    client = VdlClient(settings(), connect=cluster.connect, sleep=cluster.sleep)
    assert committed_offsets(client, "g") == {"s": 7}
    assert cluster.sent == [("n1:9092", "FindCoordinatorRequest"), ("n1:9092", "MetadataRequest"),
                            ("n3:9092", "OffsetFetchRequest"),  # REQUEST_TIMED_OUT
                            ("n1:9092", "FindCoordinatorRequest"), ("n3:9092", "OffsetFetchRequest")]
    assert cluster.slept == [0.001]


def test_an_unanswered_produce_to_a_leader_metadata_does_not_list_is_retried() -> None:
    cluster = FakeCluster()
    cluster.leaders["s"] = 9  # a node that has not joined the answer's broker list yet
    client = VdlClient(settings(), connect=cluster.connect, sleep=cluster.sleep)
    with pytest.raises(VdlClientError) as raised:
        client.produce("s", b"batch", 1000, time.monotonic(), acks=0)
    assert str(raised.value) == "Produce to 's': gave up after retries until the deadline: node 9 unknown"
    assert cluster.sent == [("n1:9092", "MetadataRequest")]
