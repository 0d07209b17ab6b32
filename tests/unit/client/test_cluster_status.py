"""`vdl cluster status`'s screen from a ClusterHealth: exact text, the reasons it calls the
cluster unhealthy, and long stream lists cut short (one screen)."""

from __future__ import annotations

from vdl_client.cli.cluster import render
from vdl_client.health import ClusterHealth, NodeHealth

GIB = 1 << 30


def test_a_healthy_cluster() -> None:
    health = ClusterHealth("abc", 2, (NodeHealth(1, "h:1", True, ("a",), 100 * GIB, 50 * GIB),
                                      NodeHealth(2, "h:2", True, ("b", "c"), 100 * GIB, 40 * GIB)),
                           ("a", "b", "c"), (), ())
    assert render(health, 0.10) == ("cluster abc: 2 nodes (2 up), 3 streams, metadata leader node 2\n"
                                    "NODE  ADDRESS  STATE  LEADS  DISK FREE\n"
                                    "1     h:1      up     1      50.0 GiB of 100.0 GiB (50%)\n"
                                    "2     h:2      up     2      40.0 GiB of 100.0 GiB (40%)\n"
                                    "under-replicated streams: 0\n"
                                    "unavailable streams: 0\n"
                                    "healthy\n", True)


def test_every_reason_for_unhealthy() -> None:
    streams = tuple(f"s{i:02d}" for i in range(12))
    health = ClusterHealth(None, -1, (NodeHealth(1, "h:1", True, (), 100 * GIB, 5 * GIB),
                                      NodeHealth(2, "h:2", False)),
                           streams, streams, streams[:1])
    text, healthy = render(health, 0.10)
    assert not healthy
    assert text == ("cluster -: 2 nodes (1 up), 12 streams, metadata leader none\n"
                    "NODE  ADDRESS  STATE  LEADS  DISK FREE\n"
                    "1     h:1      up     0      5.0 GiB of 100.0 GiB (5%)\n"
                    "2     h:2      down   -      -\n"
                    "under-replicated streams: 12 (s00, s01, s02, s03, s04, s05, s06, s07, s08, s09, ... and 2 more)\n"
                    "unavailable streams: 1 (s00)\n"
                    "unhealthy: node 2 down; node 1 disk 5% free; no metadata leader; 12 under-replicated stream(s); "
                    "1 unavailable stream(s)\n")
    assert render(health, 0.0)[0].endswith("unhealthy: node 2 down; no metadata leader; 12 under-replicated "
                                            "stream(s); 1 unavailable stream(s)\n")


def test_one_node_and_one_stream_are_not_plural() -> None:
    health = ClusterHealth("abc", 1, (NodeHealth(1, "h:1", True, ("a",), 100 * GIB, 50 * GIB),), ("a",), (), ())
    assert render(health, 0.10)[0].splitlines()[0] == "cluster abc: 1 node (1 up), 1 stream, metadata leader node 1"
