"""Configuration changes at the node: proposing one, and adopting the configuration in force
(quorum, peers, the leader's progress). A room of RaftNode (state.py); the rules and their
safety argument are in membership.py, the configuration records there too.
"""

from __future__ import annotations

from vdl_broker.raft.membership import ConfigChangeError, check_change, encode_conf
from vdl_broker.raft.progress import Progress
from vdl_broker.raft.state import NodeState
from vdl_broker.raft.types import (
    NONE,
    ConfState,
    EntryType,
    NotLeaderError,
    ProposalDroppedError,
    RaftError,
    Role,
)


class ConfChanges(NodeState):
    @property
    def conf(self) -> ConfState:
        """The configuration in force here: the latest one in the log, committed or not."""
        return self.membership.current

    @property
    def conf_pending(self) -> bool:
        """The latest configuration is not committed yet (no other change may start)."""
        return self.membership.last_index > self.log.committed

    def propose_conf_change(self, conf: ConfState) -> int:
        """Append a CONFIG entry switching to `conf`; returns its index. It takes effect at
        once (here, and on each follower as it appends it). Raises NotLeaderError, or
        ConfigChangeError when a rule of vdl_broker.raft.membership forbids it now."""
        if self.role != Role.LEADER:
            raise NotLeaderError(self.leader_id)
        if self.transferee != NONE:
            raise ProposalDroppedError(self.transferee, "leadership transfer in progress")
        if self.log.term(self.log.committed) != self.term:
            raise ConfigChangeError("the leader has not committed an entry of its term yet")
        if self.conf_pending:
            raise ConfigChangeError("the previous configuration change is not committed yet")
        check_change(self.conf, conf, self.id)
        index = self._append_own(EntryType.CONFIG, encode_conf(conf))
        self._sync_conf()
        return index

    def reassert_conf(self, follower_match: int) -> None:
        """A follower answered that it lost its configuration records (CONF_UNKNOWN: its file
        was damaged): it follows but never campaigns, knowing no voters, and the CONFIG entries
        that would tell it are behind it. Once it holds our latest CONFIG entry (if any), append
        the configuration in force again -- no change, so none of the rules is at stake -- which
        it adopts and saves like any; until then (or while a change is pending) it asks again
        with each answer."""
        if follower_match < self.membership.last_index:
            return
        try:
            self.propose_conf_change(self.membership.current)
        except RaftError:
            pass  # not now (a change pending, no own-term entry committed yet): its next answer asks again

    def _sync_conf(self) -> None:
        """Adopt the latest configuration of the log (membership.py): quorum, peers, progress."""
        conf = self.membership.current
        if conf.voters:
            self._conf_lost = False
        self._conf_version = self.membership.version
        self.voters, self.learners = conf.voters, conf.learners
        self._voter_set = frozenset(conf.voters)
        self.peers = tuple(p for p in conf.members if p != self.id)
        self._voter_peers = tuple(p for p in conf.voters if p != self.id)
        self.quorum = len(conf.voters) // 2 + 1
        if self.role != Role.LEADER:
            return
        members = set(conf.members) | {self.id}
        for peer in members - set(self.progress):
            # Probe the newcomer with our last entry (the configuration that added it) at the
            # next ready(); its answer tells us where its log ends.
            self.progress[peer] = Progress(max(1, self.log.last_index()))
            self._broadcast = True
        for peer in set(self.progress) - members:
            del self.progress[peer]  # removed: no more entries for it
        if self.transferee not in self._voter_set:
            self.transferee = NONE
        if self._maybe_commit():  # a removed voter may have been the one holding it back
            self._commit_changed = True
