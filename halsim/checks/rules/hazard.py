"""Data hazards: two accesses to overlapping bytes, at least one a write, with no happens-before.

Rules (Vulkan syncval's taxonomy; which access is "first" is the order they ran in the trace):

* ``hazard.raw`` — a read of bytes an unordered command wrote;
* ``hazard.war`` — a write of bytes an unordered command read;
* ``hazard.waw`` — a write of bytes an unordered command wrote.

``scope`` says where the missing ordering belongs: ``command_buffer`` (two commands between the same
two barriers of one command buffer: add an execution barrier), ``queue`` (two operations: add a
semaphore wait, or put them on one in-order queue), ``host`` (a host access — ``map_read``,
``map_write``, ``map_fill``, ``map_copy``, ``map_range`` — and a command: wait on the host for the
command's semaphore before touching the bytes, or make the op wait for one the host signals after)
or ``memory`` (two commands a barrier orders whose memory or buffer barriers do not make the write
visible: widen their access scopes).
A host call's function accesses as the host call (after its waits, before its signals).

Shadow memory per buffer, FastTrack-style: each byte range remembers its last write and, per lane,
its last read since; a new access is compared with those only, so checking is linear in the number
of accesses, not quadratic. Ranges are split where accesses start and end, and merged again on a
write.

>>> from reference import hal
>>> from halsim.checks import check_trace
>>> dev = hal.create_device("sim", queues=2)
>>> b = dev.allocator.allocate_buffer(64)
>>> s, t = dev.create_semaphore(), dev.create_semaphore()
>>> dev.queue_fill([], [(s, 1)], b, 0, 64, 7, 1, queue_affinity=1)
>>> dev.queue_copy([], [(t, 1)], b, 0, b, 32, 16, queue_affinity=2)   # forgot to wait for s >= 1
>>> t.wait(1)
>>> [f.message for f in check_trace(dev.trace).findings]   # doctest: +NORMALIZE_WHITESPACE
['copy 0:1.0 reads buffer b0[0:16) written by fill 0:0.0 on queue 0 with no semaphore or barrier
  ordering them (RAW)',
 'copy 0:1.0 writes buffer b0[32:48) written by fill 0:0.0 on queue 0 with no semaphore or barrier
  ordering them (WAW)']
>>> dev.close()
"""

from __future__ import annotations

from bisect import bisect_right

from ..findings import Finding, cmd_id, span
from ..model import READ_SCOPE_OF, WRITE_SCOPE_OF, access_stages, scope_names, stage_names, unseen

RULES = {
    "hazard.raw": "a command (or the host, mapping) reads bytes another command or the host wrote, with "
                  "nothing ordering them",
    "hazard.war": "a command (or the host) writes bytes another command or the host read, with nothing "
                  "ordering them",
    "hazard.waw": "two commands (or a command and the host) write the same bytes with nothing ordering them",
}

_VERB = {"raw": "reads", "war": "writes", "waw": "writes"}
_PRIOR = {"raw": "written", "war": "read", "waw": "written"}


class _Access:
    """A command's access (``index`` its index in the op), or a host access (``index`` None; ``op``
    the host call it was made in, or ``"host:T"`` for host thread T)."""

    __slots__ = ("op", "index", "kind", "node", "segment", "queue", "enq")

    def __init__(self, op, index, kind, node, segment, queue, enq):
        self.op, self.index, self.kind, self.node, self.segment, self.queue, self.enq = \
            op, index, kind, node, segment, queue, enq


class HazardChecker:
    """Fed every command in trace order (:meth:`command`); :meth:`findings` at the end."""

    def __init__(self, model, hb):
        self.model, self.hb = model, hb
        self.shadow: dict[str, tuple[list, list]] = {}   # buf -> (starts, [[lo, hi, write, reads]])
        self.found: dict[tuple, list] = {}

    def command(self, op_id: str, index: int, kind: str, access) -> None:
        op = self.model.ops.get(op_id)
        if op is None or not access:
            return
        acc = _Access(op.id, index, kind, self.hb.node_of_op[op.id], op.segment(index), op.queue, op.enq)
        for buf, offset, length, mode in access:
            if length > 0:
                self._access(acc, buf, offset, offset + length, mode)

    def host_access(self, thread, op_id, buf: str, offset: int, length: int, mode: str, idx: int) -> None:
        """A host access (``map_read``, ``map_write``, …) by host thread ``thread``, or from inside host
        call ``op_id``'s function (then ordered as that op)."""
        kind = "map_read" if mode == "r" else "map_write"
        if op_id is not None:
            op = self.model.ops.get(op_id)
            if op is None:
                return
            acc = _Access(op.id, None, kind, self.hb.node_of_op[op.id], 0, op.queue, op.enq)
        else:
            node = self.hb.node_of_host.get(idx)
            if node is None:
                return
            acc = _Access(f"host:{thread}", None, kind, node, 0, None, idx)
        if length > 0:
            self._access(acc, buf, offset, offset + length, mode)

    # -- shadow memory ----------------------------------------------------------------------------

    def _conflict(self, prior: _Access, cur: _Access, prior_writes: bool, writes: bool) -> str | None:
        """None when ``prior``'s access (a write: ``prior_writes``) is ordered before ``cur``'s
        (``writes``); else the scope of the missing order."""
        if prior.op == cur.op:
            # one command; commands on two sides of a barrier (whose stages cover them); a host
            # thread's (or host call's) own accesses, in program order
            if prior.index == cur.index or prior.index is None:
                return None
            if prior.segment != cur.segment:
                scopes = self.model.scopes.get(cur.op)
                if scopes is None:
                    return None
                a = (prior.index, access_stages(prior.kind, prior_writes))
                b = (cur.index, access_stages(cur.kind, writes))
                a, b = (a, b) if a[0] < b[0] else (b, a)
                if self.model.ops[cur.op].barriers_order(scopes, a[0], a[1], b[0], b[1]):
                    return None
            return "command_buffer"
        if self.hb.before(prior.node, cur.node) or self.hb.before(cur.node, prior.node):
            return None
        return "host" if prior.index is None or cur.index is None else "queue"

    def _access(self, cur: _Access, buf: str, lo: int, hi: int, mode: str) -> None:
        starts, ivs = self.shadow.setdefault(buf, ([], []))
        first, last = self._split(starts, ivs, lo, hi)
        writes = mode != "r"
        for iv in ivs[first:last]:
            w, reads = iv[2], iv[3]
            if w is not None:
                kind = "raw" if mode != "w" else "waw"
                scope = self._conflict(w, cur, True, writes)
                if scope:
                    self._report(kind, w, cur, buf, iv[0], iv[1], scope)
                elif w.op == cur.op and w.op in self.model.memory:
                    for side, lo_, hi_ in self._unseen(w, cur, writes, buf, iv[0], iv[1]):
                        self._report(kind, w, cur, buf, lo_, hi_, "memory", side)
            if writes:
                for r in reads.values():
                    scope = self._conflict(r, cur, False, True)
                    if scope:
                        self._report("war", r, cur, buf, iv[0], iv[1], scope)
        if writes:
            # one interval now: everything in [lo, hi) was last written by ``cur``
            ivs[first:last] = [[lo, hi, cur, {}]]
            starts[first:last] = [lo]
        else:
            lane = self.hb.lane[cur.node]
            for iv in ivs[first:last]:
                iv[3][lane] = cur   # an earlier read on the same lane happens before this one

    def _unseen(self, w: _Access, cur: _Access, write: bool, buf: str, lo: int, hi: int) -> list:
        """Where the barriers that order command ``w`` (a write) before ``cur`` in one command buffer
        do not make the write visible to ``cur``'s access (HAL_SEMANTICS CB9 read as Vulkan reads
        memory dependencies; a barrier with no memory barriers makes visible what its stages hold):
        ``[(side, start, end)]`` as :func:`~..model.unseen` finds them."""
        if w.index is None or cur.index is None or w.index >= cur.index:
            return []
        need = WRITE_SCOPE_OF.get(cur.kind) if write else READ_SCOPE_OF.get(cur.kind)
        source = WRITE_SCOPE_OF.get(w.kind)
        if need is None or source is None:
            return []
        between = self.model.ops[cur.op].between(w.index, cur.index)
        return unseen(self.model.memory[cur.op], self.model.scopes.get(cur.op, {}), between,
                      (access_stages(w.kind, True), source), (access_stages(cur.kind, write), need, write),
                      buf, lo, hi)

    @staticmethod
    def _split(starts: list, ivs: list, lo: int, hi: int) -> tuple[int, int]:
        """Make ``[lo, hi)`` exactly covered by whole intervals (splitting and filling gaps);
        return their index range."""
        i = bisect_right(starts, lo) - 1
        if i >= 0 and ivs[i][1] > lo:
            if ivs[i][0] < lo:
                iv = ivs[i]
                ivs.insert(i + 1, [lo, iv[1], iv[2], dict(iv[3])])
                starts.insert(i + 1, lo)
                iv[1] = lo
                i += 1
        else:
            i += 1
        first, pos = i, lo
        while pos < hi:
            if i < len(ivs) and ivs[i][0] <= pos:
                iv = ivs[i]
                if iv[1] > hi:
                    ivs.insert(i + 1, [hi, iv[1], iv[2], dict(iv[3])])
                    starts.insert(i + 1, hi)
                    iv[1] = hi
                pos = iv[1]
            else:
                end = min(ivs[i][0], hi) if i < len(ivs) else hi
                ivs.insert(i, [pos, end, None, {}])
                starts.insert(i, pos)
                pos = end
            i += 1
        return first, i

    # -- findings ---------------------------------------------------------------------------------

    def _report(self, kind, prior, cur, buf, lo, hi, scope, side=None) -> None:
        if scope != "command_buffer" and cur.enq < prior.enq:
            # name racing ops in program (submission) order, not in the order this run happened
            # to execute them: a consumer that ran before its producer still reads after it (RAW)
            prior, cur = cur, prior
            kind = {"raw": "war", "war": "raw"}.get(kind, kind)
        key = (kind, prior.op, prior.index, cur.op, cur.index, buf)
        entry = self.found.get(key)
        if entry is None:   # (with the bytes of the side first found, piece by piece: the message names them)
            self.found[key] = [kind, prior, cur, buf, lo, hi, scope, side, [(lo, hi)]]
        else:
            entry[4], entry[5] = min(entry[4], lo), max(entry[5], hi)
            if side == entry[7]:
                spans = entry[8]
                if spans[-1][1] == lo:
                    spans[-1] = (spans[-1][0], hi)
                else:
                    spans.append((lo, hi))

    def findings(self) -> list[Finding]:
        out = []
        for kind, prior, cur, buf, lo, hi, scope, side, spans in self.found.values():
            a, b = _name(prior), _name(cur)
            if scope == "command_buffer":
                why = self._within(kind, prior, cur)
            elif scope == "memory":
                why = self._invisible(kind, prior, cur, side, buf, spans)
            elif scope == "host":
                why = "with no semaphore wait ordering them"
            else:
                why = f"on queue {prior.queue} with no semaphore or barrier ordering them"
            msg = (f"{cur.kind} {b} {_VERB[kind]} buffer {buf}{span(lo, hi)} {_PRIOR[kind]} by "
                   f"{prior.kind} {a} {why} ({kind.upper()})")
            a, b = _id(prior), _id(cur)
            out.append(Finding(f"hazard.{kind}", "error", [a, b], msg,
                               {"buffer": buf, "range": [lo, hi], "scope": scope}))
        return out

    def _within(self, kind: str, prior: _Access, cur: _Access) -> str:
        """Why two commands of one command buffer are not ordered: no barrier, or barriers whose
        stages do not hold their accesses (``kind``: raw, war or waw says which ones write)."""
        first = (prior, access_stages(prior.kind, kind != "war"))
        last = (cur, access_stages(cur.kind, kind != "raw"))
        (a, a_stages), (b, b_stages) = (first, last) if prior.index < cur.index else (last, first)
        op = self.model.ops[cur.op]
        between = op.between(a.index, b.index)
        if not between:
            return "in the same command buffer with no execution barrier between them"
        stages = self.model.scopes.get(op.id, {})
        scopes = ", ".join(f"{cmd_id(op.id, i)} {stage_names(stages[i][2])} -> {stage_names(stages[i][3])}"
                           if i in stages else f"{cmd_id(op.id, i)}" for i in between)
        return (f"in the same command buffer: the execution barrier{'s' if len(between) > 1 else ''} between "
                f"them ({scopes}) do{'es' if len(between) == 1 else ''} not order {a.kind} "
                f"({stage_names(a_stages)}) work before {b.kind} ({stage_names(b_stages)}) work")

    def _invisible(self, kind: str, w: _Access, cur: _Access, side: str, buf: str, spans) -> str:
        """Why a write is not visible to a later command across barriers that order them: the
        barriers' memory barriers, and what none of them holds (``side``, as :meth:`_unseen` found):
        the write in a source scope, the access in a target scope, or the bytes."""
        op = self.model.ops[cur.op]
        between = op.between(w.index, cur.index)
        memory = self.model.memory[cur.op]
        write = kind == "waw"
        bars = "; ".join(f"{cmd_id(op.id, b)} " + (", ".join(_entry(e) for e in memory[b][4]) if b in memory
                                                   else "no memory barriers") for b in between)
        if side == "bytes":
            why = f"no buffer barrier holds {', '.join(buf + span(lo, hi) for lo, hi in spans)}"
        else:
            if side.startswith("source"):
                cmd, missing, what = w, WRITE_SCOPE_OF[w.kind], f"{w.kind} write"
            else:
                missing = WRITE_SCOPE_OF[cur.kind] if write else READ_SCOPE_OF[cur.kind]
                cmd, what = cur, f"{cur.kind} {'write' if write else 'read'}"
            where, _, stages = side.partition(" ")
            why = f"no {where} scope holds the {what} ({scope_names(missing)})"
            if stages:   # the scope is there, in a barrier whose stages do not hold the command's access
                held = access_stages(cmd.kind, where == "source" or write)
                why += f" in a barrier whose {where} stages hold {cmd.kind} ({stage_names(held)})"
        return (f"in the same command buffer: the execution barrier{'s' if len(between) > 1 else ''} between "
                f"them order{'' if len(between) > 1 else 's'} them but {'their' if len(between) > 1 else 'its'} "
                f"memory barriers ({bars}) do not make the write visible: {why}")


def _entry(entry) -> str:
    src, dst, buf, lo, hi = entry
    where = "" if buf is None else f" on {buf}{span(lo, hi)}"
    return f"{scope_names(src)} -> {scope_names(dst)}{where}"


def _id(acc: _Access) -> str:
    """The finding's id for an access: the command's, or the host thread's / host call's."""
    return acc.op if acc.index is None else cmd_id(acc.op, acc.index)


def _name(acc: _Access) -> str:
    if acc.index is not None:
        return cmd_id(acc.op, acc.index)
    if acc.op.startswith("host:"):
        return f"by host thread {acc.op[5:]}"
    return f"in host call {acc.op}"
