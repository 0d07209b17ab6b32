"""A group's own configs: the changes IncrementalAlterConfigs and AlterConfigs ask for, checked;
the replicated command that stores them, refused below its feature level, kept in snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from vdl_broker.cluster.features import GROUP_CONFIGS_LEVEL, finalize_features_command
from vdl_broker.cluster.group_configs import (
    HEARTBEAT_INTERVAL,
    SESSION_TIMEOUT,
    GroupConfigBounds,
    altered,
    group_configs_command,
    replaced,
)
from vdl_broker.cluster.groups import delete_group_command
from vdl_broker.cluster.metadata import ClusterState, Outcome, decode_command, encode_command
from vdl_broker.cluster.stream_configs import AlterOp, ConfigProblem
from vdl_broker.config import NodeConfig

BOUNDS = GroupConfigBounds(session_timeout_ms=45_000, heartbeat_interval_ms=5_000, min_session_timeout_ms=1_000,
                           max_session_timeout_ms=1_800_000)
SET, DELETE = AlterOp.SET, AlterOp.DELETE


def test_set_and_delete_give_the_groups_whole_config() -> None:
    config = altered({}, [(SESSION_TIMEOUT, SET, " 30000 "), (HEARTBEAT_INTERVAL, SET, "2000")], BOUNDS)
    assert config == {SESSION_TIMEOUT: "30000", HEARTBEAT_INTERVAL: "2000"}
    assert altered(config, [(HEARTBEAT_INTERVAL, DELETE, None)], BOUNDS) == {SESSION_TIMEOUT: "30000"}
    assert altered({}, [(SESSION_TIMEOUT, DELETE, None)], BOUNDS) == {}  # deleting what is unset: nothing
    assert BOUNDS.effective({SESSION_TIMEOUT: "30000"}) == (30_000, 5_000)
    assert BOUNDS.effective({}) == (45_000, 5_000)


@pytest.mark.parametrize(("changes", "message"), [
    ([("consumer.session.timeout", SET, "1")],
     "unknown group config 'consumer.session.timeout' (accepted: consumer.session.timeout.ms, "
     "consumer.heartbeat.interval.ms)"),
    ([("share.record.lock.duration.ms", SET, "1000")],
     "share.record.lock.duration.ms: a share group config (KIP-932): VDL has no share groups (the group "
     "configs: consumer.session.timeout.ms, consumer.heartbeat.interval.ms)"),
    ([("streams.num.standby.replicas", DELETE, None)],
     "streams.num.standby.replicas: a streams group config (KIP-1071): VDL has no streams groups (the group "
     "configs: consumer.session.timeout.ms, consumer.heartbeat.interval.ms)"),
    ([("consumer.assignment.interval.ms", SET, "100")],
     "consumer.assignment.interval.ms: VDL's assignor runs within each heartbeat, not on an interval or thread of "
     "its own (the group configs: consumer.session.timeout.ms, consumer.heartbeat.interval.ms)"),
    ([(SESSION_TIMEOUT, SET, "999")],
     "consumer.session.timeout.ms: '999' is not an integer in [1000, 1800000] (the node's "
     "group_min_session_timeout_ms and group_max_session_timeout_ms)"),
    ([(SESSION_TIMEOUT, SET, "soon")],
     "consumer.session.timeout.ms: 'soon' is not an integer in [1000, 1800000] (the node's "
     "group_min_session_timeout_ms and group_max_session_timeout_ms)"),
    ([(HEARTBEAT_INTERVAL, SET, "0")], "consumer.heartbeat.interval.ms: '0' is not an integer in [1, 2147483647]"),
    ([(HEARTBEAT_INTERVAL, SET, None)], "consumer.heartbeat.interval.ms: None is not an integer in [1, 2147483647]"),
    # against the node's session timeout, the group setting none of its own
    ([(HEARTBEAT_INTERVAL, SET, "45000")],
     "consumer.heartbeat.interval.ms (45000) must be less than consumer.session.timeout.ms (45000)"),
    ([(SESSION_TIMEOUT, SET, "3000")],
     "consumer.heartbeat.interval.ms (5000) must be less than consumer.session.timeout.ms (3000)"),
    ([(SESSION_TIMEOUT, SET, "3000"), (SESSION_TIMEOUT, DELETE, None)],
     "consumer.session.timeout.ms: named more than once in the request"),
    ([(SESSION_TIMEOUT, AlterOp.APPEND, "3000")],
     "consumer.session.timeout.ms: APPEND applies to list configs only; use SET"),
    ([(SESSION_TIMEOUT, 7, "3000")],
     "consumer.session.timeout.ms: unknown operation 7 (0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT)"),
])
def test_a_bad_change_is_refused_naming_what_is_accepted(changes: list, message: str) -> None:
    with pytest.raises(ConfigProblem) as refused:
        altered({}, changes, BOUNDS)
    assert str(refused.value) == message


def test_a_session_shorter_than_the_groups_heartbeat_is_refused_and_so_is_deleting_its_way_back() -> None:
    config = {SESSION_TIMEOUT: "3000", HEARTBEAT_INTERVAL: "1000"}
    assert altered(config, [(SESSION_TIMEOUT, SET, "2000")], BOUNDS) == {SESSION_TIMEOUT: "2000",
                                                                         HEARTBEAT_INTERVAL: "1000"}
    with pytest.raises(ConfigProblem, match=r"consumer.heartbeat.interval.ms \(5000\) must be less than "
                                            r"consumer.session.timeout.ms \(3000\)"):
        altered(config, [(HEARTBEAT_INTERVAL, DELETE, None)], BOUNDS)


def test_alter_configs_replaces_the_whole_config() -> None:
    assert replaced([(HEARTBEAT_INTERVAL, "300")], BOUNDS) == {HEARTBEAT_INTERVAL: "300"}
    assert replaced([], BOUNDS) == {}
    with pytest.raises(ConfigProblem, match="named more than once"):
        replaced([(HEARTBEAT_INTERVAL, "300"), (HEARTBEAT_INTERVAL, "400")], BOUNDS)


def test_bounds_of_a_node_are_its_settings(tmp_path: Path) -> None:
    node = NodeConfig(data_dir=tmp_path, group_consumer_session_timeout_ms=10_000, group_consumer_heartbeat_interval_ms=700,
                      group_min_session_timeout_ms=2_000, group_max_session_timeout_ms=90_000)
    assert GroupConfigBounds.of(node) == GroupConfigBounds(10_000, 700, 2_000, 90_000)


def test_a_config_a_restarted_node_no_longer_accepts_is_capped_to_its_settings() -> None:
    """Checked when set, a group's configs may fall outside the settings a node has since been
    restarted with: the session is capped to its bounds, and an interval no longer below the
    session becomes a third of it (a member must heartbeat within its session)."""
    narrower = GroupConfigBounds(session_timeout_ms=6_000, heartbeat_interval_ms=2_000, min_session_timeout_ms=3_000,
                                 max_session_timeout_ms=9_000)
    assert narrower.effective({SESSION_TIMEOUT: "60000", HEARTBEAT_INTERVAL: "20000"}) == (9_000, 3_000)
    assert narrower.effective({SESSION_TIMEOUT: "1000"}) == (3_000, 2_000)
    assert narrower.effective({SESSION_TIMEOUT: "1000", HEARTBEAT_INTERVAL: "2500"}) == (3_000, 2_500)
    assert narrower.effective({HEARTBEAT_INTERVAL: "7000"}) == (6_000, 2_000)
    assert narrower.effective({SESSION_TIMEOUT: "9000", HEARTBEAT_INTERVAL: "8999"}) == (9_000, 8_999)


def applied(state: ClusterState, index: int, command: dict) -> object:
    [result] = state.apply_entry(index, [decode_command(encode_command(command))])
    return result


def test_the_command_stores_a_groups_configs_below_its_level_refused_and_kept_in_snapshots() -> None:
    state = ClusterState()
    refused = applied(state, 1, group_configs_command("g", {SESSION_TIMEOUT: "30000"}))
    assert (refused.outcome, refused.message) == (
        Outcome.INVALID_COMMAND, f"group_configs needs vdl.metadata.version level {GROUP_CONFIGS_LEVEL}, the cluster "
                                 "is at level 1: finalize it with `vdl cluster upgrade` once every node runs this "
                                 "release")
    assert state.groups.configs == {}
    assert applied(state, 2, finalize_features_command(GROUP_CONFIGS_LEVEL)).ok
    assert applied(state, 3, group_configs_command("g", {SESSION_TIMEOUT: "30000"})).ok
    assert applied(state, 4, group_configs_command("h", {HEARTBEAT_INTERVAL: "300"})).ok
    # A group's configs are a resource of their own: deleting the group leaves them.
    assert applied(state, 5, delete_group_command("g")).ok
    assert state.groups.configs == {"g": {SESSION_TIMEOUT: "30000"}, "h": {HEARTBEAT_INTERVAL: "300"}}
    copy = ClusterState()
    copy.load_snapshot(state.snapshot())
    assert copy.groups.configs == state.groups.configs
    assert applied(state, 6, group_configs_command("h", {})).ok  # none left: the entry goes
    assert state.groups.configs == {"g": {SESSION_TIMEOUT: "30000"}}


@pytest.mark.parametrize(("command", "message"), [
    ({"op": "group_configs", "group": "", "configs": {}}, "group_configs: group must be a non-empty string"),
    ({"op": "group_configs", "group": "g", "configs": {SESSION_TIMEOUT: 3000}},
     "group_configs: configs must map names to strings"),
    ({"op": "group_configs", "group": "g", "configs": None}, "group_configs: configs must map names to strings"),
])
def test_a_malformed_command_is_refused_alike_everywhere(command: dict, message: str) -> None:
    state = ClusterState()
    assert applied(state, 1, finalize_features_command(GROUP_CONFIGS_LEVEL)).ok
    result = applied(state, 2, command)
    assert (result.outcome, result.message) == (Outcome.INVALID_COMMAND, message)
    assert state.groups.configs == {}
