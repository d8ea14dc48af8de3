"""Hand-written programs, one per case the random programs must cover, with hand-computed outcomes.

Each test pins IREE's outcome to the hand-computed one (so the oracle's behaviour is on record), checks
that ours matches it, and, where the program is valid for the model, that the model predicts it too.
The last tests are minimal repros of differences between ours and IREE (see docs/differential.md).
"""

import pytest

from .compare import check_expected
from .program import (
    OK,
    TIMEOUT,
    Alloca,
    Barrier,
    Copy,
    Dealloca,
    Execute,
    Fill,
    HostFail,
    HostSignal,
    HostWait,
    Program,
    QueueCopy,
    Status,
    Update,
    analyze,
)
from .runners import run_iree, run_ours


def fail(message: str) -> Status:
    """A semaphore failed through IREE's Python API: always UNKNOWN, message preserved."""
    return Status("UNKNOWN", message)


def observed(out) -> dict:
    return {"calls": {k: v for k, v in out.submits.items() if v != OK}, "waits": out.waits,
            "finals": out.finals, "buffers": out.buffers}


def check(program: Program, want: dict, timeouts=None, model: bool = True, sync: dict | None = None):
    """IREE == want, ours (local-task) == want; the model agrees; local-sync == ``sync`` if given."""
    iree = run_iree(program, timeouts)
    assert observed(iree) == want, f"IREE no longer does what this test pins:\n{iree.pretty()}"
    ours = run_ours(program, "local-task", timeouts)
    assert observed(ours) == observed(iree), f"ours differs from IREE:\n{ours.pretty()}\n{iree.pretty()}"
    if model:
        assert check_expected(iree, analyze(program), program) == []
    if sync is not None:
        out = run_ours(program, "local-sync", timeouts)
        assert observed(out) == sync, out.pretty()
        if model:
            assert check_expected(out, analyze(program, "sync"), program) == []


def test_failure_propagates_through_a_chain():
    """Three ops chained by semaphores, all submitted (consumer first) before the host fails the root:
    every semaphore down the chain fails with the root's code and message; no op touches a buffer."""
    p = Program((0, 0, 0, 0), (b"\x11" * 8, b"\x22" * 8), (
        QueueCopy(((2, 1),), ((3, 1),), "b0", "b1"),
        Execute(((1, 1),), ((2, 1),), (Fill("b0", 0, 8, 0xAA, 1),)),
        Barrier(((0, 1),), ((1, 1),)),
        HostFail(0, "root cause"),
        HostWait(3, 1), HostWait(2, 1), HostWait(1, 1), HostWait(0, 1),
    ))
    check(p, {"calls": {}, "waits": {i: fail("root cause") for i in (4, 5, 6, 7)},
              "finals": [fail("root cause")] * 4, "buffers": [b"\x11" * 8, b"\x22" * 8]})


def test_wait_before_signal_in_reverse_order():
    """The consumer is submitted before its producer, both before the host signal that releases them;
    a zero-timeout poll shows both pending; after the signal the data flows fill/update -> copy."""
    p = Program((0, 0, 0), (bytes(16), bytes(16), b"\xff" * 8), (
        QueueCopy(((1, 2),), ((2, 1),), "b0", "b1"),
        Execute(((0, 1),), ((1, 2),), (Fill("b0", 0, 16, 0x04030201, 4), Update("b2", 2, b"abc"))),
        HostWait(2, 1),  # poll (timeout 0): nothing ran yet
        HostSignal(0, 1),
        HostWait(2, 1), HostWait(1, 2), HostWait(0, 1),
    ))
    pattern = bytes([1, 2, 3, 4]) * 4
    check(p, {"calls": {}, "waits": {2: TIMEOUT, 4: OK, 5: OK, 6: OK}, "finals": [1, 2, 1],
              "buffers": [pattern, pattern, b"\xff\xffabc\xff\xff\xff"]}, timeouts={2: 0.0}, model=False)


def test_one_signal_releases_smaller_waits():
    """A host signal of 3 satisfies ops waiting for 1 and for 2; a wait for a value already passed is
    satisfied at once; values may jump (CTS WaitLaterSignaledBeyond / multiple consumers)."""
    p = Program((0, 0, 0), (bytes(4),), (
        Barrier(((0, 1),), ((1, 1),)),
        Barrier(((0, 2),), ((2, 5),)),
        HostSignal(0, 3),
        HostWait(1, 1), HostWait(2, 5), HostWait(2, 2), HostWait(0, 3),
    ))
    check(p, {"calls": {}, "waits": {3: OK, 4: OK, 5: OK, 6: OK}, "finals": [3, 1, 5], "buffers": [bytes(4)]})


def test_alloca_use_dealloca():
    """alloca -> fill -> (copy a slice out, queue_copy all out) -> dealloca, submitted with the users
    in reverse order and everything released by one host signal at the end."""
    p = Program((0, 0, 0, 0), (bytes(16), bytes(16)), (
        Alloca(((0, 1),), ((1, 1),), "t0", 16),
        Dealloca(((1, 3), (3, 1)), ((2, 1),), "t0"),
        Execute(((1, 2),), ((1, 3),), (Copy("t0", 4, "b0", 0, 8),)),
        QueueCopy(((1, 2),), ((3, 1),), "t0", "b1"),
        Execute(((1, 1),), ((1, 2),), (Fill("t0", 0, 16, 0xDEADBEEF, 4),)),
        HostSignal(0, 1),
        HostWait(2, 1), HostWait(1, 3), HostWait(3, 1), HostWait(0, 1),
    ))
    word = (0xDEADBEEF).to_bytes(4, "little")
    check(p, {"calls": {}, "waits": {6: OK, 7: OK, 8: OK, 9: OK}, "finals": [1, 3, 1, 1],
              "buffers": [word * 2 + bytes(8), word * 4]})


def test_alloca_whose_wait_fails():
    """The alloca's wait fails: the alloca, its users and the dealloca all fail with that status and
    nothing is written."""
    p = Program((0, 0, 0), (b"\x33" * 8,), (
        Alloca(((0, 1),), ((1, 1),), "t0", 8),
        Execute(((1, 1),), ((1, 2),), (Fill("t0", 0, 8, 0x77, 1),)),
        Execute(((1, 2),), ((1, 3),), (Copy("t0", 0, "b0", 0, 8),)),
        Dealloca(((1, 3),), ((2, 1),), "t0"),
        HostFail(0, "no memory"),
        HostWait(2, 1), HostWait(1, 1), HostWait(0, 1),
    ))
    check(p, {"calls": {}, "waits": {5: fail("no memory"), 6: fail("no memory"), 7: fail("no memory")},
              "finals": [fail("no memory")] * 3, "buffers": [b"\x33" * 8]})


def test_update_captures_its_source_at_the_call():
    """Updates submitted before the signal that releases them: the host bytes are overwritten as soon
    as each call returns (ours; IREE's update is a copy from a staging buffer), so the result shows that
    the source was captured by the call, not read when the op ran (CTS UpdateCapturesSourceBeforeWaitResolves)."""
    p = Program((0, 0), (bytes(8), bytes(8)), (
        Execute(((0, 1),), ((1, 1),), (Update("b0", 1, b"\x01\x02\x03\x04"),)),
        Execute(((1, 1),), ((1, 2),), (Update("b1", 0, b"capture!"),), direct=True),
        HostSignal(0, 1),
        HostWait(1, 2), HostWait(0, 1),
    ))
    check(p, {"calls": {}, "waits": {3: OK, 4: OK}, "finals": [1, 2],
              "buffers": [b"\x00\x01\x02\x03\x04\x00\x00\x00", b"capture!"]})


def test_first_failure_wins():
    """A second fail of a failed semaphore is ignored: waiters see the first status (S7)."""
    p = Program((0, 0), (bytes(4),), (
        Barrier(((0, 1),), ((1, 1),)),
        HostFail(0, "first"),
        HostFail(0, "second"),
        HostWait(1, 1), HostWait(0, 1),
    ))
    check(p, {"calls": {}, "waits": {3: fail("first"), 4: fail("first")}, "finals": [fail("first")] * 2,
              "buffers": [bytes(4)]})


def test_local_sync_returns_a_failed_wait_from_the_call():
    """local-sync ([H]): the queue call raises the wait's failure and signals nothing, so the signal
    semaphore stays at its value (a zero-timeout wait on it times out). IREE's local-task raises from
    the call too, and fails the signal."""
    p = Program((0, 0), (bytes(4),), (
        HostFail(0, "x"),
        Barrier(((0, 1),), ((1, 1),)),
        HostWait(1, 1), HostWait(0, 1),
    ))
    sync_timeouts = analyze(p, "sync").timeouts
    assert sync_timeouts == {2: 0.0, 3: 10.0}
    out = run_ours(p, "local-sync", sync_timeouts)
    assert observed(out) == {"calls": {1: fail("x")}, "waits": {2: TIMEOUT, 3: fail("x")},
                             "finals": [fail("x"), 0], "buffers": [bytes(4)]}
    assert check_expected(out, analyze(p, "sync"), p) == []
    iree = run_iree(p)
    assert observed(iree) == {"calls": {1: fail("x")}, "waits": {2: fail("x"), 3: fail("x")},
                              "finals": [fail("x")] * 2, "buffers": [bytes(4)]}


def test_failed_dealloca_wait_does_not_decommit():
    """CTS FailedDeallocaWaitDoesNotDealloca: a dealloca whose wait failed either returns the failure
    or fails its signal (either is allowed); the buffer stays usable."""
    p = Program((0, 0, 0, 0), (bytes(8),), (
        Alloca((), ((2, 1),), "t0", 8),
        HostWait(2, 1),
        HostFail(0, "dealloca wait failed"),
        Dealloca(((0, 1),), ((1, 1),), "t0"),
        Execute(((2, 1),), ((2, 2),), (Fill("t0", 0, 8, 0xCD, 1),)),
        Execute(((2, 2),), ((2, 3),), (Copy("t0", 0, "b0", 0, 8),)),
        Dealloca(((2, 3),), ((3, 1),), "t0"),
        HostWait(1, 1), HostWait(3, 1), HostWait(2, 3), HostWait(0, 1),
    ))
    exp = analyze(p)
    for out in (run_iree(p), run_ours(p, "local-task")):
        assert out.submits[3] in (OK, fail("dealloca wait failed")), out.pretty()
        rest = {k: v for k, v in out.submits.items() if k != 3}
        assert set(rest.values()) == {OK}, out.pretty()
        assert out.waits == {1: OK, 7: fail("dealloca wait failed"), 8: OK, 9: OK,
                             10: fail("dealloca wait failed")}, out.pretty()
        assert out.buffers == [b"\xcd" * 8], out.pretty()
        assert check_expected(out, exp, p, queue_calls=False) == []


# -- differences from IREE (minimal repros; see docs/differential.md) --------------------------------------

_KINDS = {
    "barrier": lambda w, s: Barrier(w, s),
    "execute": lambda w, s: Execute(w, s, (Fill("b0", 0, 8, 0x5A, 1),)),
    "execute_direct": lambda w, s: Execute(w, s, (Fill("b0", 0, 8, 0x5A, 1),), direct=True),
    "queue_copy": lambda w, s: QueueCopy(w, s, "b0", "b1"),
    "alloca": lambda w, s: Alloca(w, s, "t0", 8),
}


@pytest.mark.parametrize("kind", sorted(_KINDS))
def test_queue_call_whose_wait_already_failed(kind):
    """A queue op submitted after its wait semaphore failed: IREE's local-task (3.13) raises the wait's
    failure from the queue call itself (and also fails the signal semaphores). Everything else (the
    signal semaphore's failure, the buffers) is the same on both sides."""
    p = Program((0, 0), (bytes(8), bytes(8)), (
        HostFail(0, "gone"),
        _KINDS[kind](((0, 1),), ((1, 1),)),
        HostWait(1, 1), HostWait(0, 1),
    ))
    check(p, {"calls": {1: fail("gone")}, "waits": {2: fail("gone"), 3: fail("gone")},
              "finals": [fail("gone")] * 2, "buffers": [bytes(8), bytes(8)]})


def test_failed_wait_fails_the_op_only_once_every_wait_resolved():
    """An op waits on s0 (not signaled yet) and s1; s1 fails. IREE's local-task keeps the op pending
    until s0 resolves too, so a host wait on its signal times out; it fails once s0 is signaled."""
    p = Program((0, 0, 0), (bytes(4),), (
        Barrier(((0, 1), (1, 1)), ((2, 1),)),
        HostFail(1, "b failed"),
        HostWait(2, 1),  # 0.5 s
        HostSignal(0, 1),
        HostWait(2, 1), HostWait(1, 1), HostWait(0, 1),
    ))
    check(p, {"calls": {}, "waits": {2: TIMEOUT, 4: fail("b failed"), 5: fail("b failed"), 6: OK},
              "finals": [1, fail("b failed"), fail("b failed")], "buffers": [bytes(4)]},
          timeouts={2: 0.5}, model=False)
