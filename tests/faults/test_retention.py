"""Process test: a follower that was down while the leader's retention deleted the
segments it still needed catches up by starting at the leader's log start (the snapshot of a
log is its start offset plus the segments after it).
"""

from __future__ import annotations

import pytest

from tests.faults.harness import (
    EARLIEST,
    ProbeLog,
    check_acknowledged,
    create_stream,
    high_watermark,
    list_offset_raw,
    node_address,
    produce_batches,
    read_all,
    read_log_image,
    wait_for_full_isr,
    wait_logs_converged,
    wait_until,
)
from vdl_dev.dev_cluster import DevCluster

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
