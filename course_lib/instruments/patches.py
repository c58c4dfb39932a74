"""Every patch the course makes to numba's or Triton's internals, in one place.

The instruments (:mod:`~course_lib.instruments.guard`, :mod:`~course_lib.instruments.shared_memory`,
:mod:`~course_lib.instruments.trace`) see what a kernel does on the CPU backend by replacing a few
functions inside numba's CUDA simulator and Triton's interpreter. Those are not public APIs: a new
version may rename or reshape them. So each patch checks, when it is applied, that every internal it
relies on is still there with the shape it was written against, and otherwise raises
:class:`PatchBroken` naming the patch, what is missing and the versions it was checked against
(``tests/test_instruments.py`` applies each and simulates a break).

Each patch, once installed, stays installed and does nothing unless an instrument is active: the
guard of a ``course_lib.check`` run (:func:`course_lib.instruments.guard.active`) or a trace
(:func:`tracing`).

1. :data:`TRITON_INTERPRETER` patches ``triton.runtime.interpreter.InterpreterBuilder.create_masked_load``,
   ``.create_masked_store``, ``.create_atomic_rmw`` and ``.create_atomic_cas``. Why: every load, store
   and atomic of a kernel run by the interpreter passes through them; while a guard is active they
   tell it the addresses of the active lanes (so a read past an array is named even when the value is
   never used), and a masked load without ``other=`` gets NaN in its masked-off elements (Triton
   leaves them undefined). Relies on their parameters ``(self, ptrs, mask, other, ...)``, ``(self,
   ptrs, value, mask, ...)``, ``(self, rmwOp, ptr, val, mask, ...)`` and ``(self, ptr, cmp, val,
   ...)``, on ``interpreter._get_np_dtype`` and on ``interpreter.TensorHandle(data, dtype)``. Applied by
   ``guard.guarded()`` on the CPU backend. Checked against Triton 3.7.1 (``requirements-lock.txt``);
   the interpreter runs only on the CPU backend, so the H200's Triton 3.6.0 never applies it.

2. :data:`SIMULATOR_SHARED_ARRAYS` patches ``numba.cuda.simulator.kernelapi.FakeCUDAShared.array``,
   ``numba.cuda.simulator.kernel.BlockManager.run``, ``.BlockThread.run`` and
   ``.BlockThread.syncthreads``. Why: (a) a bug - the simulator creates a block's shared array when
   the first of its threads (Python threads) reaches the declaration, with no lock; two threads that
   get there at once each create an array, and one thread then writes where the others never read
   (a rare wrong result in CI; a 256-thread kernel with a short thread switch interval reproduces it
   in a few runs out of thirty): the patch puts a lock around the creation; (b) every block gets new
   shared arrays filled with marked NaN (:func:`~course_lib.instruments.shared_memory.sentinel_array`)
   instead of the arrays the block before it left; (c) during a check, the block's end, its threads'
   exits and the lines of its barriers go to the run's
   :class:`~course_lib.instruments.shared_memory.SharedLedger`. Relies on ``FakeCUDAShared``'s
   ``array(self, shape, dtype, alignment=None)`` and its ``_allocations`` dict keyed by the declaring
   (file, line); ``kernelapi.types.Type`` and ``kernelapi.numpy_support.as_dtype``;
   ``kernel._get_kernel_context()`` (the launch's ``FakeCUDAModule``, whose ``_shared`` holds the
   arrays); ``BlockManager.run(self, grid_point, *args)`` and its ``_f`` (the kernel's function);
   ``BlockThread``'s ``run()``, ``syncthreads()``, ``exception``, ``blockIdx`` and ``threadIdx``.
   Applied when ``course_lib.kernels._numba_support`` is imported on the CPU backend. Checked
   against numba-cuda 0.30.4 (which holds the simulator) with numba 0.68.1 (``requirements-lock.txt``).

3. :data:`SIMULATOR_CUDA_MODULE` patches ``numba.cuda.simulator.kernel.FakeCUDAModule`` (the ``cuda``
   a kernel sees on the simulator, which ``FakeCUDAKernel.__call__`` makes per launch) with a
   subclass. Why: while a trace is active (:func:`tracing`) its ``cuda.shared`` is the trace's (each
   shared array recorded, one per call site) and each ``cuda.syncthreads()`` is counted, so the
   trace knows which barriers lie between two accesses. Relies on ``FakeCUDAModule(grid_dim,
   block_dim, dynshared_size)``, its ``_shared`` and ``syncthreads()``, and on
   ``FakeCUDAKernel.__call__`` naming ``FakeCUDAModule`` from the ``kernel`` module's globals.
   Applied by ``trace_kernel``, on either backend (the trace always runs on the simulator). Checked
   against numba-cuda 0.30.4 with numba 0.68.1 (the lock) and 0.68.0 (the H200's, with the same
   numba-cuda 0.30.4).
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import threading
import traceback
from dataclasses import dataclass, field
from importlib import metadata
from typing import Callable, Iterator

import numpy as np

from course_lib.instruments import current, shared_memory


class PatchBroken(RuntimeError):
    """An internal of numba or Triton that a patch relies on is gone or has changed shape."""


def installed_versions() -> str:
    """The versions of the patched packages installed here, for :class:`PatchBroken`'s message."""
    found = []
    for name in ("numba", "numba-cuda", "triton"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} not installed")
    return ", ".join(found)


@dataclass
class Patch:
    """One patch of a third-party internal: what it patches, the versions it was checked against,
    the check of every internal it relies on (a list of what is missing or changed) and the
    installation, done once."""

    name: str
    patches: str
    checked_against: str
    find_problems: Callable[[], list[str]]
    install: Callable[[], None]
    applied: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def check(self) -> None:
        """Raise :class:`PatchBroken` if an internal the patch relies on is missing or changed."""
        try:
            problems = self.find_problems()
        except ImportError as e:
            problems = [f"cannot import it ({e})"]
        if problems:
            raise PatchBroken(
                f"course_lib's patch {self.name} (of {self.patches}) cannot be applied: {'; '.join(problems)}. "
                f"It was checked against {self.checked_against}; installed here: {installed_versions()}. "
                f"See course_lib/instruments/patches.py."
            )

    def apply(self) -> None:
        """Check the internals, then install the patch (once; later calls do nothing)."""
        with self._lock:
            if self.applied:
                return
            self.check()
            self.install()
            self.applied = True


def _parameters(fn) -> list[str]:
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def _expect(problems: list[str], owner, where: str, attribute: str, starts_with: tuple[str, ...] | None = None) -> None:
    """Note in ``problems`` if ``owner.attribute`` (``owner`` is named ``where``) is missing, or (for
    a function) if its parameters do not start with ``starts_with``."""
    value = getattr(owner, attribute, None)
    if value is None:
        problems.append(f"{where}.{attribute} is missing")
    elif starts_with is not None and tuple(_parameters(value)[: len(starts_with)]) != starts_with:
        problems.append(f"{where}.{attribute} takes ({', '.join(_parameters(value))}), not "
                        f"({', '.join(starts_with)}, ...)")


# ---- 1. Triton's interpreter: loads and stores seen by the guard --------------------------------
def _triton_problems() -> list[str]:
    from triton.runtime import interpreter

    problems: list[str] = []
    where = "triton.runtime.interpreter"
    _expect(problems, interpreter, where, "InterpreterBuilder")
    builder = getattr(interpreter, "InterpreterBuilder", None)
    if builder is not None:
        name = f"{where}.InterpreterBuilder"
        _expect(problems, builder, name, "create_masked_load", ("self", "ptrs", "mask", "other"))
        _expect(problems, builder, name, "create_masked_store", ("self", "ptrs", "value", "mask"))
        _expect(problems, builder, name, "create_atomic_rmw", ("self", "rmwOp", "ptr", "val", "mask"))
        _expect(problems, builder, name, "create_atomic_cas", ("self", "ptr", "cmp", "val"))
    _expect(problems, interpreter, where, "_get_np_dtype")
    handle = getattr(interpreter, "TensorHandle", None)
    if handle is None:
        problems.append("triton.runtime.interpreter.TensorHandle is missing")
    elif tuple(_parameters(handle)[:2]) != ("data", "dtype"):
        problems.append(f"triton.runtime.interpreter.TensorHandle takes ({', '.join(_parameters(handle))}), "
                        "not (data, dtype, ...)")
    return problems


def _active_lanes(ptrs, mask) -> np.ndarray:
    data = np.asarray(ptrs.data)
    return data[np.broadcast_to(np.asarray(mask.data, dtype=bool), data.shape)]


def _install_triton() -> None:
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    load, store = builder.create_masked_load, builder.create_masked_store

    def create_masked_load(self, ptrs, mask, other, *args, **kwargs):
        g = current.active()
        if g is not None:
            g.note(_active_lanes(ptrs, mask), "read")
            dtype = interpreter._get_np_dtype(ptrs.get_element_ty())
            if other is None and np.issubdtype(dtype, np.floating):
                # Without other=, Triton leaves the masked-off elements undefined (the interpreter
                # gives zeros, a GPU whatever it likes): during a check they are NaN, so a result
                # that depends on them shows.
                off = ~np.broadcast_to(np.asarray(mask.data, dtype=bool), np.shape(ptrs.data))
                if off.any():
                    g.undefined_loads += int(off.sum())
                    other = interpreter.TensorHandle(np.full(np.shape(ptrs.data), np.nan, dtype=dtype),
                                                     ptrs.get_element_ty())
        return load(self, ptrs, mask, other, *args, **kwargs)

    def create_masked_store(self, ptrs, value, mask, *args, **kwargs):
        g = current.active()
        if g is not None:
            g.note(_active_lanes(ptrs, mask), "write")
        return store(self, ptrs, value, mask, *args, **kwargs)

    builder.create_masked_load, builder.create_masked_store = create_masked_load, create_masked_store

    # Atomics read and write: each active lane's address is noted as a write (tl.atomic_add and the
    # other read-modify-write operations take a mask; tl.atomic_cas has none, every lane is active).
    rmw, cas = builder.create_atomic_rmw, builder.create_atomic_cas

    def create_atomic_rmw(self, rmwOp, ptr, val, mask, *args, **kwargs):
        g = current.active()
        if g is not None:
            g.note(_active_lanes(ptr, mask), "write")
        return rmw(self, rmwOp, ptr, val, mask, *args, **kwargs)

    def create_atomic_cas(self, ptr, cmp, val, *args, **kwargs):
        g = current.active()
        if g is not None:
            g.note(np.asarray(ptr.data).reshape(-1), "write")
        return cas(self, ptr, cmp, val, *args, **kwargs)

    builder.create_atomic_rmw, builder.create_atomic_cas = create_atomic_rmw, create_atomic_cas


TRITON_INTERPRETER = Patch(
    "TRITON_INTERPRETER",
    "triton.runtime.interpreter.InterpreterBuilder.create_masked_load, .create_masked_store, .create_atomic_rmw "
    "and .create_atomic_cas",
    "Triton 3.7.1 (requirements-lock.txt; only the CPU backend runs the interpreter)",
    _triton_problems, _install_triton,
)


# ---- Triton's language as imported, for its compiler ----------------------------------------------
# Not a patch: a copy. While it runs a kernel, the interpreter replaces functions and methods of
# triton.language (tl, tl.core, tl.math, tl.tensor, ...) with versions that compute with NumPy, and
# puts them back after; but a @triton.jit function called from a kernel (tl.sum is one) replaces them
# again and never puts them back (triton/runtime/interpreter.py, InterpretedFunction.__call__, Triton
# 3.7.1). Triton's compiler, run later in the same process (course_lib.exercises._triton's front-end
# check), then meets NumPy versions and fails on a right kernel. So the CPU backend keeps a copy of the
# language's namespaces as they were imported - when the course's Triton modules are imported, which
# is before any of their kernels runs - and the compiler runs inside :func:`triton_language_as_imported`.
_LANGUAGE_AS_IMPORTED: dict | None = None


def _language_namespaces() -> list:
    import triton.language as tl

    return [tl, tl.core, tl.math, tl.tensor, tl.dtype, tl.core.tensor_descriptor_base]


def _the_interpreters(value) -> bool:
    """Whether ``value`` is one of the interpreter's replacements (a function of its module, bare, in a
    functools.partial or behind a property)."""
    fn = getattr(value, "func", value)
    fn = getattr(fn, "fget", fn)
    return getattr(fn, "__module__", None) == "triton.runtime.interpreter" and callable(fn) and hasattr(fn, "__code__")


def keep_triton_language_as_imported() -> None:
    """Copy triton.language's namespaces, once (the course's Triton modules call this as they are
    imported). A copy that already holds the interpreter's replacements (a kernel ran before) is not
    kept: the front-end check then says nothing rather than compile against them."""
    global _LANGUAGE_AS_IMPORTED
    if _LANGUAGE_AS_IMPORTED is None:
        copy = {id(ns): (ns, dict(vars(ns))) for ns in _language_namespaces()}
        if not any(_the_interpreters(v) for _, names in copy.values() for v in names.values()):
            _LANGUAGE_AS_IMPORTED = copy


@contextlib.contextmanager
def triton_language_as_imported() -> Iterator[bool]:
    """Within this block triton.language is as it was imported (yields True), and afterwards as it
    was before the block; yields False, changing nothing, where no copy was kept."""
    if _LANGUAGE_AS_IMPORTED is None:
        yield False
        return
    undo = []  # (namespace, name, value or _ABSENT) to put back
    try:
        for ns, original in _LANGUAGE_AS_IMPORTED.values():
            now = dict(vars(ns))
            for name, value in original.items():
                if now.get(name, _ABSENT) is not value:
                    undo.append((ns, name, now.get(name, _ABSENT)))
                    setattr(ns, name, value)
            for name in now.keys() - original.keys():
                undo.append((ns, name, now[name]))
                delattr(ns, name)
        yield True
    finally:
        for ns, name, value in reversed(undo):
            if value is _ABSENT:
                delattr(ns, name)
            else:
                setattr(ns, name, value)


_ABSENT = object()


# ---- 2. numba's simulator: shared arrays, once per block, marked NaN, with the check's ledger -------
def _shared_arrays_problems() -> list[str]:
    from numba.cuda.simulator import kernel, kernelapi

    problems: list[str] = []
    api, sim = "numba.cuda.simulator.kernelapi", "numba.cuda.simulator.kernel"
    _expect(problems, kernelapi, api, "FakeCUDAShared")
    shared = getattr(kernelapi, "FakeCUDAShared", None)
    if shared is not None:
        _expect(problems, shared, f"{api}.FakeCUDAShared", "array", ("self", "shape", "dtype", "alignment"))
        if not isinstance(getattr(shared(0), "_allocations", None), dict):
            problems.append("a FakeCUDAShared has no _allocations dict")
    _expect(problems, getattr(kernelapi, "types", None), f"{api}.types", "Type")
    _expect(problems, getattr(kernelapi, "numpy_support", None), f"{api}.numpy_support", "as_dtype")
    _expect(problems, kernel, sim, "_get_kernel_context")
    _expect(problems, kernel, sim, "BlockManager")
    _expect(problems, kernel, sim, "BlockThread")
    manager, thread = getattr(kernel, "BlockManager", None), getattr(kernel, "BlockThread", None)
    if manager is not None and thread is not None:
        _expect(problems, manager, f"{sim}.BlockManager", "run", ("self", "grid_point", "args"))
        _expect(problems, thread, f"{sim}.BlockThread", "run", ("self",))
        _expect(problems, thread, f"{sim}.BlockThread", "syncthreads", ("self",))
        m = manager(len, (1, 1, 1), (1, 1, 1), False)
        if not hasattr(m, "_f"):
            problems.append("a BlockManager has no _f (the kernel's function)")
        t = thread(len, m, (0, 0, 0), (0, 0, 0), False)
        missing = [a for a in ("exception", "blockIdx", "threadIdx") if not hasattr(t, a)]
        if missing:
            problems.append(f"a BlockThread has no {', '.join(missing)}")
    return problems


def _install_shared_arrays() -> None:
    from numba.cuda.simulator import kernel, kernelapi

    shared = kernelapi.FakeCUDAShared
    original = shared.array
    lock = threading.Lock()

    def array(self, shape, dtype, alignment=None):
        if alignment is not None or shape == 0:  # refused, or the one dynamic buffer: no allocation race
            return original(self, shape, dtype, alignment)
        if isinstance(dtype, kernelapi.types.Type):  # as the original does
            dtype = kernelapi.numpy_support.as_dtype(dtype)
        # Keyed, like the original, by the declaring line: the caller's file and line number.
        caller = tuple(traceback.extract_stack(sys._getframe(1), limit=1)[0][0:2])
        with lock:
            res = self._allocations.get(caller)
            if res is None:
                res = self._allocations[caller] = shared_memory.sentinel_array(shape, dtype, *caller)
        return res

    block_run = kernel.BlockManager.run

    def run(self, grid_point, *args):
        ctx = kernel._get_kernel_context()
        allocations = getattr(getattr(ctx, "_shared", None), "_allocations", None)
        if allocations is not None:
            allocations.clear()  # this block's shared arrays are new, and NaN
        ledger = shared_memory.ledger()
        if ledger is None:
            return block_run(self, grid_point, *args)
        idx = tuple(int(v) for v in grid_point)
        ledger.block(idx)
        ledger.kernel = self._f
        try:
            return block_run(self, grid_point, *args)
        finally:
            ledger.end_block(idx, dict(allocations) if allocations is not None else {})

    thread_run, thread_sync = kernel.BlockThread.run, kernel.BlockThread.syncthreads

    def thread_main(self):
        thread_run(self)
        ledger = shared_memory.ledger()
        if ledger is not None and self.exception is None:
            blk = ledger.block(tuple(int(v) for v in self.blockIdx))
            blk.exits.append((tuple(int(v) for v in self.threadIdx)[:2] if self.threadIdx.z == 0
                              else tuple(int(v) for v in self.threadIdx), getattr(self, "course_lib_barriers", 0)))

    def syncthreads(self):
        ledger = shared_memory.ledger()
        if ledger is not None:
            n = getattr(self, "course_lib_barriers", 0)
            blk = ledger.block(tuple(int(v) for v in self.blockIdx))
            if n not in blk.barrier_lines:
                f = current.kernel_frame(sys._getframe(1), __file__)
                blk.barrier_lines[n] = f.f_lineno if f is not None else 0
            self.course_lib_barriers = n + 1
            blk.max_barriers = max(blk.max_barriers, n + 1)
        thread_sync(self)

    shared.array = array
    kernel.BlockManager.run = run
    kernel.BlockThread.run, kernel.BlockThread.syncthreads = thread_main, syncthreads


SIMULATOR_SHARED_ARRAYS = Patch(
    "SIMULATOR_SHARED_ARRAYS",
    "numba.cuda.simulator.kernelapi.FakeCUDAShared.array and numba.cuda.simulator.kernel.BlockManager.run, "
    ".BlockThread.run, .BlockThread.syncthreads",
    "numba-cuda 0.30.4 with numba 0.68.1 (requirements-lock.txt; only the CPU backend applies it)",
    _shared_arrays_problems, _install_shared_arrays,
)


# ---- 3. numba's simulator: the launch's `cuda` module, traced --------------------------------------
_TRACE = None  # the trace being recorded (course_lib.instruments.trace), while tracing() is active
_TRACE_LOCK = threading.Lock()


@contextlib.contextmanager
def tracing(recorder) -> Iterator[None]:
    """Within this block, simulator launches hand ``recorder`` their ``cuda.shared``
    (``recorder.shared(inner)`` returns what the kernel gets instead) and their barriers
    (``recorder.barrier()``, after the wait). One trace at a time: the simulator runs one launch at a
    time anyway."""
    global _TRACE
    SIMULATOR_CUDA_MODULE.apply()
    with _TRACE_LOCK:
        _TRACE = recorder
        try:
            yield
        finally:
            _TRACE = None


def _cuda_module_problems() -> list[str]:
    from numba.cuda.simulator import kernel

    problems: list[str] = []
    module = getattr(kernel, "FakeCUDAModule", None)
    if not isinstance(module, type):
        return ["numba.cuda.simulator.kernel.FakeCUDAModule is missing"]
    params = tuple(_parameters(module.__init__))
    if params != ("self", "grid_dim", "block_dim", "dynshared_size"):
        problems.append(f"FakeCUDAModule takes ({', '.join(params)}), not (self, grid_dim, block_dim, dynshared_size)")
    elif not hasattr(module((1, 1, 1), (1, 1, 1), 0), "_shared"):
        problems.append("a FakeCUDAModule has no _shared")
    _expect(problems, module, "numba.cuda.simulator.kernel.FakeCUDAModule", "syncthreads", ("self",))
    call = getattr(getattr(kernel, "FakeCUDAKernel", None), "__call__", None)
    if call is None or "FakeCUDAModule" not in getattr(getattr(call, "__code__", None), "co_names", ()):
        problems.append("FakeCUDAKernel.__call__ no longer makes its FakeCUDAModule from the kernel module's globals")
    return problems


def _install_cuda_module() -> None:
    from numba.cuda.simulator import kernel

    class TracedCUDAModule(kernel.FakeCUDAModule):
        """The simulator's ``cuda`` for one launch, that hands a trace its shared memory and barriers."""

        def __init__(self, grid_dim, block_dim, dynshared_size):
            super().__init__(grid_dim, block_dim, dynshared_size)
            if _TRACE is not None:
                self._shared = _TRACE.shared(self._shared)

        def syncthreads(self):
            super().syncthreads()
            if _TRACE is not None:
                _TRACE.barrier()  # after the wait: what this thread does next is in the next epoch

    kernel.FakeCUDAModule = TracedCUDAModule


SIMULATOR_CUDA_MODULE = Patch(
    "SIMULATOR_CUDA_MODULE",
    "numba.cuda.simulator.kernel.FakeCUDAModule",
    "numba-cuda 0.30.4 with numba 0.68.1 (requirements-lock.txt) and 0.68.0 (the H200's)",
    _cuda_module_problems, _install_cuda_module,
)

PATCHES = (TRITON_INTERPRETER, SIMULATOR_SHARED_ARRAYS, SIMULATOR_CUDA_MODULE)
