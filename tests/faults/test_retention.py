"""Process test: a follower that was down while the leader's retention deleted the
segments it still needed catches up by starting at the leader's log start (the snapshot of a
log is its start offset plus the segments after it).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.faults.harness import (
    EARLIEST,
    ProbeLog,
    check_acknowledged,
    create_stream,
    high_watermark,
    iter_batches,
    list_offset_raw,
    m,
    node_address,
    produce_batches,
    raw_request,
    read_all,
    read_log_image,
    read_records,
    wait_for_full_isr,
    wait_logs_converged,
    wait_until,
)
from vdl_dev.dev_cluster import DevCluster
from vdl_wire.errors import ErrorCode

pytestmark = pytest.mark.timeout(120)

# Tiny segments and a small byte budget: a few hundred KB of writes delete most segments; the
# retention pass runs every 200 ms instead of every minute.
CLUSTER_SETTINGS = {"segment_bytes": 8192, "retention_bytes": 32768, "retention_check_ms": 200}


def test_follower_behind_retention_restarts_from_leader_log_start(cluster: DevCluster, probes: ProbeLog) -> None:
    stream = "retained"
    leader = create_stream(cluster, stream, via=1, probes=probes)
    wait_for_full_isr(cluster, stream)
    acked = produce_batches(cluster, stream, 20, "early", leader)
    follower = next(i for i in cluster.node_ids() if i != leader)
    cluster.kill(follower)
    follower_end = read_log_image(cluster, follower, stream).log_end_offset
    acked += produce_batches(cluster, stream, 300, "missed", leader)  # ~600 KB, 20x retention_bytes

    def leader_start() -> int:
        code, offset = list_offset_raw(node_address(cluster, leader), stream, EARLIEST)
        assert code == 0
        return offset if offset > follower_end else 0
    start = wait_until(leader_start, 20, f"the leader's log start passing the follower's end {follower_end}")

    cluster.restart(follower, timeout_s=60)
    leader, _ = high_watermark(cluster, stream)
    acked += produce_batches(cluster, stream, 10, "after", leader)
    wait_for_full_isr(cluster, stream)
    images = wait_logs_converged(cluster, stream)
    leader, hw = high_watermark(cluster, stream)
    caught_up = images[follower]
    assert caught_up.log_start_offset >= start > follower_end
    assert caught_up.log_end_offset >= hw
    code, leader_start_now = list_offset_raw(node_address(cluster, leader), stream, EARLIEST)
    assert code == 0
    fetched = {o: v for o, (_, v) in read_all(node_address(cluster, leader), stream, leader_start_now, hw).items()}
    on_disk = {o: v for o, v in caught_up.records().items() if leader_start_now <= o < hw}
    assert {o: v for o, v in fetched.items() if o >= caught_up.log_start_offset} == on_disk
    retained = [a for a in acked if a[1] >= max(leader_start_now, caught_up.log_start_offset)]
    assert retained and check_acknowledged(retained, fetched) == []


@dataclass(frozen=True)
class CommittedView:
    """What a read_committed consumer fetching from `start` at one replica sees."""

    start: int
    last_stable_offset: int
    kept: dict[int, bytes]  # offset -> value of the records it keeps

    def values(self, since: int = 0) -> list[bytes]:
        return [value for offset, value in self.kept.items() if offset >= since]


def committed_view(address: str, stream: str, start: int | None = None) -> CommittedView | None:
    """The view of a Fetch v11 with isolation_level 1 at the replica at `address` (any replica
    serves it) from `start`, by default its log start; None when retention has just moved the log
    start past `start` (OFFSET_OUT_OF_RANGE: retention keeps running while the test reads)."""
    if start is None:
        code, start = list_offset_raw(address, stream, EARLIEST)
        assert code == 0, ErrorCode(code).name
    partition = m.FetchRequest.FetchPartition(partition=0, fetch_offset=start, partition_max_bytes=8 << 20)
    request = m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=8 << 20, isolation_level=1,
                             topics=[m.FetchRequest.FetchTopic(topic=stream, partitions=[partition])])
    answer = raw_request(address, request, 11).responses[0].partitions[0]
    if answer.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
        return None
    assert answer.error_code == 0, ErrorCode(answer.error_code).name
    # The consumer's rule (KIP-98): a producer's records from an aborted transaction's first offset
    # up to its abort marker are dropped.
    aborted = {a.producer_id: a.first_offset for a in answer.aborted_transactions}
    kept: dict[int, bytes] = {}
    for header, batch in iter_batches(memoryview(bytes(answer.records or b""))):
        dropped = header.producer_id in aborted and header.base_offset >= aborted[header.producer_id]
        if header.is_control:
            if dropped:  # the abort marker ends what is dropped
                del aborted[header.producer_id]
            continue
        if dropped:
            continue
        kept.update((r.offset, bytes(r.value)) for r in read_records(batch) if r.value is not None)
    return CommittedView(start, int(answer.last_stable_offset), kept)


def same_views(leader: str, follower: str, stream: str) -> CommittedView | None:
    """The leader's view when the follower's, fetched from the same offset (the later of the two
    log starts), is the same; else None."""
    start = max(list_offset_raw(address, stream, EARLIEST)[1] for address in (leader, follower))
    views = [committed_view(address, stream, start) for address in (leader, follower)]
    return views[0] if views[0] is not None and views[0] == views[1] else None


def test_a_follower_reset_to_the_leaders_log_start_serves_read_committed_as_the_leader(
        cluster: DevCluster, probes: ProbeLog) -> None:
    """A follower that missed what retention deleted starts at the leader's log start with a
    fresh transaction index: an aborted transaction that began below that start and one open
    there must look the same from it as from the leader (its last stable offset, what a
    read_committed consumer keeps), and after the open one commits."""
    import confluent_kafka

    stream = "retained-txn"
    leader = create_stream(cluster, stream, via=1, probes=probes)
    wait_for_full_isr(cluster, stream)
    follower = next(i for i in cluster.node_ids() if i != leader)
    cluster.kill(follower)
    producers = {name: confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 1,
                                                  "transactional.id": f"retained-{name}"}) for name in ("ab", "op")}
    for producer in producers.values():
        producer.init_transactions(30)
    producers["ab"].begin_transaction()
    producers["ab"].produce(stream, b"aborted-early")
    producers["ab"].flush(30)
    produce_batches(cluster, stream, 300, "filler", leader)  # ~600 KB: retention deletes most of it
    producers["ab"].produce(stream, b"aborted-late")
    producers["ab"].flush(30)
    producers["ab"].abort_transaction(30)
    producers["op"].begin_transaction()
    producers["op"].produce(stream, b"open")
    producers["op"].flush(30)
    produce_batches(cluster, stream, 5, "after", leader)
    leader_address = node_address(cluster, leader)
    wait_until(lambda: list_offset_raw(leader_address, stream, EARLIEST)[1], 20,
               "the leader's retention passing the aborted transaction's first offset")
    cluster.restart(follower, timeout_s=60)
    wait_for_full_isr(cluster, stream)
    follower_address = node_address(cluster, follower)
    # It was reset to the leader's start: waited for, not assumed the moment the leader counts it in sync.
    wait_until(lambda: read_log_image(cluster, follower, stream).log_start_offset > 0, 30,
               "the follower's log starting at the leader's log start")
    before = wait_until(lambda: committed_view(leader_address, stream), 20, "a read_committed fetch at the leader")
    values = before.values()
    assert b"open" not in values and b"after-00000-00".ljust(100, b".") not in values
    assert not any(v.startswith(b"aborted") for v in values)
    assert values[-1].startswith(b"filler-00299")  # the records after the open transaction wait
    wait_until(lambda: same_views(leader_address, follower_address, stream), 20,
               "the follower's read_committed view matching the leader's")
    producers["op"].commit_transaction(30)

    def past_the_commit() -> CommittedView | None:
        # EndTxn answers once the commit is decided, as Kafka's; its marker follows.
        view = committed_view(leader_address, stream, before.start) or committed_view(leader_address, stream)
        return view if view is not None and view.last_stable_offset > before.last_stable_offset else None

    after = wait_until(past_the_commit, 20, "a read_committed fetch at the leader past the commit's marker")
    kept_before = before.values(since=after.start)
    assert after.values()[:len(kept_before) + 1] == [*kept_before, b"open"]
    assert len(after.values()) == len(kept_before) + 101
    assert after.last_stable_offset > before.last_stable_offset
    wait_until(lambda: (view := same_views(leader_address, follower_address, stream)) is not None
               and view.last_stable_offset == after.last_stable_offset, 20,
               "the follower seeing the commit as the leader does")
