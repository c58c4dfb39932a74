"""What a number typed in a notebook's markdown is checked against (tests/test_prose_numbers.py).

A number that comes from a results file carries a marker right after it, ``99 %<!--=EXPR-->``, an
HTML comment the learner never sees. ``EXPR`` is a Python expression evaluated in :func:`namespace`:
the helpers below read the H200 recording and the summaries in ``course_lib/results/``, so when a
recording changes, the test names every sentence that no longer says what the file says.

The helpers read the reference recording (``nvidia_h200.json``) directly, never a learner's own
recording: the prose quotes the H200. A named fact too long for one space-free expression is a
function in the section of the notebook that quotes it (bottom of this file).
"""

from __future__ import annotations

import json
import math
from functools import cache

from course_lib import results
from course_lib.model_shapes import MODEL_SHAPES

SASS_FILE = results.RESULTS_DIR / "numba_kernels_sm90.json"


@cache
def recording() -> results.Results:
    return results.load(results.DEFAULT_GPU_FILE)


def _shape(shape) -> tuple[int, int, int]:
    """4096 -> (4096, 4096, 4096); (M, N, K) as is; a model-shape label ('gpt2 qkv 2k') -> its shape."""
    if isinstance(shape, int):
        return (shape, shape, shape)
    if isinstance(shape, str):
        found = [s.shape for s in MODEL_SHAPES if s.label == shape]
        if not found:
            raise KeyError(f"no model shape labelled {shape!r}; labels: {[s.label for s in MODEL_SHAPES]}")
        return tuple(found[0])
    return tuple(int(v) for v in shape)


def rec(stage: str, dtype: str, shape) -> dict:
    """The H200 record of ``stage`` in ``dtype`` at ``shape``."""
    rows = recording().select(stage, dtype, [_shape(shape)])
    if len(rows) != 1:
        raise KeyError(f"{len(rows)} records of {stage} ({dtype}) at {_shape(shape)} in the H200 recording")
    return rows[0]


def pct(stage: str, dtype: str, shape) -> float:
    """The stage's speed as % of cuBLAS measured in the same call (GPU time)."""
    return 100 * rec(stage, dtype, shape)["ratio_to_cublas"]


def tflops(stage: str, dtype: str, shape) -> float:
    return rec(stage, dtype, shape)["tflops"]


def ms(stage: str, dtype: str, shape) -> float:
    return rec(stage, dtype, shape)["ms"]


def us(stage: str, dtype: str, shape) -> float:
    return 1e3 * rec(stage, dtype, shape)["ms"]


def span(*values) -> tuple[float, float]:
    """(lowest, highest) of the values (or of one iterable): for a range such as 91–95 %."""
    if len(values) == 1 and not isinstance(values[0], (int, float)):
        values = tuple(values[0])
    return (min(values), max(values))


def gmean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values))


def prof(stage: str) -> dict:
    """Nsight Compute's profile of ``stage`` at 4096^3 (the stage_profiles summary)."""
    return results.summary("stage_profiles")["profiles"][stage]


def summary(topic: str) -> dict:
    return results.summary(topic)


@cache
def _sass() -> dict:
    return json.loads(SASS_FILE.read_text())["kernels"]


def sass(kernel: str) -> dict:
    """A numba kernel compiled for sm_90 without a GPU: registers, stack, spills, SASS counts."""
    return _sass()[kernel]


def namespace() -> dict:
    """Everything a marker's expression may use."""
    from course_lib import model_shapes
    from course_lib.kernels import coalescing_and_triton as c04
    from course_lib.kernels import shared_memory_tiling as tiling
    from course_lib.kernels import tensor_cores as tc
    from course_lib.kernels import thread_coarsening as coarsening
    from course_lib.viz import waves

    ns = {name: obj for name, obj in globals().items() if callable(obj) and not name.startswith("_")}
    ns.update(
        math=math, waves=waves, tc=tc, c04=c04, coarsening=coarsening, tiling=tiling, model_shapes=model_shapes,
        recorded=recording(), ceil=recording().ceilings, MODEL_SHAPES=MODEL_SHAPES,
        min=min, max=max, abs=abs, round=round, sum=sum, len=len, sorted=sorted,
    )
    return ns


# ---- 00, 01, source_articles


# ---- 02, 03, register_tiling_lab


# ---- 04, 05, triton_lab


# ---- 06, 07, hopper_lab


# ---- 08, real_shapes_lab, how_we_measure
