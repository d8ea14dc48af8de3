"""Run many independent tasks in-process, on a local process pool or on a Dask cluster, yielding
results as they finish (``docs/campaigns.md``).

``run_unordered(fn, shared, items, jobs=1, dask=None)`` calls ``fn(shared, item)`` for every item and
yields ``(item, result)`` in completion order. ``jobs=1`` without ``dask`` runs in this process;
``jobs > 1`` uses a ``concurrent.futures.ProcessPoolExecutor`` (forkserver workers with halsim
preloaded); ``dask="local"`` starts a ``distributed.LocalCluster`` (processes, ``jobs`` workers of one
thread each, loopback only) and ``dask="tcp://host:port"`` connects to a running scheduler. ``fn``
must be importable by name (a module-level function) and ``shared`` picklable: it is sent once per
worker (scattered on Dask), not once per task. Progress: :class:`Progress`, a tqdm-style bar on a
terminal, plain lines otherwise (also the trace tools' phases, on a terminal only).

>>> sorted(r for _item, r in run_unordered(pow, 2, [1, 2, 3]))
[2, 4, 8]
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import signal
import sys
import threading
import time


class CampaignError(Exception):
    """Bad campaign input (spec, arguments, cluster address): one line, exit status 2."""


#: Exit status of a campaign stopped by Ctrl-C (128 + SIGINT, as a shell reports it).
EXIT_INTERRUPTED = 130


class Interrupted(Exception):
    """A campaign stopped by Ctrl-C (SIGINT): one line saying what was kept, exit status
    :data:`EXIT_INTERRUPTED`. The worker processes ignore SIGINT (a Ctrl-C reaches the whole process
    group): this process alone stops, and stops them (:func:`run_unordered`)."""


class HeldInterrupts:
    """``with HeldInterrupts() as held:`` Ctrl-C (SIGINT) does not interrupt the block; afterwards
    ``held.interrupted`` says whether one came (``raise_at_exit``: raised then, as KeyboardInterrupt,
    unless the block raised). A second Ctrl-C within the block is raised at once (the user insists).

    A KeyboardInterrupt raised at an arbitrary point of the simulator or of a file write can leave a
    lock taken or half a row written; campaigns take it between tasks and writes instead. Only in
    the main thread with Python's own SIGINT handler installed (else nothing changes: an ignored
    SIGINT stays ignored)."""

    def __init__(self, raise_at_exit: bool = False):
        self.raise_at_exit, self.interrupted, self._active = raise_at_exit, False, False

    def _handler(self, signum, frame) -> None:
        if self.interrupted:
            raise KeyboardInterrupt
        self.interrupted = True

    def __enter__(self) -> "HeldInterrupts":
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            signal.signal(signal.SIGINT, self._handler)
            self._active = True
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self._active:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            self._active = False
        if self.interrupted and self.raise_at_exit and exc_type is None:
            raise KeyboardInterrupt
        return False


def run_unordered(fn, shared, items, jobs: int = 1, dask: str | None = None):
    items = list(items)
    if jobs < 1:
        raise CampaignError(f"--jobs {jobs}: must be >= 1")
    if not items:
        return
    if dask:
        yield from _run_dask(fn, shared, items, jobs, dask)
    elif jobs == 1:
        for item in items:
            with HeldInterrupts() as held:  # (a Ctrl-C ends the task in progress first)
                result = fn(shared, item)
            yield item, result
            if held.interrupted:
                raise KeyboardInterrupt
    else:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["halsim.campaigns.sweep", "halsim.campaigns.fuzz"])
        pool = concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_set_shared,
                                                      initargs=(shared,))
        try:
            futures = {pool.submit(_call_shared, fn, item): item for item in items}
            for fut in concurrent.futures.as_completed(futures):
                yield futures[fut], fut.result()
            _finish_workers(pool)
        except BaseException:
            # (Ctrl-C, a task's error, the caller stopping early): nothing more is wanted from the
            # workers, and a task in progress may run for long (a program that never returns). The
            # pool then fails the pending futures itself (BrokenProcessPool; cancelling them here
            # too races with that and makes its thread print an InvalidStateError)
            _stop_workers(pool)
            raise
        finally:
            pool.shutdown(wait=True)


_SHARED = None


def _set_shared(shared) -> None:
    """A worker's start: keep ``shared``; ignore SIGINT, which a Ctrl-C sends to the whole process
    group (the parent stops the workers itself, and a worker's KeyboardInterrupt traceback would
    say nothing)."""
    global _SHARED
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _SHARED = shared


def _stop_workers(pool) -> None:
    """Terminate ``pool``'s worker processes now (SIGTERM), not after the tasks they are running.

    A worker killed while it was writing a result leaves half a message in the result pipe, and the
    pool's management thread would wait for the rest forever (and ``shutdown`` or the interpreter's
    exit with it): once the workers are gone, this process closes its own copy of the pipe's write
    end, so that read ends (EOF), the pool counts itself broken and shuts down."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    _terminate(procs)
    writer = getattr(getattr(pool, "_result_queue", None), "_writer", None)
    if writer is not None and not any(p.is_alive() for p in procs):
        try:
            writer.close()
        except OSError:
            pass


#: How long the workers get, after the last result, to exit on their own (as ``halsim`` waits for a
#: program's leftover threads: :data:`halsim.deadline.LEFTOVER_GRACE_S`).
WORKER_EXIT_GRACE_S = 1.0


def _finish_workers(pool, grace: float = WORKER_EXIT_GRACE_S) -> None:
    """Every result is in: let the workers exit, and terminate those still alive after ``grace``
    seconds. A worker's interpreter joins the program's non-daemon threads at exit, for ever if one
    waits for a value nobody signals; an unbounded ``shutdown(wait=True)`` would hang the campaign
    on it after its last row (``halsim`` itself leaves such threads behind, README). Says so on
    stderr, in one line."""
    procs = list((getattr(pool, "_processes", None) or {}).values())  # (before shutdown forgets them)
    pool.shutdown(wait=False)
    try:
        deadline = time.monotonic() + grace
        for proc in procs:
            proc.join(max(0.0, deadline - time.monotonic()))
    except BaseException:  # (a Ctrl-C meanwhile: the pool no longer lists them, stop them here)
        _terminate(procs)
        raise
    stuck = [proc for proc in procs if proc.is_alive()]
    if stuck:
        print(f"halsim: {len(stuck)} worker process{'es' if len(stuck) != 1 else ''} still running a program "
              f"thread after the last task; stopped {'them' if len(stuck) != 1 else 'it'}", file=sys.stderr)
        _terminate(stuck)


def _terminate(procs) -> None:
    """SIGTERM each of ``procs`` and wait up to 5 s for each."""
    for proc in procs:
        try:
            proc.terminate()
        except (OSError, ValueError, AttributeError):
            pass  # (already gone)
    for proc in procs:
        try:
            proc.join(5)
        except (OSError, ValueError, AssertionError):
            pass


def _call_shared(fn, item):
    return fn(_SHARED, item)


def _run_dask(fn, shared, items, jobs, address):
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise CampaignError("--dask needs dask.distributed: pip install 'halsim[campaigns]'") from None
    cluster = None
    try:
        if address == "local":
            cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, host="127.0.0.1",
                                   dashboard_address="127.0.0.1:0")
            client = Client(cluster)
        else:
            if not address.startswith(("tcp://", "tls://", "ucx://", "inproc://")):
                raise CampaignError(f"--dask {address!r}: expected 'local' or a scheduler address tcp://host:port")
            try:
                client = Client(address, timeout="10s")
            except (OSError, TimeoutError) as e:
                raise CampaignError(f"--dask {address!r}: cannot connect to the scheduler ({e})") from None
        with client:
            remote = client.scatter(shared, broadcast=True)
            futures = {}
            for i, item in enumerate(items):
                futures[client.submit(fn, remote, item, pure=False, key=f"halsim-{fn.__name__}-{i}-{time.time_ns()}")] \
                    = item
            try:
                for fut, result in as_completed(futures, with_results=True):
                    yield futures[fut], result
            except BaseException:
                client.cancel(list(futures))
                raise
    finally:
        if cluster is not None:
            cluster.close()


class Progress:
    """``done/total`` with rate and ETA: redrawn in place on a terminal (tqdm style), else a plain line
    about every 10% of the points (and at the end). The trace tools use it for events read and items
    written: ``unit`` names what is counted; ``total=None`` draws a running count (``label: N unit``),
    ``unit=""`` the label alone; ``tty_only`` draws nothing off a terminal (no lines in pipes or logs);
    ``interval`` redraws at most once per that many seconds; :meth:`phase` starts the next phase of
    one job under a new label; ``close(clear=True)`` erases the line instead of ending it."""

    def __init__(self, total: int | None, label: str, stream=None, initial: int = 0, unit: str = "points",
                 tty_only: bool = False, interval: float = 0.0):
        self.total, self.label, self.done, self.initial = total, label, initial, initial
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.unit, self.interval, self.quiet = unit, interval, tty_only and not self.tty
        self.start = time.monotonic()
        self._next_line = initial
        self._drawn_at = self.start
        self._width = 0  # of the line drawn last (a shorter one is padded over it)

    def phase(self, label: str, total: int | None = None, unit: str = "") -> None:
        """Count afresh under ``label`` (drawn now, not throttled: phases are few)."""
        self.label, self.total, self.unit, self.done, self.initial = label, total, unit, 0, 0
        self.start = self._drawn_at = time.monotonic()
        if self.tty:
            self._draw()

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.tty:
            if self.interval:
                now = time.monotonic()
                if now - self._drawn_at < self.interval:
                    return
                self._drawn_at = now
            self._draw()
        elif self.quiet:
            return
        elif self.done >= self._next_line or self.done == self.total:
            self.stream.write(f"{self.label}: {self.done}/{self.total} {self.unit} ({self._elapsed()})\n")
            self.stream.flush()
            self._next_line = self.done + max(1, (self.total or 0) // 10)

    def _elapsed(self) -> str:
        return f"{time.monotonic() - self.start:.1f} s"

    def _draw(self) -> None:
        if self.total is None:
            text = f"{self.label}: {self.done} {self.unit}" if self.unit else self.label
        else:
            width = 25
            done = min(self.done, self.total)
            frac = done / self.total if self.total else 1.0
            bar = "█" * int(frac * width) + " " * (width - int(frac * width))
            spent = time.monotonic() - self.start
            new = done - self.initial
            rate = new / spent if spent > 0 else 0.0
            eta = (self.total - done) / rate if rate else 0.0
            per = f"{rate:.1f} pt/s" if self.unit == "points" else f"{rate:.0f} {self.unit}/s"
            text = (f"{self.label}: {100 * frac:3.0f}%|{bar}| {done}/{self.total} "
                    f"[{spent:.0f}s<{eta:.0f}s, {per}]")
        self.stream.write("\r" + text + " " * (self._width - len(text)))
        self._width = len(text)
        self.stream.flush()

    def close(self, clear: bool = False) -> None:
        if self.tty:
            if not clear:
                self.stream.write("\n")
            elif self._width:
                self.stream.write("\r" + " " * self._width + "\r")
            self._width = 0
            self.stream.flush()
