"""Exercises of notebook ``01_naive``: the naive kernel written by you, the source article's port,
and the sectors of a warp.

The port itself is the course's (``naive.article_port_kernel``, with ``naive.run_flat`` to run it);
its fix, the solution of exercise 1, is here."""

from __future__ import annotations

from dataclasses import dataclass

from numba import cuda, float32

from course_lib import learn
from course_lib.correctness import CheckFailure, check
from course_lib.exercises import (
    NumbaGemmPuzzle,
    Puzzle,
    Question,
    Report,
    _gemm_shapes,
    _Launches,
    _source_notes,
    nothing_yet,
)
from course_lib.kernels import naive
from course_lib.learn import Verdict

# The shapes a puzzle's kernel is checked on: check's own awkward ones (1 x 1 x 1, sizes off every
# tile, one row, one column, K = 1) and a few more - a whole number of blocks, a grid wider than tall,
# and a long K on a thin C (cheap on the simulator: one or two blocks): K = 70 and 300 span 5 and 19
# tiles of 16 (3 and 10 of 32), so a K loop that stops early - at 64, after three or four tiles, or at
# a cap such as min(K, 256) - fails.
PUZZLE_SHAPES = ((1, 1, 1), (3, 5, 7), (33, 17, 40), (1, 45, 19), (37, 1, 21), (9, 11, 1), (16, 32, 16), (20, 50, 3),
                 (17, 3, 70), (2, 7, 300))

naive_kernel = NumbaGemmPuzzle(
    title="Your naive kernel",
    launch=naive.launch,
    reference=naive.naive_kernel,
    shapes=PUZZLE_SHAPES,
    trace_shape=(32, 32, 8),
    grid=(2, 2),
    block=(16, 16),
)

# Exercise 1: which of these shapes does the source article's port compute correctly?
ARTICLE_SHAPES = {"a": (4, 4, 4), "b": (6, 4, 4), "c": (4, 3, 6), "d": (1, 3, 6), "e": (2, 5, 3)}


@cuda.jit
def article_port_fixed_kernel(A, B, C, M, N, K):
    """Solution of exercise 1: A is M x K, so one row of A is K elements long."""
    col, row = cuda.grid(2)
    if row < M and col < N:
        acc = float32(0.0)
        for k in range(K):
            acc += A[row * K + k] * B[k * N + col]
        C[row * N + col] = acc


def _stride_note(failures) -> str | None:
    """A note when the wrong shapes are exactly those where a row stride of N and one of K differ
    (K != N, and more than one row): some row is still stepped through with the other matrix's length."""
    wrong = {tuple(x.shape) for x in failures}
    if wrong and wrong == {tuple(s) for s in PUZZLE_SHAPES if s[2] != s[1] and s[0] > 1}:
        return ("Wrong exactly on the shapes where K differs from N (and M > 1): some array is still stepped "
                "through with the row length of another. A is M x K, B is K x N, C is M x N: each row "
                "is as long as that matrix's own number of columns.")
    return None


@dataclass(frozen=True)
class _FlatKernelPuzzle(Puzzle):
    """Exercise 1's fix: a flat-indexed kernel ``kernel(A, B, C, M, N, K)``, run by ``naive.run_flat``
    on every shape of ``PUZZLE_SHAPES`` through ``course_lib.check`` (guard regions name a read past
    an array)."""

    title: str
    reference: object

    def check(self, kernel) -> Verdict:
        report = Report(f"{self.title}, checked on {len(PUZZLE_SHAPES)} shapes you have not seen:")
        if nothing_yet(self.title, kernel, "kernel"):
            return Verdict(False)
        launched = _Launches(kernel)
        right, failures = _gemm_shapes(report, lambda a, b: naive.run_flat(launched, a, b), PUZZLE_SHAPES)
        note = None if right else _stride_note(failures)
        if note:
            report.add(note, 4)
        report.solved = bool(right) and _source_notes(report, kernel, launched.args) and _stores_once(report, kernel)
        if report.solved:
            report.add("Solved: right on every shape.", 0)
        elif right:
            report.add("Right on every shape here, but not solved yet: see the note above.", 0)
        return report.show()

    def solution(self):
        return learn.show_source(self.reference)


def _stores_once(report: Report, kernel) -> bool:
    """Traced on one small launch (3 x 5 x 8): each element of C stored once, as the course's kernel
    does; else a note (a store inside the loop over K writes C at every step) and False."""
    import numpy as np  # noqa: PLC0415

    from course_lib.instruments import trace_kernel  # noqa: PLC0415

    M, N, K = 3, 5, 8
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(n).astype(np.float32) for n in (M * K, K * N)] + [np.zeros(M * N, np.float32)]
    try:
        tr = trace_kernel(kernel, (1, 1), (naive.BLOCK_X, naive.BLOCK_Y), *args, M, N, K, names=("A", "B", "C"))
    except Exception:  # noqa: BLE001 - it ran right on every shape: say nothing more
        return True
    stores: dict[tuple, int] = {}
    for acc in tr.accesses:
        if acc.array == "C" and acc.kind == "store":
            stores[acc.index] = stores.get(acc.index, 0) + 1
    most = max(stores.values(), default=1)
    if most > 1:
        report.add(f"Not solved yet: traced at M, N, K = {M}, {N}, {K}, an element of C is stored {most} times. "
                   f"A store inside the loop over K writes C at every step; keep the sum in a register and store "
                   f"it once, after the loop.")
        return False
    return True


article_port_fix = _FlatKernelPuzzle(title="Your fixed port", reference=article_port_fixed_kernel)


def _port_is_right(shape) -> bool:
    try:
        check(lambda a, b: naive.run_flat(naive.article_port_kernel, a, b), shapes=[shape], seed=0)
    except CheckFailure:
        return False
    return True


def _letters(answer):
    """The shapes' letters as a set, in either case: {"A", "b"}, ["a", "b"], "ab" and "a, b" are all
    {"a", "b"} (in a string, commas and spaces separate letters)."""
    if isinstance(answer, str):
        return {x.lower() for x in answer if not x.isspace() and x not in ",;"}
    if isinstance(answer, (list, tuple, set, frozenset)):
        return {x.strip().lower() if isinstance(x, str) else x for x in answer}
    return answer


article_shapes = Question(
    what="the shapes the port gets right",
    normalize=_letters,
    expected=lambda: {name for name, shape in ARTICLE_SHAPES.items() if _port_is_right(shape)},
    hint="in a row-major M x K matrix, how far apart are two rows?",
    wrong=[
        ({"a"}, "the port is right for more than square shapes: what matters is which strides agree."),
        ({"a", "b"}, "close: look again at a single row (M = 1), where the row stride is never used."),
        ({"a", "d"}, "close: when K = N, the port's stride for A happens to be the right one, whatever M."),
        ({"a", "b", "c", "d", "e"}, "check found shapes where it is wrong; read how it indexes A."),
    ],
)


def _warp_sectors() -> dict[str, float]:
    """Sectors per warp request of the naive kernel's loads of A and B and store of C, 32 x 8 blocks."""
    from course_lib.exercises import trace_gemm  # noqa: PLC0415

    tr = trace_gemm(naive.naive_kernel, (32, 32, 8), (1, 4), (32, 8))
    return {r["array"].lower(): r["mean"] for r in tr.summary()}


warp_sectors = Question(
    what="sectors per warp request",
    expected=_warp_sectors,
    hint="with 32 x 8 blocks a warp is one row of 32 threads; a sector holds 8 floats",
)
