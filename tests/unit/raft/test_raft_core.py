"""Unit tests of the core's pieces: RaftLog over storage + unstable entries, flow control, Ready."""

from __future__ import annotations

import random

import pytest
from raft_sim import NO_QUIESCE, build_storage

from vdl_broker.raft import (
    CompactedError,
    Entry,
    EntryType,
    HardState,
    MemoryStorage,
    Message,
    MessageType,
    RaftConfig,
    RaftError,
    RaftNode,
    Role,
    SnapshotMeta,
)
from vdl_broker.raft.log import RaftLog


def test_raft_log_overlays_unstable_entries_on_storage() -> None:
    log = RaftLog(build_storage([1, 1, 2]))
    assert (log.first_index(), log.last_index(), log.last_term()) == (1, 3, 2)
    log.append([Entry(3, 3, EntryType.DATA, b"x"), Entry(4, 3, EntryType.DATA, b"y")])
    assert [log.term(i) for i in range(0, 6)] == [0, 1, 1, 3, 3, None]
    assert [(e.index, e.term) for e in log.entries(1, 5)] == [(1, 1), (2, 1), (3, 3), (4, 3)]
    log.stable_to(4, 2)  # wrong term: the entries were replaced meanwhile
    assert log.offset == 3
    log.stable_to(4, 3)
    assert log.offset == 5 and not log.unstable


def test_raft_log_entries_respect_max_bytes_across_storage_and_unstable() -> None:
    storage = MemoryStorage()
    storage.append([Entry(i, 1, EntryType.DATA, b"abcd") for i in (1, 2)])
    log = RaftLog(storage)
    log.append([Entry(3, 1, EntryType.DATA, b"abcd"), Entry(4, 1, EntryType.DATA, b"abcd")])
    assert [e.index for e in log.entries(1, 5, max_bytes=12)] == [1, 2, 3]
    assert [e.index for e in log.entries(1, 5, max_bytes=1)] == [1]  # at least one entry
    assert [e.index for e in log.entries(3, 5, max_bytes=1)] == [3]
    assert [e.index for e in log.entries(2, 5, max_bytes=4)] == [2]


def test_raft_log_compacted_reads_raise_and_snapshot_point_has_a_term() -> None:
    storage = build_storage([1, 1, 2, 2])
    storage.compact(3)
    log = RaftLog(storage)
    assert log.first_index() == 3 and log.committed == 2
    assert log.term(2) == 1 and log.term(1) is None
    with pytest.raises(CompactedError):
        log.entries(2, 4)


def test_find_conflict_by_term_skips_whole_terms() -> None:
    log = RaftLog(build_storage([1, 1, 1, 4, 4, 5, 5, 6, 6, 6]))
    assert log.find_conflict_by_term(10, 3) == (3, 1)
    assert log.find_conflict_by_term(10, 5) == (7, 5)
    assert log.find_conflict_by_term(10, 6) == (10, 6)
    assert log.find_conflict_by_term(2, 0) == (0, 0)


def test_restore_hides_storage_until_installed() -> None:
    log = RaftLog(build_storage([1, 1, 1]))
    snap = SnapshotMeta(10, 3)
    log.restore(snap)
    assert (log.first_index(), log.last_index(), log.last_term(), log.committed) == (11, 10, 3, 10)
    assert log.term(2) is None


def _node(node_id: int = 2, voters=(1, 2, 3), storage: MemoryStorage | None = None) -> RaftNode:
    return RaftNode(node_id, voters, storage or MemoryStorage(), NO_QUIESCE, rng=random.Random(1))


def _append(term: int, prev: int, prev_term: int, entries: list[tuple[int, int]], commit: int = 0) -> Message:
    ents = [Entry(i, t, EntryType.DATA, b"d%d" % i) for i, t in entries]
    return Message(MessageType.APPEND, 2, 1, term, log_term=prev_term, index=prev, entries=ents, commit=commit)


def test_stepping_between_ready_and_advance_with_a_conflicting_append() -> None:
    storage = MemoryStorage()
    node = _node(storage=storage)
    node.step(_append(1, 0, 0, [(1, 1), (2, 1), (3, 1)]))
    rd = node.ready()
    assert [e.index for e in rd.entries] == [1, 2, 3]
    # While the driver syncs, a new leader (term 2) replaces entries 2-3.
    node.step(Message(MessageType.APPEND, 2, 3, 2, log_term=1, index=1, entries=[Entry(2, 2, EntryType.DATA, b"n")]))
    with pytest.raises(RaftError):
        node.ready()
    storage.append(rd.entries)
    storage.hard_state = rd.hard_state or storage.hard_state
    node.advance(rd)
    rd2 = node.ready()
    assert [(e.index, e.term) for e in rd2.entries] == [(2, 2)]  # the driver truncates at 2
    assert [m.index for m in rd2.messages if m.type == MessageType.APPEND_RESPONSE] == [2]
    storage.append(rd2.entries)
    node.advance(rd2)
    assert [(e.index, e.term) for e in storage.all_entries()] == [(1, 1), (2, 2)]
    assert not node.has_ready()


def test_appends_that_arrive_together_are_answered_once_by_the_last_index() -> None:
    storage = MemoryStorage()
    node = _node(storage=storage)
    # A pipelined burst: three appends (one of them empty, a commit notice) before one Ready.
    node.step(_append(1, 0, 0, [(1, 1), (2, 1)]))
    node.step(_append(1, 2, 1, [(3, 1)]))
    node.step(_append(1, 3, 1, [], commit=3))
    rd = node.ready()
    assert [e.index for e in rd.entries] == [1, 2, 3]
    assert [(m.type, m.to, m.index, m.reject) for m in rd.messages] == [(MessageType.APPEND_RESPONSE, 1, 3, False)]
    storage.append(rd.entries)
    storage.hard_state = rd.hard_state or storage.hard_state
    node.advance(rd)
    # An answer already handed to the driver is never widened: the next append gets its own.
    node.step(_append(1, 3, 1, [(4, 1)]))
    rd2 = node.ready()
    assert [(m.index, m.reject) for m in rd2.messages if m.type == MessageType.APPEND_RESPONSE] == [(4, False)]
    assert [(m.index, m.reject) for m in rd.messages] == [(3, False)]


def test_follower_rejects_with_conflict_hint() -> None:
    node = _node(storage=build_storage([1, 1, 2, 2, 2]))
    node.step(_append(3, 5, 3, []))
    rd = node.ready()
    [resp] = rd.messages
    assert resp.reject and resp.index == 5 and (resp.reject_hint, resp.log_term) == (5, 2)


def test_append_at_committed_index_is_acknowledged_without_changes() -> None:
    storage = build_storage([1, 1, 1])
    node = _node(storage=storage)
    node.step(_append(1, 3, 1, [], commit=3))
    node.advance(node.ready())
    node.step(_append(1, 1, 1, [(2, 1)]))  # old, duplicated append below the commit index
    [resp] = node.ready().messages
    assert not resp.reject and resp.index == 3


def test_single_node_cluster_commits_alone() -> None:
    storage = MemoryStorage()
    node = RaftNode(1, [1], storage, NO_QUIESCE, rng=random.Random(3))
    for _ in range(25):
        node.tick()
    assert node.role == Role.LEADER
    applied: list[bytes] = []
    index = node.propose(b"solo")
    for _ in range(3):
        rd = node.ready()
        storage.append(rd.entries)
        applied += [bytes(e.data) for e in rd.committed_entries if e.type == EntryType.DATA]
        node.advance(rd)
    assert applied == [b"solo"] and node.commit_index == index


def test_config_validation() -> None:
    RaftNode(4, [1, 2, 3], MemoryStorage())  # a node outside the bootstrap voters joins later (learner)
    with pytest.raises(ValueError):
        RaftNode(0, [1, 2, 3], MemoryStorage())
    with pytest.raises(ValueError):
        RaftNode(1, [1, -2, 3], MemoryStorage())
    with pytest.raises(ValueError):
        RaftConfig(election_ticks=1, heartbeat_ticks=1).validate()


def test_lease_ignores_disruptive_votes_but_transfer_forces_them() -> None:
    node = _node(storage=build_storage([1]))
    node.step(_append(1, 1, 1, [], commit=1))
    node.advance(node.ready())
    node.step(Message(MessageType.VOTE, 2, 3, 5, log_term=1, index=1))
    assert node.term == 1 and not node.has_ready()  # ignored: we just heard from leader 1
    node.step(Message(MessageType.VOTE, 2, 3, 5, log_term=1, index=1, force=True))
    rd = node.ready()
    assert rd.hard_state == HardState(5, 3)
    assert [(m.type, m.reject) for m in rd.messages] == [(MessageType.VOTE_RESPONSE, False)]
