"""Simulator throughput: simulated commands per second and peak RSS (BENCHMARKS.md, issue #3).

The schedule: ``--submissions`` queue_execute calls (default 100,000) of a reusable command buffer of
``--commands`` fills (default 10, so 1,000,000 commands) over ``--queues`` hardware queues (default 8),
round robin. Submission i on queue q = i mod Q waits for the previous submission on its own queue and
for submission i-1 (on the neighbouring queue) through timeline semaphores, and signals its queue's
semaphore — so the whole schedule is one chain across queues, everything is submitted before the
first host wait (wait-before-signal), and the host then waits once for every queue's last value.

Three implementations of that schedule, each in its own child process (so peak RSS is its own):

* ``ours``: the HAL program on a sim device (``sim``, ``sim:cuda``; ``--devices``), trace recorded;
* ``simpy``: the plain SimPy model a user would write: a process per submission that waits for its
  two predecessors' events, takes its queue (a ``simpy.Resource``), yields one timeout per command
  and succeeds its own event — same durations as our default cost model for a 256-byte fill;
* ``heapq``: the floor — a bare heapq event loop over the same per-command completion events.

The rate is commands / wall seconds of the whole run (building the schedule included); ours also
reports the submitting share. Commands:

    .venv/bin/python benchmarks/sim_throughput.py              # the full 1,000,000-command schedule
    .venv/bin/python benchmarks/sim_throughput.py --quick      # 100,000 commands (smoke run)
"""

from __future__ import annotations

import argparse
import heapq
import json
import platform
import resource
import subprocess
import sys
import time

FILL_BYTES = 256


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _fill_ns() -> int:
    from halsim.sim.cost_model import CostModel

    return CostModel().transfer_ns("fill", FILL_BYTES)


def run_ours(uri: str, submissions: int, commands: int, queues: int) -> dict:
    from reference import hal

    t0 = time.perf_counter()
    dev = hal.create_device(uri, queues=queues)
    sems = [dev.create_semaphore(0) for _ in range(queues)]
    cbs = []
    for q in range(queues):
        buf = dev.allocator.allocate_buffer(FILL_BYTES * commands)
        cb = dev.create_command_buffer(0, hal.CommandCategory.TRANSFER, queue_affinity=1 << q)
        cb.begin()
        for c in range(commands):
            cb.fill_buffer(hal.BufferRef(buf, c * FILL_BYTES, FILL_BYTES), c & 0xFF, 1)
        cb.end()
        cbs.append(cb)
    done = [0] * queues
    for i in range(submissions):
        q = i % queues
        wait = [(sems[q], done[q])]
        if i:
            p = (i - 1) % queues
            wait.append((sems[p], done[p]))
        dev.queue_execute(wait, [(sems[q], done[q] + 1)], cbs[q], queue_affinity=1 << q)
        done[q] += 1
    t1 = time.perf_counter()
    dev.wait_semaphores(hal.WaitMode.ALL, [(s, v) for s, v in zip(sems, done)], timeout=10 ** 6)
    t2 = time.perf_counter()
    makespan = dev.now()
    events = len(dev.trace)
    dev.close()
    return {"seconds": t2 - t0, "submit_s": t1 - t0, "makespan_ns": makespan, "trace_events": events}


def run_simpy(submissions: int, commands: int, queues: int) -> dict:
    import simpy

    fill = _fill_ns()
    t0 = time.perf_counter()
    env = simpy.Environment()
    lanes = [simpy.Resource(env, capacity=1) for _ in range(queues)]
    finished: list[simpy.Event] = []
    last_on: list[simpy.Event | None] = [None] * queues

    def submission(q, deps, me):
        for dep in deps:
            yield dep
        with lanes[q].request() as req:
            yield req
            for _ in range(commands):
                yield env.timeout(fill)
        me.succeed()

    for i in range(submissions):
        q = i % queues
        deps = [d for d in (last_on[q], finished[-1] if finished else None) if d is not None]
        me = env.event()
        env.process(submission(q, deps, me))
        finished.append(me)
        last_on[q] = me
    env.run()
    return {"seconds": time.perf_counter() - t0, "makespan_ns": env.now}


def run_heapq(submissions: int, commands: int, queues: int) -> dict:
    fill = _fill_ns()
    t0 = time.perf_counter()
    heap: list = []
    seq = 0
    end_of = [0] * submissions
    # Submission i can start when submission i-1 ended (it waits for it, and i-1 waited for every
    # earlier one); each command is one completion event pushed and popped in time order.
    start = 0
    for i in range(submissions):
        t = start
        for _ in range(commands):
            t += fill
            heapq.heappush(heap, (t, seq, i))
            seq += 1
        end_of[i] = t
        start = t
    now = 0
    while heap:
        now, _, _ = heapq.heappop(heap)
    return {"seconds": time.perf_counter() - t0, "makespan_ns": now}


def child(args) -> None:
    if args.impl == "ours":
        out = run_ours(args.device, args.submissions, args.commands, args.queues)
    elif args.impl == "simpy":
        out = run_simpy(args.submissions, args.commands, args.queues)
    else:
        out = run_heapq(args.submissions, args.commands, args.queues)
    out["peak_rss_mib"] = _peak_rss_mib()
    print(json.dumps(out))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--submissions", type=int, default=100_000, help="queue_execute calls (default 100000)")
    ap.add_argument("--commands", type=int, default=10, help="fills per command buffer (default 10)")
    ap.add_argument("--queues", type=int, default=8, help="hardware queues (default 8)")
    ap.add_argument("--devices", default="sim,sim:cuda", help="sim devices to run (default sim,sim:cuda)")
    ap.add_argument("--quick", action="store_true", help="10,000 submissions (100,000 commands)")
    ap.add_argument("--impl", choices=("ours", "simpy", "heapq"), help=argparse.SUPPRESS)
    ap.add_argument("--device", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.submissions = 10_000
    if min(args.submissions, args.commands, args.queues) < 1:
        ap.error("--submissions, --commands and --queues must be >= 1")
    if args.impl:
        child(args)
        return 0

    from reference import hal

    available = {d.uri for d in hal.available_devices()}
    runs = [("ours", d) for d in args.devices.split(",") if d]
    for _, d in runs:
        if d not in available:
            ap.error(f"device {d!r} is not registered (available: {', '.join(sorted(available))})")
    runs += [("simpy", None), ("heapq", None)]
    total = args.submissions * args.commands
    print(f"machine: {platform.machine()}, CPython {platform.python_version()}, {platform.system()} "
          f"{platform.release()}; {args.submissions} submissions x {args.commands} commands = {total} "
          f"commands over {args.queues} queues")
    print(f"{'implementation':<22}{'wall (s)':>10}{'commands/s':>13}{'submit (s)':>12}{'peak RSS MiB':>14}"
          f"{'makespan (ns)':>16}")
    for impl, device in runs:
        cmd = [sys.executable, __file__, "--impl", impl, "--submissions", str(args.submissions),
               "--commands", str(args.commands), "--queues", str(args.queues)]
        if device:
            cmd += ["--device", device]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        if proc.returncode:
            print(f"{impl} {device or ''}: failed\n{proc.stderr}", file=sys.stderr)
            return 1
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        name = f"{impl} {device}" if device else impl
        submit = f"{r['submit_s']:.2f}" if "submit_s" in r else "-"
        print(f"{name:<22}{r['seconds']:>10.2f}{total / r['seconds']:>13,.0f}{submit:>12}"
              f"{r['peak_rss_mib']:>14.1f}{r['makespan_ns']:>16}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
