"""benchmarks/memory_limit.py: --memory-limit's sizes, the cgroup a run enters and leaves, and its fill."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks import bench_connector, bench_replication
from benchmarks.memory_limit import _filesystem, apply, fill_page_cache, oom_kills, parse_size

TIER = "component"  # one test starts a process that makes a cgroup


@pytest.mark.parametrize(("text", "size"), [("1536M", 1536 << 20), ("1.5G", 3 << 29), ("2g", 2 << 30),
                                            ("65536K", 64 << 20), ("512MiB", 512 << 20), (str(100 << 20), 100 << 20)])
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(("text", "message"), [("lots", "is not a size"), ("1.5T", "is not a size"),
                                               ("12M", "under 64M"), ("", "is not a size")])
def test_a_wrong_size_says_what_is_accepted(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_size(text)


CHILD = """
import json, sys
from benchmarks.memory_limit import enter_memory_cgroup
group = enter_memory_cgroup(256 << 20, "vdl-test-memory-limit")
limit = next(f for f in ("memory.max", "memory.limit_in_bytes") if (group / f).exists())
print(json.dumps({"group": str(group), "limit": (group / limit).read_text().strip(),
                  "member": open("/proc/self/cgroup").read()}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="making a cgroup needs root (CI runs as root)")
def test_a_run_enters_a_memory_cgroup_of_the_size_and_removes_it_at_exit() -> None:
    out = subprocess.run([sys.executable, "-c", CHILD], check=True, capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[3]).stdout
    seen = json.loads(out)
    group = Path(seen["group"])
    assert seen["limit"] == str(256 << 20)
    assert group.name.startswith("vdl-test-memory-limit-") and group.name in seen["member"]
    assert not group.exists()


OOM_CHILD = """
import subprocess, sys
from benchmarks.memory_limit import enter_memory_cgroup
enter_memory_cgroup(96 << 20, "vdl-test-memory-limit")
# A process of the run outgrowing the limit: the kernel kills it; the run itself goes on.
hog = subprocess.run([sys.executable, "-c", "x = b'x' * (512 << 20)"])
print(hog.returncode)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="making a cgroup needs root (CI runs as root)")
def test_a_run_whose_cgroup_killed_a_process_says_its_results_are_not_valid() -> None:
    done = subprocess.run([sys.executable, "-c", OOM_CHILD], check=True, capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[3])
    assert done.stdout.split() == ["-9"]  # SIGKILL, from the cgroup's OOM killer
    assert done.stderr.strip() == ("--memory-limit 96M: the memory cgroup killed 1 process(es) of this run for lack "
                                   "of memory (the kernel's log, dmesg, names them): its results are not valid. "
                                   "Give a larger limit, or run fewer peers")


@pytest.mark.parametrize(("name", "text"), [
    ("memory.events", "low 0\nhigh 0\nmax 41\noom 3\noom_kill 2\noom_group_kill 0\n"),  # v2
    ("memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"),  # v1
])
def test_the_oom_kill_count_of_either_cgroup_version(tmp_path: Path, name: str, text: str) -> None:
    assert oom_kills(tmp_path) == 0  # no such file: nothing known to be killed
    (tmp_path / name).write_text(text)
    assert oom_kills(tmp_path) == 2


def test_the_page_cache_fill_is_a_synced_file_of_the_size_that_leaves_nothing_on_disk(tmp_path: Path) -> None:
    if _filesystem(str(tmp_path)) == "tmpfs":
        pytest.skip("the temporary directory is a tmpfs, where nothing is filled (the next test)")
    fd = fill_page_cache((4 << 20) + 12345, str(tmp_path))  # closed at exit
    assert fd is not None
    status = os.fstat(fd)
    assert (status.st_size, status.st_nlink) == ((4 << 20) + 12345, 0)
    assert os.pread(fd, 8, (4 << 20) + 12337) == bytes(8)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(_filesystem("/dev/shm") != "tmpfs", reason="needs /dev/shm to be a tmpfs")
def test_no_fill_in_a_tmpfs_whose_pages_the_kernel_could_not_reclaim(tmp_path: Path) -> None:
    directory = Path("/dev/shm") / tmp_path.name
    directory.mkdir()
    try:
        assert _filesystem(str(directory)) == "tmpfs"
        assert fill_page_cache(4 << 20, str(directory)) is None
        assert list(directory.iterdir()) == []
    finally:
        directory.rmdir()


def test_a_directory_is_on_the_filesystem_mounted_closest_above_it() -> None:
    assert (_filesystem("/proc"), _filesystem("/proc/self/fd"), _filesystem("/proc/../proc/self")) == ("proc",) * 3


def test_a_limit_below_what_the_runs_processes_need_is_refused_naming_them() -> None:
    needs = (("VDL's nodes", 1536 << 20), ("Apache Kafka's 4 nodes", 6 << 30))
    with pytest.raises(SystemExit) as refused:
        apply(argparse.Namespace(memory_limit=7 << 30), "vdl-test-memory-limit", needs)
    assert str(refused.value) == ("--memory-limit 7G is below what this run's processes need at their peak: "
                                  "VDL's nodes 1.5G + Apache Kafka's 4 nodes 6G = 7.5G; give at least that")
    apply(argparse.Namespace(memory_limit=None), "vdl-test-memory-limit", needs)  # no limit: nothing to check


@pytest.mark.parametrize(("main", "argv", "least"), [
    (bench_replication.main, ["--memory-limit", "1536M"], "7.5G"),
    (bench_connector.main, ["--memory-limit", "4G"], "5.5G"),
])
def test_the_benchmarks_with_kafka_refuse_a_limit_kafkas_jvms_do_not_fit_in(main: Callable[[list[str]], int],
                                                                            argv: list[str], least: str) -> None:
    with pytest.raises(SystemExit, match=f"Apache Kafka's .* = {least}; give at least that"):
        main(argv)


@pytest.mark.parametrize(("limit", "cache"), [
    (None, None),  # no limit: the nodes' default
    (1 << 30, 64 << 20),
    (1536 << 20, 96 << 20),
    (parse_size("7.5G"), 96 << 20),  # Kafka's room is not VDL's: the caches of a --vdl-only run
])
def test_vdl_nodes_get_a_sixteenth_of_vdls_room_as_tail_cache(limit: int | None, cache: int | None) -> None:
    assert bench_replication.tail_cache_bytes(limit) == cache
