"""Run every numba kernel of the course once at a small, awkward shape, for compute-sanitizer.

    COURSE_BACKEND=gpu compute-sanitizer --tool memcheck  python3 tools/gpu_sanitize_numba.py
    COURSE_BACKEND=gpu compute-sanitizer --tool racecheck python3 tools/gpu_sanitize_numba.py

Each stage runs on 200 x 300 x 100 (no multiple of any tile; several blocks with edges) and its
result is compared with torch.matmul, so a run that the sanitizer lets through is also correct.
"""

import sys

import torch

import course_lib


def main() -> int:
    wrong = 0
    for stage in course_lib.stages():
        if stage.backend != "numba":
            continue
        a, b = course_lib.random_inputs(200, 300, 100, seed=0)
        c = stage.gemm("fp32")(a, b)
        torch.cuda.synchronize()
        err = float((c - a @ b).abs().max())
        ok = err < 1e-3
        wrong += not ok
        print(f"{stage.name:<32} max |C - A@B| = {err:.1e} {'ok' if ok else 'WRONG'}", flush=True)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
