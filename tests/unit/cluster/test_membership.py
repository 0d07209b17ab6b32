"""Node states and reassignments in the metadata state machine (cluster/membership.py)."""

from __future__ import annotations

from vdl_broker.cluster.membership import (
    DECOMMISSIONING,
    JOINING,
    REMOVING,
    complete_reassignment_command,
    join_node_command,
    reassign_stream_command,
    remove_node_command,
    set_node_state_command,
)
from vdl_broker.cluster.metadata import (
    ClusterState,
    Outcome,
    create_stream_command,
    decode_command,
    delete_stream_command,
    encode_command,
    register_node_command,
)


def cluster(n: int) -> tuple[ClusterState, list[bytes]]:
    state = ClusterState()
    log: list[bytes] = []
    for i in range(1, n + 1):
        apply(state, log, register_node_command(i, f"h:{9090 + i}", f"h:{19090 + i}"))
    return state, log


def apply(state: ClusterState, log: list[bytes], command: dict):
    log.append(encode_command(command))
    [result] = state.apply_entry(len(log), [decode_command(log[-1])])
    return result


def replay(log: list[bytes]) -> ClusterState:
    state = ClusterState()
    for index, payload in enumerate(log, start=1):
        state.apply_entry(index, [decode_command(payload)])
    return state


def test_a_joining_node_is_registered_but_gets_no_replicas_until_active() -> None:
    state, log = cluster(3)
    result = apply(state, log, join_node_command(4, "h:9094", "h:19094", ("SSL://h:9095",), "rack-b"))
    assert result.ok and result.op == "join_node" and result.node is not None
    assert (result.node.listeners, result.node.rack) == (("SSL://h:9095",), "rack-b")
    assert state.membership.state_of(4) == JOINING and 4 in state.nodes
    for k in range(6):
        assert apply(state, log, create_stream_command(f"s{k}", 3)).ok
    assert all(4 not in s.replicas for s in state.streams.values())
    assert apply(state, log, set_node_state_command(4, "active")).ok
    assert apply(state, log, create_stream_command("later", 3)).stream.replicas[0] == 4  # leads nothing yet
    # A second join of a known node changes nothing.
    assert apply(state, log, join_node_command(4, "h:9094", "h:19094")).ok
    assert state.membership.state_of(4) == "active"


def test_reassignment_hosts_the_union_until_completed_then_the_target() -> None:
    state, log = cluster(5)
    stream = apply(state, log, create_stream_command("events", 3)).stream
    original = stream.replicas
    target = [n for n in range(1, 6) if n not in original][:1] + list(original[1:])
    assert apply(state, log, reassign_stream_command("events", stream.created_index, target)).ok
    moving = state.membership.reassignments["events"]
    assert moving.adding == (target[0],) and moving.removing == (original[0],)
    assert {s.name for s in state.streams_on(target[0])} == {"events"}
    assert {s.name for s in state.streams_on(original[0])} == {"events"}
    assert state.streams["events"].replicas == original  # unchanged until completed
    # A completion for another target (stale) is refused; the right one completes.
    stale = apply(state, log, complete_reassignment_command("events", stream.created_index, list(original)))
    assert stale.outcome is Outcome.INVALID_COMMAND
    assert apply(state, log, complete_reassignment_command("events", stream.created_index, target)).ok
    assert state.streams["events"].replicas == tuple(target) and not state.membership.reassignments
    assert state.streams_on(original[0]) == []
    assert replay(log).streams == state.streams  # deterministic


def test_cancel_goes_back_to_the_original_and_keeps_every_involved_node_until_done() -> None:
    state, log = cluster(5)
    stream = apply(state, log, create_stream_command("events", 3)).stream
    created = stream.created_index
    assert apply(state, log, reassign_stream_command("events", created, [1, 2, 4])).ok
    assert apply(state, log, reassign_stream_command("events", created, [1, 2, 5])).ok
    assert apply(state, log, reassign_stream_command("events", created, None)).ok
    moving = state.membership.reassignments["events"]
    assert moving.target == stream.replicas and set(moving.involved) >= {4, 5, *stream.replicas}
    assert apply(state, log, reassign_stream_command("events", created, None)).ok  # still in progress
    assert apply(state, log, complete_reassignment_command("events", created, list(stream.replicas))).ok
    assert apply(state, log, reassign_stream_command("events", created, None)).outcome is Outcome.INVALID_COMMAND


def test_bad_reassignments_are_refused_alike_everywhere() -> None:
    state, log = cluster(3)
    stream = apply(state, log, create_stream_command("events", 3)).stream
    created = stream.created_index
    for target in ([], [1, 1, 2], [1, 2, 9], ["1"], [0, 1], [True]):
        result = apply(state, log, reassign_stream_command("events", created, target))
        assert result.outcome is Outcome.INVALID_COMMAND, target
    assert apply(state, log, reassign_stream_command("events", created + 1, [1])).outcome is Outcome.INVALID_COMMAND
    assert apply(state, log, reassign_stream_command("nope", created, [1])).outcome is Outcome.INVALID_COMMAND
    assert apply(state, log, reassign_stream_command("events", created, list(stream.replicas))).ok
    assert not state.membership.reassignments  # already there
    assert apply(state, log, reassign_stream_command("events", created, [1])).ok
    assert apply(state, log, delete_stream_command("events")).ok
    assert not state.membership.reassignments


def test_removing_a_node_needs_it_free_of_replicas_and_its_id_never_returns() -> None:
    state, log = cluster(4)
    stream = apply(state, log, create_stream_command("events", 3)).stream
    holder = stream.replicas[0]
    assert apply(state, log, set_node_state_command(holder, DECOMMISSIONING)).ok
    assert apply(state, log, remove_node_command(holder)).outcome is Outcome.INVALID_COMMAND
    free = next(n for n in range(1, 5) if n not in stream.replicas)
    target = [free if n == holder else n for n in stream.replicas]
    apply(state, log, reassign_stream_command("events", stream.created_index, target))
    assert apply(state, log, remove_node_command(holder)).outcome is Outcome.INVALID_COMMAND  # still involved
    apply(state, log, complete_reassignment_command("events", stream.created_index, target))
    assert apply(state, log, remove_node_command(holder)).ok
    assert holder not in state.nodes and holder in state.membership.removed
    for command in (register_node_command(holder, "h:1", "h:2"), join_node_command(holder, "h:1", "h:2"),
                    set_node_state_command(holder, REMOVING)):
        assert apply(state, log, command).outcome is Outcome.INVALID_COMMAND
    assert replay(log).membership == state.membership
