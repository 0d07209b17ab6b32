"""Deterministic network simulator for the Raft core: virtual time, no sockets, no sleeps.

Each node is a RaftNode over a MemoryStorage; the simulated driver carries out every Ready
exactly as the contract says (persist snapshot/entries/hard state, then send, then apply,
then advance). The network loses, delays (hence reorders), duplicates and partitions messages;
nodes crash (losing everything not persisted) and restart from storage + hard state. Storage
damage: a node restarts with its log cut at an index it had synced, or with its hard state lost
(`corrupt`), and its driver reports the Damage to the core (or, with corruption_aware=False,
carries on as a plain truncation did: the behaviour that loses committed entries).

Disk loss: `wipe()` loses one group's storage of a node that knows it held the group (a lost
stream directory: the driver starts it damaged); `lose_disk()` loses everything the node had,
so its driver knows nothing: at its restart it asks the peers what they hold, as a node does
with its metadata log (vdl_broker.cluster.identity, rule 1), and starts recovering if any holds
something, as a new node if all hold nothing; until every peer has answered it stays down.
`probe_at_start` makes every initial node start that way (a cluster being formed).

Membership: `add_node()` starts a node that joins the group (no configuration until its leader's
entries name one); `change_conf()` asks the leader for a configuration change. The simulated
driver saves the configuration records as a real one does (persistence.save_membership): the
union of the saved and the new records before the Ready's writes, exactly the new ones after.

Safety invariants are checked continuously and raise InvariantError:
- election safety: at most one leader per term;
- leader completeness: a new leader holds every entry known committed;
- log matching: an (index, term) pair always has the same payload and the same previous term;
- committed entries never change or disappear from a log; state machine safety: every node
  applies the same entry at each index (a global committed oracle);
- every committed entry stays on enough voters of the latest committed configuration to meet
  every majority of it, counting a damaged node that is owed it (still recovering), and on at
  least one intact copy.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass

from vdl_broker.cluster.identity import Formation, formation
from vdl_broker.raft import (
    EXTENT_UNKNOWN,
    ConfigChangeError,
    ConfState,
    Damage,
    Entry,
    EntryType,
    HardState,
    MemoryStorage,
    Message,
    MessageType,
    ProposalDroppedError,
    RaftConfig,
    RaftNode,
    Ready,
    Role,
    SnapshotMeta,
)
from vdl_broker.raft.membership import decode_conf

# The core alone, without the node liveness quiescence needs (multi_sim adds it).
NO_QUIESCE = RaftConfig(quiesce_after_heartbeats=0)


class InvariantError(AssertionError):
    pass


@dataclass
class SimNode:
    id: int
    storage: MemoryStorage
    node: RaftNode | None
    restarts: int = 0
    applied: int = 0  # last index applied by this incarnation's state machine
    parked: Ready | None = None  # a Ready whose persistence is still "in progress"
    damage: Damage | None = None  # the driver's damage record (kept until the core recovered)
    owed: int = 0  # damaged: the node lost entries up to here and must get them back
    lost_disk: bool = False  # nothing on disk tells it held the group: it asks its peers at start
    probing: bool = False  # up, waiting for its peers' answers before it starts
    joiner: bool = False  # started knowing no configuration, even if an initial node (rejoin)


@dataclass
class NetConfig:
    loss: float = 0.0
    duplicate: float = 0.0
    min_delay: int = 1
    max_delay: int = 5


class Cluster:
    """n nodes; time advances in steps, each node ticks every `tick_every` steps."""

    def __init__(
        self,
        n: int = 3,
        seed: int = 0,
        *,
        net: NetConfig | None = None,
        tick_every: int = 10,
        config: Callable[[int], RaftConfig] | None = None,
        storages: dict[int, MemoryStorage] | None = None,
        probe_at_start: bool = False,
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.net = net or NetConfig()
        self.tick_every = tick_every
        self.ids = tuple(range(1, n + 1))  # every node ever started (joined ones too)
        self.initial = self.ids
        # Each node's config, asked at every start (a fuzzer may vary it).
        self._config = config or (lambda i: NO_QUIESCE)
        self.committed_conf = ConfState(self.ids)  # the configuration of the latest committed CONFIG entry
        self.nodes: dict[int, SimNode] = {}
        for i in self.ids:
            storage = storages[i] if storages and i in storages else MemoryStorage()
            self.nodes[i] = SimNode(i, storage, None, lost_disk=probe_at_start, probing=probe_at_start)
            if not probe_at_start:
                self._boot(self.nodes[i])
        self.now = 0
        self._queue: list[tuple[int, int, Message]] = []  # (delivery time, seq, message)
        self._seq = 0
        self.cut: set[frozenset[int]] = set()  # pairs that cannot talk
        self.oracle: dict[int, tuple[int, object]] = {}  # committed index -> (term, data)
        self.max_committed = 0
        self.leaders: dict[int, int] = {}  # term -> leader id
        self._seen_leaders: set[tuple[int, int]] = set()
        self.registry: dict[tuple[int, int], tuple[int, object]] = {}  # (index, term) -> (prev term, data)
        self.proposed = 0
        self.delivered = 0
        self.tick_phase = {i: self.rng.randrange(tick_every) for i in self.ids}
        # Clock drift: node i's clock runs tick_rate[i] times as fast as the simulated time (1
        # when absent), so it ticks every tick_every / tick_rate[i] steps.
        self.tick_rate: dict[int, float] = {}
        self.early_send = False  # send Ready.early_messages before persisting (else after)
        self.slow_disk = 0.0  # probability that a Ready's sync takes a while (see process)
        self.torn_crash = 0.0  # probability of crashing mid-Ready after a delivery
        self.hold: Callable[[Message], bool] | None = None  # test hook: True = keep out of the network
        self.corruption_aware = True  # False: damage is handed to nobody (the old plain cut)

    # ------------------------------------------------------------------ lifecycle

    def _boot(self, sn: SimNode) -> None:
        cfg = self._config(sn.id)
        rng = random.Random(self.seed * 7919 + sn.id * 104729 + sn.restarts)
        damage = sn.damage if getattr(self, "corruption_aware", True) else None
        sn.node = RaftNode(sn.id, self.initial if sn.id in self.initial and not sn.joiner else (), sn.storage, cfg,
                           hard_state=sn.storage.hard_state, rng=rng, damage=damage, membership=sn.storage.membership,
                           peer_alive=self.peer_alive_of(sn.id))
        sn.applied = sn.node.applied_index

    def peer_alive_of(self, i: int) -> Callable[[int], bool] | None:
        """Node i's node liveness for its core (None here: no node liveness)."""
        return None

    def add_node(self) -> int:
        """Start a new node that knows no configuration (it joins when a leader adds it)."""
        i = max(self.ids) + 1
        self.ids = (*self.ids, i)
        self.tick_phase[i] = self.rng.randrange(self.tick_every)
        self.nodes[i] = SimNode(i, MemoryStorage(), None)
        self._boot(self.nodes[i])
        if self.cut:  # a partition in force isolates the newcomer too
            self.cut |= {frozenset((i, j)) for j in self.ids if j != i}
        return i

    def change_conf(self, i: int, conf: ConfState) -> int | None:
        """Node i (a leader) proposes `conf`; None when a rule refuses it now."""
        try:
            index = self.node(i).propose_conf_change(conf)
        except (ConfigChangeError, ProposalDroppedError):
            return None
        self.process(i)
        return index

    def members(self) -> tuple[int, ...]:
        """The voters of the latest committed configuration."""
        return self.committed_conf.voters

    def crash(self, i: int) -> None:
        self.nodes[i].probing = False
        self.nodes[i].parked = None
        self.nodes[i].node = None  # unstable entries, votes in memory, progress: all gone
        self._check_durable_majority()

    def _check_durable_majority(self) -> None:
        """A committed entry stays durable on a majority (or inside its log start point); a
        damaged node still owed the entry counts, but one intact copy must exist."""
        index = self.max_committed
        if not index:
            return
        term = self.oracle[index][0]
        holders = owed = 0
        voters = self.committed_conf.voters
        anywhere = False
        for sn in self.nodes.values():
            st = sn.storage
            if st.first_index > index or (index <= st.last_index and st.term_at(index) == term):
                anywhere = True
                holders += sn.id in voters
            elif sn.owed >= index:
                owed += sn.id in voters
        if not anywhere:
            self._fail(f"committed entry {index} is durable on no node")
        # Every majority of the committed configuration must meet a holder (single-server
        # changes: an entry committed under the next configuration meets them too).
        if holders + owed < len(voters) - (len(voters) // 2 + 1) + 1:
            self._fail(f"committed entry {index} is durable on only {holders} voters of {voters}")

    def corrupt(self, i: int, cut_at: int | None = None, lose_hard_state: bool = False) -> None:
        """Crash node i and damage its storage: its log is cut at `cut_at` (an entry it had
        synced, maybe acknowledged) and/or its hard state is lost. It restarts later with the
        Damage its driver would find (log: cut at the damage, durable through its old end)."""
        if self.nodes[i].node is not None:
            self.crash(i)
        sn = self.nodes[i]
        st = sn.storage
        old = sn.damage or Damage()
        through = old.through_index
        if cut_at is not None and st.first_index <= cut_at <= st.last_index and through != EXTENT_UNKNOWN:
            through = max(through, st.last_index)
            st.truncate_suffix(cut_at)
            sn.owed = max(sn.owed, through)
        bound = old.term_bound
        if lose_hard_state:
            bound = max(bound, st.term_at(st.last_index))
            st.hard_state = HardState(bound, 0)
        sn.damage = Damage(through, old.hard_state_lost or lose_hard_state, bound)

    def wipe(self, i: int) -> None:
        """Crash node i and lose its whole storage (log, hard state, saved configuration): it
        restarts as its driver finds it, empty, knowing only that it held this group before."""
        if self.nodes[i].node is not None:
            self.crash(i)
        sn = self.nodes[i]
        sn.owed = max(sn.owed, sn.storage.last_index)
        sn.storage = MemoryStorage()
        sn.damage = Damage(EXTENT_UNKNOWN, True, 0)

    def rejoin(self, i: int) -> None:
        """Crash node i and start it again empty, knowing no configuration: a node the group
        moved away from (its copy deleted) that is to join again, as a new replica would."""
        if self.nodes[i].node is not None:
            self.crash(i)
        sn = self.nodes[i]
        sn.storage, sn.damage, sn.applied, sn.restarts = MemoryStorage(), None, 0, sn.restarts + 1
        sn.joiner = True
        self._boot(sn)

    def lose_disk(self, i: int) -> None:
        """Crash node i and lose its whole data directory: at its restart nothing tells it that
        it held the group, so it asks its peers (module docstring)."""
        if self.nodes[i].node is not None:
            self.crash(i)
        sn = self.nodes[i]
        sn.owed = max(sn.owed, sn.storage.last_index)
        sn.storage = MemoryStorage()
        sn.damage = None
        sn.lost_disk = True

    def _probe(self, sn: SimNode) -> None:
        """A node without storage asks every other initial node how much log it holds; the live
        ones it can reach answer (vdl_broker.cluster.identity.formation)."""
        peers = [j for j in self.initial if j != sn.id]
        held = {j: self.nodes[j].storage.last_index for j in peers
                if (self.nodes[j].node is not None or self.nodes[j].probing)
                and frozenset((sn.id, j)) not in self.cut}
        verdict = formation(peers, held)
        if verdict is Formation.WAITING:
            return
        sn.probing = sn.lost_disk = False
        if verdict is Formation.EXISTING:
            sn.damage = Damage(EXTENT_UNKNOWN, True, 0)
        sn.restarts += 1
        self._boot(sn)

    def damaged(self) -> list[int]:
        return [i for i in self.ids if self.nodes[i].damage is not None or self.nodes[i].lost_disk]

    def crash_torn(self, i: int, keep_hard_state: bool, keep_entries: bool = True) -> None:
        """Crash in the middle of carrying out a Ready: maybe its entries, maybe its hard state
        reached the disk; only early messages left; nothing was applied."""
        sn = self.nodes[i]
        node = sn.node
        rd = sn.parked
        if rd is None and node is not None and node.has_ready():
            rd = node.ready()
            if self.early_send:
                for m in rd.early_messages:
                    self._send_out(m)
        if rd is not None:
            self._save_membership_before(sn, rd)  # written first, so it is there if anything is
            if rd.snapshot is not None:
                self._check_snapshot(i, rd.snapshot)
                sn.storage.reset(rd.snapshot)
            if rd.entries and keep_entries:
                self._persist(sn, rd.entries)
            if keep_hard_state and rd.hard_state is not None:
                sn.storage.hard_state = rd.hard_state
        self.crash(i)

    def restart(self, i: int) -> None:
        sn = self.nodes[i]
        if sn.lost_disk:
            sn.probing = True
            self._probe(sn)
        elif sn.node is None:
            sn.restarts += 1
            self._boot(sn)

    def partition(self, *groups: set[int]) -> None:
        """Only nodes in the same group can talk (nodes not listed are isolated)."""
        self.cut = set()
        for a in self.ids:
            for b in self.ids:
                if a < b and not any(a in g and b in g for g in groups):
                    self.cut.add(frozenset((a, b)))

    def heal(self) -> None:
        self.cut = set()

    def probing(self) -> list[int]:
        return [i for i in self.ids if self.nodes[i].probing]

    def alive(self) -> list[int]:
        return [i for i in self.ids if self.nodes[i].node is not None]

    def node(self, i: int) -> RaftNode:
        n = self.nodes[i].node
        assert n is not None, f"node {i} is down"
        return n

    def leader(self) -> int | None:
        """The live leader with the highest term, if any."""
        best: tuple[int, int] | None = None
        for i in self.alive():
            n = self.node(i)
            if n.role == Role.LEADER and (best is None or n.term > best[0]):
                best = (n.term, i)
        return best[1] if best else None

    # ------------------------------------------------------------------ driving

    def propose(self, i: int, data: bytes) -> int:
        index = self.node(i).propose(data)
        self.proposed += 1
        self.process(i)
        return index

    def send(self, m: Message) -> None:
        if self.hold is not None and self.hold(m):
            return
        if (self.cut and frozenset((m.sender, m.to)) in self.cut) or self.rng.random() < self.net.loss:
            return
        copies = 2 if self.rng.random() < self.net.duplicate else 1
        for _ in range(copies):
            delay = self.rng.randint(self.net.min_delay, self.net.max_delay)
            self._seq += 1
            heapq.heappush(self._queue, (self.now + delay, self._seq, m))

    def deliver(self, m: Message) -> None:
        sn = self.nodes[m.to]
        if sn.node is None or (self.cut and frozenset((m.sender, m.to)) in self.cut):
            return
        self.delivered += 1
        sn.node.step(m)
        if self.torn_crash and self.rng.random() < self.torn_crash:
            self.crash_torn(m.to, keep_hard_state=self.rng.random() < 0.5, keep_entries=self.rng.random() < 0.5)
            return
        self.process(m.to)

    def process(self, i: int) -> None:
        """The simulated driver: carry out every Ready of node i per the contract.

        With probability `slow_disk` a Ready is parked (its sync is "in progress") and the node
        keeps stepping meanwhile; step_time() completes parked Readies later."""
        sn = self.nodes[i]
        node = sn.node
        if node is None or sn.parked is not None:
            return
        while node.has_ready():
            rd = node.ready()
            if self.early_send:
                for m in rd.early_messages:
                    self._send_out(m)
            if self.slow_disk and self.rng.random() < self.slow_disk:
                sn.parked = rd
                return
            self._carry_out(sn, rd)

    def _carry_out(self, sn: SimNode, rd: Ready) -> None:
        node = sn.node
        assert node is not None
        self._save_membership_before(sn, rd)
        if rd.snapshot is not None:
            self._check_snapshot(sn.id, rd.snapshot)
            sn.storage.reset(rd.snapshot)
            sn.applied = max(sn.applied, rd.snapshot.index)  # the state machine starts there
        if rd.entries:
            self._persist(sn, rd.entries)
        if rd.hard_state is not None:
            sn.storage.hard_state = rd.hard_state
        if rd.membership is not None:
            sn.storage.membership = list(rd.membership)  # after the sync: exactly the core's
        for m in rd.messages if self.early_send else rd.early_messages + rd.messages:
            self._send_out(m)
        for e in rd.committed_entries:
            self._apply(sn, e)
        node.advance(rd)
        if sn.damage is not None and not node.recovering:
            sn.damage = None  # the driver clears its damage record once the core recovered
        if sn.owed and sn.storage.last_index >= sn.owed:
            sn.owed = 0
        self._check_node(sn.id)
        self._check_durable_majority()

    @staticmethod
    def _save_membership_before(sn: SimNode, rd: Ready) -> None:
        if rd.membership is not None:
            saved = {(r.index, r.term): r for r in sn.storage.membership}
            saved.update({(r.index, r.term): r for r in rd.membership})
            sn.storage.membership = sorted(saved.values(), key=lambda r: (r.index, r.term))

    def _send_out(self, m: Message) -> None:
        if m.type == MessageType.SNAPSHOT:
            assert m.snapshot is not None
            # The leader's driver fills the opaque start point (here: a checkable tag).
            m.snapshot = SnapshotMeta(m.snapshot.index, m.snapshot.term, ("start", m.snapshot.index + 1),
                                      m.snapshot.conf)
        self.send(m)

    def _finish_parked(self) -> None:
        for sn in self.nodes.values():
            if sn.parked is not None and sn.node is not None and self.rng.random() < 0.3:
                rd, sn.parked = sn.parked, None
                self._carry_out(sn, rd)
                self.process(sn.id)

    def step_time(self) -> None:
        """One unit of virtual time: deliver what is due, tick whoever's tick it is."""
        self.deliver_due()
        self.tick_due()

    def deliver_due(self) -> None:
        """step_time's first half: the clock moves on a step and what is due arrives."""
        self.now += 1
        for sn in self.nodes.values():
            if sn.probing:
                self._probe(sn)
        if self.slow_disk:
            self._finish_parked()
        queue = self._queue
        while queue and queue[0][0] <= self.now:
            self.deliver(heapq.heappop(queue)[2])

    def tick_due(self) -> None:
        """step_time's second half: the nodes whose timer fires at this step tick."""
        # ticks_now, inlined for clocks at rate 1 (this runs every step; most tick nobody)
        now, every, phases = self.now, self.tick_every, self.tick_phase
        drifting = bool(self.tick_rate)
        for i in self.ids:
            if (self.ticks_now(i) if drifting else (now + phases[i]) % every == 0):
                node = self.nodes[i].node
                if node is not None:
                    node.tick()
                    self.process(i)

    def clock(self, i: int, at: int | None = None) -> float:
        """Node i's clock at step `at` (now), in steps of simulated time at rate 1."""
        return (self.now if at is None else at) * self.tick_rate.get(i, 1.0)

    def ticks_now(self, i: int) -> bool:
        """Whether node i's timer fires at this step: its clock passed a multiple of tick_every."""
        rate = self.tick_rate.get(i, 1.0)
        if rate == 1.0:
            return (self.now + self.tick_phase[i]) % self.tick_every == 0
        phase = self.tick_phase[i]
        return (int((self.now + phase) * rate) // self.tick_every
                > int((self.now - 1 + phase) * rate) // self.tick_every)

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step_time()

    def run_until(self, cond: Callable[[], bool], max_steps: int) -> bool:
        for _ in range(max_steps):
            if cond():
                return True
            self.step_time()
        return cond()

    def drain(self, max_steps: int = 10_000) -> None:
        """Deliver everything in flight without ticking (manual scenarios)."""
        for _ in range(max_steps):
            if not self._queue:
                return
            at, _, m = heapq.heappop(self._queue)
            self.now = max(self.now, at)
            self.deliver(m)

    # ------------------------------------------------------------------ invariants

    def _fail(self, what: str) -> None:
        raise InvariantError(f"{what} (seed {self.seed}, time {self.now})")

    def _persist(self, sn: SimNode, entries: list[Entry]) -> None:
        storage = sn.storage
        first = entries[0].index
        old_last = storage.last_index
        prev_term = storage.term_at(first - 1)
        for e in entries:
            key = (e.index, e.term)
            known = self.registry.get(key)
            if known is None:
                self.registry[key] = (prev_term, e.data)
            elif known != (prev_term, e.data):
                self._fail(f"log matching broken at {key} on node {sn.id}")
            prev_term = e.term
        # Committed entries the node holds are never overwritten or truncated away.
        had = [
            index
            for index in range(first, old_last + 1)
            if index in self.oracle and storage.term_at(index) == self.oracle[index][0]
        ]
        storage.append(entries)
        for index in had:
            if index > storage.last_index or storage.term_at(index) != self.oracle[index][0]:
                self._fail(f"node {sn.id} lost or changed committed entry {index}")

    def _check_snapshot(self, i: int, snap: SnapshotMeta) -> None:
        if snap.data != ("start", snap.index + 1):
            self._fail(f"node {i} got a log reset without the driver's start point: {snap}")
        if snap.index in self.oracle and self.oracle[snap.index][0] != snap.term:
            self._fail(f"node {i} reset to {snap} which disagrees with committed entry")

    def _apply(self, sn: SimNode, e: Entry) -> None:
        if e.index != sn.applied + 1:
            self._fail(f"node {sn.id} applied {e.index} after {sn.applied}")
        sn.applied = e.index
        known = self.oracle.get(e.index)
        if known is None:
            self.oracle[e.index] = (e.term, e.data)
            if e.index > self.max_committed and e.type == EntryType.CONFIG:
                conf = decode_conf(e.data)
                assert conf is not None
                self.committed_conf = conf
            self.max_committed = max(self.max_committed, e.index)
        elif known != (e.term, e.data):
            self._fail(f"state machine safety: node {sn.id} applied {e} but {known} was committed")

    def _check_node(self, i: int) -> None:
        node = self.node(i)
        if node.role == Role.LEADER:
            holder = self.leaders.setdefault(node.term, i)
            if holder != i:
                self._fail(f"two leaders in term {node.term}: {holder} and {i}")
            if holder == i and self._new_leader(node):
                self._check_leader_completeness(i, node)
        if node.commit_index > node.last_index:
            self._fail(f"node {i} commit {node.commit_index} beyond last index {node.last_index}")

    def _new_leader(self, node: RaftNode) -> bool:
        key = (node.id, node.term)
        if key in self._seen_leaders:
            return False
        self._seen_leaders.add(key)
        return True

    def _check_leader_completeness(self, i: int, node: RaftNode) -> None:
        """Raft §5.4: a leader of term T holds every entry committed in terms before T."""
        index = self.max_committed
        while index > 0 and index in self.oracle and self.oracle[index][0] >= node.term:
            index -= 1
        if index == 0 or index not in self.oracle or index < node.first_index - 1:
            return
        if node.log.term(index) != self.oracle[index][0]:
            self._fail(f"leader {i} of term {node.term} lacks committed entry {index}")

    def committed_log(self, i: int) -> list[tuple[int, int]]:
        """(index, term) of node i's durable entries up to its commit index."""
        sn = self.nodes[i]
        commit = self.node(i).commit_index if sn.node else sn.storage.last_index
        return [(e.index, e.term) for e in sn.storage.all_entries() if e.index <= commit]


def build_storage(terms: list[int], hard_term: int | None = None) -> MemoryStorage:
    """A storage holding entries 1..len(terms) with the given terms (Figure 7/8 setups)."""
    storage = MemoryStorage()
    storage.append(
        [Entry(i + 1, t, EntryType.DATA, f"e{i + 1}t{t}".encode()) for i, t in enumerate(terms)]
    )
    storage.hard_state = HardState(hard_term if hard_term is not None else (terms[-1] if terms else 0), 0)
    return storage
