"""Timeline plots of traces (matplotlib, Agg): PNG or SVG by the output's extension.

One row per track lane (``layout.py``): operations are full-height bars labelled with their op id,
their commands thinner bars inside; arrows go from each signal to the waits it satisfied; findings
outline their operations in red and mark their time; semaphore values are step plots beneath.
When more than :data:`DENSE` spans fall in the window, each row is drawn as busy shading per pixel
column instead (the fraction of the column's time the row's outermost spans cover), without arrows.
Times are shown relative to the trace's first event.

>>> import os, tempfile
>>> from reference import hal
>>> with hal.create_device("sim", queues=1) as dev:
...     buf = dev.allocator.allocate_buffer(64)
...     s = dev.create_semaphore()
...     dev.queue_fill([], [(s, 1)], buf, 0, 64, 7, 1)
...     s.wait(1)
>>> plot_trace(dev.trace, os.path.join(tempfile.mkdtemp(), "t.png"))
{'rows': 2, 'mode': 'bars', 'spans': 3, 'arrows': 1, 'semaphores': 1}
"""

from __future__ import annotations

import os

# Figures are built with matplotlib's object API, not pyplot: no global backend switch (a notebook's
# inline backend stays as it is) and no figure registry to leak into.
from matplotlib.figure import Figure  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402

from .flows import handoff_flows, signal_flows  # noqa: E402
from .layout import Lane, layout, nest_events  # noqa: E402
from .model import TraceIndex  # noqa: E402
from reference.trace.atomic import atomic_write  # noqa: E402

from .perfetto_export import failures  # noqa: E402

DENSE = 2000  # spans in the window above which rows are shaded per pixel column
MAX_ARROWS = 400
MAX_SEMAPHORES = 8
BINS = 1600

_KIND_COLORS = {
    "execute": "#4c72b0", "dispatch": "#4c72b0", "fill": "#55a868", "update": "#c44e52", "copy": "#dd8452",
    "barrier": "#8c8c8c", "alloca": "#937860", "dealloca": "#937860", "host_call": "#8172b3",
    "encoder": "#b3b3b3", "host": "#da8bc3", "signal_event": "#64b5cd", "reset_event": "#64b5cd",
    "wait_events": "#64b5cd",
}


def _color(name: str) -> str:
    return _KIND_COLORS.get(name.split(" ", 1)[0], "#999999")


def _unit(span: float) -> tuple[str, float]:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if span >= 5 * scale:
            return unit, scale
    return "ns", 1.0


def _select(ix: TraceIndex, tracks, t_from, t_to) -> tuple[list[Lane], int, int]:
    lanes = layout(ix)
    if tracks:
        lanes = [ln for ln in lanes if any(s in ln.name for s in tracks)]
    lo = (ix.t_min or 0) if t_from is None else t_from
    hi = (ix.t_max or 0) if t_to is None else t_to
    if hi <= lo:
        hi = lo + 1
    if t_from is not None or t_to is not None:
        for ln in lanes:
            ln.items = [i for i in ln.items if i.end >= lo and i.start <= hi]
    return lanes, lo, hi


def _draw_rows(ax, ix: TraceIndex, lanes: list[Lane], lo: int, hi: int, t0: int, scale: float,
               findings=None, arrows: bool = True) -> dict:
    """Draw ``lanes`` as rows of ``ax`` (row 0 at the top); returns what was drawn."""
    n = len(lanes)
    spans = sum(len(ln.items) for ln in lanes)
    dense = spans > DENSE
    # findings name ops ("0:7") or commands ("0:7.2"): outline the op either way
    flagged = {str(op).split(".", 1)[0] for fd in findings or () for op in (fd.get("ops") or ())}
    where: dict = {}  # item key → (row, start, end) for arrows
    x = lambda t: (t - t0) / scale  # noqa: E731
    if dense:
        edges = np.linspace(lo, hi, BINS + 1)
        img = np.zeros((n, BINS))
        for row, ln in enumerate(lanes):
            depth0 = [(i.start, i.end) for t, w, i in _outer(ln)]
            if not depth0:
                continue
            s = np.clip(np.array([d[0] for d in depth0], dtype=np.float64), lo, hi)
            e = np.clip(np.array([d[1] for d in depth0], dtype=np.float64), lo, hi)
            # busy time before each bin edge: whole spans ended before it plus the one it cuts
            prefix = np.concatenate([[0.0], np.cumsum(e - s)])
            k = np.searchsorted(e, edges, side="right")
            busy = prefix[k] + np.clip(edges - s[np.minimum(k, len(s) - 1)], 0, None) * (k < len(s))
            busy = np.minimum(busy, prefix[-1])
            img[row] = np.diff(busy) / np.diff(edges)
        ax.imshow(img, aspect="auto", cmap="Blues", vmin=0, vmax=1, interpolation="nearest",
                  extent=(x(lo), x(hi), n - 0.5, -0.5))
    else:
        texts = 0
        seen_kinds = set()
        for row, ln in enumerate(lanes):
            depth = 0
            for t, what, item in nest_events(ln.items):
                if what == "E":
                    depth -= 1
                    continue
                if what == "I":
                    ax.plot([x(item.start)], [row], marker="v", color="#da8bc3", markersize=6)
                    where[(item.cat, item.ref)] = (row, item.start, item.end)
                    continue
                h = 0.8 if depth == 0 else max(0.2, 0.8 - 0.25 * depth)
                name = item.name
                if item.cat == "op":
                    op = ix.ops[item.ref]
                    color = _color(op.get("kind", ""))
                    failed = op.get("status", 0) not in (0, None)
                    edge = "red" if failed or op["op"] in flagged else "black"
                    lw = 2.0 if edge == "red" else 0.4
                elif item.cat == "host_wait":
                    color, edge, lw = _color("host"), "black", 0.4
                else:  # a command inside its op: white edges separate it from its neighbours
                    color, edge, lw = _color(name), "white", 0.6
                seen_kinds.add(name.split(" ", 1)[0] if item.cat != "op" else ix.ops[item.ref].get("kind", ""))
                ax.add_patch(Rectangle((x(item.start), row - h / 2), max(x(item.end) - x(item.start), 0), h,
                                       facecolor=color, edgecolor=edge, linewidth=lw, alpha=0.9 if depth == 0 else 1))
                # a label only where it fits: ~190 characters of 7-point text across the 14-inch axis
                fits = 190 * (item.end - item.start) / (hi - lo)
                label = ix.ops[item.ref]["op"] if item.cat == "op" else ("wait" if item.cat == "host_wait" else name)
                if len(label) > fits:
                    label = label.rsplit(" ", 1)[-1]
                if depth <= 1 and len(label) <= fits and texts < 200:
                    ax.text(x((item.start + item.end) / 2), row - 0.25 if depth == 0 else row + 0.12, label, ha="center", va="center",
                            fontsize=7, clip_on=True)
                    texts += 1
                where[(item.cat, item.ref)] = (row, item.start, item.end)
                depth += 1
        handles = [Rectangle((0, 0), 1, 1, facecolor=_color(k), label=k)
                   for k in sorted(seen_kinds) if k and k != "host"]
        if handles:
            ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1), fontsize=7, frameon=False)
    drawn = 0
    if arrows and not dense:
        for src, dst, _sem, _v in signal_flows(ix) + handoff_flows(ix):
            a, b = where.get(src), where.get(dst)
            if a is None or b is None or drawn >= MAX_ARROWS:
                continue
            # to the wait's start, or to the signal's time where the wait began earlier (host waits)
            ax.add_patch(FancyArrowPatch((x(a[2]), a[0]), (x(max(b[1], a[2])), b[0]), arrowstyle="-|>", mutation_scale=8,
                                         color="#444444", linewidth=0.7, alpha=0.7,
                                         connectionstyle="arc3,rad=0.15" if a[0] == b[0] else "arc3,rad=0.0"))
            drawn += 1
    for t, label, _ in failures(ix):
        if lo <= t <= hi:
            ax.axvline(x(t), color="red", linewidth=0.8, linestyle=":")
    ax.set_yticks(range(n))
    ax.set_yticklabels([ln.name for ln in lanes], fontsize=8)
    ax.set_ylim(max(n, 1) - 0.5, -0.5)  # (no rows: one empty row, not identical limits)
    ax.set_xlim(x(lo), max(x(hi), x(lo) + 1e-9))
    ax.grid(axis="x", linewidth=0.3, alpha=0.5)
    return {"rows": n, "mode": "density" if dense else "bars", "spans": spans, "arrows": drawn}


def _outer(lane: Lane):
    """The outermost (depth 0) spans of a lane, as nest_events triples."""
    depth = 0
    for t, what, item in nest_events(lane.items):
        if what == "B":
            if depth == 0:
                yield t, what, item
            depth += 1
        elif what == "E":
            depth -= 1


def _semaphores(ix: TraceIndex) -> list[str]:
    sems = sorted(set(ix.semaphores) | set(ix.signals), key=lambda s: (-len(ix.signals.get(s, ())), len(s), s))
    return sorted(sems[:MAX_SEMAPHORES], key=lambda s: (len(s), s))


def save_figure(fig, path, **savefig) -> None:
    """Write ``fig`` atomically as PNG, or SVG by extension; the same figure gives the same bytes
    (an SVG has no date stamp and its ids come from a fixed salt, not a random one)."""
    import matplotlib

    fmt = "svg" if os.fspath(path).lower().endswith(".svg") else "png"
    metadata = {"Date": None} if fmt == "svg" else None
    with matplotlib.rc_context({"svg.hashsalt": "halsim"}):
        atomic_write(path, lambda f: fig.savefig(f, format=fmt, metadata=metadata, **savefig))


def _save(fig, path) -> None:
    save_figure(fig, path, dpi=110, bbox_inches="tight")


def _phase(progress, label: str) -> None:
    if progress is not None:
        progress.phase(label)


def plot_trace(trace, path, t_from: int | None = None, t_to: int | None = None, tracks=None,
               findings: list[dict] | None = None, progress=None) -> dict:
    """Plot ``trace`` into ``path`` (``.png`` or ``.svg``); returns what was drawn
    (``rows``, ``mode``: ``bars`` or ``density``, ``spans``, ``arrows``, ``semaphores``).
    ``progress``: a :class:`halsim.campaigns.executor.Progress` shown the phases (``laying out
    tracks``, ``drawing``, ``saving PATH``)."""
    ix = TraceIndex.of(trace, progress)
    _phase(progress, "laying out tracks")
    lanes, lo, hi = _select(ix, tracks, t_from, t_to)
    sems = _semaphores(ix)
    t0 = ix.t_min or 0
    unit, scale = _unit(hi - lo)
    rows = max(len(lanes), 1)
    heights = [max(2.0, 0.38 * rows)] + [0.7] * len(sems)
    fig = Figure(figsize=(14, sum(heights) + 1.2))
    axes = fig.subplots(1 + len(sems), 1, sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights})
    axes = axes[:, 0]
    _phase(progress, "drawing")
    info = _draw_rows(axes[0], ix, lanes, lo, hi, t0, scale, findings)
    title = f"{ix.header.get('device', '?')}: {len(ix.ops)} ops, {ix.cmd_count} commands"
    if findings:
        title += f"; {len(findings)} findings (their ops outlined in red)"
    axes[0].set_title(title + ("  (busy shading per pixel column)" if info["mode"] == "density" else ""), fontsize=10)
    for fd in findings or ():
        t = fd.get("t")
        if isinstance(t, int) and lo <= t <= hi:
            axes[0].axvline((t - t0) / scale, color="red", linewidth=1.2)
    for ax, sem in zip(axes[1:], sems):
        pts = [(ix.sem_created.get(sem) or t0, ix.semaphores.get(sem, 0))]
        pts += [(t, v) for _s, t, v, _c in ix.signals.get(sem, ())]
        # only the window: the value at its start, the changes inside (so the y axis fits them)
        before = [p for p in pts if p[0] <= lo]
        pts = ([(lo, before[-1][1])] if before else []) + [p for p in pts if lo < p[0] <= hi]
        if not pts:
            pts = [(lo, ix.semaphores.get(sem, 0))]
        pts.append((hi, pts[-1][1]))
        ts = (np.array([p[0] for p in pts], dtype=np.float64) - t0) / scale
        ax.step(ts, [p[1] for p in pts], where="post", linewidth=1, color="#4c72b0")
        if sem in ix.fails:
            ax.axvline((ix.fails[sem][1] - t0) / scale, color="red", linewidth=1)
        ax.set_ylabel(sem, rotation=0, ha="right", va="center", fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="x", linewidth=0.3, alpha=0.5)
    axes[-1].set_xlabel(f"time ({unit}, from the trace's first event)")
    _phase(progress, f"saving {os.fspath(path)}")
    _save(fig, path)
    info["semaphores"] = len(sems)
    return info


def plot_diff(a, b, path, labels=("A", "B"), progress=None) -> dict:
    """Side-by-side (stacked) timelines of two traces, each from its own first queue operation, on the
    same time scale. ``progress``: as for :func:`plot_trace`."""
    ia, ib = TraceIndex.of(a, progress), TraceIndex.of(b, progress)
    _phase(progress, "laying out tracks")

    def first_enqueue(ix):  # the clocks differ (virtual vs monotonic): align at the first queue call
        return min((op["t"] for op in ix.ops), default=ix.t_min or 0)

    la, lo_a, hi_a = _select(ia, None, first_enqueue(ia), None)
    lb, lo_b, hi_b = _select(ib, None, first_enqueue(ib), None)
    span = max(hi_a - lo_a, hi_b - lo_b, 1)
    unit, scale = _unit(span)
    ra, rb = max(len(la), 1), max(len(lb), 1)
    fig = Figure(figsize=(14, 0.38 * (ra + rb) + 2.5))
    axa, axb = fig.subplots(2, 1, gridspec_kw={"height_ratios": [max(ra, 2), max(rb, 2)], "hspace": 0.35})
    info = {}
    _phase(progress, "drawing")
    for ax, ix, lanes, lo, label in ((axa, ia, la, lo_a, labels[0]), (axb, ib, lb, lo_b, labels[1])):
        info[label] = _draw_rows(ax, ix, lanes, lo, lo + span, lo, scale)
        ax.set_title(f"{label}: {ix.header.get('device', '?')}, makespan {ix.makespan() / scale:.3f} {unit}",
                     fontsize=10)
    axb.set_xlabel(f"time ({unit}, from each trace's first queue operation)")
    _phase(progress, f"saving {os.fspath(path)}")
    _save(fig, path)
    return info
