"""course_lib: the library behind the notebooks of "GEMM on the GPU, one optimisation at a time".

Importing it chooses the backend (GPU, or CPU with numba's CUDA simulator and Triton's interpreter)
before numba or Triton are imported; see :mod:`course_lib.backend`. That is all it does: ``check``,
``describe``, ``get_stage``, ``random_inputs`` and ``stages`` are imported on first use, so ``import
course_lib`` loads neither numba, Triton, the stage registry nor a kernel.

``course_lib.check`` is the function of :mod:`course_lib.correctness`, the module that holds it.
"""

from importlib import import_module as _import_module

from course_lib import backend

backend.select()

# name -> the module that defines it
_PUBLIC = {
    "check": "course_lib.correctness",
    "describe": "course_lib.backend",
    "get_stage": "course_lib.registry",
    "random_inputs": "course_lib.gemm",
    "stages": "course_lib.registry",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> object:
    """Import a public function on first use (PEP 562) and keep it as an attribute."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'course_lib' has no attribute {name!r}")
    value = getattr(_import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
