"""Exercises of notebook ``02_shared_memory_tiling``: the tiled kernel written by you and the loads it
saves; and, in the deep dive ``deep_dives/memory_lab``, a transposed tile of B made free of bank
conflicts."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from numba import cuda, float32

from course_lib.exercises import NumbaGemmPuzzle, NumberQuestion, source_tree, trace_gemm
from course_lib.exercises.naive import PUZZLE_SHAPES
from course_lib.kernels import shared_memory_tiling as tiling
from course_lib.learn import Verdict, say

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


def _b_tile_shape(kernel) -> tuple[int, ...] | None:
    """The shape the kernel's source gives ``b_tile`` (``cuda.shared.array(shape, ...)``): numbers,
    the kernel's global names (TILE, PADDED) and sums or products of them (a learner's TILE + 1).
    None where the source cannot be read or the shape is made of anything else."""
    import ast  # noqa: PLC0415
    import operator  # noqa: PLC0415

    fn = getattr(kernel, "py_func", None) or kernel
    names = getattr(fn, "__globals__", {})
    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and isinstance(names.get(node.id), int):
            return names[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            left, right = value(node.left), value(node.right)
            return None if left is None or right is None else ops[type(node.op)](left, right)
        return None

    tree = source_tree(kernel)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "b_tile" for t in node.targets)
                and isinstance(node.value, ast.Call) and getattr(node.value.func, "attr", None) == "array"
                and node.value.args):
            shape = node.value.args[0]
            dims = [value(d) for d in (shape.elts if isinstance(shape, ast.Tuple) else [shape])]
            return None if None in dims else tuple(dims)
    return None


def _b_tile_transposed(kernel) -> bool | None:
    """Whether the kernel stores its tile of B transposed, decided from what its threads do on one
    block and one step of K (traced on the simulator), whatever the tiles or their indices are named
    and in whatever order the kernel loads and stores them. The tile of B is the shared array that
    threads tx and tx + 1 of one warp read at different places in the multiply-adds (each reads its
    own column of B's tile; the tile of A is read at one place by a whole row of threads); it is
    stored as B lies (not transposed) when threads tx and tx + 1 write neighbouring elements of it,
    as they read neighbouring elements of B. None where the trace cannot run or shows no such tile
    (the check itself then says what is wrong)."""
    try:
        tr = trace_gemm(kernel, (TILE, TILE, TILE), (1, 1), (TILE, TILE))
    except Exception:  # noqa: BLE001 - the check runs the kernel again and reports it
        return None

    def by_thread(kind: str) -> dict[tuple, int]:  # (array, warp, ty, tx, instance) -> element offset
        return {(a.array, a.warp, a.thread[1], a.thread[0], a.instance): a.byte_offset // a.itemsize
                for a in tr.accesses if a.space == "shared" and a.kind == kind}

    def neighbours(seen: dict[tuple, int], array: str) -> list[tuple[int, int]]:  # (tx's, tx + 1's)
        return [(here, seen[(name, w, ty, tx + 1, i)]) for (name, w, ty, tx, i), here in seen.items()
                if name == array and (name, w, ty, tx + 1, i) in seen]

    loads, stores = by_thread("load"), by_thread("store")
    b_tiles = [name for name in {key[0] for key in loads}
               if any(here != there for here, there in neighbours(loads, name))]
    if len(b_tiles) != 1:
        return None
    pairs = neighbours(stores, b_tiles[0])
    if not pairs:
        return None
    return not all(there - here == 1 for here, there in pairs)


@dataclass(frozen=True)
class _TransposedTilePuzzle(NumbaGemmPuzzle):
    """The transposed-tile puzzle: the kernel check, and a note for the padding put on the number
    of rows (``(TILE + 1, TILE)``), which leaves the rows ``TILE`` words apart and the column read
    in two banks as before."""

    def check(self, kernel) -> Verdict:
        if _b_tile_transposed(kernel) is False:  # the puzzle's transposed tile is gone: nothing to run
            say(f"{self.title}: not solved yet: the tile of B is no longer stored transposed: threads tx and tx + 1 "
                "write neighbouring words of it, as B lies and as notebook 02's kernel stores it, which has no "
                "conflict to remove. Keep the transposed store (thread (tx, ty) writes row tx: b_tile[tx, ty], "
                "read along row tx) and remove its conflict by padding each row.")
            return Verdict(False)
        verdict = super().check(kernel)
        shape = None if verdict else _b_tile_shape(kernel)
        if shape is not None and len(shape) == 2 and shape[0] > TILE and shape[1] == TILE:
            say(f"b_tile is {shape[0]} x {shape[1]}: you padded the number of rows, not the row pitch. Row tx "
                f"still starts at word {TILE} tx, so the lanes' words fall in two banks as before; pad the second "
                f"dimension, the words per row.", indent=2)
        return verdict


transposed_b = _TransposedTilePuzzle(
    title="Your transposed-tile kernel",
    launch=_launch,
    reference=transposed_b_padded_kernel,
    shapes=PUZZLE_SHAPES,
    trace_shape=(32, 32, 32),
    grid=(2, 2),
    block=(TILE, TILE),
    k_tile=TILE,
)


@functools.cache  # a trace in the simulator takes a while; the count never changes
def _global_loads_at_48() -> int:
    tr = trace_gemm(tiling.make_tiled_kernel(TILE), (48, 48, 48), (3, 3), (TILE, TILE))
    return sum(1 for acc in tr.accesses if acc.space == "global" and acc.kind == "load")


global_loads = NumberQuestion(
    what="global loads at N = 48, T = 16",
    unit="loads",
    expected=_global_loads_at_48,
    hint="count per block: steps along K, times the elements it copies per step",
    wrong=[
        (2 * 48**3, "that is the naive kernel's count, 2 N^3: every thread reading a row and a column."),
        (lambda want: want // 2, "that counts only one of the two tiles; each step copies a tile of A and one of B."),
        (lambda want: want // 9, "that counts one block; there are 3 x 3 of them."),
    ],
)

reads_per_element = NumberQuestion(
    what="global reads of each element of A",
    unit="reads",
    expected=lambda: 48 // TILE,
    hint="how many blocks read each tile of A?",
    wrong=[
        (48, "that is how often the naive kernel reads it, once per column of C."),
        (TILE, "that is how often it is read from shared memory per block, not from global memory."),
    ],
)
