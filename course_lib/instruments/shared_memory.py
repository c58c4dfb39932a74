"""Shared memory on numba's simulator: marked NaN at the start of every block, and the ledger of what
each block did with it while ``course_lib.check`` runs.

On a GPU a block's shared memory holds, when it starts, whatever an earlier block left there; the
simulator would hand a block the arrays the block before it used (a tile slot a kernel forgets to
fill then holds the last block's value, often a harmless zero). With the simulator's shared arrays
patched (:mod:`course_lib.instruments.patches`), every block gets fresh shared arrays filled with
marked NaN (:data:`SENTINEL_BITS`) whose bits say which array and which element they are, so a value
read from a slot no thread of the block had written shows as NaN in C, and that NaN names the slot;
while ``course_lib.check`` runs, a :class:`SharedLedger` also notes which slots each block left
unwritten, which threads returned before a barrier the others passed, and the barriers' lines
(:meth:`SharedLedger.explain` turns the NaN of C into :class:`UnwrittenShared` findings, each of
which renders its own sentence). Filling costs one NumPy fill per array and block.
"""

from __future__ import annotations

import linecache
import re
import threading
from dataclasses import dataclass, field

import numpy as np
import torch

from course_lib.instruments import current

# A float32 quiet NaN (0x7FC00000) with bit 21 set marks a value that came from unwritten shared
# memory; bits 14-20 number the array (course_lib's count of shared arrays, modulo 128), bits 0-13
# give the element (flat index, modulo 16384: 48 KB of float32 is 12288 elements). Arithmetic on a
# NaN passes its bits on (IEEE 754 recommends it and x86 and Arm do it): a sum that took one in
# carries it to C. The NaN C is filled with (0x7FC00000) and a NaN arithmetic makes (0xFFC00000 on
# x86) do not have bit 21.
SENTINEL_BITS = 0x7FE00000
_INDEX_BITS, _ARRAY_BITS = 14, 7
_ARRAYS: dict[tuple[str, int, int], int] = {}  # declaring (file, line, nth on the line) -> array number
_ARRAY_INFO: dict[int, tuple[str, tuple[int, ...], str, int]] = {}  # number -> (name, shape, file, line)
_ARRAYS_LOCK = threading.Lock()


def shared_name(filename: str, lineno: int, nth: int = 0) -> str:
    """Name of the ``nth`` shared array made on a source line, read from the line itself:
    ``sa = cuda.shared.array(...)`` -> 'sa'; ``sa, sb = cuda.shared.array(...), cuda.shared.array(...)``
    -> 'sa' then 'sb'; anything else -> 'shared@<line>#<nth>'."""
    text = linecache.getline(filename, lineno)
    calls = len(re.findall(r"shared\.array\s*\(", text))
    target = re.match(r"\s*([\w\s,()]+?)\s*=(?!=)", text)
    names = [t.strip("() ") for t in target.group(1).split(",")] if target else []
    names = [t for t in names if t.isidentifier()]
    if len(names) == calls and nth < len(names):
        return names[nth]
    return f"shared@{lineno}#{nth}"


def sentinel_array(shape, dtype, filename: str, lineno: int, nth: int = 0) -> np.ndarray:
    """A new shared array declared at ``filename:lineno``, filled with its marked NaN (float32 and
    float64; other floating types plain NaN; integer types left as NumPy gives them)."""
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        return np.empty(shape, dtype)
    ary = np.empty(shape, dtype)
    if dtype not in (np.float32, np.float64):
        ary.fill(np.nan)
        return ary
    with _ARRAYS_LOCK:
        number = _ARRAYS.get((filename, lineno, nth))
        if number is None:
            number = _ARRAYS[(filename, lineno, nth)] = len(_ARRAYS) % (1 << _ARRAY_BITS)
        _ARRAY_INFO[number] = (shared_name(filename, lineno, nth), tuple(ary.shape), filename, lineno)
    bits = (SENTINEL_BITS | (number << _INDEX_BITS)
            | (np.arange(ary.size, dtype=np.uint32) & ((1 << _INDEX_BITS) - 1)).astype(np.uint32))
    if dtype == np.float64:  # the same NaN widened: the float32 mantissa moves up 29 bits
        bits = (np.uint64(0x7FF0000000000000) | ((bits.astype(np.uint64) & np.uint64(0x7FFFFF)) << np.uint64(29)))
    ary.reshape(-1).view(bits.dtype)[:] = bits
    return ary


def sentinel_reads(c: torch.Tensor) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
    """Where C holds a marked NaN (a value computed from unwritten shared memory), and for those
    elements, in row-major order, the shared array's number and the element's flat index."""
    if c.dtype not in (torch.float32, torch.float64):
        return torch.zeros(c.shape, dtype=torch.bool), np.zeros(0, np.int64), np.zeros(0, np.int64)
    bits = c.detach().cpu().float().contiguous().view(torch.int32).numpy().astype(np.int64) & 0x7FFFFFFF
    marked = (bits & SENTINEL_BITS) == SENTINEL_BITS
    flat = bits[marked]
    return (torch.from_numpy(marked), (flat >> _INDEX_BITS) & ((1 << _ARRAY_BITS) - 1),
            flat & ((1 << _INDEX_BITS) - 1))


@dataclass(frozen=True)
class UnwrittenShared:
    """A slot of a shared array that a kernel read before any thread of its block had written it
    (found during ``course_lib.check`` on numba's simulator): one per array, the first such read in
    C's row-major order.

    ``cause`` is "unfilled" (no thread of the block wrote the slot before the block ended: a tile
    slot past the matrix's edge left unset), "returned" (threads of the block returned before a
    barrier the others passed, and the slots they fill stayed unwritten: ``returned`` names them
    and ``barrier_line`` the barrier) or "before barrier" (the slot was written later in the block:
    the read came before the write, with no barrier between them)."""

    array: str
    shape: tuple[int, ...]
    index: tuple[int, ...]
    c_element: tuple[int, int]  # the first element of C computed from it
    elements: int  # elements of C computed from this array's unwritten slots
    cause: str
    block: tuple[int, ...] = ()  # for "returned": the first block where threads returned early
    returned: tuple[tuple[int, ...], ...] = ()  # those threads
    barriers_passed: int = 0  # how many barriers they had passed
    barrier_line: int = 0  # the line of the barrier they did not reach (0: not known)
    return_line: int = 0  # the line of the kernel's `return`, when it has one

    def describe(self) -> str:
        """What was read, and (for threads that returned early) who did not fill it: one clause."""
        idx = ", ".join(map(str, self.index))
        slot = f"{self.array}[{idx}]"
        if len(self.index) == 2:
            slot += f" (row {self.index[0]}, column {self.index[1]} of the {self.shape[0]} x {self.shape[1]} tile)"
        i, j = self.c_element
        text = f"C[{i}, {j}] was computed from {slot}, read before any thread of its block wrote it"
        if self.cause == "returned":
            where = f" (line {self.return_line})" if self.return_line else ""
            barrier = f"the cuda.syncthreads() at line {self.barrier_line}" if self.barrier_line else "a barrier"
            text += (f": {_threads_text(self.returned)} of block {self.block[:2]} never reached {barrier} "
                     f"(they returned{where}, or an `if` kept them from it)")
        elif self.cause == "before barrier":
            text += ", and another thread wrote it later in the block"
        else:
            text += ", and none wrote it before the block ended"
        return text

    def advice(self) -> str:
        """What to change, the same at every shape."""
        if self.cause == "returned":
            return ("threads that skip a barrier (a `return` before it, or the barrier inside an `if`) leave "
                    "the slots they fill unwritten (on a GPU a barrier that not every thread reaches is "
                    "undefined): keep every thread running through every barrier, and put the `if`s around "
                    "the loads and the store of C only, never around a barrier or as a `return`")
        if self.cause == "before barrier":
            return ("the tile was read before it was filled: a cuda.syncthreads() is missing between the lines "
                    "that fill the tile and the loop that reads it")
        return ("a tile slot that is read must be set in every block, to 0 where the tile passes the edge of "
                "the matrix: an `if` that loads the slot needs an `else` that sets it to 0")


SHARED_NOTE = ("during the check every block's shared memory starts as NaN (on a GPU it holds whatever an "
               "earlier block left there), so a tile slot read before it is written shows as NaN in C")


def _threads_text(threads: tuple[tuple[int, ...], ...]) -> str:
    n = len(threads)
    if n <= 3:
        return f"thread{'s' if n != 1 else ''} {', '.join(str(t) for t in threads)}"
    return f"threads {', '.join(str(t) for t in threads[:2])} and {n - 2} others"


@dataclass
class _Block:
    barrier_lines: dict[int, int] = field(default_factory=dict)  # barriers passed -> line of the next one
    exits: list[tuple[tuple[int, ...], int]] = field(default_factory=list)  # (thread, barriers passed)
    max_barriers: int = 0


class SharedLedger:
    """What the blocks of numba launches under one ``course_lib.check`` run did with shared memory:
    per shared array, the slots left unwritten at the end of some block (and of a block where
    threads returned early); per block, its threads' exits and its barriers' lines."""

    def __init__(self) -> None:
        self.unwritten: dict[int, np.ndarray] = {}  # array number -> slots unwritten at some block's end
        self.unwritten_returned: dict[int, np.ndarray] = {}  # ... at the end of a block with early returns
        self.blocks: dict[tuple[int, ...], _Block] = {}
        self.first_returned: dict[int, tuple] = {}  # array number -> the first block with early returns
        self.kernel = None  # the kernel's Python function (its `return` lines name an early exit)
        self._lock = threading.Lock()

    # called by the simulator's patched threads and blocks
    def block(self, idx: tuple[int, ...]) -> _Block:
        with self._lock:
            return self.blocks.setdefault(idx, _Block())

    def end_block(self, idx: tuple[int, ...], allocations: dict) -> None:
        blk = self.blocks.get(idx)
        early = bool(blk and any(n < blk.max_barriers for _, n in blk.exits))
        for ary in allocations.values():
            if not isinstance(ary, np.ndarray) or ary.dtype not in (np.float32, np.float64) or not ary.size:
                continue
            marked, numbers, _ = sentinel_reads(torch.from_numpy(np.ascontiguousarray(ary)))
            if not bool(marked.any()):
                continue
            number = int(numbers[0])
            left = marked.numpy().reshape(ary.shape)
            prev = self.unwritten.get(number)
            self.unwritten[number] = left if prev is None or prev.shape != left.shape else prev | left
            if early:
                prev = self.unwritten_returned.get(number)
                self.unwritten_returned[number] = left if prev is None or prev.shape != left.shape else prev | left
                self.first_returned.setdefault(number, idx)

    def explain(self, c: torch.Tensor) -> tuple[int, tuple[UnwrittenShared, ...]]:
        """(how many elements of C were computed from unwritten shared memory, what they read and why,
        one :class:`UnwrittenShared` per array)."""
        marked, numbers, indices = sentinel_reads(c)
        n = int(marked.sum())
        if not n:
            return 0, ()
        where = torch.nonzero(marked).tolist()
        out = []
        for number in dict.fromkeys(int(v) for v in numbers):
            info = _ARRAY_INFO.get(number)
            if info is None:
                continue
            name, shape, _, _ = info
            sel = np.nonzero(numbers == number)[0]
            flat = int(indices[sel[0]])
            index = tuple(int(v) for v in np.unravel_index(flat % max(1, int(np.prod(shape))), shape))
            cause, extra = "before barrier", {}
            returned = self.unwritten_returned.get(number)
            if returned is not None and returned.shape == shape and returned[index]:
                cause = "returned"
                blk_idx = self.first_returned[number]
                blk = self.blocks[blk_idx]
                early = tuple(sorted((t for t, k in blk.exits if k < blk.max_barriers), key=lambda t: t[::-1]))
                passed = min(k for _, k in blk.exits if k < blk.max_barriers)
                extra = dict(block=blk_idx, returned=early, barriers_passed=passed,
                             barrier_line=blk.barrier_lines.get(passed, 0),
                             return_line=_only_return_line(self.kernel))
            elif (u := self.unwritten.get(number)) is not None and u.shape == shape and u[index]:
                cause = "unfilled"
            out.append(UnwrittenShared(name, shape, index, tuple(where[sel[0]]), len(sel), cause, **extra))
        return n, tuple(out)


def _only_return_line(fn) -> int:
    """The line of the kernel's one ``return`` statement (0 if it has none or several)."""
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        first = fn.__code__.co_firstlineno
    except (OSError, TypeError, SyntaxError, AttributeError):
        return 0
    lines = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Return)]
    return first + lines[0] - 1 if len(lines) == 1 else 0


def ledger() -> SharedLedger | None:
    """The ledger of the ``course_lib.check`` run now active (made on first use), or None."""
    g = current.active()
    if g is None:
        return None
    if g.shared_ledger is None:
        g.shared_ledger = SharedLedger()
    return g.shared_ledger
