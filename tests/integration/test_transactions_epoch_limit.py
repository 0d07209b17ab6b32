"""Apache Kafka's Java producer (transaction.version 2: EndTxn v5 bumps the epoch at every
transaction) across the producer epoch's limit on 3 nodes: the transaction that ends under epoch
Short.MaxValue - 1 moves the producer to a new producer id, epoch 0 (KIP-890 part 2), and a
read_committed reader sees exactly the committed records, before and after the move. A new
instance's InitProducerId on an exhausted epoch fences the old instance's open transaction
(aborted under its own producer id) and moves to a new id.

The epoch starts near the limit by a test-only path (tests/support/epoch_limit/sitecustomize.py
on the brokers' PYTHONPATH: a new transactional id named `epoch-limit-<E>-...` starts at epoch E),
not by 32,766 real transactions; everything after InitProducerId is the product's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_transactions_clients import admin, coordinator, read_all
from tests.support.cluster import DevCluster, node_address, start_cluster
from tests.support.java_client import JavaClients, JavaError
from tests.support.kafka import raw_request
from tests.support.waiting import wait_until
from vdl_wire import messages as m

PATCH_DIR = Path(__file__).resolve().parents[1] / "support" / "epoch_limit"
LIMIT = 2**15 - 2  # Short.MaxValue - 1: exhausted


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    yield start_cluster(tmp_path_factory.mktemp("epoch-limit"), nodes=3, env={"PYTHONPATH": str(PATCH_DIR)},
                        register=lambda c: request.addfinalizer(c.kill_all))


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaClients]:
    with JavaClients(tmp_path_factory.mktemp("java")) as clients:
        yield clients


def described(cluster: DevCluster, txn: str) -> tuple[int, int, str]:
    """The coordinator's producer id, epoch and state of `txn` (DescribeTransactions)."""
    answer = raw_request(node_address(cluster, coordinator(cluster)),
                         m.DescribeTransactionsRequest(transactional_ids=[txn]), 0)
    state = answer.transaction_states[0]
    assert state.error_code == 0, state
    return state.producer_id, state.producer_epoch, state.transaction_state


def settled(cluster: DevCluster, txn: str) -> tuple[int, int, str]:
    """`described` once the last transaction's markers are written (EndTxn answers before them)."""
    return wait_until(lambda: (lambda d: d if not d[2].startswith("Prepare") else None)(described(cluster, txn)),
                      30, f"{txn}'s transaction completed")


def producer(java: JavaClients, cluster: DevCluster, name: str, txn: str) -> None:
    java.producer(name, cluster.bootstrap_servers, **{"transactional.id": txn, "acks": "all",
                                                       "enable.idempotence": "true"})
    java.call("init_transactions", name=name)


def transaction(java: JavaClients, name: str, stream: str, values: list[str], commit: bool) -> None:
    java.call("begin_transaction", name=name)
    sent = java.call("send", name=name, topic=stream, records=[{"value": v} for v in values])
    assert all("error" not in s for s in sent), sent
    java.call("commit_transaction" if commit else "abort_transaction", name=name)


def test_end_txn_v5_crosses_the_epoch_limit_onto_a_new_producer_id(cluster: DevCluster, java: JavaClients) -> None:
    stream = "epoch-limit-crossing"
    txn = f"epoch-limit-{LIMIT - 3}-crossing"
    with admin(cluster) as c:
        c.create_stream(stream)
    producer(java, cluster, "p", txn)
    first_id, epoch, _ = described(cluster, txn)
    assert epoch == LIMIT - 3
    # Epochs LIMIT-3, -2, -1, LIMIT (exhausted: the move), then 0 and 1 under the new id.
    plan = [(["t1-a", "t1-b"], True), (["t2-a"], False), (["t3-a", "t3-b"], True), (["t4-a"], True),
            (["t5-a"], False), (["t6-a", "t6-b"], True)]
    seen = []
    for values, commit in plan:
        transaction(java, "p", stream, values, commit)
        seen.append(settled(cluster, txn))
    moved_id = seen[3][0]
    assert moved_id != first_id, seen
    assert [(pid == moved_id, e) for pid, e, _ in seen] == \
        [(False, LIMIT - 2), (False, LIMIT - 1), (False, LIMIT), (True, 0), (True, 1), (True, 2)], seen
    committed = [v.encode() for values, commit in plan if commit for v in values]
    assert read_all(cluster.bootstrap_servers, stream, "read_committed", len(committed)) == committed
    every = [v.encode() for values, _ in plan for v in values]
    assert read_all(cluster.bootstrap_servers, stream, "read_uncommitted", len(every)) == every
    java.call("close", name="p")


def test_a_new_instance_on_an_exhausted_epoch_fences_the_open_transaction_and_moves(
        cluster: DevCluster, java: JavaClients) -> None:
    stream = "epoch-limit-fence"
    txn = f"epoch-limit-{LIMIT}-fence"
    with admin(cluster) as c:
        c.create_stream(stream)
    producer(java, cluster, "old", txn)
    old_id, epoch, _ = described(cluster, txn)
    assert epoch == LIMIT
    java.call("begin_transaction", name="old")
    assert all("error" not in s for s in java.call("send", name="old", topic=stream,
                                                     records=[{"value": "zombie-1"}, {"value": "zombie-2"}]))
    # The new instance fences the open transaction (aborted under the old id's Short.MaxValue, the
    # id its records carry) and moves to a new id once the abort completed.
    producer(java, cluster, "new", txn)
    new_id, new_epoch, state = settled(cluster, txn)
    assert new_id != old_id and new_epoch == 0, (new_id, new_epoch, state)
    with pytest.raises(JavaError) as fenced:
        java.call("commit_transaction", name="old")
    # Its id is no longer the transactional id's: INVALID_PRODUCER_ID_MAPPING, as Kafka answers.
    assert fenced.value.error == "InvalidPidMappingException", fenced.value
    java.call("close", name="old")
    transaction(java, "new", stream, ["after-1", "after-2"], True)
    # The zombie's records were aborted: read_committed reaches the end (the last stable offset
    # is not held back by them) and holds exactly the new instance's.
    assert read_all(cluster.bootstrap_servers, stream, "read_committed", 2) == [b"after-1", b"after-2"]
    java.call("close", name="new")
