"""Sweep-scaling benchmark (issue 8): wall time of ``run_sweep`` on 1 and 2 local workers, and the
per-point overhead of the Dask path against the local process pool.

* ``heavy``: ``--points`` generated programs of ``--size`` steps (about 1 s each on a 2-core machine),
  run in-process (``jobs=1``), on the local pool (``jobs=2``), on a running Dask ``LocalCluster``
  (2 single-thread worker processes, loopback; started before the clock starts, as a user's cluster
  would be) and with ``--dask local`` (cluster start-up included);
* ``tiny``: 200 points of 3-step programs (the test suite's sweep), on the same paths: the fixed
  per-point cost of each path.

Each parallel path runs ``--repeat`` times, interleaved, and the median wall time is reported (a
2-core machine shared with other work is noisy). Dask overhead = (Dask wall - pool wall) / pool wall,
same points, same worker count::

    .venv/bin/python benchmarks/sweep_scaling.py --points 16 --size 2500 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def timed(spec, jobs=1, dask=None) -> tuple[float, list]:
    from halsim.campaigns.sweep import read_results, run_sweep

    out = os.path.join(tempfile.mkdtemp(prefix="sweep-bench-"), "r.csv")
    t0 = time.perf_counter()
    summary = run_sweep(spec, out, jobs=jobs, dask=dask, progress=False)
    wall = time.perf_counter() - t0
    assert summary["errors"] == 0, summary
    return wall, read_results(out)[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=12)
    ap.add_argument("--size", type=int, default=2500)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from distributed import Client, LocalCluster

    from halsim.campaigns.sweep import parse_spec

    heavy = parse_spec({"program": {"generator": {"size": args.size}}, "grid": {"seed": list(range(args.points))}})
    tiny = parse_spec({"program": {"generator": {"size": 3}}, "device": {"uri": "sim:cuda"},
                       "grid": {"queues": [1, 2], "event_pool_capacity": [1, 4],
                                "cost.fill_gb_per_s": [1.0, 10.0, 100.0, 200.0, 400.0], "seed": list(range(10))}})
    print(f"machine: {os.cpu_count()} CPUs")
    for name, spec in (("heavy", heavy), ("tiny", tiny)):
        n = len(spec.points)
        one, rows1 = timed(spec, jobs=1)
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address="127.0.0.1:0")
        pools, dsks, locals_ = [], [], []
        with Client(cluster) as client:
            client.run(lambda: __import__("halsim.campaigns.sweep"))   # warm the workers' imports
            for _ in range(args.repeat):
                pool, rows2 = timed(spec, jobs=2)
                dsk, rows3 = timed(spec, dask=cluster.scheduler_address)
                local, _ = timed(spec, jobs=2, dask="local")
                pools.append(pool)
                dsks.append(dsk)
                locals_.append(local)
        cluster.close()
        pool, dsk, local = statistics.median(pools), statistics.median(dsks), statistics.median(locals_)
        strip = lambda rows: sorted((r["key"], r["makespan_ns"], r["findings"]) for r in rows)  # noqa: E731
        same = strip(rows1) == strip(rows2) == strip(rows3)
        point_s = sum(float(r["wall_s"]) for r in rows1) / n
        print(f"{name}: {n} points, mean point {point_s:.3f} s (in-process); results identical: {same}")
        print(f"  jobs=1 (in-process)        {one:7.2f} s")
        print(f"  jobs=2 (process pool)      {pool:7.2f} s   speed-up {one / pool:.2f}x   (runs: "
              f"{', '.join(f'{x:.2f}' for x in pools)})")
        print(f"  Dask, running cluster (2)  {dsk:7.2f} s   overhead vs pool {100 * (dsk - pool) / pool:+.1f}%"
              f"  ({1000 * (dsk - pool) / n:+.1f} ms/point; runs: {', '.join(f'{x:.2f}' for x in dsks)})")
        print(f"  --dask local (2, start-up) {local:7.2f} s   overhead vs pool {100 * (local - pool) / pool:+.1f}%")


if __name__ == "__main__":
    main()
