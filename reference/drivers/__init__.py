"""The reference CPU drivers: ``local-sync`` (inline) and ``local-task`` (asynchronous, threaded)."""
