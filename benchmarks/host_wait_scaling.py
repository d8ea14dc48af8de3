"""A host wait on many semaphores: ``wait_semaphores(ALL)`` on N semaphores, each signalled by its own
``queue_barrier``, on the sim devices; wall time of the wait and the semaphore-history lookups it made
(BENCHMARKS.md, "Simulator throughput"). Linear since 2026-11-25 (it re-resolved the whole list at
every fired timepoint: N²/2 lookups).

    .venv/bin/python benchmarks/host_wait_scaling.py            # N = 1,000 and 4,000 on sim and sim:cuda
    .venv/bin/python benchmarks/host_wait_scaling.py 10000      # other sizes
"""

from __future__ import annotations

import sys
import time

from halsim.sim.history import SemaphoreHistory
from reference import hal


def main(sizes: list[int]) -> None:
    lookups = [0]
    reached = SemaphoreHistory.reached

    def counted(self, *args):
        lookups[0] += 1
        return reached(self, *args)

    SemaphoreHistory.reached = counted
    for uri in ("sim", "sim:cuda"):
        for n in sizes:
            with hal.create_device(uri) as dev:
                sems = [dev.create_semaphore(0) for _ in range(n)]
                for s in sems:
                    dev.queue_barrier([], [(s, 1)])
                lookups[0] = 0
                t0 = time.perf_counter()
                dev.wait_semaphores(hal.WaitMode.ALL, [(s, 1) for s in sems], 60)
                print(f"{uri:<10} N={n:<7} wait {time.perf_counter() - t0:.3f} s, "
                      f"{lookups[0]} history lookups", flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1_000, 4_000])
