"""``halsim calibrate TRACE... -o model.json``: fit a cost model from real-backend traces.

Prints one row per fitted parameter (value, RMS residual, samples), writes a cost-model JSON that
``cost_model=`` loads (parameters not fitted keep ``--personality``'s defaults). Bad files, too few
samples or a degenerate design: one line on stderr, exit status 2.

>>> import argparse
>>> p = argparse.ArgumentParser(); sub = p.add_subparsers(dest="command")
>>> add_parsers(sub)
>>> p.parse_args(["calibrate", "a.json", "-o", "m.json"]).personality
'opencl'
"""

from __future__ import annotations

import json
import math
import sys

from reference.trace import Trace, TraceFormatError
from reference.trace.atomic import output_problem, same_file_problem

from ..trace_tools.model import load as load_trace
from .fit import PERSONALITIES, CalibrationError, fit, format_table


def add_parsers(sub) -> None:
    c = sub.add_parser("calibrate", help="fit the simulator's cost model from real-backend traces (least squares)",
                       description="Fit cost-model parameters (transfer latency/bandwidth, per-kernel dispatch "
                       "terms, launch latencies (after a device predecessor, an issue, a host signal), issue path with its "
                       "per-dispatch term, completion callback, wake, submission, "
                       "how many queues the device runs at once) from traces recorded "
                       "on a real backend; write a cost-model JSON for cost_model=. Exit 2 on bad input, too "
                       "few samples or a degenerate design. Example: halsim calibrate run*.trace.json -o model.json")
    c.add_argument("traces", nargs="+", metavar="TRACE", help="trace files (JSON) from a real backend")
    c.add_argument("-o", "--output", required=True, help="write the fitted cost model (JSON) here")
    c.add_argument("--personality", default="opencl", choices=PERSONALITIES,
                   help="whose defaults unfitted parameters keep (default: %(default)s)")
    c.add_argument("--partial", action="store_true", help="keep the defaults for parameters that cannot be "
                   "fitted (too few samples, degenerate design) instead of refusing")
    c.add_argument("--trim", type=float, metavar="K", help="drop samples beyond K robust standard deviations "
                   "and refit (real host-side latencies have millisecond tails; a makespan is a sum of means, "
                   "so trimming under-predicts: the benchmark's main fit does not trim). Default: plain least "
                   "squares over every sample, no coefficient below 0")
    c.add_argument("--no-align", action="store_true", help="do not shift device timestamps to make each trace "
                   "causal (see docs/accuracy.md)")
    c.add_argument("--json", action="store_true", help="print the fit as JSON")


def cmd_calibrate(args) -> int:
    try:
        if args.trim is not None and not (args.trim > 0 and math.isfinite(args.trim)):
            raise CalibrationError(f"--trim must be a finite number > 0, got {args.trim}")
        problem = same_file_problem({"-o": args.output}, args.traces) or output_problem(args.output, "-o")
        if problem:
            raise CalibrationError(problem)
        for path in args.traces:  # the basic shape of every event, before fitting (one line naming it)
            try:
                Trace.load(path)
            except TraceFormatError:
                continue  # not a trace at all: the fit says so
            except Exception:  # noqa: BLE001 - a header the reader cannot take: said below
                pass
            try:
                load_trace(path, validate=True)
            except TraceFormatError as e:
                raise CalibrationError(str(e)) from None
        cal = fit(args.traces, personality=args.personality, partial=args.partial, trim=args.trim,
                  align=not args.no_align)
        cal.save(args.output)
    except CalibrationError as e:
        print(f"halsim calibrate: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"halsim calibrate: error: cannot write {args.output!r}: {e.strerror or e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(dict(cal.to_dict(), output=args.output), indent=2))
    else:
        print(format_table(cal))
        print(f"wrote {args.output}")
    return 0


COMMANDS = {"calibrate": cmd_calibrate}
