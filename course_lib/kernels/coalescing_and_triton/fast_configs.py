"""The configurations of the ``triton_fast`` kernels (:mod:`.fast`): one :class:`FastConfig` per
candidate, the candidates per course dtype and why (:data:`FAST_CONFIGS`), what runs on a GPU whose
shared memory none of them fits (:data:`PORTABLE_CONFIGS`), and the transpose's tile.

Which candidate runs at a shape is :mod:`.autotune`'s choice; :mod:`.fast_launch` launches it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class FastConfig:
    """One candidate configuration of the fast kernels and of their wrapper.

    ``b_layout``: "kn" reads B as given (K x N, row-major: its tiles are N-major); "nk" first copies
    B^T (N x K, row-major) with :func:`.fast_launch.transpose` inside the call so that B's tiles
    are K-major, as Hopper's TF32 tensor-core instruction wants; the copy is part of every call and
    of its timing.
    ``loads``: "descriptors" uses TMA when all three matrices meet the alignment rules and falls back
    to pointers otherwise; "pointers" always uses pointers with masks.
    ``persistent``: one program per SM (on the CPU: :data:`CPU_PERSISTENT_PROGRAMS`).
    ``epilogue_split``: C stored in this many column halves (1 or 2; descriptors only).
    ``split_k``: K cut into this many ranges, one program per (tile, range); the last program of a
    tile adds the partial sums (descriptors only: with pointer loads the config runs unsplit).
    """

    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8
    num_warps: int = 4
    num_stages: int = 3
    b_layout: str = "kn"
    loads: str = "descriptors"
    persistent: bool = False
    epilogue_split: int = 1
    split_k: int = 1

    def __post_init__(self) -> None:
        if self.b_layout not in ("kn", "nk"):
            raise ValueError(f"b_layout is 'kn' or 'nk', not {self.b_layout!r}")
        if self.loads not in ("descriptors", "pointers"):
            raise ValueError(f"loads is 'descriptors' or 'pointers', not {self.loads!r}")
        if self.epilogue_split not in (1, 2):
            raise ValueError(f"epilogue_split is 1 or 2, not {self.epilogue_split}")
        if self.split_k < 1:
            raise ValueError(f"split_k is a number of K ranges >= 1, not {self.split_k}")
        if self.split_k > 1 and self.persistent:
            raise ValueError("split_k > 1 launches one program per (tile, K range): it cannot also be persistent")
        for name in ("block_m", "block_n", "block_k"):
            v = getattr(self, name)
            if v < 16 or v & (v - 1):
                raise ValueError(f"{name} must be a power of two >= 16 (tl.dot's minimum), not {v}")

    @property
    def label(self) -> str:
        extra = "".join([
            " B^T" if self.b_layout == "nk" else "",
            " ptr" if self.loads == "pointers" else "",
            " persistent" if self.persistent else "",
            " split2" if self.epilogue_split == 2 else "",
            f" splitK{self.split_k}" if self.split_k > 1 else "",
        ])
        return (f"{self.block_m}x{self.block_n}x{self.block_k} g{self.group_m} "
                f"w{self.num_warps} s{self.num_stages}{extra}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# Candidates per course dtype, each measured on the H200 against cuBLAS (notebook 05 shows how they
# compare). The first is what the CPU backend runs (the interpreter cannot time anything); on a GPU
# every candidate is timed on the first call at each shape and the fastest kept.
# * fp16 / bf16: 128 x 256 tiles, 8 warps (two warpgroups of wgmma on 64 rows each), 3-4 K-slices
#   in flight, persistent; C stored in halves leaves shared memory for the deeper pipeline.
# * tf32: the same shape with K-slices of 32 (a 128-byte fp32 row, like 64 fp16), and B^T, so both
#   operands are K-major as Hopper's TF32 wgmma requires (CUTLASS lists Hopper TF32 tensor-op GEMMs
#   only for K-major A and B: media/docs/cpp/functionality.md).
# * fp32 (exact, CUDA cores): small 64 x 64 tiles through TMA, so that several programs share an SM
#   and keep its FMA units fed; C stored in halves fits a fifth program per SM. A pointer candidate
#   stays in the list for GPUs and Triton versions where descriptors compile poorly.
_SIXTEEN_BIT = (
    FastConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3, persistent=True, epilogue_split=2),
    FastConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3, persistent=True),
    FastConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=4, persistent=True, epilogue_split=2),
    FastConfig(128, 128, 64, group_m=8, num_warps=4, num_stages=4, persistent=True),
    # 6 K-slices in flight: 5 points above the rest at 3072^3 (experiments/gpu_triton_mid_sweep.py).
    FastConfig(128, 128, 64, group_m=8, num_warps=4, num_stages=6, persistent=True),
)
FAST_CONFIGS: dict[str, tuple[FastConfig, ...]] = {
    "fp16": _SIXTEEN_BIT,
    "bf16": _SIXTEEN_BIT,
    "tf32": (
        FastConfig(128, 256, 32, group_m=16, num_warps=8, num_stages=3, b_layout="nk", persistent=True, epilogue_split=2),
        FastConfig(128, 256, 32, group_m=8, num_warps=8, num_stages=3, b_layout="nk", persistent=True, epilogue_split=2),
        FastConfig(128, 128, 32, group_m=8, num_warps=8, num_stages=4, b_layout="nk", persistent=True),
    ),
    "fp32": (
        FastConfig(64, 64, 64, group_m=16, num_warps=4, num_stages=2, epilogue_split=2),
        FastConfig(64, 64, 32, group_m=8, num_warps=4, num_stages=3, epilogue_split=2),
        FastConfig(128, 128, 32, group_m=8, num_warps=8, num_stages=3, loads="pointers"),
    ),
}

# What runs when no candidate above fits this GPU: every candidate asks for more shared memory than
# an RTX card or an L4 (99 KB per block) or a T4 (64 KB) has for some dtype, and Triton then refuses
# to launch (OutOfResources). These need 32 KB or less, whatever the GPU.
PORTABLE_CONFIGS: dict[str, FastConfig] = {
    "fp16": FastConfig(128, 128, 32, group_m=8, num_warps=4, num_stages=2, loads="pointers"),
    "bf16": FastConfig(128, 128, 32, group_m=8, num_warps=4, num_stages=2, loads="pointers"),
    "tf32": FastConfig(64, 64, 32, group_m=8, num_warps=4, num_stages=2, loads="pointers"),
    "fp32": FastConfig(64, 64, 32, group_m=8, num_warps=4, num_stages=2, loads="pointers"),
}

# The interpreter runs programs one after another; a few programs are enough to exercise the
# persistent loop (each program then walks several tiles).
CPU_PERSISTENT_PROGRAMS = 3


def persistent_programs() -> int:
    """Programs a persistent launch starts at most: one per SM on the GPU, :data:`CPU_PERSISTENT_PROGRAMS`
    on the CPU."""
    from course_lib import backend

    return backend.sm_count() if backend.get().is_gpu else CPU_PERSISTENT_PROGRAMS

# The transpose that copies B^T (:func:`.fast.transpose_kernel`): one 64 x 64 tile per program.
TRANSPOSE_BLOCK = (64, 64)
TRANSPOSE_WARPS = 4


def candidates(dtype: str) -> tuple[FastConfig, ...]:
    """The fast kernels' candidates for ``dtype`` (FAST_CONFIGS), or a ValueError saying where they go."""
    if dtype not in FAST_CONFIGS or dtype not in PORTABLE_CONFIGS:
        raise ValueError(f"triton_fast has no configurations for {dtype!r} (it has {', '.join(FAST_CONFIGS)}); "
                         "a new dtype needs its candidates in FAST_CONFIGS and PORTABLE_CONFIGS (fast_configs.py)")
    return FAST_CONFIGS[dtype]
