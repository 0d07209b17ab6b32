"""How the leader tells followers a new commit: in its next append, or at its next tick -- never
with an empty append per commit per follower, which doubled the frames, Readys and answers of
every replicated batch."""

from __future__ import annotations

import dataclasses

from raft_sim import NO_QUIESCE, Cluster

from vdl_broker.raft import Message, MessageType, Role


def _elect(c: Cluster, i: int) -> None:
    c.node(i).campaign()
    c.process(i)
    c.drain()
    assert c.node(i).role == Role.LEADER


def test_a_commit_goes_out_with_the_next_append_or_tick_not_an_empty_append() -> None:
    c = Cluster(3, 8)
    _elect(c, 1)
    c.propose(1, b"warm")
    c.drain()
    c.node(1).tick()  # the followers hear of every commit so far
    c.process(1)
    c.drain()
    sent: list[Message] = []
    c.hold = lambda m: bool(sent.append(m))  # record, keep nothing out
    first = c.propose(1, b"a")
    c.drain()
    assert c.node(1).commit_index == first
    from_leader = [m for m in sent if m.sender == 1 and m.type == MessageType.APPEND]
    assert [(m.to, [e.index for e in m.entries]) for m in from_leader] == [(2, [first]), (3, [first])]
    assert all(c.node(i).commit_index < first for i in (2, 3))  # told nothing yet
    second = c.propose(1, b"b")  # the next append carries the commit of the first
    assert [(m.to, m.commit) for m in sent[len(from_leader) + 2:] if m.type == MessageType.APPEND] == \
        [(2, first), (3, first)]
    c.drain()
    assert all(c.node(i).commit_index == first for i in (2, 3))
    sent.clear()
    c.node(1).tick()  # nothing more to append: the tick tells the commit of the second
    c.process(1)
    c.drain()
    notices = [m for m in sent if m.sender == 1 and m.type == MessageType.APPEND]
    assert [(m.to, len(m.entries), m.commit) for m in notices] == [(2, 0, second), (3, 0, second)]
    assert all(c.node(i).commit_index == second for i in (2, 3))


def test_with_prompt_commit_notices_followers_learn_a_commit_without_waiting_for_a_tick() -> None:
    """The metadata group's followers serve what it commits (ACLs, users, configs) right after the
    leader answered the client: there the notice goes at once."""
    prompt = dataclasses.replace(NO_QUIESCE, prompt_commit_notices=True)
    c = Cluster(3, 8, config=lambda i: prompt)
    _elect(c, 1)
    first = c.propose(1, b"a")
    c.drain()
    assert c.node(1).commit_index == first
    assert all(c.node(i).commit_index == first for i in (2, 3))  # no tick, no further append
