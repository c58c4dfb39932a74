"""Every final kernel is right however it is called: replayed from a CUDA graph with fresh inputs,
launched on two streams at once, and through ``torch.compile(mode="reduce-overhead")``.

Each schedule a final stage can take is forced once (stage 6: whole tiles, stream-K, the swapped
decode schedule with and without split-K; ``triton_fast``: one program per tile, persistent, split-K;
stage 7 in each scaling, and its swapped decode schedule with and without split-K; the Triton FP8
kernels), and every result is compared with a float64 product
of that call's own inputs, C filled with NaN first. A kernel that keeps state between launches in the
wrong place - a launch number baked into a graph, a buffer two streams share - gives a wrong C here.

GPU only (the ``gpu`` mark); the CPU side of the same protocol is tests/test_fixup_protocol.py.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re

import pytest
import torch

from course_lib import backend, correctness, fp8
from course_lib.gemm import LaunchPlans, relative_error

pytestmark = pytest.mark.gpu

REPLAYS = 4
STREAM_LAUNCHES = 12  # per stream, queued back to back so that the two streams overlap


def _hopper() -> None:
    from course_lib.kernels import tensor_cores as tc  # noqa: PLC0415

    if not tc.FP8_STAGE.needs[0].available(backend.get().capability):
        pytest.skip("the Hopper stages need wgmma (sm_90a)")


# ---- the callers: each takes (a, b) bf16 (or e4m3 Quantized) and returns C ---------------------------
def _tc6(schedule: int, group_m: int = 8, block_n: int = 0):
    from course_lib.kernels import tensor_cores as tc  # noqa: PLC0415

    def call(a, b):
        c = torch.full((a.shape[0], b.shape[1]), float("nan"), dtype=torch.bfloat16, device=a.device)
        tc.extension().tc_6_tma_store(a, b, c, group_m, backend.sm_count(), schedule, block_n)
        return c
    return call


def _tc6_default(a, b):
    from course_lib import registry  # noqa: PLC0415

    return registry.get_stage("tc_6_tma_store").gemm("bf16")(a, b)


def _triton(config_kwargs: dict):
    from course_lib.kernels import coalescing_and_triton as c04  # noqa: PLC0415

    cfg = c04.FastConfig(**config_kwargs)
    return lambda a, b: c04.fast_matmul(a, b, "bf16", cfg)


def _triton_default(a, b):
    from course_lib.kernels import coalescing_and_triton as c04  # noqa: PLC0415

    return c04.fast_matmul_autotuned(a, b, "bf16")


def _triton_weight(a, b):
    """triton_fast as called with an nn.Linear weight: B stored N x K and passed as w.T, which the
    default reads as stored (fast_launch.as_stored: B^T, K-major). The weight is made from b inside the
    call, so that a replay's fresh b reaches it."""
    from course_lib.kernels import coalescing_and_triton as c04  # noqa: PLC0415

    return c04.fast_matmul_autotuned(a, b.T.contiguous().T, "bf16")


SCHEDULE_WHOLE, SCHEDULE_STREAM_K, SCHEDULE_SWAPPED = 0, 1, 2  # tc_launch.h's SCHEDULE_*

# (name, caller, shapes): the three shapes where stage 6 went wrong from a graph, and shapes
# that take each other schedule.
BF16_PATHS = [
    ("tc_6 whole tiles", lambda: _tc6(SCHEDULE_WHOLE, block_n=256), [(4096, 4096, 4096), (1000, 1000, 1024)]),
    ("tc_6 stream-K", lambda: _tc6(SCHEDULE_STREAM_K, block_n=256),
     [(3000, 3000, 3000), (768, 2304, 16384), (1000, 1000, 8192), (4096, 4096, 4096)]),
    ("tc_6 128x128 whole tiles", lambda: _tc6(SCHEDULE_WHOLE, block_n=128), [(1024, 1024, 1024), (1000, 1000, 1024)]),
    ("tc_6 128x128 stream-K", lambda: _tc6(SCHEDULE_STREAM_K, block_n=128), [(3000, 3000, 3000), (1000, 1000, 8192)]),
    ("tc_6 swapped", lambda: _tc6(SCHEDULE_SWAPPED), [(128, 28672, 512), (64, 14336, 1024)]),
    ("tc_6 swapped + split-K", lambda: _tc6(SCHEDULE_SWAPPED), [(1, 4096, 4096), (16, 4096, 14336), (90, 1000, 4096)]),
    ("tc_6 as called", lambda: _tc6_default, [(3000, 3000, 3000), (8, 4096, 4096), (2048, 2048, 2048),
                                              (1024, 1024, 1024)]),
    ("triton_fast plain", lambda: _triton(dict(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8,
                                                num_stages=3)), [(1000, 1000, 1024), (2048, 2048, 2048)]),
    ("triton_fast persistent", lambda: _triton(dict(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8,
                                                     num_stages=3, persistent=True)),
     [(1000, 1000, 1024), (3000, 3000, 3000)]),
    ("triton_fast split-K", lambda: _triton(dict(block_m=128, block_n=128, block_k=64, group_m=1, num_warps=8,
                                                  num_stages=3, split_k=4)),
     [(768, 2304, 16384), (256, 512, 8192)]),
    ("triton_fast small-M split-K", lambda: _triton(dict(block_m=16, block_n=64, block_k=256, group_m=1,
                                                          num_warps=4, num_stages=3, split_k=4)),
     [(8, 4096, 4096), (1, 2048, 8192)]),
    ("triton_fast as called", lambda: _triton_default, [(768, 2304, 16384), (8, 4096, 4096), (2048, 2048, 2048)]),
    ("triton_fast x @ w.T", lambda: _triton_weight, [(3072, 3000, 3072), (8, 4096, 4096)]),
]


def _needs(name: str) -> None:
    if name.startswith("tc_"):
        _hopper()


def _bf16_inputs(M, N, K, gen):
    a = torch.randn(M, K, generator=gen, device="cuda").to(torch.bfloat16)
    b = torch.randn(K, N, generator=gen, device="cuda").to(torch.bfloat16)
    return a, b


def _bf16_error(c, a, b) -> float:
    return relative_error(c, a.double() @ b.double())


def _bf16_tolerance(K: int) -> float:
    return correctness.tolerance("bf16", K)


def _record(table: dict, name: str, how: str, errors: list[float]) -> None:
    table.setdefault(name, {})[how] = max(errors)


# ---- graph replay -------------------------------------------------------------------------------------
def _replayed_errors(call, make_inputs, error, replays: int = REPLAYS) -> list[float]:
    """Capture ``call`` once on inputs it has already run on (warm: compiled, tuned, planned), then
    ``replays`` times copy fresh inputs into the captured ones, replay, and measure the error."""
    static = make_inputs(0)
    call(*static)  # warm-up outside the capture: compile, autotune, keep a launch plan
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = call(*static)
    errors = []
    for r in range(1, replays + 1):
        fresh = make_inputs(r)
        _copy_into(static, fresh)
        out_fill(out)
        graph.replay()
        torch.cuda.synchronize()
        errors.append(error(out, *fresh))
    return errors


def _copy_into(static, fresh) -> None:
    for s, f in zip(static, fresh):
        if isinstance(s, fp8.Quantized):
            s.values.copy_(f.values)
            s.scales.copy_(f.scales)
        else:
            s.copy_(f)


def out_fill(out: torch.Tensor) -> None:
    """NaN in the captured output before a replay, so an element the replay does not write shows."""
    out.fill_(float("nan"))


def _bf16_maker(M, N, K):
    def make(seed):
        gen = torch.Generator(device="cuda").manual_seed(1000 + seed)
        return _bf16_inputs(M, N, K, gen)
    return make


RESULTS: dict = {}


@pytest.mark.parametrize("name, make_call, shapes", BF16_PATHS, ids=[p[0] for p in BF16_PATHS])
def test_bf16_paths_are_right_replayed_from_a_cuda_graph(name, make_call, shapes):
    _needs(name)
    call = make_call()
    for M, N, K in shapes:
        errors = _replayed_errors(call, _bf16_maker(M, N, K), _bf16_error)
        _record(RESULTS, f"{name} {M}x{N}x{K}", "graph replay", errors)
        assert max(errors) < _bf16_tolerance(K), f"{name} at {M} x {N} x {K}: errors per replay {errors}"


# ---- two streams at once --------------------------------------------------------------------------
def _two_stream_errors(call, make_inputs, error, launches: int = STREAM_LAUNCHES) -> list[float]:
    """``launches`` calls on each of two streams, queued back to back without waiting, each stream
    with its own inputs; then every result is checked against its own inputs."""
    inputs = [make_inputs(s) for s in (1, 2)]
    call(*inputs[0])  # warm-up: compile, autotune, keep a launch plan
    torch.cuda.synchronize()
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    outs: list[list[torch.Tensor]] = [[], []]
    for i in range(launches):
        for s, stream in enumerate(streams):
            with torch.cuda.stream(stream):
                outs[s].append(call(*inputs[s]))
    torch.cuda.synchronize()
    return [error(c, *inputs[s]) for s in (0, 1) for c in outs[s]]


@pytest.mark.parametrize("name, make_call, shapes", BF16_PATHS, ids=[p[0] for p in BF16_PATHS])
def test_bf16_paths_are_right_on_two_streams_at_once(name, make_call, shapes):
    _needs(name)
    call = make_call()
    for M, N, K in shapes:
        errors = _two_stream_errors(call, _bf16_maker(M, N, K), _bf16_error)
        _record(RESULTS, f"{name} {M}x{N}x{K}", "two streams", errors)
        assert max(errors) < _bf16_tolerance(K), f"{name} at {M} x {N} x {K}: worst error {max(errors):.3g}"


BESIDE_EAGER = [("tc_6 stream-K", lambda: _tc6(SCHEDULE_STREAM_K, block_n=256), (3000, 3000, 3000)),
                ("tc_6 128x128 stream-K", lambda: _tc6(SCHEDULE_STREAM_K, block_n=128), (1000, 1000, 8192)),
                ("tc_6 swapped + split-K", lambda: _tc6(SCHEDULE_SWAPPED), (16, 4096, 14336)),
                ("triton_fast split-K", dict((p[0], p[1]) for p in BF16_PATHS)["triton_fast split-K"], (768, 2304, 16384)),
                ("triton_fast as called", lambda: _triton_default, (2048, 2048, 2048))]


@pytest.mark.parametrize("name, make_call, shape", BESIDE_EAGER, ids=[p[0] for p in BESIDE_EAGER])
def test_a_graph_replays_while_its_capture_stream_runs_the_same_stage_eagerly(name, make_call, shape):
    """The hardest sharing: a stage captured in a graph, replayed on one stream while eager calls at
    the same shape run on the stream the graph was captured on (flags, counters, Triton's
    descriptors: the graph must have its own)."""
    _needs(name)
    M, N, K = shape
    errors = _beside_eager_errors(make_call(), _bf16_maker(M, N, K), _bf16_error)
    _record(RESULTS, f"{name} {M}x{N}x{K}", "graph beside eager", errors)
    assert max(errors) < _bf16_tolerance(K), errors


def _beside_eager_errors(call, make, error) -> list[float]:
    """The graph's result, then each of STREAM_LAUNCHES eager results, each against its own inputs."""
    static, eager_in = make(0), make(7)
    call(*static)
    torch.cuda.synchronize()
    capture = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=capture):
        out = call(*static)
    replay_stream = torch.cuda.Stream()
    eager_out = []
    for _ in range(STREAM_LAUNCHES):
        with torch.cuda.stream(replay_stream):
            graph.replay()
        with torch.cuda.stream(capture):
            eager_out.append(call(*eager_in))
    torch.cuda.synchronize()
    return [error(out, *static)] + [error(c, *eager_in) for c in eager_out]


# ---- torch.compile(mode="reduce-overhead") ------------------------------------------------------------
def _op_name(label: str) -> str:
    """A path's label as a custom op's name: letters, digits and underscores only (a schema refuses
    the rest, e.g. the "@" of "x @ w.T")."""
    return "course_test::" + re.sub(r"\W", "_", label)


@pytest.fixture
def no_plans():
    """Every launch plan in the process dropped, so that the path under test makes its plan inside
    torch.compile's CUDA-graph warm-up, as a caller's first call would (a plan that kept its first C
    alive failed there only when no earlier test had made it)."""
    LaunchPlans.drop_every()


def _as_custom_op(name: str, call):
    """A stage as a PyTorch custom op, so that torch.compile keeps it inside its CUDA graph instead of
    breaking the graph around an opaque extension call."""
    op_name = _op_name(name)

    @torch.library.custom_op(op_name, mutates_args=())
    def op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return call(a, b)

    @op.register_fake
    def _(a, b):
        return a.new_empty((a.shape[0], b.shape[1]))

    return op


COMPILE_PATHS = [
    ("tc_6 stream-K", lambda: _tc6_default, (3000, 3000, 3000)),
    ("tc_6 swapped + split-K", lambda: _tc6_default, (16, 4096, 14336)),
    ("tc_6 128x128 as called", lambda: _tc6_default, (1024, 1024, 1024)),  # the narrow tile by the shape
    ("triton_fast split-K", dict((p[0], p[1]) for p in BF16_PATHS)["triton_fast split-K"], (768, 2304, 16384)),
    ("triton_fast as called", lambda: _triton_default, (2048, 2048, 2048)),
    ("triton_fast x @ w.T", lambda: _triton_weight, (3072, 3000, 3072)),
]


@pytest.mark.parametrize("name, make_call, shape", COMPILE_PATHS, ids=[p[0] for p in COMPILE_PATHS])
def test_stages_are_right_under_torch_compile_reduce_overhead(name, make_call, shape, no_plans):
    _needs(name)
    op = _as_custom_op(name, make_call())
    M, N, K = shape

    @torch.compile(mode="reduce-overhead", fullgraph=True)
    def layer(a, b):
        return op(a, b) * 2.0

    make = _bf16_maker(M, N, K)
    errors = []
    for r in range(REPLAYS + 2):  # the first calls record the graph; later ones replay it
        a, b = make(r)
        c = layer(a, b).clone()
        torch.cuda.synchronize()
        errors.append(relative_error(c, 2.0 * (a.double() @ b.double())))
    _record(RESULTS, f"{name} {M}x{N}x{K}", "torch.compile", errors)
    assert max(errors) < _bf16_tolerance(K), f"{name}: errors per call {errors}"


# ---- FP8: stage 7 and the Triton kernels ---------------------------------------------------------------
def _tc7(schedule: int, fast_accumulation: bool = False):
    """Stage 7 with its schedule forced (tc_launch.h's SCHEDULE_*), through the wrapper's checks."""
    from course_lib.kernels import tensor_cores as tc  # noqa: PLC0415

    def call(qa, qw):
        args = tc.tc_7_fp8_arguments(qa, qw, fast_accumulation)
        tc.extension().tc_7_fp8(*args, 8, backend.sm_count(), schedule)
        return args[4]
    return call


def _fp8_paths():
    from course_lib.kernels import tensor_cores as tc  # noqa: PLC0415
    from course_lib.kernels.coalescing_and_triton import fast_fp8  # noqa: PLC0415

    return [
        ("tc_7 tensor", "tensor", tc.tc_7_fp8),
        ("tc_7 row", "row", tc.tc_7_fp8),
        ("tc_7 block", "block", tc.tc_7_fp8),
        ("tc_7 tensor fast", "tensor", lambda qa, qw: tc.tc_7_fp8(qa, qw, fast_accumulation=True)),
        ("tc_7 swapped + split-K tensor", "tensor", _tc7(SCHEDULE_SWAPPED)),
        ("tc_7 swapped + split-K row", "row", _tc7(SCHEDULE_SWAPPED)),
        ("tc_7 swapped + split-K block", "block", _tc7(SCHEDULE_SWAPPED)),
        ("tc_7 swapped + split-K tensor fast", "tensor", _tc7(SCHEDULE_SWAPPED, fast_accumulation=True)),
        ("tc_7 swapped block", "block", _tc7(SCHEDULE_SWAPPED)),
        ("tc_7 swapped tensor fast", "tensor", _tc7(SCHEDULE_SWAPPED, fast_accumulation=True)),
        ("triton fp8 tensor", "tensor", fast_fp8.fp8_matmul),
        ("triton fp8 row", "row", fast_fp8.fp8_matmul),
        ("triton fp8 block", "block", fast_fp8.fp8_matmul_blockscaled),
    ]


# (1, 4096, 4096) takes stage 7's swapped decode schedule as called. The forced swapped paths have
# shapes of their own (tests/test_tc_fp8.py holds them to the split-K rule on the CPU): K split into
# ranges (M = 16, 7 and 90 - a token tile of 96 - with N = 1000 and K = 1040 ending in a partial slice;
# M = 300 in three token tiles of 128), or not (K of 4 slices or fewer).
FP8_SHAPES = [(1000, 1032, 4096), (1, 4096, 4096), (2048, 2048, 2048)]
DECODE_SPLIT_SHAPES = [(16, 2048, 7168), (7, 1000, 1040), (90, 1000, 1040), (300, 1000, 1040)]
DECODE_WHOLE_K_SHAPES = [(64, 14336, 512), (33, 136, 208)]
# The Triton FP8 kernels' configuration depends on the shape's class (fast_fp8_configs.shape_class);
# FP8_SHAPES reach only "few_tiles" and "decode". This one is "large" on a GPU of up to 144 SMs (9 x 16
# tiles of 256 x 128), so the large class's configurations (per tensor / row: two programs an SM; block
# scales: persistent) are replayed too; its M, N and K cut tiles and end in a partial K slice.
TRITON_FP8_LARGE = (2300, 1928, 1040)
FP8_PATH_SHAPES = {name: DECODE_SPLIT_SHAPES if "split-K" in name else DECODE_WHOLE_K_SHAPES
                   for name in ("tc_7 swapped + split-K tensor", "tc_7 swapped + split-K row",
                                "tc_7 swapped + split-K block", "tc_7 swapped + split-K tensor fast",
                                "tc_7 swapped block", "tc_7 swapped tensor fast")}
FP8_PATH_SHAPES |= {name: [*FP8_SHAPES, TRITON_FP8_LARGE] for name in ("triton fp8 tensor", "triton fp8 row",
                                                                       "triton fp8 block")}
FP8_NAMES = ["tc_7 tensor", "tc_7 row", "tc_7 block", "tc_7 tensor fast", *FP8_PATH_SHAPES]


def _fp8_maker(M, N, K, scaling):
    def make(seed):
        return fp8.fp8_inputs(M, N, K, scaling, seed=2000 + seed, device="cuda")
    return make


def _fp8_error(c, qa, qw) -> float:
    return relative_error(c, qa.dequantize() @ qw.dequantize().T)


@pytest.mark.parametrize("name", FP8_NAMES)
def test_fp8_paths_are_right_replayed_and_on_two_streams(name):
    if not fp8_available():
        pytest.skip("FP8 tensor cores need compute capability 8.9 or newer")
    if name.startswith("tc_"):
        _hopper()
    _, scaling, call = {p[0]: p for p in _fp8_paths()}[name]
    for M, N, K in FP8_PATH_SHAPES.get(name, FP8_SHAPES):
        make = _fp8_maker(M, N, K, scaling)
        tol = correctness.tolerance("e4m3", K)
        replayed = _replayed_errors(call, make, _fp8_error)
        streams = _two_stream_errors(call, make, _fp8_error)
        _record(RESULTS, f"{name} {M}x{N}x{K}", "graph replay", replayed)
        _record(RESULTS, f"{name} {M}x{N}x{K}", "two streams", streams)
        assert max(replayed) < tol, f"{name} at {M} x {N} x {K} from a graph: {replayed}"
        assert max(streams) < tol, f"{name} at {M} x {N} x {K} on two streams: worst {max(streams):.3g}"


FP8_BESIDE_EAGER = [("tc_7 swapped + split-K block", (16, 2048, 7168)),
                    ("tc_7 swapped + split-K tensor fast", (7, 1000, 1040))]


@pytest.mark.parametrize("name, shape", FP8_BESIDE_EAGER, ids=[p[0] for p in FP8_BESIDE_EAGER])
def test_fp8_split_k_replays_while_its_capture_stream_runs_it_eagerly(name, shape):
    """Stage 7's decode split-K counters, shared as above: the graph's set beside the capture stream's."""
    _hopper()
    _, scaling, call = {p[0]: p for p in _fp8_paths()}[name]
    M, N, K = shape
    errors = _beside_eager_errors(call, _fp8_maker(M, N, K, scaling), _fp8_error)
    _record(RESULTS, f"{name} {M}x{N}x{K}", "graph beside eager", errors)
    assert max(errors) < correctness.tolerance("e4m3", K), errors


# torch.compile(mode="reduce-overhead") on the FP8 paths: the operands' values and scales enter the
# custom op as four tensors (their blocks and format are the same every call) and are put back together.
# Stage 7's decode split-K (its tile counters) and the Triton kernels with tensor descriptors made in the
# kernel (Triton's scratch for them) keep a buffer per stream: these paths once failed here, as the
# buffer was made while torch.compile warmed up and so came from the graph's pool (runs/
# 2026-12-04_1050_fp8_graphs_compile/graphs.log); common.outside_graph_pools now makes it.
FP8_COMPILE_PATHS = [("tc_7 block", (1000, 1032, 1024)), ("tc_7 tensor", (16, 2048, 7168)),
                     ("triton fp8 tensor", (2048, 2048, 2048)), ("triton fp8 row", (2048, 2048, 2048)),
                     ("triton fp8 block", (768, 2304, 4096)), ("triton fp8 tensor", TRITON_FP8_LARGE),
                     ("triton fp8 block", TRITON_FP8_LARGE)]


@pytest.mark.parametrize("name, shape", FP8_COMPILE_PATHS,
                         ids=["tc_7 block", "tc_7 tensor decode split-K", "triton fp8 tensor", "triton fp8 row",
                              "triton fp8 block", "triton fp8 tensor large", "triton fp8 block large"])
def test_fp8_paths_are_right_under_torch_compile_reduce_overhead(name, shape, no_plans):
    if not fp8_available():
        pytest.skip("FP8 tensor cores need compute capability 8.9 or newer")
    if name.startswith("tc_"):
        _hopper()
    _, scaling, call = {p[0]: p for p in _fp8_paths()}[name]
    M, N, K = shape
    make = _fp8_maker(M, N, K, scaling)
    qa0, qw0 = make(0)

    @torch.library.custom_op(_op_name(f"fp8 {name} {M}x{N}x{K}"), mutates_args=())
    def op(av: torch.Tensor, sa: torch.Tensor, wv: torch.Tensor, sw: torch.Tensor) -> torch.Tensor:
        return call(dataclasses.replace(qa0, values=av, scales=sa), dataclasses.replace(qw0, values=wv, scales=sw))

    @op.register_fake
    def _(av, sa, wv, sw):
        return av.new_empty((av.shape[0], wv.shape[0]), dtype=torch.bfloat16)

    @torch.compile(mode="reduce-overhead", fullgraph=True)
    def layer(av, sa, wv, sw):
        return op(av, sa, wv, sw) * 2.0

    errors = []
    for r in range(REPLAYS + 2):  # the first calls record the graph; later ones replay it
        qa, qw = make(r + 1)
        c = layer(qa.values, qa.scales, qw.values, qw.scales).clone()
        torch.cuda.synchronize()
        errors.append(_fp8_error(c / 2.0, qa, qw))
    _record(RESULTS, f"{name} {M}x{N}x{K}", "torch.compile", errors)
    assert max(errors) < correctness.tolerance("e4m3", K), f"{name}: errors per call {errors}"


def fp8_available() -> bool:
    from course_lib import features  # noqa: PLC0415

    return features.FP8_TENSOR_CORES.available(backend.get().capability)


def test_zzz_print_the_table():
    """The table of the worst relative error per path and way of calling (printed for the record;
    every entry was asserted by the tests above). Named to run last."""
    if not RESULTS:
        pytest.skip("no GPU test ran")
    width = max(map(len, RESULTS))
    hows = ["graph replay", "two streams", "torch.compile", "graph beside eager"]
    lines = ["path".ljust(width) + "".join(f" | {h:>18}" for h in hows)]
    for name, row in RESULTS.items():
        cells = [f"{row[h]:.2e}" if h in row and not math.isnan(row[h]) else "-" for h in hows]
        lines.append(name.ljust(width) + "".join(f" | {c:>18}" for c in cells))
    print("\n" + "\n".join(lines))
    if os.environ.get("COURSE_GPU_TABLE"):  # where tools/gpu_run_all.sh keeps it
        with open(os.environ["COURSE_GPU_TABLE"], "w") as f:
            f.write("\n".join(lines) + "\n")
