"""Targeted Raft scenarios in the deterministic simulator (invariants are checked on every step)."""

from __future__ import annotations

import pytest
from raft_sim import NO_QUIESCE, Cluster, NetConfig, build_storage

from vdl_broker.raft import (
    EntryType,
    HardState,
    MemoryStorage,
    Message,
    MessageType,
    NotLeaderError,
    ProposalDroppedError,
    RaftConfig,
    RaftNode,
    Role,
)

ELECTION = 10 * 10 * 3  # three max election timeouts in steps (tick_every=10, up to 20 ticks)


def elect(c: Cluster, i: int) -> None:
    """Make node i leader deterministically: campaign and deliver without ticking."""
    c.node(i).campaign()
    c.process(i)
    c.drain()
    assert c.node(i).role == Role.LEADER


def config(pre_vote: bool = True, check_quorum: bool = True, **kw):
    return lambda i: RaftConfig(pre_vote=pre_vote, check_quorum=check_quorum, quiesce_after_heartbeats=0, **kw)


@pytest.mark.parametrize("seed", range(20))
def test_elections_under_loss_reorder_duplication(seed: int) -> None:
    c = Cluster(5, seed, net=NetConfig(loss=0.2, duplicate=0.2, max_delay=15))
    assert c.run_until(lambda: c.leader() is not None, 20 * ELECTION), "no leader elected"
    leader = c.leader()
    assert leader is not None
    for k in range(5):
        try:
            c.propose(leader, b"x%d" % k)
        except NotLeaderError:
            break
    c.run(1000)
    assert len(c.leaders) >= 1  # one leader per term was checked at every step


def test_minority_leader_steps_down_majority_elects() -> None:
    c = Cluster(5, 1)
    elect(c, 1)
    c.propose(1, b"before")
    c.drain()
    term = c.node(1).term
    c.partition({1, 2}, {3, 4, 5})
    assert c.run_until(lambda: c.node(1).role != Role.LEADER, ELECTION), "CheckQuorum did not depose"
    assert c.run_until(lambda: c.leader() in (3, 4, 5), ELECTION)
    new = c.leader()
    assert new is not None and c.node(new).term > term
    index = c.propose(new, b"after")
    assert c.run_until(lambda: c.node(new).commit_index >= index, ELECTION)
    c.heal()
    assert c.run_until(lambda: all(c.nodes[i].applied >= index for i in c.ids), ELECTION)
    assert c.committed_log(1) == c.committed_log(new)


@pytest.mark.parametrize("check_quorum", [True, False])
def test_partitioned_leader_uncommitted_entries_are_truncated(check_quorum: bool) -> None:
    c = Cluster(5, 2, config=config(check_quorum=check_quorum))
    elect(c, 1)
    c.propose(1, b"committed")
    c.drain()
    committed = c.node(1).commit_index
    c.partition({1}, {2, 3, 4, 5})
    lost = [c.propose(1, b"lost-%d" % k) for k in range(3)]
    c.run(ELECTION)
    new = next(i for i in (2, 3, 4, 5) if c.node(i).role == Role.LEADER)
    kept = [c.propose(new, b"kept-%d" % k) for k in range(5)]
    assert c.run_until(lambda: c.node(new).commit_index >= kept[-1], ELECTION)
    c.heal()
    assert c.run_until(lambda: c.nodes[1].applied >= kept[-1], 2 * ELECTION)
    datas = [e.data for e in c.nodes[1].storage.all_entries()]
    assert not any(bytes(d).startswith(b"lost") for d in datas)
    assert committed < lost[0]
    assert c.committed_log(1) == c.committed_log(new)


# Raft paper, Figure 7: the leader of term 8 and follower logs (a)-(f) (terms of entries 1..n).
FIG7_LEADER = [1, 1, 1, 4, 4, 5, 5, 6, 6, 6]
FIG7_FOLLOWERS = {
    "a": [1, 1, 1, 4, 4, 5, 5, 6, 6],
    "b": [1, 1, 1, 4],
    "c": [1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 6],
    "d": [1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 7, 7],
    "e": [1, 1, 1, 4, 4, 4, 4],
    "f": [1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3],
}


@pytest.mark.parametrize("case", sorted(FIG7_FOLLOWERS))
def test_figure7_follower_logs_converge_to_leader(case: str) -> None:
    storages = {
        1: build_storage(FIG7_LEADER, hard_term=7),
        2: build_storage(FIG7_FOLLOWERS[case]),
        3: build_storage([]),
    }
    c = Cluster(3, 7, storages=storages)
    rejects: list[Message] = []
    c.hold = lambda m: m.type == MessageType.APPEND_RESPONSE and m.sender == 2 and m.reject and rejects.append(m)
    # Node 3 (empty log) votes for node 1; node 1 campaigns first so it wins term 8.
    elect(c, 1)
    assert c.node(1).term == 8
    index = c.propose(1, b"new")
    assert c.run_until(lambda: all(c.nodes[i].applied >= index for i in c.ids), ELECTION)
    leader_log = [(e.index, e.term) for e in c.nodes[1].storage.all_entries()]
    assert leader_log[:10] == [(i + 1, t) for i, t in enumerate(FIG7_LEADER)]
    for i in (2, 3):
        assert [(e.index, e.term) for e in c.nodes[i].storage.all_entries()] == leader_log
    # Fast backtracking: one round trip per conflicting term at most, not one per entry.
    assert len(rejects) <= 2, rejects


def test_figure8_old_term_entries_do_not_commit_by_counting() -> None:
    """Figure 8 (c)-(d): entry 2 of term 2 on a majority must not count as committed by the
    leader of term 4; S5 (last term 3) may still win and overwrite it."""
    storages = {
        1: build_storage([1, 2], hard_term=3),
        2: build_storage([1, 2], hard_term=3),
        3: build_storage([1], hard_term=3),
        4: build_storage([1], hard_term=3),
        5: build_storage([1, 3], hard_term=3),
    }
    c = Cluster(5, 8, storages=storages)
    # S1 wins term 4 with S2, S3, S4 (S5's last term 3 beats S1's 2, so S5 refuses).
    c.hold = lambda m: m.sender == 1 and m.type == MessageType.APPEND  # keep S1's appends out
    c.node(1).campaign()
    c.process(1)
    c.drain()
    s1 = c.node(1)
    assert s1.role == Role.LEADER and s1.term == 4
    # S1 replicated entry 2 (term 2) to S3: a majority (S1, S2, S3) now holds it.
    for follower in (2, 3):
        s1.step(Message(MessageType.APPEND_RESPONSE, 1, follower, 4, index=2))
    c.process(1)
    assert s1.commit_index < 2, "an entry of an older term committed by counting replicas"
    c.crash(3)  # (storage is written behind the node's back: reboot it on the new log)
    c.nodes[3].storage.append(c.nodes[1].storage.entries(2, 3))
    c.restart(3)
    # S1 crashes before its no-op (index 3, term 4) reaches anyone; S5 wins term 5 with S2-S4.
    c.crash(1)
    c.hold = None
    c.node(5).campaign()
    c.process(5)
    c.drain()
    assert c.node(5).role == Role.LEADER
    index = c.propose(5, b"s5")
    c.restart(1)
    assert c.run_until(lambda: all(c.nodes[i].applied >= index for i in c.ids), ELECTION)
    # Entry 2 of term 2 was overwritten everywhere by S5's entry 2 of term 3: never committed.
    for i in c.ids:
        assert c.nodes[i].storage.term_at(2) == 3
    assert 2 not in c.oracle or c.oracle[2][0] == 3


def test_leader_commits_old_entries_through_current_term_entry() -> None:
    """Figure 8 (e): once the leader's current-term entry is on a majority, everything before
    it commits too."""
    storages = {i: build_storage([1, 2] if i <= 2 else [1], hard_term=3) for i in (1, 2, 3, 4, 5)}
    c = Cluster(5, 9, storages=storages)
    c.hold = lambda m: m.sender == 1 and m.type == MessageType.APPEND
    elect(c, 1)
    s1 = c.node(1)
    for follower in (2, 3):
        s1.step(Message(MessageType.APPEND_RESPONSE, 1, follower, s1.term, index=2))
    assert s1.commit_index < 2
    for follower in (2, 3):
        s1.step(Message(MessageType.APPEND_RESPONSE, 1, follower, s1.term, index=3))
    assert s1.commit_index == 3  # (the acks are made up: do not let the simulator apply it)


@pytest.mark.parametrize("pre_vote", [True, False])
def test_prevote_keeps_a_rejoining_node_from_disrupting(pre_vote: bool) -> None:
    c = Cluster(3, 3, config=config(pre_vote=pre_vote, check_quorum=False))
    elect(c, 1)
    term = c.node(1).term
    c.partition({1, 2}, {3})
    c.run(3 * ELECTION)  # node 3 times out again and again
    c.heal()
    c.run(ELECTION)
    if pre_vote:
        assert c.node(3).term == term
        assert c.node(1).role == Role.LEADER and c.node(1).term == term
    else:
        assert c.node(1).term > term  # without PreVote the rejoining node forced a new term


def test_leadership_transfer() -> None:
    c = Cluster(3, 4)
    elect(c, 1)
    for k in range(5):
        c.propose(1, b"v%d" % k)
    c.drain()
    term = c.node(1).term
    c.partition({1, 2}, {1, 3})  # 2 and 3 cannot talk to each other; both talk to 1
    c.node(1).transfer_leadership(3)
    with pytest.raises(ProposalDroppedError):
        c.node(1).propose(b"during transfer")
    c.process(1)
    c.drain()
    assert c.node(3).role == Role.LEADER
    assert c.node(3).term == term + 1
    assert c.node(1).role == Role.FOLLOWER and c.node(1).leader_id == 3


def test_leadership_transfer_to_lagging_follower_catches_it_up_first() -> None:
    c = Cluster(3, 5)
    elect(c, 1)
    c.partition({1, 2}, {3})
    for k in range(10):
        c.propose(1, b"v%d" % k)
    c.run(20)
    c.heal()
    c.node(1).transfer_leadership(3)
    c.process(1)
    assert c.run_until(lambda: c.node(3).role == Role.LEADER, ELECTION)
    assert c.nodes[3].storage.last_index >= 11


def test_transfer_aborts_after_election_timeout() -> None:
    c = Cluster(3, 6)
    elect(c, 1)
    c.crash(3)
    c.node(1).transfer_leadership(3)
    with pytest.raises(ProposalDroppedError):
        c.node(1).propose(b"x")
    c.run(12 * 10)
    assert c.node(1).role == Role.LEADER
    c.propose(1, b"after abort")


def test_follower_behind_compacted_log_resets_to_leader_start() -> None:
    c = Cluster(3, 10)
    elect(c, 1)
    c.crash(3)
    last = 0
    for k in range(20):
        last = c.propose(1, b"v%d" % k)
    assert c.run_until(lambda: c.nodes[2].applied >= last, ELECTION)
    for i in (1, 2):
        c.nodes[i].storage.compact(15)
    c.restart(3)
    assert c.run_until(lambda: c.nodes[3].applied >= last, ELECTION)
    st = c.nodes[3].storage
    assert st.first_index == 15 and st.start.data == ("start", 15)
    assert [e.index for e in st.all_entries()] == list(range(15, last + 1))


def test_pipelined_appends_are_bounded_per_follower() -> None:
    c = Cluster(3, 11, config=config(max_inflight_messages=3, max_append_bytes=4))
    elect(c, 1)
    captured: list[Message] = []
    c.hold = lambda m: m.sender == 1 and m.to == 2 and m.type == MessageType.APPEND and not captured.append(m)
    for k in range(20):
        c.propose(1, b"%04d" % k)
    appends = [m for m in captured if m.entries]
    assert len(appends) == 3  # window full: nothing more until acknowledgements arrive
    assert all(len(m.entries) == 1 for m in appends)  # 4 bytes per append
    c.hold = None
    for m in appends:
        c.deliver(m)
    assert c.run_until(lambda: c.nodes[2].applied >= 21, ELECTION)


def test_batched_proposals_travel_in_one_append() -> None:
    c = Cluster(3, 12)
    elect(c, 1)
    captured: list[Message] = []
    c.hold = lambda m: m.sender == 1 and m.type == MessageType.APPEND and not captured.append(m)
    node = c.node(1)
    for k in range(50):
        node.propose(b"r%d" % k)
    c.process(1)
    assert sorted(len(m.entries) for m in captured) == [50, 50]


def test_leader_counts_itself_only_after_its_own_sync() -> None:
    storage = MemoryStorage()
    node = RaftNode(1, [1], storage, NO_QUIESCE)
    node.campaign()
    rd = node.ready()
    assert node.role == Role.LEADER and rd.hard_state == HardState(1, 1)
    assert [e.type for e in rd.entries] == [EntryType.NOOP]
    assert node.commit_index == 0  # not durable yet: no commit
    storage.append(rd.entries)
    node.advance(rd)
    assert node.commit_index == 1
    index = node.propose(b"a")
    rd = node.ready()
    assert rd.entries[-1].index == index and node.commit_index == 1
    storage.append(rd.entries)
    node.advance(rd)
    assert node.commit_index == index
    rd = node.ready()
    assert [e.data for e in rd.committed_entries] == [b"a"]
    node.advance(rd)
    assert not node.has_ready()


def test_vote_is_in_the_same_ready_as_its_reply() -> None:
    node = RaftNode(2, [1, 2, 3], MemoryStorage(), NO_QUIESCE)
    node.step(Message(MessageType.VOTE, 2, 1, 5, log_term=0, index=0))
    rd = node.ready()
    assert rd.hard_state == HardState(5, 1)
    assert [(m.type, m.reject) for m in rd.messages] == [(MessageType.VOTE_RESPONSE, False)]
    assert rd.must_sync and not rd.early_messages


def test_vote_in_an_already_durable_term_still_waits_for_the_sync() -> None:
    storage = MemoryStorage()
    storage.hard_state = HardState(5, 0)
    node = RaftNode(2, [1, 2, 3], storage, NO_QUIESCE, hard_state=storage.hard_state)
    node.step(Message(MessageType.VOTE, 2, 1, 5, log_term=0, index=0))
    rd = node.ready()
    assert rd.hard_state == HardState(5, 1) and not rd.early_messages
    assert [m.type for m in rd.messages] == [MessageType.VOTE_RESPONSE]


def test_leader_appends_may_leave_before_its_own_sync_once_its_term_is_durable() -> None:
    c = Cluster(3, 15)
    elect(c, 1)
    node = c.node(1)
    node.propose(b"x")
    rd = node.ready()
    assert rd.entries and not rd.messages
    assert {m.type for m in rd.early_messages} == {MessageType.APPEND}
    c.nodes[1].storage.append(rd.entries)
    node.advance(rd)
    # A candidate's vote requests promise its own durable vote: they never leave early.
    cand = RaftNode(1, [1, 2, 3], MemoryStorage(), RaftConfig(pre_vote=False, quiesce_after_heartbeats=0))
    cand.campaign()
    rd = cand.ready()
    assert rd.hard_state == HardState(1, 1) and not rd.early_messages
    assert [m.type for m in rd.messages] == [MessageType.VOTE, MessageType.VOTE]


def test_propose_on_follower_names_the_leader() -> None:
    c = Cluster(3, 13)
    elect(c, 2)
    with pytest.raises(NotLeaderError) as info:
        c.node(1).propose(b"x")
    assert info.value.leader_id == 2
    status = c.node(2).peer_status()
    assert set(status) == {1, 2, 3} and status[1].match == c.node(2).last_index


def test_restart_recovers_from_storage_and_hard_state() -> None:
    c = Cluster(3, 14)
    elect(c, 1)
    for k in range(5):
        c.propose(1, b"v%d" % k)
    c.drain()
    for i in c.ids:
        c.crash(i)
    for i in c.ids:
        c.restart(i)
    assert all(c.node(i).term == c.nodes[i].storage.hard_state.term for i in c.ids)
    assert c.run_until(lambda: c.leader() is not None, ELECTION)
    index = c.propose(c.leader(), b"after restart")
    assert c.run_until(lambda: all(c.nodes[i].applied >= index for i in c.ids), ELECTION)


@pytest.mark.parametrize("seed", range(10))
def test_a_cut_off_leader_loses_its_read_lease_before_another_leader_is_elected(seed: int) -> None:
    """The read lease (RaftNode.read_lease_tick): a leader counts a heartbeat answered by a
    majority; once cut off, its lease is at least election_ticks - 1 ticks old by the time any
    other node wins an election (the driver serves reads only while it is younger)."""
    c = Cluster(5, seed, net=NetConfig(max_delay=3))
    elect(c, 1)
    assert c.node(1).read_lease_tick() == -1  # no heartbeat answered yet
    assert c.run_until(lambda: c.node(1).read_lease_tick() >= 0, ELECTION)
    c.partition({1, 2}, {3, 4, 5})
    assert c.run_until(lambda: c.leader() not in (None, 1), 3 * ELECTION), "the majority elected nobody"
    old = c.node(1)
    lease = old.read_lease_tick()
    assert lease == -1 or old.ticks - lease >= old.config.election_ticks - 1, (old.ticks, lease)


def test_a_leader_handing_over_leadership_has_no_read_lease() -> None:
    c = Cluster(3, 4)
    elect(c, 1)
    assert c.run_until(lambda: c.node(1).read_lease_tick() >= 0, ELECTION)
    c.node(1).transfer_leadership(2)
    assert c.node(1).read_lease_tick() == -1


def test_a_node_refuses_votes_for_one_election_timeout_after_start_with_lease_after_start() -> None:
    node = RaftNode(2, [1, 2, 3], MemoryStorage(), NO_QUIESCE, lease_after_start=True)
    node.step(Message(MessageType.VOTE, 2, 1, 5, log_term=0, index=0))
    assert node.term == 0 and not node.has_ready()  # ignored: maybe counted in a lease
    for _ in range(node.config.election_ticks):
        node.tick()
    if node.has_ready():
        node.advance(node.ready())  # its own pre-vote campaign
    node.step(Message(MessageType.VOTE, 2, 1, 5, log_term=0, index=0))
    replies = [(m.type, m.to, m.reject) for m in node.ready().messages]
    assert replies == [(MessageType.VOTE_RESPONSE, 1, False)]


def test_the_leader_knows_when_it_last_heard_from_each_peer_and_last_saw_it_caught_up() -> None:
    """What DescribeQuorum reports as a voter's last fetch and last caught-up times (KIP-595): the
    ticks since the leader last heard from it, and since it last answered holding the whole log."""
    c = Cluster(3, 21, config=config())
    elect(c, 1)
    c.propose(1, b"a")
    c.run(20 * c.tick_every)
    leader = c.node(1)
    beat = leader.config.heartbeat_ticks
    status = leader.peer_status()
    assert (status[1].heard_ticks_ago, status[1].caught_up_ticks_ago) == (0, 0)
    for peer in (2, 3):
        assert 0 <= status[peer].heard_ticks_ago <= beat
        assert status[peer].caught_up_ticks_ago == status[peer].heard_ticks_ago  # it holds everything
    c.partition({1, 2}, {3})
    c.run(c.tick_every)
    cut_at = leader.ticks
    c.propose(1, b"b")
    c.run(30 * c.tick_every)
    status = leader.peer_status()
    assert leader.role == Role.LEADER and status[3].match < leader.last_index == status[2].match
    assert 0 <= status[2].heard_ticks_ago <= beat and status[2].caught_up_ticks_ago == status[2].heard_ticks_ago
    assert status[3].heard_ticks_ago >= leader.ticks - cut_at
    assert status[3].caught_up_ticks_ago >= status[3].heard_ticks_ago
    c.heal()
    assert c.run_until(lambda: leader.peer_status()[3].match == leader.last_index, 20 * c.tick_every)
    status = leader.peer_status()
    assert 0 <= status[3].heard_ticks_ago <= beat and status[3].caught_up_ticks_ago == status[3].heard_ticks_ago


def test_a_survivor_that_refuses_a_lagging_candidate_campaigns_at_its_next_tick() -> None:
    """The leader's node is gone and both survivors forgot it (node liveness); the one that
    campaigns first (the designated successor, node 3) lags: node 2 refuses it for its log, and
    campaigns itself at its next tick instead of after its own election timeout (1-2 s more
    without a leader in a real cluster). Having deferred to the successor, it skips a term: the
    cut-off leader named node 3 with the next term as its epoch, and clients that took that take
    node 2 only with a newer one."""
    c = Cluster(3, 4, config=config())
    elect(c, 1)
    c.partition({1, 2}, {3})
    for k in range(3):
        c.propose(1, b"v%d" % k)  # committed by 1 and 2; node 3 never gets them
    c.drain()
    c.partition({1}, {2, 3})
    for i in (2, 3):
        c.node(i).forget_leader()
    c.node(2).defer_campaign(5)  # what the host does to a survivor that is not the successor
    c.node(3).campaign()
    c.process(3)
    c.drain()
    assert c.node(3).role == Role.PRE_CANDIDATE and c.node(2).role == Role.FOLLOWER  # 2 refused 3
    c.node(2).tick()
    c.process(2)
    c.drain()
    assert c.node(2).role == Role.LEADER
    assert c.node(2).term == c.node(1).term + 2
