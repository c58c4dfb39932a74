"""What a learner's install meets: the lock resolves on PyPI alone, make stops at once on a platform
where the install cannot work, and make lab opens JupyterLab where the CUDA sources can be browsed."""

import json
import os
import re
import stat
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import check_platform  # noqa: E402
import lock  # noqa: E402


def _pypi_reachable() -> bool:
    try:
        with urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=20):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def pypi():
    if not _pypi_reachable():
        if os.environ.get("CI"):
            pytest.fail("PyPI is not reachable: the lock cannot be resolved, and CI must resolve it")
        pytest.skip("PyPI is not reachable from this machine")


def _run_lock(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "tools" / "lock.py"), *args], capture_output=True,
                          text=True, timeout=900)


def test_the_lock_resolves_on_pypi_alone_for_every_supported_python(pypi):
    got = _run_lock("--check")
    assert got.returncode == 0, got.stdout + got.stderr
    assert "resolves on PyPI for Python 3.11, 3.12, 3.13" in got.stdout


def test_the_lock_check_catches_a_conflict(pypi, tmp_path):
    # What the course's pins were before: PyPI's torch 2.13.0 for Linux requires triton 3.7.1.
    bad = tmp_path / "lock.txt"
    bad.write_text("torch==2.13.0\ntriton==3.9.0\n")
    got = _run_lock("--check", "--lock", str(bad))
    assert got.returncode == 1
    assert "torch 2.13.0 depends on triton==3.7.1" in got.stdout


def test_the_lock_check_ignores_this_machines_pip_settings(monkeypatch):
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    monkeypatch.setenv("PIP_INDEX_URL", "file:///nowhere")
    env = lock._pip_env()
    assert env["PIP_CONFIG_FILE"] == os.devnull  # no pip.conf, not even the site-wide one
    assert not [k for k in env if k.startswith("PIP_") and k != "PIP_CONFIG_FILE"]


def test_supported_pythons_agree():
    assert lock.PYTHONS == tuple("{}.{}".format(*v) for v in check_platform.SUPPORTED_PYTHONS)
    import tomllib

    need = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert need == f">={lock.PYTHONS[0]}"


# ---- the platform guard ---------------------------------------------------------------------------
def test_linux_and_wsl_are_fine():
    assert check_platform.problems("Linux", "x86_64", (3, 11, 2)) == ([], [])
    fatal, notes = check_platform.problems("Linux", "x86_64", (3, 12), wsl=True)
    assert not fatal and "WSL2" in notes[0] and "driver on Windows" in notes[0]


@pytest.mark.parametrize("system, machine, word", [
    ("Darwin", "arm64", "macOS"),
    ("Windows", "AMD64", "WSL2"),
    ("MINGW64_NT-10.0", "x86_64", "WSL2"),
    ("FreeBSD", "amd64", "Linux"),
    ("Linux", "riscv64", "x86_64"),
])
def test_unsupported_platforms_are_refused_with_the_supported_route(system, machine, word):
    fatal, _ = check_platform.problems(system, machine, (3, 12))
    assert len(fatal) == 1 and word in fatal[0]


def test_python_too_old_or_without_venv_is_refused():
    fatal, _ = check_platform.problems("Linux", "x86_64", (3, 10, 12))
    assert "3.11, 3.12 or 3.13" in fatal[0] and "PYTHON=" in fatal[0]
    fatal, _ = check_platform.problems("Linux", "x86_64", (3, 11, 2), has_ensurepip=False)
    assert "sudo apt install python3.11-venv" in fatal[0]
    fatal, notes = check_platform.problems("Linux", "x86_64", (3, 14, 0))
    assert not fatal and "3.11-3.13" in notes[0]


def test_gpu_notes_name_an_old_driver_and_an_old_gpu():
    notes = check_platform.gpu_notes("Tesla T4, 550.54.15, 7.5\nTesla V100-SXM2-16GB, 580.65.06, 7.0\n")
    assert any("Tesla T4" in n and "580" in n for n in notes)
    assert any("V100" in n and "7.5 or newer" in n for n in notes)
    assert check_platform.gpu_notes("NVIDIA H200, 580.159.04, 9.0\n") == []
    assert "nvidia-smi" in check_platform.gpu_notes(None)[0]


def _fake_python(tmp_path: Path, system: str, machine: str) -> Path:
    """A 'python3' that runs the real one, but makes tools/check_platform.py see another platform."""
    script = tmp_path / "python3"
    script.write_text(
        "#!/bin/sh\n"
        f'case "$1" in *check_platform.py) exec "{sys.executable}" "$@" --system {system} --machine {machine};; esac\n'
        f'exec "{sys.executable}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_make_lab_stops_at_once_on_macos(tmp_path):
    venv = tmp_path / "venv"
    got = subprocess.run(["make", "-C", str(ROOT), "lab", f"PYTHON={_fake_python(tmp_path, 'Darwin', 'arm64')}",
                          f"VENV={venv}"], capture_output=True, text=True, timeout=120)
    assert got.returncode != 0
    assert "macOS cannot run this install" in got.stderr and "Triton publishes no macOS wheels" in got.stderr
    assert not venv.exists()  # nothing was created or installed


def test_make_lab_opens_the_course_at_the_repository_root():
    dry = subprocess.run(["make", "-n", "-C", str(ROOT), "lab", "VENV=/nonexistent"], capture_output=True, text=True)
    line = " ".join(dry.stdout.split())
    assert f'--ServerApp.root_dir="{ROOT}"' in line  # course_lib/csrc/ is in JupyterLab's file browser
    assert "--LabApp.default_url=/lab/tree/notebooks/00_gpu_execution_model.ipynb" in line
    assert "pip install --quiet -c requirements-lock.txt -e \".\"" in line  # no test extras
    # JupyterLab's settings for the course become the environment's defaults, and no news prompt
    assert "cp tools/jupyterlab/overrides.json /nonexistent/share/jupyter/lab/settings/overrides.json" in line
    assert "--LabApp.news_url=" in line
    remote = " ".join(subprocess.run(["make", "-n", "-C", str(ROOT), "lab", "REMOTE=1", "VENV=/nonexistent"],
                                     capture_output=True, text=True).stdout.split())
    assert "--no-browser" in remote and "--ServerApp.ip=127.0.0.1" in remote
    assert not re.search(r"token=''|IdentityProvider.token", remote)  # the token is kept
    assert ("--allow-root" in line) == (os.getuid() == 0)  # Jupyter refuses root without it


def test_gpu_extras_bring_the_extension_toolchain():
    import tomllib

    gpu = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]
    names = {re.split(r"[\[=]", r)[0] for r in gpu}
    assert {"numba-cuda", "ninja", "cuda-toolkit"} <= names
    assert any(r.startswith("cuda-toolkit[nvcc,cccl]") for r in gpu)


def test_jupyterlab_saves_widget_state_and_asks_no_news():
    """What a saved notebook needs to show its widgets when reopened with a new kernel (the widget
    manager restores them from the notebook's metadata), and no news toast over a chart."""
    settings = json.loads((ROOT / "tools" / "jupyterlab" / "overrides.json").read_text())
    assert settings["@jupyter-widgets/jupyterlab-manager:plugin"] == {"saveState": True}
    assert settings["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"

