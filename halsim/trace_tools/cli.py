"""The trace-tool subcommands of ``halsim``: ``export``, ``stats``, ``plot`` and ``diff``.

Each command prints one clear line on stderr and returns 2 on bad input (a missing or malformed
trace, a bad argument); modules are imported when their command runs (matplotlib is slow to load).
Long phases (reading, indexing, writing…) show a progress line on stderr when it is a terminal
(:func:`progress_display`; ``-q`` turns it off), erased before anything is printed.

>>> import argparse
>>> p = argparse.ArgumentParser(); sub = p.add_subparsers(dest="command"); add_parsers(sub)
>>> sorted(COMMANDS)
['diff', 'export', 'plot', 'stats']
"""

from __future__ import annotations

import contextlib
import json
import math
import sys

import argparse

from reference.trace import TraceFormatError
from reference.trace.atomic import NESTED_TOO_DEEPLY

RAW = argparse.RawDescriptionHelpFormatter


class BadInput(Exception):
    """Bad input to a trace tool: printed as one line, exit status 2."""


def _fail(msg: str) -> int:
    print(f"halsim: error: {msg}", file=sys.stderr)
    return 2


def _guard(fn):
    def run(args) -> int:
        try:
            return fn(args)
        except (BadInput, TraceFormatError) as e:
            return _fail(str(e))
        except BrokenPipeError:  # stdout's reader left (`| head`): halsim's main() leaves quietly
            raise
        except OSError as e:
            return _fail(f"{getattr(e, 'filename', None) or ''}: {e.strerror or e}".lstrip(": "))
    run.__name__ = fn.__name__
    return run


def _outputs(outputs: dict, inputs: list) -> None:
    """Refuse, before any work, an output that is an input (or another output) or cannot be written."""
    from reference.trace.atomic import output_problem, same_file_problem
    problem = same_file_problem(outputs, inputs)
    for flag, path in outputs.items():
        problem = problem or (output_problem(path, flag) if path else None)
    if problem:
        raise BadInput(problem)


#: Seconds between two redraws of the progress line (at most ten a second).
PROGRESS_INTERVAL = 0.1


def progress_display(quiet: bool = False, stream=None):
    """The trace tools' progress line: a :class:`halsim.campaigns.executor.Progress` on ``stream``
    (default: stderr) when that is a terminal and not ``quiet``, else None (nothing drawn or counted:
    never in pipes, CI logs or on stdout)."""
    stream = stream if stream is not None else sys.stderr
    try:
        tty = bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        tty = False
    if quiet or not tty:
        return None
    from halsim.campaigns.executor import Progress
    return Progress(None, "", stream, unit="", tty_only=True, interval=PROGRESS_INTERVAL)


@contextlib.contextmanager
def showing_progress(quiet: bool = False):
    """``with showing_progress(args.quiet) as bar:`` the progress display (or None), erased at the end."""
    bar = progress_display(quiet)
    try:
        yield bar
    finally:
        if bar is not None:
            bar.close(clear=True)


def say(bar, text: str) -> None:
    """Print ``text`` on stdout, the progress line (if any) erased first."""
    if bar is not None:
        bar.close(clear=True)
    print(text)


def _index(path: str, bar=None):
    from .model import TraceIndex, load
    return TraceIndex.of(load(path, validate=True, progress=bar), bar, label=f"indexing {path}")


def _findings(path: str | None) -> list[dict] | None:
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except UnicodeDecodeError:
        raise BadInput(f"--findings {path!r}: not a JSON file (not UTF-8 text)") from None
    except (OSError, ValueError) as e:  # (json.JSONDecodeError is a ValueError)
        raise BadInput(f"--findings {path!r}: {getattr(e, 'strerror', None) or e}") from None
    except RecursionError:
        raise BadInput(f"--findings {path!r}: not valid JSON: {NESTED_TOO_DEEPLY}") from None
    if isinstance(data, dict):
        if not isinstance(data.get("findings"), list):  # (a trace, or another JSON file, given by mistake)
            raise BadInput(f"--findings {path!r}: expected a JSON list of findings, or an object with a "
                           f"'findings' list (as halsim check --json writes)")
        data = data["findings"]
    if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
        raise BadInput(f"--findings {path!r}: expected a JSON list of findings (objects)")
    for i, finding in enumerate(data):
        problem = _finding_problem(finding)
        if problem:
            raise BadInput(f"--findings {path!r}: finding {i}: {problem}")
    return data


def _finding_problem(finding: dict) -> str | None:
    """What is wrong with the fields the tools use: ``ops`` (op or command ids) place and outline
    it, ``t`` is a timestamp (int64 ns in a Perfetto file). Both may be absent or null."""
    from .model import MAX_INT
    ops = finding.get("ops")
    if ops is not None and not (type(ops) is list and all(type(o) is str for o in ops)):
        return f"'ops' must be a list of operation ids (strings), got {_shown(ops)}"
    t = finding.get("t")
    if t is not None and not (type(t) is int and 0 <= t <= MAX_INT):
        return f"'t' must be a non-negative integer (nanoseconds) below 2**63, got {_shown(t)}"
    return None


def _shown(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else f"a {type(value).__name__}"


def add_parsers(sub) -> None:
    """Add ``export``, ``stats``, ``plot`` and ``diff`` to ``halsim``'s subparsers."""
    e = sub.add_parser("export", help="export a trace to Perfetto (protobuf) and/or Chrome JSON", formatter_class=RAW,
                       description="Write a trace as a Perfetto TrackEvent file (open it in ui.perfetto.dev) and/or "
                       "a Chrome JSON trace\n(chrome://tracing): one track per queue, host thread and worker, a slice "
                       "per operation and command,\nflows from signals to the waits they satisfied, semaphore values "
                       "as counters; --findings marks check\nfindings as instant events (docs/trace-tools.md).",
                       epilog="Examples:\n  halsim export t.json --perfetto t.pftrace\n"
                              "  halsim check t.json --json > f.json; halsim export t.json --perfetto t.pftrace --findings f.json\n"
                              "  halsim export big.json --chrome big.cjson --no-commands\n")
    e.add_argument("trace", help="trace file (JSON)")
    e.add_argument("--perfetto", metavar="F", help="write a Perfetto TrackEvent trace (.pftrace) here")
    e.add_argument("--chrome", metavar="F", help="write a Chrome JSON trace here")
    e.add_argument("--findings", metavar="J", help="JSON list of check findings to show as instant events")
    e.add_argument("--no-commands", action="store_true", help="operations only (smaller files)")
    e.add_argument("--quiet", "-q", action="store_true", help="no progress output")

    s = sub.add_parser("stats", help="per-queue busy/idle time, overlap, queue depth, critical path, longest ops",
                       formatter_class=RAW,
                       description="Summarize a trace: makespan, per-track busy and idle time and utilization, "
                       "overlap between queues,\nqueue depth, the critical path through the happens-before "
                       "graph and the K longest operations.",
                       epilog="Examples:\n  halsim stats t.json\n  halsim stats t.json --top 20\n"
                              "  halsim stats t.json --json | jq .makespan_ns\n")
    s.add_argument("trace", help="trace file (JSON)")
    s.add_argument("--json", action="store_true", help="print JSON instead of text")
    s.add_argument("--top", type=int, default=10, metavar="K", help="longest operations to list (default: %(default)s)")
    s.add_argument("--quiet", "-q", action="store_true", help="no progress output")

    p = sub.add_parser("plot", help="timeline plot of a trace (PNG or SVG by extension)", formatter_class=RAW,
                       description="Draw a trace's timeline: one row per queue, host thread and worker, operations "
                       "as bars with their\ncommands inside, arrows from each signal to the waits it satisfied, "
                       "semaphore values below; a\nwindow with many spans is shaded per pixel column instead. "
                       "--findings highlights check findings.",
                       epilog="Examples:\n  halsim plot t.json -o t.png\n"
                              "  halsim plot t.json -o zoom.svg --from 1000000 --to 2000000 --tracks queue\n")
    p.add_argument("trace", help="trace file (JSON)")
    p.add_argument("-o", "--output", required=True, help="output image (.png or .svg)")
    p.add_argument("--from", dest="t_from", type=int, metavar="T", help="start of the window (ns, trace clock)")
    p.add_argument("--to", dest="t_to", type=int, metavar="T", help="end of the window (ns, trace clock)")
    p.add_argument("--tracks", nargs="+", metavar="NAME", help="only tracks whose name contains one of these")
    p.add_argument("--findings", metavar="J", help="JSON list of check findings to highlight")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")

    d = sub.add_parser("diff", help="compare two traces of one program (ops aligned by program-order id)",
                       formatter_class=RAW,
                       description="Compare two traces of one program (operations aligned by their program-order "
                       "id): makespan and per-queue\nutilization, per-operation duration ratios, operations only "
                       "in one trace, in-order queue inversions\nand host read-back digests. Exit 0 within "
                       "--tolerance, 1 outside it, 2 bad input.",
                       epilog="Examples:\n  halsim diff sim.json real.json\n"
                              "  halsim diff sim.json real.json --tolerance 0.25 --plot d.png\n"
                              "  halsim diff a.json b.json --json > d.json\n")
    d.add_argument("a", help="first trace (the reference)")
    d.add_argument("b", help="second trace")
    d.add_argument("--json", action="store_true", help="print JSON instead of text")
    d.add_argument("--plot", metavar="P", help="also write a side-by-side timeline (.png/.svg)")
    d.add_argument("--tolerance", type=float, default=0.1, metavar="X",
                   help="relative timing tolerance: makespan and per-queue utilization (default: %(default)s)")
    d.add_argument("--quiet", "-q", action="store_true", help="no progress output")


@_guard
def cmd_export(args) -> int:
    if not args.perfetto and not args.chrome:
        raise BadInput("export: give --perfetto F and/or --chrome F")
    _outputs({"--perfetto": args.perfetto, "--chrome": args.chrome}, [args.trace, args.findings])
    from .perfetto_export import export_chrome, export_perfetto
    findings = _findings(args.findings)
    with showing_progress(args.quiet) as bar:
        ix = _index(args.trace, bar)
        for flag, path, fn in (("perfetto", args.perfetto, export_perfetto), ("chrome", args.chrome, export_chrome)):
            if path:
                n = fn(ix, path, findings=findings, with_commands=not args.no_commands, progress=bar)
                say(bar, f"{flag}: {path}  ({n['tracks']} tracks, {n['slices']} slices, {n['counters']} counter "
                         f"values, {n['flows']} flows, {n['instants']} instants)")
    return 0


@_guard
def cmd_stats(args) -> int:
    from .stats import format_stats, trace_stats
    if args.top < 0:
        raise BadInput("--top: must be >= 0")
    with showing_progress(args.quiet) as bar:
        ix = _index(args.trace, bar)
        if bar is not None:
            bar.phase("computing stats")
        st = trace_stats(ix, top=args.top)
    print(json.dumps(st, indent=2) if args.json else format_stats(st))
    return 0


@_guard
def cmd_plot(args) -> int:
    from .plot import plot_trace
    if not args.output.lower().endswith((".png", ".svg")):
        raise BadInput(f"-o {args.output!r}: expected a .png or .svg file name")
    if args.t_from is not None and args.t_to is not None and args.t_to <= args.t_from:
        raise BadInput("--to must be after --from")
    _outputs({"-o": args.output}, [args.trace, args.findings])
    findings = _findings(args.findings)
    with showing_progress(args.quiet) as bar:
        info = plot_trace(_index(args.trace, bar), args.output, t_from=args.t_from, t_to=args.t_to,
                          tracks=args.tracks, findings=findings, progress=bar)
    print(f"plot: {args.output}  ({info['rows']} rows, {info['mode']})")
    return 0


@_guard
def cmd_diff(args) -> int:
    from .diff import diff_traces, format_diff
    if not (args.tolerance >= 0 and math.isfinite(args.tolerance)):
        raise BadInput(f"--tolerance {args.tolerance}: must be a finite number >= 0")
    if args.plot:
        if not args.plot.lower().endswith((".png", ".svg")):
            raise BadInput(f"--plot {args.plot!r}: expected a .png or .svg file name")
        _outputs({"--plot": args.plot}, [args.a, args.b])
    with showing_progress(args.quiet) as bar:
        a, b = _index(args.a, bar), _index(args.b, bar)
        if bar is not None:
            bar.phase("comparing")
        report = diff_traces(a, b, tolerance=args.tolerance)
        say(bar, json.dumps(report, indent=2) if args.json else format_diff(report))
        if args.plot:
            from .plot import plot_diff
            plot_diff(a, b, args.plot, labels=(args.a, args.b), progress=bar)
    return 0 if report["within_tolerance"] else 1


def write_views(trace, plot: str | None = None, perfetto: str | None = None) -> list[str]:
    """``halsim run --plot/--perfetto``: write the views of ``trace`` asked for; one line per file."""
    lines = []
    if plot or perfetto:
        from .model import TraceIndex
        ix = TraceIndex.of(trace)
        if perfetto:
            from .perfetto_export import export_perfetto
            n = export_perfetto(ix, perfetto)
            lines.append(f"perfetto: {perfetto}  ({n['tracks']} tracks, {n['slices']} slices, {n['flows']} flows)")
        if plot:
            from .plot import plot_trace
            info = plot_trace(ix, plot)
            lines.append(f"plot: {plot}  ({info['rows']} rows, {info['mode']})")
    return lines


COMMANDS = {"export": cmd_export, "stats": cmd_stats, "plot": cmd_plot, "diff": cmd_diff}
