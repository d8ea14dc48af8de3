"""Generated programs read a transient buffer's bytes only after an operation ordered before the read
wrote them: ``queue_alloca`` leaves the contents undefined (HAL_SEMANTICS Q8) — every simulated device
returns zeros, a real GPU whatever the memory held — so reading them would make ``halsim difftest``
report a difference that is no bug."""

import pytest

from halsim.campaigns.fuzz import check_document
from halsim.campaigns.generate import generate
from reference.kernels import work_items
from reference.kernels import KERNELS

QUEUE_CALLS = ("execute", "barrier", "fill", "copy", "update", "dispatch", "alloca", "dealloca")


def _span(ref, sizes):
    """(buffer, lo, hi) of a schedule buffer reference (a name: the whole buffer)."""
    if isinstance(ref, str):
        return ref, 0, sizes[ref]
    return ref["buffer"], ref["offset"], ref["offset"] + ref["length"]


def _reads_and_writes(st, sizes):
    """([(buffer, lo, hi)] a queue step reads, [(buffer, lo, hi)] it writes — the bytes the kernel
    stores, not the whole binding (a dispatch writes ``work_items`` elements from a binding's start)."""
    call = st["call"]
    if call in ("fill", "update"):
        return [], [_span(st["target"], sizes)]
    if call == "copy":
        return [_span(st["source"], sizes)], [_span(st["target"], sizes)]
    if call != "dispatch":
        return [], []
    spec = KERNELS[st["entry"]]
    spans = [_span(ref, sizes) for ref in st["bindings"]]
    n = work_items(spec, st["workgroups"], st["constants"], [hi - lo for _, lo, hi in spans]) * 4
    reads = [s for b, s in zip(spec.bindings, spans) if "r" in b.access]
    writes = [(name, lo, lo + n) for b, (name, lo, _) in zip(spec.bindings, spans) if "w" in b.access]
    return reads, writes


def undefined_reads(doc) -> list[str]:
    """Reads of transient bytes that no operation ordered before the read wrote.

    An operation is ordered after what every way its waits can be met is ordered after: a wait for
    ``s >= v`` is met by whichever signal of ``s`` to a value ``>= v`` comes first, so only what lies
    before *all* of them counts (with every timeline's chain kept, that is the exact signaller's past).
    The host submits in program order, so a step also follows what the host's earlier waits followed.
    """
    sizes = dict(doc["buffers"])
    signallers: dict[str, list] = {}      # semaphore -> [(value, past including the signaller)]
    host_past: frozenset = frozenset()
    written: dict[int, list] = {}         # op index -> [(buffer, lo, hi)]
    bad = []

    def met(waits) -> frozenset:
        past = None
        for sem, v in waits.items():
            ways = [p for value, p in signallers.get(sem, []) if value >= v]
            if not ways:
                continue       # never met: the op fails (a failed gate) and touches nothing
            p = frozenset.intersection(*ways)
            past = p if past is None else past | p
        return past or frozenset()

    for index, st in enumerate(doc["host"]):
        call = st["call"]
        if call == "wait":
            host_past |= met(st["wait"])
        elif call == "signal":
            signallers.setdefault(st["semaphore"], []).append((st["value"], host_past))
        elif call in QUEUE_CALLS:
            past = host_past | met(st.get("wait", {}))
            if call == "alloca":
                sizes[st["name"]] = st["size"]
            if call == "execute":   # command buffers are recorded before any alloca: declared buffers only
                cmds = doc["command_buffers"][st["command_buffer"]]["commands"]
                assert not {_span(r, sizes)[0] for c in cmds for k in ("target", "source")
                            if (r := c.get(k)) is not None} - set(doc["buffers"])
            reads, writes = _reads_and_writes(st, sizes)
            for name, lo, hi in reads:
                if name in doc["buffers"]:
                    continue
                mask = [False] * (hi - lo)
                for i in past:
                    for n2, lo2, hi2 in written[i]:
                        if n2 == name:
                            for b in range(max(lo, lo2), min(hi, hi2)):
                                mask[b - lo] = True
                if not all(mask):
                    bad.append(f"step {index} ({call}) reads {name}[{lo}:{hi}], bytes "
                               f"{[lo + i for i, ok in enumerate(mask) if not ok][:4]}... unwritten")
            written[index] = writes
            for sem, v in st.get("signal", {}).items():
                signallers.setdefault(sem, []).append((v, past | {index}))
    return bad


def test_the_old_generator_read_an_alloca_s_undefined_bytes():
    # generate(2, size=20, queues=2, wait_before_signal=False) before a transient's bytes counted as
    # written only once something wrote them (steps 4-9; the two executes between, here barriers,
    # touched declared buffers only): the copy read tmp0, which only its alloca had touched
    doc = {"buffers": {"b0": 64}, "command_buffers": {}, "host": [
        {"call": "alloca", "name": "tmp0", "size": 256, "wait": {}, "signal": {"t0": 1}, "queue": 1},
        {"call": "barrier", "wait": {"t0": 1}, "signal": {"t0": 2}, "queue": 0},
        {"call": "barrier", "wait": {"t0": 2}, "signal": {"t0": 3}, "queue": 1},
        {"call": "wait", "wait": {"t0": 1}},
        {"call": "copy", "source": {"buffer": "tmp0", "offset": 48, "length": 64},
         "target": {"buffer": "b0", "offset": 0, "length": 64}, "wait": {"t0": 3}, "signal": {"t2": 3},
         "queue": 1},
    ]}
    assert undefined_reads(doc) == ["step 4 (copy) reads tmp0[48:112], bytes [48, 49, 50, 51]... unwritten"]


def test_a_read_needs_every_byte_written_before_it():
    doc = {"buffers": {"b0": 64}, "command_buffers": {}, "host": [
        {"call": "alloca", "name": "tmp0", "size": 64, "wait": {}, "signal": {"t0": 1}, "queue": 0},
        {"call": "fill", "target": {"buffer": "tmp0", "offset": 0, "length": 32}, "pattern": 1,
         "pattern_length": 1, "wait": {"t0": 1}, "signal": {"t0": 2}, "queue": 0},
        # reads 16 bytes the fill did not write
        {"call": "dispatch", "entry": "negate", "workgroups": [1, 1, 1], "constants": [],
         "bindings": [{"buffer": "tmp0", "offset": 0, "length": 48}, "b0"], "wait": {"t0": 2},
         "signal": {"t0": 3}, "queue": 0},
        # written bytes, but not ordered after their write: t1 is signalled by no one before
        {"call": "dispatch", "entry": "negate", "workgroups": [1, 1, 1], "constants": [],
         "bindings": [{"buffer": "tmp0", "offset": 0, "length": 32}, "b0"], "wait": {"t0": 1},
         "signal": {"t1": 1}, "queue": 0},
        # ordered after the fill through the chain t0:3 -> t0:2
        {"call": "dispatch", "entry": "negate", "workgroups": [1, 1, 1], "constants": [],
         "bindings": [{"buffer": "tmp0", "offset": 0, "length": 32}, "b0"], "wait": {"t0": 3},
         "signal": {"t1": 2}, "queue": 0},
    ]}
    assert undefined_reads(doc) == ["step 2 (dispatch) reads tmp0[0:48], bytes [32, 33, 34, 35]... unwritten",
                                    "step 3 (dispatch) reads tmp0[0:32], bytes [0, 1, 2, 3]... unwritten"]


KNOBS = [dict(size=30, queues=3), dict(size=40, queues=2, gates=0), dict(size=25, queues=1, timelines=2),
         dict(size=30, queues=3, fail_prob=0.3), dict(size=20, queues=2, wait_before_signal=False),
         dict(size=60, queues=4, gates=3, fail_prob=0.2)]


@pytest.mark.parametrize("knobs", KNOBS, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()))
def test_generated_programs_read_only_written_transient_bytes(knobs):
    reads = 0
    for seed in range(40):
        doc = generate(seed, **knobs)
        assert (seed, undefined_reads(doc)) == (seed, [])
        reads += sum(1 for st in doc["host"] if st["call"] in ("copy", "dispatch") and any(
            isinstance(r, dict) and r["buffer"].startswith("tmp")
            for r in [st.get("source")] + st.get("bindings", [])))
    assert reads > 0   # transients still get read


def test_a_dispatch_defines_only_the_elements_it_stores():
    # write_workgroup_ids over 64 bytes with 2 workgroups stores 8 bytes: the rest stays undefined
    doc = {"buffers": {"b0": 64}, "command_buffers": {}, "host": [
        {"call": "alloca", "name": "tmp0", "size": 64, "wait": {}, "signal": {"t0": 1}, "queue": 0},
        {"call": "dispatch", "entry": "write_workgroup_ids", "workgroups": [2, 1, 1], "constants": [],
         "bindings": ["tmp0"], "wait": {"t0": 1}, "signal": {"t0": 2}, "queue": 0},
        {"call": "copy", "source": {"buffer": "tmp0", "offset": 0, "length": 16},
         "target": {"buffer": "b0", "offset": 0, "length": 16}, "wait": {"t0": 2}, "signal": {"t0": 3},
         "queue": 0},
    ]}
    assert undefined_reads(doc) == ["step 2 (copy) reads tmp0[0:16], bytes [8, 9, 10, 11]... unwritten"]


def _names(st) -> set:
    refs = [st.get("source"), st.get("target")] + st.get("bindings", [])
    return {r if isinstance(r, str) else r["buffer"] for r in refs if r is not None}


def test_a_transient_is_never_used_after_its_dealloca_even_one_that_fails():
    # a dealloca waiting for a gate the host fails was not counted, so later steps kept using its
    # buffer: the checks call that a use after (sim:metal) or racing (sim) the dealloca — generate(18,
    # size=30, queues=3, fail_prob=0.3) had 4 such findings on each
    for seed in range(40):
        freed = set()
        for st in generate(seed, size=30, queues=3, fail_prob=0.3)["host"]:
            assert (seed, _names(st) & freed) == (seed, set())
            if st["call"] == "dealloca":
                freed.add(st["buffer"])
    doc = generate(18, size=30, queues=3, fail_prob=0.3, device="sim:metal")
    assert check_document(doc) == []
