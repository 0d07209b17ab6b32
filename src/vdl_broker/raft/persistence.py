"""What a Raft group keeps on disk besides its log: hard state, commit point, configuration records.

Both are small files in the stream's directory, next to its segments. The formats are fixed:
existing data directories must keep opening.

`load_raft_state` also decides whether the node starts *recovering* (vdl_broker.raft.recovery):
the log's damage record (durable data lost), a commit point beyond the log's end (committed
entries this node held are gone, whatever recovery took them for), or an unreadable hard state
(its term and vote are unknown: it must not become "term 0, voted for nobody", which could let
it vote twice in a term). The evidence is recorded in the log's damage record before
the node runs, so a restart mid-recovery resumes it.
"""

from __future__ import annotations

import json
import logging
import struct
from pathlib import Path

import crc32c

from vdl_broker.log import IndexOutOfRange, StreamLog
from vdl_broker.log.damage import UNKNOWN, DamageRecord
from vdl_broker.log.fileio import atomic_write
from vdl_broker.raft.types import EXTENT_UNKNOWN, NONE, ConfigRecord, ConfState, Damage, HardState

logger = logging.getLogger(__name__)

HARD_STATE_FILE = "hard-state"
_HARD_STATE = struct.Struct("<qq")  # term, voted_for (-1 = none)
COMMIT_POINT_FILE = "commit-point"
_COMMIT_POINT = struct.Struct("<qq")  # index, term
_CRC = struct.Struct("<I")  # crc32c of what precedes it


def save_hard_state(directory: Path, state: HardState) -> None:
    """Atomic and durable (temp file, fsync, rename, fsync the directory): Raft's term and vote
    must be on disk before any message that depends on them leaves (Raft §5.1, Figure 2)."""
    body = _HARD_STATE.pack(state.term, -1 if state.voted_for == NONE else state.voted_for)
    atomic_write(Path(directory) / HARD_STATE_FILE, body + _CRC.pack(crc32c.crc32c(body)))


def load_hard_state(directory: Path) -> HardState:
    """The saved state, or HardState() when none was ever saved. A corrupt file raises ValueError:
    guessing a term or a vote could make this node vote twice in one term."""
    path = Path(directory) / HARD_STATE_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return HardState()
    if len(data) != _HARD_STATE.size + _CRC.size:
        raise ValueError(f"{path}: {len(data)} bytes, expected {_HARD_STATE.size + _CRC.size}")
    body = data[: _HARD_STATE.size]
    if _CRC.unpack_from(data, _HARD_STATE.size)[0] != crc32c.crc32c(body):
        raise ValueError(f"{path}: checksum mismatch")
    term, voted_for = _HARD_STATE.unpack(body)
    return HardState(term, NONE if voted_for < 0 else voted_for)


MEMBERSHIP_FILE = "membership"


def save_membership(directory: Path, records: list[ConfigRecord]) -> None:
    """Atomic and durable: the group's configuration records (vdl_broker.raft.membership), as
    JSON `{"records": [[index, term, [voters], [learners]], ...]}` followed by its crc32c."""
    body = json.dumps({"records": [[r.index, r.term, list(r.conf.voters), list(r.conf.learners)] for r in records]},
                      separators=(",", ":")).encode()
    atomic_write(Path(directory) / MEMBERSHIP_FILE, body + _CRC.pack(crc32c.crc32c(body)))


def load_membership(directory: Path) -> list[ConfigRecord] | None:
    """The saved records, or None when none were ever saved. An unreadable file raises
    ValueError: the caller must not guess a configuration (it could make this node campaign
    among voters that are no longer the group's)."""
    path = Path(directory) / MEMBERSHIP_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    body = data[:-_CRC.size]
    if len(data) < _CRC.size or _CRC.unpack_from(data, len(body))[0] != crc32c.crc32c(body):
        raise ValueError(f"{path}: checksum mismatch")
    try:
        raw = json.loads(body)
        return [ConfigRecord(int(index), int(term), ConfState(tuple(voters), tuple(learners)))
                for index, term, voters, learners in raw["records"]]
    except (ValueError, TypeError, KeyError) as error:
        raise ValueError(f"{path}: {error}") from None


def save_commit_point(directory: Path, index: int, term: int) -> None:
    """Remember that entry (index, term) is committed. Not fsynced: an old or missing file only
    means a longer replay at the next start."""
    body = _COMMIT_POINT.pack(index, term)
    atomic_write(Path(directory) / COMMIT_POINT_FILE, body + _CRC.pack(crc32c.crc32c(body)), durable=False)


def load_commit_point(log: StreamLog) -> int:
    """An index known committed that this log still holds with the same term (0 if none): the
    core may start with it as applied, skipping the replay of everything before it."""
    try:
        data = (Path(log.directory) / COMMIT_POINT_FILE).read_bytes()
    except FileNotFoundError:
        return 0
    if len(data) != _COMMIT_POINT.size + _CRC.size:
        return 0
    index, term = _COMMIT_POINT.unpack_from(data)
    if _CRC.unpack_from(data, _COMMIT_POINT.size)[0] != crc32c.crc32c(data[:_COMMIT_POINT.size]):
        return 0
    if not log.first_index - 1 <= index <= log.last_index:
        return 0
    try:
        return index if log.term_at(index) == term else 0
    except (IndexOutOfRange, ValueError):
        return 0


def _saved_commit_index(directory: Path) -> int:
    """The commit point's index whatever the log holds now (0 if absent or unreadable)."""
    try:
        data = (Path(directory) / COMMIT_POINT_FILE).read_bytes()
    except FileNotFoundError:
        return 0
    if len(data) != _COMMIT_POINT.size + _CRC.size:
        return 0
    if _CRC.unpack_from(data, _COMMIT_POINT.size)[0] != crc32c.crc32c(data[:_COMMIT_POINT.size]):
        return 0
    return int(_COMMIT_POINT.unpack_from(data)[0])


def load_raft_state(log: StreamLog, voters: int) -> tuple[HardState, Damage | None]:
    """Hard state and Damage (None: intact) for a node starting over `log` in a group of
    `voters`. A single voter has no peer to get lost data back from: it goes on (loudly)."""
    directory = Path(log.directory)
    record = log.damage
    last_term = log.term_at(log.last_index) if log.last_index >= log.first_index - 1 else 0
    try:
        hard_state = load_hard_state(directory)
    except ValueError as error:
        logger.error("%s: hard state unreadable (%s): no votes until caught up with a leader", directory, error)
        hard_state = HardState(last_term, NONE)
        record = DamageRecord(0, last_term).merge(record)
    committed = _saved_commit_index(directory)
    if committed > log.last_index:
        logger.error("%s: commit point %d beyond the log's last index %d: committed entries lost",
                     directory, committed, log.last_index)
        record = DamageRecord(committed).merge(record)
    if record is None:
        return hard_state, None
    if voters <= 1:
        logger.error("%s: storage damage %s and no peer to fetch the lost entries from: going on", directory,
                     record)
        log.clear_damage()
        return hard_state, None
    if record != log.damage:
        log.mark_damaged(record)
    through = EXTENT_UNKNOWN if record.through_index == UNKNOWN else record.through_index
    if record.term_bound >= 0:
        hard_state = HardState(max(hard_state.term, record.term_bound), NONE)
    damage = Damage(through, record.term_bound >= 0, max(record.term_bound, 0))
    return hard_state, damage
