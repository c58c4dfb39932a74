"""Exercises of notebook ``02_shared_memory_tiling``: the tiled kernel written by you, the loads it
saves, and a transposed tile of B made free of bank conflicts."""

from __future__ import annotations

from numba import cuda, float32

from course_lib.exercises import NumbaGemmPuzzle, Question, trace_gemm
from course_lib.exercises.naive import PUZZLE_SHAPES
from course_lib.kernels import shared_memory_tiling as tiling

TILE = 16  # the puzzles' tile: blocks of 16 x 16 threads
PADDED = TILE + 1  # a padded row; numba compiles a shared array's shape only from constants, not from TILE + 1


def _launch(kernel, a, b):
    return tiling.launch_tiled(kernel, a, b, tile=TILE)


tiled_kernel = NumbaGemmPuzzle(
    title="Your tiled kernel",
    launch=_launch,
    reference=tiling.make_tiled_kernel(TILE),
    shapes=PUZZLE_SHAPES,
    trace_shape=(32, 32, 32),
    grid=(2, 2),
    block=(TILE, TILE),
    reveal=tiling.make_tiled_kernel,
    k_tile=TILE,
)


@cuda.jit(fastmath=True)
def transposed_b_padded_kernel(a, b, c):
    """The tiled kernel with B's tile stored transposed (b_tile[x, y] holds B[k0 + y, col0 + x]) and
    read as stored, its rows padded to TILE + 1 words so that a column spreads over the banks."""
    a_tile = cuda.shared.array((TILE, TILE), float32)
    b_tile = cuda.shared.array((TILE, PADDED), float32)  # one unused word per row: the padding
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K = a.shape
    N = b.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        if row < M and k0 + tx < K:
            a_tile[ty, tx] = a[row, k0 + tx]
        else:
            a_tile[ty, tx] = float32(0.0)
        if k0 + ty < K and col < N:
            b_tile[tx, ty] = b[k0 + ty, col]  # transposed: lane tx writes row tx of the tile
        else:
            b_tile[tx, ty] = float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[tx, k]  # row tx, as stored: the lanes read a column
        cuda.syncthreads()
    if row < M and col < N:
        c[row, col] = acc


transposed_b = NumbaGemmPuzzle(
    title="Your transposed-tile kernel",
    launch=_launch,
    reference=transposed_b_padded_kernel,
    shapes=PUZZLE_SHAPES,
    trace_shape=(32, 32, 32),
    grid=(2, 2),
    block=(TILE, TILE),
    k_tile=TILE,
)


def _global_loads_at_48() -> int:
    tr = trace_gemm(tiling.make_tiled_kernel(TILE), (48, 48, 48), (3, 3), (TILE, TILE))
    return sum(1 for acc in tr.accesses if acc.space == "global" and acc.kind == "load")


global_loads = Question(
    what="global loads at N = 48, T = 16",
    expected=_global_loads_at_48,
    hint="count per block: steps along K, times the elements it copies per step",
    wrong=[
        (2 * 48**3, "that is the naive kernel's count, 2 N^3: every thread reading a row and a column."),
        (lambda want: want // 2, "that counts only one of the two tiles; each step copies a tile of A and one of B."),
        (lambda want: want // 9, "that counts one block; there are 3 x 3 of them."),
    ],
)

reads_per_element = Question(
    what="global reads of each element of A",
    expected=lambda: 48 // TILE,
    hint="how many blocks read each tile of A?",
    wrong=[
        (48, "that is how often the naive kernel reads it, once per column of C."),
        (TILE, "that is how often it is read from shared memory per block, not from global memory."),
    ],
)
