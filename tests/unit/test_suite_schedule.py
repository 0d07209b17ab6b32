"""The suite's own speed (tests/conftest.py). The parallel schedule: xdist hands the workers whole
modules in the order the workers collected them, which puts the longest first
(tests/durations.txt). With xdist's own reordering by number of tests, the long modules of few
tests (faults, dev, spark) ran last and one worker ran them alone for minutes while the other sat
idle. Bytecode: the Python processes the tests start load src/ compiled, not compiled anew."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from xdist.scheduler import LoadFileScheduling

REPO = Path(__file__).resolve().parents[2]


@dataclass
class _Options:
    loadscopereorder: bool


@dataclass
class _Config:
    """The part of pytest's config the scheduler reads: two workers and this run's options."""

    option: _Options

    def getvalue(self, name: str) -> list[str]:
        assert name == "tx"
        return ["2*popen"]


@dataclass
class _Gateway:
    id: str


@dataclass(eq=False)
class _Worker:
    """Records the test indexes the scheduler sends, as xdist's WorkerController would run them."""

    gateway: _Gateway
    sent: list[int] = field(default_factory=list)
    shutting_down: bool = False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.extend(indexes)

    def shutdown(self) -> None:
        self.shutting_down = True


def test_the_workers_take_the_modules_in_collection_order(pytestconfig: pytest.Config) -> None:
    # As collected by the workers: a long module of 2 tests first, then shorter modules of many.
    collection = (["tests/faults/test_long.py::test_a", "tests/faults/test_long.py::test_b"]
                  + [f"tests/integration/test_medium.py::test_{n}" for n in range(6)]
                  + [f"tests/unit/test_short.py::test_{n}" for n in range(9)])
    scheduler = LoadFileScheduling(_Config(_Options(pytestconfig.getoption("loadscopereorder"))))
    first, second = _Worker(_Gateway("gw0")), _Worker(_Gateway("gw1"))
    for worker in (first, second):
        scheduler.add_node(worker)
    for worker in (first, second):
        scheduler.add_node_collection(worker, collection)
    scheduler.schedule()

    assert [collection[index] for index in first.sent[:2]] == collection[:2]
    assert [collection[index] for index in second.sent[:6]] == collection[2:8]


def test_every_source_file_has_current_bytecode_while_the_tests_run() -> None:
    # Even with PYTHONDONTWRITEBYTECODE set (tests/conftest.py compiles the trees first): a broker
    # process then loads vdl_broker compiled.
    stale = []
    for source in sorted((REPO / "src").rglob("*.py")):
        cached = Path(importlib.util.cache_from_source(str(source)))
        if not cached.exists() or cached.stat().st_mtime < source.stat().st_mtime:
            stale.append(str(source.relative_to(REPO)))
    assert stale == []
