"""Consumer groups in the metadata state machine: commits, generations, deletion, retention,
and replay giving the same state on every node."""

from __future__ import annotations

from vdl_broker.cluster import features
from vdl_broker.cluster.features import finalize_features_command
from vdl_broker.cluster.groups import (
    CommittedOffset,
    StoredMember,
    commit_offsets_command,
    consumer_group_empty_command,
    delete_group_command,
    delete_offsets_command,
    expire_offsets_command,
    group_generation_command,
)
from vdl_broker.cluster.metadata import (
    ApplyResult,
    ClusterState,
    Outcome,
    create_stream_command,
    decode_command,
    delete_stream_command,
    encode_command,
    register_node_command,
)

MINUTE = 60_000
MEMBER = StoredMember("m-1", None, "client", "/10.0.0.1", 6000, 9000, (("range", b"\x00\x01sub"),), b"assigned")


def cluster(*streams: str) -> tuple[ClusterState, list[bytes]]:
    state, log = ClusterState(), []
    for command in [register_node_command(1, "h:1", "h:2"), *(create_stream_command(s) for s in streams)]:
        apply(state, log, command)
    return state, log


def apply(state: ClusterState, log: list[bytes], command: dict) -> ApplyResult:
    log.append(encode_command(command))
    [result] = state.apply_entry(len(log), [decode_command(log[-1])])
    return result


def test_commits_are_stored_per_stream_and_replace_older_ones() -> None:
    state, log = cluster("a", "b")
    assert apply(state, log, commit_offsets_command("g", 1000, {"a": (5, 2, "meta"), "b": (7, -1, None)})).ok
    apply(state, log, commit_offsets_command("g", 2000, {"a": (9, 3, "")}))
    assert state.groups.committed("g") == {"a": CommittedOffset(9, 3, "", 2000), "b": CommittedOffset(7, -1, None, 1000)}
    assert state.groups.committed("other") == {}


def test_commit_to_a_stream_that_no_longer_exists_is_dropped() -> None:
    state, log = cluster("a")
    apply(state, log, commit_offsets_command("g", 1, {"a": (1, -1, None), "gone": (3, -1, None)}))
    assert set(state.groups.committed("g")) == {"a"}
    apply(state, log, delete_stream_command("a"))
    assert state.groups.committed("g") == {} and "g" not in state.groups.group_ids()


def test_generation_round_trips_and_an_older_one_never_replaces_a_newer() -> None:
    state, log = cluster()
    apply(state, log, group_generation_command("g", 10, 4, "consumer", "range", "m-1", [MEMBER]))
    stored = state.groups.groups["g"]
    assert (stored.generation_id, stored.protocol_name, stored.leader_id, stored.members) == (4, "range", "m-1", (MEMBER,))
    apply(state, log, group_generation_command("g", 11, 3, "consumer", "range", "old", []))
    assert state.groups.groups["g"].generation_id == 4


def test_delete_group_and_delete_offsets() -> None:
    state, log = cluster("a", "b")
    apply(state, log, commit_offsets_command("g", 1, {"a": (1, -1, None), "b": (2, -1, None)}))
    apply(state, log, delete_offsets_command("g", ["a"]))
    assert set(state.groups.committed("g")) == {"b"}
    apply(state, log, group_generation_command("g", 1, 2, "consumer", None, None, []))
    apply(state, log, delete_group_command("g"))
    assert "g" not in state.groups.group_ids()


def test_offsets_of_an_empty_group_expire_after_retention_counted_from_the_later_of_commit_and_emptying() -> None:
    state, log = cluster("a")
    apply(state, log, commit_offsets_command("standalone", 0, {"a": (1, -1, None)}))
    apply(state, log, commit_offsets_command("emptied", 0, {"a": (2, -1, None)}))
    apply(state, log, group_generation_command("emptied", 5 * MINUTE, 3, "consumer", None, None, []))
    apply(state, log, commit_offsets_command("members", 0, {"a": (3, -1, None)}))
    apply(state, log, group_generation_command("members", 0, 1, "consumer", "range", "m-1", [MEMBER]))
    apply(state, log, commit_offsets_command("live", 0, {"a": (4, -1, None)}))
    assert state.groups.expired_groups(10 * MINUTE, 10 * MINUTE, live={"live"}) == ["standalone"]
    assert state.groups.expired_groups(15 * MINUTE, 10 * MINUTE, live={"live"}) == ["emptied", "standalone"]
    apply(state, log, expire_offsets_command(10 * MINUTE, 10 * MINUTE, ["live"]))
    assert state.groups.group_ids() == {"emptied", "members", "live"}
    apply(state, log, expire_offsets_command(15 * MINUTE, 10 * MINUTE, ["live"]))
    assert state.groups.group_ids() == {"members", "live"}


def test_replaying_the_log_gives_the_same_groups() -> None:
    state, log = cluster("a", "b")
    apply(state, log, commit_offsets_command("g", 1, {"a": (1, 0, "x")}))
    apply(state, log, group_generation_command("g", 2, 1, "consumer", "range", "m-1", [MEMBER]))
    apply(state, log, commit_offsets_command("h", 3, {"b": (8, -1, None)}))
    replica = ClusterState()
    for index, payload in enumerate(log, start=1):
        replica.apply_entry(index, [decode_command(payload)])
    assert replica.groups == state.groups


def test_malformed_group_commands_are_refused_alike_everywhere() -> None:
    state, log = cluster("a")
    for bad in [{"op": "commit_offsets", "group": "", "ts": 1, "offsets": {}},
                {"op": "commit_offsets", "group": "g", "ts": "x", "offsets": {}},
                {"op": "group_generation", "group": "g"},
                {"op": "delete_offsets", "group": "g", "streams": "a"},
                {"op": "expire_offsets", "now": None, "retention_ms": 1}]:
        assert apply(state, log, bad).outcome is Outcome.INVALID_COMMAND, bad
    assert state.groups.group_ids() == set()


def test_a_kip848_group_whose_members_all_left_stays_one_while_it_has_offsets() -> None:
    """Kafka keeps an empty consumer group until its offsets are gone; a classic group's generation
    takes its id over."""
    state, log = cluster("a", "b")
    apply(state, log, finalize_features_command(features.EMPTY_CONSUMER_GROUPS_LEVEL))
    empty = {"group_epoch": 4, "assignment_epoch": 4, "assignor": "uniform", "subscribed_streams": [], "target": {},
             "members": []}
    apply(state, log, group_generation_command("g", 0, 2, "consumer", None, None, []))  # an empty classic group
    for group in ("g", "expiring", "taken"):
        apply(state, log, commit_offsets_command(group, 0, {"a": (1, -1, None), "b": (2, -1, None)}))
    for group in ("g", "expiring", "taken", "uncommitted"):
        assert apply(state, log, consumer_group_empty_command(group, empty)).outcome is Outcome.OK
    groups = state.groups
    assert {g: groups.empty_consumer_group(g) for g in ("g", "expiring", "taken", "uncommitted")} == {
        "g": empty, "expiring": empty, "taken": empty, "uncommitted": None}
    assert "g" not in groups.groups  # it was an empty classic group's id: a KIP-848 group's now
    assert groups.group_ids() == {"g", "expiring", "taken"}
    apply(state, log, group_generation_command("taken", MINUTE, 1, "consumer", "range", "m-1", [MEMBER]))
    assert groups.empty_consumer_group("taken") is None
    # Its offsets gone, deleted or expired (counted from their commit), the group goes at the next
    # retention pass, as Kafka's cleanup does: until then kafka-consumer-groups still finds it
    # (--describe shows it Empty, --delete deletes it).
    apply(state, log, delete_offsets_command("g", ["a"]))
    assert groups.empty_consumer_group("g") == empty
    apply(state, log, delete_offsets_command("g", ["b"]))
    assert (groups.empty_consumer_group("g"), "g" in groups.group_ids(), groups.committed("g")) == (empty, True, {})
    assert groups.expired_groups(MINUTE, 10 * MINUTE, live=set()) == ["g"]  # due at once: nothing to wait for
    assert groups.expired_groups(MINUTE, 10 * MINUTE, live={"g"}) == []  # a member came back
    assert groups.expired_groups(10 * MINUTE, 10 * MINUTE, live=set()) == ["expiring", "g"]
    apply(state, log, expire_offsets_command(10 * MINUTE, 10 * MINUTE, []))
    assert (groups.group_ids(), groups.consumer_groups) == ({"taken"}, {})
    refused = apply(state, log, consumer_group_empty_command("x", {**empty, "members": [{"member_id": "m"}]}))
    assert (refused.outcome, refused.message) == (
        Outcome.INVALID_COMMAND, "consumer_group_empty: state must be an object without members")
