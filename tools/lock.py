"""The lock file, resolved against the public package index (PyPI) alone.

    python tools/lock.py            # resolve pyproject.toml (all extras) on PyPI, rewrite requirements-lock.txt
    python tools/lock.py --check    # does requirements-lock.txt resolve on PyPI for every supported Python?

Both ask pip for a resolution only (``pip install --dry-run --report``), and pip reads only the
metadata of each wheel: from the index where it serves the metadata file (PEP 658), otherwise from
inside the wheel through HTTP range requests (pip's ``fast-deps``): kilobytes instead of the ~3 GB
of wheels a Linux torch install pulls. This machine's own pip settings
(configuration files, ``PIP_*`` variables, local wheel folders) are ignored, so the answer is what a
learner's ``pip`` gets from PyPI, not what a local mirror happens to hold.

The lock is resolved for the oldest interpreter the course supports (Python 3.11.0: Debian 12 ships
3.11.2, and some releases require 3.11.5 or newer) on Linux x86_64, with binary wheels only; the check
then resolves it again for every supported Python version.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements-lock.txt"
PYPROJECT = ROOT / "pyproject.toml"

# The Python versions the course supports; the lock must resolve for each (pyproject's
# requires-python and tools/check_platform.py say the same; a test checks).
PYTHONS = ("3.11", "3.12", "3.13")
# Linux x86_64 wheels are tagged manylinux_2_N (glibc 2.N) or an old alias of one; pip matches
# --platform tags exactly, so every tag a glibc-2.28 machine accepts is listed.
PLATFORMS = tuple(
    [f"manylinux_2_{n}_x86_64" for n in range(28, 4, -1)]
    + ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
)
HEADER = """\
# Every package a learner's install resolves to, pinned: what `pip install ".[test,gpu]"` gets from
# PyPI alone on Linux x86_64 for Python 3.11 (tools/lock.py; a test resolves it again on PyPI for
# Python 3.11-3.13). The Makefile installs with it as constraints. Regenerate after changing
# pyproject.toml: make lock
"""


class ResolutionError(RuntimeError):
    """pip could not resolve the requirements on PyPI."""


def _pip_env() -> dict[str, str]:
    # PIP_CONFIG_FILE=os.devnull makes pip skip every configuration file, the site-wide one included
    # (--isolated alone still reads /etc/pip.conf and /etc/xdg/pip/pip.conf); the PIP_* variables
    # are dropped as well.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def resolve(requirements: list[str], python: str | None = None, *, timeout: float = 600) -> dict[str, str]:
    """{name: version} of everything ``pip install <requirements>`` would install from PyPI.

    ``python``: resolve for that version (binary wheels for Linux x86_64 only) instead of this
    interpreter. Raises :class:`ResolutionError` with pip's explanation when there is none.
    """
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        reqs = Path(tmp) / "requirements.txt"
        reqs.write_text("\n".join(requirements) + "\n")
        cmd = [sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--ignore-installed",
               "--disable-pip-version-check", "--use-feature=fast-deps", "--index-url", "https://pypi.org/simple",
               "--report", str(report), "-r", str(reqs)]
        if python:
            cmd += ["--python-version", python, "--only-binary=:all:"]
            for p in PLATFORMS:
                cmd += ["--platform", p]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=_pip_env(), timeout=timeout, cwd=tmp)
        if proc.returncode != 0:
            lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
            raise ResolutionError("\n".join(lines[-25:]))
        data = json.loads(report.read_text())
    return {_canonical(item["metadata"]["name"]): item["metadata"]["version"] for item in data["install"]}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pyproject_requirements(extras: tuple[str, ...] | None = None) -> list[str]:
    """The project's dependencies plus those of ``extras`` (default: every extra)."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    optional = project.get("optional-dependencies", {})
    reqs = list(project["dependencies"])
    for extra in (optional if extras is None else extras):
        reqs += optional[extra]
    return reqs


def read_lock(path: Path = LOCK) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if m:
            out[_canonical(m.group(1))] = m.group(2)
    return out


def write_lock(pins: dict[str, str], path: Path = LOCK) -> None:
    path.write_text(HEADER + "".join(f"{name}=={pins[name]}\n" for name in sorted(pins)))


def check_lock(path: Path = LOCK, pythons: tuple[str, ...] = PYTHONS) -> list[str]:
    """Problems with the lock on PyPI, one line each (empty: it resolves for every Python)."""
    pins = read_lock(path)
    if not pins:
        return [f"{path.name} pins nothing"]
    wanted = [f"{n}=={v}" for n, v in pins.items()]
    # One resolution per Python version, side by side: each waits on the network, not the CPU.
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(pythons)) as pool:
        futures = {python: pool.submit(resolve, wanted, python) for python in pythons}
    problems = []
    for python, future in futures.items():
        try:
            got = future.result()
        except ResolutionError as e:
            problems.append(f"Python {python}: pip finds no resolution on PyPI:\n{e}")
            continue
        extra = sorted(set(got) - set(pins))
        if extra:
            problems.append(f"Python {python}: the lock is incomplete, PyPI also installs "
                            + ", ".join(f"{n}=={got[n]}" for n in extra))
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python tools/lock.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="resolve the lock on PyPI for every supported Python")
    p.add_argument("--lock", type=Path, default=LOCK, help="the lock file (default: requirements-lock.txt)")
    args = p.parse_args(argv)
    if args.check:
        problems = check_lock(args.lock)
        for line in problems:
            print(line)
        if not problems:
            print(f"{args.lock.name} resolves on PyPI for Python {', '.join(PYTHONS)} (Linux x86_64)")
        return 1 if problems else 0
    pins = resolve(pyproject_requirements(), PYTHONS[0])
    write_lock(pins, args.lock)
    print(f"wrote {args.lock} ({len(pins)} packages)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
