"""Stage 7's decode path, its arithmetic run on the CPU (course_lib/csrc/tc_fp8_decode.cuh, the code the
swapped kernel calls): where each accumulator of C^T = W A^T lies in C, which block scales each one takes,
how each K slice's sums are promoted, and which elements of C the epilogue writes with which scales.

nvcc compiles the header into a host program that stands in for the tensor cores: for each slice of a
range of K it fills a thread's accumulators with that slice's exact sums, at the (row, column) of the
64 x T tile of C^T that the Python model of wgmma's accumulator layout (course_lib.model.fragments)
gives. Values are small integers and scales powers of two, so every sum is exact and the comparison is
equality. The scales lie at the very end of readable memory (an unreadable page follows), so a scale
read past the end of its array - a token past M, a row of W past N - crashes the program. Then the same
checks on copies of the header with bugs planted in it, each of which must be caught."""

import itertools
import subprocess

import numpy as np
import pytest

from course_lib import compiler
from course_lib.kernels import tensor_cores as tc
from course_lib.model import fragments, hardware

HEADER = tc.CSRC / "tc_fp8_decode.cuh"
W_ROWS = 64  # rows of W per CTA: wgmma's M side (tc_decode.cuh's DECODE_COLS)
SLICE_K = 128  # K per slice and per block scale
MODES = {"fast": 0, "promoted": 1, "block": 2}  # per tensor or row: fast or promoted; block scales

PROGRAM = r"""
#include "tc_fp8_decode.cuh"
#include <cstdio>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

// n floats that end where an unreadable page begins: reading past the end crashes the program.
static float* at_the_end_of_memory(size_t n) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE)), bytes = n * sizeof(float);
  const size_t pages = (bytes + page - 1) / page + 1;
  char* base = static_cast<char*>(
      mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (base == MAP_FAILED || mprotect(base + (pages - 1) * page, page, PROT_NONE) != 0) return nullptr;
  return reinterpret_cast<float*>(base + (pages - 1) * page - bytes);
}

// stdin: T M N m0 n0 k_begin k_end mode a_step w_step k_blocks na nw, scale_a[na], scale_w[nw],
//        parts[k_end - k_begin][64][T] (each slice's exact sums for the tile of C^T),
//        layout[128][T / 2][2] (row of W, token of accumulator i: the Python model's)
// stdout: "m n value" for every element the epilogue stores
template <int T>
int run(int M, int N, int m0, int n0, int k_begin, int k_end, int mode, const tc::fp8::Scales& scales,
        const std::vector<float>& parts, const std::vector<int>& layout) {
  for (int t = 0; t < 128; ++t) {
    const int warp = t / 32, lane = t % 32;
    float acc[T / 2], total[T / 2];
    const auto slice = [&](int ks) {  // the tensor cores' part: slice ks's sums, from zero
      for (int i = 0; i < T / 2; ++i) {
        const int row = layout[(t * (T / 2) + i) * 2], token = layout[(t * (T / 2) + i) * 2 + 1];
        acc[i] = parts[(size_t(ks - k_begin) * 64 + row) * T + token];
      }
    };
    // every digit of the float (%.9g would round a value of 10 digits, and the comparison is exact)
    const auto store = [&](int m, int n, float v) { printf("%d %d %.17g\n", m, n, double(v)); };
    const int w_block = n0 / 128;  // as the kernel: its 64 rows of W lie in one block of 128
    if (mode == 0) {  // fast accumulation: the tensor cores add every slice into acc
      for (int i = 0; i < T / 2; ++i) total[i] = 0.f;
      for (int ks = k_begin; ks < k_end; ++ks) {
        slice(ks);
        for (int i = 0; i < T / 2; ++i) total[i] += acc[i];
      }
      tc::fp8::decode_epilogue<T, true>(total, scales, m0, n0, warp, lane, M, N, store);
    } else if (mode == 1) {
      tc::fp8::decode_promoted_sum<T, false>(total, acc, k_begin, k_end, scales, m0, lane, M, w_block, slice);
      tc::fp8::decode_epilogue<T, true>(total, scales, m0, n0, warp, lane, M, N, store);
    } else {
      tc::fp8::decode_promoted_sum<T, true>(total, acc, k_begin, k_end, scales, m0, lane, M, w_block, slice);
      tc::fp8::decode_epilogue<T, false>(total, scales, m0, n0, warp, lane, M, N, store);
    }
  }
  return 0;
}

int main() {
  int T, M, N, m0, n0, k_begin, k_end, mode, a_step, w_step, k_blocks, na, nw;
  if (scanf("%d %d %d %d %d %d %d %d %d %d %d %d %d", &T, &M, &N, &m0, &n0, &k_begin, &k_end, &mode, &a_step,
            &w_step, &k_blocks, &na, &nw) != 13)
    return 2;
  float* sa = at_the_end_of_memory(size_t(na));
  float* sw = at_the_end_of_memory(size_t(nw));
  if (sa == nullptr || sw == nullptr) return 3;
  std::vector<float> parts(size_t(k_end - k_begin) * 64 * T);
  std::vector<int> layout(size_t(128) * (T / 2) * 2);
  for (int i = 0; i < na; ++i) scanf("%f", &sa[i]);
  for (int i = 0; i < nw; ++i) scanf("%f", &sw[i]);
  for (auto& x : parts) scanf("%f", &x);
  for (auto& x : layout) scanf("%d", &x);
  const tc::fp8::Scales scales{sa, sw, a_step, w_step, k_blocks};
  switch (T) {
    case 16: return run<16>(M, N, m0, n0, k_begin, k_end, mode, scales, parts, layout);
    case 32: return run<32>(M, N, m0, n0, k_begin, k_end, mode, scales, parts, layout);
    case 64: return run<64>(M, N, m0, n0, k_begin, k_end, mode, scales, parts, layout);
    case 96: return run<96>(M, N, m0, n0, k_begin, k_end, mode, scales, parts, layout);
    case 128: return run<128>(M, N, m0, n0, k_begin, k_end, mode, scales, parts, layout);
  }
  return 4;
}
"""

# (T, M, m0, N, n0, k_begin, k_end, K): a CTA's tile and range of K. Tokens past M (M = 7 in a tile of
# 16, 33 in 64, 90 in 96, the third token tile of 300), rows of W past N (N = 40, the last 40 of N = 1000), a
# range that starts inside K (block scale columns 5-8 of 9) and ends in a partial slice, W's second
# and eighth block of 128 rows, one slice, and whole tiles.
CASES = [(16, 7, 0, 40, 0, 0, 3, 3 * SLICE_K - 48), (32, 32, 0, 1000, 192, 5, 9, 9 * SLICE_K - 112),
         (64, 33, 0, 1000, 960, 0, 1, 16), (96, 90, 0, 520, 448, 1, 3, 3 * SLICE_K - 8),
         (128, 300, 256, 136, 64, 1, 4, 4 * SLICE_K),
         (128, 128, 0, 4096, 4032, 2, 5, 8 * SLICE_K)]


def _build(tmp_path, header_text: str, name: str):
    nvcc = compiler.find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found (install the CUDA toolkit or `pip install nvidia-cuda-nvcc`)")
    d = tmp_path / name
    d.mkdir()
    (d / "tc_fp8_decode.cuh").write_text(header_text)
    (d / "tc_fp8.cuh").write_text((tc.CSRC / "tc_fp8.cuh").read_text())
    (d / "main.cu").write_text(PROGRAM)
    exe = d / "decode"
    r = subprocess.run([str(nvcc), "-std=c++17", "-O2", "-I", str(d), str(d / "main.cu"), "-o", str(exe)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return exe


def _problem(case, mode: str, seed: int):
    """The scales as the launcher passes them, each slice's exact sums for the tile (rows of A past M and
    of W past N are TMA's zeros), and the accumulator layout from the Python model."""
    T, M, m0, N, n0, k_begin, k_end, K = case
    rng = np.random.default_rng(seed)
    k_blocks = -(-K // SLICE_K)
    if mode == "block":
        sa, sw = 2.0 ** rng.integers(-3, 4, size=M * k_blocks), 2.0 ** rng.integers(-3, 4, size=-(-N // 128) * k_blocks)
        steps = (0, 0)
    else:  # per row, which also covers per tensor (a step of 0 reads element 0)
        sa, sw = 2.0 ** rng.integers(-3, 4, size=M), 2.0 ** rng.integers(-3, 4, size=N)
        steps = (1, 1)
    parts = rng.integers(-50, 51, size=(k_end - k_begin, W_ROWS, T)).astype(np.float64)
    parts[:, max(0, N - n0):, :] = 0
    parts[:, :, max(0, M - m0):] = 0
    layout = np.array([[fragments.wgmma_m64nNk16_d(t, i, T) for i in range(T // 2)]
                       for t in range(hardware.WARPGROUP_SIZE)])
    return sa, sw, steps, k_blocks, parts, layout


def _run(exe, case, mode, sa, sw, steps, k_blocks, parts, layout) -> dict:
    T, M, m0, N, n0, k_begin, k_end, _ = case
    head = (T, M, N, m0, n0, k_begin, k_end, MODES[mode], *steps, k_blocks, sa.size, sw.size)
    stdin = " ".join(map(str, head)) + "\n" + "\n".join(
        " ".join(f"{x:.9g}" for x in a.ravel()) for a in (sa, sw, parts)) + "\n" + " ".join(map(str, layout.ravel()))
    r = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"the program failed (return code {r.returncode}: a read past a scale array?) {r.stderr}"
    stores: dict = {}
    for line in r.stdout.splitlines():
        m, n, v = line.split()
        stores.setdefault((int(m), int(n)), []).append(float(v))
    return stores


def _expected(case, mode, sa, sw, k_blocks, parts) -> dict:
    """C's elements of the tile, from the float64 sums: every token inside M, every row of W inside N."""
    T, M, m0, N, n0, k_begin, k_end, _ = case
    out = {}
    for m, n in itertools.product(range(m0, min(m0 + T, M)), range(n0, min(n0 + W_ROWS, N))):
        slices = parts[:, n - n0, m - m0]
        if mode == "block":
            ks = np.arange(k_begin, k_end)
            out[(m, n)] = float(np.sum(slices * sa[m * k_blocks + ks] * sw[(n0 // 128) * k_blocks + ks]))
        else:
            out[(m, n)] = float(np.sum(slices) * (sa[m] * sw[n]))
    return out


def _wrong(stores: dict, expected: dict) -> list[str]:
    """What the program did that the kernel must not: an element written twice or not at all, written
    outside the tile's part of C, or with the wrong value."""
    wrong = [f"{k} written {len(v)} times" for k, v in stores.items() if len(v) != 1]
    wrong += [f"{k} never written" for k in expected.keys() - stores.keys()]
    wrong += [f"{k} written outside C's part of the tile" for k in stores.keys() - expected.keys()]
    wrong += [f"{k}: {stores[k][0]} instead of {expected[k]}" for k in expected.keys() & stores.keys()
              if stores[k][0] != expected[k]]
    return wrong


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("decode"), HEADER.read_text(), "as_written")


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("case", CASES, ids=lambda c: "T{}_M{}_m0{}_N{}_n0{}_k{}-{}".format(*c[:7]))
def test_every_thread_writes_its_sums_where_the_layout_puts_them(program, case, mode):
    sa, sw, steps, k_blocks, parts, layout = _problem(case, mode, seed=sum(case))
    stores = _run(program, case, mode, sa, sw, steps, k_blocks, parts, layout)
    wrong = _wrong(stores, _expected(case, mode, sa, sw, k_blocks, parts))
    assert not wrong, f"{len(wrong)} problems, e.g. " + "; ".join(wrong[:5])


def test_the_fragment_functions_are_the_accumulator_layout():
    """The formulas of decode_w_row and decode_token, as the header writes them (matched as text; the
    test above runs them), are the Python model's (row, column) of every accumulator for every token
    tile; decode_token_slot numbers each thread's T / 4 tokens 0 .. T/4 - 1, one number per token, and
    decode_slot_accumulator finds each one."""
    text = HEADER.read_text()
    assert "return 16 * warp + lane / 4 + (i % 4 >= 2 ? 8 : 0);" in text, "decode_w_row changed: update this test"
    assert "return 8 * (i / 4) + 2 * (lane % 4) + i % 2;" in text, "decode_token changed: update this test"
    for T in (16, 32, 64, 96, 128):
        for t in range(hardware.WARPGROUP_SIZE):
            warp, lane = divmod(t, hardware.WARP_SIZE)
            tokens = {}
            for i in range(T // 2):
                row, token = fragments.wgmma_m64nNk16_d(t, i, T)
                assert row == 16 * warp + lane // 4 + (8 if i % 4 >= 2 else 0), (T, t, i)
                assert token == 8 * (i // 4) + 2 * (lane % 4) + i % 2, (T, t, i)
                tokens.setdefault(2 * (i // 4) + i % 2, set()).add(token)  # decode_token_slot(i)
            assert sorted(tokens) == list(range(T // 4)) and all(len(v) == 1 for v in tokens.values())
            assert all(tokens[c] == {fragments.wgmma_m64nNk16_d(t, c // 2 * 4 + c % 2, T)[1]} for c in tokens)


# (what the bug is, text in tc_fp8_decode.cuh, what it becomes)
PLANTED = [
    ("the second row of W taken for accumulators 1 and 3", "(i % 4 >= 2 ? 8 : 0)", "(i % 2 ? 8 : 0)"),
    ("tokens counted by lane / 4 instead of lane % 4", "2 * (lane % 4) + i % 2", "2 * (lane / 4 % 4) + i % 2"),
    ("accumulator i scaled by the scale of token i / 2", "return 2 * (i / 4) + i % 2;", "return i / 2;"),
    ("promotion skipped on the last slice of the range", "    decode_promote<BLOCKS>(total, acc, scale);",
     "    if (ks + 1 < k_end) decode_promote<BLOCKS>(total, acc, scale);"),
    ("each slice scaled by the previous slice's block scales",
     "decode_block_scales<T>(scale_a, scale_w, s, m0, lane, M, w_block, ks + 1);",
     "decode_block_scales<T>(scale_a, scale_w, s, m0, lane, M, w_block, ks);"),
    ("tokens past M read their own (missing) block scales",
     "const int m = min(m0 + decode_token(lane, decode_slot_accumulator(c)), M - 1);",
     "const int m = m0 + decode_token(lane, decode_slot_accumulator(c));"),
    ("tokens past M read their own (missing) per-row scales",
     "s.a[size_t(min(m0 + decode_token(lane, decode_slot_accumulator(c)), M - 1)) * s.a_step]",
     "s.a[size_t(m0 + decode_token(lane, decode_slot_accumulator(c))) * s.a_step]"),
    ("rows of W past N written", "if (m < M && n < N) store(", "if (m < M) store("),
    ("tokens past M written", "if (m < M && n < N) store(", "if (n < N) store("),
    ("the second row of W scaled by the first row's scale", "sw[i % 4 / 2]", "sw[0]"),
    ("rows of W past N read their own (missing) per-row scales", "min(n0 + decode_w_row(warp, lane, 2 * h), N - 1)",
     "n0 + decode_w_row(warp, lane, 2 * h)"),
]


@pytest.mark.parametrize("what,before,after", PLANTED, ids=[p[0] for p in PLANTED])
def test_a_planted_bug_is_caught(tmp_path, what, before, after):
    text = HEADER.read_text()
    assert text.count(before) == 1, f"tc_fp8_decode.cuh no longer contains {before!r}: plant '{what}' afresh"
    exe = _build(tmp_path, text.replace(before, after), "planted")
    caught = []
    for case, mode in itertools.product(CASES, MODES):
        sa, sw, steps, k_blocks, parts, layout = _problem(case, mode, seed=sum(case))
        try:
            stores = _run(exe, case, mode, sa, sw, steps, k_blocks, parts, layout)
        except AssertionError:
            caught.append((case, mode, "crashed"))
            continue
        if _wrong(stores, _expected(case, mode, sa, sw, k_blocks, parts)):
            caught.append((case, mode, "wrong C"))
    assert caught, f"planted bug not caught: {what}"
