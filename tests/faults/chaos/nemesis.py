"""Nemeses: each injects one fault into a World and returns how to heal it.

Targets are drawn from the campaign's random generator, so a seed replays the same choices
(the cluster's own timing still varies). A nemesis is "composable" when it may run together
with another one; corruption is never composed: the promise is about one node's disk at a time,
so a node is damaged only while every replica is in sync and nothing else is wrong.
"""

from __future__ import annotations

import mmap
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.faults.chaos.links import DROP, RESET
from tests.faults.chaos.world import World
from tests.faults.harness import high_watermark, stream_directory
from tests.faults.workload import ConsumerThread
from tests.support.disk import cut_at_page, fill, flip_byte, release
from vdl_broker.cluster.metadata import METADATA_GROUP
from vdl_broker.raft.persistence import COMMIT_POINT_FILE, HARD_STATE_FILE, MEMBERSHIP_FILE
from vdl_broker.server.replica_manager import INCARNATION_FILE

BALLAST = ".chaos-ballast"


@dataclass
class Injected:
    detail: str
    heal: Callable[[], None]
    majority_kept: bool  # acks=all may resume while the fault lasts (a majority can still talk)
    readers: list[ConsumerThread] = field(default_factory=list)  # their reads go to the checker


@dataclass(frozen=True)
class Nemesis:
    name: str
    inject: Callable[[World, random.Random], Injected]
    min_nodes: int = 3
    composable: bool = True
    needs_tmpfs: bool = False
    quiet_cluster: bool = False  # inject only with every replica in sync and no other fault


# ------------------------------------------------------------------------------ targets


def _target(world: World, rng: random.Random) -> tuple[int, str]:
    """A running node: the leader of a stream, the metadata leader, or any node."""
    role = rng.choice(["stream leader", "metadata leader", "any node"])
    candidates = [i for i in world.reachable()]
    chosen: int | None = None
    if role == "stream leader":
        chosen = world.leader_of(rng.choice(world.streams))
    elif role == "metadata leader":
        chosen = world.metadata_leader()
    if chosen not in candidates:
        chosen, role = rng.choice(candidates), "any node"
    return chosen, role


def _majority(world: World, down: set[int]) -> bool:
    return len(set(world.node_ids) - down) > len(world.node_ids) // 2


# ---------------------------------------------------------------------------- processes


def kill(world: World, rng: random.Random) -> Injected:
    node, role = _target(world, rng)
    world.kill(node)
    return Injected(f"kill -9 node {node} ({role})", lambda: world.restart(node),
                    _majority(world, world.down | world.paused))


def pause(world: World, rng: random.Random) -> Injected:
    node, role = _target(world, rng)
    world.pause(node)
    return Injected(f"SIGSTOP node {node} ({role})", lambda: world.resume(node),
                    _majority(world, world.down | world.paused))


# ---------------------------------------------------------------------------- network


def _partition(shape: str, mode: str) -> Callable[[World, random.Random], Injected]:
    def inject(world: World, rng: random.Random) -> Injected:
        nodes = list(world.node_ids)
        rng.shuffle(nodes)
        if shape == "isolate-leader":
            leader = world.leader_of(rng.choice(world.streams)) or nodes[0]
            groups = [[leader], [n for n in nodes if n != leader]]
            world.links.partition(groups, mode)
            detail = f"node {leader} (a leader) cut off from the others"
        elif shape == "majority":
            minority = nodes[: (len(nodes) - 1) // 2]
            groups = [minority, nodes[len(minority):]]
            world.links.partition(groups, mode)
            detail = f"{sorted(groups[0])} | {sorted(groups[1])}"
        elif shape == "bridge":
            # Jepsen's bridge: two halves that only the bridge node hears both of.
            half = (len(nodes) - 1) // 2
            left, bridge, right = nodes[:half], nodes[half], nodes[half + 1:]
            world.links.partition([left, right], mode)
            detail = f"{sorted(left)} | {sorted(right)}, bridged by {bridge}"
        else:  # ring: each node keeps only its two neighbours
            neighbours = {frozenset((nodes[i], nodes[(i + 1) % len(nodes)])) for i in range(len(nodes))}
            for a in nodes:
                for b in nodes:
                    if a < b and frozenset((a, b)) not in neighbours:
                        world.links.cut(a, b, mode)
            detail = "ring " + "-".join(map(str, nodes))
        return Injected(f"{detail} ({mode})", world.links.heal, True)
    return inject


def slow_links(world: World, rng: random.Random) -> Injected:
    node = rng.choice(world.node_ids)
    delay, jitter, loss = rng.uniform(20, 150), rng.uniform(0, 50), rng.choice([0.0, 0.05, 0.2])
    for other in world.node_ids:
        if other != node:
            world.links.shape(node, other, delay, jitter, loss)
    return Injected(f"node {node}'s links: +{delay:.0f} ms (jitter {jitter:.0f}), loss {loss:.0%}",
                    world.links.heal, True)


# ------------------------------------------------------------------------------- disks


def disk_full(world: World, rng: random.Random) -> Injected:
    node = rng.choice(world.reachable())
    ballast = world.data_dir(node) / BALLAST
    fill(ballast)
    return Injected(f"node {node}'s disk full", lambda: release(ballast), True)


def _corrupt(kind: str) -> Callable[[World, random.Random], Injected]:
    def inject(world: World, rng: random.Random) -> Injected:
        node = rng.choice(world.reachable())
        world.kill(node)
        group = rng.choice([*world.streams, METADATA_GROUP]) if kind in ("segment", "truncate", "membership") \
            else rng.choice(world.streams)
        directory = stream_directory(world.data_dir(node), group)
        detail = f"node {node}: {damage(directory, kind, rng)}"
        return Injected(detail, lambda: world.restart(node), _majority(world, world.down | world.paused))
    return inject


def _damage_running(kind: str) -> Callable[[World, random.Random], Injected]:
    """Damage a segment of a stream under a *running* node (a flipped byte, or a cut at a page
    boundary: reading its mapped pages past the end would raise SIGBUS), or one of its indexes,
    while a consumer reads the stream from its start: the node must hand out nothing damaged and
    stay up. The checked stream's reads go to the checker; a transactional stream's reader must
    only get to the end (the transactional checker reads the stream whole at the end), while the
    transactional workload goes on (the leader's appends, producer state and last stable offset
    over the check). The heal restarts the node, whose open checks every file: damage no read
    met (a follower's) is repaired before the next disk fault, one disk at a time."""
    def inject(world: World, rng: random.Random) -> Injected:
        stream = rng.choice(world.streams)
        leader, end = high_watermark(world.cluster, stream, timeout=10)
        # Mostly the leader, which clients read from; a follower's damage is found at the
        # heal's open, or by a read if it leads before that.
        node = leader if rng.random() < 0.7 else rng.choice([n for n in world.reachable() if n != leader])
        role = "its leader" if node == leader else "a follower"
        detail = f"node {node} ({role}), running: {damage_running(stream_directory(world.data_dir(node), stream), kind, rng)}"
        reader = ConsumerThread(world.cluster.bootstrap_servers, stream, "confluent-assign",
                                name=f"reader after {detail}")
        reader.start()

        def heal() -> None:
            try:
                reader.finish(end, timeout=30)
            finally:
                world.kill(node)
                world.restart(node)
        checked = stream == world.streams[0]  # the checker knows what each of its offsets holds
        return Injected(detail, heal, True, [reader] if checked else [])
    return inject


def damage_running(directory: Path, kind: str, rng: random.Random) -> str:
    """Flip bytes in a segment of a running node's group directory ("flip"), cut one at a page
    boundary ("cut"), or flip a byte of an index file ("index": a sealed segment's are mapped, so
    the node's next lookup there reads the flipped byte); says what was done. The active segment
    may be the one: the node appends to it at its end (O_APPEND), after a cut at the wrong place."""
    if kind == "index":
        return damage(directory, "index", rng)
    segments = [p for p in sorted(directory.glob("*.log")) if p.stat().st_size > 2 * mmap.PAGESIZE]
    if not segments:
        return f"{directory.name}: no segment of more than two pages yet"
    path = rng.choice(segments)
    size = path.stat().st_size
    position = int(size * rng.uniform(0.25, 0.75))
    if kind == "cut":
        cut_at_page(path, position)
        return f"{directory.name}/{path.name} cut to {position - position % mmap.PAGESIZE} of {size} bytes"
    for offset in range(rng.randint(1, 3)):
        flip_byte(path, min(size - 1, position + offset))
    return f"{directory.name}/{path.name} bytes flipped at {position} of {size}"


def wipe(world: World, rng: random.Random) -> Injected:
    """kill -9 a node and delete its whole data directory (a disk replaced): it comes back with
    nothing, asks its peers whether the cluster exists and catches up without voting
    (vdl_broker.cluster.identity)."""
    node, role = _target(world, rng)
    world.kill(node)
    data_dir = world.data_dir(node)
    for path in data_dir.iterdir():  # the directory may be a mount point: empty it
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    return Injected(f"kill -9 node {node} ({role}) and rm -rf its data directory", lambda: world.restart(node),
                    _majority(world, world.down | world.paused))


def damage(directory: Path, kind: str, rng: random.Random) -> str:
    """Damage one file of a stopped node's group directory; says what was done."""
    if kind in ("segment", "truncate"):
        segments = [p for p in sorted(directory.glob("*.log")) if p.stat().st_size > 4096]
        if not segments:
            segments = sorted(directory.glob("*.log"))
        path = rng.choice(segments)
        size = path.stat().st_size
        position = int(size * rng.uniform(0.25, 0.75))
        if kind == "truncate":
            path.write_bytes(path.read_bytes()[:position])
            return f"{directory.name}/{path.name} truncated to {position} of {size} bytes"
        for offset in range(rng.randint(1, 3)):
            flip_byte(path, min(size - 1, position + offset))
        return f"{directory.name}/{path.name} bytes flipped at {position} of {size}"
    if kind == "index":
        indexes = [p for pattern in ("*.index", "*.timeindex", "*.ridx") for p in directory.glob(pattern)
                   if p.stat().st_size > 0]
        if not indexes:
            return f"{directory.name}: no index file with content to damage"
        path = rng.choice(sorted(indexes))
        position = rng.randrange(path.stat().st_size)
        flip_byte(path, position)
        return f"{directory.name}/{path.name} byte flipped at {position}"
    path = directory / {"hard-state": HARD_STATE_FILE, "commit-point": COMMIT_POINT_FILE, "membership": MEMBERSHIP_FILE,
                        "incarnation": INCARNATION_FILE}[kind]
    if not path.exists() or path.stat().st_size == 0:
        return f"{directory.name}/{path.name} absent: nothing to damage"
    position = rng.randrange(path.stat().st_size)
    flip_byte(path, position)
    return f"{directory.name}/{path.name} byte flipped at {position}"


NEMESES: tuple[Nemesis, ...] = (
    Nemesis("kill", kill),
    Nemesis("pause", pause),
    *(Nemesis(f"partition-{shape}/{mode}", _partition(shape, mode), min_nodes=5 if shape == "ring" else 3)
      for shape in ("isolate-leader", "majority", "bridge", "ring") for mode in (DROP, RESET)),
    Nemesis("slow-links", slow_links),
    Nemesis("disk-full", disk_full, needs_tmpfs=True),
    *(Nemesis(f"corrupt-{kind}", _corrupt(kind), composable=False, quiet_cluster=True)
      for kind in ("segment", "truncate", "index", "hard-state", "commit-point", "membership", "incarnation")),
    *(Nemesis(f"damage-running-{kind}", _damage_running(kind), composable=False, quiet_cluster=True)
      for kind in ("flip", "cut", "index")),
    Nemesis("wipe-data-dir", wipe, composable=False, quiet_cluster=True),
)


def available(world: World) -> list[Nemesis]:
    return [n for n in NEMESES if len(world.node_ids) >= n.min_nodes and (world.tmpfs or not n.needs_tmpfs)]
