"""The query's progress as the source reports it: offsets behind latest (Spark's Kafka source's
three numbers) next to each stream's latest offset, and group commits that are made once per
change and never raise (the broker unreachable)."""

from __future__ import annotations

import logging

import pytest

from vdl_client import ClientSettings
from vdl_connector.progress import GroupCommitter, with_offsets_behind_latest


def test_offsets_behind_latest_as_sparks_kafka_source_computes_them() -> None:
    report = with_offsets_behind_latest({"a": 100, "b": 40, "c": 7}, {"a": 70, "b": 40, "c": 2})
    assert report == {"a": 100, "b": 40, "c": 7, "avgOffsetsBehindLatest": 35 / 3,
                      "maxOffsetsBehindLatest": 30, "minOffsetsBehindLatest": 0}
    assert with_offsets_behind_latest({"a": 5}, {"a": 5}) == {"a": 5, "avgOffsetsBehindLatest": 0.0,
                                                              "maxOffsetsBehindLatest": 0, "minOffsetsBehindLatest": 0}
    assert with_offsets_behind_latest({}, {}) == {}
    # A stream named like one of the numbers keeps its offset; the numbers are left out.
    assert with_offsets_behind_latest({"maxOffsetsBehindLatest": 9}, {"maxOffsetsBehindLatest": 1}) == {
        "maxOffsetsBehindLatest": 9}


def test_a_failed_group_commit_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    committer = GroupCommitter(ClientSettings(("127.0.0.1:1",), fail_fast_when_unreachable=True), "g")
    with caplog.at_level(logging.WARNING, logger="vdl_connector"):
        assert committer.commit({"orders": 5}) is False
        assert committer.commit({}) is True  # nothing to store
    committer.close()
    [record] = caplog.records
    assert record.getMessage().startswith("commitOffsetsToGroup: offsets {'orders': 5} not stored for group 'g' (")
    assert record.getMessage().endswith("); the query goes on, its offsets are in its checkpoint")
