"""Naming a host program on the command line: ``file.py[:function]`` (``halsim run``, ``check``,
``difftest``, sweep specs). A leaf module, so the checks and campaigns need not import the CLI."""

from __future__ import annotations

import os


def split_program(spec: str, base: str | None = None) -> tuple[str, str | None]:
    """``file.py[:function]`` → ``(file, function or None)``. A path may hold colons itself (a folder
    ``run:1``), so the split is at the last colon, and only when what follows is a Python identifier
    (or nothing) and what precedes ends in ``.py`` or is a file (relative to ``base``); otherwise the
    whole of ``spec`` is the path.

    >>> split_program("prog.py:main"), split_program("run:1/prog.py:step"), split_program("run:1/prog.py")
    (('prog.py', 'main'), ('run:1/prog.py', 'step'), ('run:1/prog.py', None))
    """
    head, sep, tail = spec.rpartition(":")
    if sep and (tail.isidentifier() or not tail) and (
            head.endswith(".py") or os.path.isfile(os.path.join(base or "", head))):
        return head, tail or None
    return spec, None
