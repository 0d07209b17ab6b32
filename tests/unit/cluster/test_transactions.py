"""The transaction coordinator's state machine (cluster/transactions.py): InitProducerId fencing
and KIP-360 epoch bumps, transitions, timeouts, KIP-890's per-transaction bump."""

from __future__ import annotations

import dataclasses

import pytest

from vdl_broker.cluster.transactions import (
    FENCE_EPOCH,
    NO_EPOCH,
    NO_PRODUCER_ID,
    TransactionsState,
    TxnMeta,
    TxnResult,
    TxnState,
    add_offsets_command,
    add_partitions_command,
    complete_txn_command,
    end_txn_command,
    expire_txns_command,
    init_producer_command,
    needs_new_producer_id,
    timeout_txn_command,
    txn_offset_commit_command,
)
from vdl_wire.errors import ErrorCode
from vdl_wire.records.control import MARKER_EPOCHS

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


def at_epoch(state: TransactionsState, epoch: int) -> None:
    """Producer 500 of "t" at `epoch`, idle, as if it had run that many transactions."""
    init(state)
    state.txns["t"] = dataclasses.replace(meta(state), epoch=epoch, last_epoch=epoch - 1)


def test_kip_890_bumps_cross_the_exhausted_epoch_onto_a_new_producer_id() -> None:
    """transaction.version 2: every EndTxn bumps. The one ending under Short.MaxValue - 1 writes
    its markers under Short.MaxValue and moves the producer to the new id, epoch 0, which EndTxn
    answers at once (Kafka's prepareAbortOrCommit / prepareComplete with a nextProducerId)."""
    state = TransactionsState()
    at_epoch(state, 32765)
    run(state, add_partitions_command("t", 2, 500, 32765, ["s"]))
    ended = run(state, end_txn_command("t", 3, 500, 32765, True, True))
    assert (ended.meta.producer_id, ended.meta.epoch, ended.meta.producer_ids()) == (500, 32766, (500, 32766))
    run(state, complete_txn_command("t", 4, 500, 32766))
    run(state, add_partitions_command("t", 5, 500, 32766, ["s"]))
    # The coordinator takes a new id only for a bump of an exhausted epoch.
    assert not needs_new_producer_id(32765, True) and not needs_new_producer_id(32766, False)
    assert needs_new_producer_id(32766, True)
    ended = run(state, end_txn_command("t", 6, 500, 32766, True, True, new_producer_id=777))
    assert ended.error == 0
    assert (ended.meta.producer_id, ended.meta.epoch, ended.meta.last_epoch, ended.meta.next_producer_id) == \
        (500, FENCE_EPOCH, 32766, 777)
    assert ended.meta.producer_ids() == (777, 0)  # what EndTxn v5 answers
    # Retried before the markers are written: the same answer, not Short.MaxValue.
    again = run(state, end_txn_command("t", 7, 500, 32766, True, True, new_producer_id=778))
    assert (again.error, again.meta.producer_ids()) == (0, (777, 0))
    # The new id cannot start before the completion (the markers go out under the old one).
    assert run(state, add_partitions_command("t", 8, 777, 0, ["s"])).error == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    done = run(state, complete_txn_command("t", 9, 500, FENCE_EPOCH))
    assert (done.meta.state, done.meta.producer_id, done.meta.epoch, done.meta.last_epoch,
            done.meta.prev_producer_id, done.meta.next_producer_id) == \
        (TxnState.COMPLETE_COMMIT, 777, 0, 32766, 500, NO_PRODUCER_ID)
    # Retried after the completion: recognised by the previous id; the other outcome is not.
    late = run(state, end_txn_command("t", 10, 500, 32766, True, True, new_producer_id=779))
    assert (late.error, late.meta.producer_ids()) == (0, (777, 0))
    assert run(state, end_txn_command("t", 10, 500, 32766, False, True, new_producer_id=779)).error == \
        ErrorCode.INVALID_TXN_STATE
    # The old id is fenced for anything else.
    assert run(state, add_partitions_command("t", 11, 500, 32766, ["s"])).error == \
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert run(state, add_partitions_command("t", 11, 500, FENCE_EPOCH, ["s"])).error == \
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    # The producer goes on under the new id; once it has bumped it, the old id's retry is over.
    assert run(state, add_partitions_command("t", 12, 777, 0, ["s"])).meta.state is TxnState.ONGOING
    ended = run(state, end_txn_command("t", 13, 777, 0, False, True))
    assert ended.meta.producer_ids() == (777, 1)
    run(state, complete_txn_command("t", 14, 777, 1))
    assert run(state, end_txn_command("t", 15, 500, 32766, True, True, new_producer_id=780)).error == \
        ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_an_empty_abort_under_an_exhausted_epoch_moves_at_once() -> None:
    state = TransactionsState()
    at_epoch(state, 32766)
    aborted = run(state, end_txn_command("t", 2, 500, 32766, False, True, new_producer_id=777))
    assert (aborted.error, aborted.meta.state, aborted.meta.producer_id, aborted.meta.epoch,
            aborted.meta.prev_producer_id) == (0, TxnState.COMPLETE_ABORT, 777, 0, 500)
    again = run(state, end_txn_command("t", 3, 500, 32766, False, True, new_producer_id=778))
    assert (again.error, again.meta.producer_ids()) == (0, (777, 0))


def test_an_exhausted_bump_without_a_new_id_is_a_malformed_command() -> None:
    state = TransactionsState()
    at_epoch(state, 32766)
    run(state, add_partitions_command("t", 2, 500, 32766, ["s"]))
    refused = state.apply("txn_end", end_txn_command("t", 3, 500, 32766, True, True))
    assert isinstance(refused, str) and "new_producer_id" in refused
    assert meta(state).state is TxnState.ONGOING


def test_init_producer_id_bump_of_an_exhausted_epoch_moves_and_can_be_retried() -> None:
    """KIP-360: the producer's own InitProducerId naming an exhausted epoch moves it to a new id;
    the retry (the answer was lost) gets the same new id, not a fence."""
    state = TransactionsState()
    at_epoch(state, 32766)
    moved = init(state, expected=(500, 32766), new_pid=777)
    assert (moved.error, moved.meta.producer_id, moved.meta.epoch, moved.meta.last_epoch,
            moved.meta.prev_producer_id) == (0, 777, 0, 32766, 500)
    again = init(state, expected=(500, 32766), new_pid=778)
    assert (again.error, again.meta.producer_id, again.meta.epoch) == (0, 777, 0)
    assert init(state, expected=(500, 32765), new_pid=779).error == ErrorCode.PRODUCER_FENCED
    # A new instance (no expected id) fences both for good.
    fresh = init(state, new_pid=779)
    assert (fresh.meta.producer_id, fresh.meta.epoch, fresh.meta.last_epoch) == (777, 1, NO_EPOCH)
    assert init(state, expected=(500, 32766), new_pid=780).error == ErrorCode.PRODUCER_FENCED


def test_a_new_instance_aborts_an_exhausted_transaction_under_its_own_producer_id() -> None:
    """The fence's markers must carry the id the transaction's records carry: the abort bumps to
    Short.MaxValue under the old id, and the new instance moves to the new id once it completed
    (it used to move at once, so the markers went to the new id and the old transaction stayed
    open on its streams)."""
    state = TransactionsState()
    at_epoch(state, 32766)
    run(state, add_partitions_command("t", 2, 500, 32766, ["a"]))
    fenced = init(state, new_pid=777)
    assert fenced.error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert (fenced.meta.producer_id, fenced.meta.epoch, fenced.meta.state, fenced.meta.streams) == \
        (500, FENCE_EPOCH, TxnState.PREPARE_ABORT, ("a",))
    run(state, complete_txn_command("t", 3, 500, FENCE_EPOCH))
    retried = init(state, new_pid=778)
    assert (retried.error, retried.meta.producer_id, retried.meta.epoch, retried.meta.last_epoch) == \
        (0, 778, 0, NO_EPOCH)


def test_a_timeout_at_an_exhausted_epoch_fences_and_the_producer_recovers_on_a_new_id() -> None:
    state = TransactionsState()
    at_epoch(state, 32766)
    run(state, add_partitions_command("t", 1000, 500, 32766, ["a"]))
    aborted = run(state, timeout_txn_command("t", 61000, 500, 32766))
    assert (aborted.meta.epoch, aborted.meta.last_epoch) == (FENCE_EPOCH, 32766)
    assert run(state, add_partitions_command("t", 61001, 500, 32766, ["a"])).error == ErrorCode.PRODUCER_FENCED
    run(state, complete_txn_command("t", 61002, 500, FENCE_EPOCH))
    # KIP-360 recovery: never handed Short.MaxValue, a new id instead; its retry is recognised.
    recovered = init(state, expected=(500, 32766), new_pid=777)
    assert (recovered.error, recovered.meta.producer_id, recovered.meta.epoch) == (0, 777, 0)
    assert init(state, expected=(500, 32766), new_pid=778).meta.producer_id == 777


def test_a_kip_890_abort_after_an_exhausting_timeout_moves_to_a_new_id() -> None:
    state = TransactionsState()
    at_epoch(state, 32766)
    run(state, add_partitions_command("t", 1000, 500, 32766, ["a"]))
    run(state, timeout_txn_command("t", 61000, 500, 32766))
    run(state, complete_txn_command("t", 61002, 500, FENCE_EPOCH))
    # The producer's EndTxn v5 abort of the timed-out transaction: done, on a new id.
    aborted = run(state, end_txn_command("t", 61003, 500, 32766, False, True, new_producer_id=777))
    assert (aborted.error, aborted.meta.producer_ids(), aborted.meta.state) == (0, (777, 0), TxnState.COMPLETE_ABORT)


def late_requests_of_epoch(state: TransactionsState, pid: int, epoch: int) -> dict[str, int]:
    """What each request a producer may still send under `epoch` gets now (the state is kept)."""
    saved = dict(state.txns)
    answers = {}
    for name, command in {
            "EndTxn v5 commit": end_txn_command("t", 70000, pid, epoch, True, True),
            "EndTxn v5 abort": end_txn_command("t", 70000, pid, epoch, False, True, new_producer_id=900),
            "EndTxn v4 commit": end_txn_command("t", 70000, pid, epoch, True, False),
            "EndTxn v4 abort": end_txn_command("t", 70000, pid, epoch, False, False),
            "AddPartitionsToTxn": add_partitions_command("t", 70000, pid, epoch, ["b"]),
            "AddOffsetsToTxn": add_offsets_command("t", 70000, pid, epoch, "g"),
            "TxnOffsetCommit": txn_offset_commit_command("t", 70000, pid, epoch, "g", {"a": (5, 0, None)})}.items():
        answers[name] = run(state, command).error
        state.txns.clear()
        state.txns.update(saved)
    return answers


# After the coordinator aborted a transaction that outlived transaction.timeout.ms (its bump
# fences the producer), Kafka 4.4's coordinator answers the producer's late requests so
# (measured): an EndTxn v5 abort under the old epoch is the retry of an abort (KIP-890 part 2)
# and answers the bumped epoch; a v5 commit is INVALID_TXN_STATE (Kafka's trunk answers
# PRODUCER_FENCED since KAFKA-20785, after 4.4). While the abort's markers are written Kafka
# answers both EndTxn v5 CONCURRENT_TRANSACTIONS first and this once the client retries; here the
# answer comes at once. (TxnOffsetCommit's PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH on
# the wire, handlers/txn_offset_commit.py.)
KAFKA_AFTER_A_TIMEOUT = {
    "EndTxn v5 commit": ErrorCode.INVALID_TXN_STATE,
    "EndTxn v5 abort": ErrorCode.NONE,
    "EndTxn v4 commit": ErrorCode.PRODUCER_FENCED,
    "EndTxn v4 abort": ErrorCode.PRODUCER_FENCED,
    "AddPartitionsToTxn": ErrorCode.PRODUCER_FENCED,
    "AddOffsetsToTxn": ErrorCode.PRODUCER_FENCED,
    "TxnOffsetCommit": ErrorCode.PRODUCER_FENCED,
}


def test_after_a_timeout_abort_the_producers_late_requests_get_kafkas_answers() -> None:
    state = TransactionsState()
    init(state)
    run(state, add_partitions_command("t", 1000, 500, 0, ["a"]))
    run(state, add_offsets_command("t", 1001, 500, 0, "g"))
    run(state, timeout_txn_command("t", 61001, 500, 0))
    assert meta(state).state is TxnState.PREPARE_ABORT
    assert late_requests_of_epoch(state, 500, 0) == KAFKA_AFTER_A_TIMEOUT  # markers being written
    run(state, complete_txn_command("t", 61002, 500, 1))
    assert late_requests_of_epoch(state, 500, 0) == KAFKA_AFTER_A_TIMEOUT
    # The abort's answer names the epoch the timeout bumped to: the producer goes on with it.
    aborted = run(state, end_txn_command("t", 70000, 500, 0, False, True))
    assert (aborted.meta.producer_ids(), aborted.meta.state) == ((500, 1), TxnState.COMPLETE_ABORT)
    assert run(state, add_partitions_command("t", 70001, 500, 1, ["a"])).meta.state is TxnState.ONGOING


def test_an_end_txn_v5_one_epoch_behind_once_the_next_transaction_or_epoch_began_is_fenced() -> None:
    """Kafka's handleEndTransaction (transaction version 2) wants the current epoch in Ongoing and
    Empty: a delayed EndTxn v5 of the ended transaction is PRODUCER_FENCED there, whichever
    outcome it asks."""
    state = TransactionsState()
    init(state)
    run(state, add_partitions_command("t", 1, 500, 0, ["a"]))
    run(state, end_txn_command("t", 2, 500, 0, True, True))
    run(state, complete_txn_command("t", 3, 500, 1))
    run(state, add_partitions_command("t", 4, 500, 1, ["a"]))
    assert late_requests_of_epoch(state, 500, 0)["EndTxn v5 commit"] == ErrorCode.PRODUCER_FENCED
    assert late_requests_of_epoch(state, 500, 0)["EndTxn v5 abort"] == ErrorCode.PRODUCER_FENCED
    run(state, end_txn_command("t", 5, 500, 1, False, True))
    run(state, complete_txn_command("t", 6, 500, 2))
    assert init(state, expected=(500, 2)).meta.state is TxnState.EMPTY  # the producer's own bump: 3
    assert late_requests_of_epoch(state, 500, 2)["EndTxn v5 commit"] == ErrorCode.PRODUCER_FENCED
    assert late_requests_of_epoch(state, 500, 2)["EndTxn v5 abort"] == ErrorCode.PRODUCER_FENCED


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


def test_an_abort_under_an_epoch_that_never_had_a_transaction_is_done() -> None:
    """librdkafka sends EndTxn(abort) once it sent an AddPartitionsToTxn, whatever its answer: an
    add lost in a coordinator change leaves the new epoch Empty. Nothing can be committed under
    it, so the abort is done (Kafka answers INVALID_TXN_STATE, fatal to librdkafka); a commit
    still is INVALID_TXN_STATE, and so is an abort after a commit (it may be the committed one)."""
    state = TransactionsState()
    init(state)
    aborted = run(state, end_txn_command("t", 2, 500, 0, False, False))
    assert (aborted.error, aborted.meta.state, aborted.meta.epoch) == (0, TxnState.EMPTY, 0)
    assert run(state, end_txn_command("t", 3, 500, 0, True, False)).error == ErrorCode.INVALID_TXN_STATE
    assert run(state, end_txn_command("t", 4, 500, 1, False, False)).error == ErrorCode.PRODUCER_FENCED
    run(state, add_partitions_command("t", 5, 500, 0, ["s"]))
    run(state, end_txn_command("t", 6, 500, 0, True, False))
    run(state, complete_txn_command("t", 7, 500, 0))
    assert run(state, end_txn_command("t", 8, 500, 0, False, False)).error == ErrorCode.INVALID_TXN_STATE


def test_every_decision_of_a_transactional_id_is_numbered_for_its_markers() -> None:
    """Markers carry their decision's number as their coordinator epoch (a stream refuses an
    earlier one): it grows with each commit or abort -- the producer's, a timeout's, a new
    instance's fence -- and outlives new instances and producer ids."""
    state = TransactionsState(numbered=True)
    init(state)
    assert meta(state).decision == 0 and meta(state).marker_epoch == 0
    numbers = []
    for ts, commit in ((2, True), (5, False)):
        run(state, add_partitions_command("t", ts, 500, 0, ["s"]))
        decided = run(state, end_txn_command("t", ts + 1, 500, 0, commit, False)).meta
        assert run(state, end_txn_command("t", ts + 1, 500, 0, commit, False)).meta.decision == decided.decision
        run(state, complete_txn_command("t", ts + 2, 500, 0))
        numbers.append((decided.decision, meta(state).decision))
    assert numbers == [(1, 1), (2, 2)]
    run(state, add_partitions_command("t", 10, 500, 0, ["s"]))
    assert run(state, timeout_txn_command("t", 11, 500, 0)).meta.decision == 3
    run(state, complete_txn_command("t", 12, 500, 1))
    assert init(state, new_pid=600).meta.decision == 3  # a new instance: numbers go on
    run(state, add_partitions_command("t", 13, 500, 2, ["s"]))
    fenced = init(state, new_pid=600)  # the next instance fences the ongoing one: an abort
    assert (fenced.error, fenced.meta.state, fenced.meta.decision, fenced.meta.marker_epoch) == \
        (ErrorCode.CONCURRENT_TRANSACTIONS, TxnState.PREPARE_ABORT, 4, 4)
    # A state that began without the numbering (an older snapshot) never starts it: its markers
    # carry 0, which streams do not check.
    unnumbered = TransactionsState()
    init(unnumbered)
    run(unnumbered, add_partitions_command("t", 2, 500, 0, ["s"]))
    assert run(unnumbered, end_txn_command("t", 3, 500, 0, True, False)).meta.marker_epoch == 0
    assert TxnMeta("t", 1, 0, NO_EPOCH, TxnState.PREPARE_COMMIT, (), 1, 1, 1, decision=MARKER_EPOCHS + 2) \
        .marker_epoch == 2  # wraps within the int32 a marker carries, never 0


DAY_MS = 86_400_000


def test_idle_transactional_ids_expire_and_their_next_init_starts_afresh() -> None:
    """Kafka's transactional.id.expiration.ms: Empty, CompleteCommit and CompleteAbort ids
    unchanged that long go; an Ongoing or decided transaction stays (its timeout comes first)."""
    state = TransactionsState()
    ids = {name: 500 + n for n, name in enumerate(("empty", "committed", "aborted", "ongoing", "deciding", "recent"))}
    for name, pid in ids.items():
        run(state, init_producer_command(name, 1000, 60000, pid, None))
    for name in ("committed", "aborted", "ongoing", "deciding"):
        run(state, add_partitions_command(name, 1001, ids[name], 0, ["s"]))
    for name, commit in (("committed", True), ("aborted", False), ("deciding", True)):
        run(state, end_txn_command(name, 1002, ids[name], 0, commit, False))
    for name in ("committed", "aborted"):
        run(state, complete_txn_command(name, 1003, ids[name], 0))
    run(state, init_producer_command("recent", 1004, 60000, 0, None))  # its epoch 1: changed at 1004
    assert {t: m.state for t, m in state.txns.items()} == {
        "empty": TxnState.EMPTY, "committed": TxnState.COMPLETE_COMMIT, "aborted": TxnState.COMPLETE_ABORT,
        "ongoing": TxnState.ONGOING, "deciding": TxnState.PREPARE_COMMIT, "recent": TxnState.EMPTY}
    # Due when its last change is at least `expiration_ms` old, to the millisecond.
    assert state.expired(1003 + DAY_MS - 1, DAY_MS) == ["empty"]
    assert state.expired(1003 + DAY_MS, DAY_MS) == ["aborted", "committed", "empty"]
    assert run(state, expire_txns_command(1003 + DAY_MS, DAY_MS)) == TxnResult(0, None)
    assert sorted(state.txns) == ["deciding", "ongoing", "recent"]
    # Much later: still never an open or decided transaction.
    run(state, expire_txns_command(10 * DAY_MS, DAY_MS))
    assert sorted(state.txns) == ["deciding", "ongoing"]
    # The old producer's requests name an id the coordinator no longer maps (as Kafka's).
    assert run(state, add_partitions_command("committed", 20 * DAY_MS, 501, 0, ["s"])).error == \
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert run(state, end_txn_command("aborted", 20 * DAY_MS, 502, 0, False, True)).error == \
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    # A new instance starts afresh: the proposed new producer id, epoch 0, even naming the old id.
    fresh = run(state, init_producer_command("committed", 20 * DAY_MS, 30000, 777, (501, 0)))
    assert fresh == TxnResult(0, TxnMeta("committed", 777, 0, NO_EPOCH, TxnState.EMPTY, (), 30000, -1, 20 * DAY_MS))


def test_an_id_used_again_after_the_expiry_was_proposed_stays() -> None:
    """Which ids go is decided when the command applies, from its time: the proposer's view may
    be stale by then (as Kafka removes an id only if its metadata did not change meanwhile)."""
    state = TransactionsState()
    init(state)
    now = 1000 + DAY_MS
    assert state.expired(now, DAY_MS) == ["t"]  # the leader proposes ...
    run(state, init_producer_command("t", now - 1, 60000, 999, None))  # ... a new instance comes first
    run(state, expire_txns_command(now, DAY_MS))
    assert (meta(state).producer_id, meta(state).epoch) == (500, 1)


def test_malformed_expiry_commands_are_refused_alike() -> None:
    state = TransactionsState()
    init(state)
    for bad in ({"ts": "1"}, {"ts": True}, {"expiration_ms": -1}, {"expiration_ms": None}, {"expiration_ms": False}):
        command = expire_txns_command(10 * DAY_MS, DAY_MS) | bad
        assert state.apply("txn_expire", command) == \
            "txn_expire: ts must be an int and expiration_ms an int >= 0", bad
    assert state.get("t") is not None
