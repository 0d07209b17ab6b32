"""The chaos campaign's checker on acknowledgements without an offset: librdkafka reports a
batch answered DUPLICATE_SEQUENCE_NUMBER as delivered at an unknown offset, and such a value must
still be in the final log."""

from __future__ import annotations

from tests.faults.chaos.checker import Ack, History, check

UNKNOWN = -1001  # librdkafka's RD_KAFKA_OFFSET_INVALID


def history(*acks: Ack) -> History:
    return History(acks=list(acks), idempotent_clients={"ci"}, was_produced=lambda value: True, sessions=[],
                   high_watermarks=[])


def test_a_value_acknowledged_at_an_unknown_offset_must_be_in_the_log() -> None:
    log = {0: b"ci-0", 1: b"ci-1"}
    assert check(history(Ack(1.0, "ci", 0, b"ci-0"), Ack(2.0, "ci", UNKNOWN, b"ci-1")), log) == []
    [lost] = check(history(Ack(2.0, "ci", UNKNOWN, b"ci-2")), log)
    assert (lost.kind, lost.time) == ("lost", 2.0)
    assert lost.detail == "ci was acknowledged b'ci-2' at an unknown offset; the log holds it nowhere"


def test_acknowledgements_at_unknown_offsets_are_not_one_offset_seen_twice() -> None:
    log = {0: b"ci-0", 1: b"ci-1"}
    assert check(history(Ack(1.0, "ci", UNKNOWN, b"ci-0"), Ack(2.0, "ci", UNKNOWN, b"ci-1")), log) == []


def test_after_retention_a_value_at_an_unknown_offset_cannot_be_told_lost() -> None:
    assert check(history(Ack(1.0, "ci", UNKNOWN, b"ci-0")), {5: b"ci-5"}, log_start=5) == []
