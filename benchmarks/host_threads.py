"""Real time a multi-thread host program takes on the simulator: worker threads fed through a
``queue.Queue`` (or a ``ThreadPoolExecutor``) submit chains of fills and wait for them, while the main
thread waits for every item. Virtual time advances only when no host thread can call the device, so
what this measures is how quickly the simulator sees that the idle workers cannot (before 2026-11-24
it waited 100 ms of real time for each, then treated them as "stalled").

Command (the figures go in BENCHMARKS.md):

    .venv/bin/python benchmarks/host_threads.py [--devices sim,sim:cuda] [--items 40] [--workers 4]

Prints, per device and feeding mode, the real seconds, the virtual makespan and the real time per item
(``timed``: the results come back through a second ``Queue``, main waiting with a real-time timeout).
Then threads that only submit: ``--workers`` threads each making ``--calls`` chained ``queue_fill``
calls (a wait every 50) on a queue of their own — real µs per call, where host threads take turns at
device calls (``halsim/sim/host_turns.py``). Then the cost of a ``Queue.put`` + ``get`` pair on one thread, which ``reference.hal.host_sync`` wraps
process-wide once a device exists: before any device, with the wrappers installed and no device open,
and with a ``local-task`` / ``sim`` device open whose host thread the caller is (each pair traced as
two ``host_sync`` events). Run first, before any device, so the plain figure is Python's own. And the
median ``Thread.start()`` of threads started one after another, each signalling once.
"""

from __future__ import annotations

import argparse
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor


def program(uri: str, mode: str, items: int, workers: int) -> tuple[float, int]:
    from reference import hal

    dev = hal.create_device(uri)
    try:
        sems = [dev.create_semaphore() for _ in range(items)]
        buf = dev.allocator.allocate_buffer(64 * items)

        def item(i: int) -> None:
            s = sems[i]
            for k in range(3):
                dev.queue_fill([(s, k)], [(s, k + 1)], buf, 64 * i, 64, k + 1, 1)
            s.wait(2, 30.0)  # the worker waits for part of its chain

        t0 = time.perf_counter()
        if mode == "timed":  # results come back through a Queue; main waits with a real-time timeout
            todo: queue.Queue = queue.Queue()
            done: queue.Queue = queue.Queue()

            def worker() -> None:
                while (i := todo.get()) is not None:
                    item(i)
                    done.put(i)

            threads = [threading.Thread(target=worker) for _ in range(workers)]
            for t in threads:
                t.start()
            for i in range(items):
                todo.put(i)
                done.get(timeout=30.0)
            for _ in threads:
                todo.put(None)
            for t in threads:
                t.join(60)
        elif mode == "queue":
            q: queue.Queue = queue.Queue()

            def worker() -> None:
                while (i := q.get()) is not None:
                    item(i)

            threads = [threading.Thread(target=worker) for _ in range(workers)]
            for t in threads:
                t.start()
            for i in range(items):
                q.put(i)
                sems[i].wait(3, 30.0)  # main waits for each item before feeding the next
            for _ in threads:
                q.put(None)
            for t in threads:
                t.join(60)
        else:
            with ThreadPoolExecutor(workers) as pool:
                for i in range(items):
                    pool.submit(item, i)
                    sems[i].wait(3, 30.0)
        return time.perf_counter() - t0, dev.now()
    finally:
        dev.close()


def submitters(uri: str, threads: int, calls: int) -> tuple[float, int]:
    """Real µs per device call and the makespan: ``threads`` threads each submitting ``calls`` fills."""
    from reference import hal

    with hal.create_device(uri, queues=threads) as dev:
        sems = [dev.create_semaphore() for _ in range(threads)]
        bufs = [dev.allocator.allocate_buffer(64) for _ in range(threads)]

        def submit(t: int) -> None:
            for k in range(calls):
                dev.queue_fill([(sems[t], k)], [(sems[t], k + 1)], bufs[t], 0, 64, k & 0xFF, 1,
                               queue_affinity=1 << t)
                if k % 50 == 49:
                    sems[t].wait(k + 1, 30.0)

        t0 = time.perf_counter()
        workers = [threading.Thread(target=submit, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(120)
        return (time.perf_counter() - t0) / (threads * calls) * 1e6, dev.now()


def thread_start_cost(uri: str, threads: int = 200) -> float:
    """Median real ms of ``Thread.start()`` for threads started one after another, each signalling once
    (a host thread that ends: the OS reuses its ident for the next one)."""
    from reference import hal

    times = []
    with hal.create_device(uri) as dev:
        sem = dev.create_semaphore()
        for i in range(threads):
            t = threading.Thread(target=sem.signal, args=(i + 1,))
            t0 = time.perf_counter()
            t.start()
            times.append(time.perf_counter() - t0)
            t.join(30)
    return sorted(times)[len(times) // 2] * 1e3


def handoff_cost(pairs: int = 200_000) -> list[tuple[str, float]]:
    """µs per Queue.put + get on the calling thread in each state (see the module docstring)."""
    from reference import hal

    def per_pair() -> float:
        q = queue.Queue()
        put, get = q.put, q.get
        t0 = time.perf_counter()
        for i in range(pairs):
            put(i)
            get()
        return (time.perf_counter() - t0) / pairs * 1e6

    out = [("no wrappers (no device created yet)", per_pair())]
    hal.create_device("local-task").close()  # installs the wrappers
    out.append(("wrapped, no device open", per_pair()))
    for uri in ("local-task", "sim"):
        with hal.create_device(uri) as dev:
            dev.create_semaphore()  # the caller becomes a host thread: every pair is traced
            out.append((f"wrapped, traced on {uri}", per_pair()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devices", default="sim,sim:cuda", help="comma-separated sim devices (default: %(default)s)")
    ap.add_argument("--items", type=int, default=40, help="work items fed to the workers (default: %(default)s)")
    ap.add_argument("--workers", type=int, default=4, help="worker threads (default: %(default)s)")
    ap.add_argument("--calls", type=int, default=2000, help="fills per submitting thread (default: %(default)s)")
    args = ap.parse_args()
    costs = handoff_cost()
    print(f"{'device':12} {'mode':6} {'real s':>8} {'ms/item':>8} {'makespan ns':>14}")
    for uri in args.devices.split(","):
        for mode in ("queue", "pool", "timed"):
            real, now = program(uri, mode, args.items, args.workers)
            print(f"{uri:12} {mode:6} {real:8.3f} {1e3 * real / args.items:8.2f} {now:14,}")
    print(f"\n{args.workers} threads submitting {args.calls} fills each (real µs per call):")
    for uri in args.devices.split(","):
        us, now = submitters(uri, args.workers, args.calls)
        print(f"  {uri:12} {us:7.1f}   makespan {now:,} ns")
    print("\nThread.start() of short-lived host threads (median ms):")
    for uri in ["local-task"] + args.devices.split(","):
        print(f"  {uri:12} {thread_start_cost(uri):7.3f}")
    print("\nQueue.put + get on one thread (µs per pair):")
    for what, us in costs:
        print(f"  {what:38} {us:6.2f}")


if __name__ == "__main__":
    main()
