"""Metadata snapshots (cluster/snapshot.py): a state restored from a snapshot equals the state it
was taken from, in every attribute of every part.

The state is built by applying one sample of every command ClusterState knows (a command added
without a sample here fails `test_every_command_has_a_sample`), and compared attribute by
attribute: a part or a field the snapshot left out comes back different (or missing) and fails
the round trip; an attribute ClusterState does not annotate fails `test_every_attribute_is_annotated`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from vdl_broker.cluster import snapshot
from vdl_broker.cluster.acls import ACL_OPS, AclBinding, create_acls_command, delete_acls_command
from vdl_broker.cluster.group_configs import group_configs_command
from vdl_broker.cluster.groups import (
    GROUP_OPS,
    StoredMember,
    commit_offsets_command,
    consumer_group_command,
    consumer_group_empty_command,
    delete_group_command,
    delete_offsets_command,
    expire_offsets_command,
    group_generation_command,
)
from vdl_broker.cluster.membership import (
    MEMBERSHIP_OPS,
    complete_reassignment_command,
    join_node_command,
    reassign_stream_command,
    remove_node_command,
    set_node_state_command,
)
from vdl_broker.cluster.metadata import (
    ClusterState,
    adopt_stream_command,
    create_stream_command,
    delete_stream_command,
    init_cluster_command,
    register_node_command,
)
from vdl_broker.cluster.stream_configs import CONFIG_OPS, alter_stream_config_command
from vdl_broker.cluster.transactions import (
    TXN_OPS,
    add_offsets_command,
    add_partitions_command,
    complete_txn_command,
    end_txn_command,
    expire_txns_command,
    init_producer_command,
    timeout_txn_command,
    txn_offset_commit_command,
)
from vdl_broker.cluster.users import (
    USER_OPS,
    bootstrap_user_command,
    delete_scram_command,
    upsert_scram_command,
)
from vdl_wire.sasl import ScramCredential

pytestmark = pytest.mark.unit

CREDENTIAL = ScramCredential.from_salted_password("SCRAM-SHA-256", b"salt\x00\xff", 4096, b"k" * 32)
ACL = AclBinding(2, "orders", 3, "User:alice", "*", 3, 3)
MEMBER = StoredMember("m-1", "static-1", "client", "/10.0.0.1", 10000, 30000, (("range", b"\x00\x01"),), b"\x02")


def samples() -> list[dict[str, Any]]:
    """One command of every kind, in an order that leaves something in every part."""
    return [
        register_node_command(1, "h1:9092", "h1:19092", ("PLAINTEXT://h1:9092",), "r1"),
        register_node_command(2, "h2:9092", "h2:19092"),
        register_node_command(3, "h3:9092", "h3:19092"),
        join_node_command(4, "h4:9092", "h4:19092", (), "r2"),
        join_node_command(5, "h5:9092", "h5:19092"),
        init_cluster_command("cluster-id"),
        create_stream_command("orders", 3, {"retention.ms": 86400000}),
        create_stream_command("gone", 1),
        adopt_stream_command("legacy", 1),
        alter_stream_config_command("orders", {"max.message.bytes": "2048"}, []),
        delete_stream_command("gone"),
        reassign_stream_command("orders", 7, [4, 2, 3]),
        complete_reassignment_command("orders", 7, [4, 2, 3]),
        reassign_stream_command("legacy", 9, [2]),
        set_node_state_command(3, "decommissioning"),
        remove_node_command(5),
        commit_offsets_command("g1", 1000, {"orders": (42, 3, "meta"), "legacy": (7, -1, None)}),
        commit_offsets_command("g2", 2000, {"orders": (1, 0, None)}),
        commit_offsets_command("g3", 3000, {"orders": (9, 0, None)}),
        group_generation_command("g1", 1100, 5, "consumer", "range", "m-1", [MEMBER]),
        group_generation_command("g2", 2100, 1, "consumer", None, None, []),
        consumer_group_command("g4", {"group_epoch": 3, "assignment_epoch": 3, "assignor": "uniform",
                                      "subscribed_streams": ["s1"], "target": {"m": ["s1"]},
                                      "members": [{"member_id": "m", "member_epoch": 3}]}),
        consumer_group_command("g5", {"group_epoch": 1, "assignment_epoch": 1, "assignor": "uniform",
                                      "subscribed_streams": [], "target": {}, "members": []}),
        consumer_group_command("g5", None),
        consumer_group_empty_command("g2", {"group_epoch": 2, "assignment_epoch": 2, "assignor": "uniform",
                                            "subscribed_streams": [], "target": {}, "members": []}),
        delete_offsets_command("g1", ["legacy"]),
        delete_group_command("g3"),
        group_configs_command("g1", {"consumer.session.timeout.ms": "30000"}),
        group_configs_command("g9", {"consumer.heartbeat.interval.ms": "300"}),
        group_configs_command("g9", {}),
        expire_offsets_command(10 ** 12, 10 ** 11, []),
        upsert_scram_command("alice", CREDENTIAL),
        bootstrap_user_command("admin", CREDENTIAL),
        upsert_scram_command("bob", CREDENTIAL),
        delete_scram_command("bob", "SCRAM-SHA-256"),
        create_acls_command([ACL, dataclasses.replace(ACL, principal="User:bob")]),
        delete_acls_command([dataclasses.replace(ACL, principal="User:bob")]),
        init_producer_command("t0", 100, 60000, 900, None),  # idle: expires below
        init_producer_command("t1", 5000, 60000, 1000, None),
        add_partitions_command("t1", 5001, 1000, 0, ["orders"]),
        end_txn_command("t1", 5002, 1000, 0, True, True),
        complete_txn_command("t1", 5003, 1000, 1),
        expire_txns_command(5100, 5000),
        init_producer_command("t2", 6000, 10000, 2000, None),
        add_partitions_command("t2", 6001, 2000, 0, ["orders", "legacy"]),
        add_offsets_command("t2", 6002, 2000, 0, "g2"),
        txn_offset_commit_command("t2", 6003, 2000, 0, "g2", {"orders": (5, 1, "m")}),
        timeout_txn_command("t2", 17000, 2000, 0),
    ]


def populated() -> ClusterState:
    state = ClusterState()
    for index, command in enumerate(samples(), start=1):
        [result] = state.apply_entry(index, [json.loads(json.dumps(command))])
        assert result.ok, (command, result)
    return state


def test_every_command_has_a_sample() -> None:
    known = {"init_cluster", "register_node", "create_stream", "delete_stream",
             *GROUP_OPS, *USER_OPS, *ACL_OPS, *CONFIG_OPS, *MEMBERSHIP_OPS, *TXN_OPS}
    assert {command["op"] for command in samples()} == known


def test_every_attribute_is_annotated() -> None:
    state = populated()
    assert set(snapshot.state_attributes(state)) == set(vars(state)) - ClusterState.TRANSIENT


def test_a_restored_state_equals_the_original_in_every_part() -> None:
    state = populated()
    # Every part holds something, or the round trip would prove little.
    for name in snapshot.state_attributes(state):
        value = getattr(state, name)
        parts = dataclasses.astuple(value) if dataclasses.is_dataclass(value) else (value,)
        assert all(part not in (None, 0, {}, set(), ()) for part in parts), f"{name} is empty: {value!r}"
    restored = ClusterState()
    restored.load_snapshot(state.snapshot())
    for name in snapshot.state_attributes(state):
        assert getattr(restored, name) == getattr(state, name), name
    assert restored.streams.load.holds == state.streams.load.holds  # derived, rebuilt
    assert restored.streams.load.leads == state.streams.load.leads
    # It goes on alike: the next command applies the same way to both.
    command = create_stream_command("next", 3)
    assert restored.apply_entry(99, [command])[0].stream == state.apply_entry(99, [command])[0].stream


def test_an_attribute_without_annotation_is_refused() -> None:
    state = ClusterState()
    state.forgotten = {"x": 1}  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="forgotten has no type annotation"):
        state.snapshot()


def test_a_snapshot_of_another_format_is_refused() -> None:
    import zstandard

    data = zstandard.ZstdCompressor().compress(json.dumps({"format": 2, "state": {}}).encode())
    with pytest.raises(ValueError, match="metadata snapshot format 2; this release reads 1"):
        ClusterState().load_snapshot(data)


def test_an_expired_transactional_id_is_not_in_the_snapshot_and_the_expiry_goes_on_alike() -> None:
    state = populated()
    assert sorted(state.transactions.txns) == ["t1", "t2"]  # t0 expired, t1 complete, t2 aborting
    restored = ClusterState()
    restored.load_snapshot(state.snapshot())
    assert restored.transactions.txns == state.transactions.txns
    later = expire_txns_command(5003 + 5000, 5000)  # t1's turn; t2 is decided: it stays
    assert restored.apply_entry(99, [later])[0].ok and state.apply_entry(99, [later])[0].ok
    assert sorted(restored.transactions.txns) == sorted(state.transactions.txns) == ["t2"]
