"""Apache Kafka's Java client against VDL's transactions: its producer (kafka-producer-perf-test
with a transactional id: a transaction every 100 ms) and its admin client (kafka-transactions:
ListTransactions, DescribeTransactions, DescribeProducers)."""

from __future__ import annotations

import subprocess

from tests.integration.test_transactions_clients import admin, read_all
from tests.support.cluster import DevCluster
from tests.support.java_client import java_command

RECORDS = 2000


def run(main_class: str, *args: str) -> str:
    done = subprocess.run(java_command(main_class, *args), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_java_transactional_producer_and_the_transactions_tool(cluster: DevCluster) -> None:
    with admin(cluster) as c:
        c.create_stream("txn-java")
    run("org.apache.kafka.tools.ProducerPerformance", "--topic", "txn-java", "--num-records", str(RECORDS),
        "--record-size", "100", "--throughput", "-1", "--transactional-id", "java-perf",
        "--transaction-duration-ms", "100", "--producer-props", f"bootstrap.servers={cluster.bootstrap_servers}")
    assert len(read_all(cluster.bootstrap_servers, "txn-java", "read_committed", RECORDS)) == RECORDS
    tool = ["org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", cluster.bootstrap_servers]
    listed = run(*tool, "list")
    assert "java-perf" in listed and "CompleteCommit" in listed, listed
    described = run(*tool, "describe", "--transactional-id", "java-perf")
    assert "CompleteCommit" in described, described
    producers = run(*tool, "describe-producers", "--topic", "txn-java", "--partition", "0")
    assert "ProducerId" in producers, producers
