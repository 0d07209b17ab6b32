"""A fault campaign: clients write and read one stream while nemeses strike one after another,
then everything heals and the checker judges the history.

Every step draws the next nemesis from a shuffled deck of all that apply (so a short campaign
still sees each kind), sometimes composes it with a second one, holds the fault for a few
seconds, heals it, and measures how long acks=all takes to resume: after the heal, and, when a
majority could still talk, after the fault itself (an election). A node the nemeses did not
kill that is found dead is an anomaly too, as is an acks=all write that no node accepts within
`recovery_bound_s` of a heal (a cluster that needs a manual step).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmarks.report import markdown_table, percentile
from tests.faults.chaos.checker import (
    ANOMALY_KINDS,
    Ack,
    Anomaly,
    History,
    Read,
    Session,
    check,
    retried_duplicates,
)
from tests.faults.chaos.nemesis import Injected, Nemesis, available
from tests.faults.chaos.probes import Probes
from tests.faults.chaos.transactions import TXN_KINDS, TXN_STREAMS, TxnWorkload
from tests.faults.chaos.world import World, start_world
from tests.faults.harness import (
    LogImage,
    high_watermark,
    read_all,
    read_log_image,
    wait_for_full_isr,
    wait_logs_converged,
)
from tests.faults.workload import ConsumerThread, HighWatermarkMonitor, ProducerThread, Workload
from tests.support.kafka import EARLIEST, list_offset_raw
from tests.support.waiting import wait_until
from vdl_broker.cluster.metadata import METADATA_GROUP

STREAM = "chaos"
EXTRA_KINDS = ("node_exit", "stuck", "diverged")


@dataclass
class CampaignConfig:
    directory: Path
    nodes: int = 5
    faults: int = 100
    min_duration_s: float = 600.0
    seed: int | None = None  # None: VDL_CHAOS_SEED, else a fresh random seed
    rate_per_s: float = 100.0  # per producer
    hold_s: tuple[float, float] = (1.5, 5.0)
    quiet_s: tuple[float, float] = (0.5, 1.5)
    compose_probability: float = 0.2
    recovery_bound_s: float = 30.0
    node_log_level: str = "WARNING"
    txn_writers: int = 2  # transactional producers writing TXN_STREAMS (0: none)
    txn_pause_s: float = 0.0  # each transactional producer's pause between two transactions

    def resolved_seed(self) -> int:
        if self.seed is not None:
            return self.seed
        if os.environ.get("VDL_CHAOS_SEED"):
            return int(os.environ["VDL_CHAOS_SEED"])
        return random.SystemRandom().randrange(1 << 31)


@dataclass
class FaultRecord:
    nemeses: list[str]
    details: list[str]
    injected_at: float
    healed_at: float
    majority_kept: bool
    after_fault_s: float | None = None  # first acks=all acknowledgement after the fault began
    after_heal_s: float | None = None


@dataclass
class CampaignResult:
    seed: int
    nodes: int
    duration_s: float
    faults: list[FaultRecord]
    anomalies: list[Anomaly]
    acknowledged: int
    retried_duplicates: int
    disk_faults: bool  # the data directories were tmpfs mounts (disk-full faults possible)
    acks_by_time: list[float] = field(default_factory=list, repr=False)
    transactions: dict[str, int] = field(default_factory=dict)  # outcome -> count

    def anomaly_counts(self) -> dict[str, int]:
        counts = dict.fromkeys((*ANOMALY_KINDS, *TXN_KINDS, *EXTRA_KINDS), 0)
        for anomaly in self.anomalies:
            counts[anomaly.kind] += 1
        return counts

    def _fault_at(self, moment: float) -> FaultRecord | None:
        """The fault whose window (its injection to the next one's) holds `moment`."""
        owner = None
        for fault in self.faults:
            if fault.injected_at <= moment:
                owner = fault
        return owner

    def table(self) -> str:
        names = sorted({n for f in self.faults for n in f.nemeses})
        kinds = [k for k in (*ANOMALY_KINDS, *TXN_KINDS, *EXTRA_KINDS)]
        rows = []
        for name in names:
            mine = [f for f in self.faults if name in f.nemeses]
            windows = [(f.injected_at, _next_injection(self.faults, f)) for f in mine]
            acked = sum(1 for t in self.acks_by_time if any(a <= t < b for a, b in windows))
            found = [a for a in self.anomalies if (owner := self._fault_at(a.time)) is not None and owner in mine]
            heal = [f.after_heal_s for f in mine if f.after_heal_s is not None]
            during = [f.after_fault_s for f in mine if f.majority_kept and f.after_fault_s is not None]
            rows.append((name, len(mine), acked,
                         " ".join(f"{k}={n}" for k in kinds if (n := sum(1 for a in found if a.kind == k))) or "0",
                         _quantiles(during), _quantiles(heal)))
        header = ("nemesis", "faults", "acks in windows", "anomalies", "ack after fault p50/p99/max s",
                  "ack after heal p50/p99/max s")
        heal_all = [f.after_heal_s for f in self.faults if f.after_heal_s is not None]
        during_all = [f.after_fault_s for f in self.faults if f.majority_kept and f.after_fault_s is not None]
        rows.append(("all", len(self.faults), self.acknowledged,
                     " ".join(f"{k}={n}" for k, n in self.anomaly_counts().items() if n) or "0",
                     _quantiles(during_all), _quantiles(heal_all)))
        return markdown_table(header, rows)

    def resumption_s(self) -> list[float]:
        """Time to the next acks=all acknowledgement after every heal and every kill: the
        campaign's availability goal (p99 within 3 s)."""
        return ([f.after_heal_s for f in self.faults if f.after_heal_s is not None]
                + [f.after_fault_s for f in self.faults
                   if f.nemeses == ["kill"] and f.majority_kept and f.after_fault_s is not None])

    def goals(self) -> str:
        counts = self.anomaly_counts()
        resumed = self.resumption_s()
        rows = [("acknowledged records lost", counts["lost"], "0"),
                ("inconsistent offsets", counts["inconsistent_offset"], "0"),
                ("duplicates from idempotent producers", counts["duplicate"], "0"),
                ("high-watermark regressions", counts["hw_regression"], "0"),
                ("non-monotonic or skipping reads", counts["non_monotonic"] + counts["skipped"], "0"),
                ("phantom records", counts["phantom"], "0"),
                ("nodes exiting by themselves / stuck clusters", counts["node_exit"] + counts["stuck"], "0"),
                ("replicas differing from the leader at the end", counts["diverged"], "0"),
                ("transactions committed / aborted / unknown outcome",
                 " / ".join(str(self.transactions.get(k, 0)) for k in ("committed", "aborted", "unknown")), "-"),
                ("aborted reads (read_committed)", counts["aborted_read"], "0"),
                ("committed transactions lost / torn", f"{counts['lost_commit']} / {counts['torn']}", "0 / 0"),
                ("transactional records out of order or phantom", counts["txn_order"] + counts["txn_phantom"], "0"),
                ("acks=all resumed after a heal or kill, p99 s",
                 f"{percentile(resumed, 0.99):.2f}" if resumed else "-", "<= 3")]
        return markdown_table(("goal", "measured", "target"), rows)

    def to_json(self) -> dict[str, object]:
        return {"seed": self.seed, "nodes": self.nodes, "duration_s": self.duration_s,
                "acknowledged": self.acknowledged, "retried_duplicates": self.retried_duplicates,
                "transactions": self.transactions,
                "anomaly_counts": self.anomaly_counts(), "anomalies": [asdict(a) for a in self.anomalies],
                "faults": [asdict(f) for f in self.faults]}


def _next_injection(faults: list[FaultRecord], fault: FaultRecord) -> float:
    later = [f.injected_at for f in faults if f.injected_at > fault.injected_at]
    return min(later) if later else float("inf")


def _quantiles(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{percentile(values, 0.5):.2f} / {percentile(values, 0.99):.2f} / {max(values):.2f}"


def run_campaign(config: CampaignConfig, say: Callable[[str], None] = print) -> CampaignResult:
    seed = config.resolved_seed()
    rng = random.Random(seed)
    say(f"chaos: seed {seed} (replay with VDL_CHAOS_SEED={seed}), {config.nodes} nodes, "
        f">= {config.faults} faults, >= {config.min_duration_s:.0f} s")
    streams = [STREAM, *(TXN_STREAMS if config.txn_writers else ())]
    world = start_world(config.directory, config.nodes, seed, streams, {"log_level": config.node_log_level})
    if not world.tmpfs:
        say(f"chaos: no disk-full faults: {world.tmpfs_reason}")
    try:
        return _campaign(world, config, seed, rng, say)
    except BaseException:
        for node_id, node in world.cluster.nodes.items():
            say(f"chaos: node {node_id} ({'running' if node.running else 'down'}), last lines:\n"
                + "\n".join(list(node.output)[-int(os.environ.get("VDL_CHAOS_TAIL", "40")):]))
        raise
    finally:
        world.close()


def _campaign(world: World, config: CampaignConfig, seed: int, rng: random.Random,
              say: Callable[[str], None]) -> CampaignResult:
    replicas = min(config.nodes, 5)
    for stream in world.streams:
        wait_for_full_isr(world.cluster, stream, timeout=60, replicas=replicas)
    bootstrap = world.cluster.bootstrap_servers
    transactional = TxnWorkload(bootstrap, config.txn_writers, seed,
                                pause_s=config.txn_pause_s).start() if config.txn_writers else None
    workload = Workload(bootstrap, STREAM, config.rate_per_s, tag="",
                        kinds=("confluent", "confluent-idempotent", "kafka-python")).start()
    consumers = [ConsumerThread(bootstrap, STREAM, "kafka-python", name="assign-reader"),
                 ConsumerThread(bootstrap, STREAM, "confluent-group", name="group-reader")]
    for consumer in consumers:
        consumer.start()
    monitor = HighWatermarkMonitor(world.cluster, STREAM)
    monitor.start()
    probes = Probes(world, STREAM).start()
    rereaders: list[ConsumerThread] = []  # nemeses' readers, stopped at their heal
    anomalies: list[Anomaly] = []
    faults: list[FaultRecord] = []
    started = time.monotonic()
    deck: list[Nemesis] = []
    while len(faults) < config.faults or time.monotonic() - started < config.min_duration_s:
        if not deck:
            deck = available(world)
            rng.shuffle(deck)
        chosen = [deck.pop()]
        if chosen[0].composable and rng.random() < config.compose_probability:
            partners = [n for n in available(world) if n.composable and n.name.split("/")[0] != chosen[0].name.split("/")[0]]
            chosen.append(rng.choice(partners))
        if any(n.quiet_cluster for n in chosen):
            # Disk faults strike any stream (the transactional ones too): one damaged disk at a
            # time means every replica of every stream in sync first, not only the checked one's.
            for stream in world.streams:
                wait_for_full_isr(world.cluster, stream, timeout=config.recovery_bound_s, replicas=replicas)
        injected_at = time.monotonic()
        injected: list[Injected] = [n.inject(world, rng) for n in chosen]
        hold = rng.uniform(0.5, 2.0) if any(n.quiet_cluster for n in chosen) else rng.uniform(*config.hold_s)
        say(f"chaos: fault {len(faults) + 1} at {injected_at - started:6.1f} s: "
            + "; ".join(f"{n.name}: {i.detail}" for n, i in zip(chosen, injected, strict=True)))
        time.sleep(hold)  # the fault's scheduled duration, not a synchronization
        for item in reversed(injected):
            _heal(item, anomalies, say)
            rereaders += item.readers
        healed_at = time.monotonic()
        record = FaultRecord([n.name for n in chosen], [i.detail for i in injected], injected_at, healed_at,
                             all(i.majority_kept for i in injected))
        faults.append(record)
        _measure(record, probes, config.recovery_bound_s, anomalies)
        _check_processes(world, anomalies, say)
        time.sleep(rng.uniform(*config.quiet_s))  # scheduled quiet time between faults
    duration = time.monotonic() - started
    say(f"chaos: {len(faults)} faults in {duration:.0f} s; healing and checking")
    return _finish(world, workload, consumers, rereaders, monitor, probes, faults, anomalies, seed, duration,
                   replicas, transactional)


def _heal(item: Injected, anomalies: list[Anomaly], say: Callable[[str], None]) -> None:
    try:
        item.heal()
    except (RuntimeError, TimeoutError) as error:
        anomalies.append(Anomaly("node_exit", time.monotonic(), f"healing '{item.detail}' failed: {error}"))
        say(f"chaos: ANOMALY healing '{item.detail}' failed: {str(error)[:2000]}")
    except AssertionError as error:  # a heal that waits for the cluster (a reader reaching an offset)
        anomalies.append(Anomaly("stuck", time.monotonic(), f"healing '{item.detail}': {error}"))
        say(f"chaos: ANOMALY healing '{item.detail}': {str(error)[:2000]}")


def _measure(record: FaultRecord, probes: Probes, bound: float, anomalies: list[Anomaly]) -> None:
    try:
        first = wait_until(lambda: probes.first_ack_after(record.healed_at), bound,
                           "an acks=all acknowledgement after the heal", interval=0.02)
        record.after_heal_s = first - record.healed_at
    except AssertionError:
        anomalies.append(Anomaly("stuck", record.healed_at, f"no acks=all acknowledgement within {bound} s "
                                                            f"of healing {record.details}"))
    during = probes.first_ack_after(record.injected_at)
    if during is not None:
        record.after_fault_s = during - record.injected_at


def _check_processes(world: World, anomalies: list[Anomaly], say: Callable[[str], None]) -> None:
    for node_id in world.node_ids:
        node = world.cluster.nodes[node_id]
        if node_id not in world.down and not node.running:
            tail = "\n".join(list(node.output)[-20:])
            code = node.process.returncode if node.process is not None else None
            status = f"killed by signal {-code}" if code is not None and code < 0 else f"exit status {code}"
            anomalies.append(Anomaly("node_exit", time.monotonic(), f"node {node_id} exited by itself ({status}):\n{tail}"))
            say(f"chaos: ANOMALY node {node_id} exited by itself ({status}):\n{tail}")
            try:
                world.restart(node_id)
            except (RuntimeError, TimeoutError) as error:
                say(f"chaos: node {node_id} does not restart: {str(error)[:2000]}")
                world.down.add(node_id)


def _finish(world: World, workload: Workload, consumers: list[ConsumerThread], rereaders: list[ConsumerThread],
            monitor: HighWatermarkMonitor, probes: Probes, faults: list[FaultRecord], anomalies: list[Anomaly],
            seed: int, duration: float, replicas: int, transactional: TxnWorkload | None) -> CampaignResult:
    world.links.heal()
    for node_id in sorted(world.paused):
        world.resume(node_id)
    for node_id in sorted(world.down):
        world.restart(node_id)
    # A replica that never catches up by itself, or a client left with undelivered records,
    # is a finding (the cluster needs a manual step), not the end of the check.
    for step, action in (("every replica back in sync", lambda: wait_for_full_isr(
                             world.cluster, STREAM, timeout=120, replicas=replicas)),
                         ("the producers delivering everything", lambda: workload.stop(timeout=120)),
                         ("the transactional producers stopping", lambda: transactional and transactional.stop_writers())):
        try:
            action()
        except AssertionError as error:
            anomalies.append(Anomaly("stuck", time.monotonic(), f"{step}: {error}"))
    probes.stop()
    leader, hw = high_watermark(world.cluster, STREAM, timeout=30)
    for consumer in consumers:
        try:
            consumer.finish(hw, timeout=120)
        except AssertionError as error:
            anomalies.append(Anomaly("stuck", time.monotonic(), f"{consumer.reader}: {error}"))
    monitor.finish()
    address = world.address(leader)
    _, log_start = list_offset_raw(address, STREAM, EARLIEST)
    final = {offset: value for offset, (_, value) in read_all(address, STREAM, log_start, hw).items()}
    try:
        wait_logs_converged(world.cluster, STREAM, timeout=120)
        wait_until(lambda: _metadata_logs_identical(world), 60, "every node holding the same metadata log",
                   interval=0.5)
    except AssertionError as error:
        anomalies.append(Anomaly("diverged", time.monotonic(), str(error)))
    acks = [Ack(t, client, offset, value) for t, client, offset, value in workload.acks.timed() + probes.acks]
    producers = {p.client: p for p in workload.producers}
    history = History(
        acks=acks,
        idempotent_clients={p.client for p in workload.producers if p.idempotent}
        | {f"probe{n}" for n in world.node_ids},  # a probe is sent once, never retried
        was_produced=lambda value: _was_produced(value, producers, probes),
        sessions=[Session(c.reader, [Read(t, o, v) for t, o, v in s]) for c in [*consumers, *rereaders]
                  for s in c.sessions],
        high_watermarks=list(monitor.samples))
    anomalies += check(history, final, log_start)
    if transactional is not None:
        try:
            anomalies += transactional.finish(world.cluster)
        except AssertionError as error:
            anomalies.append(Anomaly("stuck", time.monotonic(), f"the transactional workload: {error}"))
    return CampaignResult(seed, len(world.node_ids), duration, faults, anomalies, len(acks),
                          retried_duplicates(history, final), world.tmpfs, sorted(a.time for a in acks),
                          transactional.outcomes() if transactional is not None else {})


def _metadata_logs_identical(world: World) -> bool:
    return metadata_logs_agree([read_log_image(world.cluster, node_id, METADATA_GROUP) for node_id in world.node_ids])


def metadata_logs_agree(images: Sequence[LogImage]) -> bool:
    """Writes stopped: every node's metadata log holds the same entries, byte for byte, from the
    latest first index among them up to the last index a majority holds (everything that may be
    committed). Below a node's first index its log was truncated behind a snapshot, at a point of
    its own. Past the majority's last index, a deposed leader may keep entries of its term that
    were never committed: Raft drops them when the leader next appends at their indices, and with
    writes stopped it may not append again."""
    majority_last = sorted((image.last_index for image in images), reverse=True)[len(images) // 2]
    first = max(image.first_index for image in images)

    def window(image: LogImage) -> dict[int, tuple[int, int, bytes]]:
        return {index: entry for index, entry in image.entries.items() if first <= index <= majority_last}
    return all(image.last_index >= majority_last and window(image) == window(images[0]) for image in images)


def _was_produced(value: bytes | None, producers: dict[str, ProducerThread], probes: Probes) -> bool:
    if value is None:
        return False
    name, _, rest = value.partition(b"-")
    producer = producers.get(name.decode(errors="replace"))
    if producer is not None:
        seq = rest[:8]
        return seq.isdigit() and int(seq) < producer.sent and value == producer.value(int(seq))
    return probes.was_attempted(value)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import contextlib
    import tempfile

    parser = argparse.ArgumentParser(prog="python -m tests.faults.chaos",
                                     description="A fault campaign against a local vdl-broker cluster.")
    parser.add_argument("--nodes", type=int, default=5, choices=(3, 5))
    parser.add_argument("--faults", type=int, default=100)
    parser.add_argument("--min-duration", type=float, default=600.0, help="seconds")
    parser.add_argument("--seed", type=int, default=None, help="default: VDL_CHAOS_SEED, else random")
    parser.add_argument("--rate", type=float, default=100.0, help="records/s per producer")
    parser.add_argument("--node-log-level", default="WARNING")
    parser.add_argument("--txn-writers", type=int, default=2, help="transactional producers (0: none)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/chaos.json"))
    parser.add_argument("--keep", type=Path, default=None,
                        help="run in this directory and keep it (each node's output.log), instead of a temporary one")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        directory = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="vdl-chaos-")))
        config = CampaignConfig(directory, args.nodes, args.faults, args.min_duration, args.seed, args.rate,
                                node_log_level=args.node_log_level, txn_writers=args.txn_writers)
        result = run_campaign(config)
    print(result.table())
    print(result.goals())
    for anomaly in result.anomalies[:50]:
        print(f"  {anomaly.kind}: {anomaly.detail[:500]}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result.to_json(), indent=2, default=str))
    print(f"chaos: seed {result.seed}; {result.acknowledged} acknowledged; "
          f"{result.retried_duplicates} duplicates from non-idempotent retries; results in {args.out}")
    return 1 if result.anomalies else 0


if __name__ == "__main__":
    sys.exit(main())
