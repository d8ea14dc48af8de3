"""Reusable command buffers as ``CUgraph``\\ s (a mixin of :class:`~.adapter.CudaAdapter`): the first
execution of a reusable command buffer with a given resolved binding table is captured
(``cuStreamBeginCapture`` … ``cuStreamEndCapture``, ``cuGraphInstantiate``), every later one with the
same device addresses, ranges, patterns and constants is one ``cuGraphLaunch``. ``update`` bytes and
the scratch of an overlapping copy are staged in device memory the graph owns. A command buffer keeps
its :data:`GRAPHS_PER_COMMAND_BUFFER` most recently used graphs; they go when it is garbage.

>>> from types import SimpleNamespace
>>> b = SimpleNamespace()
>>> overlapping(Range(b, 0, 8), Range(b, 4, 8)), overlapping(Range(b, 0, 4), Range(b, 4, 4))
(True, False)
"""

from __future__ import annotations

import weakref

import numpy as np

from reference.hal import CommandBuffer, CommandBufferMode, Range

# Graphs kept per reusable command buffer, one per resolved binding table (device addresses), least
# recently used first out: a command buffer run with fresh buffers each time must not accumulate them.
GRAPHS_PER_COMMAND_BUFFER = 4


def overlapping(a: Range, b: Range) -> bool:
    """Whether two ranges share bytes of one buffer (two binding-table slots aliasing it can)."""
    return a.buffer is b.buffer and a.offset < b.offset + b.length and b.offset < a.offset + a.length


def _address(data) -> int:
    """Host address of a bytes-like object (bytearray storage or captured update bytes)."""
    return np.frombuffer(data, dtype=np.uint8).ctypes.data


class _Graph:
    """An instantiated ``CUgraph`` of a reusable command buffer and what it owns."""

    __slots__ = ("exec", "graph", "indices", "staged", "uploads")

    def __init__(self, exe, graph, indices: tuple, staged: list, uploads: list = ()):
        self.exec = exe
        self.graph = graph
        self.indices = indices  # the commands it runs on the device
        self.staged = staged    # device copies of update bytes
        self.uploads = uploads  # their host bytes (copied on the dispatch stream before the capture)


class GraphCache:
    """The graph half of :class:`~.adapter.CudaAdapter`, which owns the state it uses (``cu``,
    ``use_graphs``, ``_lock``, ``_graphs``, ``_graph_keys``, ``_dead_graphs``) and provides
    ``_check``, ``_device_ptr`` and ``_enqueue``."""

    def _signature(self, commands) -> tuple:
        """What a captured graph bakes in: per command its kind, device addresses and ranges, and the
        pattern, bytes or kernel launch."""
        out = []
        for cmd in commands:
            ranges = tuple((self._device_ptr(r, "command operand"), r.offset, r.length) if r.length else (0, 0, 0)
                           for r, _ in cmd.accesses)
            if cmd.kind in ("fill", "update"):
                args = bytes(cmd.args)
            elif cmd.kind == "dispatch":
                spec, workgroups, constants, bindings = cmd.args
                args = (spec.name, tuple(workgroups), tuple(constants),
                        tuple((self._device_ptr(b, "binding"), b.offset, b.length) for b in bindings))
            else:
                args = None
            out.append((cmd.kind, ranges, args))
        return tuple(out)

    def _graph(self, s, op):
        """The instantiated graph for ``op``'s reusable command buffer (captured on first use), or None
        when the op is replayed as stream commands."""
        if not self.use_graphs or op.kind != "execute" or not op.commands:
            return None
        cb = next((r for r in op.resources if isinstance(r, CommandBuffer)), None)
        if cb is None or cb.mode & CommandBufferMode.ONE_SHOT:
            return None
        if any(c.kind == "dispatch" and isinstance(c.args[1], Range) for c in op.commands):
            return None  # indirect dispatch: the counts are read on the host when reached
        key = (id(cb), self._signature(op.commands))
        with self._lock:
            graph = self._graphs.get(key)
            if graph is not None:  # most recently used last
                keys = self._graph_keys[id(cb)]
                keys.remove(key)
                keys.append(key)
        if graph is not None:
            return graph
        graph = self._capture(s, op.commands)
        if graph is None:
            return None
        evicted = []
        with self._lock:
            self._graphs[key] = graph
            keys = self._graph_keys.get(id(cb))
            if keys is None:
                keys = self._graph_keys[id(cb)] = []
                weakref.finalize(cb, self._command_buffer_died, id(cb))
            keys.append(key)
            while len(keys) > GRAPHS_PER_COMMAND_BUFFER:  # the least recently used binding table's graph
                evicted.append(self._graphs.pop(keys.pop(0)))
        for old in evicted:  # (on the worker, between submits: no graph is in flight)
            self._destroy_graph(old)
        return graph

    def _capture(self, s, commands):
        cu = self.cu
        staged, uploads, graph = {}, [], None
        try:
            for cmd in commands:  # device memory the graph owns (before capturing): update bytes, copy scratch
                if cmd.kind == "update" and len(cmd.args):
                    data = bytes(cmd.args)
                    ptr = self._check(cu.cuMemAlloc(len(data)), "cuMemAlloc")
                    staged[cmd.index] = ptr
                    # On the dispatch stream, ahead of the capture, so the graph's launch is ordered after
                    # it: a synchronous cuMemcpyHtoD from pageable memory returns before "the DMA to final
                    # destination" completed, on the legacy stream, which a CU_STREAM_NON_BLOCKING stream
                    # does not synchronize with. (The bytes stay with the graph: a pending copy's source.)
                    uploads.append(data)
                    self._check(cu.cuMemcpyHtoDAsync(ptr, _address(data), len(data), s), "cuMemcpyHtoDAsync")
                elif cmd.kind == "copy" and cmd.accesses[0][0].length and \
                        overlapping(cmd.accesses[0][0], cmd.accesses[1][0]):
                    staged[cmd.index] = self._check(cu.cuMemAlloc(cmd.accesses[0][0].length), "cuMemAlloc")
            mode = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
            self._check(cu.cuStreamBeginCapture(s, mode), "cuStreamBeginCapture")
            indices = []
            try:
                for cmd in commands:
                    if self._enqueue(s, cmd, [], staged):
                        indices.append(cmd.index)
            except BaseException:  # end the capture; the command's error stands (not the capture's)
                result = cu.cuStreamEndCapture(s)
                if result[0] == cu.CUresult.CUDA_SUCCESS and result[1] is not None and int(result[1]):
                    graph = result[1]
                raise
            graph = self._check(cu.cuStreamEndCapture(s), "cuStreamEndCapture")
            if indices:
                exe = self._check(cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
                return _Graph(exe, graph, tuple(indices), list(staged.values()), uploads)
        except BaseException:
            self._drop_capture(s, graph, staged)
            raise
        self._drop_capture(s, graph, staged)  # nothing for the device: no graph
        return None

    def _drop_capture(self, s, graph, staged: dict) -> None:
        """A capture that makes no graph (failed, or nothing for the device): its graph and memory go
        (after the stream: the staged copies may be pending on it)."""
        cu = self.cu
        if graph is not None:
            cu.cuGraphDestroy(graph)
        if staged:
            cu.cuStreamSynchronize(s)
            for ptr in staged.values():
                cu.cuMemFree(ptr)

    def _command_buffer_died(self, cb_id: int) -> None:
        with self._lock:  # any thread: queue the graphs, the worker destroys them
            for key in self._graph_keys.pop(cb_id, ()):
                graph = self._graphs.pop(key, None)
                if graph is not None:
                    self._dead_graphs.append(graph)

    def _destroy_graph(self, graph: "_Graph") -> None:
        self.cu.cuGraphExecDestroy(graph.exec)
        self.cu.cuGraphDestroy(graph.graph)
        for ptr in graph.staged:
            self.cu.cuMemFree(ptr)
