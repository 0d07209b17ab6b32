"""The transaction coordinator's state machine (cluster/transactions.py): InitProducerId fencing
and KIP-360 epoch bumps, transitions, timeouts, KIP-890's per-transaction bump."""

from __future__ import annotations

import pytest

from vdl_broker.cluster.transactions import (
    NO_EPOCH,
    TransactionsState,
    TxnMeta,
    TxnResult,
    TxnState,
    add_partitions_command,
    complete_txn_command,
    end_txn_command,
    init_producer_command,
    timeout_txn_command,
)
from vdl_wire.errors import ErrorCode

pytestmark = pytest.mark.unit


def run(state: TransactionsState, command: dict) -> TxnResult:
    result = state.apply(command["op"], command)
    assert isinstance(result, TxnResult), result
    return result


def init(state: TransactionsState, expected: tuple[int, int] | None = None, new_pid: int = 500) -> TxnResult:
    return run(state, init_producer_command("t", 1000, 60000, new_pid, expected))


def meta(state: TransactionsState) -> TxnMeta:
    found = state.get("t")
    assert found is not None
    return found


def test_first_init_takes_the_proposed_id_and_epoch_0() -> None:
    state = TransactionsState()
    result = init(state)
    assert result.error == 0
    assert result.meta == TxnMeta("t", 500, 0, NO_EPOCH, TxnState.EMPTY, (), 60000, -1, 1000)


def test_a_new_instance_bumps_the_epoch_and_fences_the_old_one_for_good() -> None:
    state = TransactionsState()
    init(state)
    second = init(state, new_pid=999)
    assert (second.error, second.meta.producer_id, second.meta.epoch, second.meta.last_epoch) == (0, 500, 1, NO_EPOCH)
    # The zombie (epoch 0) retries its own bump naming its id and epoch: fenced, not given epoch 1.
    zombie = init(state, expected=(500, 0))
    assert zombie.error == ErrorCode.PRODUCER_FENCED
    assert (meta(state).epoch, meta(state).last_epoch) == (1, NO_EPOCH)
    # Its transactional writes are fenced too.
    assert run(state, add_partitions_command("t", 1001, 500, 0, ["s"])).error == ErrorCode.PRODUCER_FENCED
    assert run(state, end_txn_command("t", 1001, 500, 0, True, False)).error == ErrorCode.PRODUCER_FENCED


def test_a_new_instance_aborts_the_old_ones_ongoing_transaction_and_fences_it() -> None:
    state = TransactionsState()
    init(state)
    run(state, add_partitions_command("t", 1100, 500, 0, ["a", "b"]))
    fenced = init(state, new_pid=999)
    assert fenced.error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert meta(state) == TxnMeta("t", 500, 1, NO_EPOCH, TxnState.PREPARE_ABORT, ("a", "b"), 60000, 1100, 1000)
    # The old instance cannot commit it, nor reclaim the epoch once the abort is done.
    assert run(state, end_txn_command("t", 1200, 500, 0, True, False)).error == ErrorCode.PRODUCER_FENCED
    assert init(state, expected=(500, 0)).error == ErrorCode.PRODUCER_FENCED
    assert run(state, complete_txn_command("t", 1300, 500, 1)).meta.state is TxnState.COMPLETE_ABORT
    assert init(state, expected=(500, 0)).error == ErrorCode.PRODUCER_FENCED
    retried = init(state)  # the new instance, once the abort completed
    assert (retried.error, retried.meta.epoch, retried.meta.last_epoch) == (0, 2, NO_EPOCH)


def test_the_producers_own_bump_can_be_retried() -> None:
    state = TransactionsState()
    init(state)
    bumped = init(state, expected=(500, 0))
    assert (bumped.error, bumped.meta.epoch, bumped.meta.last_epoch) == (0, 1, 0)
    again = init(state, expected=(500, 0))  # the answer was lost: the same epoch comes back
    assert (again.error, again.meta.epoch) == (0, 1)
    assert init(state, expected=(500, 7)).error == ErrorCode.PRODUCER_FENCED


def test_commit_with_kip_890_bump_and_its_retry() -> None:
    state = TransactionsState()
    init(state)
    added = run(state, add_partitions_command("t", 2000, 500, 0, ["b", "a"]))
    assert (added.meta.state, added.meta.streams, added.meta.start_ms) == (TxnState.ONGOING, ("a", "b"), 2000)
    ended = run(state, end_txn_command("t", 2100, 500, 0, True, True))
    assert (ended.error, ended.meta.state, ended.meta.epoch, ended.meta.last_epoch) == \
        (0, TxnState.PREPARE_COMMIT, 1, 0)
    assert run(state, end_txn_command("t", 2101, 500, 0, True, True)).error == 0  # retried
    assert run(state, end_txn_command("t", 2101, 500, 0, False, True)).error == ErrorCode.INVALID_TXN_STATE
    assert run(state, add_partitions_command("t", 2102, 500, 1, ["c"])).error == ErrorCode.CONCURRENT_TRANSACTIONS
    done = run(state, complete_txn_command("t", 2200, 500, 1))
    assert (done.meta.state, done.meta.streams, done.meta.start_ms) == (TxnState.COMPLETE_COMMIT, (), -1)
    assert run(state, add_partitions_command("t", 2300, 500, 1, ["c"])).meta.state is TxnState.ONGOING


def test_end_without_bump_and_wrong_ids() -> None:
    state = TransactionsState()
    init(state)
    assert run(state, end_txn_command("t", 1, 500, 0, True, False)).error == ErrorCode.INVALID_TXN_STATE
    run(state, add_partitions_command("t", 2, 500, 0, ["a"]))
    assert run(state, end_txn_command("t", 3, 501, 0, True, False)).error == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    ended = run(state, end_txn_command("t", 3, 500, 0, False, False))
    assert (ended.error, ended.meta.state, ended.meta.epoch) == (0, TxnState.PREPARE_ABORT, 0)
    assert run(state, end_txn_command("t", 4, 500, 0, False, False)).error == 0  # retried


def test_timeout_aborts_with_a_bump_the_producer_may_recover_from() -> None:
    state = TransactionsState()
    init(state)
    run(state, add_partitions_command("t", 1000, 500, 0, ["a"]))
    assert state.timed_out(60999) == []
    assert [t.transactional_id for t in state.timed_out(61000)] == ["t"]
    aborted = run(state, timeout_txn_command("t", 61000, 500, 0))
    assert (aborted.meta.state, aborted.meta.epoch, aborted.meta.last_epoch) == (TxnState.PREPARE_ABORT, 1, 0)
    assert [t.transactional_id for t in state.decided()] == ["t"]
    assert run(state, end_txn_command("t", 61001, 500, 0, True, False)).error == ErrorCode.PRODUCER_FENCED
    run(state, complete_txn_command("t", 61002, 500, 1))
    recovered = init(state, expected=(500, 0))  # KIP-360: the producer names its old epoch
    assert (recovered.error, recovered.meta.epoch) == (0, 1)


def test_exhausted_epoch_moves_to_the_new_producer_id() -> None:
    state = TransactionsState()
    state.txns["t"] = TxnMeta("t", 500, 32766, NO_EPOCH, TxnState.EMPTY, (), 60000, -1, 0)
    bumped = init(state, new_pid=777)
    assert (bumped.meta.producer_id, bumped.meta.epoch) == (777, 0)


def test_bad_timeout_and_malformed_commands() -> None:
    state = TransactionsState()
    assert run(state, init_producer_command("t", 1, 0, 5, None)).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert state.apply("txn_end", {"op": "txn_end", "txn": "t", "ts": 1}) == "txn_end: KeyError('producer_id')"
    assert isinstance(state.apply("txn_init_producer", {"txn": "", "ts": 1}), str)


def test_a_deleted_stream_leaves_its_transactions() -> None:
    state = TransactionsState()
    init(state)
    run(state, add_partitions_command("t", 2, 500, 0, ["a", "b"]))
    state.drop_stream("a")
    assert meta(state).streams == ("b",)


def test_offsets_committed_in_a_transaction_reach_the_group_only_on_commit() -> None:
    from vdl_broker.cluster.metadata import (
        ClusterState,
        create_stream_command,
        init_cluster_command,
        register_node_command,
    )
    from vdl_broker.cluster.transactions import add_offsets_command, txn_offset_commit_command

    state = ClusterState()
    commands = [register_node_command(1, "h:1", "h:2"), init_cluster_command("c"), create_stream_command("in", 1),
                init_producer_command("t", 1, 60000, 500, None),
                add_offsets_command("t", 2, 500, 0, "g"),
                txn_offset_commit_command("t", 3, 500, 0, "g", {"in": (7, 0, None)})]
    for index, command in enumerate(commands, start=1):
        assert state.apply_entry(index, [command])[0].ok
    refused = state.apply_entry(10, [txn_offset_commit_command("t", 4, 500, 0, "other", {"in": (9, 0, None)})])
    assert refused[0].txn.error == ErrorCode.INVALID_TXN_STATE
    assert state.groups.committed("g") == {}
    # With the commit decision (EndTxn answers then, before the markers): final from then on.
    state.apply_entry(11, [end_txn_command("t", 5, 500, 0, True, False)])
    assert state.groups.committed("g")["in"].offset == 7
    assert meta_of(state.transactions).offsets == ()
    state.apply_entry(12, [complete_txn_command("t", 6, 500, 0)])
    assert state.groups.committed("g")["in"].offset == 7
    assert meta_of(state.transactions).offsets == ()


def test_aborted_offsets_are_dropped() -> None:
    from vdl_broker.cluster.transactions import add_offsets_command, txn_offset_commit_command

    state = TransactionsState()
    init(state)
    run(state, add_offsets_command("t", 2, 500, 0, "g"))
    run(state, txn_offset_commit_command("t", 3, 500, 0, "g", {"in": (7, 0, None)}))
    run(state, end_txn_command("t", 4, 500, 0, False, False))
    assert run(state, complete_txn_command("t", 5, 500, 0)).commit_offsets == ()


def meta_of(state: TransactionsState) -> TxnMeta:
    return meta(state)


def test_the_producers_own_bump_during_its_transaction_aborts_it_and_can_be_retried() -> None:
    state = TransactionsState()
    init(state)
    run(state, add_partitions_command("t", 2, 500, 0, ["a"]))
    first = init(state, expected=(500, 0))
    assert (first.error, first.meta.state, first.meta.epoch, first.meta.last_epoch) == \
        (ErrorCode.CONCURRENT_TRANSACTIONS, TxnState.PREPARE_ABORT, 1, 0)
    assert init(state, expected=(500, 0)).error == ErrorCode.CONCURRENT_TRANSACTIONS  # still aborting
    run(state, complete_txn_command("t", 3, 500, 1))
    retried = init(state, expected=(500, 0))
    assert (retried.error, retried.meta.epoch, retried.meta.state) == (0, 1, TxnState.COMPLETE_ABORT)


def test_the_other_outcome_of_a_decided_transaction_is_an_invalid_state() -> None:
    """EndTxn answers once the decision is committed: the producer may ask again before the
    markers are written. The same outcome is a retry (done); the other one is INVALID_TXN_STATE,
    as Kafka's handleEndTransaction answers, not CONCURRENT_TRANSACTIONS (retried forever)."""
    state = TransactionsState()
    init(state)
    run(state, add_partitions_command("t", 2, 500, 0, ["s"]))
    assert run(state, end_txn_command("t", 3, 500, 0, True, False)).error == 0
    assert meta(state).state is TxnState.PREPARE_COMMIT
    assert run(state, end_txn_command("t", 4, 500, 0, True, False)).error == 0
    assert run(state, end_txn_command("t", 5, 500, 0, False, False)).error == ErrorCode.INVALID_TXN_STATE
    assert meta(state).state is TxnState.PREPARE_COMMIT
