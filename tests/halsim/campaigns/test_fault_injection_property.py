"""Fault injection on every sim personality, over generated programs (issue 8's property).

For each program and personality: the fault-free run, a run with ``fault_rate`` (random
``DATA_LOSS`` faults) and a run with explicit ``faults`` (``INTERNAL`` on chosen operations). Every
run finishes within a bounded real time (a hang fails the test); every call that raised in a
faulted run raised the injected status, a ``DeadlockError``, or exactly what the same call raised in
the fault-free run; and ``halsim check`` flags no hazard or lifetime finding the fault-free run did
not have.
"""

import threading

import pytest

from halsim.campaigns.generate import generate
from halsim.checks import check_trace
from halsim.schedule import parse_schedule, run_schedule
from reference.hal import StatusCode

PERSONALITIES = ["sim", "sim:sync", "sim:metal", "sim:cuda", "sim:opencl"]
SEEDS = range(12)
RUN_TIMEOUT = 30.0


def run_bounded(doc):
    box = {}

    def target():
        try:
            box["result"] = run_schedule(parse_schedule(doc))
        except BaseException as e:  # noqa: BLE001 - reported below
            box["error"] = e

    t = threading.Thread(target=target, name="faulted program", daemon=True)
    t.start()
    t.join(RUN_TIMEOUT)
    assert not t.is_alive(), f"the program hung (more than {RUN_TIMEOUT} s): {doc['device']}"
    if "error" in box:
        raise box["error"]
    return box["result"]


def hazards(trace) -> set:
    return {(f.rule, tuple(f.ops), f.details.get("buffer"), tuple(f.details.get("range", ())))
            for f in check_trace(trace).findings if f.category in ("hazard", "lifetime")}


def program(device, program_seed, **options):
    return generate(program_seed, size=10, drop_sync=0.0, device=device, fail_prob=0.3 if device != "sim:cuda" else 0.0,
                    wait_before_signal=device != "sim:sync", options=options)


@pytest.mark.parametrize("device", PERSONALITIES)
def test_faults_propagate_and_never_hang(device):
    raised = {"rate": 0, "explicit": 0}
    for seed in SEEDS:
        base = run_bounded(program(device, seed))
        base_errors = {(e.where, e.code) for e in base.errors}
        base_hazards = hazards(base.trace)
        ops = sum(1 for e in base.trace.events("op"))
        runs = {
            "rate": (program(device, seed, fault_rate=0.25, seed=seed), StatusCode.DATA_LOSS),
            "explicit": (program(device, seed, faults=[{"op": f"0:{k}", "status": "INTERNAL", "message": "boom"}
                                                       for k in range(0, ops, 3)]), StatusCode.INTERNAL),
        }
        for name, (doc, status) in runs.items():
            result = run_bounded(doc)
            for e in result.errors:
                ok = e.deadlock or e.code == int(status) or (e.where, e.code) in base_errors
                assert ok, f"{device} seed {seed} ({name}): {e} is neither the injected status nor a deadlock"
                raised[name] += e.code == int(status)
            new = hazards(result.trace) - base_hazards
            assert not new, f"{device} seed {seed} ({name}): new findings under faults: {sorted(new)}"
    # the faults did propagate to the host (the property is not vacuous)
    assert raised["rate"] > 0 and raised["explicit"] > 0, raised
