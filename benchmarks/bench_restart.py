"""Restart cost of a stream's producer state: a log of ~300,000 small idempotent batches (50
producers), its producer and transaction state rebuilt as a restarting node does
(`rebuild_producer_state`), CPU seconds per rebuild:

- baseline: no state snapshot, the whole log is read (what every restart did before snapshots);
- after a crash: the snapshots written at segment rolls, the batches after the newest one read;
- after a clean stop: the snapshot written at close, nothing read.

The three take turns (alternating rounds, medians); the snapshots of the variants not measured
are moved aside, so each round finds only its own.

Opening the log (CPU and wall seconds of `StreamLog.open`), three variants in alternating rounds:

- baseline: every segment walked entry by entry with CRC checks, its indexes rebuilt (what
  every open did before vdl_broker/log/verified.py; here: its record file removed first, which
  takes exactly that path, plus the checksum pass that records the segments again);
- after a clean stop, and after a crash (no clean-shutdown marker): only the active segment
  walked, the older ones compared with their recorded checksums (one CRC32C pass per file).

`python -m benchmarks.bench_restart [--quick]`.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.report import Report
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.log.recovery import CLEAN_SHUTDOWN_FILE
from vdl_broker.log.state_snapshots import SNAPSHOT_SUFFIX
from vdl_broker.log.verified import CHECKSUMS_FILE
from vdl_broker.raft.types import Entry, EntryType
from vdl_broker.server.producer_state import (
    ProducerStateTable,
    encode_state,
    rebuild_producer_state,
    record_batch,
)
from vdl_broker.server.txn_index import StreamTxns
from vdl_wire.records.batch_header import parse_batch_header, with_base_offset
from vdl_wire.records.record_batch import RecordBatchBuilder

MiB = 1 << 20
PRODUCERS = 50


def config(segment_bytes: int) -> LogConfig:
    return LogConfig(segment_bytes=segment_bytes, fsync=False, tail_cache_bytes=0)


def build(directory: Path, batches: int, segment_bytes: int) -> tuple[int, int]:
    """The log, with a state snapshot at each roll (as a replica writes them) in `rolls/` and one
    at the end (a clean close) in `close/`. Returns (segments, bytes)."""
    log = StreamLog.open(directory, config(segment_bytes))
    table, txns = ProducerStateTable(0), StreamTxns()
    segments = 1
    for i in range(batches):
        builder = RecordBatchBuilder(producer_id=1000 + i % PRODUCERS, producer_epoch=0, base_sequence=i // PRODUCERS)
        builder.append(1_700_000_000_000, None, b"value-%08d" % i)
        stored = bytes(with_base_offset(builder.build(), log.log_end_offset))
        log.append([Entry(log.last_index + 1, 1, EntryType.DATA, stored)])
        record_batch(table, parse_batch_header(stored), log.log_end_offset - 1)
        if log.segment_count > segments:  # rolled: the snapshot a replica takes once this is applied
            segments = log.segment_count
            log.save_state_snapshot(log.log_end_offset, encode_state(table, txns))
    log.sync_now()
    rolls = directory / "rolls"
    rolls.mkdir()
    for path in directory.glob(f"*{SNAPSHOT_SUFFIX}"):
        path.rename(rolls / path.name)
    log.save_state_snapshot(log.log_end_offset, encode_state(table, txns))
    closed = directory / "close"
    closed.mkdir()
    for path in directory.glob(f"*{SNAPSHOT_SUFFIX}"):
        path.rename(closed / path.name)
    size = log.size_bytes
    log.close()
    return segments, size


def use(directory: Path, variant: str) -> None:
    """Put the variant's snapshots in place (none for the baseline)."""
    for kept in ("rolls", "close"):
        for path in directory.glob(f"*{SNAPSHOT_SUFFIX}"):
            if (directory / kept / path.name).exists():
                path.unlink()
    if variant != "none":
        for path in (directory / variant).iterdir():
            shutil.copy(path, directory / path.name)


def open_once(directory: Path, segment_bytes: int, variant: str) -> tuple[float, float]:
    """(CPU s, wall s) of one StreamLog.open in `variant`: "walk all" (no checksum records),
    "clean" or "crash" (no clean-shutdown marker)."""
    if variant == "walk all":
        (directory / CHECKSUMS_FILE).unlink(missing_ok=True)
    if variant == "crash":
        (directory / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
    cpu, wall = time.process_time(), time.perf_counter()
    log = StreamLog.open(directory, config(segment_bytes))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    log.close()
    return cpu, wall


def measure_opens(report: Report, directory: Path, segment_bytes: int, size: int, rounds: int) -> None:
    variants = ("walk all", "clean", "crash")
    cpu: dict[str, list[float]] = {v: [] for v in variants}
    wall: dict[str, list[float]] = {v: [] for v in variants}
    open_once(directory, segment_bytes, "walk all")  # warm the page cache and write the records
    for _ in range(rounds):
        for variant in variants:
            spent, took = open_once(directory, segment_bytes, variant)
            cpu[variant].append(spent)
            wall[variant].append(took)
    base_cpu, base_wall = statistics.median(cpu["walk all"]), statistics.median(wall["walk all"])
    report.add("open, every segment walked (the baseline)", base_cpu, "CPU s",
               note=f"wall {base_wall:.3f} s; {size / MiB:.0f} MiB; {base_cpu / (size / MiB) * 31:.3f} CPU s per 31 MiB")
    for variant, label in (("clean", "after a clean stop"), ("crash", "after a crash")):
        value, took = statistics.median(cpu[variant]), statistics.median(wall[variant])
        report.add(f"open {label}, old segments by checksum", value, "CPU s",
                   note=f"wall {took:.3f} s; range {min(cpu[variant]):.4f}-{max(cpu[variant]):.4f}")
        report.add(f"open {label} / every segment walked", value / base_cpu, "ratio (CPU)", higher_is_better=False)
        report.add(f"open {label} / every segment walked, wall", took / base_wall, "ratio (wall)",
                   higher_is_better=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="30,000 batches (a smoke run)")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where to put benchmark data")
    args = parser.parse_args()
    batches = 30_000 if args.quick else 300_000
    segment_bytes = 2 * MiB if args.quick else 8 * MiB
    root = Path(tempfile.mkdtemp(prefix="bench-restart-", dir=args.dir))
    report = Report("bench_restart" + ("_quick" if args.quick else ""))
    try:
        directory = root / "s"
        segments, size = build(directory, batches, segment_bytes)
        opens: list[float] = []
        replayed: dict[str, int] = {}

        def measure(variant: str) -> float:
            use(directory, variant)
            started = time.process_time()
            log = StreamLog.open(directory, config(segment_bytes))
            opened = time.process_time()
            rebuilt = rebuild_producer_state(log, log.log_end_offset, 0)
            spent = time.process_time() - opened
            opens.append(opened - started)
            assert len(rebuilt.table) == PRODUCERS
            replayed[variant] = rebuilt.batches_replayed
            log.close()
            return spent

        rounds = 3 if args.quick else 5
        results = {variant: [] for variant in ("none", "rolls", "close")}
        measure("none")  # warm the page cache
        for _ in range(rounds):
            for variant in results:
                results[variant].append(measure(variant))
        base = statistics.median(results["none"])
        note = f"{batches:,} batches, {PRODUCERS} producers, {size / MiB:.0f} MiB, {segments} segments"
        report.add("rebuild, whole log (no snapshot; the baseline)", base, "CPU s",
                   note=f"{replayed['none']:,} batches read; {note}")
        for variant, label in (("rolls", "after a crash (roll snapshots)"), ("close", "after a clean stop")):
            value = statistics.median(results[variant])
            report.add(f"rebuild, {label}", value, "CPU s",
                       note=f"{replayed[variant]:,} batches read; range {min(results[variant]):.4f}-"
                            f"{max(results[variant]):.4f}")
            # After a crash the batches of the active segment are read: the ratio follows the
            # segment size (here 1/segments), no goal; after a clean stop nothing is.
            report.add(f"rebuild {label} / whole log", value / base, "ratio",
                       goal=0.01 if variant == "close" else None, higher_is_better=False)
        report.add("open the log, within the rebuild rounds", statistics.median(opens), "CPU s",
                   note="same in every variant: not part of the producer state")
        report.add("whole-log rebuild per 100,000 batches", base / batches * 100_000, "CPU s",
                   note=f"medians of {rounds} alternating rounds; shared machine")
        measure_opens(report, directory, segment_bytes, size, rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report.finish()


if __name__ == "__main__":
    main()
