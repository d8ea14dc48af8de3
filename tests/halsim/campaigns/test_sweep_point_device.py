"""A sweep point's device is derived once (``sweep.point_device``): the spec check
(``check_points``) creates the very device, with the very options, that ``run_program`` runs on."""

from __future__ import annotations

import json

import pytest

from halsim.campaigns.sweep import check_points, parse_spec, run_program
from reference import hal

SCHEDULE = {"device": {"uri": "sim:metal", "options": {"queues": 2}}, "semaphores": {"s": 0},
            "host": [{"call": "barrier", "signal": {"s": 1}}]}
PROGRAM = "def main(dev):\n    dev.create_semaphore(0)\n"

SPECS = {
    # a generated program runs with the generator's default queues (2): the check left them out
    "generator": {"program": {"generator": {"size": 3}}, "grid": {"seed": [0]}},
    "generator-device": {"program": {"generator": {"size": 3, "queues": 3}},
                         "device": {"uri": "sim:cuda", "options": {"max_concurrency": 2}},
                         "grid": {"seed": [1]}},
    "generator-point-queues": {"program": {"generator": {"size": 3}}, "grid": {"queues": [1]}},
    "schedule": {"program": {"schedule": "prog.json"}, "grid": {"max_concurrency": [3]}},
    "python": {"program": {"python": "prog.py:main"}, "device": {"uri": "sim:opencl"},
               "grid": {"queues": [2], "cost.submit_ns": [7]}},
}


@pytest.fixture
def created(monkeypatch):
    """The (uri, options) of every device created (the cost model as its submit_ns)."""
    seen = []
    real = hal.create_device

    def create(uri, **options):
        model = options.get("cost_model")
        opts = {k: v for k, v in options.items() if k != "cost_model"}
        if model is not None:
            opts["submit_ns"] = model["submit_ns"]
        seen.append((uri, opts))
        return real(uri, **options)
    monkeypatch.setattr(hal, "create_device", create)
    return seen


@pytest.mark.parametrize("name", sorted(SPECS))
def test_check_points_creates_the_device_the_point_runs_on(name, created, tmp_path, monkeypatch):
    (tmp_path / "prog.json").write_text(json.dumps(SCHEDULE))
    (tmp_path / "prog.py").write_text(PROGRAM)
    spec = parse_spec(SPECS[name], str(tmp_path / "spec.toml"))
    (params,) = spec.points
    check_points(spec)
    (checked,) = created
    created.clear()
    run_program(spec.payload, params)
    ran_uri, ran_opts = created[0]
    ran_opts.pop("seed", None)  # (the check makes one device per configuration, whatever its seed)
    assert checked == (ran_uri, ran_opts)


def test_a_generated_points_device_has_the_generators_default_queues(created):
    check_points(parse_spec(SPECS["generator"]))
    assert created == [("sim", {"queues": 2})]
