"""Consumer groups of the new protocol (KIP-848, `group.protocol=consumer`): the coordinator
assigns partitions itself and members converge on their target assignment incrementally, one
ConsumerGroupHeartbeat at a time.

Sans-IO: every call takes the time (`now_ms`) and the streams that exist; nothing here sleeps,
schedules or touches the network. The caller runs `expire(now_ms)` now and then (sessions and
revocations that ran out) and replicates `on_changed` groups (groups/service.py).

The model, after KIP-848 ("Group Epoch - Assignment Epoch - Member Epoch"):
- the *group epoch* goes up whenever members or their subscriptions change (or a subscribed
  stream appears or goes), and the *target assignment* is recomputed at that epoch by the
  server-side assignor (every stream has one partition, 0);
- each member has a *member epoch* and the partitions it owns. A member whose owned partitions
  include some outside its target is first told to revoke them (its epoch stays); once its
  heartbeat shows it let them go, it moves to the target epoch and gets the target partitions
  that no other member still owns; those still owned elsewhere follow on a later heartbeat.
So a partition is never owned by two members at once.
"""

from __future__ import annotations

import enum
import re
import struct
import uuid
import warnings
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from vdl_wire.errors import ErrorCode

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # re's own parser, under its old name
    import sre_parse

# KIP-848: member epoch 0 joins, -1 leaves, -2 leaves temporarily (a static member).
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
ASSIGNORS = ("uniform", "range")  # Kafka's server-side assignors; the first is the default


class ConsumerGroupState(enum.Enum):
    """KIP-848's states, as ListGroups and ConsumerGroupDescribe name them."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed: tuple[str, ...]
    server_assignor: str | None
    epoch: int = 0
    previous_epoch: int = -1
    owned: frozenset[str] = frozenset()  # streams (partition 0) the member may consume
    revoking: frozenset[str] = frozenset()  # owned streams it was told to give up
    session_deadline_ms: int = 0
    revoke_deadline_ms: int | None = None
    # SubscribedTopicRegex: `subscribed` is then what it matches, resolved again as streams come
    # and go.
    regex: str | None = None


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, frozenset[str]] = field(default_factory=dict)  # member id -> streams
    subscribed_streams: frozenset[str] = frozenset()  # existing streams some member subscribes to
    assignor: str = ASSIGNORS[0]

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.assignment_epoch != self.group_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(m.epoch != self.assignment_epoch or m.owned != self.target.get(m.member_id, frozenset())
               for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        """The member with this group.instance.id (KIP-345), if any."""
        if instance_id is None:
            return None
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def owner_of(self, stream: str, other_than: str) -> str | None:
        """Who else still holds `stream`: a partition being revoked is held until its member
        says it let it go."""
        return next((m.member_id for m in self.members.values()
                     if m.member_id != other_than and (stream in m.owned or stream in m.revoking)), None)


@dataclass(frozen=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    # The streams the member may consume now; None = unchanged since its last heartbeat.
    assignment: frozenset[str] | None = None


@dataclass(frozen=True)
class ConsumerGroupConfig:
    """A group's consumer.session.timeout.ms and consumer.heartbeat.interval.ms: its own, else
    the node's group.consumer.* settings (cluster/group_configs.py)."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000


@dataclass(frozen=True)
class HeartbeatRequestData:
    """A ConsumerGroupHeartbeat's fields, names as in Kafka's message; None = unchanged."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: frozenset[str] | None = None  # the request's TopicPartitions, by stream name
    client_id: str = ""
    client_host: str = ""


class ConsumerGroupCoordinator:
    """The consumer groups of this coordinator."""

    def __init__(self, config_of: Callable[[str], ConsumerGroupConfig] | None = None,
                 on_changed: Callable[[ConsumerGroup], None] | None = None,
                 new_member_id: Callable[[], str] | None = None,
                 initial_epoch: Callable[[str], int] | None = None) -> None:
        # Each group's config, looked up at each heartbeat: a change applies from the next one.
        self.config_of = config_of or (lambda group_id: ConsumerGroupConfig())
        # The group epoch a group starts from: a group whose members all left resumes its own.
        self._initial_epoch = initial_epoch or (lambda group_id: 0)
        self._groups: dict[str, ConsumerGroup] = {}
        self._on_changed = on_changed or (lambda group: None)
        self._new_member_id = new_member_id or (lambda: str(uuid.uuid4()))

    def group(self, group_id: str) -> ConsumerGroup | None:
        return self._groups.get(group_id)

    def groups(self) -> list[ConsumerGroup]:
        return list(self._groups.values())

    def adopt(self, group: ConsumerGroup, now_ms: int) -> None:
        """A group restored from the metadata on a new coordinator: every member gets a fresh
        session to show up in, with its epoch and assignment as they were."""
        session_timeout_ms = self.config_of(group.group_id).session_timeout_ms
        for member in group.members.values():
            member.session_deadline_ms = now_ms + session_timeout_ms
            if member.revoking:
                member.revoke_deadline_ms = now_ms + member.rebalance_timeout_ms
        self._groups[group.group_id] = group

    def clear(self) -> None:
        self._groups.clear()

    # -- ConsumerGroupHeartbeat ---------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequestData, streams: Collection[str], now_ms: int) -> HeartbeatResult:
        invalid = _invalid(request)
        if invalid is not None:
            return HeartbeatResult(ErrorCode.INVALID_REQUEST, invalid)
        if request.subscribed_topic_regex and compiled_regex(request.subscribed_topic_regex) is None:
            return HeartbeatResult(ErrorCode.INVALID_REGULAR_EXPRESSION,
                                   f"SubscribedTopicRegex {request.subscribed_topic_regex!r} is not a valid regular "
                                   "expression.")
        if request.server_assignor is not None and request.server_assignor not in ASSIGNORS:
            return HeartbeatResult(ErrorCode.UNSUPPORTED_ASSIGNOR,
                                   f"Unknown assignor {request.server_assignor}: {', '.join(ASSIGNORS)} are served.")
        group = self._groups.get(request.group_id)
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(group, request, streams)
        if request.member_epoch == JOIN_EPOCH:
            if group is None:
                epoch = self._initial_epoch(request.group_id)
                group = self._groups[request.group_id] = ConsumerGroup(request.group_id, epoch, epoch)
            member = group.members.get(request.member_id) if request.member_id else None
            static = group.static_member(request.instance_id)
            if member is None and static is not None:
                if static.epoch != STATIC_LEAVE_EPOCH:
                    return HeartbeatResult(ErrorCode.UNRELEASED_INSTANCE_ID,
                                           f"Static member {static.member_id} with instance id {request.instance_id} "
                                           "is present in the consumer group.")
                member = self._replace_static(group, static, request)
            elif member is None:
                member = self._join(group, request)
        else:
            member = group.members.get(request.member_id) if group is not None else None
            static = group.static_member(request.instance_id) if group is not None else None
            if static is not None and static.member_id != request.member_id:
                return HeartbeatResult(ErrorCode.FENCED_INSTANCE_ID,
                                       f"Static member {request.member_id} with instance id {request.instance_id} "
                                       f"was fenced by member {static.member_id}.")
            if group is None or member is None:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                       f"Member {request.member_id} is not a member of group {request.group_id}.")
            fenced = _fenced(member, request)
            if fenced is not None:
                return HeartbeatResult(ErrorCode.FENCED_MEMBER_EPOCH, fenced)
        member.session_deadline_ms = now_ms + self.config_of(group.group_id).session_timeout_ms
        changed = self._update(group, member, request)
        changed |= self._refresh_target(group, streams)
        before = (member.epoch, member.owned, member.revoking)
        assignment_changed = self._reconcile(group, member, request.owned, now_ms)
        changed |= (member.epoch, member.owned, member.revoking) != before
        if changed:
            self._on_changed(group)
        # KIP-848: the assignment goes out when it changed, or when the member (re)joins or
        # reports owning something else than it was given (a lost response).
        send = assignment_changed or request.member_epoch == JOIN_EPOCH or (
            request.owned is not None and request.owned != member.owned)
        return HeartbeatResult(ErrorCode.NONE, None, member.member_id, member.epoch,
                               member.owned if send else None)

    def _join(self, group: ConsumerGroup, request: HeartbeatRequestData) -> ConsumerMember:
        # v1 clients name themselves (KIP-1082); a v0 client gets an id from the coordinator.
        member_id = request.member_id or self._new_member_id()
        member = ConsumerMember(member_id, request.instance_id, request.rack_id, request.client_id,
                                request.client_host, request.rebalance_timeout_ms,
                                tuple(request.subscribed_topic_names or ()), request.server_assignor,
                                regex=request.subscribed_topic_regex or None)
        group.members[member_id] = member
        group.group_epoch += 1
        return member

    def _replace_static(self, group: ConsumerGroup, left: ConsumerMember,
                        request: HeartbeatRequestData) -> ConsumerMember:
        """A static member back after its temporary leave (Kafka: a new member id copying the
        old member, epoch 0): it takes over the old member's target and owned streams, which no
        one else was given meanwhile, so the group epoch does not move and no rebalance runs."""
        member_id = request.member_id or self._new_member_id()
        del group.members[left.member_id]
        member = ConsumerMember(member_id, left.instance_id, left.rack_id, request.client_id, request.client_host,
                                left.rebalance_timeout_ms, left.subscribed, left.server_assignor,
                                epoch=JOIN_EPOCH, previous_epoch=JOIN_EPOCH, owned=left.owned, regex=left.regex)
        group.members[member_id] = member
        if left.member_id in group.target:
            group.target[member_id] = group.target.pop(left.member_id)
        return member

    @staticmethod
    def _update(group: ConsumerGroup, member: ConsumerMember, request: HeartbeatRequestData) -> bool:
        changed = False
        if request.subscribed_topic_regex is not None and (request.subscribed_topic_regex or None) != member.regex:
            # "" drops the regex (the names, if given, are the subscription then); the streams a
            # new regex matches are resolved by _refresh_target.
            member.regex = request.subscribed_topic_regex or None
            if member.regex is None and request.subscribed_topic_names is None:
                member.subscribed = ()
            changed = True
        if request.subscribed_topic_names is not None and member.regex is None:
            subscribed = tuple(sorted(set(request.subscribed_topic_names)))
            if subscribed != tuple(sorted(set(member.subscribed))):
                member.subscribed = subscribed
                changed = True
        if changed:
            group.group_epoch += 1
        if request.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.server_assignor is not None and request.server_assignor != member.server_assignor:
            member.server_assignor = request.server_assignor
            group.group_epoch += 1
            changed = True
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        return changed

    def _refresh_target(self, group: ConsumerGroup, streams: Collection[str]) -> bool:
        """Recompute the target assignment when the group epoch moved past it or the subscribed
        streams that exist changed (one created or deleted)."""
        existing = set(streams)
        for member in group.members.values():
            if member.regex is not None:
                matching = _matching(member.regex, existing)
                if matching != member.subscribed:
                    member.subscribed = matching
                    if group.assignment_epoch == group.group_epoch:  # else a new epoch is due anyway
                        group.group_epoch += 1
        subscribed = frozenset(s for m in group.members.values() for s in m.subscribed if s in existing)
        if subscribed != group.subscribed_streams:
            group.subscribed_streams = subscribed
            if group.assignment_epoch == group.group_epoch:  # else a new epoch is due anyway
                group.group_epoch += 1
        if group.assignment_epoch == group.group_epoch:
            return False
        group.assignor = next((m.server_assignor for m in group.members.values() if m.server_assignor),
                              ASSIGNORS[0])
        group.target = assign(group.members, existing, dict(group.target))
        group.assignment_epoch = group.group_epoch
        return True

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, reported: frozenset[str] | None,
                   now_ms: int) -> bool:
        """Move the member toward its target (Kafka's CurrentAssignmentBuilder); whether what it
        may consume changed."""
        target = group.target.get(member.member_id, frozenset())
        if member.revoking:
            if reported is None or reported & member.revoking:
                return False  # still revoking: nothing new until it lets them go
            member.revoking = frozenset()
            member.revoke_deadline_ms = None
        if member.epoch == group.assignment_epoch and member.owned == target:
            return False
        keep = member.owned & target
        if keep != member.owned:
            # Revoke first, at the current epoch; the new partitions come once it is done.
            member.revoking = member.owned - target
            member.owned = keep
            member.revoke_deadline_ms = now_ms + member.rebalance_timeout_ms
            return True
        free = frozenset(s for s in target if group.owner_of(s, member.member_id) is None)
        before = member.owned
        if member.epoch != group.assignment_epoch:
            member.previous_epoch, member.epoch = member.epoch, group.assignment_epoch
        member.owned = keep | free
        return member.owned != before

    def _leave(self, group: ConsumerGroup | None, request: HeartbeatRequestData,
               streams: Collection[str]) -> HeartbeatResult:
        member = group.members.get(request.member_id) if group is not None else None
        if group is None or member is None:
            return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                   f"Member {request.member_id} is not a member of group {request.group_id}.")
        if request.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # KIP-345 under KIP-848: a static member leaving for a while (a restart) keeps its
            # place and streams, unassigned to anyone else, until its session runs out.
            member.epoch = STATIC_LEAVE_EPOCH
            member.revoking = frozenset()
            member.revoke_deadline_ms = None
            self._on_changed(group)
            return HeartbeatResult(ErrorCode.NONE, None, member.member_id, request.member_epoch)
        self._remove(group, member.member_id, streams)
        return HeartbeatResult(ErrorCode.NONE, None, member.member_id, request.member_epoch)

    def remove_member(self, group_id: str, member_id: str, instance_id: str | None,
                      streams: Collection[str]) -> ErrorCode:
        """A LeaveGroup v3+ member (the admin clients' removeMembersFromConsumerGroup) of a
        consumer group: the member is fenced out as Kafka's classicGroupLeaveToConsumerGroup does;
        named by its instance id alone, the static member holding it (a member id given too
        must be that member's: FENCED_INSTANCE_ID otherwise)."""
        group = self._groups.get(group_id)
        member = None
        if group is not None:
            if instance_id is not None:
                member = next((m for m in group.members.values() if m.instance_id == instance_id), None)
                if member is not None and member_id and member.member_id != member_id:
                    return ErrorCode.FENCED_INSTANCE_ID
            else:
                member = group.members.get(member_id)
        if group is None or member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._remove(group, member.member_id, streams)
        return ErrorCode.NONE

    def _remove(self, group: ConsumerGroup, member_id: str, streams: Collection[str]) -> None:
        group.members.pop(member_id, None)
        group.target.pop(member_id, None)
        group.group_epoch += 1
        self._refresh_target(group, streams)
        self._on_changed(group)
        if not group.members:
            del self._groups[group.group_id]

    # -- time -----------------------------------------------------------------------------------

    def expire(self, now_ms: int, streams: Collection[str]) -> list[tuple[str, str]]:
        """Remove members whose session ran out, or who did not revoke within their rebalance
        timeout (KIP-848: such a member is fenced); the (group, member) pairs removed."""
        removed = []
        for group in list(self._groups.values()):
            for member in list(group.members.values()):
                late = member.revoke_deadline_ms is not None and member.revoke_deadline_ms <= now_ms
                if member.session_deadline_ms <= now_ms or late:
                    removed.append((group.group_id, member.member_id))
                    self._remove(group, member.member_id, streams)
        return removed

    # -- commits ---------------------------------------------------------------------------------

    def check_commit(self, group_id: str, member_id: str, member_epoch: int, version_with_epoch: bool) -> ErrorCode:
        """Whether an OffsetCommit (or OffsetFetch naming a member) may go on for a group of
        this type (Kafka's ConsumerGroup.validateOffsetCommit): the member must exist and
        commit at its current epoch -- FENCED_MEMBER_EPOCH above it, STALE_MEMBER_EPOCH below
        (the client heartbeats, then retries) from OffsetCommit v9 and OffsetFetch v9 (KIP-848),
        the classic ILLEGAL_GENERATION in older versions."""
        group = self._groups.get(group_id)
        if group is None or not group.members:
            return ErrorCode.NONE if member_epoch < 0 and not member_id else ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch > member.epoch:
            return ErrorCode.FENCED_MEMBER_EPOCH if version_with_epoch else ErrorCode.ILLEGAL_GENERATION
        if member_epoch < member.epoch:
            return ErrorCode.STALE_MEMBER_EPOCH if version_with_epoch else ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def check_txn_commit(self, group_id: str, member_id: str, member_epoch: int, instance_id: str | None) -> ErrorCode:
        """Whether a TxnOffsetCommit (v3+, KIP-447) naming this member may put offsets in its
        transaction (Kafka's ConsumerGroup.validateOffsetCommit for a transactional commit): none
        named (no epoch, no member) always may; a named member must be in the group at its
        epoch -- FENCED_MEMBER_EPOCH above it, ILLEGAL_GENERATION below (Kafka turns the stale
        epoch into that for transactional commits)."""
        group = self._groups.get(group_id)
        if (group is None or not group.members) and member_epoch < 0:
            return ErrorCode.NONE
        if member_epoch < 0 and not member_id and instance_id is None:
            return ErrorCode.NONE
        member = group.members.get(member_id) if group is not None else None
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch > member.epoch:
            return ErrorCode.FENCED_MEMBER_EPOCH
        if member_epoch < member.epoch:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE


def _invalid(request: HeartbeatRequestData) -> str | None:
    """KIP-848's request validation (Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid)."""
    if not request.group_id:
        return "GroupId can't be empty."
    if request.member_epoch == JOIN_EPOCH:
        if request.rebalance_timeout_ms < 0:
            return "RebalanceTimeoutMs must be provided in first request."
        if request.owned:
            return "TopicPartitions must be empty when (re-)joining."
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
    elif request.member_epoch > 0 or request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        if not request.member_id:
            return "MemberId can't be empty."
    else:
        return f"MemberEpoch is invalid: {request.member_epoch}."
    return None


# What Python's `re` has and RE2 (Kafka's RE2/J) refuses: lookarounds, backreferences and
# conditionals, atomic groups, possessive repeats (RE2's syntax page lists them as not supported).
_NOT_RE2 = {"ASSERT", "ASSERT_NOT", "GROUPREF", "GROUPREF_EXISTS", "ATOMIC_GROUP", "POSSESSIVE_REPEAT"}


def _re2_refuses(parsed: object) -> bool:
    """Does the parse tree of a pattern (sre_parse's) use a construct RE2 does not have?"""
    if isinstance(parsed, sre_parse.SubPattern):
        return any(_re2_refuses(item) for item in parsed.data)
    if isinstance(parsed, (list, tuple)):
        return any(_re2_refuses(item) for item in parsed)
    return str(parsed) in _NOT_RE2


def compiled_regex(regex: str) -> re.Pattern[str] | None:
    """A SubscribedTopicRegex or a ListTransactions TransactionalIdPattern as Python's `re` reads
    it; None if it does not compile or uses what RE2/J, Kafka's engine, refuses (a lookahead:
    Kafka 4.4 answers INVALID_REGULAR_EXPRESSION)."""
    try:
        compiled = re.compile(regex)
        parsed = sre_parse.parse(regex)
    except re.error:
        return None
    return None if _re2_refuses(parsed) else compiled


def _matching(regex: str, streams: Collection[str]) -> tuple[str, ...]:
    """The streams a regex subscription takes: Kafka matches the whole name."""
    pattern = compiled_regex(regex)
    return tuple(sorted(s for s in streams if pattern is not None and pattern.fullmatch(s)))


def _fenced(member: ConsumerMember, request: HeartbeatRequestData) -> str | None:
    """KIP-848: a member is fenced when its epoch is not the coordinator's, except a member one
    epoch behind whose owned partitions are all still its own (it lost the last response)."""
    if request.member_epoch == member.epoch:
        return None
    if request.member_epoch == member.previous_epoch and request.owned is not None \
            and request.owned <= member.owned | member.revoking:
        return None
    return (f"The consumer group member has a smaller or larger member epoch ({request.member_epoch}) "
            f"than the one known by the group coordinator ({member.epoch}).")


def assign(members: dict[str, ConsumerMember], streams: Collection[str],
           previous: dict[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    """The target assignment: each subscribed stream's partition 0 to one member subscribed to
    it, spread evenly, sticky (a stream stays with its previous owner while that keeps the
    spread even) -- KIP-848's "uniform" assignor for one-partition topics. "range" assigns the
    same here: with one partition per topic it would hand every stream to the first member."""
    existing = set(streams)
    result: dict[str, set[str]] = {member_id: set() for member_id in members}
    wanted = sorted({s for m in members.values() for s in m.subscribed if s in existing})
    if not members:
        return {}
    subscribers = {s: sorted(mid for mid, m in members.items() if s in m.subscribed) for s in wanted}
    # Keep previous owners as long as each member stays within its fair share.
    quota = -(-len(wanted) // len(members))
    unassigned = []
    for stream in wanted:
        owner = next((mid for mid, held in previous.items() if stream in held), None)
        if owner in result and owner in subscribers[stream] and len(result[owner]) < quota:
            result[owner].add(stream)
        else:
            unassigned.append(stream)
    for stream in unassigned:
        owner = min(subscribers[stream], key=lambda mid: (len(result[mid]), mid))
        result[owner].add(stream)
    # Even out what stickiness left uneven (a member joined): move from the fullest to the emptiest.
    while True:
        fullest = max(result, key=lambda mid: (len(result[mid]), mid))
        emptiest = min(result, key=lambda mid: (len(result[mid]), mid))
        movable = sorted(s for s in result[fullest] if emptiest in subscribers[s])
        if len(result[fullest]) - len(result[emptiest]) <= 1 or not movable:
            break
        result[fullest].remove(movable[-1])
        result[emptiest].add(movable[-1])
    return {mid: frozenset(held) for mid, held in result.items()}


# -- the classic consumer protocol's encoding (ConsumerProtocolSubscription/Assignment v0), for
# DescribeGroups: its readers decode member metadata and assignments with it.


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def consumer_subscription(streams: Collection[str]) -> bytes:
    """version 0, topics, user data null."""
    return struct.pack(">hi", 0, len(streams)) + b"".join(_string(s) for s in sorted(streams)) + struct.pack(">i", -1)


def consumer_assignment(streams: Collection[str]) -> bytes:
    """version 0, (topic, [partition 0]) per stream, user data null."""
    body = b"".join(_string(s) + struct.pack(">ii", 1, 0) for s in sorted(streams))
    return struct.pack(">hi", 0, len(streams)) + body + struct.pack(">i", -1)
