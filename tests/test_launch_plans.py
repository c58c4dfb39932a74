"""Launch plans (course_lib.gemm.plan_key, LaunchPlans, planned): the final stages check and decide once per
kind of operands, and every later call with the same key only allocates C and launches - still
through new_output, so check's poisoned outputs and guard regions catch a kernel through the plan."""

import functools
import gc
import math
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest
import torch
import triton
from triton.compiler import CompiledKernel

import course_lib
from course_lib import backend, check, features, registry
from course_lib.gemm import LaunchPlans, new_output, plan_key, planned, prepare, random_inputs
from course_lib.instruments.guard import guarded
from course_lib.kernels import tensor_cores as tc
from course_lib.kernels.coalescing_and_triton import autotune, common, fast_launch
from course_lib.kernels.coalescing_and_triton.fast_configs import FastConfig
from course_lib.kernels.coalescing_and_triton.autotune import fast_matmul_autotuned
from fake_compiled import FakeCompiled, Played, launched_as_on_a_gpu

# Tests that play a GPU's part on the CPU, or compare bits with a process that autotunes anew.
cpu_only = pytest.mark.skipif(backend.get().is_gpu, reason="plays the GPU's part on the CPU backend")


def _counting(monkeypatch, module, name: str) -> list:
    """Replace ``module.name`` by a wrapper that records each call, and return the record."""
    calls = []
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


@pytest.fixture
def fresh_triton_plans(monkeypatch):
    """triton_fast without the plans other tests made: what a fresh process has."""
    monkeypatch.setattr(autotune, "_PLANNED", planned(autotune._checked, autotune._again))
    return autotune._PLANNED.plans


def _misaligned(M: int, N: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A contiguous M x N matrix whose first element is 4 bytes past a 16-byte boundary."""
    storage = torch.randn(M * N + 4, device=backend.get().torch_device).to(dtype)
    t = storage[4 // storage.element_size():][:M * N].view(M, N)
    assert t.data_ptr() % 16 == 4
    return t


# ---- the key and the cache ---------------------------------------------------------------------
def test_the_key_holds_what_the_checks_read():
    a, b = random_inputs(8, 16, 24, "fp32", seed=0)
    same = plan_key(a, b)
    assert same is not None and plan_key(a.clone(), b.clone()) == same  # other tensors, same kind
    assert plan_key(a[:4], b) != same  # shape
    assert plan_key(a.T.contiguous().T, b) != same  # strides (column-major A)
    assert plan_key(a.half(), b.half()) != plan_key(a, b)  # element type
    assert plan_key(_misaligned(8, 24), b) != same  # alignment of the base address
    x, y = a.cpu().numpy(), b.cpu().numpy()
    assert plan_key(x, y) is None and plan_key(a, y) is None  # numpy arrays: no plan


def test_plans_are_kept_per_key_up_to_a_limit_and_dropped_with_the_backend(monkeypatch):
    plans = LaunchPlans(limit=2)
    assert plans.get(None) is None
    plans.keep(None, "never kept")
    assert len(plans) == 0
    for k in ("k1", "k2", "k3"):
        plans.keep((k,), k)
    assert plans.get(("k1",)) is None and plans.get(("k3",)) == "k3" and len(plans) == 2  # the oldest went
    fake = backend.Backend("gpu", "faked by a test", "Fake GPU", (9, 0), (9, 0))
    monkeypatch.setattr(backend, "_BACKEND", fake)
    assert plans.get(("k3",)) is None  # another backend: the checks would read another device
    monkeypatch.undo()
    assert plans.get(("k3",)) is None and len(plans) == 0


def test_drop_every_empties_every_stage_s_plans_and_outlives_dead_ones():
    first, second = LaunchPlans(), LaunchPlans()
    stage_7 = tc.stages._TC7_PLANS
    stage_7.keep(("a test's key",), "plan t")
    first.keep(("a",), "plan a")
    second.keep(("b",), "plan b")
    gone = LaunchPlans()
    gone.keep(("c",), "plan c")
    del gone
    gc.collect()
    LaunchPlans.drop_every()  # the torch.compile tests' fixture; a dead plan store must not break it
    assert len(first) == 0 and len(second) == 0 and len(stage_7) == 0  # a stage's own store too


def test_planned_resolves_once_per_key_and_keeps_no_plan_for_a_failure():
    calls = []

    def resolve(a, b, tag):
        calls.append(("resolve", tag))
        if tag == "refused":
            raise ValueError("refused by its checks")
        return a @ b, ("plan", tag)

    def launch(plan, a, b, tag):
        calls.append(("launch", plan))
        return a @ b

    gemm = planned(resolve, launch)
    a, b = random_inputs(4, 6, 8, "fp32", seed=0)
    gemm(a, b, "x")
    gemm(a.clone(), b.clone(), "x")  # same key, same extra argument: the plan
    gemm(a, b, "y")  # the extra argument is part of the key
    with pytest.raises(ValueError, match="refused"):
        gemm(a, b, "refused")
    with pytest.raises(ValueError, match="refused"):
        gemm(a, b, "refused")  # no plan was kept: checked again
    gemm(a.cpu().numpy(), b.cpu().numpy(), "x")  # no key: the checked path
    assert calls == [("resolve", "x"), ("launch", ("plan", "x")), ("resolve", "y"), ("resolve", "refused"),
                     ("resolve", "refused"), ("resolve", "x")]
    assert len(gemm.plans) == 2


@pytest.mark.parametrize("mode", ["plain", "guarded"])
def test_new_output_starts_on_a_16_byte_boundary(mode):
    # FastPlan relies on it: its descriptor choice and Triton's specialisation read C's alignment.
    for M, N in ((1, 1), (3, 5), (33, 17)):
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            if mode == "guarded":
                with guarded():
                    c = new_output(M, N, dtype, "cpu")
            else:
                c = new_output(M, N, dtype, "cpu")
            assert c.data_ptr() % 16 == 0 and c.is_contiguous(), (mode, M, N, dtype)


# ---- triton_fast ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["fp32", "tf32", "bf16"])
def test_triton_fast_checks_and_decides_once_per_key(monkeypatch, fresh_triton_plans, dtype):
    prepares = _counting(monkeypatch, autotune, "prepare")
    tunings = _counting(monkeypatch, autotune, "autotuned_config")
    offsets = _counting(monkeypatch, autotune, "require_32bit_offsets")
    a, b = random_inputs(40, 72, 48, dtype, seed=1)
    first = fast_matmul_autotuned(a, b, dtype)
    a2, b2 = a.clone(), b.clone()  # other tensors of the same key
    second = fast_matmul_autotuned(a2, b2, dtype)
    assert len(prepares) == len(tunings) == len(offsets) == 1  # the second call took the plan
    assert len(fresh_triton_plans) == 1
    assert torch.equal(first, second)
    torch.testing.assert_close(second.double(), a.double() @ b.double(), rtol=2e-2, atol=2e-2)


def test_triton_fast_plan_gives_what_the_checked_path_gives(fresh_triton_plans):
    # A plan launches what the first call launched; a process without plans computes the same bits.
    a, b = random_inputs(70, 40, 100, "fp32", seed=2)
    fast_matmul_autotuned(a, b, "fp32")
    planned = fast_matmul_autotuned(a, b, "fp32")
    fresh_triton_plans.clear()
    assert torch.equal(planned, fast_matmul_autotuned(a, b, "fp32"))


def test_another_key_makes_another_plan(monkeypatch, fresh_triton_plans):
    prepares = _counting(monkeypatch, autotune, "prepare")
    a, b = random_inputs(24, 32, 40, "fp32", seed=3)
    plans = fresh_triton_plans
    fast_matmul_autotuned(a, b, "fp32")
    variants = [(a[:20], b), (a.T.contiguous().T, b), (_misaligned(24, 40), b)]  # shape, strides, alignment
    for x, y in variants:
        torch.testing.assert_close(fast_matmul_autotuned(x, y, "fp32"), x @ y, rtol=1e-4, atol=1e-4)
    with pytest.raises(TypeError, match="takes float32 inputs"):  # element type: checked, refused
        fast_matmul_autotuned(a.half(), b.half(), "fp32")
    assert len(prepares) == 1 + len(variants) + 1 and len(plans) == 1 + len(variants)  # the refused: none
    descriptors = [p.descriptors for p in plans._plans.values()]
    # the aligned operands are read through descriptors; a misaligned A cannot be (TMA's rule)
    assert descriptors[0] is True and descriptors[-1] is False


@cpu_only
def test_numpy_operands_take_the_checked_path_every_time(monkeypatch, fresh_triton_plans):
    prepares = _counting(monkeypatch, autotune, "prepare")
    a, b = np.ones((3, 5), np.float32), np.ones((5, 2), np.float32)
    for _ in range(2):
        c = fast_matmul_autotuned(a, b, "fp32")
        assert isinstance(c, np.ndarray) and np.all(c == 5)
    assert len(prepares) == 2 and len(fresh_triton_plans) == 0


def test_bad_input_after_a_plan_is_still_refused(fresh_triton_plans):
    a, b = random_inputs(16, 16, 16, "fp32", seed=4)
    fast_matmul_autotuned(a, b, "fp32")
    with pytest.raises(ValueError, match="inner dimensions differ"):
        fast_matmul_autotuned(a, b[:8], "fp32")
    with pytest.raises(ValueError, match="must be a 2-D matrix"):
        fast_matmul_autotuned(a, b[0], "fp32")
    with pytest.raises(TypeError, match="a is torch.float32 but b is torch.float16"):
        fast_matmul_autotuned(a, b.half(), "fp32")
    other = "meta" if backend.get().torch_device == "cpu" else "cpu"
    with pytest.raises(ValueError, match="backend runs this kernel with inputs on"):
        fast_matmul_autotuned(a.to(other), b.to(other), "fp32")


@cpu_only
def test_a_plan_that_skips_tiles_is_caught_by_check(fresh_triton_plans):
    # check's first run makes the plan (and passes); then the plan is made to launch one program for
    # a C of six tiles. check's second run takes the plan: C still comes from new_output, poisoned
    # with NaN inside guard regions, so the tiles never written are found.
    shape = (100, 130, 40)
    assert check("triton_fast", "fp32", shapes=[shape], seed=5)
    (plan,) = fresh_triton_plans._plans.values()
    assert plan.grid[0] == 6 and plan.runner is None  # 2 x 3 tiles of 64 x 64; the interpreter
    plan.grid = (1,)
    with pytest.raises(AssertionError, match="never wrote"):
        check("triton_fast", "fp32", shapes=[shape], seed=6)
    assert len(fresh_triton_plans) == 1  # it was the plan that ran


# ---- Triton's internal calling convention (FastPlan's runner; Triton 3.6.0 and 3.7.1) -------------
# Played on the CPU by the interpreter (tests/fake_compiled.py).
def _launched_as_on_a_gpu(monkeypatch) -> list:
    return launched_as_on_a_gpu(monkeypatch, fast_launch, ("fast_matmul_kernel", "persistent_matmul_kernel",
                                                           "split_k_matmul_kernel", "grouped_matmul_kernel"))


@pytest.mark.parametrize("cfg, shape", [
    (FastConfig(32, 32, 32, group_m=2), (40, 72, 48)),  # one program per tile, descriptors
    (FastConfig(32, 32, 32, group_m=2, persistent=True, epilogue_split=2), (40, 72, 48)),
    (FastConfig(16, 32, 32, group_m=1, split_k=3), (5, 72, 200)),  # split-K: workspace, counters
    (FastConfig(32, 32, 32, group_m=2), (40, 70, 48)),  # B's rows 280 bytes: pointers
    (FastConfig(32, 32, 16, b_layout="nk", persistent=True), (40, 24, 32)),  # B^T, copied per call
])
@cpu_only
def test_the_runner_gets_every_parameter_in_signature_order(monkeypatch, cfg, shape):
    assert fast_launch.triton_runner_problems() == ()  # the installed Triton has what the plan relies on
    launches = _launched_as_on_a_gpu(monkeypatch)
    dtype = "tf32" if cfg.b_layout == "nk" else "fp32"
    M, N, K = shape
    a, b = random_inputs(M, N, K, dtype, seed=7)
    c = torch.full((M, N), math.nan)
    plan = fast_launch.FastPlan(prepare(a, b, stage="t", dtypes=(dtype,)), dtype, cfg, c)
    # the installed Triton's launcher is one whose work the plan does itself (its C function called)
    assert plan.runner is not None and plan.c_launch is not None and len(launches) == 1
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "fp32" else dict(rtol=2e-3, atol=2e-3)
    hooks = triton.knobs.runtime.launch_enter_hook
    hooked = []

    def hook(metadata):
        hooked.append(metadata)

    for seed, with_hook in ((8, False), (9, True)):  # new operands of the same key, into new outputs
        a, b = random_inputs(M, N, K, dtype, seed=seed)
        c = torch.full((M, N), math.nan)
        runs, direct = FakeCompiled.runs, FakeCompiled.direct
        if with_hook:  # a profiler's hook: the launch goes through the runner, which calls it
            hooks.add(hook)
        try:
            assert fast_launch.no_launch_hooks() is not with_hook
            plan(a, b, c)
        finally:
            hooks.remove(hook)
        # the launcher directly without a hook, the runner with one; never the JIT
        assert (FakeCompiled.runs - runs, FakeCompiled.direct - direct) == ((1, 0) if with_hook else (0, 1))
        assert len(launches) == 1 and hooked == ([FakeCompiled.LAUNCH_METADATA] if with_hook else [])
        hooked.clear()
        torch.testing.assert_close(c.double(), a.double() @ b.double(), **tol)
    if cfg.split_k > 1:
        assert int(common.zeroed_counters(1, a.device).abs().sum()) == 0


@cpu_only
def test_a_changed_triton_internal_stops_the_plan_and_names_the_versions_checked(monkeypatch):
    """A Triton whose JIT launches a compiled kernel differently: the plan raises before it makes its
    runner, naming what changed and the versions it was checked against (checked once per process:
    a fresh cache here stands for a fresh process)."""
    from triton.runtime.jit import JITFunction  # noqa: PLC0415

    _launched_as_on_a_gpu(monkeypatch)
    monkeypatch.setattr(JITFunction, "run", lambda self, *args, grid, warmup, **kwargs: None)
    monkeypatch.setattr(fast_launch, "triton_runner_problems",
                        functools.cache(fast_launch.triton_runner_problems.__wrapped__))
    a, b = random_inputs(40, 72, 48, "fp32", seed=7)
    with pytest.raises(fast_launch.TritonRunnerChanged,
                       match=r"JITFunction\.run no longer .*checked against Triton 3\.6\.0 .* and 3\.7\.1"):
        fast_launch.FastPlan(prepare(a, b, stage="t", dtypes=("fp32",)), "fp32", FastConfig(32, 32, 32),
                             torch.full((40, 72), math.nan))


@cpu_only
def test_the_installed_tritons_launcher_is_one_the_plans_call_inside():
    """The lock's Triton (and the H200's, 3.6) has a launcher whose call :class:`KernelLaunch` does itself;
    a launcher class whose call is another (a newer Triton) is not called inside (the launch then
    calls the launcher object)."""
    from triton.backends.nvidia.driver import CudaLauncher  # noqa: PLC0415

    assert fast_launch.c_launch_layout(CudaLauncher) in ("3.6", "3.7")

    class Changed(CudaLauncher):
        def __call__(self, gridX, gridY, gridZ, stream, function, *args):
            self.launch(gridX, gridY, gridZ, stream, function, *args)

    assert fast_launch.c_launch_layout(Changed) is None


@cpu_only
def test_a_launcher_of_unknown_layout_is_called_as_an_object(monkeypatch):
    """Where :func:`fast_launch.c_launch_layout` does not know the launcher, a later launch calls the
    launcher object (its own ``__call__`` allocates the scratch and calls C), still without the runner."""
    _launched_as_on_a_gpu(monkeypatch)
    monkeypatch.setattr(fast_launch, "c_launch_layout", lambda launcher_type: None)
    M, N, K = 40, 72, 48
    a, b = random_inputs(M, N, K, "fp32", seed=7)
    plan = fast_launch.FastPlan(prepare(a, b, stage="t", dtypes=("fp32",)), "fp32", FastConfig(32, 32, 32),
                                torch.full((M, N), math.nan))
    assert plan.runner is not None and plan.c_launch is None
    a, b = random_inputs(M, N, K, "fp32", seed=8)
    c = torch.full((M, N), math.nan)
    runs, direct = FakeCompiled.runs, FakeCompiled.direct
    plan(a, b, c)
    assert (FakeCompiled.runs - runs, FakeCompiled.direct - direct) == (0, 1)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-4, atol=1e-4)


def _runner_that_passes_metadata_by_keyword(self, grid):
    def runner(*args, stream=None):
        self.run(grid[0], grid[1], grid[2], stream, self.function, self.packed_metadata,
                 launch_metadata=None, *args)

    return runner


@cpu_only
def test_a_runner_that_calls_the_launcher_differently_is_a_problem(monkeypatch):
    """The direct launch passes the launcher what the runner passes it, in the same order: a Triton
    whose runner calls it otherwise is named as a changed internal (checked fresh, as in a new process)."""
    monkeypatch.setattr(CompiledKernel, "__getitem__", _runner_that_passes_metadata_by_keyword)
    problems = fast_launch.triton_runner_problems.__wrapped__()
    assert problems and "no longer calls self.run(grid[0]" in problems[0]


# ---- cuBLAS --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["fp32", "tf32", "bf16"])
def test_cublas_checks_once_per_key(monkeypatch, dtype):
    prepares = _counting(monkeypatch, registry, "prepare")
    switches = _counting(monkeypatch, registry, "_tf32")
    gemm = registry._cublas(dtype)
    a, b = random_inputs(9, 11, 13, dtype, seed=10)
    first = gemm(a, b)
    second = gemm(a.clone(), b.clone())
    # TF32 is a float32 mode: planned fp32 and tf32 calls still set it, 16-bit ones need not
    assert len(switches) == (2 if dtype in ("fp32", "tf32") else 1)
    with registry._tf32(dtype == "tf32"):
        want = torch.matmul(a, b)
    assert len(prepares) == 1 and torch.equal(first, second) and torch.equal(second, want)
    with pytest.raises(ValueError, match="inner dimensions differ"):
        gemm(a, b[:5])
    if dtype != "bf16" and not backend.get().is_gpu:  # numpy has no bfloat16; numpy arrays are CPU inputs
        for _ in range(2):
            c = gemm(a.numpy(), b.numpy())
            assert isinstance(c, np.ndarray) and np.array_equal(c, first.numpy())
        assert len(prepares) == 4  # the refused call and both numpy calls were checked


# ---- the tensor-core stages (a launcher played by PyTorch; features faked for the CPU) ------------
@pytest.fixture
def tc_stage(monkeypatch):
    """A tensor-core stage whose launch is a PyTorch product (``state['skip']`` leaves C's last
    column unwritten), on a backend that passes its features check."""
    monkeypatch.setattr(features, "why_not_here", lambda *a, **k: None)
    state = {"skip": False, "launcher": 0, "knob": 0}

    def launch(a, b, c, *, max_ctas):
        assert max_ctas == 132
        full = (a.float() @ b.float()).to(c.dtype)
        if state["skip"]:
            c[:, :-1] = full[:, :-1]
        else:
            c.copy_(full)

    def launcher():
        state["launcher"] += 1
        return launch

    def sm_count():
        state["knob"] += 1
        return 132

    return tc.make_gemm("tc_1_mma_sync", launcher, shape_multiple=8, max_ctas=sm_count), state


def test_tensor_core_stage_checks_and_resolves_once_per_key(monkeypatch, tc_stage):
    gemm, state = tc_stage
    prepares = _counting(monkeypatch, tc.stages, "prepare")
    a, b = random_inputs(16, 24, 32, "bf16", seed=11)
    first = gemm(a, b)
    second = gemm(a.clone(), b.clone())
    assert len(prepares) == 1 and state["launcher"] == 1 and state["knob"] == 1
    assert torch.equal(first, second) and torch.equal(second, (a.float() @ b.float()).to(torch.bfloat16))
    gemm(*random_inputs(8, 8, 8, "bf16", seed=12))  # another key: checked and resolved again
    assert len(prepares) == 2 and state["launcher"] == 2 and state["knob"] == 2


def test_tensor_core_stage_refuses_bad_input_after_a_plan(tc_stage):
    gemm, _ = tc_stage
    a, b = random_inputs(16, 16, 16, "bf16", seed=13)
    gemm(a, b)
    with pytest.raises(ValueError, match="16-byte boundary"):
        gemm(_misaligned(16, 16, torch.bfloat16), b)
    with pytest.raises(ValueError, match="not contiguous"):
        gemm(a, b.T)
    with pytest.raises(ValueError, match="multiples of 8"):
        gemm(a[:12], b)
    with pytest.raises(TypeError, match="bfloat16"):
        gemm(a.float(), b.float())
    assert gemm(a, b).shape == (16, 16)  # and the plan still serves the operands it was made for


def test_tensor_core_plan_is_caught_by_check_when_it_skips_a_column(tc_stage):
    gemm, state = tc_stage
    assert check(gemm, "bf16", shapes=[(16, 24, 32)], seed=14)
    state["skip"] = True
    with pytest.raises(AssertionError, match="never wrote"):
        check(gemm, "bf16", shapes=[(16, 24, 32)], seed=15)
    assert state["launcher"] == 1  # the second check ran through the plan


# ---- a fresh process ---------------------------------------------------------------------------
_FRESH = """
import sys, torch, course_lib
from course_lib.gemm import random_inputs
out = {}
for name, dtype, shape in CASES:
    a, b = random_inputs(*shape, dtype, seed=20)
    out[(name, dtype)] = course_lib.get_stage(name).gemm(dtype)(a, b)
torch.save(out, sys.argv[1])
"""
_CASES = [("triton_fast", "fp32", (40, 72, 48)), ("triton_fast", "bf16", (33, 24, 40)),
          ("triton_fast", "tf32", (17, 40, 32)), ("cublas", "fp32", (9, 11, 13))]


@cpu_only
def test_planned_calls_compute_what_a_fresh_process_computes(tmp_path, fresh_triton_plans):
    path = tmp_path / "fresh.pt"
    env = dict(os.environ, COURSE_BACKEND=backend.get().name)
    subprocess.run([sys.executable, "-c", f"CASES = {_CASES!r}\n" + _FRESH, str(path)], check=True, env=env,
                   timeout=600)
    fresh = torch.load(path)
    for name, dtype, shape in _CASES:
        gemm = course_lib.get_stage(name).gemm(dtype)
        a, b = random_inputs(*shape, dtype, seed=20)
        gemm(a, b)  # makes the plan
        planned = gemm(a.clone(), b.clone())
        assert torch.equal(planned, fresh[(name, dtype)]), (name, dtype)


@pytest.mark.parametrize("cfg, shape", [
    (FastConfig(32, 32, 32, group_m=2), (40, 72, 48)),
    (FastConfig(16, 32, 32, group_m=1, split_k=3), (5, 72, 200)),  # A's and B's descriptors only
])
@cpu_only
def test_descriptors_are_encoded_once_per_address_and_always_for_the_tensor_given(monkeypatch, cfg, shape):
    """Triton's launcher encodes every tensor descriptor on every launch; a plan's direct launch encodes
    one once per address (fast_launch.DescriptorArgs) - and a launch on a tensor at a new address
    computes with that tensor, never with an encoding made for another."""
    _launched_as_on_a_gpu(monkeypatch)
    M, N, K = shape
    a, b = random_inputs(M, N, K, "fp32", seed=7)
    plan = fast_launch.FastPlan(prepare(a, b, stage="t", dtypes=("fp32",)), "fp32", cfg, torch.full((M, N), math.nan))
    assert plan.expand is not None  # the installed Triton's wrapper is one the plan calls under
    described = 2 if cfg.split_k > 1 else 3  # split-K writes C through a pointer
    for round_, (fresh_inputs, fresh_c, encoded) in enumerate([(True, True, described), (False, True, described - 2),
                                                               (False, False, 0), (True, False, 2)]):
        if fresh_inputs:
            a, b = random_inputs(M, N, K, "fp32", seed=20 + round_)
        if fresh_c:
            c = torch.empty((M, N))
        c.fill_(math.nan)
        before = Played.encodings
        plan(a, b, c)
        assert Played.encodings - before == encoded, round_
        torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cfg", [FastConfig(32, 32, 32, group_m=2), FastConfig(32, 32, 16, b_layout="nk", persistent=True)])
def test_a_plan_keeps_no_tensor_of_its_first_launch(cfg):
    """A plan outlives the call that made it, so it must not keep that call's tensors alive: made inside
    torch.compile's CUDA-graph warm-up, a plan holding its first C left a block in the graph's memory
    pool that no output owned, and torch.compile refused the call (an H100)."""
    M, N, K = 40, 72, 48
    a, b = random_inputs(M, N, K, "fp32", seed=7)
    c = torch.full((M, N), math.nan, device=a.device)
    plan = fast_launch.FastPlan(prepare(a, b, stage="t", dtypes=("fp32",)), "fp32", cfg, c)
    assert plan.descriptors and plan.templates  # the first launch passed descriptors
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-4, atol=1e-4)
    first = [weakref.ref(t) for t in (a, b, c)]
    del a, b, c
    gc.collect()
    assert [r() is None for r in first] == [True, True, True]
    a, b = random_inputs(M, N, K, "fp32", seed=8)  # the plan still launches on new tensors
    c = torch.full((M, N), math.nan, device=a.device)
    plan(a, b, c)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-4, atol=1e-4)


@cpu_only
def test_a_descriptor_wrapper_of_unknown_layout_is_left_to_encode(monkeypatch):
    """Where Triton's descriptor wrapper is not one the course has read, the direct launch calls it, and
    it encodes every descriptor on every launch."""
    _launched_as_on_a_gpu(monkeypatch)
    monkeypatch.setattr(fast_launch, "descriptor_wrap_layout", lambda: None)
    M, N, K = 40, 72, 48
    a, b = random_inputs(M, N, K, "fp32", seed=7)
    plan = fast_launch.FastPlan(prepare(a, b, stage="t", dtypes=("fp32",)), "fp32", FastConfig(32, 32, 32),
                                torch.full((M, N), math.nan))
    assert plan.c_launch is not None and plan.expand is None
    for _ in range(2):
        c = torch.full((M, N), math.nan)
        before = Played.encodings
        plan(a, b, c)
        assert Played.encodings - before == 3
        torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-4, atol=1e-4)
