"""Apache Kafka's Java client against VDL's transactions: its producer (kafka-producer-perf-test
with a transactional id: a transaction every 100 ms) and its admin client (kafka-transactions:
ListTransactions, DescribeTransactions, DescribeProducers). The broker finalizes transaction.version
2, so the producer runs KIP-890 part 2: EndTxn v5, partitions added by Produce v12."""

from __future__ import annotations

import subprocess
from collections import Counter

from tests.integration.test_transactions_clients import admin, read_all
from tests.support.cluster import DevCluster
from tests.support.java_client import java_command
from tests.support.metrics import scrape

RECORDS = 2000
THROUGHPUT = 5000  # records/s: 0.4 s of sending, so several 100 ms transactions follow each other


def run(main_class: str, *args: str) -> str:
    done = subprocess.run(java_command(main_class, *args), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


TXN_APIS = ("EndTxn", "Produce", "AddPartitionsToTxn")


def requests_by_version(cluster: DevCluster) -> Counter[tuple[str, str]]:
    """Requests of the transaction APIs every node answered, by API and version (any outcome)."""
    counts: Counter[tuple[str, str]] = Counter()
    for node_id in cluster.node_ids():
        for labels, value in scrape(cluster, node_id).samples.get("vdl_requests_total", []):
            if labels.get("api") in TXN_APIS:
                counts[(labels["api"], labels["version"])] += int(value)
    return counts


def test_java_transactional_producer_and_the_transactions_tool(cluster: DevCluster) -> None:
    with admin(cluster) as c:
        c.create_stream("txn-java")
    before = requests_by_version(cluster)
    run("org.apache.kafka.tools.ProducerPerformance", "--topic", "txn-java", "--num-records", str(RECORDS),
        "--record-size", "100", "--throughput", str(THROUGHPUT), "--transactional-id", "java-perf",
        "--transaction-duration-ms", "100", "--producer-props", f"bootstrap.servers={cluster.bootstrap_servers}")
    used = requests_by_version(cluster) - before
    # Transaction version 2: every EndTxn is v5 (the epoch bumps per transaction), the partition
    # is added by Produce v12, and the client never sends AddPartitionsToTxn (v0-3 are clients').
    assert {key for key in used if key[0] == "EndTxn"} == {("EndTxn", "5")}, used
    assert used[("Produce", "12")] > 0 and not any(api == "AddPartitionsToTxn" and int(version) <= 3
                                                   for api, version in used), used
    assert len(read_all(cluster.bootstrap_servers, "txn-java", "read_committed", RECORDS)) == RECORDS
    tool = ["org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", cluster.bootstrap_servers]
    listed = run(*tool, "list")
    assert "java-perf" in listed and "CompleteCommit" in listed, listed
    described = run(*tool, "describe", "--transactional-id", "java-perf")
    assert "CompleteCommit" in described, described
    producers = run(*tool, "describe-producers", "--topic", "txn-java", "--partition", "0")
    assert "ProducerId" in producers, producers
    # Every EndTxn bumped the epoch (InitProducerId gave 0): the last transaction's batches carry
    # the epoch its predecessors' bumps reached (the classic protocol keeps 0 throughout).
    header, row = (line.split() for line in producers.strip().splitlines())
    assert int(row[header.index("ProducerEpoch")]) == used[("EndTxn", "5")] - 1 >= 1, producers
