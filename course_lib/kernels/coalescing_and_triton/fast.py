"""Stage ``triton_fast``: the tiled GEMM with what the GPU rewards - its kernels, top to bottom.

* grouped launch order: programs that run at the same time share blocks of A and B in L2;
* tensor descriptors (TMA on Hopper) where the three matrices meet the alignment rules, masked
  pointer loads where they do not;
* large tiles and several K-slices in flight (``num_stages``) for the tensor cores;
* a persistent launch for the 16-bit types and TF32: one program per SM walks the tiles;
* for TF32, B^T: Hopper's TF32 tensor-core instruction reads both operands K-major.

One kernel per way of launching, each written out whole, top to bottom - descriptors, which tile,
the mainloop over K, the epilogue - as Triton's persistent-matmul tutorial writes separate kernels
rather than one kernel with switches: :func:`fast_matmul_kernel` (descriptors, one program per
tile), :func:`persistent_matmul_kernel` (the same tile in a loop, one program per SM),
:func:`split_k_matmul_kernel` (one program per tile and range of K) and
:func:`grouped_matmul_kernel` (pointers and masks, where a matrix breaks TMA's rules). The one
helper they share is :func:`grouped_tile`, the order in which programs take the tiles. Last,
:func:`transpose_kernel`, which copies B^T for the configurations that read B K-major.

This file holds the kernels only. Their configurations (tile sizes, warps, pipeline depth per dtype,
and why) are in :mod:`.fast_configs`; what launches them - the wrapper ``fast_matmul``, the launch
plan, split-K's workspace, the transpose's launch - in :mod:`.fast_launch`.
"""

from __future__ import annotations

import triton
import triton.language as tl

from course_lib.kernels.coalescing_and_triton.tiled import matmul_tile_masked


@triton.jit
def grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of the tile that program ``tile_id`` computes, in grouped order.

    Tiles are numbered column by column inside bands of GROUP_M tile rows: programs that run at
    the same time share a few block-rows of A and block-columns of B, which then stay in L2.
    """
    tiles_per_band = GROUP_M * num_pid_n
    band = tile_id // tiles_per_band
    first_m = band * GROUP_M
    band_rows = tl.minimum(num_pid_m - first_m, GROUP_M)  # the last band may be shorter
    pid_m = first_m + (tile_id % tiles_per_band) % band_rows
    pid_n = (tile_id % tiles_per_band) // band_rows
    return pid_m, pid_n


@triton.jit
def fast_matmul_kernel(
    # Tensor descriptors of A (BLOCK_M x BLOCK_K boxes), of B (BLOCK_K x BLOCK_N boxes; with
    # B_K_MAJOR, of B^T in BLOCK_N x BLOCK_K boxes) and of C (BLOCK_M x BLOCK_N / C_STORE_SPLIT)
    a_desc, b_desc, c_desc,
    # Matrix dimensions
    M, N, K,
    # Meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    B_K_MAJOR: tl.constexpr, C_STORE_SPLIT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
):
    # ---- descriptors: made on the host, one per matrix (fast_launch.FastPlan) --------------------
    # A descriptor made inside the kernel (tl.make_tensor_descriptor) is built by every program and
    # must reach global memory before the program's first load: three round trips before any data
    # moves, 1.5-3.5 us of a 256^3-1024^3 launch on an H100 (experiments/JOURNAL.md, "descriptors made
    # on the host").

    # ---- which tile: one program per tile, on a 1-D grid in grouped order ------------------------
    pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    row0 = pid_m * BLOCK_M
    col0 = pid_n * BLOCK_N

    # ---- mainloop: walk along K, accumulating in fp32 --------------------------------------------
    # Slices past K are read as zeros (the descriptor fills them).
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = a_desc.load([row0, k0])
        if B_K_MAJOR:
            b = b_desc.load([col0, k0]).T  # a K-major tile of B^T, seen as BLOCK_K x BLOCK_N
        else:
            b = b_desc.load([k0, col0])
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)

    # ---- epilogue: round to C's type and store (the descriptor clips at C's edges) ---------------
    c = acc.to(c_desc.dtype)
    if C_STORE_SPLIT == 2:
        # Two BLOCK_M x BLOCK_N/2 stores: the staging buffer in shared memory is half the size,
        # which leaves room for one more pipeline stage with 128 x 256 tiles, or for one more
        # program per SM with fp32's 64 x 64 tiles.
        halves = tl.permute(tl.reshape(c, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
        left, right = tl.split(halves)
        c_desc.store([row0, col0], left)
        c_desc.store([row0, col0 + BLOCK_N // 2], right)
    else:
        c_desc.store([row0, col0], c)


@triton.jit
def persistent_matmul_kernel(
    a_desc, b_desc, c_desc,
    M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    B_K_MAJOR: tl.constexpr, C_STORE_SPLIT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
):
    # fast_matmul_kernel's tile, inside a loop over tiles: one program per SM computes tiles
    # pid, pid + P, pid + 2P, ... of the grouped order (P programs). Its descriptors as there.

    # ---- the loop over this program's tiles ------------------------------------------------------
    # flatten=True makes the tile loop and the K loop one loop, so that the compiler can start
    # loading the next tile while the current one is being stored.
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    for tile_id in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), flatten=True):
        pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
        row0 = pid_m * BLOCK_M
        col0 = pid_n * BLOCK_N

        # ---- mainloop ----------------------------------------------------------------------------
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            a = a_desc.load([row0, k0])
            if B_K_MAJOR:
                b = b_desc.load([col0, k0]).T  # a K-major tile of B^T, seen as BLOCK_K x BLOCK_N
            else:
                b = b_desc.load([k0, col0])
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)

        # ---- epilogue (C in halves: see fast_matmul_kernel) --------------------------------------
        c = acc.to(c_desc.dtype)
        if C_STORE_SPLIT == 2:
            halves = tl.permute(tl.reshape(c, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            left, right = tl.split(halves)
            c_desc.store([row0, col0], left)
            c_desc.store([row0, col0 + BLOCK_N // 2], right)
        else:
            c_desc.store([row0, col0], c)


# ---- split-K: when C has too few tiles to give every SM one --------------------------------------
# A 768 x 2304 C (the weight gradient of a GPT-2 projection, K = 16384 tokens) is 54 tiles of
# 128 x 256: one program per tile leaves 78 of the H200's 132 SMs idle for the whole run. Split-K
# cuts K into SPLIT_K ranges and gives each (tile, range) its own program: SPLIT_K times as many
# programs, each with a SPLIT_K-th of the work. Each writes its fp32 partial sums to a workspace
# and counts itself done on the tile's counter; the last of a tile's programs to arrive adds the
# SPLIT_K partials, in the order of their ranges (the same sum whatever the arrival order), rounds
# once to C's type and stores the tile. One launch, no second kernel to wait for.
@triton.jit
def split_k_matmul_kernel(
    a_desc, b_desc, c_ptr, partial_ptr, counter_ptr,
    M, N, K,
    stride_cm, stride_cn,
    K_PER_SPLIT,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr, B_K_MAJOR: tl.constexpr, INPUT_PRECISION: tl.constexpr,
):
    # Descriptors of A and B as fast_matmul_kernel's; the last program of a tile stores C through
    # pointers.

    # ---- which tile and which range of K ---------------------------------------------------------
    # Program (tile, split) on a 2-D grid: axis 0 the tile in grouped order, axis 1 its range of K.
    tile = tl.program_id(0)
    pid_m, pid_n = grouped_tile(tile, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    split = tl.program_id(1)
    k_begin = split * K_PER_SPLIT  # K_PER_SPLIT is a multiple of BLOCK_K
    k_end = tl.minimum(k_begin + K_PER_SPLIT, K)
    row0 = pid_m * BLOCK_M
    col0 = pid_n * BLOCK_N

    # ---- mainloop over this program's range of K -------------------------------------------------
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_begin, k_end, BLOCK_K):
        a = a_desc.load([row0, k0])
        if B_K_MAJOR:
            b = b_desc.load([col0, k0]).T  # a K-major tile of B^T, seen as BLOCK_K x BLOCK_N
        else:
            b = b_desc.load([k0, col0])
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)

    # ---- partial sums: split s writes plane s of the workspace, a (SPLIT_K, M, N) fp32 array -----
    rows = row0 + tl.arange(0, BLOCK_M)
    cols = col0 + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    in_plane = rows[:, None] * N + cols[None, :]
    tl.store(partial_ptr + split.to(tl.int64) * M * N + in_plane, acc, mask=mask)

    # ---- count in; the last program of the tile adds the partials and stores C -------------------
    # Every thread's stores come before the count; the count is a release (our partials are visible
    # to whoever reads the count after us) and an acquire (we see the partials of all before us).
    tl.debug_barrier()
    arrived = tl.atomic_add(counter_ptr + tile, 1, sem="acq_rel", scope="gpu")
    if arrived == SPLIT_K - 1:  # the last of this tile's programs
        total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for s in tl.static_range(SPLIT_K):
            # .cg reads from L2: another SM wrote these, this SM's L1 may hold nothing newer.
            total += tl.load(partial_ptr + s * M * N + in_plane, mask=mask, other=0.0,
                             cache_modifier=".cg")
        tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn,
                 total.to(c_ptr.dtype.element_ty), mask=mask)
        tl.atomic_xchg(counter_ptr + tile, 0, sem="relaxed", scope="gpu")  # ready for the next one


@triton.jit
def grouped_matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
):
    # Where a matrix breaks TMA's rules: notebook 04's tile (pointers and masks, any strides, any
    # alignment; its K loop is in matmul_tile_masked, shown there), one program per tile in grouped order.
    pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    matmul_tile_masked(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                       stride_cn, pid_m, pid_n, BLOCK_M, BLOCK_N, BLOCK_K, INPUT_PRECISION)


# ---- B^T for TF32: a transpose at memory speed ----------------------------------------------------
# torch's b.T.contiguous() reads B along columns or writes B^T along columns. The kernel below reads
# a tile along B's rows and writes it along B^T's rows - both coalesced; Triton turns the tile
# around in shared memory.
@triton.jit
def transpose_kernel(src_ptr, dst_ptr, R, C, stride_sr, stride_sc, stride_dr,
                     BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """dst (C x R, row-major) = src (R x C)^T, one BLOCK_R x BLOCK_C tile of src per program."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    tile = tl.load(src_ptr + rows[:, None] * stride_sr + cols[None, :] * stride_sc,
                   mask=(rows[:, None] < R) & (cols[None, :] < C))
    tl.store(dst_ptr + cols[:, None] * stride_dr + rows[None, :], tl.trans(tile),
             mask=(cols[:, None] < C) & (rows[None, :] < R))
