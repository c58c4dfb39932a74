"""Traces of known kernels run under numba's CUDA simulator, fed into the coalescing and bank views."""

import numpy as np
import pytest
from numba import cuda, float32

from course_lib import backend
from course_lib.instruments import trace_kernel
from course_lib.viz.trace import trace_widget

pytestmark = pytest.mark.skipif(backend.get().is_gpu, reason="traces run on the CUDA simulator (CPU backend)")

TILE = 16


@cuda.jit
def copy_along_rows(a, out):
    x, y = cuda.grid(2)  # threadIdx.x runs along a row: neighbouring lanes, neighbouring addresses
    if y < a.shape[0] and x < a.shape[1]:
        out[y, x] = a[y, x]


@cuda.jit
def copy_down_columns(a, out):
    x, y = cuda.grid(2)  # threadIdx.x runs down a column: lanes N elements apart
    if x < a.shape[0] and y < a.shape[1]:
        out[x, y] = a[x, y]


@cuda.jit
def tiled_matmul(a, b, c):
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = float32(0.0)
    for t in range(a.shape[1] // TILE):
        sa[ty, tx] = a[row, t * TILE + tx]
        sb[tx, ty] = b[t * TILE + ty, col]  # stored transposed: a bank conflict on purpose
        cuda.syncthreads()
        for k in range(TILE):
            acc += sa[ty, k] * sb[tx, k]
        cuda.syncthreads()
    c[row, col] = acc


@cuda.jit
def two_shared_on_one_line(a, out):
    s1, s2 = cuda.shared.array(32, float32), cuda.shared.array(32, float32)
    i = cuda.threadIdx.x
    s1[i] = a[i]
    s2[i] = 2 * a[i]
    cuda.syncthreads()
    out[i] = s1[31 - i] + s2[i]


def test_coalesced_kernel_gives_4_sectors_per_warp_load():
    a = np.arange(4 * 32, dtype=np.float32).reshape(4, 32)
    out = np.zeros_like(a)
    tr = trace_kernel(copy_along_rows, (1, 1), (32, 4), a, out)
    np.testing.assert_array_equal(out, a)  # the kernel really ran
    loads = tr.requests(array="a", kind="load")
    assert len(loads) == 4  # 4 warps, one load each
    assert all(r.coalescing().n_sectors == 4 and r.coalescing().n_lines == 1 for r in loads)
    assert [r.warp for r in loads] == [0, 1, 2, 3]
    assert all(r.coalescing().n_sectors == 4 for r in tr.requests(array="out", kind="store"))


def test_strided_kernel_gives_32_sectors_per_warp_load():
    a = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    out = np.zeros_like(a)
    tr = trace_kernel(copy_down_columns, (1, 1), (32, 2), a, out)
    np.testing.assert_array_equal(out[:, :2], a[:, :2])
    loads = tr.requests(array="a", kind="load")
    assert len(loads) == 2 and all(r.coalescing().n_sectors == 32 for r in loads)
    assert loads[1].indices[:3] == ((0, 1), (1, 1), (2, 1))  # lane l read a[l, 1]
    summary = {(r["array"], r["kind"]): r for r in tr.summary()}
    assert summary[("a", "load")]["mean"] == 32 and summary[("a", "load")]["ideal"] == 4


def test_records_identify_thread_warp_lane_and_order():
    a = np.arange(2 * 64, dtype=np.float32).reshape(2, 64)
    out = np.zeros_like(a)
    tr = trace_kernel(copy_along_rows, (2, 1), (32, 2), a, out)
    seq = tr.thread_accesses(block=(1, 0), thread=(3, 1))
    assert [(x.kind, x.array, x.index) for x in seq] == [("load", "a", (1, 35)), ("store", "out", (1, 35))]
    assert [x.seq for x in seq] == [0, 1]
    first = seq[0]
    assert (first.tid, first.warp, first.lane) == (35, 1, 3)
    assert first.byte_offset == (1 * 64 + 35) * 4 and first.space == "global" and first.itemsize == 4
    assert first.line == copy_along_rows.py_func.__code__.co_firstlineno + 4


def test_bounds_check_leaves_lanes_inactive():
    a = np.arange(20, dtype=np.float32).reshape(1, 20)
    out = np.zeros_like(a)
    tr = trace_kernel(copy_along_rows, (1, 1), (32, 1), a, out)
    (load,) = tr.requests(array="a")
    assert list(load.lanes) == list(range(20))
    assert load.coalescing().n_sectors == 3  # 80 bytes


def test_shared_memory_trace_shows_the_bank_conflict_and_the_result_is_right():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((TILE, TILE)).astype(np.float32)
    b = rng.standard_normal((TILE, TILE)).astype(np.float32)
    c = np.zeros((TILE, TILE), np.float32)
    tr = trace_kernel(tiled_matmul, (1, 1), (TILE, TILE), a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    assert tr.arrays["sa"]["space"] == "shared" and tr.arrays["sb"]["shape"] == (TILE, TILE)
    degree = {(r["array"], r["kind"]): r["max"] for r in tr.summary() if r["space"] == "shared"}
    assert degree[("sa", "store")] == 1  # sa[ty, tx]: a warp = 2 rows of 16 consecutive words
    assert degree[("sb", "store")] == 8  # sb[tx, ty]: words 16*tx + ty -> 4 banks, 8 words each
    assert degree[("sa", "load")] == 1  # sa[ty, k]: 2 words, broadcast
    assert degree[("sb", "load")] == 8  # sb[tx, k]: the transposed read pays too
    store = tr.requests(array="sb", kind="store")[0]
    assert store.banks().conflict_degree == 8 and len(store.lanes) == 32
    assert len(tr.requests(array="sb", kind="load")) == 8 * TILE  # 8 warps x 16 steps of k


def test_two_shared_arrays_on_one_line_are_two_arrays():
    a = np.arange(32, dtype=np.float32)
    out = np.zeros_like(a)
    tr = trace_kernel(two_shared_on_one_line, 1, 32, a, out)
    np.testing.assert_array_equal(out, a[::-1] + 2 * a)
    assert {"s1", "s2"} <= set(tr.arrays)
    reversed_read = tr.requests(array="s1", kind="load")[0]
    assert list(reversed_read.byte_offsets) == [4 * (31 - l) for l in range(32)]
    assert reversed_read.banks().conflict_degree == 1


def test_device_arrays_are_traced_and_hold_the_result():
    a = np.arange(64, dtype=np.float32).reshape(2, 32)
    d_a, d_out = cuda.to_device(a), cuda.device_array_like(a)
    tr = trace_kernel(copy_along_rows, (1, 1), (32, 2), d_a, d_out, names=("x", "y"))
    np.testing.assert_array_equal(d_out.copy_to_host(), a)
    assert set(tr.arrays) == {"x", "y"} and len(tr.requests(array="x")) == 2


def test_trace_widget_changes_state_when_controls_change():
    a = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    tr = trace_kernel(copy_down_columns, (1, 1), (32, 2), a, np.zeros_like(a))
    box = trace_widget(tr)
    assert box.request.array == "a" and box.request.coalescing().n_sectors == 32
    assert box.controls["request"].max == 1
    picture = box.image.value
    assert picture[:4] == b"\x89PNG"
    box.controls["request"].value = 1
    assert box.image.value != picture  # the picture follows the controls
    assert box.request.warp == 1
    store_site = [v for _, v in box.controls["site"].options if v[2] == "store"][0]
    box.controls["site"].value = store_site
    assert box.request.kind == "store" and box.request.array == "out"
