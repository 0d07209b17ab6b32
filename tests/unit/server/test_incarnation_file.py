"""The file naming a replica directory's incarnation (`incarnation`), read at the replica's
open (ReplicaManager._open_log): a damaged one is rewritten and the data kept, when this node
noted that incarnation here (its replica registry) and never the one the file names; a file
naming another incarnation the node held there still means that incarnation's directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.server.test_replica_reconcile import MetadataGroup, stand_in
from vdl_broker.cluster.metadata import ClusterState, StreamInfo
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.log.damage import load_damage
from vdl_broker.raft.types import Entry, EntryType
from vdl_broker.server.replica_manager import INCARNATION_FILE, ReplicaManager
from vdl_broker.server.replica_registry import ReplicaRegistry

pytestmark = pytest.mark.unit

STREAM = "orders"
NODE = 2  # stand_in's node


def held_replica(data_dir: Path, created_index: int, marker: bytes) -> None:
    """A replica directory holding one entry, noted in the registry as `created_index`, its
    incarnation file then replaced by `marker`."""
    directory = data_dir / STREAM
    log = StreamLog.open(directory, LogConfig(fsync=False))
    log.append([Entry(1, 1, EntryType.METADATA, b"kept")])
    log.close()
    (directory / INCARNATION_FILE).write_bytes(marker)
    ReplicaRegistry(data_dir, durable=False).add(STREAM, created_index)


def open_replica(data_dir: Path, created_index: int) -> list[bytes]:
    manager = ReplicaManager(stand_in(data_dir, ClusterState(), MetadataGroup(applied=0), host=None))
    log = manager._open_log(StreamInfo(STREAM, (NODE,), created_index=created_index))
    try:
        return [bytes(e.data) for e in log.entries(log.first_index, log.last_index + 1)]
    finally:
        log.close()


@pytest.mark.parametrize("marker", [b"o", b"4", b"\xb5", "\u00b2".encode(), b""],
                         ids=["letter", "other-digit", "not-utf8", "superscript-two", "empty"])
def test_a_damaged_incarnation_file_is_rewritten_and_the_data_kept(tmp_path: Path, marker: bytes) -> None:
    held_replica(tmp_path, 5, marker)
    assert open_replica(tmp_path, 5) == [b"kept"]
    assert (tmp_path / STREAM / INCARNATION_FILE).read_bytes() == b"5"
    assert load_damage(tmp_path / STREAM) is None


def test_a_file_naming_another_incarnation_held_here_still_means_that_ones_directory(tmp_path: Path) -> None:
    held_replica(tmp_path, 7, b"7")
    ReplicaRegistry(tmp_path, durable=False).add(STREAM, 5)  # both were held here at some point
    assert open_replica(tmp_path, 5) == []  # incarnation 7's directory is not relabelled as 5's
    assert (tmp_path / STREAM / INCARNATION_FILE).read_bytes() == b"5"
