"""Pass 6 of :mod:`halsim.programs`: a program beside a package the caller already loaded (a scratch
``prog.py`` in the repository root, beside ``halsim/``) leaves that package's modules loaded; one
loader (:func:`~halsim.programs.load_function`) with one wording for ``halsim run`` and sweep specs."""

from __future__ import annotations

import sys

import pytest

from halsim.campaigns.sweep import read_results
from halsim.cli import main
from halsim.programs import ProgramError, load_function, program_imports


# -- a package loaded before the window is the caller's -----------------------------------------------------

def test_a_submodule_of_a_package_loaded_before_the_window_stays_loaded(tmp_path, monkeypatch):
    (tmp_path / "callers_pkg").mkdir()
    (tmp_path / "callers_pkg" / "__init__.py").write_text("")
    (tmp_path / "callers_pkg" / "late.py").write_text("N = 1\n")
    (tmp_path / "helper_beside.py").write_text("N = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # (the caller's own package: halsim, for the repo root)
    for name in ("callers_pkg", "callers_pkg.late", "helper_beside"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import callers_pkg  # noqa: F401 - loaded before the window, as halsim is by the CLI
    with program_imports(str(tmp_path / "prog.py"), {}):
        import callers_pkg.late as during
        import helper_beside  # noqa: F401
    import callers_pkg.late as after
    assert during is after and sys.modules["callers_pkg.late"] is during
    assert "helper_beside" not in sys.modules  # (the program's own module beside it: still dropped)


# -- one loader, one wording --------------------------------------------------------------------------------

PROGRAMS = {
    "syntax.py": "def main(dev:\n",
    "prog.py": "def main(dev):\n    pass\ndef two(a, b):\n    pass\n",
    "raises.py": "x = 1 / 0\ndef main(dev):\n    pass\n",
    "exits.py": "import sys\nsys.exit(3)\n",
}
CASES = [
    ("syntax.py", "main", "'{p}' failed to load: SyntaxError: '(' was never closed (syntax.py, line 1)"),
    ("prog.py", "nope", "'{p}' has no function 'nope'"),
    ("prog.py", "two", "'{p}': two(a, b) must take one argument, the device (e.g. def two(dev): ...)"),
    ("raises.py", "main", "'{p}' failed to load: ZeroDivisionError: division by zero"),
    ("exits.py", "main", "'{p}' failed to load: it called sys.exit(3) on import"),
]


@pytest.fixture
def programs(tmp_path):
    for name, text in PROGRAMS.items():
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize("name, func, problem", CASES)
def test_load_function_says_why_a_program_cannot_run(programs, name, func, problem):
    p = str(programs / name)
    with pytest.raises(ProgramError) as e:
        load_function((programs / name).read_bytes(), p, func)
    assert str(e.value) == problem.format(p=p)


@pytest.mark.parametrize("name, func, problem", CASES)
def test_halsim_run_and_a_sweep_spec_say_it_alike(programs, capsys, name, func, problem):
    p = str(programs / name)
    assert main(["run", f"{p}:{func}", "--device", "sim"]) == 2
    assert capsys.readouterr().err == f"halsim: error: program {problem.format(p=p)}\n"
    spec = programs / "spec.toml"
    spec.write_text(f'[program]\npython = "{name}:{func}"\n[grid]\nseed = [0]\n')
    assert main(["sweep", str(spec), "-o", str(programs / "r.csv"), "-q", "--no-plot"]) == 2
    assert capsys.readouterr().err == f"halsim: error: {spec}: program.python: {problem.format(p=p)}\n"


def test_each_load_is_a_fresh_module(tmp_path):
    source = b"COUNT = []\ndef main(dev):\n    COUNT.append(dev)\n    return len(COUNT)\n"
    file = str(tmp_path / "prog.py")
    assert [load_function(source, file, "main")(d) for d in (1, 2)] == [1, 1]


def test_a_sweeps_helper_imported_when_the_function_runs_is_the_one_the_module_loaded(tmp_path, capsys):
    (tmp_path / "helper.py").write_text("CALLS = []\n")
    (tmp_path / "prog.py").write_text(
        "import helper\ndef main(dev):\n    import helper as h\n    h.CALLS.append(1)\n"
        "    assert helper.CALLS == [1], helper.CALLS\n")
    spec = tmp_path / "spec.toml"
    spec.write_text('[program]\npython = "prog.py"\n[grid]\nseed = [0, 1]\n')
    out = str(tmp_path / "r.csv")
    assert main(["sweep", str(spec), "-o", out, "-q", "--no-plot", "--jobs", "1"]) == 0
    _h, rows = read_results(out)
    assert [(r["seed"], r["error"]) for r in rows] == [("0", ""), ("1", "")]
    assert "helper" not in sys.modules


def test_a_program_with_a_dataclass_and_string_annotations_loads(tmp_path):
    """@dataclass looks its module up in sys.modules (string annotations: `from __future__ import
    annotations`); the program's module was never there: AttributeError on load."""
    from halsim.programs import load_function

    source = (b"from __future__ import annotations\nfrom dataclasses import dataclass\n\n"
              b"@dataclass\nclass Step:\n    n: int\n\ndef main(dev):\n    return Step(3).n\n")
    assert load_function(source, str(tmp_path / "p.py"), "main")(None) == 3
