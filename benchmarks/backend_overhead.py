"""Per-submission overhead of the ``opencl`` backend against raw pyopencl doing the same enqueues (issue 6).

Two measurements, each for ours and for raw pyopencl, in one run on the same PoCL device:

* **round trip**: submit one 256-byte fill, wait on the host until it completed; repeated N times
  (ours: ``queue_fill`` signalling a timeline semaphore + ``Semaphore.wait``; raw: ``enqueue_fill_buffer``
  + ``Event.wait()``);
* **chain**: 1,000 fills each waiting on the previous one, submitted back to back, then one host wait
  (ours: each ``queue_fill`` waits for the previous semaphore value; raw: each enqueue has the previous
  event in its wait list).

Command (the figures go in BENCHMARKS.md):

    .venv/bin/python benchmarks/backend_overhead.py [--round-trips 2000] [--chain 1000] [--repeat 3] [--pin]

Unpinned, raw pyopencl's round trip moves between ~18 and ~45 µs from run to run with where the
scheduler puts PoCL's thread (on the host thread's CPU or not). ``--pin`` gives PoCL one compute
thread on CPU 0 and this process the other CPUs (as ``calibration/run.py`` does): the device then has
a core of its own, as a GPU does, and the figures repeat.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np


def ours(round_trips: int, chain: int) -> tuple[float, float]:
    from reference import hal

    with hal.create_device("opencl") as dev:
        buf = dev.allocator.allocate_buffer(256 * chain)
        s = dev.create_semaphore()
        v = 0
        for _ in range(20):  # warm up: kernels, buffers, threads
            v += 1
            dev.queue_fill([], [(s, v)], buf, 0, 256, 1, 1)
            s.wait(v, timeout=30)
        t0 = time.perf_counter()
        for _ in range(round_trips):
            v += 1
            dev.queue_fill([], [(s, v)], buf, 0, 256, 1, 1)
            s.wait(v, timeout=30)
        rt = (time.perf_counter() - t0) / round_trips
        t0 = time.perf_counter()
        for i in range(chain):
            dev.queue_fill([(s, v)], [(s, v + 1)], buf, 256 * i, 256, 2, 1)
            v += 1
        s.wait(v, timeout=60)
        ch = (time.perf_counter() - t0) / chain
    return rt, ch


def raw(round_trips: int, chain: int) -> tuple[float, float]:
    import pyopencl as cl

    from real_backends.opencl.adapter import PLATFORM, find_device

    device = find_device(PLATFORM)
    ctx = cl.Context([device])
    q = cl.CommandQueue(ctx, device, properties=cl.command_queue_properties.PROFILING_ENABLE)
    store = bytearray(256 * chain)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR, hostbuf=np.frombuffer(store, np.uint8))
    pattern = np.uint8(1)
    for _ in range(20):
        cl.enqueue_fill_buffer(q, buf, pattern, 0, 256).wait()
    t0 = time.perf_counter()
    for _ in range(round_trips):
        cl.enqueue_fill_buffer(q, buf, pattern, 0, 256).wait()
    rt = (time.perf_counter() - t0) / round_trips
    t0 = time.perf_counter()
    ev = None
    for i in range(chain):
        ev = cl.enqueue_fill_buffer(q, buf, np.uint8(2), 256 * i, 256, wait_for=[ev] if ev is not None else None)
    ev.wait()
    ch = (time.perf_counter() - t0) / chain
    return rt, ch


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--round-trips", type=int, default=2000)
    ap.add_argument("--chain", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3, help="alternate ours/raw this many times; report medians")
    ap.add_argument("--pin", action="store_true", help="one PoCL compute thread on CPU 0, this process on the "
                    "others (stable figures; needs 2 CPUs)")
    args = ap.parse_args()
    if min(args.round_trips, args.chain, args.repeat) < 1:
        ap.error("--round-trips, --chain and --repeat must be >= 1")
    if args.pin:
        from pinning import pin_cpus  # benchmarks/ is the script's directory: on sys.path

        os.environ["POCL_MAX_PTHREAD_COUNT"] = "1"  # read when PoCL starts, as POCL_AFFINITY
        pinned = pin_cpus(1)
        if pinned is None:
            ap.error("--pin needs at least 2 CPUs")
        print(pinned)
    results = {"ours": [], "raw": []}
    for _ in range(args.repeat):
        results["ours"].append(ours(args.round_trips, args.chain))
        results["raw"].append(raw(args.round_trips, args.chain))
    med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v)) for k, v in results.items()}
    print(f"{'':<10} {'round trip (us)':>16} {'chain (us/submission)':>22}")
    for k in ("ours", "raw"):
        print(f"{k:<10} {1e6 * med[k][0]:>16.1f} {1e6 * med[k][1]:>22.1f}")
    print(f"{'ratio':<10} {med['ours'][0] / med['raw'][0]:>16.2f} {med['ours'][1] / med['raw'][1]:>22.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
