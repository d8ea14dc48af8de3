"""Trace tools on a million-command trace: write, read, export, plot, stats, diff (BENCHMARKS.md).

Two synthetic traces (``halsim.trace_tools.synth``: ``--ops`` execute operations of ``--commands``
fills each, round-robin over 8 queues, chained across queues; B's durations are 2 % longer) are
written with ``Trace.save``; then each tool runs as the ``halsim`` command in its own child process,
so its seconds are end to end (load, index, work, write) and its peak RSS is its own. "read" is the
load and index alone (every tool starts with it).

    .venv/bin/python benchmarks/trace_io.py                  # 100,000 ops x 10 commands = 1M commands
    .venv/bin/python benchmarks/trace_io.py --ops 10000      # smoke run (100k commands)

Targets (issue 5): export <= 60 s, plot <= 30 s, diff of two 1M-command traces <= 60 s, peak RSS <= 2 GB.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from halsim.trace_tools.synth import synthetic_trace  # noqa: E402


READ = ("import sys; from halsim.trace_tools.model import TraceIndex, load; "
        "ix = TraceIndex.of(load(sys.argv[1])); print(len(ix.ops), ix.cmd_count)")


def child(args: list[str]) -> tuple[float, float, int]:
    """Run ``python -m halsim.cli ARGS`` (or ``python -c READ PATH``); (seconds, peak RSS MiB, exit status)."""
    t = time.perf_counter()
    argv = ["-c", READ, args[1]] if args[0] == "read" else ["-m", "halsim.cli", *args]
    proc = subprocess.Popen([sys.executable, *argv], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"halsim {' '.join(args)} failed: {proc.stderr.read().decode()}")
    return seconds, usage.ru_maxrss / 1024, proc.returncode


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", type=int, default=100_000)
    p.add_argument("--commands", type=int, default=10, help="commands per operation")
    p.add_argument("--queues", type=int, default=8)
    p.add_argument("--dir", help="work directory (default: a temporary one, removed afterwards)")
    args = p.parse_args()
    tmp = tempfile.TemporaryDirectory(dir=args.dir) if args.dir is None else None
    d = tmp.name if tmp else args.dir
    os.makedirs(d, exist_ok=True)
    a, b = os.path.join(d, "a.trace.json"), os.path.join(d, "b.trace.json")
    rows = []

    t = time.perf_counter()
    trace = synthetic_trace(args.ops, args.commands, args.queues)
    made = time.perf_counter() - t
    t = time.perf_counter()
    trace.save(a)
    rows.append(("write (Trace.save)", time.perf_counter() - t, None, f"{len(trace):,} events, "
                 f"{os.path.getsize(a) / 2**20:.0f} MiB; synthesized in {made:.1f} s"))
    del trace
    synthetic_trace(args.ops, args.commands, args.queues, scale=1.02).save(b)
    rss_parent = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    steps = [
        ("read (Trace.load + TraceIndex)", ["read", a]),
        ("stats (read + stats)", ["stats", a, "--json"]),
        ("export --perfetto", ["export", a, "--perfetto", os.path.join(d, "a.pftrace")]),
        ("export --chrome", ["export", a, "--chrome", os.path.join(d, "a.chrome.json")]),
        ("plot -o a.png", ["plot", a, "-o", os.path.join(d, "a.png")]),
        ("diff a b", ["diff", a, b, "--json"]),
    ]
    for name, cmd in steps:
        seconds, rss, _rc = child(cmd)
        out = next((c for c in cmd if c.startswith(d) and c not in (a, b)), None)
        size = os.path.getsize(out) if out else 0
        note = "" if not out else f"{size / 2**20:.0f} MiB" if size >= 2**20 else f"{size / 2**10:.0f} KiB"
        rows.append((name, seconds, rss, note))

    print(f"trace tools: {args.ops:,} ops x {args.commands} commands = {args.ops * args.commands:,} commands, "
          f"{args.queues} queues; Python {platform.python_version()}, {os.cpu_count()} CPUs; "
          f"parent peak RSS {rss_parent:.0f} MiB")
    print(f"| step | seconds | peak RSS (MiB) | notes |\n|---|---|---|---|")
    for name, seconds, rss, note in rows:
        print(f"| {name} | {seconds:.1f} | {'' if rss is None else f'{rss:.0f}'} | {note} |")
    if tmp:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
