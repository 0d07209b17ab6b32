"""Disk identity: telling a node that lost its data directory from a new one (pure: no I/O).

A node's Raft promises -- the votes it cast, the entries it acknowledged -- live on its disk. A
node whose whole data directory is lost or replaced comes back with an empty log and no term in
every group; if it then votes as a brand-new replica would, it can elect a lagging node that
lacks entries committed with the acknowledgements it lost, and those entries are overwritten
(Raft's disk-loss hazard; KRaft tells the cases apart with directory ids, KIP-858 and KIP-853).

Each data directory has an id, drawn when the directory is formatted, and a record of the
metadata index from which it holds every replica placed on its node (`complete_from`:
server/replica_registry.py). Two rules keep a returning node's empty copies out of every
election until they hold what they may once have held:

1. The metadata group. A node whose metadata log is empty asks the nodes its `peers` name how
   much metadata log they hold (VdlNodes "list"). If any holds some, the cluster exists and this
   node's own copy may have been lost with its disk: its metadata replica starts *recovering*
   (vdl_broker.raft.recovery: it votes for no one and never campaigns until a leader elected
   without it has given it the committed log). If every one of them answers that it holds none,
   the cluster is being formed and the node starts as usual. Until every one has answered it
   waits: a new cluster forms once every node named in `peers` has started (a majority suffices
   afterwards). Why that is safe: a metadata entry exists only once a leader elected by a
   majority of the configured nodes wrote it, so an existing cluster always has a configured
   node holding metadata, and asking every one of them finds it (unless all of them lost their
   disks too, which no replication survives). A node started to join a running cluster
   (`join = true`) starts recovering without asking; it is a learner until caught up anyway.
2. The streams. After such a start the directory's `complete_from` is unknown until the
   metadata replica has recovered, then the commit index it recovered at (recorded durably). A
   replica whose directory is missing, of a stream created before `complete_from` (or while it
   is unknown), may have lived on the lost disk: it starts recovering too. Streams created
   later were created after the disk was lost. (A stream directory lost on an intact disk is
   told by the replica registry's files.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum


class Formation(Enum):
    FORMING = "forming"  # every configured peer holds no metadata: the cluster is new
    EXISTING = "existing"  # some peer holds metadata: an empty log here may be a lost one
    WAITING = "waiting"  # not every peer has answered, and none holds metadata


def formation(peers: Iterable[int], metadata_held: Mapping[int, int]) -> Formation:
    """Rule 1. `metadata_held`: the metadata log's last index each peer that answered told."""
    if any(last > 0 for last in metadata_held.values()):
        return Formation.EXISTING
    if all(peer in metadata_held for peer in peers):
        return Formation.FORMING
    return Formation.WAITING


def may_have_been_lost(created_index: int, complete_from: int | None) -> bool:
    """Rule 2, for a replica whose directory is missing: the stream was created (Raft index
    `created_index` of the metadata log) before `complete_from`, the metadata index from which
    this node's current directory holds every replica placed on it (None: not known yet, the
    node is still catching up with the metadata)."""
    return complete_from is None or created_index < complete_from
