"""Security overhead on one node: produce acks=all and kcat consume over SASL_SSL (TLS +
SCRAM-SHA-512) next to PLAINTEXT on the same broker, and the time of a full TLS + SCRAM
connection setup.

    .venv/bin/python -m benchmarks.bench_security [--quick] [--rounds 3]

One broker with a PLAINTEXT and a SASL_SSL listener, authorizer `acl` (a user with ACLs on the
benchmark streams, `User:*` for the anonymous PLAINTEXT clients: both go through the
authorizer). Each round measures both protocols on fresh streams, alternating which goes first;
the table gives the medians and the median of the per-round ratios (SASL_SSL / PLAINTEXT).
Connection setup: TCP connect, TLS handshake (certificate checked against the CA), SaslHandshake
and the two SCRAM-SHA-512 round trips (8192 iterations, as `vdl users create` stores them), with
vdl_client, timed end to end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bench_broker import RECORD_BYTES, free_port, kcat_consume, produce_run
from benchmarks.report import Report, percentile

USER, PASSWORD = "bench", "bench-Pa55-w0rd"
ADMIN_PASSWORD = "bench-admin-Pa55"


class SecureBroker:
    """One node with PLAINTEXT and SASL_SSL listeners, a throw-away CA, authorizer acl."""

    def __init__(self, directory: Path) -> None:
        from vdl_dev.certs import make_authority, node_certificate

        tls = directory / "tls"
        authority = make_authority(tls)
        node_certificate(authority, tls, 1)
        self.ca = str(tls / "ca.pem")
        self.plain = f"127.0.0.1:{free_port()}"
        self.secure = f"127.0.0.1:{free_port()}"
        (directory / "node.toml").write_text(
            f'node_id = 1\ndata_dir = "{directory / "data"}"\n'
            f'listeners = ["PLAINTEXT://{self.plain}", "SASL_SSL://{self.secure}"]\n'
            f'ssl_certfile = "{tls / "node1.pem"}"\nssl_keyfile = "{tls / "node1.key"}"\nssl_cafile = "{self.ca}"\n'
            f'authorizer = "acl"\nsuper_users = ["admin"]\nlog_level = "WARNING"\n'
            '[[bootstrap_users]]\nname = "admin"\nmechanism = "SCRAM-SHA-512"\npassword_env = "VDL_BENCH_ADMIN"\n')
        env = dict(os.environ, VDL_BENCH_ADMIN=ADMIN_PASSWORD)
        self.process = subprocess.Popen([sys.executable, "-m", "vdl_broker.server.main", "--config",
                                         str(directory / "node.toml")], stdout=subprocess.PIPE, text=True, env=env)
        assert self.process.stdout is not None
        deadline = time.monotonic() + 30
        while not self.process.stdout.readline().startswith("vdl-broker listening on "):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("broker did not start")
        self._setup()

    def security(self, user: str = USER, password: str = PASSWORD):  # noqa: ANN201
        from vdl_client.security import SecuritySettings

        return SecuritySettings("SASL_SSL", "SCRAM-SHA-512", user, password, self.ca)

    def librdkafka(self, protocol: str) -> dict[str, str]:
        if protocol == "PLAINTEXT":
            return {}
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER,
                "sasl.password": PASSWORD, "ssl.ca.location": self.ca}

    def bootstrap(self, protocol: str) -> str:
        return self.plain if protocol == "PLAINTEXT" else self.secure

    def _setup(self) -> None:
        from vdl_client import ClientSettings, VdlClient, admin
        from vdl_wire.acls import AclBinding, Operation, PatternType, Permission, ResourceType

        settings = ClientSettings.from_bootstrap(self.secure, security=self.security("admin", ADMIN_PASSWORD))
        with VdlClient(settings) as client:
            admin.upsert_user(client, USER, "SCRAM-SHA-512", PASSWORD)
            admin.create_acls(client, [AclBinding(ResourceType.TOPIC, "bench-", PatternType.PREFIXED, principal, "*",
                                                  Operation.ALL, Permission.ALLOW)
                                       for principal in (f"User:{USER}", "User:ANONYMOUS")])

    def create(self, *streams: str) -> None:
        from vdl_client import ClientSettings, VdlClient

        with VdlClient(ClientSettings.from_bootstrap(self.secure, security=self.security())) as client:
            client.create_streams(streams)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def connection_setups(broker: SecureBroker, count: int) -> list[float]:
    """Milliseconds of `count` full connection setups: TCP, TLS, SASL SCRAM-SHA-512."""
    from vdl_client.connection import Connection

    security = broker.security()
    times = []
    for _ in range(count):
        started = time.perf_counter()
        connection = Connection(broker.secure, 10, "bench", security)
        times.append((time.perf_counter() - started) * 1000)
        connection.close()
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller counts, one round (a smoke run)")
    parser.add_argument("--rounds", type=int, help="rounds, alternating which protocol goes first (default 3)")
    parser.add_argument("--producers", type=int, default=2, help="producer processes (default 2)")
    args = parser.parse_args(argv)
    count = 200_000 if args.quick else 1_000_000
    rounds = args.rounds or (1 if args.quick else 3)
    report = Report("bench_security")
    runs: dict[str, list[dict[str, float]]] = {"PLAINTEXT": [], "SASL_SSL": []}
    timelines: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="vdl-bench-security-") as tmp:
        broker = SecureBroker(Path(tmp))
        try:
            for number in range(rounds):
                order = ("PLAINTEXT", "SASL_SSL") if number % 2 == 0 else ("SASL_SSL", "PLAINTEXT")
                for protocol in order:
                    stream = f"bench-{protocol.lower()}-{number}"
                    broker.create(stream)
                    conf = broker.librdkafka(protocol)
                    run = produce_run(broker.bootstrap(protocol), stream, count, -1, args.producers, conf)
                    consumed = kcat_consume(broker.bootstrap(protocol), stream, count + args.producers, conf)
                    runs[protocol].append({"produce": run.rate, "consume": consumed})
                    if number == rounds // 2:
                        timelines[protocol] = run.counts
            setups = connection_setups(broker, 20 if args.quick else 100)
        finally:
            broker.stop()
    report.timeline("produce acks=-1, SASL_SSL", timelines["SASL_SSL"])
    report.timeline("produce acks=-1, PLAINTEXT", timelines["PLAINTEXT"], baseline=True)
    report.latency("TLS + SCRAM-SHA-512 connection setup", setups)

    def median(protocol: str, key: str) -> float:
        return statistics.median(run[key] for run in runs[protocol])

    def ratio(key: str) -> float:
        return statistics.median(s[key] / p[key] for s, p in zip(runs["SASL_SSL"], runs["PLAINTEXT"], strict=True))

    def spread(protocol: str, key: str) -> str:
        return "rounds: " + ", ".join(f"{run[key]:,.0f}" for run in runs[protocol])

    who = f"{args.producers} confluent-kafka producers, linger 5 ms, {RECORD_BYTES}-byte records"
    for key, name in (("produce", "produce acks=-1"), ("consume", f"kcat consume {count:,} records")):
        report.add(f"{name}, PLAINTEXT", median("PLAINTEXT", key), "records/s", note=spread("PLAINTEXT", key))
        report.add(f"{name}, SASL_SSL (TLS + SCRAM-SHA-512)", median("SASL_SSL", key), "records/s",
                   note=spread("SASL_SSL", key) + (f"; {who}" if key == "produce" else ""))
        report.add(f"{name}: SASL_SSL / PLAINTEXT", ratio(key), "x", 0.6, note="median of per-round ratios")
    report.add("TLS + SCRAM-SHA-512 connection setup, median", statistics.median(setups), "ms", 50.0,
               higher_is_better=False, note=f"{len(setups)} setups, vdl_client, 8192 iterations")
    report.add("TLS + SCRAM-SHA-512 connection setup, p99", percentile(setups, 0.99), "ms", higher_is_better=False)
    report.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
