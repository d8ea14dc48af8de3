"""CommandBufferFillBufferTest (IREE CTS [H] command_buffer/fill_buffer_test.cc, C.3.11; classic
command_buffer_fill_buffer_test.h, C.1.5). Command buffer ONE_SHOT TRANSFER; indirect mode binds the
whole buffer at slot 0. Expected bytes are the CTS tables, byte for byte (patterns are little-endian)."""

import pytest

from reference import hal
from .conftest import Recording, fillexp, read_bytes, zeroed


def _case(h_name, c_name, pattern, plen, size, offset, length, expected_hex):
    return pytest.param(pattern, plen, size, offset, length, bytes.fromhex(expected_hex), id=h_name,
                        marks=pytest.mark.iree(f"CommandBufferFillBufferTest.{h_name}",
                                               f"CommandBufferFillBufferTest.{c_name}"))


TABLE = [
    _case("Pattern1_Size1_Offset0_Length1", "FillBuffer_pattern1_size1_offset0_length1",
          0x07, 1, 1, 0, 1, "07"),
    _case("Pattern1_Size5_Offset0_Length5", "FillBuffer_pattern1_size5_offset0_length5",
          0x07, 1, 5, 0, 5, "07" * 5),
    _case("Pattern1_Size16_Offset0_Length1", "FillBuffer_pattern1_size16_offset0_length1",
          0x07, 1, 16, 0, 1, "07" + "00" * 15),
    _case("Pattern1_Size16_Offset0_Length3", "FillBuffer_pattern1_size16_offset0_length3",
          0x07, 1, 16, 0, 3, "07" * 3 + "00" * 13),
    _case("Pattern1_Size16_Offset0_Length8", "FillBuffer_pattern1_size16_offset0_length8",
          0x07, 1, 16, 0, 8, "07" * 8 + "00" * 8),
    _case("Pattern1_Size16_Offset2_Length8", "FillBuffer_pattern1_size16_offset2_length8",
          0x07, 1, 16, 2, 8, "00" * 2 + "07" * 8 + "00" * 6),
    _case("Pattern2_Size2_Offset0_Length2", "FillBuffer_pattern2_size2_offset0_length2",
          0xAB23, 2, 2, 0, 2, "23ab"),
    _case("Pattern2_Size16_Offset0_Length8", "FillBuffer_pattern2_size16_offset0_length8",
          0xAB23, 2, 16, 0, 8, "23ab" * 4 + "00" * 8),
    _case("Pattern2_Size16_Offset0_Length10", "FillBuffer_pattern2_size16_offset0_length10",
          0xAB23, 2, 16, 0, 10, "23ab" * 5 + "00" * 6),
    _case("Pattern2_Size16_Offset2_Length8", "FillBuffer_pattern2_size16_offset2_length8",
          0xAB23, 2, 16, 2, 8, "0000" + "23ab" * 4 + "00" * 6),
    _case("Pattern4_Size4_Offset0_Length4", "FillBuffer_pattern4_size4_offset0_length4",
          0xAB23CD45, 4, 4, 0, 4, "45cd23ab"),
    _case("Pattern4_Size4_Offset16_Length4", "FillBuffer_pattern4_size4_offset16_length4",
          0xAB23CD45, 4, 20, 16, 4, "00" * 16 + "45cd23ab"),
    _case("Pattern4_Size16_Offset0_Length8", "FillBuffer_pattern4_size16_offset0_length8",
          0xAB23CD45, 4, 16, 0, 8, "45cd23ab" * 2 + "00" * 8),
    _case("Pattern4_Size16_Offset8_Length8", "FillBuffer_pattern4_size16_offset8_length8",
          0xAB23CD45, 4, 16, 8, 8, "00" * 8 + "45cd23ab" * 2),
]


def fill_and_read(device, recording_mode, size, offset, length, pattern, plen):
    rec = Recording(recording_mode, 1)
    buf = zeroed(device, size)
    cb = rec.create(device, categories=hal.CommandCategory.TRANSFER)
    cb.begin()
    cb.fill_buffer(rec.ref(0, buf, offset, length), pattern, plen)
    cb.end()
    rec.submit_and_wait(device, cb)
    return read_bytes(device, buf)


@pytest.mark.parametrize("pattern, plen, size, offset, length, expected", TABLE)
def test_fill_buffer(device, recording_mode, pattern, plen, size, offset, length, expected):
    assert len(expected) == size
    assert fill_and_read(device, recording_mode, size, offset, length, pattern, plen) == expected


# (pattern_length, offset, length, pattern); buffer size = offset + length + 16.
SIZE_ALIGNMENT_CASES = [
    (1, 0, 4, 0xA5), (1, 3, 31, 0x5A), (1, 17, 32, 0xC3), (1, 1, 33, 0x3C), (1, 16, 64, 0xD7),
    (1, 7, 1024, 0x19), (1, 31, 65536, 0xE1),
    (2, 0, 4, 0xBEEF), (2, 2, 30, 0xCAFE), (2, 6, 32, 0x1234), (2, 18, 34, 0xA1B2), (2, 4, 1024, 0x0F0E),
    (2, 14, 65536, 0x55AA),
    (4, 0, 4, 0xDEADCAFE), (4, 4, 28, 0xCAFEF00D), (4, 8, 32, 0x12345678), (4, 20, 36, 0xA5A55A5A),
    (4, 4, 1024, 0x0F1E2D3C), (4, 12, 65536, 0x55AA33CC),
]


@pytest.mark.iree("CommandBufferFillBufferTest.FillSizeAlignmentAndPatternClasses")
def test_fill_size_alignment_and_pattern_classes(device, recording_mode):
    for plen, offset, length, pattern in SIZE_ALIGNMENT_CASES:
        size = offset + length + 16
        got = fill_and_read(device, recording_mode, size, offset, length, pattern, plen)
        assert got == fillexp(size, offset, length, pattern, plen), (plen, offset, length, hex(pattern))
