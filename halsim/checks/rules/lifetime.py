"""Resource lifetimes: storage used outside its life, resources the host freed while in flight.

* ``lifetime.use_after_dealloca`` — a command uses a transient buffer whose ``queue_dealloca``
  happens before it (a dealloca that failed freed nothing: a failed wait, Q9, or a use before its alloca);
* ``lifetime.dealloca_race`` — a ``queue_dealloca`` not ordered after a command that uses the
  buffer (it may free the storage while the command still runs), or after a host access to its
  bytes (``map_write``…: the host may touch freed storage);
* ``lifetime.use_before_alloca`` — a command (or host access) uses a transient buffer that its
  ``queue_alloca`` is not ordered before (the storage may not exist yet), or its ``queue_dealloca``
  is not ordered after it (whether or not the dealloca failed, unless its wait failed);
* ``lifetime.host_release_in_flight`` — the host dropped its last reference to a resource while an
  op that uses it had not finished, and the device did not retain it (``retain_resources=False``:
  the bug the Metal driver's async change fixed).

>>> from reference import hal
>>> from halsim.checks import check_trace
>>> dev = hal.create_device("sim", queues=2)
>>> s, t = dev.create_semaphore(), dev.create_semaphore()
>>> tmp = dev.queue_alloca([], [(s, 1)], 64)
>>> dev.queue_fill([(s, 1)], [(s, 2)], tmp, 0, 64, 0, 1)
>>> dev.queue_dealloca([(s, 1)], [(t, 1)], tmp)        # should wait for s >= 2
>>> t.wait(1)
>>> [f.message for f in check_trace(dev.trace).findings]   # doctest: +NORMALIZE_WHITESPACE
['dealloca 0:2 of buffer b0 is not ordered after fill 0:1.0, which uses it: add a wait for
  what that op signals']
>>> dev.close()
"""

from __future__ import annotations

from reference.hal import StatusCode
from reference.hal.queue_op import DEALLOCA_TOO_EARLY

from ..findings import Finding, cmd_id

RULES = {
    "lifetime.use_after_dealloca": "a command or host access uses a transient buffer after its queue_dealloca",
    "lifetime.dealloca_race": "queue_dealloca is not ordered after a use of the buffer (command or host access)",
    "lifetime.use_before_alloca": "a command, host access or queue_dealloca uses a transient buffer its "
                                  "queue_alloca is not ordered before",
    "lifetime.host_release_in_flight": "the host released a resource an unfinished op uses, and nothing retained it",
}


class LifetimeChecker:
    """Fed every command (:meth:`command`); :meth:`findings` at the end."""

    def __init__(self, model, hb):
        self.model, self.hb = model, hb
        self.alloca: dict[str, str] = {}
        self.dealloca: dict[str, list[str]] = {}
        for op in model.ops.values():
            buf = op.fields.get("buf")
            if op.kind == "alloca" and buf:
                self.alloca[buf] = op.id
            elif op.kind == "dealloca" and buf and op.fields.get("transient", True) and not op.status:
                # (a dealloca that failed decommits nothing: its wait failed, HAL_SEMANTICS Q9, or it ran too early)
                self.dealloca.setdefault(buf, []).append(op.id)
        self.found: dict[tuple, Finding] = {}
        # resources of ops the device did not retain: res -> [op ids]
        self.unretained: dict[str, list[str]] = {}
        if model.host_releases:
            for op in model.ops.values():
                for res in model.uses(op):
                    if op.retained is None or res not in op.retained:
                        self.unretained.setdefault(res, []).append(op.id)

    def command(self, op_id: str, index: int, kind: str, access) -> None:
        if op_id not in self.hb.node_of_op:
            return
        node = self.hb.node_of_op[op_id]
        for buf, _off, _len, _mode in access or ():
            if self.model.host_releases:
                users = self.unretained.setdefault(buf, [])
                if not users or users[-1] != op_id:
                    op = self.model.ops[op_id]
                    if op.retained is None or buf not in op.retained:
                        users.append(op_id)
            if buf not in self.alloca and buf not in self.dealloca:
                continue  # (most buffers: not transient)
            cid = cmd_id(op_id, index)
            what = f"{kind} {cid}"
            for rule, other in self._misordered(buf, node, op_id):
                if rule == "lifetime.use_before_alloca":
                    self._add(rule, buf, op_id, [other, cid], f"{what} uses transient buffer {buf} but its alloca "
                              f"{other} is not ordered before it: wait for the alloca's signal")
                elif rule == "lifetime.use_after_dealloca":
                    self._add(rule, buf, op_id, [other, cid],
                              f"{what} uses buffer {buf} after dealloca {other} released its storage")
                else:
                    self._add(rule, buf, op_id, [cid, other], f"dealloca {other} of buffer {buf} is not ordered "
                              f"after {what}, which uses it: add a wait for what that op signals")

    def host_access(self, thread, op_id, buf: str, _offset, _length, mode: str, idx: int) -> None:
        """A host access (``map_write``, ``map_read``, …) of a transient's bytes by host thread
        ``thread`` (or host call ``op_id``'s function) must be ordered after its ``queue_alloca``
        and before its ``queue_dealloca`` as a command's use must: the host waits for the alloca's
        signal before touching the bytes, and signals that its access is done for the dealloca to
        wait on."""
        if buf not in self.dealloca and buf not in self.alloca:
            return
        hb = self.hb
        node = hb.node_of_op.get(op_id) if op_id is not None else hb.node_of_host.get(idx)
        if node is None:
            return
        who = f"host call {op_id}" if op_id is not None else f"host thread {thread}"
        what, key = ("map_read" if mode == "r" else "map_write"), f"host:{thread}:{op_id}"
        for rule, other in self._misordered(buf, node, op_id):
            if rule == "lifetime.use_before_alloca":  # the storage may not exist yet
                self._add(rule, buf, key, [other], f"{who}'s {what} of transient buffer {buf} is not ordered "
                          f"after its alloca {other}: wait for the alloca's signal before touching its bytes")
            elif rule == "lifetime.use_after_dealloca":
                self._add(rule, buf, key, [other],
                          f"{who} accesses buffer {buf} ({what}) after dealloca {other} released its storage")
            else:
                self._add(rule, buf, key, [other], f"dealloca {other} of buffer {buf} is not ordered after {who}'s "
                          f"{what} of it: make the dealloca wait for a semaphore the host signals after the access")

    def _misordered(self, buf: str, node, own: str | None):
        """``(rule, op)`` for each alloca or dealloca of ``buf`` that a use at ``node`` (by op ``own``,
        or the host) is not ordered with as it must be: after the alloca, before every dealloca."""
        hb = self.hb
        alloca = self.alloca.get(buf)
        if alloca is not None and alloca != own and not hb.before(hb.node_of_op[alloca], node):
            yield "lifetime.use_before_alloca", alloca
        for d in self.dealloca.get(buf, ()):
            if d == own:
                continue
            dn = hb.node_of_op[d]
            if hb.before(dn, node):
                yield "lifetime.use_after_dealloca", d
            elif not hb.before(node, dn):
                yield "lifetime.dealloca_race", d

    def _add(self, rule, buf, op_id, ops, message) -> None:
        key = (rule, buf, op_id)
        if key not in self.found:
            self.found[key] = Finding(rule, "error", ops, message, {"buffer": buf})

    def _deallocas_before_alloca(self) -> None:
        """A ``queue_dealloca`` must itself be ordered after its ``queue_alloca`` (Q8: the storage is
        committed only after the alloca's waits): one that runs first fails (the device's
        FAILED_PRECONDITION) or frees nothing yet. A failed one counts only when that refusal was its
        failure: one failed otherwise never ran (its wait failed, Q9; a failed wait event or the
        queue's sticky status failed it first — its order is then not the question)."""
        hb = self.hb
        for op in self.model.ops.values():
            if op.kind != "dealloca" or op.stuck or not op.fields.get("transient", True):
                continue
            alloca = self.alloca.get(op.fields.get("buf"))
            if alloca is None or hb.op_before(alloca, op.id) or (op.status and not _refused_early(op)):
                continue
            buf = op.fields["buf"]
            self._add("lifetime.use_before_alloca", buf, op.id, [alloca, op.id],
                      f"dealloca {op.id} of transient buffer {buf} is not ordered after its alloca {alloca}: "
                      f"the storage may not be committed yet; wait for the alloca's signal")

    def findings(self) -> list[Finding]:
        self._deallocas_before_alloca()
        out = list(self.found.values())
        ops = self.model.ops
        for res, idx in self.model.host_releases:
            for op_id in self.unretained.get(res, ()):
                op = ops[op_id]
                if op.enq < idx and (op.done is None or idx < op.done):
                    out.append(Finding(
                        "lifetime.host_release_in_flight", "error", [op_id],
                        f"the host released {res} while {op.kind} {op_id} that uses it was still in "
                        f"flight, and the device did not retain it (retain_resources=False?)",
                        {"resource": res}))
        return out


def _refused_early(op) -> bool:
    """Whether a failed dealloca failed because it ran before its storage was committed (the device's
    own refusal: :data:`reference.hal.queue_op.DEALLOCA_TOO_EARLY`)."""
    return op.status == StatusCode.FAILED_PRECONDITION and op.message.startswith(DEALLOCA_TOO_EARLY)
