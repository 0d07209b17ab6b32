"""crc32c_combine: the CRC32C of a concatenation from its parts' CRC32Cs, checked against the
hardware CRC of the concatenation itself."""

from __future__ import annotations

import random

import crc32c
import pytest

from vdl_broker.raft.crc_extend import crc32c_combine

# Every length below 2^10, lengths around each power of two, and a few of batch size.
_LENGTHS = [*range(1 << 10), *(p + d for p in (1 << k for k in range(10, 24)) for d in (-1, 0, 1)), 4_431_805]


def test_it_is_the_crc_of_the_concatenation_for_every_length() -> None:
    rng = random.Random(29)
    for length in _LENGTHS:
        first = rng.randbytes(rng.randrange(0, 64))
        second = rng.randbytes(length)
        assert crc32c_combine(crc32c.crc32c(first), crc32c.crc32c(second), length) == crc32c.crc32c(first + second), length


def test_it_extends_any_register_value() -> None:
    """Every bit of the first CRC reaches the result as a CRC of those bytes would."""
    second = bytes(range(256)) * 300
    for bit in range(32):
        first = 1 << bit
        # crc32c(data, value) continues a CRC whose value so far is `value`: a first part whose CRC is `first`
        assert crc32c_combine(first, crc32c.crc32c(second), len(second)) == crc32c.crc32c(second, first)


@pytest.mark.parametrize("length", [-1, 1 << 32])
def test_a_length_out_of_range_is_refused(length: int) -> None:
    with pytest.raises(ValueError, match=r"second_length .* is not in \[0, 2\^32\)"):
        crc32c_combine(0, 0, length)
