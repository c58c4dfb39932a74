"""Tensor-core fragments: which lane holds which matrix element for mma.sync and wgmma.

    from course_lib.model.fragments import fragment_map, mma_m16n8k16, wgmma_m64nNk16_d
    mma_m16n8k16("A", lane=5, i=2)        # -> (9, 2): register a2 of lane 5 holds A[9, 2]
    fragment_map("mma.m16n8k16", "A")     # (owner lane, register index) of every element of A
    wgmma_m64nNk16_d(thread=64, i=0)      # -> (32, 0): warp 2 of the warpgroup owns rows 32..47

A tensor-core instruction is executed by a whole warp (``mma.sync``) or a whole warpgroup of four
warps (``wgmma.mma_async``), and each thread brings a fixed piece (a *fragment*) of the operands in
its registers. The layouts are the PTX ISA's; the tensor-core kernels' model, the exercises and
:mod:`course_lib.viz.fragments` (which draws them) all read them here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from course_lib.model.hardware import WARP_SIZE, WARPGROUP_SIZE


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
MMA_SHAPES = {"A": (16, 16, 8), "B": (16, 8, 4), "C": (16, 8, 4)}  # rows, cols, register elements per lane
WGMMA_N = tuple(range(8, 257, 8))  # valid N of wgmma m64nNk16


def lane_parts(lane: int) -> tuple[int, int]:
    """(groupID, threadID_in_group) of a lane: the two numbers the PTX ISA's fragment tables use."""
    if not 0 <= lane < WARP_SIZE:
        raise ValueError(f"lane is 0..{WARP_SIZE - 1}, got {lane}")
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
        raise ValueError(f"thread is 0..{WARPGROUP_SIZE - 1} in a warpgroup, got {thread}")
    if not 0 <= i < n // 2:
        raise ValueError(f"each thread holds d0..d{n // 2 - 1} for N={n}, got {i}")
    warp, lane = divmod(thread, WARP_SIZE)
    g, t = lane_parts(lane)
    return 16 * warp + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * t + (i & 1)


def wgmma_m64nNk16_a(thread: int, i: int) -> tuple[int, int]:
    """(row, col) of A element a``i`` of ``thread`` when wgmma m64nNk16 takes A from registers."""
    if not 0 <= thread < WARPGROUP_SIZE:
        raise ValueError(f"thread is 0..{WARPGROUP_SIZE - 1} in a warpgroup, got {thread}")
    warp, lane = divmod(thread, WARP_SIZE)
    row, col = mma_m16n8k16("A", lane, i)
    return 16 * warp + row, col


def warp_rows(n: int = 16) -> dict[int, range]:
    """Accumulator rows owned by each warp of the warpgroup (from :func:`wgmma_m64nNk16_d`)."""
    out: dict[int, set[int]] = {}
    for t in range(WARPGROUP_SIZE):
        for i in range(n // 2):
            out.setdefault(t // WARP_SIZE, set()).add(wgmma_m64nNk16_d(t, i, n)[0])
    return {w: range(min(r), max(r) + 1) for w, r in sorted(out.items())}


@dataclass(frozen=True)
class FragmentMap:
    """Who holds each element of one operand: ``owner[r, c]`` = lane (or warpgroup thread),
    ``reg[r, c]`` = its register element index i."""

    instruction: str
    operand: str
    owner: np.ndarray
    reg: np.ndarray

    def elements_of(self, thread: int) -> list[tuple[int, int, int]]:
        """(i, row, col) of every element ``thread`` holds, in register order."""
        rows, cols = np.nonzero(self.owner == thread)
        return sorted((int(self.reg[r, c]), int(r), int(c)) for r, c in zip(rows, cols))


def fragment_map(instruction: str = "mma.m16n8k16", operand: str = "A", n: int = 16) -> FragmentMap:
    """The whole layout as arrays. ``instruction``: 'mma.m16n8k16' (operand A, B, C) or
    'wgmma.m64nNk16' (operand A or D, with N = ``n``). Raises if two registers claim one element
    or an element is left unowned (the layouts are bijections)."""
    if instruction == "mma.m16n8k16":
        op = "C" if operand == "D" else operand
        if op not in MMA_SHAPES:
            raise ValueError("mma.m16n8k16 operands are 'A', 'B', 'C'")
        rows, cols, regs = MMA_SHAPES[op]
        threads = WARP_SIZE
        where = lambda t, i: mma_m16n8k16(op, t, i)  # noqa: E731
    elif instruction == "wgmma.m64nNk16":
        threads = WARPGROUP_SIZE
        if operand == "D":
            rows, cols, regs = 64, n, n // 2
            where = lambda t, i: wgmma_m64nNk16_d(t, i, n)  # noqa: E731
        elif operand == "A":
            rows, cols, regs = 64, 16, 8
            where = wgmma_m64nNk16_a
        else:
            raise ValueError("wgmma.m64nNk16 fragments shown here are 'A' (in registers) and 'D'")
        op = operand
    else:
        raise ValueError("instruction is 'mma.m16n8k16' or 'wgmma.m64nNk16'")
    owner = np.full((rows, cols), -1)
    reg = np.full((rows, cols), -1)
    for t in range(threads):
        for i in range(regs):
            r, c = where(t, i)
            if owner[r, c] != -1:
                raise AssertionError(f"{instruction} {op}[{r}, {c}] claimed twice")
            owner[r, c], reg[r, c] = t, i
    if (owner < 0).any():
        raise AssertionError(f"{instruction} {op}: some elements have no owner")
    return FragmentMap(instruction, op, owner, reg)
