"""Every command-buffer rule of HAL_SEMANTICS §A.5 (CB3–CB16) and the submit rules (Q5), with its code."""

import pytest

from reference import hal

S = hal.StatusCode
M = hal.CommandBufferMode
C = hal.CommandCategory
Ref = hal.BufferRef


def code_of(fn, *args, **kwargs):
    with pytest.raises(hal.HalError) as ei:
        fn(*args, **kwargs)
    return ei.value.code


@pytest.fixture
def buf(ref_device):
    return ref_device.allocator.allocate_buffer(64)


def recording(dev, mode=M.ONE_SHOT, categories=C.ANY, capacity=0):
    cb = dev.create_command_buffer(mode, categories, capacity)
    cb.begin()
    return cb


def test_create_rules(ref_device):
    dev = ref_device
    assert code_of(dev.create_command_buffer, M.ALLOW_INLINE_EXECUTION) == S.INVALID_ARGUMENT
    assert code_of(dev.create_command_buffer, M.ONE_SHOT | M.ALLOW_INLINE_EXECUTION, C.ANY, 1) == S.INVALID_ARGUMENT
    assert code_of(dev.create_command_buffer, M.ONE_SHOT, C.NONE) == S.INVALID_ARGUMENT
    assert code_of(dev.create_command_buffer, M.ONE_SHOT, C.ANY, -1) == S.INVALID_ARGUMENT
    cb = dev.create_command_buffer(M.ONE_SHOT, C.DISPATCH)
    assert cb.allowed_categories & C.DISPATCH == C.DISPATCH


def test_lifecycle_rules(ref_device, buf):
    cb = ref_device.create_command_buffer()
    assert code_of(cb.fill_buffer, buf, 0, 1) == S.FAILED_PRECONDITION  # not recording
    assert code_of(cb.end) == S.FAILED_PRECONDITION  # end without begin
    cb.begin()
    assert code_of(cb.begin) == S.FAILED_PRECONDITION  # begin twice
    cb.end()
    assert code_of(cb.end) == S.FAILED_PRECONDITION  # end twice
    assert code_of(cb.begin) == S.FAILED_PRECONDITION  # re-recording
    assert code_of(cb.execution_barrier, 0, 0) == S.FAILED_PRECONDITION


def test_category_rules(ref_device, buf):
    exe = ref_device.load_executable()
    ev = ref_device.create_event()
    t = recording(ref_device, categories=C.TRANSFER)
    assert code_of(t.dispatch, exe, "write_workgroup_ids", (1, 1, 1), (), (buf,)) == S.FAILED_PRECONDITION
    assert code_of(t.signal_event, ev, hal.ExecutionStage.DISPATCH) == S.FAILED_PRECONDITION
    assert code_of(t.reset_event, ev, hal.ExecutionStage.DISPATCH) == S.FAILED_PRECONDITION
    assert code_of(t.wait_events, [ev], 0, 0) == S.FAILED_PRECONDITION
    t.execution_barrier(hal.ExecutionStage.TRANSFER, hal.ExecutionStage.TRANSFER)  # any category
    d = recording(ref_device, categories=C.DISPATCH)
    assert code_of(d.fill_buffer, buf, 0, 1) == S.FAILED_PRECONDITION
    assert code_of(d.update_buffer, b"1234", 0, Ref(buf, 0, 4)) == S.FAILED_PRECONDITION
    assert code_of(d.copy_buffer, Ref(buf, 0, 4), Ref(buf, 8, 4)) == S.FAILED_PRECONDITION


def test_fill_rules(ref_device, buf):
    cb = recording(ref_device)
    for pl in (0, 3, 8):
        assert code_of(cb.fill_buffer, buf, 0, pl) == S.INVALID_ARGUMENT
    assert code_of(cb.fill_buffer, Ref(buf, 2, 8), 0, 4) == S.INVALID_ARGUMENT  # offset % 4
    assert code_of(cb.fill_buffer, Ref(buf, 0, 6), 0, 4) == S.INVALID_ARGUMENT  # length % 4
    assert code_of(cb.fill_buffer, Ref(buf, 60, 8), 0, 4) == S.OUT_OF_RANGE
    assert code_of(cb.fill_buffer, Ref(buf, 65, 0 + 1), 0, 1) == S.OUT_OF_RANGE
    assert code_of(cb.fill_buffer, buf, 0x1FF, 1) == S.INVALID_ARGUMENT  # pattern too wide
    cb.fill_buffer(Ref(buf, 3, 0), 0, 3)  # zero length: no-op, validation skipped
    assert cb.command_count == 0


def test_transfer_permission_rules(ref_device):
    a = ref_device.allocator
    host_only = a.allocate_buffer(16, hal.MemoryType.HOST_LOCAL, hal.BufferUsage.TRANSFER)  # not DEVICE_VISIBLE
    no_target = a.allocate_buffer(16, usage=hal.BufferUsage.DISPATCH_STORAGE)
    read_only = a.allocate_buffer(16, access=hal.MemoryAccess.READ)
    ok = a.allocate_buffer(16)
    cb = recording(ref_device)
    assert code_of(cb.fill_buffer, host_only, 0, 1) == S.PERMISSION_DENIED
    assert code_of(cb.fill_buffer, read_only, 0, 1) == S.PERMISSION_DENIED
    assert code_of(cb.update_buffer, b"x" * 16, 0, read_only) == S.PERMISSION_DENIED
    assert code_of(cb.copy_buffer, ok, read_only) == S.PERMISSION_DENIED
    # The heap allocator adds TRANSFER usage to every buffer, but queue compatibility is decided on the
    # usage asked for (IREE allocator_heap.c): a DISPATCH_STORAGE-only buffer is no transfer target.
    assert no_target.allowed_usage & hal.BufferUsage.TRANSFER
    assert not no_target.compatibility & hal.BufferCompatibility.QUEUE_TRANSFER
    assert code_of(cb.fill_buffer, no_target, 0, 1) == S.PERMISSION_DENIED


def test_update_rules(ref_device, buf):
    cb = recording(ref_device)
    assert code_of(cb.update_buffer, b"\x01" * 4, 2, Ref(buf, 0, 4)) == S.OUT_OF_RANGE
    assert code_of(cb.update_buffer, "text", 0, buf) == S.INVALID_ARGUMENT
    assert code_of(cb.update_buffer, b"1234", -1, Ref(buf, 0, 4)) == S.INVALID_ARGUMENT
    cb.update_buffer(b"", 0, Ref(buf, 0, 0))
    assert cb.command_count == 0


def test_update_captures_source_at_record(ref_device, buf):
    src = bytearray(b"\x01\x02\x03\x04")
    cb = recording(ref_device)
    cb.update_buffer(src, 0, Ref(buf, 1, 4))  # odd target offset is legal
    src[:] = b"\xee" * 4
    cb.end()
    done = ref_device.create_semaphore()
    ref_device.queue_execute([], [(done, 1)], cb)
    done.wait(1, 10)
    assert buf.map_read(0, 6) == b"\x00\x01\x02\x03\x04\x00"


def test_copy_rules(ref_device, buf):
    other = ref_device.allocator.allocate_buffer(64)
    cb = recording(ref_device)
    assert code_of(cb.copy_buffer, Ref(buf, 0, 8), Ref(other, 0, 4)) == S.INVALID_ARGUMENT
    assert code_of(cb.copy_buffer, Ref(buf, 0, 8), Ref(buf, 4, 8)) == S.INVALID_ARGUMENT  # overlap
    assert code_of(cb.copy_buffer, Ref(buf.subspan(0, 16), 0, 8), Ref(buf.subspan(4, 16), 0, 8)) == S.INVALID_ARGUMENT
    cb.copy_buffer(Ref(buf, 1, 7), Ref(buf, 9, 7))  # any alignment; disjoint in one allocation
    cb.copy_buffer(Ref(buf, 0, 8), Ref(other, 0, 0))  # zero-length target: no-op
    assert cb.command_count == 1


def test_dispatch_rules(ref_device, buf):
    exe = ref_device.load_executable()
    cb = recording(ref_device)
    wg = (1, 1, 1)
    assert code_of(cb.dispatch, exe, 99, wg, (), (buf,)) == S.OUT_OF_RANGE
    assert code_of(cb.dispatch, exe, "nope", wg, (), (buf,)) == S.NOT_FOUND
    assert code_of(cb.dispatch, exe, "write_constants", wg, (1, 2, 3), (buf,)) == S.INVALID_ARGUMENT
    assert code_of(cb.dispatch, exe, "write_constants", wg, b"\x00" * 15, (buf,)) == S.INVALID_ARGUMENT
    assert code_of(cb.dispatch, exe, "abs", wg, (), (buf,)) == S.INVALID_ARGUMENT  # needs 2 bindings
    assert code_of(cb.dispatch, exe, "abs", (1, 1), (), (buf, buf)) == S.INVALID_ARGUMENT
    assert code_of(cb.dispatch, exe, "abs", (1, -1, 1), (), (buf, buf)) == S.INVALID_ARGUMENT
    assert code_of(cb.dispatch, "exe", "abs", wg, (), (buf, buf)) == S.INVALID_ARGUMENT
    assert code_of(cb.dispatch, exe, "write_dispatch_params", Ref(buf, 2, 12), (), (buf,)) == S.INVALID_ARGUMENT
    assert code_of(cb.dispatch, exe, "write_dispatch_params", Ref(buf, 0, 8), (), (buf,)) == S.OUT_OF_RANGE
    no_params = ref_device.allocator.allocate_buffer(16)  # lacks DISPATCH_INDIRECT_PARAMETERS usage
    assert code_of(cb.dispatch, exe, "write_dispatch_params", Ref(no_params, 0, 12), (), (buf,)) == S.PERMISSION_DENIED
    not_storage = ref_device.allocator.allocate_buffer(16, usage=hal.BufferUsage.TRANSFER)
    assert code_of(cb.dispatch, exe, "write_dispatch_params", wg, (), (not_storage,)) == S.PERMISSION_DENIED
    cb.dispatch("bogus", 12345, (0, 0, 0))  # zero workgroups: no-op, validation skipped
    assert cb.command_count == 0


def test_indirect_slot_rules(ref_device, buf):
    cb = recording(ref_device, capacity=2)
    assert code_of(cb.fill_buffer, Ref(slot=2, offset=0, length=4), 0, 4) == S.OUT_OF_RANGE
    assert code_of(cb.fill_buffer, Ref(buf, slot=0), 0, 4) == S.INVALID_ARGUMENT  # both buffer and slot
    cb.fill_buffer(Ref(slot=1, offset=8, length=16), 0x11223344, 4)
    cb.end()
    sem = ref_device.create_semaphore()
    assert cb.binding_count == 2
    assert code_of(ref_device.queue_execute, [], [(sem, 1)], cb) == S.INVALID_ARGUMENT  # no table
    assert code_of(ref_device.queue_execute, [], [(sem, 1)], cb, []) == S.INVALID_ARGUMENT  # empty table
    assert code_of(ref_device.queue_execute, [], [(sem, 1)], cb, [buf]) == S.OUT_OF_RANGE  # too short
    assert code_of(ref_device.queue_execute, [], [(sem, 1)], cb, [buf, None]) == S.INVALID_ARGUMENT  # slot has no buffer
    assert code_of(ref_device.queue_execute, [], [(sem, 1)], cb, [None, Ref(buf, 0, 20)]) == S.OUT_OF_RANGE
    assert code_of(ref_device.queue_execute, [], [(sem, 1)], cb, [None, Ref(buf, 2, 40)]) == S.INVALID_ARGUMENT  # align
    ro = ref_device.allocator.allocate_buffer(64, access=hal.MemoryAccess.READ)
    assert code_of(ref_device.queue_execute, [], [(sem, 1)], cb, [None, ro]) == S.PERMISSION_DENIED
    host = ref_device.allocator.allocate_buffer(64, hal.MemoryType.HOST_LOCAL)
    assert code_of(ref_device.queue_execute, [], [(sem, 1)], cb, [None, host]) == S.PERMISSION_DENIED
    assert sem.query() == 0  # nothing was enqueued by the failed calls
    ref_device.queue_execute([], [(sem, 1)], cb, [None, Ref(buf, 4, 40), buf])  # extra entries ignored
    sem.wait(1, 10)
    assert buf.map_read(12, 16) == bytes.fromhex("44332211") * 4
    assert buf.map_read(0, 12) == bytes(12) and buf.map_read(28) == bytes(36)


def test_submit_rules(ref_device, buf):
    dev = ref_device
    sem, w = dev.create_semaphore(), dev.create_semaphore(1)
    never = dev.create_command_buffer()
    assert code_of(dev.queue_execute, [], [(sem, 1)], never) == S.FAILED_PRECONDITION
    open_cb = recording(dev)
    assert code_of(dev.queue_execute, [], [(sem, 1)], open_cb) == S.FAILED_PRECONDITION
    inline = dev.create_command_buffer(M.ONE_SHOT | M.ALLOW_INLINE_EXECUTION)
    inline.begin()
    inline.end()
    assert code_of(dev.queue_execute, [(w, 1)], [(sem, 1)], inline) == S.INVALID_ARGUMENT
    one = recording(dev)
    one.end()
    dev.queue_execute([], [(sem, 1)], one)
    assert code_of(dev.queue_execute, [], [(sem, 2)], one) == S.FAILED_PRECONDITION  # one-shot resubmitted
    reusable = recording(dev, mode=M.DEFAULT)
    reusable.fill_buffer(buf, 7, 1)
    reusable.end()
    dev.queue_execute([], [(sem, 2)], reusable)
    dev.queue_execute([(sem, 2)], [(sem, 3)], reusable)
    sem.wait(3, 10)
    other = hal.create_device("local-sync")
    try:
        foreign = other.create_semaphore()
        assert code_of(dev.queue_barrier, [(foreign, 1)], []) == S.INVALID_ARGUMENT
        assert code_of(dev.queue_execute, [], [], other.create_command_buffer()) == S.INVALID_ARGUMENT
    finally:
        other.close()


def test_list_and_argument_rules(ref_device, buf):
    dev = ref_device
    s = dev.create_semaphore()
    assert code_of(dev.queue_barrier, [s], []) == S.INVALID_ARGUMENT
    assert code_of(dev.queue_barrier, [(s, -1)], []) == S.INVALID_ARGUMENT
    assert code_of(dev.queue_barrier, [], [(s, hal.MAX_SEMAPHORE_VALUE + 1)]) == S.INVALID_ARGUMENT
    assert code_of(dev.queue_barrier, [], [("s", 1)]) == S.INVALID_ARGUMENT
    assert code_of(dev.queue_barrier, [], [(s, 1)], queue_affinity=-1) == S.INVALID_ARGUMENT  # (0 is queue 0: Q14)
    assert code_of(dev.queue_fill, [], [(s, 1)], buf, 0, 8, 0, 3) == S.INVALID_ARGUMENT
    assert code_of(dev.queue_copy, [], [(s, 1)], buf, 0, buf, 4, 8) == S.INVALID_ARGUMENT
    assert code_of(dev.queue_update, [], [(s, 1)], b"1234", 0, buf, 0, 8) == S.OUT_OF_RANGE
    assert code_of(dev.queue_host_call, [], [(s, 1)], "not callable") == S.INVALID_ARGUMENT
    assert code_of(dev.queue_dealloca, [], [(s, 1)], "buf") == S.INVALID_ARGUMENT
    assert code_of(dev.queue_alloca, [], [(s, 1)], -4) == S.INVALID_ARGUMENT
    assert code_of(dev.queue_dispatch, [], [(s, 1)], dev.load_executable(), "abs", (1, 1, 1), (),
                   (Ref(slot=0), Ref(slot=1))) == S.INVALID_ARGUMENT
    assert s.query() == 0
    assert code_of(dev.create_semaphore, -1) == S.INVALID_ARGUMENT
    assert code_of(dev.load_executable, "FOO?") == S.NOT_FOUND


def test_unvalidated_mode_skips_lifecycle_checks(ref_device, buf):
    cb = ref_device.create_command_buffer(M.ONE_SHOT | M.UNVALIDATED, C.TRANSFER)
    cb.fill_buffer(buf, 0x5A, 1)  # no begin: not checked
    cb.end()
    s = ref_device.create_semaphore()
    ref_device.queue_execute([], [(s, 1)], cb)
    s.wait(1, 10)
    assert buf.map_read() == b"\x5a" * 64
