"""What laying out cuBLAS's FP8 scales in every call costs the yardstick: ``course_lib.fp8.cublas_fp8``
(the operands checked and the scales laid out again per call; with block scales A's are copied on the
GPU) against ``cublas_fp8_for`` (done once, then only ``torch._scaled_mm``), in GPU time and as called,
in alternating rounds, at the FP8 squares and one prefill shape, in each scaling.

    source tools/gpu_env.sh && python3 experiments/gpu_fp8_cublas_layout.py

Recordings before this script's date timed the per-call wrapper as cuBLAS; the ratio printed is how
much faster the yardstick is with the layout done once (1.00: no difference). Raw output, never edited.
"""

from __future__ import annotations

import statistics

import torch

from course_lib import fp8
from course_lib.timing import time_fn

SHAPES = [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (4096, 2112, 7168)]


def main() -> int:
    print(torch.cuda.get_device_name())
    print(f"{'shape':<18}{'scaling':<8}{'per call us':>12}{'once us':>9}{'ratio':>7}"
          f"{'as called: per call':>22}{'once':>7}{'ratio':>7}")
    for shape in SHAPES:
        for scaling in fp8.OPERAND_SCALING:
            qa, qw = fp8.fp8_inputs(*shape, scaling, seed=0)
            once = fp8.cublas_fp8_for(qa, qw)
            ref = once(qa, qw)
            assert torch.equal(fp8.cublas_fp8(qa, qw), ref)  # the same product, only the call differs
            gpu = {"per call": [], "once": []}
            called = {"per call": [], "once": []}
            for _ in range(3):
                for name, fn in (("per call", fp8.cublas_fp8), ("once", once)):
                    gpu[name].append(time_fn(lambda fn=fn: fn(qa, qw), budget_ms=40.0).median_ms * 1e3)
                    called[name].append(time_fn(lambda fn=fn: fn(qa, qw), budget_ms=20.0, host=True).median_ms * 1e3)
            g = {k: statistics.median(v) for k, v in gpu.items()}
            c = {k: statistics.median(v) for k, v in called.items()}
            print(f"{'x'.join(map(str, shape)):<18}{scaling:<8}{g['per call']:>12.1f}{g['once']:>9.1f}"
                  f"{g['per call'] / g['once']:>7.2f}{c['per call']:>22.1f}{c['once']:>7.1f}"
                  f"{c['per call'] / c['once']:>7.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
