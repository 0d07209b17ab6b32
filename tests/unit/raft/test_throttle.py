"""raft/throttle.py: catch-up messages leave at the configured byte rate, in order."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tests.support import virtual_time
from vdl_broker.raft.throttle import CatchUpThrottle
from vdl_broker.raft.types import Entry, EntryType, Message, MessageType

pytestmark = pytest.mark.unit

RATE = 1 << 20


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Let virtual time pass, a millisecond at a time, until `condition()` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"still waiting after {timeout} virtual seconds"
        await asyncio.sleep(0.001)


def append(index: int, size: int) -> Message:
    """An APPEND to node 2 whose entries follow index `index` (its prev index)."""
    return Message(MessageType.APPEND, 2, 1, 1, index=index, entries=[Entry(index + 1, 1, EntryType.DATA, b"x" * size)])


def test_rate_is_kept_over_time_and_order_preserved() -> None:
    async def main() -> tuple[list[tuple[float, int]], float, CatchUpThrottle]:
        loop = asyncio.get_running_loop()
        sent: list[tuple[float, int]] = []
        throttle = CatchUpThrottle(RATE, lambda group, m: sent.append((loop.time(), m.index)) or True, clock=loop.time)
        started = loop.time()
        for i in range(40):  # 40 x 64 KiB = 2.5 MiB at 1 MiB/s
            assert throttle.submit("g", append(i, 64 << 10))
        await until(lambda: len(sent) == 40)
        await throttle.close()
        return sent, started, throttle

    sent, started, throttle = virtual_time.run(main())
    assert [index for _, index in sent] == list(range(40))
    assert throttle.burst == RATE / 10
    # The burst lets the first two leave at once (the second runs the bucket into debt); each
    # later one leaves as soon as the debt of those before it is paid: when the bucket, refilled
    # at RATE, holds a byte again.
    expected = [0.0, 0.0] + [(k * (64 << 10) - throttle.burst + 1) / RATE for k in range(2, 40)]
    assert [when - started for when, _ in sent] == pytest.approx(expected, abs=1e-9)


def test_backlog_beyond_the_bound_is_dropped_for_raft_to_resend() -> None:
    async def main() -> tuple[int, int]:
        sent: list[int] = []
        throttle = CatchUpThrottle(1 << 20, lambda group, m: sent.append(1) or True, max_queued_bytes=256 << 10)
        accepted = sum(throttle.submit("g", append(i, 64 << 10)) for i in range(20))
        await throttle.close()
        return accepted, throttle.dropped

    accepted, dropped = virtual_time.run(main())
    # Two leave at once on the burst, four (256 KiB) wait, the other fourteen are dropped.
    assert (accepted, dropped) == (6, 14)


def test_rate_must_be_positive() -> None:
    with pytest.raises(ValueError):
        CatchUpThrottle(0, lambda group, m: True)


def test_a_resend_from_the_followers_match_replaces_what_waits_for_it() -> None:
    """Lost-append recovery resends from the follower's match every heartbeat: those resends must
    not pile up behind each other (the follower would never catch up at a low rate), nor lose
    their turn: a resend waits where the first append it replaces waited."""
    async def main() -> tuple[list[tuple[str, int, int]], CatchUpThrottle]:
        sent: list[tuple[str, int, int]] = []
        throttle = CatchUpThrottle(1 << 20, lambda group, m: sent.append((group, m.to, m.index)) or True)
        throttle.submit("g", append(1, 200 << 10))  # leaves at once (the bucket has tokens)
        for index in (2, 3, 4):  # a pipeline waiting its turn
            throttle.submit("g", append(index, 200 << 10))
        other = append(7, 200 << 10)
        other.to = 3
        throttle.submit("g", other)  # another follower: untouched
        throttle.submit("h", append(3, 200 << 10))  # another group: untouched
        for _ in range(5):  # resends from index 3, as heartbeat after heartbeat finds no progress
            throttle.submit("g", append(3, 200 << 10))
        queued = [(g, m.to, m.index) for g, m, _ in throttle._queue]  # noqa: SLF001
        await throttle.close()
        return queued, throttle

    queued, throttle = virtual_time.run(main())
    assert queued == [("g", 2, 2), ("g", 2, 3), ("g", 3, 7), ("h", 2, 3)]
    assert throttle.superseded == 6  # the queued 3 and 4, then each resend replacing the one before


def test_a_queued_message_made_obsolete_meanwhile_is_dropped_before_it_spends_the_budget() -> None:
    """The follower acknowledged a queued append's entries meanwhile (they reached it in an
    earlier message): it is dropped unsent, and the next one leaves in its place at once."""
    async def main() -> tuple[list[tuple[float, int]], CatchUpThrottle]:
        loop = asyncio.get_running_loop()
        sent: list[tuple[float, int]] = []
        acknowledged = {"match": 0}

        def obsolete(group: str, m: Message) -> bool:
            return m.entries[-1].index <= acknowledged["match"]

        throttle = CatchUpThrottle(RATE, lambda group, m: sent.append((loop.time(), m.index)) or True,
                                   clock=loop.time, obsolete=obsolete)
        started = loop.time()
        for index in (0, 1, 2):  # 1 MiB each: the first leaves at once, the others wait 1 s each
            assert throttle.submit("g", append(index, 1 << 20))
        acknowledged["match"] = 2  # entries 1 and 2 reached the follower (a resend that got there)
        await until(lambda: len(sent) == 2)
        await throttle.close()
        return [(when - started, index) for when, index in sent], throttle

    sent, throttle = virtual_time.run(main())
    # The append of entry 2 never left; the one of entry 3 left when the debt of the first was
    # paid, not a second later.
    assert sent == [(0.0, 0), (pytest.approx(((1 << 20) - throttle.burst + 1) / RATE, abs=1e-9), 2)]
    assert (throttle.obsolete, throttle.sent_bytes) == (1, 2 << 20)
