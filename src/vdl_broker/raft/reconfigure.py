"""Moving a group's configuration toward a target voter set, one safe step at a time.

The leader's driver asks `next_step` what to do next and does it (a configuration change, a
leadership transfer) or waits; each change is one the core accepts (vdl_broker.raft.membership:
one voter at a time). The order keeps the group as available as it was:

1. learners outside the target are dropped (they count for nothing);
2. a voter outside the target that the leader has not heard from lately is removed (a dead
   node: keeping it only makes the majority harder to reach);
3. target nodes not in the group yet join as learners (all at once: learners change no quorum);
4. a learner that has caught up (alive, i.e. heard from lately, within `catchup_lag` entries of the
   leader's log, and holding `conf_index`, the entry of the configuration in force: the one that
   added it or a later one) is promoted, in target order, one at a time -- so a voter's log always
   ends past the configurations of earlier placements its prefix may hold (election.py, joiners),
   a restart included;
5. once every target node votes, the other voters are removed one at a time; when the leader
   itself must go, it hands leadership to a caught-up target voter first (the new leader goes on).

Pure: the caller passes the configuration, the leader's view of its peers and the leader's
last index. Used for stream reassignments (server/reassigner.py) and for the metadata group's
own membership (cluster/controller.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vdl_broker.raft.progress import PeerStatus
from vdl_broker.raft.types import ConfState


@dataclass(frozen=True)
class Step:
    kind: str  # "change" | "transfer" | "wait" | "done"
    conf: ConfState | None = None  # kind "change": the configuration to propose
    target: int = 0  # kind "transfer": the voter to hand leadership to
    reason: str = ""


def _conf(voters: set[int], learners: set[int]) -> ConfState:
    return ConfState(tuple(sorted(voters)), tuple(sorted(learners - voters)))


def caught_up(status: Mapping[int, PeerStatus], node: int, last_index: int, catchup_lag: int) -> bool:
    st = status.get(node)
    return st is not None and st.alive and st.match >= last_index - catchup_lag


def next_step(conf: ConfState, target: Sequence[int], leader: int, status: Mapping[int, PeerStatus],
              last_index: int, catchup_lag: int = 100, conf_index: int = 0) -> Step:
    wanted = list(dict.fromkeys(target))
    wanted_set = set(wanted)
    voters, learners = set(conf.voters), set(conf.learners)
    if not wanted:
        return Step("wait", reason="an empty target")
    stray = learners - wanted_set
    if stray:
        return Step("change", _conf(voters, learners - stray), reason=f"drop learners {sorted(stray)}")
    dead = sorted(n for n in voters - wanted_set - {leader} if not (status.get(n) and status[n].alive))
    if dead and len(voters) > 1:
        return Step("change", _conf(voters - {dead[0]}, learners), reason=f"remove unreachable voter {dead[0]}")
    missing = [n for n in wanted if n not in voters | learners]
    if missing:
        return Step("change", _conf(voters, learners | set(missing)), reason=f"add learners {missing}")
    for node in wanted:
        if node in learners and caught_up(status, node, last_index, catchup_lag) and status[node].match >= conf_index:
            return Step("change", _conf(voters | {node}, learners - {node}), reason=f"promote {node}")
    if learners:
        return Step("wait", reason=f"learners {sorted(learners)} catching up")
    extra = [n for n in sorted(voters) if n not in wanted_set]
    others = [n for n in extra if n != leader]
    if others:
        return Step("change", _conf(voters - {others[0]}, learners), reason=f"remove voter {others[0]}")
    if extra:  # only the leader itself is left to go
        for node in wanted:
            if node in voters and caught_up(status, node, last_index, catchup_lag):
                return Step("transfer", target=node, reason=f"leader {leader} leaves: hand over to {node}")
        return Step("wait", reason="no caught-up target voter to hand leadership to")
    return Step("done")
