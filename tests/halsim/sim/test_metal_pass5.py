"""Fifth-pass regressions: the cost model and sim:metal (exact virtual times; tests/halsim/sim/conftest.py
zeroes what a test does not set)."""

import pathlib

import pytest

from halsim.sim import CostModel
from reference import hal
from tests.conftest import WAIT
from tests.halsim.sim.conftest import costs

S = hal.StatusCode
METAL_ZERO = dict(commit_ns=0, encoder_switch_ns=0, event_wait_ns=0, event_record_ns=0, listener_ns=0,
                  completion_ns=0)
DOC = pathlib.Path(__file__).resolve().parents[3] / "docs" / "cost-model.md"


# -- transfers: latency + ceil(n / gb_per_s), exactly ------------------------------------------------------

@pytest.mark.parametrize("rate, nbytes, ns", [
    (0.7, 21, 30), (1.4, 21, 15), (1.4, 168, 120),   # a float quotient gave 31, 16, 121
    (200.0, 512, 3), (12.0, 36, 3), (1e12, 16, 1), (2, 0, 0),
])
def test_transfer_is_the_exact_ceiling_of_bytes_over_the_decimal_bandwidth(rate, nbytes, ns):
    model = CostModel.from_dict({"copy_latency_ns": 7, "copy_gb_per_s": rate})
    assert model.transfer_ns("copy", nbytes) == 7 + ns


def test_a_sim_metal_fill_at_a_decimal_bandwidth_ends_at_the_hand_computed_time(make):
    dev = make("metal", cost_model=costs(**METAL_ZERO, fill_latency_ns=100, fill_gb_per_s=1.4))
    buf = dev.allocator.allocate_buffer(32)
    s = dev.create_semaphore()
    dev.queue_fill([], [(s, 1)], buf, 0, 21, 1, 1)
    s.wait(1, WAIT)
    (op,) = dev.trace.operations()
    assert (op["start"], op["end"]) == (0, 100 + 15)


def test_a_tiny_bandwidth_is_a_very_long_transfer_not_a_crash(make):
    dev = make("metal", cost_model={"fill_gb_per_s": 1e-320})
    assert dev.cost.transfer_ns("fill", 16) == dev.cost.fill_latency_ns + 16 * 10 ** 320
    buf = dev.allocator.allocate_buffer(16)
    s = dev.create_semaphore()
    dev.queue_fill([], [(s, 1)], buf, 0, 16, 1, 1)
    with pytest.raises(hal.HalError) as e:
        s.wait(1, 0.001)
    assert e.value.code == S.DEADLINE_EXCEEDED


def test_replace_and_round_trips_keep_the_exact_bandwidths(tmp_path):
    model = CostModel.from_dict({"update_gb_per_s": 0.7})
    path = tmp_path / "m.json"
    model.save(path)
    again = CostModel.load(path)
    assert again == model and again.transfer_ns("update", 21) == model.update_latency_ns + 30


# -- the format header ---------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [True, 1.0, "1"])
def test_version_must_be_the_integer_one(version):
    with pytest.raises(hal.HalError) as e:
        CostModel.from_dict({"format": "halsim-cost-model", "version": version})
    assert e.value.code == S.INVALID_ARGUMENT
    assert e.value.message == f"cost model version {version!r} not supported (this reader: 1)"
    assert CostModel.from_dict({"version": 1}) == CostModel()


# -- docs ------------------------------------------------------------------------------------------------

def test_commit_ns_row_counts_the_command_buffers_a_submission_commits(make):
    dev = make("metal", cost_model=costs(**{**METAL_ZERO, "commit_ns": 1000}))
    buf = dev.allocator.allocate_buffer(16)
    a, b = dev.create_semaphore(), dev.create_semaphore()
    a.signal(1)
    t0 = dev.now()
    dev.queue_fill([(a, 1)], [(b, 1)], buf, 0, 16, 1, 1)
    assert dev.now() - t0 == 2 * 1000          # the wait command buffer and the work (signal) one
    b.wait(1, WAIT)
    row = next(line for line in DOC.read_text().splitlines() if line.startswith("| `commit_ns`"))
    assert "three steps" not in row and "commits two" in row
