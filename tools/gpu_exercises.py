"""Run every puzzle's own solution through its check on this backend, and print every question's
answer: on a GPU, the puzzles' kernels run on the GPU (the trace still runs on the simulator).

    COURSE_BACKEND=gpu python tools/gpu_exercises.py

Wrong solutions are not run here: on a GPU an out-of-bounds access is undefined behaviour, not a
message (tests/test_exercises*.py give them to the CPU backend)."""

import importlib
import pkgutil
import sys
import time

import course_lib
from course_lib import exercises
from course_lib.exercises import Puzzle, Question


def main() -> int:
    course_lib.describe()
    failed = 0
    for info in pkgutil.iter_modules(exercises.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"course_lib.exercises.{info.name}")
        for name, obj in vars(module).items():
            t0 = time.time()
            if isinstance(obj, Puzzle):
                print(f"--- {info.name}.{name}", flush=True)
                ok = obj.check(obj.solved_by)
                failed += not ok
                print(f"[{time.time() - t0:.1f} s]", flush=True)
            elif isinstance(obj, Question):
                print(f"--- {info.name}.{name}: {obj.expected()!r}", flush=True)
    print(f"{failed} puzzle solutions not accepted")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
