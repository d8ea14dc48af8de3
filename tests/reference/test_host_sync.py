"""reference.hal.host_sync: Python hand-offs between host threads traced as host_sync pairs, with
exact ids, threads and roles; each item's token follows that item through FIFO and LIFO queues."""

import queue
import threading
from concurrent.futures import Future

import pytest

from reference import hal
from tests.conftest import WAIT, join


def syncs(dev, starts: bool = False) -> list:
    """The host_sync events, as (thread, role, sync, via); without Thread.start's unless ``starts``."""
    return [(e["thread"], e["role"], e["sync"], e["via"]) for e in dev.trace.events("host_sync")
            if starts or e["via"] != "Thread.start"]


def in_thread(fn, *args) -> None:
    t = threading.Thread(target=fn, args=args)
    t.start()
    join(t)


def test_each_queue_item_carries_its_own_release_fifo_and_lifo():
    with hal.create_device("local-task") as dev:
        dev.create_semaphore()                                     # main: host thread 0
        fifo, lifo = queue.Queue(), queue.LifoQueue()
        # (each Thread.start takes an id first)
        in_thread(lambda: (dev.create_semaphore(), fifo.put("a"), lifo.put("a")))  # thread 1: ids 1, 2
        in_thread(lambda: (dev.create_semaphore(), fifo.put("b"), lifo.put("b")))  # thread 2: ids 4, 5
        assert [fifo.get(timeout=WAIT), fifo.get(timeout=WAIT)] == ["a", "b"]
        assert [lifo.get(timeout=WAIT), lifo.get(timeout=WAIT)] == ["b", "a"]
        assert syncs(dev)[4:] == [(0, "acquire", 1, "Queue.get"), (0, "acquire", 4, "Queue.get"),
                                  (0, "acquire", 5, "LifoQueue.get"), (0, "acquire", 2, "LifoQueue.get")]


def test_items_put_before_any_release_keep_the_tokens_aligned():
    q = queue.Queue()
    q.put("old")                                                  # no device yet: no token
    with hal.create_device("local-task") as dev:
        dev.create_semaphore()
        q.put("new")                                              # release 0, by thread 0
        in_thread(lambda: (dev.create_semaphore(), q.get(timeout=WAIT), q.get(timeout=WAIT)))
        assert syncs(dev) == [(0, "release", 0, "Queue.put"), (1, "acquire", 0, "Queue.get")]


def test_a_receiver_that_has_not_called_the_device_gets_the_acquire_at_its_first_call():
    with hal.create_device("local-task") as dev:
        dev.create_semaphore()
        ev = threading.Event()
        ev.set()                                                  # release 0 by thread 0

        def receiver():
            assert ev.wait(WAIT)                                  # not a host thread yet
            assert syncs(dev) == [(0, "release", 0, "Event.set")]
            dev.create_semaphore()                                # now thread 1: the acquire
        in_thread(receiver)
        assert syncs(dev) == [(0, "release", 0, "Event.set"), (1, "acquire", 0, "Event.wait")]


def test_hand_offs_by_threads_that_never_called_the_device_are_not_traced():
    with hal.create_device("local-task") as dev:
        q = queue.Queue()
        in_thread(q.put, 1)                                       # not a host thread: no release
        dev.create_semaphore()
        assert q.get(timeout=WAIT) == 1
        f = Future()
        in_thread(f.set_result, 2)
        assert f.result(WAIT) == 2
        assert syncs(dev) == []


def test_a_future_failed_or_timed_out():
    with hal.create_device("local-task") as dev:
        dev.create_semaphore()
        f, g = Future(), Future()
        f.set_exception(ValueError("x"))                          # release 0
        assert isinstance(f.exception(WAIT), ValueError)          # acquire 0
        try:
            g.result(0.01)                                        # times out: no acquire
        except TimeoutError:
            pass
        assert syncs(dev) == [(0, "release", 0, "Future.set_exception"), (0, "acquire", 0, "Future.exception")]


def test_nothing_is_traced_on_a_closed_device_and_a_wrapped_call_behaves_as_before():
    dev = hal.create_device("local-task")
    dev.create_semaphore()
    dev.close()
    q = queue.Queue(maxsize=1)
    q.put(1)
    try:
        q.put(2, timeout=0.01)
    except queue.Full:
        pass
    assert q.get_nowait() == 1 and q.empty()
    ev = threading.Event()
    assert ev.wait(0.01) is False
    assert syncs(dev) == []
    assert queue.Queue.get.__wrapped__.__module__ == "queue"


def test_a_subclass_keeps_its_order_recorded_unless_it_brings_its_own():
    class Plain(queue.Queue):
        pass

    class Mine(queue.Queue):
        def _get(self):
            return self.queue.pop()  # its own order: not followed

    with hal.create_device("local-task") as dev:
        dev.create_semaphore()
        plain, mine, prio = Plain(), Mine(), queue.PriorityQueue()
        for q in (plain, mine, prio):
            q.put(1)
            q.get(timeout=WAIT)
        assert syncs(dev) == [(0, "release", 0, "Plain.put"), (0, "acquire", 0, "Plain.get")]


@pytest.mark.parametrize("uri", ["local-task", "sim"])
def test_starting_threads_after_host_threads_ended_makes_no_dummy_threads(uri, monkeypatch):
    """Thread.start's Event.set runs in the new thread before threading knows it; with a dead host
    thread's ident reused, the hand-off wrapper's lookup used to call threading.current_thread(),
    which made a _DummyThread, whose own Event.set came back — a hundred levels, ~1 ms per start."""
    made = []
    init = threading._DummyThread.__init__

    def counting(self, *args, **kwargs):
        made.append(1)
        init(self, *args, **kwargs)

    with hal.create_device(uri) as dev:
        sem = dev.create_semaphore()
        monkeypatch.setattr(threading._DummyThread, "__init__", counting)
        for i in range(20):  # sequential threads: the OS reuses the idents of the ended ones
            t = threading.Thread(target=sem.signal, args=(i + 1,))
            t.start()
            join(t)
        assert sem.query() == 20
    assert made == []


def test_thread_start_is_a_release_and_the_started_threads_first_call_its_acquire():
    with hal.create_device("local-task") as dev:
        in_thread(lambda: None)                                   # main is no host thread yet: nothing
        dev.create_semaphore()                                    # main: host thread 0
        in_thread(lambda: None)                                   # a child that never calls the device
        in_thread(dev.create_semaphore)                           # thread 1: its acquire at that call
        assert syncs(dev, starts=True) == [(0, "release", 0, "Thread.start"), (0, "release", 1, "Thread.start"),
                                           (1, "acquire", 1, "Thread.start")]


def test_a_hand_off_inside_a_host_calls_function_is_the_host_calls():
    with hal.create_device("local-task") as dev:
        s = dev.create_semaphore()
        q = queue.Queue()
        dev.queue_host_call([], [(s, 1)], lambda args, ctx: q.put("x"))
        s.wait(1, WAIT)
        assert q.get(timeout=WAIT) == "x"
        assert [(e["thread"], e.get("op"), e["role"], e["sync"], e["via"])
                for e in dev.trace.events("host_sync")] == [(None, "0:0", "release", 0, "Queue.put"),
                                                            (0, None, "acquire", 0, "Queue.get")]
