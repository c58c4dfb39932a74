"""Where the course's kernels run: on a CUDA GPU, or on the CPU.

The decision is made once, when ``course_lib`` is imported, and *before* numba or Triton are
imported, because both libraries read their mode at import or decoration time:

* numba switches ``numba.cuda`` to its CUDA simulator when ``NUMBA_ENABLE_CUDASIM=1`` is set before
  ``numba.cuda`` is imported (the simulator runs every GPU thread as a Python thread);
* Triton runs kernels in its interpreter (NumPy on the CPU) when ``TRITON_INTERPRET=1`` is set before
  a kernel is decorated with ``@triton.jit``.

Set ``COURSE_BACKEND=cpu`` or ``COURSE_BACKEND=gpu`` to force either; anything else (or nothing) means
"auto": the GPU when PyTorch sees a CUDA device the course supports (compute capability 7.5 or newer,
the oldest CUDA 13 builds for), otherwise the CPU.

On the GPU the backend also fixes the compute capability the course works with. It is the device's,
unless ``COURSE_ASSUME_CAPABILITY`` (e.g. ``8.0``) names an older one: the course then treats the GPU
as that one - it builds and calls only the stages such a GPU could run (see
:mod:`course_lib.features`) - which shows on a new GPU what a learner with an older one gets.

A tool that compiles kernels for a GPU without launching them (PTX and SASS, ``tools/numba_sass.py``)
calls :func:`use_compile_only` after importing ``course_lib`` and before importing a kernel module:
numba's real CUDA target and Triton's compiler, with or without a GPU in the machine.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import warnings
from dataclasses import dataclass

ENV_VAR = "COURSE_BACKEND"
_CHOICES = ("auto", "cpu", "gpu")
ASSUME_VAR = "COURSE_ASSUME_CAPABILITY"
# CUDA 13 (PyPI's torch 2.13 and numba-cuda[cu13]) compiles for compute capability 7.5 and newer only.
MIN_CAPABILITY = (7, 5)

Capability = tuple[int, int]

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
    capability: Capability | None = None  # what the course treats the GPU as (None on the CPU)
    device_capability: Capability | None = None  # what the GPU really is

    @property
    def is_gpu(self) -> bool:
        return self.name == "gpu"

    @property
    def assumed(self) -> bool:
        """True when COURSE_ASSUME_CAPABILITY makes the course treat the GPU as an older one."""
        return self.capability != self.device_capability

    @property
    def gpu_label(self) -> str:
        """The GPU in words, e.g. "NVIDIA H200 (sm_90)" or "NVIDIA H200 treated as sm_80 (COURSE_ASSUME_CAPABILITY)"."""
        if self.capability is None:
            return self.device_name
        if self.assumed:
            return f"{self.device_name} treated as {arch_name(self.capability)} ({ASSUME_VAR})"
        return f"{self.device_name} ({arch_name(self.capability)})"

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


def arch_name(capability: Capability) -> str:
    """(8, 0) -> "sm_80"."""
    return f"sm_{capability[0]}{capability[1]}"


def parse_capability(text: str) -> Capability:
    """ "8.0", "8.6", "80" or "sm_80" -> (8, 0)."""
    s = text.strip().lower().removeprefix("sm_").removeprefix("sm")
    if "." in s:
        major, _, minor = s.partition(".")
    else:
        major, minor = s[:-1], s[-1:]
    if not (major.isdigit() and minor.isdigit()):
        raise ValueError(f"{ASSUME_VAR}={text!r} is not a compute capability: write it like 7.5, 8.0 or 8.6")
    return int(major), int(minor)


def assumed_capability(device: Capability, requested: str | None) -> Capability:
    """The capability the course works with on a GPU of capability ``device``."""
    if not requested or not requested.strip():
        return device
    cap = parse_capability(requested)
    if cap > device:
        raise ValueError(
            f"{ASSUME_VAR}={requested} is newer than this GPU ({arch_name(device)}): the override can only "
            "make the course treat a GPU as an older one. Unset it and restart the Python kernel."
        )
    if cap < MIN_CAPABILITY:
        raise ValueError(
            f"{ASSUME_VAR}={requested}: the course's GPU path needs compute capability "
            f"{MIN_CAPABILITY[0]}.{MIN_CAPABILITY[1]} or newer (CUDA 13 builds for nothing older)."
        )
    return cap


def _torch_cuda_device() -> tuple[str, Capability] | None:
    """Name and compute capability of CUDA device 0 as PyTorch sees it, or None. Importing torch
    imports neither numba nor Triton, so this is safe before the mode of either is fixed."""
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        return torch.cuda.get_device_name(0), tuple(torch.cuda.get_device_capability(0))
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
    gpu = _torch_cuda_device() if requested != "cpu" else None
    if requested == "gpu" and gpu is None:
        raise RuntimeError(
            f"{ENV_VAR}=gpu, but PyTorch sees no CUDA device (torch.cuda.is_available() is False). "
            "Install the GPU extras (make lab GPU=1, see the README) with an NVIDIA driver of the 580 "
            f"series or newer, or set {ENV_VAR}=cpu to run on the CPU."
        )
    if gpu is not None and gpu[1] < MIN_CAPABILITY:
        too_old = (f"{gpu[0]} is {arch_name(gpu[1])}; the course's GPU path needs compute capability "
                   f"{MIN_CAPABILITY[0]}.{MIN_CAPABILITY[1]} or newer (CUDA 13 builds for nothing older)")
        if requested == "gpu":
            raise RuntimeError(f"{ENV_VAR}=gpu, but {too_old}. Set {ENV_VAR}=cpu to run on the CPU.")
        gpu, why = None, too_old
    if gpu is not None:
        name, device_cap = gpu
        cap = assumed_capability(device_cap, os.environ.get(ASSUME_VAR))
        _configure_gpu()
        why = f"{ENV_VAR}=gpu" if requested == "gpu" else "PyTorch sees a CUDA device"
        _BACKEND = Backend("gpu", why, name, cap, device_cap)
    else:
        _configure_cpu()
        if not why:
            why = f"{ENV_VAR}=cpu" if requested == "cpu" else "no CUDA device visible to PyTorch"
        _BACKEND = Backend("cpu", why, "CPU")
    return _BACKEND


def get() -> Backend:
    """The backend of this process (chosen on first use)."""
    return select()


COMPILE_ONLY_DEVICE = "none (compile only)"


def use_compile_only(why: str = "kernels compiled for a GPU, never launched") -> Backend:
    """Replace the backend chosen on import by one that only compiles: numba's real CUDA target and
    Triton's compiler (no simulator, no interpreter), with or without a GPU; nothing is launched or
    timed. Call it before a course kernel module, or numba.cuda as the simulator, is imported: both fix
    their mode when imported."""
    global _BACKEND
    too_late = sorted(m for m in sys.modules if m.startswith("course_lib.kernels"))
    if "numba.cuda" in sys.modules:
        from numba import config

        if config.ENABLE_CUDASIM:
            too_late.insert(0, "numba.cuda (as the simulator)")
    if too_late:
        raise RuntimeError("use_compile_only() must come before numba.cuda and the course's kernel modules are "
                           f"imported; {', '.join(too_late)} already took the {get().name} backend")
    os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
    os.environ["TRITON_INTERPRET"] = "0"
    _guard_already_imported(want_simulator=False)
    _BACKEND = Backend("gpu", f"compile-only: {why}", COMPILE_ONLY_DEVICE)
    return _BACKEND


class NoGPUError(RuntimeError):
    """Raised when something that needs the GPU backend is asked for on the CPU backend."""


def require_gpu(what: str, does: str = "runs only on an NVIDIA GPU") -> None:
    """Raise :class:`NoGPUError` unless this process runs on the GPU backend."""
    if not get().is_gpu:
        raise NoGPUError(
            f"{what} {does} and needs the GPU backend; this is the {get().name} backend, where the "
            "simulator and the interpreter say nothing about GPU speed. course_lib.bench.bench(...) "
            "returns the recorded results."
        )


def sm_count() -> int:
    """Streaming multiprocessors of the current CUDA device (GPU backend only)."""
    require_gpu("sm_count")
    import torch

    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


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
    """Where the kernels run, on one line, and the library versions on a second (each short enough
    for JupyterLab's output area)."""
    b = get()
    where = f"the kernels run on {b.gpu_label}" if b.is_gpu else "numba's simulator and Triton's interpreter run the kernels"
    libs = ", ".join(f"{k} {v}" for k, v in versions().items())
    return f"backend {b.name} ({b.reason}): {where}\n{libs}"


def describe() -> None:
    """Print where the kernels run (backend, device) and the library versions."""
    print(describe_line())
