"""Where a node cut off from the cluster sends clients (server/cut_off.py)."""

from __future__ import annotations

from vdl_broker.raft.liveness import successor
from vdl_broker.server.cut_off import leader_elsewhere


def never(_: int) -> bool:
    return False


def test_a_cut_off_leader_names_the_replica_the_others_elect_first() -> None:
    # The others see node 1 go silent; successor() picks which of them campaigns at once.
    for stream in ("a", "b", "events", "orders"):
        expected = successor(stream, (1, 2, 3), 1, [2, 3])
        assert expected in (2, 3)
        assert leader_elsewhere(stream, (1, 2, 3), 1, 1, never) == expected
        assert leader_elsewhere(stream, (1, 2, 3), 1, 0, never) == expected  # no leader known either


def test_a_cut_off_follower_names_the_leader_it_knew_on_the_far_side() -> None:
    assert leader_elsewhere("s", (1, 2, 3), 3, 2, never) == 2
    assert leader_elsewhere("s", (1, 2, 3, 4, 5), 5, 1, lambda peer: peer == 4) == 1


def test_never_itself_nor_a_node_cut_off_with_it() -> None:
    # Nodes 4 and 5 hear each other only: 4 led, but it is on this side and will step down.
    def near(peer: int) -> bool:
        return peer == 4
    for stream in ("a", "b", "c", "d"):
        named = leader_elsewhere(stream, (1, 2, 3, 4, 5), 5, 4, near)
        assert named == successor(stream, (1, 2, 3, 4, 5), 5, [1, 2, 3]) and named in (1, 2, 3)
    # Every other voter heard (a short blip): still another replica, never "no leader".
    assert leader_elsewhere("s", (1, 2, 3), 1, 1, lambda _: True) in (2, 3)


def test_a_stream_whose_only_replica_is_here_has_no_leader_elsewhere() -> None:
    assert leader_elsewhere("s", (1,), 1, 1, never) == 0
