"""The numba.cuda stages (notebooks 01-03) on the CPU backend: correct on awkward shapes, clear
errors for launches that cannot work, and the seed documents' bugs caught by check."""

import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import course_lib
from course_lib.correctness import default_shapes
from course_lib.exercises import naive as naive_exercises
from course_lib.kernels import naive, shared_memory_tiling as tiling, thread_coarsening as coarsening
from numba import cuda, float32  # after course_lib, which chose the simulator

# Every numba stage of the course manifest that is not a parameter variant (a new one is checked
# here without being named).
MAIN = [s.name for s in course_lib.stages() if s.backend == "numba" and s.variant_of is None]


def test_main_stages_are_the_course_ones():
    assert MAIN == ["naive", "naive_x_along_rows", "shared_memory_tiling", "coarsened_2x2", "register_tiling"]


@pytest.mark.parametrize("stage", MAIN)
def test_main_stages_pass_check_on_the_default_shapes(stage):
    report = course_lib.check(stage)
    assert len(report.results) == len(default_shapes())


@pytest.mark.parametrize("stage", [s.name for s in course_lib.stages() if s.backend == "numba" and s.variant_of])
def test_variants_pass_check_including_an_interior_block(stage):
    cfg = coarsening.SWEEP_CONFIGS.get(stage)
    if cfg is None:  # a tile-size variant of the tiled kernel: several tiles, partial ones too
        course_lib.check(stage, shapes=[(3, 5, 7), (21, 19, 40)])
        return
    # One full BM x BN block (the unchecked fast path) plus edges; K has two full slabs and a part.
    course_lib.check(stage, shapes=[(3, 5, 7), (cfg.BM + 1, cfg.BN + 2, 2 * cfg.BK + 3)])


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 40), seed=st.integers(0, 2**20))
def test_naive_and_register_tiling_on_random_shapes(m, n, k, seed):
    course_lib.check("naive", shapes=[(m, n, k)], seed=seed)
    course_lib.check("register_tiling_4x4_64", shapes=[(m, n, k)], seed=seed)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 70), seed=st.integers(0, 2**20))
def test_tiled_on_random_shapes(m, n, k, seed):
    course_lib.check("shared_memory_tiling_t8", shapes=[(m, n, k)], seed=seed)
    course_lib.check("coarsened_2x2", shapes=[(m, n, k)], seed=seed)


@pytest.mark.parametrize("shape", [(16, 16, 3), (17, 33, 5), (33, 17, 2), (47, 20, 9), (1, 40, 4), (40, 1, 4)])
def test_coarsened_2x2_writes_every_quadrant(shape):
    # Each thread of the 16 x 16 block writes four outputs, one in each 16 x 16 quadrant of the
    # 32 x 32 tile; these shapes leave each quadrant inside C in some tiles and outside it in others.
    course_lib.check("coarsened_2x2", shapes=[shape], seed=sum(shape))


def test_impossible_launches_fail_before_launch():
    a, b = course_lib.random_inputs(4, 4, 4)
    with pytest.raises(ValueError, match="4096 threads is more than the 1024"):
        tiling.shared_memory_tiling(a, b, tile=64)
    with pytest.raises(ValueError, match="more than the 1024"):
        naive.naive(a, b, block=(64, 32))
    with pytest.raises(ValueError, match="static shared memory"):
        coarsening.register_tiling(a, b, config=coarsening.RegisterTileConfig(BK=64))
    with pytest.raises(ValueError, match="not a multiple of the per-thread tile"):
        coarsening.register_tiling(a, b, config=coarsening.RegisterTileConfig(TM=3))
    with pytest.raises(ValueError, match="warp tiles"):
        coarsening.register_tiling(a, b, config=coarsening.RegisterTileConfig(lanes_n=32))


def test_seed_naive_port_is_wrong_when_not_square_and_the_fix_is_right():
    with pytest.raises(AssertionError, match="relative error"):
        course_lib.check(lambda a, b: naive.run_flat(naive.article_port_kernel, a, b), shapes=[(3, 5, 7)])
    course_lib.check(lambda a, b: naive.run_flat(naive.article_port_kernel, a, b), shapes=[(6, 6, 6)])
    course_lib.check(lambda a, b: naive.run_flat(naive_exercises.article_port_fixed_kernel, a, b))


@cuda.jit
def _unchecked_kernel(a, b, c):
    """The naive kernel without its bounds check."""
    col, row = cuda.grid(2)
    acc = float32(0.0)
    for k in range(a.shape[1]):
        acc += a[row, k] * b[k, col]
    c[row, col] = acc


def test_missing_bounds_check_is_caught_on_the_simulator():
    with pytest.raises(AssertionError, match=r"thread \(\d+, \d+\) of block \(\d, \d\) read A\[(1[7-9]|2\d|3[01]), 0\], but A is 17 x 3"):
        course_lib.check(lambda a, b: naive.launch(_unchecked_kernel, a, b), shapes=[(17, 17, 3)])


def test_seed_tiled_port_is_wrong():
    with pytest.raises(AssertionError, match="relative error"):
        course_lib.check(lambda a, b: tiling.launch_tiled(tiling.article_tiled_kernel, a, b, tile=tiling.ARTICLE_TILE),
                         shapes=[(32, 48, 64)])


def test_generated_source_has_scalar_accumulators_and_no_local_arrays():
    src = coarsening.register_tiling_source(coarsening.DEFAULT_CONFIG)
    assert src.count("acc_7_7 +=") == 1 and "cuda.local.array" not in src
    assert "cuda.local.array" in coarsening.register_tiling_source(coarsening.SWEEP_CONFIGS["register_tiling_local_arrays"])
    assert "uint32(" not in coarsening.register_tiling_source(coarsening.SWEEP_CONFIGS["register_tiling_signed_index"])


def test_load_counts_match_the_formulas():
    assert naive.naive_global_loads(4, 5, 6) == 2 * 4 * 5 * 6
    # 2 x 2 blocks of 16, 3 steps of 16 along K = 40: every block loads two 16 x 16 tiles per step
    assert tiling.tiled_global_loads(32, 32, 40, 16) == 4 * 3 * 2 * 256


@cuda.jit
def _rotate_through_shared(out):
    """Each thread writes its index into shared memory and reads its neighbour's."""
    s = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    s[t] = t
    cuda.syncthreads()
    out[t] = s[(t + 1) % 256]


def test_simulator_shares_one_shared_array_per_block():
    """numba-cuda 0.30.4's simulator creates a block's shared array without a lock, so two of its
    Python threads can each create one and read each other's never-written memory (a rare wrong
    result of register_tiling in CI). The patch SIMULATOR_SHARED_ARRAYS (course_lib.instruments.patches)
    puts a lock around the creation. With a tiny thread switch interval the unpatched simulator got
    about 1 launch in 20 wrong here."""
    from course_lib.instruments import patches

    assert patches.SIMULATOR_SHARED_ARRAYS.applied
    want = (np.arange(256) + 1) % 256
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        wrong = 0
        for _ in range(60):
            out = np.zeros(256, np.float32)
            _rotate_through_shared[1, 256](out)
            wrong += int((out != want).any())
    finally:
        sys.setswitchinterval(old)
    assert wrong == 0, f"{wrong} of 60 launches read another thread's shared array"
