"""HAL contract: our local-task vs IREE's local-task, driven from Python (BENCHMARKS.md).

Three measurements, each implementation in its own child process (so peak RSS is its own):

(a) round trip: submit a barrier waiting on semaphore A, host-signal A, host-wait semaphore B that the
    barrier signals — the cost of submit -> signal -> host wake (median and p90 per iteration);
(b) chain: N submissions, each waiting on the previous one's signal (s >= k -> s = k+1), all submitted
    first, then one host wait for the last — total seconds and microseconds per submission, with the
    submit-only share;
(c) peak RSS of the child process (and its RSS right after setup, to show the increment).

Each measurement is repeated in fresh child processes (``--repeat``, default 5; ours and IREE
alternate which goes first) and the table shows the median over repeats with the min–max range:
IREE's local-task is bimodal from one process to the next on a small machine (its workers spin or
sleep), so one run alone misleads.

Ours uses ``queue_barrier``; IREE's Python API has no barrier, so it submits an empty command buffer
(created per submission: ~0.3 us) — IREE's own queue_barrier is the same thing. All waits are bounded.

    .venv/bin/python benchmarks/roundtrip.py            # 2,000 round trips, 10,000 chained, 5 runs each
    .venv/bin/python benchmarks/roundtrip.py --quick    # smoke run (200 / 1,000, 2 runs each)
    .venv/bin/python benchmarks/roundtrip.py --profile  # also cProfile ours (top functions by own time)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

WAIT_S = 60.0


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class Ours:
    name = "ours local-task"

    def __init__(self):
        from reference import hal

        self.hal = hal
        self.dev = hal.create_device("local-task")

    def semaphore(self):
        return self.dev.create_semaphore(0)

    def barrier(self, wait, signal):
        self.dev.queue_barrier(wait, signal)

    def signal(self, sem, v):
        sem.signal(v)

    def wait(self, sem, v):
        sem.wait(v, timeout=WAIT_S)

    def close(self):
        self.dev.close()


class Iree:
    name = "IREE local-task"

    def __init__(self):
        import iree.runtime as rt

        self.rt = rt
        self.dev = rt.get_device("local-task")

    def semaphore(self):
        return self.dev.create_semaphore(0)

    def barrier(self, wait, signal):
        cb = self.rt.HalCommandBuffer(self.dev)
        cb.end()
        self.dev.queue_execute(cb, wait, signal)

    def signal(self, sem, v):
        sem.signal(v)

    def wait(self, sem, v):
        if not sem.wait(v, timeout=int(WAIT_S * 1e9)):
            raise TimeoutError(f"wait for {v} timed out")

    def close(self):
        pass


def roundtrip(impl, iterations: int) -> list[float]:
    a, b = impl.semaphore(), impl.semaphore()
    for i in range(1, 51):  # warm-up
        impl.barrier([(a, i)], [(b, i)])
        impl.signal(a, i)
        impl.wait(b, i)
    times = []
    clock = time.perf_counter_ns
    for i in range(51, 51 + iterations):
        t0 = clock()
        impl.barrier([(a, i)], [(b, i)])
        impl.signal(a, i)
        impl.wait(b, i)
        times.append((clock() - t0) / 1e3)
    return times


def chain(impl, n: int) -> tuple[float, float]:
    s = impl.semaphore()
    t0 = time.perf_counter()
    for k in range(n):
        impl.barrier([(s, k)], [(s, k + 1)])
    t1 = time.perf_counter()
    impl.wait(s, n)
    t2 = time.perf_counter()
    return t2 - t0, t1 - t0


def child(which: str, iterations: int, chain_n: int, profile: bool) -> dict:
    impl = Ours() if which == "ours" else Iree()
    rss_setup = _rss_mib()
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    rt = roundtrip(impl, iterations)
    total, submit = chain(impl, chain_n)
    if prof is not None:
        prof.disable()
    out = {
        "name": impl.name,
        "rt_median_us": statistics.median(rt),
        "rt_p90_us": statistics.quantiles(rt, n=10)[-1],
        "chain_total_s": total,
        "chain_submit_s": submit,
        "chain_per_submit_us": total / chain_n * 1e6,
        "rss_setup_mib": rss_setup,
        "rss_peak_mib": _peak_rss_mib(),
    }
    impl.close()
    if prof is not None:
        import io
        import pstats

        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(18)
        out["profile"] = buf.getvalue()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short smoke run (200 round trips, 1,000 chained)")
    ap.add_argument("--iterations", type=int, help="round trips (default 2,000)")
    ap.add_argument("--chain", type=int, help="chained submissions (default 10,000)")
    ap.add_argument("--repeat", type=int, help="fresh child processes per implementation (default 5, quick 2)")
    ap.add_argument("--profile", action="store_true", help="cProfile our implementation and print the top")
    ap.add_argument("--child", choices=("ours", "iree"), help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true", help="print the results as JSON too")
    args = ap.parse_args(argv)
    iterations = args.iterations or (200 if args.quick else 2000)
    chain_n = args.chain or (1000 if args.quick else 10000)
    if args.child:
        print(json.dumps(child(args.child, iterations, chain_n, args.profile)))
        return 0

    repeat = args.repeat or (2 if args.quick else 5)
    runs = {"ours": [], "iree": []}
    plan = [w for r in range(repeat) for w in (("ours", "iree") if r % 2 == 0 else ("iree", "ours"))]
    if args.profile:
        plan.append("profile")  # one extra run of ours under cProfile, kept out of the figures (slower)
    profile_text = ""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for which in plan:
        profile = which == "profile"
        impl = "ours" if profile else which
        cmd = [sys.executable, os.path.abspath(__file__), "--child", impl, "--iterations", str(iterations),
               "--chain", str(chain_n)] + (["--profile"] if profile else [])
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=root)
        if proc.returncode != 0:
            print(f"{impl} failed:\n{proc.stdout}\n{proc.stderr}", file=sys.stderr)
            return 1
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        if profile:
            profile_text = res.pop("profile")
        else:
            runs[which].append(res)

    rows = [
        (f"(a) round trip, median (us, n={iterations})", "rt_median_us", "{:.1f}"),
        (f"(a) round trip, p90 (us, n={iterations})", "rt_p90_us", "{:.1f}"),
        (f"(b) {chain_n} chained submissions, total (s)", "chain_total_s", "{:.3f}"),
        ("(b)   of which submitting (s)", "chain_submit_s", "{:.3f}"),
        ("(b)   per submission (us)", "chain_per_submit_us", "{:.1f}"),
        ("(c) RSS after setup (MiB)", "rss_setup_mib", "{:.1f}"),
        ("(c) peak RSS (MiB)", "rss_peak_mib", "{:.1f}"),
    ]

    def cell(which, key, fmt):
        vals = [r[key] for r in runs[which]]
        med = statistics.median(vals)
        rng = f" [{fmt.format(min(vals))}-{fmt.format(max(vals))}]" if len(vals) > 1 else ""
        return med, fmt.format(med) + rng

    w = max(len(r[0]) for r in rows)
    cells = {key: (cell("ours", key, fmt), cell("iree", key, fmt)) for _, key, fmt in rows}
    cw = max(len(c[1]) for pair in cells.values() for c in pair)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.python_implementation()} "
          f"{platform.python_version()}, {platform.system()} {platform.release()}; "
          f"median [min-max] of {len(runs['ours'])} runs each")
    print(f"{'metric':<{w}}  {'ours':>{cw}}  {'IREE':>{cw}}  {'ours/IREE':>9}")
    for label, key, _ in rows:
        (o, otxt), (i, itxt) = cells[key]
        ratio = o / i if i else float("nan")
        print(f"{label:<{w}}  {otxt:>{cw}}  {itxt:>{cw}}  {ratio:>9.1f}")
    results = runs
    if args.json:
        print(json.dumps(results))
    if args.profile:
        print("\ncProfile of ours (round trips + chain, one extra run), top functions by own time:")
        print(profile_text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
