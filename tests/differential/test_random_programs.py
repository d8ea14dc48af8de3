"""Random programs, run on IREE's local-task (the oracle) and on ours; see docs/differential.md.

Each example: the model (program.analyze) validates the program and predicts its outcome; IREE must
match the prediction (this checks the harness itself), ours (local-task) must match IREE, and where the
program never waits before signalling, ours (local-sync) must match the local-sync prediction.
Derandomized, so every CI run checks the same programs.
"""

import os
import random
from collections import Counter

from hypothesis import HealthCheck, event, given, settings

from .compare import check_expected, diff, report
from .generate import Chooser, generate, programs
from .program import Alloca, Dealloca, Execute, HostFail, HostWait, QueueCopy, Update, analyze
from .runners import run_iree, run_ours

# Programs per run (derandomized: the same ones every run). Scale up for a longer hunt, e.g.
# HALSIM_DIFFERENTIAL_EXAMPLES=20000 (the queue-call property gets 40 % of that).
EXAMPLES = int(os.environ.get("HALSIM_DIFFERENTIAL_EXAMPLES", "500"))
QUEUE_CALL_EXAMPLES = max(1, EXAMPLES * 2 // 5)


def _settings(n):
    return settings(max_examples=n, deadline=None, derandomize=True, database=None, print_blob=False,
                    suppress_health_check=list(HealthCheck))


def _features(program, exp, sexp):
    steps = program.steps
    feats = {
        "wait-before-signal": not sexp.eligible,
        "host fail": any(isinstance(s, HostFail) for s in steps),
        "failure propagates through queue ops": bool(exp.doomed),
        "queue call raises (IREE)": any(v is not None and v.code != "OK" for v in exp.submits.values()),
        "alloca": any(isinstance(s, Alloca) for s in steps),
        "dealloca": any(isinstance(s, Dealloca) for s in steps),
        "queue_copy": any(isinstance(s, QueueCopy) for s in steps),
        "update": any(isinstance(c, Update) for s in steps if isinstance(s, Execute) for c in s.commands),
        "mid-program host wait": any(isinstance(s, HostWait) for s in steps[:-len(program.semaphores)]),
    }
    return [k for k, v in feats.items() if v]


@_settings(EXAMPLES)
@given(programs())
def test_random_programs_match_iree(program):
    exp = analyze(program)
    sexp = analyze(program, "sync")
    for f in _features(program, exp, sexp):
        event(f)
    iree = run_iree(program, exp.timeouts)
    problems = check_expected(iree, exp, program)  # the oracle behaves as modelled: the harness is sound
    ours = run_ours(program, "local-task", exp.timeouts)
    problems += diff(ours, iree, exp, program, queue_calls=False)
    outcomes = [ours, iree]
    if sexp.eligible:  # no wait-before-signal: local-sync can run it on one thread
        sync = run_ours(program, "local-sync", sexp.timeouts)
        problems += check_expected(sync, sexp, program)
        outcomes.append(sync)
    assert not problems, report(program, problems, *outcomes)


@_settings(QUEUE_CALL_EXAMPLES)
@given(programs())
def test_random_programs_queue_calls_match_iree(program):
    """What each queue call itself returns, where that does not depend on timing (a call whose wait
    already failed: IREE's local-task raises that failure from the call, and fails the signals too)."""
    exp = analyze(program)
    iree = run_iree(program, exp.timeouts)
    ours = run_ours(program, "local-task", exp.timeouts)
    problems = diff(ours, iree, exp, program, queue_calls=True)
    assert not problems, report(program, problems, ours, iree)


def test_generator_covers_every_case():
    """The property above is only as good as its programs: the generator must keep producing every
    case the differential check is for (a regression here would make it pass vacuously)."""
    seen = Counter()
    n = 300
    for seed in range(n):
        program = generate(Chooser(rng=random.Random(seed)))
        seen.update(_features(program, analyze(program), analyze(program, "sync")))
    for feature, at_least in {"wait-before-signal": 0.2, "host fail": 0.15,
                              "failure propagates through queue ops": 0.1, "queue call raises (IREE)": 0.08,
                              "alloca": 0.2, "dealloca": 0.15, "queue_copy": 0.2, "update": 0.3,
                              "mid-program host wait": 0.2}.items():
        assert seen[feature] >= at_least * n, (feature, seen[feature], dict(seen))
    assert n - seen["wait-before-signal"] >= 0.3 * n, dict(seen)  # local-sync gets programs too
