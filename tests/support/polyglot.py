"""The clients of other languages in the tests: franz-go (tests/support/go, built by `make install`
into build/polyglot/vdl-franz), rskafka (tests/support/rust, into build/polyglot/vdl-rskafka) and
kafkajs (tests/support/node, `npm ci` into its node_modules).

Each is one program run once per scenario: `PROGRAM SCENARIO JSON-ARGS` prints JSON lines,
{"progress": ...} when it pauses for the test (which answers with a line on its stdin once
`on_progress` did its part, a node killed say) and one {"result": ...} (or {"error": ...}) at
the end. Both make
the same records (`expected_record`), so the tests of both compare against one spelling.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.java_targets import JavaTarget
from tests.support.security import ADMIN_PASSWORD, ADMIN_USER
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
FRANZ = REPO / "build" / "polyglot" / "vdl-franz"
RSKAFKA = REPO / "build" / "polyglot" / "vdl-rskafka"
NODE_DIR = REPO / "tests" / "support" / "node"
KAFKAJS = ("node", str(NODE_DIR / "driver.js"))
BASE_MILLIS = 1_700_000_000_000


def target_args(target: JavaTarget, **scenario: Any) -> dict[str, Any]:
    """A scenario's arguments on `target`: its bootstrap list and, on the secured listener, the
    SCRAM-SHA-512 login and the CA."""
    login = {"user": ADMIN_USER, "password": ADMIN_PASSWORD, "ca": str(target.tls.ca)} if target.secured else {}
    return {"bootstrap": target.bootstrap.split(","), "replication": target.replication,
            "base_millis": BASE_MILLIS, **login, **scenario}


def run_scenario(program: tuple[str, ...], scenario: str, args: dict[str, Any],
                 on_progress: Callable[[Any], None] | None = None, timeout_s: float = 120.0) -> Any:
    """Run one scenario; its result, or AssertionError with the program's error and output."""
    if not Path(program[-1]).exists() or (program[0] == "node" and not (NODE_DIR / "node_modules").exists()):
        raise AssertionError(f"{program[-1]} (or its node_modules) is missing: run `make install`")
    process = subprocess.Popen([*program, scenario, json.dumps(args)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=os.environ | {"KAFKAJS_NO_PARTITIONER_WARNING": "1"})
    timer = threading.Timer(timeout_s, process.kill)
    timer.start()
    lines: list[str] = []
    result: Any = None
    error: str | None = None
    try:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if not line.startswith("{"):
                continue
            message = json.loads(line)
            if "progress" in message:
                if on_progress is not None:
                    on_progress(message["progress"])
                assert process.stdin is not None
                process.stdin.write("go on\n")  # the program waits for this after a progress line
                process.stdin.flush()
            elif "result" in message:
                result = message["result"]
            elif "error" in message:
                error = message["error"]
        stderr = process.stderr.read() if process.stderr is not None else ""
        code = process.wait()
    finally:
        timer.cancel()
        process.kill()
    if error is not None or code != 0:
        tail = "".join(lines[-20:]) + stderr[-4000:]
        raise AssertionError(f"{program[-1]} {scenario} failed (exit {code}): {error}\n{tail}")
    return result


def run_killing_the_leader(program: tuple[str, ...], scenario: str, target: JavaTarget, topic: str,
                           **scenario_args: Any) -> Any:
    """Run a scenario that produces 200 records to `topic` and pauses after 100 are acknowledged:
    the stream's leader is killed -9 then (the program's next records go to the next leader),
    and restarted once the program ended. Its result."""
    cluster = target.cluster
    killed: list[int] = []

    def on_progress(acked: int) -> None:
        assert acked == 100 and not killed
        leader = wait_until(lambda: cluster.leader_of(topic), message=f"a leader of {topic}")
        cluster.kill(leader)
        killed.append(leader)

    try:
        result = run_scenario(program, scenario, target_args(target, topics=[topic], count=200, pause_at=100,
                                                             **scenario_args), on_progress=on_progress)
    finally:
        for node_id in killed:
            cluster.restart(node_id)
    assert killed, "the producer never paused for the kill"
    return result


def expected_record(topic: str, i: int, offset: int | None = None, base: int = BASE_MILLIS,
                    value_prefix: str = "") -> dict[str, Any]:
    """Record i as both drivers make it: every third without a key, two headers (one empty), the
    timestamp base + i."""
    return {"topic": topic, "offset": i if offset is None else offset, "key": f"key-{i}" if i % 3 else None,
            "value": f"{value_prefix}value-{i}-" + "x" * (i % 7), "headers": [["i", str(i)], ["empty", ""]],
            "timestamp": base + i}
