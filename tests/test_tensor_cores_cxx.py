"""The Python side of the tensor-core stages against the C++, by the compiler: every constant the
Python reads from course_lib/csrc by name, every shared-memory size it computes, and every formula it
models (the wgmma descriptors, the grouped tile order, the persistent grid, stage 6's plan: its tile
and schedule per shape) is written out as a ``static_assert`` on the C++'s own constexpr and compiled
with nvcc (front end only: nothing is generated, no GPU needed). A C++ edit the model does not follow
fails to compile."""

import itertools
import subprocess

import pytest

from course_lib import compiler
from course_lib.kernels import tensor_cores as tc
from course_lib.kernels.tensor_cores import csrc
from course_lib.model import fragments, hardware, layout, schedules, waves

HEADERS = ("tc_hopper.cuh", "tc_schedule.cuh", "tc_stream_k.cuh")
BASES = (0x8000, 0x8000 + 64 * layout.SWIZZLE_ROW, 0x1C400)  # a tile, its second warpgroup's rows, another tile
ORDERS = [(1, 1, 8), (5, 3, 2), (7, 11, 8), (9, 4, 1), (16, 8, 4)]  # (cluster rows, columns, group_m)
# Stage 6's plan, over a grid of shapes: M either side of the swapped schedule's limit (128) and of the
# token tiles, odd M, small and large squares; N that cuts the tiles or not; K either side of 32
# K-slices; the H200's 66 clusters, 5 (where 4 cluster tiles are exactly 80 % busy: not below it) and 1.
PLAN_M = (1, 16, 17, 64, 96, 128, 129, 200, 256, 257, 512, 768, 1000, 1024, 1536, 2048, 3000, 3072, 4096, 8192)
PLAN_N = (8, 512, 1032, 2304, 4096, 14336)
PLAN_K = (64, 31 * 64, 31 * 64 + 8, 4096, 16384)
PLAN_CLUSTERS = (66, 5, 1)

# ---- the reader --------------------------------------------------------------------------------------
def test_the_reader_takes_namespace_scope_constexprs_with_cxx_arithmetic(tmp_path):
    (tmp_path / "inc.cuh").write_text("namespace tc {\nconstexpr int WARP = 32;  // a comment { with a brace\n}\n")
    (tmp_path / "stage.cu").write_text(
        '#include "inc.cuh"\n#include <cuda.h>\n#define NOT_A_CONSTANT 5\n'
        "namespace tc {\nnamespace s {\n"
        "constexpr int A = 4, B = A * WARP / 3, C = -7 / 2;  /* A = 4; no */\n"
        "static constexpr double LIMIT = 0.8;\nconstexpr uint32_t BIG = 1u << 20;\n"
        'constexpr const char* TEXT = "x = 1;";\n'
        "struct Smem { int a[A]; };\nconstexpr int BYTES = sizeof(Smem) + 16;\n"
        "constexpr int twice(int x) { constexpr int LOCAL = 2; return LOCAL * x; }\n"
        "void f() { constexpr int INSIDE = 3; }\n}  // namespace s\n}  // namespace tc\n")
    decls = {c.name: c for c in csrc.declarations(tmp_path / "stage.cu")}
    assert set(decls) == {"WARP", "A", "B", "C", "LIMIT", "BIG", "BYTES"}  # not LOCAL, INSIDE, TEXT, macros
    assert {n: c.value for n, c in decls.items()} == {"WARP": 32, "A": 4, "B": 42, "C": -3, "LIMIT": 0.8,
                                                     "BIG": 1 << 20, "BYTES": None}
    assert decls["A"].namespace == "tc::s" and decls["WARP"].namespace == "tc" and decls["WARP"].file == "inc.cuh"
    with pytest.raises(KeyError, match=r"BYTES .*sizeof\(Smem\) \+ 16, is left to the compiler"):
        csrc.constant(tmp_path / "stage.cu", "BYTES")
    with pytest.raises(KeyError, match="no constexpr MISSING .* it declares A, B, BIG, C, LIMIT, WARP"):
        csrc.constant(tmp_path / "stage.cu", "MISSING")


def test_every_stage_declares_what_the_python_reads():
    for d in tc.ALL_DESIGNS:
        c = d.constants
        assert {"BLOCK_M", "BLOCK_N", "BLOCK_K", "THREADS"} <= set(c), d.source
        assert d.hopper == ("SMEM_BYTES" in {x.name for x in csrc.declarations(d.source)}), d.source
    assert (tc.A_LBO, tc.A_SBO, tc.B_LBO, tc.B_SBO) == (16, 1024, 8192, 1024)
    assert (tc.STREAM_K_BELOW, tc.STREAM_K_MIN_SLICES) == (0.8, 32)
    # The hardware's numbers, which both sides state (the PTX ISA's, not a design choice), agree.
    hopper = csrc.constants("tc_hopper.cuh")
    assert (hopper["SWIZZLE_BYTES"], hopper["SWIZZLE_ATOM"]) == (layout.SWIZZLE_ROW, layout.SWIZZLE_ATOM)
    assert (hopper["WGMMA_K"], hopper["WARPGROUP"]) == (tc.model.WGMMA_K, hardware.WARPGROUP_SIZE)
    for d in tc.ALL_DESIGNS[:2]:
        c = d.constants
        assert (c["MMA_M"], c["MMA_N"], c["MMA_K"]) == (16, 8, 16) == fragments.MMA_SHAPES["C"][:2] + (16,)


# ---- the static_asserts, generated from the Python model ---------------------------------------------
def _constant_checks() -> list[str]:
    """static_assert(NAME == value) for every value the Python reads, in the namespace it names."""
    lines, seen = [], set()
    for file in (*HEADERS, *(d.source for d in tc.ALL_DESIGNS)):
        for c in csrc.declarations(file):
            if c.value is None or (c.namespace, c.name) in seen:
                continue
            seen.add((c.namespace, c.name))
            lines.append(f'static_assert({c.namespace}::{c.name} == {c.value!r}, '
                         f'"{c.file}: {c.name} = {c.expression}, which Python reads as {c.value!r}");')
    for d in tc.ALL_DESIGNS:
        ns = next(c.namespace for c in csrc.declarations(d.source) if c.file == d.source)  # tc::stageN
        if d.hopper:
            lines.append(f'static_assert({ns}::SMEM_BYTES == {d.smem_bytes}, "{d.source}: SMEM_BYTES is not the '
                         f'{d.smem_bytes} bytes Design.smem_bytes lays out");')
        for narrow in ("NARROW", "NARROWEST"):  # stage 6's 128 x 128 and 128 x 64 tiles
            c = d.constants
            if f"{narrow}_BLOCK_N" in c:
                bn = c[f"{narrow}_BLOCK_N"]
                want = d.ring_smem_bytes(bn, c[f"{narrow}_STAGES"])
                lines.append(f'static_assert({ns}::smem_bytes<{bn}>() == {want}, "{d.source}: smem_bytes<{bn}>() is not '
                             f'the {want} bytes Design.ring_smem_bytes lays out");')
        if "C_HALF_BOXES" in d.constants:  # stage 6's epilogue: the columns staged per round, per tile width
            for bn in sorted(tc.STAGE6_TILES.values()):
                cols = tc.stage6_epilogue_rounds(bn)[0]
                lines.append(f'static_assert({ns}::Smem<{bn}>::HALF_COLS == {cols}, "{d.source}: Smem<{bn}> stages '
                             f'{cols} columns per round, as stage6_epilogue_rounds says");')
        if "PRODUCER_REGS" in d.constants:
            regs = 65536 // d.threads // 8 * 8  # what ptxas gives each thread under __launch_bounds__(THREADS, 1)
            lines.append(f'static_assert(tc::registers_at_launch({ns}::THREADS) == {regs}, "{d.source}: '
                         f'registers at launch for {d.threads} threads are {regs}");')
    return lines


def _descriptor_checks() -> list[str]:
    lines = []
    for base, k16 in itertools.product(BASES, range(4)):
        a, b = tc.a_descriptor(base, 0, k16), tc.b_descriptor(base, k16)
        for side, want in (("a", a), ("b", b)):
            start = tc.decode_descriptor(want)["start"]
            lines.append(f"static_assert(tc::{side}_descriptor_at({base:#x}u, {k16}) == {want:#x}ull, "
                         f'"{side.upper()} descriptor of slice k16 = {k16} of a tile at {base:#x}: Python\'s model '
                         f'says start {start:#x}, LBO {tc.decode_descriptor(want)["lbo"]}, SBO '
                         f'{tc.decode_descriptor(want)["sbo"]}");')
    return lines


def _order_checks() -> list[str]:
    lines = []
    for rows, cols, group in ORDERS:
        name = f"order_{rows}_{cols}_{group}"
        pairs = ", ".join(f"{{{r}, {c}}}" for r, c in schedules.grouped_tile_order(rows, cols, group))
        lines += [
            f"constexpr int {name}_expected[][2] = {{{pairs}}};",
            f"constexpr bool {name}() {{",
            f"  constexpr tc::GroupedTiles tiles{{{rows}, {cols}, {group}}};",
            "  for (int t = 0; t < tiles.count(); ++t) {",
            "    int row = -1, col = -1;",
            "    tiles.locate(t, row, col);",
            f"    if (row != {name}_expected[t][0] || col != {name}_expected[t][1]) return false;",
            "  }",
            "  return true;",
            "}",
            f'static_assert({name}(), "GroupedTiles{{{rows}, {cols}, {group}}}.locate is not '
            f'course_lib.model.schedules.grouped_order");',
        ]
    for tiles, max_clusters in itertools.product((1, 3, 64, 67, 256, 1024, 2047), (1, 7, 66)):
        want = waves.persistent_ctas(tiles, max_clusters, 2)
        lines.append(f"static_assert(tc::trimmed_ctas({tiles}, {max_clusters}, 2) == {want}, "
                     f'"{tiles} cluster tiles on at most {max_clusters} clusters: Python says {want} CTAs");')
    return lines


def _plan_line(M: int, N: int, K: int, clusters: int, block_n: int = tc.TILE_AUTO, schedule: str = "auto") -> str:
    """static_assert that stage 6's C++ plan() is what Python's stage6_plan says."""
    want = tc.stage6_plan(M, N, K, clusters, block_n=block_n, schedule=schedule)
    tile_m, tile_n = (int(x) for x in want.tile.split("x"))
    return (f"static_assert(plan_is(tc::stage6::plan({M}, {N}, {K}, {clusters}, {block_n}, "
            f"{tc.SCHEDULE_CODES[schedule]}), {tile_m}, {tile_n}, {tc.SCHEDULE_CODES[want.schedule]}), "
            f"\"{M} x {N} x {K} on {clusters} clusters, block_n {block_n}, schedule {schedule}: Python's "
            f"stage6_plan says {want.tile} {want.schedule}\");")


PLAN_IS = ("constexpr bool plan_is(tc::stage6::Plan p, int tile_m, int tile_n, int schedule) {\n"
           "  return p.tile_m == tile_m && p.tile_n == tile_n && p.schedule == schedule;\n}")


def _plan_checks() -> list[str]:
    """Stage 6's plan by the shape over the grid above, then every forced tile and schedule at the
    H200's 66 clusters."""
    lines = [PLAN_IS]
    for M, N, K, clusters in itertools.product(PLAN_M, PLAN_N, PLAN_K, PLAN_CLUSTERS):
        lines.append(_plan_line(M, N, K, clusters))
    forced = itertools.product((tc.TILE_AUTO, *tc.STAGE6_TILES.values()), tc.SCHEDULE_CODES)
    for (block_n, schedule), M, N, K in itertools.product(forced, PLAN_M, PLAN_N[::2], PLAN_K[::2]):
        lines.append(_plan_line(M, N, K, 66, block_n, schedule))
    # Every branch of the rule occurs by the shape on the grid (the checks above cover them): the three
    # tiles whole, the wide one shared out by K slices, the operands swapped.
    plans = {tc.stage6_plan(M, N, K, 66) for M, N, K in itertools.product(PLAN_M, PLAN_N, PLAN_K)}
    assert {("128x256", "whole tiles"), ("128x128", "whole tiles"), ("128x64", "whole tiles"),
            ("128x256", "stream-K")} <= plans, plans
    assert {schedule for _, schedule in plans} == {"whole tiles", "stream-K", "swapped"}, plans
    return lines


def _compile_checks(tmp_path, lines: list[str]) -> subprocess.CompletedProcess:
    nvcc = compiler.find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found (install the CUDA toolkit or `pip install nvidia-cuda-nvcc`)")
    source = tmp_path / "python_model_checks.cu"
    includes = [f'#include "{d.source}"' for d in tc.ALL_DESIGNS]
    source.write_text("// Generated by tests/test_tensor_cores_cxx.py from the Python model.\n"
                      + "\n".join(includes + lines) + "\n")
    # -cuda: the front end alone (templates, constexpr, static_assert), a few seconds for every stage.
    return subprocess.run([str(nvcc), *compiler.NVCC_FLAGS, compiler.SM90A, "-I", str(tc.CSRC), "-cuda",
                           "-o", str(tmp_path / "checks.ii"), str(source)], capture_output=True, text=True)


def _failures(proc: subprocess.CompletedProcess) -> str:
    found = [line.strip() for line in (proc.stdout + proc.stderr).splitlines() if "static assertion failed" in line]
    return "\n".join(found) or (proc.stdout + proc.stderr)[-3000:]


@pytest.mark.parametrize("checks", [_constant_checks, _descriptor_checks, _order_checks, _plan_checks],
                         ids=lambda f: f.__name__.strip("_"))
def test_the_cxx_is_what_the_python_model_says(tmp_path, checks):
    lines = checks()
    assert len(lines) >= 5
    proc = _compile_checks(tmp_path, lines)
    assert proc.returncode == 0, _failures(proc)


def test_a_wrong_expectation_fails_to_compile(tmp_path):
    """The checks can fail: a descriptor one slice off, a constant off by one, and stage 6's plan
    expected with the other tile (1024^3 takes 128 x 64) or the other schedule, are refused."""
    wrong = _descriptor_checks()[0].replace("_descriptor_at(0x8000u, 0)", "_descriptor_at(0x8000u, 1)")
    right_plan = _plan_line(1024, 1024, 1024, 66)
    assert "plan(1024, 1024, 1024, 66, 0, -1), 128, 64, 0)" in right_plan
    wrong_tile = right_plan.replace("128, 64, 0)", "128, 128, 0)")
    wrong_schedule = right_plan.replace("128, 64, 0)", "128, 64, 1)")
    proc = _compile_checks(tmp_path, [wrong, 'static_assert(tc::stage6::THREADS == 385, "threads");', PLAN_IS,
                                      wrong_tile, wrong_schedule, right_plan])
    assert proc.returncode != 0
    assert _failures(proc).count("static assertion failed") == 4, _failures(proc)


# ---- what ptxas reports --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compiled():
    if compiler.find_nvcc() is None:
        pytest.skip("nvcc not found (install the CUDA toolkit or `pip install nvidia-cuda-nvcc`)")
    return tc.compile_all("sm_90a")


@pytest.mark.parametrize("design", tc.ALL_DESIGNS, ids=lambda d: d.stage)
def test_static_shared_memory_is_what_the_design_lays_out(compiled, design):
    """Stages 0-1 declare their tiles __shared__ (ptxas counts them); the wgmma stages ask for
    dynamic shared memory at launch (SMEM_BYTES, held to Design.smem_bytes above) and declare none."""
    kernels = [k for k in compiled[design.stage].kernels if tc.staircase_kernel(k.name)]
    assert kernels  # stage 6: one per tile width
    for kernel in kernels:
        assert kernel.static_smem_bytes == (0 if design.hopper else design.smem_bytes), kernel
