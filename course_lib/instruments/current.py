"""What the instruments share while a kernel runs: the guard of the ``course_lib.check`` call now
running (:func:`active`, set by :func:`course_lib.instruments.guard.guarded`), and the kernel's own
line among the simulator's frames (:func:`kernel_frame`). The patches of third-party internals
(:mod:`.patches`) read both when a patched function runs; keeping them here lets the guard install
the patches without the patches importing the guard.
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Any, Iterator

_ACTIVE: Any = None  # a course_lib.instruments.guard.Guard while one is active


def active() -> Any:
    """The guard of the GEMM call now running under ``guarded()``, if any."""
    return _ACTIVE


@contextlib.contextmanager
def activated(guard: Any) -> Iterator[Any]:
    """Make ``guard`` the active one for the block."""
    global _ACTIVE
    _ACTIVE = guard
    try:
        yield guard
    finally:
        _ACTIVE = None


@functools.cache
def _simulator_dir() -> str:
    from numba.cuda import simulator  # noqa: PLC0415 - numba loads after the backend choice

    return os.path.dirname(simulator.__file__)


def kernel_frame(frame, *own_files: str):
    """The first frame from ``frame`` outward that is neither in ``own_files`` (the instrument's
    own modules) nor in numba's simulator: the kernel's (or device function's) line that made an
    access or reached a barrier. None if there is none; in a notebook its line counts from the top
    of the cell."""
    sim_dir = _simulator_dir()
    while frame is not None and (frame.f_code.co_filename in own_files or frame.f_code.co_filename.startswith(sim_dir)):
        frame = frame.f_back
    return frame
