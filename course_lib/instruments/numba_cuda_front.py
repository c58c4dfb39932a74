"""Whether numba's CUDA compiler accepts a kernel, found without a GPU.

numba's CUDA simulator runs a kernel's Python source as Python, so a kernel that numba's CUDA
target refuses (``sum(a[i, k] * b[k, j] for k in range(K))``: a generator; ``acc = [0.0, 0.0]``: a
list, which needs memory a kernel cannot allocate) runs and passes there. numba-cuda's own pipeline,
up to and including lowering to LLVM IR, needs neither a GPU nor NVVM: it runs here, in a separate
Python without the simulator (in this process ``numba.cuda`` *is* the simulator), on the kernel's
source rebuilt with the globals it reads. Nothing of it runs on a device.

:func:`cuda_compile_problem` gives numba's refusal, or None: accepted, or not known (a global the
rebuild cannot carry, the machinery failing); a check then says nothing rather than guess.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import types as pytypes
from pathlib import Path
from typing import Any

import numpy as np

from course_lib.instruments.numba_types import function_source, is_cuda_function

# Run as a script by the separate Python (it imports numba only, never course_lib).
_WORKER = Path(__file__).with_name("_numba_cuda_compile.py")
_MODULES = {"numba.cuda": "from numba import cuda as {name}", "numba_cuda.numba.cuda": "from numba import cuda as {name}",
            "math": "import math as {name}", "numpy": "import numpy as {name}", "numba": "import numba as {name}"}
_cache: dict[str, str | None] = {}


class _Unknown(Exception):
    """A global the rebuilt source cannot carry."""


def _global_line(name: str, value) -> str:
    """One line of Python that binds ``name`` as the kernel's globals bind it."""
    if isinstance(value, pytypes.ModuleType):
        if value.__name__ in _MODULES:
            return _MODULES[value.__name__].format(name=name)
        raise _Unknown(name)
    if isinstance(value, float):  # inf and nan have no literal
        return f"{name} = float({str(value)!r})"
    if isinstance(value, (bool, int, str)) or value is None:
        return f"{name} = {value!r}"
    if isinstance(value, (list, tuple)) and all(type(v) in (bool, int, float) for v in value):
        return f"{name} = {value!r}"  # a list as a list: numba's CUDA target refuses a global list as a GPU would
    if isinstance(value, np.generic):  # np.float32(0) and the like
        return f"import numpy as _np; {name} = _np.{type(value).__name__}({str(value.item())!r})"
    module = getattr(value, "__module__", "") or ""
    if module in ("math", "cmath") or (module == "numpy" and getattr(np, getattr(value, "__name__", ""), None) is value):
        return f"from {module} import {value.__name__} as {name}"  # math.sqrt, np.dot, np.float32 by name
    if module.startswith("numba") and hasattr(value, "name") and not callable(getattr(value, "py_func", None)):
        from numba.core import types  # noqa: PLC0415

        if getattr(types, str(value), None) == value:  # float32, int32, ...: numba's scalar types
            return f"from numba.core.types import {value} as {name}"
    raise _Unknown(name)


def _rebuild(fn, lines: list[str], done: dict, device: bool) -> str:
    """Append to ``lines`` the source of ``fn`` (decorators removed) and of what it reads; return the
    name it is bound to there."""
    if fn in done:
        return done[fn]
    fdef, scope = function_source(fn)
    done[fn] = fdef.name
    used = {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name)} - {a.arg for a in ast.walk(fdef) if isinstance(a, ast.arg)}
    for name in sorted(used):
        if name not in scope or name == fdef.name:
            continue  # a builtin (range, min, float), a local variable, or itself
        value = scope[name]
        if is_cuda_function(value) or isinstance(value, pytypes.FunctionType):
            jitted = is_cuda_function(value)
            inner = _rebuild(value.py_func if jitted else value, lines, done, device=jitted)
            if inner != name:
                lines.append(f"{name} = {inner}")
        else:
            lines.append(_global_line(name, value))
    lines.append(ast.unparse(fdef))
    if device:
        lines.append(f"from numba import cuda as _cuda; {fdef.name} = _cuda.jit(device=True)({fdef.name})")
    return fdef.name


def _arg_type(value) -> list:
    import numba  # noqa: PLC0415

    if hasattr(value, "dtype") and hasattr(value, "ndim"):  # numpy, the check's NamedArray, device arrays
        flags = getattr(value, "flags", None)
        layout = "C" if flags is None or flags.c_contiguous else "F" if flags.f_contiguous else "A"
        return ["array", str(numba.from_dtype(np.dtype(str(value.dtype)))), int(value.ndim), layout]
    return ["scalar", str(numba.typeof(value))]


def cuda_compile_verdict(kernel, args) -> tuple[str, str | None]:
    """("accepted", None), ("refused", numba's message) or ("unknown", why) for ``kernel`` (a
    numba.cuda kernel) launched with ``args``."""
    fn = getattr(kernel, "py_func", None) or kernel
    try:
        lines: list[str] = []
        name = _rebuild(fn, lines, {}, device=False)
        request = json.dumps({"source": "\n".join(lines), "kernel": name, "args": [_arg_type(a) for a in args]})
    except Exception as e:  # noqa: BLE001 - no source, or a global the rebuild cannot carry
        return "unknown", f"{type(e).__name__}: {e}"
    if request not in _cache:
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
        try:
            done = subprocess.run([sys.executable, str(_WORKER)], input=request, capture_output=True, text=True,
                                  env=env, timeout=120, check=False)
            answer: Any = json.loads(done.stdout.strip().splitlines()[-1])
        except Exception as e:  # noqa: BLE001 - the machinery failing is no finding about the kernel
            return "unknown", f"{type(e).__name__}: {e}"
        if "unknown" in answer:
            return "unknown", answer["unknown"]
        _cache[request] = answer["refused"]
    refused = _cache[request]
    return ("refused", refused) if refused else ("accepted", None)


def cuda_compile_problem(kernel, args) -> str | None:
    """numba's CUDA compiler's refusal of ``kernel`` launched with ``args``; None where it accepts it,
    or where that cannot be found out."""
    verdict, detail = cuda_compile_verdict(kernel, args)
    return detail if verdict == "refused" else None
