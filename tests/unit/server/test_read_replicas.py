"""The leader's choice of a read replica for a consumer's rack (KIP-392), as Kafka's
RackAwareReplicaSelector makes it."""

from __future__ import annotations

from vdl_broker.server.read_replicas import NO_PREFERENCE, preferred_read_replica

RACKS = {1: "a", 2: "b", 3: "b", 4: "c", 5: None}


def test_no_rack_or_the_leaders_rack_or_no_replica_there_means_the_leader() -> None:
    followers = {2: 100, 3: 100, 4: 100}
    assert preferred_read_replica("", 50, 1, RACKS, followers) == NO_PREFERENCE
    assert preferred_read_replica("a", 50, 1, RACKS, followers) == NO_PREFERENCE
    assert preferred_read_replica("z", 50, 1, RACKS, followers) == NO_PREFERENCE
    # A follower of the same rack that is out of sync is not among `followers`.
    assert preferred_read_replica("c", 50, 1, RACKS, {2: 100}) == NO_PREFERENCE


def test_the_most_caught_up_follower_of_the_rack_that_holds_the_offset() -> None:
    assert preferred_read_replica("b", 50, 1, RACKS, {2: 90, 3: 100, 4: 100}) == 3
    assert preferred_read_replica("b", 50, 1, RACKS, {2: 100, 3: 100}) == 2  # ties: the lowest id
    assert preferred_read_replica("c", 50, 1, RACKS, {2: 100, 4: 100}) == 4
    # No follower of the rack holds the offset yet: the leader serves it.
    assert preferred_read_replica("b", 101, 1, RACKS, {2: 100, 3: 100}) == NO_PREFERENCE
    assert preferred_read_replica("b", 100, 1, RACKS, {2: 99, 3: 100}) == 3
