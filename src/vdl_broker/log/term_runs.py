"""The terms of the entries a log appended, as runs: the first index of each term.

Raft asks a leader's log for terms on every round, at indexes just behind its end: its
commit index's (only entries of its own term commit by counting, Raft §5.4.2, and a leader serves
clients once one has), and the entry before those it sends each follower. Terms change only at
elections, so a few runs answer for every index appended since the log opened, whatever the
tail cache still holds: without them a term the cache had evicted was read from its segment's
header, checked against the Raft index, on every produce request and every append sent (a sixth
of a leader's samples in the replication benchmark's profile). Kafka keeps the same per
partition as its leader epoch cache (the start offset of each leader epoch).

The runs cover indexes [first, end): the entries appended since the log opened (or was emptied);
an index before them is read from the log's segments.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right


class TermRuns:
    __slots__ = ("first", "end", "_starts", "_terms")

    def __init__(self, first: int) -> None:
        self.first = first
        self.end = first
        self._starts = array("q")  # the first index of each run, increasing
        self._terms = array("q")

    def appended(self, index: int, term: int) -> None:
        """Entry `index` of `term` was appended: the entry at `end`."""
        if index != self.end:
            raise ValueError(f"term runs end at index {self.end}, not {index}")
        if not self._terms or self._terms[-1] != term:
            self._starts.append(index)
            self._terms.append(term)
        self.end = index + 1

    def term_at(self, index: int) -> int | None:
        if not self.first <= index < self.end:
            return None
        return self._terms[bisect_right(self._starts, index) - 1]

    def truncate_from(self, index: int) -> None:
        """The log dropped its entries from `index` on (a conflict, a failed append undone)."""
        if index <= self.first:
            self.restart(index)
            return
        if index >= self.end:
            return
        k = bisect_right(self._starts, index - 1)  # the runs from k on start at or past index
        del self._starts[k:], self._terms[k:]
        self.end = index

    def drop_before(self, index: int) -> None:
        """The log no longer holds entries below `index` (retention): nor do the runs."""
        if index >= self.end:
            self.restart(index)
            return
        if index <= self.first:
            return
        k = bisect_right(self._starts, index) - 1  # the run holding index
        del self._starts[:k], self._terms[:k]
        self._starts[0] = self.first = index

    def restart(self, index: int) -> None:
        """Nothing covered; the next entry appended is `index`."""
        del self._starts[:], self._terms[:]
        self.first = self.end = index
