"""The hardware facts the course's models use, each written once: the warp, global memory's sectors
and lines, shared memory's banks, element sizes, TMA's alignment rule, and the limits of one SM
with the H200's SM count.

Every other module reads these names; a number that means one of these facts is not written again.
"""

from __future__ import annotations

from dataclasses import dataclass

from course_lib import backend, dtypes

# ---- a warp ---------------------------------------------------------------------------------------
# CUDA C++ Programming Guide, "SIMT Architecture": a warp is 32 threads on every NVIDIA GPU so far.
# PTX ISA, "Warpgroup" (9.7.15.1): wgmma's warpgroup is 4 contiguous warps.
WARP_SIZE = 32
WARPGROUP_SIZE = 4 * WARP_SIZE

# ---- global memory ----------------------------------------------------------------------------------
# CUDA C++ Best Practices Guide, "Coalesced Access to Global Memory": a warp's load is served in
# 32-byte sectors (the unit moved between L2 and DRAM and into L1), which group into 128-byte lines.
SECTOR_BYTES = 32
LINE_BYTES = 128

# ---- shared memory ----------------------------------------------------------------------------------
# CUDA C++ Programming Guide, "Shared Memory" for compute capability 5.x and newer: 32 banks, each
# delivering one 4-byte word per clock.
N_BANKS = 32
BANK_BYTES = 4


# ---- element sizes ----------------------------------------------------------------------------------
def itemsize(dtype: str | dtypes.CourseDtype) -> int:
    """Bytes per element of a course dtype, as its tensors hold it (torch's itemsize)."""
    return dtypes.get(dtype).torch_dtype.itemsize


BF16_BYTES = itemsize("bf16")  # the tensor-core stages' A, B and C

# ---- TMA ----------------------------------------------------------------------------------------------
# CUDA Driver API, cuTensorMapEncodeTiled: the global address must be 16-byte aligned (32 for
# interleaved layouts, which the course does not use), and so must every stride but the innermost
# dimension's. A row-major matrix read or written through TMA therefore has rows of a multiple of
# 16 bytes. ldmatrix's rows and the 16-byte vector loads need the same alignment.
TMA_ALIGN_BYTES = 16


def tma_elements(dtype: str | dtypes.CourseDtype) -> int:
    """Elements of ``dtype`` in TMA's 16-byte unit: a row length TMA copies is a multiple of it."""
    return TMA_ALIGN_BYTES // itemsize(dtype)


def tma_rule_text(dtype: str | dtypes.CourseDtype) -> str:
    """TMA's rule in words, for ``dtype``: "rows of a multiple of 16 bytes (8 bf16 elements)"."""
    return f"rows of a multiple of {TMA_ALIGN_BYTES} bytes ({tma_elements(dtype)} {dtypes.get(dtype).name} elements)"


# ---- one SM's limits, and the H200 ------------------------------------------------------------------
# Where the limits come from (compute capability 9.0, the H200's):
#
# * CUDA C++ Programming Guide, appendix "Compute Capabilities", table "Technical Specifications per
#   Compute Capability": 2048 resident threads = 64 resident warps per SM, 32 resident blocks per SM,
#   64 K 32-bit registers per SM, at most 255 registers per thread, 1024 threads per block, 228 KB of
#   shared memory per SM of which one block may use at most 227 KB.
# * The guide's shared-memory section for compute capabilities 8.x/9.0: the 1 KB of shared memory per
#   SM that a block cannot use is reserved for system use, per block.
# * The occupancy calculator shipped with the CUDA toolkit (``cuda_occupancy.h``; checked in a public
#   copy that covers compute capability 9): blocks per SM 32 for major version 9; registers are
#   allocated per warp in units of 256; shared memory per block in units of 128 bytes, after adding
#   the driver's reserved bytes per block; registers are split over 4 sub-partitions of the SM, so the
#   warp count the register file allows is computed per sub-partition; shared-memory carve-outs for
#   9.x go up to 228 KB.
#
# How they were checked: the ``cuda_occupancy.h`` values above were read in the header's code; of
# the guide's table only the opening of the page was retrievable, so 64 warps / 2048 threads per SM
# and 227 KB per block were cross-checked in secondary sources (occupancy libraries that quote the
# table: 2048 threads/SM for sm_90, 232448 bytes = 227 KB per block on the H100). On a GPU,
# ``cudaDevAttrMaxSharedMemoryPerBlockOptin`` and ``cudaDevAttrMaxBlocksPerMultiprocessor`` give the
# same numbers directly. The H200's 132 SMs are the recorded GPU's ``multi_processor_count``
# (``sm_count`` in the provenance of course_lib/results/nvidia_h200.json).
@dataclass(frozen=True)
class SMLimits:
    """Per-SM limits of one GPU (defaults: compute capability 9.0, NVIDIA H200)."""

    name: str = "NVIDIA H200 (compute capability 9.0)"
    sms: int = 132
    max_threads_per_sm: int = 2048
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    max_threads_per_block: int = 1024
    regs_per_sm: int = 65536
    reg_alloc_unit: int = 256  # registers are given to a warp in multiples of this
    reg_subpartitions: int = 4  # the register file is split over 4 sub-partitions (warp schedulers)
    max_regs_per_thread: int = 255
    smem_per_sm: int = 228 * 1024
    max_smem_per_block: int = 227 * 1024
    reserved_smem_per_block: int = 1024
    smem_alloc_unit: int = 128


H200 = SMLimits()


def device_sms() -> int:
    """SMs of the GPU this process runs on; on the CPU backend, the recorded H200's."""
    return backend.sm_count() if backend.get().is_gpu else H200.sms
