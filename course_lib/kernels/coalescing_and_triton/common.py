"""What every Triton kernel of notebooks 04 and 05 shares: the wrapper's checks (32-bit offsets, the
rules of tensor descriptors). tl.dot's precision argument per dtype is in course_lib.dtypes."""

from __future__ import annotations

import threading
from collections.abc import Callable

import torch
import triton

from course_lib import backend
from course_lib.instruments import patches
from course_lib.model.hardware import TMA_ALIGN_BYTES

# triton.language as imported, before any of the course's kernels runs: what the exercises' compiler
# check needs, which Triton's interpreter leaves changed (course_lib.instruments.patches).
patches.keep_triton_language_as_imported()

NOTEBOOK = "04_coalescing_and_triton"  # the tiled kernel and the article's experiment
FAST_NOTEBOOK = "05_triton_fast_kernel"  # tensor descriptors and the fast kernel


def check_tensor(stage: str, name: str, t: object, *, ndim: int, what: str, reshape_hint: str,
                 dtypes: tuple[torch.dtype, ...], verb: str) -> torch.Tensor:
    """The checks a wrapper that is not a GEMM makes of a tensor argument (kind, dimensions, element
    type, device), each refusal saying what to do; ``what`` names the shape ("1-D vector"),
    ``verb`` what the kernel does with the elements ("adds")."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{stage}: {name} must be a torch.Tensor, not {type(t).__name__}"
                        + ("; convert it with torch.from_numpy" if type(t).__module__ == "numpy" else ""))
    if t.dim() != ndim:
        raise ValueError(f"{stage}: {name} must be a {what}, but its shape is {tuple(t.shape)}; {reshape_hint}")
    if t.dtype not in dtypes:
        names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise TypeError(f"{stage}: {name} is {t.dtype}; the kernel {verb} {names}")
    want = backend.get().torch_device
    if t.device.type != torch.device(want).type:
        raise ValueError(f"{stage}: {name} is on {t.device}, but the {backend.get().name} backend runs "
                         f"the kernel on '{want}'; move it there with {name}.to({want!r})")
    return t


def interpretable(t: torch.Tensor) -> torch.Tensor:
    """The operand as the kernel should read it on this backend.

    Triton's interpreter keeps bfloat16 as raw 16-bit integers and its ``tl.dot`` multiplies those
    bit patterns (triton-lang/triton#11584; the interpreter documents no bfloat16 arithmetic).
    On the CPU backend bf16 operands are therefore widened to fp32 before the launch. The widening
    is exact and a bf16 x bf16 product is exact in fp32, so the kernel computes the same sums it
    computes on a GPU from bf16 tiles with an fp32 accumulator; C is still stored as bf16.
    """
    if t.dtype == torch.bfloat16 and not backend.get().is_gpu:
        return t.float()
    return t


_MAX_OFFSET = 2**31 - 1  # the kernels compute element offsets in 32-bit integers


def require_32bit_offsets(stage: str, *tensors: torch.Tensor) -> None:
    for t in tensors:
        last = sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride()))
        if last > _MAX_OFFSET:
            raise ValueError(
                f"{stage}: a {tuple(t.shape)} matrix has element offsets beyond 2**31 - 1, which the "
                "kernel computes in 32-bit integers; split the product into smaller blocks"
            )


def descriptor_problem(t: torch.Tensor, name: str) -> str | None:
    """Why ``t`` cannot be read through a tensor descriptor on a GPU, or None if it can.

    TMA (the copy engine behind descriptors on Hopper) needs a contiguous last dimension and a
    16-byte-aligned base address and row stride (CUDA Driver API, cuTensorMapEncodeTiled; Triton's
    ``tl.make_tensor_descriptor`` docstring). The interpreter checks the same rules.
    """
    item = t.element_size()
    if t.stride(1) != 1 and t.shape[1] > 1:
        return (
            f"{name} is not contiguous in its last dimension (strides {t.stride()}); a tensor "
            f"descriptor reads whole rows: pass {name}.contiguous()"
        )
    if t.data_ptr() % TMA_ALIGN_BYTES:
        return (
            f"{name} starts at an address that is not a multiple of {TMA_ALIGN_BYTES} bytes "
            f"(a view that begins mid-allocation?); a tensor descriptor needs a 16-byte-aligned "
            f"base: pass {name}.clone()"
        )
    if (t.stride(0) * item) % TMA_ALIGN_BYTES:
        per = TMA_ALIGN_BYTES // item
        return (
            f"{name}'s rows are {t.stride(0)} elements = {t.stride(0) * item} bytes apart, not a "
            f"multiple of {TMA_ALIGN_BYTES} bytes; a tensor descriptor needs 16-byte-aligned "
            f"row strides: pad the row length to a multiple of {per} elements, or use the pointer "
            "kernel (stage triton_tiled)"
        )
    return None


_allocator_set = False


def cuda_queries() -> tuple[Callable[[], bool], Callable[[], int]]:
    """(is the current stream capturing?, the current device's index): ``torch.cuda``'s two queries
    without the check that CUDA is initialised, which each makes in Python first (PyTorch's own C
    functions, where this PyTorch has them). For code that runs per launch, when CUDA is initialised."""
    return (getattr(torch._C, "_cuda_isCurrentStreamCapturing", None) or torch.cuda.is_current_stream_capturing,
            getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device)


def ensure_allocator() -> None:
    """Descriptors made inside a kernel need a little global memory per program for the TMA
    descriptor; Triton asks for it through the allocator set with ``triton.set_allocator``, on every
    launch (its CUDA launcher's ``allocate_scratch``, Triton 3.6 and 3.7).

    The allocator hands out one buffer per stream (:func:`stream_buffer`), instead of a ``torch.empty``
    per launch: a kernel writes its descriptors there when it starts and is done with them when it
    ends, and launches on one stream run one after another. A CUDA graph gets a buffer of its own, so
    a replay never shares descriptors with a launch on another stream. The limit: a launch with
    programmatic dependent launch (PDL; the course uses none) could overlap the previous kernel.
    Alignment: PyTorch's CUDA allocator starts blocks on 512-byte boundaries
    (c10/cuda/CUDACachingAllocator.cpp, kMinBlockSize); a TMA descriptor needs 64 (cuda.h declares
    CUtensorMap alignas(64)).

    Triton calls the allocator on every launch, so its common case is a dictionary look-up: the buffer
    of this device and the raw stream Triton launches on (a profile of ``triton_fast`` at 64^3 on an
    H100 put a third of its Python time per call in :func:`stream_buffer`'s stream and device
    queries). During a capture, and when a buffer is missing or too small, it goes through
    :func:`stream_buffer`."""
    global _allocator_set
    if _allocator_set or not backend.get().is_gpu:
        return
    known: dict[tuple[int, int], torch.Tensor] = {}
    is_capturing, current_device = cuda_queries()

    def alloc(size: int, alignment: int, stream: int | None) -> torch.Tensor:
        capturing = is_capturing()
        key = (current_device(), stream)
        have = None if capturing else known.get(key)
        if have is not None and have.numel() >= size:
            return have
        have = stream_buffer("descriptors", size, torch.device("cuda", key[0]))
        if not capturing:
            known[key] = have
        return have

    triton.set_allocator(alloc)
    _allocator_set = True


_STREAM_BUFFERS: dict[tuple, torch.Tensor] = {}


def stream_buffer(kind: str, nbytes: int, device: torch.device, zeroed: bool = False) -> torch.Tensor:
    """``nbytes`` (int8) of device memory for the next launch on the current stream: what a kernel
    needs between its programs (split-K's tile counters, ``zeroed``, which the kernel leaves zero
    again; the descriptors Triton writes for in-kernel TMA), one buffer per ``kind``.

    * Outside a CUDA graph's capture, one buffer per stream serves every launch on it: launches on
      one stream run one after another, and another stream has its own. It is never freed while work
      may use it, and it is made by another thread (:func:`outside_graph_pools`), on a side stream,
      so that it stays out of any graph's memory pool: ``torch.compile``'s CUDA graphs warm up by
      running the function with every allocation of the calling thread sent to the graph's pool, and
      a buffer kept alive there is memory the graph believes it owns.
    * During a capture the graph gets a buffer of its own from the graph's pool, zeroed (if asked)
      by a fill the graph records and repeats on every replay: a graph may be replayed on any stream,
      beside eager launches on the stream it was captured on, and must share nothing with them."""
    if device.type != "cuda":  # the interpreter: one launch at a time
        return torch.zeros(nbytes, dtype=torch.int8, device=device)
    if torch.cuda.is_current_stream_capturing():
        return (torch.zeros if zeroed else torch.empty)(nbytes, dtype=torch.int8, device=device)
    stream = torch.cuda.current_stream(device)
    key = (kind, device.index, stream.cuda_stream)
    have = _STREAM_BUFFERS.get(key)
    if have is None or have.numel() < nbytes:
        if have is not None:
            stream.synchronize()  # queued launches may still use the old buffer
        have = outside_graph_pools(lambda: _zeroed_on_a_side_stream(max(nbytes, 4096), device))
        _STREAM_BUFFERS[key] = have
    return have


def _zeroed_on_a_side_stream(nbytes: int, device: torch.device) -> torch.Tensor:
    side = torch.cuda.Stream(device)
    with torch.cuda.device(device), torch.cuda.stream(side):
        t = torch.zeros(nbytes, dtype=torch.int8, device=device)
    side.synchronize()
    return t


def outside_graph_pools(make: Callable[[], torch.Tensor]) -> torch.Tensor:
    """``make()`` run by a new thread, for memory that outlives the call that needs it. While
    ``torch.compile``'s CUDA graphs warm up (mode "reduce-overhead"), PyTorch sends every allocation
    the warming thread makes to the graph's private pool (torch/_inductor/cudagraph_trees.py,
    ``_use_cuda_memory_pool_manager``: "allocation on the current thread"); another thread's
    allocations go to the ordinary pool. An exception in ``make`` is raised here."""
    made: list = []

    def run() -> None:
        try:
            made.append(make())
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            made.append(e)

    thread = threading.Thread(target=run, name="course-buffer")
    thread.start()
    thread.join()
    if isinstance(made[0], BaseException):
        raise made[0]
    return made[0]


def zeroed_counters(count: int, device: torch.device) -> torch.Tensor:
    """``count`` int32 counters that are zero when the next launch on the current stream starts; the
    kernel that counts on them leaves them zero again (split-K's last program of a tile resets its
    own). Per stream, or per CUDA graph (:func:`stream_buffer`)."""
    return stream_buffer("counters", 4 * count, device, zeroed=True).view(torch.int32)[:count]
