"""course_lib.check catches wrong kernels and accepts right ones."""

import math

import numpy as np
import pytest
import torch

from course_lib import check
from course_lib.check import CPU_SHAPES, default_shapes, tolerance
from course_lib.gemm import new_output, prepare


def _right(a, b):
    ops = prepare(a, b, stage="right", dtypes=("fp32", "fp16", "bf16"))
    c = new_output(ops.M, ops.N, ops.a.dtype, ops.a.device)
    c[:] = (ops.a.double() @ ops.b.double()).to(c.dtype)
    return ops.give_back(c)


def test_right_kernel_passes_every_dtype():
    for dtype in ("fp32", "tf32", "fp16", "bf16"):
        report = check(_right, dtype)
        assert len(report.results) == len(CPU_SHAPES)
        assert all(r.rel_error <= r.tolerance for r in report.results)
        assert "check passed" in repr(report)


def test_off_by_one_at_the_edge_is_caught():
    def off_by_one(a, b):  # the last row is computed from the wrong row of a
        c = _right(a, b)
        if a.shape[0] > 1:
            c[-1] = a[-2] @ b
        return c

    with pytest.raises(AssertionError) as e:
        check(off_by_one, shapes=[(33, 17, 40)])
    msg = str(e.value)
    assert "M=33, N=17, K=40" in msg and "worst element C[32," in msg and "reference" in msg


def test_unwritten_element_is_caught_by_poisoning():
    def forgets_one(a, b):
        ops = prepare(a, b, stage="forgets", dtypes=("fp32",))
        c = new_output(ops.M, ops.N, ops.a.dtype, ops.a.device)
        full = ops.a @ ops.b
        c[:, :-1] = full[:, :-1]  # never writes the last column
        return c

    with pytest.raises(AssertionError, match=r"not finite.*never wrote"):
        check(forgets_one, shapes=[(5, 6, 7)])


def test_unwritten_element_would_pass_without_poisoning():
    # The reason for poisoning: memory recycled from a correct earlier result hides the bug.
    a, b = torch.randn(4, 3), torch.randn(3, 5)
    stale = a @ b
    c = stale.clone()
    c[:, :-1] = (a @ b)[:, :-1]
    assert torch.equal(c, stale)


def test_transposed_result_is_caught():
    with pytest.raises(AssertionError, match="returned shape"):
        check(lambda a, b: (a @ b).T.contiguous(), shapes=[(3, 5, 7)])
    with pytest.raises(AssertionError, match="relative error"):
        check(lambda a, b: (a @ b).T.contiguous(), shapes=[(6, 6, 6)])


def test_wrong_output_dtype_is_caught():
    with pytest.raises(AssertionError, match="returned torch.float64, expected torch.float32"):
        check(lambda a, b: a.double() @ b.double(), shapes=[(3, 5, 7)])
    with pytest.raises(AssertionError, match="expected torch.bfloat16"):
        check(lambda a, b: a.float() @ b.float(), "bf16", shapes=[(3, 5, 7)])


def test_nan_output_is_caught_even_in_unpoisoned_callables():
    with pytest.raises(AssertionError, match="not finite"):
        check(lambda a, b: torch.full((a.shape[0], b.shape[1]), math.nan), shapes=[(2, 2, 2)])


def test_seed_reproduces_inputs_and_is_named_on_failure():
    seen = []

    def spy(a, b):
        seen.append(a.clone())
        return a @ b

    check(spy, shapes=[(3, 4, 5)], seed=7)
    check(spy, shapes=[(3, 4, 5)], seed=7)
    check(spy, shapes=[(3, 4, 5)])
    assert torch.equal(seen[0], seen[1]) and not torch.equal(seen[0], seen[2])
    with pytest.raises(AssertionError, match=r"seed=11\)"):
        check(lambda a, b: a @ b + 1, shapes=[(3, 4, 5)], seed=11)


def test_default_shapes_cover_the_awkward_cases():
    shapes = default_shapes()
    assert (1, 1, 1) in shapes
    assert any(m == 1 and n > 1 for m, n, _ in shapes)  # skinny
    assert any(n == 1 and m > 1 for m, n, _ in shapes)  # tall
    assert any(all(v % 8 for v in s) for s in shapes)  # off every tile size the course uses
    assert all(v % 16 == 0 for s in default_shapes(16) for v in s)


def test_tolerance_grows_with_k_and_depends_on_dtype():
    assert tolerance("fp32", 64) == 1e-5 < tolerance("fp32", 8192) < 1e-4
    assert tolerance("tf32", 512) == 2e-3 and tolerance("bf16", 512) == 1e-2


def _tf32_truncated(x: torch.Tensor) -> torch.Tensor:
    """fp32 values with the 13 mantissa bits TF32 lacks set to zero (what Triton's tl.dot feeds wgmma)."""
    return (x.contiguous().view(torch.int32) & ~0x1FFF).view(torch.float32)


def test_tf32_tolerance_admits_truncated_operands():
    # Worst case for one product: both operands lose just under 2^-10 of their value.
    x = torch.tensor([[1.0 + 2.0**-10 - 2.0**-23]], dtype=torch.float32)
    exact = x.double() @ x.double()
    truncated = _tf32_truncated(x).double() @ _tf32_truncated(x).double()
    worst = float((exact - truncated).abs() / exact.abs())
    assert 1.9e-3 < worst <= tolerance("tf32", 1)
    # and a GEMM that truncates like the hardware passes check on random inputs of every CPU shape
    report = check(lambda a, b: (_tf32_truncated(a).double() @ _tf32_truncated(b).double()).float(), "tf32", seed=5)
    assert report.worst.rel_error <= report.worst.tolerance


def test_numpy_in_numpy_out():
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    assert isinstance(_right(a, b), np.ndarray)


def test_every_registered_stage_has_its_own_title():
    # Charts and tables label stages by title: two variants with one title cannot be told apart.
    from course_lib import registry

    titles = [s.title for s in registry.stages()]
    assert len(titles) == len(set(titles)), sorted(t for t in titles if titles.count(t) > 1)
