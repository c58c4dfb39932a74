"""What the numba.cuda stages share: handing tensors to a kernel, grid arithmetic, launch limits.

On the GPU backend a torch CUDA tensor is handed to numba without a copy through the CUDA Array
Interface; on the CPU backend (numba's CUDA simulator) a CPU tensor is handed over as a NumPy view
of the same memory, so what the kernel writes lands in the tensor.

Simulator quirk worth knowing when writing a kernel: the simulator tells shared arrays apart by the
source line that declares them, so declare each ``cuda.shared.array`` on a line of its own.

On the CPU backend, importing this module patches the simulator's shared arrays
(:data:`course_lib.instruments.patches.SIMULATOR_SHARED_ARRAYS`): a lock around their creation (a
race in the simulator), and every block's shared memory starting as marked NaN, as described in
:mod:`course_lib.instruments.shared_memory`.
"""

from __future__ import annotations

import torch

from course_lib import backend
from course_lib.instruments import guard, patches
from course_lib.model.layout import cdiv  # noqa: F401 - the stages' grid arithmetic imports it from here

# Hopper (compute capability 9.0) limits, from the CUDA C++ Programming Guide's table of technical
# specifications per compute capability: 1024 threads per block; 48 KB of *static* shared memory
# per block (more needs dynamic shared memory and an opt-in attribute).
MAX_THREADS_PER_BLOCK = 1024
MAX_STATIC_SHARED_BYTES = 48 * 1024


def kernel_array(t: torch.Tensor):
    """A view of ``t`` that a numba.cuda kernel can take (no copy). While ``course_lib.check`` runs
    on the simulator, an array it guards is handed over as a
    :class:`~course_lib.instruments.guard.NamedArray`, which names itself when a thread indexes
    outside it."""
    if backend.get().is_gpu:
        from numba import cuda

        return cuda.as_cuda_array(t.detach())
    ary = t.detach().numpy()
    g = guard.active()
    name = g.name_of(t) if g is not None else None
    return guard.NamedArray(ary, name, g.output_masks(t)) if name is not None else ary


def check_launch(stage: str, block: tuple[int, ...], shared_bytes: int = 0) -> None:
    """Refuse, before launching, a configuration the hardware cannot run."""
    threads = 1
    for v in block:
        if v < 1:
            raise ValueError(f"{stage}: block dimensions must be >= 1, got {block}")
        threads *= v
    if threads > MAX_THREADS_PER_BLOCK:
        raise ValueError(
            f"{stage}: a block of {'x'.join(map(str, block))} = {threads} threads is more than the "
            f"{MAX_THREADS_PER_BLOCK} a block may have; use a smaller tile"
        )
    if shared_bytes > MAX_STATIC_SHARED_BYTES:
        raise ValueError(
            f"{stage}: {shared_bytes} bytes of static shared memory per block is more than the "
            f"{MAX_STATIC_SHARED_BYTES} allowed; use smaller tiles"
        )


if not backend.get().is_gpu:
    patches.SIMULATOR_SHARED_ARRAYS.apply()
