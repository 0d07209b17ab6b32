"""A node cut off from its cluster sends clients elsewhere at once (pure: no I/O).

A node that has heard from no majority of the metadata group's voters for an election timeout
(raft/liveness.py: NodeLiveness.in_contact_with_quorum) is cut off: the rest of the cluster
elects leaders without it, and anything it says about leaders is stale. Kafka clients ask
Metadata of whichever broker they have a connection to (librdkafka, the Java client,
kafka-python: the least loaded one; aiokafka: any, shuffled), so a cut-off node that answered
"no leader" kept being asked, and held its clients for as long as it stayed cut off. Instead it:

- names, as each stream's leader, the replica the rest of the cluster most likely elected
  (`leader_elsewhere`): never itself (unless it still serves the stream: every replica is
  here), never "no leader"; a wrong guess costs the client one NOT_LEADER_OR_FOLLOWER from a
  node that does know, and its next Metadata may go there. Another leader than the one it last
  knew is named with the epoch after that one's, so that clients drop as outdated a follower's
  answer still naming the old leader (ReplicaManager.leader_when_cut_off);
- names, as the controller and as the coordinator of every group and transactional id
  (FindCoordinator), the metadata group's leader chosen the same way: never itself, which could
  coordinate nothing and would be asked again after each NOT_COORDINATOR;
- still names itself among the brokers. Left out, librdkafka (2.16) decommissions the broker it
  asked, and that broker's thread, on its way down, takes back the partitions the same answer
  had just moved to the new leader: they sit with no leader until librdkafka's one-second scan
  of unavailable partitions, which finds no connection up the first time (measured: 2 s more
  without acknowledgements for a producer bootstrapped at a cut-off leader);
- refuses Produce and Fetch (follower reads too) with NOT_LEADER_OR_FOLLOWER, and fails the
  produce requests waiting for a commit the same way, so clients retry elsewhere instead of
  waiting out their request timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from vdl_broker.raft.liveness import successor
from vdl_broker.raft.types import NONE


def leader_elsewhere(group: str, voters: Sequence[int], me: int, last_leader: int,
                     in_contact: Callable[[int], bool]) -> int:
    """The voter of `group` that a node cut off from the cluster sends clients to (NONE when it
    is the only voter). The leader it last knew, when that is another node it does not hear from
    (so on the far side, where the majority is: it very likely still leads). Otherwise the one
    the far side elects first when this node falls silent: the voters there that notice a
    leader's node gone let `successor()` campaign (raft/host.py), so the guess is theirs."""
    others = [v for v in voters if v != me]
    if not others:
        return NONE
    far = [v for v in others if not in_contact(v)] or others
    if last_leader in far:
        return last_leader
    return successor(group, voters, me, far)
