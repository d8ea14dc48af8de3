"""Helpers for the simulator's tests: devices that are always closed, and exact cost models."""

import pytest

from halsim.sim.driver import driver

# Every cost zero: tests add the few costs they want to see, so expected times are exact.
ZERO = {
    "host_api_ns": 0, "submit_ns": 0, "wake_ns": 0, "launch_ns": 0,
    "fill_latency_ns": 0, "copy_latency_ns": 0, "update_latency_ns": 0,
    "dispatch_base_ns": 0, "dispatch_per_workgroup_ns": 0, "barrier_ns": 0, "event_ns": 0,
    "host_call_latency_ns": 0, "alloca_ns": 0, "dealloca_ns": 0,
    "fill_gb_per_s": 1e12, "copy_gb_per_s": 1e12, "update_gb_per_s": 1e12,
    "kernels": {"spin": {"base_ns": 0, "per_workgroup_ns": 0, "per_unit_ns": 0, "unit_constant": 0}},
}


def costs(**fields) -> dict:
    """ZERO with ``fields`` overridden (nested ``kernels`` merged)."""
    out = dict(ZERO)
    out["kernels"] = {k: dict(v) for k, v in ZERO["kernels"].items()}
    for key, value in fields.items():
        if key == "kernels":
            for name, entry in value.items():
                out["kernels"].setdefault(name, {}).update(entry)
        else:
            out[key] = value
    return out


@pytest.fixture
def make():
    """``make(personality="generic", **options)``: a sim device, closed after the test."""
    devices = []

    def create(personality: str = "generic", **options):
        dev = driver.create_device(personality, **options)
        devices.append(dev)
        return dev

    yield create
    for dev in devices:
        dev.close()


@pytest.fixture(params=["generic", "sync"])
def personality(request) -> str:
    return request.param
