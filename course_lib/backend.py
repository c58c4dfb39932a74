"""Where the course's kernels run: on a CUDA GPU, or on the CPU.

The decision is made once, when ``course_lib`` is imported, and *before* numba or Triton are
imported, because both libraries read their mode at import or decoration time:

* numba switches ``numba.cuda`` to its CUDA simulator when ``NUMBA_ENABLE_CUDASIM=1`` is set before
  ``numba.cuda`` is imported (the simulator runs every GPU thread as a Python thread);
* Triton runs kernels in its interpreter (NumPy on the CPU) when ``TRITON_INTERPRET=1`` is set before
  a kernel is decorated with ``@triton.jit``.

Set ``COURSE_BACKEND=cpu`` or ``COURSE_BACKEND=gpu`` to force either; anything else (or nothing) means
"auto": the GPU when PyTorch sees a CUDA device, otherwise the CPU.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import warnings
from dataclasses import dataclass

ENV_VAR = "COURSE_BACKEND"
_CHOICES = ("auto", "cpu", "gpu")

# The simulator hands control between its Python threads at every switch interval. The default
# (5 ms) leaves a thread that waits at cuda.syncthreads() holding the interpreter; a short interval
# measured 10-30 % faster on a 32x32 tiled matmul (1.1 s instead of 1.5 s, 2-core CPU machine).
_SIMULATOR_SWITCH_INTERVAL_S = 1e-4


@dataclass(frozen=True)
class Backend:
    """The backend chosen for this Python process."""

    name: str  # "gpu" or "cpu"
    reason: str  # why it was chosen, in words
    device_name: str  # e.g. "NVIDIA H200" or "CPU"

    @property
    def is_gpu(self) -> bool:
        return self.name == "gpu"

    @property
    def torch_device(self) -> str:
        """The torch device that inputs of a course GEMM must live on."""
        return "cuda" if self.is_gpu else "cpu"


_BACKEND: Backend | None = None


def _requested() -> str:
    value = os.environ.get(ENV_VAR, "auto").strip().lower() or "auto"
    if value not in _CHOICES:
        raise ValueError(
            f"{ENV_VAR}={os.environ[ENV_VAR]!r} is not understood: set it to 'cpu', 'gpu' or 'auto' "
            "(or leave it unset) and restart the Python kernel."
        )
    return value


def _torch_cuda_device() -> str | None:
    """Name of CUDA device 0 as PyTorch sees it, or None. Importing torch imports neither numba
    nor Triton, so this is safe before the mode of either is fixed."""
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        return torch.cuda.get_device_name(0)
    return None


def _guard_already_imported(want_simulator: bool) -> None:
    """numba.cuda fixes simulator-or-not when it is imported; a later change has no effect."""
    if "numba.cuda" in sys.modules:
        from numba import config

        if bool(config.ENABLE_CUDASIM) != want_simulator:
            raise RuntimeError(
                "numba.cuda was imported before course_lib and is in the other mode "
                f"(simulator={'on' if config.ENABLE_CUDASIM else 'off'}). Restart the Python kernel "
                "and import course_lib before numba."
            )
    elif "numba" in sys.modules:
        from numba import config

        config.ENABLE_CUDASIM = int(want_simulator)


def _configure_cpu() -> None:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    os.environ["TRITON_INTERPRET"] = "1"
    _guard_already_imported(want_simulator=True)
    sys.setswitchinterval(_SIMULATOR_SWITCH_INTERVAL_S)
    # The simulator's events record no time and say so on every elapsed_time() call. The course
    # never times on the simulator (bench refuses), so the warning would only be noise in a notebook.
    warnings.filterwarnings("ignore", message="Simulator timings are bogus")


def _configure_gpu() -> None:
    for var in ("NUMBA_ENABLE_CUDASIM", "TRITON_INTERPRET"):
        if os.environ.get(var, "0") not in ("", "0"):
            raise RuntimeError(
                f"{ENV_VAR} asks for the GPU but {var}={os.environ[var]} asks for the CPU path. "
                f"Unset {var} (or set {ENV_VAR}=cpu) and restart the Python kernel."
            )
    _guard_already_imported(want_simulator=False)
    # numba-cuda warns about every grid of fewer than 128 blocks. The course launches such grids on
    # purpose (check() runs odd shapes from 1 to 300; the notebooks' demos are tiny), so the warning
    # would fill the notebooks' GPU runs with noise. Set NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=1 to see it.
    os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")


def select() -> Backend:
    """Decide the backend (once per process) and configure numba and Triton for it."""
    global _BACKEND
    if _BACKEND is not None:
        return _BACKEND
    requested = _requested()
    if requested == "auto" and os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        requested, why = "cpu", "NUMBA_ENABLE_CUDASIM is set"
    else:
        why = ""
    gpu_name = _torch_cuda_device() if requested != "cpu" else None
    if requested == "gpu" and gpu_name is None:
        raise RuntimeError(
            f"{ENV_VAR}=gpu, but PyTorch sees no CUDA device (torch.cuda.is_available() is False). "
            "Install a CUDA build of PyTorch and numba-cuda[cu13] (see the README), or set "
            f"{ENV_VAR}=cpu to run on the CPU."
        )
    if gpu_name is not None:
        _configure_gpu()
        why = f"{ENV_VAR}=gpu" if requested == "gpu" else "PyTorch sees a CUDA device"
        _BACKEND = Backend("gpu", why, gpu_name)
    else:
        _configure_cpu()
        if not why:
            why = f"{ENV_VAR}=cpu" if requested == "cpu" else "no CUDA device visible to PyTorch"
        _BACKEND = Backend("cpu", why, "CPU")
    return _BACKEND


def get() -> Backend:
    """The backend of this process (chosen on first use)."""
    return select()


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


LIBRARIES = ("numpy", "numba", "numba-cuda", "triton", "torch")


def versions() -> dict[str, str]:
    """Installed versions of the libraries the course depends on (read without importing them)."""
    return {name: _version(name) for name in LIBRARIES}


def describe_line() -> str:
    b = get()
    where = (
        "kernels run on the GPU"
        if b.is_gpu
        else "kernels run on the CPU: numba CUDA simulator + Triton interpreter (no speeds here)"
    )
    libs = ", ".join(f"{k} {v}" for k, v in versions().items())
    return f"backend {b.name} ({b.reason}); device: {b.device_name}; {where}; {libs}"


def describe() -> None:
    """Print one line: backend, device, library versions."""
    print(describe_line())
