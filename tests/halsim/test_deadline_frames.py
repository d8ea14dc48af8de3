"""The thread reports of ``halsim.deadline`` (``--timeout`` expiry, threads left running) keep no
frames alive: ``sys._current_frames()`` holds the reporting frame itself, a cycle that kept every
thread's locals until the cyclic GC."""

import threading
import weakref

import pytest

from halsim.deadline import leftover_threads, where_threads


class Payload:
    pass


@pytest.mark.parametrize("report", ["where_threads", "leftover_threads"])
def test_a_thread_report_keeps_no_frames(no_gc, report):
    go, started, seen = threading.Event(), threading.Event(), []

    def body():
        payload = Payload()
        seen.append(weakref.ref(payload))
        started.set()
        assert go.wait(10)

    before = set(threading.enumerate())
    t = threading.Thread(target=body, name="reported")
    t.start()
    assert started.wait(10)
    lines = where_threads() if report == "where_threads" else leftover_threads(before, grace=0.0)
    assert any(line.startswith("thread 'reported': in ") for line in lines), lines
    go.set()
    t.join(10)
    assert not t.is_alive()
    assert seen[0]() is None  # the thread's frame, and its payload, went with it
