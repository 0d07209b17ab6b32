"""A streaming query's progress seen from outside the query (driver side).

Group commits (option `commitOffsetsToGroup`): the offsets a query has finished with are stored
as a consumer group's committed offsets (a standalone OffsetCommit: a group without members),
so `vdl groups describe`, the broker's vdl_consumer_group_lag and any Kafka lag tool show the
query's lag. They are a report, never an input: the query takes its offsets from its checkpoint
only. Finished means: Spark's commit(end) of a micro-batch, and the start Spark hands the next
latestOffset() -- the end of the last micro-batch that completed, which Spark passes on every
trigger, so a query that caught up shows lag 0 without waiting for new data (commit(end) comes
one micro-batch late). A failed commit is logged and the query goes on.

Offsets behind latest: Spark's Kafka source reports avgOffsetsBehindLatest,
maxOffsetsBehindLatest and minOffsetsBehindLatest in StreamingQueryProgress sources[].metrics.
PySpark's Python data source API has no source metrics (its stream reader gets no metrics() call,
PySpark 4.2), so they go into the progress' latestOffset (reportLatestOffset), next to each
stream's latest offset: the latest offset minus the end of the micro-batch just planned.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("vdl_connector")

COMMIT_TIMEOUT_MS = 5_000  # a commit that cannot be made in this long is given up (and logged)
BEHIND_KEYS = ("avgOffsetsBehindLatest", "maxOffsetsBehindLatest", "minOffsetsBehindLatest")


class GroupCommitter:
    """Stores a query's finished offsets for one group; one per stream reader (driver only).
    `settings`: the query's ClientSettings (shorter timeouts are used)."""

    def __init__(self, settings: Any, group_id: str) -> None:
        from vdl_client import VdlClient  # imported late, as the rest of the driver side does

        self._client = VdlClient(dataclasses.replace(
            settings, request_timeout_ms=min(settings.request_timeout_ms, COMMIT_TIMEOUT_MS),
            deadline_ms=COMMIT_TIMEOUT_MS))
        self.group_id = group_id
        self._stored: dict[str, int] = {}

    def commit(self, offsets: Mapping[str, int]) -> bool:
        """Store `offsets` (stream -> next offset to read) unless they are stored already; False
        (and a warning) when the broker could not be reached or refused them."""
        wanted = {str(stream): int(offset) for stream, offset in offsets.items()}
        if not wanted or wanted == self._stored:
            return True
        from vdl_client.groups import commit_offsets

        try:
            commit_offsets(self._client, self.group_id, wanted, timeout_s=COMMIT_TIMEOUT_MS / 1000)
        except Exception as error:  # a report must never fail the query
            log.warning("commitOffsetsToGroup: offsets %s not stored for group %r (%s); the query goes on, "
                        "its offsets are in its checkpoint", wanted, self.group_id, error)
            return False
        self._stored = wanted
        return True

    def close(self) -> None:
        self._client.close()


def with_offsets_behind_latest(latest: Mapping[str, int], end: Mapping[str, int]) -> dict:
    """`latest` (stream -> latest offset) plus the offsets behind latest of the micro-batch ending
    at `end`, as Spark's Kafka source computes them (left out when a stream bears one of their
    names, so no stream's offset is ever hidden)."""
    report: dict = dict(latest)
    behind = [latest[s] - int(end.get(s, latest[s])) for s in latest]
    if behind and not set(BEHIND_KEYS) & set(latest):
        report["avgOffsetsBehindLatest"] = sum(behind) / len(behind)
        report["maxOffsetsBehindLatest"] = max(behind)
        report["minOffsetsBehindLatest"] = min(behind)
    return report
