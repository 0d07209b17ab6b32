"""`python -m tests.soak [--duration S] [--groups N] [--results DIR] [--no-spark]`: see
tests/soak/__init__.py. `--report DIR` prints an earlier run's table again. Exit status 1 when a correctness check fails (2: a goal missed, with
--strict-goals)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tests.soak.soak import (
    SoakConfig,
    evaluate_goals,
    fmt_duration,
    load_result,
    run_soak,
    table,
    write_outputs,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__)
    parser.add_argument("--duration", type=float, default=float(os.environ.get("SOAK_DURATION", 3600)),
                        help="seconds of workload (default 3600, or SOAK_DURATION)")
    parser.add_argument("--groups", type=int, default=200, help="consumer groups (default 200)")
    parser.add_argument("--committers", type=int, default=2, help="group committer threads per client (default 2)")
    parser.add_argument("--rate", type=float, default=40.0, help="records per second of each producer (default 40)")
    parser.add_argument("--results", type=Path, default=Path("soak-results"), help="results directory")
    parser.add_argument("--no-spark", action="store_true", help="leave the Spark streaming query out")
    parser.add_argument("--rolling-every", type=float, metavar="S",
                        help="seconds between rolling restarts (default 10 min per hour of run)")
    parser.add_argument("--reassign-every", type=float, metavar="S",
                        help="seconds between reassignments (default 5 min per hour of run)")
    parser.add_argument("--memwatch", type=int, metavar="NODE",
                        help="trace that node's memory (0: every node; tests/soak/memwatch.py): memwatch-*.jsonl in the results")
    parser.add_argument("--strict-goals", action="store_true", help="exit 2 when a goal is missed")
    parser.add_argument("--report", type=Path, metavar="DIR",
                        help="no run: read DIR/soak.json again, recompute the goals, rewrite the plot, print the table")
    args = parser.parse_args(argv)
    if args.report is not None:
        result = load_result(args.report / "soak.json")
        saved = result.config
        result.goals = evaluate_goals(result, SoakConfig(duration_s=float(saved["duration_s"]),
                                                         warmup_fraction=float(saved["warmup_fraction"])))
        write_outputs(result, args.report)
        print(table(result))
        return 1 if result.problems else 0
    config = SoakConfig(duration_s=args.duration, results_dir=args.results, groups=args.groups,
                        committers_per_client=args.committers, rate_per_s=args.rate, spark=not args.no_spark,
                        memwatch_node=args.memwatch, rolling_every_s=args.rolling_every,
                        reassign_every_s=args.reassign_every)
    result = run_soak(config)
    json_path, png_path = write_outputs(result, args.results)
    print(f"\nsoak finished after {fmt_duration(result.elapsed_s)}; {json_path}, {png_path}\n")
    print(table(result))
    if result.problems:
        return 1
    missed = [k for k, v in result.goals.items() if isinstance(v, dict) and v.get("met") is False]
    return 2 if args.strict_goals and missed else 0


if __name__ == "__main__":
    sys.exit(main())
