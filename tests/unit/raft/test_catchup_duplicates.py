"""A replica catching up through the node's throttle (raft/throttle.py) is sent every entry once.

The core (the Raft simulator, tests/unit/raft/raft_sim.py): an append the driver holds back is
not sent again while heartbeat answers overtake it; once it left, a heartbeat sent after it and
answered without it means it was lost, and only then is it sent again. The driver:

Real drivers on the in-memory network and the virtual clock (tests/support/raft_groups.py).
Appends to a replica far behind wait in the throttle's queue while heartbeats go straight out, so
heartbeats overtake them: a heartbeat answer then proves nothing about the appends still
queued. A leader that took it for a lost append resent the same range, and the resend, queued
behind the debt of the original, spent the throttle's budget a second time after the follower
had acknowledged the original (the same megabyte append sent twice, 16 s each at 64 KiB/s).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest
import raft_sim
from test_raft_membership import commit, elect

from tests.support import virtual_time
from tests.support.raft_groups import TICK, Cluster, Delivery, produce
from vdl_broker.raft.config import RaftConfig
from vdl_broker.raft.types import Message, MessageType

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]

RATE = 64 << 10  # bytes per second
ENTRY = 32 << 10
HEARTBEAT = 10  # simulator steps per tick (a heartbeat every tick)


class Paced:
    """The simulator's network with a throttle in front of node 3: appends with entries to it
    are recorded and, while `holding`, kept back (the core is told, as RaftGroup does)."""

    def __init__(self, c: raft_sim.Cluster) -> None:
        self.c = c
        self.holding = False
        self.held: list[Message] = []
        self.sent: list[tuple[int, ...]] = []  # the entries of every append to node 3 handed out
        c.hold = self.hold

    def hold(self, m: Message) -> bool:
        if m.type != MessageType.APPEND or m.to != 3 or not m.entries:
            return False
        self.sent.append(tuple(e.index for e in m.entries))
        if self.holding:
            self.c.node(m.sender).message_held(m)
            self.held.append(m)
        return self.holding

    def release(self, deliver: bool = True) -> None:
        """The held appends leave (and reach node 3 unless `deliver` is False: lost)."""
        for m in self.held:
            self.c.node(m.sender).message_left(m)
            if deliver:
                self.c.deliver(m)
        self.held = []


def ordered_cluster() -> raft_sim.Cluster:
    """Three nodes, node 1 leading, every message taking one step: links keep their order."""
    c = raft_sim.Cluster(3, 1, net=raft_sim.NetConfig(min_delay=1, max_delay=1), tick_every=HEARTBEAT)
    elect(c, 1)
    commit(c, 1, b"first")
    return c


def test_an_append_held_back_is_not_sent_again_while_heartbeats_overtake_it() -> None:
    c = ordered_cluster()
    paced = Paced(c)
    paced.holding = True
    index = c.propose(1, b"paced")
    c.run(20 * HEARTBEAT)  # twenty heartbeats answered by node 3, none of them after the append
    assert paced.sent == [(index,)]
    assert c.node(1).match_index(3) == index - 1
    paced.holding = False
    paced.release()
    assert c.run_until(lambda: c.node(1).match_index(3) == index, 2 * HEARTBEAT)
    c.run(5 * HEARTBEAT)
    assert paced.sent == [(index,)]  # answered: never sent again


def test_an_append_lost_after_it_left_is_sent_again_after_the_next_heartbeat() -> None:
    c = ordered_cluster()
    paced = Paced(c)
    paced.holding = True
    index = c.propose(1, b"lost")
    c.run(3 * HEARTBEAT)
    paced.holding = False
    paced.release(deliver=False)  # it left and was lost (a broken connection)
    # A heartbeat sent after it went out, answered without it: lost-append recovery resends it.
    assert c.run_until(lambda: c.node(1).match_index(3) == index, 3 * HEARTBEAT)
    assert paced.sent == [(index,), (index,)]


def test_a_throttled_catch_up_sends_each_entry_once(tmp_path: Path) -> None:
    # Entries of 32 KiB, appends of at most two; a lag of more than 8 entries is caught up
    # through the throttle (written 8 at a time, so the other follower never lags that far). A network slower than a tick, as a loaded machine's: the follower's
    # answer to an append that just left the throttle comes back after a heartbeat's.
    config = RaftConfig(election_ticks=10, tick_interval_s=TICK, max_append_bytes=2 * ENTRY,
                        catchup_lag_entries=8, quiesce_after_heartbeats=0)
    appends_to_3: Counter[int] = Counter()

    def count(delivery: Delivery) -> None:
        if delivery.type == "APPEND" and delivery.to == 3:
            appends_to_3.update(delivery.entries)

    async def body(c: Cluster) -> None:
        c.network.latency_s = 2.5 * TICK
        c.network.on_delivery = count
        leader = await c.leader()
        follower = 3 if leader.node_id != 3 else 2
        assert follower == 3  # seed 0 elects node 1 or 2; the counting above watches node 3
        await c.stop_node(3)
        first_missing = leader.last_index + 1
        for chunk in range(3):  # 768 KiB: 12 s at RATE
            await produce(c, leader, [bytes([chunk * 8 + i]) * ENTRY for i in range(8)])
        last = leader.last_index
        appends_to_3.clear()
        throttle = c.hosts[leader.node_id].throttle
        assert throttle is not None
        spent_before = throttle.sent_bytes  # on appends to node 3 while it was down: lost
        await c.start_node(3)
        started = asyncio.get_running_loop().time()
        assert await c.group(3).wait_for(lambda g: g.applied_index >= last, 60)
        took = asyncio.get_running_loop().time() - started
        missing = range(first_missing, last + 1)
        # Every entry it lacked reached it exactly once (the probe that found where the logs
        # match carries none of them: it is answered before anything is sent).
        assert {index: appends_to_3[index] for index in missing} == dict.fromkeys(missing, 1)
        # The throttle's budget went to those entries once each (some left before the restart
        # and were lost: at most these), so the catch-up took the time they take at the rate.
        needed = sum(len(data) for index, _, _, data in c.entries(leader.node_id, last) if index >= first_missing)
        assert throttle.sent_bytes - spent_before <= needed
        assert took < needed / RATE

    async def main() -> None:
        c = Cluster(tmp_path, raft_config=config)
        c.recovery_rate = RATE
        await c.start()
        try:
            await body(c)
        finally:
            await c.close()
    virtual_time.run(main())
