"""The metadata state machine: commands, deterministic placement, replay, hostile entries."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from vdl_broker.cluster.features import SUPPORTED_LEVEL, finalize_features_command
from vdl_broker.cluster.groups import commit_offsets_command
from vdl_broker.cluster.membership import join_node_command
from vdl_broker.cluster.metadata import (
    METADATA_GROUP,
    ClusterState,
    NodeInfo,
    Outcome,
    adopt_stream_command,
    changes_placement,
    create_stream_command,
    decode_command,
    decode_legacy_commands,
    delete_stream_command,
    encode_command,
    init_cluster_command,
    new_cluster_id,
    register_node_command,
    validate_stream_name,
)
from vdl_broker.cluster.stream_configs import alter_stream_config_command
from vdl_broker.cluster.transactions import (
    add_partitions_command,
    complete_txn_command,
    end_txn_command,
    init_producer_command,
)
from vdl_wire.records.record_batch import RecordBatchBuilder


def state_with(n: int) -> tuple[ClusterState, list[bytes]]:
    state = ClusterState()
    log = [encode_command(register_node_command(i, f"127.0.0.1:{9091 + i}", f"127.0.0.1:{19091 + i}"))
           for i in range(1, n + 1)]
    for index, payload in enumerate(log, start=1):
        assert all(r.ok for r in state.apply_entry(index, [decode_command(payload)]))
    return state, log


def apply(state: ClusterState, log: list[bytes], command: dict) -> object:
    log.append(encode_command(command))
    [result] = state.apply_entry(len(log), [decode_command(log[-1])])
    return result


def test_command_round_trip() -> None:
    command = create_stream_command("events", 3, {"retention.ms": 1000})
    payload = encode_command(command)
    assert payload == b'{"config":{"retention.ms":1000},"name":"events","op":"create_stream","replication_factor":3}'
    assert decode_command(payload) == command


def test_legacy_entries_carry_commands_in_a_record_batch() -> None:
    """VDL 0.1 stored each command as the value of a RecordBatch in a DATA entry."""
    builder = RecordBatchBuilder()
    builder.append(5, None, b'{"op":"delete_stream","name":"events"}')
    assert decode_legacy_commands(builder.build()) == [delete_stream_command("events")]


def test_the_first_cluster_id_applied_wins() -> None:
    state, log = state_with(1)
    first, second = new_cluster_id(), new_cluster_id()
    assert len(first) == 22 and first != second  # Kafka's form: a UUID in 22 base64 characters
    assert apply(state, log, init_cluster_command(first)).ok
    assert apply(state, log, init_cluster_command(second)).outcome is Outcome.EXISTS
    assert state.cluster_id == first
    assert apply(state, log, {"op": "init_cluster", "cluster_id": 7}).outcome is Outcome.INVALID_COMMAND
    replica = ClusterState()
    for index, payload in enumerate(log, start=1):
        replica.apply_entry(index, [decode_command(payload)])
    assert replica.cluster_id == first


def test_a_node_registration_carries_its_rack_and_a_registrar_without_it_keeps_it() -> None:
    state, log = state_with(2)
    assert apply(state, log, register_node_command(2, "h:1", "h:2", rack="rack-b")).ok
    assert state.nodes[2].rack == "rack-b"
    # A metadata leader whose config does not name node 2's rack re-registers new addresses only.
    assert apply(state, log, register_node_command(2, "h:3", "h:4")).ok
    assert (state.nodes[2].client, state.nodes[2].rack) == ("h:3", "rack-b")
    assert state.nodes[1].rack is None
    for bad in ("", 5, ["r"]):
        command = register_node_command(1, "h:1", "h:2") | {"rack": bad}
        assert apply(state, log, command).outcome is Outcome.INVALID_COMMAND
    assert state.nodes[1].rack is None


def test_a_node_describing_itself_wins_over_other_nodes_peers_entries() -> None:
    state, log = state_with(2)
    own = register_node_command(2, "h:5", "h:6", ("SSL://h:7",), "rack-b", own=True)
    assert own == {"op": "register_node", "id": 2, "client": "h:5", "raft": "h:6", "listeners": ["SSL://h:7"],
                   "rack": "rack-b", "own": True}
    # Below feature level 2 (a cluster formed by an older release, not upgraded yet): refused alike
    # everywhere, as is a joining node's own registration.
    assert not state.nodes_register_themselves
    refused = apply(state, log, own)
    assert (refused.outcome, refused.message) == (Outcome.INVALID_COMMAND,
                                                  "a node's own registration needs feature level 2")
    assert apply(state, log, join_node_command(3, "h:8", "h:9", own=True)).outcome is Outcome.INVALID_COMMAND
    assert state.nodes[2] == NodeInfo(2, "127.0.0.1:9093", "127.0.0.1:19093") and 3 not in state.nodes
    assert state.membership.node_states == {}
    assert apply(state, log, finalize_features_command(2)).ok and state.nodes_register_themselves
    assert apply(state, log, own).ok
    assert state.nodes[2] == NodeInfo(2, "h:5", "h:6", ("SSL://h:7",), "rack-b", own=True)
    # A metadata leader's `peers` entry for node 2 (no rack, no listeners, old addresses): ignored.
    result = apply(state, log, register_node_command(2, "h:1", "h:2"))
    assert result.ok and result.node == state.nodes[2] == NodeInfo(2, "h:5", "h:6", ("SSL://h:7",), "rack-b", own=True)
    # Its own next registration (a restart with a changed config) replaces it, rack removed too.
    assert apply(state, log, register_node_command(2, "h:5", "h:6", own=True)).ok
    assert state.nodes[2] == NodeInfo(2, "h:5", "h:6", (), None, own=True)
    assert apply(state, log, register_node_command(1, "h:1", "h:2") | {"own": "yes"}).outcome is Outcome.INVALID_COMMAND
    # Entries written before nodes described themselves replay as they did, and a snapshot keeps it.
    replica = ClusterState()
    for index, payload in enumerate(log, start=1):
        replica.apply_entry(index, [decode_command(payload)])
    assert replica.nodes == state.nodes
    restored = ClusterState()
    restored.load_snapshot(state.snapshot())
    assert restored.nodes == state.nodes


def test_adopted_streams_stay_on_the_node_that_holds_them() -> None:
    state, log = state_with(3)
    adopted = apply(state, log, adopt_stream_command("old", 2))
    assert adopted.ok and adopted.stream.replicas == (2,) and adopted.stream.adopted
    assert not apply(state, log, create_stream_command("new", 1)).stream.adopted
    assert apply(state, log, adopt_stream_command("ghost", 9)).outcome is Outcome.INVALID_COMMAND


def test_only_entries_touching_streams_nodes_or_configs_change_placement() -> None:
    """A transaction's and a consumer group's entries leave every stream where and as it is: a
    node's replicas and stream moves need no new look after them (changes_placement)."""
    state, log = state_with(3)
    assert apply(state, log, finalize_features_command(SUPPORTED_LEVEL)).ok
    created = apply(state, log, create_stream_command("s", 3))
    assert created.ok and changes_placement([created])
    transaction = [apply(state, log, command) for command in (
        init_producer_command("t", 1000, 60000, 7, None), add_partitions_command("t", 1001, 7, 0, ["s"]),
        end_txn_command("t", 1002, 7, 0, True, True, None), complete_txn_command("t", 1003, 7, 1))]
    assert [(r.op, r.ok) for r in transaction] == [("txn_init_producer", True), ("txn_add_partitions", True),
                                                    ("txn_end", True), ("txn_complete", True)]
    offsets = apply(state, log, commit_offsets_command("g", 1004, {"s": (5, 0, None)}))
    assert offsets.ok
    assert not changes_placement([*transaction, offsets])
    configured = apply(state, log, alter_stream_config_command("s", {"retention.ms": "1000"}, []))
    assert configured.ok and changes_placement([configured]) and changes_placement([offsets, configured])
    assert changes_placement([apply(state, log, delete_stream_command("s"))])
    assert changes_placement([])  # a snapshot restored: the replicas must be looked at again


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
        replica.apply_entry(index, [decode_command(payload)])
    assert replica.streams == state.streams and replica.nodes == state.nodes
    assert replica.streams_on(3) == state.streams_on(3)


def test_garbage_entries_are_ignored_alike() -> None:
    state, log = state_with(3)
    before = dict(state.streams)
    garbage = [b"", b"\x00" * 80, b"not json", b"[1,2]", b'{"op":"create_stream","name":5}', b'{"op":7}',
               b"[" * 5000]
    for index, payload in enumerate(garbage, start=100):
        [result] = state.apply_entry(index, [decode_command(payload)])
        assert not result.ok
    builder = RecordBatchBuilder()
    for value in garbage[2:]:
        builder.append(0, None, value)
    legacy = decode_legacy_commands(builder.build())
    assert len(legacy) == 5
    assert all(not result.ok for result in state.apply_entry(200, legacy))
    assert decode_legacy_commands(b"\x00" * 80) == [None]
    assert state.streams == before


def test_stream_names() -> None:
    assert validate_stream_name("a.b_c-9") is None
    for bad in ("", ".", "..", "a/b", "é", "x" * 250, None, 5):
        assert validate_stream_name(bad) is not None
