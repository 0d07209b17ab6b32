"""Process tests: bytes damaged between two nodes are neither stored nor applied by the receiver.

TCP's 16-bit checksum lets some damaged segments through (and a faulty NIC or memory damages
bytes after it checked them). A follower writes what it is sent under an entry checksum it
computes itself: stored damaged, a copy passes every later check. A record batch so damaged
would reach a consumer reading that replica (KIP-392), or every consumer once it leads; a
metadata command so damaged would give that node a cluster of its own (a stream under another
name, an offset other than the one committed). Nodes of a cluster at the level that has them
send each entry with the checksum its leader's log stored it under (vdl_broker/raft/wire.py);
at level 4, frames that end with their CRC32C, whose record batches a follower checks too (the
first test runs at both): a frame that fails a check is refused with its connection, the sender
sends again, and the receiver counts the refusal in vdl_raft_frames_refused_total.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.chaos.world import start_world
from tests.faults.harness import wait_for_full_isr
from tests.support.cluster import wait_until
from tests.support.kafka import (
    CLIENT_API_VERSIONS,
    create_topic_raw,
    fetch_partition,
    metadata_raw,
    one_record_batch,
    produce_raw,
    raw_request,
    record_values,
)
from tests.support.metrics import scrape
from vdl_broker.cluster import features

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize("level", [features.SUPPORTED_LEVEL, features.FRAME_CHECKSUM_LEVEL],
                         ids=["entry-checksums", "level-4-checksummed-frames"])
def test_a_record_damaged_on_its_way_to_a_follower_is_sent_again_not_stored(tmp_path: Path, level: int) -> None:
    stream = "damaged-in-transit"
    env = None
    if level < features.SUPPORTED_LEVEL:  # a cluster formed at that level (not upgraded since)
        (tmp_path / "release").mkdir()
        (tmp_path / "release" / "sitecustomize.py").write_text(
            f"import vdl_broker.cluster.features as features\nfeatures.SUPPORTED_LEVEL = {level}\n")
        env = {"PYTHONPATH": str(tmp_path / "release")}
    world = start_world(tmp_path / "world", 3, seed=11, streams=[stream], env=env)
    try:
        finalized = raw_request(world.address(1), CLIENT_API_VERSIONS, 3).finalized_features
        assert [(f.name, f.max_version_level) for f in finalized][0] == (features.FEATURE_NAME, level)
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


def test_a_metadata_command_damaged_on_its_way_to_a_follower_is_sent_again_not_applied(tmp_path: Path) -> None:
    world = start_world(tmp_path, 3, seed=13, streams=[])
    try:
        controller = wait_until(world.metadata_leader, 30, "a metadata leader")
        follower = min(n for n in world.node_ids if n != controller)
        name = "a-stream-named-in-a-command-damaged-on-one-link"
        world.links.flip(controller, follower, name.encode())
        assert create_topic_raw(world.address(controller), name, 3) == (0, None)
        wait_until(lambda: world.links.flipped(controller, follower) == 1, 30, f"the command passing to node {follower}")

        def streams(node_id: int) -> list[str]:
            return sorted(topic.name for topic in metadata_raw(world.address(node_id), None).topics)

        # Taken as damaged, the follower would list the stream under a name one bit away, for good.
        wait_until(lambda: all(streams(n) == [name] for n in world.node_ids), 30,
                   f"every node listing {name} (node {follower}: {streams(follower)})")
        assert scrape(world.cluster, follower).value("vdl_raft_frames_refused_total", peer=str(controller)) == 1
    finally:
        world.close()
