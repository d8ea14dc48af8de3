"""Shared test helpers: every wait in the suite is bounded (a hang fails, never blocks CI)."""

import threading

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
