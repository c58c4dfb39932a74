"""Exercises of notebook ``08_hopper_tensor_cores``: the 128-byte swizzle (you write it), one swizzled
address, a descriptor's LBO for another box, and the register budget of warp specialisation.

Every expected answer comes from the course's Python model of TMA and ``wgmma``
(``course_lib.model.layout.tma_box_offset``; ``course_lib.kernels.tensor_cores``: ``make_descriptor``,
``wgmma_mn_major_address``) or from the register arithmetic of ``setmaxnreg``.

Also what the notebook reads the kernels with: ``cuda_function`` (a helper of ``tc_hopper.cuh`` by
name, as it is defined there) and ``kernel_piece`` (a paragraph of a stage's source, by one of its
lines), so stage 2 is printed top to bottom from ``csrc/`` itself.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

from course_lib import learn
from course_lib.exercises import FunctionPuzzle, Question
from course_lib.kernels import tensor_cores as tc
from course_lib.learn import Verdict, say
from course_lib.model import layout

# The largest swizzled box the kernels copy: A's BLOCK_M rows of 64 bf16 (128 bytes each), 16 KB.
BOX_ROWS, BOX_COLS = max(d.block[0] for d in tc.DESIGNS), 64
ROW_BYTES, CHUNK = layout.SWIZZLE_ROW, 16


# ---- the puzzle: the 128-byte swizzle -------------------------------------------------------------

def swizzle_offset(row: int, col: int) -> int:
    """Byte offset of bf16 element (row, col) in a TMA box of 64 columns with the 128-byte swizzle."""
    byte = 2 * col                                  # bf16: 2 bytes, so a row is 64 x 2 = 128 bytes
    chunk, within = byte // 16, byte % 16           # which 16-byte chunk of the row, where in it
    return 128 * row + 16 * (chunk ^ (row % 8)) + within   # the chunk moves; rows 8 apart repeat


def _no_xor(row, col):
    return ROW_BYTES * row + 2 * col


def _xor_with_row(row, col):
    return ROW_BYTES * row + CHUNK * ((2 * col // CHUNK) ^ row) + 2 * col % CHUNK


def _xor_on_bytes(row, col):
    return ROW_BYTES * row + ((2 * col) ^ (row % 8))


def _four_bytes(row, col):
    return ROW_BYTES * row + CHUNK * ((4 * col // CHUNK) ^ (row % 8)) + 4 * col % CHUNK


def _chunk_start_only(row, col):
    return ROW_BYTES * row + CHUNK * ((2 * col // CHUNK) ^ (row % 8))


def _xor_on_elements(row, col):
    return ROW_BYTES * row + 2 * (col ^ (row % 8))


def _col_as_bytes(row, col):
    return ROW_BYTES * row + CHUNK * ((col // CHUNK) ^ (row % 8)) + col % CHUNK


def _wraps_at_64(row, col):
    return layout.tma_box_offset(row % 64, col)


def _row_start_mod_8(row, col):
    return ROW_BYTES * (row % 8) + CHUNK * ((2 * col // CHUNK) ^ (row % 8)) + 2 * col % CHUNK


@dataclass(frozen=True)
class _BoxPuzzle(FunctionPuzzle):
    """A function of (row, col) checked on every element of the box; where it is wrong, the check
    also names the first row where it differs (a formula that wraps its rows too early is right
    above that row)."""

    def check(self, fn) -> Verdict:
        verdict = super().check(fn)
        if not verdict:
            row = _first_wrong_row(fn, self.reference)
            if row is not None:
                right = f" (rows 0-{row - 1} are right)" if row > 1 else " (row 0 is right)" if row else ""
                say(f"  the first row where yours differs: row {row} of the box's {BOX_ROWS}{right}")
        return verdict


def _first_wrong_row(fn, reference) -> int | None:
    for r in range(BOX_ROWS):
        for c in range(BOX_COLS):
            try:
                mine = fn(r, c)
                if mine is None:  # the starter: the check above has told it to fill in the TODO lines
                    return None
                if mine != reference(r, c):
                    return r
            except Exception:  # noqa: BLE001 - the check above has said what went wrong
                return None
    return None


swizzle = _BoxPuzzle(
    title="Your swizzle",
    reference=layout.tma_box_offset,
    cases=lambda: [(r, c) for r in range(BOX_ROWS) for c in range(BOX_COLS)],
    show=lambda case: f"element ({case[0]}, {case[1]})",
    known_wrong=[
        (_wraps_at_64, f"your offsets start again at row 64: the kernels' box of A has {BOX_ROWS} rows "
                       f"(BLOCK_M), {BOX_ROWS * ROW_BYTES // 1024} KB, and row r starts 128 * r bytes in, "
                       "for every r; only the XOR repeats (every 8 rows)."),
        (_row_start_mod_8, "the row's start takes row % 8: only the chunk's XOR repeats every 8 rows; "
                           "row r itself starts 128 * r bytes into the box."),
        (_xor_on_elements, "you XOR the element index: the swizzle permutes whole 16-byte chunks (8 bf16), "
                           "so XOR the chunk, 2 * col // 16, and keep the byte inside it."),
        (_col_as_bytes, "col counts elements of 2 bytes, not bytes: the byte in the row is 2 * col."),
        (_no_xor, "that is the plain row-major offset: the swizzle is missing (chunk c of row r goes to "
                  "chunk c ^ (r % 8))."),
        (_xor_with_row, "the XOR takes row % 8, not the row: from row 8 on your chunk index runs past 7, "
                        "out of the row (the pattern repeats every 8 rows, 1024 bytes)."),
        (_xor_on_bytes, "the XOR moves whole 16-byte chunks: XOR the chunk index (byte // 16) with "
                        "row % 8, not the byte offset."),
        (_four_bytes, "a bf16 element is 2 bytes, not 4: 64 of them make the 128-byte row."),
        (_chunk_start_only, "right chunk, but the element's place inside its chunk (byte % 16) is "
                            "missing."),
    ],
    reveal=swizzle_offset,
)


# ---- the prediction of section 5: stage 3's speed as a share of stage 2's ---------------------------

@dataclass(frozen=True)
class ChangePrediction:
    """A prediction of a speed relative to a baseline, in per cent (100 = as fast as the baseline),
    compared with the measurement in words about the two stages.

    The rule: a prediction within 5 % of 100 (:func:`course_lib.learn.direction`) says "about as
    fast" and is compared by size only. Any other prediction says which way the speed moves, and
    it points the wrong way - however close its number - unless the measurement moved that way by
    more than ``MEASURED_WITHIN`` %. A prediction not the wrong way counts (the verdict is true),
    and is called close within 25 % of the measurement, as :func:`course_lib.learn.compare_prediction`
    does. A number between 0 and 2 is taken for a ratio typed where a percentage was asked for."""

    what: str          # "stage 3", the thing predicted
    baseline: str      # "stage 2", what it is a percentage of

    MEASURED_WITHIN = 1.0  # % of the baseline: a measurement this close to 100 % has no direction

    def _way(self, percent: float, way: int) -> str:
        if way == 0:
            return f"{self.what} about as fast as {self.baseline}"
        return f"{self.what} {'faster' if way > 0 else 'slower'} than {self.baseline} ({percent - 100:+.0f} %)"

    def check(self, guess, measured: float) -> Verdict:
        usable = isinstance(guess, (int, float)) and not isinstance(guess, bool) and math.isfinite(guess) and guess > 0
        if guess is None:  # nothing entered: said as for any prediction, the measurement kept hidden
            return learn.compare_prediction(guess, measured, unit="%", pivot=100)
        if not usable:
            say(f"A prediction is a positive number of % (100 = as fast as {self.baseline}), not {guess!r}.")
            return Verdict(False)
        if guess < 2:
            say(f"You entered {learn.fmt(guess)}: that looks like a ratio. Give {self.what}'s speed in per "
                f"cent of {self.baseline}'s ({learn.fmt(guess)}x is {learn.fmt(round(100 * guess, 1))} %), "
                "then run both cells again.")
            return Verdict(False)
        want = learn.direction(guess, 100)
        got = 0 if abs(measured - 100) <= self.MEASURED_WITHIN else (1 if measured > 100 else -1)
        said = (f"You predicted {learn.fmt(guess)} %, {self._way(guess, want)}; measured "
                f"{learn.fmt(round(measured, 1))} %, {self._way(measured, got)}.")
        ratio = measured / guess
        if want != 0 and want != got:
            say(said + " Your prediction points the wrong way"
                + (": the change you expected did not happen." if got == 0 else ", not just by too much or too little."))
            return Verdict(False, ratio)
        off = (f"the measurement is {ratio:.2g}x your prediction" if ratio > 1
               else f"the measurement is {1 / ratio:.2g}x below your prediction")
        if 0.8 <= ratio <= 1.25:
            verdict = "Close: the right way and within 25 % of the measurement." if want else "Close: within 25 % of the measurement."
        else:
            verdict = f"The right way, but {off}." if want else f"{off[0].upper()}{off[1:]}."
        say(f"{said} {verdict}")
        return Verdict(True, ratio)


stage3_speed = ChangePrediction(what="stage 3", baseline="stage 2")


# ---- exercise 1: one swizzled address -------------------------------------------------------------

ELEMENT = (5, 20)

swizzled_offset = Question(
    what="offset of element (5, 20)",
    expected=lambda: layout.tma_box_offset(*ELEMENT),
    hint="find the 16-byte chunk of the unswizzled offset, XOR it with the row mod 8",
    wrong=[
        (_no_xor(*ELEMENT), "that is the offset without the swizzle: XOR its 16-byte chunk with row % 8."),
        (_xor_on_bytes(*ELEMENT), "the XOR moves the 16-byte chunk: XOR the chunk index, not the byte "
                                  "offset, with row % 8."),
        (_four_bytes(*ELEMENT), "that counts 4 bytes an element; bf16 is 2."),
        (_chunk_start_only(*ELEMENT), "that is the start of the right chunk; add the element's byte "
                                      "inside it."),
        (layout.tma_box_offset(*ELEMENT) - ROW_BYTES * ELEMENT[0], "that is the offset inside row 5; the "
                                                                "box's start is 5 rows of 128 bytes earlier."),
    ],
)


# ---- exercise 2: a descriptor's LBO for boxes of 32 x 64 ------------------------------------------

SLICE_ROWS = 32  # rows of K in a box, instead of the kernels' 64


def _misread(lbo: int, box_rows: int):
    """For each element (n, k) of a 16 x 256 slice of B, columns 64 and up first: whether ``wgmma``,
    given a descriptor with this LBO (and the kernels' SBO), reads it from another place than TMA
    wrote it, with boxes of ``box_rows`` x 64."""
    desc = tc.make_descriptor(0, lbo, tc.B_SBO)
    box_bytes = box_rows * ROW_BYTES
    for n in [*range(64, 256), *range(64)]:
        for k in range(16):
            yield tc.wgmma_mn_major_address(desc, n, k) != (n // 64) * box_bytes + layout.tma_box_offset(k, n % 64)


def lbo_mismatches(lbo: int, box_rows: int = SLICE_ROWS) -> int:
    """How many of the 4096 elements of a 16 x 256 slice ``wgmma`` reads from the wrong place."""
    return sum(_misread(lbo, box_rows))


@lru_cache(maxsize=None)
def right_lbo(box_rows: int = SLICE_ROWS) -> int:
    """The LBO (a multiple of 16 bytes up to 16384) with which wgmma reads every element where TMA
    wrote it."""
    return next(lbo for lbo in range(16, 16385, 16) if not any(_misread(lbo, box_rows)))


@dataclass(frozen=True)
class _LboQuestion(Question):
    """Says, for a wrong LBO, how many elements wgmma would read from the wrong place."""

    def check(self, answer) -> Verdict:
        verdict = super().check(answer)
        if not verdict and isinstance(answer, int) and not isinstance(answer, bool) and 0 <= answer < 1 << 18:
            say(f"  with LBO = {answer}: {lbo_mismatches(answer)} of 4096 elements read from the wrong place")
        return verdict


box_lbo = _LboQuestion(
    what="LBO for 32 x 64 boxes",
    expected=right_lbo,
    hint="LBO is the byte step from one group of 64 columns of B to the next: where does TMA put them?",
    wrong=[
        (tc.B_LBO, "that is the kernels' LBO, for boxes of 64 rows; these boxes have 32."),
        (tc.B_SBO, "that is SBO, the step to the next 8 rows of K; LBO steps to the next 64 columns."),
        (ROW_BYTES, "that is one row of a box; LBO steps over a whole box."),
        (16 * ROW_BYTES, "that is the 16 rows of one wgmma's slice; LBO steps over a whole box (32 rows)."),
    ],
)


# ---- exercise 3: the register budget of a variant of stage 4 --------------------------------------

REGS_PER_SM = 65536
THREADS = 384           # three warpgroups, __launch_bounds__(384, 1)
PRODUCER_THREADS, CONSUMER_THREADS = 128, 256
VARIANT_PRODUCER_REGS = 48


def _round8(x: float) -> int:
    return int(x) // 8 * 8


def registers_at_launch(threads: int = THREADS) -> int:
    """What ptxas gives each thread under __launch_bounds__(threads, 1): the SM's registers shared
    out, rounded down to a multiple of 8."""
    return _round8(REGS_PER_SM // threads)


def consumer_registers(producer_regs: int = VARIANT_PRODUCER_REGS, pool: int | None = None) -> int:
    """Registers per consumer thread that setmaxnreg can give when the producer keeps
    ``producer_regs``: what the CTA's pool (registers at launch x threads) has left, shared out over
    the consumers, rounded down to a multiple of 8."""
    pool = registers_at_launch() * THREADS if pool is None else pool
    return _round8((pool - PRODUCER_THREADS * producer_regs) / CONSUMER_THREADS)


register_budget = Question(
    what="registers per consumer thread",
    expected=consumer_registers,
    hint="the pool is (registers at launch) x 384 threads; subtract the producer's, share out, round down",
    wrong=[
        (consumer_registers(pool=REGS_PER_SM), f"that shares out the SM's {REGS_PER_SM:,} registers; "
                                               f"setmaxnreg moves registers within the CTA's pool, "
                                               f"{registers_at_launch()} x {THREADS}."),
        ((registers_at_launch() * THREADS - PRODUCER_THREADS * VARIANT_PRODUCER_REGS) / CONSUMER_THREADS,
         "setmaxnreg takes multiples of 8: round down."),
        (consumer_registers(producer_regs=0), f"the producer keeps its {VARIANT_PRODUCER_REGS} registers per "
                                              "thread: subtract them from the pool first."),
        (registers_at_launch(), "that is what every thread gets at launch; setmaxnreg moves what the "
                                "producer gives back to the consumers."),
    ],
)


# ---- reading the kernels: a helper function, or a piece of a kernel, printed from its source -------
# Notebook 08 prints each synchronisation helper where a stage first uses it, and stage 2 top to
# bottom, straight from csrc/ (no copy of the C++ lives in Python). The excerpt markers of
# tensor_cores.source_excerpt are for longer passages; these find a helper by its name and a piece
# of a kernel by a line of it, so the sources need no markers for them.
_BANNER = re.compile(r"^\s*// (----|\[/?excerpt )")


def _strip_code(line: str, in_string: bool = False) -> str:
    """The line with its // comment, string and character literals blanked (braces in asm strings,
    such as "{\\n", are not code)."""
    out, i = [], 0
    while i < len(line):
        ch = line[i]
        if ch in "\"'":
            j = i + 1
            while j < len(line) and line[j] != ch:
                j += 2 if line[j] == "\\" else 1
            out.append(" " * (j + 1 - i))
            i = j + 1
        elif line.startswith("//", i):
            break
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def cuda_function(name: str, file: str = "tc_hopper.cuh") -> str:
    """The definition of the C++ function ``name`` in ``file`` (a stage or a file in csrc/, as
    ``tensor_cores.source_path`` takes it), with its template line and the comment right above it.
    ValueError if ``file`` defines no such function, or more than one."""
    path = tc.source_path(file)
    lines = path.read_text().splitlines()
    found = [i for i, line in enumerate(lines)
             if line[:1] not in ("", " ", "/", "#", "}") and re.search(rf"\b{re.escape(name)}\s*\(", line)
             and not _strip_code(line).rstrip().endswith(";")]
    if len(found) != 1:
        raise ValueError(f"{path.name} defines {len(found)} functions named {name!r} at the start of a line "
                         f"(lines {[i + 1 for i in found]}): give the name of exactly one")
    first = found[0]
    while first > 0 and lines[first - 1].startswith("template"):
        first -= 1
    while first > 0 and lines[first - 1].startswith("//") and not _BANNER.match(lines[first - 1]):
        first -= 1
    depth, opened = 0, False
    for last in range(found[0], len(lines)):
        code = _strip_code(lines[last])
        depth += code.count("{") - code.count("}")
        opened = opened or "{" in code
        if opened and depth == 0:
            return "\n".join(lines[first:last + 1])
    raise ValueError(f"{path.name}: the body of {name} never closes")


def cuda_functions(*names: str, file: str = "tc_hopper.cuh") -> str:
    """Several helpers of ``file``, in the order given, a blank line between them."""
    return "\n\n".join(cuda_function(n, file) for n in names)


def kernel_piece(stage: str, line: str) -> str:
    """The paragraph (lines between two blank lines) of a stage's source that holds the text
    ``line``, without excerpt markers: a kernel read piece by piece. ValueError if no paragraph, or
    more than one, holds it."""
    path = tc.source_path(stage)
    paragraphs, current = [], []
    for text in path.read_text().splitlines() + [""]:
        if text.strip():
            if not re.match(r"^\s*// \[/?excerpt ", text):
                current.append(text)
        elif current:
            paragraphs.append(current)
            current = []
    found = [p for p in paragraphs if any(line in t for t in p)]
    if len(found) != 1:
        raise ValueError(f"{len(found)} paragraphs of {path.name} hold {line!r}: give a line of exactly one")
    return "\n".join(found[0])
