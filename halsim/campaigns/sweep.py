"""``halsim sweep SPEC``: run one program over a grid or random sample of device options, cost-model
fields and seeds, and collect metrics per point (``docs/campaigns.md``).

The spec is TOML::

    [program]                    # exactly one of:
    schedule = "pipeline.toml"   #   a schedule file (relative to the spec's folder)
    # python = "prog.py:main"    #   a host program: a function taking a device
    # generator = { size = 12, drop_sync = 0.1 }   # a generated program (seeded by the point's seed)

    [device]
    uri = "sim:cuda"             # default: the schedule's device, else "sim"
    options = { queues = 2 }     # fixed options
    cost_model = { launch_ns = 2000 }   # fixed cost-model fields

    [grid]                       # the cartesian product of these lists
    queues = [1, 2, 4]
    event_pool_capacity = [2, 32]
    "cost.copy_gb_per_s" = [25.0, 100.0]
    seed = [0, 1]

    [sample]                     # and/or n random points
    n = 20
    seed = 0
    params = { max_concurrency = [1, 2, 4], "cost.launch_ns" = { min = 500, max = 5000 } }

    metrics = ["makespan", "utilization", "findings", "semaphores", "pool", "errors"]   # (top level)
    [plot]
    x = "queues"                 # default: the first parameter
    y = "makespan_ns"
    hue = "event_pool_capacity"  # default: the second parameter, if any

A parameter is a device option (``queues``, ``event_pool_capacity``, ``max_concurrency``, ``seed``,
``fault_rate``, …), ``cost.FIELD`` (a cost-model field), ``gen.KNOB`` (a generator knob) or ``uri``.
``seed`` also seeds a generated program unless ``gen.seed`` is given. Each point's key is its
parameters as canonical JSON; rows are appended to the results CSV and flushed as points finish, so a
crash loses no finished point and ``--resume`` skips the keys already there.

>>> spec = parse_spec({"program": {"generator": {"size": 4}}, "grid": {"queues": [1, 2], "seed": [0]}})
>>> [point_key(p) for p in spec.points]
['{"queues":1,"seed":0}', '{"queues":2,"seed":0}']
>>> row = run_point(spec.payload, spec.points[1])
>>> row["error"], row["findings"], row["makespan_ns"] > 0
('', 0, True)
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import time
import warnings

from ..programs import program_imports
from .executor import EXIT_INTERRUPTED, CampaignError, HeldInterrupts, Interrupted, Progress, run_unordered
from .sweep_spec import (DEFAULT_METRICS, METRICS, Spec, compile_program, load_spec, parse_spec,  # noqa: F401 (the API)
                         point_key, program_function)


# -- one point ---------------------------------------------------------------------------------------

_PY_CACHE: dict = {}  # (file, source hash) → the compiled module


def _python_fn(payload, own: dict):
    """The program's function from a fresh run of its module: state at module level (a seeded
    ``random.Random``, a counter) starts over at every point, as in ``halsim run``, so a row does not
    depend on which points its worker ran before (only the compiled code is kept). ``own``: the
    modules it imports from its folder (:func:`~halsim.programs.program_imports`)."""
    key = (payload["file"], hash(payload["source"]))
    code = _PY_CACHE.get(key)
    if code is None:
        code = _PY_CACHE[key] = compile_program(payload["source"], payload["file"])
    return program_function(code, payload["file"], payload["func"], own)


def split_params(params: dict):
    """(uri or None, device options, cost-model fields, generator knobs) of a point."""
    uri, options, cost, gen = None, {}, {}, {}
    for name, v in params.items():
        if name == "uri":
            uri = v
        elif name.startswith("cost."):
            cost[name[5:]] = v
        elif name.startswith("gen."):
            gen[name[4:]] = v
        else:
            options[name] = v
    return uri, options, cost, gen


def cost_over(base, fields: dict) -> dict:
    """The cost-model ``fields`` of a point over the program's own ``cost_model`` option: None, a
    table of fields, or a cost-model file (read here, relative to the working folder as a device
    reads it; a bad file is the device's ``HalError``). Only the fields given: the device fills in
    its personality's defaults for the rest, as it does for the file itself."""
    if isinstance(base, (str, os.PathLike)):
        from halsim.sim.cost_model import CostModel
        doc = CostModel.read_document(base)
        CostModel.from_dict(doc)  # (its fields checked: the device's error, before any point runs)
        base = doc
    return {**(base or {}), **fields}


def point_doc(payload: dict, params: dict, device_only: bool = False) -> dict | None:
    """The schedule document a point runs (a generated one is made with the point's knobs), or None
    for a Python program. ``device_only``: of a generated program, only its ``device`` section (the
    spec check needs no more, and generating every point's program up front would cost a sweep of
    big programs seconds before its first point)."""
    kind = payload["kind"]
    if kind == "schedule":
        return payload["doc"]
    if kind != "generator":
        return None
    from .generate import generate, generated_device
    _, options, _, gen = split_params(params)
    knobs = {**payload["knobs"], **gen}
    knobs.setdefault("seed", params.get("seed", 0))
    if "queues" in options:
        knobs.setdefault("queues", options["queues"])
    return {"device": generated_device(**knobs)} if device_only else generate(**knobs)


def point_device(payload: dict, params: dict, doc: dict | None) -> tuple[str, dict]:
    """``(uri, options)`` of the device a point runs on — the one derivation the run
    (:func:`run_program`) and the spec check (:func:`check_points`) share: the point's ``uri``, else
    the program's, else its document's; options from the document, the program, then the point;
    the cost-model fields over the options' ``cost_model``. ``doc``: :func:`point_doc`."""
    uri, options, cost, _ = split_params(params)
    dev = (doc or {}).get("device", {})
    if not isinstance(dev, dict):
        dev = {"uri": dev}
    uri = uri or payload["uri"] or dev.get("uri", "sim")
    opts = {**dev.get("options", {}), **payload["options"], **options}
    model = {**payload["cost"], **cost}
    if model:
        opts["cost_model"] = cost_over(opts.get("cost_model"), model)
    return uri, opts


def run_program(payload: dict, params: dict):
    """Run the program at this point: (trace, step errors, extra findings)."""
    from reference import hal
    from halsim.schedule import parse_schedule, run_schedule
    from halsim.schedule.lint import error_findings, static_findings

    doc = point_doc(payload, params)
    uri, opts = point_device(payload, params, doc)
    if doc is not None:
        dev = doc.get("device")
        doc = {**doc, "device": {**(dev if isinstance(dev, dict) else {}), "uri": uri, "options": opts}}
        schedule = parse_schedule(doc, payload.get("file", "<generated>"))
        result = run_schedule(schedule)
        extra = static_findings(schedule) + error_findings(result.errors, schedule, result.trace)
        return result.trace, result.errors, extra
    from halsim.sim import DeadlockError
    from halsim.schedule.run import StepError
    dev = hal.create_device(uri, **opts)
    errors = []
    from halsim.deadline import call_program
    try:
        own: dict = {}  # (the modules beside it, loaded in the module's window: the same ones when it runs)
        fn = _python_fn(payload, own)
        with program_imports(payload["file"], own):  # (it imports the modules beside it, as in halsim run)
            call_program(fn, dev)  # (sys.exit(0): the program ended; sys.exit(N): a failed row)
    except hal.HalError as e:
        errors.append(StepError("main", payload["func"], "program", int(e.code), e.message,
                                deadlock=isinstance(e, DeadlockError)))
    finally:
        dev.close()
    return dev.trace, errors, []


def trace_metrics(trace, errors, extra, metrics) -> dict:
    """The metric columns of one run."""
    out: dict = {}
    want = set(metrics)
    if want & {"makespan", "utilization"}:
        from halsim.trace_tools.stats import trace_stats
        st = trace_stats(trace, top=0)
        out.update(makespan_ns=st["makespan_ns"], ops=st["ops"], commands=st["commands"], failed_ops=st["failed_ops"])
        util = {t["name"]: t["utilization"] for t in st["tracks"] if t["kind"] not in ("host", "worker")}
        out.update(utilization_mean=round(sum(util.values()) / len(util), 6) if util else 0.0,
                   utilization_max=max(util.values(), default=0.0),
                   utilization=json.dumps(util, sort_keys=True, separators=(",", ":")))
    if "findings" in want:
        from halsim.checks import CATEGORIES, check_trace
        findings = check_trace(trace).findings + list(extra)
        out["findings"] = len(findings)
        for c in CATEGORIES:
            out[f"findings_{c}"] = sum(f.category == c for f in findings)
        out["rules"] = " ".join(sorted({f.rule for f in findings}))
    if "semaphores" in want or "pool" in want:
        sems, spans, peak, unpooled = 0, [], 0, 0
        ready = {}
        ops = []
        for e in trace.events():
            ev = e["ev"]
            if ev == "semaphore":
                sems += 1
            elif ev == "op":
                ops.append(e)
            elif ev == "op_done":
                ready[e["op"]] = e.get("ready", e["t"])
            elif ev == "cuda_event":
                peak = max(peak, e.get("in_use", 0))
                if e.get("action") in ("create", "acquire") and e.get("pooled") is False:
                    unpooled += 1
        end = max((v for v in ready.values() if v is not None), default=0)
        for op in ops:
            r = ready.get(op["op"])
            r = end if r is None else r
            spans += [(op["t"], max(op["t"], r))] * len(op.get("wait", []))
        from halsim.trace_tools.stats import union_and_overlap
        most = union_and_overlap([s for s in spans if s[1] > s[0]])[2]
        if "semaphores" in want:
            out.update(semaphores=sems, peak_pending_waits=most)
        if "pool" in want:
            out.update(peak_events_in_use=peak, unpooled_events=unpooled)
    if "errors" in want:
        out.update(errors=len(errors), deadlocked=int(any(e.deadlock for e in errors)))
    return out


_FROZEN = False


def freeze_heap() -> None:
    """Once per process: move everything alive (the imported modules) to CPython's permanent GC
    generation. The schedule runner calls ``gc.collect()`` after every run; without this each call
    re-traverses numpy, matplotlib and the rest, which costs more than a small point itself."""
    global _FROZEN
    if not _FROZEN:
        import gc
        gc.collect()
        gc.freeze()
        _FROZEN = True


def run_point(payload: dict, params: dict) -> dict:
    """One row: the point's key, parameters, metrics, ``error`` ('' or one line) and ``wall_s``."""
    freeze_heap()
    t0 = time.perf_counter()
    row = {"key": point_key(params), **params}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            trace, errors, extra = run_program(payload, params)
            row.update(trace_metrics(trace, errors, extra, payload.get("metrics", DEFAULT_METRICS)))
        row["error"] = ""
    except Exception as e:  # noqa: BLE001 - a bad point is a row, not the end of the sweep
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    row["wall_s"] = round(time.perf_counter() - t0, 4)
    return row


# -- the results file --------------------------------------------------------------------------------

def read_results(path: str) -> tuple[list[str], list[dict]]:
    """(header, rows) of a results CSV; a partial last line (a crash mid-write) is ignored.
    :class:`CampaignError` for a file that is not CSV text (not UTF-8, NUL bytes, a broken quote)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        raise CampaignError(f"{path}: not a results file (not UTF-8 text)") from None
    except OSError as e:
        raise CampaignError(f"{path}: cannot read: {e.strerror or e}") from None
    if text and not text.endswith("\n"):
        text = text[:text.rfind("\n") + 1]
    try:
        reader = csv.DictReader(io.StringIO(text))
        rows = list(reader)
        header = list(reader.fieldnames or [])
    except csv.Error as e:
        raise CampaignError(f"{path}: not a results file (not CSV: {e})") from None
    return header, rows


class ResultsWriter:
    """Appends one CSV row per finished point and flushes it to the OS at once."""

    def __init__(self, path: str, columns: list[str], resume: bool):
        self.path, self.columns = path, columns
        self.done: set[str] = set()
        exists = os.path.exists(path) and os.path.getsize(path) > 0
        if exists and not resume:
            raise CampaignError(f"{path} exists: use --resume to continue it, or remove it")
        if exists:
            header, rows = read_results(path)
            if header != columns:
                shown = ", ".join(h if h.isprintable() else repr(h) for h in header[:6])
                raise CampaignError(f"--resume: {path} has other columns than this spec "
                                    f"({shown}, …): not the same sweep")
            self.done = {r["key"] for r in rows}
            with open(path, "rb+") as f:     # drop a partial last line
                data = f.read()
                if data and not data.endswith(b"\n"):
                    f.truncate(data.rfind(b"\n") + 1)
        d = os.path.dirname(os.path.abspath(path))
        try:
            os.makedirs(d, exist_ok=True)
            self.file = open(path, "a", newline="", encoding="utf-8")
        except OSError as e:
            raise CampaignError(f"--out {path!r}: {e.strerror or e}") from None
        self.created, self.rows = not exists, 0
        self.writer = csv.DictWriter(self.file, fieldnames=columns, extrasaction="ignore")
        if not exists:
            self.writer.writeheader()
            self.flush()

    def write(self, row: dict) -> None:
        with HeldInterrupts(raise_at_exit=True):  # (a Ctrl-C: after the row, never half of it)
            self.writer.writerow(row)
            self.rows += 1
            self.flush()

    def discard(self) -> None:
        """Close, and remove the file if this writer created it and wrote no row (a sweep that
        failed before its first point leaves nothing that would block the retry)."""
        self.close()
        if self.created and self.rows == 0:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass

    def flush(self) -> None:
        self.file.flush()
        os.fsync(self.file.fileno())

    def close(self) -> None:
        self.file.close()


def check_points(spec: Spec) -> None:
    """Create (and close) the device of every distinct device configuration of the spec, so a
    misspelt option or a bad value is a spec error (exit 2), not a sweep of failed rows."""
    from reference import hal

    seen = set()
    for params in spec.points:
        uri, opts = point_device(spec.payload, params, point_doc(spec.payload, params, device_only=True))
        opts.pop("seed", None)  # (one device per configuration, not per seed)
        key = json.dumps([uri, opts], sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        try:
            hal.create_device(uri, **opts).close()
        except hal.HalError as e:
            raise CampaignError(f"{spec.path}: point {point_key(params)}: {e}") from None
        except TypeError as e:
            raise CampaignError(f"{spec.path}: point {point_key(params)}: {e}") from None


def _point_task(payload, params):
    return run_point(payload, params)


def run_sweep(spec: Spec, out: str, jobs: int = 1, dask: str | None = None, resume: bool = False,
              progress: bool = True, stream=None) -> dict:
    """Run every point not already in ``out``; returns ``{"points", "skipped", "ran", "errors"}``."""
    csv_path = out[:-len(".parquet")] + ".csv" if out.endswith(".parquet") else out
    if out.endswith(".parquet"):
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise CampaignError(f"{out}: Parquet output needs pyarrow (pip install pyarrow); "
                                f"or write .csv") from None
    writer = ResultsWriter(csv_path, spec.columns, resume)
    todo = [p for p in spec.points if point_key(p) not in writer.done]
    payload = dict(spec.payload, metrics=spec.metrics)
    bar = Progress(len(spec.points), "sweep", stream, initial=len(spec.points) - len(todo)) if progress else None
    errors = 0
    try:
        for _params, row in run_unordered(_point_task, payload, todo, jobs, dask):
            writer.write(row)
            errors += bool(row["error"])
            if bar:
                bar.update()
    except KeyboardInterrupt:
        writer.discard()
        kept = len(spec.points) - len(todo) + writer.rows
        raise Interrupted(f"interrupted: {kept} of {len(spec.points)} points are in {csv_path}; --resume "
                          f"continues the sweep" if kept else
                          f"interrupted before the first point finished: nothing written to {csv_path}") from None
    except BaseException:
        writer.discard()
        raise
    finally:
        writer.close()
        if bar:
            bar.close()
    if out.endswith(".parquet"):
        _write_parquet(csv_path, out)
    return {"points": len(spec.points), "skipped": len(spec.points) - len(todo), "ran": len(todo), "errors": errors}


def _write_parquet(csv_path, out):
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq
    from reference.trace.atomic import atomic_write
    table = pacsv.read_csv(csv_path)
    atomic_write(out, lambda f: pq.write_table(table, f))


# -- summary plot ------------------------------------------------------------------------------------

def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def plot_results(rows: list[dict], plot: dict, path: str) -> str:
    """Mean of ``y`` per ``x`` (one line per ``hue`` value) over the other parameters; written
    atomically with the matplotlib object API. Returns a one-line description."""
    from matplotlib.figure import Figure

    x, y, hue = plot["x"], plot["y"], plot["hue"]
    groups: dict = {}
    for r in rows:
        if r.get("error") or _num(r.get(y)) is None:
            continue
        if x and r.get(x) in (None, ""):
            continue  # a point without the x parameter (a [sample] point when x is a [grid] one): no place
        groups.setdefault(r.get(hue) if hue else "", {}).setdefault(r.get(x), []).append(_num(r[y]))
    fig = Figure(figsize=(6.4, 4.0), dpi=100)
    ax = fig.add_subplot()
    xs_all = sorted({k for g in groups.values() for k in g}, key=lambda v: (_num(v) is None, _num(v) or 0, str(v)))
    numeric = all(_num(v) is not None for v in xs_all)
    for h in sorted(groups, key=lambda v: (_num(v) is None, _num(v) or 0, str(v))):
        pts = sorted(groups[h].items(), key=lambda kv: (_num(kv[0]) or 0, str(kv[0])))
        xs = [_num(k) if numeric else xs_all.index(k) for k, _ in pts]
        ys = [sum(v) / len(v) for _, v in pts]
        ax.plot(xs, ys, marker="o", label=f"{hue} = {h if h not in (None, '') else '(not set)'}" if hue else None)
    if not numeric:
        ax.set_xticks(range(len(xs_all)), [str(v) for v in xs_all])
    ax.set_xlabel(x or "")
    ax.set_ylabel(y)
    ax.set_title(f"{y} by {x}" + (f" and {hue}" if hue else "") + f" ({len(rows)} points)")
    if hue and groups:
        ax.legend(fontsize="small")
    ax.grid(True, alpha=0.3)
    from halsim.trace_tools.plot import save_figure
    save_figure(fig, path)
    return f"plot: {path} ({len(groups)} line{'s' if len(groups) != 1 else ''}, {len(xs_all)} x values)"


# -- command line ------------------------------------------------------------------------------------

def add_parsers(sub) -> None:
    import argparse
    s = sub.add_parser("sweep", help="run a program over a grid/sample of device options, cost-model fields "
                                     "and seeds; stream metrics to CSV (docs/campaigns.md)",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Run one program (a schedule, a Python program or a generated one) at every "
                       "point of a spec's grid\nand/or random sample of device options, cost-model fields and "
                       "seeds; append each point's metrics\n(makespan, utilization, findings, …) to a CSV as it "
                       "finishes (--resume skips the points already there)\nand draw a summary plot. Exit 0 done, "
                       "2 bad input (docs/campaigns.md).",
                       epilog="Examples:\n  halsim sweep spec.toml                        results in sweep.csv, plot in sweep.png\n"
                              "  halsim sweep spec.toml --jobs 4 --out r.csv   four worker processes\n"
                              "  halsim sweep spec.toml --out r.csv --resume   finish an interrupted sweep\n")
    s.add_argument("spec", help="the sweep spec (TOML)")
    s.add_argument("--out", "-o", default="sweep.csv", help="results file, .csv or .parquet (default: %(default)s)")
    s.add_argument("--plot", help="summary plot (.png or .svg; default: next to --out)")
    s.add_argument("--no-plot", action="store_true", help="no summary plot")
    s.add_argument("--jobs", "-j", type=int, default=1, help="local worker processes (default: %(default)s)")
    s.add_argument("--dask", metavar="ADDRESS", help="run on Dask: 'local' (a LocalCluster of --jobs workers) "
                                                     "or tcp://host:port")
    s.add_argument("--resume", action="store_true", help="skip the points already in --out")
    s.add_argument("--quiet", "-q", action="store_true", help="no progress output")


def cmd_sweep(args) -> int:
    try:
        if args.jobs < 1:
            raise CampaignError(f"--jobs {args.jobs}: must be >= 1")
        if not args.out.endswith((".csv", ".parquet")):
            raise CampaignError(f"--out {args.out!r}: expected a .csv or .parquet file")
        plot = None if args.no_plot else (args.plot or os.path.splitext(args.out)[0] + ".png")
        if plot and not plot.lower().endswith((".png", ".svg")):
            raise CampaignError(f"--plot {plot!r}: expected a .png or .svg file")
        from reference.trace.atomic import output_problem, same_file_problem
        csv_out = args.out[:-len(".parquet")] + ".csv" if args.out.endswith(".parquet") else args.out
        outputs = {"--out": args.out, "--plot": plot}
        if csv_out != args.out:
            outputs["--out (its .csv)"] = csv_out
        problem = same_file_problem(outputs, [args.spec])
        for flag, path in outputs.items():  # before any point runs: not after the last one
            # (the results' folder is created; an explicit --plot's folder must exist)
            problem = problem or (output_problem(path, flag, create_dirs=flag != "--plot" or not args.plot)
                                  if path else None)
        if problem:
            raise CampaignError(problem)
        spec = load_spec(args.spec)
        check_points(spec)
        summary = run_sweep(spec, args.out, args.jobs, args.dask, args.resume, progress=not args.quiet)
    except CampaignError as e:
        print(f"halsim: error: {e}", file=sys.stderr)
        return 2
    except Interrupted as e:
        print(f"halsim: {e}", file=sys.stderr)
        return EXIT_INTERRUPTED
    csv_path = args.out[:-len(".parquet")] + ".csv" if args.out.endswith(".parquet") else args.out
    _header, rows = read_results(csv_path)
    print(f"sweep: {summary['points']} points: {summary['ran']} run, {summary['skipped']} already in {csv_path}, "
          f"{summary['errors']} failed; results: {args.out}")
    y = spec.plot["y"]
    good = [r for r in rows if not r.get("error") and _num(r.get(y)) is not None]
    if good:
        best = min(good, key=lambda r: _num(r[y]))
        print(f"lowest {y}: {best[y]} at {best['key']}")
    if plot:
        try:
            os.makedirs(os.path.dirname(os.path.abspath(plot)), exist_ok=True)
            print(plot_results(rows, spec.plot, plot))
        except OSError as e:
            print(f"halsim: error: --plot {plot!r}: {e.strerror or e} (the results are in {args.out})",
                  file=sys.stderr)
            return 2
    return 0


COMMANDS = {"sweep": cmd_sweep}
