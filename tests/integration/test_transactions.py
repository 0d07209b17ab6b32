"""Transactions (KIP-98, KIP-890's rules) against a real broker: the coordinator's APIs over the
wire. (Markers and read_committed come with the stream side.)"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.support.cluster import BrokerProcess
from tests.support.kafka import BrokerClient, client, encode, make_batch, raw_socket, read_frame, read_to_end
from tests.support.waiting import wait_until
from vdl_wire import api
from vdl_wire import messages as m
from vdl_wire.errors import ErrorCode
from vdl_wire.records.record_batch import RecordBatchBuilder, iter_batches, read_records

TIMEOUT_MS = 60_000


def init(c: BrokerClient, txn: str, expected: tuple[int, int] = (-1, -1), version: int = 4) -> Any:
    return c.request(m.InitProducerIdRequest(transactional_id=txn, transaction_timeout_ms=TIMEOUT_MS,
                                             producer_id=expected[0], producer_epoch=expected[1]), version)


def add(c: BrokerClient, txn: str, pid: int, epoch: int, streams: list[str], version: int = 3) -> list[int]:
    topics = [m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=s, partitions=[0]) for s in streams]
    response = c.request(m.AddPartitionsToTxnRequest(v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
                                                     v3_and_below_producer_epoch=epoch, v3_and_below_topics=topics),
                         version)
    return [p.partition_error_code for t in response.results_by_topic_v3_and_below for p in t.results_by_partition]


def end(c: BrokerClient, txn: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    return c.request(m.EndTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=commit),
                     version).error_code


def test_a_new_instance_fences_the_zombie_for_good(module_broker: BrokerProcess) -> None:
    with client(module_broker.bootstrap) as c:
        c.create_stream("tx-zombie")
        old = init(c, "zombie")
        assert (old.error_code, old.producer_epoch) == (0, 0)
        new = init(c, "zombie")
        assert (new.error_code, new.producer_id, new.producer_epoch) == (0, old.producer_id, 1)
        # The old instance retrying its own bump (KIP-360) cannot take the epoch back.
        retried = init(c, "zombie", (old.producer_id, 0))
        assert retried.error_code == ErrorCode.PRODUCER_FENCED
        assert init(c, "zombie", (old.producer_id, 0), version=3).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        assert add(c, "zombie", old.producer_id, 0, ["tx-zombie"]) == [ErrorCode.PRODUCER_FENCED]
        assert add(c, "zombie", old.producer_id, 0, ["tx-zombie"], version=1) == [ErrorCode.INVALID_PRODUCER_EPOCH]
        # The new instance's own bump is retriable.
        bumped = init(c, "zombie", (new.producer_id, 1))
        assert (bumped.error_code, bumped.producer_epoch) == (0, 2)
        assert init(c, "zombie", (new.producer_id, 1)).producer_epoch == 2


def test_commit_abort_and_an_ongoing_transaction_fenced(module_broker: BrokerProcess) -> None:
    with client(module_broker.bootstrap) as c:
        c.create_stream("tx-a")
        first = init(c, "ctp")
        pid = first.producer_id
        assert end(c, "ctp", pid, 0, True) == ErrorCode.INVALID_TXN_STATE  # nothing to commit
        assert add(c, "ctp", pid, 0, ["tx-a", "tx-missing"]) == [ErrorCode.OPERATION_NOT_ATTEMPTED,
                                                                  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        assert add(c, "ctp", pid, 0, ["tx-a"]) == [0]
        assert end(c, "ctp", pid, 0, True) == 0
        assert end(c, "ctp", pid, 0, True) == 0  # a retry of a commit done
        assert end(c, "ctp", pid, 0, False) == ErrorCode.INVALID_TXN_STATE
        assert add(c, "ctp", pid, 0, ["tx-a"]) == [0]
        assert end(c, "ctp", pid, 0, False) == 0
        # An ongoing transaction of the old instance is aborted when a new one starts.
        assert add(c, "ctp", pid, 0, ["tx-a"]) == [0]
        assert init(c, "ctp").error_code == ErrorCode.CONCURRENT_TRANSACTIONS
        assert end(c, "ctp", pid, 0, True) == ErrorCode.PRODUCER_FENCED
        # The coordinator completes the abort by itself; then the new instance gets its epoch.
        new = wait_until(lambda: (r := init(c, "ctp")).error_code != ErrorCode.CONCURRENT_TRANSACTIONS and r,
                         message="the fencing abort completes")
        assert (new.error_code, new.producer_id, new.producer_epoch) == (0, pid, 2)


def test_offsets_in_a_transaction_reach_the_group_on_commit(module_broker: BrokerProcess) -> None:
    with client(module_broker.bootstrap) as c:
        c.create_stream("tx-in")
        pid = init(c, "offsets").producer_id
        added = c.request(m.AddOffsetsToTxnRequest(transactional_id="offsets", producer_id=pid, producer_epoch=0,
                                                   group_id="tx-group"), 3)
        assert added.error_code == 0
        partition = m.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=42,
                                                                              committed_metadata="m")
        committed = c.request(m.TxnOffsetCommitRequest(
            transactional_id="offsets", group_id="tx-group", producer_id=pid, producer_epoch=0,
            topics=[m.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name="tx-in", partitions=[partition])]), 3)
        assert [p.error_code for t in committed.topics for p in t.partitions] == [0]
        assert fetched_offset(c, "tx-group", "tx-in") == -1
        assert end(c, "offsets", pid, 0, True) == 0
        assert fetched_offset(c, "tx-group", "tx-in") == 42


def fetched_offset(c: BrokerClient, group: str, stream: str) -> int:
    response = c.request(m.OffsetFetchRequest(group_id=group, topics=[
        m.OffsetFetchRequest.OffsetFetchRequestTopic(name=stream, partition_indexes=[0])]), 5)
    return response.topics[0].partitions[0].committed_offset


def txn_batch(values: list[bytes], pid: int, epoch: int, sequence: int) -> bytes:
    builder = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=sequence, is_transactional=True)
    for value in values:
        builder.append(1000, None, value)
    return builder.build()


def produce_txn(c: BrokerClient, txn: str | None, stream: str, batch: bytes, version: int = 9) -> Any:
    data = m.ProduceRequest.PartitionProduceData(index=0, records=batch)
    response = c.request(m.ProduceRequest(transactional_id=txn, acks=-1, timeout_ms=10_000, topic_data=[
        m.ProduceRequest.TopicProduceData(name=stream, partition_data=[data])]), version)
    return response.responses[0].partition_responses[0]


def committed_read(c: BrokerClient, stream: str, offset: int = 0) -> Any:
    partition = m.FetchRequest.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=4 << 20)
    response = c.request(m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=16 << 20,
                                        isolation_level=1,
                                        topics=[m.FetchRequest.FetchTopic(topic=stream, partitions=[partition])]), 11)
    return response.responses[0].partitions[0]


def latest(c: BrokerClient, stream: str, isolation: int) -> int:
    response = c.request(m.ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
        m.ListOffsetsRequest.ListOffsetsTopic(name=stream, partitions=[
            m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 5)
    return response.topics[0].partitions[0].offset


def values_of(records: Any) -> list[bytes | None]:
    return [r.value for batch in iter_batches(bytes(records)) if not batch[0].is_control
            for r in read_records(batch[1])] if records else []


def test_transactional_batches_only_in_an_added_partition_and_the_lso(module_broker: BrokerProcess) -> None:
    with client(module_broker.bootstrap) as c:
        c.create_stream("tx-lso")
        c.create_stream("tx-other")
        pid = init(c, "lso").producer_id
        # KIP-890 part 1: not added to the transaction -> refused.
        assert produce_txn(c, "lso", "tx-lso", txn_batch([b"x"], pid, 0, 0)).error_code == ErrorCode.INVALID_TXN_STATE
        assert produce_txn(c, None, "tx-lso", txn_batch([b"x"], pid, 0, 0)).error_code == ErrorCode.INVALID_TXN_STATE
        assert add(c, "lso", pid, 0, ["tx-lso"]) == [0]
        assert produce_txn(c, "lso", "tx-other", txn_batch([b"x"], pid, 0, 0)).error_code == \
            ErrorCode.INVALID_TXN_STATE
        assert c.produce("tx-lso", make_batch([b"plain"])) == 0
        assert produce_txn(c, "lso", "tx-lso", txn_batch([b"t1", b"t2"], pid, 0, 0)).base_offset == 1
        assert c.produce("tx-lso", make_batch([b"after"])) == 3
        # Open: read_committed stops at its first offset; read_uncommitted sees everything.
        assert (latest(c, "tx-lso", 0), latest(c, "tx-lso", 1)) == (4, 1)
        part = committed_read(c, "tx-lso")
        assert (part.high_watermark, part.last_stable_offset, values_of(part.records)) == (4, 1, [b"plain"])
        assert end(c, "lso", pid, 0, False) == 0
        # Aborted: the marker at 4 (written once EndTxn answered, as Kafka's); the consumer is
        # told which producer's records to drop.
        wait_until(lambda: latest(c, "tx-lso", 1) == 5, 10, "the abort marker is written")
        assert (latest(c, "tx-lso", 0), latest(c, "tx-lso", 1)) == (5, 5)
        part = committed_read(c, "tx-lso")
        assert part.last_stable_offset == 5
        assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(pid, 1)]
        assert values_of(part.records) == [b"plain", b"t1", b"t2", b"after"]  # filtering is the consumer's
        producers = c.request(m.DescribeProducersRequest(topics=[m.DescribeProducersRequest.TopicRequest(
            name="tx-lso", partition_indexes=[0])]), 0).topics[0].partitions[0]
        assert [(p.producer_id, p.producer_epoch, p.last_sequence, p.current_txn_start_offset)
                for p in producers.active_producers] == [(pid, 0, 1, -1)]


def test_an_open_transaction_is_aborted_after_its_timeout(module_broker: BrokerProcess) -> None:
    with client(module_broker.bootstrap) as c:
        c.create_stream("tx-timeout")
        first = c.request(m.InitProducerIdRequest(transactional_id="slow", transaction_timeout_ms=1000), 4)
        pid = first.producer_id
        assert add(c, "slow", pid, 0, ["tx-timeout"]) == [0]
        assert produce_txn(c, "slow", "tx-timeout", txn_batch([b"late"], pid, 0, 0)).error_code == 0
        described = c.request(m.DescribeTransactionsRequest(transactional_ids=["slow", "nobody"]), 0)
        assert [(s.error_code, s.transaction_state, s.producer_id, [t.topic for t in s.topics])
                for s in described.transaction_states] == [
            (0, "Ongoing", pid, ["tx-timeout"]), (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, "", -1, [])]
        listed = c.request(m.ListTransactionsRequest(state_filters=["Ongoing", "Nope"]), 1)
        assert ("slow", pid, "Ongoing") in [(s.transactional_id, s.producer_id, s.transaction_state)
                                            for s in listed.transaction_states]
        assert listed.unknown_state_filters == ["Nope"]
        # KIP-994: an hour's duration filter leaves out "slow", just started, and lists "idle",
        # never started, as Kafka (it was left out); a pattern that does not compile is Kafka's
        # error response, without the unknown states.
        assert init(c, "idle").error_code == 0
        long_running = c.request(m.ListTransactionsRequest(duration_filter=3_600_000,
                                                           transactional_id_pattern="slow|idle"), 2)
        assert [(s.transactional_id, s.transaction_state) for s in long_running.transaction_states] == [
            ("idle", "Empty")]
        bad = c.request(m.ListTransactionsRequest(state_filters=["Nope"], transactional_id_pattern="idle("), 2)
        assert (bad.error_code, bad.unknown_state_filters, bad.transaction_states) == (
            ErrorCode.INVALID_REGULAR_EXPRESSION, [], [])
        # Kafka's engine is RE2/J, without lookarounds or backreferences: Kafka 4.4 refuses these
        # (measured); Python's `re` took them and listed "idle".
        for pattern in ("(?=i)idle", "(i)dle|\\1"):
            refused = c.request(m.ListTransactionsRequest(transactional_id_pattern=pattern), 2)
            assert (refused.error_code, refused.transaction_states) == (ErrorCode.INVALID_REGULAR_EXPRESSION, []), \
                pattern
        # The coordinator aborts it (bumping the epoch, so the producer's EndTxn is fenced).
        wait_until(lambda: latest(c, "tx-timeout", 1) == 2, 20, "the timed-out transaction is aborted")
        assert end(c, "slow", pid, 0, True) == ErrorCode.PRODUCER_FENCED
        part = committed_read(c, "tx-timeout")
        assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(pid, 0)]
        # The producer's other late requests get Kafka 4.4's answers (measured), at once.
        began = time.monotonic()
        assert produce_txn(c, "slow", "tx-timeout", txn_batch([b"later"], pid, 0, 1)).error_code == \
            ErrorCode.INVALID_PRODUCER_EPOCH
        assert time.monotonic() - began < 1.0  # not after waiting for a transaction to show up
        offset = m.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1)
        offsets = c.request(m.TxnOffsetCommitRequest(
            transactional_id="slow", group_id="slow-group", producer_id=pid, producer_epoch=0,
            topics=[m.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name="tx-timeout", partitions=[offset])]), 3)
        assert [p.error_code for t in offsets.topics for p in t.partitions] == [ErrorCode.INVALID_PRODUCER_EPOCH]
        R = m.AddPartitionsToTxnRequest
        verified = c.request(R(transactions=[R.AddPartitionsToTxnTransaction(
            transactional_id="slow", producer_id=pid, producer_epoch=0, verify_only=True,
            topics=[R.AddPartitionsToTxnTopic(name="tx-timeout", partitions=[0])])]), 4)
        assert [p.partition_error_code for t in verified.results_by_transaction for r in t.topic_results
                for p in r.results_by_partition] == [ErrorCode.PRODUCER_FENCED]


def test_the_aborted_index_and_open_transactions_survive_a_restart(broker: BrokerProcess) -> None:
    with client(broker.bootstrap) as c:
        c.create_stream("tx-restart")
        pid = init(c, "restart").producer_id
        assert add(c, "restart", pid, 0, ["tx-restart"]) == [0]
        assert produce_txn(c, "restart", "tx-restart", txn_batch([b"gone"], pid, 0, 0)).error_code == 0
        assert end(c, "restart", pid, 0, False) == 0
        assert add(c, "restart", pid, 0, ["tx-restart"]) == [0]
        assert produce_txn(c, "restart", "tx-restart", txn_batch([b"open"], pid, 0, 1)).base_offset == 2
    broker.restart()
    with client(broker.bootstrap) as c:
        wait_until(lambda: latest(c, "tx-restart", 0) == 3, 20, "the stream serves again")
        part = committed_read(c, "tx-restart")
        assert (part.last_stable_offset, [(a.producer_id, a.first_offset) for a in part.aborted_transactions]) == \
            (2, [(pid, 0)])
        # The coordinator state came back too: the transaction can still be committed.
        assert end(c, "restart", pid, 0, True) == 0
        wait_until(lambda: latest(c, "tx-restart", 1) == 4, 10, "the commit marker is written")
        assert latest(c, "tx-restart", 0) == 4


def end_v5(c: BrokerClient, txn: str, pid: int, epoch: int, commit: bool) -> tuple[int, int, int]:
    response = c.request(m.EndTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                         committed=commit), 5)
    return response.error_code, response.producer_id, response.producer_epoch


def test_transaction_version_2_bumps_the_epoch_and_fences_the_ended_transaction(module_broker: BrokerProcess) -> None:
    """KIP-890 part 2: Produce v12 adds its partition implicitly; EndTxn v5 bumps the epoch and
    answers it; a delayed produce or EndTxn of the ended transaction (the Jepsen Bufstream
    finding) is fenced instead of landing on the next transaction."""
    with client(module_broker.bootstrap) as c:
        c.create_stream("tv2-a")
        pid = init(c, "tv2").producer_id
        # Produce v11 (the classic protocol) still needs AddPartitionsToTxn; v12 adds implicitly.
        assert produce_txn(c, "tv2", "tv2-a", txn_batch([b"x"], pid, 0, 0), 11).error_code == \
            ErrorCode.INVALID_TXN_STATE
        assert produce_txn(c, "tv2", "tv2-a", txn_batch([b"t1"], pid, 0, 0), 12).base_offset == 0
        assert end_v5(c, "tv2", pid, 0, True) == (0, pid, 1)
        # The answer was lost: the retried commit gets the same answer.
        assert end_v5(c, "tv2", pid, 0, True) == (0, pid, 1)
        assert produce_txn(c, "tv2", "tv2-a", txn_batch([b"t2"], pid, 1, 0), 12).error_code == 0
        # Delayed requests of the ended transaction (epoch 0) must not touch the ongoing one.
        late = produce_txn(c, "tv2", "tv2-a", txn_batch([b"late"], pid, 0, 1), 12)
        assert late.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        assert end_v5(c, "tv2", pid, 0, False)[0] == ErrorCode.PRODUCER_FENCED  # Kafka: Ongoing, other epoch
        assert end(c, "tv2", pid, 0, False) == ErrorCode.PRODUCER_FENCED
        assert end_v5(c, "tv2", pid, 1, True) == (0, pid, 2)
        # Both commit markers (offsets 1 and 3) carry the bumped epochs.
        wait_until(lambda: latest(c, "tv2-a", 1) == 4, 10, "the second commit marker is written")
        part = committed_read(c, "tv2-a")
        assert (part.last_stable_offset, list(part.aborted_transactions or []), values_of(part.records)) == \
            (4, [], [b"t1", b"t2"])
        markers = [(h.base_offset, h.producer_id, h.producer_epoch) for h, _ in iter_batches(bytes(part.records))
                   if h.is_control]
        assert markers == [(1, pid, 1), (3, pid, 2)]
        # An abort with nothing produced still bumps (the producer moves on).
        assert end_v5(c, "tv2", pid, 2, False) == (0, pid, 3)


def test_pipelined_produce_v12_batches_of_a_new_transaction_keep_their_order(module_broker: BrokerProcess) -> None:
    """A client pipelines its first batches of a transaction (Produce v12): each waits for the
    coordinator to add the stream; they must still be appended in the order sent (the Java client
    failed with OutOfOrderSequenceException when a later one was appended first)."""
    with client(module_broker.bootstrap) as c:
        c.create_stream("tv2-pipe")
        pid = init(c, "tv2-pipe").producer_id
    rounds, per_round = 3, 5
    with raw_socket(module_broker.bootstrap, timeout=30) as sock:
        for epoch in range(rounds):
            frames = [encode(m.ProduceRequest(transactional_id="tv2-pipe", acks=-1, timeout_ms=10_000, topic_data=[
                m.ProduceRequest.TopicProduceData(name="tv2-pipe", partition_data=[
                    m.ProduceRequest.PartitionProduceData(index=0, records=txn_batch([b"%d-%d" % (epoch, i)], pid,
                                                                                     epoch, i))])]), 12, i)
                for i in range(per_round)]
            sock.sendall(b"".join(frames))
            answers = [api.decode_response(0, 12, read_frame(sock))[1].responses[0].partition_responses[0]
                       for _ in range(per_round)]
            assert [a.error_code for a in answers] == [0] * per_round, [a.error_message for a in answers]
            with client(module_broker.bootstrap) as c:
                assert end_v5(c, "tv2-pipe", pid, epoch, True) == (0, pid, epoch + 1)
    with client(module_broker.bootstrap) as c:
        wait_until(lambda: latest(c, "tv2-pipe", 1) == rounds * (per_round + 1), 10, "the last commit marker")
        assert values_of(committed_read(c, "tv2-pipe").records) == [
            b"%d-%d" % (epoch, i) for epoch in range(rounds) for i in range(per_round)]


def test_txn_offset_commit_v5_adds_the_group_to_the_transaction(module_broker: BrokerProcess) -> None:
    """KIP-890 part 2: a transaction version 2 client sends no AddOffsetsToTxn; TxnOffsetCommit v5
    adds the group (v4 still needs it added)."""
    with client(module_broker.bootstrap) as c:
        c.create_stream("tv2-in")
        c.create_stream("tv2-out")
        pid = init(c, "tv2-offsets").producer_id

        def commit_offset(offset: int, version: int) -> list[int]:
            partition = m.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(partition_index=0,
                                                                                  committed_offset=offset)
            answer = c.request(m.TxnOffsetCommitRequest(
                transactional_id="tv2-offsets", group_id="tv2-group", producer_id=pid, producer_epoch=0,
                topics=[m.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name="tv2-in", partitions=[partition])]),
                version)
            return [p.error_code for t in answer.topics for p in t.partitions]

        assert produce_txn(c, "tv2-offsets", "tv2-out", txn_batch([b"out"], pid, 0, 0), 12).error_code == 0
        assert commit_offset(7, 4) == [ErrorCode.INVALID_TXN_STATE]
        assert commit_offset(7, 5) == [0]
        assert fetched_offset(c, "tv2-group", "tv2-in") == -1
        assert end_v5(c, "tv2-offsets", pid, 0, True) == (0, pid, 1)
        assert fetched_offset(c, "tv2-group", "tv2-in") == 7


EXPIRATION_MS = 3_000


def test_an_idle_transactional_id_expires_and_its_next_producer_starts_afresh(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    """Kafka's transactional.id.expiration.ms, with confluent-kafka's producer: a committed id
    unchanged that long is forgotten (DescribeTransactions, ListTransactions), and a new producer
    with the same id gets a new producer id at epoch 0 (a known id would keep its producer id and
    bump the epoch) and commits."""
    import confluent_kafka

    broker = broker_factory(transactional_id_expiration_ms=EXPIRATION_MS,
                            transaction_remove_expired_transaction_cleanup_interval_ms=100)

    def committed_once(value: bytes) -> None:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "expiring"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("tx-expire", value)
        producer.commit_transaction(30)

    def described(c: BrokerClient) -> tuple[int, str, int, int]:
        [state] = c.request(m.DescribeTransactionsRequest(transactional_ids=["expiring"]), 0).transaction_states
        return state.error_code, state.transaction_state, state.producer_id, state.producer_epoch

    def listed(c: BrokerClient) -> list[str]:
        return [s.transactional_id for s in c.request(m.ListTransactionsRequest(), 1).transaction_states]

    with client(broker.bootstrap) as c:
        c.create_stream("tx-expire")
        before_commit = time.time()
        committed_once(b"first")
        wait_until(lambda: described(c)[:2] == (0, "CompleteCommit"), 10, "the first transaction completes")
        first_pid = described(c)[2]
        assert described(c) == (0, "CompleteCommit", first_pid, 0)
        assert listed(c) == ["expiring"]
        wait_until(lambda: described(c)[0] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, 30, "the id expires")
        # Never before its expiration: its last change was no earlier than the commit began.
        assert time.time() - before_commit >= EXPIRATION_MS / 1000
        assert described(c) == (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, "", -1, -1)
        assert listed(c) == []
        committed_once(b"second")
        wait_until(lambda: described(c)[:2] == (0, "CompleteCommit"), 10, "the second transaction completes")
        (_, _, second_pid, second_epoch) = described(c)
        assert (second_pid != first_pid, second_epoch) == (True, 0)
    assert [value for _, value in read_to_end(broker.bootstrap, "tx-expire", "read_committed", 2)] == [
        b"first", b"second"]


def test_an_idle_idempotent_producer_is_forgotten_and_a_busy_one_kept(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    """Kafka's producer.id.expiration.ms (KIP-854), with confluent-kafka's idempotent producers: a
    stream forgets a producer without a batch that long (DescribeProducers no longer lists it),
    so its producer table does not grow with every producer id it ever saw; a producer still
    writing stays."""
    import confluent_kafka

    broker = broker_factory(producer_id_expiration_ms=EXPIRATION_MS, producer_id_expiration_check_interval_ms=100)

    def producer() -> confluent_kafka.Producer:
        return confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                                         "linger.ms": 0})

    def send(p: confluent_kafka.Producer, value: bytes) -> None:
        p.produce("pid-expire", value)
        assert p.flush(30) == 0

    def described(c: BrokerClient) -> list[int]:
        [topic] = c.request(m.DescribeProducersRequest(topics=[m.DescribeProducersRequest.TopicRequest(
            name="pid-expire", partition_indexes=[0])]), 0).topics
        return sorted(p.producer_id for p in topic.partitions[0].active_producers)

    with client(broker.bootstrap) as c:
        c.create_stream("pid-expire")
        idle, busy = producer(), producer()
        send(idle, b"idle-1")
        idle_last = time.time()
        send(busy, b"busy-1")
        both = described(c)
        assert len(both) == 2
        sent = 1

        def only_busy_left() -> bool:
            nonlocal sent
            sent += 1
            send(busy, b"busy-%d" % sent)
            return len(described(c)) == 1

        wait_until(only_busy_left, 30, "the idle producer is forgotten")
        # Never before its expiration: its last batch was acknowledged before idle_last.
        assert time.time() - idle_last >= EXPIRATION_MS / 1000
        [kept] = described(c)
        assert kept in both
        send(idle, b"idle-2")  # a forgotten producer writes on: accepted, listed again
        assert described(c) == both
    assert [value for _, value in read_to_end(broker.bootstrap, "pid-expire", "read_uncommitted", 2 + sent)] == [
        b"idle-1", b"busy-1", *(b"busy-%d" % n for n in range(2, sent + 1)), b"idle-2"]
