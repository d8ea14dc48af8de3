"""Trace tools: dependency edges, Perfetto/Chrome export, statistics, plots and diffs of traces
(``docs/trace-tools.md``)."""
