"""``halsim fuzz --programs N``: generated programs run on a sim device and checked; every program
with findings is written as a replayable schedule file whose ``expect`` lists its rule ids
(``docs/campaigns.md``), so ``halsim check FILE`` reproduces it.

>>> r = fuzz_one({"size": 6, "drop_sync": 0.5, "queues": 2, "device": "sim"}, 3)
>>> r["seed"], sorted({rule for rule, _ in r["findings"]}) == r["doc"]["expect"]
(3, True)
>>> import tomllib
>>> tomllib.loads(dump_toml(r["doc"])) == r["doc"]
True
"""

from __future__ import annotations

import collections
import json
import os
import sys
import warnings

from .executor import EXIT_INTERRUPTED, CampaignError, HeldInterrupts, Interrupted, Progress, run_unordered
from .generate import generate, knob_problem


def check_document(doc: dict, path: str = "<generated>") -> list:
    """Run a schedule document as ``halsim check`` does and return its findings, sorted."""
    from halsim.checks import Finding, check_trace
    from halsim.schedule import parse_schedule, run_schedule
    from halsim.schedule.lint import error_findings, static_findings

    schedule = parse_schedule(doc, path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = run_schedule(schedule)
    findings = (check_trace(result.trace).findings + static_findings(schedule)
                + error_findings(result.errors, schedule, result.trace))
    return sorted(findings, key=Finding.sort_key)


def fuzz_one(knobs: dict, seed: int) -> dict:
    """Generate program ``seed`` with ``knobs`` (generator knobs plus ``device`` and ``options``),
    run and check it: ``{"seed", "findings": [(rule, message)], "doc"}`` (doc's ``expect`` filled)."""
    from .sweep import freeze_heap
    freeze_heap()
    doc = generate(seed, **knobs)
    try:
        findings = [(f.rule, f.message) for f in check_document(doc)]
        error = ""
    except Exception as e:  # noqa: BLE001 - a crash of the simulator on a valid program is a finding too
        findings, error = [], f"{type(e).__name__}: {e}"
    doc["expect"] = sorted({rule for rule, _ in findings})
    return {"seed": seed, "findings": findings, "doc": doc, "error": error}


def _task(knobs, seed):
    return fuzz_one(knobs, seed)


# -- TOML (the subset schedule documents use) ----------------------------------------------------------

def _key(k: str) -> str:
    return k if k and all(c.isalnum() or c in "_-" for c in k) else json.dumps(k)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }" if v else "{}"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def dump_toml(doc: dict) -> str:
    """A schedule document as TOML: scalars, then tables, ``[command_buffers.NAME]`` and ``[[host]]``."""
    lines = []
    for k, v in doc.items():
        if (not isinstance(v, dict) or not v) and not (k in ("host", "threads") and isinstance(v, list)):
            lines.append(f"{_key(k)} = {_value(v)}")
    for k, v in doc.items():
        if isinstance(v, dict) and v and k != "command_buffers":
            lines += ["", f"[{_key(k)}]"] + [f"{_key(a)} = {_value(b)}" for a, b in v.items()]
    for name, cb in doc.get("command_buffers", {}).items():
        lines += ["", f"[command_buffers.{_key(name)}]"]
        for a, b in cb.items():
            if a == "commands":
                lines.append("commands = [")
                lines += [f"  {_value(c)}," for c in b]
                lines.append("]")
            else:
                lines.append(f"{_key(a)} = {_value(b)}")
    for st in doc.get("host", []):
        lines += ["", "[[host]]"] + [f"{_key(a)} = {_value(b)}" for a, b in st.items()]
    for t in doc.get("threads", []):
        lines += ["", "[[threads]]", f"name = {_value(t.get('name', ''))}"]
        for st in t.get("steps", []):
            lines += ["[[threads.steps]]"] + [f"{_key(a)} = {_value(b)}" for a, b in st.items()]
    return "\n".join(lines) + "\n"


def write_finding(directory: str, result: dict) -> str:
    from reference.trace.atomic import atomic_write

    path = os.path.join(directory, f"fuzz_{result['seed']:06d}.toml")
    doc = dict(result["doc"])
    rules = collections.Counter(r for r, _ in result["findings"])
    doc["description"] = (doc.get("description", "") + "; findings: " +
                          ", ".join(f"{r} x{n}" for r, n in sorted(rules.items())))
    atomic_write(path, lambda f: f.write(dump_toml(doc)), mode="w")
    return path


def run_fuzz(programs: int, seed: int, knobs: dict, out: str | None, jobs: int = 1, dask: str | None = None,
             progress: bool = True, stream=None) -> dict:
    """Run the campaign; returns ``{"programs", "with_findings", "rules": Counter, "files", "crashes"}``."""
    if programs < 1:
        raise CampaignError(f"--programs {programs}: must be >= 1")
    if out:
        try:
            os.makedirs(out, exist_ok=True)
        except OSError as e:
            raise CampaignError(f"--out {out!r}: {e.strerror}") from None
    bar = Progress(programs, "fuzz", stream, unit="programs") if progress else None
    rules: collections.Counter = collections.Counter()
    files, crashes, with_findings, done = [], [], 0, 0
    try:
        for _seed, r in run_unordered(_task, knobs, range(seed, seed + programs), jobs, dask):
            done += 1
            if r["error"]:
                crashes.append((r["seed"], r["error"]))
            if r["findings"]:
                with_findings += 1
                rules.update(rule for rule, _ in r["findings"])
                if out:
                    with HeldInterrupts(raise_at_exit=True):  # (a Ctrl-C: after the file, with it counted)
                        files.append(write_finding(out, r))
            if bar:
                bar.update()
    except KeyboardInterrupt:
        kept = f"; their {len(files)} finding file{'s' if len(files) != 1 else ''} are in {out}" if out else ""
        raise Interrupted(f"interrupted: {done} of {programs} programs checked, {with_findings} with findings"
                          f"{kept}") from None
    finally:
        if bar:
            bar.close()
    return {"programs": programs, "with_findings": with_findings, "rules": rules, "files": sorted(files),
            "crashes": sorted(crashes)}


def add_parsers(sub) -> None:
    import argparse
    f = sub.add_parser("fuzz", help="run generated programs on a sim device, check them, write every finding "
                                    "as a replayable schedule (exit 0 clean, 1 findings, 2 bad input)",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Generate --programs random HAL programs (seeds --seed, --seed+1, …; some "
                       "synchronization dropped\nwith probability --drop-sync), run each on a sim device and "
                       "check it; write every program with\nfindings as a schedule file whose expect lists its "
                       "rules, so halsim check FILE replays it.\nExit 0 clean, 1 findings or crashes, 2 bad input "
                       "(docs/campaigns.md).",
                       epilog="Examples:\n  halsim fuzz --programs 100 --out findings/\n"
                              "  halsim fuzz -n 1000 --device sim:cuda --queues 4 --jobs 4\n"
                              "  halsim check findings/fuzz_000042.toml      replay one finding\n")
    f.add_argument("--programs", "-n", type=int, required=True, help="how many programs")
    f.add_argument("--seed", type=int, default=0, help="first program seed (default: %(default)s)")
    f.add_argument("--size", type=int, default=12, help="steps per program (default: %(default)s)")
    f.add_argument("--drop-sync", type=float, default=0.1,
                   help="probability of dropping each needed wait or barrier (default: %(default)s)")
    f.add_argument("--queues", type=int, default=2, help="queues (default: %(default)s)")
    f.add_argument("--fail-prob", type=float, default=0.0,
                   help="probability a gate semaphore is failed by the host (default: %(default)s)")
    f.add_argument("--device", default="sim", help="sim device URI (default: %(default)s)")
    f.add_argument("--fault-rate", type=float, default=0.0,
                   help="the device's fault_rate option (default: %(default)s)")
    f.add_argument("--out", help="folder for the finding files (fuzz_SEED.toml)")
    f.add_argument("--jobs", "-j", type=int, default=1, help="local worker processes (default: %(default)s)")
    f.add_argument("--dask", metavar="ADDRESS", help="'local' or tcp://host:port")
    f.add_argument("--quiet", "-q", action="store_true", help="no progress output")


def cmd_fuzz(args) -> int:
    try:
        for flag, knob, value in (("--seed", "seed", args.seed), ("--size", "size", args.size),
                                  ("--drop-sync", "drop_sync", args.drop_sync),
                                  ("--fail-prob", "fail_prob", args.fail_prob), ("--queues", "queues", args.queues)):
            problem = knob_problem(knob, value)  # (the same check as a sweep spec's generator knobs)
            if problem:
                raise CampaignError(f"{flag} {value}: {problem}")
        if not 0 <= args.fault_rate <= 1:
            raise CampaignError(f"--fault-rate {args.fault_rate}: must be in [0, 1]")
        if args.jobs < 1:
            raise CampaignError(f"--jobs {args.jobs}: must be >= 1")
        from reference import hal
        if not args.device.startswith("sim"):
            raise CampaignError(f"--device {args.device!r}: fuzzing runs on sim devices (sim, sim:cuda, …)")
        try:
            with hal.create_device(args.device) as dev:
                # wait-before-signal (host gates) only where queue calls do not block the host
                # (sim:sync, sim:metal?legacy_sync=1: a consumer submitted first would deadlock)
                asynchronous = "async_queue" in dev.capabilities
        except hal.HalError as e:
            raise CampaignError(f"--device {args.device!r}: {e}") from None
        try:  # the generated programs' device: --queues in the device's range, before any program runs
            hal.create_device(args.device, queues=args.queues).close()
        except hal.HalError as e:
            raise CampaignError(f"--queues {args.queues}: {e.message if hasattr(e, 'message') else e}") from None
        options = {"fault_rate": args.fault_rate} if args.fault_rate else {}
        knobs = {"size": args.size, "drop_sync": args.drop_sync, "queues": args.queues, "fail_prob": args.fail_prob,
                 "device": args.device, "options": options,
                 "wait_before_signal": asynchronous}
        summary = run_fuzz(args.programs, args.seed, knobs, args.out, args.jobs, args.dask, not args.quiet)
    except CampaignError as e:
        print(f"halsim: error: {e}", file=sys.stderr)
        return 2
    except Interrupted as e:
        print(f"halsim: {e}", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"fuzz: {summary['programs']} programs on {args.device} (seeds {args.seed}..{args.seed + args.programs - 1}),"
          f" {summary['with_findings']} with findings")
    for rule, n in sorted(summary["rules"].items()):
        print(f"  {rule:<34} {n}")
    for seed, err in summary["crashes"]:
        print(f"  crash: seed {seed}: {err}")
    if args.out:
        print(f"finding files: {len(summary['files'])} in {args.out} (replay: halsim check FILE)")
    return 1 if summary["with_findings"] or summary["crashes"] else 0


COMMANDS = {"fuzz": cmd_fuzz}
