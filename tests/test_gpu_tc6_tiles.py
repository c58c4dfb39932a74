"""experiments/gpu_tc6_tiles.py's verdicts, on the CPU: a run where every variant fails the sanity
check still writes its row (no max() of nothing), and a graph or stream result whose bits differ
from the eager call's counts as a failure."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))  # the script imports its sibling runlog, as when run
try:
    _spec = importlib.util.spec_from_file_location("gpu_tc6_tiles", ROOT / "experiments" / "gpu_tc6_tiles.py")
    tiles = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(tiles)
finally:
    sys.path.remove(str(ROOT / "experiments"))


def test_the_best_variant_is_none_when_no_variant_was_timed():
    assert tiles.best_variant({}) is None
    assert tiles.best_variant({"128x256 whole": 80.0, "auto": 91.5, "128x128 whole": 60.0}) == "auto"


def test_a_graph_case_fails_on_other_bits_or_a_large_error():
    assert tiles.graph_case_passes(1e-3, 1e-2, same_bits=True)
    assert not tiles.graph_case_passes(1e-3, 1e-2, same_bits=False)  # within tolerance, other bits
    assert not tiles.graph_case_passes(2e-2, 1e-2, same_bits=True)
