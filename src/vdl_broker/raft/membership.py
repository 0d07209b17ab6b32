"""Raft membership: learners and single-server configuration changes (Raft thesis ch. 4).

A configuration (ConfState) is a set of voters and a set of learners. Voters elect leaders and
make up the commit quorum (a majority of the voters); learners receive the log like any
follower but never vote, never campaign (save one case, under Rule 4 below) and never count
toward a commit or the leader's CheckQuorum and read lease. A new replica joins as a learner,
is promoted once it has caught up, and a replica leaves by being removed (a voter may first be
demoted to learner).

Configurations live in the log: a CONFIG entry carries a whole configuration (not a delta), and
**a node uses the latest configuration in its log, committed or not** (thesis §4.1). When a
conflicting append cuts the log, the node falls back to the latest configuration left in it.

Rules the leader follows (RaftNode.propose_conf_change refuses anything else):
1. One voter at a time: the new voter set differs from the current one by at most one node
   (learners may come and go freely: they are in no quorum).
2. At most one configuration change in flight: a new CONFIG entry is appended only once the
   previous one is committed.
3. The leader first commits an entry of its own term (its no-op): Ongaro's 2015 fix to the
   single-server algorithm (raft-dev, "bug in single-server membership changes").
4. The leader stays a voter: to remove the leader, transfer leadership first.

Safety argument. Election safety and Leader Completeness rest on any two quorums that can act
intersecting. Rule 1 gives that for two *adjacent* configurations C and C' = C +/- one voter:
with n voters in the smaller one, a majority of C (>= floor(n/2)+1 of n) and a majority of C'
(>= floor((n+1)/2)+1 of n+1) together exceed the n+1 nodes involved, so they share a node; that
node votes once per term and only for up-to-date logs, so no two leaders of one term, one
elected under C and one under C', can both win (thesis §4.1). Rule 2 keeps the configurations
in use at any moment to two adjacent ones: a new configuration is appended only after the
previous one is committed, i.e. held by a majority of it, and by the log-matching / up-to-date
arguments every later leader holds it (Leader Completeness) and so never uses anything older.
Rule 3 closes the hole Ongaro found: without it, a leader of term T whose log lacks a change
C1 -> C2 appended by a deposed leader of term T-1 (uncommitted, held by a minority) could append
its own C1 -> C3; C2 and C3 are both adjacent to C1 but not to each other, so a leader elected
under C2 (by nodes holding the deposed entry) and one elected under C3 could coexist in a later
term. Once the new leader has committed an entry of term T under C1, a majority of C1 holds logs
ending in term >= T; a candidate whose log ends with C2 (term T-1) needs a majority of C2, which
(C2 being adjacent to C1) contains one of those nodes, which refuses it as less up to date. The
deposed change can then never take effect, and C3 is adjacent to the only configuration left.
Rule 4 keeps the leader among the voters whose majority it counts. The one leader outside them
is a node the latest configuration took out, elected before that configuration committed (it
may be the only one holding it: election.py, thesis §4.2.2): it never counts itself, and it
steps down once that configuration commits (replication.py). A removed voter stops receiving
entries and, not knowing it was removed (or that its removal committed), may time out and
campaign: it campaigns with PreVote and the leader lease (CheckQuorum), so members that hear
from the leader ignore it, and its log lacks what was committed after it left, so nobody up to
date votes for it.

Learners never count, so adding one never changes a quorum; promoting a learner that has not
caught up would (it must then be counted), which is why the driver promotes only learners
whose match index is close to the leader's commit.

Where the configuration is kept. It is in the log, but retention deletes old entries and a log
reset (a follower too far behind) starts the log after them: so each node also keeps its
configuration records (index, term, configuration) in a small file next to the log, written
by the driver before the entries it describes (Ready.membership; persistence.save_membership),
and the log start point itself carries the configuration in force there (SnapshotMeta.conf,
sent with every log reset). `Membership` below holds the records: the latest record at or
before the log start (the base, standing for every deleted entry) and every CONFIG entry after
it. At start the records are checked against the log (a record whose entry is not in the log
with that term is dropped: the file is written before the log, so it may name a torn entry);
record 0 is the configuration the group was created with (a joining node has none: it knows
no voters, so it never campaigns, until its leader's entries or log reset tell it). A node whose
file is unreadable is in the same place -- guessing its voters could split the group -- but the
entries that would tell it are behind it: its answers ask the leader to append the configuration
in force again (ConfChanges.reassert_conf), which it adopts and saves like any.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence

from vdl_broker.raft.types import ConfigRecord, ConfState, Entry, EntryType, RaftError, SnapshotMeta


class ConfigChangeError(RaftError):
    """A configuration change the rules above refuse (or cannot accept yet)."""


def encode_conf(conf: ConfState) -> bytes:
    """The payload of a CONFIG entry."""
    return json.dumps({"voters": list(conf.voters), "learners": list(conf.learners)},
                      separators=(",", ":")).encode()


def decode_conf(payload: bytes | bytearray | memoryview) -> ConfState | None:
    """The configuration of a CONFIG entry (None when the payload is not one)."""
    try:
        raw = json.loads(bytes(payload))
        voters, learners = raw["voters"], raw.get("learners", [])
        return make_conf(voters, learners)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None


def make_conf(voters: Iterable[int], learners: Iterable[int] = ()) -> ConfState:
    """A normalized ConfState (sorted, no duplicates, a voter is never also a learner);
    raises ValueError for ids that are not positive integers."""
    voter_set = set(voters)
    learner_set = set(learners) - voter_set
    for node in voter_set | learner_set:
        if isinstance(node, bool) or not isinstance(node, int) or node <= 0:
            raise ValueError(f"node ids must be positive integers, got {node!r}")
    return ConfState(tuple(sorted(voter_set)), tuple(sorted(learner_set)))


def check_change(current: ConfState, proposed: ConfState, leader: int) -> None:
    """Raise ConfigChangeError unless `proposed` may follow `current` (rules 1 and 4)."""
    if not proposed.voters:
        raise ConfigChangeError("a configuration needs at least one voter")
    if set(proposed.voters) & set(proposed.learners):
        raise ConfigChangeError("a node cannot be both voter and learner")
    changed = set(current.voters) ^ set(proposed.voters)
    if len(changed) > 1:
        raise ConfigChangeError(f"one voter at a time: {list(current.voters)} -> {list(proposed.voters)} "
                                f"changes {sorted(changed)}")
    if leader not in proposed.voters:
        raise ConfigChangeError(f"the leader ({leader}) cannot leave the voters: transfer leadership first")


class Membership:
    """The configuration records of one node's log (see the module docstring)."""

    def __init__(self, bootstrap: ConfState, records: Sequence[ConfigRecord], first_index: int, last_index: int,
                 term_at: Callable[[int], int]) -> None:
        self.bootstrap = bootstrap
        start = first_index - 1
        kept: list[ConfigRecord] = []
        for record in sorted(records, key=lambda r: r.index):
            if record.index < start:
                kept.append(record)  # below the log start: its entry is gone (committed)
            elif record.index <= last_index and _term(term_at, record.index) == record.term:
                kept.append(record)
            # else: the file named an entry the log does not hold (a torn tail, a cut conflict)
        self.records = kept
        self.version = 0
        self._dirty = list(records) != kept
        self.prune(first_index)

    @property
    def current(self) -> ConfState:
        return self.records[-1].conf if self.records else self.bootstrap

    @property
    def last_index(self) -> int:
        """Index of the latest configuration record (0: the bootstrap one)."""
        return self.records[-1].index if self.records else 0

    def conf_at(self, index: int) -> ConfState:
        """The configuration in force at log index `index`."""
        for record in reversed(self.records):
            if record.index <= index:
                return record.conf
        return self.bootstrap

    def on_append(self, entries: Sequence[Entry]) -> None:
        """Entries replace the log from entries[0].index on: records there go, CONFIG entries come."""
        if not entries:
            return
        self.truncate_from(entries[0].index)
        for entry in entries:
            if entry.type == EntryType.CONFIG:
                # A payload that is no configuration changes nothing, on every node alike.
                conf = decode_conf(entry.data) or self.current
                self.records.append(ConfigRecord(entry.index, entry.term, conf))
                self._changed()

    def truncate_from(self, index: int) -> None:
        """The log lost its entries from `index` on: so do the records."""
        if self.records and self.records[-1].index >= index:
            self.records = [r for r in self.records if r.index < index]
            self._changed()

    def on_restore(self, snap: SnapshotMeta) -> None:
        """The log now starts after `snap`: its configuration is the base."""
        if snap.conf is not None:
            self.records = [ConfigRecord(snap.index, snap.term, snap.conf)]
        else:
            self.records = [r for r in self.records if r.index <= snap.index]
        self._changed()

    def prune(self, first_index: int) -> None:
        """Forget records older than the base (the latest one at or before the log start)."""
        start = first_index - 1
        base = 0
        for position, record in enumerate(self.records):
            if record.index <= start:
                base = position
        if base:
            self.records = self.records[base:]
            self._changed()

    def take_changed(self, first_index: int) -> list[ConfigRecord] | None:
        """The records to save if they changed since the last call (else None)."""
        if not self._dirty:
            return None
        self.prune(first_index)
        self._dirty = False
        return list(self.records)

    def _changed(self) -> None:
        self.version += 1
        self._dirty = True


def _term(term_at: Callable[[int], int], index: int) -> int | None:
    try:
        return term_at(index)
    except (LookupError, RaftError, ValueError):
        return None
