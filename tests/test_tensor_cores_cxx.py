"""The Python side of the tensor-core stages against the C++, by the compiler: every constant the
Python reads from course_lib/csrc by name, every shared-memory size it computes, and every formula it
models (the wgmma descriptors, the grouped tile order, the persistent grid, stage 6's stream-K rule)
is written out as a ``static_assert`` on the C++'s own constexpr and compiled with nvcc (front end
only: nothing is generated, no GPU needed). A C++ edit the model does not follow fails to compile."""

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
# (M, N, K, clusters): either side of 80 % busy and of 32 K-slices, one exactly at 80 % (4 tiles for 5
# clusters: not below it), the deep dive's shapes and the H200's 66 clusters.
SCHEDULES = [(4096, 4096, 4096, 66), (16, 4096, 4096, 66), (768, 2304, 16384, 66), (2048, 2304, 768, 66),
             (64, 14336, 4096, 66), (136, 14336, 4096, 66), (200, 4096, 31 * 64, 66), (200, 4096, 31 * 64 + 8, 66),
             (256, 512, 4096, 5), (256, 768, 4096, 5), (8192, 8192, 8192, 66), (1, 8, 8, 66), (128, 4096, 4096, 66),
             (129, 4096, 4096, 66)]


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


def _schedule_checks() -> list[str]:
    lines = []
    block_m, block_n, block_k = tc.DESIGN["tc_6_tma_store"].block
    for M, N, K, clusters in SCHEDULES:
        want = tc.stage6_schedule(M, N, K, clusters)
        lines.append(f"static_assert(tc::use_swapped({M}) == {'true' if want == 'swapped' else 'false'}, "
                     f"\"M = {M}: Python's stage6_schedule says {want}\");")
        if want == "swapped":
            continue
        tiles = layout.cdiv(layout.cdiv(M, block_m), tc.DESIGN["tc_6_tma_store"].cluster) * layout.cdiv(N, block_n)
        lines.append(f"static_assert(tc::stage6::use_stream_k({layout.cdiv(K, block_k)}, {tiles}, {clusters}) == "
                     f"{'true' if want == 'stream-K' else 'false'}, \"{M} x {N} x {K} on {clusters} clusters: "
                     f"Python's stage6_schedule says {want}\");")
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


@pytest.mark.parametrize("checks", [_constant_checks, _descriptor_checks, _order_checks, _schedule_checks],
                         ids=lambda f: f.__name__.strip("_"))
def test_the_cxx_is_what_the_python_model_says(tmp_path, checks):
    lines = checks()
    assert len(lines) >= 5
    proc = _compile_checks(tmp_path, lines)
    assert proc.returncode == 0, _failures(proc)


def test_a_wrong_expectation_fails_to_compile(tmp_path):
    """The checks can fail: a descriptor one slice off, and a constant off by one, are refused."""
    wrong = _descriptor_checks()[0].replace("_descriptor_at(0x8000u, 0)", "_descriptor_at(0x8000u, 1)")
    proc = _compile_checks(tmp_path, [wrong, 'static_assert(tc::stage6::THREADS == 385, "threads");'])
    assert proc.returncode != 0
    assert _failures(proc).count("static assertion failed") == 2, _failures(proc)


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
    (kernel,) = [k for k in compiled[design.stage].kernels if tc.staircase_kernel(k.name)]
    assert kernel.static_smem_bytes == (0 if design.hopper else design.smem_bytes), kernel
