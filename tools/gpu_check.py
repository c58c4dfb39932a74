"""Run course_lib.check for stages on this backend's default shapes (large ones on a GPU), every
dtype of each stage, an FP8 stage in every scaling it takes.

    COURSE_BACKEND=gpu python tools/gpu_check.py naive shared_memory_tiling ...   (no names: all)
"""

import sys
import time
import traceback

import course_lib
import course_lib.dtypes


def main(names: list[str]) -> int:
    course_lib.describe()
    chosen = [s for s in course_lib.stages() if not names or s.name in names]
    failed = 0
    for stage in chosen:
        for dtype in stage.dtypes:
            fp8 = course_lib.dtypes.get(dtype).operands == "fp8"
            for scaling in stage.scalings if fp8 else (None,):
                t0 = time.time()
                try:
                    report = course_lib.check(stage, dtype, scaling=scaling)
                    print(f"{report!r} [{time.time() - t0:.1f} s]", flush=True)
                except Exception:  # noqa: BLE001 - report every stage, then fail
                    failed += 1
                    print(f"FAILED {stage.name} {dtype} {scaling or ''}:\n{traceback.format_exc()}", flush=True)
    print(f"{len(chosen)} stages, {failed} failures")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
