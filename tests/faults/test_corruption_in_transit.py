"""Process test: a batch damaged between the leader and a follower is not stored by the follower.

TCP's 16-bit checksum lets some damaged segments through (and a faulty NIC or memory damages
bytes after it checked them). The Raft wire carries a DATA entry's record batch as it is, and
the follower writes it under an entry checksum it computes itself: stored damaged, the copy
would pass every later check, and a consumer reading that replica (KIP-392), or every consumer
once it leads, would get a record nobody wrote. The follower checks each batch's own CRC32C
before taking it (vdl_broker/raft/transport.py), refuses the frame with its connection, and the
leader sends the entries again (and the follower counts the refusal in
vdl_raft_frames_refused_total).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.chaos.world import start_world
from tests.faults.harness import wait_for_full_isr
from tests.support.cluster import wait_until
from tests.support.kafka import fetch_partition, one_record_batch, produce_raw, record_values
from tests.support.metrics import scrape

pytestmark = pytest.mark.timeout(180)


def test_a_record_damaged_on_its_way_to_a_follower_is_sent_again_not_stored(tmp_path: Path) -> None:
    stream = "damaged-in-transit"
    world = start_world(tmp_path, 3, seed=11, streams=[stream])
    try:
        leader = wait_for_full_isr(world.cluster, stream, timeout=60).leader
        follower = min(n for n in world.node_ids if n != leader)
        value = b"the value a bit of which is flipped on one link"
        world.links.flip(leader, follower, value)
        assert produce_raw(world.address(leader), stream, one_record_batch(value))[:2] == (0, 0)
        # Acknowledged once the other follower has it: this one may get it later.
        wait_until(lambda: world.links.flipped(leader, follower) == 1, 30, f"the record passing to node {follower}")
        after = b"written after the damaged copy was refused"
        assert produce_raw(world.address(leader), stream, one_record_batch(after))[:2] == (0, 1)
        # Fetch v11 (KIP-392): the follower answers from its own log, below its high watermark.
        wait_until(lambda: fetch_partition(world.address(follower), stream, 0).high_watermark == 2, 30,
                   f"node {follower} holding both records and knowing them committed")
        on_leader = bytes(fetch_partition(world.address(leader), stream, 0).records)
        on_follower = bytes(fetch_partition(world.address(follower), stream, 0).records)
        assert record_values(on_follower) == [(0, value), (1, after)]
        assert on_follower == on_leader
        # The follower counted the one frame it refused; the leader refused none.
        assert scrape(world.cluster, follower).value("vdl_raft_frames_refused_total", peer=str(leader)) == 1
        assert scrape(world.cluster, leader).value("vdl_raft_frames_refused_total", peer=str(follower)) == 0
    finally:
        world.close()
