"""Shared test helpers: every wait in the suite is bounded (a hang fails, never blocks CI)."""

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
