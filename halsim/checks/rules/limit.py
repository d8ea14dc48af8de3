"""Resource limits of the CUDA driver design, on ``sim:cuda`` / ``cuda`` traces (skipped elsewhere).

* ``limit.cuda_event_pool`` (warning) — CUevents taken from outside the pool (``cuda_event``
  events with ``action`` ``"create"`` or ``"acquire"`` and ``pooled: false``): the pool ran dry, and
  every such event costs a driver call on the submission path;
* ``limit.cuda_wait_events`` — a queue action waits on more than 32 semaphores, the CUDA driver's
  limit on events one action can wait for: it fails with ``RESOURCE_EXHAUSTED`` (error when the
  trace shows that status, warning otherwise).

>>> from reference.trace import Trace
>>> from halsim.checks import check_trace
>>> t = Trace({"device": "sim:cuda", "personality": "cuda"})
>>> for i in range(3):
...     t.emit({"ev": "cuda_event", "t": i, "action": "create", "pooled": i == 0})
>>> [f.message for f in check_trace(t).findings]
['2 CUevents were created outside the event pool (of 3 acquired): the pool is too small for this schedule']
"""

from __future__ import annotations

from ...trace_tools.model import personality
from ..findings import Finding

WAIT_LIMIT = 32
RESOURCE_EXHAUSTED = 8

RULES = {
    "limit.cuda_event_pool": "CUevents created outside the event pool (pool pressure)",
    "limit.cuda_wait_events": "a queue action waits on more than 32 semaphores (CUDA's limit)",
}


def is_cuda(model) -> bool:
    return personality(model.header) == "cuda" or bool(model.cuda_events)


def check(model, hb) -> list[Finding]:
    if not is_cuda(model):
        return []
    out: list[Finding] = []
    creates = [e for e in model.cuda_events if e.get("action") in ("create", "acquire")]
    unpooled = [e for e in creates if e.get("pooled") is False]
    if unpooled:
        ops = sorted({e["op"] for e in unpooled if e.get("op")})
        out.append(Finding("limit.cuda_event_pool", "warning", ops,
                           f"{len(unpooled)} CUevents were created outside the event pool (of "
                           f"{len(creates)} acquired): the pool is too small for this schedule",
                           {"unpooled": len(unpooled), "created": len(creates)}))
    for op in model.ops.values():
        if len(op.wait) > WAIT_LIMIT:
            failed = op.status == RESOURCE_EXHAUSTED
            out.append(Finding("limit.cuda_wait_events", "error" if failed else "warning", [op.id],
                               f"{op.kind} {op.id} waits on {len(op.wait)} semaphores, more than the "
                               f"{WAIT_LIMIT} events a CUDA queue action can wait for"
                               + (": it failed with RESOURCE_EXHAUSTED" if failed else ""),
                               {"waits": len(op.wait), "status": op.status}))
    return out
