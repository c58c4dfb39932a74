"""A pure-Python model of the address and schedule arithmetic the tensor-core kernels rely on.

These functions restate, element by element, what the kernels and the hardware do, so that the tests
can check on a machine without a GPU that what TMA writes is what wgmma reads (descriptors, the
canonical layouts), that stage 6's epilogue stores every accumulator where the TMA store reads it
(stmatrix), and that the persistent stages' schedules cover every tile and K slice once.

The numbers the model shares with the kernels are read by name from the C++ (:mod:`.csrc`): the
descriptors' strides from ``tc_hopper.cuh``, stage 6's tiles and the thresholds of its plan from
``tc_6_tma_store.cu``. What is the hardware's or every persistent kernel's, not one kernel's (the
128-byte swizzle, fragment layouts, waves, the grouped tile order, stream-K's work units), comes from
:mod:`course_lib.model`. The C++ functions that compute the same things (``a_descriptor_at``, ``GroupedTiles::locate``,
stage 6's ``plan`` ...) are held to this model by a test that compiles ``static_assert``s.
"""

from __future__ import annotations

from typing import NamedTuple

from course_lib.kernels.tensor_cores import csrc
from course_lib.model.fragments import MMA_SHAPES, mma_m16n8k16, wgmma_m64nNk16_d
from course_lib.model.hardware import BF16_BYTES, WARP_SIZE
from course_lib.model.layout import SWIZZLE_ROW, cdiv, swizzle_128b
from course_lib.model.schedules import stream_k_contributors
from course_lib.model.waves import whole_tile_efficiency

WGMMA_K = 16  # K of one wgmma.m64nNk16 for 16-bit inputs (PTX ISA 9.7.15.5)

# ---- stage 0's fragments -------------------------------------------------------------------------
# Stage 0 loads A and B and stores C with a_row ... c_col (tc_0_mma_sync_minimal.cu), which are the
# PTX ISA's fragment layout of mma.m16n8k16: the same function serves the notebook and the tests,
# which hold the .cu's formulas to it (read from the source and compiled for the CPU).
tc0_fragment_position = mma_m16n8k16
TC0_ELEMENTS = {op: MMA_SHAPES[op][2] for op in ("A", "B", "C")}  # register elements per lane


# ---- wgmma's shared-memory matrix descriptors (PTX ISA 9.7.15.5.1.2.2) ------------------------------
def descriptor_encode(x: int) -> int:
    return (x & 0x3FFFF) >> 4


def make_descriptor(start: int, lbo: int, sbo: int, swizzle_mode: int = 1, base_offset: int = 0) -> int:
    """A wgmma shared-memory matrix descriptor: bits 0-13 start >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4,
    49-51 base offset, 62-63 swizzle mode (1 = 128-byte swizzle)."""
    return (
        descriptor_encode(start)
        | descriptor_encode(lbo) << 16
        | descriptor_encode(sbo) << 32
        | (base_offset & 0x7) << 49
        | (swizzle_mode & 0x3) << 62
    )


def decode_descriptor(desc: int) -> dict[str, int]:
    return {
        "start": (desc & 0x3FFF) << 4,
        "lbo": ((desc >> 16) & 0x3FFF) << 4,
        "sbo": ((desc >> 32) & 0x3FFF) << 4,
        "base_offset": (desc >> 49) & 0x7,
        "swizzle_mode": (desc >> 62) & 0x3,
    }


# The descriptor fields the kernels use, read from tc_hopper.cuh. A, K-major: LBO unused ("assumed
# 1"), SBO = the next 8 rows. B, N-major: LBO = the next 64 columns (the next box), SBO = the next 8 k.
A_LBO, A_SBO, B_LBO, B_SBO = (csrc.constant("tc_hopper.cuh", n) for n in ("A_LBO", "A_SBO", "B_LBO", "B_SBO"))


def a_descriptor(tile_base: int, warpgroup_row0: int, k16: int) -> int:
    """Descriptor for a 64 x 16 slice of a K-major A tile with 128-byte rows (as in the kernels):
    the slice of k = 16 k16 .. 16 k16 + 15 starts 16 k16 elements into the warpgroup's first row."""
    return make_descriptor(tile_base + warpgroup_row0 * SWIZZLE_ROW + k16 * WGMMA_K * BF16_BYTES, A_LBO, A_SBO)


def b_descriptor(tile_base: int, k16: int) -> int:
    """Descriptor for a 16 x N slice of an N-major B tile stored as 64 x 64 boxes (as in the
    kernels): the slice starts 16 k16 rows of 128 bytes into the first box."""
    return make_descriptor(tile_base + k16 * WGMMA_K * SWIZZLE_ROW, B_LBO, B_SBO)


def wgmma_k_major_address(desc: int, row: int, k: int) -> int:
    """Where wgmma reads element (row, k) of a K-major 128B-swizzled operand described by ``desc``:
    canonical layout ((8,m),(T,2k)):((8T,SBO),(1,T)) (PTX ISA 9.7.15.5.1.2.1.3), in bytes, then
    the swizzle applied to the address."""
    d = decode_descriptor(desc)
    assert d["swizzle_mode"] == 1 and 0 <= k < WGMMA_K
    linear = d["start"] + (row // 8) * d["sbo"] + (row % 8) * SWIZZLE_ROW + k * BF16_BYTES
    return swizzle_128b(linear)


def wgmma_mn_major_address(desc: int, n: int, k: int) -> int:
    """Where wgmma reads element (k, n) of an MN-major 128B-swizzled operand: canonical layout
    ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)) in units of elements, T = 8 for bf16."""
    d = decode_descriptor(desc)
    assert d["swizzle_mode"] == 1 and 0 <= k < WGMMA_K
    linear = d["start"] + (n % 64) * BF16_BYTES + (n // 64) * d["lbo"] + (k % 8) * SWIZZLE_ROW + (k // 8) * d["sbo"]
    return swizzle_128b(linear)


# (row, column) of accumulator d[i] of thread ``thread`` of a warpgroup for m64nNk16 (PTX ISA
# 9.7.15.5.1.1, matrix D): the layout of course_lib.model.fragments, called as the kernels' comments do.
wgmma_accumulator_position = wgmma_m64nNk16_d


# ---- stage 6's epilogue: stmatrix into swizzled staging boxes ----------------------------------------
def stmatrix_staging_address(thread: int, j: int) -> int:
    """Byte offset (within one consumer's staging buffer of 64 x 64 boxes) of the row that lane
    ``thread % 32`` addresses for stmatrix number ``j`` (16 columns each) - as in tc_6_tma_store.cu."""
    warp, lane = divmod(thread, WARP_SIZE)
    row = warp * 16 + ((lane // 8) % 2) * 8 + lane % 8
    col = j * 16 + (lane // 16) * 8
    box, chunk = divmod(col, 64)
    return box * 64 * 64 * BF16_BYTES + row * SWIZZLE_ROW + ((chunk // 8) ^ (row % 8)) * 16


def stmatrix_fragment_position(lane: int, matrix: int, element: int) -> tuple[int, int]:
    """(row, column) within 8x8 matrix ``matrix`` of the bf16 ``element`` (0 or 1) that lane
    ``lane`` supplies to stmatrix (the ldmatrix/mma fragment: row lane/4, columns 2*(lane%4)+e)."""
    return lane // 4, 2 * (lane % 4) + element


# ---- stage 6's plan: its tile and its schedule -----------------------------------------------------
# Stage 6's constexprs (its two tiles, cluster and thresholds), read from tc_6_tma_store.cu: the 128 x 128
# tile below NARROW_TILE_BELOW of the 128 x 256 tiles' whole-tile efficiency when K is short; stream-K
# below STREAM_K_BELOW of the chosen tile's, for K of at least STREAM_K_MIN_SLICES slices. The codes the
# launcher takes (SCHEDULE_*, TILE_AUTO) are tc_launch.h's.
STAGE6 = csrc.constants("tc_6_tma_store.cu")
STREAM_K_BELOW = STAGE6["STREAM_K_BELOW"]
STREAM_K_MIN_SLICES = STAGE6["STREAM_K_MIN_SLICES"]
NARROW_TILE_BELOW = STAGE6["NARROW_TILE_BELOW"]


DECODE_MAX_M = STAGE6["DECODE_MAX_M"]
SCHEDULE_CODES = {name: STAGE6[f"SCHEDULE_{code}"] for name, code in
                  (("auto", "AUTO"), ("whole tiles", "WHOLE_TILES"), ("stream-K", "STREAM_K"), ("swapped", "SWAPPED"))}
TILE_AUTO = STAGE6["TILE_AUTO"]


def schedule_code(schedule: str) -> int:
    """The extension's code (tc_launch.h's SCHEDULE_*) of a schedule named as in SCHEDULE_CODES."""
    if schedule not in SCHEDULE_CODES:
        raise ValueError(f"schedule must be one of {', '.join(map(repr, SCHEDULE_CODES))}, not {schedule!r}")
    return SCHEDULE_CODES[schedule]


STAGE6_TILES = {f"{STAGE6['BLOCK_M']}x{bn}": bn
                for bn in (STAGE6["BLOCK_N"], STAGE6["NARROW_BLOCK_N"], STAGE6["NARROWEST_BLOCK_N"])}  # name -> width


def stage6_epilogue_rounds(block_n: int) -> tuple[int, int]:
    """(columns of C staged per round, rounds) of stage 6's epilogue for a 128 x ``block_n`` tile
    (Smem's HALF_COLS and ROUNDS in tc_6_tma_store.cu): half the tile's columns per round, in two
    rounds; the 128 x 64 tile, one 64 x 64 box, in one."""
    cols = STAGE6["C_BOX"] if block_n == STAGE6["NARROWEST_BLOCK_N"] else block_n // 2
    return cols, block_n // cols


class Stage6Plan(NamedTuple):
    """What stage 6's launcher runs at one shape: the piece of C a CTA computes, as "rows x columns"
    ("128x256", "128x128", or "16x64" ... "128x64" for the swapped schedule's token tile of T rows and
    64 columns), and the schedule ("whole tiles", "stream-K", "swapped")."""

    tile: str
    schedule: str


def stage6_cluster_tiles(M: int, N: int, block_n: int) -> int:
    """Stage 6's cluster tiles at M x N with 128 x ``block_n`` tiles (tc_6_tma_store.cu, cluster_tiles)."""
    return cdiv(cdiv(M, STAGE6["BLOCK_M"]), STAGE6["CLUSTER"]) * cdiv(N, block_n)


def stage6_plan(M: int, N: int, K: int, clusters: int = 66, *, block_n: int = TILE_AUTO,
                schedule: str = "auto") -> Stage6Plan:
    """How stage 6 covers an M x N x K product with ``clusters`` resident 2-CTA clusters (66 on the
    H200), as its launcher does (``plan`` in tc_6_tma_store.cu, held to this by a test that compiles
    both): "swapped" for M <= DECODE_MAX_M (C^T = B^T A^T, token tiles of 16, 32, 64, 96 or 128 rows); else the
    128 x 128 tile where whole 128 x 256 tiles keep the clusters less than NARROW_TILE_BELOW busy, and
    the 128 x 64 tile where 128 x 128 tiles do too and K has fewer than STREAM_K_MIN_SLICES slices,
    the 128 x 256 tile otherwise; then "stream-K" where whole tiles of that size keep them less than
    STREAM_K_BELOW busy and K has at least STREAM_K_MIN_SLICES slices, "whole tiles" otherwise.
    ``block_n`` (256, 128 or 64) and ``schedule`` (one of SCHEDULE_CODES) force a choice, as the
    extension's arguments of those names do. A swapped plan's tile "128x64" is 128 tokens x 64
    columns of C, not the 128 x 64 tile: read it with its schedule."""
    c = STAGE6
    schedule_code(schedule)  # a ValueError for a name it does not know
    if block_n != TILE_AUTO and block_n not in STAGE6_TILES.values():
        raise ValueError(f"block_n must be {TILE_AUTO} (by the shape) or one of "
                         f"{sorted(STAGE6_TILES.values())}, not {block_n!r}")
    if schedule == "swapped" or (schedule == "auto" and M <= DECODE_MAX_M):
        token_tile = next((t for t in (16, 32, 64, 96) if M <= t), DECODE_MAX_M)
        return Stage6Plan(f"{token_tile}x{c['DECODE_COLS']}", "swapped")
    long_k = cdiv(K, c["BLOCK_K"]) >= STREAM_K_MIN_SLICES
    if block_n == TILE_AUTO:  # the widest tile that keeps half the clusters busy; 128 x 128 at most if K is long
        block_n = c["BLOCK_N"]
        for narrower in (c["NARROW_BLOCK_N"], c["NARROWEST_BLOCK_N"]):
            if whole_tile_efficiency(stage6_cluster_tiles(M, N, block_n), clusters) >= NARROW_TILE_BELOW or (
                    long_k and block_n == c["NARROW_BLOCK_N"]):
                break
            block_n = narrower
    few = whole_tile_efficiency(stage6_cluster_tiles(M, N, block_n), clusters) < STREAM_K_BELOW
    split = schedule == "stream-K" or (schedule == "auto" and few and long_k)
    return Stage6Plan(f"{c['BLOCK_M']}x{block_n}", "stream-K" if split else "whole tiles")


def stage6_schedule(M: int, N: int, K: int, clusters: int = 66) -> str:
    """Stage 6's schedule at M x N x K by the shape: "swapped", "whole tiles" or "stream-K" (the
    schedule of :func:`stage6_plan`, which also gives the tile)."""
    return stage6_plan(M, N, K, clusters).schedule


# ---- stream-K's fix-up across launches: the flags ------------------------------------------------------
# A contributor raises its flag once its partial sums are written; the owner waits for it, empties it
# and adds the sums (tc_stream_k.cuh). The model plays whole launches - eager calls, replays of one
# captured CUDA graph, launches on two streams at once - one step of one cluster at a time in any
# order the GPU could take, and reports every partial sum an owner added that its own launch did
# not write. ``protocol`` "reset" is the kernels': the first warp's FLAG_READY lanes raise the flag by
# one atomic add each, a step of its own each. "lane stores" is the same with every lane storing
# FLAG_READY (how many writes that makes, the CUDA guide leaves open: the model plays one per lane).
# "launch number" is the protocol they replaced, whose flags held the number of the launch that wrote
# the slot, passed as a kernel argument.
FLAG_EMPTY = csrc.constant("tc_stream_k.cuh", "FLAG_EMPTY")
FLAG_READY = csrc.constant("tc_stream_k.cuh", "FLAG_READY")


def _fixup_programs(work: list[list[tuple[int, int, int]]], slices: int, launch: str, number: int,
                    buffer: dict, protocol: str) -> list[list[tuple]]:
    """Each cluster's steps in one launch: ("write", cluster) then ("raise", cluster) - one per lane of
    the raising warp, FLAG_READY of them, but for "launch number" - for a contributor, ("wait",
    contributor) then ("add", contributor) per contributor for an owner."""
    lanes = 1 if protocol == "launch number" else FLAG_READY
    clusters = len(work)
    tiles = max((t for units in work for t, _, _ in units), default=-1) + 1
    programs = []
    for c, units in enumerate(work):
        steps = []
        for tile, k0, k1 in units:
            if k0 > 0:
                steps += [("write", c, launch, buffer)] + [("raise", c, number, buffer)] * lanes
            elif k1 < slices:
                for other in stream_k_contributors(tiles, clusters, slices, c, tile):
                    steps += [("wait", other, number, buffer), ("add", other, launch, buffer)]
        programs.append(steps)
    return programs


def fixup_stale_reads(work: list[list[tuple[int, int, int]]], slices: int, launches: list[tuple[str, int, dict]],
                      protocol: str = "reset", rng=None) -> list[str]:
    """Run ``launches`` - (name, launch number as the kernel sees it, buffer) each, where a buffer is a
    dict of slots and flags that launches may share - with their clusters' steps interleaved by
    ``rng`` (``random.Random``; None: every owner as early as it may go). Launches that share a buffer
    without running at once must be listed in separate calls (a stream runs them one after another).
    Returns what went wrong: an owner adding a slot another launch wrote, or a launch that never ends
    (an owner waiting for a flag no one raises), or a flag left raised at the end."""
    programs = [(name, p) for name, number, buf in launches
                for p in _fixup_programs(work, slices, name, number, buf, protocol)]
    pos = [0] * len(programs)
    wrong: list[str] = []

    def ready(step) -> bool:
        kind, other, number, buf = step
        if kind != "wait":
            return True
        flag = buf["flags"].get(other, FLAG_EMPTY)
        return flag == number if protocol == "launch number" else flag == FLAG_READY

    while True:
        runnable = [i for i, (_, p) in enumerate(programs) if pos[i] < len(p) and ready(p[pos[i]])]
        if not runnable:
            break
        if rng is None:  # owners first: the order in which a stale flag does harm
            waits = [i for i in runnable if programs[i][1][pos[i]][0] in ("wait", "add")]
            i = (waits or runnable)[0]
        else:
            i = rng.choice(runnable)
        name, p = programs[i]
        kind, other, value, buf = p[pos[i]]
        pos[i] += 1
        if kind == "write":
            buf["slots"][other] = value
        elif kind == "raise":
            buf["flags"][other] = {"reset": buf["flags"].get(other, FLAG_EMPTY) + 1,
                                   "lane stores": FLAG_READY}.get(protocol, value)
        elif kind == "wait" and protocol != "launch number":
            buf["flags"][other] = FLAG_EMPTY
        elif kind == "add" and buf["slots"].get(other) != value:
            wrong.append(f"{name}: an owner added cluster {other}'s partial sums from "
                         f"{buf['slots'].get(other) or 'no launch'}")
    stuck = [programs[i][0] for i, (_, p) in enumerate(programs) if pos[i] < len(p)]
    wrong += [f"{name}: never ends (an owner waits for a flag no one raises)" for name in dict.fromkeys(stuck)]
    if protocol != "launch number":
        for name, _, buf in launches:
            if any(f != FLAG_EMPTY for f in buf["flags"].values()):
                wrong.append(f"{name}: a flag is left raised for the next launch")
    return wrong


def fixup_buffer() -> dict:
    """A fresh fix-up buffer: every flag empty (zeroed memory), no slot written."""
    return {"slots": {}, "flags": {}}
