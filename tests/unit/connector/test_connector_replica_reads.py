"""ReplicaFetcher's choices with the replica answers scripted (the fetches to replicas, the clock
and the client's leader fetch replaced; no sockets): a replica that errs is left at once, one that
keeps answering no records is left after the patience, and once none is left the leader reads."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from vdl_client import FetchResult
from vdl_connector import replica_reads
from vdl_connector.replica_reads import ReplicaFetcher
from vdl_wire.errors import ErrorCode

RECORDS = memoryview(b"batch")
EMPTY = FetchResult(ErrorCode.NONE, memoryview(b""), 5, 0)  # the replica's high watermark is at the offset


@dataclass
class Script:
    answers: dict[int, list[FetchResult]] = field(default_factory=dict)
    asked: list[int] = field(default_factory=list)
    now: float = 0.0
    leader_calls: int = 0

    def fetch(self, stream, offset, partition_max_bytes, max_bytes, max_wait_ms, deadline):  # noqa: ANN001
        self.leader_calls += 1  # the client's leader fetch
        return FetchResult(ErrorCode.NONE, RECORDS, 100, 0)


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> Script:
    s = Script()

    def fetch_replica(client, node, stream, offset, *args):  # noqa: ANN001, ANN202
        s.asked.append(node)
        return s.answers[node].pop(0)

    monkeypatch.setattr(replica_reads, "fetch_replica", fetch_replica)
    monkeypatch.setattr(replica_reads.time, "monotonic", lambda: s.now)
    return s


def test_an_erring_or_silent_replica_is_left_at_once(script: Script) -> None:
    script.answers = {2: [FetchResult(ErrorCode.OFFSET_NOT_AVAILABLE, None, -1, -1)],
                      3: [FetchResult(ErrorCode.NETWORK_EXCEPTION, None, -1, -1)],
                      1: [FetchResult(ErrorCode.NONE, RECORDS, 100, 0)]}
    fetcher = ReplicaFetcher(script, (2, 3, 1), 1.0)  # type: ignore[arg-type]
    assert fetcher.fetch("s", 5, 1, 1, 500, 0.0).records is RECORDS
    assert script.asked == [2, 3, 1] and fetcher.node == 1 and script.leader_calls == 0


def test_a_replica_behind_is_left_after_the_patience_then_the_leader_reads(script: Script) -> None:
    script.answers = {2: [EMPTY] * 3}
    fetcher = ReplicaFetcher(script, (2,), 1.0)  # type: ignore[arg-type]
    # Empty answers are passed on (read_range asks again) until the replica stalled 1 s.
    assert fetcher.fetch("s", 5, 1, 1, 500, 0.0).records == b""
    script.now = 0.9
    assert fetcher.fetch("s", 5, 1, 1, 500, 0.0).records == b""
    assert fetcher.node == 2 and script.leader_calls == 0
    script.now = 1.0
    assert fetcher.fetch("s", 5, 1, 1, 500, 0.0).records is RECORDS
    assert fetcher.node is None and script.leader_calls == 1


def test_records_reset_the_patience(script: Script) -> None:
    script.answers = {2: [EMPTY, FetchResult(ErrorCode.NONE, RECORDS, 9, 0), EMPTY, EMPTY]}
    fetcher = ReplicaFetcher(script, (2,), 1.0)  # type: ignore[arg-type]
    for now in (0.0, 0.6, 1.2, 2.1):  # stalled from 1.2 on: 0.9 s at the last answer
        script.now = now
        fetcher.fetch("s", 5, 1, 1, 500, 0.0)
    assert fetcher.node == 2 and script.leader_calls == 0
