"""Guard regions: find a kernel that reads or writes outside its arrays, every time, and name it.

While :func:`guarded` is active (``course_lib.check`` and the exercises turn it on), each operand a
check hands to a GEMM (:meth:`Guard.place`) and each output the GEMM allocates
(:func:`course_lib.gemm.new_output`) lies inside a larger buffer whose margins, the *guard regions*,
hold a known value (NaN around outputs, :data:`INPUT_GUARD` around operands). What a kernel does
outside its arrays then becomes visible on every backend:

* **Triton's interpreter** (the CPU backend): every load and store passes through the interpreter's
  builder (patched: :data:`course_lib.instruments.patches.TRITON_INTERPRETER`); while a guard is
  active the addresses of its active lanes are compared with the buffers, so "read 3 elements past
  the end of A" is found even when the value read is never used. A masked load without ``other=``
  gets NaN in its masked-off elements (Triton leaves them undefined), so a result that depends on
  them shows.
* **numba's CUDA simulator** (the CPU backend): numba kernels are handed, instead of bare NumPy
  arrays, views that know their name (:class:`NamedArray`); an index outside the array raises
  :class:`OutOfBounds` naming the array, the index, the thread and the source line, where the
  simulator would raise a bare ``IndexError`` from deep inside its thread machinery.
* **A GPU**: nothing intercepts the accesses, but a write outside an array lands in a guard region
  and changes it, which :meth:`Guard.violations` reports after the run; a read past an operand brings
  its guard regions' value (:data:`INPUT_GUARD`) into the result.

After the run, :meth:`Guard.violations` also reports an operand the kernel changed (a kernel writes C,
never A or B).

What the guard finds is data - a :class:`Violation` per kind of access outside an array, an
:class:`OutOfBoundsAccess` per numba thread that indexed outside one - and each renders its own
sentence (``describe``); the exercises' feedback reads the fields, never the sentences.
"""

from __future__ import annotations

import contextlib
import linecache
import math
import re
import sys
import threading
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import torch

from course_lib import backend
from course_lib.instruments import current, patches
from course_lib.instruments.current import active, kernel_frame

# Elements of margin on each side of every guarded array. A masked load that forgets the K tail
# reads up to BLOCK_K rows past the end of B (BLOCK_K x N elements); 2^16 covers every tile the
# course uses at the sizes check runs on the CPU (at most 128 x 512).
GUARD_ELEMENTS = 1 << 16
# What the guard regions hold. Around an output, NaN (as the output itself): anything a kernel
# writes there changes it. Around an operand, a finite value, exact in every course dtype: on a GPU,
# where nothing intercepts a load, what a kernel computes from memory past an operand then shows in
# its result, and stored past the end of its output it changes that guard region (NaN read and
# written back into NaN would leave no trace).
OUTPUT_GUARD = math.nan
# The poison of an output's elements: quiet NaNs with a payload ("never written"); arithmetic on NaN
# gives the canonical NaN or its operand's payload, never this one, as nothing reads the output first.
_POISON_BITS = {torch.float32: (0x7FC0F00D, torch.int32), torch.float64: (0x7FF80000F00D0000, torch.int64),
                torch.float16: (0x7E0D, torch.int16), torch.bfloat16: (0x7FCD, torch.int16)}


def never_written(t: torch.Tensor) -> torch.Tensor:
    """Where an output of :meth:`Guard.output` still holds its poison (a bool tensor like ``t``); for
    a type without a poison of its own (FP8), where it holds the NaN it was filled with."""
    if t.dtype in _POISON_BITS:
        bits, int_type = _POISON_BITS[t.dtype]
        return t.contiguous().view(int_type) == bits
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(t.element_size())
    if ints is None or not t.is_floating_point():
        return ~torch.isfinite(t)
    poison = torch.full((1,), math.nan, dtype=t.dtype, device=t.device).view(ints)
    return t.contiguous().view(ints) == poison
INPUT_GUARD = 4096.0


def input_guard(dtype: torch.dtype) -> float:
    """The value the guard regions around an operand of ``dtype`` hold: :data:`INPUT_GUARD`, or the
    type's largest value where it ends below (e4m3 at 448), exact either way."""
    return min(INPUT_GUARD, torch.finfo(dtype).max) if dtype.is_floating_point else INPUT_GUARD


@dataclass
class _Buffer:
    name: str
    storage: torch.Tensor  # the whole 1-D buffer, guard regions included
    view: torch.Tensor  # the array the kernel is given
    original: torch.Tensor | None  # a copy of an operand, to see whether the kernel changed it
    guard_fill: float  # what its guard regions hold until a kernel writes there

    @property
    def itemsize(self) -> int:
        return self.view.element_size()

    @property
    def start(self) -> int:  # address of the array's first element
        return self.view.data_ptr()

    @property
    def numel(self) -> int:
        return self.view.numel()

    @property
    def shape_text(self) -> str:
        return " x ".join(str(v) for v in self.view.shape)


@dataclass
class _Stray:
    """Accesses of one kind to one side of one array: how many distinct elements, how far out."""

    elements: set = field(default_factory=set)

    def add(self, offsets: np.ndarray) -> None:
        self.elements.update(int(v) for v in np.unique(offsets))


class Guard:
    """The guarded buffers of one GEMM call and what the kernel did outside them."""

    def __init__(self) -> None:
        self.buffers: list[_Buffer] = []
        self._stray: dict[tuple[str, str, str], _Stray] = {}  # (array, 'read'/'write', side)
        self._lock = threading.Lock()
        self.undefined_loads = 0  # masked-off elements Triton loaded with no other= (made NaN)
        # numba's simulator: what blocks did with shared memory (course_lib.instruments.shared_memory)
        self.shared_ledger = None
        # numba's simulator: the threads that indexed outside an array (NamedArray)
        self.out_of_bounds: list[OutOfBoundsAccess] = []
        # numba's simulator: per output, where the kernel stored and where it read before storing
        self._written: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    # ---- making the arrays ----------------------------------------------------------------
    def _new(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device, fill: float,
             guard_fill: float) -> _Buffer:
        n = math.prod(shape)
        storage = torch.full((n + 2 * GUARD_ELEMENTS,), guard_fill, dtype=dtype, device=device)
        view = storage[GUARD_ELEMENTS:GUARD_ELEMENTS + n].view(shape)
        view.fill_(fill)
        buf = _Buffer(name, storage, view, None, guard_fill)
        self.buffers.append(buf)
        return buf

    def place(self, t: torch.Tensor, name: str) -> torch.Tensor:
        """A copy of operand ``t`` inside a guarded buffer (contiguous, as ``t`` was made)."""
        buf = self._new(name, tuple(t.shape), t.dtype, t.device, 0.0, input_guard(t.dtype))
        buf.view.copy_(t)
        buf.original = t.clone()
        return buf.view

    def output(self, shape: tuple[int, ...], dtype: torch.dtype, device, name: str = "C") -> torch.Tensor:
        """An output array, inside a guarded buffer, poisoned with NaN: a NaN of its own bits
        (:func:`never_written`), which no arithmetic makes, so an element that still holds them was
        never written (a NaN the kernel computed, from a masked load without other=, has other bits)."""
        view = self._new(name, shape, dtype, device, math.nan, OUTPUT_GUARD).view
        if dtype in _POISON_BITS:
            bits, int_type = _POISON_BITS[dtype]
            view.view(int_type).fill_(bits)
        return view

    def name_of(self, t) -> str | None:
        """The name of the guarded array ``t`` is a view of (None for anything else)."""
        ptr = t.data_ptr() if isinstance(t, torch.Tensor) else t.__array_interface__["data"][0]
        for buf in self.buffers:
            if buf.start <= ptr < buf.start + buf.numel * buf.itemsize:
                return buf.name
        return None

    def output_masks(self, t) -> tuple[np.ndarray, np.ndarray] | None:
        """For an output the GEMM allocated (numba's simulator): two boolean arrays of its shape,
        (stored to, read before being stored to), that the kernel's :class:`NamedArray` fills in."""
        for buf in self.buffers:
            if buf.original is None and t.data_ptr() == buf.start and tuple(t.shape) == tuple(buf.view.shape):
                if buf.name not in self._written:
                    shape = tuple(buf.view.shape)
                    self._written[buf.name] = (np.zeros(shape, bool), np.zeros(shape, bool))
                return self._written[buf.name]
        return None

    def output_writes(self, name: str = "C") -> tuple[torch.Tensor | None, int]:
        """(where the kernel stored into output ``name``, None if not known - not a numba kernel on
        the simulator; how many of its elements it read before storing to them)."""
        masks = self._written.get(name)
        if masks is None:
            return None, 0
        return torch.from_numpy(masks[0].copy()), int(masks[1].sum())

    # ---- what the kernel did -----------------------------------------------------------------
    def note(self, addresses: np.ndarray, kind: str) -> None:
        """Record the addresses one load or store of Triton's interpreter touched (active lanes)."""
        if addresses.size == 0:
            return
        addresses = addresses.astype(np.int64, copy=False)
        for buf in self.buffers:
            lo = buf.storage.data_ptr()
            hi = lo + buf.storage.numel() * buf.itemsize
            inside = addresses[(addresses >= lo) & (addresses < hi)]
            if inside.size == 0:
                continue
            offsets = (inside - buf.start) // buf.itemsize
            for side, sel in (("before", offsets < 0), ("after", offsets >= buf.numel)):
                if sel.any():
                    with self._lock:
                        self._stray.setdefault((buf.name, kind, side), _Stray()).add(offsets[sel])

    def undefined_note(self) -> str:
        """Why NaN may have come from a masked load (empty if none loaded undefined elements)."""
        if not self.undefined_loads:
            return ""
        return ("masked loads without other= read elements that Triton leaves undefined (the check makes "
                "them NaN): give tl.load an other= value wherever the masked-off elements are used")

    def violations(self) -> list[Violation]:
        """What the kernel did outside its arrays (and to its operands), one :class:`Violation` per
        array, kind of access and side."""
        out = []
        for buf in self.buffers:
            guard = torch.cat([buf.storage[:GUARD_ELEMENTS], buf.storage[GUARD_ELEMENTS + buf.numel:]]).float()
            kept = torch.isnan(guard) if math.isnan(buf.guard_fill) else guard == buf.guard_fill
            changed = int((~kept).sum())
            shape = tuple(buf.view.shape)
            for kind in ("read", "write"):
                for side in ("before", "after"):
                    stray = self._stray.get((buf.name, kind, side))
                    if stray is not None:
                        elements = stray.elements
                        reach = max(elements) - buf.numel + 1 if side == "after" else -min(elements)
                        out.append(Violation(buf.name, kind, side, len(elements), reach, shape))
            if changed and not any(k == (buf.name, "write", s) for k in self._stray for s in ("before", "after")):
                out.append(Violation(buf.name, "write", "", changed, 0, shape))
            if buf.original is not None and not _same(buf.view, buf.original):
                out.append(Violation(buf.name, "changed", "", 0, 0, shape))
        return out


def _same(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Whether two arrays hold the same bits (1-byte float types compare as bytes: torch cannot
    compare them as numbers)."""
    if x.element_size() == 1:
        x, y = x.view(torch.uint8), y.view(torch.uint8)
    return bool(torch.equal(x, y))


def _elements(n: int) -> str:
    return f"{n} element{'s' if n != 1 else ''}"


@dataclass(frozen=True)
class Violation:
    """One kind of thing a kernel did outside an array, or to an operand, as the guard found it.

    ``kind`` "read" or "write" with ``side`` "before" (its first element) or "after" (its last): Triton's
    interpreter saw the accesses, so ``elements`` counts the distinct elements touched and ``reach``
    says how far out the farthest lay. ``kind`` "write" with ``side`` "": a guard region changed after
    the run (any backend; where and how far are not known): ``elements`` counts the changed ones.
    ``kind`` "changed": the operand ``array`` itself was changed."""

    array: str
    kind: str
    side: str
    elements: int
    reach: int
    shape: tuple[int, ...]

    @property
    def verb(self) -> str:
        return {"read": "read", "write": "wrote", "changed": "changed"}[self.kind]

    @property
    def count_text(self) -> str:
        """``"3 elements"``."""
        return _elements(self.elements)

    @property
    def side_text(self) -> str:
        """``"past the end of"`` or ``"before the start of"`` ("" where the side is not known)."""
        return {"after": "past the end of", "before": "before the start of"}.get(self.side, "")

    @property
    def reach_text(self) -> str:
        """`` (up to 7 beyond its last element)`` where the farthest lay further out than the count
        says, else ""."""
        if self.reach <= self.elements or not self.side:
            return ""
        return f" (up to {self.reach} {'beyond its last' if self.side == 'after' else 'before its first'} element)"

    @property
    def shape_text(self) -> str:
        return " x ".join(str(v) for v in self.shape)

    def describe(self) -> str:
        if self.kind == "changed":
            return f"changed the operand {self.array} (a GEMM reads A and B and writes only C)"
        if not self.side:
            return f"wrote {self.count_text} outside {self.array} (into the memory around it)"
        return (f"{self.verb} {self.count_text} {self.side_text} {self.array}{self.reach_text}, "
                f"which is {self.shape_text}")


@contextlib.contextmanager
def guarded() -> Iterator[Guard]:
    """Within this block, operands placed with :meth:`Guard.place` and outputs made by
    ``new_output`` lie in guarded buffers, and Triton's interpreter reports stray accesses."""
    if current.active() is not None:
        raise RuntimeError("guarded() does not nest: one GEMM call is checked at a time")
    if not backend.get().is_gpu:  # on a GPU the interpreter is not used
        patches.TRITON_INTERPRETER.apply()
    with current.activated(Guard()) as g:
        yield g


# ---- numba's simulator ----------------------------------------------------------------------
class OutOfBounds(IndexError):
    """A numba kernel indexed outside an array on the simulator (raised by :class:`NamedArray`; its
    message is an :class:`OutOfBoundsAccess`'s, which the active guard keeps as data)."""


_GPU_WOULD = {
    "read": "on a GPU this read raises no error: it returns whatever lies there in memory, or stops "
            "the program with an illegal-address error",
    "write": "on a GPU this write raises no error: it overwrites whatever lies there in memory, or "
             "stops the program with an illegal-address error",
}


@dataclass(frozen=True)
class OutOfBoundsAccess:
    """A numba thread's read or write outside an array on the simulator, as :class:`NamedArray` found
    it: ``finding`` says what the thread did, ``note`` what a GPU would have done instead."""

    array: str
    kind: str  # "read" or "write"
    index: tuple[str, ...]  # the index as written: numbers, or a slice's repr
    shape: tuple[int, ...]
    thread: tuple[int, ...] | None  # threadIdx and blockIdx (None outside a simulated thread)
    block: tuple[int, ...] | None
    line: int = 0  # the kernel's line that made the access (0: not known) and its code
    code: str = ""

    @property
    def finding(self) -> str:
        shape = " x ".join(str(v) for v in self.shape)
        shape = f"{shape} elements long" if len(self.shape) == 1 else shape
        who = _who(self.thread, self.block) if self.thread is not None else ""
        where = f" (line {self.line}: {self.code})" if self.code else ""
        verb = "read" if self.kind == "read" else "wrote"
        return f"{who}{verb} {self.array}[{', '.join(self.index)}], but {self.array} is {shape}{where}"

    @property
    def note(self) -> str:
        return _GPU_WOULD[self.kind]

    def describe(self) -> str:
        return f"{self.finding}; {self.note}"


class NamedArray:
    """A NumPy array handed to a numba kernel on the simulator that names itself when indexed
    outside its bounds. Reads and writes inside the bounds go straight to the array. For an output,
    ``masks`` (:meth:`Guard.output_masks`) records where the kernel stored and where it read an
    element before storing to it. (The trace's arrays, :mod:`course_lib.instruments.trace`, are
    NamedArrays that also record every access.)"""

    __slots__ = ("_ary", "_name", "_written", "_read_first")

    def __init__(self, ary: np.ndarray, name: str, masks: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        self._ary, self._name = ary, name
        self._written, self._read_first = masks if masks is not None else (None, None)

    def _fail(self, idx, kind: str) -> OutOfBounds:
        """The exception for an access outside the array; the active guard keeps the access as data."""
        key = idx if isinstance(idx, tuple) else (idx,)
        t = threading.current_thread()
        inside = hasattr(t, "threadIdx")
        f = kernel_frame(sys._getframe(1), __file__)
        code = linecache.getline(f.f_code.co_filename, f.f_lineno).strip() if f is not None else ""
        access = OutOfBoundsAccess(
            self._name, kind, tuple(str(int(k)) if isinstance(k, (int, np.integer)) else repr(k) for k in key),
            tuple(self._ary.shape), tuple(t.threadIdx) if inside else None, tuple(t.blockIdx) if inside else None,
            f.f_lineno if code else 0, code)
        g = active()
        if g is not None:
            with g._lock:
                g.out_of_bounds.append(access)
        return OutOfBounds(access.describe())

    def __getitem__(self, idx):
        try:
            value = self._ary[idx]
        except IndexError:
            raise self._fail(idx, "read") from None
        if isinstance(value, np.ndarray) and value.ndim:
            masks = None if self._written is None else (self._written[idx], self._read_first[idx])
            return NamedArray(value, self._name, masks)
        if self._written is not None and not self._written[idx]:
            self._read_first[idx] = True
        return value

    def __setitem__(self, idx, value) -> None:
        try:
            self._ary[idx] = value
        except IndexError:
            raise self._fail(idx, "write") from None
        if self._written is not None:
            self._written[idx] = True

    def __getattr__(self, name):
        return getattr(self._ary, name)  # shape, size, dtype, ndim, ...

    def __len__(self) -> int:
        return len(self._ary)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._ary, dtype=dtype)


def _who(thread: tuple[int, ...], block: tuple[int, ...]) -> str:
    """``thread (x, y) of block (x, y) `` (three numbers each where z is used)."""
    n = 3 if thread[2] or block[2] else 2
    return f"thread {tuple(int(v) for v in thread[:n])} of block {tuple(int(v) for v in block[:n])} "


_SIM_PREFIX = re.compile(r"^tid=\[(\d+), (\d+), (\d+)\] ctaid=\[(\d+), (\d+), (\d+)\]:?\s*")


def simulator_message(text: str) -> tuple[str, str]:
    """(``thread (x, y) of block (x, y) `` or "", the rest) of an exception message from numba's
    simulator, which puts ``tid=[x, y, z] ctaid=[x, y, z]:`` before the message of any exception a
    kernel's thread raises."""
    m = _SIM_PREFIX.match(text)
    if not m:
        return "", text
    return _who(tuple(int(v) for v in m.groups()[:3]), tuple(int(v) for v in m.groups()[3:])), text[m.end():]


def describe_index_error(e: IndexError) -> str:
    """One sentence for an ``IndexError`` a kernel raised on numba's simulator (a
    :class:`NamedArray`'s message already says it all in words)."""
    finding, note = index_error_parts(e)
    return f"{finding}; {note}"


def index_error_parts(e: IndexError) -> tuple[str, str]:
    """(what the thread did, what a GPU would have done instead) for an ``IndexError`` a kernel
    raised on numba's simulator: from the :class:`OutOfBoundsAccess` the active guard kept, where a
    :class:`NamedArray` raised it."""
    who, rest = simulator_message(str(e))
    g = active()
    # The simulator raises, in the launching thread, a new exception of the same type made from the
    # thread's message (numba-cuda's BlockThread.run): the message tells which access it was.
    for access in (g.out_of_bounds if g is not None else ()):
        if access.describe() == rest:
            return access.finding, access.note
    if isinstance(e, OutOfBounds):
        return rest, ""
    return f"{who}indexed outside an array ({rest})", _GPU_WOULD["read"].replace("this read", "such an access")
