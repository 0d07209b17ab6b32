"""The streams of a single node: one directory and one StreamPartition per stream.

The stream list is the set of subdirectories of the data directory (scanned at start); creating
a stream creates its directory through StreamLog.open, deleting it removes the directory.
"""

from __future__ import annotations

import logging
import re
import shutil
import time
from pathlib import Path

from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.server.config import BrokerConfig
from vdl_broker.server.partition import StreamPartition

log = logging.getLogger(__name__)

# Kafka's topic name rules (Topic.java): legal characters, at most 249, not "." or "..".
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
MAX_NAME_LENGTH = 249


def stream_name_problem(name: str | None) -> str | None:
    """Why `name` is not a legal stream (topic) name, or None when it is."""
    if not name:
        return "the stream name is empty"
    if name in (".", ".."):
        return f"the stream name cannot be {name!r}"
    if len(name) > MAX_NAME_LENGTH:
        return f"the stream name is longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL.fullmatch(name):
        return f"the stream name {name!r} has characters other than ASCII letters, digits, '.', '_' and '-'"
    return None


def log_config_for(config: BrokerConfig) -> LogConfig:
    return LogConfig(segment_bytes=config.segment_bytes, segment_ms=config.segment_ms,
                     retention_ms=config.retention_ms, retention_bytes=config.retention_bytes,
                     fsync=config.fsync)


class StreamRegistry:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.data_dir = Path(config.data_dir)
        self._streams: dict[str, StreamPartition] = {}

    def open_all(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for directory in sorted(self.data_dir.iterdir()):
            if not directory.is_dir() or stream_name_problem(directory.name) is not None:
                continue
            if directory.name.startswith(".") and directory.name.endswith(".deleted"):
                # StreamLog.delete renames a stream away before removing it: finish the job.
                shutil.rmtree(directory, ignore_errors=True)
                continue
            started = time.monotonic()
            partition = self._open(directory.name)
            batches = partition.rebuild_producer_state()
            log.info("opened stream %s: offsets %d..%d, %d producers (%d batches scanned in %.2fs)",
                     partition.name, partition.log_start_offset, partition.log_end_offset,
                     len(partition.producers), batches, time.monotonic() - started)

    def _open(self, name: str) -> StreamPartition:
        stream_log = StreamLog.open(self.data_dir / name, log_config_for(self.config))
        partition = StreamPartition(name, stream_log, self.config.node_id)
        self._streams[name] = partition
        return partition

    def get(self, name: str) -> StreamPartition | None:
        return self._streams.get(name)

    def names(self) -> list[str]:
        return sorted(self._streams)

    def all(self) -> list[StreamPartition]:
        return list(self._streams.values())

    def __contains__(self, name: str) -> bool:
        return name in self._streams

    def create(self, name: str) -> StreamPartition:
        if name in self._streams:
            raise FileExistsError(name)
        log.info("creating stream %s", name)
        return self._open(name)

    def delete(self, name: str) -> None:
        partition = self._streams.pop(name)
        log.info("deleting stream %s", name)
        partition.close(clean=False)
        partition.log.delete()

    def apply_retention(self) -> None:
        now_ms = int(time.time() * 1000)
        for partition in self.all():
            if partition.log.apply_retention(now_ms):
                log.info("retention removed segments of %s; log start offset now %d",
                         partition.name, partition.log_start_offset)

    def close(self) -> None:
        for partition in self._streams.values():
            try:
                partition.close(clean=True)
            except Exception:
                log.exception("closing stream %s failed", partition.name)
        self._streams.clear()
