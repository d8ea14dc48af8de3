"""EventTest: events inside command buffers (IREE CTS [H] core/event_test.cc, C.3.3; classic event_test.h,
C.1.9). Tag ``events``. On CPU devices the event commands are no-ops; submission must still succeed."""

import pytest

from reference import hal
from .conftest import submit_and_wait

pytestmark = pytest.mark.requires("events")

STAGE = hal.ExecutionStage


def _dispatch_cb(device):
    return device.create_command_buffer(hal.CommandBufferMode.ONE_SHOT, hal.CommandCategory.DISPATCH, 0)


@pytest.mark.iree("EventTest.Create")
def test_create(device):
    event = device.create_event()
    assert isinstance(event, hal.Event)
    assert event.device is device


@pytest.mark.iree("EventTest.SignalAndReset")
def test_signal_and_reset(device):
    event = device.create_event()
    cb = _dispatch_cb(device)
    cb.begin()
    cb.signal_event(event, STAGE.COMMAND_PROCESS)
    cb.reset_event(event, STAGE.COMMAND_RETIRE)
    cb.end()
    submit_and_wait(device, cb)


@pytest.mark.iree("EventTest.SubmitWithChainedCommandBuffers")
def test_submit_with_chained_command_buffers(device):
    event = device.create_event()
    cb1 = _dispatch_cb(device)
    cb1.begin()
    cb1.signal_event(event, STAGE.COMMAND_RETIRE)
    cb1.end()
    cb2 = _dispatch_cb(device)
    cb2.begin()
    cb2.wait_events([event], STAGE.COMMAND_RETIRE, STAGE.COMMAND_ISSUE)
    cb2.end()
    submit_and_wait(device, cb1)
    submit_and_wait(device, cb2)
