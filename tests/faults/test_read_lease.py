"""A leader cut off from the others (silent drops; clients still reach it) stops serving reads
before any other node can serve them: no client sees the old leader's high watermark after a
new leader has served a newer one. Regression: the chaos campaign saw the high watermark go
back by one across nodes while an isolated leader kept answering Fetch until CheckQuorum
demoted it (up to two election timeouts), after the others had already elected a new leader."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.faults.chaos.world import start_world
from tests.faults.harness import ProbeLog, fetch_raw, probe_write, wait_for_full_isr, wait_until
from vdl_wire.errors import ErrorCode

pytestmark = pytest.mark.timeout(180)

STREAM = "lease"


def test_a_cut_off_leader_stops_serving_reads_before_another_leader_serves(tmp_path: Path) -> None:
    world = start_world(tmp_path, 3, seed=3, streams=[STREAM])
    reads: list[tuple[float, float, int, int, int]] = []  # (sent, answered, node, error code, HW)
    lock = threading.Lock()
    stop = threading.Event()

    def poll(node: int) -> None:
        address = world.address(node)
        while not stop.is_set():
            sent = time.monotonic()
            try:
                code, hw, _ = fetch_raw(address, STREAM, 0, max_bytes=1, socket_timeout=2.0)
            except (OSError, ValueError):
                continue
            with lock:
                reads.append((sent, time.monotonic(), node, code, hw))
            stop.wait(0.01)

    try:
        wait_for_full_isr(world.cluster, STREAM, timeout=60)
        probes = ProbeLog()
        old, _ = probe_write(world.cluster, STREAM, probes, timeout=30)
        pollers = [threading.Thread(target=poll, args=(n,), daemon=True) for n in world.node_ids]
        for poller in pollers:
            poller.start()
        cut = time.monotonic()
        world.links.partition([[old], [n for n in world.node_ids if n != old]])
        new, _ = probe_write(world.cluster, STREAM, probes, timeout=30, exclude=[old])

        def new_leader_served() -> float | None:
            with lock:
                times = [answered for _, answered, node, code, _ in reads if node == new and code == 0 and answered > cut]
            return min(times) if times else None
        first_new = wait_until(new_leader_served, 30, f"node {new} serving Fetch as the new leader")
        wait_until(lambda: time.monotonic() > first_new + 3, 10, "three more seconds of polling")
    finally:
        stop.set()
        world.close()
    late = [(sent - cut, hw) for sent, _, node, code, hw in reads if node == old and code == 0 and sent > first_new]
    assert late == [], f"node {old}, cut off, served Fetch after node {new} had served as leader: {late[:5]}"
    stale = [(node, code) for sent, _, node, code, _ in reads if node == old and sent > first_new]
    assert stale and all(code == ErrorCode.NOT_LEADER_OR_FOLLOWER for _, code in stale)
    # No read may see a lower high watermark than one a read answered before it was sent.
    served = [(sent, answered, hw) for sent, answered, _, code, hw in reads if code == 0]
    by_answer = sorted((answered, hw) for _, answered, hw in served)
    highest, k = -1, 0
    for sent, _, hw in sorted(served):
        while k < len(by_answer) and by_answer[k][0] < sent:
            highest = max(highest, by_answer[k][1])
            k += 1
        assert hw >= highest, f"a Fetch sent at {sent - cut:.3f} s saw HW {hw} after one had seen {highest}"
