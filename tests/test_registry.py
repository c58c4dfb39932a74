"""The course manifest (course_lib.registry) and the dtype records (course_lib.dtypes)."""

import ast
from pathlib import Path

import pytest
import torch

import course_lib
from course_lib import dtypes, features, registry
from course_lib.instruments import guard
from course_lib.registry import Stage

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def test_the_manifest_order_is_the_course_order():
    course = registry.course()
    assert course[0].name == "cublas"
    assert [s.order for s in course] == list(range(len(course)))
    # the notebooks' order: each stage's notebook comes no earlier than the one before it
    numbers = [int(s.notebook[:2]) for s in course[1:]]
    assert numbers == sorted(numbers)
    assert [s.name for s in course] == [s.name for s in sorted(course, key=lambda s: s.order)]


def test_every_row_names_a_notebook_that_exists_and_valid_dtypes():
    for s in registry.course()[1:]:
        assert (NOTEBOOKS / f"{s.notebook}.ipynb").is_file(), s.name
        assert s.gemms and all(d in dtypes.NAMES for d in s.gemms), s.name
        assert s.backend in registry.BACKENDS


def test_variants_follow_the_stage_they_vary_in_the_same_notebook():
    by_name = {s.name: s for s in registry.course()}
    for s in by_name.values():
        if s.variant_of is not None:
            base = by_name[s.variant_of]
            assert base.order < s.order and base.notebook == s.notebook and base.variant_of is None


def test_the_manifest_refuses_a_bad_row():
    ok = registry.course()[0]
    with pytest.raises(ValueError, match="twice"):
        registry._validated([ok, ok])
    with pytest.raises(ValueError, match="unknown backend"):
        registry._validated([Stage(name="x", notebook="", backend="opencl", title="x", gemms={})])
    with pytest.raises(ValueError, match="unknown dtype 'fp8'"):
        registry._validated([Stage(name="x", notebook="", backend="numba", title="x", gemms={"fp8": print})])
    with pytest.raises(ValueError, match="must come before it"):
        registry._validated([Stage(name="x", notebook="", backend="numba", title="x", gemms={}, variant_of="y")])


def test_get_stage_names_the_course_when_a_name_is_wrong():
    with pytest.raises(KeyError, match="the course has: cublas, naive"):
        course_lib.get_stage("naiive")


def test_a_stage_tells_tf32_from_fp32():
    # Both hold torch.float32; only the dtype record says that tf32 needs the tensor cores.
    assert dtypes.TF32.torch_dtype == dtypes.FP32.torch_dtype
    fast = course_lib.get_stage("triton_fast")
    assert fast.missing_feature("fp32", (7, 5)) is None
    assert fast.missing_feature("tf32", (7, 5)) is features.TF32_TENSOR_CORES
    assert fast.gemm("tf32") is not fast.gemm("fp32")
    assert fast.gemm(dtypes.TF32) is fast.gemm("tf32")


def test_every_dtype_record_is_complete_and_consistent():
    assert dtypes.NAMES == tuple(dtypes.RECORDS) and len(set(dtypes.NAMES)) == len(dtypes.NAMES)
    for d in dtypes.RECORDS.values():
        assert dtypes.get(d.name) is d and str(d) == d.name
        # the stored type's unit roundoff: half its machine epsilon
        assert d.unit_roundoff == torch.finfo(d.torch_dtype).eps / 2
        assert 0 < d.tolerance < d.sanity < 1
        assert d.triton_precision in ("ieee", "tf32")
    assert dtypes.of_torch(torch.float32) is dtypes.FP32 and dtypes.of_torch(torch.int8) is None
    with pytest.raises(ValueError, match="the course uses one of fp32, tf32, fp16, bf16"):
        dtypes.get("fp64")
    assert dtypes.torch_dtype_names() == "float32, float16 or bfloat16"


def test_the_operands_guard_value_is_exact_in_every_dtype():
    """check surrounds A and B with INPUT_GUARD (course_lib.instruments.guard): a new dtype that cannot hold it
    exactly would read as a wrong value; pick another guard value then."""
    for d in dtypes.RECORDS.values():
        value = guard.input_guard(d.torch_dtype)
        assert torch.tensor(value).to(d.torch_dtype).double().item() == value, d.name
    assert guard.input_guard(torch.bfloat16) == guard.INPUT_GUARD and guard.input_guard(torch.float8_e4m3fn) == 448


def test_one_byte_operands_compare_as_bytes():
    x = torch.zeros(4).to(torch.float8_e4m3fn)
    assert guard._same(x, x.clone()) and not guard._same(x, torch.ones(4).to(torch.float8_e4m3fn))


def _dtype_fact_tables(path: Path) -> list[int]:
    """Lines of dict literals keyed by course dtype names whose values are plain facts (numbers,
    strings, torch dtypes, tuples of them): a per-dtype table outside course_lib.dtypes."""
    def plain(v: ast.AST) -> bool:
        if isinstance(v, ast.Tuple):
            return all(plain(e) for e in v.elts)
        return isinstance(v, (ast.Constant, ast.UnaryOp, ast.BinOp, ast.Attribute))

    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Dict) and len(node.keys) >= 2 and all(
                isinstance(k, ast.Constant) and k.value in dtypes.NAMES for k in node.keys):
            if all(plain(v) for v in node.values):
                out.append(node.lineno)
    return out


def test_no_module_keeps_its_own_table_of_dtype_facts():
    """Adding a dtype is one record: no other module holds a dict of per-dtype facts."""
    lib = Path(course_lib.__file__).parent
    offenders = {str(p.relative_to(lib)): lines for p in sorted(lib.rglob("*.py"))
                 if p.name != "dtypes.py" and (lines := _dtype_fact_tables(p))}
    assert not offenders, offenders


def test_the_table_finder_finds_a_table(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text('SANITY = {"fp32": 1e-3, "tf32": 2e-2, "fp16": 5e-2, "bf16": 5e-2}\n'
                       'CONFIGS = {"fp32": [make(1)], "bf16": [make(2)]}\n')
    assert _dtype_fact_tables(planted) == [1]
