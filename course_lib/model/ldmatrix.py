"""What one ``ldmatrix`` instruction loads: which lane gives which row address, and which register of
which lane receives which element.

    from course_lib.model.ldmatrix import address_role, received, ldmatrix_positions
    address_role(lane=13)                    # -> (1, 5): lane 13 gives the address of row 5 of matrix 1
    received(lane=5, matrix=0)               # -> ((1, 2), (1, 3)): row g = 1, columns 2t, 2t + 1
    ldmatrix_positions(my_a_row)             # a row address per lane -> every lane's fragment

``ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16`` is executed by a whole warp. It loads one,
two or four 8 x 8 matrices of 16-bit values from shared memory; a row of one is eight values, 16
contiguous bytes. Lanes 8j .. 8j + 7 give the addresses of rows 0..7 of matrix j (any 16-byte aligned
rows: they need not be neighbours in memory), and every lane receives one 32-bit register per matrix,
holding two values. Without ``.trans`` lane l receives row g = l // 4, columns 2t and 2t + 1
(t = l % 4) of each matrix; with ``.trans`` rows 2t and 2t + 1 of column g. Source: the PTX ISA's
"Warp-level matrix load instruction: ldmatrix" (9.7.14.5.15 in ISA 8.x; the number moves between
versions), the same rule ``course_lib/csrc/tc_mma.cuh`` states beside its wrappers.

A lane's two roles are unrelated: the row whose address it gives is not the row it receives. The g
and t here are those of the ``mma.m16n8k16`` fragment tables (:mod:`course_lib.model.fragments`),
which is why four matrices placed well are exactly an ``mma`` operand's fragment.
"""

from __future__ import annotations

from typing import Callable

from course_lib.model.fragments import lane_parts
from course_lib.model.hardware import WARP_SIZE

MATRIX_ROWS = 8  # an ldmatrix matrix is 8 x 8 16-bit values: 8 rows of 16 bytes
MATRIX_COUNTS = (1, 2, 4)  # .x1, .x2, .x4

Position = tuple[int, int]  # (row, column) of an element in the tile the rows are read from


def _check_lane(lane: int) -> None:
    if not 0 <= lane < WARP_SIZE:
        raise ValueError(f"lane is 0..{WARP_SIZE - 1}, got {lane}")


def _check_num(num: int) -> None:
    if num not in MATRIX_COUNTS:
        raise ValueError(f"ldmatrix loads 1, 2 or 4 matrices (.x1, .x2, .x4), not {num}")


def address_role(lane: int, num: int = 4) -> tuple[int, int] | None:
    """(matrix, row) whose address ``lane`` gives for an ``.x{num}`` load, or None where the lane's
    address is not read (lanes 8 * num and above)."""
    _check_lane(lane)
    _check_num(num)
    matrix, row = divmod(lane, MATRIX_ROWS)
    return (matrix, row) if matrix < num else None


def received(lane: int, matrix: int, trans: bool = False) -> tuple[Position, Position]:
    """The two (row, column) places inside 8 x 8 ``matrix`` whose values ``lane`` receives in its
    register ``matrix``: the lower 16 bits hold the first."""
    _check_lane(lane)
    if not 0 <= matrix < max(MATRIX_COUNTS):
        raise ValueError(f"matrix is 0..{max(MATRIX_COUNTS) - 1}, got {matrix}")
    g, t = lane_parts(lane)
    if trans:
        return (2 * t, g), (2 * t + 1, g)
    return (g, 2 * t), (g, 2 * t + 1)


def ldmatrix_positions(row_start: Callable[[int], Position], num: int = 4,
                       trans: bool = False) -> list[list[tuple[Position, Position]]]:
    """Where, in the tile the rows come from, every value of one ldmatrix lands.

    ``row_start(lane)`` is the (row, column) of the first of the eight elements whose address that
    lane gives (the kernel's address arithmetic, as tile coordinates). The answer's ``[lane][j]`` is
    the pair of tile positions that register ``j`` of ``lane`` holds, lower half first."""
    _check_num(num)
    starts: dict[tuple[int, int], Position] = {}
    for lane in range(MATRIX_ROWS * num):
        start = row_start(lane)
        if not (isinstance(start, tuple) and len(start) == 2 and all(isinstance(v, int) for v in start)):
            raise TypeError(f"row_start({lane}) must return (row, column) as two ints, got {start!r}")
        if min(start) < 0:
            raise ValueError(f"row_start({lane}) = {start}: a row address lies inside the tile (no negative place)")
        starts[address_role(lane, num)] = start
    out = []
    for lane in range(WARP_SIZE):
        regs = []
        for j in range(num):
            pair = []
            for r, c in received(lane, j, trans):
                row0, col0 = starts[(j, r)]  # the row r of matrix j, as its lane pointed at it
                pair.append((row0, col0 + c))
            regs.append((pair[0], pair[1]))
        out.append(regs)
    return out
