"""Tensor cores through a bundled CUDA C++ extension (notebooks 06_tensor_cores, 07_mma_sync_kernels,
08_hopper_tensor_cores and 09_hopper_pipelines).

Seven bf16 stages, ``tc_0_mma_sync_minimal`` (one ``mma.sync`` per warp, fragments from global
memory) and the staircase ``tc_1_mma_sync`` ... ``tc_6_tma_store``, and, off the staircase,
``tc_7_fp8`` (notebook 12): stage 6's kernel on e4m3 inputs with their scales, called as
``tc_7_fp8(qa, qw)`` on :class:`course_lib.fp8.Quantized` operands. Each is a real ``.cu`` file in
``course_lib/csrc/`` (shared helpers in ``tc_*.cuh``) whose header says what it adds, and one entry
of the extension's binding (``tc_binding.cu``), which is where this package reads the list from; the
course manifest (``course_lib.registry``) gives each its title, notebook and shape rule and makes its
GEMM (:func:`make_gemm`): ``course_lib.get_stage("tc_4_warp_specialized")``.

The stage's name is also its file (``csrc/tc_4_warp_specialized.cu``), its entry in the extension
(``extension().tc_4_warp_specialized``) and its C++ launcher (``tc::launch_tc_4_warp_specialized``).

Every stage computes ``c = a @ b`` for bf16 ``a`` (M x K) and ``b`` (K x N), row-major, with fp32
accumulation, and returns **bf16**, as ``torch.matmul`` does for bf16 inputs (cuBLAS accumulates in
fp32 and rounds once at the end). The same output type makes the comparison with cuBLAS fair: both
write the same bytes, and ``course_lib.check`` holds both to the bf16 tolerance. An fp32 output
would double the bytes written and measure a different operation.

Shapes: M, N and K must be multiples of 8 - the copy engine (TMA) needs every row of A, B and C to
start on a 16-byte boundary, and stage 1 loads 16 bytes at a time. Beyond that any shape works:
partial tiles at the edges are zero-filled on load and clipped on store by TMA (stages 2-6) or
bounds-checked (stage 1). Stage 6 takes any M (TMA fills a partial box of A's rows, clips C's), and
stage 0 reads and writes one element at a time and takes any shape.

On a machine with an NVIDIA GPU the extension is built on first use with
``torch.utils.cpp_extension.load`` (ninja, parallel jobs) into a cache outside the repository
(``COURSE_EXTENSIONS_DIR``, else ``$TORCH_EXTENSIONS_DIR/course_lib``, else
``~/.cache/course_lib/extensions``); the architecture is read from the device. Without a GPU the
stages cannot run; the package still compiles their sources with ``nvcc`` when one is installed
(:func:`compile_stage`) and counts the instructions of the machine code (:func:`instruction_table`).

The package, by job:

* :mod:`.stages` - each stage's :class:`Design` (its numbers), the extension's build, the GEMM
  wrapper of a stage (:func:`make_gemm`);
* :mod:`.model` - a pure-Python model of the address and schedule arithmetic the kernels rely on
  (descriptors, wgmma's reads, stmatrix, stage 6's plan, stream-K's fix-up), checked by the
  tests; the swizzle, the tile order, stream-K's work units and waves it uses are
  :mod:`course_lib.model`'s (``layout``, ``schedules``, ``waves``), where every caller imports them;
* :mod:`.inspection` - compiling without a GPU, SASS tables, the excerpts the notebooks print;
* :mod:`.csrc` - the stages the binding lists and the constants the Python side reads by name from
  the C++ sources.

What a notebook calls as ``tc.<name>`` (``from course_lib.kernels import tensor_cores as tc``) is
this package's own: its stages, their designs and build, its model of the kernels' addresses and
schedules, and the inspection of their machine code.
"""

from course_lib.kernels.tensor_cores import csrc, inspection, model, stages
from course_lib.kernels.tensor_cores.csrc import BINDING, CSRC
from course_lib.kernels.tensor_cores.inspection import (
    EXCERPT_BEGIN,
    EXCERPT_END,
    SASS_HIGHLIGHTS,
    compile_all,
    compile_stage,
    cuda_function,
    cuda_functions,
    excerpts,
    instruction_table,
    kernel_piece,
    mainloop_slice_path,
    resource_table,
    sass_by_kernel,
    sass_mix_by_kernel,
    source_excerpt,
    source_path,
    staircase_kernel,
    staircase_mix,
)
from course_lib.kernels.tensor_cores.model import (
    A_LBO,
    A_SBO,
    B_LBO,
    B_SBO,
    NARROW_TILE_BELOW,
    SCHEDULE_CODES,
    STAGE6_TILES,
    STREAM_K_BELOW,
    STREAM_K_MIN_SLICES,
    TC0_ELEMENTS,
    TILE_AUTO,
    Stage6Plan,
    a_descriptor,
    b_descriptor,
    decode_descriptor,
    descriptor_encode,
    make_descriptor,
    stage6_cluster_tiles,
    stage6_epilogue_rounds,
    stage6_plan,
    stage6_schedule,
    stmatrix_fragment_position,
    stmatrix_staging_address,
    tc0_fragment_position,
    wgmma_accumulator_position,
    wgmma_k_major_address,
    wgmma_mn_major_address,
)
from course_lib.kernels.tensor_cores.stages import (
    ALL_DESIGNS,
    DESIGN,
    DESIGNS,
    FP8_SCALING_CODE,
    FP8_SHAPE_MULTIPLE,
    FP8_SHAPES,
    FP8_STAGE,
    MINIMAL,
    Design,
    build_extension,
    build_plan,
    design,
    extension,
    make_gemm,
    stage6_launch_plan,
    tc_7_fp8,
    tc_7_fp8_arguments,
)

__all__ = [name for name in dir() if not name.startswith("_")]
