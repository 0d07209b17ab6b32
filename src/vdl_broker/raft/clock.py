"""Clock drift between nodes, as the read lease sees it (pure: fed times, no clock of its own).

The read lease (RaftConfig.read_lease_ticks, lease.py) rests on the followers that echoed a
leader's heartbeat refusing votes for election_ticks of *their* ticks, while the leader measures
the lease on *its* clock. So it holds as long as no follower ticks faster than the leader's clock
says a tick lasts by more than RaftConfig.max_clock_drift: the lease is shortened by that factor.

Followers tell their tick count in every heartbeat response; the leader's driver feeds them here
with its own clock's time of arrival. Over a window of at least `window_s`, a follower whose ticks
came faster than (1 + max_clock_drift) per tick interval of the leader's clock means a clock
running faster (the follower's) or slower (the leader's) than the lease allows for. Load cannot
cause it: a node never ticks twice within one interval of its own clock (RaftHost), a loaded one
only ticks late. One tick of rounding and the network delay of the two samples are allowed for.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Drift:
    """A follower found ticking too fast for the read lease's margin."""

    peer: int
    rate: float  # its ticks per tick interval of this node's clock (1.0: the same clock rate)
    bound: float  # 1 + max_clock_drift


@dataclass
class DriftMonitor:
    interval_s: float  # the tick interval
    max_drift: float  # RaftConfig.max_clock_drift
    window_s: float = 30.0  # samples at least this far apart are compared
    sample_every_s: float = 1.0  # fewer samples: heartbeats come every tick
    _samples: dict[int, deque[tuple[float, int]]] = field(default_factory=dict)
    _flagged: set[int] = field(default_factory=set)

    def observe(self, peer: int, ticks: int, now: float) -> Drift | None:
        """Follower `peer` reported `ticks` (its tick count), received at `now` (this node's
        clock, seconds). A Drift when it is found ticking too fast and was not already flagged."""
        samples = self._samples.setdefault(peer, deque())
        if samples and ticks < samples[-1][1]:
            samples.clear()  # it restarted: its count starts again
            self._flagged.discard(peer)
        if samples and now - samples[-1][0] < self.sample_every_s:
            return None
        samples.append((now, ticks))
        while len(samples) > 2 and now - samples[1][0] >= self.window_s:
            samples.popleft()  # keep the newest sample at least a window old as the reference
        then, then_ticks = samples[0]
        elapsed = now - then
        if elapsed < self.window_s:
            return None
        rate = max(0, ticks - then_ticks - 1) * self.interval_s / elapsed
        bound = 1.0 + self.max_drift
        if rate <= bound:
            self._flagged.discard(peer)
            return None
        if peer in self._flagged:
            return None
        self._flagged.add(peer)
        return Drift(peer, rate, bound)
