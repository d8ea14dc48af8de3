"""Barrier stages and memory scopes read as Vulkan reads a pipeline barrier (HAL_SEMANTICS CB9; IREE's
direct Vulkan driver maps COMMAND_ISSUE/COMMAND_PROCESS/DISPATCH/TRANSFER/COMMAND_RETIRE to
TOP_OF_PIPE/DRAW_INDIRECT/COMPUTE_SHADER/TRANSFER/BOTTOM_OF_PIPE): a source mask holds the named stages
and the logically earlier ones, a target mask the named and the logically later ones; a memory
barrier's access scopes hold only accesses in the stages named; a barrier orders memory only for work
in its stage scopes; memory dependencies are per byte."""

import pytest

from halsim.checks.model import barrier_scopes, stage_scopes
from reference import hal
from tests.checks.barrier_programs import fill_copy, findings, run

ST, SC, R = hal.ExecutionStage, hal.AccessScope, hal.BufferRef
PREFIX = "copy 0:0.3 reads buffer b0[0:16) written by fill 0:0.0 in the same command buffer: the execution "


@pytest.mark.parametrize("stages, scopes", [
    ((ST.COMMAND_ISSUE, ST.COMMAND_ISSUE), (0, 14)),          # top of pipe: no stage / every stage
    ((ST.COMMAND_PROCESS, ST.COMMAND_PROCESS), (2, 6)),       # DRAW_INDIRECT: then COMPUTE_SHADER
    ((ST.DISPATCH, ST.DISPATCH), (6, 4)),
    ((ST.TRANSFER, ST.TRANSFER), (8, 8)),                     # no stage before or after it but the ends
    ((ST.COMMAND_RETIRE, ST.COMMAND_RETIRE), (14, 0)),        # bottom of pipe: every stage / no stage
])
def test_each_stage_holds_the_logically_earlier_or_later_ones(stages, scopes):
    assert stage_scopes(stages)[:2] == scopes


def test_a_barrier_without_dispatch_in_its_source_does_not_order_everything():
    # (COMMAND_PROCESS|TRANSFER -> ...): COMPUTE_SHADER is logically later than DRAW_INDIRECT
    assert barrier_scopes([ST.COMMAND_PROCESS | ST.TRANSFER, ST.COMMAND_PROCESS | ST.TRANSFER]) == (10, 14, 10, 10)


def two_dispatches(src, dst):
    def record(cb, exe, a, b):
        cb.dispatch(exe, "negate", (1, 1, 1), (), (a, b))           # writes b
        cb.execution_barrier(src, dst)
        cb.dispatch(exe, "double_it", (1, 1, 1), (), (a, b))        # writes b again
    return record


@pytest.mark.parametrize("src, dst, names", [
    (ST.COMMAND_PROCESS, ST.DISPATCH, "COMMAND_PROCESS -> DISPATCH"),
    (ST.COMMAND_PROCESS | ST.TRANSFER, ST.COMMAND_PROCESS | ST.TRANSFER, "COMMAND_PROCESS|TRANSFER -> "
                                                                         "COMMAND_PROCESS|TRANSFER"),
])
def test_a_command_process_source_does_not_hold_a_dispatch_write(src, dst, names):
    assert findings(run("sim", two_dispatches(src, dst))) == [
        ("hazard.waw", ["0:0.0", "0:0.2"],
         "dispatch 0:0.2 writes buffer b1[0:64) written by dispatch 0:0.0 in the same command buffer: the "
         f"execution barrier between them (0:0.1 {names}) does not order dispatch (DISPATCH) work before "
         "dispatch (DISPATCH) work (WAW)"),
    ]


def test_a_command_process_target_holds_the_later_dispatch_stage():
    assert findings(run("sim", two_dispatches(ST.DISPATCH, ST.COMMAND_PROCESS))) == []


def test_barriers_chain_through_logically_ordered_stages():
    # (TRANSFER -> COMMAND_PROCESS) holds DRAW_INDIRECT and COMPUTE_SHADER after it, (DISPATCH -> TRANSFER)
    # COMPUTE_SHADER and DRAW_INDIRECT before it: they meet, a chain
    def record(cb, _exe, a, b):
        cb.fill_buffer(R(a, 0, 32), 7, 1)
        cb.execution_barrier(ST.TRANSFER, ST.COMMAND_PROCESS)
        cb.execution_barrier(ST.DISPATCH, ST.TRANSFER)
        cb.copy_buffer(R(a, 0, 16), R(b, 0, 16))
    assert findings(run("sim", record)) == []


@pytest.mark.parametrize("first, second", [
    ((ST.TRANSFER, ST.COMMAND_RETIRE), (ST.COMMAND_RETIRE, ST.TRANSFER)),
    ((ST.TRANSFER, ST.COMMAND_ISSUE), (ST.COMMAND_ISSUE, ST.TRANSFER)),
])
def test_a_barrier_through_top_or_bottom_of_pipe_orders_by_itself(first, second):
    # not a chain, but no hazard either: (COMMAND_RETIRE -> TRANSFER)'s first scope holds every command
    # before it (the fill too), (TRANSFER -> COMMAND_ISSUE)'s second scope every command after it
    def record(cb, _exe, a, b):
        cb.fill_buffer(R(a, 0, 32), 7, 1)
        cb.execution_barrier(*first)
        cb.execution_barrier(*second)
        cb.copy_buffer(R(a, 0, 16), R(b, 0, 16))
    assert findings(run("sim", record)) == []


def behind(barrier):
    """fill a -> ``barrier(cb)`` -> (TRANSFER -> TRANSFER, DISPATCH_WRITE -> DISPATCH_READ|TRANSFER_READ)
    -> copy a: the last barrier misses the fill's write."""
    def record(cb, _exe, a, b):
        cb.fill_buffer(R(a, 0, 32), 7, 1)
        barrier(cb)
        cb.execution_barrier(ST.TRANSFER, ST.TRANSFER, [(SC.DISPATCH_WRITE, SC.DISPATCH_READ | SC.TRANSFER_READ)])
        cb.copy_buffer(R(a, 0, 16), R(b, 0, 16))
    return record


def test_a_barrier_without_memory_barriers_orders_only_the_memory_of_work_in_its_stages():
    trace = run("sim", behind(lambda cb: cb.execution_barrier(ST.DISPATCH, ST.DISPATCH)))
    assert findings(trace) == [
        ("hazard.raw", ["0:0.0", "0:0.3"], PREFIX +
         "barriers between them order them but their memory barriers (0:0.1 no memory barriers; 0:0.2 "
         "DISPATCH_WRITE -> DISPATCH_READ|TRANSFER_READ) do not make the write visible: no source scope holds "
         "the fill write (TRANSFER_WRITE) (RAW)"),
    ]
    # one whose stages hold the fill and the copy makes the write visible (CB9; IREE's CTS relies on it)
    assert findings(run("sim", behind(lambda cb: cb.execution_barrier(ST.TRANSFER, ST.TRANSFER)))) == []


def test_a_memory_barrier_holds_only_writes_in_its_barriers_source_stages():
    barrier = lambda cb: cb.execution_barrier(ST.DISPATCH, ST.DISPATCH, [(SC.TRANSFER_WRITE, SC.DISPATCH_READ)])
    assert findings(run("sim", behind(barrier))) == [
        ("hazard.raw", ["0:0.0", "0:0.3"], PREFIX +
         "barriers between them order them but their memory barriers (0:0.1 TRANSFER_WRITE -> DISPATCH_READ; "
         "0:0.2 DISPATCH_WRITE -> DISPATCH_READ|TRANSFER_READ) do not make the write visible: no source scope "
         "holds the fill write (TRANSFER_WRITE) in a barrier whose source stages hold fill (TRANSFER) (RAW)"),
    ]


@pytest.mark.parametrize("src, dst, why", [
    # bottom of pipe as a source, top of pipe as a target: every stage's execution, no stage's accesses
    (ST.COMMAND_RETIRE, ST.TRANSFER, "no source scope holds the fill write (TRANSFER_WRITE) in a barrier "
                                     "whose source stages hold fill (TRANSFER)"),
    (ST.TRANSFER, ST.COMMAND_ISSUE, "no target scope holds the copy read (TRANSFER_READ) in a barrier whose "
                                    "target stages hold copy (TRANSFER)"),
])
def test_access_scopes_hold_the_accesses_of_the_named_stages_only(src, dst, why):
    trace = run("sim", fill_copy(src, dst, [(SC.TRANSFER_WRITE, SC.TRANSFER_READ)]))
    assert findings(trace) == [
        ("hazard.raw", ["0:0.0", "0:0.2"],
         "copy 0:0.2 reads buffer b0[0:16) written by fill 0:0.0 in the same command buffer: the execution "
         "barrier between them orders them but its memory barriers (0:0.1 TRANSFER_WRITE -> TRANSFER_READ) do "
         f"not make the write visible: {why} (RAW)"),
    ]


def copy_behind_buffer_barriers(ranges):
    """fill a[0:32) -> barrier(TRANSFER -> TRANSFER, a buffer barrier TRANSFER_WRITE -> scope on each
    (scope, offset, length) of ``ranges``) -> copy a[0:32)."""
    def record(cb, _exe, a, b):
        cb.fill_buffer(R(a, 0, 32), 7, 1)
        cb.execution_barrier(ST.TRANSFER, ST.TRANSFER, (),
                             [(SC.TRANSFER_WRITE, scope, R(a, o, n)) for scope, o, n in ranges])
        cb.copy_buffer(R(a, 0, 32), R(b, 0, 32))
    return record


def test_buffer_barriers_on_neighbouring_bytes_together_hold_an_access():
    halves = [(SC.TRANSFER_READ, 0, 16), (SC.TRANSFER_READ, 16, 16)]
    assert findings(run("sim", copy_behind_buffer_barriers(halves))) == []


def test_the_bytes_no_buffer_barrier_holds_are_named():
    # [0:8) visible; [8:16) held by none; [16:32) held, but not for a copy's read
    ranges = [(SC.TRANSFER_READ, 0, 8), (SC.DISPATCH_READ, 16, 16)]
    assert findings(run("sim", copy_behind_buffer_barriers(ranges))) == [
        ("hazard.raw", ["0:0.0", "0:0.2"],
         "copy 0:0.2 reads buffer b0[8:32) written by fill 0:0.0 in the same command buffer: the execution "
         "barrier between them orders them but its memory barriers (0:0.1 TRANSFER_WRITE -> TRANSFER_READ on "
         "b0[0:8), TRANSFER_WRITE -> DISPATCH_READ on b0[16:32)) do not make the write visible: no buffer "
         "barrier holds b0[8:16) (RAW)"),
    ]


def test_a_buffer_barrier_with_the_right_scopes_on_other_bytes_names_the_bytes():
    trace = run("sim", fill_copy(buffer_barriers=lambda a: [(SC.TRANSFER_WRITE, SC.TRANSFER_READ, R(a, 48, 16))]))
    assert findings(trace) == [
        ("hazard.raw", ["0:0.0", "0:0.2"],
         "copy 0:0.2 reads buffer b0[0:16) written by fill 0:0.0 in the same command buffer: the execution "
         "barrier between them orders them but its memory barriers (0:0.1 TRANSFER_WRITE -> TRANSFER_READ on "
         "b0[48:64)) do not make the write visible: no buffer barrier holds b0[0:16) (RAW)"),
    ]


@pytest.mark.parametrize("stages", [(ST.COMMAND_RETIRE, ST.TRANSFER), (ST.TRANSFER, ST.COMMAND_ISSUE)])
@pytest.mark.parametrize("memory", [[(SC.TRANSFER_WRITE, SC.TRANSFER_READ)],
                                    [(SC.MEMORY_WRITE, SC.MEMORY_READ | SC.MEMORY_WRITE)]])
def test_a_global_memory_barrier_holds_only_the_stages_its_barrier_names(stages, memory):
    """Bottom of pipe as the source (top as the target) orders every command but names no stage for
    the access scopes: the write is not made visible, a global MEMORY barrier no more than a
    TRANSFER one (the "covers every access: as if none were given" shortcut ignored the stages)."""
    assert [f[0] for f in findings(run("sim", fill_copy(*stages, memory)))] == ["hazard.raw"]


def test_the_bytes_no_buffer_barrier_holds_are_named_piece_by_piece():
    def record(cb, _exe, a, b):
        cb.fill_buffer(R(a, 0, 32), 7, 1)
        cb.execution_barrier(ST.TRANSFER, ST.TRANSFER, (), [(SC.TRANSFER_WRITE, SC.TRANSFER_READ, R(a, 8, 8))])
        cb.copy_buffer(R(a, 0, 32), R(b, 0, 32))
    (finding,) = findings(run("sim", record))
    assert finding[2].endswith("do not make the write visible: no buffer barrier holds b0[0:8), b0[16:32) (RAW)")
