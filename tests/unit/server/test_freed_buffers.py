"""A broker keeps the frame buffers it frees for the next frames (server/main.py
keep_freed_buffers): a buffer the tail cache evicts is reused, not returned to the kernel and
faulted in again page by page."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

TIER = "component"  # fresh interpreters: the allocator of this one stays as it is

# A tail cache of 48 buffers of 0.75-1.25 MiB, each the join of a frame read in parts (as
# vdl_wire.framing.FrameReader joins a long body) and the oldest evicted for each new one, as a
# node under produce load churns them. Prints the page faults of the steady state (after the
# cache's fill) and the pages written.
_CHURN = """
import json, resource
from collections import deque
from vdl_broker.log.entry import FrozenBuffer
from vdl_broker.server.main import keep_freed_buffers

kept = keep_freed_buffers()
cache = deque()
zeros = memoryview(bytes(1280 << 10))
def churn(count, start):
    pages = 0
    for i in range(start, start + count):
        size = (768 << 10) + (i * 7919 % 512) * 1024
        buffer = FrozenBuffer.unfilled(size)
        part = FrozenBuffer.unfilled(size)  # a long frame read in parts, then joined
        part[:] = zeros[:size]  # every page written, as a socket read writes them
        buffer[:] = part
        del part
        pages += size // 4096
        cache.append(buffer)
        if len(cache) > 48:
            cache.popleft()
    return pages
churn(200, 0)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
pages = churn(400, 200)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({"kept": kept, "faults": faults, "pages": pages}))
"""


_GLIBC = platform.libc_ver()[0] == "glibc"


def _run(code: str, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          check=True)
    return done.stdout


@pytest.mark.skipif(not _GLIBC, reason="glibc's allocator thresholds: this C library is not glibc")
def test_evicted_buffers_are_reused_without_faulting_pages_in_again() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES" and not k.startswith("MALLOC_")}
    kept = json.loads(_run(_CHURN, env))
    assert kept["kept"] is True
    # ~100,000 pages joined (twice that written): glibc's own thresholds fault in ~25,000 of
    # them again on this churn; kept, only the heap's growth by fragmentation (~440) is new.
    assert kept["pages"] > 90_000
    assert kept["faults"] < 2_000, kept


@pytest.mark.skipif(not _GLIBC, reason="glibc's allocator thresholds: this C library is not glibc")
@pytest.mark.parametrize("setting", [{"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1048576"},
                                     {"MALLOC_TRIM_THRESHOLD_": "1048576"}])
def test_an_operators_allocator_settings_win(setting: dict[str, str]) -> None:
    code = "from vdl_broker.server.main import keep_freed_buffers; print(keep_freed_buffers())"
    assert _run(code, os.environ | setting).strip() == "False"
