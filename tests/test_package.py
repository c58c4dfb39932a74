"""What ``import course_lib`` does (choose the backend, nothing more) and what the package offers."""

import json
import os
import subprocess
import sys
import types

import pytest

import course_lib
from course_lib import correctness

# What importing the package must not load: the backend is chosen before numba and Triton are
# imported, and the stages (with their kernels) load when first asked for.
NOT_ON_IMPORT = ("numba", "triton", "course_lib.registry", "course_lib.kernels", "course_lib.correctness")


def _fresh(code: str, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("COURSE_BACKEND", "NUMBA_ENABLE_CUDASIM", "TRITON_INTERPRET")}
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("backend", ["cpu", "auto"])
def test_import_chooses_the_backend_and_loads_nothing_else(backend):
    r = _fresh("import json, sys, course_lib\n"
               f"print(json.dumps([m for m in {NOT_ON_IMPORT!r} if m in sys.modules]))\n"
               "print(course_lib.backend.get().name)", COURSE_BACKEND=backend)
    assert r.returncode == 0, r.stderr
    loaded, name = r.stdout.splitlines()
    assert json.loads(loaded) == [], f"import course_lib loaded {loaded}"
    assert name in ("cpu", "gpu")


def test_the_functions_load_on_first_use():
    r = _fresh("import sys, course_lib\n"
               "f = course_lib.stages\n"
               "print('course_lib.registry' in sys.modules, 'numba' in sys.modules, callable(f))", COURSE_BACKEND="cpu")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "False", "True"]


def test_check_is_the_function_and_correctness_the_module():
    # in a fresh process, the module imported first: its import must not replace the function
    r = _fresh("import types\n"
               "import course_lib.correctness as m\n"
               "import course_lib\n"
               "from course_lib import check\n"
               "print(isinstance(m, types.ModuleType), isinstance(course_lib.check, types.FunctionType), "
               "course_lib.check is m.check is check)", COURSE_BACKEND="cpu")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True", "True"]
    # and here, where the tests imported everything
    assert isinstance(correctness, types.ModuleType) and correctness.__name__ == "course_lib.correctness"
    assert isinstance(course_lib.check, types.FunctionType) and course_lib.check is correctness.check


def test_all_and_dir_say_what_there_is():
    assert course_lib.__all__ == ["check", "describe", "get_stage", "random_inputs", "stages"]
    for name in course_lib.__all__:
        assert callable(getattr(course_lib, name)) and name in dir(course_lib)
    assert "backend" in dir(course_lib)  # chosen on import: the one module loaded with the package
    with pytest.raises(AttributeError, match="no attribute 'bench_all'"):
        course_lib.bench_all  # noqa: B018 - the attribute access is the test
