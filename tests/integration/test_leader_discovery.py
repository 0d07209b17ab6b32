"""KIP-951 leader discovery on a 3-node cluster: a Produce v10+ or Fetch v12+ refused with
NOT_LEADER_OR_FOLLOWER names the stream's current leader and its leader epoch (CurrentLeader), a
Produce answer also the leader's address (NodeEndpoints), as Kafka 3.7+ brokers answer -- at a
follower, at a node with no replica of the stream, and at a former leader after leadership moved
(a follower now: the new leader, a newer epoch). A librdkafka producer writing across that leader change has
every record stored once, at its offset. Leader epochs (KIP-320): Fetch and ListOffsets fence a
client's older epoch, and Metadata gives the leader's epoch at a node without a replica too."""

from __future__ import annotations

from functools import partial
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
from vdl_wire.messages import FetchRequest, FetchResponse, ListOffsetsRequest, ProduceResponse

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


def fetch_with_epoch(cluster: DevCluster, node_id: int, stream: str, epoch: int,
                     version: int = 12) -> tuple[int, int, list[tuple[int, bytes | None]]]:
    """(error code, high watermark, records) of a Fetch from offset 0 naming `epoch` as the
    client's current leader epoch (Fetch v9+)."""
    partition = FetchRequest.FetchPartition(partition=0, current_leader_epoch=epoch, fetch_offset=0,
                                            partition_max_bytes=1 << 20)
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, rack_id="",
                           topics=[FetchRequest.FetchTopic(topic=stream, partitions=[partition])])
    [part] = raw_request(node_address(cluster, node_id), request, version).responses[0].partitions
    return int(part.error_code), int(part.high_watermark), record_values(part.records)


def latest_with_epoch(cluster: DevCluster, node_id: int, stream: str, epoch: int,
                      version: int = 4) -> tuple[int, int, int]:
    """(error code, offset, leader epoch) of a ListOffsets for the latest offset naming `epoch`
    as the client's current leader epoch (ListOffsets v4+)."""
    partition = ListOffsetsRequest.ListOffsetsPartition(partition_index=0, current_leader_epoch=epoch, timestamp=-1)
    request = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(name=stream,
                                                                                            partitions=[partition])])
    [part] = raw_request(node_address(cluster, node_id), request, version).topics[0].partitions
    return int(part.error_code), int(part.offset), int(part.leader_epoch)


def test_fetch_and_list_offsets_fence_an_older_leader_epoch(cluster: DevCluster) -> None:
    """KIP-320, as Kafka's Partition.checkCurrentLeaderEpoch: a Fetch or ListOffsets naming an
    older leader epoch than the replica's is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH,
    at the leader and at a follower (before its leader check); -1 is not checked. After leadership
    moves, the new leader fences the old leader's epoch."""
    stream = "fenced"
    assert create_topic_raw(node_address(cluster, 1), stream, 3)[0] == 0
    view = wait_for_full_isr(cluster, stream, timeout=60)
    old, epoch = leader_and_epoch(cluster, stream)
    for value in (b"v0", b"v1"):
        answer = raw_request(node_address(cluster, old), produce_request(stream, one_record_batch(value)))
        assert answer.responses[0].partition_responses[0].error_code == 0
    stored = [(0, b"v0"), (1, b"v1")]
    fenced, unknown = ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH
    for version in (9, 12):
        assert fetch_with_epoch(cluster, old, stream, epoch, version) == (0, 2, stored)
        assert fetch_with_epoch(cluster, old, stream, -1, version) == (0, 2, stored)
        assert fetch_with_epoch(cluster, old, stream, epoch - 1, version) == (fenced, -1, [])
        assert fetch_with_epoch(cluster, old, stream, epoch + 1, version) == (unknown, -1, [])
    for version in (4, 9):
        assert latest_with_epoch(cluster, old, stream, epoch, version) == (0, 2, epoch)
        assert latest_with_epoch(cluster, old, stream, -1, version) == (0, 2, epoch)
        assert latest_with_epoch(cluster, old, stream, epoch - 1, version) == (fenced, -1, -1)
        assert latest_with_epoch(cluster, old, stream, epoch + 1, version) == (unknown, -1, -1)
    # A follower (Fetch v11+ reads there, KIP-392) checks the epoch before anything else.
    follower = next(n for n in view.replicas if n != old)
    wait_until(lambda: fetch_with_epoch(cluster, follower, stream, epoch, 11) == (0, 2, stored), 10,
               f"node {follower} serving both records at epoch {epoch}")
    assert fetch_with_epoch(cluster, follower, stream, epoch - 1, 11) == (fenced, -1, [])
    assert fetch_with_epoch(cluster, follower, stream, epoch + 1, 11) == (unknown, -1, [])
    assert latest_with_epoch(cluster, follower, stream, epoch) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1)
    assert latest_with_epoch(cluster, follower, stream, epoch - 1) == (fenced, -1, -1)

    with VdlClient(ClientSettings.from_bootstrap(cluster.bootstrap_servers, deadline_ms=60_000)) as admin:
        reassign_stream(admin, stream, [follower, *[n for n in view.replicas if n != follower]])
        wait_until(lambda: elect_preferred(admin, [stream])[stream][0] in ("elected", "already")
                   and leader_and_epoch(cluster, stream)[0] == follower, 60, f"node {follower} leading {stream}")
    new, new_epoch = leader_and_epoch(cluster, stream)
    assert new == follower and new_epoch > epoch
    assert fetch_with_epoch(cluster, new, stream, epoch) == (fenced, -1, [])
    assert latest_with_epoch(cluster, new, stream, epoch) == (fenced, -1, -1)
    assert fetch_with_epoch(cluster, new, stream, new_epoch) == (0, 2, stored)
    assert latest_with_epoch(cluster, new, stream, new_epoch) == (0, 2, new_epoch)


def test_metadata_at_a_node_without_a_replica_gives_the_leaders_epoch(cluster: DevCluster) -> None:
    """KIP-320: clients fence their Fetch with the leader epoch Metadata gives, so a node with no
    replica of the stream answers the epoch the leader itself reported, never -1."""
    stream = "epoch-elsewhere"
    assert create_topic_raw(node_address(cluster, 1), stream, 1)[0] == 0
    leader, epoch = leader_and_epoch(cluster, stream)
    assert epoch > 0
    assert raw_request(node_address(cluster, leader), produce_request(stream, one_record_batch(b"v0"))
                       ).responses[0].partition_responses[0].error_code == 0

    def answered(node_id: int) -> tuple[int, int]:
        [part] = metadata_raw(node_address(cluster, node_id), [stream]).topics[0].partitions
        return int(part.leader_id), int(part.leader_epoch)

    def answers_the_leader(node_id: int) -> bool:
        return answered(node_id) == (leader, epoch)

    for outsider in (n for n in cluster.node_ids() if n != leader):
        wait_until(partial(answers_the_leader, outsider), 10,
                   f"node {outsider} answering leader {leader} at epoch {epoch}")
        # The epoch fences nothing at the leader: the client reads with it.
        assert fetch_with_epoch(cluster, leader, stream, answered(outsider)[1]) == (0, 1, [(0, b"v0")])
