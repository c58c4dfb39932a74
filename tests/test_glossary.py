"""Every term before its use: the course's glossary (notebooks/glossary.md) names, for each term, the
path notebook that first explains it, and the notebooks are held to it.

* No path notebook uses a term that a later notebook explains.
* The notebook that explains a term shows it in bold (``**warp**``, any of its spellings) and uses
  it in no cell before that one (its first cell, "What you will learn", may name it).
* Every notebook, deep dives too, links the glossary.

A term is found by whole word (a plural s or es allowed), case-insensitive for spellings in lower
case and case-sensitive for spellings with capitals (``SM``, ``TMA``), in markdown and in the text
the code cells print (not the source code a cell shows with ``learn.show_source``). Link texts that point at another notebook (``**Next:** [05 · ...](...)``) and
HTML comments are not uses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from course_lib.notebooks import NOTEBOOK_DIR, deep_dives, path_notebooks

GLOSSARY = NOTEBOOK_DIR / "glossary.md"
PATH = path_notebooks()
ROW = re.compile(r"^\|\s*(?P<term>[^|]+?)\s*\|\s*(?P<meaning>[^|]+?)\s*\|\s*\[(?P<nb>\d\d)\]\((?P<file>[^)]+)\)\s*\|\s*$")


@dataclass(frozen=True)
class Term:
    spellings: tuple[str, ...]
    notebook: str  # "00"
    file: str

    @property
    def name(self) -> str:
        return self.spellings[0]

    def pattern(self) -> re.Pattern:
        alts = []
        for s in self.spellings:
            body = re.escape(s)
            alts.append(body if any(ch.isupper() for ch in s) else f"(?i:{body})")
        return re.compile(r"(?<![A-Za-z0-9_])(?:" + "|".join(alts) + r")(?:e?s)?(?![A-Za-z0-9_])")

    def bold(self) -> re.Pattern:
        alts = "|".join(re.escape(s) for s in self.spellings)
        flags = 0 if any(ch.isupper() for s in self.spellings for ch in s) else re.I
        return re.compile(r"\*\*`?(?:" + alts + r")(?:e?s)?`?\*\*", flags)


def glossary() -> list[Term]:
    terms = []
    for line in GLOSSARY.read_text().splitlines():
        m = ROW.match(line)
        if m:
            spellings = tuple(s.strip().strip("`") for s in m["term"].split("·"))
            terms.append(Term(spellings, m["nb"], m["file"]))
    return terms


def _text_of(cell) -> str:
    """What a reader sees of a cell: its markdown, or the text its code printed."""
    if cell.cell_type == "markdown":
        text = re.sub(r"<!--.*?-->", "", cell.source, flags=re.S)
        text = re.sub(r"\[[^\]]*\]\([^)]*(?:\.ipynb|\.md)[^)]*\)", "", text)  # links to notebooks
        return text
    if cell.cell_type != "code":
        return ""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif "data" in out and "text/plain" in out["data"] and "text/latex" not in out["data"]:
            parts.append(out["data"]["text/plain"])  # (text/latex: source code shown by learn.show_source)
    return "\n".join(parts)


def _cells(path: Path) -> list[str]:
    return [_text_of(c) for c in nbformat.read(path, as_version=4).cells]


def _number(path: Path) -> str:
    return path.name[:2]


def test_the_glossary_parses_and_names_path_notebooks():
    terms = glossary()
    assert len(terms) >= 60, f"only {len(terms)} terms parsed from {GLOSSARY}"
    names = {_number(p): p.name for p in PATH}
    for t in terms:
        assert t.notebook in names, f"{t.name}: notebook {t.notebook} is not a path notebook"
        assert t.file == names[t.notebook], f"{t.name}: links {t.file}, the path notebook {t.notebook} is {names[t.notebook]}"
    seen = {}
    for t in terms:
        for s in t.spellings:
            assert s.lower() not in seen, f"{s!r} is in the glossary twice ({seen[s.lower()]} and {t.name})"
            seen[s.lower()] = t.name


@pytest.mark.parametrize("path", PATH, ids=lambda p: p.stem)
def test_no_term_is_used_before_the_notebook_that_explains_it(path):
    cells = _cells(path)
    here = _number(path)
    early = []
    for t in glossary():
        if t.notebook <= here:
            continue
        pat = t.pattern()
        for i, text in enumerate(cells):
            m = pat.search(text)
            if m:
                early.append(f"{t.name!r} (explained in {t.notebook}) in cell {i}: ...{text[max(0, m.start() - 40):m.end() + 20]!r}")
                break
    assert not early, f"{path.name} uses terms before their notebook:\n" + "\n".join(early)


@pytest.mark.parametrize("path", PATH, ids=lambda p: p.stem)
def test_a_term_is_explained_in_bold_before_it_is_used(path):
    nb = nbformat.read(path, as_version=4)
    cells = [_text_of(c) for c in nb.cells]
    problems = []
    for t in (t for t in glossary() if t.notebook == _number(path)):
        where = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and t.bold().search(c.source)]
        if not where:
            problems.append(f"{t.name!r} is never shown in bold (**{t.name}**) where it is explained")
            continue
        pat = t.pattern()
        used = [i for i, text in enumerate(cells) if i > 0 and pat.search(text)]
        if used and used[0] < where[0]:
            text = cells[used[0]]
            m = pat.search(text)
            problems.append(f"{t.name!r} is used in cell {used[0]} (...{text[max(0, m.start() - 40):m.end() + 20]!r}) "
                            f"before cell {where[0]} explains it")
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", PATH + deep_dives(), ids=lambda p: p.stem)
def test_every_notebook_links_the_glossary(path):
    nb = nbformat.read(path, as_version=4)
    target = "glossary.md" if path.parent == NOTEBOOK_DIR else "../glossary.md"
    assert any(f"]({target})" in c.source for c in nb.cells if c.cell_type == "markdown"), (
        f"{path.name} has no link to the glossary ({target})"
    )


def test_the_matcher_finds_whole_words_only():
    sm = Term(("SM", "streaming multiprocessor"), "00", "x")
    assert sm.pattern().search("132 SMs") and sm.pattern().search("each SM's") and not sm.pattern().search("sm_90a")
    assert not sm.pattern().search("a small SMEM")
    warp = Term(("warp",), "00", "x")
    assert warp.pattern().search("Warps of 32") and not warp.pattern().search("a warpgroup")
    assert warp.bold().search("a **warp** is") and warp.bold().search("**warps**")
