"""Apache Kafka's Java client against VDL's transactions: its producer (kafka-producer-perf-test
with a transactional id: a transaction every 100 ms) and its admin client (kafka-transactions:
ListTransactions, DescribeTransactions, DescribeProducers). The broker finalizes transaction.version
2, so the producer runs KIP-890 part 2: EndTxn v5, partitions added by Produce v12."""

from __future__ import annotations

import subprocess
from collections import Counter

import pytest
from confluent_kafka import Producer

from tests.integration.test_transactions_clients import admin, read_all
from tests.integration.test_transactions_epoch_limit import described
from tests.support.cluster import DevCluster
from tests.support.java_client import JavaClients, JavaError, java_command
from tests.support.kafka import read_to_end
from tests.support.metrics import scrape
from tests.support.waiting import wait_until

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


def test_a_java_producer_whose_transaction_timed_out_gets_kafkas_answers_on_commit_and_on_abort(
        cluster: DevCluster, java: JavaClients) -> None:
    """The coordinator aborts a transaction older than transaction.timeout.ms with an epoch bump.
    The Java producer (transaction version 2) then gets what it gets from Kafka 4.4 (measured, same
    client): its commit (EndTxn v5 under the old epoch) INVALID_TXN_STATE, so
    InvalidTxnStateException, fatal; its abort instead is the abort already made, answered with the
    bumped epoch, and the producer's next transaction commits."""
    stream = "txn-java-timeout"
    with admin(cluster) as c:
        c.create_stream(stream)

    def open_until_timed_out(name: str) -> None:
        java.producer(name, cluster.bootstrap_servers, **{"transactional.id": name, "transaction.timeout.ms": 1000,
                                                           "acks": "all"})
        java.call("init_transactions", name=name)
        java.call("begin_transaction", name=name)
        sent = java.call("send", name=name, topic=stream, records=[{"value": f"{name}-open"}])
        assert all("error" not in s for s in sent), sent
        wait_until(lambda: described(cluster, name)[1:] == (1, "CompleteAbort"), 30,
                   f"the coordinator aborted {name}'s transaction on its timeout")

    open_until_timed_out("java-timeout-commit")
    with pytest.raises(JavaError) as fenced:
        java.call("commit_transaction", name="java-timeout-commit")
    # Fatal: the producer is in an error state (as with Kafka).
    with pytest.raises(JavaError) as after:
        java.call("abort_transaction", name="java-timeout-commit")
    assert after.value.error == "KafkaException" and "error state" in after.value.message, after.value
    assert fenced.value.error == "InvalidTxnStateException", fenced.value
    open_until_timed_out("java-timeout-abort")
    java.call("abort_transaction", name="java-timeout-abort")
    assert described(cluster, "java-timeout-abort")[1:] == (1, "CompleteAbort")
    java.call("begin_transaction", name="java-timeout-abort")
    sent = java.call("send", name="java-timeout-abort", topic=stream, records=[{"value": "after"}])
    assert all("error" not in s for s in sent), sent
    java.call("commit_transaction", name="java-timeout-abort")
    assert read_all(cluster.bootstrap_servers, stream, "read_committed", 1) == [b"after"]
    for name in ("java-timeout-commit", "java-timeout-abort"):
        java.call("close", name=name)


def test_kafka_transactions_abort_ends_an_open_transaction_in_its_stream(cluster: DevCluster, java: JavaClients) -> None:
    """`kafka-transactions abort` (Admin.abortTransaction: DescribeProducers, then WriteTxnMarkers
    straight to the stream's leader, KIP-664) writes the abort marker there and then, as Kafka's
    broker does, though the coordinator still holds the transaction open: read_committed readers
    pass it at once. The producer's own abort later writes the coordinator's marker after it."""
    stream = "txn-java-abort-tool"
    with admin(cluster) as c:
        c.create_stream(stream)
    name = "java-abort-tool"
    java.producer(name, cluster.bootstrap_servers, **{"transactional.id": name, "acks": "all"})
    java.call("init_transactions", name=name)
    java.call("begin_transaction", name=name)
    sent = java.call("send", name=name, topic=stream, records=[{"value": "open-1"}, {"value": "open-2"}])
    assert [s.get("offset") for s in sent] == [0, 1], sent
    plain = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    plain.produce(stream, b"after")
    assert plain.flush(30) == 0
    assert read_to_end(cluster.bootstrap_servers, stream, "read_committed") == []  # the open transaction holds it
    aborted = java.tool("kafka-transactions", "--bootstrap-server", cluster.bootstrap_servers, "abort",
                        "--topic", stream, "--partition", "0", "--start-offset", "0")
    assert aborted.returncode == 0, aborted.stdout + aborted.stderr
    assert read_to_end(cluster.bootstrap_servers, stream, "read_committed", 1) == [(2, b"after")]
    java.call("abort_transaction", name=name)
    java.call("close", name=name)
    assert read_to_end(cluster.bootstrap_servers, stream, "read_committed", 1) == [(2, b"after")]
    assert [v for _, v in read_to_end(cluster.bootstrap_servers, stream, "read_uncommitted", 3)] == [
        b"open-1", b"open-2", b"after"]


def test_kafka_transactions_abort_after_an_earlier_transaction_of_the_producer(cluster: DevCluster,
                                                                               java: JavaClients) -> None:
    """The producer's earlier transaction left a marker here: DescribeProducers shows its
    coordinator epoch, which `kafka-transactions abort` sends back. Kafka writes that abort
    marker (it refuses only a lower epoch); it was taken for the earlier decision's marker,
    written already, and acknowledged without being written."""
    stream = "txn-java-abort-second"
    with admin(cluster) as c:
        c.create_stream(stream)
    name = "java-abort-second"
    java.producer(name, cluster.bootstrap_servers, **{"transactional.id": name, "acks": "all"})
    java.call("init_transactions", name=name)
    java.call("begin_transaction", name=name)
    java.send(name, stream, ["committed"])
    java.call("commit_transaction", name=name)
    java.call("begin_transaction", name=name)
    assert [s["offset"] for s in java.send(name, stream, ["open"])] == [2]  # after the commit marker at 1
    plain = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    plain.produce(stream, b"after")
    assert plain.flush(30) == 0
    assert read_to_end(cluster.bootstrap_servers, stream, "read_committed", 1) == [(0, b"committed")]
    aborted = java.tool("kafka-transactions", "--bootstrap-server", cluster.bootstrap_servers, "abort",
                        "--topic", stream, "--partition", "0", "--start-offset", "2")
    assert aborted.returncode == 0, aborted.stdout + aborted.stderr
    assert read_to_end(cluster.bootstrap_servers, stream, "read_committed", 2) == [(0, b"committed"), (3, b"after")]
    assert [v for _, v in read_to_end(cluster.bootstrap_servers, stream, "read_uncommitted", 3)] == [
        b"committed", b"open", b"after"]
    java.call("close", name=name)


def test_kafka_transactions_list_by_transactional_id_pattern(cluster: DevCluster, java: JavaClients) -> None:
    """ListTransactions v2 (KIP-1152): the ids a regular expression matches whole; one that
    does not compile is INVALID_REGULAR_EXPRESSION."""
    ids = ["pattern-orders-1", "pattern-orders-2", "pattern-payments-1"]
    for transactional_id in ids:
        java.producer(transactional_id, cluster.bootstrap_servers, **{"transactional.id": transactional_id})
        java.call("init_transactions", name=transactional_id)

    def listed(pattern: str, *more: str) -> list[str]:
        done = java.tool("kafka-transactions", "--bootstrap-server", cluster.bootstrap_servers, "list",
                         "--transactional-id-pattern", pattern, *more)
        assert done.returncode == 0, done.stdout + done.stderr
        return sorted(line.split()[0] for line in done.stdout.strip().splitlines()[1:])

    assert listed("pattern-orders-.*") == ids[:2]
    assert listed("pattern-.*-1") == [ids[0], ids[2]]
    assert listed("pattern-orders") == []  # the whole id must match
    # KIP-994's duration filter leaves out only transactions started no longer ago than it: these
    # are Empty, never started, and are listed, as Kafka lists them (they were left out).
    assert listed("pattern-orders-.*", "--duration-filter", "3600000") == ids[:2]
    assert listed("pattern-.*", "--duration-filter", "0") == sorted(ids)
    bad = java.tool("kafka-transactions", "--bootstrap-server", cluster.bootstrap_servers, "list",
                    "--transactional-id-pattern", "pattern-(")
    # The Java admin knows no ListTransactions error but the coordinators': it names the code.
    assert bad.returncode == 1 and "unexpected error INVALID_REGULAR_EXPRESSION" in bad.stderr, bad.stderr
    for transactional_id in ids:
        java.call("close", name=transactional_id)
