"""Fixtures shared by the command-line tests."""

import pytest


@pytest.fixture
def sleep_steps_raise(monkeypatch):
    """Schedule ``sleep`` steps raise a Python error (not a HalError), as a host call with a value
    past what a thread can wait would; every other step runs as usual."""
    from halsim.schedule import run as runner

    real_step = runner._step

    def step(env, st):
        if st["call"] == "sleep":
            raise OverflowError("timeout value is too large")
        return real_step(env, st)
    monkeypatch.setattr(runner, "_step", step)
