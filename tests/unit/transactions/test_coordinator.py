"""The coordinator answers EndTxn once the decision is committed in the metadata, and the
producer's next step on that transactional id waits for the markers and the completion, then
follows it in the metadata log (transactions/coordinator.py). A fake metadata service commits
entries only when the test says so, so every interleaving is chosen, not timed."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest

from vdl_broker.cluster.features import SUPPORTED_LEVEL, FeaturesState
from vdl_broker.cluster.metadata import ApplyResult, Outcome
from vdl_broker.cluster.transactions import (
    FENCE_EPOCH,
    MAX_EPOCH,
    TransactionsState,
    TxnMeta,
    TxnResult,
    TxnState,
)
from vdl_broker.transactions import coordinator as coordinator_module
from vdl_broker.transactions.coordinator import TransactionCoordinator, error_of
from vdl_wire.errors import ErrorCode

pytestmark = pytest.mark.unit


@dataclass
class FakeProposal:
    index: int
    command: dict[str, Any]
    committed: asyncio.Future[int]


@dataclass
class FakeState:
    transactions: TransactionsState = field(default_factory=TransactionsState)
    features: FeaturesState = field(default_factory=lambda: FeaturesState(level=SUPPORTED_LEVEL))


class FakeMetadata:
    """Proposals wait in `pending` until `commit_next()` applies the oldest one."""

    def __init__(self) -> None:
        self.state = FakeState()
        self.is_leader = True
        self.pending: list[FakeProposal] = []
        self.proposed: list[str] = []  # ops, in proposal order
        self.proposers: list[asyncio.Task[Any] | None] = []  # the task that proposed each
        self._results: dict[int, ApplyResult] = {}

    def propose_entry(self, command: dict[str, Any]) -> FakeProposal:
        proposal = FakeProposal(len(self.proposed) + 1, command, asyncio.get_running_loop().create_future())
        self.proposed.append(command["op"])
        self.proposers.append(asyncio.current_task())
        self.pending.append(proposal)
        return proposal

    async def result_of(self, proposal: FakeProposal) -> ApplyResult:
        await proposal.committed
        return self._results[proposal.index]

    def commit_next(self) -> str:
        proposal = self.pending.pop(0)
        outcome = self.state.transactions.apply(proposal.command["op"], proposal.command)
        assert isinstance(outcome, TxnResult)
        self._results[proposal.index] = ApplyResult(proposal.index, proposal.command["op"], Outcome.OK, txn=outcome)
        proposal.committed.set_result(proposal.index)
        return proposal.command["op"]


class GatedMarkers:
    """Writes a transaction's markers when the test opens the gate."""

    def __init__(self) -> None:
        self.gate: asyncio.Future[None] | None = None
        self.written: list[tuple[int, int, bool]] = []

    async def write_markers(self, meta: TxnMeta, commit: bool, streams: list[str]) -> set[str]:
        if self.gate is not None:
            await self.gate
        self.written.append((meta.producer_id, meta.epoch, commit))
        return set(streams)


async def settle(condition: Callable[[], bool]) -> None:
    """Let the loop run until `condition` holds (every step here is ready at once: no timing)."""
    for _ in range(200):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the coordinator did not get there")


async def idle() -> None:
    """Let every ready task run as far as it can (the add reaches its wait)."""
    for _ in range(50):
        await asyncio.sleep(0)


def run(body: Callable[[FakeMetadata, GatedMarkers, TransactionCoordinator], Coroutine[Any, Any, None]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A wait that ran into this would be the defect: the test fails instead of waiting it out.
    monkeypatch.setattr(coordinator_module, "SETTLE_WAIT_S", 3600.0)

    async def main() -> None:
        metadata, markers = FakeMetadata(), GatedMarkers()
        coordinator = TransactionCoordinator(metadata, lambda: 500, markers, clock_ms=lambda: 1)  # type: ignore[arg-type]
        try:
            await body(metadata, markers, coordinator)
        finally:
            coordinator.close()

    asyncio.run(main())


async def begin(metadata: FakeMetadata, coordinator: TransactionCoordinator) -> None:
    init = asyncio.ensure_future(coordinator.init_producer("t", 60_000, None))
    await settle(lambda: bool(metadata.pending))
    metadata.commit_next()
    assert (await init).error == 0  # type: ignore[union-attr]
    add = asyncio.ensure_future(coordinator.add_partitions("t", 500, 0, ["s"]))
    await settle(lambda: bool(metadata.pending))
    metadata.commit_next()
    assert (await add).error == 0  # type: ignore[union-attr]


def test_end_txn_answers_once_decided_and_the_next_add_follows_the_completion(monkeypatch: pytest.MonkeyPatch) -> None:
    async def body(metadata: FakeMetadata, markers: GatedMarkers, coordinator: TransactionCoordinator) -> None:
        await begin(metadata, coordinator)
        markers.gate = asyncio.get_running_loop().create_future()
        end = asyncio.ensure_future(coordinator.end("t", 500, 0, True, False))
        await settle(lambda: bool(metadata.pending))
        assert metadata.commit_next() == "txn_end"
        result = await end  # answered: the markers are not written yet
        assert isinstance(result, TxnResult) and result.error == 0
        assert markers.written == [] and metadata.state.transactions.get("t").state is TxnState.PREPARE_COMMIT
        # The next transaction's AddPartitionsToTxn waits for the markers instead of answering
        # CONCURRENT_TRANSACTIONS.
        add = asyncio.ensure_future(coordinator.add_partitions("t", 500, 0, ["s"]))
        await settle(lambda: len(metadata.proposed) == 3)  # init, add, end: nothing new while it waits
        assert not add.done()
        markers.gate.set_result(None)
        await settle(lambda: len(metadata.pending) == 2)
        assert metadata.proposed[-2:] == ["txn_complete", "txn_add_partitions"]
        # Proposed in one pass of the finishing task: one Raft round carries both.
        assert metadata.proposers[-1] is metadata.proposers[-2]
        assert [metadata.commit_next(), metadata.commit_next()] == ["txn_complete", "txn_add_partitions"]
        added = await add
        assert isinstance(added, TxnResult) and added.error == 0
        assert markers.written == [(500, 0, True)]
        assert metadata.state.transactions.get("t").state is TxnState.ONGOING

    run(body, monkeypatch)


def test_an_add_arriving_after_the_completion_was_proposed_goes_right_behind_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The completion is proposed (the waiters released) before the add arrives, and applies
    after: the add is proposed at once, right behind it (the log applies them in that order), so
    both take one Raft round -- it used to wait for the completion to apply, then take a round of
    its own. It must not wait for a release that came before it either."""
    async def body(metadata: FakeMetadata, markers: GatedMarkers, coordinator: TransactionCoordinator) -> None:
        await begin(metadata, coordinator)
        end = asyncio.ensure_future(coordinator.end("t", 500, 0, False, False))
        await settle(lambda: bool(metadata.pending))
        metadata.commit_next()
        assert (await end).error == 0  # type: ignore[union-attr]
        await settle(lambda: metadata.proposed[-1] == "txn_complete")
        add = asyncio.ensure_future(coordinator.add_partitions("t", 500, 0, ["s"]))
        await settle(lambda: len(metadata.pending) == 2)
        assert not add.done()
        assert [p.command["op"] for p in metadata.pending] == ["txn_complete", "txn_add_partitions"]
        assert metadata.commit_next() == "txn_complete"
        assert metadata.commit_next() == "txn_add_partitions"
        added = await add
        assert isinstance(added, TxnResult) and added.error == 0
        assert metadata.state.transactions.get("t").state is TxnState.ONGOING

    run(body, monkeypatch)


def test_an_end_txn_sent_after_a_waiting_add_follows_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """librdkafka sends the next transaction's AddPartitionsToTxn, then -- its records timed out
    while the add waited for the previous transaction's markers -- EndTxn(abort) on the same
    connection. Kafka handles them in that order; the EndTxn used to overtake the waiting add and
    meet the committed transaction: INVALID_TXN_STATE, fatal to librdkafka (the fault campaign's
    transactions of unknown outcome), and the add then opened a transaction nobody ended."""
    async def body(metadata: FakeMetadata, markers: GatedMarkers, coordinator: TransactionCoordinator) -> None:
        await begin(metadata, coordinator)
        markers.gate = asyncio.get_running_loop().create_future()
        end = asyncio.ensure_future(coordinator.end("t", 500, 0, True, False))
        await settle(lambda: bool(metadata.pending))
        metadata.commit_next()
        assert (await end).error == 0  # type: ignore[union-attr]
        add = asyncio.ensure_future(coordinator.add_partitions("t", 500, 0, ["s2"]))
        await idle()
        abort = asyncio.ensure_future(coordinator.end("t", 500, 0, False, False))
        await idle()
        assert metadata.proposed == ["txn_init_producer", "txn_add_partitions", "txn_end"]  # both wait
        assert not add.done() and not abort.done()
        markers.gate.set_result(None)
        await settle(lambda: len(metadata.pending) == 3)
        assert [p.command["op"] for p in metadata.pending] == ["txn_complete", "txn_add_partitions", "txn_end"]
        assert [metadata.commit_next() for _ in range(3)] == ["txn_complete", "txn_add_partitions", "txn_end"]
        added, aborted = await add, await abort
        assert isinstance(added, TxnResult) and added.error == 0
        assert isinstance(aborted, TxnResult) and aborted.error == 0
        after = metadata.state.transactions.get("t")
        assert (after.state, after.streams) == (TxnState.PREPARE_ABORT, ("s2",))
        # The abort is finished like any decision: its markers go to the new transaction's stream.
        await settle(lambda: markers.written[-1:] == [(500, 0, False)])

    run(body, monkeypatch)


def test_an_add_behind_a_completion_that_fails_is_refused_and_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """Proposed behind a completion that does not apply (the markers' producer epoch moved on, say),
    the add meets the decided transaction: CONCURRENT_TRANSACTIONS, which the client retries --
    never an add to a transaction whose markers are not all written."""
    async def body(metadata: FakeMetadata, markers: GatedMarkers, coordinator: TransactionCoordinator) -> None:
        await begin(metadata, coordinator)
        end = asyncio.ensure_future(coordinator.end("t", 500, 0, True, False))
        await settle(lambda: bool(metadata.pending))
        metadata.commit_next()
        assert (await end).error == 0  # type: ignore[union-attr]
        await settle(lambda: metadata.proposed[-1] == "txn_complete")
        add = asyncio.ensure_future(coordinator.add_partitions("t", 500, 0, ["s"]))
        await settle(lambda: len(metadata.pending) == 2)
        metadata.pending[0].command["epoch"] = 7  # the completion will not apply
        assert metadata.commit_next() == "txn_complete"
        assert metadata.commit_next() == "txn_add_partitions"
        added = await add
        assert isinstance(added, TxnResult) and added.error == ErrorCode.CONCURRENT_TRANSACTIONS
        assert metadata.state.transactions.get("t").state is TxnState.PREPARE_COMMIT

    run(body, monkeypatch)


def test_an_end_txn_bump_of_an_exhausted_epoch_takes_a_new_id_and_marks_under_the_old(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """KIP-890 part 2 across the epoch limit: the coordinator puts a new producer id in the
    EndTxn command only for a bump of an exhausted epoch, answers it (epoch 0) once the decision
    is committed, writes the markers under the old id and Short.MaxValue, and the producer's next
    transaction, under the new id, follows the completion."""
    monkeypatch.setattr(coordinator_module, "SETTLE_WAIT_S", 3600.0)
    ids = iter(range(900, 1000))

    async def main() -> None:
        metadata, markers = FakeMetadata(), GatedMarkers()
        coordinator = TransactionCoordinator(metadata, lambda: next(ids), markers, clock_ms=lambda: 1)  # type: ignore[arg-type]
        try:
            init = asyncio.ensure_future(coordinator.init_producer("t", 60_000, None))
            await settle(lambda: bool(metadata.pending))
            metadata.commit_next()
            pid = (await init).meta.producer_id  # type: ignore[union-attr]
            assert pid == 900
            # Near the limit through the state machine, not 32k transactions.
            meta = metadata.state.transactions.get("t")
            metadata.state.transactions.txns["t"] = dataclasses.replace(meta, epoch=MAX_EPOCH - 1)
            for epoch in (MAX_EPOCH - 1, MAX_EPOCH):
                add = asyncio.ensure_future(coordinator.add_partitions("t", pid, epoch, ["s"]))
                await settle(lambda: bool(metadata.pending))
                metadata.commit_next()
                assert (await add).error == 0  # type: ignore[union-attr]
                end = asyncio.ensure_future(coordinator.end("t", pid, epoch, True, True))
                await settle(lambda: bool(metadata.pending))
                assert ("new_producer_id" in metadata.pending[0].command) == (epoch == MAX_EPOCH)
                metadata.commit_next()
                ended = await end
                assert isinstance(ended, TxnResult) and ended.error == 0
                answered = ended.meta.producer_ids()  # type: ignore[union-attr]
                assert answered == ((pid, epoch + 1) if epoch < MAX_EPOCH else (901, 0))
                await settle(lambda: bool(metadata.pending))
                assert metadata.commit_next() == "txn_complete"
            assert markers.written == [(900, MAX_EPOCH, True), (900, FENCE_EPOCH, True)]
            after = metadata.state.transactions.get("t")
            assert (after.producer_id, after.epoch, after.prev_producer_id) == (901, 0, 900)
            add = asyncio.ensure_future(coordinator.add_partitions("t", 901, 0, ["s"]))
            await settle(lambda: bool(metadata.pending))
            metadata.commit_next()
            assert (await add).error == 0  # type: ignore[union-attr]
            assert next(ids) == 902  # one new id taken, by the exhausted bump only
        finally:
            coordinator.close()

    asyncio.run(main())


def test_the_leader_aborts_a_timed_out_transaction_and_the_producers_end_txn_v5_gets_kafkas_answer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A transaction older than its timeout is aborted with an epoch bump and its markers written.
    The producer's EndTxn v5 under the old epoch then gets what Kafka 4.4 answers (measured): a
    commit INVALID_TXN_STATE, while the markers are written and after; an abort is the abort
    already made, answered with the bumped epoch, and proposes nothing."""
    monkeypatch.setattr(coordinator_module, "SETTLE_WAIT_S", 3600.0)
    now = [1]

    async def main() -> None:
        metadata, markers = FakeMetadata(), GatedMarkers()
        coordinator = TransactionCoordinator(metadata, lambda: 500, markers, clock_ms=lambda: now[0])  # type: ignore[arg-type]
        try:
            await begin(metadata, coordinator)
            markers.gate = asyncio.get_running_loop().create_future()
            now[0] = 60_000  # not yet: the transaction began at 1 with a 60 s timeout
            assert await coordinator.abort_timed_out() == [] and metadata.pending == []
            now[0] = 60_001
            timeout = asyncio.ensure_future(coordinator.abort_timed_out())
            await settle(lambda: bool(metadata.pending))
            assert metadata.commit_next() == "txn_timeout"
            assert await timeout == ["t"]

            async def end(commit: bool) -> TxnResult | ErrorCode:
                ended = asyncio.ensure_future(coordinator.end("t", 500, 0, commit, True))
                await settle(lambda: bool(metadata.pending))
                assert metadata.commit_next() == "txn_end"
                return await ended

            assert error_of(await end(True)) is ErrorCode.INVALID_TXN_STATE  # markers not written yet
            markers.gate.set_result(None)
            await settle(lambda: bool(metadata.pending))
            assert metadata.commit_next() == "txn_complete"
            assert markers.written == [(500, 1, False)]
            assert error_of(await end(True)) is ErrorCode.INVALID_TXN_STATE
            aborted = await end(False)
            assert isinstance(aborted, TxnResult) and aborted.error == 0
            assert aborted.meta.producer_ids() == (500, 1)  # type: ignore[union-attr]
            await idle()
            assert metadata.pending == [] and markers.written == [(500, 1, False)]
        finally:
            coordinator.close()

    asyncio.run(main())


def test_the_leader_expires_idle_transactional_ids_once_the_level_allows_it() -> None:
    """At level 2 (a cluster formed by the previous release, not yet upgraded) the coordinator
    proposes no expiry, however long an id was idle; from level 3 it does, and the id goes."""
    from vdl_broker.cluster.transactions import init_producer_command

    async def main() -> None:
        metadata = FakeMetadata()
        metadata.state.features = FeaturesState(level=2)
        now = [0]
        coordinator = TransactionCoordinator(metadata, lambda: 500, None, clock_ms=lambda: now[0],  # type: ignore[arg-type]
                                             expiration_ms=5_000)
        try:
            for name, ts in (("old", 1_000), ("young", 4_000)):
                metadata.state.transactions.apply("txn_init_producer",
                                                  init_producer_command(name, ts, 60_000, 500, None))
            now[0] = 6_000
            assert await coordinator.expire_transactional_ids() == []
            assert metadata.proposed == []
            metadata.state.features = FeaturesState(level=3)
            metadata.is_leader = False
            assert await coordinator.expire_transactional_ids() == []
            metadata.is_leader = True
            expiry = asyncio.ensure_future(coordinator.expire_transactional_ids())
            await settle(lambda: bool(metadata.pending))
            assert metadata.pending[0].command == {"op": "txn_expire", "ts": 6_000, "expiration_ms": 5_000}
            metadata.commit_next()
            assert await expiry == ["old"]
            assert sorted(metadata.state.transactions.txns) == ["young"]
            # Nothing due: nothing proposed.
            assert await coordinator.expire_transactional_ids() == []
            assert metadata.proposed == ["txn_expire"]
        finally:
            coordinator.close()

    asyncio.run(main())
