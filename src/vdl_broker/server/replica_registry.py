"""What this node remembers, outside the stream directories, about the replicas it has held.

A replica's Raft promises (its votes, the entries it acknowledged) live in its directory. If that
directory is lost -- deleted, or a disk or volume holding it replaced -- the replica would come
back looking brand new: an empty log and no term, voting for anyone at once. That is Raft's
classic disk-loss hazard: its vote can then elect a leader lacking entries that were committed
with its lost acknowledgements. So the node keeps, in `<data_dir>/__replicas/`, one empty file
per replica incarnation it has opened (`<stream>#<created index>`, written once its directory
exists). A registered replica whose directory (or its `incarnation` file) is gone starts as
damaged with an unknown extent (vdl_broker.raft.recovery): it votes for no one until
a leader elected without it has given its log back.

A whole data directory lost takes this registry with it: that node then looks new in every
group, like any Raft node that lost all its storage.
"""

from __future__ import annotations

import os
from pathlib import Path

from vdl_broker.cluster.metadata import REPLICA_REGISTRY
from vdl_broker.log.fileio import fsync_dir


class ReplicaRegistry:
    """The replica incarnations this node has opened, one empty file each."""

    def __init__(self, data_dir: Path, durable: bool) -> None:
        self.directory = Path(data_dir) / REPLICA_REGISTRY
        self.durable = durable

    def _entry(self, stream: str, created_index: int) -> Path:
        return self.directory / f"{stream}#{created_index}"

    def holds(self, stream: str, created_index: int) -> bool:
        """True when this node has opened this replica before."""
        return self._entry(stream, created_index).exists()

    def add(self, stream: str, created_index: int) -> None:
        """Remember the replica (its directory exists and names its incarnation, durably)."""
        entry = self._entry(stream, created_index)
        if entry.exists():
            return
        if not self.directory.is_dir():
            self.directory.mkdir(parents=True, exist_ok=True)
            if self.durable:
                fsync_dir(self.directory.parent)
        os.close(os.open(entry, os.O_WRONLY | os.O_CREAT, 0o644))
        if self.durable:
            fsync_dir(self.directory)

    def forget(self, stream: str) -> None:
        """The node holds no replica of `stream` any more (deleted, or moved away)."""
        if self.directory.is_dir():
            for entry in self.directory.glob(f"{stream}#*"):
                entry.unlink(missing_ok=True)
