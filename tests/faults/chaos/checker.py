"""The campaign's checker, in the spirit of Jepsen's Kafka workload: pure functions over what the
clients recorded (acknowledgements, reads, high watermarks) and the final log.

Anomaly kinds, each a list of timestamped findings:
- lost: an acknowledged (value, offset) that the final log does not hold at that offset (one
  acknowledged at an unknown offset: a value it holds nowhere);
- duplicate: a value an idempotent producer sent stored at two offsets (non-idempotent
  producers may legitimately duplicate on retries: counted apart, as `retried_duplicate`);
- inconsistent_offset: one offset seen with two values, by any reader or acknowledgement;
- non_monotonic: a consumer session handed an offset not above the previous one;
- skipped: a consumer session jumped over offsets the log holds;
- hw_regression: a high watermark served lower than one served before;
- phantom: a record no producer sent.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

ANOMALY_KINDS = ("lost", "duplicate", "inconsistent_offset", "non_monotonic", "skipped", "hw_regression",
                 "phantom")


@dataclass(frozen=True)
class Ack:
    """A producer's acknowledgement: `value` stored at `offset`, known at `time` (monotonic s)."""

    time: float
    client: str
    offset: int
    value: bytes


@dataclass(frozen=True)
class Read:
    time: float
    offset: int
    value: bytes | None


@dataclass
class Session:
    """What one consumer read between two (re)assignments: offsets must only go up."""

    reader: str
    reads: list[Read] = field(default_factory=list)


@dataclass(frozen=True)
class Anomaly:
    kind: str
    time: float
    detail: str


@dataclass
class History:
    """Everything the clients of one stream recorded during a campaign."""

    acks: list[Ack]
    idempotent_clients: set[str]
    was_produced: Callable[[bytes | None], bool]  # did some client try to write this value?
    sessions: list[Session]
    high_watermarks: list[tuple[float, int, int]]  # (time, node, high watermark)


def check(history: History, final_log: Mapping[int, bytes | None], log_start: int = 0) -> list[Anomaly]:
    """Every anomaly of the history against the final log ([log_start, high watermark))."""
    return (_lost(history.acks, final_log, log_start)
            + _duplicates(history.acks, history.idempotent_clients, final_log)
            + _inconsistent(history, final_log)
            + _session_order(history.sessions, final_log)
            + _hw_regressions(history.high_watermarks)
            + _phantoms(history.was_produced, final_log, history.sessions))


def retried_duplicates(history: History, final_log: Mapping[int, bytes | None]) -> int:
    """Values of non-idempotent producers stored more than once (allowed: a retry after a lost
    acknowledgement writes again)."""
    clients = {ack.value: ack.client for ack in history.acks}
    counts: dict[bytes, int] = defaultdict(int)
    for value in final_log.values():
        if value is not None:
            counts[value] += 1
    return sum(n - 1 for value, n in counts.items()
               if n > 1 and clients.get(value) not in history.idempotent_clients)


def _lost(acks: Iterable[Ack], log: Mapping[int, bytes | None], log_start: int) -> list[Anomaly]:
    out = []
    stored_values = set(log.values())
    for ack in acks:
        if ack.offset < 0:
            # Delivered at an unknown offset: librdkafka takes DUPLICATE_SEQUENCE_NUMBER as
            # "stored before" (rdkafka_request.c), with no offset. The value must be in the log,
            # unless retention may have removed it.
            if log_start == 0 and ack.value not in stored_values:
                out.append(Anomaly("lost", ack.time, f"{ack.client} was acknowledged {_short(ack.value)} at an "
                                                     f"unknown offset; the log holds it nowhere"))
            continue
        if ack.offset < log_start:
            continue  # removed by retention, not lost
        stored = log.get(ack.offset)
        if stored != ack.value:
            out.append(Anomaly("lost", ack.time, f"{ack.client} was acknowledged {_short(ack.value)} at "
                                                 f"{ack.offset}; the log holds {_short(stored)} there"))
    return out


def _duplicates(acks: Iterable[Ack], idempotent: set[str], log: Mapping[int, bytes | None]) -> list[Anomaly]:
    owners = {ack.value: ack for ack in acks if ack.client in idempotent}
    offsets: dict[bytes, list[int]] = defaultdict(list)
    for offset, value in log.items():
        if value in owners:
            offsets[value].append(offset)
    return [Anomaly("duplicate", owners[value].time, f"{owners[value].client}'s {_short(value)} stored at {where}")
            for value, where in offsets.items() if len(where) > 1]


def _inconsistent(history: History, log: Mapping[int, bytes | None]) -> list[Anomaly]:
    seen: dict[int, tuple[bytes | None, str, float]] = {offset: (value, "the final log", 0.0)
                                                         for offset, value in log.items()}
    out = []
    observations = [(ack.time, ack.offset, ack.value, f"{ack.client}'s acknowledgement") for ack in history.acks
                    if ack.offset >= 0]
    observations += [(read.time, read.offset, read.value, session.reader)
                     for session in history.sessions for read in session.reads]
    reported: set[int] = set()
    for time, offset, value, who in sorted(observations, key=lambda o: o[0]):
        earlier = seen.setdefault(offset, (value, who, time))
        if earlier[0] != value and offset not in reported:
            reported.add(offset)
            out.append(Anomaly("inconsistent_offset", time, f"offset {offset}: {who} saw {_short(value)}, "
                                                            f"{earlier[1]} {_short(earlier[0])}"))
    return out


def _session_order(sessions: Sequence[Session], log: Mapping[int, bytes | None]) -> list[Anomaly]:
    out = []
    for session in sessions:
        previous: Read | None = None
        for read in session.reads:
            if previous is not None:
                if read.offset <= previous.offset:
                    out.append(Anomaly("non_monotonic", read.time, f"{session.reader} read offset {read.offset} "
                                                                   f"after {previous.offset}"))
                elif any(o in log for o in range(previous.offset + 1, read.offset)):
                    out.append(Anomaly("skipped", read.time, f"{session.reader} jumped from {previous.offset} "
                                                             f"to {read.offset}"))
            previous = read
    return out


def _hw_regressions(samples: Sequence[tuple[float, int, int]]) -> list[Anomaly]:
    out = []
    highest, where = -1, -1
    for time, node, hw in sorted(samples):
        if hw < highest:
            out.append(Anomaly("hw_regression", time, f"node {node} served {hw} after node {where} served {highest}"))
        elif hw > highest:
            highest, where = hw, node
    return out


def _phantoms(was_produced: Callable[[bytes | None], bool], log: Mapping[int, bytes | None],
              sessions: Sequence[Session]) -> list[Anomaly]:
    out = [Anomaly("phantom", 0.0, f"offset {offset} holds {_short(value)}, which nobody sent")
           for offset, value in log.items() if not was_produced(value)]
    out += [Anomaly("phantom", read.time, f"{session.reader} read {_short(read.value)} at {read.offset}, "
                                          "which nobody sent")
            for session in sessions for read in session.reads if not was_produced(read.value)]
    return out


def _short(value: bytes | None) -> str:
    return "nothing" if value is None else repr(value.rstrip(b".")[:32])
