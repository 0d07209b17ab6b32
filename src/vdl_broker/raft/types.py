"""Value types of the Raft core: entries, messages, hard/soft state, the Ready bundle, errors.

The core owns them and imports nothing else of ours: the log (vdl_broker.log) stores this Entry
as it is, and the driver (vdl_broker.raft.group) passes entries between the two unconverted.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import crc32c

from vdl_broker.raft.crc_extend import crc32c_combine

__all__ = [
    "NONE", "CompactedError", "ConfState", "ConfigRecord", "Damage", "Entry", "EntryType", "HardState", "Message",
    "MessageType", "NotLeaderError", "ProposalDroppedError", "RaftError", "Ready", "Role", "SnapshotMeta",
    "SoftState", "entry_checksum",
]

NONE = 0  # "no node": node ids are positive integers


class EntryType(IntEnum):
    """Stored as one byte in every entry header and sent as-is on the Raft wire: never renumber."""

    DATA = 1  # one RecordBatch v2 with absolute offsets: the only type that takes Kafka offsets
    NOOP = 2  # a new leader's first entry of its term
    CONFIG = 3  # a Raft configuration (vdl_broker.raft.membership)
    METADATA = 4  # a command of the metadata Raft group
    LOG_START = 5  # a stream's new log start offset (DeleteRecords): int64 big-endian; takes no offsets


@dataclass(slots=True)
class Entry:
    """One Raft log entry. `data` (the entry's payload) is never copied: bytes, a memoryview or a
    bytearray nothing changes (the log's own buffer: it keeps no view of each).

    An entry decoded from a Raft frame also names the frame and where its payload starts in it
    (data is frame[start:start + len(data)]): the log's tail cache keeps the frame once and the
    span, not `data`, a view per entry (~180 B each). Not part of the entry's value."""

    index: int
    term: int
    type: EntryType = EntryType.DATA
    data: bytes | bytearray | memoryview = b""
    frame: memoryview | None = field(default=None, compare=False, repr=False)
    start: int = field(default=0, compare=False, repr=False)
    # entry_checksum's answer, once something asked (or the Raft frame the entry came in carried
    # it, checked): the log's append and each follower's frame use one pass over the payload.
    crc: int | None = field(default=None, compare=False, repr=False)
    # (position, CRC32C of data[position:]) when its proposer checked that much of the payload
    # already (a record batch's own CRC): entry_checksum extends it instead of reading it again.
    known_crc: tuple[int, int] | None = field(default=None, compare=False, repr=False)


# What an entry's checksum covers before its payload: type, term, index, payload length.
_CHECKSUMMED_FIELDS = struct.Struct("<BqqI")
# Below this many bytes a known CRC is not worth extending: the hardware CRC reads them in about
# the time crc32c_combine takes (a few microseconds).
_EXTEND_FROM = 64 << 10


def entry_checksum(entry: Entry) -> int:
    """The CRC32C of the entry's type, term, index and payload length (little-endian, as the
    log's entry header holds them after the checksum: vdl_broker.log.entry) and of its payload.
    The log stores an entry under it and the Raft wire carries it (vdl_broker.raft.wire), so it is
    computed once per entry on its leader and checked once on each follower, then kept in
    Entry.crc: an entry's fields and payload never change once it has an index. With
    Entry.known_crc, the payload's checked part is not read again."""
    crc = entry.crc
    if crc is None:
        data = entry.data
        head = crc32c.crc32c(_CHECKSUMMED_FIELDS.pack(entry.type, entry.term, entry.index, len(data)))
        known = entry.known_crc
        if known is not None and len(data) - known[0] >= _EXTEND_FROM:
            position, rest = known
            crc = crc32c_combine(crc32c.crc32c(data[:position], head), rest, len(data) - position)
        else:
            crc = crc32c.crc32c(data, head)
        entry.crc = crc
    return crc


class Role(IntEnum):
    FOLLOWER = 0
    PRE_CANDIDATE = 1
    CANDIDATE = 2
    LEADER = 3


@dataclass(frozen=True, slots=True)
class HardState:
    """What must be durable before any message of the same Ready is sent (Raft §5.1/Fig. 2)."""

    term: int = 0
    voted_for: int = NONE


EXTENT_UNKNOWN = -1  # Damage.through_index when nothing tells how much log was lost
# APPEND_RESPONSE success: log_term (unused there otherwise) = this; the follower lost its
# configuration records (a damaged file: confchange.py, ConfChanges.reassert_conf).
CONF_UNKNOWN = -1


@dataclass(frozen=True, slots=True)
class Damage:
    """What a node knows it lost to storage damage (not to a torn, never-acknowledged tail).

    `through_index`: the highest log index it had durably held (and so may have acknowledged or
    voted with) before the damage; its log now ends below it. 0 = the log is intact;
    EXTENT_UNKNOWN = how far the lost log reached is unknown (its whole directory was lost, or
    the damage record is unreadable).
    `hard_state_lost`: its term/vote file was unreadable; `term_bound` is the highest term it
    can prove (its log's last term): it may have voted in that term or any later one."""

    through_index: int = 0
    hard_state_lost: bool = False
    term_bound: int = 0


@dataclass(frozen=True, slots=True)
class SoftState:
    """Volatile state the driver may want to react to (leader changes)."""

    role: Role
    leader_id: int


@dataclass(frozen=True, slots=True)
class ConfState:
    """A Raft configuration: the voters (elections, commit quorum) and the learners (receive the
    log, never vote or count). See vdl_broker.raft.membership."""

    voters: tuple[int, ...] = ()
    learners: tuple[int, ...] = ()

    @property
    def members(self) -> tuple[int, ...]:
        return tuple(sorted({*self.voters, *self.learners}))


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    """The configuration that takes effect at log index `index` (entry term `term`); index 0 is
    the configuration a group was created with."""

    index: int
    term: int
    conf: ConfState


@dataclass(frozen=True, slots=True)
class SnapshotMeta:
    """A log start point: entries up to `index` are gone; `term` is the term at `index`.

    `data` is opaque to the core: the leader's driver fills it when sending (the Kafka start
    offset of entry index+1) and the follower's driver passes it to StreamLog.reset(index + 1,
    term, data). `conf` is the configuration in force at `index` (the core fills it: the
    entries that held it are gone)."""

    index: int
    term: int
    data: Any = None
    conf: ConfState | None = None


class MessageType(IntEnum):
    """Stable numbering: the transport may encode it on the wire."""

    APPEND = 1
    APPEND_RESPONSE = 2
    HEARTBEAT = 3
    HEARTBEAT_RESPONSE = 4
    VOTE = 5
    VOTE_RESPONSE = 6
    PRE_VOTE = 7
    PRE_VOTE_RESPONSE = 8
    SNAPSHOT = 9
    TIMEOUT_NOW = 10


@dataclass(slots=True)
class Message:
    """One Raft message. Field use per type:

    APPEND: index/log_term = index and term of the entry before `entries`; commit = leader commit.
    APPEND_RESPONSE: success -> index = follower's last matching index, log_term = CONF_UNKNOWN
        when it lost its configuration records (else 0); reject -> index = the rejected
        APPEND's `index`, reject_hint/log_term = follower's hint (conflict index/term).
    HEARTBEAT: commit = min(leader commit, follower match); index = the leader's tick count when
        sent; quiesce = the leader stops ticking (commit = its last index): quiesce too if caught
        up. HEARTBEAT_RESPONSE: index = that tick, echoed (the leader's read lease; -1 = none: a
        woken follower waking its leader); commit = the follower's own tick count (the leader's
        clock-drift check: vdl_broker.raft.clock); quiesce = the follower quiesced too.
    VOTE / PRE_VOTE: index/log_term = candidate's last index and term; force = leadership
        transfer (ignore the leader lease). *_RESPONSE: reject.
    SNAPSHOT: snapshot = the leader's log start point (driver fills snapshot.data).
    TIMEOUT_NOW: campaign now (leadership transfer target); index/log_term = the leader's last
        entry, which the target held when it was sent (0: a leader that names none).
    """

    type: MessageType
    to: int
    sender: int
    term: int
    log_term: int = 0
    index: int = 0
    entries: Sequence[Entry] = ()
    commit: int = 0
    reject: bool = False
    reject_hint: int = 0
    snapshot: SnapshotMeta | None = None
    force: bool = False
    quiesce: bool = False


@dataclass(slots=True)
class Ready:
    """One bundle of work for the driver; see the driver contract in vdl_broker.raft.

    Order: (0) `early_messages` may be sent at once, (1) install `snapshot` (StreamLog.reset),
    (2) truncate the log at entries[0].index if that index is <= the stored last index, append
    `entries`, (3) save `hard_state`, (4) sync -- only then (5) send `messages`, (6) apply
    `committed_entries`, (7) advance()."""

    soft_state: SoftState | None = None
    hard_state: HardState | None = None
    snapshot: SnapshotMeta | None = None
    entries: list[Entry] = field(default_factory=list)
    committed_entries: list[Entry] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    # Leader-to-follower messages (APPEND, HEARTBEAT, SNAPSHOT, TIMEOUT_NOW) of a term whose
    # hard state is already durable: they may leave BEFORE this Ready's sync, so the leader's
    # disk write overlaps replication (Raft thesis §10.2.1). Sending them later is also correct.
    early_messages: list[Message] = field(default_factory=list)
    # Every configuration record of the log when they changed (CONFIG entries appended or cut,
    # a log reset): the driver saves them (persistence.save_membership) before step (1).
    membership: list[ConfigRecord] | None = None

    @property
    def must_sync(self) -> bool:
        """True when step (4) above needs an fsync before the messages may leave."""
        return bool(self.entries) or self.hard_state is not None or self.snapshot is not None


class RaftError(Exception):
    """Base class of the core's errors."""


class NotLeaderError(RaftError):
    """propose()/transfer_leadership() on a node that is not the leader (leader_id may be NONE)."""

    def __init__(self, leader_id: int, message: str = "not the leader") -> None:
        super().__init__(f"{message} (leader: {leader_id or 'unknown'})")
        self.leader_id = leader_id


class ProposalDroppedError(NotLeaderError):
    """The leader is transferring leadership and refuses new proposals meanwhile."""


class CompactedError(RaftError):
    """The requested entries precede the log start (removed by retention or a reset)."""
