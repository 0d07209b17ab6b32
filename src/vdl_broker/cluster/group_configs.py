"""A consumer group's own configs (Kafka 4's GROUP config resources): a KIP-848 group's session
timeout and heartbeat interval, set per group by IncrementalAlterConfigs or AlterConfigs
(`kafka-configs --alter --entity-type groups`) and replicated by the metadata group. A config
not set for a group is the node's setting (group_consumer_session_timeout_ms,
group_consumer_heartbeat_interval_ms). As in Kafka, a group's configs are a config resource of
their own: they may be set before the group exists and outlive its deletion.

A change takes effect at each member's next heartbeat (its new session deadline, the interval
its answer gives), as in Kafka.

    {"op": "group_configs", "group": g, "configs": {name: value}}      {} = none set
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vdl_broker.cluster.stream_configs import AlterOp, ConfigProblem

if TYPE_CHECKING:
    from vdl_broker.config import NodeConfig  # which imports this package

SESSION_TIMEOUT = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"
NAMES = (SESSION_TIMEOUT, HEARTBEAT_INTERVAL)
# Why Kafka's other group configs mean nothing here (# Kafka: GroupConfig).
_UNSERVED = (("share.", "a share group config (KIP-932): VDL has no share groups"),
             ("errors.deadletterqueue.", "a share group config (KIP-932): VDL has no share groups"),
             ("streams.", "a streams group config (KIP-1071): VDL has no streams groups"),
             ("consumer.assign", "VDL's assignor runs within each heartbeat, not on an interval or thread of its own"))


@dataclass(frozen=True)
class GroupConfigBounds:
    """What a group's configs are checked against: the node's settings (the values of a config
    not set) and the session timeouts the node accepts (group_min/max_session_timeout_ms)."""

    session_timeout_ms: int
    heartbeat_interval_ms: int
    min_session_timeout_ms: int
    max_session_timeout_ms: int

    @classmethod
    def of(cls, node: NodeConfig) -> GroupConfigBounds:
        return cls(node.group_consumer_session_timeout_ms, node.group_consumer_heartbeat_interval_ms,
                   node.group_min_session_timeout_ms, node.group_max_session_timeout_ms)

    def effective(self, configs: Mapping[str, str]) -> tuple[int, int]:
        """(session timeout, heartbeat interval) of a group with stored `configs`. Values were
        checked when set, but this node may have started since with narrower settings: as Kafka
        does, the session is capped to the node's bounds and the interval kept below the session
        (else a member would time out between its heartbeats)."""
        session, interval = self.stated(configs)
        session = min(max(session, self.min_session_timeout_ms), self.max_session_timeout_ms)
        return session, interval if interval < session else max(1, session // 3)

    def stated(self, configs: Mapping[str, str]) -> tuple[int, int]:
        """(session timeout, heartbeat interval) as `configs` and this node's settings state them."""
        return (int(configs.get(SESSION_TIMEOUT, self.session_timeout_ms)),
                int(configs.get(HEARTBEAT_INTERVAL, self.heartbeat_interval_ms)))


def _known(name: str) -> None:
    if name in NAMES:
        return
    for prefix, why in _UNSERVED:
        if name.startswith(prefix):
            raise ConfigProblem(f"{name}: {why} (the group configs: {', '.join(NAMES)})")
    raise ConfigProblem(f"unknown group config {name!r} (accepted: {', '.join(NAMES)})")


def _value(name: str, value: str | None, bounds: GroupConfigBounds) -> str:
    _known(name)
    try:
        number = int(str(value).strip())
    except ValueError:
        number = 0
    low, high = ((bounds.min_session_timeout_ms, bounds.max_session_timeout_ms) if name == SESSION_TIMEOUT
                 else (1, 2**31 - 1))
    if not low <= number <= high:
        where = (" (the node's group_min_session_timeout_ms and group_max_session_timeout_ms)"
                 if name == SESSION_TIMEOUT else "")
        raise ConfigProblem(f"{name}: {value!r} is not an integer in [{low}, {high}]{where}")
    return str(number)


def checked(configs: Mapping[str, str], bounds: GroupConfigBounds) -> dict[str, str]:
    """A group's whole config, canonical, once its combination is valid; raises ConfigProblem."""
    session, heartbeat = bounds.stated(configs)
    if heartbeat >= session:
        raise ConfigProblem(f"{HEARTBEAT_INTERVAL} ({heartbeat}) must be less than {SESSION_TIMEOUT} ({session})")
    return dict(configs)


def _once(names: list[str]) -> None:
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:
        raise ConfigProblem(f"{twice}: named more than once in the request")


def altered(current: Mapping[str, str], changes: list[tuple[str, int, str | None]],
            bounds: GroupConfigBounds) -> dict[str, str]:
    """A group's config after IncrementalAlterConfigs `changes` (name, operation, value);
    raises ConfigProblem."""
    _once([name for name, _, _ in changes])
    config = dict(current)
    for name, operation, value in changes:
        if operation == AlterOp.SET:
            config[name] = _value(name, value, bounds)
        elif operation == AlterOp.DELETE:
            _known(name)
            config.pop(name, None)
        elif operation in (AlterOp.APPEND, AlterOp.SUBTRACT):
            _known(name)
            raise ConfigProblem(f"{name}: {AlterOp(operation).name} applies to list configs only; use SET")
        else:
            raise ConfigProblem(f"{name}: unknown operation {operation} (0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT)")
    return checked(config, bounds)


def replaced(configs: list[tuple[str, str | None]], bounds: GroupConfigBounds) -> dict[str, str]:
    """A group's config as AlterConfigs gives it whole (a config not listed returns to the
    node's setting); raises ConfigProblem."""
    _once([name for name, _ in configs])
    return checked({name: _value(name, value, bounds) for name, value in configs}, bounds)


# ---------------------------------------------------------------------------------- commands


GROUP_CONFIGS_OP = "group_configs"
GROUP_CONFIG_OPS = frozenset({GROUP_CONFIGS_OP})


def group_configs_command(group: str, configs: Mapping[str, str]) -> dict[str, Any]:
    return {"op": GROUP_CONFIGS_OP, "group": group, "configs": dict(configs)}


def apply_group_configs(stored: dict[str, dict[str, str]], command: Mapping[str, Any]) -> str | None:
    """Store a group's configs (none: forget the group's entry); an error text for a malformed
    command."""
    group, configs = command.get("group"), command.get("configs")
    if not isinstance(group, str) or not group:
        return "group_configs: group must be a non-empty string"
    if not isinstance(configs, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in configs.items()):
        return "group_configs: configs must map names to strings"
    if configs:
        stored[group] = dict(configs)
    else:
        stored.pop(group, None)
    return None
