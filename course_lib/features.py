"""What each stage needs from the GPU, and whether this GPU has it.

Every stage of the course declares the hardware features its kernels use (``Stage.needs``); each
course dtype adds its own (bf16 and TF32 need the tensor cores that came with Ampere). On a GPU that
lacks one, the course does not call the stage: ``check`` says it was not run and why, ``bench`` and
``compare`` show the recorded results instead, labelled as recorded.

Compute capability is NVIDIA's version number of a GPU's feature set: 7.5 Turing (T4, RTX 20xx),
8.0 Ampere (A100), 8.6 (RTX 30xx, A10), 8.9 Ada (L4, RTX 40xx), 9.0 Hopper (H100, H200),
10.0 Blackwell (B200), 12.0 (RTX 50xx). Sources: CUDA C++ Programming Guide, "Compute
Capabilities"; PTX ISA 9.x, the target notes of ``mma``/``wgmma``/``cp.async.bulk.tensor``/``setmaxnreg``.
"""

from __future__ import annotations

from dataclasses import dataclass

from course_lib import backend
from course_lib.backend import Capability


class NotOnThisGPU(RuntimeError):
    """A stage was called where it cannot run: on the CPU backend (GPU-only stages), or on a GPU that
    lacks a feature it needs. The message says which; course_lib.bench shows the recorded results."""


@dataclass(frozen=True)
class Feature:
    """A hardware feature: the first compute capability that has it, and the first that no longer
    has it (``until``), for the architecture-specific "a" instructions of one generation."""

    name: str  # in words, for the line that says what a GPU lacks
    since: Capability
    until: Capability | None = None

    def available(self, capability: Capability) -> bool:
        return self.since <= capability and (self.until is None or capability < self.until)

    @property
    def where(self) -> str:
        """The compute capabilities that have it, e.g. "7.5 and newer" or "9.0 up to 10.0"."""
        since = "{}.{}".format(*self.since)
        return f"{since} and newer" if self.until is None else f"{since} up to {self.until[0]}.{self.until[1]}"


# The course's CUDA 13 stack (numba-cuda[cu13], PyPI's torch 2.13) builds for nothing older, and
# Triton 3.7 and numba-cuda 0.30 compile every stage that needs nothing else for it.
CUDA13 = Feature("CUDA 13 (Turing or newer)", (7, 5))
# mma.sync with bf16 operands (m16n8k16) and the TF32 tensor-core path first exist on sm_80
# (PTX ISA, "Warp-level matrix multiply-accumulate instructions": .bf16 and .tf32 require sm_80).
BF16_TENSOR_CORES = Feature("bf16 tensor cores", (8, 0))
TF32_TENSOR_CORES = Feature("TF32 tensor cores", (8, 0))
# Tensor cores that multiply FP8 (e4m3, e5m2) first exist on sm_89: mma.sync with .e4m3/.e5m2 needs
# sm_89 (PTX ISA, "Warp-level matrix multiply-accumulate instructions"); cuBLAS's FP8 GEMMs
# (torch._scaled_mm) need the same.
FP8_TENSOR_CORES = Feature("FP8 tensor cores", (8, 9))
# wgmma, setmaxnreg and the TMA tensor copies the course's kernels use are compiled for sm_90a, the
# architecture-specific target that runs on compute capability 9.0 only: Blackwell (sm_100) has
# tcgen05 instead of wgmma (PTX ISA: "wgmma.mma_async ... requires sm_90a").
HOPPER_SM90A = Feature("Hopper's wgmma, TMA and setmaxnreg (code for sm_90a)", (9, 0), until=(10, 0))

# What Triton 3.7 (the version the lock pins) makes of tl.dot for each generation, compiled for every
# target without a GPU by tools/triton_targets.py (its table: tools/triton_targets.json, which
# tests/test_triton_targets.py holds this to). Every Triton kernel of the course compiles for every
# generation from 7.5 on, except in e4m3, which needs FP8_TENSOR_CORES ("type fp8e4nv not supported in
# this architecture" below 8.9). Exact fp32 is FMA everywhere. The 16-bit types, TF32 and e4m3 go to
# the tensor cores from 8.0 on; on 7.5 this Triton has no tensor-core path at all: its fp16 tl.dot is
# FMA instructions on the CUDA cores, while cuBLAS's fp16 GEMM uses Turing's tensor cores. (Its bf16
# and TF32 dots compile there too, to FMA; the course does not run them on 7.5, for lack of
# BF16_TENSOR_CORES and TF32_TENSOR_CORES, which cuBLAS needs as well.)
TRITON_TENSOR_CORES = Feature("Triton 3.7's tensor-core tl.dot", (8, 0))
# The tensor-core instruction per generation, from the first capability compiled that uses it.
TRITON_DOT_INSTRUCTIONS: tuple[tuple[Capability, str], ...] = (
    ((7, 5), "FMA on the CUDA cores"), ((8, 0), "mma.sync"), ((9, 0), "wgmma"), ((10, 0), "tcgen05.mma"),
    ((12, 0), "mma.sync"),
)


def triton_dot(capability: Capability, exact_fp32: bool = False) -> str:
    """What Triton 3.7 compiles tl.dot to on a GPU of ``capability``: "FMA on the CUDA cores",
    "mma.sync", "wgmma" or "tcgen05.mma". ``exact_fp32``: the dot of exact fp32 (IEEE), FMA everywhere."""
    if exact_fp32 or not TRITON_TENSOR_CORES.available(capability):
        return TRITON_DOT_INSTRUCTIONS[0][1]
    return [words for since, words in TRITON_DOT_INSTRUCTIONS if since <= capability][-1]


def why_on_cuda_cores(what: str, dtype: str, backend_name: str) -> str | None:
    """One line where ``what`` (a stage in ``dtype``, run with ``backend_name``: "triton", "cublas", ...)
    runs on this GPU but its tl.dot on the CUDA cores although cuBLAS's GEMM of the dtype uses the tensor
    cores (Triton 3.7's fp16 on 7.5); None elsewhere, and for exact fp32, which is FMA in both. Triton
    compiles for the GPU as it is: a GPU treated as an older one (COURSE_ASSUME_CAPABILITY) keeps its dot."""
    b = backend.get()
    real = b.device_capability or b.capability
    if not b.is_gpu or backend_name != "triton" or dtype == "fp32" or TRITON_TENSOR_CORES.available(real):
        return None
    return (f"{what} runs on the CUDA cores here: Triton 3.7 compiles its tl.dot to FMA instructions for "
            f"sm_{real[0]}{real[1]} ({TRITON_TENSOR_CORES.name} needs compute capability "
            f"{TRITON_TENSOR_CORES.where}), while cuBLAS's {dtype} GEMM uses the tensor cores; "
            f"this GPU is {b.gpu_label}")


def missing(needs: tuple[Feature, ...], capability: Capability,
            device: Capability | None = None) -> Feature | None:
    """The first of ``needs`` (the stage's and its dtype's) that a GPU of ``capability`` lacks.

    ``device``: the GPU's real capability when the course treats it as an older one. Code for an
    architecture-specific target (a feature with ``until``) runs only on that architecture, so such
    a feature must exist on the real GPU too: sm_90a code cannot run on a Blackwell GPU treated as 9.0.
    """
    for feature in (CUDA13, *needs):
        if not feature.available(capability):
            return feature
        if feature.until is not None and device is not None and not feature.available(device):
            return feature
    return None


def why_not_here(what: str, needs: tuple[Feature, ...], gpu_only: bool = False) -> str | None:
    """Why ``what`` (e.g. "stage 'tc_2_wgmma_tma' (bf16)") cannot run on this backend, in one line;
    None where it can. ``needs``: the features of its kernels and of its dtype."""
    b = backend.get()
    if not b.is_gpu:
        return f"{what} runs only on an NVIDIA GPU and this is the {b.name} backend" if gpu_only else None
    feature = missing(needs, b.capability, b.device_capability)
    if feature is None:
        return None
    return f"{what} needs {feature.name}, compute capability {feature.where}; this GPU is {b.gpu_label}"
