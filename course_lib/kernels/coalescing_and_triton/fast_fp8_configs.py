"""The configurations of the Triton FP8 kernels (:mod:`.fast_fp8`): :class:`Fp8Config`, and the rule
that picks one for a shape, for each kernel - one scale per tensor or per row (:func:`fp8_config`) and
DeepSeek-V3's block scales (:func:`fp8_blockscaled_config`).

The rule is a small table. A shape falls into one class (:func:`shape_class`; its thresholds are the
named constants below), and each kernel has one configuration per class (:data:`SCALES_CONFIGS`,
:data:`BLOCKSCALED_CONFIGS`). The configurations are the best of sweeps on the H200, the two at the
large shapes of sweeps on an H100 (``experiments/gpu_fp8_triton.py``, and per shape and scaling
``experiments/gpu_fp8_triton_sweep.py``, whose results file suggests a configuration per class;
experiments/JOURNAL.md has the numbers).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import triton

from course_lib.model.hardware import device_sms
from course_lib.model.layout import cdiv


@dataclass(frozen=True)
class Fp8Config:
    """One launch configuration of the FP8 kernels.

    ``fast_accumulation``: False adds the tensor core's partial sum into the fp32 accumulator once
    per BLOCK_K slice (``max_num_imprecise_acc=BLOCK_K``: at 128, every four 32-deep instructions,
    DeepSeek-V3's interval); True leaves Triton's default for FP8 on Hopper, where the tensor core's
    narrow accumulator runs over the whole of K (cuBLAS's ``use_fast_accum``). Other GPUs and the
    interpreter accumulate in fp32 either way. Block scales are applied to each slice's sum, so the
    block-scaled kernels promote every slice whatever this says.
    ``descriptors``: read A and W (and write C) through tensor descriptors (TMA) where every matrix
    allows them (16-byte rows), with pointers otherwise.
    ``persistent``: one program per SM walks the tiles (the descriptor kernels only: where the
    descriptors do not fit, the pointer kernel runs one program per tile).
    """

    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8
    num_warps: int = 4
    num_stages: int = 4
    fast_accumulation: bool = False
    descriptors: bool = False
    persistent: bool = False

    def __post_init__(self) -> None:
        for name, least in (("block_m", 16), ("block_n", 16), ("block_k", 32)):
            v = getattr(self, name)
            # tl.arange needs powers of two; an FP8 mma is 32 deep in K and at least 16 wide
            if v < least or v & (v - 1):
                raise ValueError(f"Fp8Config: {name} must be a power of two >= {least}, not {v}")
        if self.group_m < 1:
            raise ValueError(f"Fp8Config: group_m is a number of tile rows >= 1, not {self.group_m}")
        if self.persistent and not self.descriptors:
            raise ValueError("Fp8Config: persistent=True needs descriptors=True (only the kernels that read "
                             "through tensor descriptors walk the tiles)")

    @property
    def max_num_imprecise_acc(self) -> int | None:
        """tl.dot's argument: products along K summed by the tensor core before an fp32 add."""
        return None if self.fast_accumulation else self.block_k

    @property
    def label(self) -> str:
        """e.g. "64x128x128 g8 w4 s4 tma": tile, group, warps, stages and what is not the default."""
        extra = ((" fast" if self.fast_accumulation else "") + (" tma" if self.descriptors else "")
                 + (" persistent" if self.persistent else ""))
        return f"{self.block_m}x{self.block_n}x{self.block_k} g{self.group_m} w{self.num_warps} s{self.num_stages}{extra}"


# ---- the shape classes ----------------------------------------------------------------------------
# The thresholds that sort a product M x N x K into a class (set from the sweep's results: its
# "classes" section lists each class's shapes and the configuration best over them).
DECODE_M = 64  # M at most this: a decode step or a small batch; C has few rows to share W's bytes
SHORT_K = 1024  # K at most this: few K-slices per tile, nothing to pipeline for long
WAVE_TILE = (256, 128)  # "large": at least one such tile per SM (a wave), so big tiles keep every SM busy
SHAPE_CLASSES = ("decode", "short_k", "few_tiles", "large")


def shape_class(M: int, N: int, K: int, sms: int | None = None) -> str:
    """The class of an M x N x K product on a GPU of ``sms`` SMs (default: this GPU's; the recorded
    H200's on the CPU), the first that applies: "decode" (M <= :data:`DECODE_M`), "short_k"
    (K <= :data:`SHORT_K`), "few_tiles" (fewer :data:`WAVE_TILE` tiles of C than SMs), "large"."""
    sms = device_sms() if sms is None else sms
    if M <= DECODE_M:
        return "decode"
    if K <= SHORT_K:
        return "short_k"
    if cdiv(M, WAVE_TILE[0]) * cdiv(N, WAVE_TILE[1]) < sms:
        return "few_tiles"
    return "large"


# ---- one scale per tensor or per row: fp8_matmul_kernel / fp8_matmul_tma_kernel --------------------
# Each class's configuration is the best over the class's shapes (geometric mean of % of cuBLAS with
# the same scaling) in experiments/gpu_fp8_triton_sweep.py on the H200 (experiments/JOURNAL.md has the run):
# * decode: 64 x 32 tiles, 4 warps, 5 stages: 90 % per tensor (64 x 64, 4 stages: 83 %);
# * short_k: 64 x 64 tiles, 4 warps, 4 stages (the sweep's best, 128 x 64 on 8 warps, was 1 point better
#   per tensor and not timed per row);
# * few_tiles: 64 x 128 tiles, 8 warps, 4 stages: 76 % (64 x 64: 70 %) - more programs than 256 x 128
#   tiles would make for too few SMs;
# * large: 128 x 128 tiles on 4 warps (one warpgroup), 3 stages, through tensor descriptors, so that
#   two programs share an SM (96 KB of shared memory and at most 255 registers a thread each). Triton
#   waits for each slice's wgmmas before it adds them into fp32 (in one program the tensor cores idle
#   while it promotes); a second program on the SM issues its wgmmas meanwhile. Measured on an H100
#   (the sweep with two-per-SM candidates; the journal has the run): the same tile with 4 stages, one
#   program per SM, 49 % of cuBLAS at 4096^3, with 3 stages 75 %; over the 12 large shapes per tensor
#   70 % (worst 61 %) against 67 % (57 %) for 256 x 128 tiles on 8 warps, the H200 sweep's choice
#   before (68 % per tensor, 70 % per row there); per row within four points of it either way.
#   (128 x 256 tiles, the bf16 kernel's, keep a second fp32 tile of promoted sums that does not fit.)
#   Not taken: Triton's own warp specialization (``tl.range(..., warp_specialize=True)``: a TMA
#   producer and two consumer warpgroups of half the rows each). On an H100, in a stand-alone kernel
#   without the scales, it was no faster (128 x 128 58-69 %, 256 x 128 76-79 % of cuBLAS at 4096^3 and
#   8192^3, against 77-79 % for this tile unspecialized in the same run); in these kernels, with their
#   scale epilogue, it returned wrong rows (Triton 3.6.0).
#   Nor a K loop of two slices a step, whose odd slice's wgmmas Triton leaves in flight while the even
#   slice is promoted (bit for bit the same C): on an H100, 64 x 128 on 4 warps, 2 stages, per tensor
#   51 % of cuBLAS at 4096^3 against this tile's 75 % in the same run, slower at every large, few-tile
#   and short-K shape but 192 x 18944 x 3584 (71 against 63 %).
_SMALL = Fp8Config(64, 64, 128, num_warps=4, num_stages=4)
SCALES_CONFIGS: dict[str, Fp8Config] = {
    "decode": Fp8Config(64, 32, 128, num_warps=4, num_stages=5),
    "short_k": _SMALL,
    "few_tiles": Fp8Config(64, 128, 128, num_warps=8, num_stages=4),
    "large": Fp8Config(128, 128, 128, num_warps=4, num_stages=3, descriptors=True),
}

# ---- block scales (A per 1 x 128, W per 128 x 128): fp8_blockscaled_kernel / _tma_kernel -----------
# Each K-slice's sum is a fresh fp32 tile that is scaled and added to the accumulator: two tiles of
# fp32 registers per thread. 256 x 128 tiles on 8 warps then spill (255 registers and 220-584 bytes
# of spill stores, compiled for sm_90a), and ran at 17-29 % of cuBLAS block-scaled. The same sweep:
# 64 x 128 tiles on 4 warps through tensor descriptors at the large shapes (3 stages: 61 %, worst
# 58 %; pointer loads, 4 stages: 53 %) and where tiles are few (4 stages: 133 %, worst 79 %; 64 x 64
# with pointers: 107 %, worst 43 %); 64 x 64 tiles elsewhere.
# At the large shapes now: 128 x 128 tiles on 8 warps through descriptors, one program per SM walking
# the tiles (persistent). The sweep again with the persistent candidates, on an H100 (the journal has
# the run): 60-64 % of cuBLAS block-scaled at the large squares and prefill layers where 64 x 128 on
# 4 warps, 3 stages, reached 50-55 %; worse only at 192 x 18944 x 3584 (72 % against 86 %).
BLOCKSCALED_CONFIGS: dict[str, Fp8Config] = {
    "decode": _SMALL,
    "short_k": _SMALL,
    "few_tiles": Fp8Config(64, 128, 128, num_warps=4, num_stages=4, descriptors=True),
    "large": Fp8Config(128, 128, 128, num_warps=8, num_stages=4, descriptors=True, persistent=True),
}


def fp8_config(M: int, N: int, K: int, sms: int | None = None) -> Fp8Config:
    """The configuration :func:`.fast_fp8.fp8_matmul` launches for an M x N x K product (one scale per
    tensor or per row) on a GPU of ``sms`` SMs: :data:`SCALES_CONFIGS` of the product's
    :func:`shape_class`, with BLOCK_K cut to K rounded up to a power of two (at least 32) when K is
    shorter than 128."""
    cfg = SCALES_CONFIGS[shape_class(M, N, K, sms)]
    block_k = min(cfg.block_k, max(32, triton.next_power_of_2(K)))
    return cfg if block_k == cfg.block_k else dataclasses.replace(cfg, block_k=block_k)


def fp8_blockscaled_config(M: int, N: int, K: int, sms: int | None = None) -> Fp8Config:
    """The configuration :func:`.fast_fp8.fp8_matmul_blockscaled` launches for an M x N x K product on a
    GPU of ``sms`` SMs: :data:`BLOCKSCALED_CONFIGS` of the product's :func:`shape_class` (BLOCK_K is
    always 128, the blocks' length)."""
    return BLOCKSCALED_CONFIGS[shape_class(M, N, K, sms)]
