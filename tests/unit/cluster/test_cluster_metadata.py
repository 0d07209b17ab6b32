"""The metadata state machine: commands, deterministic placement, replay, hostile entries."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from vdl_broker.cluster.metadata import (
    METADATA_GROUP,
    ClusterState,
    Outcome,
    create_stream_command,
    decode_commands,
    delete_stream_command,
    encode_command,
    register_node_command,
    validate_stream_name,
)
from vdl_broker.protocol.records.record_batch import RecordBatchBuilder


def state_with(n: int) -> tuple[ClusterState, list[bytes]]:
    state = ClusterState()
    log = [encode_command(register_node_command(i, f"127.0.0.1:{9091 + i}", f"127.0.0.1:{19091 + i}"))
           for i in range(1, n + 1)]
    for index, payload in enumerate(log, start=1):
        assert all(r.ok for r in state.apply_entry(index, payload))
    return state, log


def apply(state: ClusterState, log: list[bytes], command: dict) -> object:
    log.append(encode_command(command))
    [result] = state.apply_entry(len(log), log[-1])
    return result


def test_command_round_trip_through_a_record_batch() -> None:
    command = create_stream_command("events", 3, {"retention.ms": 1000})
    payload = encode_command(command, timestamp_ms=5)
    assert payload[16] == 2  # RecordBatch v2 magic: the StreamLog accepts it as a DATA entry
    assert decode_commands(payload) == [command]


def test_default_replication_factor_and_validation() -> None:
    state, log = state_with(2)
    result = apply(state, log, create_stream_command("two"))
    assert result.ok and len(result.stream.replicas) == 2  # default 3, or all nodes when fewer
    assert apply(state, log, create_stream_command("two")).outcome is Outcome.EXISTS
    assert apply(state, log, create_stream_command("x", 3)).outcome is Outcome.INVALID_REPLICATION_FACTOR
    assert apply(state, log, create_stream_command("x", 2)).outcome is Outcome.INVALID_REPLICATION_FACTOR
    assert apply(state, log, create_stream_command("bad name")).outcome is Outcome.INVALID_NAME
    assert apply(state, log, create_stream_command(METADATA_GROUP)).outcome is Outcome.INVALID_NAME
    assert apply(state, log, {**create_stream_command("c", 1), "config": []}).outcome is Outcome.INVALID_CONFIG
    assert apply(state, log, create_stream_command("one", 1)).ok
    assert apply(state, log, delete_stream_command("nope")).outcome is Outcome.UNKNOWN
    deleted = apply(state, log, delete_stream_command("two"))
    assert deleted.ok and deleted.stream.name == "two" and "two" not in state.streams
    recreated = apply(state, log, create_stream_command("two"))
    assert recreated.ok and recreated.stream.created_index > deleted.stream.created_index
    assert state.result_for(len(log))[0] == recreated


@pytest.mark.parametrize(("nodes", "rf"), [(3, 3), (5, 3), (5, 5), (5, 1), (3, 1)])
def test_placement_balances_leaders_and_replicas(nodes: int, rf: int) -> None:
    state, log = state_with(nodes)
    for i in range(nodes * 4):
        result = apply(state, log, create_stream_command(f"s{i}", rf))
        assert result.ok and len(set(result.stream.replicas)) == rf
    leaders = Counter(s.preferred_leader for s in state.streams.values())
    holds = Counter(r for s in state.streams.values() for r in s.replicas)
    assert set(leaders.values()) == {4}
    assert max(holds.values()) - min(holds.values()) <= 1


def test_every_node_reaches_the_same_state_by_replay() -> None:
    rng = random.Random(7)
    state, log = state_with(5)
    for _ in range(200):
        name = f"s{rng.randrange(30)}"
        if rng.random() < 0.6:
            apply(state, log, create_stream_command(name, rng.choice([None, 1, 3, 5])))
        else:
            apply(state, log, delete_stream_command(name))
    replica = ClusterState()
    for index, payload in enumerate(log, start=1):
        replica.apply_entry(index, payload)
    assert replica.streams == state.streams and replica.nodes == state.nodes
    assert replica.streams_on(3) == state.streams_on(3)


def test_garbage_entries_are_ignored_alike() -> None:
    state, log = state_with(3)
    before = dict(state.streams)
    garbage = [b"", b"\x00" * 80]
    builder = RecordBatchBuilder()
    for value in (b"not json", b"[1,2]", b'{"op":"create_stream","name":5}', b'{"op":"drop_all"}', b"[" * 5000):
        builder.append(0, None, value)
    garbage.append(builder.build())
    for index, payload in enumerate(garbage, start=100):
        for result in state.apply_entry(index, payload):
            assert not result.ok
    assert state.streams == before


def test_stream_names() -> None:
    assert validate_stream_name("a.b_c-9") is None
    for bad in ("", ".", "..", "a/b", "é", "x" * 250, None, 5):
        assert validate_stream_name(bad) is not None
