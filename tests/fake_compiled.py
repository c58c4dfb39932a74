"""Triton's compiled kernel played on the CPU: what a launch plan's later launches
(``fast_launch.KernelLaunch``) call on a GPU, for the tests of triton_fast's and Triton FP8's plans.

The one place the tests depend on how Triton launches a compiled kernel inside, read in Triton 3.6.0
(the H200's) and 3.7.1 (the lock) and named in ``fast_launch.TRITON_CHECKED_AGAINST``. On a GPU the
real runner and launcher run under every test that calls a Triton stage twice with operands of one key.
"""

from __future__ import annotations

from course_lib.kernels.coalescing_and_triton import fast_launch

FAKE_STREAM = 7  # the raw stream the fake GPU's device 0 is on


class FakeCompiled:
    """Stands for Triton's CompiledKernel: ``self[grid]`` is a runner that takes every parameter of
    the kernel positionally, in its signature's order (constexprs too), as the real one does, and
    ``self.run`` the launcher the runner calls (grid, stream, function, metadata, launch metadata, two
    hooks, then those parameters). Both hand the parameters to the interpreter by name, so a parameter
    in the wrong place computes a wrong C. ``runs`` counts the runner's launches, ``direct`` the
    launcher's called without the runner."""

    runs = direct = 0

    def __init__(self, kernel):
        self.kernel = kernel
        self.function, self.packed_metadata = object(), object()

    def _launch(self, grid, args):
        assert len(grid) == 3
        assert len(args) == len(self.kernel.arg_names), (args, self.kernel.arg_names)
        self.kernel[grid](**dict(zip(self.kernel.arg_names, args)))

    def __getitem__(self, grid):
        def runner(*args):
            FakeCompiled.runs += 1
            self._launch(grid, args)

        return runner

    def run(self, gx, gy, gz, stream, function, metadata, launch_metadata, enter_hook, exit_hook, *args):
        assert (stream, function, metadata) == (FAKE_STREAM, self.function, self.packed_metadata)
        assert launch_metadata is None and enter_hook is None and exit_hook is None
        FakeCompiled.direct += 1
        self._launch((gx, gy, gz), args)

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
            return FakeCompiled(self.kernel)

        return launch


def launched_as_on_a_gpu(monkeypatch, module, names) -> list:
    """The kernels ``names`` of ``module``, as the plans see them, return a compiled kernel from their
    first launch, launched again on the fake GPU's stream; returns the list of the JIT's launches."""
    launches = []
    for name in names:
        monkeypatch.setattr(module, name, Jit(getattr(module, name), launches))
    monkeypatch.setattr(fast_launch, "CompiledKernel", FakeCompiled)
    monkeypatch.setattr(fast_launch, "_stream_queries", lambda: (lambda: 0, {0: FAKE_STREAM}.__getitem__))
    return launches
