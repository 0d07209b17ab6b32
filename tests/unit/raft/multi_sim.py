"""Many Raft groups over the same simulated nodes, with quiescence and node liveness.

Each group is a raft_sim.Cluster over every node (with that simulator's network, drivers and
invariants); MultiCluster ties them together the way a node's host does: a crash or restart
takes a node down in every group at once, partitions cut every group's links, and each node runs
a NodeLiveness fed by every message it receives from a peer plus one node heartbeat per peer per
tick (over the same lossy network). Liveness changes go to every group (liveness.react); the
successor of a forgotten leader campaigns two ticks later, and again while it knows no leader,
and the other survivors defer their own campaigns (liveness.leader_lost), as the host does.

Invariants, besides each group's own (election safety, log matching, leader completeness, state
machine safety, committed entries durable on a majority):
- read lease: a live leader whose read lease has not run out by its own clock (its lease tick
  happened less than RaftConfig.read_lease_ticks tick intervals ago) is the only live leader of
  its group in any term >= its own. Nodes' clocks may run at different rates (set_tick_rates):
  within max_clock_drift of each other the invariant holds;
- a quiescent leader holds no read lease.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable

from raft_sim import Cluster, InvariantError, NetConfig

from vdl_broker.raft import Message, RaftConfig, RaftNode, Role
from vdl_broker.raft.liveness import (  # noqa: F401 - CAMPAIGN_DELAY_TICKS re-exported for the tests
    CAMPAIGN_DELAY_TICKS,
    CAMPAIGN_RETRIES,
    NodeLiveness,
    leader_lost,
    may_campaign_again,
    react,
)


class GroupSim(Cluster):
    """One group: a raft_sim Cluster whose deliveries also tell the receiving node's liveness."""

    def __init__(self, owner: MultiCluster, name: str, n: int, seed: int, **kwargs: object) -> None:
        self.owner = owner
        self.name = name
        super().__init__(n, seed, **kwargs)  # type: ignore[arg-type]

    def peer_alive_of(self, i: int) -> Callable[[int], bool] | None:
        # The node's liveness of the moment (a restart replaces it), as the host gives its groups.
        return lambda peer: self.owner.liveness[i].is_alive(peer)

    def deliver(self, m: Message) -> None:
        if self.nodes[m.to].node is not None and not (self.cut and frozenset((m.sender, m.to)) in self.cut):
            self.owner.heard(m.to, m.sender)
        super().deliver(m)


class MultiCluster:
    def __init__(self, n: int, groups: int, seed: int, *, net: NetConfig | None = None, tick_every: int = 10,
                 config: Callable[[int], RaftConfig] | None = None) -> None:
        self.seed = seed
        self.rng = random.Random(seed * 13 + 5)
        self.net = net or NetConfig()
        self.tick_every = tick_every
        self.ids = tuple(range(1, n + 1))
        make = config or (lambda i: RaftConfig(election_ticks=10, quiesce_after_heartbeats=2))
        self.groups = [GroupSim(self, f"g{g}", n, seed * 101 + g, net=self.net, tick_every=tick_every, config=make)
                       for g in range(groups)]
        self.election_ticks = make(1).election_ticks
        self.check_lease = make(1).check_quorum
        self.read_lease_ticks = make(1).read_lease_ticks
        phases = {i: self.rng.randrange(tick_every) for i in self.ids}
        for group in self.groups:
            group.tick_phase = phases
        self.phase = phases
        self.now = 0
        self.up = {i: True for i in self.ids}
        self.incarnation = {i: 0 for i in self.ids}
        self.liveness = {i: self._new_liveness(i) for i in self.ids}
        self._beats: list[tuple[int, int, int, int, int]] = []  # (time, seq, sender, to, incarnation)
        self._seq = 0
        self._campaigns: list[tuple[int, int, int, int, int]] = []  # (time, seq, group index, node, attempts)
        self.tick_times: dict[tuple[int, int], list[int]] = {}  # (group, node) -> sim time of each core tick

    def _new_liveness(self, i: int) -> NodeLiveness:
        liveness = NodeLiveness(self.election_ticks)
        for peer in self.ids:
            if peer != i:
                liveness.add_peer(peer)
        return liveness

    # ------------------------------------------------------------------ faults

    def crash(self, i: int) -> None:
        for group in self.groups:
            group.crash(i)
        self.up[i] = False

    def restart(self, i: int) -> None:
        if self.up[i]:
            return
        self.incarnation[i] += 1
        for g, group in enumerate(self.groups):
            group.restart(i)
            self.tick_times.pop((g, i), None)
        self.liveness[i] = self._new_liveness(i)
        self.up[i] = True

    def partition(self, *sides: set[int]) -> None:
        for group in self.groups:
            group.partition(*sides)

    def heal(self) -> None:
        for group in self.groups:
            group.heal()

    @property
    def cut(self) -> set[frozenset[int]]:
        return self.groups[0].cut

    def alive(self) -> list[int]:
        return [i for i in self.ids if self.up[i]]

    # ------------------------------------------------------------------ liveness

    def heard(self, to: int, sender: int, incarnation: int | None = None) -> None:
        if self.up[to]:
            self.liveness[to].heard(sender, incarnation)

    def _send_beats(self, i: int) -> None:
        for peer in self.ids:
            if peer == i or frozenset((i, peer)) in self.cut or self.rng.random() < self.net.loss:
                continue
            self._seq += 1
            delay = self.rng.randint(self.net.min_delay, self.net.max_delay)
            heapq.heappush(self._beats, (self.now + delay, self._seq, i, peer, self.incarnation[i]))

    def _host_tick(self, i: int) -> None:
        self._send_beats(i)
        change = self.liveness[i].tick()
        if not change:
            return
        live = self.liveness[i]
        alive = [i, *(p for p in self.ids if p != i and live.is_alive(p))]
        for g, group in enumerate(self.groups):
            node = group.nodes[i].node
            if node is None:
                continue
            forgotten = react(node, change, live.is_alive)
            if forgotten and leader_lost(node, group.name, forgotten, alive):
                self._seq += 1
                heapq.heappush(self._campaigns,
                               (self.now + CAMPAIGN_DELAY_TICKS * self.tick_every, self._seq, g, i, 0))
            group.process(i)

    def _run_campaigns(self) -> None:
        while self._campaigns and self._campaigns[0][0] <= self.now:
            _, _, g, i, attempts = heapq.heappop(self._campaigns)
            group = self.groups[g]
            node = group.nodes[i].node
            if node is None or node.leader_id != 0:
                continue
            if may_campaign_again(node.role):
                node.campaign()
                group.process(i)
            if attempts < CAMPAIGN_RETRIES:
                self._seq += 1
                heapq.heappush(self._campaigns, (self.now + CAMPAIGN_DELAY_TICKS * self.tick_every, self._seq,
                                                 g, i, attempts + 1))

    # ------------------------------------------------------------------ time

    def step_time(self) -> None:
        self.now += 1
        while self._beats and self._beats[0][0] <= self.now:
            _, _, sender, to, incarnation = heapq.heappop(self._beats)
            if frozenset((sender, to)) not in self.cut:
                self.heard(to, sender, incarnation)
        for group in self.groups:
            group.deliver_due()
        # As the host does (RaftHost._tick_loop): at a node's tick, node liveness first, then its groups.
        first = self.groups[0]
        now, every, phases, drifting = self.now, self.tick_every, self.phase, bool(first.tick_rate)
        for i in self.ids:
            # Cluster.ticks_now, inlined for clocks at rate 1 (this runs every step)
            if self.up[i] and (first.ticks_now(i) if drifting else (now + phases[i]) % every == 0):
                self._host_tick(i)
        for group in self.groups:
            group.tick_due()
        self._run_campaigns()
        self._record_ticks()
        self._check_leases()

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step_time()

    def run_until(self, cond: Callable[[], bool], max_steps: int) -> bool:
        for _ in range(max_steps):
            if cond():
                return True
            self.step_time()
        return cond()

    # ------------------------------------------------------------------ views

    def leader(self, g: int) -> int | None:
        return self.groups[g].leader()

    def all_have_leaders(self) -> bool:
        return all(self.leader(g) is not None for g in range(len(self.groups)))

    def quiescent_everywhere(self) -> bool:
        return all(group.nodes[i].node is None or group.node(i).quiescent
                   for group in self.groups for i in self.ids)

    def core(self, g: int, i: int) -> RaftNode:
        return self.groups[g].node(i)

    # ------------------------------------------------------------------ invariants

    def _record_ticks(self) -> None:
        now, tick_times = self.now, self.tick_times
        for g, group in enumerate(self.groups):
            nodes = group.nodes
            for i in self.ids:
                node = nodes[i].node
                if node is None:
                    continue
                # times[k]: when this incarnation's core reached ticks == k (times[0]: its boot).
                times = tick_times.get((g, i))
                if times is None:
                    times = tick_times[g, i] = [now]
                if node.ticks >= len(times):
                    times.extend([now] * (node.ticks + 1 - len(times)))

    def set_tick_rates(self, rates: dict[int, float]) -> None:
        """Clock drift: node i's clock (its ticks, node liveness, its read lease) runs rates[i]
        times as fast as simulated time."""
        for group in self.groups:
            group.tick_rate = rates

    def _check_leases(self) -> None:
        span = self.read_lease_ticks * self.tick_every  # on the leader's clock
        for g, group in enumerate(self.groups):
            nodes = group.nodes
            for i in self.ids:
                node = nodes[i].node
                if node is None or node.role != Role.LEADER:
                    continue
                tick = node.read_lease_tick()
                if node.quiescent and tick >= 0:
                    self._fail(f"group {g}: quiescent leader {i} holds a read lease")
                if tick < 0 or not self.check_lease or len(self.ids) == 1:
                    continue
                times = self.tick_times.get((g, i), [])
                if tick >= len(times) or group.clock(i) - group.clock(i, times[tick]) >= span:
                    continue  # the lease ran out (by the leader's clock, as the driver measures it)
                for j in self.ids:
                    other = group.nodes[j].node
                    if j != i and other is not None and other.role == Role.LEADER and other.term >= node.term:
                        self._fail(f"group {g}: leader {i} (term {node.term}) still holds its read lease "
                                   f"while {j} leads term {other.term}")

    def _fail(self, what: str) -> None:
        raise InvariantError(f"{what} (seed {self.seed}, time {self.now})")
