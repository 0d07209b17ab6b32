"""bench_replication's --profile run: a stream that changed leaders during the profiled run (an
election on a loaded machine) is profiled again on a fresh stream, and after PROFILE_ATTEMPTS such
runs its profile is left out with a note -- the report of the rounds measured before still comes
out (it used to end the benchmark with the rounds' results lost). py-spy, the producers and the
cluster are stand-ins: this is the benchmark's own logic, one layer."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from benchmarks import bench_replication
from benchmarks.peers import Target
from benchmarks.profile import Profile, Profiler
from benchmarks.report import Report


class _Recorder(Profiler):
    """Records nothing: one profile per chosen role and run, as py-spy's would be."""

    def __init__(self, results: Path) -> None:
        super().__init__("bench_replication", True, results)
        self.runs: list[list[str]] = []

    @contextmanager
    def recording(self, what: str, targets: dict[str, Callable[[], Sequence[int]]]) -> Iterator[None]:
        yield
        self.runs.append(sorted(targets))
        self.profiles += [Profile(f"{what}.{role}") for role in sorted(targets)]


class _Target(Target):
    def create(self, *topics: str, timeout_s: float = 60.0) -> None:
        self.created = [*getattr(self, "created", []), *topics]


def _roles(leaders_by_call: list[int]) -> Callable[[str], dict[str, int]]:
    """The roles of a 3-node stream whose leader's pid is the next of `leaders_by_call` at each call."""
    calls = iter(leaders_by_call)

    def roles(_topic: str) -> dict[str, int]:
        leader = next(calls)
        others = [pid for pid in (101, 102, 103) if pid != leader]
        return {"leader": leader, "follower-1": others[0], "follower-2": others[1]}

    return roles


@pytest.fixture
def profiler(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> _Recorder:
    monkeypatch.setattr(bench_replication, "produce_run", lambda *args, **kwargs: None)
    monkeypatch.setattr(bench_replication, "settle", lambda *args, **kwargs: None)
    recorder = _Recorder(tmp_path)
    monkeypatch.setattr(bench_replication, "Profiler", lambda *args, **kwargs: recorder)
    return recorder


def _target() -> _Target:
    return _Target("vdl3", "VDL 3 nodes", "127.0.0.1:1", lambda: [101, 102, 103], "fsync")


def test_a_leader_change_in_the_profiled_run_runs_it_again_on_a_fresh_stream(profiler: _Recorder) -> None:
    target, report = _target(), Report("bench_replication")
    # Run 1: leader 101 when it starts, 102 after it (changed); run 2: 103 throughout.
    bench_replication.profile_runs([(target, _roles([101, 102, 103, 103]))], 1000, 2, report)
    assert target.created == ["bench-repl-acksall-profile-1-vdl3", "bench-repl-acksall-profile-2-vdl3"]
    assert profiler.runs == [["follower-1", "leader"], ["follower-1", "leader"]]
    assert [p.target for p in profiler.profiles] == ["vdl3.follower-1", "vdl3.leader"]  # run 2's only


def test_a_leader_changing_in_every_profiled_run_leaves_that_profile_out_not_the_report(profiler: _Recorder) -> None:
    target, report = _target(), Report("bench_replication")
    attempts = 3
    bench_replication.profile_runs([(target, _roles([101, 102] * attempts))], 1000, 2, report)
    assert len(profiler.runs) == attempts
    assert profiler.profiles == []
    tables = [table for table in report.tables if "no profile of VDL 3 nodes" in table.title]
    assert len(tables) == 1
    assert tables[0].title == f"no profile of VDL 3 nodes: its leader changed in each of {attempts} runs"


def test_a_profiled_run_that_fails_leaves_that_profile_out_not_the_report(profiler: _Recorder,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A producer process killed in the profiled run (the OOM killer of a --memory-limit cgroup)
    costs that target's profile; the next target is still profiled and the report comes out."""
    from concurrent.futures.process import BrokenProcessPool

    def produce_run(bootstrap: str, *args: object, **kwargs: object) -> None:
        if bootstrap == "127.0.0.1:1":
            raise BrokenProcessPool("A process in the process pool was terminated abruptly")

    monkeypatch.setattr(bench_replication, "produce_run", produce_run)
    single = _Target("vdl1", "VDL 1 node", "127.0.0.1:2", lambda: [201], "fsync")
    report = Report("bench_replication")
    bench_replication.profile_runs([(_target(), _roles([101])), (single, lambda _topic: {"leader": 201})],
                                   1000, 2, report)
    assert [p.target for p in profiler.profiles] == ["vdl1.leader"]
    assert [(table.title, table.rows) for table in report.tables if "no profile" in table.title] == [
        ("no profile of VDL 3 nodes: its run failed",
         [["profile of VDL 3 nodes, run 1: BrokenProcessPool: A process in the process pool was terminated abruptly"]])]
