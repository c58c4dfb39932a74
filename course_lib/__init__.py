"""course_lib: the library behind the notebooks of "GEMM on the GPU, one optimisation at a time".

Importing it chooses the backend (GPU, or CPU with numba's CUDA simulator and Triton's interpreter)
before numba or Triton are imported; see :mod:`course_lib.backend`.
"""

from course_lib import backend as _backend

_backend.select()

from course_lib.backend import describe  # noqa: E402
from course_lib.check import check  # noqa: E402
from course_lib.gemm import random_inputs  # noqa: E402
from course_lib.registry import get_stage, stages  # noqa: E402

__all__ = ["check", "describe", "get_stage", "random_inputs", "stages"]
