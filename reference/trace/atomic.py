"""Writing files atomically: every file the project writes (traces, exports, plots, cost models).

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "x.txt")
>>> atomic_write(path, lambda f: f.write("hello\\n"), mode="w")
>>> open(path).read()
'hello\\n'
"""

from __future__ import annotations

import os
import tempfile
from typing import Callable


def atomic_write(path: str | os.PathLike, write: Callable, mode: str = "wb", encoding: str | None = None) -> None:
    """Call ``write(file)`` on a temporary file next to ``path``, flush and fsync it, then rename it over
    ``path``: a crash leaves the previous file (or none), never a truncated one. The file gets the
    permissions of an ordinary new file (``mkstemp``'s would be 0600)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=os.path.splitext(path)[1], dir=directory)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        if "b" not in mode and encoding is None:
            encoding = "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
