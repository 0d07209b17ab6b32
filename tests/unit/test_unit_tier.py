"""The unit tier's purity guard (tests/conftest.py) refuses what the test itself does, not what
threads left by earlier tests of the same worker do (Spark's py4j threads sleep and connect)."""

from __future__ import annotations

import _thread
import time

import pytest


def test_a_unit_test_may_not_sleep() -> None:
    with pytest.raises(AssertionError, match="a unit test may not sleep"):
        time.sleep(0)


def test_a_thread_not_of_the_test_still_sleeps() -> None:
    done = _thread.allocate_lock()
    done.acquire()
    outcome: list[str] = []

    def background() -> None:  # started below the guard (it patches threading.Thread.start)
        try:
            time.sleep(0)
            outcome.append("slept")
        except AssertionError as error:
            outcome.append(str(error))
        finally:
            done.release()

    _thread.start_new_thread(background, ())
    assert done.acquire(timeout=10)
    assert outcome == ["slept"]
