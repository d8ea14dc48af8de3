"""Fault injection: options faults / fault_rate fail commands as a device error would, on every personality."""

import pytest

from halsim.sim import DeadlockError
from halsim.sim.driver import driver
from reference import hal
from tests.conftest import WAIT

S = hal.StatusCode
PERSONALITIES = ["generic", "sync", "metal", "cuda", "opencl"]


def make(personality, **options):
    return driver.create_device(personality, **options)


@pytest.mark.parametrize("personality", PERSONALITIES)
def test_a_faulted_command_fails_the_op_and_its_signals(personality):
    dev = make(personality, faults=[{"op": "0:1", "command": 1, "status": "DATA_LOSS", "message": "bit flip"}])
    try:
        buf = dev.allocator.allocate_buffer(64)
        a, b = dev.create_semaphore(), dev.create_semaphore()
        dev.queue_fill([], [(a, 1)], buf, 0, 64, 1, 1)
        cb = dev.create_command_buffer()
        cb.begin()
        cb.fill_buffer(hal.BufferRef(buf, 0, 16), 2, 1)
        cb.fill_buffer(hal.BufferRef(buf, 16, 16), 3, 1)     # command 1: faulted
        cb.fill_buffer(hal.BufferRef(buf, 32, 16), 4, 1)
        cb.end()
        try:
            dev.queue_execute([(a, 1)], [(b, 1)], cb)
        except hal.HalError as e:   # sim:sync returns the body's failure from the queue call
            assert personality == "sync" and (e.code, e.message) == (S.DATA_LOSS, "bit flip in command 0:1.1")
        with pytest.raises(hal.HalError) as ei:
            b.wait(1, WAIT)
        assert (ei.value.code, ei.value.message) == (S.DATA_LOSS, "bit flip in command 0:1.1")
        assert a.query() == 1
        (fault,) = dev.trace.events("fault")
        assert (fault["op"], fault["index"], fault["status"]) == ("0:1", 1, int(S.DATA_LOSS))
        cmds = [(c["index"], c.get("status", 0)) for c in dev.trace.events("cmd") if c["op"] == "0:1"]
        assert cmds == [(0, 0), (1, int(S.DATA_LOSS))]     # command 2 never ran
        assert buf.map_read(0, 48) == bytes([2]) * 16 + bytes([1]) * 32
    finally:
        dev.close()


@pytest.mark.parametrize("personality", PERSONALITIES)
def test_an_op_level_fault_on_a_barrier_and_downstream_propagation(personality):
    dev = make(personality, faults=[{"op": "0:0", "status": S.UNAVAILABLE}])
    try:
        a, b = dev.create_semaphore(), dev.create_semaphore()
        try:
            dev.queue_barrier([], [(a, 1)])
        except hal.HalError as e:
            assert personality == "sync" and e.code == S.UNAVAILABLE
        if personality != "sync":
            dev.queue_barrier([(a, 1)], [(b, 1)])          # fails with the propagated status
            with pytest.raises(hal.HalError) as ei:
                b.wait(1, WAIT)
            assert ei.value.code == S.UNAVAILABLE
        with pytest.raises(hal.HalError) as ei:
            a.wait(1, WAIT)
        assert (ei.value.code, ei.value.message) == (S.UNAVAILABLE, "injected fault in op 0:0")
    finally:
        dev.close()


@pytest.mark.parametrize("personality", ["generic", "metal", "cuda", "opencl"])
def test_random_faults_are_reproducible_and_never_hang(personality):
    def run(seed):
        dev = make(personality, queues=2, fault_rate=0.3, seed=seed)
        outcomes = []
        try:
            buf = dev.allocator.allocate_buffer(256)
            sems = [dev.create_semaphore() for _ in range(12)]
            for i, s in enumerate(sems):
                wait = [(sems[i - 1], 1)] if i else []
                dev.queue_fill(wait, [(s, 1)], buf, 16 * i, 16, i, 1, queue_affinity=1 << (i % 2))
            for s in sems:
                try:
                    s.wait(1, WAIT)
                    outcomes.append("ok")
                except DeadlockError:   # never: every wait resolves or fails
                    outcomes.append("deadlock")
                except hal.HalError as e:
                    outcomes.append(e.code.name)
        finally:
            dev.close()
        return outcomes, [(f["op"], f["index"]) for f in dev.trace.events("fault")]
    first = run(3)
    assert run(3) == first                      # same seed, same faults, same outcomes
    outcomes, faults = first
    assert "deadlock" not in outcomes and faults  # at least one fault was drawn with this seed
    i = outcomes.index("DATA_LOSS")             # the chain: everything after the first fault fails
    assert outcomes[:i] == ["ok"] * i and set(outcomes[i:]) == {"DATA_LOSS"}


@pytest.mark.parametrize("faults, rate, message", [
    ([{"op": "0-1", "status": "DATA_LOSS"}], 0, "faults[0].op='0-1' must be a program-order id 'T:N'"),
    ([{"op": "0:1", "status": "OK"}], 0, "faults[0].status='OK' must be an error status (not OK)"),
    ([{"op": "0:1", "status": "NOPE"}], 0, "faults[0].status='NOPE' is not a status code name or value"),
    ([{"op": "0:1"}], 0, "faults[0]: missing field 'status'"),
    ([{"op": "0:1", "status": 5, "when": 1}], 0, "faults[0]: unknown field 'when'"),
    ([{"op": "0:1", "command": -1, "status": 5}], 0, "faults[0].command=-1 must be an int >= 0"),
    (None, 1.5, "fault_rate=1.5 must be a number in [0, 1]"),
])
def test_bad_fault_options_are_invalid_argument(faults, rate, message):
    with pytest.raises(hal.HalError) as ei:
        make("generic", faults=faults, fault_rate=rate)
    assert ei.value.code == S.INVALID_ARGUMENT and message in ei.value.message


def test_faults_from_a_uri_query_string():
    dev = hal.create_device('sim?faults=[{"op":"0:0","status":"ABORTED"}]')
    try:
        s = dev.create_semaphore()
        dev.queue_barrier([], [(s, 1)])
        with pytest.raises(hal.HalError) as ei:
            s.wait(1, WAIT)
        assert ei.value.code == S.ABORTED
    finally:
        dev.close()
