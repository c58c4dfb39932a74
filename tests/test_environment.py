"""environment.yml (conda) and pyproject.toml name the same dependencies at the same versions."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _pyproject() -> dict[str, str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = data["project"]
    reqs = list(project["dependencies"]) + list(project["optional-dependencies"]["test"])
    out = {}
    for r in reqs:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([0-9][^\s;]*)", r.strip())
        assert m, f"pyproject dependency {r!r} is not pinned with =="
        out[m.group(1).lower()] = m.group(2)
    return out


def _environment_yml() -> dict[str, str]:
    out = {}
    for line in (ROOT / "environment.yml").read_text().splitlines():
        m = re.fullmatch(r"\s*-\s+([A-Za-z0-9_.-]+)\s*(==|=)\s*([0-9][^\s#]*)\s*(#.*)?", line)
        if m and m.group(1) != "python":
            out[m.group(1).lower()] = m.group(3)
    return out


def test_same_dependencies_same_versions():
    assert _environment_yml() == _pyproject()


def test_environment_yml_installs_the_package_and_python_matches():
    text = (ROOT / "environment.yml").read_text()
    assert re.search(r"^\s*-\s+-e \.\s*$", text, re.M), "the pip section must install the package"
    py = re.search(r"-\s+python=(\d+)\.(\d+)", text)
    need = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    lo = tuple(int(v) for v in re.search(r">=(\d+)\.(\d+)", need).groups())
    assert py and (int(py.group(1)), int(py.group(2))) >= lo


def test_lock_file_agrees_with_pyproject():
    lock = {}
    for line in (ROOT / "requirements-lock.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            lock[name.strip().lower().replace("_", "-")] = version.strip()
    for name, version in _pyproject().items():
        assert lock.get(name) == version, f"requirements-lock.txt pins {name} {lock.get(name)}, pyproject {version}"


def test_ci_runs_the_readme_test_command_and_nothing_else():
    run = [l for l in (ROOT / ".ci" / "run").read_text().splitlines() if l.strip() and not l.startswith("#")]
    assert run[-1].strip() == "make test"
    assert "make test" in (ROOT / "README.md").read_text()


def test_readme_version_table_matches_the_lock():
    lock = {}
    for line in (ROOT / "requirements-lock.txt").read_text().splitlines():
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if m:
            lock[m.group(1).lower()] = m.group(2)
    rows = {}
    for line in (ROOT / "MAINTAINING.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] in ("torch", "Triton", "numba / numba-cuda", "numpy"):
            rows[cells[0]] = cells[1]
    assert rows["torch"] == lock["torch"]
    assert rows["Triton"].split()[0] == lock["triton"]
    assert rows["numba / numba-cuda"] == f"{lock['numba']} / {lock['numba-cuda']}"
    assert rows["numpy"] == lock["numpy"]
