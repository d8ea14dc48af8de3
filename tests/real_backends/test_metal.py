"""The ``metal`` backend's platform-independent parts (the adapter itself needs macOS and is untested in
CI): the resource-option bits it derives from ``reference.utils.metal_storage`` and the planner it
encodes through (``reference.utils.command_segments``, tested further in tests/reference)."""

from __future__ import annotations

import sys

import pytest

from real_backends.metal import adapter
from reference import hal
from reference.hal import MemoryType as MT


@pytest.mark.parametrize("memory_type, unified, storage, cache", [
    (MT.DEVICE_LOCAL, True, "Private", "WriteCombined"),
    (MT.DEVICE_LOCAL | MT.HOST_VISIBLE, True, "Shared", "WriteCombined"),
    (MT.DEVICE_LOCAL | MT.HOST_VISIBLE, False, "Managed", "WriteCombined"),
    (MT.HOST_LOCAL | MT.DEVICE_VISIBLE | MT.HOST_CACHED, True, "Shared", "DefaultCache"),
])
def test_resource_option_bits(memory_type, unified, storage, cache):
    bits = adapter.options_bits(memory_type, unified)
    # MTLResourceStorageModeShift = 4, MTLResourceCPUCacheModeShift = 0 (Metal/MTLResource.h)
    assert (bits >> 4) & 0xF == {"Shared": 0, "Managed": 1, "Private": 2}[storage]
    assert bits & 0xF == {"DefaultCache": 0, "WriteCombined": 1}[cache]
    assert not bits & (1 << 8)  # hazard tracking: Tracked


@pytest.mark.skipif(sys.platform == "darwin", reason="off macOS only")
def test_metal_adapter_refuses_off_macos():
    with pytest.raises(hal.HalError) as e:
        adapter.find_device()
    assert e.value.code == hal.StatusCode.UNAVAILABLE


@pytest.mark.gpu
def test_metal_smoke_on_a_mac():
    """On a Mac with the 'metal' extra: every kernel against the NumPy reference."""
    import numpy as np

    from reference.kernels import LIBRARY

    from .harness import dispatch, expected, random_inputs

    try:
        dev = hal.create_device("metal")
    except hal.HalError as e:
        if e.code != hal.StatusCode.UNAVAILABLE:
            raise
        pytest.skip(f"gpu test: no Metal device here ({e.message})")
    with dev:
        rng = np.random.default_rng(3)
        for spec in LIBRARY:
            workgroups, constants, datas = random_inputs(spec.name, rng)
            assert dispatch(dev, spec.name, workgroups, constants, datas, offset=8) == \
                expected(spec.name, workgroups, constants, datas), spec.name
