"""Every live script of experiments/ still fits today's library: a script that someone would run
again on a GPU must not wait for the GPU to find that a name it uses has moved.

* Each Python script directly in experiments/ is imported in a process of its own, started as
  ``python experiments/<name>.py`` would start it (experiments/ first on sys.path, so ``import
  runlog`` finds its sibling) but without running its ``if __name__ == "__main__"`` part, on the
  CPU backend. Then every name it takes from the course's library or from a sibling script, in
  any function, must exist: ``from course_lib.x import y`` and ``module.attribute`` (through
  attributes that are modules: ``course_lib.backend.sm_count``) on such a module.
* Each shell script: every Python or shell file it names exists (a bare name in experiments/,
  where ``(cd experiments && python3 x.py)`` finds it), every ``python3 -m module`` is found, and
  the Python of its ``python3 -c "..."`` lines passes the same name check.
* The stage-6 variant's own tests (experiments/test_tc_6_stream_k.py) pass on this machine.

The scripts of experiments/archive/ ran against the library of their date and are not imported
(experiments/JOURNAL.md, "Archive"). ``python tests/test_experiments_import.py PATH`` is the check
of one script, as each test runs it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"
PYTHON_SCRIPTS = sorted(EXPERIMENTS.glob("*.py"))
SHELL_SCRIPTS = sorted(EXPERIMENTS.glob("*.sh"))
# Files a shell script names, bare or with a folder, not part of a variable's path ("$OUT/x.py").
NAMED_FILE = re.compile(r"(?<![\w./$-])([\w./-]+\.(?:py|sh))\b")
PYTHON_MODULE = re.compile(r"\bpython3? -m ([\w.]+)")
PYTHON_SNIPPET = re.compile(r"\bpython3? -c \"([^\"]*)\"")


def ours(module: str) -> bool:
    """A module of the course's library or a script beside the one checked."""
    top = module.split(".")[0]
    return top == "course_lib" or (EXPERIMENTS / f"{top}.py").is_file()


def unresolved_names(source: str) -> list[str]:
    """'line N: ...' for every name ``source`` takes from one of ``ours`` modules that is not there.
    The modules it names are imported; ``source`` itself is not run."""
    tree = ast.parse(source)
    problems, modules = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not ours(alias.name):
                    continue
                try:
                    module = importlib.import_module(alias.name)
                except ImportError as e:
                    problems.append(f"line {node.lineno}: import {alias.name}: {e}")
                    continue
                bound = alias.asname or alias.name.split(".")[0]
                modules[bound] = module if alias.asname else importlib.import_module(bound)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and ours(node.module):
            try:
                module = importlib.import_module(node.module)
            except ImportError as e:
                problems.append(f"line {node.lineno}: from {node.module} import ...: {e}")
                continue
            for alias in node.names:
                if not hasattr(module, alias.name):  # a submodule not imported by its package
                    try:
                        importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        problems.append(f"line {node.lineno}: from {node.module} import {alias.name}: "
                                        f"{node.module} has no {alias.name}")
                        continue
                value = getattr(module, alias.name)
                if isinstance(value, ModuleType):
                    modules[alias.asname or alias.name] = value

    def visit(node: ast.AST, bound: dict[str, str]) -> None:
        """Check every ``module.attribute`` in ``node``; ``bound``: what the functions around it made
        of a name ("parameter", "assigned", "imported"; a module's name not in it is the module)."""
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            bound = {**bound, **bound_in(node)}
        if not isinstance(node, ast.Attribute):
            for child in ast.iter_child_nodes(node):
                visit(child, bound)
            return
        chain = []
        while isinstance(node, ast.Attribute):
            chain.insert(0, node.attr)
            node = node.value
        if not (isinstance(node, ast.Name) and node.id in modules):
            visit(node, bound)
            return
        value, dotted = modules[node.id], node.id
        if bound.get(node.id) == "parameter":  # whatever the caller passes (the module itself, perhaps)
            return
        if bound.get(node.id) == "assigned":  # on the GPU: an UnboundLocalError, or the wrong object
            problems.append(f"line {node.lineno}: {dotted}.{chain[0]}: {dotted} is assigned in this function, "
                            f"so here it is not the module {value.__name__}")
            return
        for attr in chain:
            if not isinstance(value, ModuleType):
                break
            if not hasattr(value, attr):
                problems.append(f"line {node.lineno}: {dotted}.{attr}: {value.__name__} has no {attr}")
                break
            value, dotted = getattr(value, attr), f"{dotted}.{attr}"

    visit(tree, {})
    return sorted(set(problems), key=lambda p: int(p.split(":")[0].split()[1]))


def bound_in(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> dict[str, str]:
    """The names a function binds in its own scope, each with how: "parameter", "imported" or
    "assigned" (assignments, loop variables, nested definitions)."""
    params = {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
    imported, assigned = set(), set()
    todo = [function.body] if isinstance(function, ast.Lambda) else list(function.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            assigned.add(node.name)  # its body is a scope of its own
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imported |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            assigned.add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return {**dict.fromkeys(assigned, "assigned"), **dict.fromkeys(imported, "imported"),
            **dict.fromkeys(params, "parameter")}


def check_script(path: Path) -> list[str]:
    """The names one live script uses that are not there; with none, the script is imported (an
    error there raises). For a shell script, the names of its ``python3 -c`` lines."""
    sys.path[:0] = [str(EXPERIMENTS), str(ROOT)]
    text = path.read_text()
    if path.suffix == ".sh":
        return [f"python3 -c {snippet!r}: {p}" for snippet in PYTHON_SNIPPET.findall(text)
                for p in unresolved_names(snippet)]
    problems = unresolved_names(text)
    if not problems:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)  # __name__ is the script's name, so its main does not run
    return problems


def run_check(path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COURSE_BACKEND": os.environ.get("COURSE_BACKEND", "cpu")}
    return subprocess.run([sys.executable, __file__, str(path)], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)


@pytest.mark.parametrize("script", PYTHON_SCRIPTS + SHELL_SCRIPTS, ids=lambda p: p.name)
def test_live_script_imports_and_finds_every_name_it_uses(script):
    done = run_check(script)
    assert done.returncode == 0, f"{script.relative_to(ROOT)} does not fit today's library (move what it uses, " \
        f"or archive it: experiments/JOURNAL.md, 'Archive'):\n{done.stdout}{done.stderr[-3000:]}"


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: p.name)
def test_shell_script_names_files_and_modules_that_exist(script):
    text = script.read_text()
    missing = [name for name in NAMED_FILE.findall(text)
               if not (ROOT / name).is_file() and not (EXPERIMENTS / name).is_file()]
    missing += [f"-m {m}" for m in PYTHON_MODULE.findall(text) if importlib.util.find_spec(m) is None]
    assert not missing, f"{script.relative_to(ROOT)} names what does not exist: {missing}"


@pytest.mark.slow
def test_the_stage6_variants_own_tests_pass():
    """experiments/test_tc_6_stream_k.py: the stream-K schedule on any machine; where nvcc and
    cuobjdump are found, the compiled variant, which shares course_lib/csrc's headers (a change
    there reaches it); on a GPU, its correctness."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(EXPERIMENTS)])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                           "experiments/test_tc_6_stream_k.py"], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=1200)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_the_check_finds_a_moved_name(tmp_path):
    script = tmp_path / "gpu_moved.py"
    script.write_text("from course_lib.kernels import tensor_cores as tc\n"
                      "from course_lib.gemm import no_such_function\n\n\n"
                      "def main():\n"
                      "    return tc.extension(), tc.no_such_design\n\n\n"
                      "def timeline(names):\n"
                      "    ext = tc.extension()\n"
                      "    for tc in names:\n"
                      "        print(tc)\n"
                      "    return ext\n\n\n"
                      "def given(tc):\n"
                      "    return tc.anything\n")
    done = run_check(script)
    assert done.returncode == 1
    out = done.stdout
    assert "line 2: from course_lib.gemm import no_such_function" in out
    assert "line 6: tc.no_such_design: course_lib.kernels.tensor_cores has no no_such_design" in out
    assert "line 10: tc.extension: tc is assigned in this function, so here it is not the module " \
        "course_lib.kernels.tensor_cores" in out
    assert "line 6: tc.extension" not in out and "tc.anything" not in out


def test_the_archive_is_not_imported():
    assert not [p for p in PYTHON_SCRIPTS + SHELL_SCRIPTS if "archive" in p.parts]
    assert (EXPERIMENTS / "archive" / "README.md").is_file()


if __name__ == "__main__":
    found = check_script(Path(sys.argv[1]).resolve())
    print("\n".join(found))
    sys.exit(1 if found else 0)
