"""The backend is chosen once, can be forced, and is described in one line."""

import os
import subprocess
import sys

import pytest

from course_lib import backend


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("COURSE_BACKEND", "NUMBA_ENABLE_CUDASIM", "TRITON_INTERPRET")}
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=300)


def test_forced_cpu_configures_simulator_and_interpreter():
    r = _run(
        "import course_lib, os, numba.cuda, sys\n"
        "from numba import config\n"
        "print(course_lib.backend.get().name, os.environ['TRITON_INTERPRET'], config.ENABLE_CUDASIM, sys.getswitchinterval())",
        COURSE_BACKEND="cpu",
    )
    assert r.returncode == 0, r.stderr
    name, interp, sim, interval = r.stdout.split()
    assert (name, interp, sim) == ("cpu", "1", "1")
    assert float(interval) < 0.005  # shorter than Python's default


def test_forced_gpu_without_gpu_fails_clearly():
    if backend.get().is_gpu:
        pytest.skip("this machine has a GPU")
    r = _run("import course_lib", COURSE_BACKEND="gpu")
    assert r.returncode != 0
    assert "COURSE_BACKEND=gpu" in r.stderr and "no CUDA device" in r.stderr


def test_unknown_backend_value_is_rejected():
    r = _run("import course_lib", COURSE_BACKEND="tpu")
    assert r.returncode != 0 and "'cpu', 'gpu' or 'auto'" in r.stderr


def test_auto_without_gpu_is_cpu():
    if backend.get().is_gpu:
        pytest.skip("this machine has a GPU")
    r = _run("import course_lib; print(course_lib.backend.get().name)")
    assert r.returncode == 0 and r.stdout.strip() == "cpu"


def test_numba_imported_first_in_other_mode_is_an_error():
    r = _run("import numba.cuda\nimport course_lib", COURSE_BACKEND="cpu")
    assert r.returncode != 0 and "import course_lib before numba" in r.stderr


def test_simulator_warning_is_silenced():
    r = _run(
        "import course_lib\nfrom numba import cuda\ne1, e2 = cuda.event(), cuda.event()\n"
        "e1.record(); e2.record(); e1.elapsed_time(e2)",
        COURSE_BACKEND="cpu",
    )
    assert r.returncode == 0 and "bogus" not in r.stderr


def test_describe_says_where_kernels_run_and_the_versions_in_short_lines(capsys):
    backend.describe()
    out = capsys.readouterr().out
    assert out.count("\n") == 2 and all(len(line) <= 100 for line in out.splitlines())
    for lib in backend.LIBRARIES:
        assert lib in out
    assert f"backend {backend.get().name}" in out


def test_compile_only_uses_numbas_real_cuda_target_without_a_gpu():
    r = _run(
        "import os, course_lib\nfrom course_lib import backend\n"
        "b = backend.use_compile_only('a test')\n"
        "from numba import config\nfrom course_lib.kernels import naive\n"
        "print(b is backend.get(), b.is_gpu, config.ENABLE_CUDASIM, os.environ['TRITON_INTERPRET'], b.device_name == backend.COMPILE_ONLY_DEVICE)",
        COURSE_BACKEND="cpu",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True", "0", "0", "True"]


@pytest.mark.parametrize("first", ["import numba.cuda", "from course_lib.kernels import naive"])
def test_compile_only_comes_before_numba_and_the_kernels(first):
    r = _run(f"import course_lib\n{first}\ncourse_lib.backend.use_compile_only()", COURSE_BACKEND="cpu")
    assert r.returncode != 0 and "use_compile_only() must come before numba.cuda" in r.stderr
