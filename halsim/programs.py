"""Naming a host program on the command line: ``file.py[:function]`` (``halsim run``, ``check``,
``difftest``, sweep specs). A leaf module, so the checks and campaigns need not import the CLI."""

from __future__ import annotations

import contextlib
import os
import sys


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


class ProgramError(ValueError):
    """A host program that cannot run (bad input, not a bug in halsim). Its message names the file;
    the CLI and the sweep spec each put their own prefix before it."""


def load_function(source, file: str, func: str, own: dict | None = None):
    """``func`` of a fresh run of the program ``source`` (its bytes, or code from
    :func:`compile_program`) in a new module, run inside :func:`program_imports` (``own``: as there),
    so state at its top level starts over each time. :class:`ProgramError` when the module fails to
    load, calls ``sys.exit``, lacks ``func``, or ``func`` cannot run (:func:`function_problem`).

    >>> load_function(b"def main(dev): return dev + 1\\n", "p.py", "main")(1)
    2
    >>> try:
    ...     load_function(b"import sys; sys.exit(3)\\n", "p.py", "main")
    ... except ProgramError as e:
    ...     print(e)
    'p.py' failed to load: it called sys.exit(3) on import
    """
    import types

    code = source if isinstance(source, types.CodeType) else compile_program(source, file)
    module = types.ModuleType("_halsim_program")
    module.__file__ = file
    # In sys.modules while it runs, as an imported module is: @dataclass (with string annotations,
    # `from __future__ import annotations`) looks its module up there.
    previous = sys.modules.get(module.__name__)
    sys.modules[module.__name__] = module
    try:
        with program_imports(file, own):
            exec(code, module.__dict__)  # noqa: S102 - the user's own program
    except SystemExit as e:
        raise ProgramError(f"{file!r} failed to load: it called sys.exit({e.code!r}) on import") from None
    except Exception as e:  # noqa: BLE001 - any error in the user's file is bad input here
        raise ProgramError(f"{file!r} failed to load: {type(e).__name__}: {e}") from None
    finally:
        if previous is None:
            sys.modules.pop(module.__name__, None)
        else:
            sys.modules[module.__name__] = previous
    fn = getattr(module, func, None)
    if not callable(fn):
        raise ProgramError(f"{file!r} has no function {func!r}")
    problem = function_problem(fn, func)
    if problem:
        raise ProgramError(f"{file!r}: {problem}")
    return fn


def compile_program(source: bytes, file: str):
    """The code of a program's bytes, a PEP 263 coding line honoured (as ``python file.py`` does);
    :class:`ProgramError` for bytes that are not Python (a syntax error, bytes not in its encoding)."""
    try:
        return compile(source, file, "exec")
    except (SyntaxError, ValueError) as e:
        raise ProgramError(f"{file!r} failed to load: {type(e).__name__}: {e}") from None


def function_problem(fn, func: str) -> str | None:
    """Why halsim cannot run a program by calling ``fn`` (named ``func``) once with the device, or None:
    a function that cannot take one argument, or one whose call runs none of it (``async def``, a
    generator: the call only makes the coroutine or generator).

    >>> async def main(dev): ...
    >>> function_problem(main, "main").split(";")[0]
    'main is an async function'
    >>> function_problem(lambda a, b: None, "f")
    'f(a, b) must take one argument, the device (e.g. def f(dev): ...)'
    """
    import inspect

    kind = ("an async function" if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn)
            else "a generator function" if inspect.isgeneratorfunction(fn) else None)
    if kind:
        return (f"{func} is {kind}; halsim calls it once and does not {'await' if 'async' in kind else 'iterate'} "
                f"it: make it a plain function (def {func}(dev): ...)")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None  # (a builtin or the like: nothing to say beforehand)
    try:
        sig.bind(None)
    except TypeError:
        return f"{func}{sig} must take one argument, the device (e.g. def {func}(dev): ...)"
    return None


@contextlib.contextmanager
def program_imports(file: str, own: dict | None = None):
    """While a host program loads and runs: Python's rule for ``python file.py``, the file's folder
    first on ``sys.path``, so the program imports the modules beside it (``import helper``). After,
    the entry is gone and so are the modules imported from that folder (save those of a package
    loaded before the window), so the next program — or this one afresh, as ``difftest`` and
    ``sweep`` run it — neither finds nor reuses them. ``own`` (a dict)
    keeps those modules from one window to the next of the same run: a function that imports a helper
    when called gets the one its module imported when it loaded.

    >>> import sys, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> _ = open(os.path.join(folder, "helper_mod.py"), "w").write("N = 3\\n")
    >>> with program_imports(os.path.join(folder, "prog.py")):
    ...     import helper_mod
    >>> helper_mod.N, folder in sys.path, "helper_mod" in sys.modules
    (3, False, False)
    """
    folder = os.path.dirname(os.path.abspath(file))
    own = {} if own is None else own
    before = set(sys.modules)
    for name, module in own.items():
        sys.modules.setdefault(name, module)
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):  # (the program may have removed it itself)
            sys.path.remove(folder)
        # A package loaded before the window is the caller's (halsim itself, when the program sits
        # in the repository root): its submodules imported during the run stay, else a later import
        # would make a second copy of them.
        tops_before = {name.split(".", 1)[0] for name in before}
        for name in set(sys.modules) - before | set(own):
            if name.split(".", 1)[0] not in tops_before and \
                    _imported_from(sys.modules.get(name), name, folder):
                own[name] = sys.modules.pop(name)


def _imported_from(module, name: str, folder: str) -> bool:
    """Whether ``module`` (``name``) was found in ``folder`` itself: ``folder/top.py`` or the package
    ``folder/top/`` of its top-level name — not a library below it (a virtual environment in the
    program's folder)."""
    path = getattr(module, "__file__", None)
    if not path:
        return False
    top = name.split(".", 1)[0]
    path = os.path.abspath(path)
    return os.path.dirname(path) == folder and os.path.basename(path).split(".", 1)[0] == top \
        or path.startswith(os.path.join(folder, top) + os.sep)
