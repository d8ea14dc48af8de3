"""One-shot queue operations on a sim device: real µs per ``queue_fill`` (BENCHMARKS.md).

Each ``queue_fill`` is a one-shot command list: it is planned, its command registered with the trace
(``Trace.add_template``) and simulated. ``--ops`` fills of 256 bytes, each signalling the next value of
one semaphore, then one host wait; best of ``--repeat`` runs::

    .venv/bin/python benchmarks/oneshot_ops.py            # 20,000 fills on sim, best of 3
"""

from __future__ import annotations

import argparse
import time


def run(uri: str, ops: int) -> float:
    from reference import hal

    dev = hal.create_device(uri)
    try:
        b = dev.allocator.allocate_buffer(4096)
        s = dev.create_semaphore()
        t0 = time.perf_counter()
        for i in range(ops):
            dev.queue_fill([], [(s, i + 1)], b, (i % 16) * 256, 256, i & 0xFF, 1)
        s.wait(ops, timeout=10 ** 6)
        return time.perf_counter() - t0
    finally:
        dev.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="sim", help="device URI (default: %(default)s)")
    p.add_argument("--ops", type=int, default=20_000, help="queue_fill calls (default: %(default)s)")
    p.add_argument("--repeat", type=int, default=3, help="runs; the best is reported (default: %(default)s)")
    args = p.parse_args()
    best = min(run(args.device, args.ops) for _ in range(args.repeat))
    print(f"{args.ops} queue_fill on {args.device}: best {best:.3f} s, {best / args.ops * 1e6:.1f} us/op")


if __name__ == "__main__":
    main()
