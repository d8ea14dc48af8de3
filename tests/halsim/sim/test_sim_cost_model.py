"""The cost model: defaults, load/save, strict validation, and docs/cost-model.md covering every field."""

import json
import re
from pathlib import Path

import pytest

from halsim.sim import CostModel
from halsim.sim.cost_model import DEFAULTS, KERNEL_FIELDS
from halsim.sim.driver import driver
from reference import hal

S = hal.StatusCode
DOC = Path(__file__).resolve().parents[3] / "docs" / "cost-model.md"


def invalid(fn, *args, named: str):
    with pytest.raises(hal.HalError) as ei:
        fn(*args)
    assert ei.value.code == S.INVALID_ARGUMENT
    assert named in ei.value.message, ei.value.message
    return ei.value


def test_defaults_are_the_documented_ones():
    doc = CostModel().to_dict()
    for key, value in DEFAULTS.items():
        if key != "kernels":
            assert doc[key] == value
    assert doc["kernels"]["spin"] == DEFAULTS["kernels"]["spin"]
    assert (doc["format"], doc["version"]) == ("halsim-cost-model", 1)


def test_save_and_load_round_trip(tmp_path):
    model = CostModel.from_dict({"launch_ns": 7, "copy_gb_per_s": 3.5,
                                 "kernels": {"axpy": {"base_ns": 9, "per_workgroup_ns": 1}}})
    path = tmp_path / "model.json"
    model.save(path)
    saved = json.loads(path.read_text())
    assert set(saved) == {"format", "version"} | set(DEFAULTS)  # every field is written
    assert CostModel.load(path) == model
    assert CostModel.load(path).kernels["axpy"] == {"base_ns": 9, "per_workgroup_ns": 1, "per_unit_ns": 0,
                                                    "unit_constant": None}


def test_a_partial_document_keeps_the_other_defaults(tmp_path):
    path = tmp_path / "partial.json"
    path.write_text('{"wake_ns": 1}')
    model = CostModel.load(path)
    assert model.wake_ns == 1 and model.launch_ns == DEFAULTS["launch_ns"]


def test_device_takes_a_path_or_a_dict(tmp_path, make):
    path = tmp_path / "m.json"
    CostModel.from_dict({"launch_ns": 123}).save(path)
    assert make("generic", cost_model=str(path)).cost.launch_ns == 123
    assert make("generic", cost_model=path).cost.launch_ns == 123
    assert make("sync", cost_model={"launch_ns": 5}).cost.launch_ns == 5
    assert make("generic").trace.header["cost_model"] == CostModel().to_dict()


@pytest.mark.parametrize("doc, named", [
    ({"launch_nanos": 1}, "'launch_nanos'"),
    ({"kernels": {"spin": {"iterations_ns": 1}}}, "'kernels.spin.iterations_ns'"),
    ({"launch_ns": -1}, "'launch_ns'"), ({"launch_ns": 1.5}, "'launch_ns'"), ({"launch_ns": True}, "'launch_ns'"),
    ({"fill_gb_per_s": 0}, "'fill_gb_per_s'"), ({"copy_gb_per_s": "fast"}, "'copy_gb_per_s'"),
    ({"update_gb_per_s": float("inf")}, "'update_gb_per_s'"),
    ({"fill_gb_per_s": 10 ** 400}, "'fill_gb_per_s'"),  # valid JSON; float() would overflow
    ({"kernels": []}, "'kernels'"), ({"kernels": {"abs": 3}}, "'kernels.abs'"),
    ({"kernels": {"spin": {"unit_constant": -1}}}, "'kernels.spin.unit_constant'"),
    ({"kernels": {"spin": {"per_unit_ns": None}}}, "'kernels.spin.per_unit_ns'"),
    ({"format": "other"}, "'format'"), ({"version": 2}, "version 2"),
])
def test_bad_documents_are_rejected_naming_the_field(doc, named):
    invalid(CostModel.from_dict, doc, named=named)


def test_a_kernel_override_merges_over_that_kernels_default_entry(make):
    """Giving only spin's per_unit_ns used to reset its other fields (unit_constant to null), so a
    spin of 1M iterations took 4,020 ns instead of 2,004,000."""
    spin = CostModel.from_dict({"kernels": {"spin": {"per_unit_ns": 2}}}).kernels["spin"]
    assert spin == {"base_ns": 4000, "per_workgroup_ns": 0, "per_unit_ns": 2, "unit_constant": 0}
    assert CostModel.from_dict({"kernels": {"spin": {"base_ns": 0}}}).kernels["spin"] == \
        {"base_ns": 0, "per_workgroup_ns": 0, "per_unit_ns": 1, "unit_constant": 0}
    # over a personality's (or an earlier document's) entry too
    base = CostModel.from_dict({"kernels": {"axpy": {"per_workgroup_ns": 9}}})
    assert CostModel.from_dict({"kernels": {"axpy": {"base_ns": 1}}}, base).kernels["axpy"] == \
        {"base_ns": 1, "per_workgroup_ns": 9, "per_unit_ns": 0, "unit_constant": None}
    dev = make("generic", cost_model={"kernels": {"spin": {"per_unit_ns": 2}}})
    exe, scratch, s = dev.load_executable(), dev.allocator.allocate_buffer(16), dev.create_semaphore()
    dev.queue_dispatch([], [(s, 1)], exe, "spin", (1, 1, 1), (1_000_000,), (scratch,))
    s.wait(1, 10)
    (cmd,) = dev.trace.events("cmd")
    assert cmd["t"] - cmd["start"] == 4000 + 2 * 1_000_000


@pytest.mark.parametrize("doc, named, says", [
    ({"kernels": {"axpy": {"per_unit_ns": 3}}}, "'kernels.axpy.unit_constant'", "got null"),
    ({"kernels": {"spin": {"unit_constant": None}}}, "'kernels.spin.unit_constant'", "per_unit_ns=1"),
    ({"kernels": {"spin": {"unit_constant": 5}}}, "'kernels.spin.unit_constant'", "takes 1 constant"),
    ({"kernels": {"abs": {"per_unit_ns": 1, "unit_constant": 0}}}, "'kernels.abs.unit_constant'",
     "takes no constants"),
    ({"device_concurrency": -1}, "'device_concurrency'", "integer count"),
    ({"device_concurrency": 1.5}, "'device_concurrency'", "integer count"),
])
def test_inconsistent_kernel_entries_and_bad_counts_are_rejected(doc, named, says):
    err = invalid(CostModel.from_dict, doc, named=named)
    assert says in err.message and "nanoseconds" not in err.message, err.message


def test_a_kernels_entry_for_a_kernel_the_library_lacks_is_a_typo():
    """Only the builtin library's kernels can be dispatched: another name would never be charged."""
    with pytest.raises(hal.HalError) as ei:
        CostModel.from_dict({"kernels": {"axyp": {"base_ns": 5}}})
    assert ei.value.code == S.INVALID_ARGUMENT
    assert ei.value.message == ("unknown kernel 'axyp' in cost model field 'kernels' (the builtin library's: abs, "
                                "axpy, double_it, negate, scale_and_offset, spin, write_constants, "
                                "write_dispatch_params, write_workgroup_ids)")


def test_unknown_field_in_a_file_given_as_option(tmp_path):
    path = tmp_path / "typo.json"
    path.write_text('{"fil_latency_ns": 10}')
    with pytest.raises(hal.HalError) as ei:
        driver.create_device("generic", cost_model=str(path))
    assert ei.value.code == S.INVALID_ARGUMENT and "'fil_latency_ns'" in ei.value.message


def test_unreadable_or_malformed_files(tmp_path):
    invalid(CostModel.load, tmp_path / "missing.json", named="cannot be read")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    invalid(CostModel.load, bad, named="not valid JSON")
    invalid(CostModel.from_dict, [1, 2], named="JSON object")


def test_kernel_override_falls_back_to_the_global_dispatch_fields():
    model = CostModel.from_dict({"dispatch_base_ns": 50, "dispatch_per_workgroup_ns": 5,
                                 "kernels": {"scale_and_offset": {"per_unit_ns": 3, "unit_constant": 1}}})
    assert model.dispatch_ns("scale_and_offset", 2, (7, 100)) == 50 + 10 + 300
    assert model.dispatch_ns("negate", 2) == 60
    assert model.dispatch_ns("spin", 8, (1000,)) == DEFAULTS["kernels"]["spin"]["base_ns"] + 1000


def test_every_field_is_documented():
    text = DOC.read_text()
    documented = set(re.findall(r"^\| `([a-z_.*]+)` \|", text, re.M))
    expected = {k for k in DEFAULTS if k != "kernels"} | {"kernels"} | {f"kernels.*.{k}" for k in KERNEL_FIELDS}
    assert expected <= documented, expected - documented
