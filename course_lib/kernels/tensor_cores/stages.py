"""The tensor-core stages: what each kernel is made of (:class:`Design`, one per entry of the
extension's binding and ``.cu`` file in ``course_lib/csrc``), how the extension is built for a GPU
(:func:`build_plan`, :func:`extension`), and the wrapper that makes a stage a GEMM of the course's one
signature (:func:`make_gemm`; the course manifest, ``course_lib.registry``, makes each stage's).

A stage is written in C++ only: its ``.cu`` file and its entry in the binding (``tc_binding.cu``,
where C++ needs it). Which stages exist, in which order, and which need sm_90a are read from the
binding (:func:`.csrc.entries`); a stage's tile, threads, pipeline slots and cluster are the constants
of its ``.cu`` file, read by name (:mod:`.csrc`); its shared memory is computed here from them, as the
kernel lays it out, and a test holds that to the compiler (ptxas's report; ``SMEM_BYTES`` by
``static_assert``). Its words (title, notebook) and its shape rule are its row in the manifest.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

import torch

from course_lib import backend, compiler, dtypes, features, fp8
from course_lib.features import BF16_TENSOR_CORES, HOPPER_SM90A, Feature
from course_lib.gemm import LaunchPlans, new_output, planned, prepare
from course_lib.kernels.tensor_cores import csrc
from course_lib.kernels.tensor_cores.csrc import BINDING
from course_lib.model.hardware import BF16_BYTES, TMA_ALIGN_BYTES, tma_elements


@dataclasses.dataclass(frozen=True)
class Design:
    """What a stage's kernel is made of: its numbers, from its .cu file."""

    stage: str
    hopper: bool  # needs sm_90a (wgmma, TMA): the binding lists it under #ifdef TC_WITH_SM90A

    @property
    def source(self) -> str:
        """The stage's .cu file in csrc/: its name is the stage's, as is its extension entry's."""
        return f"{self.stage}.cu"

    @property
    def constants(self) -> dict[str, int | float]:
        """The constexprs of the stage's .cu file (and of the headers it includes), by name."""
        return csrc.constants(self.source)

    @property
    def needs(self) -> tuple[Feature, ...]:
        """What the stage's kernels need of a GPU (course_lib.features), beyond its dtype's needs:
        what its build targets, sm_90a or sm_80 and newer."""
        return (HOPPER_SM90A,) if self.hopper else (BF16_TENSOR_CORES,)

    @property
    def block(self) -> tuple[int, int, int]:
        """BLOCK_M, BLOCK_N, BLOCK_K: the tile of C a CTA computes, and the K slice it loads at once."""
        c = self.constants
        return c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"]

    @property
    def threads(self) -> int:
        return self.constants["THREADS"]

    @property
    def stages(self) -> int:
        """Shared-memory slots of the pipeline (1: no pipeline)."""
        return self.constants.get("STAGES", 1)

    @property
    def cluster(self) -> int:
        """CTAs per cluster (2: B's slices multicast to both)."""
        return self.constants.get("CLUSTER", 1)

    @property
    def mma_sync_per_slice(self) -> int:
        """mma.sync.m16n8k16 one warp issues per BLOCK_K slice of K: its WARP_M x WARP_N piece of C
        in 16 x 8 tiles, times BLOCK_K / 16 (0 for the wgmma stages)."""
        if self.hopper:
            return 0
        c = self.constants
        warp_m, warp_n = c["BLOCK_M"] // c["WARPS_M"], c["BLOCK_N"] // c["WARPS_N"]
        return (warp_m // c["MMA_M"]) * (warp_n // c["MMA_N"]) * (c["BLOCK_K"] // c["MMA_K"])

    @property
    def smem_bytes(self) -> int:
        """Shared memory per CTA, as the kernel lays it out: stage 1's padded tiles (static), or a
        ring of A and B slots, their mbarriers, stage 6's staging boxes and SMEM_SLACK bytes of
        alignment slack (dynamic; the .cu's SMEM_BYTES)."""
        c, (bm, bn, bk) = self.constants, self.block
        if not self.hopper:
            return BF16_BYTES * (bm * c["A_PITCH"] + bk * c["B_PITCH"]) if "A_PITCH" in c else 0
        return self.ring_smem_bytes(bn, self.stages)

    def ring_smem_bytes(self, block_n: int, stages: int) -> int:
        """Dynamic shared memory of a wgmma stage's kernel with BLOCK_M x ``block_n`` tiles and
        ``stages`` ring slots: the slots of A and B, their mbarriers, stage 6's staging boxes (half of
        each consumer's 64 x ``block_n`` tile; all of it, one box, for the 128 x 64 tile) and SMEM_SLACK
        bytes of alignment slack. Stage 6's narrower tiles: ``ring_smem_bytes(NARROW_BLOCK_N,
        NARROW_STAGES)`` and ``ring_smem_bytes(NARROWEST_BLOCK_N, NARROWEST_STAGES)``, its
        ``smem_bytes<BN>()``."""
        from course_lib.kernels.tensor_cores.model import stage6_epilogue_rounds

        c, (bm, _, bk) = self.constants, self.block
        if not self.hopper:
            raise ValueError(f"{self.stage} has no ring of wgmma slots (its tiles are static shared memory)")
        barriers = 8 * (2 * stages if "STAGES" in c else 1)  # full (and empty) per slot
        staged_cols = stage6_epilogue_rounds(block_n)[0]
        staging = BF16_BYTES * c["CONSUMERS"] * staged_cols * c["C_BOX"] if "C_HALF_BOXES" in c else 0
        return stages * (bm + block_n) * bk * BF16_BYTES + barriers + staging + c["SMEM_SLACK"]


def design(stage: str) -> Design:
    """The design of a stage the binding lists (read now: a test adds a stage to a copy of csrc/)."""
    for e in csrc.entries():
        if e.stage == stage:
            return Design(e.stage, e.sm90a)
    raise KeyError(f"{BINDING} binds no stage named {stage!r}; a stage is its .cu file and its line there")


# The stages of the one signature (bf16 c = a @ b), in the binding's order. Stage 0 stands before the
# staircase: the smallest correct use of the tensor cores, read line by line in notebook 07.
# DESIGNS is the staircase (stages 1-6) that charts and tables walk; ALL_DESIGNS has stage 0 too.
ALL_DESIGNS: tuple[Design, ...] = tuple(Design(e.stage, e.sm90a) for e in csrc.entries() if e.one_signature)
MINIMAL, DESIGNS = ALL_DESIGNS[0], ALL_DESIGNS[1:]
DESIGN = {d.stage: d for d in ALL_DESIGNS}
# Stage 7 leaves the bf16 staircase: its operands are FP8 with their scales (course_lib.fp8), so it
# has its own binding and wrapper (tc_7_fp8 below) and is taught in notebook 12.
FP8_STAGE = design("tc_7_fp8")


# ---- the extension (GPU only) ---------------------------------------------------------------
_EXTENSION = None


def build_plan(capability: tuple[int, int], *, ptx_only: bool = False) -> tuple[list[Path], list[str], str]:
    """Sources, nvcc flags and extension name for a GPU the course treats as compute capability
    ``capability``: the binding and the ``.cu`` file of every stage it lists - on Hopper all of them,
    for sm_90a; on other GPUs of sm_80 or newer those outside its ``#ifdef TC_WITH_SM90A``.

    ``ptx_only`` compiles those to PTX alone, which the driver compiles for the real GPU when the
    extension loads: how the course runs an older GPU's build on a newer one (COURSE_ASSUME_CAPABILITY).
    """
    major, minor = capability
    if not BF16_TENSOR_CORES.available(capability):
        raise RuntimeError(f"the tensor-core stages need {BF16_TENSOR_CORES.name} (compute capability "
                           f"{BF16_TENSOR_CORES.where}), and this GPU is treated as {major}.{minor}")
    entries = csrc.entries()
    if HOPPER_SM90A.available(capability) and not ptx_only:
        stages = [e.stage for e in entries]
        flags = [compiler.SM90A, f"-D{csrc.SM90A_GUARD}"]
        name = "course_tensor_cores_sm90a"
    else:  # wgmma does not exist here (or is not assumed to): the stages for sm_80 and newer only
        stages = [e.stage for e in entries if not e.sm90a]
        code = f"compute_{major}{minor}" if ptx_only else f"sm_{major}{minor}"
        flags = [f"-gencode=arch=compute_{major}{minor},code={code}"]
        name = f"course_tensor_cores_{code.replace('compute_', 'ptx')}"
    sources = [csrc.CSRC / f"{stage}.cu" for stage in stages] + [csrc.CSRC / BINDING]
    return sources, [f for f in compiler.NVCC_FLAGS if f != "-std=c++17"] + flags, name  # torch adds -std


def build_extension(verbose: bool = False):
    """Build or load the course's extension for this GPU (:func:`build_plan`)."""
    backend.require_gpu("the tensor-core extension",
                        "runs only on an NVIDIA GPU (on the CPU, compile_stage() shows what the compiler makes of it)")
    b = backend.get()
    sources, flags, name = build_plan(b.capability, ptx_only=b.assumed)
    return compiler.load_extension(name, sources, flags, include_paths=(csrc.CSRC,), verbose=verbose)


def extension(verbose: bool = False):
    """Build (first call, ~1 minute) or load the extension for this GPU and return the module."""
    global _EXTENSION
    if _EXTENSION is None:
        _EXTENSION = build_extension(verbose=verbose)
    return _EXTENSION


# ---- the stages: check, allocate, launch ----------------------------------------------------
def make_gemm(stage: str, launcher: Callable[[], Callable] | None = None, *,
              shape_multiple: int | tuple[int, int, int], **knobs) -> Callable:
    """The GEMM function of a stage the binding lists: check the operands (``shape_multiple``: the
    stage's shape rule, course_lib.model.layout.fits; its manifest row says it), allocate C, launch.
    ``launcher()`` gives the function to launch (default: the extension's entry named for the stage),
    called as ``launch(a, b, c, **knobs)``; a knob that is callable is called for its value at launch.

    The first call with operands of a :func:`course_lib.gemm.plan_key` checks them and resolves the
    launch function and the knobs; the plan keeps both, and later calls with that key only allocate
    C and launch (:func:`course_lib.gemm.planned`; the extension still checks what it checks, on
    every call)."""
    needs = design(stage).needs + dtypes.BF16.needs

    def checked(a: object, b: object) -> tuple[object, tuple[Callable, dict]]:
        ops = prepare(a, b, stage=stage, dtypes=("bf16",), contiguous=True, shape_multiple=shape_multiple)
        why = features.why_not_here(f"stage {stage!r} (bf16)", needs, gpu_only=True)
        if why is not None:
            raise features.NotOnThisGPU(why)
        for name, t in (("a", ops.a), ("b", ops.b)):
            if shape_multiple != 1 and t.data_ptr() % TMA_ALIGN_BYTES:  # stage 0 reads element by element
                raise ValueError(
                    f"{stage}: {name} does not start on a {TMA_ALIGN_BYTES}-byte boundary (a view "
                    f"into a larger tensor?); pass {name}.clone()"
                )
        launch = launcher() if launcher else getattr(extension(), stage)
        c = new_output(ops.M, ops.N, torch.bfloat16, ops.a.device)
        resolved = {k: (v() if callable(v) else v) for k, v in knobs.items()}
        launch(ops.a, ops.b, c, **resolved)  # launches on torch.cuda.current_stream()
        return ops.give_back(c), (launch, resolved)

    def again(plan: tuple[Callable, dict], a: object, b: object) -> object:
        launch, resolved = plan
        c = new_output(a.shape[0], b.shape[1], torch.bfloat16, a.device)
        launch(a, b, c, **resolved)
        return c

    gemm = planned(checked, again)
    gemm.__name__ = gemm.__qualname__ = stage
    gemm.__doc__ = f"Stage {stage}: c = a @ b, bf16 in and out, fp32 accumulation ({stage}.cu)."
    return gemm


def stage6_launch_plan(M: int, N: int, K: int, *, max_ctas: int = 0, schedule: str = "auto",
                       block_n: int = 0) -> "Stage6Plan":
    """What stage 6's launcher runs at M x N x K on this GPU, asked of the extension itself (its
    resident clusters counted by the occupancy API): the tile and the schedule, as
    :func:`course_lib.kernels.tensor_cores.model.stage6_plan` names them. ``max_ctas``, ``schedule``
    and ``block_n`` as the stage takes them (0: every resident cluster; "auto" and 0: by the shape)."""
    from course_lib.kernels.tensor_cores.model import SCHEDULE_CODES, Stage6Plan, schedule_code

    rows, cols, code = extension().tc_6_tma_store_plan(M, N, K, max_ctas, schedule_code(schedule), block_n)
    return Stage6Plan(f"{rows}x{cols}", next(name for name, c in SCHEDULE_CODES.items() if c == code))


# ---- stage 7: FP8 -----------------------------------------------------------------------------
# Stage 7's shape rule, which its wrapper checks with its own message (its manifest row reads it): any
# M; N a multiple of 8 (16 bytes of bf16 C) and K of 16 (16 e4m3), as TMA copies rows of 16 bytes.
FP8_SHAPE_MULTIPLE = (1, tma_elements("bf16"), tma_elements("e4m3"))
# The extension's scaling codes (tc_launch.h).
FP8_SCALING_CODE = {"tensor": 0, "row": 1, "block": 2}
# Shapes stage 7 takes (N a multiple of 8, K of 16) that cut its tiles (128 x 256, or 128 x 128 when
# promoting) and the 128-wide K blocks of block scales: K = 208 and 528 end in a partial block;
# M = 1, 37, 300 a partial tile row; N = 8, 72, 1000 partial tile columns.
FP8_SHAPES = ((1, 8, 16), (37, 72, 208), (130, 136, 256), (16, 264, 1024), (300, 1000, 528), (1, 4096, 4096),
              (1000, 1032, 4096), (2048, 2048, 2048))


def tc_7_fp8(qa: object, qw: object, *, fast_accumulation: bool = False, group_m: int = 8,
             max_ctas: int | None = None) -> torch.Tensor:
    """C = A @ W^T (M x N, bf16) from e4m3 A = ``qa`` (M x K, activations) and W = ``qw`` (N x K,
    the weight of nn.Linear), :class:`course_lib.fp8.Quantized` both: one scale per tensor or per row
    (either operand, applied as C is written), or DeepSeek-V3's blocks (A per 1 x 128, W per 128 x 128,
    applied to each 128-wide K slice). The sums are promoted into fp32 every 128 of K unless
    ``fast_accumulation`` (per tensor or row only: then the tensor core's narrower accumulator adds
    all of K, as cuBLAS's ``use_fast_accum``). Any M; N a multiple of 8 and K of 16 (16-byte rows for
    TMA). ``max_ctas``: the persistent grid (default: one CTA per SM, as stage 6).

    The checks run once per kind of operands (:func:`course_lib.fp8.fp8_plan_key` with the options);
    a later call with operands of that kind only prepares the arguments and launches."""
    key = fp8.fp8_plan_key(qa, qw, (bool(fast_accumulation), group_m, max_ctas))
    plan = _TC7_PLANS.get(key)
    checked = plan is None
    if checked:
        plan = _tc_7_fp8_plan(qa, qw, fast_accumulation)
    args = _tc_7_fp8_launch_arguments(plan, qa, qw, fast_accumulation)
    extension().tc_7_fp8(*args, group_m, backend.sm_count() if max_ctas is None else max_ctas)
    if checked:  # kept only once a launch with it succeeded
        _TC7_PLANS.keep(key, plan)
    return args[4]


@dataclasses.dataclass(frozen=True)
class _Tc7Plan:
    """What stage 7's checks decided for operands of one kind: C's shape, the scaling, which operands
    carry one scale per row, and which operands' values must be copied (TMA reads contiguous rows from
    16-byte aligned addresses)."""

    M: int
    N: int
    scaling: str
    per_row: tuple[bool, bool]
    copy: tuple[bool, bool]
    # Whether an operand's scales go to the kernel as they are (contiguous fp32, and not one scale to be
    # repeated per row): then a call makes no view or copy of them (host time per call).
    scales_as_given: tuple[bool, bool] = (False, False)


_TC7_PLANS = LaunchPlans()
tc_7_fp8.plans = _TC7_PLANS


def tc_7_fp8_arguments(qa: object, qw: object, fast_accumulation: bool = False) -> tuple:
    """The checks of :func:`tc_7_fp8`, then the extension's arguments: A's and W's values, their fp32
    scales as the kernel reads them, a new C, the scaling code and ``fast_accumulation``."""
    return _tc_7_fp8_launch_arguments(_tc_7_fp8_plan(qa, qw, fast_accumulation), qa, qw, fast_accumulation)


def _tc_7_fp8_plan(qa: object, qw: object, fast_accumulation: bool) -> _Tc7Plan:
    """Stage 7's checks: each raises with what to do."""
    stage = FP8_STAGE.stage
    blocks = (all(isinstance(q, fp8.Quantized) for q in (qa, qw))
              and (tuple(qa.block), tuple(qw.block)) == fp8.BLOCK_SCALES)
    M, N, K, rows_a, rows_w = fp8.check_gemm_operands(qa, qw, stage, blocks=blocks,
                                                      block_kernel=f"{stage} (both operands in blocks)")
    if fast_accumulation and blocks:
        raise ValueError(f"{stage}: block scales change every 128 of K, so the kernel applies them as it promotes "
                         "each slice's sums into fp32: fast_accumulation=True takes scales per tensor or per row")
    _, n_multiple, k_multiple = FP8_SHAPE_MULTIPLE
    if N % n_multiple or K % k_multiple:
        raise ValueError(f"{stage}: N = {N} and K = {K}, but TMA copies rows of 16 bytes: K must be a multiple "
                         f"of {k_multiple} (16 e4m3) and N of {n_multiple} (16 bytes of bf16 C); pad W and A "
                         "with zero columns of K (or W with zero rows) and cut C")
    why = features.why_not_here(f"stage {stage!r} (e4m3)", FP8_STAGE.needs + (features.FP8_TENSOR_CORES,),
                                gpu_only=True)
    if why is not None:
        raise features.NotOnThisGPU(why)
    copy = tuple(not (q.values.is_contiguous() and q.values.data_ptr() % TMA_ALIGN_BYTES == 0) for q in (qa, qw))
    scaling = "block" if blocks else "row" if rows_a or rows_w else "tensor"
    per_row = (bool(rows_a), bool(rows_w))
    as_given = tuple(q.scales.dtype == torch.float32 and q.scales.is_contiguous() and not (scaling == "row" and not rows)
                     for q, rows in zip((qa, qw), per_row))
    return _Tc7Plan(M, N, scaling, per_row, copy, as_given)


def _tc_7_fp8_launch_arguments(plan: _Tc7Plan, qa: fp8.Quantized, qw: fp8.Quantized, fast_accumulation: bool) -> tuple:
    """The extension's arguments for operands that passed ``plan``'s checks (or have its key)."""
    a, w = (q.values.clone(memory_format=torch.contiguous_format) if copy else q.values
            for q, copy in zip((qa, qw), plan.copy))

    def kernel_scales(q: fp8.Quantized, rows: int, per_row: bool, as_given: bool) -> torch.Tensor:
        if as_given:  # the kernel reads the scales' memory in order; their shape does not matter
            return q.scales
        s = q.scales.reshape(-1)
        if plan.scaling == "row" and not per_row:  # one operand per tensor: its scale repeated per row
            s = s.expand(rows)
        return s.to(torch.float32).contiguous()

    sa, sw = (kernel_scales(q, rows, per_row, as_given) for q, rows, per_row, as_given
              in zip((qa, qw), (plan.M, plan.N), plan.per_row, plan.scales_as_given))
    c = new_output(plan.M, plan.N, torch.bfloat16, a.device)
    return a, w, sa, sw, c, FP8_SCALING_CODE[plan.scaling], bool(fast_accumulation)
