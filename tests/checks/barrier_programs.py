"""Command buffers around one execution barrier, run on a device, and their findings: shared by the
barrier-stage and barrier-scope tests."""

from halsim.checks import check_trace
from reference import hal

ST = hal.ExecutionStage


def findings(trace) -> list:
    return [(f.rule, f.ops, f.message) for f in check_trace(trace).findings]


def run(uri, record, table=None):
    """Record a command buffer with ``record(cb, exe, a, b)`` over two 64-byte buffers, execute it
    (with binding table ``table(a, b)`` when given), return the device's trace."""
    with hal.create_device(uri) as dev:
        exe = dev.load_executable()
        usage = hal.BufferUsage.DEFAULT | hal.BufferUsage.DISPATCH_INDIRECT_PARAMETERS
        a, b = (dev.allocator.allocate_buffer(64, usage=usage) for _ in range(2))
        capacity = 0 if table is None else len(table(a, b))
        cb = dev.create_command_buffer(0, hal.CommandCategory.TRANSFER | hal.CommandCategory.DISPATCH, capacity)
        cb.begin()
        record(cb, exe, a, b)
        cb.end()
        s = dev.create_semaphore()
        dev.queue_execute([], [(s, 1)], cb, None if table is None else table(a, b))
        s.wait(1, 5.0)
        return dev.trace


def fill_copy(src=ST.TRANSFER, dst=ST.TRANSFER, memory_barriers=(), buffer_barriers=lambda a: ()):
    """fill a[0:32) → execution_barrier(src, dst, memory_barriers, buffer_barriers(a)) → copy a[0:16)
    to a[32:48)."""
    def record(cb, _exe, a, _b):
        cb.fill_buffer(hal.BufferRef(a, 0, 32), 7, 1)
        cb.execution_barrier(src, dst, memory_barriers, buffer_barriers(a))
        cb.copy_buffer(hal.BufferRef(a, 0, 16), hal.BufferRef(a, 32, 16))
    return record


def without(trace, field: str):
    """``trace`` as a trace written before its records had ``field`` (``stages``, ``scopes``)."""
    from reference.trace import Trace

    old = Trace(trace.header)
    for e in trace:
        old.emit({k: v for k, v in e.items() if k != field})
    assert not any(field in e for e in old.events("cmd"))
    return old
