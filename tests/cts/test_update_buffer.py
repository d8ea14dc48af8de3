"""CommandBufferUpdateBufferTest (IREE CTS [H] command_buffer/update_buffer_test.cc, C.3.12; classic
command_buffer_update_buffer_test.h, C.1.6). ONE_SHOT TRANSFER; indirect mode binds the target at slot 0."""

import pytest

from reference import hal
from .conftest import Recording, read_bytes, zeroed

SRC = bytes.fromhex("0102030405060708a1a2a3a4a5a6a7a8")


def _record_update(device, rec, source, source_offset, target_ref):
    cb = rec.create(device, categories=hal.CommandCategory.TRANSFER)
    cb.begin()
    cb.update_buffer(source, source_offset, target_ref)
    cb.end()
    rec.submit_and_wait(device, cb)


@pytest.mark.iree("CommandBufferUpdateBufferTest.WholeBuffer", "CommandBufferUpdateBufferTest.UpdateBufferWholeBuffer")
def test_whole_buffer(device, recording_mode):
    rec = Recording(recording_mode, 1)
    buf = zeroed(device, 16)
    _record_update(device, rec, SRC, 0, rec.ref(0, buf, 0, 16))
    assert read_bytes(device, buf) == SRC


@pytest.mark.iree("CommandBufferUpdateBufferTest.LargerPayload")
def test_larger_payload(device, recording_mode):
    rec = Recording(recording_mode, 1)
    src = bytes(i ^ 0xA5 for i in range(256))
    buf = zeroed(device, 256)
    _record_update(device, rec, src, 0, rec.ref(0, buf, 0, 256))
    assert read_bytes(device, buf) == src


@pytest.mark.iree("CommandBufferUpdateBufferTest.WithOffsets", "CommandBufferUpdateBufferTest.UpdateBufferWithOffsets")
def test_with_offsets(device, recording_mode):
    rec = Recording(recording_mode, 1)
    buf = zeroed(device, 16)
    _record_update(device, rec, SRC, 4, rec.ref(0, buf, 4, 8))
    assert read_bytes(device, buf) == bytes(4) + bytes.fromhex("05060708a1a2a3a4") + bytes(4)


@pytest.mark.iree("CommandBufferUpdateBufferTest.Subspan", "CommandBufferUpdateBufferTest.UpdateBufferSubspan")
def test_subspan(device, recording_mode):
    rec = Recording(recording_mode, 1)
    buf = zeroed(device, 16)
    sub = buf.subspan(4, 8)  # in indirect mode the subspan is what is bound at slot 0
    _record_update(device, rec, SRC, 4, rec.ref(0, sub, 4, 4))
    assert read_bytes(device, buf) == bytes(8) + bytes.fromhex("05060708") + bytes(4)
    assert read_bytes(device, sub) == bytes(4) + bytes.fromhex("05060708")
