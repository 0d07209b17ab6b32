"""What a Raft group owes its proposers: one Proposal per proposed entry, resolved as the entry
becomes durable on the leader (acks=1), committed and applied (acks=-1), or lost.

A proposal is lost when leadership moves on before its entry commits: its outcome is then
unknown (the entry may still commit under the new leader; Kafka clients retry and idempotent
producers deduplicate), or the entry at its index was replaced by another term's.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

from vdl_broker.raft.types import Entry, NotLeaderError, RaftError, Role


class ProposalLostError(NotLeaderError):
    """The proposal's outcome is unknown or it was discarded: leadership moved on (its entry may
    still commit under the new leader -- Kafka clients retry; idempotent producers deduplicate)."""


class ProposalStorageError(ProposalLostError):
    """This node could not write the proposal's entry (disk full, quota, I/O error) and dropped
    it. Nothing was acknowledged; with other replicas the entry may still commit under a later
    leader if they received it (as for any lost proposal, clients retry)."""


class GroupStoppedError(RaftError):
    """The group was stopped (or failed) while the proposal was pending."""


@dataclass(slots=True)
class Proposal:
    """One proposed entry. `committed` resolves with `index` once committed (and applied here),
    or fails with ProposalLostError / GroupStoppedError. `durable` resolves once the leader's own
    log has synced it (acks=1)."""

    index: int
    term: int
    committed: asyncio.Future[int]
    durable: asyncio.Future[int]


class ProposalTracker:
    """The pending proposals of one group on this node, in index order."""

    def __init__(self, group_name: str) -> None:
        self.group_name = group_name
        self._pending: deque[tuple[int, int, asyncio.Future[int]]] = deque()  # (index, term, committed)
        self._durable_waiters: deque[tuple[int, asyncio.Future[int]]] = deque()

    def track(self, index: int, term: int) -> Proposal:
        loop = asyncio.get_running_loop()
        committed: asyncio.Future[int] = loop.create_future()
        durable: asyncio.Future[int] = loop.create_future()
        # Callers often await only one of the two: never warn about an unretrieved failure.
        committed.add_done_callback(_retrieve)
        durable.add_done_callback(_retrieve)
        self._pending.append((index, term, committed))
        self._durable_waiters.append((index, durable))
        return Proposal(index, term, committed, durable)

    def durable_through(self, durable_index: int) -> None:
        """The leader's own log has synced every entry up to `durable_index`."""
        waiters = self._durable_waiters
        while waiters and waiters[0][0] <= durable_index:
            index, future = waiters.popleft()
            if not future.done():
                future.set_result(index)

    def applied(self, entries: list[Entry], leader_id: int) -> None:
        """`entries` (consecutive, committed) were applied: their proposals commit, unless the
        entry at a proposal's index is another term's (replaced)."""
        last = entries[-1].index
        pending = self._pending
        while pending and pending[0][0] <= last:
            index, term, future = pending.popleft()
            if future.done():
                continue
            entry = entries[index - entries[0].index] if index >= entries[0].index else None
            if entry is not None and entry.term == term:
                future.set_result(index)
            else:
                future.set_exception(ProposalLostError(leader_id, f"entry {index} was replaced"))

    def fail_from(self, index: int, error: BaseException) -> None:
        """Entries from `index` on were dropped before they were written: fail their proposals
        (a later proposal may take the same index, even in the same term)."""
        self._pending = _fail_tail(self._pending, index, error)
        self._durable_waiters = _fail_tail(self._durable_waiters, index, error)

    def role_changed(self, role: Role, term: int, leader_id: int) -> None:
        """After a Ready: leadership lost (or a new term) leaves earlier terms' proposals with
        no known outcome."""
        if not self._pending and not self._durable_waiters:
            return
        if role == Role.LEADER and all(t == term for _, t, _ in self._pending):
            return
        error = ProposalLostError(leader_id, f"lost leadership of {self.group_name}")
        keep_term = term if role == Role.LEADER else -1
        survivors: deque[tuple[int, int, asyncio.Future[int]]] = deque()
        for index, proposal_term, future in self._pending:
            if proposal_term == keep_term:
                survivors.append((index, proposal_term, future))
            elif not future.done():
                future.set_exception(error)
        self._pending = survivors
        if keep_term < 0:
            for _, future in self._durable_waiters:
                if not future.done():
                    future.set_exception(error)
            self._durable_waiters.clear()

    def fail_all(self, error: BaseException) -> None:
        for _, _, future in self._pending:
            if not future.done():
                future.set_exception(error)
        for _, future in self._durable_waiters:
            if not future.done():
                future.set_exception(error)
        self._pending.clear()
        self._durable_waiters.clear()


def _fail_tail(queue: deque, index: int, error: BaseException) -> deque:  # type: ignore[type-arg]
    kept: deque = deque()  # type: ignore[type-arg]
    for item in queue:
        if item[0] >= index:
            future = item[-1]
            if not future.done():
                future.set_exception(error)
        else:
            kept.append(item)
    return kept


def _retrieve(future: asyncio.Future[int]) -> None:
    if not future.cancelled():
        future.exception()
