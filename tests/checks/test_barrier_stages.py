"""Execution barriers order only the stages they name (HAL_SEMANTICS CB9): a barrier whose source or
target stages miss a command's stage leaves it unordered — the missing-barrier bug a Vulkan driver
shows and IREE's local, CUDA and Metal drivers (which treat every barrier as full) hide."""

import pytest

from reference import hal
from tests.checks.barrier_programs import fill_copy, findings, run, without

ST = hal.ExecutionStage
DEVICES = ["sim", "local-task", "sim:metal"]


@pytest.mark.parametrize("uri", DEVICES)
def test_a_barrier_between_dispatch_stages_does_not_order_a_fill_before_a_copy(uri):
    trace = run(uri, fill_copy(ST.DISPATCH, ST.DISPATCH))
    assert [e["stages"] for e in trace.events("cmd") if e["kind"] == "barrier"] == [[4, 4]]
    assert findings(trace) == [
        ("hazard.raw", ["0:0.0", "0:0.2"],
         "copy 0:0.2 reads buffer b0[0:16) written by fill 0:0.0 in the same command buffer: the execution "
         "barrier between them (0:0.1 DISPATCH -> DISPATCH) does not order fill (TRANSFER) work before copy "
         "(TRANSFER) work (RAW)"),
    ]


@pytest.mark.parametrize("src, dst", [
    (ST.TRANSFER, ST.TRANSFER),
    (ST.TRANSFER | ST.DISPATCH, ST.TRANSFER),
    (ST.COMMAND_RETIRE, ST.COMMAND_ISSUE),          # bottom of pipe -> top of pipe: every stage
    (ST.COMMAND_RETIRE, ST.TRANSFER),
    (ST.TRANSFER, ST.COMMAND_ISSUE),
])
def test_a_barrier_whose_stages_cover_both_commands_orders_them(src, dst):
    assert findings(run("sim", fill_copy(src, dst))) == []


@pytest.mark.parametrize("src, dst", [
    (ST.COMMAND_ISSUE, ST.TRANSFER),                 # top of pipe as a source: no stage
    (ST.TRANSFER, ST.COMMAND_RETIRE),                # bottom of pipe as a target: no stage
    (ST.TRANSFER, ST.DISPATCH),
    (ST.DISPATCH, ST.TRANSFER),
])
def test_a_barrier_that_misses_either_stage_leaves_them_unordered(src, dst):
    assert [rule for rule, _ops, _msg in findings(run("sim", fill_copy(src, dst)))] == ["hazard.raw"]


def test_barriers_chain_through_their_stages():
    # dispatch -> (DISPATCH->TRANSFER) copy -> (TRANSFER->DISPATCH) dispatch: the first dispatch's write
    # is ordered before the last dispatch's (a Vulkan execution dependency chain through the copy)
    def chained(cb, exe, a, b):
        cb.dispatch(exe, "negate", (1, 1, 1), (), (a, b))
        cb.execution_barrier(ST.DISPATCH, ST.TRANSFER)
        cb.copy_buffer(hal.BufferRef(b, 0, 16), hal.BufferRef(a, 0, 16))
        cb.execution_barrier(ST.TRANSFER, ST.DISPATCH)
        cb.dispatch(exe, "double_it", (1, 1, 1), (), (a, b))
    assert findings(run("sim", chained)) == []


def test_a_second_barrier_chains_from_the_first_ones_target_stages():
    # (DISPATCH->TRANSFER) then (TRANSFER->DISPATCH) with nothing between: still a chain
    def two(cb, exe, a, b):
        cb.dispatch(exe, "negate", (1, 1, 1), (), (a, b))
        cb.execution_barrier(ST.DISPATCH, ST.TRANSFER)
        cb.execution_barrier(ST.TRANSFER, ST.DISPATCH)
        cb.dispatch(exe, "double_it", (1, 1, 1), (), (a, b))
    assert findings(run("sim", two)) == []


def test_a_chain_broken_by_a_stage_gap_is_a_hazard():
    # dispatch -> (DISPATCH->TRANSFER) -> (COMMAND_ISSUE->DISPATCH) -> dispatch: the second barrier's
    # source (top of pipe: no stage) is not in the first one's target (TRANSFER): the dispatches race
    def broken(cb, exe, a, b):
        cb.dispatch(exe, "negate", (1, 1, 1), (), (a, b))
        cb.execution_barrier(ST.DISPATCH, ST.TRANSFER)
        cb.execution_barrier(ST.COMMAND_ISSUE, ST.DISPATCH)
        cb.dispatch(exe, "double_it", (1, 1, 1), (), (a, b))
    (rule, ops, msg), = findings(run("sim", broken))
    assert (rule, ops) == ("hazard.waw", ["0:0.0", "0:0.3"])
    assert msg.endswith("the execution barriers between them (0:0.1 DISPATCH -> TRANSFER, 0:0.2 "
                        "COMMAND_ISSUE -> DISPATCH) do not order dispatch (DISPATCH) work before dispatch "
                        "(DISPATCH) work (WAW)")   # a dispatch writes in DISPATCH (COMPUTE_SHADER) only


def test_an_indirect_dispatch_reads_its_counts_in_command_process():
    # the counts a fill wrote, behind a TRANSFER -> COMMAND_PROCESS barrier: ordered (Vulkan's
    # DRAW_INDIRECT stage); behind TRANSFER -> TRANSFER: not
    def indirect(target):
        def record(cb, exe, a, b):
            cb.fill_buffer(hal.BufferRef(a, 0, 12), 1, 4)
            cb.execution_barrier(ST.TRANSFER, target)
            cb.dispatch(exe, "write_workgroup_ids", hal.BufferRef(a, 0, 12), (), (hal.BufferRef(b, 0, 4),))
        return record
    assert findings(run("sim", indirect(ST.COMMAND_PROCESS))) == []
    (rule, ops, _msg), = findings(run("sim", indirect(ST.TRANSFER)))
    assert (rule, ops) == ("hazard.raw", ["0:0.0", "0:0.2"])


def test_a_trace_without_barrier_stages_orders_by_every_barrier():
    # traces written before barriers recorded their stages: every barrier orders everything
    new = run("sim", fill_copy(ST.DISPATCH, ST.DISPATCH))
    assert findings(without(new, "stages")) == []


def test_a_barrier_record_with_malformed_stages_is_bad_input():
    # the trace reader's fast path for commands checks stages too (it returned before the field table)
    from halsim.trace_tools.model import event_problem

    barrier = {"ev": "cmd", "t": 1, "op": "0:0", "index": 0, "kind": "barrier", "start": 0, "track": 0,
               "access": []}
    assert event_problem(dict(barrier, stages=[4, 4])) is None
    assert event_problem(dict(barrier, stages=[4])) == (
        "cmd event: 'stages' must be a [source, target] pair of execution-stage masks, got a list")
    assert event_problem(dict(barrier, stages="xy")) == (
        "cmd event: 'stages' must be a [source, target] pair of execution-stage masks, got 'xy'")
