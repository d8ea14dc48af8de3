"""An indirect dispatch's trace record: ``workgroups`` is null (read from a buffer), and the trace
saves and loads on every kind of device."""

import json
import struct

import pytest

from reference import hal
from reference.trace import Trace


@pytest.mark.parametrize("uri", ["local-task", "local-sync", "sim", "sim:cuda", "sim:metal"])
def test_an_indirect_dispatch_is_traced_with_null_workgroups_and_saves(tmp_path, uri):
    with hal.create_device(uri) as dev:
        exe = dev.load_executable()
        out = dev.allocator.allocate_buffer(16)
        params = dev.allocator.allocate_buffer(
            12, usage=hal.BufferUsage.DEFAULT | hal.BufferUsage.MAPPING | hal.BufferUsage.DISPATCH_INDIRECT_PARAMETERS)
        params.map_write(0, struct.pack("<3I", 3, 1, 1))
        s = dev.create_semaphore()
        dev.queue_dispatch([], [(s, 1)], exe, "write_workgroup_ids", hal.BufferRef(params, 0, 12), bindings=(out,))
        s.wait(1, timeout=10)
        assert out.map_read() == struct.pack("<4I", 0, 1, 2, 0)
        path = tmp_path / "t.json"
        dev.trace.save(path)   # was: TypeError, a Buffer in the record (a Range is a tuple too)
    (cmd,) = [e for e in Trace.load(path) if e["ev"] == "cmd"]
    assert cmd["workgroups"] is None and cmd["entry"] == "write_workgroup_ids"
    assert cmd["access"] == [[out.id, 0, 16, "w"], [params.id, 0, 12, "r"]]
    assert json.loads(path.read_text())["events"][-1]["ev"]
