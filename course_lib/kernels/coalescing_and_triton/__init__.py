"""Stages 04 and 05: Triton, from a vector add to the tiled GEMM and the fast kernel.

Notebooks: ``notebooks/04_coalescing_and_triton.ipynb`` (the vector add, the transpose, the tiled
GEMM and the article's experiment) and ``notebooks/05_triton_fast_kernel.ipynb`` (tensor
descriptors and the fast kernel). Every kernel here runs on an NVIDIA GPU and, on the CPU backend,
in Triton's interpreter (``TRITON_INTERPRET=1``, set by :mod:`course_lib.backend`).

Stages registered here (backend ``"triton"``; dtypes fp32 = exact IEEE fp32, tf32, fp16, bf16):

``triton_tiled`` (:mod:`.tiled`, notebook 04)
    The teaching kernel: one program per BLOCK_M x BLOCK_N tile of C, a loop over K, ``tl.dot``,
    plain pointer arithmetic, every load and store guarded by a mask (no ``% M`` wrap-around).
``triton_tiled_transposed_b`` (:mod:`.article`, notebook 04)
    The Russian article's "coalesced Y" experiment: B is first copied as B^T (row-major N x K), the
    kernel loads K-contiguous tiles of it and turns them back with ``tl.trans`` before ``tl.dot``.
``triton_tiled_descriptors`` (:mod:`.tiled`, notebook 05)
    The same kernel reading and writing through tensor descriptors (``tl.make_tensor_descriptor``).
    Triton 3.8 deprecates the block pointers (``tl.make_block_ptr``) that descriptors replace and
    3.9 removes them. On a GPU a descriptor is a TMA descriptor, which needs a 16-byte-aligned base
    address, 16-byte-aligned row strides and a contiguous last dimension: inputs that break this
    get a ``ValueError``.
``triton_fast`` (:mod:`.fast`, :mod:`.autotune`, notebook 05)
    What Triton adds beyond the tile: grouped launch order (L2 reuse), per-dtype tile shapes,
    ``num_warps`` / ``num_stages``, tensor-descriptor (TMA) loads where the alignment allows (pointer
    loads otherwise), a persistent launch, and for TF32 a pre-transposed B; for shapes with few tiles,
    split-K, and for small M (decode) narrow tiles of 16-64 rows. On the GPU it autotunes, once per
    shape, among the candidates :func:`.autotune.shape_candidates` names for it; on the CPU it uses
    the first of :data:`FAST_CONFIGS`.

Also here: the first Triton kernel, a vector add (:mod:`.vector_add`), and the first loop over tiles
with a tail mask, the sums of a matrix's rows (:mod:`.row_sums`): both are reference solutions of
notebook 04's puzzles, as is the masked GEMM of :mod:`.exercises`; plain data for the notebooks'
pictures (:mod:`.launch_order`, whose grouped order solves notebook 05's puzzle; the addresses a
warp reads from the article kernels' B tile in :mod:`.article`); :mod:`.evidence`, which compiles
the article's kernels for sm_90a *without a GPU* (Triton's wheel ships ptxas) and counts what the
compiler made of them.
"""

from __future__ import annotations

from typing import Callable, Sequence

from course_lib.kernels.coalescing_and_triton.article import (
    ARTICLE_BLOCK_SIZES,
    ARTICLE_SHAPE,
    ARTICLE_T4_TFLOPS,
    article_b_tile_addresses,
    article_experiment_gemm,
    launch_transposed_b,
    tiled_matmul_transposed_b,
    tiled_matmul_transposed_b_kernel,
)
from course_lib.kernels.coalescing_and_triton.autotune import (
    SMALL_M,
    autotuned_config,
    fast_matmul_autotuned,
    few_tile_configs,
    shape_candidates,
    small_m_configs,
    tuned_configs,
    tuning_log,
)
from course_lib.kernels.coalescing_and_triton.common import (
    COURSE_DTYPES,
    FAST_NOTEBOOK,
    INPUT_PRECISION,
    NOTEBOOK,
    descriptor_problem,
    require_32bit_offsets,
)
from course_lib.kernels.coalescing_and_triton.evidence import hopper_compile_evidence, print_table
from course_lib.kernels.coalescing_and_triton.exercises import exercise_gemm, exercise_tail_solution_kernel
from course_lib.kernels.coalescing_and_triton.fast import (
    CPU_PERSISTENT_PROGRAMS,
    FAST_CONFIGS,
    PORTABLE_CONFIGS,
    TRANSPOSE_BLOCK,
    TRANSPOSE_WARPS,
    FastConfig,
    fast_matmul,
    fast_matmul_kernel,
    grouped_matmul_kernel,
    grouped_tile,
    launch_fast,
    matmul_tile_descriptors,
    persistent_matmul_kernel,
    split_k_matmul_kernel,
    split_k_ranges,
    split_k_counters,
    transpose,
    transpose_kernel,
)
from course_lib.kernels.coalescing_and_triton.launch_order import (
    blocks_loaded,
    draw_launch_order,
    grouped_order,
    launch_order_grid,
    row_major_order,
)
from course_lib.kernels.coalescing_and_triton.row_sums import COL_BLOCK, ROW_BLOCK, row_sums, row_sums_kernel
from course_lib.kernels.coalescing_and_triton.tiled import (
    TILED_CONFIG,
    TileConfig,
    launch_tiled,
    matmul_tile_masked,
    tiled_matmul,
    tiled_matmul_descriptor_kernel,
    tiled_matmul_descriptors,
    tiled_matmul_kernel,
)
from course_lib.kernels.coalescing_and_triton.vector_add import VECTOR_BLOCK, vector_add, vector_add_kernel
from course_lib.registry import Stage, register


def _per_dtype(fn: Callable, name: str, dtypes: Sequence[str] = COURSE_DTYPES) -> dict[str, Callable]:
    out = {}
    for d in dtypes:
        def gemm(a: object, b: object, _d: str = d) -> object:
            return fn(a, b, _d)

        gemm.__name__ = f"{name}_{d}"
        gemm.__doc__ = f"{fn.__doc__.splitlines()[0]} [{d}]"
        out[d] = gemm
    return out


TRITON_TILED = register(Stage(name="triton_tiled", notebook=NOTEBOOK, backend="triton", order=40,
                             title="Triton tiled (pointers + masks)", gemms=_per_dtype(tiled_matmul, "triton_tiled")))
TRITON_TILED_TRANSPOSED_B = register(Stage(name="triton_tiled_transposed_b", notebook=NOTEBOOK, backend="triton", order=41,
                                          title="Triton tiled, B pre-transposed (the article's experiment)",
                                          gemms=_per_dtype(tiled_matmul_transposed_b, "triton_tiled_transposed_b")))
# check() rounds the descriptor stage's shapes up to multiples of 8: 16-byte rows for every course dtype.
TRITON_TILED_DESCRIPTORS = register(Stage(name="triton_tiled_descriptors", notebook=FAST_NOTEBOOK, backend="triton", order=42,
                                         title="Triton tiled (tensor descriptors)", shape_multiple=8,
                                         gemms=_per_dtype(tiled_matmul_descriptors, "triton_tiled_descriptors")))
TRITON_FAST = register(Stage(name="triton_fast", notebook=FAST_NOTEBOOK, backend="triton", order=45, sweep=True,
                            title="Triton fast (grouped, descriptors, tuned)",
                            gemms=_per_dtype(fast_matmul_autotuned, "triton_fast"), tuning_log=tuning_log))
