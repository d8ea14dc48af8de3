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


class ProgramExit(Exception):
    """The program called ``sys.exit`` with a failing status (not 0 or None): handled like a
    program that raised."""

    def __init__(self, code):
        self.code = code
        super().__init__(f"sys.exit({code!r})")


def call_program(fn, *args):
    """``fn(*args)`` with the program's ``sys.exit`` taken as the end of the program: status 0 or
    None returns None (the program finished), any other raises :class:`ProgramExit` — never the
    ``SystemExit`` that would end halsim itself with the program's status and no report.

    >>> import sys
    >>> call_program(sys.exit, 0) is None
    True
    >>> try:
    ...     call_program(sys.exit, 3)
    ... except ProgramExit as e:
    ...     print(e, e.code)
    sys.exit(3) 3
    """
    try:
        return fn(*args)
    except SystemExit as e:
        if e.code is None or e.code == 0:
            return None
        raise ProgramExit(e.code) from None


def timeout_problem(seconds: float | None) -> str | None:
    """What is wrong with a ``--timeout`` value (None: nothing; None itself means no limit). Values
    past what a thread can wait for (``inf``, ``1e10``) mean no limit (:func:`run_with_timeout`)."""
    if seconds is not None and not seconds > 0:
        return f"--timeout {seconds:g}: must be > 0 seconds"
    return None


def run_with_timeout(fn, seconds: float | None):
    """``fn()``, or ProgramTimeout when it has not returned after ``seconds`` (None, or more than
    ``threading.TIMEOUT_MAX``: no limit; run on the calling thread). ``fn``'s exception, if it
    raises, is raised here."""
    if seconds is None or not seconds <= threading.TIMEOUT_MAX:
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
    try:
        return [f"thread {t.name!r}: in {describe(frames[t.ident], LIBRARY)}"
                + (f", at schedule step {t.halsim_step}" if getattr(t, "halsim_step", None) else "")
                for t in threads]
    finally:
        frames.clear()  # (it holds this very frame: a cycle keeping every thread's locals until the GC)


def exit_now(code: int) -> None:
    """Leave the process although threads are stuck (their waits would hold up interpreter exit)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


#: How long a command waits, after its work, for threads the program started and left running.
LEFTOVER_GRACE_S = 1.0


def leftover_threads(before, grace: float = LEFTOVER_GRACE_S) -> list[str]:
    """Non-daemon threads started since ``before`` (a set of threads) that are still alive after
    waiting up to ``grace`` seconds for them in all: "thread NAME: in API at file:line" each.
    Python would wait for them at exit, for ever if they wait for a value nobody signals."""
    import time

    deadline = time.monotonic() + grace
    late = [t for t in threading.enumerate() if t not in before and not t.daemon and t.is_alive()
            and t is not threading.current_thread()]
    for t in late:
        t.join(max(0.0, deadline - time.monotonic()))
    late = [t for t in late if t.is_alive()]
    if not late:
        return []
    frames = sys._current_frames()
    try:
        return [f"thread {t.name!r}: in {describe(frames[t.ident], LIBRARY)}" if t.ident in frames
                else f"thread {t.name!r}" for t in late]
    finally:
        frames.clear()  # (as in where_threads)
