"""A 3-node cluster holding many streams (300 in `make test`; VDL_MANY_STREAMS=N for more:
`make test-many-streams` runs 1,000): idle streams go quiescent, every stream takes one write and
gives it back, a kill -9 of the node leading most of them moves its streams to both survivors
in bounded time without losing a record, and the node restarts with every stream back in sync.

The tests run in order on the module's cluster and its streams. What idle streams cost in CPU,
and the times themselves, are measured by benchmarks/bench_streams.py, not asserted here: these
tests check the mechanisms (the node's gauge of awake Raft groups, leaders, records).
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

import pytest

from tests.support.cluster import wait_until
from tests.support.metrics import scrape
from vdl_dev import bulk
from vdl_dev.dev_cluster import DevCluster

STREAMS = int(os.environ.get("VDL_MANY_STREAMS", "300"))
pytestmark = pytest.mark.timeout(300 + STREAMS // 5)
# Generous deadlines for a shared 2-core machine; the benchmark measures the real times.
SETTLE_S = 60 + STREAMS / 20


def addresses(cluster: DevCluster, running_only: bool = True) -> dict[int, str]:
    return {i: n.client_address for i, n in cluster.nodes.items() if n.running or not running_only}


def awake_groups(cluster: DevCluster) -> dict[int, float]:
    return {i: scrape(cluster, i).get("vdl_raft_groups_awake") for i, n in cluster.nodes.items() if n.running}


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.fixture(scope="module")
def streams(dev_cluster: DevCluster) -> list[str]:
    names = bulk.names_for("many", STREAMS)
    errors = bulk.create_streams(addresses(dev_cluster), names, timeout_s=SETTLE_S)
    refused = {name: code for name, code in errors.items() if code != 0}
    assert not refused, f"{len(refused)} creates refused, e.g. {sorted(refused.items())[:3]}"
    bulk.wait_for_views(addresses(dev_cluster), names, SETTLE_S, in_sync=True, poll_s=0.5)
    return names


def test_idle_streams_quiesce(dev_cluster: DevCluster, streams: list[str]) -> None:
    """Once nothing is written, every stream's Raft group stops ticking on every node: only the
    metadata group stays awake (and node heartbeats carry liveness)."""
    for i in dev_cluster.node_ids():
        assert scrape(dev_cluster, i).get("vdl_raft_groups") == STREAMS + 1
    wait_until(lambda: all(v == 1 for v in awake_groups(dev_cluster).values()), SETTLE_S,
               message="every stream group quiescent on every node")
    pids = {i: n.pid for i, n in dev_cluster.nodes.items() if n.pid}
    before = {i: cpu_seconds(pid) for i, pid in pids.items()}
    started = time.monotonic()
    time.sleep(2.0)  # only reported: the benchmark measures idle CPU
    elapsed = time.monotonic() - started
    print("idle CPU (% of a core): " + ", ".join(f"node {i}: {100 * (cpu_seconds(pid) - before[i]) / elapsed:.1f}"
                                                for i, pid in pids.items()))


def test_one_write_and_one_read_per_stream(dev_cluster: DevCluster, streams: list[str]) -> None:
    """Every stream takes an acks=all write at offset 0 (waking its group) and gives it back."""
    views = bulk.wait_for_views(addresses(dev_cluster), streams, SETTLE_S)
    leaders = {name: view.leader for name, view in views.items()}
    pending = {name: bulk.one_record_batch(name.encode()) for name in streams}
    deadline = time.monotonic() + SETTLE_S
    acknowledged: dict[str, int] = {}
    while pending and time.monotonic() < deadline:
        results = bulk.produce_each(addresses(dev_cluster), pending, leaders)
        for name, (error, offset) in results.items():
            if error == 0:
                acknowledged[name] = offset
                pending.pop(name)
        if pending:  # a leader changed meanwhile: ask again
            leaders.update({n: v.leader for n, v in bulk.stream_views(addresses(dev_cluster), sorted(pending)).items()})
    assert not pending, f"{len(pending)} streams never acknowledged a write, e.g. {sorted(pending)[:3]}"
    assert set(acknowledged.values()) == {0}
    read = bulk.fetch_each(addresses(dev_cluster), dict.fromkeys(streams, 0), leaders)
    wrong = {name: got for name, got in read.items() if got != (0, [(0, name.encode())])}
    assert len(read) == STREAMS and not wrong, f"{len(wrong)} streams read back wrong, e.g. {list(wrong.items())[:3]}"


def test_kill_a_node_its_streams_move_to_both_survivors(dev_cluster: DevCluster, streams: list[str]) -> None:
    """kill -9 of the node leading most streams: every stream it led accepts an acks=all write
    at a survivor again, the new leaders are spread over both survivors, nothing is lost."""
    views = bulk.wait_for_views(addresses(dev_cluster), streams, SETTLE_S, in_sync=True, poll_s=0.5)
    led = Counter(view.leader for view in views.values())
    victim = led.most_common(1)[0][0]
    moved = {name for name, view in views.items() if view.leader == victim}
    dev_cluster.kill(victim)
    survivors = addresses(dev_cluster)
    pending = set(moved)
    new_leaders: dict[str, int] = {}
    deadline = time.monotonic() + SETTLE_S
    while pending and time.monotonic() < deadline:
        known = {n: v.leader for n, v in bulk.stream_views(survivors, sorted(pending)).items()}
        batches = {name: bulk.one_record_batch(b"after-" + name.encode()) for name in known}
        for name in bulk.acknowledged(bulk.produce_each(survivors, batches, known)):
            new_leaders[name] = known[name]
            pending.discard(name)
        time.sleep(0.05)
    assert not pending, f"{len(pending)} of the {len(moved)} streams node {victim} led have no writable leader"
    spread = Counter(new_leaders.values())
    assert set(spread) == set(survivors), f"new leaders all on one node: {dict(spread)}"
    assert min(spread.values()) >= len(moved) // 5, f"new leaders lopsided: {dict(spread)}"
    leaders = {name: view.leader for name, view in bulk.wait_for_views(survivors, streams, SETTLE_S).items()}
    read = bulk.fetch_each(survivors, dict.fromkeys(sorted(moved), 0), leaders)
    wrong = {name: got for name, got in read.items()
             if got != (0, [(0, name.encode()), (1, b"after-" + name.encode())])}
    assert len(read) == len(moved) and not wrong, f"records lost or changed, e.g. {list(wrong.items())[:3]}"


def test_restart_every_stream_back_in_sync_and_quiet(dev_cluster: DevCluster, streams: list[str]) -> None:
    """The killed node restarts: every stream is back in sync on its three replicas and the
    groups go quiet again."""
    down = [i for i, n in dev_cluster.nodes.items() if not n.running]
    for i in down:
        dev_cluster.restart(i, timeout_s=SETTLE_S)
    bulk.wait_for_views(addresses(dev_cluster), streams, SETTLE_S, in_sync=True, poll_s=0.5)
    wait_until(lambda: all(v == 1 for v in awake_groups(dev_cluster).values()), SETTLE_S,
               message="every stream group quiescent again after the restart")
    # A graceful stop hands every leadership over (in bulk), and the node comes back.
    node = next(iter(down), dev_cluster.node_ids()[0])
    dev_cluster.stop(node, signal.SIGTERM, timeout_s=SETTLE_S)
    dev_cluster.restart(node, timeout_s=SETTLE_S)
    bulk.wait_for_views(addresses(dev_cluster), streams, SETTLE_S, in_sync=True, poll_s=0.5)
