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

A whole data directory lost takes this registry with it. The node then tells it from its
peers (vdl_broker.cluster.identity, rule 1: its metadata log is empty while the cluster exists)
and records it in `<data_dir>/__replicas/directory.json`: the directory's id (random, drawn when
the directory is formatted) and `complete_from`, the metadata index from which this directory
has held every replica placed on this node -- unknown (null) while the node catches up with the
metadata after such a start, 0 for a directory that formed its cluster or predates the record.
A missing replica directory of a stream created before `complete_from` (rule 2) starts damaged
too.

    directory.json := {"version": 1, "directory_id": "<uuid hex>", "complete_from": N | null}
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from pathlib import Path

from vdl_broker.cluster.identity import may_have_been_lost
from vdl_broker.cluster.metadata import REPLICA_REGISTRY
from vdl_broker.log.fileio import atomic_write, fsync_dir

log = logging.getLogger(__name__)

DIRECTORY_FILE = "directory.json"
DIRECTORY_FORMAT = 1  # the newest version of directory.json this release reads and writes


class NewerRecord(ValueError):
    """directory.json written by a newer release: refused (a downgrade must not guess)."""


class ReplicaRegistry:
    """The replica incarnations this node has opened, one empty file each."""

    def __init__(self, data_dir: Path, durable: bool) -> None:
        self.directory = Path(data_dir) / REPLICA_REGISTRY
        self.durable = durable
        self.directory_id = ""
        self.complete_from: int | None = 0

    def open(self, catching_up: bool) -> None:
        """Load (or, for a new data directory, draw) the directory record. `catching_up`: the node
        starts in an existing cluster with an empty metadata log (identity.py, rule 1): what this
        directory holds is complete from no index yet."""
        path = self.directory / DIRECTORY_FILE
        saved: tuple[str, int | None] | None = None
        try:
            raw = json.loads(path.read_bytes())
            version = raw["version"]
            if isinstance(version, int) and version > DIRECTORY_FORMAT:
                raise NewerRecord(f"{path}: version {version!r}, this release reads up to {DIRECTORY_FORMAT}")
            if version != DIRECTORY_FORMAT:
                raise ValueError(f"version {version!r}")
            self.directory_id = str(raw["directory_id"])
            complete_from = raw["complete_from"]
            self.complete_from = None if complete_from is None else int(complete_from)
            saved = (self.directory_id, self.complete_from)
        except FileNotFoundError:
            self.directory_id = uuid.uuid4().hex
            self.complete_from = 0
        except NewerRecord:
            raise
        except (ValueError, KeyError, TypeError) as error:
            # A damaged record (a flipped byte): what it said is unknown, so assume the worst --
            # this directory may have lost any replica placed here until now (rule 2 for all of
            # them, as after a lost disk: a missing one recovers before it votes) -- until the
            # metadata replica holds the committed metadata again (caught_up), at once for a
            # node whose metadata log is intact. The directory id is only reported: drawn anew.
            log.warning("%s is unreadable (%r): recorded again, every replica placed on this node until now "
                        "counted as possibly lost", path, error)
            self.directory_id = uuid.uuid4().hex
            self.complete_from = None
        if catching_up:
            self.complete_from = None
        if saved != (self.directory_id, self.complete_from):  # unchanged: no write (a full disk may refuse it)
            self._save()

    @property
    def catching_up(self) -> bool:
        """The node started empty in an existing cluster and its metadata replica has not
        recovered yet: what it knows of the cluster's streams is incomplete."""
        return self.complete_from is None

    def caught_up(self, index: int) -> None:
        """The node holds the committed metadata through `index` (its metadata replica recovered):
        every replica placed here from then on is in this directory."""
        if self.catching_up:
            self.complete_from = index
            self._save()

    def may_have_held(self, created_index: int) -> bool:
        """Rule 2: a stream created at `created_index` may have had its replica here on a lost disk."""
        return may_have_been_lost(created_index, self.complete_from)

    def _save(self) -> None:
        if not self.directory.is_dir():
            self.directory.mkdir(parents=True, exist_ok=True)
            if self.durable:
                fsync_dir(self.directory.parent)
        body = {"version": DIRECTORY_FORMAT, "directory_id": self.directory_id, "complete_from": self.complete_from}
        atomic_write(self.directory / DIRECTORY_FILE, json.dumps(body).encode(), self.durable)

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
