"""Instruments: how the course sees what a kernel does, beyond the values it returns.

* :mod:`~course_lib.instruments.guard`: the guard regions ``course_lib.check`` places around a GEMM's
  arrays, and what names an access outside them (:class:`Violation`, :class:`OutOfBoundsAccess`:
  found as data, each rendering its own sentence);
* :mod:`~course_lib.instruments.shared_memory`: on numba's simulator, every block's shared memory
  starts as marked NaN, and a check's ledger says which slot a NaN in C came from and why;
* :mod:`~course_lib.instruments.trace`: :func:`trace_kernel` records every memory access of a numba
  kernel on the simulator, grouped as warps issue them (``course_lib.viz.trace`` draws it);
* :mod:`~course_lib.instruments.patches`: every patch of numba's or Triton's internals these need,
  each naming what it patches, why, and the versions it was checked against;
* :mod:`~course_lib.instruments.current`: what the patched functions read while a kernel runs (the
  active guard, the kernel's own line among the simulator's frames).
"""

from course_lib.instruments.guard import (
    INPUT_GUARD,
    Guard,
    OutOfBoundsAccess,
    Violation,
    active,
    guarded,
    never_written,
    simulator_message,
)
from course_lib.instruments.patches import PATCHES, PatchBroken
from course_lib.instruments.trace import Access, Race, Trace, WarpRequest, trace_kernel

__all__ = [
    "INPUT_GUARD",
    "PATCHES",
    "Access",
    "Guard",
    "OutOfBoundsAccess",
    "PatchBroken",
    "Race",
    "Trace",
    "Violation",
    "WarpRequest",
    "active",
    "guarded",
    "never_written",
    "simulator_message",
    "trace_kernel",
]
