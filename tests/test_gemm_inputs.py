"""Every course GEMM rejects bad input with an error that says what to do."""

import numpy as np
import pytest
import torch

from course_lib import backend, dtypes, stages
from course_lib.gemm import random_inputs

# The stages of the one signature fn(a, b) -> c; the FP8 stages' operand checks (quantized operands)
# are tests/test_fp8.py's and tests/test_fast_fp8.py's.
RUNNABLE = [s for s in stages() if not (s.gpu_only and not backend.get().is_gpu)
            and dtypes.get(s.dtypes[0]).operands == "matrix"]
IDS = [s.name for s in RUNNABLE]


def _ok_dtype(stage):
    d = stage.dtypes[0]
    return "fp32" if d == "tf32" else d


def test_random_inputs_of_fp8_say_where_fp8_operands_come_from():
    with pytest.raises(ValueError, match="course_lib.fp8.fp8_inputs"):
        random_inputs(4, 5, 6, "e4m3")


@pytest.mark.parametrize("stage", RUNNABLE, ids=IDS)
def test_mismatched_inner_dimensions(stage):
    a, _ = random_inputs(4, 5, 6, _ok_dtype(stage))
    _, b = random_inputs(4, 5, 7, _ok_dtype(stage))
    with pytest.raises(ValueError, match=r"inner dimensions differ.*a.shape\[1\] must equal b.shape\[0\]"):
        stage.gemm(stage.dtypes[0])(a, b)


@pytest.mark.parametrize("stage", RUNNABLE, ids=IDS)
def test_not_two_dimensional(stage):
    a, b = random_inputs(4, 5, 6, _ok_dtype(stage))
    with pytest.raises(ValueError, match="must be a 2-D matrix.*reshape"):
        stage.gemm(stage.dtypes[0])(a.reshape(-1), b)


@pytest.mark.parametrize("stage", RUNNABLE, ids=IDS)
def test_empty(stage):
    a, b = random_inputs(4, 5, 6, _ok_dtype(stage))
    with pytest.raises(ValueError, match="empty matrix"):
        stage.gemm(stage.dtypes[0])(a[:0], b)


@pytest.mark.parametrize("stage", RUNNABLE, ids=IDS)
def test_unsupported_dtype(stage):
    a, b = random_inputs(4, 5, 6, "fp32")
    bad = torch.float64
    with pytest.raises(TypeError, match="float64.*convert|not one the course's GEMMs take"):
        stage.gemm(stage.dtypes[0])(a.to(bad), b.to(bad))


@pytest.mark.parametrize("stage", RUNNABLE, ids=IDS)
def test_mixed_dtypes(stage):
    a, b = random_inputs(4, 5, 6, _ok_dtype(stage))
    with pytest.raises(TypeError, match="convert both to one type"):
        stage.gemm(stage.dtypes[0])(a, b.to(torch.float64))


@pytest.mark.parametrize("stage", RUNNABLE, ids=IDS)
def test_wrong_kind_of_object(stage):
    _, b = random_inputs(4, 5, 6, _ok_dtype(stage))
    with pytest.raises(TypeError, match="torch.Tensor or a numpy.ndarray"):
        stage.gemm(stage.dtypes[0])([[1.0] * 6] * 4, b)


@pytest.mark.gpu
@pytest.mark.parametrize("stage", RUNNABLE, ids=IDS)
def test_wrong_device(stage):
    a, b = random_inputs(4, 5, 6, _ok_dtype(stage))
    with pytest.raises(ValueError, match=r"is on cpu.*move it there \(a.cuda\(\)\)"):
        stage.gemm(stage.dtypes[0])(a.cpu(), b)


def test_wrong_device_on_the_cpu_backend():
    if backend.get().is_gpu:
        pytest.skip("covered by test_wrong_device")
    a, b = random_inputs(4, 5, 6)
    meta = torch.empty(4, 6, device="meta")
    with pytest.raises(ValueError, match=r"is on meta.*move it there \(a.cpu\(\)\)"):
        stages()[0].gemm("fp32")(meta, b)


def test_prepare_checks_b_as_well_as_a():
    # A check made for a alone would let b on the wrong device, or b not contiguous, through.
    from course_lib.gemm import prepare

    a, b = random_inputs(4, 5, 6)
    with pytest.raises(ValueError, match=r"b is on meta"):
        prepare(a, torch.empty(6, 5, device="meta"), stage="s", dtypes=("fp32",))
    with pytest.raises(ValueError, match=r"b is not contiguous"):
        prepare(a, b.T.contiguous().T, stage="s", dtypes=("fp32",), contiguous=True)


@pytest.mark.parametrize("stage", RUNNABLE, ids=IDS)
def test_non_contiguous_is_rejected_or_handled(stage):
    a, b = random_inputs(6, 5, 4, _ok_dtype(stage))
    at = a.T.contiguous().T  # same values, column-major
    try:
        c = stage.gemm(stage.dtypes[0])(at, b)
    except ValueError as e:
        assert "not contiguous" in str(e) and ".contiguous()" in str(e)
    else:
        ref = (a.double() @ b.double()).to(c.dtype)
        assert torch.allclose(c.double(), ref.double(), rtol=2e-2, atol=2e-2)


def test_numpy_arrays_work_on_the_cpu_backend():
    if backend.get().is_gpu:
        pytest.skip("the GPU backend takes CUDA tensors")
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    c = stages()[0].gemm("fp32")(a, b)
    assert isinstance(c, np.ndarray) and c.shape == (2, 4) and np.all(c == 3)
