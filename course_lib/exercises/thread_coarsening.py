"""Exercises of notebook ``03_thread_coarsening``: the 2 x 2 kernel's inner loop written by you, a
register tile's threads and shared memory, its reuse per load, and a bank conflict."""

from __future__ import annotations

from course_lib.exercises import NumbaGemmPuzzle, NumberQuestion
from course_lib.exercises.naive import PUZZLE_SHAPES
from course_lib.kernels import thread_coarsening as coarsening
from course_lib.model import banks

coarsened_kernel = NumbaGemmPuzzle(
    title="Your 2 x 2 kernel",
    launch=coarsening.launch_2x2,
    reference=coarsening.coarsened_2x2_kernel,
    shapes=PUZZLE_SHAPES,
    trace_shape=(32, 32, 64),  # two K-tiles: a store or a missing barrier repeated per tile shows
    grid=(1, 1),
    block=(coarsening.COARSE_THREADS, coarsening.COARSE_THREADS),
    k_tile=coarsening.COARSE_TILE,
)

# Exercise 1: a register tile's threads and shared memory, by hand.
CONFIG = coarsening.RegisterTileConfig(BM=64, BN=128, TM=4, TN=8)

threads = NumberQuestion(
    what="threads per block",
    unit="threads",
    expected=lambda: CONFIG.threads,
    hint="one thread per TM x TN piece of the BM x BN tile",
    wrong=[(CONFIG.BM * CONFIG.BN, "that is one thread per output; each thread computes TM x TN of them.")],
)

shared_bytes = NumberQuestion(
    what="shared bytes per block",
    unit="bytes",
    expected=lambda: CONFIG.shared_bytes,
    hint="two slabs of BK = 8 rows: A's rows are BM + 4 words, B's BN words, 4 bytes a word",
    wrong=[
        (8 * (CONFIG.BM + CONFIG.BN) * 4, "that leaves out the 4 words of padding on each of A's rows."),
        (8 * (CONFIG.BM + 4 + CONFIG.BN), "that counts words; a word is 4 bytes."),
    ],
)


# Exercise 2: multiply-adds per value read from shared memory, for 8 x 4 outputs per thread.
def _reuse_8x4() -> float:
    cfg = coarsening.SWEEP_CONFIGS["register_tiling_8x4_128"]
    return cfg.TM * cfg.TN / (cfg.TM + cfg.TN)


reuse = NumberQuestion(
    what="multiply-adds per value (8 x 4)",
    expected=_reuse_8x4,
    rel_tol=0.02,
    hint="per step of k a thread reads TM values of A and TN of B and does TM x TN multiply-adds",
    wrong=[
        (lambda want: 1 / want, "that is values read per multiply-add: the ratio upside down."),
        (32, "that is the multiply-adds per step of k; divide by the values read for them."),
        (12, "that is the values read per step of k; how many multiply-adds do they feed?"),
    ],
)


# Exercise 3: the 2 x 2 kernel's read of a_tile[ty + 16 * i, k], and a row pitch that removes its conflict.
def _a_read(pitch: int, k: int = 0):
    """One warp (lane l has ty = l // 16; the lanes of a row read one word) reading A's tile."""
    return banks.bank_access([4 * (pitch * (lane // 16) + k) for lane in range(32)], 4)


def _pitch_works(pitch) -> bool:
    return float(pitch).is_integer() and pitch >= coarsening.COARSE_TILE and _a_read(int(pitch)).conflict_degree == 1


def _too_short(pitch: int) -> str:
    """What a pitch below the tile's width means: too short whatever its banks (the bank model says
    which; an odd pitch such as 31 does put the two rows in different banks)."""
    passes = _a_read(pitch).conflict_degree
    banks = ("puts the two rows in different banks (one pass)" if passes == 1 else
             f"puts the two rows in one bank ({passes} passes)")
    return (f"a pitch of {pitch} word{'' if pitch == 1 else 's'} {banks}, but a row of a_tile holds the tile's {coarsening.COARSE_TILE} words, so the "
            f"pitch is at least {coarsening.COARSE_TILE}: which pitch from {coarsening.COARSE_TILE} up keeps the "
            f"rows apart?")


pitch = NumberQuestion(
    what="a row pitch without the conflict",
    unit="words",
    expected=lambda: coarsening.COARSE_TILE + 1,
    accepts=_pitch_works,
    hint=(f"the two rows of threads read words one pitch apart, and a row holds at least the tile's "
          f"{coarsening.COARSE_TILE} words: a pitch that is a multiple of 32 words puts both rows in one bank"),
    wrong=[
        (coarsening.COARSE_TILE, "that is the tile's own pitch: rows 32 words apart share a bank (2 passes)."),
        *((m * coarsening.COARSE_TILE, "a multiple of 32 words puts both rows in one bank again.") for m in (2, 3, 4)),
        *((p, _too_short(p)) for p in range(1, coarsening.COARSE_TILE)),
    ],
)
