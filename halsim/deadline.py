"""A real-time limit for host programs run from the command line (``--timeout`` of ``halsim run``
and ``halsim difftest``).

The simulator reports deadlocks by itself, but a program on ``local-task`` or a real backend that
waits for a value nobody signals waits forever (as IREE's drivers do). With a limit the program runs
on a thread of its own; when the limit passes, :class:`ProgramTimeout` says where every thread is
(the HAL call or Python wait it is in, and the program's line), and the command exits — the stuck
threads cannot be stopped, so it leaves through :func:`os._exit` once its output is flushed.

>>> run_with_timeout(lambda: 42, 5.0)
42
>>> import threading
>>> never = threading.Event()
>>> try:
...     run_with_timeout(lambda: never.wait(), 0.05)
... except ProgramTimeout as e:
...     print(e.seconds, "|", e.threads[0])
0.05 | thread 'halsim program': in Event.wait at <doctest halsim.deadline[3]>:2
>>> never.set()
"""

from __future__ import annotations

import os
import sys
import threading

from .sim.host_waits import describe

# What counts as "the library" in a thread's stack: the HAL and its devices, and Python's waits.
LIBRARY = ("reference", "halsim", "real_backends", "threading", "queue", "concurrent.futures", "simpy")
EXIT_TIMEOUT = 124  # as coreutils' timeout(1)


class ProgramTimeout(Exception):
    """The program did not return within ``seconds`` of real time; ``threads`` lists where each
    live thread was then ("thread NAME: in API at file:line")."""

    def __init__(self, seconds: float, threads: list[str]):
        self.seconds = seconds
        self.threads = threads
        super().__init__(f"did not finish within {seconds:g} s of real time")

    def report(self, what: str, then: str = "") -> list[str]:
        """The lines a command prints: "WHAT did not finish ...THEN; its threads were:", then one
        indented line per thread."""
        return [f"{what} {self}{then}; its threads were:"] + [f"  {line}" for line in self.threads]


def timeout_problem(seconds: float | None) -> str | None:
    """What is wrong with a ``--timeout`` value (None: nothing; None itself means no limit)."""
    if seconds is not None and not seconds > 0:
        return f"--timeout {seconds:g}: must be > 0 seconds"
    return None


def run_with_timeout(fn, seconds: float | None):
    """``fn()``, or ProgramTimeout when it has not returned after ``seconds`` (None: no limit; run
    on the calling thread). ``fn``'s exception, if it raises, is raised here."""
    if seconds is None:
        return fn()
    box: dict = {}

    def target():
        try:
            box["result"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller as is
            box["error"] = e

    thread = threading.Thread(target=target, name="halsim program", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise ProgramTimeout(seconds, where_threads(skip=threading.current_thread()))
    if "error" in box:
        raise box["error"]
    return box.get("result")


def where_threads(skip=None) -> list[str]:
    """"thread NAME: in API at file:line" for every live thread but ``skip``, the program's first (a
    schedule's threads also name the step they run: ``halsim_step``, set by the schedule runner)."""
    frames = sys._current_frames()
    threads = sorted((t for t in threading.enumerate() if t is not skip and t.ident in frames),
                     key=lambda t: t.name != "halsim program")
    return [f"thread {t.name!r}: in {describe(frames[t.ident], LIBRARY)}"
            + (f", at schedule step {t.halsim_step}" if getattr(t, "halsim_step", None) else "")
            for t in threads]


def exit_now(code: int) -> None:
    """Leave the process although threads are stuck (their waits would hold up interpreter exit)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
