"""Triton's compiled kernel played on the CPU: what a launch plan's later launches
(``fast_launch.KernelLaunch``) call on a GPU, for the tests of triton_fast's and Triton FP8's plans.

The one place the tests depend on how Triton launches a compiled kernel inside, read in Triton 3.6.0
(the H200's) and 3.7.1 (the lock) and named in ``fast_launch.TRITON_CHECKED_AGAINST``. The launcher
object is the installed Triton's own class (its ``__call__`` runs as on a GPU), and its C function is
wrapped by the installed Triton's own ``wrap_handle_tensordesc``, which turns each tensor descriptor
into ``make_tensordesc_arg``'s encoding; the C function and the encoding (the driver's
``cuTensorMapEncodeTiled`` on a GPU) are played here, in the argument order of the installed version.
A played encoding names the tensor it was made for, so a launch given an encoding made for another
tensor computes with that tensor, as a GPU would. On a GPU the real runner and launcher run
under every test that calls a Triton stage twice with operands of one key.
"""

from __future__ import annotations

import contextvars
from types import SimpleNamespace

from triton.backends.nvidia import driver as nvidia_driver
from triton.backends.nvidia.driver import CudaLauncher
from triton.tools.tensor_descriptor import TensorDescriptor

from course_lib.kernels.coalescing_and_triton import fast_launch

FAKE_STREAM = 7  # the raw stream the fake GPU's device 0 is on
SCRATCH_BYTES = 128  # global scratch per program the fake kernels ask for (in-kernel descriptors)
INSTALLED_LAYOUT = fast_launch.c_launch_layout(CudaLauncher)  # the C call the installed launcher makes


class FakeLauncher(CudaLauncher):
    """Triton's launcher object (``CompiledKernel.run``) with its own ``__call__``, made without its
    ``__init__`` (which compiles C); its C function (``launch``) is :meth:`c_function`."""

    def __init__(self, compiled: "FakeCompiled") -> None:  # noqa: D107 - what CudaLauncher.__init__ sets
        self.compiled = compiled
        self.num_ctas, self.launch_cooperative_grid, self.launch_pdl = 1, False, False
        self.global_scratch_size, self.global_scratch_align = SCRATCH_BYTES, 64
        self.profile_scratch_size, self.profile_scratch_align = 0, 1
        self.arg_annotations, self.kernel_signature = object(), object()
        self.launch = nvidia_driver.wrap_handle_tensordesc(self.c_function, compiled.signature,
                                                           compiled.metadata.tensordesc_meta)

    def c_function(self, *args) -> None:
        """The C launcher: checks what it is given, calls a hook that is not None (as Triton's C code
        does), and launches the kernel with the interpreter."""
        layout = INSTALLED_LAYOUT  # read before any test replaces c_launch_layout
        if layout == "3.7":
            (gx, gy, gz, stream, function, coop, pdl, metadata, launch_metadata, enter, leave, scratch, profile,
             annotations, types, kernel_args) = args
            assert (annotations, types) == (self.arg_annotations, self.kernel_signature)
        else:
            assert layout == "3.6", "fake_compiled plays the C launcher of Triton 3.6 and 3.7 only"
            gx, gy, gz, stream, function, coop, pdl, scratch, profile, metadata, launch_metadata, enter, leave, \
                *kernel_args = args
        assert (stream, function, metadata, coop, pdl, profile) == (
            FAKE_STREAM, self.compiled.function, self.compiled.packed_metadata, False, False, None)
        assert scratch == ("scratch", gx * gy * gz * SCRATCH_BYTES, 64, FAKE_STREAM), scratch
        if FakeCompiled.in_runner:
            FakeCompiled.runs += 1
            assert launch_metadata is FakeCompiled.LAUNCH_METADATA
        else:
            FakeCompiled.direct += 1
            assert launch_metadata is None and enter is None and leave is None  # no hooks: none passed
        if enter is not None:
            enter(launch_metadata)
        self.compiled.launch_interpreted((gx, gy, gz), decoded(list(kernel_args)))
        if leave is not None:
            leave(launch_metadata)


# ---- tensor descriptors: Triton's encoding for the C function, played ------------------------------
class Encoded:
    """A played TMA descriptor: the address it was made for, and the box."""

    def __init__(self, address: int, block: list[int]) -> None:
        self.address, self.block = address, list(block)


def fake_make_tensordesc_arg(arg: TensorDescriptor, metadata: dict) -> list:
    """``make_tensordesc_arg`` played: the encoded descriptor, then shape and strides (as Triton's, for
    a descriptor with TMA metadata). Every encoding is counted, and the tensor it was made for kept."""
    assert metadata == {"descriptor": "played"}, metadata
    Played.encodings += 1
    Played.tensors[arg.base.data_ptr()] = arg.base
    return [Encoded(arg.base.data_ptr(), arg.block_shape), *arg.shape, *arg.strides]


def decoded(args: list) -> list:
    """The C function's arguments with each played encoding, and its shape and strides after it, made a
    descriptor again - of the tensor at the encoded address - for the interpreter."""
    out, i = [], 0
    while i < len(args):
        arg = args[i]
        if isinstance(arg, Encoded):
            rank = len(arg.block)
            shape, strides = args[i + 1:i + 1 + rank], args[i + 1 + rank:i + 1 + 2 * rank]
            out.append(TensorDescriptor(Played.tensors[arg.address], shape, strides, arg.block))
            i += 1 + 2 * rank
        else:
            out.append(arg)
            i += 1
    return out


class Played:
    """What the played encoding has done: how many encodings it made, and the tensor at each address
    (kept alive, so that no address is reused while a test runs)."""

    encodings = 0
    tensors: dict = {}


def _scratch(size: int, alignment: int, stream: int) -> tuple:
    """The allocator Triton's launcher asks for scratch (``triton.set_allocator``'s), played."""
    return ("scratch", size, alignment, stream)


class FakeCompiled:
    """Stands for Triton's CompiledKernel: ``self[grid]`` is a runner that takes every parameter of
    the kernel positionally, in its signature's order (constexprs too), and calls ``self.run`` (a
    :class:`FakeLauncher`) with the grid, stream, function, metadata, launch metadata, both hooks and
    those parameters, as the real runner does. The C launcher hands the parameters to the interpreter
    by name, so a parameter in the wrong place computes a wrong C. ``runs`` counts launches through the
    runner, ``direct`` those without it."""

    runs = direct = 0
    in_runner = False
    LAUNCH_METADATA = object()  # what the runner builds for a launch hook

    def __init__(self, kernel, args: list):
        self.kernel = kernel
        self.function, self.packed_metadata = object(), object()
        # The compiled signature's kinds, as far as the launcher reads them: which parameters are
        # tensor descriptors (each with TMA metadata, as on Hopper).
        self.signature = {name: "tensordesc<played>" if isinstance(arg, TensorDescriptor) else "played"
                          for name, arg in zip(kernel.arg_names, args)}
        descriptors = sum(isinstance(arg, TensorDescriptor) for arg in args)
        self.metadata = SimpleNamespace(tensordesc_meta=[{"descriptor": "played"}] * descriptors or None)
        self.run = FakeLauncher(self)

    def launch_interpreted(self, grid, args):
        assert len(grid) == 3
        assert len(args) == len(self.kernel.arg_names), (args, self.kernel.arg_names)
        self.kernel[grid](**dict(zip(self.kernel.arg_names, args)))

    def __getitem__(self, grid):
        def runner(*args):
            runtime = fast_launch.triton.knobs.runtime
            FakeCompiled.in_runner = True
            try:
                self.run(grid[0], grid[1], grid[2], FAKE_STREAM, self.function, self.packed_metadata,
                         FakeCompiled.LAUNCH_METADATA, runtime.launch_enter_hook, runtime.launch_exit_hook, *args)
            finally:
                FakeCompiled.in_runner = False

        return runner

    @staticmethod
    def launches() -> int:
        """Launches so far without the JIT, by the runner or directly."""
        return FakeCompiled.runs + FakeCompiled.direct


class Jit:
    """A kernel whose launch through the JIT returns a (fake) compiled kernel, as on a GPU; every
    such launch's grid is appended to ``launches``."""

    def __init__(self, kernel, launches: list):
        self.kernel, self.launches, self.arg_names, self.fn = kernel, launches, kernel.arg_names, kernel.fn

    def __getitem__(self, grid):
        def launch(*args, **meta):
            self.launches.append(grid)
            self.kernel[grid](*args, **meta)
            return FakeCompiled(self.kernel, [*args, *(meta.get(n) for n in self.arg_names[len(args):])])

        return launch


def launched_as_on_a_gpu(monkeypatch, module, names) -> list:
    """The kernels ``names`` of ``module``, as the plans see them, return a compiled kernel from their
    first launch, launched again on the fake GPU's stream with scratch from a played allocator; returns
    the list of the JIT's launches."""
    launches = []
    for name in names:
        monkeypatch.setattr(module, name, Jit(getattr(module, name), launches))
    monkeypatch.setattr(fast_launch, "CompiledKernel", FakeCompiled)
    monkeypatch.setattr(fast_launch, "_stream_queries", lambda: (lambda: 0, {0: FAKE_STREAM}.__getitem__))
    monkeypatch.setattr(fast_launch._allocation, "_allocator", contextvars.ContextVar("fake", default=_scratch))
    monkeypatch.setattr(nvidia_driver, "make_tensordesc_arg", fake_make_tensordesc_arg)
    monkeypatch.setattr(Played, "tensors", {})
    return launches
