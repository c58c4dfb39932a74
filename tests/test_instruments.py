"""The patches of numba's and Triton's internals (course_lib.instruments.patches): each applies here,
and a version that drops or reshapes an internal a patch relies on gets an error that names the patch
and the versions it was checked against, instead of a wrong result or a stray AttributeError."""

import pytest
from numba.cuda.simulator import kernel, kernelapi
from triton.runtime import interpreter

from course_lib import backend
from course_lib.instruments import guard, patches
from course_lib.instruments.patches import (
    PATCHES,
    SIMULATOR_CUDA_MODULE,
    SIMULATOR_SHARED_ARRAYS,
    TRITON_INTERPRETER,
    PatchBroken,
)

pytestmark = pytest.mark.skipif(backend.get().is_gpu, reason="the patches serve the CPU backend's simulator and interpreter")


def test_every_patch_is_named_in_the_module_docstring_with_its_versions():
    for patch in PATCHES:
        assert f":data:`{patch.name}`" in patches.__doc__, patch.name
        for part in patch.patches.replace(" and ", ", ").split(", "):  # each patched attribute is listed
            assert part.strip().lstrip(".") in patches.__doc__, (patch.name, part)
        assert any(v in patch.checked_against for v in ("Triton 3.7.1", "numba-cuda 0.30.4")), patch.name


def _patched(patch) -> list:
    """The functions or classes ``patch`` puts in place of the originals."""
    return {
        "TRITON_INTERPRETER": [interpreter.InterpreterBuilder.create_masked_load,
                               interpreter.InterpreterBuilder.create_masked_store],
        "SIMULATOR_SHARED_ARRAYS": [kernelapi.FakeCUDAShared.array, kernel.BlockManager.run,
                                    kernel.BlockThread.run, kernel.BlockThread.syncthreads],
        "SIMULATOR_CUDA_MODULE": [kernel.FakeCUDAModule],
    }[patch.name]


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.name)
def test_each_patch_applies_here(patch):
    patch.apply()
    patch.apply()  # once: a second call installs nothing over it
    assert patch.applied
    assert all(x.__module__ == patches.__name__ for x in _patched(patch)), patch.name
    patch.check()  # what it relies on is still there with the patch in place


class _Elsewhere:
    """A stand-in for a function whose parameters changed."""

    def create_masked_load(self, pointers, mask, other):  # renamed: ptrs -> pointers
        raise AssertionError("never called")


# (patch, how a new version might break it, what the error says is wrong)
BREAKS = [
    (TRITON_INTERPRETER, lambda mp: mp.delattr(interpreter, "_get_np_dtype"),
     "triton.runtime.interpreter._get_np_dtype is missing"),
    (TRITON_INTERPRETER, lambda mp: mp.setattr(interpreter.InterpreterBuilder, "create_masked_load",
                                                _Elsewhere.create_masked_load),
     "create_masked_load takes (self, pointers, mask, other), not (self, ptrs, mask, other, ...)"),
    (TRITON_INTERPRETER, lambda mp: mp.delattr(interpreter, "TensorHandle"),
     "triton.runtime.interpreter.TensorHandle is missing"),
    (SIMULATOR_SHARED_ARRAYS, lambda mp: mp.delattr(kernel, "_get_kernel_context"),
     "numba.cuda.simulator.kernel._get_kernel_context is missing"),
    (SIMULATOR_SHARED_ARRAYS, lambda mp: mp.setattr(kernelapi.FakeCUDAShared, "__init__",
                                                     lambda self, dynshared_size: None),
     "a FakeCUDAShared has no _allocations dict"),
    (SIMULATOR_SHARED_ARRAYS, lambda mp: mp.delattr(kernel.BlockThread, "syncthreads"),
     "numba.cuda.simulator.kernel.BlockThread.syncthreads is missing"),
    (SIMULATOR_CUDA_MODULE, lambda mp: mp.delattr(kernel, "FakeCUDAModule"),
     "numba.cuda.simulator.kernel.FakeCUDAModule is missing"),
    (SIMULATOR_CUDA_MODULE, lambda mp: mp.setattr(kernel.FakeCUDAModule, "__init__",
                                                   lambda self, grid_dim, block_dim: None),
     "FakeCUDAModule takes (self, grid_dim, block_dim), not (self, grid_dim, block_dim, dynshared_size)"),
]


@pytest.mark.parametrize("patch, breaks, wrong", BREAKS, ids=lambda x: getattr(x, "name", ""))
def test_a_broken_internal_names_the_patch_and_its_versions(monkeypatch, patch, breaks, wrong):
    patch.apply()
    breaks(monkeypatch)
    with pytest.raises(PatchBroken) as e:
        patch.check()
    text = str(e.value)
    assert f"course_lib's patch {patch.name} (of {patch.patches}) cannot be applied" in text
    assert wrong in text, text
    assert f"It was checked against {patch.checked_against}; installed here: numba " in text
    assert "triton " in text and "numba-cuda " in text


@pytest.mark.parametrize("patch, breaks, wrong", BREAKS[:1] + BREAKS[3:4] + BREAKS[6:7],
                         ids=lambda x: getattr(x, "name", ""))
def test_a_patch_checks_before_it_installs(monkeypatch, patch, breaks, wrong):
    """On a version that breaks it, applying a patch raises before it replaces anything."""
    before = _patched(patch) if patch is not SIMULATOR_CUDA_MODULE else []
    monkeypatch.setattr(patch, "applied", False)
    breaks(monkeypatch)
    with pytest.raises(PatchBroken, match=patch.name):
        patch.apply()
    assert not patch.applied
    if before:
        assert _patched(patch) == before


def test_the_guard_applies_the_interpreter_patch_before_it_starts(monkeypatch):
    """guarded() refuses to start on a Triton whose interpreter it cannot watch, and leaves no guard
    behind."""
    monkeypatch.setattr(TRITON_INTERPRETER, "applied", False)
    monkeypatch.delattr(interpreter, "_get_np_dtype")
    with pytest.raises(PatchBroken, match="TRITON_INTERPRETER"):
        with guard.guarded():
            pass
    assert guard.active() is None
