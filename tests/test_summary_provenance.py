"""Each results summary's provenance names the notebooks that show it: every "notebook NN" and "deep
dive NAME" its "what" names reads that summary (results.summary("<topic>") in a code cell)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUMMARIES = sorted((ROOT / "course_lib" / "results").glob("nvidia_h200_*_summary.json"))


def _readers(what: str) -> list[Path]:
    """The notebooks a provenance sentence names."""
    found = [p for n in re.findall(r"notebooks? (\d\d)", what) for p in (ROOT / "notebooks").glob(f"{n}_*.ipynb")]
    found += [ROOT / "notebooks" / "deep_dives" / f"{name}.ipynb" for name in re.findall(r"deep dive (\w+)", what)]
    return found


@pytest.mark.parametrize("path", SUMMARIES, ids=lambda p: p.name)
def test_the_notebooks_a_summary_names_read_it(path):
    topic = path.name.removeprefix("nvidia_h200_").removesuffix("_summary.json")
    what = json.loads(path.read_text())["provenance"].get("what", "")
    for notebook in _readers(what):
        code = "".join("".join(c["source"]) for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code")
        assert f'summary("{topic}")' in code, f"{path.name} says {what!r}, but {notebook.name} does not read it"


def test_the_tensor_core_summary_names_its_reader():
    what = json.loads((ROOT / "course_lib" / "results" / "nvidia_h200_tensor_core_summary.json").read_text())["provenance"]["what"]
    assert [p.name for p in _readers(what)] == ["hopper_lab.ipynb"]
