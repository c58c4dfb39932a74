"""Stage 7's promotion, run on the CPU: which rows' scales a consumer thread reads and how it adds each
K slice's sums into fp32 (course_lib/csrc/tc_fp8.cuh, the code the kernel calls), compiled by nvcc
into a host program and checked element by element against the Python model of wgmma's accumulator
layout (course_lib.model.fragments) and the float64 sum.

The host program stands in for the tensor cores: for each slice it fills a thread's accumulators
with that slice's exact partial sums, at the (row, column) the Python model gives. Values are small
integers and scales powers of two, so every sum is exact and the comparison is equality. Then the
same check on copies of the header with bugs planted in it, each of which must be caught."""

import re
import subprocess

import numpy as np
import pytest

from course_lib import compiler
from course_lib.kernels import tensor_cores as tc
from course_lib.model import fragments, hardware

HEADER = tc.CSRC / "tc_fp8.cuh"
N = 128  # the promoting tile's width: 64 accumulators per thread
ACC = N // 2

PROGRAM = r"""
#include "tc_fp8.cuh"
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>
// stdin: M row0 k_slices blocks group first_grouped, scale_a[M][k_slices], scale_w[k_slices],
//        parts[k_slices][64][128] (each slice's exact sums for the warpgroup's 64 rows),
//        layout[128 threads][64][2] (row, column of accumulator i; the Python model's)
// stdout: per thread, total[0..63] and then the two rows whose scales it reads
int main() {
  int M, row0, k_slices, blocks, group, first_grouped;
  if (scanf("%d %d %d %d %d %d", &M, &row0, &k_slices, &blocks, &group, &first_grouped) != 6) return 2;
  std::vector<float> sa(size_t(M) * k_slices), sw(k_slices), parts(size_t(k_slices) * 64 * 128);
  std::vector<int> layout(128 * 64 * 2);
  for (auto& x : sa) scanf("%f", &x);
  for (auto& x : sw) scanf("%f", &x);
  for (auto& x : parts) scanf("%f", &x);
  for (auto& x : layout) scanf("%d", &x);
  const tc::fp8::Scales scales{sa.data(), sw.data(), 0, 0, k_slices};
  for (int t = 0; t < 128; ++t) {
    const int warp = t / 32, lane = t % 32;
    const tc::fp8::ThreadRows rows = tc::fp8::thread_rows(row0, warp, lane, M);
    float total[64], acc[64], acc1[64];
    const auto sums = [&](int ks, float (&d)[64]) {  // the tensor cores' part: slice ks's sums from zero
      for (int i = 0; i < 64; ++i) {
        const int r = layout[(t * 64 + i) * 2], c = layout[(t * 64 + i) * 2 + 1];
        d[i] = parts[(size_t(ks) * 64 + r) * 128 + c];
      }
    };
    const auto slice = [&](int ks) { sums(ks, acc); };
    // The overlapped sum's wgmmas, modelled as asynchronous: issuing fills the set with NaN, and the
    // sums land only when a wait retires the batch (all but the newest `in_flight`). Slots must be
    // freed once each, in order, and only once their batch has landed.
    std::vector<std::pair<int, float*>> running;
    int freed = 0;
    bool order_ok = true;
    const auto issue = [&](int ks, float (&d)[64]) {
      for (auto& x : d) x = NAN;
      running.push_back({ks, d});
      return ks;  // the token: the slot to free
    };
    const auto retire = [&](float (&)[64], int token, auto in_flight) {
      while (int(running.size()) > decltype(in_flight)::value) {
        float(&d)[64] = *reinterpret_cast<float(*)[64]>(running.front().second);
        sums(running.front().first, d);
        running.erase(running.begin());
      }
      for (auto& r : running) order_ok &= r.first != token;
      order_ok &= token == freed++;
    };
    const auto where = tc::fp8::block_scale_rows(scales, rows, 0);
#define SUM(B)                                                                                                \
  switch (group) {                                                                                            \
    case 0: tc::fp8::promoted_sum<B>(total, acc, k_slices, where, slice); freed = k_slices; break;            \
    case 2: tc::fp8::promoted_sum_overlapped<B, 2>(total, acc, acc1, k_slices, first_grouped, where, issue, issue, retire); break; \
    case 4: tc::fp8::promoted_sum_overlapped<B, 4>(total, acc, acc1, k_slices, first_grouped, where, issue, issue, retire); break; \
    default: return 3;                                                                                        \
  }
    if (blocks) { SUM(true) } else { SUM(false) }
    if (!order_ok || freed != k_slices || !running.empty()) return 4;
    for (int i = 0; i < 64; ++i) printf("%.17g\n", double(total[i]));  // every digit: compared exactly
    printf("%d %d\n", rows.lo, rows.hi);
  }
  return 0;
}
"""

# (what the bug is, text in tc_fp8.cuh, what it becomes)
PLANTED = [
    ("the second row's scales read from row g instead of g + 8", "+ (high ? 8 : 0)", "+ 0"),
    ("promotion skipped on the last K slice", "    promote<BLOCKS>(total, acc, scale_lo, scale_hi);",
     "    if (ks + 1 < k_slices) promote<BLOCKS>(total, acc, scale_lo, scale_hi);"),
    ("each slice scaled by the previous slice's scales", "next_w = scales.w[ks + 1];", "next_w = scales.w[ks];"),
    ("accumulators d2, d3 taken for the first row", "return i % 4 >= 2;", "return i % 4 >= 3;"),
    ("total not cleared for the tile", "for (int i = 0; i < R; ++i) total[i] = 0.f;", "for (int i = 0; i < R; ++i) total[i] = 1.f;"),
    ("rows past M not kept inside A", "min(row0 + fragment_row(warp, lane, true), M - 1)", "row0 + fragment_row(warp, lane, true)"),
]


def _build(tmp_path, header_text: str, name: str):
    if compiler.find_nvcc() is None:
        pytest.skip("nvcc not found")
    d = tmp_path / name
    d.mkdir()
    (d / "tc_fp8.cuh").write_text(header_text)
    (d / "main.cu").write_text(PROGRAM)
    exe = d / "promote"
    r = subprocess.run([str(compiler.find_nvcc()), "-std=c++17", "-O2", "-I", str(d), str(d / "main.cu"), "-o", str(exe)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return exe


def _problem(M: int, row0: int, k_slices: int, seed: int):
    rng = np.random.default_rng(seed)
    sa = 2.0 ** rng.integers(-3, 4, size=(M, k_slices))
    sw = 2.0 ** rng.integers(-3, 4, size=k_slices)
    parts = rng.integers(-50, 51, size=(k_slices, 64, N)).astype(np.float64)
    parts[:, max(0, M - row0):, :] = 0  # rows past M: TMA's zeros
    layout = np.array([[fragments.wgmma_m64nNk16_d(t, i, N) for i in range(ACC)] for t in range(hardware.WARPGROUP_SIZE)])
    return sa, sw, parts, layout


def _run(exe, M, row0, k_slices, blocks, sa, sw, parts, layout, group=0, first_grouped=0) -> np.ndarray:
    stdin = " ".join(map(str, (M, row0, k_slices, int(blocks), group, first_grouped))) + "\n" + "\n".join(
        " ".join(f"{x:.9g}" for x in a.ravel()) for a in (sa, sw, parts)) + "\n" + " ".join(map(str, layout.ravel()))
    r = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = np.array(r.stdout.split(), dtype=np.float64).reshape(hardware.WARPGROUP_SIZE, ACC + 2)
    return out[:, :ACC], out[:, ACC:].astype(int)


def _rows(M, row0) -> np.ndarray:
    """Each thread's two rows of C (the Python model), kept inside A."""
    rows = [[fragments.wgmma_m64nNk16_d(t, i, N)[0] for i in (0, 2)] for t in range(hardware.WARPGROUP_SIZE)]
    return np.minimum(row0 + np.array(rows), M - 1)


def _expected(M, row0, blocks, sa, sw, parts, layout) -> np.ndarray:
    rows, cols = layout[..., 0], layout[..., 1]
    sums = parts[:, rows, cols]  # k_slices x 128 x 64
    if blocks:
        scale = sa[np.minimum(row0 + rows, M - 1)].transpose(2, 0, 1) * sw[:, None, None]
        sums = sums * scale
    return sums.sum(axis=0)


def _stored(M, row0, layout) -> np.ndarray:
    """The elements the kernel stores: rows inside C."""
    return row0 + layout[..., 0] < M


CASES = [(64, 0, 3), (200, 128, 5), (100, 64, 1)]  # (M, row0, k slices): whole, the last rows past M, one slice


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("promote"), HEADER.read_text(), "as_written")


@pytest.mark.parametrize("blocks", [False, True], ids=["per tensor or row", "block scales"])
@pytest.mark.parametrize("M,row0,k_slices", CASES)
def test_every_thread_promotes_every_slice_with_its_rows_scales(program, M, row0, k_slices, blocks):
    sa, sw, parts, layout = _problem(M, row0, k_slices, seed=M + k_slices)
    got, rows = _run(program, M, row0, k_slices, blocks, sa, sw, parts, layout)
    want = _expected(M, row0, blocks, sa, sw, parts, layout)
    stored = _stored(M, row0, layout)
    assert np.array_equal(got[stored], want[stored])
    assert np.array_equal(rows, _rows(M, row0))


def test_the_thread_rows_are_the_accumulator_layouts():
    """thread_rows and on_high_row, compiled, against the Python model (the C++ reads no table)."""
    text = HEADER.read_text()
    assert re.search(r"return 16 \* warp \+ lane / 4 \+ \(high \? 8 : 0\);", text), "fragment_row changed: update this test"
    for t in range(hardware.WARPGROUP_SIZE):
        warp, lane = divmod(t, hardware.WARP_SIZE)
        for i in range(ACC):
            row, _ = fragments.wgmma_m64nNk16_d(t, i, N)
            high = i % 4 >= 2
            assert row == 16 * warp + lane // 4 + (8 if high else 0)


def _assert_caught(tmp_path, what, before, after, cases):
    """Plant a bug (``before`` -> ``after`` in tc_fp8.cuh): on one of ``cases`` - (M, row0, k slices, group,
    first_grouped, seed, exact) - the program must refuse, crash, or go wrong, per tensor or with blocks."""
    text = HEADER.read_text()
    assert text.count(before) == 1, f"tc_fp8.cuh no longer contains {before!r}: plant '{what}' afresh"
    exe = _build(tmp_path, text.replace(before, after), "planted")
    for blocks in (False, True):
        for M, row0, k_slices, group, first_grouped, seed, exact in cases:
            sa, sw, parts, layout = _problem(M, row0, k_slices, seed=seed)
            try:
                got, rows = _run(exe, M, row0, k_slices, blocks, sa, sw, parts, layout, group, first_grouped)
            except AssertionError:
                return  # refused (a slot freed out of order, a batch left running) or crashed: caught
            stored = _stored(M, row0, layout)
            want = _expected(M, row0, blocks, sa, sw, parts, layout)[stored]
            same = (np.array_equal(got[stored], want) if exact
                    else np.allclose(got[stored], want, rtol=1e-6, atol=1e-4))
            if not same or not np.array_equal(rows, _rows(M, row0)):
                return
    pytest.fail(f"planted bug not caught: {what}")


@pytest.mark.parametrize("what,before,after", PLANTED, ids=[p[0] for p in PLANTED])
def test_a_planted_bug_is_caught(tmp_path, what, before, after):
    _assert_caught(tmp_path, what, before, after,
                   [(M, row0, k_slices, 0, 0, M + k_slices, True) for M, row0, k_slices in CASES])


# promoted_sum_overlapped (the two-set experiment): groups of G slices after `first_grouped` single ones
OVERLAPPED = [(2, 0, 5), (2, 3, 9), (4, 0, 9), (4, 3, 12), (4, 2, 1), (4, 0, 3)]  # (G, first_grouped, k slices)

PLANTED_OVERLAPPED = [
    ("a set promoted before its wait", "    retire(acc, Pick<J>::from(tokens[0], tokens[1]), InFlight<(J + 1 < G ? 1 : 0)>{});\n"
     "    const auto& s = Pick<J>::from(sc[0], sc[1]);\n    promote<BLOCKS>(total, acc, s.lo, s.hi);",
     "    const auto& s = Pick<J>::from(sc[0], sc[1]);\n    promote<BLOCKS>(total, acc, s.lo, s.hi);\n"
     "    retire(acc, Pick<J>::from(tokens[0], tokens[1]), InFlight<(J + 1 < G ? 1 : 0)>{});"),
    ("the next slice issued into the set being promoted", "= issue(ks + J + 1, Pick<J + 1>::from(acc0, acc1));",
     "= issue(ks + J + 1, Pick<J>::from(acc0, acc1));"),
    ("the group's last wait leaves one batch running", "InFlight<(J + 1 < G ? 1 : 0)>", "InFlight<1>"),
    ("a slice's block scales taken for the next", "Pick<J + 1>::from(sc[0], sc[1]).load(scales, ks + J + 1);",
     "Pick<J + 1>::from(sc[0], sc[1]).load(scales, ks + J);"),
    ("the slices after the last group dropped", "  for (; ks < k_slices; ++ks) one(ks, issue);\n}", "}"),
]


@pytest.mark.parametrize("blocks", [False, True], ids=["per tensor or row", "block scales"])
@pytest.mark.parametrize("group,first_grouped,k_slices", OVERLAPPED)
def test_the_overlapped_sum_promotes_every_slice_once_after_its_wait(program, group, first_grouped, k_slices, blocks):
    M, row0 = 200, 128
    sa, sw, parts, layout = _problem(M, row0, k_slices, seed=group + k_slices)
    got, rows = _run(program, M, row0, k_slices, blocks, sa, sw, parts, layout, group, first_grouped)
    one_at_a_time, _ = _run(program, M, row0, k_slices, blocks, sa, sw, parts, layout)
    stored = _stored(M, row0, layout)
    assert np.array_equal(got[stored], one_at_a_time[stored])  # the same additions in the same order
    assert np.allclose(got[stored], _expected(M, row0, blocks, sa, sw, parts, layout)[stored], rtol=1e-6, atol=1e-4)
    assert np.array_equal(rows, _rows(M, row0))


@pytest.mark.parametrize("what,before,after", PLANTED_OVERLAPPED, ids=[p[0] for p in PLANTED_OVERLAPPED])
def test_a_planted_bug_in_the_overlapped_sum_is_caught(tmp_path, what, before, after):
    _assert_caught(tmp_path, what, before, after,
                   [(200, 128, k_slices, group, first, group + k_slices, False) for group, first, k_slices in OVERLAPPED])
