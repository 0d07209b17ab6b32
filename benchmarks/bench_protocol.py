"""Protocol benchmark: produce acceptance, column decoding, zero-copy fetch encoding.

Run: .venv/bin/python -m benchmarks.bench_protocol
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable

from benchmarks.report import Report, per_call_rates, timed_calls
from vdl_connector.arrow import decode_columns_arrow
from vdl_wire.records import (
    Compression,
    RecordBatchBuilder,
    decode_columns,
    validate_batch,
    with_base_offset,
)

MIB = 1 << 20
# 100-byte record values (random, so an lz4 batch stays ~1 MiB on the wire), no key, no headers
_POOL = random.Random(0).randbytes(100 * 12_000)
VALUES = [_POOL[i * 100:(i + 1) * 100] for i in range(12_000)]
TIMESTAMP = 1_700_000_000_000


def one_mib_batch(codec: Compression) -> tuple[bytes, int]:
    """A batch of 100-byte records whose uncompressed size is just under 1 MiB."""
    builder = RecordBatchBuilder(codec)
    while builder.estimated_size < MIB - 120:
        builder.append(TIMESTAMP + builder.record_count, None, VALUES[builder.record_count])
    return builder.build(), builder.record_count


def per_call(function: Callable[[], object], loops: int) -> list[tuple[float, float]]:
    """timed_calls of `function` (start, seconds), after a warm-up; results are dropped at once
    (as a server does after using them). The table reports the median, the plot all of them."""
    function()  # warm up (imports, caches)
    return timed_calls(function, loops * 7)


def median_of(calls: list[tuple[float, float]]) -> float:
    return statistics.median(seconds for _, seconds in calls)


def produce_frame(batch: bytes) -> bytes:
    from vdl_wire.api import encode_request
    from vdl_wire.messages.produce import ProduceRequest

    request = ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=30000,
        topic_data=[ProduceRequest.TopicProduceData(
            name="bench", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    parts = encode_request(ProduceRequest.DECL.api_key, 8, 1, "bench", request)
    return b"".join(bytes(part) for part in parts)[4:]  # frame body without the size prefix


def bench_produce(report: Report) -> None:
    from vdl_wire.api import decode_request

    batch, count = one_mib_batch(Compression.LZ4)
    frame = produce_frame(batch)

    def accept() -> bytearray:
        _, request = decode_request(frame)
        records = request.topic_data[0].partition_data[0].records
        validate_batch(records)
        return with_base_offset(records, 1_000_000)

    calls = per_call(accept, 50)
    seconds = median_of(calls)
    report.latency("produce v8 accept, 1 MiB lz4 batch", [c * 1e6 for _, c in calls], "us per call")
    report.add("produce v8 accept (decode, CRC, base offset), 1 MiB lz4 batch", len(frame) / seconds / 1e9,
               "GB/s", goal=2.0, note=f"{len(frame) / MIB:.2f} MiB frame, {count} records")


def bench_columns(report: Report) -> None:
    for codec, goal in ((Compression.NONE, 2_000_000), (Compression.LZ4, 1_500_000)):
        batch, count = one_mib_batch(codec)
        name = codec.name.lower()
        calls = per_call(lambda b=batch: decode_columns(b), 20)
        seconds = median_of(calls)
        # decode_columns (lists of bytes) is the same-run baseline of the Arrow decoder
        report.throughput(f"decode_columns, {name}", per_call_rates(calls, count), "records/s", baseline=True)
        report.latency(f"decode_columns, 1 MiB {name} batch", [c * 1e6 for _, c in calls], "us per call",
                       baseline=True)
        report.add(f"decode_columns, 1 MiB {name} batch of 100-byte records", count / seconds, "records/s",
                   goal=goal, note=f"{count} records, {seconds * 1e3:.2f} ms/batch; lists of bytes")
        calls = per_call(lambda b=batch: decode_columns_arrow(b), 20)
        seconds = median_of(calls)
        report.throughput(f"decode_columns_arrow, {name}", per_call_rates(calls, count), "records/s")
        report.latency(f"decode_columns_arrow, 1 MiB {name} batch", [c * 1e6 for _, c in calls], "us per call")
        report.add(f"decode_columns_arrow, 1 MiB {name} batch", count / seconds, "records/s", goal=goal,
                   note=f"{seconds * 1e3:.2f} ms/batch; pyarrow binary arrays")


def bench_fetch(report: Report) -> None:
    from vdl_wire.api import encode_response
    from vdl_wire.headers import RequestHeader
    from vdl_wire.messages.fetch import FetchResponse

    batch, _ = one_mib_batch(Compression.NONE)
    stored = [memoryview(with_base_offset(batch, i * 10_000)) for i in range(64)]
    total = sum(len(buffer) for buffer in stored)
    header = RequestHeader(request_api_key=1, request_api_version=11, correlation_id=7, client_id="bench")
    response = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[
        FetchResponse.FetchableTopicResponse(topic="bench", partitions=[FetchResponse.PartitionData(
            partition_index=0, error_code=0, high_watermark=640_000, last_stable_offset=640_000,
            log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1, records=stored)])])
    parts = encode_response(header, response)
    identities = {id(buffer.obj) for buffer in stored} | {id(buffer) for buffer in stored}
    passed_through = sum(len(part) for part in parts
                         if id(part) in identities or (isinstance(part, memoryview) and id(part.obj) in identities))
    copied = sum(len(part) for part in parts) - passed_through
    calls = per_call(lambda: encode_response(header, response), 20)
    seconds = median_of(calls)
    report.latency("fetch v11 encode, 64 MiB of batches", [c * 1e6 for _, c in calls], "us per call")
    report.add("fetch v11 encode around 64 MiB of stored batches", seconds * 1e6 / (total / MIB), "us/MiB",
               goal=10.0, higher_is_better=False, note=f"{len(parts)} parts, {seconds * 1e6:.0f} us total")
    report.add("fetch v11 encode: bytes copied (not passed through)", copied, "bytes", goal=4096,
               higher_is_better=False, note=f"of {total:,} batch bytes; only headers/fields are encoded")


def main() -> None:
    report = Report("bench_protocol")
    bench_produce(report)
    bench_columns(report)
    bench_fetch(report)
    report.finish()


if __name__ == "__main__":
    main()
