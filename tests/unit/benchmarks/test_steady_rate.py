"""benchmarks/bench_broker.py's at_steady_rate: the latency runs' pacing, on a fake clock."""

from __future__ import annotations

import types

import pytest

from benchmarks import bench_broker
from benchmarks.bench_broker import at_steady_rate


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(bench_broker, "time", types.SimpleNamespace(perf_counter=fake.perf_counter, sleep=fake.sleep))
    return fake


def test_sends_rate_times_seconds_in_millisecond_ticks(clock: FakeClock) -> None:
    sent_at: list[float] = []
    polls: list[float] = []
    at_steady_rate(2_000, 0.5, lambda: sent_at.append(clock.now), polls.append)
    assert len(sent_at) == 1_000
    assert sent_at[:4] == [0.0, 0.0, 0.001, 0.001]  # two per millisecond tick
    assert sent_at[-1] == pytest.approx(0.499)
    assert polls == [0] * 500  # the delivery reports, after every tick


def test_a_full_producer_queue_waits_for_room_and_sends_every_record(clock: FakeClock) -> None:
    """A target too slow for the rate fills the client's queue: the send is retried once the
    producer has had time to deliver (poll), never dropped, never raised. Before, BufferError
    ended the whole benchmark."""
    attempts = iter([True, False, False, True, True, True])  # the 2nd record finds the queue full twice
    sent: list[int] = []
    polls: list[float] = []

    def send() -> None:
        if not next(attempts):
            raise BufferError("Local: Queue full")
        sent.append(len(sent))

    at_steady_rate(1_000, 0.004, send, polls.append)
    assert sent == [0, 1, 2, 3]
    assert polls == [0, 0.01, 0.01, 0, 0, 0]
