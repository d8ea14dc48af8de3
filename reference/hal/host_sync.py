"""Python's own thread hand-offs as orderings the trace records (``host_sync``).

Host programs hand work and results between threads with ``queue.Queue``, ``threading.Event`` and
``concurrent.futures``: a worker fills a buffer, waits for it, puts "done" in a queue; the main
thread gets it and reads the buffer. No device call carries that edge, so without it the checks saw
the read race with the fill. While a device is open (as for ``Thread.join``,
:mod:`reference.hal.host_join`) these hand-offs are wrapped, once per process:

======================================  ======================================
release (on the giving thread)          acquire (on the receiving thread)
======================================  ======================================
``Queue.put`` / ``LifoQueue.put``       the ``get`` that returns that item
``Event.set``                           an ``Event.wait`` that returns True
``Future.set_result``/``set_exception`` ``Future.result``/``exception`` returning (or raising its error)
``Executor.submit`` (thread pools)      the work item starting on its worker
``Thread.start``                        the started thread's first device call
======================================  ======================================

A release by a host thread of an open device is traced there as ``host_sync`` (``role``
"release", a ``sync`` id of that device, ``via`` the call); the matching acquire, by a host thread
of the same device, as ``host_sync`` with ``role`` "acquire" and the same id (deferred to the
receiver's first device call if it has made none yet; always so for ``Thread.start``, whose acquire
is the started thread's first device call). Everything the giving thread did before the release
happens before what the receiving thread does after the acquire. The release is traced before the
item, flag or result becomes visible, so it always precedes its acquire in the trace.

Inside a queue host call's function (any thread running it, or a thread it hands to) the release
or acquire is the host call's: traced with ``op`` (its id) and a null ``thread``, as its buffer
accesses are — so a host call that returns ``DEFERRED`` and starts a thread to signal its semaphores
orders what it wrote before that thread's signals.

Not recorded: ``PriorityQueue`` and other ``Queue`` subclasses with their own ``_get``,
``SimpleQueue`` (C), locks, ``Condition``, ``threading.Semaphore``, ``Barrier``; a hand-off through a
thread that never called the device (it has no index) loses the edge. What is not recorded is
reported as a race if it was the only ordering — the checks never assume an ordering they did not see.

>>> import queue, threading
>>> from reference import hal
>>> dev = hal.create_device("local-task")
>>> q = queue.Queue()
>>> dev.create_semaphore() is not None                     # the main thread is host thread 0
True
>>> t = threading.Thread(target=lambda: (dev.create_semaphore(), q.put("done"))); t.start()
>>> q.get(timeout=10)
'done'
>>> t.join()
>>> [(e["thread"], e["role"], e["sync"], e["via"]) for e in dev.trace.events("host_sync")]
[(0, 'release', 0, 'Thread.start'), (1, 'acquire', 0, 'Thread.start'), (1, 'release', 1, 'Queue.put'), (0, 'acquire', 1, 'Queue.get')]
>>> dev.close()
"""

from __future__ import annotations

import queue
import threading
import weakref
from collections import deque
from concurrent.futures import _base as futures_base
from concurrent.futures import thread as futures_thread

from .host_call_context import current as _current_host_call
from .host_join import _devices

_installed = False
_local = threading.local()  # the token a Queue.put is about to store / a Queue.get just took


def _release(via: str):
    """Trace a release on every open device the calling thread is a host thread of (or whose host
    call's function it is running): the token ``((device ref, receipt), ...)`` that the matching
    acquire presents (None if none traced it)."""
    if not _devices:
        return None
    devices = list(_devices)
    op = _current_host_call() if len(devices) == 1 else None  # a host call id names no device: only with one open
    token = []
    for device in devices:
        try:
            receipt = device._host_release(via) if op is None else device._host_call_sync(op, "release", None, via)
        except Exception:  # noqa: BLE001 - tracing never breaks the program's own hand-off
            continue
        if receipt is not None:
            token.append((weakref.ref(device), receipt))
    return tuple(token) or None


def _acquire(token, via: str) -> None:
    op = _current_host_call() if token and len(_devices) == 1 else None
    for ref, receipt in token or ():
        device = ref()
        if device is not None:
            try:
                if op is None:
                    device._host_acquire(receipt, via)
                else:
                    device._host_call_sync(op, "acquire", receipt, via)
            except Exception:  # noqa: BLE001
                pass


# -- threading.Thread.start: the parent's release, the child's acquire at its first device call -----

def _wrap_thread() -> None:
    start = threading.Thread.start

    def start_wrapped(self):
        if _devices and not self._started.is_set():   # (a second start raises, as before)
            token = _release("Thread.start")
            for ref, receipt in token or ():
                device = ref()
                try:
                    # The child is no host thread of any device yet: its acquire waits for its first
                    # device call, as any acquire by a thread that has made none (Device.
                    # _thread_registered). On the simulator its clock then moves to the parent's at
                    # the start, as a receiver's does: a thread does nothing before it was started.
                    device._pending_edges.setdefault(self, []).append(("acquire", receipt, "Thread.start"))
                except Exception:  # noqa: BLE001 - tracing never breaks the program's own start
                    pass
        return start(self)

    _wrap(threading.Thread, "start", start_wrapped)


# -- queue.Queue / LifoQueue: a token per item, in a deque beside the items ---------------------------
# The tokens cover the newest len(tokens) items (items put before the wrappers existed have none), so
# a FIFO get takes a token only when every item has one, a LIFO get whenever there is one.

def _wrap_queue() -> None:
    put, get = queue.Queue.put, queue.Queue.get
    known = set()  # the _get methods whose order this module follows (FIFO, LIFO)

    def put_(self, item, block=True, timeout=None):
        if not _devices or type(self)._get not in known:  # (a PriorityQueue...: not recorded)
            return put(self, item, block, timeout)
        _local.token = _release(f"{type(self).__name__}.put")
        try:
            return put(self, item, block, timeout)
        finally:
            _local.token = None

    def get_(self, block=True, timeout=None):
        if not _devices:  # (_get_ still takes the item's token: the tokens stay aligned)
            return get(self, block, timeout)
        _local.taken = None
        item = get(self, block, timeout)
        token, _local.taken = _local.taken, None
        if token is not None:
            _acquire(token, f"{type(self).__name__}.get")
        return item

    def wrap_storage(cls, lifo: bool):
        _put, _get = cls._put, cls._get

        def _put_(self, item):
            _put(self, item)
            tokens = self.__dict__.get("_host_sync_tokens")
            token = getattr(_local, "token", None)
            if tokens is None:
                if token is None:
                    return  # (the usual case with no device open)
                tokens = self._host_sync_tokens = deque()
            tokens.append(token)
            _local.token = None

        def _get_(self):
            tokens = self.__dict__.get("_host_sync_tokens")
            if tokens and (lifo or len(tokens) == len(self.queue)):
                _local.taken = tokens.pop() if lifo else tokens.popleft()
            return _get(self)

        _wrap(cls, "_put", _put_)
        _wrap(cls, "_get", _get_)
        known.add(cls._get)

    wrap_storage(queue.Queue, lifo=False)
    wrap_storage(queue.LifoQueue, lifo=True)
    _wrap(queue.Queue, "put", put_)
    _wrap(queue.Queue, "get", get_)


def _wrap(cls, name: str, fn) -> None:
    orig = getattr(cls, name)
    fn.__wrapped__, fn.__doc__, fn.__name__ = orig, orig.__doc__, orig.__name__
    setattr(cls, name, fn)


# -- threading.Event ----------------------------------------------------------------------------------

def _wrap_event() -> None:
    set_, wait = threading.Event.set, threading.Event.wait

    def set_wrapped(self):
        token = _release("Event.set")
        if token is not None:
            self._host_sync_token = token  # before the flag: a waiter that sees it finds the token
        return set_(self)

    def wait_wrapped(self, timeout=None):
        signaled = wait(self, timeout)
        if signaled:
            _acquire(self.__dict__.get("_host_sync_token"), "Event.wait")
        return signaled

    _wrap(threading.Event, "set", set_wrapped)
    _wrap(threading.Event, "wait", wait_wrapped)


# -- concurrent.futures: results, and thread-pool work items ------------------------------------------

def _wrap_futures() -> None:
    Future = futures_base.Future
    set_result, set_exception, result, exception = (Future.set_result, Future.set_exception,
                                                    Future.result, Future.exception)

    def setter(orig, via):
        def wrapped(self, value):
            token = _release(via)
            if token is not None:
                self._host_sync_token = token
            return orig(self, value)
        return wrapped

    def getter(orig, via):
        def wrapped(self, timeout=None):
            try:
                return orig(self, timeout)
            finally:
                if not self.cancelled() and self.done():
                    _acquire(self.__dict__.get("_host_sync_token"), via)
        return wrapped

    item = futures_thread._WorkItem
    init, run = item.__init__, item.run

    def init_wrapped(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self._host_sync_token = _release("Executor.submit")

    def run_wrapped(self):
        _acquire(self.__dict__.get("_host_sync_token"), "work item start")
        return run(self)

    _wrap(Future, "set_result", setter(set_result, "Future.set_result"))
    _wrap(Future, "set_exception", setter(set_exception, "Future.set_exception"))
    _wrap(Future, "result", getter(result, "Future.result"))
    _wrap(Future, "exception", getter(exception, "Future.exception"))
    _wrap(item, "__init__", init_wrapped)
    _wrap(item, "run", run_wrapped)


def install() -> None:
    """Wrap the hand-offs (once per process; the wrappers trace nothing while no device is open)."""
    global _installed
    if _installed:
        return
    _installed = True
    _wrap_queue()
    _wrap_event()
    _wrap_futures()
    _wrap_thread()
