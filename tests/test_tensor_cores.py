"""Tensor-core stages (notebooks 07 to 09): registry metadata, argument checks, the address arithmetic the
kernels rely on (checked element by element against a model of what TMA writes), the sources
compiling for sm_90a with the instructions we expect in the SASS, and - on a GPU - correctness."""

import ast
import collections
import concurrent.futures
import itertools
import os
import re
import subprocess
from pathlib import Path

import pytest
import torch

import course_lib
from course_lib import compiler, features
from course_lib.model import hardware, layout, schedules
from course_lib.kernels import tensor_cores as tc

STAGE_NAMES = [d.stage for d in tc.ALL_DESIGNS]
STAIRCASE = [d.stage for d in tc.DESIGNS]


def _wrapper(name: str):
    """A stage's own wrapper, as the manifest made it (on the CPU it checks before it refuses)."""
    return course_lib.get_stage(name).gemms["bf16"]


# ---- registry and argument checks ------------------------------------------------------------
def test_every_stage_is_registered_with_its_metadata():
    names = [s.name for s in course_lib.stages() if s.backend == "cuda-extension" and s.dtypes == ("bf16",)]
    assert names == STAGE_NAMES and STAGE_NAMES[0] == "tc_0_mma_sync_minimal" and STAIRCASE == STAGE_NAMES[1:]
    # the binding lists every stage of the manifest (and nothing else): the two say the same stages
    bound = [e.stage for e in tc.csrc.entries()]
    assert bound == [s.name for s in course_lib.stages() if s.backend == "cuda-extension"]
    rows16 = hardware.tma_elements("bf16")  # TMA's 16-byte rows
    for i, name in enumerate(STAGE_NAMES):
        st = course_lib.get_stage(name)
        # mma.sync (stages 0-1) is taught in notebook 07, wgmma and TMA (stage 2) in 08, stages 3-6 in 09
        assert st.notebook == ("07_mma_sync_kernels" if i < 2 else "08_hopper_tensor_cores" if i == 2 else "09_hopper_pipelines")
        assert st.dtypes == ("bf16",)
        want = 1 if i == 0 else (1, rows16, rows16) if st.name == "tc_6_tma_store" else rows16
        assert st.gpu_only and st.shape_multiple == want and rows16 == 8
        assert st.order == course_lib.get_stage(STAGE_NAMES[0]).order + i  # consecutive, in the manifest
        assert st.sweep == (name == STAGE_NAMES[-1])
        assert (features.BF16_TENSOR_CORES in st.needs) == (i < 2) and (features.HOPPER_SM90A in st.needs) == (i >= 2)


@pytest.mark.skipif(course_lib.backend.get().is_gpu, reason="checks the CPU backend's refusal")
@pytest.mark.parametrize("name", STAGE_NAMES)
def test_cpu_backend_refuses_with_a_clear_error(name):
    a, b = course_lib.random_inputs(16, 16, 16, "bf16", seed=0)
    with pytest.raises(RuntimeError, match="runs only on an NVIDIA GPU"):
        course_lib.get_stage(name)(a, b)
    with pytest.raises(RuntimeError, match="runs only on an NVIDIA GPU"):
        _wrapper(name)(a, b)


@pytest.mark.parametrize("shape", [(12, 16, 16), (16, 20, 16), (16, 16, 36)])
def test_shapes_off_the_multiple_are_rejected_before_launch(shape):
    M, N, K = shape
    a, b = course_lib.random_inputs(M, N, K, "bf16", seed=0)
    with pytest.raises(ValueError, match="M, N and K must be multiples of 8"):
        _wrapper("tc_1_mma_sync")(a, b)
    if M % 8 == 0:  # stage 6 takes any M (TMA fills a partial box of rows with zeros)
        with pytest.raises(ValueError, match="tc_6_tma_store: N and K must be multiples of 8, but [NK]="):
            _wrapper("tc_6_tma_store")(a, b)
    elif not course_lib.backend.get().is_gpu:
        with pytest.raises(RuntimeError, match="runs only on an NVIDIA GPU"):  # every check passed
            _wrapper("tc_6_tma_store")(a, b)


@pytest.mark.skipif(course_lib.backend.get().is_gpu, reason="checks the CPU backend's refusal")
def test_stage0_takes_any_shape_and_refuses_only_for_want_of_a_gpu():
    """Stage 0 reads one element at a time: an odd shape passes every check but the GPU's."""
    a, b = course_lib.random_inputs(13, 7, 21, "bf16", seed=0)
    with pytest.raises(RuntimeError, match="runs only on an NVIDIA GPU"):
        _wrapper("tc_0_mma_sync_minimal")(a, b)
    assert course_lib.get_stage("tc_0_mma_sync_minimal").shape_multiple == 1
    assert "any_shape=*/true" in (tc.CSRC / tc.BINDING).read_text()  # the binding skips the %8 check for it


def test_other_dtypes_are_rejected():
    a, b = course_lib.random_inputs(16, 16, 16, "fp32", seed=0)
    with pytest.raises(TypeError, match="bfloat16"):
        _wrapper("tc_2_wgmma_tma")(a, b)


def test_build_plan_reads_the_architecture():
    sources, flags, name = tc.build_plan((9, 0))
    assert compiler.SM90A in flags and "-DTC_WITH_SM90A" in flags and name.endswith("sm90a")
    assert {s.name for s in sources} == {d.source for d in tc.ALL_DESIGNS} | {tc.FP8_STAGE.source, tc.BINDING}
    mma_sync_only = ["tc_0_mma_sync_minimal.cu", "tc_1_mma_sync.cu", tc.BINDING]
    sources, flags, name = tc.build_plan((8, 6))
    assert [s.name for s in sources] == mma_sync_only
    assert "-gencode=arch=compute_86,code=sm_86" in flags and not any("90a" in f for f in flags)
    sources, flags, name = tc.build_plan((10, 0))  # Blackwell: no wgmma, stages 0-1 for sm_100
    assert [s.name for s in sources] == mma_sync_only and name.endswith("sm_100")
    # A GPU treated as an older one (COURSE_ASSUME_CAPABILITY): PTX only, compiled by the driver at load.
    sources, flags, name = tc.build_plan((8, 0), ptx_only=True)
    assert [s.name for s in sources] == mma_sync_only
    assert "-gencode=arch=compute_80,code=compute_80" in flags and name.endswith("ptx80")
    with pytest.raises(RuntimeError, match="8.0 and newer"):
        tc.build_plan((7, 5))
    repo = tc.CSRC.parent.parent.resolve()
    assert not compiler.extensions_dir().resolve().is_relative_to(repo)  # caches live outside the repository
    assert not compiler.cubin_cache_dir().resolve().is_relative_to(repo)


# ---- the address arithmetic, on the CPU ------------------------------------------------------
BASE = 0x8000  # any 1024-byte-aligned shared-memory offset


def test_descriptor_matches_the_ptx_worked_example():
    # start 0x2000, LBO 16 B ("assumed 1"), SBO 1024 B, 128-byte swizzle
    assert tc.make_descriptor(0x2000, 16, 1024) == 0x4000004000010200
    d = tc.decode_descriptor(tc.b_descriptor(BASE, 3))
    assert d == {"start": BASE + 3 * 2048, "lbo": 8192, "sbo": 1024, "base_offset": 0, "swizzle_mode": 1}


def _a_mismatches(sbo: int = tc.A_SBO) -> int:
    bad = 0
    for wg, k16 in itertools.product(range(2), range(4)):
        desc = tc.a_descriptor(BASE, 64 * wg, k16)
        if sbo != tc.A_SBO:
            desc = tc.make_descriptor(tc.decode_descriptor(desc)["start"], tc.A_LBO, sbo)
        for r, k in itertools.product(range(64), range(16)):
            want = BASE + layout.tma_box_offset(64 * wg + r, 16 * k16 + k)
            bad += tc.wgmma_k_major_address(desc, r, k) != want
    return bad


def test_wgmma_reads_a_where_tma_wrote_it():
    """A tile (128 x 64, K-major): every element each warpgroup's descriptors name is the one TMA
    put there, including the k-slices that start 32, 64, 96 bytes into a swizzled row."""
    assert _a_mismatches() == 0
    assert _a_mismatches(sbo=2048) > 0  # the check can fail


def _b_mismatches(block_n: int, lbo: int = tc.B_LBO, sbo: int = tc.B_SBO) -> int:
    bad = 0
    for k16 in range(4):
        start = tc.decode_descriptor(tc.b_descriptor(BASE, k16))["start"]
        desc = tc.make_descriptor(start, lbo, sbo)
        for n, k in itertools.product(range(block_n), range(16)):
            want = BASE + (n // 64) * 64 * 64 * 2 + layout.tma_box_offset(16 * k16 + k, n % 64)
            bad += tc.wgmma_mn_major_address(desc, n, k) != want
    return bad


@pytest.mark.parametrize("block_n", [64, 128, 256])
def test_wgmma_reads_b_where_tma_wrote_it(block_n):
    """B slice (64 x BLOCK_N, N-major, as BLOCK_N/64 boxes of 64 x 64): LBO steps to the next box,
    SBO to the next 8 rows of K."""
    assert _b_mismatches(block_n) == 0
    if block_n > 64:
        assert _b_mismatches(block_n, lbo=tc.B_SBO, sbo=tc.B_LBO) > 0  # swapped fields are caught


def test_the_128x64_tile_s_b_halves_land_where_one_box_would():
    """Stage 6's 128 x 64 tile loads its slice of B as two boxes of 32 rows of K (one per CTA of the
    cluster, load_slice): the second half, written 32 rows (4 KB) further on with its own swizzle, must
    hold every element where one 64 x 64 box would have put it - the swizzle follows the address."""
    rows = 64 // 2
    assert all(layout.tma_box_offset(r, c) == rows * 128 + layout.tma_box_offset(r - rows, c)
               for r in range(rows, 64) for c in range(64))


@pytest.mark.parametrize("n_tile", [64, 128, 256])
def test_accumulator_layout_covers_the_tile_once(n_tile):
    seen = collections.Counter(
        tc.wgmma_accumulator_position(t, i, n_tile) for t in range(128) for i in range(n_tile // 2)
    )
    assert len(seen) == 64 * n_tile and set(seen.values()) == {1}


@pytest.mark.parametrize("block_n", sorted(tc.STAGE6_TILES.values()))
def test_stmatrix_puts_each_accumulator_where_the_tma_store_reads_it(block_n):
    """Stage 6's epilogue, for each of its tiles: per round of half_cols columns (block_n / 2 in two
    rounds; 64 in one for the 128 x 64 tile), stmatrix j = 0 .. half_cols / 16 - 1 writes registers
    acc[8q .. 8q+7] (q = half_cols / 16 * round + j) of each thread; the byte each value lands on
    must be the byte the TMA store (64 x 64 boxes, 128-byte swizzle) reads for that (row, column)."""
    half_cols, rounds = tc.stage6_epilogue_rounds(block_n)
    assert half_cols * rounds == block_n and half_cols % 64 == 0
    per_half = half_cols // 16
    written = {}
    for half, j, t in itertools.product(range(rounds), range(per_half), range(128)):
        q = per_half * half + j
        warp, lane = divmod(t, 32)
        for matrix, e in itertools.product(range(4), range(2)):
            row, col = tc.wgmma_accumulator_position(t, 8 * q + 2 * matrix + e, block_n)
            mrow, mcol = tc.stmatrix_fragment_position(lane, matrix, e)
            row_addr = tc.stmatrix_staging_address(32 * warp + 8 * matrix + mrow, j)
            addr = row_addr + 2 * mcol
            col_in_half = col - half_cols * half
            assert 0 <= col_in_half < half_cols
            want = (col_in_half // 64) * 8192 + layout.tma_box_offset(row, col_in_half % 64)
            assert addr == want, (half, j, t, matrix, e)
            written[(half, addr)] = written.get((half, addr), 0) + 1
    assert len(written) == rounds * 64 * half_cols and set(written.values()) == {1}
    assert max(addr for _, addr in written) < (half_cols // 64) * 8192  # inside the consumer's staging boxes


@pytest.mark.parametrize("rows,cols,group", [(1, 1, 8), (5, 3, 2), (32, 32, 8), (7, 11, 8), (9, 4, 1)])
def test_grouped_tile_order_visits_every_tile_once(rows, cols, group):
    order = schedules.grouped_tile_order(rows, cols, group)
    assert sorted(order) == [(r, c) for r in range(rows) for c in range(cols)]
    if rows >= group:  # the first `group` tiles are one column of `group` rows
        assert order[:group] == [(r, 0) for r in range(group)]


@pytest.mark.parametrize("tiles,clusters,slices", [(256, 66, 64), (1024, 66, 128), (58, 66, 64), (3, 66, 1),
                                                    (3, 66, 4), (70, 66, 5), (132, 66, 8), (1, 1, 1), (7, 3, 9)])
def test_stream_k_covers_every_slice_once_and_owners_find_their_contributors(tiles, clusters, slices):
    work = schedules.stream_k_work(tiles, clusters, slices)
    done = collections.Counter((t, k) for units in work for t, b, e in units for k in range(b, e))
    assert set(done) == {(t, k) for t in range(tiles) for k in range(slices)} and set(done.values()) == {1}
    per_cluster = [sum(e - b for _, b, e in units) for units in work]
    assert max(per_cluster) - min(per_cluster) <= 1  # same number of slices, +-1 on the split part
    for c, units in enumerate(work):
        for i, (t, b, e) in enumerate(units):
            if b > 0:  # a contributor: the first unit of its split share, after whole tiles only
                assert all(b2 == 0 and e2 == slices for _, b2, e2 in units[:i])
                assert all(b2 == 0 for _, b2, _ in units[i + 1:])
            if b == 0 and e < slices:  # an owner: its last unit; it adds exactly the other holders of t
                assert i == len(units) - 1
                holders = sorted(c2 for c2, u2 in enumerate(work) for t2, b2, _ in u2 if t2 == t and b2 > 0)
                assert schedules.stream_k_contributors(tiles, clusters, slices, c, t) == holders


def test_stage6_plan_takes_the_narrow_tile_and_stream_k_only_where_whole_tiles_leave_clusters_idle():
    plan = tc.stage6_plan
    # Whole 128 x 256 tiles keep the 66 clusters at least 80 % busy: they stay.
    assert plan(4096, 4096, 4096) == ("128x256", "whole tiles")  # 256 cluster tiles: 97 % in 4 rounds
    assert plan(8192, 8192, 8192) == ("128x256", "whole tiles")
    assert plan(136, 14336, 4096) == ("128x256", "whole tiles")  # 56 of 66: 85 %
    assert plan(2048, 2048, 2048) == ("128x256", "whole tiles")  # 64 of 66
    # Fewer than half the clusters busy and K too short for stream-K: the 128 x 128 tile, whole ...
    assert plan(1024, 2048, 1024) == ("128x128", "whole tiles")  # 32 cluster tiles (48 %); 64 of 128 x 128
    # ... or, where 128 x 128 tiles still keep fewer than half busy, the 128 x 64 tile.
    assert plan(1024, 1024, 1024) == ("128x64", "whole tiles")  # 16 cluster tiles (24 %), 32 (48 %), 16 K-slices
    assert plan(1000, 1000, 1000) == ("128x64", "whole tiles")
    assert plan(768, 768, 768) == ("128x64", "whole tiles")  # 9 (14 %), 18 (27 %), 12 K-slices
    assert plan(256, 256, 256) == ("128x64", "whole tiles")
    assert plan(256, 4096, 31 * 64) == ("128x64", "whole tiles")  # 16 (24 %), 32 (48 %), 31 K-slices
    # ... K long enough: 128 x 128 at the narrowest, whole tiles where they keep 80 % busy, else
    # shared out by K slices.
    assert plan(256, 4096, 32 * 64) == ("128x128", "stream-K")  # 16 (24 %), 32 (48 %)
    assert plan(200, 4096, 4096) == ("128x128", "stream-K")
    assert plan(512, 4096, 4096) == ("128x128", "whole tiles")  # 32 (48 %), 64 (97 %), 64 K-slices
    assert plan(768, 2304, 16384) == ("128x128", "whole tiles")  # 27 (41 %), 54 (82 %)
    assert plan(1024, 1024, 4096) == ("128x128", "stream-K")  # 16 (24 %), 32 (48 %), 64 K-slices
    # ... half the clusters busy or more: 128 x 256, stream-K only where K is long.
    assert plan(192, 18944, 3584) == ("128x256", "stream-K")  # 37 (56 %)
    assert plan(1536, 1536, 1536) == ("128x256", "whole tiles")  # 36 (55 %), 24 K-slices
    assert plan(2048, 2304, 768) == ("128x256", "whole tiles")  # 72 (55 %), 12 K-slices
    assert plan(1536, 1536, 4096) == ("128x256", "stream-K")
    assert plan(3072, 3072, 3072) == ("128x256", "stream-K")  # 144 in 3 rounds (73 %), 48 K-slices
    # A decode step, M <= 128: the operands swapped, whatever N and K, in the smallest token tile.
    for m, tile in ((1, "16x64"), (16, "16x64"), (17, "32x64"), (64, "64x64"), (65, "96x64"), (96, "96x64"),
                    (100, "128x64"), (128, "128x64")):
        assert plan(m, 4096, 4096) == plan(m, 64, 64) == (tile, "swapped")
        assert tc.stage6_schedule(m, 4096, 4096) == "swapped"
    # The schedule alone, as notebooks print it.
    assert [tc.stage6_schedule(*s) for s in ((4096,) * 3, (200, 4096, 4096))] == ["whole tiles", "stream-K"]
    # the launcher's own rule (plan in tc_6_tma_store.cu) is held to this one in tests/test_tensor_cores_cxx.py


def test_stage6_plan_takes_what_is_forced():
    plan = tc.stage6_plan
    assert plan(1024, 1024, 1024, block_n=256) == ("128x256", "whole tiles")
    assert plan(1024, 1024, 1024, block_n=128, schedule="stream-K") == ("128x128", "stream-K")
    assert plan(4096, 4096, 4096, schedule="stream-K") == ("128x256", "stream-K")  # the tile by the rule
    assert plan(200, 4096, 4096, schedule="whole tiles") == ("128x128", "whole tiles")  # the tile by the rule
    assert plan(200, 4096, 4096, block_n=256) == ("128x256", "stream-K")  # 16 cluster tiles: the schedule by the rule
    assert plan(1000, 1008, 520, schedule="swapped", block_n=256) == ("128x64", "swapped")  # tiles of 128 tokens
    assert plan(64, 4096, 4096, schedule="whole tiles") == ("128x128", "whole tiles")  # the tile by the rule
    assert plan(1024, 1024, 1024, block_n=64) == ("128x64", "whole tiles")
    assert plan(512, 2304, 16384, block_n=64) == ("128x64", "stream-K")  # 72 cluster tiles for 66: the schedule by the rule
    with pytest.raises(ValueError, match="block_n must be 0 .by the shape. or one of .64, 128, 256., not 32"):
        plan(1024, 1024, 1024, block_n=32)
    with pytest.raises(ValueError, match="schedule must be one of 'auto', 'whole tiles', 'stream-K', 'swapped'"):
        plan(1024, 1024, 1024, schedule="split-K")
    assert tc.SCHEDULE_CODES == {"auto": -1, "whole tiles": 0, "stream-K": 1, "swapped": 2}  # tc_launch.h's


# ---- stage 0's fragment formulas -----------------------------------------------------------------
TC0 = tc.CSRC / "tc_0_mma_sync_minimal.cu"
TC0_FUNCTIONS = ("a_row", "a_col", "b_row", "b_col", "c_row", "c_col")


def _fragment_mismatches(position) -> int:
    """Elements where ``position(operand, lane, i)`` disagrees with the PTX ISA's layout as
    course_lib.model.fragments models it (owner lane and register element of each (row, col))."""
    from course_lib.model.fragments import fragment_map

    bad = 0
    for operand, elements in tc.TC0_ELEMENTS.items():
        fm = fragment_map("mma.m16n8k16", operand)
        assert fm.owner.size == 32 * elements  # every element of the operand is held once
        seen = set()
        for lane, i in itertools.product(range(32), range(elements)):
            r, c = position(operand, lane, i)
            seen.add((r, c))
            bad += (int(fm.owner[r, c]), int(fm.reg[r, c])) != (lane, i)
        bad += fm.owner.size - len(seen)
    return bad


def _formulas_in_the_source() -> dict[str, str]:
    """The expressions a_row ... c_col return in tc_0_mma_sync_minimal.cu, as C++ text."""
    text = TC0.read_text()
    found = dict(re.findall(r"constexpr int (\w+)\(int lane, int i\) \{ return (.+?); \}", text))
    assert set(found) == set(TC0_FUNCTIONS), found
    return found


def test_stage0_fragment_formulas_are_the_ptx_layout():
    """The formulas the .cu loads A and B and stores C with, read from the source and evaluated
    (C's / and % on non-negative ints are Python's // and %), against the fragment model (which
    tc.tc0_fragment_position is, for the notebook). A swapped formula is caught."""
    formulas = {name: expr.replace("/", "//") for name, expr in _formulas_in_the_source().items()}

    def from_source(operand, lane, i):
        op = operand.lower()
        return tuple(eval(formulas[f"{op}_{axis}"], {}, {"lane": lane, "i": i}) for axis in ("row", "col"))

    assert _fragment_mismatches(from_source) == 0
    swapped = lambda op, lane, i: from_source(op, lane, i)[::-1] if op == "C" else from_source(op, lane, i)  # noqa: E731
    with pytest.raises(IndexError):  # C transposed reaches outside the 16 x 8 tile
        _fragment_mismatches(swapped)
    wrong_b = lambda op, lane, i: (from_source(op, lane, i)[0] ^ 1, from_source(op, lane, i)[1]) if op == "B" else from_source(op, lane, i)  # noqa: E731
    assert _fragment_mismatches(wrong_b) > 0


def test_stage0_fragment_functions_compiled_for_the_cpu_agree(tmp_path):
    """The .cu's own a_row ... c_col, compiled by nvcc into a program for the CPU and printed for
    every lane and element, are the PTX layout (C++'s arithmetic, not a Python reading of it)."""
    nvcc = compiler.find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found (install the CUDA toolkit or `pip install nvidia-cuda-nvcc`)")
    main = tmp_path / "print_fragments.cu"
    calls = "\n".join(
        f'    for (int i = 0; i < {n}; ++i) std::printf("{op} %d %d %d %d\\n", lane, i, {op.lower()}_row(lane, i), '
        f"{op.lower()}_col(lane, i));" for op, n in tc.TC0_ELEMENTS.items())
    main.write_text(f'#include "{TC0.name}"\n#include <cstdio>\nint main() {{\n  using namespace tc::stage0;\n'
                    f"  for (int lane = 0; lane < 32; ++lane) {{\n{calls}\n  }}\n}}\n")
    exe = tmp_path / "print_fragments"
    proc = subprocess.run([str(nvcc), *compiler.NVCC_FLAGS, compiler.gencode("sm_80"), "-I", str(tc.CSRC), "-o", str(exe),
                           str(main)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    printed = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    table = {(op, int(lane), int(i)): (int(r), int(c)) for op, lane, i, r, c in (line.split() for line in printed if line)}
    assert len(table) == 32 * sum(tc.TC0_ELEMENTS.values())
    assert _fragment_mismatches(lambda op, lane, i: table[(op, lane, i)]) == 0


# ---- sources and compiled code ---------------------------------------------------------------
def test_designs_are_what_the_sources_declare():
    """A design's numbers are its .cu file's constexprs, read by name (tests/test_tensor_cores_cxx.py
    holds the reading to the compiler); what the Python derives from them must fit the hardware."""
    for d in tc.ALL_DESIGNS:
        c = tc.csrc.constants(d.source)
        assert d.block == (c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"]) and d.threads == c["THREADS"], d.stage
        if d.hopper:  # whole warpgroups, a consumer per 64 rows (wgmma's M), a producer where it has registers
            assert d.threads == 128 * (c["CONSUMERS"] + ("PRODUCER_REGS" in c)) and 64 * c["CONSUMERS"] == d.block[0]
        else:  # warps of 32, each an exact number of 16 x 8 mma tiles of the block
            assert d.threads == 32 * c["WARPS_M"] * c["WARPS_N"], d.stage
            assert d.block[0] % (16 * c["WARPS_M"]) == 0 and d.block[1] % (8 * c["WARPS_N"]) == 0, d.stage
        assert d.smem_bytes <= 227 * 1024, d.stage  # Hopper's per-block limit
        assert d.needs == ((features.HOPPER_SM90A,) if d.hopper else (features.BF16_TENSOR_CORES,))
    assert [d.mma_sync_per_slice for d in tc.ALL_DESIGNS[:2]] == [1, 32]


# ---- excerpts the notebook prints -------------------------------------------------------------
NOTEBOOKS = tc.CSRC.parent.parent / "notebooks"


def test_every_excerpt_marker_in_the_sources_is_balanced_and_unique():
    files = sorted(p for p in tc.CSRC.iterdir() if p.suffix in (".cu", ".cuh", ".h"))
    found = {p.name: tc.excerpts(p.name) for p in files}  # raises on an unbalanced or repeated marker
    assert sum(len(v) for v in found.values()) >= 10
    for name, spans in found.items():
        text = (tc.CSRC / name).read_text()
        for excerpt, (first, last) in spans.items():
            assert text.count(f"// [excerpt {excerpt}]") == text.count(f"// [/excerpt {excerpt}]") == 1
            assert first <= last, (name, excerpt)  # not empty
            body = tc.source_excerpt(name, excerpt)
            assert "[excerpt" not in body and "[/excerpt" not in body and body.strip()
        # a marker-like line the parser would not recognise (a typo) is an error too
        loose = [line for line in text.splitlines() if re.match(r"\s*//\s*\[/?\s*excerpt", line)
                 and not (tc.EXCERPT_BEGIN.match(line) or tc.EXCERPT_END.match(line))]
        assert not loose, (name, loose)


def test_source_excerpt_returns_the_marked_lines_and_names_what_is_wrong(tmp_path):
    good = tmp_path / "good.cu"
    good.write_text("a\n  // [excerpt outer]\n  int x;\n  // [excerpt inner]\n    x += 1;\n"
                    "  // [/excerpt inner]\n  // [/excerpt outer]\nb\n")
    assert tc.source_excerpt(good, "inner") == "    x += 1;"
    assert tc.source_excerpt(good, "outer") == "  int x;\n    x += 1;"  # inner markers left out
    with pytest.raises(ValueError, match=r"good.cu has no excerpt 'missing'.*it has inner, outer"):
        tc.source_excerpt(good, "missing")
    for text, message in [
        ("// [excerpt a]\nx\n", r"bad.cu:1: // \[excerpt a\] is never closed"),
        ("x\n// [/excerpt a]\n", r"bad.cu:2: // \[/excerpt a\] does not close an open"),
        ("// [excerpt a]\n// [excerpt b]\n// [/excerpt a]\n// [/excerpt b]\n", r"bad.cu:3: .*close // \[/excerpt b\] first"),
        ("// [excerpt a]\n// [/excerpt a]\n// [excerpt a]\n// [/excerpt a]\n", r"bad.cu:3: excerpt 'a' is marked twice"),
    ]:
        bad = tmp_path / "bad.cu"
        bad.write_text(text)
        with pytest.raises(ValueError, match=message):
            tc.source_excerpt(bad, "a")
    with pytest.raises(ValueError, match="neither a stage nor a file"):
        tc.source_excerpt("tc_9_nothing", "a")
    assert "ldmatrix_x4_trans" in tc.source_excerpt("tc_1_mma_sync", "fragments-and-mma")


def _notebook_excerpt_calls():
    """Every source_excerpt(...) call in the notebooks' code cells: (notebook, cell, args, keywords)."""
    import json

    calls = []
    for nb in sorted(NOTEBOOKS.glob("*.ipynb")):
        for i, cell in enumerate(json.loads(nb.read_text())["cells"]):
            if cell["cell_type"] != "code":
                continue
            source = "".join(cell["source"])
            if "source_excerpt" not in source:
                continue
            lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
            for node in ast.walk(ast.parse("\n".join(lines))):
                if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "source_excerpt":
                    calls.append((nb.name, i, node.args, node.keywords))
    return calls


def test_every_excerpt_a_notebook_prints_exists():
    """Each call names a stage or a file in csrc/ and one of its excerpts, as two string literals."""
    calls = _notebook_excerpt_calls()
    assert calls, "no notebook calls source_excerpt"
    problems = []
    for nb, cell, args, keywords in calls:
        where = f"{nb}, cell {cell}"
        if keywords or len(args) != 2 or not all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in args):
            problems.append(f"{where}: source_excerpt takes two string literals, (stage or file, excerpt name)")
            continue
        stage_or_file, name = (a.value for a in args)
        try:
            if name not in tc.excerpts(stage_or_file):
                problems.append(f"{where}: {stage_or_file} has no excerpt {name!r}")
        except ValueError as e:
            problems.append(f"{where}: {e}")
    assert not problems, "\n".join(problems)


def test_a_stages_mix_is_the_kernel_its_tables_list(monkeypatch):
    """staircase_mix and instruction_table count the same kernel: stage 6's 128 x 256 one, not its
    128 x 128 one nor its decode path (made-up counts; no cuobjdump needed)."""
    from types import SimpleNamespace

    from course_lib.kernels.tensor_cores import inspection

    by_kernel = {"tc::stage6::kernel<256>": {"HGMMA": 4, "STSM": 32}, "tc::stage6::kernel<128>": {"HGMMA": 4, "STSM": 16},
                 "tc::stage6::decode_kernel<64>": {"HGMMA": 4, "STG": 9}}
    monkeypatch.setattr(inspection, "sass_mix_by_kernel",
                        lambda cubin: {k: collections.Counter(v) for k, v in by_kernel.items()})
    mix = tc.staircase_mix("stage6.cubin", "tc_6_tma_store")
    assert mix == collections.Counter({"HGMMA": 4, "STSM": 32})
    table = tc.instruction_table({"tc_6_tma_store": SimpleNamespace(cubin="stage6.cubin")}, ("HGMMA", "STSM", "STG"))
    assert table.splitlines()[1].split() == ["tc_6_tma_store", "4", "32", "0"]


@pytest.fixture(scope="module")
def compiled():
    if why := compiler.sass_tools_missing():
        pytest.skip(why)
    results = tc.compile_all("sm_90a")  # all stages in parallel, cached outside the repository
    mixes = {name: tc.staircase_mix(r.cubin, name) for name, r in results.items()}
    return results, mixes


@pytest.mark.parametrize("name", STAGE_NAMES)
def test_stage_compiles_for_sm90a_without_spills_or_warnings(compiled, name):
    results, mixes = compiled
    r = results[name]
    assert r.kernels, f"no kernel found in ptxas's report:\n{r.ptxas_log}"
    for k in r.kernels:
        assert k.arch == "sm_90a"
        assert not k.spills, f"{k.name} spills or uses a stack frame: {k}"
    assert r.warnings == (), r.warnings  # e.g. C7508 (setmaxnreg ignored) or wgmma serialisation
    for kernel, mix in tc.sass_mix_by_kernel(r.cubin).items():  # every kernel, not only the table's
        assert mix["LDL"] + mix["STL"] == 0, kernel


@pytest.mark.parametrize("name", STAGE_NAMES)
def test_sass_has_the_expected_tensor_core_instructions(compiled, name):
    results, mixes = compiled
    mix = mixes[name]
    design = tc.DESIGN[name]
    if not design.hopper:  # the K loop's body, compiled once, issues one slice's mma.sync: exactly
        assert mix["HMMA"] == design.mma_sync_per_slice, mix["HMMA"]  # 1 (stage 0), 4 x 4 x 2 (stage 1)
        assert mix["HGMMA"] == 0
    if name == "tc_0_mma_sync_minimal":
        # Operands straight from global memory, 12 two-byte loads per lane (8 of A, 4 of B); no shared
        # memory at all; 4 two-byte stores of C.
        assert mix["LDG"] == 12 and mix["STG"] == 4
        assert mix["LDSM"] + mix["LDS"] + mix["STS"] + mix["BAR"] == 0
    elif name == "tc_1_mma_sync":
        # Per 16 of K a warp loads its 4 A tiles (16 x 16) with one ldmatrix.x4 each and its 4 B tiles
        # (16 x 8) two to an ldmatrix.x4.trans: 6 per 16 of K, 12 per slice of 32.
        c = design.constants
        per_k16 = c["WARP_M"] // c["MMA_M"] + c["WARP_N"] // c["MMA_N"] // 2
        assert mix["LDSM"] == per_k16 * c["BLOCK_K"] // c["MMA_K"] == 12
    else:
        assert mix["HGMMA"] > 0 and mix["HMMA"] == 0 and mix["UTMALDG"] > 0 and mix["SYNCS"] > 0
    if name in ("tc_4_warp_specialized", "tc_5_persistent", "tc_6_tma_store"):
        assert mix["USETMAXREG"] > 0
    if name == "tc_6_tma_store":
        # One kernel per tile width. C leaves through stmatrix + TMA store only. The only ordinary
        # global stores are stream-K's: a contributor's BN / 8 float4 of partial sums per thread
        # (unrolled) and the owner's store that empties the flag again (what keeps a replayed CUDA
        # graph right); the contributor raises the flag by one atomic add per lane (REDG).
        by_kernel = tc.sass_mix_by_kernel(results[name].cubin)
        for bn in tc.STAGE6_TILES.values():
            tile = by_kernel[f"tc::stage6::kernel<{bn}>"]
            assert tile["STSM"] == bn // 8 and tile["UTMASTG"] == bn // 32, (bn, tile)
            assert tile["STG"] == bn // 8 + 1 and tile["REDG"] == 1 and tile["HGMMA"] == 4, (bn, tile)
    # One kernel per file (the persistent stages' clusters of 2 are a constant, not a template
    # argument with several instantiations) - but stage 6's, one per tile width, and its decode path,
    # one kernel per token tile.
    own = [k.name for k in results[name].kernels if tc.inspection.DECODE_KERNEL not in k.name]
    decode = [k for k in results[name].kernels if not tc.staircase_kernel(k.name)]
    if name == "tc_6_tma_store":
        assert sorted(own) == sorted(f"tc::stage6::kernel<{bn}>" for bn in tc.STAGE6_TILES.values())
    else:
        assert len(own) == 1
    assert len(decode) == (5 if name == "tc_6_tma_store" else 0)  # token tiles 16, 32, 64, 96, 128


def test_stage6_decode_kernels_swap_the_operands(compiled):
    """The decode path: one kernel per token tile T (16, 32, 64, 96, 128), each a 64 x T wgmma (HGMMA)
    fed by TMA loads, no register reallocation, and C written with ordinary 2-byte stores."""
    results, _ = compiled
    mixes = tc.sass_mix_by_kernel(results["tc_6_tma_store"].cubin)
    decode = {name: mix for name, mix in mixes.items() if not tc.staircase_kernel(name)}
    assert sorted(decode) == [f"tc::stage6::decode_kernel<{t}>" for t in (128, 16, 32, 64, 96)]
    for name, mix in decode.items():
        assert mix["HGMMA"] == 64 // 16 and mix["UTMALDG"] > 0 and mix["USETMAXREG"] == 0, name
        assert mix["UTMASTG"] == 0 and mix["STG"] > 0 and mix["LDL"] + mix["STL"] == 0, name
    source = (tc.CSRC / "tc_6_tma_store.cu").read_text()
    assert ", p, 1, 1, 1, 0;" in (tc.CSRC / "tc_hopper.cuh").read_text()  # imm-trans-a = 1, imm-trans-b = 0
    assert "wgmma_swapped<T>(acc, ring.b_desc(" in source  # B's box is A', A's rows are B'


@pytest.mark.parametrize("t", [16, 32, 64, 96, 128])
def test_stage6_decode_slice_runs_few_instructions(compiled, t):
    """The decode kernels carry the ring's place from slice to slice with the main kernel's cursor
    (tc_hopper.cuh's RingCursor). Before, they rebuilt the slot, its barrier's address (S2UR
    SR_CgaCtaId) and the descriptors every slice: 99-102 instructions a slice with nvcc 13.0, 60-63
    with the cursor. The 16 R2UR a slice stay (the descriptors pass through vector registers). Neither
    count moved the decode rows' GPU time on an H100 (experiments/JOURNAL.md, "2026-12-06 (third
    session)"): a slice there waits on an 8 KB box of W, not on its instructions."""
    results, _ = compiled
    path = tc.mainloop_slice_path(tc.sass_by_kernel(results["tc_6_tma_store"].cubin)[f"tc::stage6::decode_kernel<{t}>"])
    assert sum("HGMMA" in text for text in path) == 4
    assert not [text for text in path if "SR_CgaCtaId" in text], path
    assert len(path) <= 66, f"{len(path)} instructions per slice:\n" + "\n".join(path)


@pytest.mark.parametrize("bn", [64, 128, 256])
def test_stage6_s_slice_runs_few_instructions(compiled, bn):
    """A consumer warp runs every instruction of stage 6's K loop once per 64-wide slice; at 1024^3
    a 128 x 64 tile has only 16 slices, so the loop's length is the kernel's speed there. It ran 126
    instructions a slice for 4 wgmmas (this count and Nsight Compute's agree), cuBLAS's kernel with the
    same tile about 50 (experiments/runs/2026-12-06_0158_h200_fixed_cost): barrier addresses rebuilt
    from the shared window's base (S2UR SR_CgaCtaId) and descriptors built in vector registers, moved
    into uniform ones (R2UR) before every wgmma, 16 a slice. With the ring cursor (tc_hopper.cuh) nvcc
    13.0 compiles 68-70, the block that wraps the cursor round to slot 0 included (run once per turn
    of the ring; its 3 R2UR are the only ones left)."""
    results, _ = compiled
    path = tc.mainloop_slice_path(tc.sass_by_kernel(results["tc_6_tma_store"].cubin)[f"tc::stage6::kernel<{bn}>"])
    assert sum("HGMMA" in text for text in path) == 4
    assert not [text for text in path if "SR_CgaCtaId" in text], path
    assert sum(text.startswith("R2UR") for text in path) <= 3, path
    assert len(path) <= 72, f"{len(path)} instructions per slice:\n" + "\n".join(path)


def test_warp_specialised_kernels_cap_registers_for_setmaxnreg(compiled):
    """setmaxnreg moves registers within the CTA's pool: the registers each thread got at launch
    times the threads. The kernels' static_assert assumes ptxas gives each of the 384 threads
    65536 / 384 rounded down to a multiple of 8 = 168 at launch; ptxas's report says it does, and
    the split (1 x 128 x 40 + 2 x 128 x 232) uses exactly that pool."""
    results, _ = compiled
    for name in ("tc_4_warp_specialized", "tc_5_persistent", "tc_6_tma_store"):
        d = tc.DESIGN[name]
        c = d.constants
        kernels = [k for k in results[name].kernels if tc.inspection.DECODE_KERNEL not in k.name]
        assert len(kernels) == (len(tc.STAGE6_TILES) if name == "tc_6_tma_store" else 1)
        for k in kernels:  # stage 6: both tile widths
            assert k.registers == 65536 // d.threads // 8 * 8 == 168, k  # tc::registers_at_launch(384)
            pool = k.registers * d.threads
            assert 128 * c["PRODUCER_REGS"] + c["CONSUMERS"] * 128 * c["CONSUMER_REGS"] <= pool < 65536, name


def test_mma_sync_stages_also_build_for_ampere():
    if compiler.find_nvcc() is None:
        pytest.skip("nvcc not found (install the CUDA toolkit or `pip install nvidia-cuda-nvcc`)")
    results = tc.compile_all("sm_80")
    assert list(results) == ["tc_0_mma_sync_minimal", "tc_1_mma_sync"]
    for r in results.values():
        assert r.kernels and all(not k.spills and k.arch == "sm_80" for k in r.kernels) and r.warnings == ()
    if compiler.find_cuobjdump() is not None:
        for name, r in results.items():
            assert compiler.sass_instruction_mix(r.cubin)["HMMA"] == tc.DESIGN[name].mma_sync_per_slice, name
    with pytest.raises(ValueError, match="only for sm_90a"):
        tc.compile_stage("tc_2_wgmma_tma", "sm_80")


def test_the_primer_spells_the_numba_tiled_kernel_instruction_for_instruction():
    """csrc/primer_fp32.cu is notebook 06's C++ spelling of the numba kernels of notebooks 01-02. Its
    tiled kernel compiles (sm_90, as the numba kernels were for numba_kernels_sm90.json) to the same
    counts of the instructions notebook 06 prints."""
    if why := compiler.sass_tools_missing():
        pytest.skip(why)
    import json

    r = compiler.compile_cubin(tc.CSRC / "primer_fp32.cu", "sm_90", compiler.NVCC_FLAGS, include_dirs=[tc.CSRC])
    assert {k.name for k in r.kernels} == {"primer::naive_kernel", "primer::tiled_kernel<32>"}
    assert not any(k.spills for k in r.kernels) and r.warnings == ()
    mix = tc.sass_mix_by_kernel(r.cubin)["primer::tiled_kernel<32>"]
    from course_lib import results

    numba = json.loads((results.RESULTS_DIR / "numba_kernels_sm90.json").read_text())["kernels"]
    counts = numba["shared_memory_tiling_t32"]["sass"]
    for op in ("FFMA", "STS", "BAR", "LDG", "STG"):
        assert mix[op] == counts[op], op
    assert mix["LDS"] == counts["LDS"] + counts["LDS.128"]  # the SASS mix counts LDS.128 as LDS
    assert "primer" not in {s.name for s in tc.build_plan((9, 0))[0]}  # not part of the extension


def test_stage_objects_link_into_one_library(tmp_path):
    """The extension links every stage's object into one library: a non-inline function defined in
    a shared header (as the watchdog's trap once was) compiles file by file but fails that link."""
    nvcc = compiler.find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found (install the CUDA toolkit or `pip install nvidia-cuda-nvcc`)")
    objects = [tmp_path / f"{d.source}.o" for d in tc.ALL_DESIGNS]

    def compile_one(design, obj):
        return subprocess.run([str(nvcc), *compiler.NVCC_FLAGS, compiler.SM90A, "-Xcompiler", "-fPIC", "-c", "-I", str(tc.CSRC),
                               "-o", str(obj), str(tc.CSRC / design.source)], capture_output=True, text=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for proc in pool.map(compile_one, tc.ALL_DESIGNS, objects):
            assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([str(nvcc), "-shared", "-o", str(tmp_path / "stages.so"), *map(str, objects)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_compiler_module_imports_nothing_of_the_course():
    """course_lib.compiler sits below the kernels: it compiles and reads any CUDA code."""
    tree = ast.parse(Path(compiler.__file__).read_text())
    imported = {n.name for node in ast.walk(tree) if isinstance(node, ast.Import) for n in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {m for m in imported if m.startswith("course_lib")}, imported


def test_compiler_reports_any_kernel(tmp_path):
    if why := compiler.sass_tools_missing():
        pytest.skip(why)
    src = tmp_path / "twice.cu"
    src.write_text("namespace demo { __global__ void twice(float* x, int n) {\n"
                   "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) x[i] *= 2.f;\n} }\n")
    r = compiler.compile_cubin(src, "sm_80", ["-O3"], use_cache=False)
    assert r.name == "twice" and r.arch == "sm_80" and r.seconds > 0 and r.warnings == ()
    assert [(k.name, k.arch, k.spills) for k in r.kernels] == [("demo::twice", "sm_80", False)]
    mix = compiler.sass_instruction_mix(r.cubin)
    assert mix["LDG"] == mix["STG"] == 1 and mix["FADD"] + mix["FMUL"] == 1
    assert compiler.compile_cubin(src, "sm_80", ["-O3"]).seconds == 0  # the second time from the cache


def test_demangle_names_the_course_kernels():
    assert compiler.demangle("_ZN2tc6stage56kernelILi2EEEv14CUtensorMap_stS2_P13__nv_bfloat16iiiNS_12GroupedTilesE") == (
        "tc::stage5::kernel<2>"
    )
    assert compiler.demangle("_ZN2tc6stage16kernelEPK13__nv_bfloat16S3_PS1_iii") == "tc::stage1::kernel"
    assert compiler.demangle("plain_name") == "plain_name"


# ---- on a GPU --------------------------------------------------------------------------------
# Off every tile size (128 x 128 and 128 x 256, K slices of 32/64), an odd number of 128-row tiles
# (the idle half of a 2-CTA cluster), K with a partial last slice, and one large square.
GPU_SHAPES = [(8, 8, 8), (40, 24, 40), (136, 264, 72), (264, 520, 200), (1000, 1008, 520), (2048, 2048, 2048)]


@pytest.mark.gpu
@pytest.mark.parametrize("name", STAGE_NAMES)
def test_stage_is_correct_on_the_gpu(name):
    report = course_lib.check(name, "bf16", GPU_SHAPES)
    assert len(report.results) == len(GPU_SHAPES)


# Stage 0 takes any shape: odd sizes off every multiple, one row or column, K shorter than one step.
ODD_SHAPES = [(1, 1, 1), (13, 7, 21), (17, 9, 33), (31, 45, 5), (100, 3, 250), (257, 263, 129)]


@pytest.mark.gpu
def test_stage0_is_correct_at_any_shape_on_the_gpu():
    course_lib.check("tc_0_mma_sync_minimal", "bf16", ODD_SHAPES)


@pytest.mark.gpu
@pytest.mark.parametrize("group_m,max_ctas", [(1, 0), (16, 0), (8, 2)])
def test_persistent_grid_settings_are_correct_on_the_gpu(group_m, max_ctas):
    """The persistent stages' runtime settings: other tile orders, and a grid of one cluster that
    walks every tile (each stored during the next tile's first slices, through the same boxes)."""
    for stage in ("tc_5_persistent", "tc_6_tma_store"):
        fn = tc.make_gemm(stage, shape_multiple=course_lib.get_stage(stage).shape_multiple, group_m=group_m,
                          max_ctas=max_ctas)
        course_lib.check(fn, "bf16", [(264, 520, 200), (1000, 1008, 520)])


# Shapes where stage 6 shares tiles out by K slices: a decode step (M < 64 rows, most warps' rows
# outside C), one tile, one wave and a few tiles more, a partial last K slice; M that is no multiple of 8.
STREAM_K_SHAPES = [(16, 4096, 4096), (8, 264, 200), (1000, 1008, 520), (2048, 2304, 768), (64, 14336, 1000),
                   (100, 1000, 1000), (301, 520, 136)]
# The swapped schedule (M <= 128): every token tile (16, 32, 64, 96, 128), M = 1 and M between the tiles,
# K split into ranges or not (N = 8: one column tile, many ranges), a partial last K slice.
SWAPPED_SHAPES = [(1, 6144, 4096), (3, 8, 8), (9, 4608, 3584), (17, 200, 1032), (33, 1000, 264), (64, 14336, 1000),
                  (65, 136, 1040), (96, 4096, 4096), (100, 520, 18944), (128, 4096, 14336)]


# The middle shapes, where the plan takes the 128 x 128 tile (whole, or stream-K at M = 200), an odd M
# and a partial last K slice among them.
MID_SHAPES = [(1024, 1024, 1024), (200, 4096, 4096), (257, 1032, 2056)]


@pytest.mark.gpu
@pytest.mark.parametrize("schedule,block_n", [(-1, 0), (0, 0), (1, 0), (2, 0), (-1, 128), (0, 128), (1, 128),
                                              (0, 256), (1, 256), (-1, 64), (0, 64), (1, 64)])
def test_stage6_schedules_are_correct_on_the_gpu(schedule, block_n):
    """-1 by the shape, 0 whole tiles, 1 stream-K, 2 operands swapped (tc_launch.h's SCHEDULE_*); the
    tile by the shape (0) or forced (128 x 64, 128 x 128, 128 x 256)."""
    fn = tc.make_gemm("tc_6_tma_store", shape_multiple=course_lib.get_stage("tc_6_tma_store").shape_multiple,
                      group_m=8, max_ctas=course_lib.backend.sm_count, schedule=schedule, block_n=block_n)
    shapes = (SWAPPED_SHAPES if schedule == 2 else
              STREAM_K_SHAPES + MID_SHAPES + (SWAPPED_SHAPES if schedule == -1 else []))
    course_lib.check(fn, "bf16", shapes)
    for _ in range(3):  # the fix-up flags and split-K counters carry over: back-to-back launches stay right
        course_lib.check(fn, "bf16", shapes[:1], seed=len(shapes))


@pytest.mark.gpu
def test_stage6_swapped_forced_takes_more_than_128_rows_on_the_gpu():
    """Forced, the swapped schedule covers M > 128 with several token tiles of 128 (the experiments
    compare it with the other schedules at mid-size shapes)."""
    fn = tc.make_gemm("tc_6_tma_store", shape_multiple=course_lib.get_stage("tc_6_tma_store").shape_multiple,
                      group_m=8, max_ctas=0, schedule=2)
    course_lib.check(fn, "bf16", [(136, 64, 64), (1000, 1008, 520), (1024, 1024, 1024)])


@pytest.mark.gpu
@pytest.mark.parametrize("knobs,message", [({"block_n": 32}, "block_n must be TILE_AUTO .0., 256 .*, 128 .* or 64"),
                                           ({"schedule": 3}, "schedule must be SCHEDULE_AUTO .-1., .* not 3")])
def test_stage6_refuses_an_unknown_tile_or_schedule_on_the_gpu(knobs, message):
    fn = tc.make_gemm("tc_6_tma_store", shape_multiple=course_lib.get_stage("tc_6_tma_store").shape_multiple,
                      group_m=8, max_ctas=0, **knobs)
    a, b = course_lib.random_inputs(256, 256, 256, "bf16", seed=0)
    with pytest.raises(RuntimeError, match=message):
        fn(a, b)


@pytest.mark.gpu
def test_stage6_s_launcher_plans_what_the_model_says_on_the_gpu():
    """The plan the extension reports (and the recording keeps per row) is the model's for the
    clusters this GPU holds: by the shape, and forced."""
    clusters = course_lib.backend.sm_count() // 2
    for M, N, K in itertools.product((1, 64, 96, 200, 512, 1000, 1024, 1536, 4096), (256, 1024, 4096), (64, 1024, 8192)):
        assert tc.stage6_launch_plan(M, N, K) == tc.stage6_plan(M, N, K, clusters), (M, N, K)
    assert tc.stage6_launch_plan(1024, 1024, 1024, block_n=64, schedule="stream-K") == ("128x64", "stream-K")
    assert tc.stage6_launch_plan(300, 1024, 1024, schedule="swapped") == ("128x64", "swapped")
    with pytest.raises(RuntimeError, match="block_n must be"):
        tc.stage6_launch_plan(1024, 1024, 1024, block_n=32)


@pytest.mark.gpu
def test_misaligned_view_is_rejected_on_the_gpu():
    storage = torch.zeros(64 * 64 + 4, dtype=torch.bfloat16, device="cuda")
    a = storage[4:].reshape(64, 64)  # contiguous, but 8 bytes past a 16-byte boundary
    b = torch.zeros(64, 64, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(ValueError, match="16-byte boundary"):
        _wrapper("tc_2_wgmma_tma")(a, b)


def test_recorded_timeline_is_consistent_and_plots():
    """The stage 6 timeline recorded on the H200, as deep_dives/hopper_lab shows it (the summary of the raw log
    in experiments/runs): the mainloop never faster than the tensor cores' peak, each consumer's
    stamps in order, and the picture draws three bars per tile."""
    import matplotlib

    matplotlib.use("Agg")
    from course_lib import plots, results

    timeline = results.summary("tensor_core")["timeline"]
    sizes = {s["shape"][0]: s for s in timeline["sizes"]}
    assert set(sizes) == {4096, 8192}
    for n, s in sizes.items():
        assert s["ideal_mainloop_cycles"] == 2 * 128 * 256 * n / 4096
        assert s["ideal_mainloop_cycles"] <= s["mainloop_cycles"] * (1 + 1e-3)
        assert 0.9 < s["mainloop_share_of_lifetime"] < 1.0
    raw = timeline["consumers_4096"]
    assert raw and all(len(c["tiles"]) == sizes[4096]["tiles_per_consumer"] for c in raw)
    for c in raw:
        flat = [c["start"], *(t for tile in c["tiles"] for t in tile), c["end"]]
        assert flat == sorted(flat), c["cta"]
    fig = plots.plot_timeline(raw, "recorded", rows=3)
    assert len(fig.axes[0].patches) == 3 * 3 * len(raw[0]["tiles"])
    with pytest.raises(ValueError, match="no consumers"):
        plots.plot_timeline([], "recorded")
