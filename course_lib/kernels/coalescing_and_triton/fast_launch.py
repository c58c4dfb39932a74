"""What launches the ``triton_fast`` kernels (:mod:`.fast`) with a configuration (:mod:`.fast_configs`).

* :func:`fast_matmul`, the wrapper with one given configuration: check the operands, allocate C,
  launch (or, where no candidate fits the GPU's shared memory, launch the portable configuration);
* :class:`FastPlan`, one configuration decided once for operands of one key and launched again
  without Triton's JIT (the launch plan :mod:`.autotune` keeps per key). Its later launches go
  through Triton's compiled kernel directly, which is not a public API: :class:`KernelLaunch`, which
  the Triton FP8 GEMM's plans (:mod:`.fast_fp8`) use too, checks the first time it does so that the
  internals it relies on are there (:func:`require_triton_runner`);
* split-K's ranges and its per-launch workspace (:func:`split_k_workspace`);
* :func:`transpose`, which copies B^T for the configurations that read B K-major.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from pathlib import Path

import torch
import triton
from triton.backends.nvidia import driver as nvidia_driver
from triton.compiler import CompiledKernel
from triton.runtime import _allocation
from triton.tools.tensor_descriptor import TensorDescriptor

from course_lib import backend
from course_lib import dtypes
from course_lib.gemm import Operands, new_output, prepare
from course_lib.kernels.coalescing_and_triton import common
from course_lib.kernels.coalescing_and_triton.fast import (
    fast_matmul_kernel,
    grouped_matmul_kernel,
    persistent_matmul_kernel,
    split_k_matmul_kernel,
    transpose_kernel,
)
from course_lib.kernels.coalescing_and_triton.fast_configs import (
    PORTABLE_CONFIGS,
    TRANSPOSE_BLOCK,
    TRANSPOSE_WARPS,
    FastConfig,
    candidates,
    persistent_programs,
)

# ---- Triton's internals that a plan's later launches rely on -------------------------------------
# Read in Triton's source (triton/compiler/compiler.py, triton/runtime/jit.py) of these versions:
TRITON_CHECKED_AGAINST = "Triton 3.6.0 (the H200's) and 3.7.1 (requirements-lock.txt)"


class TritonRunnerChanged(RuntimeError):
    """An internal of Triton's that :class:`FastPlan`'s direct launches rely on is gone or has changed."""


@functools.cache
def triton_runner_problems() -> tuple[str, ...]:
    """What is missing or changed among the internals a plan's runner relies on (empty: nothing):

    * ``CompiledKernel[grid]`` gives ``runner(*args, stream=None)``, which launches with ``args`` as
      given;
    * ``JITFunction.run`` launches a compiled kernel with ``*bound_args.values()``: every parameter of
      the kernel in its signature's order, constexprs included - what the runner must be given too;
    * a JIT kernel's ``arg_names`` lists its parameters in that order;
    * for the direct launch (:meth:`KernelLaunch.launch`): the runner calls ``self.run(grid[0], grid[1],
      grid[2], stream, self.function, self.packed_metadata, launch_metadata, <enter hook>, <exit hook>,
      *args)``, and the CUDA launcher (its C source in ``backends/nvidia``) calls a hook only when it
      is not None.
    """
    from triton.runtime.jit import JITFunction  # noqa: PLC0415

    problems = []
    getitem = getattr(triton.compiler.CompiledKernel, "__getitem__", None)
    runner = " ".join(inspect.getsource(getitem).split()) if getitem is not None else ""
    if "def runner(*args" not in runner:
        problems.append("triton.compiler.CompiledKernel[grid] no longer gives runner(*args, stream=None)")
    elif _RUNNER_RUNS not in runner:
        problems.append("triton.compiler.CompiledKernel's runner no longer calls self.run(grid[0], grid[1], grid[2], "
                        "stream, self.function, self.packed_metadata, launch_metadata, ...)")
    # The launcher's C source: backends/nvidia/driver.c (3.7), or a template in driver.py (3.6).
    nvidia = Path(triton.__file__).parent / "backends" / "nvidia"
    launcher = "".join(p.read_text() for p in (nvidia / "driver.c", nvidia / "driver.py") if p.is_file())
    if "hook != Py_None" not in launcher:
        problems.append("Triton's CUDA launcher (backends/nvidia/driver.c or .py) no longer skips a launch hook "
                        "that is None")
    run = getattr(JITFunction, "run", None)
    if run is None or "*bound_args.values())" not in inspect.getsource(run):
        problems.append("triton.runtime.jit.JITFunction.run no longer launches with *bound_args.values()")
    names = getattr(fast_matmul_kernel, "arg_names", None)
    if names != list(inspect.signature(fast_matmul_kernel.fn).parameters):
        problems.append("a JIT kernel's arg_names is no longer its parameters in their order")
    return tuple(problems)


# What the runner runs, whitespace collapsed (Triton 3.6.0 and 3.7.1); the direct launch does the same.
_RUNNER_RUNS = ("self.run(grid[0], grid[1], grid[2], stream, self.function, self.packed_metadata, launch_metadata, "
                "knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *args)")


def no_launch_hooks() -> bool:
    """True when no launch hook is set (``triton.knobs.runtime.launch_enter_hook`` / ``_exit_hook``: a
    profiler such as Proton sets them; Triton 3.6 and 3.7 keep each as a chain of hooks, empty by
    default, older Tritons as a function or None)."""
    runtime = triton.knobs.runtime
    enter, leave = runtime.launch_enter_hook, runtime.launch_exit_hook  # read on every launch: a profiler may set them
    return not (getattr(enter, "calls", enter) or getattr(leave, "calls", leave))


@functools.cache
def _stream_queries():
    """(current device, current raw stream of a device): what Triton's runner asks its driver for, the
    device query without ``torch.cuda.current_device``'s lazy-init check (:func:`common.cuda_queries`;
    a plan exists only after a launch, so CUDA is initialised)."""
    from triton.runtime.driver import driver  # noqa: PLC0415 - a GPU's driver, never the interpreter's

    return common.cuda_queries()[1], driver.active.get_current_stream


# What Triton's CUDA launcher object (``CompiledKernel.run``, a ``CudaLauncher`` of
# backends/nvidia/driver.py) does when called, whitespace collapsed: it asks Triton's allocator for the
# kernel's global scratch (grid size x CTAs x the kernel's scratch bytes; the profiler's scratch the
# same way, which only a profiled compile has), then calls its C launcher. The C launcher's argument
# order differs between the versions; each version's call, as its source has it:
_SCRATCH_LINES = ("alloc_size = grid_size * self.num_ctas * size", "alloc_fn = allocator.get()",
                  "return alloc_fn(alloc_size, align, stream)",
                  "global_scratch = allocate_scratch(self.global_scratch_size, self.global_scratch_align, "
                  "_allocation._allocator)")
_C_LAUNCH_CALLS = {
    "3.6": "self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, self.launch_pdl, "
           "global_scratch, profile_scratch, *args)",
    "3.7": "self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, self.launch_pdl, "
           "kernel_metadata, launch_metadata, launch_enter_hook, launch_exit_hook, global_scratch, profile_scratch, "
           "self.arg_annotations, self.kernel_signature, args)",
}


@functools.cache
def c_launch_layout(launcher_type: type) -> str | None:
    """Which of :data:`_C_LAUNCH_CALLS` the launcher class's ``__call__`` makes ("3.6", "3.7"), if it
    also allocates its scratch as :data:`_SCRATCH_LINES` say; None otherwise (the direct launch then
    calls the launcher object, which is correct for any Triton whose runner passes the check)."""
    try:
        source = " ".join(inspect.getsource(launcher_type.__call__).split())
    except (OSError, TypeError, AttributeError):
        return None
    if not all(line in source for line in _SCRATCH_LINES):
        return None
    return next((version for version, call in _C_LAUNCH_CALLS.items() if call in source), None)


# What Triton's launcher does with a launch's tensor descriptors (``wrap_handle_tensordesc`` in
# backends/nvidia/driver.py, around the C function), whitespace collapsed: each descriptor argument
# becomes ``make_tensordesc_arg(arg, meta)``, a TMA descriptor encoded by the driver
# (``cuTensorMapEncodeTiled``) followed by the shape and strides, on every launch. Each version's lines:
_DESCRIPTOR_WRAPS = {
    "3.6": ("final_args.extend(make_tensordesc_arg(arg, tensordesc_meta[tensordesc_idx]))",
            "return launcher(*final_args)"),
    "3.7": ("final_kernel_args.extend(make_tensordesc_arg(arg, tensordesc_meta[tensordesc_idx]))",
            "return launcher(*base_args, final_kernel_args)"),
}


@functools.cache
def descriptor_wrap_layout() -> str | None:
    """Which of :data:`_DESCRIPTOR_WRAPS` the installed Triton's ``wrap_handle_tensordesc`` does ("3.6",
    "3.7"), if its ``make_tensordesc_arg`` takes (arg, metadata); None otherwise."""
    try:
        wrap = " ".join(inspect.getsource(nvidia_driver.wrap_handle_tensordesc).split())
        make = inspect.signature(nvidia_driver.make_tensordesc_arg)
    except (OSError, TypeError, AttributeError):
        return None
    if list(make.parameters) != ["arg", "metadata"]:
        return None
    return next((v for v, lines in _DESCRIPTOR_WRAPS.items() if all(line in wrap for line in lines)), None)


def unwrapped_launcher(launch) -> object | None:
    """The C function that Triton's ``wrap_handle_tensordesc`` wrapped into ``launch`` (its closure's
    ``launcher``), or None where ``launch`` is not such a wrapper of a known version."""
    wrapper = "wrap_handle_tensordesc.<locals>.inner"
    if descriptor_wrap_layout() is None or getattr(launch, "__qualname__", "") != wrapper:
        return None
    return inspect.getclosurevars(launch).nonlocals.get("launcher")


class DescriptorArgs:
    """What Triton's launcher passes its C function for a launch's tensor descriptors, made once per
    address: ``expand(front)`` is ``front`` with the tensor at each descriptor's position replaced by
    what ``make_tensordesc_arg`` makes of a descriptor of it (the encoded TMA descriptor, then shape
    and strides).

    Triton's launcher encodes every descriptor again on every launch; three of them added about 7 us
    to a planned call of ``triton_fast`` at 64^3 on an H100 (experiments/JOURNAL.md). What it encodes
    is the base address, the shape, the strides, the element type, the box and the swizzle; a plan's
    later launches describe tensors of the first launch's shapes, strides and element types with its
    boxes (:meth:`KernelLaunch.described`), so only the address can differ, and the encoding made for
    an address serves every later launch on it (PyTorch's caching allocator hands the same blocks out
    again). The cache holds addresses, not tensors; it is emptied when it holds :data:`LIMIT`."""

    LIMIT = 64

    def __init__(self, templates: dict[int, TensorDescriptor], metas: list[dict]) -> None:
        self.slots = dict(zip(sorted(templates), zip((templates[i] for i in sorted(templates)), metas)))
        self.made: dict[tuple[int, int], tuple] = {}

    def __call__(self, front: tuple) -> list:
        args = []
        for i, t in enumerate(front):
            slot = self.slots.get(i)
            if slot is None:
                args.append(t)
                continue
            made = self.made.get((i, t.data_ptr()))
            if made is None:
                if len(self.made) >= self.LIMIT:
                    self.made.clear()
                template, meta = slot
                made = tuple(nvidia_driver.make_tensordesc_arg(rebased(template, t), meta))
                self.made[i, t.data_ptr()] = made
            args.extend(made)
        return args


def require_triton_runner() -> None:
    """Raise :class:`TritonRunnerChanged` if :func:`triton_runner_problems` finds any (checked once)."""
    problems = triton_runner_problems()
    if problems:
        raise TritonRunnerChanged(
            f"The launch plans of the course's Triton kernels (triton_fast, triton_fp8) call Triton's compiled "
            f"kernel directly, and {'; '.join(problems)}. "
            f"The plan was checked against {TRITON_CHECKED_AGAINST}; installed here: Triton {triton.__version__}. "
            "See KernelLaunch in course_lib/kernels/coalescing_and_triton/fast_launch.py."
        )


# ---- a kernel launched again with new leading arguments, without the JIT -----------------------------
class KernelLaunch:
    """A Triton kernel launched once through its JIT, ``kernel[grid](*front, *rest, **meta)``, and then
    again on the same grid with new ``front`` arguments (the tensors) and the same ``rest`` and ``meta``
    (sizes, strides, constexprs, warps, stages): ``launch(*front)``.

    On a GPU the first launch returns the ``CompiledKernel``, and later launches call it directly:
    ``compiled[grid]`` gives a runner that takes every parameter of the kernel positionally in its
    signature's order, constexprs included (what ``JITFunction.run`` passes it, ``*bound_args.values()``;
    :func:`require_triton_runner` checks these internals before the first runner is made, against
    :data:`TRITON_CHECKED_AGAINST`). That skips the JIT's keyword binding, specialisation and cache
    look-up, and is right while the specialisation would come out the same: it reads each integer
    argument (1, a multiple of 16) and each pointer's 16-byte alignment, so the caller launches again
    only with front tensors of the same element types and alignment (a plan's key holds them). The
    interpreter (the CPU backend) returns no compiled kernel: there every launch is ``kernel[grid]``.
    The kernel's parameters after ``front`` and ``rest`` must all be constexprs given in ``meta``.

    Tensor descriptors (``TensorDescriptor``, made on the host) among the first launch's ``front``
    are templates: a later launch passes the tensor itself at that position, of the first one's shape,
    strides, element type and alignment, and the launch describes it with the template's box
    (:meth:`described`) - or, where it calls the launcher's C function, passes the encoding made once
    per address (:class:`DescriptorArgs`).

    While no launch hook is set (:func:`no_launch_hooks`), a launch does what the runner does without
    its per-call Python: the current stream, then the compiled kernel's launcher with no launch metadata
    and no hooks (the runner builds the metadata only for a hook, and the launcher skips a hook that
    is None); with a hook set it goes through the runner. Where the launcher object is one whose call
    :func:`c_launch_layout` knows (Triton 3.6 and 3.7), a launch does that call's work too: the scratch
    from Triton's allocator, then the launcher's C function, with what the launcher object would pass
    it (its ``__call__`` defines a function and asks for two scratch buffers on every launch).
    """

    def __init__(self, kernel, grid: tuple, front: tuple, rest: tuple, meta: dict) -> None:
        self.kernel, self.grid, self.rest, self.meta = kernel, grid, tuple(rest), meta
        # The templates keep no tensor: a plan made inside torch.compile's CUDA-graph warm-up that held
        # its first C alive would leave a block in the graph's memory pool that no output owns (an H100
        # raised "Detected 1 tensor(s) in the cudagraph pool not tracked as outputs").
        self.templates = {i: rebased(arg, None) for i, arg in enumerate(front) if isinstance(arg, TensorDescriptor)}
        self.compiled = kernel[grid](*front, *self.rest, **meta)
        self.runner = self.c_launch = self.expand = None
        if isinstance(self.compiled, CompiledKernel):  # a GPU
            require_triton_runner()
            grid3 = grid + (1,) * (3 - len(grid))  # the runner reads three axes
            self.runner = self.compiled[grid3]
            self.tail = self.rest + tuple(meta[name] for name in kernel.arg_names[len(front) + len(self.rest):])
            self.direct = (self.compiled.run, *grid3, self.compiled.function, self.compiled.packed_metadata)
            self.queries = _stream_queries()
            self.c_launch = self._c_launch(self.compiled.run, grid3)

    def launch(self, *front) -> None:
        """Launch again with ``front`` in place of the first launch's front arguments (a tensor where
        that launch had a descriptor)."""
        if self.runner is None:
            self.kernel[self.grid](*self.described(front), *self.rest, **self.meta)
        elif not no_launch_hooks():
            self.runner(*self.described(front), *self.tail)
        elif self.c_launch is None:
            run, gx, gy, gz, function, metadata = self.direct
            get_device, get_stream = self.queries
            run(gx, gy, gz, get_stream(get_device()), function, metadata, None, None, None, *self.described(front),
                *self.tail)
        else:
            layout, launch, gx, gy, gz, function, coop, pdl, metadata, size, align, annotations, types = self.c_launch
            # the tensor descriptors as the C function takes them, or as Triton's wrapper of it does
            front = self.described(front) if self.expand is None else self.expand(front)
            get_device, get_stream = self.queries
            stream = get_stream(get_device())
            scratch = _allocation._allocator.get()(size, align, stream) if size else None
            if layout == "3.7":
                launch(gx, gy, gz, stream, function, coop, pdl, metadata, None, None, None, scratch, None,
                       annotations, types, (*front, *self.tail))
            else:
                launch(gx, gy, gz, stream, function, coop, pdl, scratch, None, metadata, None, None, None,
                       *front, *self.tail)

    def described(self, front: tuple) -> tuple:
        """``front`` with each tensor at a template's position described by a copy of the template
        (:func:`rebased`)."""
        if not self.templates:
            return front
        return tuple(rebased(self.templates[i], t) if i in self.templates else t for i, t in enumerate(front))

    def _c_launch(self, launcher, grid3: tuple) -> tuple | None:
        """What :meth:`launch` needs to call the launcher's C function itself, as the launcher object
        would (:func:`c_launch_layout`); None where the layout is not known or the kernel was compiled
        for the profiler (its own scratch), when ``launch`` calls the launcher object instead.

        Where the kernel takes tensor descriptors, the launcher's C function is Triton's wrapper that
        encodes them; where the wrapper is one the course has read (:func:`unwrapped_launcher`) and
        every descriptor of the kernel is a template of the front with TMA metadata, ``launch`` calls
        the C function under it with descriptors encoded once per address (:class:`DescriptorArgs`)."""
        layout = c_launch_layout(type(launcher))
        if layout is None or getattr(launcher, "profile_scratch_size", 1) != 0:
            return None
        c_function = launcher.launch
        metas = list(getattr(self.compiled.metadata, "tensordesc_meta", None) or ())
        inner = unwrapped_launcher(c_function) if self.templates else None
        if inner is not None and len(metas) == len(self.templates) and None not in metas:
            c_function, self.expand = inner, DescriptorArgs(self.templates, metas)
        size = grid3[0] * grid3[1] * grid3[2] * launcher.num_ctas * launcher.global_scratch_size
        return (layout, c_function, *grid3, self.compiled.function, launcher.launch_cooperative_grid,
                launcher.launch_pdl, self.compiled.packed_metadata, size, launcher.global_scratch_align,
                getattr(launcher, "arg_annotations", None), getattr(launcher, "kernel_signature", None))


# ---- B as it is stored ---------------------------------------------------------------------------
def stored_n_by_k(b: torch.Tensor) -> bool:
    """Whether B (K x N) is stored N x K: the transpose of a row-major matrix, as ``x @ w.T`` passes the
    weight ``w`` of ``torch.nn.Linear``."""
    return not b.is_contiguous() and b.T.is_contiguous()


def as_stored(cfg: FastConfig, b: torch.Tensor) -> FastConfig:
    """``cfg`` reading B the way it is stored. A descriptor configuration that reads B N-major ("kn")
    cannot describe a B stored N x K (its rows along N are not contiguous), so it would fall back to the
    pointer kernel; reading B^T K-major ("nk") instead copies nothing, since B^T is that N x K matrix.
    On an H100, 3072 x 3000 x 3072 in bf16 with B stored N x K and read K-major ran at 76-79 % of cuBLAS
    against 59-62 % read N-major from a K x N copy, whose rows are off a 128-byte line there; at 3072^3
    the two reads were within two points (experiments/JOURNAL.md)."""
    if cfg.loads == "descriptors" and cfg.b_layout == "kn" and stored_n_by_k(b):
        return dataclasses.replace(cfg, b_layout="nk")
    return cfg


# ---- B^T: the transpose kernel's launch ----------------------------------------------------------
def transpose(x: torch.Tensor, block: tuple[int, int] = TRANSPOSE_BLOCK, num_warps: int = TRANSPOSE_WARPS) -> torch.Tensor:
    """``x.T.contiguous()`` with :func:`.fast.transpose_kernel` (a 2-D tensor on the backend's device)."""
    if x.dim() != 2:
        raise ValueError(f"transpose takes a 2-D tensor, not {x.dim()}-D")
    want = backend.get().torch_device
    if x.device.type != torch.device(want).type:
        raise ValueError(f"transpose: the tensor is on {x.device}, the {backend.get().name} backend runs on "
                         f"{want}; pass x.to({want!r})")
    R, C = x.shape
    out = torch.empty((C, R), dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    common.require_32bit_offsets("transpose", x, out)
    # Moving bits needs no arithmetic: 16-bit types travel as int16 (the interpreter has no bf16).
    src, dst = (x.view(torch.int16), out.view(torch.int16)) if x.element_size() == 2 else (x, out)
    grid = (triton.cdiv(R, block[0]), triton.cdiv(C, block[1]))
    transpose_kernel[grid](src, dst, R, C, src.stride(0), src.stride(1), dst.stride(0),
                           BLOCK_R=block[0], BLOCK_C=block[1], num_warps=num_warps)
    return out


# ---- the launch plan: one configuration, decided once per key of operands ------------------------
class FastPlan(KernelLaunch):
    """One configuration of the fast kernels on operands of one key (:func:`course_lib.gemm.plan_key`),
    made by launching it into ``c``; ``plan(a, b, c)`` launches it again on operands of that key.

    Decided once: B's layout, descriptors or pointers, the kernel and its grid, and every argument but
    A, B and C - sizes, strides, constexprs. Split-K's fp32 workspace and tile counters are not part of
    the plan: every launch takes its own (:func:`split_k_workspace`), so that two streams, or a CUDA
    graph and the stream it was captured on, never share them.

    The first launch goes through Triton's JIT, later ones on a GPU through the compiled kernel
    (:class:`KernelLaunch`, whose front arguments are A, B and C, and split-K's workspace and
    counters). The key holds A's and B's shapes, strides and alignment; C
    (:func:`course_lib.gemm.new_output`), B^T (the transpose kernel's output) and the workspace are
    new allocations, whose alignment is far more than 16 bytes (a test holds new_output to this).
    """

    def __init__(self, ops: Operands, dtype: str, cfg: FastConfig, c: torch.Tensor) -> None:
        self.cfg, self.M, self.N, self.c_dtype = cfg, ops.M, ops.N, c.dtype
        self.widen = not backend.get().is_gpu  # the interpreter's bf16 (common.interpretable)
        # B^T (N x K, row-major) for "nk": no copy when B is already stored that way (b = w.T, as for the
        # weight of torch.nn.Linear), otherwise one pass of the transpose kernel on every call.
        self.copy_b = cfg.b_layout == "nk" and not ops.b.T.is_contiguous()
        b_arg = self.b_arg(ops.b)
        self.descriptors = cfg.loads == "descriptors" and all(
            common.descriptor_problem(t, n) is None for t, n in ((ops.a, "a"), (b_arg, "b"), (c, "c"))
        )
        a, b_view = self.kernel_operands(ops.a, b_arg)
        meta = dict(BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
                    INPUT_PRECISION=dtypes.get(dtype).triton_precision, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
        tiles = triton.cdiv(ops.M, cfg.block_m) * triton.cdiv(ops.N, cfg.block_n)
        sizes = (ops.M, ops.N, ops.K)
        if not self.descriptors:
            # The pointer kernel always gets B's strides as a K x N matrix: for B^T that is the view
            # b_arg.T, whose strides are (1, K) - its loads then run along K.
            kernel, grid = grouped_matmul_kernel, (tiles,)
            front, rest = (a, b_view, c), (*sizes, a.stride(0), a.stride(1), b_view.stride(0), b_view.stride(1),
                                           c.stride(0), c.stride(1))
        elif cfg.split_k > 1:
            kernel, grid, front, rest, meta = launch_split_k(self.front(a, self.b_kernel(b_arg), c), sizes, meta, cfg,
                                                             c, tiles)
        else:
            meta.update(B_K_MAJOR=cfg.b_layout == "nk", C_STORE_SPLIT=cfg.epilogue_split)
            if cfg.persistent:
                kernel, grid = persistent_matmul_kernel, (min(tiles, persistent_programs()),)
            else:
                kernel, grid = fast_matmul_kernel, (tiles,)
            front, rest = self.front(a, self.b_kernel(b_arg), c), sizes
        self.split_k = kernel is split_k_matmul_kernel  # its front ends with the workspace and the counters
        self.workspace_shape = front[3].shape if self.split_k else None
        super().__init__(kernel, grid, front, rest, meta)
        # A, B and C go to a later launch as given (pointers, or tensors the launch describes): it needs
        # no view, copy or workspace, and may be ``self.launch(a, b, c)`` (autotune's planned path takes it).
        self.as_given = not (self.widen or self.split_k or cfg.b_layout == "nk")

    def front(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple:
        """A, B (as the kernel reads it: :meth:`b_kernel`) and C as the first launch gives them to this
        plan's kernel: the tensors themselves for the pointer kernel; otherwise a tensor descriptor of
        each, C's only where the kernel stores C through one (not split-K's), made here with Triton's
        checks against TMA's rules. Later launches pass the tensors, which :class:`KernelLaunch`
        describes with these descriptors' boxes."""
        if not self.descriptors:
            return a, b, c
        cfg = self.cfg
        boxes = ([cfg.block_m, cfg.block_k], [cfg.block_n, cfg.block_k] if cfg.b_layout == "nk" else
                 [cfg.block_k, cfg.block_n], [cfg.block_m, cfg.block_n // cfg.epilogue_split])
        if cfg.split_k > 1:
            return (*tensor_descriptors((a, b), boxes), c)
        return tensor_descriptors((a, b, c), boxes)

    def b_kernel(self, b_arg: torch.Tensor) -> torch.Tensor:
        """B as a descriptor kernel reads it: as given (K x N) or B^T (N x K), each row-major."""
        return common.interpretable(b_arg) if self.widen else b_arg

    def b_arg(self, b: torch.Tensor) -> torch.Tensor:
        """B as the kernel reads it: as given ("kn"), or B^T, N x K row-major ("nk")."""
        if self.cfg.b_layout == "kn":
            return b
        return transpose(b) if self.copy_b else b.T

    def kernel_operands(self, a: torch.Tensor, b_arg: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A, and B as a K x N view, as the kernel takes them."""
        if self.widen:
            a, b_arg = common.interpretable(a), common.interpretable(b_arg)
        return a, (b_arg.T if self.cfg.b_layout == "nk" else b_arg)

    def __call__(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
        """Launch again, into a new ``c``, on operands ``a`` and ``b`` of the plan's key."""
        b_arg = self.b_arg(b)
        if not self.descriptors:
            self.launch(*self.kernel_operands(a, b_arg), c)
            return
        front = (common.interpretable(a) if self.widen else a, self.b_kernel(b_arg), c)
        if self.split_k:  # this launch's own workspace and counters
            self.launch(*front, *split_k_workspace(self.workspace_shape, self.grid[0], c.device))
        else:
            self.launch(*front)


def tensor_descriptors(tensors: tuple[torch.Tensor, ...], boxes: tuple[list[int], ...]) -> tuple:
    """A tensor descriptor of each tensor, loading or storing the box given for it (``TensorDescriptor``
    checks each against TMA's rules): what a plan's first launch passes a descriptor kernel (made in
    the kernel instead, a descriptor costs every program three round trips to global memory before its
    first load: :mod:`.fast`'s kernels say more)."""
    return tuple(TensorDescriptor(t, t.shape, t.stride(), box) for t, box in zip(tensors, boxes))


def rebased(desc: TensorDescriptor, base: torch.Tensor | None) -> TensorDescriptor:
    """A copy of ``desc`` that describes ``base``: for a tensor of ``desc.base``'s shape, strides, element
    type and alignment (what a plan's key holds), which ``TensorDescriptor`` checked when ``desc`` was
    made (its checks cost about 2 us a descriptor on the course's CPU machine; a copy, half a microsecond).
    With ``base`` None, a template that describes no tensor until it is rebased again."""
    copy = object.__new__(TensorDescriptor)
    copy.__dict__.update(desc.__dict__)
    copy.base = base
    return copy


# ---- split-K: the ranges of K and each launch's workspace ----------------------------------------
def split_k_ranges(K: int, block_k: int, split_k: int) -> int:
    """Elements of K per split: whole BLOCK_K slices, shared out as evenly as they go (the last
    range may be shorter; none is empty)."""
    slices = triton.cdiv(K, block_k)
    per_split = triton.cdiv(slices, min(split_k, slices))
    return per_split * block_k


def split_k_workspace(shape: tuple[int, int, int], tiles: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """One split-K launch's fp32 partial sums (``shape``: splits x M x N) and its ``tiles`` counters.

    The partial sums are a new tensor per launch, from PyTorch's caching allocator: it hands a freed
    block out again only to work queued after it on the same stream, and inside a CUDA graph's capture
    it takes memory from the graph's own pool. The counters come from :func:`common.zeroed_counters`
    (zero when the launch starts; the last program of a tile leaves its counter zero again)."""
    partial = torch.empty(shape, dtype=torch.float32, device=device)
    return partial, common.zeroed_counters(tiles, device)


def launch_split_k(front: tuple, sizes: tuple, meta: dict, cfg: FastConfig, c: torch.Tensor, tiles: int):
    """How :func:`split_k_matmul_kernel` is launched into ``c`` (``front``: A's and B's descriptors and
    C; ``meta``: what the other fast kernels get): the kernel, its grid, its front arguments - those and
    a new fp32 workspace and the tile counters -, the arguments after them (sizes, C's strides,
    K_PER_SPLIT) and its meta-parameters."""
    M, N, K = sizes
    k_per_split = split_k_ranges(K, cfg.block_k, cfg.split_k)
    splits = triton.cdiv(K, k_per_split)  # after rounding to whole slices, maybe fewer than asked
    partial, counters = split_k_workspace((splits, M, N), tiles, c.device)
    common.require_32bit_offsets("triton_fast (split-K workspace)", partial.view(splits * M, N))
    rest = (*sizes, c.stride(0), c.stride(1), k_per_split)
    return (split_k_matmul_kernel, (tiles, splits), (*front, partial, counters), rest,
            dict(meta, SPLIT_K=splits, B_K_MAJOR=cfg.b_layout == "nk"))


# ---- the wrapper ---------------------------------------------------------------------------------
def launch_fast(ops: Operands, dtype: str, cfg: FastConfig, c: torch.Tensor):
    """Launch the fast kernel ``cfg`` asks for into ``c``; returns (compiled, used descriptors)."""
    plan = FastPlan(ops, dtype, cfg, c)
    return plan.compiled, plan.descriptors


def fast_matmul(a: object, b: object, dtype: str = "fp32", config: FastConfig | None = None) -> object:
    """C = A @ B with one given config of the fast kernels (no autotuning).

    Without ``config``: the first candidate of :data:`.fast_configs.FAST_CONFIGS` for ``dtype``, or,
    on a GPU whose shared memory it does not fit, :data:`.fast_configs.PORTABLE_CONFIGS`, each reading B
    as it is stored (:func:`as_stored`). A given ``config`` is launched as given.
    """
    stage = "triton_fast"
    ops = prepare(a, b, stage=stage, dtypes=(dtype,))
    c = new_output(ops.M, ops.N, dtypes.get(dtype).torch_dtype, ops.a.device)
    common.require_32bit_offsets(stage, ops.a, ops.b, c)
    try:
        launch_fast(ops, dtype, config or as_stored(candidates(dtype)[0], ops.b), c)
    except triton.runtime.errors.OutOfResources:
        if config is not None:
            raise
        launch_fast(ops, dtype, as_stored(PORTABLE_CONFIGS[dtype], ops.b), c)
    return ops.give_back(c)
