"""Consumer groups in the cluster metadata (pure: no I/O, no clock of its own).

Two things per group, both replicated by the metadata group so they survive any node's death
and a change of metadata leader (the coordinator is the metadata leader, see FindCoordinator):

- committed offsets, per stream: offset, leader epoch, metadata string, commit time;
- the last settled generation (Kafka keeps both in __consumer_offsets as OffsetCommit and
  GroupMetadata records): who the members are and what they were assigned, so a new
  coordinator carries the group on instead of making every member rejoin.

Commands (JSON objects; every time in them comes from the proposer, so applying stays
deterministic on every node):

    {"op": "commit_offsets", "group": g, "ts": ms, "offsets": {"stream": [offset, epoch, metadata]}}
    {"op": "group_generation", "group": g, "ts": ms, "generation": n, "protocol_type": t,
     "protocol": p, "leader": id, "members": [{...StoredMember...}]}      members [] = Empty
    {"op": "delete_group", "group": g}
    {"op": "delete_offsets", "group": g, "streams": [s, ...]}
    {"op": "expire_offsets", "now": ms, "retention_ms": r}
    {"op": "consumer_group", "group": g, "state": {...} or null}     a KIP-848 group (groups/commits.py),
                                                                    null once its last member left
    {"op": "consumer_group_empty", "group": g, "state": {...}}       its last member left (level 3): it
                                                                    stays a KIP-848 group while it has offsets
    {"op": "group_configs", "group": g, "configs": {...}}            its own configs (level 6, cluster/group_configs.py)

A group known only by offsets committed without a generation (an admin client's, Spark's) is a
classic group, Empty; a KIP-848 group whose members all left stays a KIP-848 group, Empty, until
the first offset retention pass after its offsets are gone, expired or deleted (Kafka's
OffsetMetadataManager.validateOffsetCommit makes the first a classic group; its
GroupMetadataManager.cleanupGroupMetadata deletes an empty group without offsets at its next pass,
so `kafka-consumer-groups --delete-offsets` leaves a group that `--describe` and `--delete` find).
"""

from __future__ import annotations

import base64
from dataclasses import asdict, dataclass, field
from typing import Any

from vdl_broker.cluster.group_configs import GROUP_CONFIG_OPS, apply_group_configs


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_ms: int


@dataclass(frozen=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes

    def to_json(self) -> dict[str, Any]:
        raw = asdict(self)
        raw["protocols"] = [[name, _b64(meta)] for name, meta in self.protocols]
        raw["assignment"] = _b64(self.assignment)
        return raw

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> StoredMember:
        return cls(str(raw["member_id"]), raw.get("group_instance_id"), str(raw.get("client_id", "")),
                   str(raw.get("client_host", "")), int(raw["session_timeout_ms"]),
                   int(raw["rebalance_timeout_ms"]),
                   tuple((str(name), _unb64(meta)) for name, meta in raw.get("protocols", [])),
                   _unb64(raw.get("assignment", "")))


@dataclass(frozen=True)
class StoredGroup:
    """A group's last settled generation; no members = Empty since `since_ms`."""

    group_id: str
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader_id: str | None
    members: tuple[StoredMember, ...]
    since_ms: int


@dataclass
class GroupsState:
    offsets: dict[str, dict[str, CommittedOffset]] = field(default_factory=dict)
    groups: dict[str, StoredGroup] = field(default_factory=dict)
    # KIP-848 groups: their epochs, members and assignments as JSON (the coordinator's own form,
    # groups/commits.py), so a new coordinator carries them on; one without members (its last
    # member left, consumer_group_empty) is kept while it has offsets, and until the next
    # retention pass once they are gone.
    consumer_groups: dict[str, Any] = field(default_factory=dict)
    # Each group's own configs (cluster/group_configs.py), kept whether or not the group exists.
    configs: dict[str, dict[str, str]] = field(default_factory=dict)

    def group_ids(self) -> set[str]:
        # KIP-848 groups with members are left out: they are the coordinator's to show (it
        # adopted the stored state).
        return set(self.offsets) | set(self.groups) | {g for g in self.consumer_groups if self.empty_consumer_group(g)}

    def empty_consumer_group(self, group: str) -> dict[str, Any] | None:
        """The stored state of a KIP-848 group whose members all left (None: no such group)."""
        state = self.consumer_groups.get(group)
        return state if isinstance(state, dict) and not state.get("members") else None

    def _live_consumer_group(self, group: str) -> bool:
        return group in self.consumer_groups and self.empty_consumer_group(group) is None

    def _drop_empty_groups(self, group: str) -> None:
        """At a retention pass: an empty KIP-848 group without offsets goes."""
        if group not in self.offsets and self.empty_consumer_group(group) is not None:
            del self.consumer_groups[group]

    def committed(self, group: str) -> dict[str, CommittedOffset]:
        return self.offsets.get(group, {})

    def expired_groups(self, now_ms: int, retention_ms: int, live: set[str]) -> list[str]:
        """Groups whose offsets are due to expire: no live members (`live`: groups with members
        on the coordinator) and nothing committed, nor the group emptied, within `retention_ms`
        (Kafka, KIP-211: an empty group's offsets expire counted from when it became empty)."""
        due = []
        for group, offsets in self.offsets.items():
            stored = self.groups.get(group)
            if group in live or (stored is not None and stored.members) or self._live_consumer_group(group):
                continue
            last = max((o.commit_ms for o in offsets.values()), default=0)
            if stored is not None:
                last = max(last, stored.since_ms)
            if last + retention_ms <= now_ms:
                due.append(group)
        # Empty KIP-848 groups whose offsets were deleted (or whose streams were): due at once.
        due.extend(g for g in self.consumer_groups
                   if g not in self.offsets and g not in live and self.empty_consumer_group(g) is not None)
        return sorted(due)

    # -- applying (each returns an error text, or None when applied)

    def apply(self, op: str, command: dict[str, Any], streams: set[str]) -> str | None:
        group = command.get("group")
        if op == "expire_offsets":
            return self._expire(command)
        if not isinstance(group, str) or not group:
            return f"{op}: group must be a non-empty string"
        if op == "commit_offsets":
            return self._commit(group, command, streams)
        if op == "group_generation":
            return self._generation(group, command)
        if op == "consumer_group":
            state = command.get("state")
            if state is None:
                self.consumer_groups.pop(group, None)
            elif isinstance(state, dict):
                self.consumer_groups[group] = state
            else:
                return "consumer_group: state must be an object or null"
            return None
        if op == "consumer_group_empty":
            return self._consumer_group_empty(group, command)
        if op in GROUP_CONFIG_OPS:
            return apply_group_configs(self.configs, command)
        if op == "delete_group":
            self.offsets.pop(group, None)
            self.groups.pop(group, None)
            self.consumer_groups.pop(group, None)
            return None
        if op == "delete_offsets":
            names = command.get("streams")
            if not isinstance(names, list):
                return "delete_offsets: streams must be a list"
            stored = self.offsets.get(group, {})
            for name in names:
                stored.pop(name, None)
            if not stored:
                self.offsets.pop(group, None)
            return None
        return f"unknown group command {op}"

    def _commit(self, group: str, command: dict[str, Any], streams: set[str]) -> str | None:
        ts, offsets = command.get("ts"), command.get("offsets")
        if not isinstance(ts, int) or not isinstance(offsets, dict):
            return "commit_offsets: bad ts or offsets"
        stored = self.offsets.setdefault(group, {})
        for stream, value in offsets.items():
            # A stream deleted between the proposal and now: its offset would outlive it.
            if stream not in streams or not isinstance(value, list) or len(value) != 3:
                continue
            offset, epoch, metadata = value
            stored[stream] = CommittedOffset(int(offset), int(epoch), metadata, ts)
        if not stored:
            self.offsets.pop(group, None)
        return None

    def _generation(self, group: str, command: dict[str, Any]) -> str | None:
        try:
            members = tuple(StoredMember.from_json(raw) for raw in command.get("members", []))
            stored = StoredGroup(group, int(command["generation"]), command.get("protocol_type"),
                                 command.get("protocol"), command.get("leader"), members, int(command["ts"]))
        except (KeyError, TypeError, ValueError) as error:
            return f"group_generation: {error!r}"
        current = self.groups.get(group)
        if current is not None and current.generation_id > stored.generation_id:
            return None  # a late proposal from an older coordinator: the newer generation stays
        self.groups[group] = stored
        if self.empty_consumer_group(group) is not None:
            del self.consumer_groups[group]  # a classic member took the empty KIP-848 group's id over
        return None

    def _consumer_group_empty(self, group: str, command: dict[str, Any]) -> str | None:
        state = command.get("state")
        if not isinstance(state, dict) or state.get("members"):
            return "consumer_group_empty: state must be an object without members"
        if group not in self.offsets:
            self.consumer_groups.pop(group, None)  # nothing committed: nothing keeps the group
            return None
        self.consumer_groups[group] = state
        stored = self.groups.get(group)
        if stored is not None and not stored.members:
            del self.groups[group]  # the id was an empty classic group's before: it is a KIP-848 group's now
        return None

    def _expire(self, command: dict[str, Any]) -> str | None:
        now, retention = command.get("now"), command.get("retention_ms")
        if not isinstance(now, int) or not isinstance(retention, int):
            return "expire_offsets: bad now or retention_ms"
        live = set(command.get("live", []))
        for group in self.expired_groups(now, retention, live):
            self.offsets.pop(group, None)
            stored = self.groups.get(group)
            if stored is not None and not stored.members:
                self.groups.pop(group)
            self._drop_empty_groups(group)
        return None

    def drop_stream(self, stream: str) -> None:
        """A deleted stream's offsets go with it (Kafka removes a deleted topic's offsets)."""
        for group in [g for g, offsets in self.offsets.items() if stream in offsets]:
            del self.offsets[group][stream]
            if not self.offsets[group]:
                del self.offsets[group]


# ---------------------------------------------------------------------------------- commands


def commit_offsets_command(group: str, ts_ms: int, offsets: dict[str, tuple[int, int, str | None]]) -> dict[str, Any]:
    return {"op": "commit_offsets", "group": group, "ts": ts_ms,
            "offsets": {stream: list(value) for stream, value in offsets.items()}}


def group_generation_command(group: str, ts_ms: int, generation: int, protocol_type: str | None,
                             protocol: str | None, leader: str | None, members: list[StoredMember]) -> dict[str, Any]:
    return {"op": "group_generation", "group": group, "ts": ts_ms, "generation": generation,
            "protocol_type": protocol_type, "protocol": protocol, "leader": leader,
            "members": [m.to_json() for m in members]}


def delete_group_command(group: str) -> dict[str, Any]:
    return {"op": "delete_group", "group": group}


def delete_offsets_command(group: str, streams: list[str]) -> dict[str, Any]:
    return {"op": "delete_offsets", "group": group, "streams": list(streams)}


def expire_offsets_command(now_ms: int, retention_ms: int, live: list[str]) -> dict[str, Any]:
    return {"op": "expire_offsets", "now": now_ms, "retention_ms": retention_ms, "live": sorted(live)}


def consumer_group_command(group: str, state: dict[str, Any] | None) -> dict[str, Any]:
    return {"op": "consumer_group", "group": group, "state": state}


def consumer_group_empty_command(group: str, state: dict[str, Any]) -> dict[str, Any]:
    return {"op": "consumer_group_empty", "group": group, "state": state}


GROUP_OPS = frozenset({"commit_offsets", "group_generation", "delete_group", "delete_offsets", "expire_offsets",
                       "consumer_group", "consumer_group_empty"}) | GROUP_CONFIG_OPS


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text) if text else b""
