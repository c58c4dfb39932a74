"""Prose that cannot drift: every number a notebook's markdown quotes from a results file is checked
against that file.

A quoted number carries a marker right after it (no space), which the learner never sees:

* ``99 %<!--=pct('triton_fast','bf16',4096)-->`` — an expression (tests/prose_facts.py says what it
  may use); its value, rounded to the digits shown, must be the number shown. A range ``91–95 %``
  takes a (low, high) pair, e.g. ``span(...)``.
* ``990 TFLOP/s<!--c:datasheet-->`` — a number that does not come from a results file (a datasheet,
  an article, a formula worked in the text, a hardware constant), with the reason.

And every number followed by a unit of measurement (``%``, ``TFLOP/s``, ``TB/s``, ``GB/s``, ``ms``,
``µs``, ``GHz``, ``MHz``, ``W``, ``GB``, ``MB``, or a factor such as ``3x``) in markdown, outside
``$...$`` and code, must carry one of the two markers: a measured number typed without a marker is
exactly what drifts when the course is re-recorded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import nbformat
import pytest

import prose_facts
from course_lib.notebooks import notebook_paths

NOTEBOOKS = notebook_paths()

MARKER = re.compile(r"<!--(=|c:)(.*?)-->", re.S)
NUM = r"[+−-]?\d[\d,]*(?:\.\d+)?"
# A number, or a range of two, at the very end of the text before a marker (units and emphasis
# between them allowed).
UNITS = r"(?:%|TFLOP/s|GFLOP/s|TB/s|GB/s|MB/s|ms|µs|us|GHz|MHz|W|GB|MB|KB|KiB|MiB|×|x|cycles|B)"
TAIL = re.compile(rf"({NUM})(?:\s?(?:–|-|to)\s?({NUM}))?\s?{UNITS}?\s?[*_]*\s*$")
# A number with a unit of measurement that must carry a marker.
MEASURED = re.compile(
    rf"(?<![\w.−-])({NUM})(?:\s?(?:–|-)\s?{NUM})?\s?"
    r"(?:%|TFLOP/s|GFLOP/s|TB/s|GB/s|MB/s|ms\b|µs\b|GHz\b|MHz\b|W\b|GB\b|MB\b|×(?!\s*\d)|x\b(?!\s*\d))"
)


@dataclass(frozen=True)
class Quote:
    where: str
    shown: str  # the number(s) as written
    kind: str  # "=" or "c:"
    body: str  # the expression or the reason
    context: str


def _decimals(s: str) -> int:
    return len(s.split(".")[1]) if "." in s else 0


def _value(s: str) -> float:
    return float(s.replace(",", "").replace("−", "-"))


def _strip_code_and_math(text: str) -> str:
    """Markdown with fenced code, inline code and math blanked out (markers are kept)."""
    text = re.sub(r"```.*?```", lambda m: " " * len(m.group()), text, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$", lambda m: " " * len(m.group()), text, flags=re.S)
    text = re.sub(r"(?<!\\)\$[^$\n]+\$", lambda m: " " * len(m.group()), text)
    text = re.sub(r"`[^`\n]*`", lambda m: " " * len(m.group()), text)
    text = re.sub(r"\]\([^)]*\)", lambda m: " " * len(m.group()), text)  # link targets
    return text


def quotes_in(text: str, where: str) -> list[Quote]:
    """Every marker in ``text`` with the number it follows; a marker after no number is an error."""
    found = []
    for m in MARKER.finditer(text):
        before = MARKER.sub("", text[max(0, m.start() - 60):m.start()])
        t = TAIL.search(before)
        if t is None:
            raise AssertionError(f"{where}: a marker <!--{m.group(1)}{m.group(2)}--> follows no number: ...{before[-40:]!r}")
        shown = t.group(1) + (f"–{t.group(2)}" if t.group(2) else "")
        found.append(Quote(where, shown, m.group(1), m.group(2).strip(), before[-60:].replace("\n", " ")))
    return found


def unmarked(text: str) -> list[str]:
    """Numbers with a unit of measurement that carry no marker."""
    plain = _strip_code_and_math(text)
    bad = []
    for m in MEASURED.finditer(plain):
        after = plain[m.end():m.end() + 8]
        if re.match(r"[*_]*\s?<!--(=|c:)", after):
            continue
        bad.append(plain[max(0, m.start() - 30):m.end() + 10].replace("\n", " "))
    return bad


def matches(shown: str, value) -> bool:
    parts = shown.split("–")
    if isinstance(value, (tuple, list)):
        if len(parts) != 2 or len(value) != 2:
            return False
        pairs = zip(parts, value)
    else:
        if len(parts) == 2:  # a range shown for one value: both ends must round to it
            pairs = zip(parts, (value, value))
        else:
            pairs = [(parts[0], value)]
    for s, v in pairs:
        half = 0.5 * 10 ** -_decimals(s) + 1e-9 * abs(_value(s))
        if not abs(float(v) - _value(s)) <= half:
            return False
    return True


def _markdown(path):
    nb = nbformat.read(path, as_version=4)
    return [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_quoted_number_says_what_its_file_says(path):
    ns = prose_facts.namespace()
    wrong = []
    for i, src in _markdown(path):
        for q in quotes_in(src, f"{path.name} cell {i}"):
            if q.kind == "c:":
                assert re.fullmatch(r"[\w-]+", q.body), f"{q.where}: <!--c:{q.body}--> needs a one-word reason"
                continue
            try:
                value = eval(q.body, dict(ns))  # noqa: S307 - the repository's own prose
            except Exception as e:  # noqa: BLE001 - every broken expression reported with its place
                wrong.append(f"{q.where}: {q.shown} <!--={q.body}--> does not evaluate: {type(e).__name__}: {e}")
                continue
            if not matches(q.shown, value):
                shown_v = tuple(round(v, 4) for v in value) if isinstance(value, (tuple, list)) else round(float(value), 4)
                wrong.append(f"{q.where}: the text says {q.shown} but {q.body} is {shown_v}  (...{q.context})")
    assert not wrong, "numbers in the prose that do not match their results file:\n" + "\n".join(wrong)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_measured_number_in_the_prose_carries_a_marker(path):
    bad = [f"{path.name} cell {i}: ...{snippet}..." for i, src in _markdown(path) for snippet in unmarked(src)]
    assert not bad, (
        "numbers with a unit of measurement and no marker (add <!--=EXPR--> if it comes from a results "
        "file, <!--c:reason--> if not; see tests/test_prose_numbers.py):\n" + "\n".join(bad)
    )


# ---- the checker itself: it must catch a wrong number, a stale range and a bare measurement


def test_the_checker_reads_numbers_ranges_and_units():
    text = "about 99 %<!--=99.04--> and **2.6×**<!--=2.62--> and 91–95 %<!--=(90.7,95.2)--> and 1,246 TFLOP/s<!--c:article-->"
    qs = quotes_in(text, "t")
    assert [(q.shown, q.kind) for q in qs] == [("99", "="), ("2.6", "="), ("91–95", "="), ("1,246", "c:")]
    assert matches("99", 99.04) and matches("2.6", 2.62) and matches("91–95", (90.7, 95.2)) and matches("1,246", 1246)


def test_the_checker_rejects_a_drifted_number():
    assert not matches("99", 97.6)
    assert not matches("91–95", (90.2, 95.2))
    assert not matches("1.63", 1.67)
    assert not matches("91–95", 93.0)


def test_the_checker_flags_a_measured_number_without_a_marker():
    assert unmarked("it runs at 61 % of cuBLAS") and unmarked("3x slower") and unmarked("4.27 TB/s")
    assert not unmarked("61 %<!--=61-->") and not unmarked("a 128 x 256 tile") and not unmarked("`3x` in code, $2 \\times 4$")
    assert not unmarked("the 2x2 kernel, 8x8 outputs")


def test_a_marker_after_no_number_is_an_error():
    with pytest.raises(AssertionError, match="follows no number"):
        quotes_in("the ring<!--=1-->", "t")
