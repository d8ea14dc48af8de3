"""Property: random correctly synchronized programs have no hazards; dropping one required wait
yields exactly the hazard between the two ops it ordered."""

import networkx as nx
from hypothesis import given, settings, strategies as st

from halsim.checks import check_trace
from reference import hal

SIZE, GRAIN = 64, 16

ranges = st.tuples(st.integers(0, SIZE // GRAIN - 1), st.integers(1, 2)).map(
    lambda r: (r[0] * GRAIN, min(r[1] * GRAIN, SIZE - r[0] * GRAIN)))
op_strategy = st.one_of(
    st.tuples(st.just("fill"), st.integers(0, 1), ranges, st.none(), st.integers(0, 1)),
    st.tuples(st.just("copy"), st.integers(0, 1), ranges, st.none(), st.integers(0, 1)),   # from the other buffer
)
programs = st.lists(op_strategy, min_size=2, max_size=6)


def accesses(op):
    kind, buf, (off, length), src, _q = op
    if kind == "fill":
        return [(buf, off, length, True)]
    return [(1 - buf, off, length, False), (buf, off, length, True)]


def conflicts(a, b) -> bool:
    return any(x[0] == y[0] and x[1] < y[1] + y[2] and y[1] < x[1] + x[2] and (x[3] or y[3])
               for x in accesses(a) for y in accesses(b))


def required_waits(program):
    return {(j, i) for i in range(len(program)) for j in range(i) if conflicts(program[j], program[i])}


def run(program, waits):
    with hal.create_device("sim", queues=2) as dev:
        bufs = [dev.allocator.allocate_buffer(SIZE) for _ in range(2)]
        sems = [dev.create_semaphore() for _ in program]
        for i, (kind, buf, (off, length), src, q) in enumerate(program):
            wait = [(sems[j], 1) for j, k in sorted(waits) if k == i]
            kw = {"queue_affinity": 1 << q}
            if kind == "fill":
                dev.queue_fill(wait, [(sems[i], 1)], bufs[buf], off, length, i, 4, **kw)
            else:
                dev.queue_copy(wait, [(sems[i], 1)], bufs[1 - buf], off, bufs[buf], off, length, **kw)
        dev.wait_semaphores(hal.WaitMode.ALL, [(s, 1) for s in sems])
        return check_trace(dev.trace).findings


@settings(max_examples=25, deadline=None)
@given(programs)
def test_synchronized_programs_have_no_hazards(program):
    assert run(program, required_waits(program)) == []


@settings(max_examples=25, deadline=None)
@given(programs, st.randoms(use_true_random=False))
def test_dropping_a_required_wait_gives_that_hazard(program, rnd):
    waits = required_waits(program)
    g = nx.DiGraph(list(waits))
    # a wait nothing else implies: no other path from j to i
    essential = sorted((j, i) for j, i in waits
                       if not nx.has_path(nx.restricted_view(g, [], [(j, i)]), j, i))
    if not essential:
        return
    j, i = rnd.choice(essential)
    found = run(program, waits - {(j, i)})
    assert found and {f.category for f in found} == {"hazard"}
    assert {tuple(f.ops) for f in found} == {(f"0:{j}.0", f"0:{i}.0")}
