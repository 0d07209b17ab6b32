"""Membership changes in the simulator (vdl_broker.raft.membership): learners, single-server
changes, the rules the leader follows and why, and where the configuration lives across
restarts and retention. Invariants are checked on every step (raft_sim)."""

from __future__ import annotations

import pytest
from raft_sim import Cluster, InvariantError, build_storage

from vdl_broker.raft import (
    ConfigChangeError,
    ConfigRecord,
    ConfState,
    Entry,
    EntryType,
    MemoryStorage,
    Message,
    MessageType,
    NotLeaderError,
    RaftConfig,
    RaftNode,
    Role,
)
from vdl_broker.raft.membership import Membership, check_change, decode_conf, encode_conf, make_conf

ELECTION = 10 * 10 * 3


def elect(c: Cluster, i: int) -> None:
    c.node(i).campaign()
    c.process(i)
    c.drain()
    assert c.node(i).role == Role.LEADER, f"node {i} did not win"


def commit(c: Cluster, leader: int, data: bytes, members: tuple[int, ...] | None = None) -> int:
    index = c.propose(leader, data)
    nodes = members if members is not None else c.node(leader).conf.members
    assert c.run_until(lambda: all(c.nodes[i].applied >= index for i in nodes if c.nodes[i].node), ELECTION)
    return index


def change(c: Cluster, leader: int, voters: tuple[int, ...], learners: tuple[int, ...] = ()) -> int:
    index = c.change_conf(leader, ConfState(voters, learners))
    assert index is not None, "the change was refused"
    assert c.run_until(lambda: c.node(leader).commit_index >= index, ELECTION), "the change did not commit"
    return index


def test_a_learner_gets_the_log_but_neither_votes_nor_counts() -> None:
    c = Cluster(3, 1)
    elect(c, 1)
    learner = c.add_node()
    change(c, 1, (1, 2, 3), (learner,))
    index = commit(c, 1, b"to-everyone")
    assert c.nodes[learner].applied >= index and c.node(learner).conf == ConfState((1, 2, 3), (learner,))
    # Two voters cut off: the leader and the learner alone commit nothing.
    c.partition({1, learner}, {2}, {3})
    stuck = c.propose(1, b"needs-a-voter")
    c.run(ELECTION // 3)
    assert c.node(1).commit_index < stuck
    # The learner, alone with a complete log, never campaigns, whatever happens to the voters.
    for i in (1, 2, 3):
        c.crash(i)
    term = c.node(learner).term
    for _ in range(3 * ELECTION):
        c.step_time()
        assert c.node(learner).role == Role.FOLLOWER
    assert c.node(learner).term == term


def test_promoted_learner_counts_and_can_lead_removed_voter_cannot() -> None:
    c = Cluster(3, 2)
    elect(c, 1)
    commit(c, 1, b"before")
    new = c.add_node()
    change(c, 1, (1, 2, 3), (new,))
    change(c, 1, (1, 2, 3, new))
    change(c, 1, (1, 3, new))  # 2 leaves: {1,3,4}, one voter at a time throughout
    index = commit(c, 1, b"after", members=(1, 3, new))
    assert c.node(1).conf == ConfState((1, 3, new))
    # With 2 gone, {1, new} is a majority: 3 is not needed.
    c.partition({1, new}, {2}, {3})
    later = c.propose(1, b"with-the-newcomer")
    assert c.run_until(lambda: c.node(1).commit_index >= later, ELECTION)
    # The newcomer can lead; the removed node, which never learned it was removed, cannot win.
    c.heal()
    c.node(1).transfer_leadership(new)
    c.process(1)
    assert c.run_until(lambda: c.leader() == new, ELECTION)
    term = c.node(new).term
    c.run(4 * ELECTION)  # node 2 keeps timing out: PreVote and the leader lease keep it harmless
    assert c.leader() == new and c.node(new).term == term
    assert index <= c.node(new).commit_index


def test_leader_rules_one_voter_at_a_time_no_overlap_leader_stays() -> None:
    c = Cluster(3, 3)
    elect(c, 1)
    commit(c, 1, b"x")
    leader = c.node(1)
    with pytest.raises(ConfigChangeError, match="one voter at a time"):
        leader.propose_conf_change(ConfState((1, 4, 5)))
    with pytest.raises(ConfigChangeError, match="transfer leadership first"):
        leader.propose_conf_change(ConfState((2, 3)))
    with pytest.raises(ConfigChangeError, match="at least one voter"):
        check_change(ConfState((1,)), ConfState((), (1,)), 1)
    with pytest.raises(ConfigChangeError, match="propose_conf_change"):
        leader.propose(b"{}", EntryType.CONFIG)
    c.change_conf(1, ConfState((1, 2, 3), (4,)))
    with pytest.raises(ConfigChangeError, match="not committed yet"):
        leader.propose_conf_change(ConfState((1, 2, 3)))  # the first is still in flight
    with pytest.raises(NotLeaderError):
        c.node(2).propose_conf_change(ConfState((1, 2, 3)))


def _ongaro_setup() -> Cluster:
    """Ongaro's 2015 scenario, up to the point where the rule matters. C0 = {1,2,3,4}; leader 1
    (term 1) appends C1 = C0 + 5 and only 5 receives it; node 2 wins term 2 under C0 with the
    votes of 3 and 4, but its no-op reaches only 3: not committed (3 of 4 needed)."""
    # No leader lease / PreVote: the elections below happen at once, without waiting timeouts.
    c = Cluster(4, 4, config=lambda i: RaftConfig(pre_vote=False, check_quorum=False, quiesce_after_heartbeats=0))
    elect(c, 1)
    commit(c, 1, b"committed-in-term-1")
    five = c.add_node()
    c.partition({1, five}, {2, 3, 4})
    assert c.change_conf(1, ConfState((1, 2, 3, 4, five))) is not None  # one voter more: allowed
    c.drain()
    assert c.node(five).conf.voters == (1, 2, 3, 4, five)
    c.hold = lambda m: m.to == 4 and m.type in (MessageType.APPEND, MessageType.HEARTBEAT)
    elect(c, 2)
    assert c.node(2).term == 2 and not c.node(2).current_term_committed
    return c


def _node1_campaigns_in_term_3(c: Cluster) -> None:
    """Node 1 restarts (a follower of term 1) and campaigns twice: term 2 (where 4 voted for 2
    already), then term 3, with 4 and 5 reachable."""
    c.partition({1, 4, 5}, {2, 3})
    c.crash(1)
    c.restart(1)
    while c.node(1).term < 3:
        c.node(1).campaign()
        c.process(1)
        c.drain()


def test_ongaro_bug_a_leader_changes_the_configuration_only_after_committing_in_its_term() -> None:
    c = _ongaro_setup()
    with pytest.raises(ConfigChangeError, match="not committed an entry of its term"):
        c.node(2).propose_conf_change(ConfState((2, 3, 4)))
    # Once its no-op commits (4 hears from it), the change is allowed, and node 1 (holding C1)
    # can no longer win: 4 now holds a term-2 entry and refuses it.
    c.hold = None
    c.partition({1, 5}, {2, 3, 4})
    assert c.run_until(lambda: c.node(2).current_term_committed, ELECTION)
    change(c, 2, (2, 3, 4))
    _node1_campaigns_in_term_3(c)
    assert c.node(1).role != Role.LEADER


def test_ongaro_bug_without_the_rule_a_leader_loses_a_committed_entry() -> None:
    """What the rule prevents: the same history with the check skipped (the entry appended
    behind the rule's back) lets node 1 win term 3 without the committed C2 entry."""
    c = _ongaro_setup()
    leader = c.node(2)
    c.partition({1, 5}, {2, 3}, {4})
    leader._append_own(EntryType.CONFIG, encode_conf(ConfState((2, 3, 4))))  # noqa: SLF001 - the bug
    leader._sync_conf()  # noqa: SLF001
    c.process(2)
    c.hold = None
    # C2 = {2,3,4} commits with {2,3}, and the no-op of term 2 with it.
    assert c.run_until(lambda: c.max_committed >= c.node(2).last_index, ELECTION)
    with pytest.raises(InvariantError, match="lacks committed entry"):
        _node1_campaigns_in_term_3(c)  # wins with 1, 4, 5: a majority of C1


def test_configuration_survives_restart_and_retention_and_reaches_new_members_with_the_log_start() -> None:
    c = Cluster(3, 5)
    elect(c, 1)
    commit(c, 1, b"a")
    learner = c.add_node()
    change(c, 1, (1, 2, 3), (learner,))
    change(c, 1, (1, 2, 3, learner))
    for k in range(5):
        commit(c, 1, b"after-%d" % k)
    # Retention removes every entry holding a configuration, on every node.
    for i in c.ids:
        sn = c.nodes[i]
        sn.storage.compact(sn.applied + 1)
        assert not any(e.type == EntryType.CONFIG for e in sn.storage.all_entries())
    # A restart rebuilds the configuration from the saved records alone.
    for i in c.ids:
        c.crash(i)
        c.restart(i)
        assert c.node(i).conf == ConfState((1, 2, 3, learner))
    assert c.run_until(lambda: c.leader() is not None, ELECTION)
    leader = c.leader()
    assert leader is not None
    commit(c, leader, b"after-restart")
    # A brand-new member gets the log start (a reset) carrying the configuration in force there.
    late = c.add_node()
    c.change_conf(leader, ConfState((1, 2, 3, learner), (late,)))
    index = commit(c, leader, b"for-the-late-one")
    assert c.nodes[late].applied >= index
    assert c.nodes[late].storage.first_index > 1  # it started from a reset, not from entry 1
    assert c.node(late).conf == ConfState((1, 2, 3, learner), (late,))
    c.crash(late)
    c.restart(late)  # from its saved records: the reset's base and the entry that added it
    assert c.node(late).conf == ConfState((1, 2, 3, learner), (late,))


def test_saved_records_naming_entries_the_log_lacks_are_dropped() -> None:
    storage = build_storage([1, 1, 2])
    records = [ConfigRecord(0, 0, ConfState((1, 2, 3))), ConfigRecord(2, 1, ConfState((1, 2, 3), (4,))),
               ConfigRecord(3, 1, ConfState((1, 2, 3, 4))),  # the log's entry 3 has term 2: cut
               ConfigRecord(7, 2, ConfState((1, 2, 3, 4, 5)))]  # beyond the log: a torn tail
    node = RaftNode(1, [1, 2, 3], storage, hard_state=storage.hard_state, membership=records)
    assert node.conf == ConfState((1, 2, 3), (4,))
    rd = node.ready()
    assert rd.membership == records[:2]  # rewritten without the records the log does not back


def test_joining_node_knows_no_voters_and_never_campaigns() -> None:
    node = RaftNode(4, [], MemoryStorage())
    assert node.conf == ConfState() and node.voters == ()
    for _ in range(100):
        node.tick()
        node.campaign()
        assert node.role == Role.FOLLOWER
        if node.has_ready():
            rd = node.ready()
            assert not rd.messages and not rd.early_messages
            node.advance(rd)


def test_conf_payloads_and_membership_records() -> None:
    conf = make_conf([3, 1, 2, 2], [4, 1])
    assert conf == ConfState((1, 2, 3), (4,))  # sorted; a voter is never also a learner
    assert decode_conf(encode_conf(conf)) == conf
    assert decode_conf(b"not json") is None and decode_conf(b'{"voters": [0]}') is None
    with pytest.raises(ValueError):
        make_conf([True])
    m = Membership(ConfState((1,)), [], 1, 0, lambda i: 0)
    assert m.current == ConfState((1,)) and m.conf_at(5) == ConfState((1,))


def _catch_up_on_a_prefix_naming_it_the_only_voter(commit: int) -> tuple[RaftNode, MemoryStorage]:
    """Node 1 joins (no configuration, empty log) a group led by node 2 whose log starts with
    the stream's first placement, node 1 alone; the leader sent only that prefix so far."""
    storage = MemoryStorage()
    node = RaftNode(1, [], storage, RaftConfig(pre_vote=False, check_quorum=False))
    prefix = [Entry(1, 1, EntryType.CONFIG, encode_conf(make_conf([1]))), Entry(2, 1, EntryType.DATA, b"old")]
    node.step(Message(MessageType.APPEND, 1, 2, 5, index=0, log_term=0, entries=prefix, commit=commit))
    return node, storage


def _campaigns(node: RaftNode, storage: MemoryStorage) -> bool:
    for _ in range(ELECTION):
        node.tick()
        while node.has_ready():
            rd = node.ready()
            storage.append(rd.entries)  # the driver's part: the entries durable, then advance
            storage.hard_state = rd.hard_state or storage.hard_state
            if node.role != Role.FOLLOWER or any(m.type in (MessageType.VOTE, MessageType.PRE_VOTE)
                                                 for m in [*rd.messages, *rd.early_messages]):
                return True
            node.advance(rd)
    return node.role != Role.FOLLOWER


def test_joining_node_never_campaigns_on_an_old_prefix_of_the_log_naming_it_the_only_voter() -> None:
    """A stream moved back to a node it left: catching up from the log start, the joiner holds
    for a while a prefix whose configuration is its old one-voter placement. Elected on it, it
    would serve that old log and lose everything written since (the soak's loss)."""
    node, storage = _catch_up_on_a_prefix_naming_it_the_only_voter(commit=1000)
    assert node.conf == ConfState((1,))
    assert not _campaigns(node, storage)
    # A stale TIMEOUT_NOW (its leader's last entry is not here) does not make it campaign either.
    node.step(Message(MessageType.TIMEOUT_NOW, 1, 2, 5, index=900, log_term=5))
    assert not _campaigns(node, storage)
    # Holding the leader's commit index, its configuration is the group's current one: a
    # node that is a voter there campaigns as usual (here, the prefix is all there is).
    assert _campaigns(*_catch_up_on_a_prefix_naming_it_the_only_voter(commit=2))


def test_a_leadership_transfer_reaches_a_joiner_holding_the_leaders_log() -> None:
    """TIMEOUT_NOW names the leader's last entry: a joiner holding it campaigns at once, even
    before it held the first commit index it was told; so does one told by a leader of an
    older version, which names no entry."""
    for index, log_term in ((2, 1), (0, 0)):
        node, storage = _catch_up_on_a_prefix_naming_it_the_only_voter(commit=1000)
        node.step(Message(MessageType.TIMEOUT_NOW, 1, 2, 5, index=index, log_term=log_term))
        assert node.role == Role.LEADER  # the one voter of its configuration


def _move(c: Cluster, leader: int, to: int) -> None:
    """Move a one-voter group from `leader` to `to` (a node already started): add it as a
    learner, promote it once caught up, hand it leadership, remove the old voter."""
    change(c, leader, (leader,), (to,))
    assert c.run_until(lambda: c.node(leader).match_index(to) == c.node(leader).last_index, ELECTION)
    change(c, leader, (leader, to))
    c.node(leader).transfer_leadership(to)
    c.process(leader)
    assert c.run_until(lambda: c.leader() == to and c.node(to).current_term_committed, ELECTION), f"{to} not leading"
    change(c, to, (to,))


def test_a_group_moved_back_to_a_node_never_elects_it_on_the_old_prefix_while_it_catches_up() -> None:
    """One voter, moved 1 -> 2 -> 3 -> 2: node 2 joins again empty and copies node 3's log from
    its start, which holds the configuration naming node 2 the only voter. Its catch-up stalls
    on that prefix (a throttled copy), and the leader falls silent for many election timeouts:
    it must not elect itself there (the simulator's leader completeness check fails if it does). Then it catches up, takes
    over by a transfer, the old voter is removed, and a restart leaves it leading as usual."""
    c = Cluster(1, 7)
    elect(c, 1)
    two = c.add_node()
    _move(c, 1, two)
    written = [commit(c, two, f"on-two-{n}".encode(), members=(two,)) for n in range(3)]
    prefix_end = c.node(two).last_index  # the last entry of node 2's placement
    three = c.add_node()
    _move(c, two, three)
    commit(c, three, b"on-three", members=(three,))
    c.rejoin(two)

    def throttled(m: Message) -> bool:
        """Appends to node 2 carry at most the old placement's entries."""
        if m.type != MessageType.APPEND or m.to != two or not m.entries or m.entries[-1].index <= prefix_end:
            return False
        if m.index < prefix_end or c.nodes[two].storage.last_index < prefix_end:  # (a probe: answered)
            c.send(Message(MessageType.APPEND, two, m.sender, m.term, log_term=m.log_term, index=m.index,
                           entries=[e for e in m.entries if e.index <= prefix_end], commit=m.commit))
        return True

    c.hold = throttled
    change(c, three, (three,), (two,))
    assert c.run_until(lambda: c.nodes[two].storage.last_index == prefix_end, ELECTION)
    assert c.node(two).conf == ConfState((two,))  # the old placement's configuration
    c.run(ELECTION)
    c.partition({two}, {three})  # and the leader falls silent (it restarts, say)
    c.run(5 * ELECTION)
    assert c.node(two).role == Role.FOLLOWER and c.node(two).term <= c.node(three).term
    c.heal()
    c.hold = None
    _move(c, three, two)
    back = commit(c, two, b"back", members=(two,))
    assert [d for i, (_, d) in sorted(c.oracle.items()) if i in (*written, back)] == [
        b"on-two-0", b"on-two-1", b"on-two-2", b"back"]
    c.crash(two)
    c.restart(two)  # an ordinary restart: its log and configuration decide, it leads again
    assert c.run_until(lambda: c.leader() == two, ELECTION)


def test_a_promoted_joiner_campaigns_when_its_leader_is_gone() -> None:
    """The joiner's wait ends once it holds what it was first told committed: promoted, it
    campaigns on its own when the leader fails (here it is the only one that can win)."""
    c = Cluster(3, 5)
    elect(c, 1)
    commit(c, 1, b"before")
    new = c.add_node()
    change(c, 1, (1, 2, 3), (new,))
    change(c, 1, (1, 2, 3, new))
    change(c, 1, (1, 2, new))
    index = commit(c, 1, b"promoted", members=(1, 2, new))
    c.crash(1)
    # Node 2's own campaigns reach nobody: only the newcomer can win, with node 2's vote.
    c.hold = lambda m: m.sender == 2 and m.type in (MessageType.VOTE, MessageType.PRE_VOTE)
    assert c.run_until(lambda: c.leader() == new, 4 * ELECTION)
    assert c.node(new).commit_index >= index


def _demotion_only_the_demoted_holds() -> Cluster:
    """C0 = {1,2,3,4}, leader 1. It demotes 4 to a learner (C1 = {1,2,3} + learner 4) and only 4
    appends C1 before 1 fails for good: 4's log is the longest of the three left, and C1 says 4
    is no voter."""
    c = Cluster(4, 8)
    elect(c, 1)
    commit(c, 1, b"before")
    c.partition({1, 4}, {2}, {3})
    index = c.change_conf(1, ConfState((1, 2, 3), (4,)))
    assert index is not None
    assert c.run_until(lambda: c.nodes[4].storage.last_index >= index, ELECTION)
    c.crash(1)
    c.heal()
    assert c.node(4).conf == ConfState((1, 2, 3), (4,)) and c.node(2).conf == ConfState((1, 2, 3, 4))
    return c


def test_a_node_the_uncommitted_configuration_demoted_campaigns_while_it_is_needed() -> None:
    """Three of C0's four voters are up, yet 2 and 3 cannot win (4 refuses them: its log is longer)
    and 4 must not stay out: until C1 commits it is still needed (Raft thesis §4.2.2). It wins
    with the votes of 2 and 3 (a majority of C1, its own not counted), commits C1, then hands
    over to a voter."""
    c = _demotion_only_the_demoted_holds()
    assert c.run_until(lambda: c.leader() == 4, 4 * ELECTION)
    assert c.run_until(lambda: c.leader() in (2, 3), 4 * ELECTION)
    leader = c.leader()
    assert leader is not None
    index = commit(c, leader, b"after", members=(2, 3, 4))
    assert c.node(leader).conf == ConfState((1, 2, 3), (4,)) and c.node(leader).commit_index >= index
    assert c.node(4).role == Role.FOLLOWER and c.node(4).conf == ConfState((1, 2, 3), (4,))


def test_a_demoted_node_does_not_count_its_own_vote() -> None:
    """With 3 down too, 4 has only 2's vote: one of C1's three voters, no majority, though the two
    of them would be one of C0's four if 4 counted itself."""
    c = _demotion_only_the_demoted_holds()
    c.crash(3)
    campaigned = False
    for _ in range(4 * ELECTION):
        c.step_time()
        assert c.leader() is None
        campaigned = campaigned or c.node(4).role in (Role.PRE_CANDIDATE, Role.CANDIDATE)
    assert campaigned


def test_a_learner_holding_the_only_intact_newer_log_campaigns_when_a_candidate_needs_it() -> None:
    """Voters {1,2,3}, learner 4. Leader 1, cut off, appends the promotion of 4 alone; 2 or 3
    wins term 2 and gets its entries to 4 only; then the winner's log is damaged. 1 counts 4 a
    voter (its uncommitted promotion) and needs it, 4 refuses it (its term-2 log is newer), the
    other voter needs 1 or the winner and gets neither (1's log is longer, the winner is
    recovering), and 4 is a learner: no leader. Asked for its vote by a candidate counting it a
    voter, 4 campaigns (not counting itself), wins, commits its term, and hands over."""
    c = Cluster(3, 9)
    elect(c, 1)
    learner = c.add_node()
    change(c, 1, (1, 2, 3), (learner,))
    commit(c, 1, b"before")
    c.partition({1}, {2, 3, learner})
    assert c.change_conf(1, ConfState((1, 2, 3, learner))) is not None
    c.propose(1, b"cut-off")
    c.hold = lambda m: m.type == MessageType.APPEND and {m.sender, m.to} == {2, 3}
    assert c.run_until(lambda: c.leader() in (2, 3), 4 * ELECTION)
    winner = c.leader()
    assert winner is not None
    index = c.propose(winner, b"term-2")
    assert c.run_until(lambda: c.nodes[learner].storage.last_index >= index, ELECTION)
    c.corrupt(winner, cut_at=index - 1)
    c.restart(winner)
    c.hold = None
    c.heal()
    assert c.node(1).conf == ConfState((1, 2, 3, learner)) and c.node(winner).recovering
    assert c.run_until(lambda: c.leader() == learner, 4 * ELECTION)
    assert c.run_until(lambda: c.leader() in (1, 2, 3), 4 * ELECTION)
    leader = c.leader()
    assert leader is not None
    after = commit(c, leader, b"after", members=(1, 2, 3, learner))
    assert c.node(leader).conf == ConfState((1, 2, 3), (learner,)) and not c.node(winner).recovering
    assert c.nodes[learner].applied >= after
