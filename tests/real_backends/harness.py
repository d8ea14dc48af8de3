"""Shared by the real-backend tests: run one builtin kernel through the HAL and compute what the NumPy
reference (``reference.kernels``) makes of the same inputs."""

from __future__ import annotations

import numpy as np

from reference import hal
from reference.kernels import KERNELS, run_kernel

WAIT = 30.0


def random_inputs(name: str, rng: np.random.Generator):
    """(workgroups, constants, [initial bytes per binding]) for kernel ``name``: random values, including
    int32 overflow and negative floats, over bindings of different lengths (so ``min`` bounds matter)."""
    spec = KERNELS[name]
    datas = []
    for k, b in enumerate(spec.bindings):
        count = int(rng.integers(1, 40)) if k == 0 else int(rng.integers(1, 40))
        if b.dtype == "float32":
            arr = (rng.standard_normal(count) * 1000).astype(np.float32)
        else:
            arr = rng.integers(0, 1 << 32, count, dtype=np.uint64).astype(np.uint32)
        datas.append(arr.tobytes())
    constants = []
    for c in spec.constants:
        if name == "spin":
            constants.append(int(rng.integers(0, 200)))
        elif name == "axpy":
            constants.append(int(rng.integers(-1000, 1000)) & 0xFFFFFFFF)
        else:
            constants.append(int(rng.integers(0, 1 << 32)))
    workgroups = (int(rng.integers(0, 50)), 1, 1)
    return workgroups, tuple(constants), datas


def expected(name: str, workgroups, constants, datas) -> list[bytes]:
    views = [bytearray(d) for d in datas]
    run_kernel(KERNELS[name], workgroups, constants, [memoryview(v) for v in views])
    return [bytes(v) for v in views]


def dispatch(device, name: str, workgroups, constants, datas, offset: int = 0) -> list[bytes]:
    """Dispatch ``name`` with bindings holding ``datas`` (each at ``offset`` of its own buffer) on
    ``device``; the bindings' bytes afterwards."""
    exe = device.load_executable()
    bufs, refs = [], []
    for data in datas:
        buf = device.allocator.allocate_buffer(len(data) + offset + 8)
        buf.map_fill(0, hal.WHOLE_BUFFER, 0xEE, 1)
        buf.map_write(offset, data)
        bufs.append(buf)
        refs.append(hal.BufferRef(buf, offset, len(data)))
    done = device.create_semaphore(0)
    device.queue_dispatch([], [(done, 1)], exe, exe.lookup_export(name), workgroups, constants=constants,
                          bindings=tuple(refs))
    done.wait(1, WAIT)
    out = []
    for buf, data in zip(bufs, datas):
        whole = buf.map_read()
        assert whole[:offset] == b"\xee" * offset and whole[offset + len(data):] == b"\xee" * 8, \
            "a kernel wrote outside its binding"
        out.append(whole[offset:offset + len(data)])
    return out
