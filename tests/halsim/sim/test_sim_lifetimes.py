"""Resource lifetimes: retained until retirement by default; retain_resources=False shows the bug."""

import gc

import pytest

from reference import hal
from tests.conftest import WAIT

S = hal.StatusCode


def events(dev, *kinds):
    return [e for e in dev.trace if e["ev"] in kinds]


@pytest.mark.parametrize("personality", ["generic", "sync"])
def test_by_default_an_op_retains_what_it_uses_until_it_retires(make, personality):
    dev = make(personality)
    exe = dev.load_executable()
    a, b = dev.allocator.allocate_buffer(16), dev.allocator.allocate_buffer(16)
    done = dev.create_semaphore()
    dev.queue_dispatch([], [(done, 1)], exe, "negate", (1, 1, 1), (), (a, b))
    done.wait(1, WAIT)
    (retain,) = events(dev, "retain")
    (release,) = events(dev, "release")
    (op,) = dev.trace.operations()
    assert set(retain["res"]) == {"e0", "b0", "b1", "s0"}
    assert release["res"] == retain["res"]
    assert (retain["t"], release["t"]) == (op["t"], op["end"])


@pytest.mark.parametrize("personality", ["generic", "metal", "cuda", "opencl"])
def test_host_release_while_in_flight_is_recorded_when_not_retained(make, personality):
    dev = make(personality, retain_resources=False)
    gate, done = dev.create_semaphore(), dev.create_semaphore()
    src, dst = dev.allocator.allocate_buffer(8), dev.allocator.allocate_buffer(8)
    src.map_write(0, b"12345678")
    dev.queue_copy([(gate, 1)], [(done, 1)], src, 0, dst, 0, 8)
    del src
    gc.collect()
    gate.signal(1)
    done.wait(1, WAIT)
    seq = [(e["ev"], e.get("res") or e.get("op")) for e in events(dev, "op", "op_done", "host_release",
                                                                    "retain", "release")]
    assert seq == [("op", "0:0"), ("host_release", "b0"), ("op_done", "0:0")]
    assert dst.map_read() == b"12345678"  # the GPU read the bytes the buffer still had


def test_with_retention_the_same_program_shows_no_release_in_flight(make):
    dev = make("generic")
    gate, done = dev.create_semaphore(), dev.create_semaphore()
    src, dst = dev.allocator.allocate_buffer(8), dev.allocator.allocate_buffer(8)
    dev.queue_copy([(gate, 1)], [(done, 1)], src, 0, dst, 0, 8)
    del src
    gate.signal(1)
    done.wait(1, WAIT)
    kinds = [e["ev"] for e in events(dev, "op", "op_done", "host_release", "retain", "release")]
    assert kinds == ["op", "retain", "op_done", "release", "host_release"]


def test_command_buffer_dropped_in_flight_when_not_retained(make):
    dev = make("generic", retain_resources=False)
    gate, done = dev.create_semaphore(), dev.create_semaphore()
    buf = dev.allocator.allocate_buffer(8)
    cb = dev.create_command_buffer()
    cb.begin()
    cb.fill_buffer(buf, 0x5A, 1)
    cb.end()
    dev.queue_execute([(gate, 1)], [(done, 1)], cb)
    del cb
    gate.signal(1)
    done.wait(1, WAIT)
    assert [e["res"] for e in events(dev, "host_release")] == ["c0"]
    assert buf.map_read() == b"\x5a" * 8


@pytest.mark.parametrize("personality", ["generic", "metal", "cuda", "opencl", "sync"])
def test_a_transient_dropped_before_its_alloca_ran_is_used_with_the_bytes_the_alloca_committed(make, personality):
    """The alloca commits before the fill and the copy that wait for it: they run on its bytes although
    the host dropped the buffer at submit. The stand-in used to keep the storage the buffer had at
    submit (none yet), failing the fill (sim, sim:metal) or the copy (sim:cuda)."""
    dev = make(personality, retain_resources=False)
    gate, alloc, filled, copied = (dev.create_semaphore() for _ in range(4))
    if personality == "sync":
        gate.signal(1)  # (a sync queue call blocks until its waits are met)
    tmp = dev.queue_alloca([(gate, 1)], [(alloc, 1)], 64)
    out = dev.allocator.allocate_buffer(64)
    dev.queue_fill([(alloc, 1)], [(filled, 1)], tmp, 0, 64, 3, 1)
    dev.queue_copy([(filled, 1)], [(copied, 1)], tmp, 0, out, 0, 64)
    del tmp
    gc.collect()
    if personality != "sync":
        gate.signal(1)
    copied.wait(1, WAIT)
    assert out.map_read() == b"\x03" * 64
    assert [c.get("status") for c in dev.trace.events("cmd")] == [None, None]


def test_a_buffer_released_before_it_ever_had_storage_fails_the_command(make):
    """A transient whose alloca failed (its wait failed) never had storage: a fill that did not wait
    for the alloca, run after the host dropped the buffer, fails."""
    dev = make("generic", retain_resources=False)
    a, b, go, done = (dev.create_semaphore() for _ in range(4))
    tmp = dev.queue_alloca([(a, 1)], [(b, 1)], 16)        # no storage until the alloca runs
    dev.queue_fill([(go, 1)], [(done, 1)], tmp, 0, 16, 1, 1)
    del tmp
    a.fail(S.ABORTED, "no alloca")
    with pytest.raises(hal.HalError):
        b.wait(1, WAIT)
    _release_fill_expecting_no_storage(go, done)


def _release_fill_expecting_no_storage(go, done) -> None:
    """Let the fill go: it fails, since its buffer had no storage when the host released it."""
    go.signal(1)
    with pytest.raises(hal.HalError) as ei:
        done.wait(1, WAIT)
    assert ei.value.code == S.FAILED_PRECONDITION
    assert "released by the host before the device used it" in ei.value.message


def test_a_command_after_the_dealloca_of_a_dropped_transient_fails(make):
    """The stand-in gives the bytes back when the dealloca decommits them: a fill after it fails
    instead of writing into memory the device released."""
    dev = make("generic", retain_resources=False)
    a, b, go, done = (dev.create_semaphore() for _ in range(4))
    tmp = dev.queue_alloca([], [(a, 1)], 16)
    dev.queue_fill([(go, 1)], [(done, 1)], tmp, 0, 16, 1, 1)
    dev.queue_dealloca([(a, 1)], [(b, 1)], tmp)
    del tmp
    b.wait(1, WAIT)
    _release_fill_expecting_no_storage(go, done)


def test_sync_not_retaining_records_no_retain_events(make):
    dev = make("sync", retain_resources=False)
    buf, done = dev.allocator.allocate_buffer(4), dev.create_semaphore()
    dev.queue_fill([], [(done, 1)], buf, 0, 4, 9, 1)
    assert not events(dev, "retain", "release")
    assert buf.map_read() == b"\x09" * 4


def test_a_buffer_only_an_op_held_is_released_when_the_op_retires_not_at_the_waiters_old_clock(make):
    """The host's last reference went with the op (it retired, releasing what it retained, while the
    waiting thread drove the simulation): its host_release is at the op's retirement. It used to be
    stamped at the simulator's time plus the waiter's clock lag from before it blocked — after the
    waiter's own wake-up, out of time order."""
    dev = make("generic")  # the default costs: the waiter's lag before blocking is not 0
    s, buf = dev.create_semaphore(), dev.allocator.allocate_buffer(64)
    dev.queue_fill([], [(s, 1)], buf, 0, 64, 1, 1)
    del buf  # only the in-flight op holds it now
    s.wait(1, WAIT)
    woke = dev.now()
    (release,) = events(dev, "release")
    (host_release,) = events(dev, "host_release")
    (host_wait,) = events(dev, "host_wait")
    assert host_release["res"] == "b0" and "b0" in release["res"]
    assert host_release["t"] == release["t"] < host_wait["t"] == woke
