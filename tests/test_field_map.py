"""The map to the field (notebooks/deep_dives/field_map.md) points at what is there.

The page names, stage by stage, what CUTLASS / CuTe, DeepGEMM, ThunderKittens and Triton call the
course's ideas and the file a learner opens next in each. What a test can hold it to on a machine
without those repositories:

* every link of the page leads to a file of this repository (the course's own kernels, the
  notebooks, the glossary) or to one of the four projects' repositories on GitHub;
* every CUDA stage of the course (``course_lib/csrc/tc_N_*.cu``) is linked, so a new stage cannot
  be left off the map;
* every path of another repository is spelled like a path of that repository: it stands in a table
  row that names its project and starts at one of that project's top folders;
* a path of this repository in code font exists, and a bare file name in code font is one of the
  course's files or the last part of a path the page names in full;
* no dates, commits or issue numbers (the notebooks' rule).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from test_notebook_structure import DIARY

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "notebooks" / "deep_dives" / "field_map.md"

# The top folders a path of each project starts at (read from the repositories themselves).
PROJECTS = {
    "CUTLASS": ("include/", "examples/", "media/", "python/"),
    "CuTe": ("include/", "examples/", "media/", "python/"),
    "DeepGEMM": ("deep_gemm/", "csrc/"),
    "ThunderKittens": ("kernels/", "prototype/", "include/"),
    "Triton": ("python/",),
}
GITHUB = {"NVIDIA/cutlass", "deepseek-ai/DeepGEMM", "HazyResearch/ThunderKittens", "triton-lang/triton"}
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`]+)`")
FILE_PATH = re.compile(r"^[\w.+-]+(/[\w.+-]+)+\.(cu|cuh|h|hpp|py|md)$")
BARE_FILE = re.compile(r"^[\w.+-]+\.(cu|cuh|h|hpp|py|md|ipynb)$")
COURSE_DIRS = ("course_lib/", "notebooks/", "tests/", "experiments/", "tools/")


def page() -> str:
    assert PAGE.is_file(), f"{PAGE.relative_to(ROOT)} is missing"
    return PAGE.read_text()


def broken_links(text: str, base: Path) -> list[str]:
    """Links that lead nowhere: a relative link to a missing file, or a web link outside GitHub's four projects."""
    bad = []
    for target in LINK.findall(text):
        if target.startswith("https://"):
            if not re.fullmatch(r"https://github\.com/(" + "|".join(map(re.escape, GITHUB)) + r")/?", target):
                bad.append(target)
        elif not (base / target.split("#")[0]).resolve().is_file():
            bad.append(target)
    return bad


def foreign_paths(text: str) -> list[tuple[str, str]]:
    """(project, path) for every path of another repository, with the project its table row names;
    project '' when the path stands outside a table row that names one."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        named = [p for p in PROJECTS if cells and re.search(rf"\b{p}\b", cells[0])]
        for code in CODE.findall(line):
            if "/" in code and "." in code.rsplit("/", 1)[-1] and not code.startswith(COURSE_DIRS):
                out.append(("/".join(named), code))
    return out


def misplaced(pairs: list[tuple[str, str]]) -> list[str]:
    bad = []
    for projects, path in pairs:
        starts = [s for p in projects.split("/") if p for s in PROJECTS[p]]
        if not FILE_PATH.match(path) or not starts or not path.startswith(tuple(starts)):
            bad.append(f"{path} (row: {projects or 'no project named'})")
    return bad


def unknown_bare_names(text: str) -> list[str]:
    full = {Path(p).name for _, p in foreign_paths(text)}
    course = {p.name for d in COURSE_DIRS for p in (ROOT / d).rglob("*") if p.is_file()}
    return sorted({c for c in CODE.findall(text) if BARE_FILE.match(c) and c not in full | course})


def test_every_link_leads_to_a_file_or_a_named_repository():
    bad = broken_links(page(), PAGE.parent)
    assert not bad, f"{PAGE.name}: links that lead nowhere: {bad}"


def test_every_cuda_stage_of_the_course_is_on_the_map():
    linked = {(PAGE.parent / t).resolve() for t in LINK.findall(page()) if not t.startswith("https://")}
    stages = sorted((ROOT / "course_lib" / "csrc").glob("tc_[0-9]_*.cu"))
    assert stages, "no course_lib/csrc/tc_N_*.cu found"
    missing = [p.name for p in stages if p.resolve() not in linked]
    assert not missing, f"{PAGE.name} does not link the stages {missing}: give each a row in its section"


def test_paths_of_other_repositories_name_their_project_and_top_folder():
    pairs = foreign_paths(page())
    assert len(pairs) >= 20, f"{PAGE.name}: only {len(pairs)} paths of other repositories found"
    bad = misplaced(pairs)
    assert not bad, f"{PAGE.name}: paths not in a row of their project or not starting at its top folders: {bad}"


def test_course_paths_in_code_font_exist():
    missing = [c for c in CODE.findall(page()) if c.startswith(COURSE_DIRS) and not (ROOT / c).exists()]
    assert not missing, f"{PAGE.name}: course paths that do not exist: {missing}"


def test_bare_file_names_are_the_courses_or_named_in_full():
    bad = unknown_bare_names(page())
    assert not bad, f"{PAGE.name}: file names neither in the course nor named in full elsewhere on the page: {bad}"


def test_no_dates_commits_or_issue_numbers():
    hits = sorted({m.group() for m in DIARY.finditer(page())})
    assert not hits, f"{PAGE.name}: {hits}"
    assert not re.search(r"\b[0-9a-f]{7,40}\b", re.sub(r"`[^`]*`", "", page())), "a commit id in the page"


@pytest.mark.parametrize("text, want", [
    ("[x](../../course_lib/csrc/tc_2_wgmma_tma.cu)", []),
    ("[x](../../course_lib/csrc/tc_9_none.cu)", ["../../course_lib/csrc/tc_9_none.cu"]),
    ("[x](https://github.com/NVIDIA/cutlass)", []),
    ("[x](https://example.com/cutlass)", ["https://example.com/cutlass"]),
])
def test_the_link_check_finds_what_it_should(text, want):
    assert broken_links(text, PAGE.parent) == want


@pytest.mark.parametrize("line, want", [
    ("| CUTLASS | x | `include/cutlass/pipeline/sm90_pipeline.hpp` |", []),
    ("| DeepGEMM | x | `include/cutlass/pipeline/sm90_pipeline.hpp` |", ["include/cutlass/pipeline/sm90_pipeline.hpp"]),
    ("| Triton | x | `python/tutorials 09.py` |", ["python/tutorials 09.py"]),
    ("Open `kernels/gemm/bf16_h100/bf16_h100_gemm.cu` next.", ["kernels/gemm/bf16_h100/bf16_h100_gemm.cu"]),
])
def test_the_path_check_finds_what_it_should(line, want):
    assert [b.split(" (row")[0] for b in misplaced(foreign_paths(line))] == want


def test_the_bare_name_check_finds_what_it_should():
    text = "| CUTLASS | x | `examples/cute/tutorial/sgemm_2.cu` |\n`sgemm_2.cu`, `tc_3_pipeline.cu`, `nowhere.cu`"
    assert unknown_bare_names(text) == ["nowhere.cu"]
