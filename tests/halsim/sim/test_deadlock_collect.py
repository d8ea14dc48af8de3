"""A program that met a DeadlockError and dropped its semaphores frees them at once (reference counts,
no cyclic GC): nothing the simulator keeps — the error, its traceback's frames, its report — holds
them once the program let go of the error."""

import weakref

import pytest

import halsim
from reference import hal

SIMS = ["sim", "sim:metal", "sim:cuda", "sim:opencl", "sim:sync"]


def _released(dev) -> list[str]:
    return [e["res"] for e in dev.trace if e["ev"] == "host_release"]


def _deadlock(dev, timeout, keep: list, report: bool = False):
    """Wait for a value no one signals; append to ``keep`` the error's code, a weak reference to it
    and (``report``) its report; drop everything else."""
    s, t = dev.create_semaphore(), dev.create_semaphore()
    try:
        s.wait(1, timeout=timeout)
    except halsim.DeadlockError as e:
        keep.append((e.code.name, weakref.ref(e), e.report if report else None))
    return s.id, t.id


@pytest.mark.parametrize("uri", SIMS)
@pytest.mark.parametrize("timeout, code", [(None, "ABORTED"), (5, "DEADLINE_EXCEEDED")])
def test_semaphores_of_a_deadlocked_program_are_released_at_once(uri, timeout, code, no_gc):
    dev = hal.create_device(uri)
    kept: list = []
    ids = _deadlock(dev, timeout, kept)
    (name, error, _), = kept
    assert (name, error(), _released(dev)) == (code, None, list(ids))
    dev.close()


def test_a_report_kept_after_the_error_holds_no_semaphore(no_gc):
    dev = hal.create_device("sim")
    kept: list = []
    ids = _deadlock(dev, None, kept, report=True)
    (name, error, report), = kept
    assert (name, error(), _released(dev)) == ("ABORTED", None, list(ids))
    assert [w.sem for th in report.threads for w in th.waits] == [ids[0]]
    dev.close()
