"""Stages 04 and 05: the Triton kernels (interpreter on the CPU backend), their errors, the notebooks' tables."""

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import course_lib
from course_lib import backend, check, dtypes, get_stage
from course_lib.gemm import planned, prepare, random_inputs
from course_lib.kernels import coalescing_and_triton as c04
from course_lib.kernels.coalescing_and_triton import article, autotune, common, evidence, fast, fast_configs, fast_launch
from course_lib.kernels.coalescing_and_triton.vector_add import VECTOR_BLOCK
from course_lib.model import schedules

STAGES = ["triton_tiled", "triton_tiled_transposed_b", "triton_tiled_descriptors", "triton_fast"]  # course order
NOTEBOOKS = {"triton_tiled": "04_coalescing_and_triton", "triton_tiled_transposed_b": "04_coalescing_and_triton",
             "triton_tiled_descriptors": "05_triton_fast_kernel", "triton_fast": "05_triton_fast_kernel"}
DTYPES = ["fp32", "tf32", "fp16", "bf16"]


# ---- the first kernel: a vector add --------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_vector_add_matches_torch(dtype):
    from course_lib.instruments import guarded

    device = backend.get().torch_device
    gen = torch.Generator(device=device).manual_seed(int(torch.randint(0, 2**31, (1,)).item()))  # fresh inputs
    for n in (1, 7, 255, 1001, 4097):  # never a multiple of the block: the last program is masked
        x = torch.randn(n, generator=gen, device=device).to(dtype)
        y = torch.randn(n, generator=gen, device=device).to(dtype)
        with guarded():  # the output starts as NaN: an element the kernel skips cannot pass
            for block in (VECTOR_BLOCK, 64):
                got = c04.vector_add(x, y, block=block)
                assert got.dtype == dtype and got.shape == (n,)
                assert torch.equal(got, x + y), (n, block)


def test_vector_add_writes_every_element_of_a_poisoned_output():
    from course_lib.instruments import guarded

    dev = backend.get().torch_device  # the backend's tensors (a GPU run refuses CPU tensors first)
    with guarded():
        assert not torch.isnan(c04.vector_add(torch.zeros(300, device=dev), torch.zeros(300, device=dev), block=128)).any()
    assert c04.vector_add(torch.zeros(0, device=dev), torch.zeros(0, device=dev)).shape == (0,)


def test_vector_add_refuses_bad_input():
    dev = backend.get().torch_device  # the backend's tensors (a GPU run refuses CPU tensors first)
    x = torch.zeros(10, device=dev)
    with pytest.raises(ValueError, match=r"x has 10 elements and y has 9; they must be equal"):
        c04.vector_add(x, torch.zeros(9, device=dev))
    with pytest.raises(ValueError, match=r"1-D vector.*\(2, 5\).*reshape\(-1\)"):
        c04.vector_add(x.view(2, 5), x.view(2, 5))
    with pytest.raises(TypeError, match=r"x is torch.float32 but y is torch.float16"):
        c04.vector_add(x, x.half())
    with pytest.raises(TypeError, match=r"x is torch.int64; the kernel adds float32, float16, bfloat16"):
        c04.vector_add(torch.arange(10, device=dev), torch.arange(10, device=dev))
    with pytest.raises(TypeError, match=r"must be a torch.Tensor, not ndarray; convert it with torch.from_numpy"):
        c04.vector_add(np.zeros(10, np.float32), x)
    with pytest.raises(ValueError, match=r"not contiguous \(stride 2\).*contiguous\(\)"):
        c04.vector_add(torch.zeros(20, device=dev)[::2], x)
    with pytest.raises(ValueError, match=r"block must be a power of two"):
        c04.vector_add(x, x, block=100)
    other = "meta" if backend.get().torch_device == "cpu" else "cpu"
    with pytest.raises(ValueError, match=r"x is on .*backend runs the kernel on"):
        c04.vector_add(torch.zeros(10, device=other), torch.zeros(10, device=other))


# ---- every stage, every dtype, through course_lib.check ----------------------------------------
def test_the_triton_stages_are_the_course_ones():
    triton = [s for s in course_lib.stages() if s.backend == "triton" and not s.scalings]  # FP8: test_fast_fp8
    assert [s.name for s in triton] == STAGES
    assert all(s.notebook == NOTEBOOKS[s.name] and s.dtypes == tuple(DTYPES) for s in triton)


# every Triton stage of the manifest, each dtype it lists, an FP8 stage in each scaling it takes (a new
# one is checked here without being named)
@pytest.mark.parametrize("name, dtype, scaling", [
    (s.name, d, scaling) for s in course_lib.stages() if s.backend == "triton" for d in s.dtypes
    for scaling in (s.scalings if dtypes.get(d).operands == "fp8" else (None,))])
def test_stage_passes_check(name, dtype, scaling):
    report = check(name, dtype, scaling=scaling, seed=4)
    assert all(r.rel_error <= r.tolerance for r in report.results)


def test_fast_stage_is_the_sweep_stage():
    assert get_stage("triton_fast").sweep
    assert [get_stage(n).order for n in STAGES] == sorted(get_stage(n).order for n in STAGES)


def test_output_dtype_follows_input():
    for dtype, want in (("fp32", torch.float32), ("tf32", torch.float32), ("fp16", torch.float16), ("bf16", torch.bfloat16)):
        a, b = random_inputs(5, 6, 7, dtype, seed=0)
        for name in ("triton_tiled", "triton_tiled_transposed_b", "triton_fast"):
            assert get_stage(name).gemm(dtype)(a, b).dtype == want


# ---- property tests: random odd shapes 1..300 ----------------------------------------------------
_dims = st.integers(min_value=1, max_value=300)


@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(M=_dims, N=_dims, K=_dims, dtype=st.sampled_from(DTYPES), name=st.sampled_from(["triton_tiled", "triton_tiled_transposed_b", "triton_fast"]))
def test_any_shape(M, N, K, dtype, name):
    check(name, dtype, shapes=[(M, N, K)], seed=M * 90001 + N * 301 + K)


@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(M=_dims, N=st.integers(1, 37).map(lambda v: 8 * v), K=st.integers(1, 37).map(lambda v: 8 * v), dtype=st.sampled_from(DTYPES))
def test_descriptor_stage_on_aligned_shapes(M, N, K, dtype):
    # Descriptors need 16-byte rows: N and K multiples of 8 suit every course dtype; M is free.
    check("triton_tiled_descriptors", dtype, shapes=[(M, N, K)], seed=M + N + K)


# ---- every candidate configuration of the fast kernel ---------------------------------------------
FAST_CASES = list(dict.fromkeys(
    (d, c04.FastConfig(**{**cfg.as_dict(), "loads": loads}))
    for d, cfgs in c04.FAST_CONFIGS.items()
    for cfg in cfgs
    for loads in ("descriptors", "pointers")
))


@pytest.mark.parametrize("dtype, cfg", FAST_CASES, ids=[f"{d}-{c.label}" for d, c in FAST_CASES])
def test_fast_config(dtype, cfg):
    # 264 x 520 is three tiles of 128 x 256 (the persistent launch walks several per program);
    # 33 x 17 x 40 is off every tile and misaligned for descriptors (the pointer fallback).
    check(lambda a, b: c04.fast_matmul(a, b, dtype, cfg), dtype, shapes=[(264, 520, 72), (33, 17, 40)], seed=2)


# ---- the per-shape candidates: small M, few tiles, split-K ----------------------------------------
# (shape, SM count the heuristic is told): small M on 16 SMs (split-K is offered), small M with
# more columns than SMs, and few tiles on 8 SMs (half tiles and split-K are offered). The shapes
# are off every tile and K is not a multiple of any BLOCK_K, so edges and the last K range are hit.
SHAPE_CASES = [((5, 200, 1000), 16), ((37, 136, 520), 16), ((130, 264, 1544), 8)]
SHAPE_CANDIDATES = list(dict.fromkeys(
    (d, cfg, shape)
    for (shape, sms) in SHAPE_CASES
    for d in DTYPES
    for cfg in c04.shape_candidates(d, *shape, sm_count=sms)
    if cfg not in c04.FAST_CONFIGS[d]
))


@pytest.mark.parametrize("dtype, cfg, shape", SHAPE_CANDIDATES,
                         ids=[f"{d}-{c.label}-{s}" for d, c, s in SHAPE_CANDIDATES])
def test_shape_candidate(dtype, cfg, shape):
    check(lambda a, b: c04.fast_matmul(a, b, dtype, cfg), dtype, shapes=[shape], seed=sum(shape))


def test_shape_candidates_cover_each_kind():
    kinds = {shape: {("split" if c.split_k > 1 else "small" if c.block_m <= 64 and shape[0] <= autotune.SMALL_M else "tile")
                     for c in c04.shape_candidates("bf16", *shape, sm_count=sms)} for shape, sms in SHAPE_CASES}
    assert kinds[(5, 200, 1000)] == {"small", "split"}
    assert "split" in kinds[(130, 264, 1544)]
    # Large C: only the big tiles; a decode step: only one tile row.
    assert c04.shape_candidates("bf16", 4096, 4096, 4096, 132) == c04.FAST_CONFIGS["bf16"]
    assert {c.block_m for c in c04.shape_candidates("bf16", 16, 4096, 4096, 132)} == {16}
    assert {c.block_m for c in c04.shape_candidates("fp32", 64, 4096, 4096, 132)} == {64}


@pytest.mark.parametrize("K, block_k, split, want", [(1000, 128, 4, 256), (1000, 128, 20, 128), (64, 64, 3, 64), (4096, 64, 3, 1408)])
def test_split_k_ranges(K, block_k, split, want):
    per = fast_launch.split_k_ranges(K, block_k, split)
    assert per == want and per % block_k == 0
    assert -(-K // per) <= split and (-(-K // per) - 1) * per < K  # no empty range


def test_split_k_leaves_its_counters_at_zero(monkeypatch):
    # N = 72: B's rows are 288 bytes, 16-byte aligned, so the descriptor path (and split-K) runs;
    # with N = 70 the kernel would fall back to pointer loads and split-K would go untested.
    ran = []
    original = fast_launch.launch_split_k
    monkeypatch.setattr(fast_launch, "launch_split_k", lambda *a, **k: ran.append(1) or original(*a, **k))
    cfg = c04.FastConfig(16, 32, 32, group_m=1, split_k=3)
    a, b = random_inputs(5, 72, 200, "fp32", seed=3)
    c = c04.fast_matmul(a, b, "fp32", cfg)
    torch.testing.assert_close(c, a @ b, rtol=1e-5, atol=1e-4)
    assert ran, "split-K did not run"
    assert int(common.zeroed_counters(1, a.device).abs().sum()) == 0  # the next launch starts from zero


def test_every_split_k_launch_takes_its_own_workspace(monkeypatch):
    """A plan keeps no workspace: a CUDA graph records the one its capture took, and two streams (or the
    graph and an eager call) must never share one. Launched three times, a plan asks three times."""
    asked = []
    original = fast_launch.split_k_workspace
    monkeypatch.setattr(fast_launch, "split_k_workspace", lambda *a, **k: asked.append(a) or original(*a, **k))
    cfg = c04.FastConfig(16, 32, 32, group_m=1, split_k=3)
    a, b = random_inputs(5, 72, 200, "fp32", seed=4)
    ops = prepare(a, b, stage="triton_fast", dtypes=("fp32",))
    plan = fast_launch.FastPlan(ops, "fp32", cfg, torch.full((5, 72), float("nan")))
    for seed in (5, 6):
        a, b = random_inputs(5, 72, 200, "fp32", seed=seed)
        c = torch.full((5, 72), float("nan"))
        plan(a, b, c)
        torch.testing.assert_close(c, a @ b, rtol=1e-5, atol=1e-4)
    assert len(asked) == 3 and all(shape == (3, 5, 72) for shape, *_ in asked)


def test_split_k_config_is_validated():
    with pytest.raises(ValueError, match="split_k"):
        c04.FastConfig(64, 64, 32, split_k=0)
    with pytest.raises(ValueError, match="persistent"):
        c04.FastConfig(64, 64, 32, split_k=2, persistent=True)


def test_fast_uses_descriptors_only_when_aligned():
    cfg = c04.FastConfig(64, 64, 32)
    for (M, N, K), want in (((64, 64, 64), True), ((64, 64, 7), False), ((64, 7, 64), False), ((3, 64, 64), True)):
        a, b = random_inputs(M, N, K, "fp32", seed=0)
        ops = prepare(a, b, stage="t", dtypes=("fp32",))
        c = torch.empty(M, N)
        _, used = fast_launch.launch_fast(ops, "fp32", cfg, c)
        assert used is want, (M, N, K)
        torch.testing.assert_close(c, a @ b, rtol=1e-5, atol=1e-4)


def test_fast_config_is_validated():
    with pytest.raises(ValueError, match="b_layout"):
        c04.FastConfig(64, 64, 32, b_layout="mn")
    with pytest.raises(ValueError, match="power of two"):
        c04.FastConfig(64, 48, 32)
    with pytest.raises(ValueError, match="tl.dot's minimum"):
        c04.FastConfig(64, 64, 8)
    with pytest.raises(ValueError, match="loads"):
        c04.FastConfig(64, 64, 32, loads="tma")


def test_first_candidate_runs_on_the_cpu():
    assert not backend.get().is_gpu
    a, b = random_inputs(40, 24, 16, "fp16", seed=1)
    c = get_stage("triton_fast").gemm("fp16")(a, b)
    assert autotune.tuned_configs() == {}  # nothing is timed on the CPU
    assert get_stage("triton_fast").tuning_log() == []  # what a recording keeps of the tuning
    torch.testing.assert_close(c, c04.fast_matmul(a, b, "fp16", c04.FAST_CONFIGS["fp16"][0]))


# ---- tensor descriptors: clear errors when the layout breaks the rules ---------------------------
def _desc(a, b, dtype="fp32"):
    return get_stage("triton_tiled_descriptors").gemm(dtype)(a, b)


def test_descriptor_row_stride_not_16_byte_aligned():
    a, b = random_inputs(8, 8, 7, "fp32")  # a's rows are 7 * 4 = 28 bytes apart
    with pytest.raises(ValueError, match=r"a's rows are 7 elements = 28 bytes apart.*multiple of 4 elements"):
        _desc(a, b)
    a, b = random_inputs(8, 12, 8, "fp16")  # b's rows: 12 * 2 = 24 bytes
    with pytest.raises(ValueError, match=r"b's rows are 12 elements = 24 bytes.*multiple of 8 elements"):
        _desc(a, b, "fp16")


def test_descriptor_output_row_stride():
    a, _ = random_inputs(8, 8, 8, "fp32")
    b = torch.randn(8, 8)[:, :6]  # rows 8 elements apart (aligned), but C gets 6-element rows
    with pytest.raises(ValueError, match=r"the output c \(N columns\)'s rows are 6 elements"):
        _desc(a, b)


def test_descriptor_misaligned_base_address():
    flat = torch.randn(8 * 8 + 1)
    a = flat[1:].view(8, 8)  # contiguous, but starts 4 bytes into the allocation
    _, b = random_inputs(8, 8, 8, "fp32")
    assert a.is_contiguous() and a.data_ptr() % 16 == 4
    with pytest.raises(ValueError, match=r"a starts at an address that is not a multiple of 16 bytes.*clone\(\)"):
        _desc(a, b)
    c = _desc(a.clone(), b)  # the suggested fix works
    torch.testing.assert_close(c, a @ b, rtol=1e-5, atol=1e-5)


def test_descriptor_non_contiguous_last_dimension():
    a, b = random_inputs(8, 8, 8, "fp32")
    with pytest.raises(ValueError, match=r"b is not contiguous in its last dimension.*b.contiguous\(\)"):
        _desc(a, b.T.contiguous().T)


def test_descriptor_rules_in_plain_terms():
    t = torch.zeros(4, 8)
    assert common.descriptor_problem(t, "t") is None
    assert "16-byte" in common.descriptor_problem(torch.zeros(4, 5), "t")
    assert common.descriptor_problem(torch.zeros(4, 1), "t") is not None  # 4-byte rows
    assert common.descriptor_problem(torch.zeros(4, 8, dtype=torch.float16), "t") is None


# ---- bad inputs the stages share ------------------------------------------------------------------
@pytest.mark.parametrize("name", STAGES)
def test_wrong_dtype_for_the_named_dtype(name):
    a, b = random_inputs(4, 5, 6, "fp16")
    with pytest.raises(TypeError, match="takes float32 inputs, not torch.float16"):
        get_stage(name).gemm("tf32")(a, b)
    a, b = random_inputs(4, 5, 6, "fp32")
    with pytest.raises(TypeError, match="takes bfloat16 inputs"):
        get_stage(name).gemm("bf16")(a, b)


@pytest.mark.parametrize("name", ["triton_tiled", "triton_tiled_transposed_b", "triton_fast"])
def test_strided_inputs_are_handled(name):
    a, b = random_inputs(40, 30, 20, "fp32", seed=3)
    at = a.T.contiguous().T  # column-major A
    bs = torch.randn(20, 60)[:, ::2]  # every other column: row stride 60, column stride 2
    c = get_stage(name).gemm("fp32")(at, bs)
    torch.testing.assert_close(c, (a.double() @ bs.double()).float(), rtol=1e-5, atol=1e-4)


def test_b_stored_transposed_is_not_copied(monkeypatch):
    cfg = c04.FAST_CONFIGS["tf32"][0]
    assert cfg.b_layout == "nk"
    a, b = random_inputs(40, 24, 32, "tf32", seed=5)
    want = a.double() @ b.double()
    copies = []
    real = c04.transpose
    monkeypatch.setattr(fast_launch, "transpose", lambda x, *args: copies.append(x.shape) or real(x, *args))
    small = c04.FastConfig(32, 32, 16, b_layout="nk", persistent=True)
    torch.testing.assert_close(c04.fast_matmul(a, b, "tf32", small).double(), want, rtol=1e-4, atol=1e-4)
    assert copies == [(32, 24)]  # B as given (K x N, row-major): one transpose
    w = b.T.contiguous()  # stored N x K, as a torch.nn.Linear weight
    torch.testing.assert_close(c04.fast_matmul(a, w.T, "tf32", small).double(), want, rtol=1e-4, atol=1e-4)
    assert copies == [(32, 24)]  # w.T is read as it is stored: no second copy


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_b_stored_n_by_k_is_read_k_major_through_descriptors(monkeypatch, dtype):
    """x @ w.T, the weight of nn.Linear: triton_fast's default reads w as it is stored (B^T, K-major),
    through descriptors and without a copy, where reading it N-major would fall back to pointer loads."""
    a, b = random_inputs(48, 40, 64, dtype, seed=5)
    w = b.T.contiguous()
    copies, plans = [], []
    monkeypatch.setattr(fast_launch, "transpose", lambda x, *args: copies.append(x.shape))
    real = fast_launch.FastPlan

    def recorded(*args):
        plans.append(real(*args))
        return plans[-1]

    monkeypatch.setattr(fast_launch, "FastPlan", recorded)
    monkeypatch.setattr(autotune, "FastPlan", recorded)
    monkeypatch.setattr(autotune, "_PLANNED", planned(autotune._checked, autotune._again))  # no plans yet
    for gemm in (c04.fast_matmul, autotune.fast_matmul_autotuned):
        c = gemm(a, w.T, dtype)
        assert plans and plans[-1].descriptors and plans[-1].cfg.b_layout == "nk", gemm
        torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=2e-2, atol=2e-2)
        plans.clear()
    assert copies == []
    # B stored K x N, and a configuration of pointer loads, are left as they are
    cfg = c04.FAST_CONFIGS[dtype][0]
    assert fast_launch.as_stored(cfg, b) == cfg
    pointers = c04.FastConfig(32, 32, 32, loads="pointers")
    assert fast_launch.as_stored(pointers, w.T) == pointers


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1, 1), (3, 130), (65, 64), (200, 77)])
def test_transpose_moves_every_element(shape, dtype):
    device = backend.get().torch_device
    x = torch.randn(shape, device=device).to(dtype)
    got = c04.transpose(x)
    assert got.shape == shape[::-1] and got.is_contiguous() and got.dtype == dtype
    assert torch.equal(got.view(torch.int16 if dtype != torch.float32 else torch.int32),
                       x.T.contiguous().view(torch.int16 if dtype != torch.float32 else torch.int32))
    strided = torch.randn(shape[0], 2 * shape[1], device=device).to(dtype)[:, ::2]  # not contiguous
    assert torch.equal(c04.transpose(strided).float(), strided.T.float())
    with pytest.raises(ValueError, match="2-D"):
        c04.transpose(x[0])
    other = "meta" if device == "cpu" else "cpu"
    with pytest.raises(ValueError, match="backend runs on"):
        c04.transpose(torch.empty(4, 4, device=other))


def test_numpy_in_numpy_out():
    a, b = np.ones((3, 5), np.float32), np.ones((5, 2), np.float32)
    for name in [s for s in STAGES if s != "triton_tiled_descriptors"]:
        c = get_stage(name).gemm("fp32")(a, b)
        assert isinstance(c, np.ndarray) and np.all(c == 5)


def test_32_bit_offsets_are_guarded():
    huge = torch.empty((2**16, 2**16), device="meta")
    with pytest.raises(ValueError, match="beyond 2\\*\\*31 - 1"):
        common.require_32bit_offsets("triton_tiled", huge)
    common.require_32bit_offsets("triton_tiled", torch.empty((2**15, 2**15), device="meta"))


def test_bf16_is_computed_from_bf16_values():
    # The interpreter work-around must not change the numbers: compare with fp32 math on the
    # bf16-rounded inputs, rounded once to bf16 at the end.
    a, b = random_inputs(33, 24, 40, "bf16", seed=5)  # 16-byte rows, for the descriptor stage
    want = (a.float() @ b.float()).to(torch.bfloat16)
    for name in STAGES:
        got = get_stage(name).gemm("bf16")(a, b)
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got.float(), want.float(), rtol=1e-2, atol=1e-2)


# ---- the seed experiment's runner ----------------------------------------------------------------
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("precision", ["ieee", "tf32"])
def test_article_experiment_gemm(precision, transposed):
    def fn(x, y):
        return article.article_experiment_gemm(x, y, block_size=32, input_precision=precision, transposed_y=transposed)

    check(fn, "fp32" if precision == "ieee" else "tf32", shapes=[(70, 45, 33), (1, 1, 1)], seed=9)


def test_article_experiment_is_recorded_for_every_variant():
    import json

    from course_lib.results import RESULTS_DIR

    rows = json.loads((RESULTS_DIR / "nvidia_h200_triton_summary.json").read_text())["article_experiment"]
    variants = {(r["variant"], r["block_size"], r["dtype"]) for r in rows}
    for bs in article.ARTICLE_BLOCK_SIZES:
        for kind in ("plain", "transposed", "transposed+copy"):
            for dtype in ("fp32", "tf32"):
                assert (kind, bs, dtype) in variants


def _article_table_output(capsys, prediction) -> str:
    """What notebook 04's table of the article's experiment prints, the learner's prediction set."""
    import nbformat

    from course_lib import results
    from course_lib.notebooks import NOTEBOOK_DIR

    nb = nbformat.read(NOTEBOOK_DIR / "04_coalescing_and_triton.ipynb", as_version=4)
    source = next(c.source for c in nb.cells if c.get("id") == "c21-2dafe099")
    capsys.readouterr()
    exec(source, {"my_transposed_speedup": prediction, "triton_runs": results.summary("triton")})
    return capsys.readouterr().out


def test_the_article_table_waits_for_a_prediction(capsys):
    """The table holds the prediction's answer: without a prediction it prints one line, and the
    committed notebook (run with none) shows only that line."""
    import nbformat
    import prose_facts

    from course_lib.notebooks import NOTEBOOK_DIR

    waiting = _article_table_output(capsys, None)
    assert waiting.count("\n") == 1 and "prediction" in waiting and "x" not in waiting.split()
    nb = nbformat.read(NOTEBOOK_DIR / "04_coalescing_and_triton.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.get("id") == "c21-2dafe099")
    assert "".join(o.get("text", "") for o in cell.outputs) == waiting

    table = _article_table_output(capsys, 1.3).splitlines()
    assert len(table) == 6, table  # a title, a header, a row per precision and BLOCK_SIZE
    rows = {line.split(", BLOCK_SIZE ")[0] + " " + line.split(", BLOCK_SIZE ")[1].split()[0]: line.split()
            for line in table[2:]}
    for dtype, precision in (("fp32", "exact fp32"), ("tf32", "TF32")):
        for block in (64, 32):
            row = rows[f"{precision} {block}"]
            assert row[-2] == f"{prose_facts.tr_speedup(dtype, block):.2f}x", (dtype, block, row)


# ---- the seed experiment's shared-memory model (drawn with course_lib.viz.banks) -------------------
def test_seed_b_tile_model():
    from course_lib.model.banks import bank_access

    for block in (32, 64):
        plain = bank_access(*c04.article_b_tile_addresses("plain", pitch=block))
        transposed = bank_access(*c04.article_b_tile_addresses("transposed", pitch=block))
        # 16 distinct 16-byte loads = 256 bytes: two passes at best; the transposed tile puts all
        # 16 columns' words in the same 4 banks.
        assert plain.wavefronts == 2 and transposed.wavefronts == 16
    addrs, width = c04.article_b_tile_addresses("transposed", 64, k=4, j=1)
    assert width == 16 and addrs[0] == (1 * 64 + 4) * 4 and addrs[16] == addrs[0]
    # Exercise 3: no pitch that keeps the 16-byte loads aligned gets below 8 passes (lane t's column
    # starts 16 t p words apart for a pitch of 4 p words: banks 0 or 16 only); a pitch of 65 would
    # break the alignment and is refused; an XOR swizzle of the 16-byte chunks reaches the 2 passes
    # 256 bytes need, for every k and every column of the thread, and permutes each stored row.
    assert min(bank_access(*c04.article_b_tile_addresses("transposed", pitch=p)).wavefronts for p in range(64, 132, 4)) == 8
    with pytest.raises(ValueError, match="aligned"):
        c04.article_b_tile_addresses("transposed", pitch=65)
    for k in range(0, 64, 4):
        for j in range(4):
            addrs, width = c04.article_b_tile_addresses("transposed", k=k, j=j, swizzle=True)
            assert bank_access(addrs, width).wavefronts == 2
    row = sorted(c04.article_b_tile_addresses("transposed", k=k, j=1, swizzle=True)[0][5] for k in range(0, 64, 4))
    plain_row = sorted(c04.article_b_tile_addresses("transposed", k=k, j=1)[0][5] for k in range(0, 64, 4))
    assert row == plain_row
    with pytest.raises(ValueError, match="variant"):
        c04.article_b_tile_addresses("column")
    with pytest.raises(ValueError, match="transposed"):
        c04.article_b_tile_addresses("plain", swizzle=True)


def test_b_layout_in_words():
    from course_lib.kernels.coalescing_and_triton.evidence import b_layout_in_words

    assert b_layout_in_words("swizzled_shared<vec = 1, perPhase = 1, maxPhase = 1, order = [1, 0]>") == "not swizzled, n fastest"
    assert b_layout_in_words("swizzled_shared<vec = 1, perPhase = 1, maxPhase = 1, order = [0, 1]>") == \
        "not swizzled, k fastest (K-major)"
    assert b_layout_in_words("nvmma_shared<swizzlingByteWidth = 128, transposed = true, elementBitWidth = 32>") == \
        "swizzled for wgmma (128-byte rows), k fastest (K-major)"
    assert b_layout_in_words("swizzled_shared<vec = 4, perPhase = 1, maxPhase = 8, order = [1, 0]> "
                             "(then transposed in registers)") == \
        "swizzled (8 patterns), k fastest (K-major), B^T turned in registers"


def test_print_table(capsys):
    evidence.print_table([{"a": 1, "bb": "x"}, {"a": 22, "bb": "yy"}])
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["a", "bb"] and out[2].split() == ["22", "yy"]


# ---- launch order: Python twin, Triton helper ----------------------------------------------------
@triton.jit
def _order_probe_kernel(out_ptr, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    pid_m, pid_n = c04.grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M)
    tl.store(out_ptr + 2 * pid, pid_m)
    tl.store(out_ptr + 2 * pid + 1, pid_n)


@pytest.mark.parametrize("m, n, g", [(5, 3, 2), (9, 4, 8), (1, 6, 4), (8, 8, 8)])
def test_grouped_tile_matches_its_python_twin(m, n, g):
    out = torch.full((m * n, 2), -1, dtype=torch.int32)
    _order_probe_kernel[(m * n,)](out, m, n, GROUP_M=g)
    want = [schedules.grouped_order(p, m, n, g) for p in range(m * n)]
    assert [tuple(r) for r in out.tolist()] == want


@pytest.mark.parametrize("kernel", ["fast_matmul_kernel", "persistent_matmul_kernel", "split_k_matmul_kernel"])
def test_each_fast_kernel_reads_top_to_bottom(kernel):
    """Like Triton's tutorial 09, each fast kernel shows its whole algorithm: its K loop and tl.dot in
    its own body, and no @triton.jit function called but grouped_tile, the tile order they share.
    (The pointer fallback, grouped_matmul_kernel, is notebook 04's tile in grouped order: it calls
    notebook 04's matmul_tile_masked, where the learner read that loop.)"""
    import inspect
    import re

    from course_lib import learn

    source = inspect.getsource(getattr(fast, kernel).fn)
    jit_functions = {name for name, obj in vars(fast).items() if hasattr(obj, "fn") and hasattr(obj, "arg_names")}
    called = set(re.findall(r"(?<!def )\b(\w+)\(", source)) & jit_functions
    assert called == {"grouped_tile"}, f"{kernel} calls {sorted(called)}"
    mainloop = learn.show_source(getattr(fast, kernel), section="mainloop").data  # notebook 05 shows it
    assert re.search(r"^for k0 in (tl\.)?range\(", mainloop, re.M) and "tl.dot(a, b, acc" in mainloop


def test_the_fast_kernels_file_holds_the_kernels_only():
    """fast.py is read top to bottom as the kernels alone: their configurations are in fast_configs.py,
    what launches them in fast_launch.py. Every statement of fast.py but its imports and docstring is
    a function decorated with @triton.jit and nothing else."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(fast))
    body = [n for n in tree.body[1:] if not isinstance(n, (ast.Import, ast.ImportFrom))]  # [0]: the docstring
    assert body and all(isinstance(n, ast.FunctionDef) and [ast.unparse(d) for d in n.decorator_list] == ["triton.jit"]
                        for n in body), [getattr(n, "name", type(n).__name__) for n in body]


@pytest.mark.parametrize("m, n, g", [(5, 3, 2), (9, 4, 8), (7, 7, 3), (1, 1, 1)])
def test_every_order_covers_every_tile_once(m, n, g):
    for order in (schedules.grouped_order, schedules.row_major_order):
        grid = schedules.launch_order_grid(order, m, n, g)
        assert sorted(grid.ravel().tolist()) == list(range(m * n))


def test_grouping_reads_fewer_blocks():
    grouped = schedules.blocks_loaded(schedules.grouped_order, 32, 32, 8, 132)
    naive = schedules.blocks_loaded(schedules.row_major_order, 32, 32, 8, 132)
    assert naive == {"programs": 132, "A block-rows": 5, "B block-columns": 32, "A + B": 37}
    assert grouped["A + B"] < naive["A + B"]


# ---- compiling for the H200 on this machine -------------------------------------------------------
@pytest.mark.slow
def test_hopper_compile_evidence():
    rows = c04.hopper_compile_evidence(
        [dict(kernel=k, dtype="fp32", precision="tf32", block=64) for k in ("plain", "transposed")]
        + [dict(kernel="plain", dtype="fp32", precision="ieee", block=32)]
    )
    plain, transposed, ieee = rows
    assert plain["arch"] == "sm_90a" and plain["triton"] == triton.__version__
    assert plain["HGMMA (wgmma)"] > 0 and transposed["HGMMA (wgmma)"] > 0
    # Row-major B: Hopper's TF32 MMA wants K-major B, so B's tiles are scattered 4 bytes at a time.
    assert plain["LDGSTS 4 B"] > 0 and transposed["LDGSTS 4 B"] == 0
    assert "transposed = true" in plain["B tile in shared memory"]
    assert ieee["HGMMA (wgmma)"] == 0 and ieee["HMMA (mma.sync)"] == 0 and ieee["FFMA (CUDA cores)"] > 0
    assert "maxPhase = 1" in ieee["B tile in shared memory"]  # FMA path: B's tile is not swizzled
    assert ieee["B tile in words"] == "not swizzled, n fastest"
    assert plain["B tile in words"].endswith("k fastest (K-major)")


# ---- on a GPU ------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", STAGES)
def test_stage_passes_check_on_gpu_shapes(name, dtype):
    check(name, dtype)


@pytest.mark.gpu
def test_fast_uses_descriptors_on_the_gpu_when_aligned():
    a, b = random_inputs(512, 512, 512, "fp16", seed=0)
    ops = prepare(a, b, stage="t", dtypes=("fp16",))
    c = torch.empty(512, 512, dtype=torch.float16, device="cuda")
    _, used = fast_launch.launch_fast(ops, "fp16", c04.FAST_CONFIGS["fp16"][0], c)
    assert used
    torch.testing.assert_close(c, a @ b, rtol=2e-2, atol=2e-2)


# ---- the package's face ---------------------------------------------------------------------------
def test_the_package_exports_exactly_its_all():
    """What ``c04.`` offers is its ``__all__`` (what the notebooks, the exercises and the manifest use);
    a name imported into the package for someone else's convenience shows up here."""
    import types

    offered = {n for n, v in vars(c04).items()
               if not n.startswith("_") and not isinstance(v, types.ModuleType) and n != "annotations"}
    assert offered == set(c04.__all__), offered ^ set(c04.__all__)


def test_triton_fast_says_where_a_dtype_without_candidates_needs_them(monkeypatch):
    monkeypatch.delitem(fast_configs.FAST_CONFIGS, "bf16")
    a, b = random_inputs(8, 8, 8, "bf16", seed=0)
    with pytest.raises(ValueError, match=r"no configurations for 'bf16'.*FAST_CONFIGS and PORTABLE_CONFIGS"):
        get_stage("triton_fast").gemm("bf16")(a, b)
