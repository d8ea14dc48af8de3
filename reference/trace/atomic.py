"""Writing files atomically: every file the project writes (traces, exports, plots, cost models);
and what is wrong with a path given as an input or an output (:func:`input_problem`, :func:`output_problem`).

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
import stat
import tempfile
from typing import Callable, Iterable


#: What a reader says of a JSON/TOML value nested past Python's recursion limit (its decoder raises
#: RecursionError): bad input, one line, like any other decode error.
NESTED_TOO_DEEPLY = "nested too deeply (thousands of levels of lists or objects)"


def atomic_write(path: str | os.PathLike, write: Callable, mode: str = "wb", encoding: str | None = None) -> None:
    """Call ``write(file)`` on a temporary file next to ``path``, flush and fsync it, then rename it over
    ``path``: a crash leaves the previous file (or none), never a truncated one. The file gets the
    permissions of an ordinary new file (``mkstemp``'s would be 0600). An ``OSError`` of the file
    system (a missing or read-only folder, ``path`` a folder, a full disk while writing) names
    ``path``, not the temporary file.
    A symbolic link is written through: its target gets the new contents and the link stays.
    An existing target that is not a regular file (``/dev/null``, a FIFO, a terminal) is written in
    place, as any Unix tool does: renaming over it would replace the device or pipe by a plain file."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if _special_kind(path):
        _write_in_place(path, write, mode, encoding)
        return
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


def _special_kind(path: str) -> str | None:
    """What ``path`` is when it exists and is neither a regular file nor a folder ("a pipe", "a
    character device", …); None otherwise (a link is followed)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return {stat.S_IFIFO: "a pipe", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
            stat.S_IFSOCK: "a socket"}.get(stat.S_IFMT(mode), "not a regular file")


def _write_in_place(path: str, write: Callable, mode: str, encoding: str | None) -> None:
    """``write(file)`` on ``path`` itself, opened for writing (a FIFO: this waits for its reader)."""
    if "b" not in mode and encoding is None:
        encoding = "utf-8"
    try:
        with open(path, mode, encoding=encoding) as f:
            write(f)
            f.flush()
    except OSError as e:
        if e.filename is not None or e.errno is None:
            raise
        raise type(e)(e.errno, e.strerror, path) from None  # (a pipe whose reader left: name the path)


def input_problem(path: str | os.PathLike, regular: bool = True) -> str | None:
    """What is wrong with reading ``path`` (None: nothing visible before trying): ``"PATH: no such
    file"``, ``"PATH: is a directory"``, or — ``regular``: for a reader that opens the file more
    than once (a trace) — ``"PATH: not a regular file (a pipe): save it to a file first"``. A reader
    that reads its file once passes ``regular=False`` and reads a pipe as it comes."""
    path = os.fspath(path)
    if not path:
        return "an empty file name"
    if os.path.isdir(path):
        return f"{path}: is a directory"
    if not os.path.exists(path):
        return f"{path}: no such file"
    kind = _special_kind(path)
    if regular and kind:
        return f"{path}: not a regular file ({kind}): save it to a file first"
    return None


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
    if _special_kind(path):  # (written in place: its folder need not be writable)
        return None if os.access(path, os.W_OK) else f"{flag} {path!r}: not writable"
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
    (``{flag: path or None}``) is the same file as an input (or as another output); else None.
    A character device (``/dev/null``) may take several outputs: writing it destroys nothing."""
    inputs = [os.fspath(p) for p in inputs if p]
    seen: list[tuple[str, str]] = []
    for flag, out in outputs.items():
        if not out:
            continue
        out = os.fspath(out)
        if _special_kind(out) == "a character device":
            continue
        for src in inputs:
            if _same(out, src):
                return f"{flag} {out!r} is the input file {src!r}: refusing to overwrite it"
        for other_flag, other in seen:
            if _same(out, other):
                return f"{flag} {out!r} is also {other_flag}: give each output its own file"
        seen.append((flag, out))
    return None
