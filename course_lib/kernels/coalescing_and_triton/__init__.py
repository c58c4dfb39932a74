"""Stages 04 and 05: Triton, from a vector add to the tiled GEMM and the fast kernel.

Notebooks: ``notebooks/04_coalescing_and_triton.ipynb`` (the vector add, the transpose, the tiled
GEMM and the article's experiment) and ``notebooks/05_triton_fast_kernel.ipynb`` (tensor
descriptors and the fast kernel). Every kernel here runs on an NVIDIA GPU and, on the CPU backend,
in Triton's interpreter (``TRITON_INTERPRET=1``, set by :mod:`course_lib.backend`).

The stages defined here (the course manifest, course_lib.registry, lists them; backend ``"triton"``;
dtypes fp32 = exact IEEE fp32, tf32, fp16, bf16):

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
``triton_fast`` (:mod:`.fast`, :mod:`.fast_configs`, :mod:`.fast_launch`, :mod:`.autotune`, notebook 05)
    What Triton adds beyond the tile: grouped launch order (L2 reuse), per-dtype tile shapes,
    ``num_warps`` / ``num_stages``, tensor-descriptor (TMA) loads where the alignment allows (pointer
    loads otherwise), a persistent launch, and for TF32 a pre-transposed B; for shapes with few tiles,
    split-K, and for small M (decode) narrow tiles of 16-64 rows. On the GPU it autotunes, once per
    shape, among the candidates :func:`.autotune.shape_candidates` names for it; on the CPU it uses
    the first of :data:`FAST_CONFIGS`.

Also here: the first Triton kernel, a vector add (:mod:`.vector_add`), and the first loop over tiles
with a tail mask, the sums of a matrix's rows (:mod:`.row_sums`): both are the course's kernels, the
first the reference solution of notebook 04's first puzzle, the second 04's worked example (the
solutions of the masked GEMM and of triton_lab's column sums are only solutions: they live in
:mod:`course_lib.exercises.coalescing_and_triton`); plain data that the
notebooks compute with and :mod:`course_lib.viz` draws (the addresses a warp reads from the article
kernels' B tile, in :mod:`.article`); :mod:`.evidence`, which compiles the article's kernels for
sm_90a *without a GPU* (Triton's wheel ships ptxas) and counts what the compiler made of them. The
launch orders notebook 05 compares, row-major and grouped (:func:`grouped_tile`'s Python twin, which
solves its puzzle), are models: :mod:`course_lib.model.schedules`.

The package's face, ``__all__``, is what the notebooks, the exercises and the course manifest
(:mod:`course_lib.registry`) use. Anything else - launchers, split-K helpers, tuning tables, the
article experiment's constants - is imported from its submodule, e.g.
``from course_lib.kernels.coalescing_and_triton import fast_launch`` then ``fast_launch.launch_fast``.
"""

from __future__ import annotations

from course_lib.kernels.coalescing_and_triton.article import (
    article_b_tile_addresses,
    tiled_matmul_transposed_b,
    tiled_matmul_transposed_b_kernel,
)
from course_lib.kernels.coalescing_and_triton.autotune import (
    autotuned_config,
    fast_matmul_autotuned,
    shape_candidates,
    tuning_log,
)
from course_lib.kernels.coalescing_and_triton.common import FAST_NOTEBOOK, NOTEBOOK
from course_lib.kernels.coalescing_and_triton.evidence import hopper_compile_evidence
from course_lib.kernels.coalescing_and_triton.fast import (
    grouped_tile,
    persistent_matmul_kernel,
    split_k_matmul_kernel,
    transpose_kernel,
)
from course_lib.kernels.coalescing_and_triton.fast_configs import FAST_CONFIGS, FastConfig
from course_lib.kernels.coalescing_and_triton.fast_launch import fast_matmul, transpose
from course_lib.kernels.coalescing_and_triton.fast_fp8 import (
    Fp8Config,
    fp8_blockscaled_kernel,
    fp8_config,
    fp8_matmul,
    fp8_matmul_blockscaled,
    fp8_matmul_kernel,
    triton_fp8,
)
from course_lib.kernels.coalescing_and_triton.row_sums import COL_BLOCK, ROW_BLOCK, row_sums, row_sums_kernel
from course_lib.kernels.coalescing_and_triton.tiled import (
    TILED_CONFIG,
    matmul_tile_masked,
    tiled_matmul,
    tiled_matmul_descriptor_kernel,
    tiled_matmul_descriptors,
    tiled_matmul_kernel,
)
from course_lib.kernels.coalescing_and_triton.vector_add import vector_add, vector_add_kernel

__all__ = [
    # notebook 04: the first kernels, the tiled GEMM, the article's experiment and its evidence
    "vector_add", "vector_add_kernel", "row_sums", "row_sums_kernel", "ROW_BLOCK", "COL_BLOCK",
    "transpose", "transpose_kernel", "matmul_tile_masked", "tiled_matmul", "tiled_matmul_kernel",
    "tiled_matmul_transposed_b", "tiled_matmul_transposed_b_kernel", "article_b_tile_addresses",
    "hopper_compile_evidence",
    # notebook 05: descriptors, the launch order, the fast kernel and its tuning
    "tiled_matmul_descriptors", "tiled_matmul_descriptor_kernel", "grouped_tile", "persistent_matmul_kernel",
    "FastConfig", "FAST_CONFIGS", "fast_matmul", "fast_matmul_autotuned", "autotuned_config", "shape_candidates",
    "tuning_log",
    # notebooks 06 and 10
    "TILED_CONFIG", "split_k_matmul_kernel",
    # notebook 12: FP8
    "Fp8Config", "fp8_config", "fp8_matmul", "fp8_matmul_blockscaled", "fp8_matmul_kernel", "fp8_blockscaled_kernel",
    "triton_fp8",
    # the course manifest
    "NOTEBOOK", "FAST_NOTEBOOK",
]
