"""The ``halsim`` command line.

``halsim demo`` runs a built-in multi-stage pipeline on ``sim:metal`` with and without ``legacy_sync``,
prints both makespans and their ratio and writes both traces (``--device URI``: the single-queue
pipeline on any device, with a summary of its trace); ``halsim run PROGRAM``
runs a host program (``file.py[:function]``, a function taking a device) on any device URI.
Bad arguments or files print one clear line and exit with status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import re
import sys
import threading
import traceback

from reference import hal
from reference.hal.driver import parse_uri
from reference.trace import Trace
from reference.trace.atomic import output_problem, same_file_problem

from .deadline import (EXIT_TIMEOUT, ProgramExit, ProgramTimeout, call_program, exit_now, leftover_threads,
                       run_with_timeout, timeout_problem)
from .programs import ProgramError, load_function, program_imports, split_program
from .pipeline import demo_pipeline, metal_demo, summarize
from .trace_tools import cli as trace_cli
from .checks import cli as check_cli
from .calibrate import cli as calibrate_cli
from .campaigns import cli as campaigns_cli


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit status 2."""


TIMEOUT_HELP = ("stop after this many seconds of real time: print where each thread is, save the trace so "
                "far (--trace), exit with status 124 (default: no limit). The sim devices report deadlocks "
                "by themselves; local-task and real devices wait forever for a value nobody signals")


def _timeout(args) -> float | None:
    problem = timeout_problem(args.timeout)
    if problem:
        raise UsageError(problem)
    return args.timeout


def _stuck(what: str, e: ProgramTimeout, trace_path: str | None = None, trace=None) -> None:
    """Report a program that ran past --timeout (and save its trace so far); leave the process."""
    print("\n".join(e.report(f"halsim: {what}")), file=sys.stderr)
    if trace_path and trace is not None:
        try:
            trace.save(trace_path)
            print(f"halsim: the trace so far: {trace_path}", file=sys.stderr)
        except Exception as err:  # noqa: BLE001 - the report above is what matters now
            print(f"halsim: could not save the trace: {err}", file=sys.stderr)
    exit_now(EXIT_TIMEOUT)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="halsim",
        description="Simulate and check IREE-style HAL programs; run them on reference or real devices.",
        epilog="Examples:\n"
               "  halsim demo                          the pipeline on sim:metal, async vs legacy_sync; traces in out/\n"
               "  halsim demo --device local-task      the single-queue pipeline on any device, with a summary\n"
               "  halsim run prog.py:main --device local-task --trace t.json\n"
               "  halsim devices                       list the devices this installation can create\n"
               "  halsim export t.json --perfetto t.pftrace   trace tools: export, stats, plot, diff\n"
               "  halsim check prog.toml --json        deadlocks, hazards, lifetimes, semaphore misuse\n"
               "  halsim calibrate real*.json -o m.json   fit sim cost model from real-backend traces\n"
               "  halsim sweep spec.toml --jobs 2       parameter sweep; results streamed to CSV\n"
               "  halsim fuzz --programs 100 --out F/  random programs + checks; findings as schedules\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    d = sub.add_parser("demo", help="run the built-in pipeline on sim:metal (async vs legacy_sync), write traces",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Run a built-in 6-stage, two-queue pipeline on sim:metal twice, async and with "
                       "legacy_sync (every queue call blocks\nthe host until its waits are met); print both makespans "
                       "and their ratio; write each run's trace, timeline PNG,\nPerfetto file and check report into "
                       "--out. With --device URI: the single-queue pipeline on that device, and a\nsummary of its "
                       "trace. Exit 0 when the outputs are right, 1 when not.",
                       epilog="Examples:\n"
                              "  halsim demo                                 traces, plots, checks in out/\n"
                              "  halsim demo --out /tmp/demo\n"
                              "  halsim demo --device local-task             the pipeline on the NumPy reference device\n")
    d.add_argument("--device", help="instead, run the single-queue pipeline on this device URI and summarize it")
    d.add_argument("--out", default="out", help="output directory (default: %(default)s)")

    r = sub.add_parser("run", help="run a host program on a device; summarize (and save) its trace",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Run PROGRAM — a Python function taking a device, or a schedule file — on any "
                       "device URI (a simulator,\nthe NumPy reference devices, a real backend), print a summary of its "
                       "trace and, if asked,\nsave the trace (--trace), write a timeline plot and a Perfetto file. "
                       "A program that "
                       "calls sys.exit(0) has finished;\nsys.exit(N) is a failure (exit 1). Threads the program "
                       "leaves running are named on stderr and\nnot waited for (exit 1).",
                       epilog="Exit status: 0 the program returned, 1 it raised: a HalError (a DeadlockError on "
                              "the sim devices),\nor its own exception (shown with the program's frames of its "
                              "traceback; the trace is saved either way),\n2 bad input, 124 --timeout passed.\n"
                              "Example: halsim run prog.py:main --device local-task --trace t.json --timeout 60\n")
    r.add_argument("program", help="file.py[:function] — a function taking the device (default function: main) "
                   "— or a schedule file (.toml/.json, docs/schedule-format.md)")
    r.add_argument("--device", help="device URI, e.g. local-sync, local-task (default: local-task; for a "
                   "schedule, its own device)")
    r.add_argument("--trace", help="write the trace (JSON) to this path")
    r.add_argument("--plot", help="also write a timeline plot of the trace (.png or .svg)")
    r.add_argument("--perfetto", help="also write the trace as a Perfetto file (.pftrace)")
    r.add_argument("--timeout", type=float, metavar="SECONDS", help=TIMEOUT_HELP)

    t = sub.add_parser("difftest", help="run a program on a real backend and on its model; compare outputs, "
                       "ordering and timing", description="Run PROGRAM on the reference device, on the model "
                       "(--sim) and --runs times on the real device (--real); report whether every buffer read "
                       "back is byte-equal everywhere, whether the real traces respect every happens-before "
                       "edge and the model's queue order, and the timing error. Exit 0 agree, 1 differ, 2 bad "
                       "input, 124 --timeout passed. Example: halsim difftest prog.py:main --real opencl --runs 3")
    t.add_argument("program", help="file.py[:function] — a function taking the device; its map_read results "
                   "(on the calling thread) and return value are compared — or a schedule file (every "
                   "buffer of its [buffers], read at the end, and the steps that raised, with their status)")
    t.add_argument("--real", default="opencl", help="the real device URI (default: %(default)s)")
    t.add_argument("--sim", help="the model's device URI (default: sim:<real's driver>, with --real's queues)")
    t.add_argument("--reference", default="local-task", help="the reference device (default: %(default)s)")
    t.add_argument("--runs", type=int, default=1, help="runs on the real device (default: %(default)s)")
    t.add_argument("--tolerance", type=float, help="also fail when a run's makespan error exceeds this "
                   "fraction (e.g. 0.25)")
    t.add_argument("--json", action="store_true", help="print the report as JSON")
    t.add_argument("--out", help="write the traces (reference, sim, real.N) into this directory")
    t.add_argument("--timeout", type=float, metavar="SECONDS", help="stop after this many seconds of real time "
                   "(all runs together): print where each thread is, exit with status 124 (default: no limit)")

    sub.add_parser("devices", help="list registered drivers and the devices they offer",
                   formatter_class=argparse.RawDescriptionHelpFormatter,
                   description="List every device URI this installation can create (the registered drivers, "
                   "including real backends\nwhose runtime is present), with a description and its capabilities.",
                   epilog="Examples:\n  halsim devices\n  halsim devices | grep sim:\n")
    trace_cli.add_parsers(sub)  # export, stats, plot, diff (docs/trace-tools.md)
    check_cli.add_parsers(sub)  # check (docs/checks.md)
    calibrate_cli.add_parsers(sub)  # calibrate (docs/accuracy.md)
    campaigns_cli.add_parsers(sub)  # sweep, fuzz (docs/campaigns.md)
    return p


def load_program(spec: str, fresh: bool = False):
    """``file.py[:function]`` → the function (default ``main``), which runs with the program's folder
    first on ``sys.path`` (:func:`~halsim.programs.program_imports`). UsageError on any problem: a
    module that fails to load, a function that cannot be called with one argument (the device), or one
    whose call would not run it (``async def``, a generator). ``fresh``: every call after the first
    runs the module afresh (``difftest``'s runs, like ``sweep``'s points), so state at its top level
    (a seeded ``random.Random``) does not carry from one device to the next."""
    path, func = split_program(spec)
    func = func or "main"
    if not path.endswith(".py"):
        raise UsageError(f"program {spec!r}: expected file.py[:function]")
    if not os.path.isfile(path):
        raise UsageError(f"program {path!r}: no such file")
    first = _load_function(path, func)
    if not fresh:
        return first
    loaded = [first]

    def program(dev):
        return (loaded.pop() if loaded else _load_function(path, func))(dev)
    return program


def _load_function(path: str, func: str):
    """Run the module at ``path`` and return its function ``func``, called in the program's folder."""
    own: dict = {}  # the modules the program imports from its folder: the same ones when it runs
    try:
        with open(path, "rb") as f:  # (bytes: compile() reads the file's coding line)
            source = f.read()
    except OSError as e:
        raise UsageError(f"program {path!r}: cannot read: {e.strerror or e}") from None
    try:
        fn = load_function(source, path, func, own)
    except ProgramError as e:
        raise UsageError(f"program {e}") from None

    def program(dev):
        with program_imports(path, own):
            return fn(dev)
    return functools.wraps(fn)(program)


def program_raised(spec: str, what: str, error: BaseException) -> None:
    """Print a program's own exception (a bug in it, not bad input): its traceback from the program's
    first frame on — halsim's frames (this CLI, the timeout runner) say nothing about the bug — then one
    line naming it. A program's ``sys.exit(N)`` (:class:`~halsim.deadline.ProgramExit`) is that one
    line only."""
    if isinstance(error, ProgramExit):
        print(f"halsim: {what} called sys.exit({error.code!r})", file=sys.stderr)
        return
    path = os.path.abspath(split_program(spec)[0])
    tb = error.__traceback__
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != path:
        tb = tb.tb_next
    sys.stderr.write("".join(traceback.format_exception(type(error), error, tb or error.__traceback__)))
    print(f"halsim: {what} raised {type(error).__name__}: {error}", file=sys.stderr)


def _is_schedule(spec: str) -> bool:
    from .schedule import is_schedule_path
    return is_schedule_path(spec)


def _load_schedule(path: str):
    from .schedule import ScheduleError, load_schedule
    try:
        return load_schedule(path)
    except ScheduleError as e:
        raise UsageError(str(e)) from None


def _check_outputs(outputs: dict, inputs) -> None:
    """Refuse, before any work, an output path that is an input file (or another output), a folder,
    or in a missing or read-only folder."""
    problem = same_file_problem(outputs, inputs)
    if problem:
        raise UsageError(problem)
    for flag, path in outputs.items():
        if path:
            problem = output_problem(path, flag)
            if problem:
                raise UsageError(problem)


def _cost_model_files(uri: str | None, options: dict | None = None) -> list[str]:
    """The cost-model file the device reads (its ``cost_model`` option, in the URI or ``options``):
    an input an output must not replace."""
    try:
        named = {**parse_uri(uri or "local-task")[2], **(options or {})}
    except hal.HalError:
        return []  # (a bad URI is reported when the device is created)
    model = named.get("cost_model")
    return [model] if isinstance(model, (str, os.PathLike)) and model else []


def _create(uri: str):
    try:
        return hal.create_device(uri)
    except hal.HalError as e:
        raise UsageError(f"device {uri!r}: {e}") from None


def _file_name_of(uri: str) -> str:
    """A device URI as a file name: every character but letters, digits and ``._=-`` (a ``/`` of a
    cost-model path, ``:``, ``?``, ``&``) becomes ``_``; at most 100 characters.

    >>> _file_name_of("sim:opencl?cost_model=/abs/m.json&queues=2")
    'sim_opencl_cost_model=_abs_m.json_queues=2'
    """
    return re.sub(r"[^A-Za-z0-9._=-]", "_", uri)[:100]


def cmd_demo(args) -> int:
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--out {args.out!r}: {e.strerror}") from None
    if not os.access(args.out, os.W_OK | os.X_OK):
        raise UsageError(f"--out {args.out!r}: the directory is not writable")
    if args.device is None:
        ok, report = metal_demo(args.out)
        print(report)
        for mode in ("async", "legacy_sync"):
            base = os.path.join(args.out, f"sim_metal.{mode}")
            trace = Trace.load(base + ".trace.json")
            for line in trace_cli.write_views(trace, plot=base + ".png", perfetto=base + ".pftrace"):
                print(f"  {mode}: {line}")
            print(f"  {mode}: check: {check_cli.demo_report(trace, base + '.check.txt')}")
        return 0 if ok else 1
    with _create(args.device) as dev:
        try:
            result = demo_pipeline(dev)
        except hal.HalError as e:
            print(f"halsim: the demo pipeline on {args.device} raised {e}", file=sys.stderr)
            return 1
        path = os.path.join(args.out, f"{_file_name_of(args.device)}.trace.json")
        dev.trace.save(path)
    print(summarize(Trace.load(path), title=f"demo pipeline on {args.device}"))
    print(f"output check: {'OK' if result else 'MISMATCH'}")
    print(f"trace: {path}")
    return 0 if result else 1


def _run_schedule(args, schedule, timeout):
    """``halsim run SCHEDULE``: (device, trace, step errors); the device is the schedule's own
    unless --device names one."""
    from .schedule import ScheduleError, run_schedule

    uri = args.device or schedule.device
    devices = []
    try:
        result = run_with_timeout(lambda: run_schedule(schedule, args.device, opened=devices.append), timeout)
    except ProgramTimeout as e:
        if not devices:
            raise UsageError(f"{args.program}: the device was not created within --timeout {timeout:g} s") from None
        _stuck(f"{args.program} on {uri}", e, args.trace, devices[0].trace)
    except ScheduleError as e:
        raise UsageError(str(e)) from None
    except hal.HalError as e:
        raise UsageError(f"device {uri!r}: {e}") from None
    return uri, result.trace, result.errors


def cmd_run(args) -> int:
    if args.plot and not args.plot.lower().endswith((".png", ".svg")):
        raise UsageError(f"--plot {args.plot!r}: expected a .png or .svg file name")
    schedule = _load_schedule(args.program) if _is_schedule(args.program) else None
    device_files = _cost_model_files(args.device) if args.device or not schedule else \
        _cost_model_files(schedule.device, schedule.options)
    _check_outputs({"--trace": args.trace, "--plot": args.plot, "--perfetto": args.perfetto},
                   [split_program(args.program)[0], *device_files])
    timeout = _timeout(args)
    if schedule:
        uri, trace, errors = _run_schedule(args, schedule, timeout)
        if args.trace:
            trace.save(args.trace)
        for e in errors:
            print(f"halsim: {args.program} on {uri}: {e}", file=sys.stderr)
            report = e.message.splitlines()[1:] if e.deadlock else ()
            if report:  # who waits for what and why nothing can advance it (DESIGN §5), as for a program
                print("\n".join(report), file=sys.stderr)
        code = 1 if errors else 0
    else:
        uri = args.device or "local-task"
        fn = load_program(args.program)
        dev = _create(uri)
        code = 0
        try:
            run_with_timeout(lambda: call_program(fn, dev), timeout)
        except ProgramTimeout as e:  # (the stuck threads keep the device: it is not closed)
            _stuck(f"{args.program} on {uri}", e, args.trace, dev.trace)
        except KeyboardInterrupt:
            if timeout is None:
                raise
            print("halsim: interrupted", file=sys.stderr)
            exit_now(130)  # the program's thread cannot be interrupted; leave without waiting for it
        except hal.HalError as e:  # a deadlock report or a failure the program did not handle
            print(f"halsim: {args.program} on {uri} raised {e}", file=sys.stderr)
            code = 1
        except Exception as e:  # noqa: BLE001 - the program's own bug (or sys.exit(N)): exit 1
            program_raised(args.program, f"{args.program} on {uri}", e)
            code = 1
        finally:
            try:
                dev.close()  # (first: what close records — work in flight ending, CANCELLED waits — is saved too)
            finally:
                if args.trace:
                    dev.trace.save(args.trace)
        trace = dev.trace
        if code:
            return code
    print(summarize(Trace.load(args.trace) if args.trace else trace, title=f"{args.program} on {uri}"))
    if args.trace:
        print(f"trace: {args.trace}")
    for line in trace_cli.write_views(trace, plot=args.plot, perfetto=args.perfetto):
        print(line)
    return code


def _default_sim(real: str) -> str:
    """``--sim``'s default: the model of ``--real``'s driver, with the ``queues`` it names (the
    model's queue count must be the device's; other options are the real driver's own)."""
    from urllib.parse import parse_qsl

    name, _, query = real.partition("?")
    queues = [f"queues={v}" for k, v in parse_qsl(query, keep_blank_values=True) if k == "queues"]
    driver = name.split(":")[0]
    model = {"local-task": "sim", "local-sync": "sim:sync"}.get(driver, f"sim:{driver}")  # (IREE's semantics)
    return model + (f"?{queues[-1]}" if queues else "")


def cmd_difftest(args) -> int:
    from .difftest import difftest, format_report, schedule_program

    if args.runs < 1:
        raise UsageError(f"--runs {args.runs}: must be >= 1")
    if args.tolerance is not None and not (args.tolerance >= 0 and math.isfinite(args.tolerance)):
        raise UsageError(f"--tolerance {args.tolerance}: must be a finite number >= 0")
    if args.out:
        if os.path.exists(args.out) and not os.path.isdir(args.out):
            raise UsageError(f"--out {args.out!r}: exists and is not a directory")
        # (the folder is created after the runs: the nearest existing folder above it must be writable)
        problem = output_problem(os.path.join(args.out, "reference.trace.json"), "--out", create_dirs=True)
        if problem:
            raise UsageError(problem)
    quiet = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    with quiet:  # --json: the program's prints, loading it too, go to stderr; stdout is the report only
        fn = schedule_program(_load_schedule(args.program)) if _is_schedule(args.program) \
            else load_program(args.program, fresh=True)  # (each device runs the module afresh)
    if args.real.partition("?")[0].split(":")[0] == "sim":
        raise UsageError(f"--real {args.real!r}: a simulator, not a real device (opencl, cuda, metal, or a "
                         "reference driver); the model to compare with is --sim")
    sim = args.sim or _default_sim(args.real)
    for uri in (args.real, sim, args.reference):
        _create(uri).close()  # bad or unavailable device URIs: one line, exit 2, before running anything
    timeout = _timeout(args)
    try:
        with quiet:
            report = run_with_timeout(lambda: difftest(
                fn, args.real, sim, args.runs, args.reference, args.tolerance,
                progress=lambda msg: print(f"difftest: {msg}", file=sys.stderr)), timeout)
    except ProgramTimeout as e:
        _stuck(f"difftest of {args.program}", e)
    except Exception as e:  # noqa: BLE001 - the program's own bug (a HalError it raised is compared)
        program_raised(args.program, f"{args.program} (difftest)", e)
        return 1
    traces = report.pop("traces")
    if args.out:
        try:
            os.makedirs(args.out, exist_ok=True)
            traces["reference"].save(os.path.join(args.out, "reference.trace.json"))
            traces["sim"].save(os.path.join(args.out, "sim.trace.json"))
            for i, t in enumerate(traces["real"]):
                t.save(os.path.join(args.out, f"real.{i + 1}.trace.json"))
        except OSError as e:
            raise UsageError(f"--out {args.out!r}: {e.strerror}") from None
    print(json.dumps(report, indent=1) if args.json else format_report(report))
    return 0 if report["ok"] else 1


def cmd_devices(args) -> int:
    for info in hal.available_devices():
        caps = ", ".join(sorted(info.capabilities))
        print(f"{info.uri:<16} {info.description}  [{caps}]")
    return 0


EXIT_BROKEN_PIPE = 141  # what a shell shows for a filter ended by SIGPIPE (128 + 13)


def _leave_quietly() -> int:
    """Stop writing to a stdout nobody reads, as Unix filters do: no message, status 141. Its fd now
    goes to /dev/null, so flushing what is left at exit raises nothing (Python's documented recipe)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return EXIT_BROKEN_PIPE


def main(argv=None) -> int:
    """Run one command and return its exit status. A program that leaves threads running (a thread
    waiting for a value nobody signals) does not hold the process up: after the command's work and
    :data:`~halsim.deadline.LEFTOVER_GRACE_S` seconds, halsim names the threads on stderr and leaves
    without them (``os._exit``), with the command's status, or 1 where that was 0."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    before = set(threading.enumerate())
    try:
        code = {"demo": cmd_demo, "run": cmd_run, "devices": cmd_devices, "difftest": cmd_difftest,
                **trace_cli.COMMANDS, **check_cli.COMMANDS, **calibrate_cli.COMMANDS,
                **campaigns_cli.COMMANDS}[args.command](args)
        sys.stdout.flush()  # (a reader that left shows here, not as a traceback at exit)
    except UsageError as e:
        print(f"halsim: error: {e}", file=sys.stderr)
        code = 2
    except BrokenPipeError:  # stdout's reader left (`halsim stats t.json | head`): not bad input
        code = _leave_quietly()
    except OSError as e:  # a file the command could not write (checked beforehand where it can be)
        print(f"halsim: error: {e.filename or ''}: {e.strerror or e}".replace("error: : ", "error: "),
              file=sys.stderr)
        code = 2
    except KeyboardInterrupt:  # Ctrl-C: one line, no traceback (files are written atomically)
        print("halsim: interrupted", file=sys.stderr)
        code = 130
    stuck = leftover_threads(before)
    if stuck:
        print(f"halsim: {len(stuck)} program thread{'s' if len(stuck) != 1 else ''} still running; "
              "exiting without waiting for {}:".format("them" if len(stuck) != 1 else "it"), file=sys.stderr)
        for line in stuck:
            print(f"  {line}", file=sys.stderr)
        exit_now(code or 1)
    return code


if __name__ == "__main__":
    sys.exit(main())
