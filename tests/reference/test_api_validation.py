"""Invalid API calls raise ``HalError`` with the HAL_SEMANTICS code and a message naming the argument,
the same on every registered device (the validation is the shared reference code every device calls);
and the edge cases around them behave the same everywhere: indirect workgroup counts shorter than 12
bytes, host allocations that cannot be satisfied, another device's buffers, no-op dispatches, huge
timeouts, submissions racing with ``close``, aliased indirect copies, transients mapped early.

Every wait is bounded; a hang fails the test.
"""

import threading
import time

import pytest

import reference.hal.allocator as allocator_module
from reference import hal
from reference.hal.wait import MAX_TIMEOUT_S, normalize_timeout
from tests.reference.conftest import expect

S = hal.StatusCode
MT, BU = hal.MemoryType, hal.BufferUsage
WHOLE = hal.WHOLE_BUFFER
WAIT = 10.0


@pytest.fixture
def other():
    """A second device: its first buffer is ``b0`` too (buffer ids are per device)."""
    device = hal.create_device("local-sync")
    yield device
    device.close()


def params_buffer(device, size):
    return device.allocator.allocate_buffer(size, usage=BU.DEFAULT | BU.MAPPING | BU.DISPATCH_INDIRECT_PARAMETERS)


# -- indirect workgroup counts: the resolved length must be >= 12 bytes (CB11) ------------------------

def test_indirect_workgroups_whole_buffer_under_12_bytes_is_out_of_range(dev):
    exe = dev.load_executable()
    out = dev.allocator.allocate_buffer(16)
    params = params_buffer(dev, 8)
    s = dev.create_semaphore()
    msg = "workgroups (indirect) length 8 < 12 bytes"
    expect(S.OUT_OF_RANGE, msg, dev.queue_dispatch, [], [(s, 1)], exe, "write_workgroup_ids",
           hal.BufferRef(params, 0, WHOLE), bindings=(out,))
    expect(S.OUT_OF_RANGE, msg, dev.queue_dispatch, [], [(s, 1)], exe, "write_workgroup_ids",
           hal.BufferRef(params_buffer(dev, 16), 8, WHOLE), bindings=(out,))
    cb = dev.create_command_buffer()
    cb.begin()
    expect(S.OUT_OF_RANGE, msg, cb.dispatch, exe, "write_workgroup_ids", hal.BufferRef(params, 0, WHOLE), (), (out,))
    assert s.query() == 0


def test_indirect_workgroups_from_binding_table_under_12_bytes_is_out_of_range_at_submit(indirect_dev):
    dev = indirect_dev
    exe = dev.load_executable()
    out = dev.allocator.allocate_buffer(16)
    cb = dev.create_command_buffer(hal.CommandBufferMode.DEFAULT, binding_capacity=1)
    cb.begin()
    cb.dispatch(exe, "write_workgroup_ids", hal.BufferRef(slot=0, offset=0, length=WHOLE), (), (out,))
    cb.end()
    s = dev.create_semaphore()
    expect(S.OUT_OF_RANGE, "command 0 (dispatch): workgroups (indirect) length 8 < 12 bytes",
           dev.queue_execute, [], [(s, 1)], cb, [params_buffer(dev, 8)])
    params = params_buffer(dev, 12)
    params.map_write(0, (2).to_bytes(4, "little") + (1).to_bytes(4, "little") * 2)
    dev.queue_execute([], [(s, 1)], cb, [params])  # the same command buffer, a long enough binding
    s.wait(1, WAIT)
    assert out.map_read(0, 8) == bytes([0, 0, 0, 0, 1, 0, 0, 0])


# -- host allocations that cannot be satisfied: RESOURCE_EXHAUSTED naming the size ----------------------

@pytest.fixture
def scarce_memory(monkeypatch):
    """The host refuses allocations of 1 GiB or more (as it refuses 512 GiB), deterministically."""
    def scarce(size):
        if size >= 1 << 30:
            raise MemoryError
        return bytearray(size)
    monkeypatch.setattr(allocator_module, "bytearray", scarce, raising=False)


def test_allocate_buffer_beyond_host_memory_is_resource_exhausted(dev, scarce_memory):
    expect(S.RESOURCE_EXHAUSTED, "size 1073741824: the host cannot allocate 1073741824 bytes",
           dev.allocator.allocate_buffer, 1 << 30)
    assert len(dev.allocator.allocate_buffer(64).map_read()) == 64


def test_queue_alloca_beyond_host_memory_is_resource_exhausted_from_the_call(dev, scarce_memory):
    # As IREE (iree.runtime, local-task): "allocating memory on queue: RESOURCE_EXHAUSTED" from the call.
    s = dev.create_semaphore()
    expect(S.RESOURCE_EXHAUSTED, "size 1073741824: the host cannot allocate 1073741824 bytes",
           dev.queue_alloca, [], [(s, 1)], 1 << 30)
    assert s.query() == 0  # nothing was enqueued
    buf = dev.queue_alloca([], [(s, 1)], 64, MT.HOST_LOCAL | MT.DEVICE_VISIBLE, BU.DEFAULT | BU.MAPPING)
    s.wait(1, WAIT)
    assert buf.map_read() == bytes(64)


# -- another device's buffers are refused wherever a buffer enters -------------------------------------

def test_queue_operations_refuse_another_devices_buffer(dev, other):
    theirs = other.allocator.allocate_buffer(16)
    mine = dev.allocator.allocate_buffer(16)
    exe = dev.load_executable()
    s = dev.create_semaphore()
    g = [(s, 1)]
    ia = S.INVALID_ARGUMENT
    expect(ia, "target: buffer b0 belongs to another device", dev.queue_fill, [], g, theirs, 0, 16, 7, 1)
    expect(ia, "target: buffer b0 belongs to another device", dev.queue_fill, [], g, theirs, 0, 0, 7, 1)
    expect(ia, "target: buffer b0 belongs to another device", dev.queue_update, [], g, b"1234", 0, theirs, 0, 4)
    expect(ia, "source: buffer b0 belongs to another device", dev.queue_copy, [], g, theirs, 0, mine, 0, 4)
    expect(ia, "target: buffer b0 belongs to another device", dev.queue_copy, [], g, mine, 0, theirs, 0, 4)
    expect(ia, "bindings[1]: buffer b0 belongs to another device", dev.queue_dispatch, [], g, exe, "negate",
           (1, 1, 1), (), (mine, hal.BufferRef(theirs, 0, 16)))
    expect(ia, "buffer b0 belongs to another device", dev.queue_dealloca, [], g, theirs)
    assert s.query() == 0
    assert theirs.map_read() == bytes(16)


def test_command_buffers_refuse_another_devices_buffer(dev, other):
    theirs = other.allocator.allocate_buffer(16)
    mine = dev.allocator.allocate_buffer(16)
    params = params_buffer(other, 12)
    exe = dev.load_executable()
    cb = dev.create_command_buffer()
    cb.begin()
    ia = S.INVALID_ARGUMENT
    expect(ia, "target: buffer b0 belongs to another device", cb.fill_buffer, theirs, 7, 1)
    expect(ia, "target: buffer b0 belongs to another device", cb.update_buffer, b"1234", 0,
           hal.BufferRef(theirs, 0, 4))
    expect(ia, "source: buffer b0 belongs to another device", cb.copy_buffer, theirs, mine)
    expect(ia, "bindings[0]: buffer b0 belongs to another device", cb.dispatch, exe, "negate", (1, 1, 1), (),
           (theirs, mine))
    expect(ia, "workgroups: buffer b1 belongs to another device", cb.dispatch, exe, "write_workgroup_ids",
           hal.BufferRef(params, 0, 12), (), (mine,))
    stages = hal.ExecutionStage.TRANSFER
    scopes = hal.AccessScope.TRANSFER_WRITE
    expect(ia, "buffer_barriers[0]: buffer b0 belongs to another device", cb.execution_barrier, stages, stages,
           (), [(scopes, scopes, hal.BufferRef(theirs, 0, 16))])


def test_binding_tables_refuse_another_devices_buffer_at_submit(indirect_dev, other):
    dev = indirect_dev
    theirs = other.allocator.allocate_buffer(16)
    mine = dev.allocator.allocate_buffer(16)
    cb = dev.create_command_buffer(binding_capacity=2)
    cb.begin()
    cb.fill_buffer(hal.BufferRef(slot=1, offset=0, length=4), 7, 1)
    cb.end()
    s = dev.create_semaphore()
    expect(S.INVALID_ARGUMENT, "binding_table[1]: buffer b0 belongs to another device",
           dev.queue_execute, [], [(s, 1)], cb, [mine, theirs])
    expect(S.INVALID_ARGUMENT, "binding_table[1]: buffer b0 belongs to another device",
           dev.queue_execute, [], [(s, 1)], cb, [None, hal.BufferRef(theirs, 0, 8)])
    assert s.query() == 0
    assert theirs.map_read() == bytes(16)


# -- a dispatch of no workgroups is a no-op that skips all validation but still signals (CB11, Q13) -------

def test_queue_dispatch_of_no_workgroups_skips_validation_and_signals(dev):
    s = dev.create_semaphore()
    dev.queue_dispatch([], [(s, 1)], None, None, (0, 0, 0))
    dev.queue_dispatch([(s, 1)], [(s, 2)], "not an executable", 99, (4, 0, 1), constants=(1.5,),
                       bindings=(hal.BufferRef(slot=0),))
    s.wait(2, WAIT)
    assert s.query() == 2


def test_queue_dispatch_of_no_workgroups_still_waits(async_dev):
    dev = async_dev
    w, s = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_dispatch([(w, 1)], [(s, 1)], None, None, (0, 0, 0))
    assert s.query() == 0
    w.signal(1)
    s.wait(1, WAIT)


def test_workgroup_counts_past_uint32_are_invalid_and_nothing_runs(dev):
    """IREE's counts are uint32_t: 2**32 workgroups (which would also take a sim device hours) is refused
    at the call, on the queue and in a command buffer, before anything is enqueued."""
    exe = dev.load_executable()
    buf = dev.allocator.allocate_buffer(16)
    s = dev.create_semaphore()
    message = "workgroups must be (x, y, z) ints in [0, 2**32) or a BufferRef, got (4294967296, 1, 1)"
    expect(S.INVALID_ARGUMENT, message, dev.queue_dispatch, [], [(s, 1)], exe, "write_workgroup_ids", (1 << 32, 1, 1),
           bindings=(hal.BufferRef(buf),))
    cb = dev.create_command_buffer(0, hal.CommandCategory.DISPATCH)
    cb.begin()
    expect(S.INVALID_ARGUMENT, message, cb.dispatch, exe, "write_workgroup_ids", (1 << 32, 1, 1), (), (hal.BufferRef(buf),))
    assert s.query() == 0 and len(list(dev.trace.events("op"))) == 0


# -- update with a WHOLE_BUFFER length and a source offset past the source ------------------------------

def test_update_whole_length_with_source_offset_past_source_is_out_of_range(dev):
    buf = dev.allocator.allocate_buffer(16)
    s = dev.create_semaphore()
    expect(S.OUT_OF_RANGE, "source_offset 10 past source length 4",
           dev.queue_update, [], [(s, 1)], b"abcd", 10, buf, 0, WHOLE)
    cb = dev.create_command_buffer(binding_capacity=1)
    cb.begin()
    expect(S.OUT_OF_RANGE, "update_buffer source_offset 10 past source length 4",
           cb.update_buffer, b"abcd", 10, hal.BufferRef(slot=0, offset=0, length=WHOLE))
    expect(S.OUT_OF_RANGE, "update_buffer source_offset 5 past source length 4",
           cb.update_buffer, b"abcd", 5, hal.BufferRef(buf, 0, WHOLE))
    cb.update_buffer(b"abcd", 4, hal.BufferRef(slot=0, offset=0, length=WHOLE))  # empty: a no-op
    assert s.query() == 0


# -- wrong argument types: INVALID_ARGUMENT naming the argument, never a Python error --------------------

def test_wrong_argument_types_are_invalid_argument(dev):
    s = dev.create_semaphore()
    buf = dev.allocator.allocate_buffer(16)
    exe = dev.load_executable()
    ia = S.INVALID_ARGUMENT
    fn = lambda args, context: None  # noqa: E731
    expect(ia, "args must be a sequence, got NoneType", dev.queue_host_call, [], [(s, 1)], fn, args=None)
    expect(ia, "args must be a sequence, got int", dev.queue_host_call, [], [(s, 1)], fn, args=5)
    expect(ia, "constants must be a sequence, got NoneType", dev.queue_dispatch, [], [(s, 1)], exe,
           "scale_and_offset", (1, 1, 1), constants=None, bindings=(buf, buf))
    expect(ia, "bindings must be a sequence, got NoneType", dev.queue_dispatch, [], [(s, 1)], exe,
           "scale_and_offset", (1, 1, 1), constants=(1, 2), bindings=None)
    expect(ia, "name must be a str, got list", dev.load_executable, [])
    expect(ia, "map_range access must be MemoryAccess flags, got None", buf.map_range, None)
    expect(ia, "map_range access must be MemoryAccess flags, got 'r'", buf.map_range, "r")
    cb = dev.create_command_buffer()
    cb.begin()
    stages = hal.ExecutionStage.DISPATCH
    expect(ia, "memory_barriers must be a sequence, got int", cb.execution_barrier, stages, stages, memory_barriers=5)
    expect(ia, "memory_barriers[0] must be (source_scope, target_scope), got None", cb.execution_barrier,
           stages, stages, memory_barriers=[None])
    expect(ia, "buffer_barriers must be a sequence, got int", cb.execution_barrier, stages, stages,
           buffer_barriers=7)
    if "events" in dev.capabilities:
        expect(ia, "wait_events: events must be a sequence, got NoneType", cb.wait_events, None, stages, stages)
    assert s.query() == 0


@pytest.mark.parametrize("pattern_length", [0, 3, None])
def test_unvalidated_fill_with_a_bad_pattern_length_fails_at_submit(dev, pattern_length):
    # UNVALIDATED skips CB6 at record; the pattern is checked where the backend meets it, at submit.
    buf = dev.allocator.allocate_buffer(12)
    cb = dev.create_command_buffer(hal.CommandBufferMode.ONE_SHOT | hal.CommandBufferMode.UNVALIDATED)
    cb.begin()
    cb.fill_buffer(buf, 0, pattern_length)
    cb.end()
    s = dev.create_semaphore()
    expect(S.INVALID_ARGUMENT, f"command 0 (fill): pattern_length must be 1, 2 or 4, got {pattern_length!r}",
           dev.queue_execute, [], [(s, 1)], cb)
    assert s.query() == 0


# -- timeouts beyond what Python's waits take: waited as (effectively) infinite -------------------------

def test_normalize_timeout_clamps_huge_finite_timeouts():
    assert MAX_TIMEOUT_S <= threading.TIMEOUT_MAX / 2
    for huge in (1e10, 1e300, 10**30, 10**400, MAX_TIMEOUT_S):
        assert normalize_timeout(huge) == MAX_TIMEOUT_S
    assert normalize_timeout(2.5) == 2.5
    expect(S.INVALID_ARGUMENT, f"timeout must be >= 0 seconds, got {-10**400!r}", normalize_timeout, -10**400)


@pytest.mark.parametrize("timeout", [1e10, 1e300, 10**30, 10**400], ids=["1e10", "1e300", "10**30", "10**400"])
def test_huge_finite_timeout_waits_until_signalled(dev, timeout):
    s = dev.create_semaphore()
    if dev.uri.startswith("sim"):
        dev.queue_barrier([], [(s, 1)])  # signalled in virtual time, after the wait blocked
        timer = None
    else:
        timer = threading.Timer(0.05, s.signal, (1,))
        timer.start()
    try:
        s.wait(1, timeout)
        dev.wait_semaphores(hal.WaitMode.ANY, [(s, 1)], timeout)
    finally:
        if timer is not None:
            timer.join(WAIT)
    assert s.query() == 1


def test_huge_finite_sleep_sleeps_the_clamped_time(monkeypatch):
    slept = []
    monkeypatch.setattr("reference.hal.device.time.sleep", slept.append)
    with hal.create_device("local-task") as dev:
        dev.sleep(1e300)
        dev.sleep(10**400)
    assert slept == [MAX_TIMEOUT_S, MAX_TIMEOUT_S]


# -- local-task: a submission that close() overtakes is cancelled, never left unsignalled ----------------

@pytest.mark.parametrize("waits", [False, True], ids=["ready", "waiting"])
def test_local_task_submission_overtaken_by_close_is_cancelled(waits):
    dev = hal.create_device("local-task")
    buf = dev.allocator.allocate_buffer(16)
    gate, s = dev.create_semaphore(), dev.create_semaphore()
    submit = dev._submit

    def close_first(op):  # the call passed the closed check, then close() ran to the end
        dev.close()
        submit(op)
    dev._submit = close_first
    dev.queue_fill([(gate, 1)] if waits else [], [(s, 1)], buf, 0, 16, 7, 1)
    with pytest.raises(hal.HalError) as ei:
        s.wait(1, WAIT)
    assert (ei.value.code, ei.value.message) == (S.CANCELLED, "queue shutting down")
    assert buf.map_read() == bytes(16)


# -- copies between binding-table slots aliasing overlapping ranges of one buffer (memmove) --------------

@pytest.mark.parametrize("source, target", [(0, 4), (4, 0)], ids=["forward", "backward"])
def test_copy_between_aliased_overlapping_slots(indirect_dev, source, target):
    dev = indirect_dev
    b = dev.allocator.allocate_buffer(16)
    b.map_write(0, bytes(range(16)))
    cb = dev.create_command_buffer(binding_capacity=2)
    cb.begin()
    cb.copy_buffer(hal.BufferRef(slot=0, offset=0, length=8), hal.BufferRef(slot=1, offset=0, length=8))
    cb.end()
    s = dev.create_semaphore()
    dev.queue_execute([], [(s, 1)], cb, [hal.BufferRef(b, source, 12), hal.BufferRef(b, target, 12)])
    s.wait(1, WAIT)
    expect_bytes = bytearray(range(16))
    expect_bytes[target:target + 8] = bytes(range(source, source + 8))
    assert b.map_read() == bytes(expect_bytes)
    t = dev.create_semaphore()
    dev.queue_fill([], [(t, 1)], b, 0, 4, 1, 1)  # the queue still works
    t.wait(1, WAIT)
    assert b.map_read(0, 4) == b"\x01" * 4


# -- a transient is not mappable before its alloca ran (its waits met), on every device -----------------

def test_transient_mapped_before_its_alloca_ran_is_failed_precondition(async_dev):
    dev = async_dev
    w, s = dev.create_semaphore(), dev.create_semaphore()
    buf = dev.queue_alloca([(w, 1)], [(s, 1)], 64, MT.HOST_LOCAL | MT.DEVICE_VISIBLE, BU.DEFAULT | BU.MAPPING)
    expect(S.FAILED_PRECONDITION, "map_read b0 used before its queue_alloca committed it", buf.map_read, 0, 4)
    expect(S.FAILED_PRECONDITION, "map_write b0 used before its queue_alloca committed it", buf.map_write, 0, b"ab")
    w.signal(1)
    s.wait(1, WAIT)
    buf.map_write(0, b"ab")
    assert buf.map_read(0, 4) == b"ab\x00\x00"


def test_create_event_follows_the_events_capability(dev):
    """HAL events exist where the device declares ``events``; elsewhere (IREE's CUDA, HIP and Metal
    drivers) ``create_event`` is UNIMPLEMENTED, and no event command can be recorded."""
    if "events" in dev.capabilities:
        event = dev.create_event()
        cb = dev.create_command_buffer(0, hal.CommandCategory.DISPATCH)
        cb.begin()
        cb.signal_event(event, hal.ExecutionStage.COMMAND_RETIRE)
        cb.end()
        return
    with pytest.raises(hal.HalError) as e:
        dev.create_event()
    assert e.value.code == S.UNIMPLEMENTED
    assert "create_event" in e.value.message and "HAL events" in e.value.message


# -- sleep and Semaphore.wait name their own arguments (not the timeout / timepoints[0] they pass on) ---

def test_sleep_names_seconds(dev):
    for bad, message in ((-1, "seconds must be >= 0 seconds, got -1"),
                         (float("nan"), "seconds must be >= 0 seconds, got nan"),
                         ("x", "seconds must be a finite number of seconds, got 'x'"),
                         (None, "seconds must be a finite number of seconds, got None"),
                         (float("inf"), "seconds must be a finite number of seconds, got inf")):
        expect(S.INVALID_ARGUMENT, message, dev.sleep, bad)
    dev.sleep(0)


def test_semaphore_wait_names_value(dev):
    s = dev.create_semaphore()
    expect(S.INVALID_ARGUMENT, f"value -1 outside [0, MAX_SEMAPHORE_VALUE={hal.MAX_SEMAPHORE_VALUE}]",
           s.wait, -1, 0)
    expect(S.INVALID_ARGUMENT, "value must be an int, got str", s.wait, "x", 0)
    s.wait(0, 0)


# -- a ONE_SHOT command buffer is consumed when its submission is accepted, not when the call returns ----

def test_a_one_shot_command_buffer_is_refused_while_its_blocking_submission_waits(ref_device):
    """local-sync's queue call blocks until the op ran: the command buffer was marked submitted only
    after, so a second submission from another thread meanwhile was accepted (and ran it twice)."""
    dev = ref_device
    buf = dev.allocator.allocate_buffer(16)
    cb = dev.create_command_buffer()
    cb.begin()
    cb.update_buffer(b"\x01\x02\x03\x04", 0, hal.BufferRef(buf, 0, 4))
    cb.end()
    gate, done = dev.create_semaphore(), dev.create_semaphore()
    t = threading.Thread(target=lambda: dev.queue_execute([(gate, 1)], [(done, 1)], cb))
    t.start()
    try:
        deadline = time.monotonic() + WAIT
        while not any(e["ev"] == "op" for e in dev.trace.events("op")):   # (the first call was accepted)
            assert time.monotonic() < deadline
            time.sleep(0.001)
        expect(S.FAILED_PRECONDITION, f"command buffer {cb.id} is ONE_SHOT and was already submitted",
               dev.queue_execute, [], [], cb)
    finally:
        gate.signal(1)
        t.join(WAIT)
    assert not t.is_alive()
    done.wait(1, WAIT)
