"""The metadata log's tail cache holds the last few seconds of commands, not the whole log: only
Raft reads this log (replication and the apply of what commits, right after the append). With a
stream log's 64 MiB capacity it kept every entry between two truncations behind snapshots, up
to two 4 MiB segments of small offset commits (~30 MB of cached entries), and a broker's memory
rose with it for the ~15 minutes each segment took to fill under the soak's commit load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vdl_broker.config import NodeConfig
from vdl_broker.log import StreamLog
from vdl_broker.log.tail_cache import CacheBudget
from vdl_broker.raft.types import Entry, EntryType
from vdl_broker.server.broker import METADATA_TAIL_CACHE_BYTES, metadata_log_config

pytestmark = pytest.mark.unit

COMMANDS = 20_000  # ~8 MB cached at ~410 bytes an entry (payload and ENTRY_OVERHEAD): past the bound


def command(i: int) -> bytes:
    """An offset commit as the group coordinator proposes it (cluster/groups.py)."""
    return json.dumps([{"op": "commit_offsets", "group": f"soak-g{i % 200:03d}", "ts": 1_700_000_000_000 + i,
                        "offsets": {"soak-main": [i, 0, ""]}}]).encode()


def test_the_metadata_log_caches_at_most_its_bound_and_reads_the_rest_from_disk(tmp_path: Path) -> None:
    node = NodeConfig(tmp_path, fsync=False)
    budget = CacheBudget(node.tail_cache_bytes)  # the node's default budget (256 MiB): not what bounds it
    log = StreamLog.open(tmp_path / "__metadata", metadata_log_config(node), cache_budget=budget)
    try:
        for i in range(1, COMMANDS + 1):
            log.append([Entry(i, 1, EntryType.METADATA, command(i))])
            assert log.cache.bytes <= METADATA_TAIL_CACHE_BYTES
        first = log.cache.first_index
        assert first is not None and 1 < first < COMMANDS - 1000  # the newest thousands are cached
        assert log.cache.get(COMMANDS) is not None and bytes(log.cache.get(COMMANDS).data) == command(COMMANDS)
        # What left the cache is read back from the log's segments, byte for byte.
        assert [bytes(e.data) for e in log.entries(1, 4)] == [command(1), command(2), command(3)]
        assert [bytes(e.data) for e in log.entries(first - 2, first + 2)] == [command(i) for i in
                                                                             range(first - 2, first + 2)]
    finally:
        log.close()
