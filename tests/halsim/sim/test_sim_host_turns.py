"""Host threads run one at a time (``halsim/sim/host_turns.py``): the same multi-threaded program
gives the same trace bytes in every run — threads released at one instant, a worker pool fed through a
``Queue``, a pool's shutdown — and a thread the gate cannot see leave holds the others back only
briefly (STALL_S), never forever."""

import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from halsim.sim import host
from reference import hal
from tests.conftest import WAIT, join

RUNS = 8
ROOT = str(Path(__file__).resolve().parents[3])  # the repository root


def trace_bytes(dev, path) -> bytes:
    dev.trace.save(path)
    return path.read_bytes()


def released_together(dev) -> None:
    """Four threads wait for one value, then each traces several calls (their records race without
    turns)."""
    go = dev.create_semaphore()
    mine = [dev.create_semaphore() for _ in range(4)]
    buf = dev.allocator.allocate_buffer(256)

    def worker(i):
        go.wait(1, WAIT)
        for k in range(3):
            dev.queue_fill([(mine[i], k)], [(mine[i], k + 1)], buf, 64 * i, 64, 16 * i + k, 1)
        mine[i].wait(3, WAIT)
        buf.map_read(64 * i, 64)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    dev.sleep(0.001)
    dev.queue_barrier([], [(go, 1)])
    for t in threads:
        join(t)


def queue_fed_pool(dev, timeout=None) -> None:
    """Three workers take items from a Queue (which worker gets which item is up to whoever waits
    first) and hand results back through another (main waits with a real-time ``timeout``, or not)."""
    todo, done = queue.Queue(), queue.Queue()
    buf = dev.allocator.allocate_buffer(64 * 8)
    sems = [dev.create_semaphore() for _ in range(8)]

    def worker():
        while (i := todo.get()) is not None:
            dev.queue_fill([], [(sems[i], 1)], buf, 64 * i, 64, i + 1, 1)
            sems[i].wait(1, WAIT)
            done.put(i)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for i in range(8):
        todo.put(i)
    got = sorted(done.get(timeout=timeout) for _ in range(8))
    assert got == list(range(8))
    for _ in threads:
        todo.put(None)
    for t in threads:
        join(t)


def queue_fed_pool_timed(dev) -> None:
    queue_fed_pool(dev, timeout=WAIT)


def executor(dev) -> None:
    """A ThreadPoolExecutor whose shutdown joins its threads in the order of a set (by address)."""
    sems = [dev.create_semaphore() for _ in range(6)]

    def item(i):
        dev.queue_barrier([], [(sems[i], 1)])
        sems[i].wait(1, WAIT)
        return i

    with ThreadPoolExecutor(4) as pool:
        assert [f.result(WAIT) for f in [pool.submit(item, i) for i in range(6)]] == list(range(6))


@pytest.mark.parametrize("program", [released_together, queue_fed_pool, queue_fed_pool_timed, executor])
@pytest.mark.parametrize("uri", ["sim", "sim:cuda", "sim:metal"])
def test_a_multithreaded_program_gives_the_same_trace_bytes_every_run(uri, program, tmp_path):
    traces = set()
    for _ in range(RUNS):
        with hal.create_device(uri, queues=4) as dev:
            program(dev)
        traces.add(trace_bytes(dev, tmp_path / "t.json"))
    assert len(traces) == 1


def test_threads_released_at_one_instant_go_in_index_order():
    with hal.create_device("sim") as dev:
        released_together(dev)
    waits = [e for e in dev.trace.events("host_wait") if e["wait"][0][0] == "s0"]
    assert [e["thread"] for e in waits] == [1, 2, 3, 4]
    assert len({e["t"] for e in waits}) == 1  # one instant


def test_a_pool_shutdown_joins_are_traced_in_the_order_of_the_joined_threads():
    with hal.create_device("sim") as dev:
        executor(dev)
    joins = [e["joined"] for e in dev.trace.events("host_join") if e["thread"] == 0]
    assert joins == [1, 2, 3, 4]


@pytest.mark.parametrize("registered", [True, False], ids=["registered", "new thread"])
def test_a_thread_computing_without_device_calls_holds_the_others_back_only_until_it_stalls(registered):
    with hal.create_device("sim") as dev:
        sem = dev.create_semaphore()
        started = threading.Event()
        stop = []

        def spin():
            if registered:
                sem.signal(1)  # a device call: a host thread of the device from now on
            started.set()
            while not stop:  # pure Python: no device call, no recognised wait
                pass

        t = threading.Thread(target=spin)
        t.start()
        assert started.wait(WAIT)
        start = time.monotonic()
        for i in range(20):
            sem.signal(i + 2)
        elapsed = time.monotonic() - start
        stop.append(True)
        join(t)
        assert (dev.threads.record_of(t) is not None) == registered
    assert elapsed < host.STALL_S + 0.5  # held back once, until the spinner counted as stalled


def test_a_thread_blocked_on_a_lock_the_caller_holds_does_not_hang_it():
    """A plain Lock's wait is not recognised: the thread waiting for it counts as running until it
    stalls; the holder's device call then goes on."""
    with hal.create_device("sim") as dev:
        sem = dev.create_semaphore()
        lock = threading.Lock()
        ready = threading.Event()

        def other():
            sem.signal(1)  # registers
            ready.set()
            with lock:
                sem.signal(100)

        with lock:
            t = threading.Thread(target=other)
            t.start()
            assert ready.wait(WAIT)
            time.sleep(0.01)  # (real time: it now waits for the lock)
            for i in range(5):
                sem.signal(i + 2)
        join(t)
        assert sem.query() == 100


def test_halsim_run_of_a_worker_pool_writes_the_same_file_in_separate_processes(tmp_path):
    """End to end, across processes with different hash seeds: the same trace file."""
    import os
    import subprocess
    import sys

    prog = tmp_path / "pool.py"  # (the pool above; run from the repository root, as pytest is)
    prog.write_text("from tests.halsim.sim.test_sim_host_turns import queue_fed_pool_timed as main\n")
    files = []
    for seed in ("1", "2", "3"):
        out = tmp_path / f"t{seed}.json"
        r = subprocess.run([sys.executable, "-m", "halsim.cli", "run", str(prog), "--device", "sim:cuda",
                            "--trace", str(out)], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONHASHSEED": seed}, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        files.append(out.read_bytes())
    assert files[0] == files[1] == files[2]
    assert b'"via":"Queue.put"' in files[0]  # (the hand-offs are in it)
