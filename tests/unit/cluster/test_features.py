"""The cluster's feature level (cluster/features.py): set by the release that forms the cluster,
raised only by a finalize every node applies alike, never lowered; what a newer release wrote
stops a node instead of being skipped."""

from __future__ import annotations

import pytest

from tests.unit.cluster.test_cluster_metadata import apply, state_with
from vdl_broker.cluster import features
from vdl_broker.cluster.features import (
    BASELINE_LEVEL,
    FeaturesState,
    NewerMetadata,
    finalize_features_command,
    raft_frame_version,
)
from vdl_broker.cluster.metadata import ClusterState, Outcome, create_stream_command, init_cluster_command
from vdl_broker.raft.wire import CHECKSUMMED, ENTRY_CHECKSUMS, VERSION

pytestmark = pytest.mark.unit


@pytest.fixture
def next_release(monkeypatch: pytest.MonkeyPatch) -> None:
    """This release as the next one would be: level 2 supported, and (for the test's sake)
    create_stream introduced at level 2."""
    monkeypatch.setattr(features, "SUPPORTED_LEVEL", 2)
    monkeypatch.setattr(features, "COMMAND_LEVELS", {"create_stream": 2})


def test_a_new_cluster_starts_at_its_releases_level_and_an_old_one_at_the_baseline() -> None:
    state = ClusterState()
    assert state.apply(1, init_cluster_command("c1")).ok
    assert state.features == FeaturesState(features.SUPPORTED_LEVEL, -1)
    formed_before_levels = ClusterState()
    assert formed_before_levels.apply(1, {"op": "init_cluster", "cluster_id": "c2"}).ok
    assert formed_before_levels.features == FeaturesState(BASELINE_LEVEL, -1)


def test_a_command_of_a_higher_level_is_refused_until_the_level_is_finalized(next_release: None) -> None:
    state, log = state_with(3)
    refused = apply(state, log, create_stream_command("events", 3))
    assert (refused.outcome, refused.message) == (
        Outcome.INVALID_COMMAND, "create_stream needs vdl.metadata.version level 2, the cluster is at level 1: "
        "finalize it with `vdl cluster upgrade` once every node runs this release")
    assert "events" not in state.streams
    finalized = state.apply(500, finalize_features_command(2))
    assert finalized.ok and state.features == FeaturesState(2, 500)
    assert apply(state, log, create_stream_command("events", 3)).ok
    # Levels only go up; nonsense is refused alike on every node.
    for bad, why in ((1, "vdl.metadata.version is at level 2: it cannot go down to 1"),
                     (0, "bad finalize_features level 0"), (True, "bad finalize_features level True"),
                     ("2", "bad finalize_features level '2'")):
        result = state.apply(501, finalize_features_command(bad))  # type: ignore[arg-type]
        assert (result.outcome, result.message) == (Outcome.INVALID_COMMAND, why)
    assert state.features == FeaturesState(2, 500)


def test_what_a_newer_release_wrote_stops_the_node_instead_of_being_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(features, "SUPPORTED_LEVEL", 1)  # a release at level 1 meets what level 2 wrote
    state, log = state_with(3)
    before = state.snapshot()
    supported = features.SUPPORTED_LEVEL
    with pytest.raises(NewerMetadata, match=r"a 'create_widget' command at index 7, which needs a newer release; "
                                            rf"this release supports vdl.metadata.version up to level {supported}"):
        state.apply(7, {"op": "create_widget", "name": "w"})
    with pytest.raises(NewerMetadata, match=f"finalized at level {supported + 1}, which needs feature level "
                                            f"{supported + 1}"):
        state.apply(8, finalize_features_command(supported + 1))
    with pytest.raises(NewerMetadata, match=f"a cluster formed at feature level {supported + 2}"):
        ClusterState().apply(1, {"op": "init_cluster", "cluster_id": "c", "feature_level": supported + 2})
    assert state.snapshot() == before  # nothing of either was applied


def test_a_snapshot_of_a_higher_level_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    newer = ClusterState()
    monkeypatch.setattr(features, "SUPPORTED_LEVEL", 2)
    assert newer.apply(1, {"op": "init_cluster", "cluster_id": "c", "feature_level": 2}).ok
    data = newer.snapshot()
    monkeypatch.setattr(features, "SUPPORTED_LEVEL", 1)
    with pytest.raises(NewerMetadata, match="a snapshot at feature level 2"):
        ClusterState().load_snapshot(data)


def test_kip848_group_state_waits_for_level_2() -> None:
    """A cluster upgraded from a release without KIP-848 groups stores none until it is
    finalized at level 2: the nodes still on that release could not apply them."""
    command = {"op": "consumer_group", "group": "g", "state": None}
    old = ClusterState()
    assert old.apply(1, {"op": "init_cluster", "cluster_id": "c", "feature_level": 1}).ok
    refused = old.apply(2, command)
    assert not refused.ok
    assert old.apply(3, finalize_features_command(features.CONSUMER_GROUPS_LEVEL)).ok
    assert old.apply(4, command).ok


def test_transaction_version_follows_the_level_that_brings_the_coordinator() -> None:
    # KIP-890 part 2's feature: finalized at 2 once the transaction commands may be used, else 0.
    assert [features.transaction_version(level) for level in (1, 2, 3)] == [0, 2, 2]
    assert features.COMMAND_LEVELS["txn_end"] == 2


def test_transactional_ids_expire_only_from_level_3() -> None:
    """A cluster formed by the release before level 3 keeps its transactional ids until the
    operator finalizes level 3: a node still on that release could not apply the expiry."""
    from vdl_broker.cluster.transactions import expire_txns_command, init_producer_command

    assert features.TXN_EXPIRY_LEVEL == 3 <= features.SUPPORTED_LEVEL
    old = ClusterState()
    assert old.apply(1, {"op": "init_cluster", "cluster_id": "c", "feature_level": 2}).ok
    assert old.apply(2, init_producer_command("t", 1000, 60000, 500, None)).ok
    refused = old.apply(3, expire_txns_command(10 ** 12, 1))
    assert (refused.outcome, refused.message) == (
        Outcome.INVALID_COMMAND, "txn_expire needs vdl.metadata.version level 3, the cluster is at level 2: "
        "finalize it with `vdl cluster upgrade` once every node runs this release")
    assert old.transactions.get("t") is not None
    assert old.apply(4, finalize_features_command(3)).ok
    assert old.apply(5, expire_txns_command(10 ** 12, 1)).ok
    assert old.transactions.get("t") is None


def test_an_emptied_kip848_group_is_kept_only_from_level_3() -> None:
    """Below level 3 a KIP-848 group whose members all left is forgotten (the nodes still on the
    release before it would keep no such group)."""
    command = {"op": "consumer_group_empty", "group": "g", "state": {"group_epoch": 2, "members": []}}
    state = ClusterState()
    assert state.apply(1, {"op": "init_cluster", "cluster_id": "c", "feature_level": 2}).ok
    assert not state.apply(2, command).ok
    assert state.apply(3, finalize_features_command(features.EMPTY_CONSUMER_GROUPS_LEVEL)).ok
    assert state.apply(4, command).ok


def test_a_policy_that_keeps_every_record_waits_for_level_3() -> None:
    """A release before level 3 reads `cleanup.policy=compact` as unset (delete) and knows no
    compaction settings: its replicas would delete by retention what the others keep. Creates and
    alters setting them are refused until level 3 is finalized; `delete` is not."""
    state, _ = state_with(3)
    state.features = FeaturesState(2, -1)
    why = ("cleanup.policy other than delete, the compaction settings, compression.type other than producer and "
           "message.timestamp.type=LogAppendTime need vdl.metadata.version level 3, the cluster is at level 2: "
           "finalize it with `vdl cluster upgrade` once every node runs this release")
    for config in ({"cleanup.policy": "compact"}, {"cleanup.policy": "delete,compact"}, {"cleanup.policy": ""},
                   {"min.compaction.lag.ms": "0"}, {"delete.retention.ms": "1000", "cleanup.policy": "delete"},
                   {"compression.type": "gzip"}, {"compression.type": "uncompressed"},
                   {"message.timestamp.type": "LogAppendTime"}):
        refused = state.check_create("s", 3, dict(config))
        assert refused is not None and (refused.outcome, refused.message) == (Outcome.INVALID_CONFIG, why), config
    assert state.check_create("s", 3, {"cleanup.policy": "delete", "retention.ms": "1000"}) is None
    assert state.check_create("s", 3, {"compression.type": "producer", "message.timestamp.type": "CreateTime",
                                       "compression.gzip.level": "9"}) is None
    assert state.config_level_problem({"cleanup.policy": "compact"}) == why  # what an alter proposes
    assert state.config_level_problem({"cleanup.policy": "delete"}) is None
    assert state.apply(500, finalize_features_command(features.KEEP_ALL_POLICY_LEVEL)).ok
    assert state.check_create("s", 3, {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"}) is None
    assert state.config_level_problem({"cleanup.policy": "compact"}) is None


def test_nodes_send_the_newest_raft_frames_their_clusters_level_has() -> None:
    """Every node of a cluster at a level reads its frames: a release before level 4 reads plain
    ones only, one before level 5 no entry checksums."""
    assert [raft_frame_version(level) for level in range(BASELINE_LEVEL, features.SUPPORTED_LEVEL + 1)] == [
        VERSION, VERSION, VERSION, CHECKSUMMED, ENTRY_CHECKSUMS, ENTRY_CHECKSUMS]
