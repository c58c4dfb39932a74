"""The course's arithmetic of shapes and addresses, each written once: ceiling division, which
shapes a stage takes (its shape rule), and the 128-byte swizzle of TMA and wgmma.

The kernels' wrappers and models, the exercises and the pictures all import them from here. Every
function takes and returns plain integers. Which lane holds which element of a tensor-core
instruction is :mod:`course_lib.model.fragments`; the grouped tile order and the persistent
schedules :mod:`course_lib.model.schedules`; waves :mod:`course_lib.model.waves`.
"""

from __future__ import annotations

from course_lib.model.hardware import BF16_BYTES

Shape = tuple[int, int, int]  # (M, N, K): a is M x K, b is K x N, c is M x N


def cdiv(n: int, d: int) -> int:
    """Ceiling division: how many blocks of ``d`` cover ``n`` (for n >= 0, d > 0)."""
    return -(-n // d)


# ---- which shapes a kernel takes ---------------------------------------------------------------------
# A stage's shape rule: one number (M, N and K must all be multiples of it; 1: any shape) or one per
# dimension (M, N, K). TMA needs rows of a multiple of 16 bytes (course_lib.model.hardware.tma_elements),
# so a kernel that reads A, B and C through it needs K and N multiples of 8 (bf16); M counts rows,
# which a partial box fills with zeros (stage 6 takes any M).
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


def swizzle_128b(byte_offset: int) -> int:
    """The 128-byte swizzle as an address function: the 16-byte chunk index, bits [4:6], is XORed
    with the row index within the 1024-byte atom, bits [7:9]."""
    return byte_offset ^ (((byte_offset >> 7) & 0x7) << 4)


def tma_box_offset(row: int, col: int, box_cols: int = 64) -> int:
    """Byte offset at which TMA with CU_TENSOR_MAP_SWIZZLE_128B puts element (row, col) of a box
    whose rows are ``box_cols`` bf16 (= 128 bytes), the box starting on a 1024-byte boundary."""
    assert box_cols * BF16_BYTES == SWIZZLE_ROW and 0 <= col < box_cols
    return swizzle_128b(row * SWIZZLE_ROW + col * BF16_BYTES)
