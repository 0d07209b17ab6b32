"""Random appends, truncations, rolls, retention, resets and reopenings against an in-memory model."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from log_testing import make_batch

from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.log.tail_cache import ENTRY_OVERHEAD
from vdl_broker.raft.types import Entry, EntryType

SLOW = True  # a minute or more: left out of make test-unit, run by make test


@dataclass
class ModelEntry:
    index: int
    term: int
    type: EntryType
    data: bytes
    base_offset: int  # -1 when not data
    end_offset: int  # log end offset after this entry
    max_timestamp: int


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="vdl-log-prop-"))
        self.directory = self.root / "s"
        self.log: StreamLog | None = None
        self.entries: list[ModelEntry] = []
        self.first_index = 1
        self.previous_term = 0
        self.start_offset = 0
        self.term = 1

    @initialize(cache=st.sampled_from([0, 2 * ENTRY_OVERHEAD + 400, 1 << 20]), segment_bytes=st.sampled_from([300, 700, 5000]))
    def open(self, cache: int, segment_bytes: int) -> None:
        self.config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=90, tail_cache_bytes=cache,
                                fsync=False)
        self.log = StreamLog.open(self.directory, self.config)

    def teardown(self) -> None:
        if self.log is not None:
            self.log._release()
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def end_offset(self) -> int:
        return self.entries[-1].end_offset if self.entries else self.start_offset

    @property
    def last_index(self) -> int:
        return self.first_index + len(self.entries) - 1

    @rule(kinds=st.lists(st.tuples(st.sampled_from([EntryType.DATA] * 4 + [EntryType.NOOP, EntryType.CONFIG]),
                                   st.integers(1, 5), st.integers(0, 200), st.integers(0, 50)),
                         min_size=1, max_size=8),
          new_term=st.booleans())
    def append(self, kinds: list[tuple[EntryType, int, int, int]], new_term: bool) -> None:
        assert self.log is not None
        if new_term:
            self.term += 1
        batch: list[Entry] = []
        models: list[ModelEntry] = []
        for kind, records, size, jitter in kinds:
            index = self.last_index + 1 + len(batch)
            offset = models[-1].end_offset if models else self.end_offset
            if kind == EntryType.DATA:
                timestamp = 10 * index + jitter  # mostly increasing, sometimes not
                payload = make_batch(offset, records, timestamp, size)
                models.append(ModelEntry(index, self.term, kind, payload, offset, offset + records, timestamp))
            else:
                payload = bytes([index & 0xFF]) * size
                models.append(ModelEntry(index, self.term, kind, payload, -1, offset, -1))
            batch.append(Entry(index, self.term, kind, payload))
        self.log.append(batch)
        self.entries.extend(models)

    @precondition(lambda self: self.entries)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        assert self.log is not None
        cut = data.draw(st.integers(self.first_index, self.last_index + 1))
        self.log.truncate_suffix(cut)
        del self.entries[cut - self.first_index:]
        self.term = max([self.term] + [e.term for e in self.entries])

    @rule(retention_bytes=st.integers(0, 3000))
    def retention(self, retention_bytes: int) -> None:
        assert self.log is not None
        self.log.sync_now()  # retention only deletes durable entries
        self.log.config.retention_bytes = retention_bytes
        before_segments = self.log.segment_count
        deleted = self.log.apply_retention(now_ms=0)
        self.log.config.retention_bytes = -1
        # every segment goes only at retention.bytes 0 (Kafka's rule), the log rolled to an empty one first
        assert deleted < before_segments or (retention_bytes == 0 and self.log.segment_count == 1
                                             and self.log.first_index == self.log.last_index + 1)
        new_first = self.log.first_index
        assert new_first >= self.first_index
        dropped = new_first - self.first_index
        if dropped:
            self.previous_term = self.entries[dropped - 1].term
            self.start_offset = self.entries[dropped - 1].end_offset
            del self.entries[:dropped]
            self.first_index = new_first
        assert self.log.log_start_offset == self.start_offset
        assert self.log.term_at(new_first - 1) == self.previous_term

    @rule(offset_gap=st.integers(0, 100), index_gap=st.integers(1, 50))
    def reset(self, offset_gap: int, index_gap: int) -> None:
        assert self.log is not None
        self.first_index = self.last_index + index_gap
        self.previous_term = self.term
        self.start_offset = self.end_offset + offset_gap
        self.entries = []
        self.log.reset(self.first_index, self.previous_term, self.start_offset)

    @rule()
    def reopen_clean(self) -> None:
        assert self.log is not None
        self.log.close()
        self.log = StreamLog.open(self.directory, self.config)

    @rule(synced=st.booleans())
    def reopen_unclean(self, synced: bool) -> None:
        assert self.log is not None
        if synced:
            self.log.sync_now()
        self.log._release()  # the page cache keeps what was written: nothing is lost
        self.log = StreamLog.open(self.directory, self.config)

    @invariant()
    def agrees(self) -> None:
        log = self.log
        if log is None:
            return
        assert (log.first_index, log.last_index) == (self.first_index, self.last_index)
        assert log.log_start_offset == self.start_offset
        assert log.log_end_offset == self.end_offset
        assert log.term_at(self.first_index - 1) == self.previous_term
        got = log.entries(self.first_index, self.last_index + 1)
        assert [(e.index, e.term, e.type, bytes(e.data)) for e in got] == \
            [(e.index, e.term, e.type, e.data) for e in self.entries]
        data = [e for e in self.entries if e.type == EntryType.DATA]
        result = log.read(self.start_offset, 1 << 30)
        assert [bytes(b) for b in result.buffers] == [e.data for e in data]
        assert result.next_offset == self.end_offset
        assert [log.term_at(e.index) for e in self.entries] == [e.term for e in self.entries]
        for entry in self.entries[-6:]:
            assert log.offset_for_index(entry.index) == entry.end_offset
        for entry in data[:3] + data[-3:]:
            assert log.index_for_offset(entry.base_offset) == entry.index
            assert bytes(log.read(entry.end_offset - 1, 1).buffers[0]) == entry.data
        if data:
            target = data[len(data) // 2].max_timestamp
            expected = next(e for e in data if e.max_timestamp >= target)
            assert log.offset_for_timestamp(target) == (expected.base_offset, expected.max_timestamp)
            assert log.offset_for_timestamp(max(e.max_timestamp for e in data) + 1) is None


LogMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
TestLogMachine = LogMachine.TestCase
