"""``halsim check PROGRAM|TRACE [--device URI] [--json] [--rules RULE ...]`` (``docs/checks.md``).

PROGRAM is ``file.py[:function]`` (a function taking a device) or a schedule file (``.toml`` or
``.json``); it runs on a simulator device first (default ``sim``; a schedule's own device, if it
names one). A ``.json`` file that is a halsim trace is checked as it is. Exit status: 0 clean,
1 findings, 2 bad input (one line on stderr). ``--timeout SECONDS``: a program or schedule still running then
(on ``local-task`` or a real device, which wait forever for a value nobody signals) has the trace it
made so far checked, with where its threads were as notes; exit 1 with findings, else 124.
On a terminal, stderr shows the reading and checking progress (``-q``: none; ``docs/trace-tools.md``).

>>> import contextlib, io, json, os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "two_signals.json")
>>> _ = open(path, "w").write(json.dumps({"semaphores": {"s": 0}, "host": [
...     {"call": "barrier", "signal": {"s": 1}, "queue": 0},
...     {"call": "barrier", "signal": {"s": 2}, "queue": 1},
...     {"call": "wait", "wait": {"s": 2}}], "device": {"options": {"queues": 2}}}))
>>> out = io.StringIO()
>>> with contextlib.redirect_stdout(out):
...     code = main_check([path, "--json"])
>>> code, [f["rule"] for f in json.loads(out.getvalue())["findings"]]
(1, ['semaphore.racing_signals'])
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

from reference import hal
from reference.trace import Trace, TraceFormatError

from ..deadline import timeout_problem
from ..programs import split_program
from . import RULES, check_trace, select_rules
from .findings import Finding


class _BadInput(Exception):
    pass


class _TimedOut(Exception):
    """The program ran past --timeout: its trace so far and the notes saying where it was."""

    def __init__(self, trace, notes: list[str]):
        super().__init__("timed out")
        self.trace, self.notes = trace, notes


def add_parsers(sub) -> None:
    import argparse
    c = sub.add_parser("check", help="check a program, schedule or trace for deadlocks, hazards, lifetime "
                                     "and semaphore bugs (exit 0 clean, 1 findings, 2 bad input)",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Check a trace for deadlocks, data hazards, lifetime and semaphore misuse "
                       "(docs/checks.md). A program\n(file.py[:function]) or a schedule file runs on a simulator "
                       "device first (default sim, or the\nschedule's own device); a halsim trace (.json) is "
                       "checked as recorded. Exit 0 clean, 1 findings,\n2 bad input, 124 --timeout passed with no "
                       "findings.",
                       epilog="Examples:\n  halsim check prog.py:main\n  halsim check schedule.toml --json\n"
                              "  halsim check t.json --rules hazard deadlock.cycle\n")
    c.add_argument("target", metavar="PROGRAM|TRACE",
                   help="file.py[:function], a schedule (.toml/.json) or a trace (.json)")
    c.add_argument("--device", help="device URI to run a program on (default: sim, or the schedule's device)")
    c.add_argument("--json", action="store_true", help="print the findings as JSON")
    c.add_argument("--rules", nargs="+", metavar="RULE",
                   help="only these rule ids or categories (e.g. hazard deadlock.cycle)")
    c.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="a program or schedule still running after this many seconds of real time (a hang on local-task "
                        "or a real device) has the trace it made so far checked; exit 1 with findings, else "
                        "124 (default: no limit)")
    c.add_argument("--quiet", "-q", action="store_true", help="no progress output")


class _Counted:
    """A trace whose reading passes are shown on a progress display: ``checking T: n/N events``, then
    ``checking T: running the rules`` (the rules work from what the pass gathered)."""

    def __init__(self, trace, bar, label: str):
        self.trace, self.header, self.bar, self.label = trace, trace.header, bar, label

    def __len__(self) -> int:
        return len(self.trace)

    def __iter__(self):
        import itertools
        from halsim.trace_tools.model import ticking
        self.bar.phase(self.label, total=len(self.trace), unit="events")
        return itertools.chain(ticking(self.trace, self.bar), self._rules())  # (no generator step per event)

    def _rules(self):
        self.bar.phase(f"{self.label}: running the rules")
        yield from ()


def _is_trace(path: str) -> bool:
    try:
        with open(path, "r", encoding="utf-8") as f:
            head = f.read(64)
    except (OSError, UnicodeDecodeError):
        return False
    return head.lstrip().startswith('{"format":"halsim-trace"') or '"halsim-trace"' in head


def _run_program(spec: str, uri: str, timeout: float | None = None):
    from halsim.cli import UsageError, load_program
    from halsim.deadline import ProgramExit, ProgramTimeout, call_program, run_with_timeout
    from halsim.sim import DeadlockError

    try:
        fn = load_program(spec)
    except UsageError as e:
        raise _BadInput(str(e)) from None
    dev = _device(uri)
    notes = []
    stuck = None
    try:
        try:
            run_with_timeout(lambda: call_program(fn, dev), timeout)  # (sys.exit(0): the program ended)
        except ProgramTimeout as e:
            stuck = e
    except DeadlockError as e:
        notes.append(f"the program deadlocked: {e.message.splitlines()[0]}")
    except hal.HalError as e:
        notes.append(f"the program raised {e.code.name}: {e.message.splitlines()[0] if e.message else ''}")
    except Exception as e:  # noqa: BLE001 - the program's own bug: the trace up to it is checked
        from halsim.cli import program_raised

        program_raised(spec, "the program", e)  # (its traceback on stderr, from its own frames)
        notes.append(f"the program called {e}" if isinstance(e, ProgramExit)
                     else f"the program raised {type(e).__name__}: {e}")
    finally:
        if stuck is None:  # (a stuck program's threads keep the device: it is not closed)
            dev.close()
    if stuck is not None:
        raise _TimedOut(dev.trace, stuck.report("the program", " (the trace so far is checked)"))
    return dev.trace, notes, []


def _device(uri: str):
    try:
        return hal.create_device(uri)
    except hal.HalError as e:
        raise _BadInput(f"device {uri!r}: {e}") from None


def _run_schedule(path: str, uri: str | None, timeout: float | None = None):
    from halsim.deadline import ProgramTimeout, run_with_timeout
    from halsim.schedule import ScheduleError, load_schedule, run_schedule
    from halsim.schedule.lint import error_findings, static_findings

    devices = []
    try:
        schedule = load_schedule(path)
        try:
            result = run_with_timeout(lambda: run_schedule(schedule, uri, opened=devices.append), timeout)
        except ProgramTimeout as e:
            if not devices:
                raise _BadInput(f"{path}: the device was not created within --timeout {timeout:g} s") from None
            raise _TimedOut(devices[0].trace, e.report("the schedule", " (the trace so far is checked)")) from None
    except ScheduleError as e:
        raise _BadInput(str(e)) from None
    except hal.HalError as e:
        raise _BadInput(f"device {uri or schedule.device!r}: {e}") from None
    extra = static_findings(schedule) + error_findings(result.errors, schedule, result.trace)
    notes = [str(e) for e in result.errors]
    for e in result.errors:
        if getattr(e, "crashed", False):  # a Python exception in a step: said like a program's
            print(f"halsim: the schedule's {e}", file=sys.stderr)
    return result.trace, notes, extra


def load_target(target: str, device: str | None, timeout: float | None = None, progress=None):
    """(trace, notes, extra findings) for a program, schedule or trace path; _BadInput on problems,
    _TimedOut when a program ran past ``timeout`` seconds. ``progress``: shows a trace file's reading."""
    from halsim.schedule import is_schedule_path

    path = split_program(target)[0]
    if path.endswith(".json") and _is_trace(path):
        notes = [f"--device {device} ignored: a trace is checked as it was recorded"] if device else []
        from halsim.trace_tools.model import load as load_trace
        try:
            return load_trace(path, validate=True, progress=progress), notes, []
        except TraceFormatError as e:
            raise _BadInput(str(e)) from None
    if is_schedule_path(path):
        return _run_schedule(path, device, timeout)
    if path.endswith(".py"):
        return _run_program(target, device or "sim", timeout)
    raise _BadInput(f"{target!r}: expected file.py[:function], a schedule (.toml/.json) or a trace (.json)")


def format_report(findings: list[Finding], stats: dict, notes: list[str], title: str) -> str:
    lines = [f"halsim check: {title} on {stats.get('device', '?')} "
             f"({stats.get('ops', 0)} ops, {stats.get('commands', 0)} commands)"]
    lines += [f"  note: {n}" for n in notes]
    for f in findings:
        ops = f" [{', '.join(f.ops)}]" if f.ops else ""
        lines.append(f"{f.severity:<7} {f.rule}{ops}: {f.message}")
    errors = sum(f.severity == "error" for f in findings)
    lines.append(f"{len(findings)} finding{'s' if len(findings) != 1 else ''}"
                 f" ({errors} error{'s' if errors != 1 else ''}, {len(findings) - errors} warning"
                 f"{'s' if len(findings) - errors != 1 else ''})" if findings else "no findings")
    return "\n".join(lines)


def _wanted_rules(patterns) -> set[str]:
    """The rule ids --rules names (all without it); _BadInput naming an unknown one."""
    try:
        return select_rules(patterns) if patterns else set(RULES)
    except ValueError as e:
        raise _BadInput(str(e)) from None


def cmd_check(args) -> int:
    from halsim.trace_tools.cli import showing_progress
    timed_out = False
    try:
        problem = timeout_problem(args.timeout)
        if problem:
            raise _BadInput(problem)
        wanted = _wanted_rules(args.rules)  # (a typo is refused before the program runs)
        with showing_progress(getattr(args, "quiet", False)) as bar:
            try:  # --json: the program's own prints go to stderr, so stdout is the JSON document only
                with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
                    trace, notes, extra = load_target(args.target, args.device, args.timeout, bar)
            except _TimedOut as e:
                trace, notes, extra, timed_out = e.trace, e.notes, [], True
            try:
                report = check_trace(trace if bar is None else _Counted(trace, bar, f"checking {args.target}"),
                                     sorted(wanted))  # (the ids --rules resolved to above)
            except ValueError as e:  # (a trace read lazily may turn out malformed here)
                raise _BadInput(str(e)) from None
    except _BadInput as e:
        print(f"halsim: error: {e}", file=sys.stderr)
        return 2
    findings = sorted(report.findings + [f for f in extra if f.rule in wanted], key=Finding.sort_key)
    if args.json:
        doc = {"target": args.target, "findings": [f.to_json() for f in findings], "stats": report.stats,
               "notes": notes}
        print(json.dumps(doc, indent=1))
    else:
        print(format_report(findings, report.stats, notes, args.target))
    if timed_out:
        from halsim.deadline import EXIT_TIMEOUT, exit_now
        exit_now(1 if findings else EXIT_TIMEOUT)  # the program's threads are stuck: leave without them
    return 1 if findings else 0


COMMANDS = {"check": cmd_check}


def demo_report(trace, path: str) -> str:
    """Check ``trace``, write the human report to ``path`` and return a one-line summary for
    ``halsim demo`` (``"no findings (report.txt)"`` or ``"2 findings (…) — report.txt"``)."""
    report = check_trace(trace)
    title = os.path.basename(path).replace(".check.txt", ".trace.json")
    text = format_report(report.findings, report.stats, [], title)
    from reference.trace.atomic import atomic_write
    atomic_write(path, lambda f: f.write(text + "\n"), mode="w")
    return f"{text.splitlines()[-1]}: {path}"


def main_check(argv) -> int:
    """``halsim check`` alone (for tests and doctests)."""
    import argparse

    p = argparse.ArgumentParser(prog="halsim")
    add_parsers(p.add_subparsers(dest="command"))
    return cmd_check(p.parse_args(["check", *argv]))
