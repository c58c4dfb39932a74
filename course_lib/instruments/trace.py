"""Trace the memory accesses of your own numba.cuda kernel, grouped as warps issue them.

Notebooks 01, 02 and 04 call::

    from course_lib.instruments import trace_kernel
    tr = trace_kernel(my_kernel, grid, block, a, b, c)   # runs my_kernel[grid, block](a, b, c) on the simulator
    print(tr.describe())            # per source line: loads/stores, sectors per warp request, bank conflicts
    tr.requests(array="b")[0].coalescing().n_sectors    # e.g. 32 for a strided load, 4 for a coalesced one

and draw it with :func:`course_lib.viz.trace.trace_widget` (a line of the kernel and a warp: the
coalescing or bank picture).

How it works. numba's CUDA simulator (the CPU backend) runs every GPU thread of a block as a Python
thread and hands the kernel NumPy arrays. :func:`trace_kernel` hands it instead a thin wrapper
around each array argument that records every element read or written: which block and thread
(hence warp and lane) touched it, the array, the element and its byte offset, load or store, the
source line, and the thread's own access counter. ``cuda.shared.array`` is wrapped the same way while
the traced kernel runs (the simulator's ``cuda`` module is patched:
:data:`course_lib.instruments.patches.SIMULATOR_CUDA_MODULE`), so shared-memory accesses are
recorded too (and each call site gets its own array, even two on one source line - the plain
simulator gives such calls one array).

From the records, accesses are grouped the way the hardware issues them: the k-th time the lanes
of one warp execute the same access in the source is one *warp request* (lanes that skipped it,
behind a bounds check, are inactive). A global-memory request becomes a
:class:`~course_lib.model.coalescing.WarpAccess` (sectors, lines), a shared-memory request a
:class:`~course_lib.model.banks.BankAccess` (banks, conflict degree). Byte offsets are taken from the
start of each array, assumed to be 256-byte aligned for global memory (as cudaMalloc gives it) and
128-byte aligned for shared memory.

Limits: the simulator runs one block at a time, so keep the launch small (a few blocks of up to a
few hundred threads); only array arguments and shared arrays are traced (scalars, local arrays and
registers are not memory traffic in this model). On a machine with a GPU the kernel's Python source
is still run on the simulator for the trace (best effort: device functions must be simulator-
compatible).
"""

from __future__ import annotations

import inspect
import linecache
import sys
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from course_lib.instruments import patches
from course_lib.instruments.guard import NamedArray, kernel_frame
from course_lib.instruments.shared_memory import sentinel_array, shared_name
from course_lib.model.banks import BankAccess, bank_access
from course_lib.model.coalescing import WarpAccess, warp_access
from course_lib.model.hardware import WARP_SIZE


class Access(NamedTuple):
    """One element read or written by one thread."""

    block: tuple[int, int, int]
    thread: tuple[int, int, int]
    tid: int  # linear thread index in the block: x + bx * (y + by * z)
    warp: int
    lane: int
    array: str
    space: str  # 'global' or 'shared'
    kind: str  # 'load' or 'store'
    index: tuple[int, ...]  # element index in the whole array
    byte_offset: int  # bytes from the start of the array
    itemsize: int
    seq: int  # this thread's access counter (0, 1, 2, ...), over all traced arrays
    filename: str
    line: int
    instance: int  # how many times this thread had made this same access (same source spot) before
    epoch: int  # how many cuda.syncthreads() this thread had passed when it made the access
    column: int  # where on its line the access's expression starts (two accesses may share a line)


@dataclass(frozen=True)
class Race:
    """Two threads of ``block`` touching one shared element between the same two barriers."""

    block: tuple[int, int, int]
    array: str
    index: tuple[int, ...]
    store: Access  # a write to it
    other: Access  # another thread's access to it

    def describe(self) -> str:
        idx = ", ".join(map(str, self.index))
        first, second = sorted((self.store, self.other), key=lambda a: a.line)
        verb = {"store": "wrote", "load": "read"}
        who = (f"thread {first.thread[:2]} {verb[first.kind]} {self.array}[{idx}] at line {first.line} and "
               f"thread {second.thread[:2]} {verb[second.kind]} it at line {second.line}")
        barrier_between = any("syncthreads" in linecache.getline(first.filename, n)
                              for n in range(first.line + 1, second.line))
        if barrier_between:  # then the two accesses belong to different passes of a loop
            return (f"{who}, in different passes of the loop (block {self.block[:2]}): the barrier "
                    f"between those lines orders one pass, but nothing keeps the next pass's line "
                    f"{first.line} from coming before line {second.line} of this one - a barrier is "
                    f"missing after line {second.line}, once per pass (after the loop that reads the tile, "
                    f"not inside it)")
        return (f"{who} with no cuda.syncthreads() between them (block {self.block[:2]}): a barrier is "
                f"missing between lines {first.line} and {second.line}")


@dataclass(frozen=True)
class WarpRequest:
    """The lanes of one warp executing one access of the source together."""

    block: tuple[int, int, int]
    warp: int
    array: str
    space: str
    kind: str
    line: int
    instance: int
    lanes: np.ndarray
    byte_offsets: np.ndarray
    indices: tuple[tuple[int, ...], ...]
    itemsize: int

    @property
    def label(self) -> str:
        return f"line {self.line}: {self.kind} {self.array} ({self.space})"

    def coalescing(self) -> WarpAccess:
        return warp_access(self.byte_offsets, self.itemsize, self.lanes)

    def banks(self) -> BankAccess:
        return bank_access(self.byte_offsets, self.itemsize, self.lanes)

    def describe(self) -> str:
        what = self.coalescing().describe() if self.space == "global" else self.banks().describe()
        return f"block {self.block[:2]}, warp {self.warp}, {self.label}, #{self.instance}: {what}"


@dataclass
class Trace:
    """Everything one traced launch recorded."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    arrays: dict[str, dict]  # name -> {'space', 'shape', 'dtype', 'itemsize'}
    accesses: list[Access] = field(default_factory=list)
    barriers: dict[tuple, int] = field(default_factory=dict)  # (block, thread) -> cuda.syncthreads() passed

    def uneven_barriers(self) -> list[tuple[tuple[int, int, int], dict[int, list[tuple[int, int, int]]]]]:
        """The blocks whose threads passed different numbers of ``cuda.syncthreads()`` (a barrier
        inside an ``if`` some threads skip, or after a ``return``), each with its threads by count."""
        by_block: dict[tuple, dict[int, list]] = defaultdict(lambda: defaultdict(list))
        for (block, thread), n in sorted(self.barriers.items(), key=lambda kv: (kv[0][0][::-1], kv[0][1][::-1])):
            by_block[block][n].append(thread)
        return [(block, dict(counts)) for block, counts in by_block.items() if len(counts) > 1]

    def thread_accesses(self, block=(0, 0, 0), thread=(0, 0, 0)) -> list[Access]:
        """One thread's accesses in the order it made them."""
        block, thread = _dim3_index(block), _dim3_index(thread)
        return sorted((a for a in self.accesses if a.block == block and a.thread == thread), key=lambda a: a.seq)

    def requests(self, array: str | None = None, kind: str | None = None, space: str | None = None, line: int | None = None) -> list[WarpRequest]:
        """Warp requests (see the module docstring), in block, warp, program order; filtered."""
        groups: dict[tuple, list[Access]] = defaultdict(list)
        for a in self.accesses:
            if (array is None or a.array == array) and (kind is None or a.kind == kind) and (space is None or a.space == space) and (line is None or a.line == line):
                groups[(a.block[::-1], a.warp, a.filename, a.line, a.column, a.array, a.kind, a.instance)].append(a)
        out = []
        for key in sorted(groups, key=lambda k: (k[0], k[1], k[7], k[3], k[4])):
            accs = sorted(groups[key], key=lambda a: a.lane)
            first = accs[0]
            out.append(WarpRequest(
                first.block, first.warp, first.array, first.space, first.kind, first.line, first.instance,
                np.array([a.lane for a in accs]), np.array([a.byte_offset for a in accs]),
                tuple(a.index for a in accs), first.itemsize,
            ))
        return out

    def sites(self) -> list[tuple[int, str, str, str]]:
        """Distinct (line, array, kind, space) in the order the kernel first makes them."""
        seen: dict[tuple, int] = {}
        for a in sorted(self.accesses, key=lambda a: (a.block[::-1], a.tid, a.seq)):
            seen.setdefault((a.line, a.array, a.kind, a.space), len(seen))
        return sorted(seen, key=seen.get)

    def summary(self) -> list[dict]:
        """Per source access (line, array, load/store): warp requests and their average cost -
        sectors per request for global memory, conflict degree for shared memory."""
        rows = []
        for line, array, kind, space in self.sites():
            reqs = self.requests(array=array, kind=kind, space=space, line=line)
            if space == "global":
                costs = [r.coalescing().n_sectors for r in reqs]
                ideal = [r.coalescing().ideal_sectors for r in reqs]
                metric = "sectors/request"
            else:
                costs = [r.banks().conflict_degree for r in reqs]
                ideal = [1] * len(reqs)
                metric = "conflict degree"
            rows.append({
                "line": line, "array": array, "kind": kind, "space": space, "requests": len(reqs),
                "metric": metric, "mean": float(np.mean(costs)), "max": int(max(costs)), "ideal": float(np.mean(ideal)),
            })
        return rows

    def races(self, limit: int = 3) -> list[Race]:
        """Shared-memory races: two threads of one block touching one element, at least one of them
        writing, with no ``cuda.syncthreads()`` between them (both made the access between the same
        two barriers). Whatever order the simulator happened to run them in, on a GPU either may come
        first. Returns up to ``limit`` of them, the first in program order."""
        by_element: dict[tuple, dict[int, list[Access]]] = defaultdict(lambda: defaultdict(list))
        for a in self.accesses:
            if a.space == "shared":
                by_element[(a.block, a.array, a.index, a.epoch)][a.tid].append(a)
        found = []
        for (block, array, index, epoch), per_thread in by_element.items():
            if len(per_thread) < 2:
                continue
            writers = [acc[0] for acc in per_thread.values() if any(x.kind == "store" for x in acc)]
            if not writers:
                continue
            w = min(writers, key=lambda a: a.tid)
            other = next((acc[0] for tid, acc in sorted(per_thread.items()) if tid != w.tid), None)
            first_store = next(x for x in per_thread[w.tid] if x.kind == "store")
            found.append(Race(block, array, index, first_store, other))
        found.sort(key=lambda r: (r.block[::-1], r.store.epoch, r.store.seq))
        return found[:limit]

    def describe(self) -> str:
        lines = [
            f"trace of {self.kernel}[grid={self.grid[:2]}, block={self.block[:2]}]: {len(self.accesses)} "
            f"accesses by {int(np.prod(self.grid)) * int(np.prod(self.block))} threads"
        ]
        for r in self.summary():
            lines.append(
                f"  line {r['line']:>3}  {r['kind']:<5} {r['array']:<8} {r['space']:<6} {r['requests']:>4} warp requests, "
                f"{r['metric']} mean {r['mean']:.1f} (max {r['max']}, ideal {r['ideal']:.1f})"
            )
        return "\n".join(lines)


def _dim3(v) -> tuple[int, int, int]:
    if isinstance(v, (int, np.integer)):
        return (int(v), 1, 1)
    v = tuple(int(x) for x in v)
    return v + (1,) * (3 - len(v))


def _dim3_index(v) -> tuple[int, int, int]:
    v = tuple(int(x) for x in ((v,) if isinstance(v, (int, np.integer)) else v))
    return v + (0,) * (3 - len(v))


class _Recorder:
    """What one traced launch records; :func:`course_lib.instruments.patches.tracing` hands it the
    launch's shared memory (:meth:`shared`) and barriers (:meth:`barrier`)."""

    def __init__(self, block_dim: tuple[int, int, int], arrays: dict) -> None:
        self.raw: list[tuple] = []  # Access fields as plain tuples: cheap to append from 1000 threads
        self.block_dim = block_dim
        self.arrays = arrays  # name -> what Trace.arrays holds; shared arrays join as they are made
        self.seq: dict[tuple, int] = defaultdict(int)
        self.site_count: dict[tuple, int] = defaultdict(int)
        self.who: dict = {}
        self.epoch: dict = defaultdict(int)  # simulator thread -> barriers passed

    def shared(self, inner) -> _TracingShared:
        return _TracingShared(inner, self, self.arrays)

    def barrier(self) -> None:
        self.epoch[threading.current_thread()] += 1

    def _caller(self):
        """The frame of the kernel (or device function) code that made the access."""
        return kernel_frame(sys._getframe(2), __file__)

    def record(self, arr: "_TracedArray", kind: str, index: tuple[int, ...], byte_offset: int) -> None:
        t = threading.current_thread()
        who = self.who.get(t)
        if who is None:
            if not hasattr(t, "threadIdx"):
                return  # touched outside a simulated thread (e.g. by host code): not GPU traffic
            who = self.who[t] = (tuple(t.blockIdx), tuple(t.threadIdx), t.thread_id)
        f = self._caller()
        where = _site(f) if f else None
        site = (who, where, arr._name, kind)
        instance = self.site_count[site]
        self.site_count[site] = instance + 1
        seq = self.seq[who]
        self.seq[who] = seq + 1
        tid = who[2]
        self.raw.append((
            who[0], who[1], tid, tid // WARP_SIZE, tid % WARP_SIZE, arr._name, arr._space, kind, index,
            byte_offset, arr._ary.itemsize, seq, f.f_code.co_filename if f else "?", f.f_lineno if f else -1, instance,
            self.epoch[t], where[1][2] if where and where[1][2] is not None else -1,
        ))

    def accesses(self) -> list[Access]:
        return [Access._make(r) for r in self.raw]

    def barriers_passed(self) -> dict[tuple, int]:
        """(block, thread) -> the barriers it passed, for every thread that made an access."""
        return {(who[0], who[1]): self.epoch[t] for t, who in self.who.items()}


class _TracedArray(NamedArray):
    """A NumPy array (or a view of one) that reports every element read or written."""

    __slots__ = ("_space", "_rec", "_base", "_root")

    def __init__(self, ary: np.ndarray, name: str, space: str, rec: _Recorder, root: np.ndarray | None = None) -> None:
        super().__init__(ary, name)
        self._space, self._rec = space, rec
        self._root = ary if root is None else root
        self._base = ary.__array_interface__["data"][0] - self._root.__array_interface__["data"][0]

    def _root_index(self, offset: int) -> tuple[int, ...]:
        """Element index in the whole array from a byte offset (exact for C-ordered arrays, which is
        what kernels are given; for other layouts the offset is still exact)."""
        out, rest = [], offset
        for s in self._root.strides:
            q, rest = divmod(rest, s) if s else (0, rest)
            out.append(int(q))
        return tuple(out)

    def _element(self, idx) -> tuple[tuple[int, ...], int] | None:
        """(index in the root array, byte offset) if ``idx`` picks one element, else None."""
        key = idx if isinstance(idx, tuple) else (idx,)
        if len(key) != self._ary.ndim or not all(isinstance(k, (int, np.integer)) for k in key):
            return None
        offset = self._base
        for k, n, s in zip(key, self._ary.shape, self._ary.strides):
            k = int(k)
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for axis of size {n} in array {self._name!r}")
            offset += (k + n if k < 0 else k) * s
        return self._root_index(offset), int(offset)

    def __getitem__(self, idx):
        value = self._ary[idx]
        if isinstance(value, np.ndarray):  # a row or a slice: keep tracing through the view
            return _TracedArray(value, self._name, self._space, self._rec, self._root)
        el = self._element(idx)
        if el is not None:
            self._rec.record(self, "load", *el)
        return value

    def __setitem__(self, idx, value) -> None:
        self._ary[idx] = value
        el = self._element(idx)
        if el is not None:
            self._rec.record(self, "store", *el)
            return
        view = self._ary[idx]  # a slice assignment: one store per element written
        if isinstance(view, np.ndarray):
            vbase = view.__array_interface__["data"][0] - self._root.__array_interface__["data"][0]
            for sub in np.ndindex(*view.shape):
                offset = vbase + sum(i * s for i, s in zip(sub, view.strides))
                self._rec.record(self, "store", self._root_index(offset), int(offset))


class _TracingShared:
    """Stands in for the simulator's ``cuda.shared`` during a traced launch: as in a check run, each
    block gets its own shared arrays, filled with marked NaN (course_lib.instruments.shared_memory)."""

    def __init__(self, inner, rec: _Recorder, arrays: dict) -> None:
        self._inner, self._rec, self._arrays = inner, rec, arrays
        self._allocs: dict[tuple, _TracedArray] = {}  # (block, call site) -> array
        self._names: dict[tuple, str] = {}  # call site -> name
        self._lock = threading.Lock()

    def array(self, shape, dtype, alignment=None):
        from numba.cuda import types
        from numba.cuda.np import numpy_support

        block = tuple(threading.current_thread().blockIdx)
        if shape == 0:  # dynamic shared memory: the simulator's one buffer, traced as a whole
            ary = self._inner.array(shape, dtype, alignment)
            site, name = ("dynamic",), "dynamic shared"
        else:
            f = sys._getframe(1)
            site = _site(f)  # one array per call site, even two on one line
            name = self._names.get(site)
        key = (block, site)
        with self._lock:
            if key not in self._allocs:
                if shape != 0:
                    if isinstance(dtype, types.Type):
                        dtype = numpy_support.as_dtype(dtype)
                    nth = sum(1 for k in self._names if k[0] is site[0] and k[1][0] == f.f_lineno and k != site)
                    ary = sentinel_array(shape, dtype, f.f_code.co_filename, f.f_lineno, nth)
                    if name is None:
                        name = shared_name(f.f_code.co_filename, f.f_lineno, nth)
                        if name in self._arrays:  # the same name at another call site (e.g. a device function)
                            name = f"{name}@{f.f_lineno}"
                        self._names[site] = name
                self._allocs[key] = _TracedArray(ary, name, "shared", self._rec)
                self._arrays[name] = {"space": "shared", "shape": ary.shape, "dtype": str(ary.dtype), "itemsize": ary.itemsize}
            return self._allocs[key]


_POSITIONS: dict = {}


def _site(frame) -> tuple:
    """(code, source span) of the instruction a frame is executing. Not ``f_lasti`` alone: Python
    3.11+ specialises instructions as they warm up, and the offset reported for one call or
    subscript can move by its inline-cache size between the first executions and later ones, while
    the source span (line and columns) of the expression stays the same."""
    code = frame.f_code
    positions = _POSITIONS.get(code)
    if positions is None:
        positions = _POSITIONS[code] = list(code.co_positions())
    i = frame.f_lasti // 2
    pos = positions[i] if 0 <= i < len(positions) else (frame.f_lineno, None, None, None)
    if pos[2] is None:  # no column information (python -X no_debug_ranges): the line must do
        pos = (frame.f_lineno, None, None, None)
    return code, pos


def _param_names(fn, count: int) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"arg{i}" for i in range(count)]


def trace_kernel(kernel, grid, block, *args, names: tuple[str, ...] | None = None) -> Trace:
    """Run ``kernel[grid, block](*args)`` on numba's CUDA simulator, recording every element access
    of its array arguments and shared arrays. Array arguments are NumPy arrays (or simulator device
    arrays); results are written into them as by a normal launch. ``names`` labels the arrays
    (default: the kernel's parameter names). Returns a :class:`Trace`."""
    from numba.cuda.simulator import kernel as sim_kernel

    py_func = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None)
    if py_func is None:
        raise TypeError("trace_kernel takes a @cuda.jit kernel")
    if isinstance(kernel, sim_kernel.FakeCUDAKernel):
        sim = kernel
    else:  # a real GPU dispatcher: run its Python source on the simulator for the trace
        sim = sim_kernel.FakeCUDAKernel(py_func, device=False)
    grid, block = _dim3(grid), _dim3(block)
    if int(np.prod(block)) > 1024:
        raise ValueError(f"a block has at most 1024 threads, got {block}")
    arrays: dict[str, dict] = {}
    rec = _Recorder(block, arrays)
    labels = _param_names(py_func, len(args))
    labels[:len(names or ())] = names or ()  # ``names`` may label only the first arguments
    traced = []
    for label, a in zip(labels, args):
        host = getattr(a, "_ary", a)  # a simulator device array wraps its NumPy array
        if isinstance(host, np.ndarray) and host.ndim > 0:
            arrays[label] = {"space": "global", "shape": host.shape, "dtype": str(host.dtype), "itemsize": host.itemsize}
            traced.append(_TracedArray(host, label, "global", rec))
        else:
            traced.append(a)
    with patches.tracing(rec):
        sim[grid, block](*traced)
    name = getattr(py_func, "__name__", "kernel")
    return Trace(name, grid, block, arrays, rec.accesses(), rec.barriers_passed())
