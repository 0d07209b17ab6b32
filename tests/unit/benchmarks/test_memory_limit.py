"""benchmarks/memory_limit.py: --memory-limit's sizes, the cgroup a run enters and leaves, and its fill."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.memory_limit import _filesystem, fill_page_cache, parse_size

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
