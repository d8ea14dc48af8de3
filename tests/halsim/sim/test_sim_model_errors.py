"""A Python error inside an operation's execution (a kernel or model bug, a MemoryError...) fails the
operation INTERNAL "simulator: …" on every personality, as a device error would — it never escapes
from a host wait — and closing a device always ends, even when a model bug left work stuck."""

import threading

import pytest

import halsim.sim.execution as execution
import halsim.sim.personalities.metal as metal
from halsim.sim.driver import driver
from reference import hal
from tests.conftest import WAIT

S = hal.StatusCode
PERSONALITIES = ["generic", "metal", "cuda", "opencl", "sync"]
STICKY = ("cuda", "opencl")  # a device error fails every later action there


def closes(dev) -> None:
    """Close ``dev`` on another thread: fail (not hang) if the close does not return."""
    out = []

    def close():
        try:
            dev.close()
            out.append(None)
        except BaseException as e:  # noqa: BLE001 - reported below
            out.append(e)

    t = threading.Thread(target=close, daemon=True)
    t.start()
    t.join(WAIT)
    assert not t.is_alive(), "close() hung"
    if out[0] is not None:
        raise out[0]


def outcome(fn):
    try:
        fn()
        return None
    except hal.HalError as e:
        return e.code, e.message
    except Exception as e:  # noqa: BLE001 - what the bug let through
        return "raw", f"{type(e).__name__}: {e}"


@pytest.fixture
def copy_raises(monkeypatch):
    """Every copy command raises a RuntimeError when it executes (not a HalError)."""
    real = execution.run_command

    def run_command(cmd, *args, **kwargs):
        if cmd.kind == "copy":
            raise RuntimeError("injected")
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(execution, "run_command", run_command)


@pytest.mark.parametrize("personality", PERSONALITIES)
def test_a_python_error_in_a_command_fails_the_op_internal_and_the_device_closes(personality, copy_raises):
    dev = driver.create_device(personality)
    try:
        src, dst = dev.allocator.allocate_buffer(16), dev.allocator.allocate_buffer(16)
        done, later = dev.create_semaphore(), dev.create_semaphore()
        expected = (S.INTERNAL, "simulator: RuntimeError: injected")
        submitted = outcome(lambda: dev.queue_copy([], [(done, 1)], src, 0, dst, 0, 16))
        assert submitted == (expected if personality == "sync" else None)  # sync: the call runs it
        assert outcome(lambda: done.wait(1, WAIT)) == expected
        (cmd,) = dev.trace.events("cmd")
        assert (cmd["kind"], cmd["status"], cmd["message"]) == ("copy", S.INTERNAL, expected[1])
        (op_done,) = dev.trace.events("op_done")
        assert op_done["status"] == S.INTERNAL
        # then as a device error: sticky on the stream devices, the device goes on on the others
        dev.queue_barrier([], [(later, 1)])
        assert outcome(lambda: later.wait(1, WAIT)) == (expected if personality in STICKY else None)
    finally:
        closes(dev)


@pytest.mark.parametrize("personality", PERSONALITIES)
def test_a_python_error_committing_a_transient_fails_the_alloca_internal(personality, monkeypatch):
    """(As a MemoryError committing a huge transient did: on sim:metal, sim:cuda and sim:opencl it
    escaped from the wait raw, and close() then looped for ever.)"""
    real = execution.run_body

    def run_body(device, op, *args):
        if op.kind == "alloca":
            raise MemoryError("no memory")
        return real(device, op, *args)

    monkeypatch.setattr(execution, "run_body", run_body)
    monkeypatch.setattr(metal, "run_body", run_body)
    dev = driver.create_device(personality)
    try:
        done = dev.create_semaphore()
        expected = (S.INTERNAL, "simulator: MemoryError: no memory")
        submitted = outcome(lambda: dev.queue_alloca([], [(done, 1)], 64))
        assert submitted == (expected if personality == "sync" else None)
        assert outcome(lambda: done.wait(1, WAIT)) == expected
    finally:
        closes(dev)


def test_close_ends_when_a_model_bug_leaves_an_operation_pending():
    """_shutdown cancelled and ran the simulation until no operation was left, for ever if one
    stayed: now it stops once a round changes nothing, and fails what the stuck op signals."""
    dev = driver.create_device("generic")
    never, done = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(never, 1)], [(done, 1)])
    dev.sleep(0.001)  # the barrier is pending now
    dev._cancel_pending = lambda error: None  # the bug: cancelling does nothing
    closes(dev)
    assert isinstance(done.failure, hal.HalError) and done.failure.code == S.INTERNAL
    assert "0:0 could not complete" in done.failure.message
    (op_done,) = dev.trace.events("op_done")
    assert (op_done["op"], op_done["status"]) == ("0:0", S.INTERNAL)


def test_an_error_while_closing_is_raised_after_the_device_closed(monkeypatch):
    dev = driver.create_device("generic")
    s = dev.create_semaphore()
    dev.queue_barrier([], [(s, 1)])

    def run_until_idle():
        raise RuntimeError("model bug")

    monkeypatch.setattr(dev.threads, "run_until_idle", run_until_idle)
    with pytest.raises(hal.HalError) as ei:
        closes(dev)
    assert ei.value.code == S.INTERNAL and "RuntimeError while closing device" in ei.value.message
    assert dev._closed
    dev.close()  # once closed, closing again does nothing
