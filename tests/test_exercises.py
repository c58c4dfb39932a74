"""The puzzles of notebooks 01-03 (numba kernels written by the learner) and the questions of 00-03:
the course's solution passes, the unfilled starter is told to fill it in, and realistic wrong
solutions fail with the message that names their mistake."""

from __future__ import annotations

import linecache
import re
import textwrap

import pytest
from numba import cuda, float32

from course_lib.exercises import gpu_execution_model, naive, shared_memory_tiling, thread_coarsening


def _kernel(source: str, name: str):
    """A @cuda.jit kernel from source text, with its lines known to linecache (the check names them)."""
    text = "from numba import cuda, float32, float64\nTILE = 16\nT, H = 32, 16\n\n" + textwrap.dedent(source)
    filename = f"<test kernel {name}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace: dict = {"cuda": cuda, "float32": float32}
    exec(compile(text, filename, "exec"), namespace)
    return namespace[name]


def _variant(source: str, name: str, *edits: tuple[str, str]):
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    return _kernel(source, name)


def _check(puzzle, kernel, capsys) -> tuple[bool, str]:
    """The verdict, and what the check printed with its line breaks undone."""
    verdict = puzzle.check(kernel)
    return bool(verdict), " ".join(capsys.readouterr().out.split())


# ---- 01: the naive kernel ----------------------------------------------------------------------
NAIVE = """
@cuda.jit
def k(a, b, c):
    col, row = cuda.grid(2)
    M, K = a.shape
    N = b.shape[1]
    if row < M and col < N:
        acc = float32(0.0)
        for kk in range(K):
            acc += a[row, kk] * b[kk, col]
        c[row, col] = acc
"""
NAIVE_STARTER = """
@cuda.jit
def k(a, b, c):
    col, row = cuda.grid(2)
    M, K = a.shape
    N = b.shape[1]
    pass
"""


def test_naive_puzzle_accepts_a_right_kernel_and_says_so(capsys):
    ok, out = _check(naive.naive_kernel, _kernel(NAIVE, "k"), capsys)
    assert ok and "right on all 10 shapes" in out and "Solved" in out
    ok, out = _check(naive.naive_kernel, naive.naive_kernel.reference, capsys)
    assert ok


def test_naive_puzzle_tells_the_unfilled_starter_to_fill_it_in(capsys):
    ok, out = _check(naive.naive_kernel, _kernel(NAIVE_STARTER, "k"), capsys)
    assert not ok and "C was never written" in out and "Fill in the TODO lines" in out
    ok, out = _check(naive.naive_kernel, None, capsys)
    assert not ok and "no kernel yet" in out


def test_naive_puzzle_names_half_a_bounds_check(capsys):
    wrong = _variant(NAIVE, "k", ("if row < M and col < N:", "if row < M:"))
    ok, out = _check(naive.naive_kernel, wrong, capsys)
    assert not ok and "read B[0, " in out and "but B is" in out and "acc += a[row, kk] * b[kk, col]" in out
    assert "On a GPU this read raises no error" in out  # what a GPU would have done, said once


def test_naive_puzzle_names_a_loop_over_the_wrong_dimension(capsys):
    wrong = _variant(NAIVE, "k", ("for kk in range(K):", "for kk in range(N):"))
    ok, out = _check(naive.naive_kernel, wrong, capsys)
    assert not ok and "wrong on these" in out
    assert "but A is" in out or "but B is" in out  # N > K reads past a row of A or past B's end
    assert "relative error" in out  # N < K leaves terms out


def test_naive_puzzle_finds_x_along_the_rows(capsys):
    wrong = _variant(NAIVE, "k", ("col, row = cuda.grid(2)", "row, col = cuda.grid(2)"))
    ok, out = _check(naive.naive_kernel, wrong, capsys)
    assert not ok and "never wrote that element" in out  # the grid is laid out for x along columns
    assert "A loads: 256 requests, 16 sectors (course 2)" in out  # and its loads are not coalesced


def test_naive_puzzle_finds_a_missing_store(capsys):
    wrong = _variant(NAIVE, "k", ("        c[row, col] = acc\n", "        pass\n"))
    ok, out = _check(naive.naive_kernel, wrong, capsys)
    assert not ok and "C was never written" in out


def test_naive_puzzle_finds_a_k_loop_that_stops_at_64(capsys):
    wrong = _variant(NAIVE, "k", ("for kk in range(K):", "for kk in range(min(K, 64)):"))
    ok, out = _check(naive.naive_kernel, wrong, capsys)
    assert not ok and "right on 8 of 10 shapes" in out and "(17, 3, 70):" in out and "(2, 7, 300):" in out
    assert "Only the shapes with the longest K are wrong (K = 70, 300; right up to K = 40)" in out
    assert "the sum over K is incomplete" in out


def test_naive_puzzle_finds_a_sum_kept_in_c_without_setting_it_first(capsys):
    wrong = _variant(NAIVE, "k", ("        acc = float32(0.0)\n", ""), ("acc += a[row, kk] * b[kk, col]", "c[row, col] += a[row, kk] * b[kk, col]"),
                     ("        c[row, col] = acc\n", ""))
    ok, out = _check(naive.naive_kernel, wrong, capsys)
    assert not ok and "elements of C before writing them" in out and "must start by setting it" in out
    assert "never wrote" not in out and "C was never written" not in out


def test_naive_puzzle_says_nothing_of_float64_for_a_sum_kept_in_c(capsys):
    # C is float32: `c[row, col] = 0.0` stores a float32 zero, and the sum is float32
    in_c = _variant(NAIVE, "k", ("        acc = float32(0.0)\n", "        c[row, col] = 0.0\n"),
                    ("acc += a[row, kk] * b[kk, col]", "c[row, col] += a[row, kk] * b[kk, col]"),
                    ("        c[row, col] = acc\n", ""))
    ok, out = _check(naive.naive_kernel, in_c, capsys)
    assert "right on all 10 shapes" in out and "Python float" not in out and "float64" not in out
    assert not ok and "C stores: 288 requests (course 32)" in out  # a store per term, not per element


# Sums numba computes in float64, each written differently: the simulator runs them in Python and
# they are right on every shape; numba's type inference (course_lib.instruments.numba_types) names them.
FLOAT64_SUMS = [
    ("acc = float32(0.0)", "acc = 0.0"),
    ("acc = float32(0.0)", "acc = 0"),
    ("acc = float32(0.0)", "acc = float(0)"),
    ("acc = float32(0.0)", "acc, kk = 0.0, 0"),
    ("acc = float32(0.0)", "acc: float = 0.0"),
    ("acc += a[row, kk] * b[kk, col]", "acc = cuda.fma(a[row, kk], b[kk, col], acc + 0.0)"),
    ("acc += a[row, kk] * b[kk, col]", "acc += float64(a[row, kk]) * b[kk, col]"),
]


@pytest.mark.parametrize("old, new", FLOAT64_SUMS)
def test_naive_puzzle_refuses_a_sum_numba_computes_in_float64(capsys, old, new):
    ok, out = _check(naive.naive_kernel, _variant(NAIVE, "k", (old, new)), capsys)
    assert "right on all 10 shapes" in out
    assert not ok and "Not solved yet: numba computes `acc` in float64 here" in out and "Solved" not in out


def test_a_float64_sum_inside_a_device_function_is_found_too(capsys):
    """numba's types of the learner's device functions are read as the kernel's are."""
    loop = ("        acc = float32(0.0)\n        for kk in range(K):\n            acc += a[row, kk] * b[kk, col]\n"
            "        c[row, col] = acc\n")
    assert loop in NAIVE
    text = ("\n@cuda.jit(device=True)\ndef dot(a, b, row, col, K):\n    s = 0.0\n    for kk in range(K):\n"
            "        s += a[row, kk] * b[kk, col]\n    return s\n" + NAIVE.replace(loop, "        c[row, col] = dot(a, b, row, col, K)\n"))
    ok, out = _check(naive.naive_kernel, _kernel(text, "k"), capsys)
    assert not ok and "numba computes `s (in dot)` in float64" in out and "Solved" not in out
    ok, out = _check(naive.naive_kernel, _kernel(text.replace("s = 0.0", "s = float32(0.0)"), "k"), capsys)
    assert ok, out


def test_where_numba_cannot_type_the_kernel_a_sum_started_as_a_python_number_is_still_named(capsys):
    """Indices read through `cuda.threadIdx` itself have no stand-in, so the types cannot be had; the
    source then names a sum started as any Python number, `acc = 0` as well as `acc = 0.0`."""
    aliased = _variant(NAIVE, "k", ("col, row = cuda.grid(2)",
                                    "t, bl, d = cuda.threadIdx, cuda.blockIdx, cuda.blockDim\n"
                                    "    col, row = bl.x * d.x + t.x, bl.y * d.y + t.y"),
                       ("acc = float32(0.0)", "acc = 0"))
    ok, out = _check(naive.naive_kernel, aliased, capsys)
    assert not ok and "numba computes `acc` in float64" in out and "Solved" not in out


# Kernels the simulator runs (as Python) but numba's CUDA compiler refuses: found by numba-cuda's own
# pipeline, run without a GPU (course_lib.instruments.numba_cuda_front).
CUDA_REFUSED = [
    ("        acc = float32(0.0)\n        for kk in range(K):\n            acc += a[row, kk] * b[kk, col]\n",
     "        acc = sum(a[row, kk] * b[kk, col] for kk in range(K))\n", "generator expression"),
    ("        acc = float32(0.0)\n        for kk in range(K):\n            acc += a[row, kk] * b[kk, col]\n",
     "        parts = [float32(0.0)]\n        for kk in range(K):\n            parts[0] += a[row, kk] * b[kk, col]\n"
     "        acc = parts[0]\n", "Python list"),
]


@pytest.mark.parametrize("old, new, named", CUDA_REFUSED, ids=["generator", "list"])
def test_naive_puzzle_refuses_a_kernel_numba_cannot_compile_for_the_gpu(capsys, old, new, named):
    ok, out = _check(naive.naive_kernel, _variant(NAIVE, "k", (old, new)), capsys)
    assert "right on all 10 shapes" in out
    assert not ok and "on a GPU this kernel would not compile" in out and named in out and "Solved" not in out


def test_a_generator_inside_a_device_function_is_refused_and_a_reshaped_view_is_not(capsys):
    """A device function is compiled as the kernel's call needs it (no GPU asked for its capability);
    the arrays are typed C-contiguous as a launch passes them, so ``a.reshape(M * K)`` compiles."""
    loop = ("        acc = float32(0.0)\n        for kk in range(K):\n            acc += a[row, kk] * b[kk, col]\n"
            "        c[row, col] = acc\n")
    text = ("\n@cuda.jit(device=True)\ndef dot(a, b, row, col, K):\n"
            "    return sum(a[row, kk] * b[kk, col] for kk in range(K))\n"
            + NAIVE.replace(loop, "        c[row, col] = dot(a, b, row, col, K)\n"))
    ok, out = _check(naive.naive_kernel, _kernel(text, "k"), capsys)
    assert not ok and "would not compile" in out and "generator expression" in out
    flat = _variant(NAIVE, "k", ("    N = b.shape[1]\n", "    N = b.shape[1]\n    af = a.reshape(M * K)\n"),
                    ("a[row, kk]", "af[row * K + kk]"))
    ok, out = _check(naive.naive_kernel, flat, capsys)
    assert "would not compile" not in out


def test_port_fix_puzzle_refuses_a_store_inside_the_loop(capsys):
    wrong = _variant(PORT_FIXED, "k", ("            acc += A[row * K + kk] * B[kk * N + col]\n        C[row * N + col] = acc\n",
                                       "            acc += A[row * K + kk] * B[kk * N + col]\n            C[row * N + col] = acc\n"))
    ok, out = _check(naive.article_port_fix, wrong, capsys)
    assert not ok and "an element of C is stored 8 times" in out and "Solved" not in out


def test_port_fix_and_tiled_puzzles_refuse_float64_too(capsys):
    ok, out = _check(naive.article_port_fix, _variant(PORT_FIXED, "k", ("acc = float32(0.0)", "acc = 0")), capsys)
    assert not ok and "numba computes `acc` in float64" in out and "Solved" not in out
    wide_tile = _variant(TILED, "k", ("b_tile = cuda.shared.array((TILE, TILE), float32)",
                                      "b_tile = cuda.shared.array((TILE, TILE), float64)"))
    ok, out = _check(shared_memory_tiling.tiled_kernel, wide_tile, capsys)
    assert not ok and "`b_tile` in float64 here" in out and "padding or a swizzle" not in out
    assert "padding cannot remove that" in out


def test_every_course_numba_kernel_is_float32_throughout_and_compiles_for_the_gpu():
    """Neither the types check nor numba-cuda's compiler (run without a GPU) may flag the course's own
    kernels (each typed for a float32 launch)."""
    import numpy as np  # noqa: PLC0415

    from course_lib.instruments.numba_cuda_front import cuda_compile_verdict  # noqa: PLC0415
    from course_lib.instruments.numba_types import float64_locals  # noqa: PLC0415
    from course_lib.kernels import naive as k01  # noqa: PLC0415
    from course_lib.kernels import shared_memory_tiling as k02  # noqa: PLC0415
    from course_lib.kernels import thread_coarsening as k03  # noqa: PLC0415

    m = np.zeros((8, 8), np.float32)
    flat = np.zeros(64, np.float32)
    kernels = [(k01.naive_kernel, (m, m, m)), (k01.naive_x_along_rows_kernel, (m, m, m)),
               (k01.article_port_kernel, (flat, flat, flat, 8, 8, 8)),
               (naive.article_port_fixed_kernel, (flat, flat, flat, 8, 8, 8)),
               (k02.make_tiled_kernel(16), (m, m, m)), (shared_memory_tiling.transposed_b_padded_kernel, (m, m, m)),
               (k03.coarsened_2x2_kernel, (m, m, m))]
    for kernel, args in kernels:
        assert float64_locals(kernel, args) == [], kernel
        assert cuda_compile_verdict(kernel, args) == ("accepted", None), kernel


def test_naive_puzzle_refuses_a_k_loop_capped_at_a_constant(capsys):
    # a fresh tester's sidestep: a cap above every K the shapes had (133) passed
    ok, out = _check(naive.naive_kernel, _variant(NAIVE, "k", ("range(K)", "range(min(K, 256))")), capsys)
    assert not ok and "(2, 7, 300):" in out and "Solved" not in out


def test_naive_puzzle_finds_a_sum_that_starts_again_inside_the_loop(capsys):
    """A fresh learner's mistake: `acc = float32(0.0)` inside the K loop keeps only the last product."""
    wrong = _variant(NAIVE, "k", ("        acc = float32(0.0)\n", ""),
                     ("acc += a[row, kk] * b[kk, col]", "acc = float32(0.0)\n            acc += a[row, kk] * b[kk, col]"))
    ok, out = _check(naive.naive_kernel, wrong, capsys)
    out = " ".join(out.split())
    assert not ok and "Does the sum start once, before the loop, not again inside it?" in out


def test_naive_puzzle_finds_row_and_col_swapped_in_a_read(capsys):
    wrong = _variant(NAIVE, "k", ("acc += a[row, kk] * b[kk, col]", "acc += a[row, kk] * b[col, kk]"))
    ok, out = _check(naive.naive_kernel, wrong, capsys)
    assert not ok and "read B[" in out and "but B is" in out


def test_naive_puzzle_reports_a_kernel_that_does_not_run(capsys):
    wrong = _variant(NAIVE, "k", ("acc += a[row, kk] * b[kk, col]", "acc += a[row, kk] * bb[kk, col]"))
    ok, out = _check(naive.naive_kernel, wrong, capsys)
    assert not ok and "did not run" in out and "NameError" in out and "tid=" not in out


# ---- 01, exercise 1: the source article's port, fixed ------------------------------------------
PORT_FIXED = """
@cuda.jit
def k(A, B, C, M, N, K):
    col, row = cuda.grid(2)
    if row < M and col < N:
        acc = float32(0.0)
        for kk in range(K):
            acc += A[row * K + kk] * B[kk * N + col]
        C[row * N + col] = acc
"""


def test_port_fix_puzzle_accepts_the_fix_and_tells_the_starter_to_fill_it_in(capsys):
    ok, out = _check(naive.article_port_fix, _kernel(PORT_FIXED, "k"), capsys)
    assert ok and "Solved" in out
    assert _check(naive.article_port_fix, naive.article_port_fix.solved_by, capsys)[0]
    starter = _kernel("@cuda.jit\ndef k(A, B, C, M, N, K):\n    col, row = cuda.grid(2)\n    pass\n", "k")
    ok, out = _check(naive.article_port_fix, starter, capsys)
    assert not ok and "Fill in the TODO lines" in out


@pytest.mark.parametrize("old, new, said", [
    ("A[row * K + kk]", "A[row * N + kk]", "K differs from N"),                 # the port as written
    ("C[row * N + col]", "C[row * K + col]", "K differs from N"),               # C stepped with A's rows
    ("B[kk * N + col]", "B[kk * K + col]", "read B["),                          # B stepped with A's rows
    ("    if row < M and col < N:\n", "    if True:\n", "read A["),             # no bounds check
])
def test_port_fix_puzzle_names_what_is_still_wrong(capsys, old, new, said):
    ok, out = _check(naive.article_port_fix, _variant(PORT_FIXED, "k", (old, new)), capsys)
    assert not ok and said in out and "Solved" not in out


# ---- 02: the tiled kernel, and a transposed tile without conflicts ------------------------------
TILED = """
@cuda.jit
def k(a, b, c):
    a_tile = cuda.shared.array((TILE, TILE), float32)
    b_tile = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K = a.shape
    N = b.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        a_tile[ty, tx] = a[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)
        b_tile[ty, tx] = b[k0 + ty, col] if k0 + ty < K and col < N else float32(0.0)
        cuda.syncthreads()
        for kk in range(TILE):
            acc += a_tile[ty, kk] * b_tile[kk, tx]
        cuda.syncthreads()
    if row < M and col < N:
        c[row, col] = acc
"""


def test_tiled_puzzle_accepts_a_right_kernel(capsys):
    ok, out = _check(shared_memory_tiling.tiled_kernel, _kernel(TILED, "k"), capsys)
    assert ok and "Solved" in out and "Races" not in out


def test_tiled_puzzle_finds_a_missing_first_barrier(capsys):
    wrong = _variant(TILED, "k", ("        cuda.syncthreads()\n        for kk", "        for kk"))
    ok, out = _check(shared_memory_tiling.tiled_kernel, wrong, capsys)
    assert not ok and "Races in shared memory" in out and "with no cuda.syncthreads() between them" in out
    assert "a barrier is missing between lines" in out
    assert "never wrote" not in out  # the NaN, where the simulator's order shows one, came from shared memory
    if "not finite" in out:
        assert "read before any thread of its block wrote it, and another thread wrote it later" in out
        assert "a cuda.syncthreads() is missing between the lines that fill the tile and the loop" in out


def test_tiled_puzzle_names_a_barrier_inside_the_bounds_if(capsys):
    """A fresh learner's kernel: the product loop and the trailing barrier under `if row < M and col < N`.
    Threads past the edge skip that barrier and refill the tiles early; the shapes show only that long
    K is wrong, which once read as "the sum over K is incomplete"."""
    wrong = _variant(TILED, "k", ("        for kk in range(TILE):\n            acc += a_tile[ty, kk] * b_tile[kk, tx]\n"
                                  "        cuda.syncthreads()\n",
                                  "        if row < M and col < N:\n            for kk in range(TILE):\n"
                                  "                acc += a_tile[ty, kk] * b_tile[kk, tx]\n            cuda.syncthreads()\n"))
    ok, out = _check(shared_memory_tiling.tiled_kernel, wrong, capsys)
    assert not ok and "Barriers skipped: traced at M, N = 31, 31" in out and "passed 2 cuda.syncthreads(), the others 4" in out
    assert "sum over K is incomplete" not in out


A_IF_WITHOUT_ELSE = ("a_tile[ty, tx] = a[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)",
                     "if row < M and k0 + tx < K:\n            a_tile[ty, tx] = a[row, k0 + tx]")
B_IF_WITHOUT_ELSE = ("b_tile[ty, tx] = b[k0 + ty, col] if k0 + ty < K and col < N else float32(0.0)",
                     "if k0 + ty < K and col < N:\n            b_tile[ty, tx] = b[k0 + ty, col]")


@pytest.mark.parametrize("edit, tile", [(A_IF_WITHOUT_ELSE, "a_tile"), (B_IF_WITHOUT_ELSE, "b_tile")])
def test_tiled_puzzle_names_a_tile_slot_not_zero_filled_past_the_edge(capsys, edit, tile):
    # On the simulator the slot used to keep an earlier value (the other tile's zeros); on a GPU stale
    # NaN bits make C NaN. During the check a block's shared memory starts as marked NaN.
    ok, out = _check(shared_memory_tiling.tiled_kernel, _variant(TILED, "k", edit), capsys)
    assert not ok and "(3, 5, 7):" in out and "never wrote" not in out
    assert re.search(rf"was computed from {tile}\[\d+, \d+\] \(row \d+, column \d+ of the 16 x 16 tile\), read "
                     r"before any thread of its block wrote it, and none wrote it before the block ended", out), out
    assert "an `if` that loads the slot needs an `else` that sets it to 0" in out
    other = "b_tile" if tile == "a_tile" else "a_tile"
    assert f"computed from {other}[" not in out


@pytest.mark.parametrize("cap", ["min(K, 64)", "min(K, 3 * TILE)"])
def test_tiled_puzzle_finds_a_k_loop_that_stops_early(capsys, cap):
    wrong = _variant(TILED, "k", ("for k0 in range(0, K, TILE):", f"for k0 in range(0, {cap}, TILE):"))
    ok, out = _check(shared_memory_tiling.tiled_kernel, wrong, capsys)
    assert not ok and "right on 8 of 10 shapes" in out
    assert "Only the shapes with the longest K are wrong (K = 70, 300; right up to K = 40)" in out


def test_tiled_puzzle_names_threads_that_return_before_a_barrier(capsys):
    wrong = _variant(TILED, "k", ("    acc = float32(0.0)\n", "    if row >= M or col >= N:\n        return\n    acc = float32(0.0)\n"))
    ok, out = _check(shared_memory_tiling.tiled_kernel, wrong, capsys)
    assert not ok and "never wrote" not in out
    # the kernel's lines: 1-4 are _kernel's header, so `return` is line 16 and the first barrier line 21
    assert re.search(r"\(3, 5, 7\): .*read before any thread of its block wrote it: threads \(5, 0\), \(6, 0\) and "
                     r"\d+ others of block \(0, 0\) never reached the cuda.syncthreads\(\) at line 21 \(they returned "
                     r"\(line 16\), or an `if` kept them from it\)", " ".join(out.split())), out
    assert "put the `if`s around the loads and the store of C only, never around a barrier" in " ".join(out.split())


def test_tiled_puzzle_finds_the_partial_last_tile_of_k_skipped(capsys):
    """A fresh learner's mistake: `range(K // TILE)` tiles leaves out the K tail."""
    wrong = _variant(TILED, "k", ("for k0 in range(0, K, TILE):", "for k0 in range(0, K // TILE * TILE, TILE):"))
    ok, out = _check(shared_memory_tiling.tiled_kernel, wrong, capsys)
    out = " ".join(out.split())
    assert not ok and "a K that is not a multiple of the tile (16): the last, partial tile of K is left out" in out


def test_tiled_puzzle_finds_an_off_by_one_tile_load(capsys):
    wrong = _variant(TILED, "k", ("a[row, k0 + tx] if", "a[row, k0 + tx + 1] if"))
    ok, out = _check(shared_memory_tiling.tiled_kernel, wrong, capsys)
    assert not ok and "read A[" in out and "but A is" in out


def test_tiled_puzzle_finds_a_transposed_read_of_a_tile(capsys):
    wrong = _variant(TILED, "k", ("acc += a_tile[ty, kk] * b_tile[kk, tx]", "acc += a_tile[kk, ty] * b_tile[kk, tx]"))
    ok, out = _check(shared_memory_tiling.tiled_kernel, wrong, capsys)
    assert not ok and ("relative error" in out or "wrong by more than rounding" in out or "computed from a_tile[" in out)


def test_tiled_puzzle_finds_a_missing_second_barrier(capsys):
    wrong = _variant(TILED, "k", ("            acc += a_tile[ty, kk] * b_tile[kk, tx]\n        cuda.syncthreads()\n",
                                  "            acc += a_tile[ty, kk] * b_tile[kk, tx]\n"))
    ok, out = _check(shared_memory_tiling.tiled_kernel, wrong, capsys)
    assert not ok and "Races in shared memory" in out and "in different passes of the loop" in out
    assert "a barrier is missing after line" in out
    # the race is the diagnosis: said before the wrong shapes, and no note sends the learner to the loop over K
    assert out.index("Races in shared memory") < out.index("right on ")
    assert "longest K" not in out and "partial tile of K" not in out


def test_tiled_puzzle_names_loads_without_their_edge_check(capsys):
    wrong = _variant(TILED, "k", ("a[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)", "a[row, k0 + tx]"))
    ok, out = _check(shared_memory_tiling.tiled_kernel, wrong, capsys)
    assert not ok and "read A[" in out and "but A is" in out


def test_tiled_puzzle_finds_operands_read_from_global_memory_in_the_inner_loop(capsys):
    wrong = _variant(TILED, "k", ("acc += a_tile[ty, kk] * b_tile[kk, tx]",
                                  "acc += (a[row, k0 + kk] if row < M and k0 + kk < K else float32(0.0)) * b_tile[kk, tx]"))
    ok, out = _check(shared_memory_tiling.tiled_kernel, wrong, capsys)
    assert not ok and "right on all 10 shapes" in out
    assert "A loads: " in out and "(course 64)" in out and "not solved yet" in out


def test_tiled_puzzle_finds_the_articles_transposed_store(capsys):
    wrong = _variant(TILED, "k", ("b_tile[ty, tx] = b[k0 + ty, col]", "b_tile[tx, ty] = b[k0 + ty, col]"))
    ok, out = _check(shared_memory_tiling.tiled_kernel, wrong, capsys)
    assert not ok and "relative error" in out


TRANSPOSED = TILED.replace("b_tile[ty, tx] = b[k0 + ty, col]", "b_tile[tx, ty] = b[k0 + ty, col]").replace(
    "b_tile[kk, tx]", "b_tile[tx, kk]")


def test_transposed_tile_puzzle_accepts_padding(capsys):
    padded = _variant(TRANSPOSED, "k", ("b_tile = cuda.shared.array((TILE, TILE), float32)",
                                        "b_tile = cuda.shared.array((TILE, 17), float32)"))
    ok, out = _check(shared_memory_tiling.transposed_b, padded, capsys)
    assert ok and "Solved" in out


@pytest.mark.parametrize("shape, degree", [("(TILE, TILE)", 8), ("(TILE + 1, TILE)", 8), ("(TILE, 2 * TILE)", 16)])
def test_transposed_tile_puzzle_reports_the_conflicts_left(capsys, shape, degree):
    # unpadded; padding added to the wrong dimension; a pitch of 32 words, a multiple of 32
    wrong = _variant(TRANSPOSED, "k", ("b_tile = cuda.shared.array((TILE, TILE), float32)",
                                       f"b_tile = cuda.shared.array({shape}, float32)"))
    ok, out = _check(shared_memory_tiling.transposed_b, wrong, capsys)
    assert not ok and "right on all 10 shapes" in out
    assert f"shared loads: 2048 requests, {degree}-way (course 1)" in out
    # padding on the number of rows has its own message; the other two get only the trace's
    rows_padded = "b_tile is 17 x 16: you padded the number of rows, not the row pitch" in out
    assert rows_padded == (shape == "(TILE + 1, TILE)"), out


UNTRANSPOSED = [
    # a fresh learner's sidestep: 02's kernel (right, conflict-free) has no transposed tile left to fix
    (),
    # ... with its indices renamed (the check once looked for the name `ty`)
    (("tx, ty = cuda.threadIdx.x, cuda.threadIdx.y", "tx, ty = cuda.threadIdx.x, cuda.threadIdx.y\n    i, j = ty, tx"),
     ("b_tile[ty, tx] = b[k0 + ty, col] if k0 + ty < K", "b_tile[i, j] = b[k0 + i, col] if k0 + i < K")),
    # ... or as a flat tile, row-major as B lies
    (("b_tile = cuda.shared.array((TILE, TILE), float32)", "b_tile = cuda.shared.array(256, float32)"),
     ("b_tile[ty, tx] = b[", "b_tile[ty * TILE + tx] = b["), ("b_tile[kk, tx]", "b_tile[kk * TILE + tx]")),
]


@pytest.mark.parametrize("edits", UNTRANSPOSED)
def test_transposed_tile_puzzle_refuses_the_tile_stored_untransposed(capsys, edits):
    ok, out = _check(shared_memory_tiling.transposed_b, _variant(TILED, "k", *edits), capsys)
    assert not ok and "the tile of B is no longer stored transposed" in out and "Solved" not in out


# Both values read into registers first, then stored in either order (a fresh adversarial learner's
# pair, 2026-12-05): the tile of B is found by how the multiply-adds read it, not by the store that
# follows a load of B, so the order of the loads and stores decides nothing.
REGISTERS = (("        a_tile[ty, tx] = a[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)\n"
              "        b_tile[ty, tx] = b[k0 + ty, col] if k0 + ty < K and col < N else float32(0.0)\n",
              "        bv = b[k0 + ty, col] if k0 + ty < K and col < N else float32(0.0)\n"
              "        av = a[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)\n"
              "        b_tile[ty, tx] = bv\n        a_tile[ty, tx] = av\n"),)


def test_transposed_tile_puzzle_reads_the_tile_of_b_whatever_the_order_of_loads_and_stores(capsys):
    ok, out = _check(shared_memory_tiling.transposed_b, _variant(TILED, "k", *REGISTERS), capsys)
    assert not ok and "the tile of B is no longer stored transposed" in out and "Solved" not in out
    right = _variant(TRANSPOSED, "k", ("b_tile = cuda.shared.array((TILE, TILE), float32)",
                                       "b_tile = cuda.shared.array((TILE, 17), float32)"),
                     ("        a_tile[ty, tx] = a[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)\n"
                      "        b_tile[tx, ty] = b[k0 + ty, col] if k0 + ty < K and col < N else float32(0.0)\n",
                      "        bv = b[k0 + ty, col] if k0 + ty < K and col < N else float32(0.0)\n"
                      "        av = a[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)\n"
                      "        a_tile[ty, tx] = av\n        b_tile[tx, ty] = bv\n"))
    ok, out = _check(shared_memory_tiling.transposed_b, right, capsys)
    assert ok and "Solved" in out


def test_transposed_tile_puzzle_accepts_a_flat_padded_transposed_tile(capsys):
    flat = _variant(TRANSPOSED, "k", ("b_tile = cuda.shared.array((TILE, TILE), float32)",
                                      "b_tile = cuda.shared.array(272, float32)"),
                    ("b_tile[tx, ty] = b[", "b_tile[tx * 17 + ty] = b["), ("b_tile[tx, kk]", "b_tile[tx * 17 + kk]"))
    ok, out = _check(shared_memory_tiling.transposed_b, flat, capsys)
    assert ok and "Solved" in out


def test_transposed_tile_puzzle_names_padding_on_the_rows_written_as_numbers(capsys):
    wrong = _variant(TRANSPOSED, "k", ("b_tile = cuda.shared.array((TILE, TILE), float32)",
                                       "b_tile = cuda.shared.array((17, 16), float32)"))
    ok, out = _check(shared_memory_tiling.transposed_b, wrong, capsys)
    assert not ok and "you padded the number of rows, not the row pitch" in out and "pad the second dimension" in out


# ---- 03: the 2 x 2 kernel ---------------------------------------------------------------------------
COARSE = """
@cuda.jit
def k(a, b, c):
    a_tile = cuda.shared.array((T, T), float32)
    b_tile = cuda.shared.array((T, T), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row0, col0 = cuda.blockIdx.y * T, cuda.blockIdx.x * T
    M, K = a.shape
    N = b.shape[1]
    acc00 = acc01 = acc10 = acc11 = float32(0.0)
    for k0 in range(0, K, T):
        for i in range(2):
            for j in range(2):
                r, cc = ty + i * H, tx + j * H
                a_tile[r, cc] = a[row0 + r, k0 + cc] if row0 + r < M and k0 + cc < K else float32(0.0)
                b_tile[r, cc] = b[k0 + r, col0 + cc] if k0 + r < K and col0 + cc < N else float32(0.0)
        cuda.syncthreads()
        for kk in range(T):
            a0, a1 = a_tile[ty, kk], a_tile[ty + H, kk]
            b0, b1 = b_tile[kk, tx], b_tile[kk, tx + H]
            acc00 += a0 * b0
            acc01 += a0 * b1
            acc10 += a1 * b0
            acc11 += a1 * b1
        cuda.syncthreads()
    r0, c0 = row0 + ty, col0 + tx
    if r0 < M and c0 < N:
        c[r0, c0] = acc00
    if r0 < M and c0 + H < N:
        c[r0, c0 + H] = acc01
    if r0 + H < M and c0 < N:
        c[r0 + H, c0] = acc10
    if r0 + H < M and c0 + H < N:
        c[r0 + H, c0 + H] = acc11
"""


def test_coarsened_puzzle_accepts_a_right_kernel(capsys):
    ok, out = _check(thread_coarsening.coarsened_kernel, _kernel(COARSE, "k"), capsys)
    assert ok and "Solved" in out


def test_coarsened_puzzle_counts_shared_loads_that_are_not_reused(capsys):
    wrong = _variant(COARSE, "k", ("            acc00 += a0 * b0\n", "            acc00 += a_tile[ty, kk] * b_tile[kk, tx]\n"),
                     ("            acc11 += a1 * b1\n", "            acc11 += a_tile[ty + H, kk] * b_tile[kk, tx + H]\n"))
    ok, out = _check(thread_coarsening.coarsened_kernel, wrong, capsys)
    assert not ok and "right on all 10 shapes" in out and "shared loads: 4096 requests (course 2048)" in out


def test_coarsened_puzzle_counts_c_stored_once_per_k_tile(capsys):
    # The four stores indented into the loop over k0: C's final values are right, but C is written once
    # per K-tile; the trace covers two K-tiles, so the stores are twice the course's.
    tail = COARSE[COARSE.index("    r0, c0 = row0 + ty, col0 + tx\n"):]
    indented = "".join("    " + line for line in tail.splitlines(True))
    wrong = _kernel(COARSE.replace(tail, indented), "k")
    ok, out = _check(thread_coarsening.coarsened_kernel, wrong, capsys)
    assert not ok and "right on all 10 shapes" in out and "C stores: 64 requests (course 32)" in out
    assert "Solved" not in out


def test_coarsened_puzzle_names_a_missing_trailing_barrier(capsys):
    wrong = _variant(COARSE, "k", ("            acc11 += a1 * b1\n        cuda.syncthreads()\n",
                                   "            acc11 += a1 * b1\n"))
    ok, out = _check(thread_coarsening.coarsened_kernel, wrong, capsys)
    out = " ".join(out.split())
    assert not ok and "a barrier is missing after line" in out and "the sum over K is incomplete" not in out


def test_coarsened_puzzle_names_a_store_past_the_edge(capsys):
    wrong = _variant(COARSE, "k", ("    if r0 + H < M and c0 + H < N:\n", "    if r0 + H < M:\n"))
    ok, out = _check(thread_coarsening.coarsened_kernel, wrong, capsys)
    assert not ok and "wrote C[" in out and "On a GPU this write raises no error" in out


def test_coarsened_puzzle_finds_outputs_one_row_apart(capsys):
    wrong = _variant(COARSE, "k", ("a0, a1 = a_tile[ty, kk], a_tile[ty + H, kk]", "a0, a1 = a_tile[ty, kk], a_tile[ty + 1, kk]"))
    ok, out = _check(thread_coarsening.coarsened_kernel, wrong, capsys)
    assert not ok and "relative error" in out


def test_coarsened_puzzle_finds_a_k_loop_that_stops_after_two_tiles(capsys):
    wrong = _variant(COARSE, "k", ("for k0 in range(0, K, T):", "for k0 in range(0, min(K, 64), T):"))
    ok, out = _check(thread_coarsening.coarsened_kernel, wrong, capsys)
    assert not ok and "Only the shapes with the longest K are wrong (K = 70, 300; right up to K = 40)" in out


def test_coarsened_puzzle_names_a_tile_slot_not_zero_filled(capsys):
    wrong = _variant(COARSE, "k", (
        "                b_tile[r, cc] = b[k0 + r, col0 + cc] if k0 + r < K and col0 + cc < N else float32(0.0)",
        "                if k0 + r < K and col0 + cc < N:\n                    b_tile[r, cc] = b[k0 + r, col0 + cc]"))
    ok, out = _check(thread_coarsening.coarsened_kernel, wrong, capsys)
    assert not ok and "never wrote" not in out
    assert re.search(r"computed from b_tile\[\d+, \d+\] \(row \d+, column \d+ of the 32 x 32 tile\)", out), out
    assert "an `if` that loads the slot needs an `else` that sets it to 0" in out


def test_coarsened_puzzle_names_threads_that_return_before_a_barrier(capsys):
    wrong = _variant(COARSE, "k", ("    acc00 = acc01", "    if row0 + ty >= M:\n        return\n    acc00 = acc01"))
    ok, out = _check(thread_coarsening.coarsened_kernel, wrong, capsys)
    out = " ".join(out.split())
    assert not ok and "never reached the cuda.syncthreads() at line 23 (they returned (line 15)" in out
    assert "never around a barrier or as a `return`" in out


def test_coarsened_puzzle_finds_half_a_tile_loaded(capsys):
    wrong = _variant(COARSE, "k", ("        for i in range(2):\n", "        for i in range(1):\n"))
    ok, out = _check(thread_coarsening.coarsened_kernel, wrong, capsys)
    assert not ok and "and none wrote it before the block ended" in out and "never wrote" not in out


# ---- questions: the expected answer comes from the library, likely wrong ones are explained --------
def test_questions_know_their_answers():
    assert naive.article_shapes.expected() == {"a", "b", "d"}
    assert naive.warp_sectors.expected() == {"a": 1, "b": 4, "c": 4}
    assert shared_memory_tiling.global_loads.expected() == 13824
    assert shared_memory_tiling.reads_per_element.expected() == 3
    assert (thread_coarsening.threads.expected(), thread_coarsening.shared_bytes.expected()) == (256, 6272)
    assert thread_coarsening.reuse.expected() == pytest.approx(32 / 12)
    assert thread_coarsening.pitch.expected() == 33
    assert gpu_execution_model.first_two_wave_n.expected() == 1536
    assert gpu_execution_model.last_wave_pct.expected() == pytest.approx(100 * 12 / 132)  # 144 tiles: 132 + 12
    assert gpu_execution_model.fp32_bound.expected() == pytest.approx(132 * 4 * 32 * 2 * 1.98e-3)


@pytest.mark.parametrize("question, answer, meaning", [
    (naive.article_shapes, {"a"}, "more than square shapes"),
    (shared_memory_tiling.global_loads, 221184, "the naive kernel's count"),
    (shared_memory_tiling.global_loads, 1536, "counts one block"),
    (shared_memory_tiling.reads_per_element, 16, "from shared memory per block"),
    (thread_coarsening.reuse, 0.375, "upside down"),
    (thread_coarsening.shared_bytes, 6144, "leaves out the 4 words of padding"),
    (thread_coarsening.pitch, 64, "a multiple of 32 words"),
    (thread_coarsening.pitch, 32, "the tile's own pitch"),
    # 31 words is odd: the two rows fall in different banks; what is wrong is that a row is too short
    (thread_coarsening.pitch, 31, "puts the two rows in different banks (one pass), but a row of a_tile holds the tile's 32 words"),
    (thread_coarsening.pitch, 16, "puts the two rows in different banks (one pass), but a row of a_tile"),
    (thread_coarsening.pitch, 1, "a pitch of 1 word puts"),
    (thread_coarsening.pitch, 2, "a pitch of 2 words puts"),
    (gpu_execution_model.first_two_wave_n, 1408, "still fits in one wave"),
    (gpu_execution_model.last_wave_pct, 91, "stay empty"),
    (gpu_execution_model.last_wave_pct, 0.09, "a fraction"),
    (gpu_execution_model.last_wave_pct, 12, "the number of blocks in the last wave"),
    (gpu_execution_model.last_wave_pct, 109, "all the tiles over 132"),
    (gpu_execution_model.last_wave_pct, 8, "a share of all the tiles"),   # 12 / 144, not 12 / 132
    (gpu_execution_model.last_wave_pct, 9.375, "divides by 128, the tile's side"),  # 3 % above 12 / 132
    (gpu_execution_model.first_two_wave_n, 12, "tiles along a side"),
    (gpu_execution_model.first_two_wave_n, 144, "the number of tiles"),
    (gpu_execution_model.fp32_bound, 33.5, "a multiply-add as one operation"),
    (gpu_execution_model.fp32_bound, 2.09, "all 32 lanes"),
    (gpu_execution_model.fp32_bound, 16.7, "4 schedulers"),
])
def test_a_likely_wrong_answer_is_explained(capsys, question, answer, meaning):
    assert not question.check(answer)
    out = capsys.readouterr().out
    assert "is not it:" in out and meaning in " ".join(out.split())


def test_a_right_answer_is_right_and_a_part_answer_is_checked_part_by_part(capsys):
    assert thread_coarsening.reuse.check(2.667)
    assert thread_coarsening.pitch.check(36) and thread_coarsening.pitch.check(33) and not thread_coarsening.pitch.check(96)
    assert naive.article_shapes.check(["a", "b", "d"]) and naive.article_shapes.check("abd")
    assert naive.article_shapes.check({"A", "B", "D"}) and naive.article_shapes.check("aBd")   # either case
    assert naive.article_shapes.check("a, b, d") and naive.article_shapes.check("A; b ;D")     # separators
    assert not naive.article_shapes.check("a, b")
    assert not naive.warp_sectors.check({"a": 1, "b": 4, "c": 2})
    out = capsys.readouterr().out
    assert "2.667 is right" in out and "sectors per warp request, c: 2 is not it yet" in out
    assert not naive.warp_sectors.check(4)
    assert "answer with a dict of 'a', 'b', 'c'" in capsys.readouterr().out
