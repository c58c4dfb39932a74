"""The one registry of every GEMM the course builds.

Each stage has a name, the notebook that teaches it, the backend its kernels are written for, the
dtypes it supports and, per dtype, a callable with the course's one signature ``fn(a, b) -> c``.
Entry 0 is the reference: cuBLAS through ``torch.matmul``.
"""

from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch

from course_lib import backend
from course_lib.features import Feature, missing
from course_lib.gemm import DTYPES, GemmFn, check_dtype_name, dtype_of, prepare

# Kernel modules, in course order; each registers its stages when imported.
KERNEL_MODULES = (
    "course_lib.kernels.naive",
    "course_lib.kernels.shared_memory_tiling",
    "course_lib.kernels.thread_coarsening",
    "course_lib.kernels.coalescing_and_triton",
    "course_lib.kernels.tensor_cores",
)

BACKENDS = ("cublas", "numba", "triton", "cuda-extension")


class NotOnThisGPU(RuntimeError):
    """A stage was called where it cannot run: on the CPU backend (GPU-only stages), or on a GPU that
    lacks a feature it needs. The message says which; course_lib.bench shows the recorded results."""


@dataclass(frozen=True)
class Stage:
    """One GEMM of the course."""

    name: str  # registry key, e.g. "naive"
    notebook: str  # e.g. "01_naive" (notebooks/01_naive.ipynb)
    backend: str  # one of BACKENDS
    title: str  # a few words for charts and tables
    gemms: dict[str, GemmFn] = field(repr=False)  # course dtype name -> fn(a, b) -> c
    gpu_only: bool = False  # True: cannot run on the CPU backend at all
    needs: tuple[Feature, ...] = ()  # what its kernels use beyond CUDA 13 (course_lib.features)
    shape_multiple: int = 1  # M, N and K must be multiples of this (1: any shape)
    sweep: bool = False  # recording runs measure this stage over the whole size sweep
    variant_of: str | None = None  # a parameter variant of another stage (recorded at one size only)
    order: int = 0  # position in the course (charts sort by it)
    # True where the GEMM may add partial sums in its 16-bit output type (cuBLAS does, as PyTorch
    # allows by default: torch.backends.cuda.matmul.allow_{fp16,bf16}_reduced_precision_reduction);
    # course_lib.check then allows that rounding too. The course's kernels sum in fp32.
    rounds_partial_sums: bool = False
    # For a stage that picks its configuration per shape at run time: what it picked so far in this
    # process, one dict per shape with "chosen" and "candidates_ms" (recordings keep it).
    tuning_log: Callable[[], list[dict]] | None = field(default=None, repr=False)

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(self.gemms)

    def gemm(self, dtype: str = "fp32") -> GemmFn:
        """The callable ``fn(a, b) -> c`` of this stage for one course dtype; where the stage cannot
        run (see :meth:`why_not_here`) a callable that raises :class:`NotOnThisGPU` saying why."""
        check_dtype_name(dtype)
        if dtype not in self.gemms:
            raise ValueError(
                f"stage {self.name!r} supports {', '.join(self.dtypes)}, not {dtype}"
            )
        why = self.why_not_here(dtype)
        if why is not None:
            def refuse(a: object, b: object) -> object:
                raise NotOnThisGPU(f"{why}; course_lib.bench shows its recorded results")

            return refuse
        return self.gemms[dtype]

    def missing_feature(self, dtype: str, capability: backend.Capability,
                        device: backend.Capability | None = None) -> Feature | None:
        """What a GPU of compute capability ``capability`` lacks to run this stage in ``dtype``
        (``device``: its real capability, when the course treats it as an older one)."""
        return missing(self.needs, check_dtype_name(dtype), capability, device)

    def why_not_here(self, dtype: str) -> str | None:
        """Why this stage cannot run in ``dtype`` on this backend, in one line (None: it can)."""
        b = backend.get()
        if not b.is_gpu:
            if self.gpu_only:
                return f"stage {self.name!r} runs only on an NVIDIA GPU and this is the {b.name} backend"
            return None
        feature = self.missing_feature(dtype, b.capability, b.device_capability)
        if feature is None:
            return None
        return (f"stage {self.name!r} ({dtype}) needs {feature.name}, compute capability {feature.where}; "
                f"this GPU is {b.gpu_label}")

    def __call__(self, a: object, b: object) -> object:
        """Run the stage; fp32 inputs mean exact fp32 arithmetic (use gemm('tf32') for TF32)."""
        return self.gemm(dtype_of(a))(a, b)


_STAGES: dict[str, Stage] = {}
_loaded = False


def register(stage: Stage) -> Stage:
    if stage.backend not in BACKENDS:
        raise ValueError(f"unknown backend {stage.backend!r}; one of {BACKENDS}")
    for d in stage.gemms:
        check_dtype_name(d)
    if stage.name in _STAGES and _STAGES[stage.name] is not stage:
        raise ValueError(f"a stage named {stage.name!r} is already registered")
    _STAGES[stage.name] = stage
    return stage


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in KERNEL_MODULES:
        importlib.import_module(module)


def stages() -> list[Stage]:
    """Every registered stage, cuBLAS first, then in course order."""
    _load()
    return sorted(_STAGES.values(), key=lambda s: (s.order, s.name))


def get_stage(name: str) -> Stage:
    _load()
    try:
        return _STAGES[name]
    except KeyError:
        raise KeyError(
            f"no stage named {name!r}; registered: {', '.join(s.name for s in stages())}"
        ) from None


# ---- entry 0: cuBLAS ---------------------------------------------------------------------------
@contextlib.contextmanager
def _tf32(enabled: bool) -> Iterator[None]:
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def _cublas(dtype: str) -> GemmFn:
    def gemm(a: object, b: object) -> object:
        ops = prepare(a, b, stage="cublas", dtypes=(dtype,))
        with _tf32(dtype == "tf32"):
            c = torch.matmul(ops.a, ops.b)
        return ops.give_back(c)

    gemm.__name__ = f"cublas_{dtype}"
    gemm.__doc__ = f"cuBLAS via torch.matmul ({dtype}); on the CPU backend, PyTorch's CPU matmul."
    return gemm


CUBLAS = register(
    Stage(
        name="cublas",
        notebook="",
        backend="cublas",
        title="cuBLAS (torch.matmul)",
        gemms={d: _cublas(d) for d in DTYPES},
        order=-1,
        rounds_partial_sums=True,
    )
)


def stage_or_callable(gemm: str | Stage | Callable, dtype: str) -> tuple[str, GemmFn]:
    """Resolve what check/bench were given to a label and a callable for ``dtype``."""
    if isinstance(gemm, str):
        gemm = get_stage(gemm)
    if isinstance(gemm, Stage):
        return gemm.name, gemm.gemm(dtype)
    if callable(gemm):
        return getattr(gemm, "__name__", repr(gemm)), gemm
    raise TypeError(f"expected a stage name, a Stage or a callable fn(a, b) -> c, not {gemm!r}")
