"""Execution barriers' memory scopes (HAL_SEMANTICS CB9, read as Vulkan reads memory barriers): a
barrier with memory or buffer barriers makes a write visible only to the accesses they name —
IREE's direct Vulkan driver passes the scopes 1:1 to vkCmdPipelineBarrier; the VM always passes
DISPATCH_WRITE -> DISPATCH_READ. A barrier with none orders memory (CB9; IREE's CTS relies on it)."""

import pytest

from halsim.checks import check_trace
from reference import hal
from reference.trace import Trace
from tests.checks.barrier_programs import fill_copy, findings, run, without

ST, SC = hal.ExecutionStage, hal.AccessScope
DEVICES = ["sim", "local-task"]


@pytest.mark.parametrize("uri", DEVICES)
def test_a_memory_barrier_that_misses_the_write_leaves_it_invisible(uri):
    trace = run(uri, fill_copy(memory_barriers=[(SC.DISPATCH_WRITE, SC.DISPATCH_READ)]))
    assert [e["scopes"] for e in trace.events("cmd") if e["kind"] == "barrier"] == [[[8, 4]]]
    assert findings(trace) == [
        ("hazard.raw", ["0:0.0", "0:0.2"],
         "copy 0:0.2 reads buffer b0[0:16) written by fill 0:0.0 in the same command buffer: the execution "
         "barrier between them orders them but its memory barriers (0:0.1 DISPATCH_WRITE -> DISPATCH_READ) "
         "do not make the write visible: no source scope holds the fill write (TRANSFER_WRITE) (RAW)"),
    ]
    assert check_trace(trace).findings[0].details == {"buffer": "b0", "range": [0, 16], "scope": "memory"}


@pytest.mark.parametrize("uri", DEVICES)
def test_the_vm_barrier_does_not_make_a_dispatch_write_visible_to_a_copy(uri):
    # what IREE's HAL module passes for every compiler-emitted barrier: DISPATCH_WRITE -> DISPATCH_READ
    def record(cb, exe, a, b):
        cb.dispatch(exe, "negate", (1, 1, 1), (), (a, b))
        cb.execution_barrier(ST.DISPATCH, ST.TRANSFER, [(SC.DISPATCH_WRITE, SC.DISPATCH_READ)])
        cb.copy_buffer(hal.BufferRef(b, 0, 16), hal.BufferRef(a, 32, 16))
    assert findings(run(uri, record)) == [
        ("hazard.raw", ["0:0.0", "0:0.2"],
         "copy 0:0.2 reads buffer b1[0:16) written by dispatch 0:0.0 in the same command buffer: the "
         "execution barrier between them orders them but its memory barriers (0:0.1 DISPATCH_WRITE -> "
         "DISPATCH_READ) do not make the write visible: no target scope holds the copy read (TRANSFER_READ) "
         "(RAW)"),
    ]


def test_a_write_after_write_needs_the_second_write_in_a_target_scope():
    def record(cb, _exe, a, _b):
        cb.fill_buffer(hal.BufferRef(a, 0, 16), 7, 1)
        cb.execution_barrier(ST.TRANSFER, ST.TRANSFER, [(SC.TRANSFER_WRITE, SC.TRANSFER_READ)])
        cb.fill_buffer(hal.BufferRef(a, 0, 16), 9, 1)
    assert findings(run("sim", record)) == [
        ("hazard.waw", ["0:0.0", "0:0.2"],
         "fill 0:0.2 writes buffer b0[0:16) written by fill 0:0.0 in the same command buffer: the execution "
         "barrier between them orders them but its memory barriers (0:0.1 TRANSFER_WRITE -> TRANSFER_READ) "
         "do not make the write visible: no target scope holds the fill write (TRANSFER_WRITE) (WAW)"),
    ]


def test_a_buffer_barrier_on_other_bytes_does_not_cover_the_write():
    trace = run("sim", fill_copy(buffer_barriers=lambda a: [(SC.TRANSFER_WRITE, SC.TRANSFER_READ,
                                                             hal.BufferRef(a, 48, 16))]))
    assert [e["scopes"] for e in trace.events("cmd") if e["kind"] == "barrier"] == [[[32, 16, "b0", 48, 16]]]
    (rule, ops, msg), = findings(trace)
    assert (rule, ops) == ("hazard.raw", ["0:0.0", "0:0.2"])
    assert "(0:0.1 TRANSFER_WRITE -> TRANSFER_READ on b0[48:64)) do not make the write visible" in msg


@pytest.mark.parametrize("uri", DEVICES)
@pytest.mark.parametrize("memory, buffers", [
    ((), lambda a: ()),                                              # none given: a full barrier (CB9)
    ([(SC.TRANSFER_WRITE, SC.TRANSFER_READ)], lambda a: ()),
    ([(SC.MEMORY_WRITE, SC.MEMORY_READ)], lambda a: ()),             # every write, every read
    ([(SC.DISPATCH_WRITE, SC.DISPATCH_READ), (SC.TRANSFER_WRITE, SC.TRANSFER_READ)], lambda a: ()),
    ((), lambda a: [(SC.TRANSFER_WRITE, SC.TRANSFER_READ, hal.BufferRef(a, 0, 16))]),
])
def test_scopes_that_cover_the_write_and_the_read_find_nothing(uri, memory, buffers):
    assert findings(run(uri, fill_copy(memory_barriers=memory, buffer_barriers=buffers))) == []


def test_availability_and_visibility_chain_through_two_barriers():
    # the first barrier makes the fill's write available, the second makes it visible to the copy
    def record(cb, _exe, a, _b):
        cb.fill_buffer(hal.BufferRef(a, 0, 32), 7, 1)
        cb.execution_barrier(ST.TRANSFER, ST.TRANSFER, [(SC.TRANSFER_WRITE, SC.NONE)])
        cb.execution_barrier(ST.TRANSFER, ST.TRANSFER, [(SC.NONE, SC.TRANSFER_READ)])
        cb.copy_buffer(hal.BufferRef(a, 0, 16), hal.BufferRef(a, 32, 16))
    assert findings(run("sim", record)) == []


def test_a_trace_without_barrier_scopes_finds_nothing_new():
    # traces written before barriers recorded their scopes: every barrier orders memory
    new = run("sim", fill_copy(memory_barriers=[(SC.DISPATCH_WRITE, SC.DISPATCH_READ)]))
    assert findings(without(new, "scopes")) == []


def test_a_malformed_scopes_record_orders_memory():
    new = run("sim", fill_copy(memory_barriers=[(SC.DISPATCH_WRITE, SC.DISPATCH_READ)]))
    bad = Trace(new.header)
    for e in new:
        bad.emit(dict(e, scopes="xy") if e.get("kind") == "barrier" else dict(e))
    assert findings(bad) == []


@pytest.mark.parametrize("kwargs, message", [
    ({"memory_barriers": [(SC.DISPATCH_WRITE, None)]},
     "memory_barriers[0] target_scope must be AccessScope flags, got None"),
    ({"memory_barriers": [(-1, SC.DISPATCH_READ)]},
     "memory_barriers[0] source_scope must be AccessScope flags, got -1"),
    ({"buffer_barriers": [("x", SC.DISPATCH_READ, None)]},
     "buffer_barriers[0] source_scope must be AccessScope flags, got 'x'"),
])
def test_a_bad_access_scope_is_invalid_argument(kwargs, message):
    with hal.create_device("sim") as dev:
        a = dev.allocator.allocate_buffer(64)
        if "buffer_barriers" in kwargs:
            kwargs = {"buffer_barriers": [kwargs["buffer_barriers"][0][:2] + (hal.BufferRef(a, 0, 16),)]}
        cb = dev.create_command_buffer(0, hal.CommandCategory.ANY)
        cb.begin()
        with pytest.raises(hal.HalError) as e:
            cb.execution_barrier(ST.TRANSFER, ST.TRANSFER, **kwargs)
        assert (e.value.code, e.value.message) == (hal.StatusCode.INVALID_ARGUMENT, message)


def test_a_buffer_barrier_holding_part_of_a_read_does_not_make_the_rest_visible():
    # the copy reads b0[0:16); the barrier holds b0[8:16) only: bytes [0:8) stay invisible (and only
    # they: what is missing is a buffer barrier on them, not a scope)
    trace = run("sim", fill_copy(buffer_barriers=lambda a: [(SC.TRANSFER_WRITE, SC.TRANSFER_READ,
                                                             hal.BufferRef(a, 8, 8))]))
    assert findings(trace) == [
        ("hazard.raw", ["0:0.0", "0:0.2"],
         "copy 0:0.2 reads buffer b0[0:8) written by fill 0:0.0 in the same command buffer: the execution "
         "barrier between them orders them but its memory barriers (0:0.1 TRANSFER_WRITE -> TRANSFER_READ on "
         "b0[8:16)) do not make the write visible: no buffer barrier holds b0[0:8) (RAW)"),
    ]


def test_the_missing_scope_is_the_one_found_for_the_reported_bytes():
    # a copy of b0[8:16) splits the write in three pieces; the second copy reads all three: the
    # barrier's buffer barrier holds the middle one, its memory barrier misses the copy's read for the
    # others — the message names that (target) side, not one recomputed over the merged range
    def record(cb, _exe, a, b):
        cb.fill_buffer(hal.BufferRef(a, 0, 32), 7, 1)
        cb.execution_barrier(ST.TRANSFER, ST.TRANSFER, [(SC.TRANSFER_WRITE, SC.DISPATCH_READ)],
                             [(SC.TRANSFER_WRITE, SC.TRANSFER_READ, hal.BufferRef(a, 8, 8))])
        cb.copy_buffer(hal.BufferRef(a, 8, 8), hal.BufferRef(b, 0, 8))
        cb.copy_buffer(hal.BufferRef(a, 0, 32), hal.BufferRef(b, 32, 32))
    (finding,) = findings(run("sim", record))
    assert finding[:2] == ("hazard.raw", ["0:0.0", "0:0.3"])
    assert finding[2].endswith("do not make the write visible: no target scope holds the copy read "
                               "(TRANSFER_READ) (RAW)")


@pytest.mark.parametrize("slot_buffer, found", [("a", []), ("b", ["hazard.raw"])])
def test_a_buffer_barrier_on_a_table_slot_holds_the_range_the_table_gives(slot_buffer, found):
    def record(cb, _exe, a, _b):
        cb.fill_buffer(hal.BufferRef(a, 0, 32), 7, 1)
        cb.execution_barrier(ST.TRANSFER, ST.TRANSFER, (),
                             [(SC.TRANSFER_WRITE, SC.TRANSFER_READ, hal.BufferRef(slot=0, offset=0, length=32))])
        cb.copy_buffer(hal.BufferRef(a, 0, 16), hal.BufferRef(a, 32, 16))
    trace = run("sim", record, table=lambda a, b: [a if slot_buffer == "a" else b])
    buf = "b0" if slot_buffer == "a" else "b1"
    assert [e["scopes"] for e in trace.events("cmd") if e["kind"] == "barrier"] == [[[32, 16, buf, 0, 32]]]
    assert [rule for rule, _ops, _msg in findings(trace)] == found
