"""Shared test helpers: every wait in the suite is bounded (a hang fails, never blocks CI)."""

import gc
import os
import signal
import subprocess
import threading
import time

import pytest

WAIT = 10.0  # seconds: the bound used wherever IREE's tests wait forever


def join(thread: threading.Thread, timeout: float = WAIT) -> None:
    thread.join(timeout)
    assert not thread.is_alive(), f"thread {thread.name} did not finish within {timeout} s"


def open_device(uri: str, why: str | None = None):
    """``hal.create_device(uri)``, or skip the test when the device is UNAVAILABLE here (no OpenCL
    platform, no GPU, not macOS), saying ``why`` (default: "device URI unavailable") and the driver's
    reason; any other error is raised."""
    from reference import hal

    try:
        return hal.create_device(uri)
    except hal.HalError as e:
        if e.code != hal.StatusCode.UNAVAILABLE:
            raise
        pytest.skip(f"{why or f'device {uri} unavailable'}: {e.message}")


@pytest.fixture
def no_gc():
    """The cyclic collector off for the test: what it frees must go by reference counting alone."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.fixture(params=["local-sync", "local-task"])
def ref_device(request):
    """Each reference device (local-sync, local-task)."""
    from reference import hal

    dev = hal.create_device(request.param)
    yield dev
    dev.close()


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def interrupt(cmd, ready, timeout: float = 60):
    """Run ``cmd`` in a process group of its own (SIGINT at its default, as in a terminal); once
    ``ready()`` holds, send SIGINT to the whole group, as Ctrl-C does. (returncode, stderr)."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            assert proc.poll() is None, f"ended before it could be interrupted: {proc.communicate(timeout=10)[1]}"
            assert time.monotonic() < deadline, "not ready in time"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)
        _out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    return proc.returncode, err
