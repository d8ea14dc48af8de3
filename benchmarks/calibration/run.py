"""Calibrate ``sim:opencl`` on PoCL and measure its prediction error on held-out programs (issue 7).

1. Every program of :mod:`programs` runs ``--reps + 1`` times on ``opencl?queues=2``, each on a fresh
   device, round-robin over the programs; the first round is dropped (it pays PoCL's kernel JIT /
   cache load).
2. ``halsim.calibrate.fit`` fits the cost model on the training traces.
3. Every program runs on ``sim:opencl?queues=2`` with the fitted model and with the default model;
   each is compared with every kept real run: per-op duration absolute percentage error (ops with
   device timestamps: fill, copy, update, dispatch, execute) and makespan error per program (the trace
   diff's makespan: first enqueue → last op end, ``halsim.trace_tools.diff``) against the median real
   makespan.
   The main fit is plain least squares over every sample (``--trim 0``): a makespan is a sum of
   latencies, so their means are what predicts it. A variant that drops outliers beyond
   ``--variant-trim`` robust standard deviations is evaluated alongside (``docs/accuracy.md``).
4. Writes ``results.json``, ``model.json``, the traces and ``makespan.png`` (predicted vs measured)
   under ``--out``, and prints the tables.

    .venv/bin/python benchmarks/calibration/run.py --reps 10          # what BENCHMARKS.md records
    .venv/bin/python benchmarks/calibration/run.py --reps 2 --out /tmp/cal

From Python (``notebooks/05_sim_vs_hardware.ipynb``): ``run_experiment(reps, out)`` does steps 1-4
without printing the tables and returns the results; ``table`` and ``summary_line`` format them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.dirname(HERE))  # benchmarks/: pinning

import numpy as np  # noqa: E402

import programs  # noqa: E402
from pinning import pin_cpus  # noqa: E402
from halsim.calibrate import fit  # noqa: E402
from halsim.calibrate.fit import (  # noqa: E402
    TIMED_KINDS, Samples, align_clocks, format_table, load_trace, trace_samples)
from halsim.trace_tools.diff import diff_traces  # noqa: E402
from reference import hal  # noqa: E402
from reference.trace import Trace  # noqa: E402

REAL = "opencl?queues=2"
SIM = "sim:opencl?queues=2"


def run(uri: str, program, **options):
    dev = hal.create_device(uri, **options)
    try:
        program(dev)
    finally:
        dev.close()
    return dev.trace


def as_trace(header: dict, events) -> Trace:
    out = Trace(header)
    for e in events:
        out.emit(e)
    return out


def aligned(trace) -> Trace:
    """A real trace with its device timestamps shifted onto a causal host clock (``align_clocks``)."""
    events, _shift = align_clocks(list(trace))
    return as_trace(trace.header, events)


def durations(trace) -> dict[str, int]:
    return {o["op"]: o["end"] - o["start"] for o in trace.operations()
            if o.get("kind") in TIMED_KINDS and o.get("start") is not None and o.get("end") is not None
            and o.get("status") == 0}


def makespan(real_trace, sim_trace) -> tuple[int, int]:
    m = diff_traces(real_trace, sim_trace, tolerance=1e9)["makespan"]
    return m["a"], m["b"]


def pct(values, q):
    return float(np.percentile(np.array(values, dtype=float), q)) if values else None


def collect(reps: int, out: str, log=print) -> dict:
    """Run every program on the real device; save the kept traces; {name: [trace paths]}.

    Round-robin (every program once per round), so a drift in the machine's load during the
    collection reaches training and held-out programs alike; round 0 is dropped (PoCL's kernel JIT
    and program cache load)."""
    os.makedirs(os.path.join(out, "traces"), exist_ok=True)
    everything = {**programs.TRAINING, **programs.HELD_OUT}
    paths: dict = {name: [] for name in everything}
    for r in range(reps + 1):
        for name, program in everything.items():
            trace = run(REAL, program)
            if r == 0:
                continue
            path = os.path.join(out, "traces", f"{name}.{r}.trace.json")
            trace.save(path)
            paths[name].append(path)
    log(f"  {len(everything)} programs x {reps} runs kept")
    return paths


def evaluate(paths: dict, model, names) -> dict:
    """Predict each program with ``model`` (None = defaults) and compare with its real runs."""
    out = {}
    for name in names:
        program = {**programs.TRAINING, **programs.HELD_OUT}[name]
        sim = run(SIM, program, **({"cost_model": model} if model is not None else {}))
        sim_d = durations(sim)
        apes, spans = [], []
        for path in paths[name]:
            real = aligned(Trace.load(path))
            real_span, sim_span = makespan(real, sim)
            spans.append(real_span)
            for op, d in durations(real).items():
                if d > 0 and op in sim_d:
                    apes.append(abs(sim_d[op] - d) / d)
        real_span = statistics.median(spans)
        _a, sim_span = makespan(aligned(Trace.load(paths[name][0])), sim)
        out[name] = {"real_makespan_ns": real_span, "real_makespan_min_ns": min(spans),
                     "real_makespan_max_ns": max(spans), "sim_makespan_ns": sim_span,
                     "makespan_error": (sim_span - real_span) / real_span,
                     "op_ape_median": pct(apes, 50), "op_ape_p90": pct(apes, 90), "ops_compared": len(apes)}
    return out


def diagnostics(paths: dict) -> dict:
    """What the real time is made of: each sample group's distribution (mean vs median shows the
    tails), and per program the device-busy share of the makespan and the overlap between queues."""
    samples = Samples()
    programs_out = {}
    for name, ps in paths.items():
        busy, span, overlap = [], [], []
        for p in ps:
            events, _shift = align_clocks(list(load_trace(p)))
            samples.extend(trace_samples(events))
            ops = as_trace({}, events)
            iv = sorted((o["start"], o["end"], o.get("queue")) for o in ops.operations()
                        if o.get("kind") in TIMED_KINDS and o.get("start") is not None and o.get("end") is not None)
            t0 = min(e["t"] for e in events if e.get("ev") == "op")
            ms = max(e for _s, e, _q in iv) - t0
            busy.append(sum(e - s for s, e, _q in iv) / ms)
            span.append(ms)
            ov = 0
            for i, (s0, e0, q0) in enumerate(iv):
                for s1, e1, q1 in iv[i + 1:]:
                    if s1 >= e0:
                        break
                    if q1 != q0:
                        ov += min(e0, e1) - s1
            overlap.append(ov)
        programs_out[name] = {"device_busy_share_median": statistics.median(busy),
                              "cross_queue_overlap_ns_median": statistics.median(overlap)}
    groups = {}
    for g, (_xs, ys) in sorted(samples.rows.items()):
        if g.startswith(("transfer:", "dispatch:")):
            continue
        y = np.array(ys, dtype=float)
        groups[g] = {"n": len(y), "mean_ns": float(y.mean()), "median_ns": float(np.median(y)),
                     "p90_ns": float(np.percentile(y, 90)), "max_ns": float(y.max())}
    return {"groups": groups, "programs": programs_out}


def plot(results: dict, path: str) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 5.2), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    lo, hi = float("inf"), 0.0
    for label, key, marker in (("calibrated", "calibrated", "o"), ("default model", "default", "x")):
        for split, color in (("training", "tab:blue"), ("held_out", "tab:red")):
            rows = results[key][split]
            xs = [r["real_makespan_ns"] / 1e6 for r in rows.values()]
            ys = [r["sim_makespan_ns"] / 1e6 for r in rows.values()]
            if not xs:
                continue
            lo, hi = min(lo, *xs, *ys), max(hi, *xs, *ys)
            ax.scatter(xs, ys, marker=marker, color=color if key == "calibrated" else "gray",
                       label=f"{label}, {split.replace('_', '-')}" if key == "calibrated"
                       else ("default model, all programs" if split == "training" else None))
            if key == "calibrated" and split == "held_out":
                for n, x, y in zip(rows, xs, ys):
                    ax.annotate(n.replace("held_", ""), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.plot([lo * 0.8, hi * 1.25], [lo * 0.8, hi * 1.25], color="k", lw=0.8, ls="--", label="predicted = measured")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured makespan on opencl (PoCL), ms (median of runs)")
    ax.set_ylabel("predicted makespan on sim:opencl, ms")
    ax.set_title("sim:opencl makespan: calibrated vs default cost model")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def summary(rows: dict) -> dict:
    errs = [abs(r["makespan_error"]) for r in rows.values()]
    med = [r["op_ape_median"] for r in rows.values() if r["op_ape_median"] is not None]
    p90 = [r["op_ape_p90"] for r in rows.values() if r["op_ape_p90"] is not None]
    return {"makespan_abs_error_median": statistics.median(errs) if errs else None,
            "makespan_abs_error_max": max(errs) if errs else None,
            "op_ape_median": statistics.median(med) if med else None, "op_ape_p90": statistics.median(p90) if p90
            else None}


def table(title: str, cal: dict, dflt: dict) -> str:
    lines = [title, f"{'program':<20} {'measured ms':>12} {'calibrated ms':>14} {'err':>8} {'default ms':>11} "
             f"{'err':>8}   op APE med/p90 (cal)  (default)"]
    for n in cal:
        c, d = cal[n], dflt[n]
        lines.append(f"{n:<20} {c['real_makespan_ns'] / 1e6:>12.3f} {c['sim_makespan_ns'] / 1e6:>14.3f} "
                     f"{100 * c['makespan_error']:>7.1f}% {d['sim_makespan_ns'] / 1e6:>11.3f} "
                     f"{100 * d['makespan_error']:>7.1f}%   {100 * c['op_ape_median']:5.1f}% / "
                     f"{100 * c['op_ape_p90']:5.1f}%   {100 * d['op_ape_median']:5.1f}% / "
                     f"{100 * d['op_ape_p90']:5.1f}%")
    return "\n".join(lines)


def run_experiment(reps: int = 10, out: str = "out/calibration", *, partial: bool = False, trim: float = 0.0,
                   variant_trim: float = 5.0, reuse: bool = False, pocl_threads="default", pinned: str | None = None,
                   command: str | None = None,
                   log=print) -> dict:
    """The whole experiment (steps 1-4 above): run, fit, predict, compare; write ``results.json``,
    ``model.json``, ``model_variant.json``, the traces and ``makespan.png`` under ``out``; return the
    results (``results["calibrated"]["held_out"]`` etc.; :func:`table` prints them).

    ``reps``: kept real runs per program; ``trim``/``variant_trim``: robust standard deviations for the
    main and the variant fit (0: plain least squares); ``reuse``: the traces already under ``out``.
    ``pocl_threads`` and ``pinned`` are only recorded: PoCL reads ``POCL_MAX_PTHREAD_COUNT`` and
    ``POCL_AFFINITY`` when it starts (``main`` sets them, and pins, before the first device). ``log``
    gets the progress lines and the fit table."""
    t0 = time.perf_counter()
    log(f"running {len(programs.TRAINING) + len(programs.HELD_OUT)} programs x {reps + 1} on {REAL}"
        + (f" ({pinned})" if pinned else "") + " ...")
    if reuse:
        paths = {n: sorted(os.path.join(out, "traces", f) for f in os.listdir(os.path.join(out, "traces"))
                           if f.startswith(n + ".")) for n in {**programs.TRAINING, **programs.HELD_OUT}}
    else:
        paths = collect(reps, out, log=log)
    training = [p for n in programs.TRAINING for p in paths[n]]
    cal = fit(training, personality="opencl", partial=partial, trim=trim or None)
    model_path = os.path.join(out, "model.json")
    cal.save(model_path)
    log(format_table(cal))
    results: dict = {"command": command or f"benchmarks/calibration/run.py --reps {reps} --out {out}",
                     "real": REAL, "sim": SIM, "reps_kept": reps, "machine": platform.platform(),
                     "cpu_count": os.cpu_count(), "switch_interval_s": sys.getswitchinterval(),
                     "pocl_threads": pocl_threads, "pinned": pinned,
                     "fit": cal.to_dict()}
    variant_fit = fit(training, personality="opencl", partial=partial, trim=variant_trim or None)
    variant_path = os.path.join(out, "model_variant.json")
    variant_fit.save(variant_path)
    results["fit_variant"] = variant_fit.to_dict()
    for key, model in (("calibrated", model_path), ("calibrated_variant", variant_path), ("default", None)):
        results[key] = {"training": evaluate(paths, model, programs.TRAINING),
                        "held_out": evaluate(paths, model, programs.HELD_OUT)}
        results[key]["summary_held_out"] = summary(results[key]["held_out"])
        results[key]["summary_training"] = summary(results[key]["training"])
    c, d = results["calibrated"]["summary_held_out"], results["default"]["summary_held_out"]
    results["improvement_held_out"] = (d["makespan_abs_error_median"] / c["makespan_abs_error_median"]
                                       if c["makespan_abs_error_median"] else None)
    results["targets_met"] = {"median_held_out_makespan_error_le_10pct": c["makespan_abs_error_median"] <= 0.10,
                              "calibrated_3x_better": (results["improvement_held_out"] or 0) >= 3}
    results["diagnostics"] = diagnostics(paths)
    results["seconds"] = time.perf_counter() - t0
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    plot(results, os.path.join(out, "makespan.png"))
    return results


def summary_line(split: str, results: dict) -> str:
    """One line: median |makespan error| and op APE of ``split`` ("held_out" or "training")."""
    c, d = results["calibrated"][f"summary_{split}"], results["default"][f"summary_{split}"]
    return (f"{split}: median |makespan error| calibrated {100 * c['makespan_abs_error_median']:.1f}% "
            f"(max {100 * c['makespan_abs_error_max']:.1f}%), default {100 * d['makespan_abs_error_median']:.1f}%; "
            f"op APE median {100 * c['op_ape_median']:.1f}% / p90 {100 * c['op_ape_p90']:.1f}% calibrated, "
            f"{100 * d['op_ape_median']:.1f}% / {100 * d['op_ape_p90']:.1f}% default")


def report(results: dict, variant_trim: float, out: str) -> None:
    """Print the tables of :func:`run_experiment`'s results (what the command prints after the fit)."""
    print()
    print(table("training programs (fitted on)", results["calibrated"]["training"], results["default"]["training"]))
    print()
    print(table("held-out programs", results["calibrated"]["held_out"], results["default"]["held_out"]))
    print()
    variant = (f"outliers beyond {variant_trim:g} robust standard deviations dropped" if variant_trim
               else "plain least squares over every sample")
    print(table(f"held-out programs, variant fit ({variant})",
                results["calibrated_variant"]["held_out"], results["default"]["held_out"]))
    print()
    r = results["calibrated_variant"]["summary_held_out"]
    print(f"held_out, variant fit: median |makespan error| {100 * r['makespan_abs_error_median']:.1f}% "
          f"(max {100 * r['makespan_abs_error_max']:.1f}%); op APE median {100 * r['op_ape_median']:.1f}% / "
          f"p90 {100 * r['op_ape_p90']:.1f}%")
    for split in ("held_out", "training"):
        print(summary_line(split, results))
    print(f"improvement (held-out median makespan error, default / calibrated): {results['improvement_held_out']:.2f}x")
    print(f"targets: {results['targets_met']}")
    print()
    print("real-engine sample groups (all programs): n, mean, median, p90, max (us)")
    for g, r in results["diagnostics"]["groups"].items():
        print(f"  {g:<14} {r['n']:>5} {r['mean_ns'] / 1e3:>9.1f} {r['median_ns'] / 1e3:>9.1f} "
              f"{r['p90_ns'] / 1e3:>9.1f} {r['max_ns'] / 1e3:>9.1f}")
    print("device busy share of the makespan, overlap between queues (median of runs)")
    for n, r in results["diagnostics"]["programs"].items():
        print(f"  {n:<20} {100 * r['device_busy_share_median']:5.1f}%  "
              f"{r['cross_queue_overlap_ns_median'] / 1e3:8.1f} us")
    print(f"wrote {out}/results.json, model.json, makespan.png ({results['seconds']:.1f} s)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5, help="kept real runs per program (one more is run and dropped)")
    ap.add_argument("--out", default="out/calibration", help="output directory (default: %(default)s)")
    ap.add_argument("--partial", action="store_true", help="keep defaults for parameters that cannot be fitted")
    ap.add_argument("--trim", type=float, default=0.0, help="the main fit drops outliers beyond this many robust "
                    "standard deviations (default: %(default)s = plain least squares)")
    ap.add_argument("--variant-trim", type=float, default=5.0, help="the variant fit, reported alongside: this many "
                    "robust standard deviations (default: %(default)s; 0: plain least squares)")
    ap.add_argument("--reuse", action="store_true", help="reuse the traces already under --out (no real runs)")
    ap.add_argument("--pocl-threads", type=int, default=1, help="PoCL's compute threads (POCL_MAX_PTHREAD_COUNT; "
                    "default: %(default)s, so that on 2 CPUs the device has a core of its own, as a GPU is a "
                    "processor of its own, instead of taking the host program's: 0 = PoCL's default, one per CPU)")
    ap.add_argument("--no-pin", dest="pin", action="store_false", help="do not pin threads to CPUs (by default, "
                    "with at least 2 CPUs and --pocl-threads below the CPU count, PoCL's compute threads are pinned "
                    "to the first CPUs (POCL_AFFINITY) and this process's own threads to the others)")
    ap.add_argument("--switch-interval", type=float, help="experiment: sys.setswitchinterval(S) before the real "
                    "runs (CPython's default is 0.005 s: how long a thread that wants the interpreter lock waits)")
    args = ap.parse_args(argv)
    if args.pocl_threads:  # before PoCL starts (the first device)
        os.environ["POCL_MAX_PTHREAD_COUNT"] = str(args.pocl_threads)
    pinned = args.pin and pin_cpus(args.pocl_threads)
    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval)
    results = run_experiment(args.reps, args.out, partial=args.partial, trim=args.trim,
                             variant_trim=args.variant_trim, reuse=args.reuse,
                             pocl_threads=args.pocl_threads or "default", pinned=pinned,
                             command="benchmarks/calibration/run.py "
                             + " ".join(argv if argv is not None else sys.argv[1:]))
    report(results, args.variant_trim, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
