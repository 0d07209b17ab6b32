"""franz-go's own test suite against VDL: github.com/twmb/franz-go/pkg/kgo's tests (v1.22.3, the
tests that run against a real broker named by KGO_SEEDS) and kadm's (v1.20.0: unit tests only).

`make polyglot` (part of `make install`) compiles each package's tests into one binary
(`go test -c` of the module tests/support/go/go.sum pins, from Go's module cache, where building
vdl-franz put it): build/polyglot/franz-kgo.test and franz-kadm.test, each with a .dir file naming
the package's source directory there (the tests run in it). Nothing is fetched here.

`python -m tests.support.franz_suite` (`make peer-franz`) runs the whole kgo suite on a 1-node and
a 3-node cluster (PLAINTEXT, plus SASL_PLAINTEXT for its SCRAM tests) and prints every test's
outcome; it fails on a failure not in KNOWN_DIFFERENCES. tests/integration/test_franz_suite.py
runs a fast subset in `make test`.

franz-go's environment: KGO_SEEDS (bootstrap), KGO_TEST_RF (replication factor),
KGO_TEST_RECORDS (records of the ETL tests, 500,000 by default), KGO_TEST_MAX_TOPIC_PARTS (caps
the 7, 11 and 31 partitions its topics get: a VDL stream has exactly one), KGO_TEST_SCRAM and
KGO_TEST_SCRAM_SEEDS (a SASL listener and a SCRAM-SHA-256 login), all set here; the others pass
through from the environment (`KGO_TEST_CHAOS=1 make peer-franz`: connections cut at random).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.cluster import start_cluster
from vdl_broker.listeners import parse_bootstrap_users
from vdl_dev.dev_cluster import DevCluster

REPO = Path(__file__).resolve().parents[2]
KGO_TESTS = REPO / "build" / "polyglot" / "franz-kgo.test"
KADM_TESTS = REPO / "build" / "polyglot" / "franz-kadm.test"

ONE_PARTITION = "creates a topic of several partitions (INVALID_PARTITIONS: a VDL stream has exactly one)"
NO_OFFSETS_TOPIC = ("waits for the internal topic __consumer_offsets in Metadata after a FindCoordinator: VDL "
                    "keeps group offsets in its metadata group, it has no such topic")
# franz-go's tests that fail on VDL by design (README, Compatibility), with why.
KNOWN_DIFFERENCES: dict[str, str] = {
    "TestPauseIssue489": ONE_PARTITION,
    "TestAddRemovePartitions": ONE_PARTITION,
    "TestDirectPartitionPurge": ONE_PARTITION,
    "TestIssue337": ONE_PARTITION,
    "TestConsumeRegex": NO_OFFSETS_TOPIC,
    "Test848RegexBrokerResolves": NO_OFFSETS_TOPIC,
}

SCRAM_USER, SCRAM_PASSWORD, SCRAM_PASSWORD_ENV = "franz", "Franz-pa55word-for-tests", "VDL_FRANZ_PASSWORD"
_OUTCOME = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+) \(")
_VERDICT = re.compile(r"^(PASS|FAIL)$")


@dataclass(frozen=True)
class SuiteRun:
    """One run of a test binary: each test's (and subtest's) outcome, PASS, FAIL or SKIP, and
    the binary's own verdict (None when it died without one: a panic or its timeout)."""

    outcomes: dict[str, str]
    verdict: str | None
    output: str

    def failed(self) -> list[str]:
        return sorted(name for name, outcome in self.outcomes.items() if outcome == "FAIL")

    def unexpected(self) -> list[str]:
        """Failures other than KNOWN_DIFFERENCES (a subtest counts as its top-level test)."""
        return [name for name in self.failed() if name.split("/")[0] not in KNOWN_DIFFERENCES]


def parse_output(output: str) -> SuiteRun:
    outcomes: dict[str, str] = {}
    verdict = None
    for line in output.splitlines():
        if (match := _OUTCOME.match(line)) is not None:
            outcomes[match.group(2)] = match.group(1)
        elif (final := _VERDICT.match(line)) is not None:
            verdict = final.group(1)
    return SuiteRun(outcomes, verdict, output)


def kgo_environment(cluster: DevCluster, records: int) -> dict[str, str]:
    """franz-go's test settings for `cluster` (its PLAINTEXT listener; SASL_PLAINTEXT when it has one)."""
    env = {"KGO_SEEDS": cluster.bootstrap_for("PLAINTEXT"), "KGO_TEST_RF": str(len(cluster.node_ids())),
           "KGO_TEST_RECORDS": str(records), "KGO_TEST_MAX_TOPIC_PARTS": "1"}
    if any(listener.protocol == "SASL_PLAINTEXT" for listener in cluster.nodes[1].config.client_listeners):
        env |= {"KGO_TEST_SCRAM_SEEDS": cluster.bootstrap_for("SASL_PLAINTEXT"),
                "KGO_TEST_SCRAM": f"{SCRAM_USER}:{SCRAM_PASSWORD}"}
    return env


def run_tests(binary: Path, env: dict[str, str], run: str = ".", skip: str = "",
              timeout_s: float = 1800.0, log: Path | None = None) -> SuiteRun:
    """Run a `go test -c` binary (-test.v: every outcome printed) and parse what it printed
    (copied to `log` as it comes)."""
    source = binary.with_name(binary.name + ".dir")
    if not binary.exists() or not source.exists():
        raise AssertionError(f"{binary} (or its .dir) is missing: run `make install`")
    args = [str(binary), "-test.v", "-test.count", "1", "-test.run", run,
            "-test.timeout", f"{int(timeout_s)}s"]
    if skip:
        args += ["-test.skip", skip]
    lines: list[str] = []
    with contextlib.ExitStack() as stack:
        copy = stack.enter_context(log.open("w")) if log is not None else None
        # In the package's source directory, as `go test` runs it: some tests read its sources.
        process = stack.enter_context(subprocess.Popen(args, env=os.environ | env, cwd=source.read_text().strip(),
                                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        # The Go test's own timeout panics with every goroutine's stack; this is the backstop.
        timer = threading.Timer(timeout_s + 60, process.kill)
        timer.start()
        try:
            assert process.stdout is not None
            for line in process.stdout:
                lines.append(line)
                if copy is not None:
                    copy.write(line)
                    copy.flush()
        finally:
            timer.cancel()
            process.kill()
    return parse_output("".join(lines))


def start_franz_cluster(directory: Path, nodes: int) -> DevCluster:
    """A cluster for the suite: PLAINTEXT, and SASL_PLAINTEXT with one SCRAM-SHA-256 user."""
    users = parse_bootstrap_users([{"name": SCRAM_USER, "mechanism": "SCRAM-SHA-256",
                                    "password_env": SCRAM_PASSWORD_ENV}], "bootstrap_users")
    return start_cluster(directory, nodes=nodes, settings={"bootstrap_users": users},
                         protocols=("PLAINTEXT", "SASL_PLAINTEXT"), env={SCRAM_PASSWORD_ENV: SCRAM_PASSWORD})


def report(title: str, run: SuiteRun) -> str:
    lines = [f"== {title} (the binary's verdict: {run.verdict or 'none, a panic or its timeout'})"]
    for name, outcome in sorted(run.outcomes.items()):
        if "/" in name:
            continue
        note = ""
        if outcome == "FAIL":
            note = f"  (known: {KNOWN_DIFFERENCES[name]})" if name in KNOWN_DIFFERENCES else "  UNEXPECTED"
        elif name in KNOWN_DIFFERENCES:
            note = "  (listed as a known difference but did not fail)"
        lines.append(f"{outcome:4} {name}{note}")
    counts = {o: sum(1 for n, v in run.outcomes.items() if v == o and "/" not in n) for o in ("PASS", "FAIL", "SKIP")}
    lines.append(f"   {counts['PASS']} passed, {counts['FAIL']} failed ({len(run.unexpected())} unexpected), "
                 f"{counts['SKIP']} skipped")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.franz_suite", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 3], help="cluster sizes, one run each (1 3)")
    parser.add_argument("--records", type=int, default=20_000,
                        help="KGO_TEST_RECORDS: records of the ETL tests (franz-go's default is 500000)")
    parser.add_argument("--run", default=".", help="-test.run: a regular expression of test names")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run (1800)")
    parser.add_argument("--log", type=Path, help="copy each run's output to LOG.<nodes> as it runs")
    args = parser.parse_args(argv)
    ok = True
    kadm = run_tests(KADM_TESTS, {}, timeout_s=300)
    print(report("kadm (unit tests: no broker)", kadm), flush=True)
    ok &= kadm.verdict == "PASS"
    for nodes in args.nodes:
        with tempfile.TemporaryDirectory(prefix=f"franz-{nodes}-") as directory:
            cluster = start_franz_cluster(Path(directory), nodes)
            try:
                run = run_tests(KGO_TESTS, kgo_environment(cluster, args.records), run=args.run,
                                timeout_s=args.timeout, log=Path(f"{args.log}.{nodes}") if args.log else None)
            finally:
                cluster.stop_all()
        print(report(f"kgo on {nodes} node(s), KGO_TEST_RECORDS={args.records}", run), flush=True)
        if run.verdict is None:
            print(run.output[-6000:])
        ok &= run.verdict is not None and not run.unexpected()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
