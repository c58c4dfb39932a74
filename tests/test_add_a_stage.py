"""MAINTAINING.md's "Add a stage" and "Add a dtype", done as it says, on the CPU: a Triton stage (its
kernel and wrapper, one manifest row), a CUDA stage (its .cu file, its launcher's declaration and its
binding line in a copy of csrc/, one manifest row) and a dtype (one CourseDtype record, and the row of
a stage that computes it). check, bench and the build plan then see each with no other edit."""

import dataclasses
import re
import shutil

import pytest
import torch
import triton
import triton.language as tl

import course_lib
from course_lib import bench, compiler, correctness, dtypes, registry
from course_lib.features import BF16_TENSOR_CORES
from course_lib.gemm import new_output, prepare, random_inputs
from course_lib.kernels import coalescing_and_triton as c04
from course_lib.kernels import tensor_cores as tc
from course_lib.kernels.tensor_cores import csrc

cpu_only = pytest.mark.skipif(course_lib.backend.get().is_gpu, reason="shows what the CPU backend makes of a new stage")


@pytest.fixture
def add_rows(monkeypatch):
    """``add_rows(*rows)``: the course manifest with ``rows`` added after its own, as a new stage's row
    is added to ``_manifest()`` where the course order puts it; the manifest is built anew."""
    real = registry._manifest

    def add(*rows: registry.Stage) -> None:
        monkeypatch.setattr(registry, "_manifest", lambda: [
            dataclasses.replace(s, order=i) for i, s in enumerate([*real(), *rows])])
        monkeypatch.setattr(registry, "_COURSE", None)

    return add


# ---- a Triton stage ----------------------------------------------------------------------------
BLOCK = 16  # the least tl.dot takes


@triton.jit
def one_tile_per_program_kernel(
    # Pointers to matrices
    a_ptr, b_ptr, c_ptr,
    # Matrix dimensions
    M, N, K,
    # Strides
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    # Meta-parameters
    BLOCK: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k0 in range(0, K, BLOCK):
        ks = k0 + tl.arange(0, BLOCK)
        a = tl.load(a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)  # (BLOCK, BLOCK)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)  # (BLOCK, BLOCK)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def one_tile_per_program(a: object, b: object) -> object:
    """The new stage's wrapper of the one signature: check, allocate, launch."""
    ops = prepare(a, b, stage="one_tile_per_program", dtypes=("fp32",))
    c = new_output(ops.M, ops.N, torch.float32, ops.a.device)
    grid = (triton.cdiv(ops.M, BLOCK), triton.cdiv(ops.N, BLOCK))
    one_tile_per_program_kernel[grid](ops.a, ops.b, c, ops.M, ops.N, ops.K, *ops.a.stride(), *ops.b.stride(),
                                      *c.stride(), BLOCK=BLOCK)
    return ops.give_back(c)


@cpu_only
def test_a_triton_stage_is_one_row(add_rows):
    add_rows(registry.Stage(name="one_tile_per_program", notebook=c04.NOTEBOOK, backend="triton",
                            title="one tile per program", gemms={"fp32": one_tile_per_program}))
    stage = course_lib.get_stage("one_tile_per_program")
    assert course_lib.stages()[-1] is stage and stage.order == len(course_lib.stages()) - 1
    # the tests that walk the manifest for the Triton stages find it (tests/test_coalescing_and_triton.py)
    assert "one_tile_per_program" in [s.name for s in course_lib.stages() if s.backend == "triton"]
    assert course_lib.check("one_tile_per_program", "fp32", seed=0)  # check's ten shapes, on the interpreter
    with pytest.raises(ValueError, match="supports fp32, not bf16"):
        stage.gemm("bf16")
    with pytest.raises(LookupError, match="nothing recorded for one_tile_per_program .*STAGES=one_tile_per_program"):
        bench.bench("one_tile_per_program", "fp32", [(256, 256, 256)], progress=False)


# ---- a CUDA stage ------------------------------------------------------------------------------
NEW = "tc_8_dummy"  # a copy of stage 1 under a new name: its .cu file, launcher and entry


@pytest.fixture
def csrc_with_a_new_stage(tmp_path, monkeypatch):
    """A copy of csrc/ with one more CUDA stage written the way MAINTAINING.md says: its .cu file, its
    launcher's declaration in tc_launch.h and its line in the binding; csrc.CSRC points at the copy."""
    copy = tmp_path / "csrc"
    shutil.copytree(tc.CSRC, copy)
    source = (copy / "tc_1_mma_sync.cu").read_text()
    (copy / f"{NEW}.cu").write_text(source.replace("launch_tc_1_mma_sync", f"launch_{NEW}")
                                    .replace("namespace stage1", "namespace stage8"))
    header = (copy / "tc_launch.h").read_text()
    end = header.rindex("}  // namespace tc")
    (copy / "tc_launch.h").write_text(
        header[:end] + f"void launch_{NEW}(const Gemm& g, cudaStream_t stream);\n\n" + header[end:])
    binding = (copy / tc.BINDING).read_text()
    line = '  bind(m, "tc_1_mma_sync", tc::launch_tc_1_mma_sync);\n'
    assert binding.count(line) == 1
    (copy / tc.BINDING).write_text(binding.replace(line, line + f'  bind(m, "{NEW}", tc::launch_{NEW});\n'))
    monkeypatch.setattr(csrc, "CSRC", copy)
    return copy


def test_a_cuda_stage_is_its_source_its_binding_line_and_one_row(csrc_with_a_new_stage, add_rows):
    copy = csrc_with_a_new_stage
    add_rows(registry._cuda(NEW, "06_tensor_cores", "a copy of stage 1", 8))
    stage = course_lib.get_stage(NEW)
    assert (stage.backend, stage.dtypes, stage.gpu_only, stage.shape_multiple) == ("cuda-extension", ("bf16",), True, 8)
    # what the stage needs of a GPU and its numbers come from its source and its place in the binding
    design = tc.design(NEW)
    assert stage.needs == design.needs == (BF16_TENSOR_CORES,) and not design.hopper
    assert design.block == tc.DESIGN["tc_1_mma_sync"].block and design.smem_bytes == tc.DESIGN["tc_1_mma_sync"].smem_bytes
    # every build of the extension compiles it, for sm_90a and for sm_80 alike
    for capability in ((9, 0), (8, 0)):
        sources, _, _ = tc.build_plan(capability)
        assert copy / f"{NEW}.cu" in sources and sources[-1] == copy / tc.BINDING
    a, b = random_inputs(16, 24, 32, "bf16", seed=0)
    with pytest.raises(ValueError, match="M, N and K must be multiples of 8"):
        stage.gemms["bf16"](a[:12], b)  # its wrapper checks its shape rule, from the row
    if not course_lib.backend.get().is_gpu:
        with pytest.raises(RuntimeError, match="runs only on an NVIDIA GPU"):
            stage.gemms["bf16"](a, b)
        assert "runs only on an NVIDIA GPU" in stage.why_not_here("bf16")
        assert isinstance(course_lib.check(NEW, "bf16"), correctness.NotChecked)
        with pytest.raises(LookupError, match=f"nothing recorded for {NEW} .*STAGES={NEW}"):
            bench.bench(NEW, "bf16", [(256, 256, 256)], progress=False)


@pytest.mark.slow
@pytest.mark.skipif(compiler.find_nvcc() is None, reason="needs nvcc (no GPU needed)")
def test_the_new_cuda_stage_compiles(csrc_with_a_new_stage):
    """nvcc compiles the new stage's source as the build plan lists it (a cubin for sm_80, no GPU);
    its kernel is stage 1's under the new launcher."""
    copy = csrc_with_a_new_stage
    r = compiler.compile_cubin(copy / f"{NEW}.cu", "sm_80", compiler.NVCC_FLAGS, include_dirs=[copy], name=NEW,
                               use_cache=False)
    assert any(re.search(r"stage8", k.name) for k in r.kernels), [k.name for k in r.kernels]


def test_the_binding_is_the_list_of_stages():
    entries = csrc.entries()
    assert [e.stage for e in entries if e.one_signature] == [d.stage for d in tc.ALL_DESIGNS]
    assert [e.stage for e in entries if not e.one_signature] == [tc.FP8_STAGE.stage]
    assert [e.stage for e in entries if not e.sm90a] == ["tc_0_mma_sync_minimal", "tc_1_mma_sync"]
    for e in entries:  # an entry is a source of the same name (build_plan compiles it)
        assert (tc.CSRC / f"{e.stage}.cu").is_file(), e.stage


def test_an_entry_under_another_condition_is_refused(tmp_path, monkeypatch):
    binding = tmp_path / tc.BINDING
    binding.write_text('PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n#ifdef SOMETHING_ELSE\n'
                       '  bind(m, "tc_9_x", tc::launch_tc_9_x);\n#endif\n}\n')
    with pytest.raises(ValueError, match="tc_9_x is under a condition other than #ifdef TC_WITH_SM90A"):
        csrc.entries(binding)


# ---- a dtype -----------------------------------------------------------------------------------
# A record of its own: fp16's type and arithmetic with a looser tolerance.
FP16_LOOSE = dataclasses.replace(dtypes.FP16, name="fp16_loose", tolerance=2e-2, sanity=1e-1,
                                 arithmetic="fp16 inputs and output, fp32 sums, checked loosely")


@cpu_only
def test_a_dtype_is_one_record_and_the_rows_that_list_it(monkeypatch, add_rows):
    monkeypatch.setitem(dtypes.RECORDS, FP16_LOOSE.name, FP16_LOOSE)
    monkeypatch.setattr(dtypes, "NAMES", tuple(dtypes.RECORDS))
    # no stage takes it until its row says so
    with pytest.raises(ValueError, match="supports fp32, tf32, fp16, bf16, not fp16_loose"):
        course_lib.get_stage("triton_tiled").gemm("fp16_loose")
    add_rows(registry.Stage(name="triton_tiled_loose", notebook=c04.NOTEBOOK, backend="triton", title="Triton tiled, loosely",
                            gemms=registry._per_dtype(c04.tiled_matmul, "triton_tiled", ("fp16", "fp16_loose"))))
    stage = course_lib.get_stage("triton_tiled_loose")
    assert stage.dtypes == ("fp16", "fp16_loose")
    report = course_lib.check("triton_tiled_loose", "fp16_loose", seed=0)
    assert min(r.tolerance for r in report.results) == pytest.approx(FP16_LOOSE.tolerance)  # the record's
    a, b = random_inputs(24, 40, 32, "fp16_loose", seed=1)
    assert a.dtype == torch.float16 and stage.gemm("fp16_loose")(a, b).dtype == torch.float16
    with pytest.raises(LookupError, match="nothing recorded for triton_tiled_loose"):
        bench.bench("triton_tiled_loose", "fp16_loose", [(256, 256, 256)], progress=False)
