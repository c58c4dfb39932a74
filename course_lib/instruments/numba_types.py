"""The types numba gives a kernel's local variables, found without a GPU.

numba's CUDA simulator runs a kernel's Python source as Python, so a sum that numba would compile as
float64 (``acc = 0``, ``acc = 0.0``, ``acc, k = 0.0, 0``, ``float64(a) * b`` ...) runs and passes
there like any other. What numba makes of it is decided by its type inference, which is the same
for every target: the kernel's source is compiled here by numba's CPU compiler, with each
``cuda.*`` name replaced by a stand-in of the same types (an index is an int64, ``cuda.grid(2)`` a
pair of them, a shared or local array an array of its dtype, ``cuda.fma(a, b, c)`` is ``a * b + c``),
and the argument types of a real launch. Nothing of it runs.

:func:`local_types` gives each local variable's types; None where the source cannot be read or
holds a ``cuda`` name this module has no stand-in for (a check then says nothing rather than guess).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import types as pytypes
from typing import Any

import numpy as np

# cuda.<name> (or cuda.<name>.<attribute>) -> the stand-in's global name in the compiled copy.
_INDEX_SPACES = {"threadIdx", "blockIdx", "blockDim", "gridDim"}
_SCALARS = {"warpsize", "laneid"}
_CALLS = {
    "grid": "_cuda_grid", "gridsize": "_cuda_grid",
    "syncthreads": "_cuda_sync", "syncwarp": "_cuda_sync", "threadfence": "_cuda_sync",
    "threadfence_block": "_cuda_sync", "threadfence_system": "_cuda_sync",
    "syncthreads_count": "_cuda_sync", "syncthreads_and": "_cuda_sync", "syncthreads_or": "_cuda_sync",
    "fma": "_cuda_fma",
    "shared.array": "_cuda_array", "local.array": "_cuda_array", "const.array_like": "_cuda_same",
    "atomic.add": "_cuda_atomic_add",
}


class _NoStandIn(Exception):
    """The kernel uses a cuda name without a stand-in here."""


def _stand_ins() -> dict[str, Any]:
    """The functions the rewritten source calls, compiled by numba for the CPU. An index is read
    from an array so that it is an int64 the compiler cannot fold into a constant (a constant
    would let numba prune a branch such as ``if tx == 0:`` and never type what is inside it)."""
    import numba  # noqa: PLC0415
    from numba.core import types  # noqa: PLC0415
    from numba.extending import overload  # noqa: PLC0415

    opaque = np.zeros(1, dtype=np.int64)

    @numba.njit
    def index():
        return opaque[0]

    def grid(n):  # pragma: no cover - typed through the overload below
        raise NotImplementedError

    @overload(grid)
    def _grid(n):
        if not isinstance(n, types.IntegerLiteral):
            raise numba.core.errors.RequireLiteralValue(n)
        dims = n.literal_value
        if dims == 1:
            return lambda n: index()
        if dims == 2:
            return lambda n: (index(), index())
        return lambda n: (index(), index(), index())

    def array(shape, dtype):  # pragma: no cover
        raise NotImplementedError

    @overload(array)
    def _array(shape, dtype):
        return lambda shape, dtype: np.empty(shape, dtype)

    @numba.njit
    def sync(*args):
        return index()

    @numba.njit
    def fma(a, b, c):
        return a * b + c

    @numba.njit
    def same(x):
        return x

    @numba.njit
    def atomic_add(ary, idx, value):
        old = ary[idx]
        ary[idx] += value
        return old

    return {"_cuda_index": index, "_cuda_grid": numba.njit(lambda n: grid(n)), "_cuda_sync": sync,
            "_cuda_fma": fma, "_cuda_same": same, "_cuda_atomic_add": atomic_add,
            "_cuda_array": numba.njit(lambda shape, dtype: array(shape, dtype))}


class _Rewrite(ast.NodeTransformer):
    """``cuda.threadIdx.x`` -> ``_cuda_index()``, ``cuda.grid(2)`` -> ``_cuda_grid(2)``, ... for the
    names ``names`` that the kernel's globals bind to numba's cuda module."""

    def __init__(self, names: set[str]):
        self.names = names

    def _path(self, node) -> list[str] | None:
        """``cuda.shared.array`` -> ["shared", "array"]; None when the chain does not start at cuda."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.names and parts:
            return parts[::-1]
        return None

    def visit_Call(self, node):
        path = self._path(node.func)
        if path is None:
            return self.generic_visit(node)
        name = _CALLS.get(".".join(path))
        if name is None:
            raise _NoStandIn(".".join(path))
        args = [self.visit(a) for a in node.args]
        if name == "_cuda_array":  # shape and dtype, by position or by keyword
            kw = {k.arg: self.visit(k.value) for k in node.keywords}
            args = args + [kw[k] for k in ("shape", "dtype")[len(args):] if k in kw]
            keywords = []
        else:
            keywords = [self.visit(k) for k in node.keywords]
        return ast.copy_location(ast.Call(ast.Name(name, ast.Load()), args, keywords), node)

    def visit_Attribute(self, node):
        path = self._path(node)
        if path is None:
            return self.generic_visit(node)
        if (len(path) == 2 and path[0] in _INDEX_SPACES and path[1] in ("x", "y", "z")) or (
                len(path) == 1 and path[0] in _SCALARS):
            return ast.copy_location(ast.Call(ast.Name("_cuda_index", ast.Load()), [], []), node)
        raise _NoStandIn(".".join(path))


def _is_cuda_module(value) -> bool:
    return isinstance(value, pytypes.ModuleType) and value.__name__ in ("numba.cuda", "numba_cuda.numba.cuda")


def is_cuda_function(value) -> bool:
    """A numba.cuda kernel or device function (the simulator's or the GPU's)."""
    return hasattr(value, "py_func") and type(value).__module__.startswith(("numba.cuda", "numba_cuda"))


def function_source(fn) -> tuple[ast.FunctionDef, dict[str, Any]]:
    """``fn``'s definition, parsed, without its decorators, and the names it can read: its globals,
    and for a function made by a function (make_tiled_kernel(TILE)) its closure's cells. Raises
    ValueError where its source is not one ``def``."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise ValueError(f"the source of {fn.__name__} is not a def")
    fdef.decorator_list = []
    scope = dict(fn.__globals__)
    if fn.__closure__:
        scope.update(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__)))
    return fdef, scope


def _compiled_copy(fn, seen: dict) -> Any:
    """``fn`` (a kernel's or device function's Python function) rewritten and wrapped by numba.njit."""
    import numba  # noqa: PLC0415

    if fn in seen:
        return seen[fn]
    fdef, scope = function_source(fn)
    names = {k for k, v in scope.items() if _is_cuda_module(v)}
    fdef = _Rewrite(names).visit(fdef)
    scope.update(_stand_ins())
    for name in {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name)}:
        value = scope.get(name)
        inner = getattr(value, "py_func", None)
        if is_cuda_function(value) and inner is not fn:  # a device function of the learner's: compiled alike
            scope[name] = _compiled_copy(inner, seen)
    module = ast.fix_missing_locations(ast.Module([fdef], []))
    exec(compile(module, f"<numba types of {fn.__name__}>", "exec"), scope)  # noqa: S102 - the kernel's own source
    seen[fn] = numba.njit(scope[fdef.name])
    return seen[fn]


def _arg_type(value):
    import numba  # noqa: PLC0415
    from numba.core import types  # noqa: PLC0415

    if hasattr(value, "dtype") and hasattr(value, "ndim"):  # numpy, the check's NamedArray, device arrays
        return types.Array(numba.from_dtype(np.dtype(str(value.dtype))), value.ndim, "A")
    return numba.typeof(value)


def local_types(kernel, args) -> dict[str, set] | None:
    """Each local variable of ``kernel`` (a numba.cuda kernel), and of the device functions it calls
    (named ``"s (in dot)"``), with the numba types it takes when launched with ``args`` (e.g.
    ``{"acc": {float32}, "row": {int64}}``; a name assigned twice may take two). None where it cannot be found: no source, a cuda name without a stand-in, or numba
    refusing the kernel (its own error then reaches the learner when it runs on a GPU)."""
    fn = getattr(kernel, "py_func", None) or kernel
    seen: dict = {}
    try:
        copy = _compiled_copy(fn, seen)
        signature = tuple(_arg_type(a) for a in args)
        copy.compile(signature)
        typemaps = [("", copy.overloads[signature].type_annotation.typemap)]
        # the learner's device functions, as the kernel's typing compiled them: "s (in dot)"
        typemaps += [(f" (in {inner.__name__})", result.type_annotation.typemap)
                     for inner, dispatcher in seen.items() if dispatcher is not copy
                     for result in dispatcher.overloads.values()]
    except Exception:  # noqa: BLE001 - any failure means: not known, and the caller says nothing
        return None
    found: dict[str, set] = {}
    for where, typemap in typemaps:
        for name, typ in typemap.items():
            if name.startswith(("$", "arg.")):
                continue
            found.setdefault(name.split(".")[0] + where, set()).add(typ)
    return found


def float64_locals(kernel, args) -> list[str] | None:
    """The local variables of ``kernel`` that numba computes in float64 (scalars, or arrays of float64
    such as a shared tile), in the order first seen; None where the types cannot be found."""
    from numba.core import types  # noqa: PLC0415

    found = local_types(kernel, args)
    if found is None:
        return None
    return [name for name, kinds in found.items()
            if any(t == types.float64 or (isinstance(t, types.Array) and t.dtype == types.float64) for t in kinds)]
