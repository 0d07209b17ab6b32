"""The marker writer (transactions/markers.py) sends a stream leader one WriteTxnMarkers with every
marker asked of it meanwhile, tells each transaction which of its streams hold their marker, and
routes a marker again -- at once -- when its stream's leader moves, when the leader's node goes down
or when that node answers NOT_LEADER_OR_FOLLOWER, instead of waiting out a call that hangs.

The fakes stand for the broker: its leader views (`leaders`), node liveness (`down`) and the
node-to-node call (`internal.call`, whose answer each test gives when it wants). A liveness tick of
the host is `tick()`, which calls the host's liveness listeners."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support.waiting import within
from vdl_broker.cluster.transactions import NO_EPOCH, TxnMeta, TxnState
from vdl_broker.transactions import markers
from vdl_wire.messages import WriteTxnMarkersResponse as R

pytestmark = pytest.mark.unit

WAIT_S = 0.3  # a bound on a wait the fix makes immediate (the old writer waited CALL_TIMEOUT_S)


def meta(txn: str, pid: int, streams: tuple[str, ...], decision: int = 0) -> TxnMeta:
    return TxnMeta(txn, pid, 0, NO_EPOCH, TxnState.PREPARE_COMMIT, streams, 60000, 1, 1, decision=decision)


def answer(request: Any, refused: tuple[str, ...] = (), code: int = 6) -> Any:
    """The leader's answer: every marker written but those of `refused` (with `code`)."""
    return R(markers=[R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
        R.WritableTxnMarkerTopicResult(name=t.name, partitions=[R.WritableTxnMarkerPartitionResult(
            partition_index=0, error_code=code if t.name in refused else 0)]) for t in m.topics])
        for m in request.markers])


def content(request: Any) -> list[tuple[int, bool, int, list[str]]]:
    return [(m.producer_id, m.transaction_result, m.coordinator_epoch, [t.name for t in m.topics])
            for m in request.markers]


@dataclass
class Cluster:
    leaders: dict[str, int]
    down: set[int] = field(default_factory=set)
    calls: asyncio.Queue[tuple[int, Any, asyncio.Future[Any]]] = field(default_factory=asyncio.Queue)
    broker: Any = None

    def __post_init__(self) -> None:
        self.broker = SimpleNamespace(
            node_id=1, metadata=SimpleNamespace(state=SimpleNamespace(streams=dict.fromkeys(self.leaders, 0))),
            replicas=SimpleNamespace(get=lambda name: SimpleNamespace(leader_id=self.leaders[name])
                                     if name in self.leaders else None),
            host=SimpleNamespace(liveness=SimpleNamespace(is_down=lambda node: node in self.down),
                                 liveness_listeners=[]))

    async def call(self, broker: Any, node: int, request: Any, version: int, timeout_s: float) -> Any:
        reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.calls.put_nowait((node, request, reply))
        return await reply  # hangs until the test answers

    async def next_call(self) -> tuple[int, Any, asyncio.Future[Any]]:
        return await within(self.calls.get(), WAIT_S)

    def tick(self) -> None:
        for listener in self.broker.host.liveness_listeners:
            listener()


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Cluster:
    c = Cluster({"a": 2, "b": 2, "s": 2, "t": 3, "u": 2, "down": 2})
    monkeypatch.setattr(markers.internal, "call", c.call)
    return c


def writer_of(cluster: Cluster) -> markers.BrokerMarkerWriter:
    writer = markers.BrokerMarkerWriter(cluster.broker)
    writer.recheck_s = None  # no timer of its own: the test's ticks drive it
    return writer


def test_markers_for_one_leader_travel_together(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[Any] = []

    async def write(broker: Any, request: Any) -> Any:
        sent.append(request)
        return answer(request, refused=("refusing",), code=47)  # an error that is no leader move

    monkeypatch.setattr(markers, "write_markers", write)
    cluster = Cluster({"a": 1, "b": 1, "refusing": 1})
    writer = writer_of(cluster)

    async def run() -> list[set[str]]:
        return list(await asyncio.gather(writer.write_markers(meta("t1", 10, ("a", "b"), 4), True, ["a", "b"]),
                                         writer.write_markers(meta("t2", 20, ("b", "refusing")), False,
                                                              ["b", "refusing"]),
                                         writer.write_markers(meta("t3", 30, ("gone",)), True, ["gone"])))

    assert asyncio.run(run()) == [{"a", "b"}, {"b"}, {"gone"}]
    assert len(sent) == 1
    # Each carries its decision's number as its coordinator epoch (0: an unnumbered decision).
    assert content(sent[0]) == [(10, True, 4, ["a", "b"]), (20, False, 0, ["b", "refusing"])]


def test_a_marker_whose_leader_moves_while_the_call_hangs_goes_to_the_new_leader(cluster: Cluster) -> None:
    writer = writer_of(cluster)

    async def run() -> None:
        first = asyncio.create_task(writer.write_markers(meta("t1", 10, ("s",)), True, ["s"]))
        node, request, hanging = await cluster.next_call()
        assert (node, content(request)) == (2, [(10, True, 0, ["s"])])
        # Another transaction's stream on a reachable leader is not held by that call.
        other = asyncio.create_task(writer.write_markers(meta("t2", 20, ("t",)), True, ["t"]))
        node, request, reply = await cluster.next_call()
        assert (node, content(request)) == (3, [(20, True, 0, ["t"])])
        reply.set_result(answer(request))
        assert await other == {"t"}
        cluster.leaders["s"] = 3  # elected elsewhere; node 2's call still pending
        cluster.tick()
        node, request, reply = await cluster.next_call()
        assert (node, content(request)) == (3, [(10, True, 0, ["s"])])
        reply.set_result(answer(request))
        assert await first == {"s"}
        # The old leader's late answer counts for nothing (the marker was answered elsewhere).
        hanging.set_result(answer(request, refused=("s",)))
        assert cluster.calls.empty()

    asyncio.run(run())


def test_markers_queued_for_a_node_known_down_wait_for_the_new_leader_and_go_there_together(
        cluster: Cluster) -> None:
    writer = writer_of(cluster)

    async def run() -> None:
        first = asyncio.create_task(writer.write_markers(meta("t1", 10, ("s",)), True, ["s"]))
        node, _, _ = await cluster.next_call()
        assert node == 2
        # Queued behind the pending call to node 2.
        second = asyncio.create_task(writer.write_markers(meta("t2", 20, ("u",)), False, ["u"]))
        await asyncio.sleep(0)  # one loop step (no wall time): the task starts and queues its marker
        assert cluster.calls.empty()
        cluster.down.add(2)  # SIGSTOP / kill -9: the liveness tick finds it silent
        cluster.tick()
        assert cluster.calls.empty()  # nothing to a node known down, no leader elected yet
        assert not first.done() and not second.done()
        cluster.leaders.update(s=3, u=3)
        cluster.tick()
        node, request, reply = await cluster.next_call()
        # Both markers in one call to the new leader.
        assert (node, sorted(content(request))) == (3, [(10, True, 0, ["s"]), (20, False, 0, ["u"])])
        reply.set_result(answer(request))
        assert (await first, await second) == ({"s"}, {"u"})

    asyncio.run(run())


def test_a_not_leader_answer_sends_the_marker_to_the_stream_s_current_leader(cluster: Cluster) -> None:
    writer = writer_of(cluster)

    async def run() -> None:
        done = asyncio.create_task(writer.write_markers(meta("t1", 10, ("a", "s")), True, ["a", "s"]))
        node, request, reply = await cluster.next_call()
        assert (node, content(request)) == (2, [(10, True, 0, ["a", "s"])])
        cluster.leaders["s"] = 3  # moved while the call ran: node 2 refuses it
        reply.set_result(answer(request, refused=("s",)))
        node, request, reply = await cluster.next_call()
        assert (node, content(request)) == (3, [(10, True, 0, ["s"])])
        reply.set_result(answer(request))
        assert await done == {"a", "s"}

    asyncio.run(run())


def test_a_refusing_leader_is_not_asked_again_at_once(cluster: Cluster) -> None:
    """The view still names node 2 after it refused (its view is fresher than ours): the marker
    waits for a view naming another leader, and goes there, rather than asking node 2 in a loop."""
    writer = writer_of(cluster)

    async def run() -> None:
        done = asyncio.create_task(writer.write_markers(meta("t1", 10, ("s",)), True, ["s"]))
        node, request, reply = await cluster.next_call()
        reply.set_result(answer(request, refused=("s",)))
        channel = writer._channels[2]
        assert channel.call is not None
        await channel.call  # the answer is handled
        cluster.tick()
        assert cluster.calls.empty()
        cluster.leaders["s"] = 3
        cluster.tick()
        node, request, reply = await cluster.next_call()
        assert node == 3
        reply.set_result(answer(request))
        assert await done == {"s"}

    asyncio.run(run())


def test_a_marker_with_no_reachable_leader_counts_as_not_written_after_the_park_limit(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(markers, "PARK_LIMIT_S", 0.0)
    cluster.leaders["s"] = 0  # no leader known
    writer = writer_of(cluster)

    async def run() -> set[str]:
        done = asyncio.create_task(writer.write_markers(meta("t1", 10, ("s",)), True, ["s"]))
        await asyncio.sleep(0)  # one loop step (no wall time): the task starts and parks its marker
        cluster.tick()
        return await within(done, WAIT_S)

    assert asyncio.run(run()) == set()
    assert cluster.calls.empty()
