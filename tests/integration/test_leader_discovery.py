"""KIP-951 leader discovery on a 3-node cluster: a Produce v10+ or Fetch v12+ refused with
NOT_LEADER_OR_FOLLOWER names the stream's current leader and its leader epoch (CurrentLeader), a
Produce answer also the leader's address (NodeEndpoints), as Kafka 3.7+ brokers answer -- at a
follower, at a node with no replica of the stream, and at a former leader after leadership moved
(a follower now: the new leader, a newer epoch). A librdkafka producer writing across that leader change has
every record stored once, at its offset."""

from __future__ import annotations

from typing import Any

import confluent_kafka
import pytest

from tests.faults.harness import wait_for_full_isr
from tests.support.cluster import node_address, wait_until
from tests.support.kafka import (
    LEADER_FETCH_VERSION,
    create_topic_raw,
    fetch_partition,
    metadata_raw,
    one_record_batch,
    produce_request,
    raw_request,
    record_values,
)
from vdl_client.client import VdlClient
from vdl_client.cluster_admin import elect_preferred, reassign_stream
from vdl_client.settings import ClientSettings
from vdl_dev.dev_cluster import DevCluster
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import FetchResponse, ProduceResponse

pytestmark = pytest.mark.timeout(180)

# Leadership moves only when a test moves it.
CLUSTER_SETTINGS = {"leader_balance_interval_ms": 0}


def leader_and_epoch(cluster: DevCluster, stream: str) -> tuple[int, int]:
    """(leader, leader epoch) in the leader's own Metadata answer."""
    def ask() -> tuple[int, int] | None:
        for node_id in cluster.node_ids():
            [topic] = metadata_raw(node_address(cluster, node_id), [stream]).topics
            if topic.partitions and topic.partitions[0].leader_id == node_id:
                return node_id, int(topic.partitions[0].leader_epoch)
        return None
    return wait_until(ask, 30, f"the leader of {stream}")


def endpoint(cluster: DevCluster, node_id: int) -> ProduceResponse.NodeEndpoint:
    """`node_id` as Metadata lists it, as a Produce answer's NodeEndpoint."""
    [broker] = [b for b in metadata_raw(node_address(cluster, 1), []).brokers if b.node_id == node_id]
    return ProduceResponse.NodeEndpoint(node_id=node_id, host=broker.host, port=broker.port, rack=broker.rack)


def produce_answer(cluster: DevCluster, node_id: int, stream: str, version: int = 10) -> Any:
    return raw_request(node_address(cluster, node_id), produce_request(stream, one_record_batch(b"refused")), version)


def hinted_produce(cluster: DevCluster, node_id: int, stream: str, leader: int, epoch: int) -> Any:
    """The Produce v10 answer of `node_id` once it names `leader` at `epoch` (a node without a
    replica learns the epoch from the leader within a moment)."""
    def ask() -> Any:
        answer = produce_answer(cluster, node_id, stream)
        current = answer.responses[0].partition_responses[0].current_leader
        return answer if (current.leader_id, current.leader_epoch) == (leader, epoch) else None
    return wait_until(ask, 10, f"node {node_id} naming leader {leader} at epoch {epoch}")


def test_the_nodes_without_a_replica_name_the_leader_and_its_address(cluster: DevCluster) -> None:
    stream = "hinted"
    assert create_topic_raw(node_address(cluster, 1), stream, 1)[0] == 0
    leader, epoch = leader_and_epoch(cluster, stream)
    assert epoch > 0
    outsiders = [n for n in cluster.node_ids() if n != leader]
    for node_id in outsiders:
        answer = hinted_produce(cluster, node_id, stream, leader, epoch)
        [part] = answer.responses[0].partition_responses
        assert (part.error_code, part.base_offset) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)
        assert part.current_leader == ProduceResponse.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
        assert answer.node_endpoints == [endpoint(cluster, leader)]
    outsider = outsiders[0]
    # Fetch v12 (no NodeEndpoints before v16): the node without a replica refuses, naming the leader.
    part = fetch_partition(node_address(cluster, outsider), stream, 0, version=12)
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert part.current_leader == FetchResponse.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
    # Produce v9 has neither field: the same refusal, nothing more.
    [part] = produce_answer(cluster, outsider, stream, version=9).responses[0].partition_responses
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert part.current_leader == ProduceResponse.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)


def test_the_former_leader_names_the_new_one_and_a_producer_follows_it(cluster: DevCluster) -> None:
    stream = "hinted-move"
    assert create_topic_raw(node_address(cluster, 1), stream, 3)[0] == 0
    view = wait_for_full_isr(cluster, stream, timeout=60)
    old, old_epoch = leader_and_epoch(cluster, stream)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                                         "enable.idempotence": True, "linger.ms": 0})
    delivered: list[tuple[int, bytes]] = []

    def produce(values: list[bytes]) -> None:
        def on_delivery(error: Any, message: Any) -> None:
            assert error is None, error
            delivered.append((message.offset(), message.value()))
        for value in values:
            producer.produce(stream, value, partition=0, on_delivery=on_delivery)
            producer.flush(30)

    first = [b"before-%d" % i for i in range(5)]
    produce(first)
    # Leadership moves to another replica (made the preferred leader, then elected).
    new = next(n for n in view.replicas if n != old)
    with VdlClient(ClientSettings.from_bootstrap(cluster.bootstrap_servers, deadline_ms=60_000)) as admin:
        reassign_stream(admin, stream, [new, *[n for n in view.replicas if n != new]])
        wait_until(lambda: elect_preferred(admin, [stream])[stream][0] in ("elected", "already")
                   and leader_and_epoch(cluster, stream)[0] == new, 60, f"node {new} leading {stream}")
    leader, epoch = leader_and_epoch(cluster, stream)
    assert leader == new and epoch > old_epoch
    answer = hinted_produce(cluster, old, stream, new, epoch)
    [part] = answer.responses[0].partition_responses
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert part.current_leader == ProduceResponse.LeaderIdAndEpoch(leader_id=new, leader_epoch=epoch)
    assert answer.node_endpoints == [endpoint(cluster, new)]
    # The producer's next batches go to the new leader: each stored once, after the first ones.
    then = [b"after-%d" % i for i in range(5)]
    produce(then)
    expected = list(enumerate(first + then))
    assert delivered == expected
    part = fetch_partition(node_address(cluster, new), stream, 0, version=LEADER_FETCH_VERSION)
    assert (part.error_code, part.high_watermark) == (0, 10)
    assert record_values(part.records) == expected
