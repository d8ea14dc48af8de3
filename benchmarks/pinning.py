"""CPU pinning for the benchmarks that time PoCL (``calibration/run.py``, ``backend_overhead.py``)."""

from __future__ import annotations

import os


def pin_cpus(pocl_threads: int) -> str | None:
    """Give PoCL's compute threads CPUs of their own: PoCL pins its threads to the first CPUs
    (``POCL_AFFINITY``, read when it starts) and this process — the host program, the engine's worker
    and completion threads, all started later — keeps the others. Unpinned, on 2 CPUs the scheduler
    sometimes ran them on one CPU for a whole experiment: the held-out error was then 18-20 % instead
    of 3-8 % (docs/accuracy.md). Returns what was pinned, or None when there are too few CPUs."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if not pocl_threads or len(cpus) <= pocl_threads:
        return None
    os.environ["POCL_AFFINITY"] = "1"
    host = set(cpus[pocl_threads:])
    os.sched_setaffinity(0, host)
    return f"PoCL on CPU {','.join(map(str, cpus[:pocl_threads]))}, host threads on CPU {','.join(map(str, sorted(host)))}"
