"""Every repository path that experiments/ names exists: the journal, the scripts, the kernels and the
reports of runs/ point at what is there now, not at a file that moved or was renamed.

What is checked, in every .md, .py, .sh, .cu, .cuh and .h file under experiments/ (the raw logs of
runs/ - .json, .log, .txt, .csv - record the paths of their day and are never edited):

* a path that starts at a folder of the repository (``course_lib/``, ``notebooks/``,
  ``experiments/``, ``tools/``, ``tests/``) or at one the journal and the scripts use as a short
  form (``runs/``, ``archive/`` and ``kernels/`` for experiments/..., ``csrc/`` and ``results/`` for
  course_lib/...). ``*`` and ``...`` (or ``…``) in it are wildcards, ``{a,b}`` names both; a path
  with ``{name}`` in it is a template a script fills in and is not checked;
* outside runs/, a file name without a folder that ends in .cu, .cuh, .h, .sh, .md or .ipynb names
  a file somewhere in the repository (a run's report may name the files of the commit it compared).

A path that no longer exists on purpose says so right after it, with the commit that removed or
moved it: ``old/path.json`` (removed in 33cbf14), ``course_lib/old.py`` (moved to
``course_lib/new/old.py`` in 1a2b3c4), whose new path is checked like any other.

The raw logs and reports of runs/ and the scripts of archive/ are kept as they ran and never
edited: in them a script named where it lived that day, ``experiments/<name>``, is found where it
lives now, ``experiments/archive/<name>``. Everywhere else (the journal, the live scripts) the path
must be the current one.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"
TEXT = {".md", ".py", ".sh", ".cu", ".cuh", ".h"}
# Where a path's first folder is looked for: the repository root, then the short forms.
BASES = {"course_lib": [""], "notebooks": [""], "experiments": [""], "tools": [""], "tests": [""],
         "runs": ["experiments/"], "archive": ["experiments/"], "kernels": ["experiments/", "course_lib/"],
         "csrc": ["course_lib/"], "results": ["course_lib/"]}
PATH = re.compile(r"(?<![\w./$-])((?:" + "|".join(BASES) + r")/(?:[\w.*{},…-]|/)*[\w*}/])")
BARE = re.compile(r"(?<![\w./$-])([\w.-]+\.(?:cu|cuh|h|sh|md|ipynb))\b(?![\w/-])")
REMOVED = re.compile(r"^`?\s*\((?:removed|moved to `?[\w./-]+`?) in [0-9a-f]{7,40}\b")


def text_files() -> list[Path]:
    return sorted(p for p in EXPERIMENTS.rglob("*") if p.suffix in TEXT and p.is_file()
                  and "__pycache__" not in p.parts)


def found(pattern: str) -> bool:
    return any(ROOT.glob(pattern)) if "*" in pattern else (ROOT / pattern).exists()


def exists(path: str, as_of_their_day: bool = False) -> bool:
    """Whether ``path`` exists from one of the folders its first folder may stand for; with
    {a,b}, every choice from the same one. ``as_of_their_day``: the path is named in a file kept
    as it ran, where an archived script may still go by the path it had then."""
    archived = path.replace("experiments/", "experiments/archive/", 1)
    if as_of_their_day and path.startswith("experiments/") and exists(archived):
        return True
    path = path.rstrip("/").replace("...", "**").replace("…", "**")
    choices = [path]
    while any("{" in c for c in choices):
        c = next(c for c in choices if "{" in c)
        m = re.search(r"\{([^{}]*)\}", c)
        choices.remove(c)
        choices += [c[:m.start()] + alt + c[m.end():] for alt in m.group(1).split(",")]
    return any(all(found(base + c) for c in choices) for base in BASES[path.split("/")[0]])


@functools.lru_cache(maxsize=1)
def repository_names() -> frozenset[str]:
    """The name of every file and folder in the working tree (hidden folders left out)."""
    names = set()
    for _, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        names.update(dirs, files)
    return frozenset(names)


def missing_paths(path: Path, text: str) -> list[str]:
    """'file:line: path' for every path in ``text`` (the content of ``path``) that does not exist."""
    out = []
    in_runs = "runs" in path.relative_to(EXPERIMENTS).parts
    as_they_ran = in_runs or (path.parent.name == "archive" and path.name != "README.md")
    for number, line in enumerate(text.splitlines(), 1):
        for m in PATH.finditer(line):
            p = m.group(1)
            if re.search(r"\{[^{},]*(\}|$)", p) or REMOVED.match(line[m.end():]):  # template, or removed
                continue
            if not exists(p, as_they_ran):
                out.append(f"{path.relative_to(ROOT)}:{number}: {p}")
        if in_runs:
            continue
        for m in BARE.finditer(line):
            if m.group(1) not in repository_names() and not REMOVED.match(line[m.end():]):
                out.append(f"{path.relative_to(ROOT)}:{number}: {m.group(1)}")
    return out


def test_every_path_named_in_experiments_exists():
    missing = [hit for p in text_files() for hit in missing_paths(p, p.read_text(errors="replace"))]
    assert not missing, "paths in experiments/ that do not exist (fix the pointer, or mark it " \
                        "'(removed in <commit>)' or '(moved to <path> in <commit>)'):\n" + "\n".join(missing)


def test_the_check_finds_what_it_should():
    journal = EXPERIMENTS / "JOURNAL.md"
    got = missing_paths(journal, "\n".join([
        "see `course_lib/kernels/coalescing_and_triton.py` and runs/2099-01-01_nothing/",  # moved, never was
        "`experiments/kernels/tc_6_stream_k.cu`, runs/2026-12-01_0707_power_sampling.{csv,log}",  # both exist
        "runs/2026-12-01_0707_power_sampling.{csv,txt}",  # one of the two does not
        "runs/.../ncu_shapes.csv and experiments/runs/{stamp}.json, kernels/tc_6_stream_k.h",  # wildcard, template
        "`course_lib/results/nvidia_h200_ncu_4096.json` (removed in 33cbf14); JOURNAL-cuda-notes.md",
        "`course_lib/kernels/tc.py` (moved to `course_lib/kernels/tensor_cores/` in 3bc4907), and "
        "`course_lib/old.py` (moved to `course_lib/nothing.py` in 3bc4907)",
    ]))
    assert got == ["experiments/JOURNAL.md:1: course_lib/kernels/coalescing_and_triton.py",
                   "experiments/JOURNAL.md:1: runs/2099-01-01_nothing/",
                   "experiments/JOURNAL.md:3: runs/2026-12-01_0707_power_sampling.{csv,txt}",
                   "experiments/JOURNAL.md:5: JOURNAL-cuda-notes.md",
                   "experiments/JOURNAL.md:6: course_lib/nothing.py"]


def test_runs_hold_logs_not_scripts():
    """experiments/runs/ keeps what runs wrote; the scripts that wrote it live in experiments/."""
    scripts = sorted(str(p.relative_to(ROOT)) for p in (EXPERIMENTS / "runs").rglob("*")
                     if p.suffix in {".py", ".sh", ".cu", ".cuh", ".h"})
    assert not scripts, f"scripts inside experiments/runs/ (move them to experiments/): {scripts}"


def test_only_a_file_kept_as_it_ran_names_an_archived_script_by_its_old_path():
    old = "experiments/gpu_restructure_cuda_ab.py"  # in experiments/archive/ since its run
    assert missing_paths(EXPERIMENTS / "archive" / "gpu_restructure_cuda_check.sh", old) == []
    assert missing_paths(EXPERIMENTS / "runs" / "2026-12-01_sass_restructure_cuda" / "comparison.md", old) == []
    assert missing_paths(EXPERIMENTS / "JOURNAL.md", old) == [f"experiments/JOURNAL.md:1: {old}"]
    assert missing_paths(EXPERIMENTS / "archive" / "gpu_shape_limits.sh", "experiments/gpu_nothing.py") \
        == ["experiments/archive/gpu_shape_limits.sh:1: experiments/gpu_nothing.py"]


@pytest.mark.parametrize("name", ["tc_6_tma_store.cu", "tc_stream_k.cuh", "JOURNAL.md"])
def test_a_bare_file_name_is_looked_up_anywhere(name):
    assert name in repository_names()
