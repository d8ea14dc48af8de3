"""CommandBufferBasicTest: create, record, submit an empty command buffer (IREE CTS [H]
command_buffer/basic_test.cc, C.3.9; classic CommandBufferTest in command_buffer_test.h, C.1.3)."""

import pytest

from reference import hal
from .conftest import S, expect_error, submit_and_wait

CAT = hal.CommandCategory


def _create(device):
    return device.create_command_buffer(hal.CommandBufferMode.ONE_SHOT, CAT.DISPATCH, 0)


@pytest.mark.iree("CommandBufferBasicTest.Create", "CommandBufferTest.Create")
def test_create(device):
    cb = _create(device)
    assert isinstance(cb, hal.CommandBuffer)
    assert (cb.allowed_categories & CAT.DISPATCH) == CAT.DISPATCH


@pytest.mark.iree("CommandBufferBasicTest.BeginEnd", "CommandBufferTest.BeginEnd")
def test_begin_end(device):
    cb = _create(device)
    cb.begin()
    cb.end()
    # begin/end moved the lifecycle on: a second end is a lifecycle violation (CB4).
    expect_error(S.FAILED_PRECONDITION, cb.end)


@pytest.mark.iree("CommandBufferBasicTest.SubmitEmpty", "CommandBufferTest.SubmitEmpty")
def test_submit_empty(device):
    cb = _create(device)
    cb.begin()
    cb.end()
    submit_and_wait(device, cb)
