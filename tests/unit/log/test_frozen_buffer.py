"""FrozenBuffer.unfilled: a buffer of the size asked, for a reader that fills it whole (its bytes
are whatever the allocator held, not zeros: that is the point, and not checkable)."""

from __future__ import annotations

import pytest

from vdl_broker.log import FrozenBuffer


@pytest.mark.parametrize("size", [0, 1, 61, 1 << 20])
def test_an_unfilled_buffer_has_the_size_asked_and_holds_what_is_read_into_it(size: int) -> None:
    buffer = FrozenBuffer.unfilled(size)
    assert type(buffer) is FrozenBuffer and len(buffer) == size
    content = bytes(i % 251 for i in range(size))
    memoryview(buffer)[:] = content  # as a socket read into it
    assert bytes(buffer) == content


def test_an_unfilled_buffer_the_allocator_cannot_give_raises_memory_error() -> None:
    with pytest.raises(MemoryError):
        FrozenBuffer.unfilled(1 << 62)
