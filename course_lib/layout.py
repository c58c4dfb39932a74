"""The layout and schedule formulas of the course, each written once: ceiling division, the 128-byte
swizzle, which lane holds which element of a tensor-core instruction's operands, the grouped order
of tiles, and how tiles run in waves.

The kernels' Python models (:mod:`course_lib.kernels`) and the pictures (:mod:`course_lib.viz`) both
import them from here, so a picture and the model a test holds the C++ to cannot disagree. Every
function takes and returns plain integers; nothing here imports torch, numba or Triton.
"""

from __future__ import annotations

Shape = tuple[int, int, int]  # (M, N, K): a is M x K, b is K x N, c is M x N


def cdiv(n: int, d: int) -> int:
    """Ceiling division: how many blocks of ``d`` cover ``n`` (for n >= 0, d > 0)."""
    return -(-n // d)


# ---- which shapes a kernel takes ---------------------------------------------------------------------
# A stage's shape rule: one number (M, N and K must all be multiples of it; 1: any shape) or one per
# dimension (M, N, K). TMA needs 16-byte rows, so a kernel that reads A, B and C through it needs K
# and N multiples of 8 (bf16); M counts rows, which a partial box fills with zeros (stage 6 takes any M).
def multiples(rule: int | tuple[int, int, int]) -> tuple[int, int, int]:
    """The rule as (M's, N's, K's multiple)."""
    return (rule, rule, rule) if isinstance(rule, int) else tuple(rule)


def fits(shape: Shape, rule: int | tuple[int, int, int]) -> bool:
    """Whether an (M, N, K) shape obeys the rule."""
    return all(v % m == 0 for v, m in zip(shape, multiples(rule)))


def round_up(shape: Shape, rule: int | tuple[int, int, int]) -> Shape:
    """The shape with each dimension rounded up to the rule's multiple."""
    return tuple(cdiv(v, m) * m for v, m in zip(shape, multiples(rule)))


def rule_text(rule: int | tuple[int, int, int]) -> str:
    """The rule in words: "M, N and K must be multiples of 8", "N and K must be multiples of 8"."""
    groups: dict[int, list[str]] = {}
    for name, m in zip("MNK", multiples(rule)):
        if m > 1:
            groups.setdefault(m, []).append(name)
    if not groups:
        return "any shape"
    parts = [(" and ".join([", ".join(n[:-1]), n[-1]] if len(n) > 2 else n), m) for m, n in groups.items()]
    return "; ".join(f"{names} must be {'a multiple' if len(names) == 1 else 'multiples'} of {m}" for names, m in parts)


# ---- the 128-byte swizzle ------------------------------------------------------------------------
# TMA with CU_TENSOR_MAP_SWIZZLE_128B writes a box whose rows are 128 bytes so that, inside each
# group of 8 rows (1024 bytes), 16-byte chunk c of row r lands at chunk position c ^ (r % 8); wgmma's
# descriptor mode "128B" reads the same pattern (PTX ISA 9.7.15.5.1.2, "Shared Memory Matrix Layout";
# CUTLASS names it Swizzle<3,4,3>). Eight rows that read one column then hit eight different chunks.
SWIZZLE_ROW = 128  # bytes in one swizzled row
SWIZZLE_ATOM = 1024  # bytes after which the XOR pattern repeats: 8 rows
BF16_BYTES = 2


def swizzle_128b(byte_offset: int) -> int:
    """The 128-byte swizzle as an address function: the 16-byte chunk index, bits [4:6], is XORed
    with the row index within the 1024-byte atom, bits [7:9]."""
    return byte_offset ^ (((byte_offset >> 7) & 0x7) << 4)


def tma_box_offset(row: int, col: int, box_cols: int = 64) -> int:
    """Byte offset at which TMA with CU_TENSOR_MAP_SWIZZLE_128B puts element (row, col) of a box
    whose rows are ``box_cols`` bf16 (= 128 bytes), the box starting on a 1024-byte boundary."""
    assert box_cols * BF16_BYTES == SWIZZLE_ROW and 0 <= col < box_cols
    return swizzle_128b(row * SWIZZLE_ROW + col * BF16_BYTES)


# ---- tensor-core fragments -------------------------------------------------------------------------
# Which lane holds which element, as the PTX ISA defines it (the only place it is defined):
# * "Matrix Fragments for mma.m16n8k16 with floating point type" (9.7.14.5.8 in ISA 8.x; the number
#   moves between versions). With g = laneid >> 2 (groupID) and t = laneid % 4 (threadID_in_group):
#   A (16 x 16, a0..a7): rows g (a0, a1, a4, a5) and g + 8, columns 2t + (i & 1), plus 8 for i >= 4;
#   B (16 x 8, b0..b3): rows 2t + (i & 1), plus 8 for i >= 2, column g;
#   C and D (16 x 8, c0..c3): rows g (i < 2) and g + 8, columns 2t + (i & 1).
# * "Register Fragments" of wgmma.mma_async.m64nNk16 (9.7.15.5.1.1, figures for matrix A and the
#   accumulator D): warp w of the warpgroup owns rows 16w..16w+15 and holds them like an m16n8 C
#   fragment repeated every 8 columns; A in registers follows the m16n8k16 A layout in each warp.
WARP_SIZE = 32
WARPGROUP_SIZE = 128
MMA_SHAPES = {"A": (16, 16, 8), "B": (16, 8, 4), "C": (16, 8, 4)}  # rows, cols, register elements per lane
WGMMA_N = tuple(range(8, 257, 8))  # valid N of wgmma m64nNk16


def lane_parts(lane: int) -> tuple[int, int]:
    """(groupID, threadID_in_group) of a lane: the two numbers the PTX ISA's fragment tables use."""
    if not 0 <= lane < WARP_SIZE:
        raise ValueError(f"lane is 0..31, got {lane}")
    return lane >> 2, lane % 4  # groupID, threadID_in_group


def mma_m16n8k16(operand: str, lane: int, i: int) -> tuple[int, int]:
    """(row, col) of the element that register element ``i`` of ``lane`` holds, for mma.sync
    .m16n8k16 with .f16/.bf16 inputs and .f32 accumulators ('A', 'B', or 'C' = 'D')."""
    operand = "C" if operand == "D" else operand
    if operand not in MMA_SHAPES:
        raise ValueError(f"operand is 'A', 'B', 'C' or 'D', not {operand!r}")
    regs = MMA_SHAPES[operand][2]
    if not 0 <= i < regs:
        raise ValueError(f"{operand} has elements 0..{regs - 1} per lane, got {i}")
    g, t = lane_parts(lane)
    if operand == "A":
        return g + 8 * ((i // 2) % 2), 2 * t + i % 2 + 8 * (i // 4)
    if operand == "B":
        return 2 * t + i % 2 + 8 * (i // 2), g
    return g + 8 * (i // 2), 2 * t + i % 2


def wgmma_m64nNk16_d(thread: int, i: int, n: int = 16) -> tuple[int, int]:
    """(row, col) of accumulator element d``i`` of ``thread`` (0..127 in the warpgroup) for wgmma
    m64nNk16 with .f32 accumulators; each thread holds n/2 of them."""
    if n not in WGMMA_N:
        raise ValueError(f"N is a multiple of 8 from 8 to 256, got {n}")
    if not 0 <= thread < WARPGROUP_SIZE:
        raise ValueError(f"thread is 0..127 in a warpgroup, got {thread}")
    if not 0 <= i < n // 2:
        raise ValueError(f"each thread holds d0..d{n // 2 - 1} for N={n}, got {i}")
    warp, lane = divmod(thread, WARP_SIZE)
    g, t = lane_parts(lane)
    return 16 * warp + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * t + (i & 1)


def wgmma_m64nNk16_a(thread: int, i: int) -> tuple[int, int]:
    """(row, col) of A element a``i`` of ``thread`` when wgmma m64nNk16 takes A from registers."""
    if not 0 <= thread < WARPGROUP_SIZE:
        raise ValueError(f"thread is 0..127 in a warpgroup, got {thread}")
    warp, lane = divmod(thread, WARP_SIZE)
    row, col = mma_m16n8k16("A", lane, i)
    return 16 * warp + row, col


# ---- the grouped order of tiles --------------------------------------------------------------------
# The order Triton's matmul tutorial calls grouped: tiles numbered column by column inside bands of
# group_m tile rows, the last band maybe shorter. Triton's grouped_tile (notebook 05), the tensor-core
# stages' GroupedTiles::locate (csrc/tc_schedule.cuh, over clusters of tile rows) and notebook 05's
# puzzle solution are this function; its text is what notebook 05 reveals.
def grouped_order(pid: int, num_pid_m: int, num_pid_n: int, group_m: int) -> tuple[int, int]:
    """Python twin of :func:`grouped_tile`: (pid_m, pid_n) of program ``pid``."""
    tiles_per_band = group_m * num_pid_n
    band = pid // tiles_per_band
    first_m = band * group_m
    band_rows = min(num_pid_m - first_m, group_m)
    return first_m + (pid % tiles_per_band) % band_rows, (pid % tiles_per_band) // band_rows


# ---- waves -------------------------------------------------------------------------------------------
# A GPU runs ``slots`` tiles at once (SMs x resident blocks, or resident clusters); more tiles run in
# waves, and the last wave may be partly empty: "wave quantisation".
def wave_count(tiles: int, slots: int) -> int:
    """Waves needed for ``tiles`` tiles, ``slots`` at a time: a partly filled last wave still counts."""
    return cdiv(tiles, slots)


def whole_tile_efficiency(tiles: int, slots: int) -> float:
    """The share of the slots' time that ``tiles`` whole tiles keep busy: 1.0 when they fill every
    wave, ``tiles / slots`` when they fill less than one (1.0 for no tiles: nothing waits)."""
    waves = wave_count(tiles, slots)
    return tiles / (waves * slots) if waves else 1.0


def persistent_ctas(cluster_tiles: int, max_clusters: int, cluster: int) -> int:
    """CTAs of a persistent launch: as many clusters as fit, trimmed so that every cluster walks the
    same number of tiles, +-1 (the waves come out even; the launchers' rule in csrc/tc_schedule.cuh)."""
    return cdiv(cluster_tiles, wave_count(cluster_tiles, max_clusters)) * cluster
