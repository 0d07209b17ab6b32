"""`python -m benchmarks [--quick] [NAME ...]`: run the benchmarks one after another.

Each runs in its own process (they start brokers and Spark), prints its table and writes
benchmarks/results/<name>.json. NAME is e.g. `log` or `bench_log`; default: all of them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

BENCHMARKS = ("bench_protocol", "bench_log", "bench_broker", "bench_replication", "bench_reassign", "bench_streams", "bench_connector",
              "bench_security", "bench_follower_reads", "bench_tables", "bench_mainjob", "bench_transactions", "bench_restart",
              "bench_node_start", "bench_delta_merge")
# bench_protocol measures microseconds per request at fixed sizes: it has no smoke mode.
WITHOUT_QUICK = {"bench_protocol"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smoke-sized runs")
    parser.add_argument("names", nargs="*", help=f"any of {', '.join(BENCHMARKS)} (default: all)")
    args = parser.parse_args(argv)
    chosen = [n if n.startswith("bench_") else f"bench_{n}" for n in args.names] or list(BENCHMARKS)
    unknown = [n for n in chosen if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    failed = []
    for name in chosen:
        command = [sys.executable, "-m", f"benchmarks.{name}"]
        if args.quick and name not in WITHOUT_QUICK:
            command.append("--quick")
        if subprocess.call(command) != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
