"""The course manifest: every GEMM the course builds, in course order, and how to look one up.

:func:`course` lists one row per stage - its name, the notebook that teaches it, the backend its
kernels are written for and, per course dtype, a callable with the course's one signature
``fn(a, b) -> c`` - in the order the course teaches them; that order is the only one charts and
tables use. Row 0 is the reference: cuBLAS through ``torch.matmul``. The kernel modules know nothing
of this list (they define kernels and their wrappers); adding a stage is one row here plus its
kernel module, or for a CUDA stage its ``.cu`` file and binding line (MAINTAINING.md, "Add a stage").
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch

from course_lib import backend, dtypes, fp8
from course_lib.features import Feature, NotOnThisGPU, missing, why_not_here
from course_lib.gemm import GemmFn, dtype_of, planned, prepare
from course_lib.model import hardware

BACKENDS = ("cublas", "numba", "triton", "cuda-extension")
__all__ = ["BACKENDS", "NotOnThisGPU", "Stage", "course", "get_stage", "stages"]


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
    # The shape rule (course_lib.model.layout.fits; 1: any shape), or one per dtype (or per FP8
    # dtype and scaling) where they differ: {dtype or (dtype, scaling): rule}, any shape where
    # neither is named. Read it with shape_rule(dtype, scaling).
    shape_multiple: int | tuple[int, int, int] | dict = 1
    sweep: bool = False  # recording runs measure this stage over the whole size sweep
    variant_of: str | None = None  # a parameter variant of another stage (recorded at one size only)
    order: int = 0  # position in the course manifest (set by it; charts sort by it)
    # True where the GEMM may add partial sums in its 16-bit output type (cuBLAS does, as PyTorch
    # allows by default: torch.backends.cuda.matmul.allow_{fp16,bf16}_reduced_precision_reduction);
    # course_lib.check then allows that rounding too. The course's kernels sum in fp32.
    rounds_partial_sums: bool = False
    # For a stage that picks its configuration per shape at run time: what it picked so far in this
    # process, one dict per shape with "chosen" and "candidates_ms" (recordings keep it).
    tuning_log: Callable[[], list[dict]] | None = field(default=None, repr=False)
    # For a stage whose launcher picks its tile and schedule by the shape: what it runs at M x N x K on
    # this GPU, in a few words ("128x128 whole tiles"); measure() keeps it in each record.
    plan: Callable[[int, int, int], str] | None = field(default=None, repr=False)
    # An FP8 stage (dtype "e4m3"): the operand scalings it takes (keys of course_lib.fp8.OPERAND_SCALING).
    scalings: tuple[str, ...] = ()

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(self.gemms)

    def shape_rule(self, dtype: str, scaling: str | None = None) -> int | tuple[int, int, int]:
        """The shapes this stage takes in ``dtype`` (and FP8 ``scaling``): course_lib.model.layout's rule."""
        if isinstance(self.shape_multiple, dict):
            name = dtypes.get(dtype).name
            return self.shape_multiple.get((name, scaling), self.shape_multiple.get(name, 1))
        return self.shape_multiple

    def gemm(self, dtype: str = "fp32") -> GemmFn:
        """The callable ``fn(a, b) -> c`` of this stage for one course dtype; where the stage cannot
        run (see :meth:`why_not_here`) a callable that raises :class:`NotOnThisGPU` saying why."""
        dtype = dtypes.get(dtype).name
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
        return missing(self.needs + dtypes.get(dtype).needs, capability, device)

    def why_not_here(self, dtype: str) -> str | None:
        """Why this stage cannot run in ``dtype`` on this backend, in one line (None: it can)."""
        return why_not_here(f"stage {self.name!r} ({dtype})", self.needs + dtypes.get(dtype).needs, self.gpu_only)

    def __call__(self, a: object, b: object) -> object:
        """Run the stage; fp32 inputs mean exact fp32 arithmetic (use gemm('tf32') for TF32)."""
        return self.gemm(dtype_of(a))(a, b)


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
    # allow_tf32 governs products of float32 tensors only (PyTorch's notes, "TensorFloat-32 (TF32) on
    # Ampere (and later) devices"), so a call with planned operands of another type skips the switch
    # (three property calls: microseconds on the host).
    switch = dtypes.get(dtype).torch_dtype == torch.float32

    def checked(a: object, b: object) -> tuple[object, str]:
        ops = prepare(a, b, stage="cublas", dtypes=(dtype,))
        with _tf32(dtype == "tf32"):
            c = torch.matmul(ops.a, ops.b)
        return ops.give_back(c), "checked"  # the plan: cuBLAS makes every other choice

    def again(plan: str, a: object, b: object) -> object:
        if not switch:
            return torch.matmul(a, b)
        with _tf32(dtype == "tf32"):
            return torch.matmul(a, b)

    gemm = planned(checked, again)
    gemm.__name__ = gemm.__qualname__ = f"cublas_{dtype}"
    gemm.__doc__ = f"cuBLAS via torch.matmul ({dtype}); on the CPU backend, PyTorch's CPU matmul."
    return gemm


def _with(fn: Callable, name: str, **kwargs) -> GemmFn:
    """``fn(a, b, **kwargs)`` as a course GEMM ``gemm(a, b)`` named ``name``: one stage of a kernel
    that takes a parameter (a tile size, a configuration, a dtype)."""
    def gemm(a: object, b: object) -> object:
        return fn(a, b, **kwargs)

    gemm.__name__ = gemm.__qualname__ = name
    first_line = (fn.__doc__ or fn.__name__).strip().splitlines()[0]
    gemm.__doc__ = f"{first_line} {kwargs}" if kwargs else first_line
    return gemm


def _per_dtype(fn: Callable, name: str, names: tuple[str, ...]) -> dict[str, GemmFn]:
    """One course GEMM per dtype in ``names`` of a wrapper ``fn(a, b, dtype)``."""
    return {d: _with(fn, f"{name}_{d}", dtype=d) for d in names}


def _cuda(name: str, notebook: str, title: str, shape_multiple: int | tuple[int, int, int], *,
          sweep: bool = False, plan: Callable[[int, int, int], str] | None = None, **knobs) -> Stage:
    """The row of a stage of the tensor-core extension: its kernel is ``csrc/<name>.cu`` with its line
    in the binding (``csrc/tc_binding.cu``), a bf16 GEMM ``c = a @ b``; what it needs of a GPU is
    what its build targets (sm_90a where the binding lists it under ``#ifdef TC_WITH_SM90A``).
    ``knobs``: the extension entry's other arguments (a callable is called for its value at launch)."""
    from course_lib.kernels import tensor_cores

    return Stage(name=name, notebook=notebook, backend="cuda-extension", title=title,
                 gemms={"bf16": tensor_cores.make_gemm(name, shape_multiple=shape_multiple, **knobs)},
                 gpu_only=True, needs=tensor_cores.design(name).needs, shape_multiple=shape_multiple, sweep=sweep,
                 plan=plan)


def _stage6_plan(M: int, N: int, K: int) -> str:
    """Stage 6's tile and schedule at M x N x K as its manifest row launches it (one CTA per SM)."""
    from course_lib.kernels import tensor_cores

    return " ".join(tensor_cores.stage6_launch_plan(M, N, K, max_ctas=backend.sm_count()))


def _manifest() -> list[Stage]:
    """The course, in order (imports the kernel modules: numba, Triton, the extension's wrappers)."""
    from course_lib.kernels import coalescing_and_triton as c04
    from course_lib.kernels import naive, shared_memory_tiling, tensor_cores, thread_coarsening

    tiling, coarse = shared_memory_tiling, thread_coarsening
    # Which dtypes each stage computes is said here, row by row: a new dtype record joins no stage
    # until its row lists it (with a wrapper that computes it).
    four = ("fp32", "tf32", "fp16", "bf16")
    rows16 = hardware.tma_elements("bf16")  # TMA copies rows of a multiple of 16 bytes: 8 bf16
    t02 = "02 shared-memory tiling (T={})"
    rows = [
        Stage(name="cublas", notebook="", backend="cublas", title="cuBLAS (torch.matmul; FP8: torch._scaled_mm)",
              gemms={**{d: _cublas(d) for d in four}, "e4m3": fp8.cublas_fp8}, rounds_partial_sums=True,
              scalings=tuple(fp8.OPERAND_SCALING), shape_multiple={"e4m3": fp8.SCALED_MM_SHAPE_MULTIPLE,
                                                                   ("e4m3", "block"): fp8.SCALED_MM_BLOCK_SHAPE_MULTIPLE}),
        # 01: one thread per element of C
        Stage(name="naive", notebook="01_naive", backend="numba", title="01 naive (x along columns)",
              gemms={"fp32": naive.naive}),
        Stage(name="naive_x_along_rows", notebook="01_naive", backend="numba", title="01 naive (x along rows)",
              gemms={"fp32": naive.naive_x_along_rows}),
        # 02: tiles of A and B staged in shared memory; the other tile sizes are its variants
        Stage(name="shared_memory_tiling", notebook="02_shared_memory_tiling", backend="numba",
              title=t02.format(tiling.DEFAULT_TILE),
              gemms={"fp32": _with(tiling.shared_memory_tiling, f"shared_memory_tiling_t{tiling.DEFAULT_TILE}",
                                   tile=tiling.DEFAULT_TILE)}),
        *(Stage(name=f"shared_memory_tiling_t{t}", notebook="02_shared_memory_tiling", backend="numba",
                title=t02.format(t), variant_of="shared_memory_tiling",
                gemms={"fp32": _with(tiling.shared_memory_tiling, f"shared_memory_tiling_t{t}", tile=t)})
          for t in tiling.TILE_SIZES if t != tiling.DEFAULT_TILE),
        # 03: several outputs per thread; the register-tiling configurations are its variants
        Stage(name="coarsened_2x2", notebook="03_thread_coarsening", backend="numba",
              title="03 thread coarsening 2x2", gemms={"fp32": coarse.coarsened_2x2}),
        Stage(name="register_tiling", notebook="03_thread_coarsening", backend="numba", sweep=True,
              title=f"03 register tiling {coarse.DEFAULT_CONFIG.TM}x{coarse.DEFAULT_CONFIG.TN}/thread, "
                    f"{coarse.DEFAULT_CONFIG.BM}x{coarse.DEFAULT_CONFIG.BN}/block",
              gemms={"fp32": _with(coarse.register_tiling, "register_tiling", config=coarse.DEFAULT_CONFIG)}),
        *(Stage(name=name, notebook="03_thread_coarsening", backend="numba", title=coarse.variant_title(cfg),
                variant_of="register_tiling", gemms={"fp32": _with(coarse.register_tiling, name, config=cfg)})
          for name, cfg in sorted(coarse.SWEEP_CONFIGS.items())),
        # 04 and 05: Triton
        Stage(name="triton_tiled", notebook=c04.NOTEBOOK, backend="triton", title="Triton tiled (pointers + masks)",
              gemms=_per_dtype(c04.tiled_matmul, "triton_tiled", four)),
        Stage(name="triton_tiled_transposed_b", notebook=c04.NOTEBOOK, backend="triton",
              title="Triton tiled, B pre-transposed (the article's experiment)",
              gemms=_per_dtype(c04.tiled_matmul_transposed_b, "triton_tiled_transposed_b", four)),
        # check() rounds the descriptor stage's shapes up to one multiple that makes 16-byte rows in every dtype.
        Stage(name="triton_tiled_descriptors", notebook=c04.FAST_NOTEBOOK, backend="triton",
              shape_multiple=max(hardware.tma_elements(d) for d in four),
              title="Triton tiled (tensor descriptors)",
              gemms=_per_dtype(c04.tiled_matmul_descriptors, "triton_tiled_descriptors", four)),
        Stage(name="triton_fast", notebook=c04.FAST_NOTEBOOK, backend="triton", sweep=True,
              title="Triton fast (grouped, descriptors, tuned)",
              gemms=_per_dtype(c04.fast_matmul_autotuned, "triton_fast", four), tuning_log=c04.tuning_log),
        # 07 to 09: tensor cores from CUDA C++ (stage 0, then the staircase whose last step is swept).
        # TMA, and stage 1's 16-byte loads, need every row of A, B and C to start on a 16-byte boundary.
        _cuda("tc_0_mma_sync_minimal", "07_mma_sync_kernels", "mma.sync, fragments from global memory", 1),
        _cuda("tc_1_mma_sync", "07_mma_sync_kernels", "mma.sync + ldmatrix (warp-level)", rows16),
        _cuda("tc_2_wgmma_tma", "08_hopper_tensor_cores", "wgmma + TMA, 128B swizzle", rows16),
        _cuda("tc_3_pipeline", "09_hopper_pipelines", "5-slot mbarrier pipeline", rows16),
        _cuda("tc_4_warp_specialized", "09_hopper_pipelines", "warp specialisation, setmaxnreg, 128x256", rows16),
        _cuda("tc_5_persistent", "09_hopper_pipelines", "persistent + clusters, TMA multicast", rows16),
        # Stage 6 takes any M (TMA fills a partial box of A's rows, clips C's), and runs at most one CTA
        # per SM (the textbook persistent grid): on the H200 that measured better than the grid derived
        # from occupancy (stage 5's), at 4096^3 and at 8192^3.
        _cuda("tc_6_tma_store", "09_hopper_pipelines", "wgmma in flight + TMA-store epilogue", (1, rows16, rows16),
              sweep=True, group_m=8, max_ctas=backend.sm_count, plan=_stage6_plan),
        # 12: FP8 - e4m3 operands with their scales (course_lib.fp8), C = A W^T in bf16
        Stage(name="triton_fp8", notebook="12_fp8", backend="triton", title="Triton FP8 (e4m3)",
              gemms={"e4m3": c04.triton_fp8}, scalings=tuple(fp8.OPERAND_SCALING)),
        Stage(name=tensor_cores.FP8_STAGE.stage, notebook="12_fp8", backend="cuda-extension",
              title="FP8 (e4m3) wgmma, scaled in the epilogue or per K slice", gemms={"e4m3": tensor_cores.tc_7_fp8},
              gpu_only=True, needs=tensor_cores.FP8_STAGE.needs, shape_multiple=tensor_cores.FP8_SHAPE_MULTIPLE,
              scalings=tuple(fp8.OPERAND_SCALING)),
    ]
    return [dataclasses.replace(s, order=i) for i, s in enumerate(rows)]


_COURSE: dict[str, Stage] | None = None


def _validated(rows: list[Stage]) -> dict[str, Stage]:
    out: dict[str, Stage] = {}
    for s in rows:
        if s.backend not in BACKENDS:
            raise ValueError(f"stage {s.name!r}: unknown backend {s.backend!r}; one of {BACKENDS}")
        for d in s.gemms:
            if dtypes.get(d).operands == "fp8" and not s.scalings:
                raise ValueError(f"stage {s.name!r} computes {d}: its row must list the scalings it takes")
        if s.name in out:
            raise ValueError(f"the course manifest lists a stage named {s.name!r} twice")
        if s.variant_of is not None and s.variant_of not in out:
            raise ValueError(f"stage {s.name!r} is a variant of {s.variant_of!r}, which must come before it")
        out[s.name] = s
    return out


def course() -> list[Stage]:
    """Every stage, cuBLAS first, then in course order (the manifest's)."""
    global _COURSE
    if _COURSE is None:
        _COURSE = _validated(_manifest())
    return list(_COURSE.values())


stages = course  # the name the notebooks and the package face use


def get_stage(name: str) -> Stage:
    course()  # the manifest, built once
    try:
        return _COURSE[name]
    except KeyError:
        raise KeyError(f"no stage named {name!r}; the course has: {', '.join(_COURSE)}") from None
