"""The protocol by which stream-K's and split-K's CTAs hand each other partial sums, checked on the CPU
across launches: eager calls, replays of a captured CUDA graph, two streams at once.

The model (course_lib.kernels.tensor_cores.model.fixup_stale_reads) plays every step of every cluster
in any order the GPU could take; the flag values are read from tc_stream_k.cuh. The protocol the
kernels used before (a flag holding a launch number passed as a kernel argument) is played too: it
must fail under replay here, as it did on the H200, or these tests could not catch a regression.
The same kernels on the GPU: tests/test_gpu_graphs_and_streams.py.
"""

import random
import re

import pytest
import torch

from course_lib.kernels import tensor_cores as tc
from course_lib.kernels.coalescing_and_triton import common, fast
from course_lib.kernels.tensor_cores import model
from course_lib.model import hardware, schedules

# (cluster tiles, clusters, K slices): the stream-K shapes that went wrong from a graph on the H200
# (3000^3: 12 x 12 cluster tiles; 768 x 2304 x 16384: 27; 1000 x 1000 x 8192: 16), and small ones where
# a cluster's share spans several tiles or none.
SCHEDULES = [(144, 66, 47), (27, 66, 256), (16, 66, 128), (7, 5, 9), (3, 8, 5), (11, 4, 3)]
INTERLEAVINGS = 20
# Stage 6's 128 x 128 tile shared out by K slices: the plan's own at M = 200 and 256 with long K (32
# or 48 cluster tiles for 66 clusters); forced, as an experiment or a caller may, at 1024^3 (fewer tiles
# than clusters, each split in two or three), 1536^3 (72 tiles, one whole wave and 6 split), 3000^3.
NARROW_FORCED = [(200, 4096, 4096), (256, 4096, 2048), (256, 6144, 4096),
                 (1024, 1024, 1024), (1536, 1536, 1536), (3000, 3000, 3000)]
NARROW_BLOCK_N = tc.STAGE6_TILES["128x128"]


# A stream-K launch runs every resident cluster (launch_tiles: `split ? clusters * CLUSTER`): on the
# H200, one CTA per SM, its SMs over the cluster's CTAs.
H200_CLUSTERS = hardware.H200.sms // tc.DESIGN["tc_6_tma_store"].constants["CLUSTER"]


def _narrow_split(M: int, N: int, K: int) -> tuple[int, int, int]:
    """(cluster tiles, clusters, K slices) of stage 6's 128 x 128 stream-K at M x N x K on the H200."""
    block_k = tc.DESIGN["tc_6_tma_store"].block[2]
    return tc.stage6_cluster_tiles(M, N, NARROW_BLOCK_N), H200_CLUSTERS, -(-K // block_k)


NARROW_SCHEDULES = [_narrow_split(*shape) for shape in NARROW_FORCED]


def _work(tiles, clusters, slices):
    return schedules.stream_k_work(tiles, clusters, slices)


def _orders():
    return [None] + [random.Random(seed) for seed in range(INTERLEAVINGS)]


def _split_checks(schedules_: list[tuple[int, int, int]]) -> list[str]:
    """static_assert, on the C++'s own constexpr, that each NARROW_FORCED shape has these cluster tiles
    of 128 x 128 and these K slices."""
    return [f"static_assert(tc::stage6::cluster_tiles({M}, {N}, tc::stage6::NARROW_BLOCK_N) == {tiles} && "
            f"tc::ceil_div({K}, tc::stage6::BLOCK_K) == {slices}, \"{M} x {N} x {K}: Python's _narrow_split "
            f"says {tiles} cluster tiles, {slices} K slices\");"
            for (M, N, K), (tiles, _, slices) in zip(NARROW_FORCED, schedules_)]


def test_the_narrow_tiles_schedules_are_what_stage_6_runs(tmp_path):
    """The schedules played here are the launcher's: the C++ counts the same cluster tiles and K slices
    (compiled, front end only), a stream-K launch takes every resident cluster (66 on the H200) and
    the K slices of the whole of K. A wrong expectation fails to compile."""
    from test_tensor_cores_cxx import _compile_checks, _failures

    assert H200_CLUSTERS == 66
    assert NARROW_SCHEDULES[0] == (32, 66, 64) and NARROW_SCHEDULES[3] == (32, 66, 16)
    proc = _compile_checks(tmp_path, _split_checks(NARROW_SCHEDULES))
    assert proc.returncode == 0, _failures(proc)
    off_by_one = [(tiles + 1, clusters, slices) for tiles, clusters, slices in NARROW_SCHEDULES[:1]]
    proc = _compile_checks(tmp_path, _split_checks(off_by_one))
    assert proc.returncode != 0 and _failures(proc).count("static assertion failed") == 1, _failures(proc)
    launch = _code("tc_6_tma_store.cu")
    launch = launch[launch.index("void launch_tiles("):]
    assert "const int ctas = split ? clusters * CLUSTER :" in launch
    assert "make_schedule(tiles, ctas / CLUSTER, ceil_div(g.K, BLOCK_K), split)" in launch
    # the work is really split: some cluster contributes to a tile another finishes
    for tiles, clusters, slices in NARROW_SCHEDULES:
        work = _work(tiles, clusters, slices)
        assert any(k0 > 0 for units in work for _, k0, _ in units), (tiles, clusters, slices)


@pytest.mark.parametrize("tiles, clusters, slices", SCHEDULES + NARROW_SCHEDULES)
def test_every_eager_launch_and_every_graph_replay_adds_only_its_own_partial_sums(tiles, clusters, slices):
    work = _work(tiles, clusters, slices)
    for rng in _orders():
        stream = model.fixup_buffer()  # the stream's flags, reused by every eager launch on it
        for n in range(1, 4):
            assert model.fixup_stale_reads(work, slices, [(f"eager {n}", n, stream)], rng=rng) == []
        graph = model.fixup_buffer()  # the graph's own, captured once: every replay passes the same arguments
        for r in range(1, 5):
            assert model.fixup_stale_reads(work, slices, [(f"replay {r}", 1, graph)], rng=rng) == []


@pytest.mark.parametrize("tiles, clusters, slices", SCHEDULES[:3] + NARROW_SCHEDULES[:1] + NARROW_SCHEDULES[3:4])
def test_launches_on_two_streams_at_once_never_meet(tiles, clusters, slices):
    """Each stream (and each graph) has its own flags and slots, so two launches running at once - on
    two streams, or a replay beside an eager call - play out as if alone."""
    work = _work(tiles, clusters, slices)
    first, second = model.fixup_buffer(), model.fixup_buffer()
    for rng in _orders():
        assert model.fixup_stale_reads(work, slices, [("stream 1", 1, first), ("stream 2", 1, second)], rng=rng) == []


def test_the_launch_number_protocol_fails_from_the_second_replay():
    """What went wrong on the H200: the launch number is an argument, recorded once by the graph, so
    from the second replay an owner finds the flags already "ready" and adds last replay's sums."""
    tiles, clusters, slices = SCHEDULES[1]
    work = _work(tiles, clusters, slices)
    buf = model.fixup_buffer()
    assert model.fixup_stale_reads(work, slices, [("replay 1", 7, buf)], protocol="launch number") == []
    wrong = model.fixup_stale_reads(work, slices, [("replay 2", 7, buf)], protocol="launch number")
    assert wrong and all("replay 2: an owner added cluster" in w and "from replay 1" in w for w in wrong)
    # Eager launches, each with a new number, were right: why no test caught it before.
    for n in range(8, 11):
        assert model.fixup_stale_reads(work, slices, [(f"eager {n}", n, buf)], protocol="launch number") == []


def test_two_launches_sharing_one_buffer_at_once_go_wrong():
    """Why each stream needs its own flags: with one buffer per device, two launches running at once
    read each other's partial sums (the flags cannot say whose they are)."""
    tiles, clusters, slices = SCHEDULES[1]
    work = _work(tiles, clusters, slices)
    hits = 0
    for seed in range(INTERLEAVINGS):
        shared = model.fixup_buffer()
        wrong = model.fixup_stale_reads(work, slices, [("stream 1", 1, shared), ("stream 2", 1, shared)],
                                        rng=random.Random(seed))
        hits += bool(wrong)
    assert hits > 0


def test_every_lane_storing_the_flag_could_leave_it_raised():
    """Why the first warp raises the flag by atomic adds: were each of its lanes to store FLAG_READY,
    and the stores land as more than one write (the CUDA guide leaves that open), an owner could see
    the first, empty the flag, and a later lane's store raise it again for the next launch. With one
    add per lane the flag is ready only once the last lane's add has landed."""
    tiles, clusters, slices = SCHEDULES[3]
    work = _work(tiles, clusters, slices)
    wrong = model.fixup_stale_reads(work, slices, [("L1", 1, model.fixup_buffer())], protocol="lane stores")
    assert any("a flag is left raised for the next launch" in w for w in wrong)
    for rng in [None, *_orders()]:
        assert model.fixup_stale_reads(work, slices, [("L1", 1, model.fixup_buffer())], rng=rng) == []


def test_a_flag_left_raised_is_caught():
    """The model's own check: a flag left raised by one launch (an owner that forgot to empty it) makes
    the next launch's owner add the old partial sums without waiting."""
    tiles, clusters, slices = SCHEDULES[3]
    work = _work(tiles, clusters, slices)
    buf = model.fixup_buffer()
    assert model.fixup_stale_reads(work, slices, [("L1", 1, buf)]) == []
    contributor = next(iter(buf["slots"]))
    buf["flags"][contributor] = model.FLAG_READY  # as if its owner had not emptied it
    wrong = model.fixup_stale_reads(work, slices, [("L2", 2, buf)])
    assert f"L2: an owner added cluster {contributor}'s partial sums from L1" in wrong


# ---- the kernels do what the model plays -------------------------------------------------------------
def _code(file: str) -> str:
    """The C++ without its comments."""
    text = (tc.CSRC / file).read_text()
    return re.sub(r"//[^\n]*", "", text)


def test_the_kernels_follow_the_modelled_protocol():
    sk = _code("tc_stream_k.cuh")
    add_partial = sk[sk.index("void add_partial"):]
    publish = sk[sk.index("void publish_partial"):sk.index("void add_partial")]
    # The contributor's first warp raises the flag to FLAG_READY, one add per lane; the owner waits for
    # FLAG_READY and stores FLAG_EMPTY.
    assert model.FLAG_READY == 32 and "add_release_gpu(flag, 1)" in publish
    assert "int* flag = p.flags + cta * CONSUMERS + cw;" in publish
    assert "__shfl_sync(0xffffffffu, tid / 32, 0) == 0" in publish
    assert "!= FLAG_READY" in add_partial and "= FLAG_EMPTY" in add_partial
    assert "epoch" not in sk  # no launch number anywhere: a graph would record it once
    # The buffers are each launch's own, from the caller's workspace (no per-device scratch), sized
    # from the slots the kernel addresses, for the launched tile's width (BN), not the 128 x 256 tile's.
    assert "ws.scratch(" in sk and "ws.zeroed(" in sk
    assert "* partial_slot_float4s<BLOCK_N>()" in sk[sk.index("float4* partial_slot("):sk.index("void publish_partial")]
    stage6 = _code("tc_6_tma_store.cu")
    launch = stage6[stage6.index("void launch_tiles("):]
    assert "fixup_buffers<BN, CONSUMERS>(ws, ctas)" in launch and "fixup_buffers(" not in launch.replace(
        "fixup_buffers<BN, CONSUMERS>(ws, ctas)", "")
    kernel = stage6[stage6.index("kernel(const __grid_constant__"):stage6.index("constexpr double NARROW_TILE_BELOW")]
    assert "publish_partial<BN, CONSUMERS>" in kernel and "add_partial<BN, CONSUMERS>" in kernel
    assert "BLOCK_N" not in kernel  # every size in the kernel is the template's tile width
    host = _code("tc_host.cuh")
    assert "device_scratch" not in host and "static std::map" not in host
    # Split-K's counters (the decode paths of stages 6 and 7, tc_decode.cuh): the last CTA of a tile
    # sets its counter back to zero.
    decode = _code("tc_decode.cuh")
    assert re.search(r"if \(\*last\) splits\.counters\[tile\] = 0;", decode)
    assert "ws.zeroed(size_t(tiles))" in decode


def test_the_binding_gives_every_stream_and_every_graph_its_own_flags():
    binding = _code("tc_binding.h")
    zeroed = binding[binding.index("int* zeroed(size_t count)"):]
    assert "cudaStreamIsCapturing(stream_, &capture)" in zeroed  # a graph gets a set of its own ...
    assert "cudaMemsetAsync" in zeroed  # ... zeroed by a memset the graph records
    assert "per_stream[{device_.index(), stream_}]" in zeroed  # eager launches: one set per stream


def test_triton_split_k_counters_reset_and_are_per_stream():
    import inspect

    src = inspect.getsource(fast.split_k_matmul_kernel.fn)
    assert "tl.atomic_xchg(counter_ptr + tile, 0" in src  # the last program empties its tile's counter
    buffers = inspect.getsource(common.stream_buffer)
    assert "is_current_stream_capturing()" in buffers and "stream.cuda_stream" in buffers
    assert "stream_buffer(\"counters\"" in inspect.getsource(common.zeroed_counters)
    assert "stream_buffer(\"descriptors\"" in inspect.getsource(common.ensure_allocator)


def test_the_descriptor_allocator_keeps_a_buffer_per_stream_and_none_for_a_capture(monkeypatch):
    """Triton asks the allocator for descriptor memory on every launch: it looks the buffer up by
    (device, raw stream), asks stream_buffer only for a stream it has not seen or a larger size, and
    during a capture asks every time and keeps nothing (a graph must not share the eager buffer)."""
    asked, capturing, device = [], [False], [0]
    monkeypatch.setattr(common, "_allocator_set", False)
    monkeypatch.setattr(common.backend, "get", lambda: type("GPU", (), {"is_gpu": True})())
    monkeypatch.setattr(common, "cuda_queries", lambda: (lambda: capturing[0], lambda: device[0]))
    monkeypatch.setattr(common, "stream_buffer", lambda kind, n, dev, zeroed=False: (
        asked.append((kind, n, dev.index)), torch.zeros(n, dtype=torch.int8))[1])
    monkeypatch.setattr(common.triton, "set_allocator", lambda fn: allocators.append(fn))
    allocators = []
    common.ensure_allocator()
    (alloc,) = allocators
    first = alloc(128, 64, 11)
    assert alloc(128, 64, 11) is first and alloc(64, 64, 11) is first and len(asked) == 1
    assert alloc(128, 64, 12) is not first and len(asked) == 2  # another stream
    device[0] = 1
    alloc(128, 64, 11)
    assert asked[-1] == ("descriptors", 128, 1) and len(asked) == 3  # the same handle on another device
    device[0] = 0
    bigger = alloc(256, 64, 11)
    assert len(asked) == 4 and alloc(256, 64, 11) is bigger and len(asked) == 4
    capturing[0] = True
    in_graph = [alloc(128, 64, 11) for _ in range(2)]
    assert len(asked) == 6 and all(t is not bigger for t in in_graph)
    capturing[0] = False
    assert alloc(128, 64, 11) is bigger and len(asked) == 6  # the capture left the eager buffer alone


def test_zeroed_counters_on_the_cpu_are_zero_and_the_size_asked():
    t = common.zeroed_counters(37, torch.device("cpu"))
    assert t.dtype == torch.int32 and t.numel() == 37 and int(t.abs().sum()) == 0


def test_per_stream_buffers_are_made_by_another_thread():
    """torch.compile's CUDA graphs warm up with the warming thread's allocations sent to the graph's
    pool: a buffer kept per stream must be made by another thread (an exception in it still raised)."""
    import inspect
    import threading

    here = threading.get_ident()
    made_by = []
    out = common.outside_graph_pools(lambda: (made_by.append(threading.get_ident()), torch.zeros(3))[1])
    assert made_by and made_by[0] != here and out.shape == (3,)
    with pytest.raises(ValueError, match="no memory"):
        common.outside_graph_pools(lambda: (_ for _ in ()).throw(ValueError("no memory")))
    assert "outside_graph_pools(" in inspect.getsource(common.stream_buffer)
    zeroed = _code("tc_binding.h")
    zeroed = zeroed[zeroed.index("int* zeroed(size_t count)"):]
    assert "zeroed_by_another_thread(" in zeroed and "std::thread maker" in zeroed
