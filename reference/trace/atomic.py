"""Writing files atomically: every file the project writes (traces, exports, plots, cost models).

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "x.txt")
>>> atomic_write(path, lambda f: f.write("hello\\n"), mode="w")
>>> open(path).read()
'hello\\n'

An error names the path asked for, never the temporary file; :func:`output_problem` and
:func:`same_file_problem` let a command refuse a bad output path before doing its work:

>>> try:
...     atomic_write(os.path.dirname(path), lambda f: f.write("x"), mode="w")
... except OSError as e:
...     e.filename == os.path.dirname(path)
True
>>> output_problem(os.path.dirname(path), "--trace") is not None
True
>>> same_file_problem({"--chrome": path}, [path]) == f"--chrome {path!r} is the input file {path!r}: refusing to overwrite it"
True
"""

from __future__ import annotations

import errno
import os
import tempfile
from typing import Callable, Iterable


def atomic_write(path: str | os.PathLike, write: Callable, mode: str = "wb", encoding: str | None = None) -> None:
    """Call ``write(file)`` on a temporary file next to ``path``, flush and fsync it, then rename it over
    ``path``: a crash leaves the previous file (or none), never a truncated one. The file gets the
    permissions of an ordinary new file (``mkstemp``'s would be 0600). An ``OSError`` of the file
    system (a missing or read-only folder, ``path`` a folder, a full disk while writing) names
    ``path``, not the temporary file.
    A symbolic link is written through: its target gets the new contents and the link stays."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    target = os.path.realpath(path)  # (renaming over the link itself would replace it by a plain file)
    directory = os.path.dirname(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=os.path.splitext(path)[1], dir=directory)
    except OSError as e:
        raise type(e)(e.errno, e.strerror, path) from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        if "b" not in mode and encoding is None:
            encoding = "utf-8"
        try:
            with os.fdopen(fd, mode, encoding=encoding) as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            if e.filename is not None or e.errno is None:
                raise
            raise type(e)(e.errno, e.strerror, path) from None  # (a full disk: name the file asked for)
        try:
            os.replace(tmp, target)
        except OSError as e:
            raise type(e)(e.errno, e.strerror, path) from None
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def output_problem(path: str | os.PathLike, flag: str, create_dirs: bool = False) -> str | None:
    """What is wrong with writing a file at ``path`` (None: nothing visible before trying): it is a
    folder, its folder is missing (``create_dirs``: the command creates it — then the nearest
    existing folder above it must be writable) or not a folder, or the folder is not writable.
    Commands call this before their work, so a long run does not end in a failed write."""
    path = os.fspath(path)
    if not path:
        return f"{flag}: an empty file name"
    if os.path.isdir(path):
        return f"{flag} {path!r}: is a directory"
    directory = os.path.dirname(os.path.realpath(path))  # (a link is written through, to its target)
    if create_dirs:
        while not os.path.exists(directory) and os.path.dirname(directory) != directory:
            directory = os.path.dirname(directory)
    if not os.path.exists(directory):
        return f"{flag} {path!r}: no such directory {directory!r}"
    if not os.path.isdir(directory):
        return f"{flag} {path!r}: {directory!r} is not a directory"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"{flag} {path!r}: the directory {directory!r} is not writable"
    return None


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): compare where they would be
        return os.path.realpath(a) == os.path.realpath(b)


def same_file_problem(outputs: dict, inputs: Iterable) -> str | None:
    """``"FLAG 'out' is the input file 'in': refusing to overwrite it"`` when an output path
    (``{flag: path or None}``) is the same file as an input (or as another output); else None."""
    inputs = [os.fspath(p) for p in inputs if p]
    seen: list[tuple[str, str]] = []
    for flag, out in outputs.items():
        if not out:
            continue
        out = os.fspath(out)
        for src in inputs:
            if _same(out, src):
                return f"{flag} {out!r} is the input file {src!r}: refusing to overwrite it"
        for other_flag, other in seen:
            if _same(out, other):
                return f"{flag} {out!r} is also {other_flag}: give each output its own file"
        seen.append((flag, out))
    return None
