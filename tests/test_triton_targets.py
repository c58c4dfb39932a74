"""The table of what the pinned Triton makes of every Triton kernel of the course for each GPU generation
(tools/triton_targets.json): it is what the compiler says, it lists every kernel, and the README's GPU
table and course_lib.features' gating say what it says."""

import importlib
import pkgutil
import re
import sys
from pathlib import Path

import pytest

import course_lib
from course_lib import backend, features

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import triton_targets as tt  # noqa: E402

REGENERATE = "regenerate it with `python tools/triton_targets.py --readme`"


@pytest.fixture(scope="module")
def table():
    return tt.load()


def cap_tuple(cap: int) -> tuple[int, int]:
    return divmod(cap, 10)


def runnable(capability):
    return {(s.name, d) for s in course_lib.stages() for d in s.dtypes if s.missing_feature(d, capability) is None}


def test_the_table_is_for_the_pinned_triton(table):
    import triton

    lock = (ROOT / "requirements-lock.txt").read_text()
    pinned = re.search(r"^triton==(\S+)", lock, re.M).group(1)
    assert table["triton"] == pinned == triton.__version__, \
        f"the table was compiled with Triton {table['triton']}; {REGENERATE}"
    assert table["capabilities"] == [f"sm_{c}" for c in tt.CAPABILITIES]


def test_the_table_lists_every_case_as_the_course_launches_it(table):
    # the configurations in course_lib (tile sizes, warps, which kernel each candidate launches) are
    # the table's: a change there changes a case, and the table must be compiled again
    assert [tt.row_key(r) for r in table["kernels"]] == [c.key for c in tt.cases()], REGENERATE


def _kernels_of(package: str) -> dict[str, str]:
    """The source of every @triton.jit function of a package, by 'module:name' (helpers included)."""
    import inspect

    import triton

    found = {}
    pkg = importlib.import_module(package)
    for name in [m.name for m in pkgutil.iter_modules(pkg.__path__, package + ".")]:
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            # a JITFunction, or on the CPU backend the interpreter's stand-in for one
            if isinstance(value, triton.runtime.jit.KernelInterface) and value.fn.__module__ == name:
                found[f"{name}:{attr}"] = inspect.getsource(value.fn)
    return found


def test_every_triton_kernel_of_the_course_is_in_the_table(table):
    kernels = _kernels_of("course_lib.kernels.coalescing_and_triton") | _kernels_of("course_lib.exercises")
    assert len(kernels) > 10
    # a kernel is what is launched: a @triton.jit function that no other one calls
    called = {k for k in kernels for other, src in kernels.items()
              if other != k and re.search(rf"\b{k.split(':')[1]}\(", src)}
    launched = set(kernels) - called
    assert {"course_lib.kernels.coalescing_and_triton.fast:grouped_tile",
            "course_lib.kernels.coalescing_and_triton.tiled:matmul_tile_masked"} <= called
    assert launched == {r["kernel"] for r in table["kernels"]}
    # and every Triton stage of the manifest in every dtype it computes
    triton_stages = {(s.name, d) for s in course_lib.stages() if s.backend == "triton" for d in s.dtypes}
    assert triton_stages == {(r["stage"], r["dtype"]) for r in table["kernels"] if not r["stage"][:2].isdigit()}


# What the test compiles again: one of every kind of outcome, every target once, in about 30 s on 2 cores
# (the whole table, 40 kernels for 7 targets, takes about 4 minutes: `python tools/triton_targets.py --check`).
SAMPLE = [
    *(("tiled_matmul_kernel fp16 64x64x32 w4 s3", cap) for cap in tt.CAPABILITIES),
    ("grouped_matmul_kernel fp32 64x64x32 g8 w4 s2 ptr", 75),
    ("persistent_matmul_kernel bf16 128x256x64 g8 w8 s3 persistent split2", 90),
    ("fp8_matmul_kernel e4m3 64x128x128 g8 w8 s4", 86),
    ("fp8_matmul_kernel e4m3 64x128x128 g8 w8 s4", 89),
    ("fp8_matmul_kernel e4m3 64x128x128 g8 w8 s4", 100),
    ("vector_add_kernel bf16 BLOCK 1024", 75),
]


@pytest.mark.slow
def test_the_table_is_what_the_compiler_says(table):
    rows = {tt.row_key(r): r for r in table["kernels"]}
    assert all(key in rows for key, _ in SAMPLE), "the sample names a case the table no longer has"
    got = tt.compile_in_subprocess(SAMPLE, timeout=600)
    for key, cap in SAMPLE:
        assert got[(key, cap)] == rows[key]["targets"][f"sm_{cap}"], (key, cap, REGENERATE)
    # what the sample covers: FMA, mma, wgmma, tcgen05, a failure, a kernel without a dot
    outcomes = {got[k]["dot"] if got[k]["compiles"] else "fails" for k in got}
    assert outcomes == {"fma", "mma", "wgmma", "tcgen05", "fails", "no dot"}


def test_what_tl_dot_becomes_is_read_from_ptx():
    assert tt.dot_became("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", True) == "wgmma"
    assert tt.dot_became("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", True) == "mma"
    assert tt.dot_became("tcgen05.mma.cta_group::1.kind::f16", True) == "tcgen05"
    assert tt.dot_became("fma.rn.f32 %f1, %f2, %f3, %f4;", True) == "fma"
    assert tt.dot_became("add.f32 %f1, %f2, %f3;", False) == "no dot"
    # cuobjdump --dump-sass's lines; an instruction past the 4,096th has a five-digit offset
    sass = ("        /*0ff0*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;   /* 0x000000080c04723c */\n"
            "                                                                          /* 0x000fe20000041804 */\n"
            "        /*10000*/              @P0 FFMA R1, R2, R3, R1 ;                  /* 0x0000000302010223 */\n"
            "        /*10010*/                   HMMA.16816.F32.BF16 R8, R8, R12, R8 ;   /* 0x000000080c08723c */\n")
    assert tt.sass_counts(sass) == {"HMMA": 2, "FFMA": 1}


def test_the_gating_never_calls_a_kernel_that_does_not_compile(table):
    stages = {s.name: s for s in course_lib.stages()}
    refused = 0
    for row in table["kernels"]:
        stage = stages.get(row["stage"])
        for target, got in row["targets"].items():
            cap = cap_tuple(int(target[3:]))
            if stage is None or got["compiles"]:
                continue
            # refused there, for a feature of its dtype (one line names it: test_capability)
            feature = stage.missing_feature(row["dtype"], cap)
            assert feature is not None, (row["kernel"], row["dtype"], target, got["error"])
            assert feature is features.FP8_TENSOR_CORES and "fp8e4nv" in got["error"]
            refused += 1
    assert refused == 4 * 3  # the four FP8 kernels on sm_75, sm_80 and sm_86


def test_features_say_what_tl_dot_becomes(table):
    words = {"fma": "FMA on the CUDA cores", "mma": "mma.sync", "wgmma": "wgmma", "tcgen05": "tcgen05.mma"}
    for cap in tt.CAPABILITIES:
        assert words[tt.outcome(table, "fp32", cap)] == features.triton_dot(cap_tuple(cap), exact_fp32=True)
        for dtype in ("tf32", "fp16", "bf16", "e4m3"):
            got = tt.outcome(table, dtype, cap)
            if got != "does not compile":
                assert words[got] == features.triton_dot(cap_tuple(cap)), (dtype, cap)
        assert (tt.outcome(table, "fp16", cap) != "fma") == features.TRITON_TENSOR_CORES.available(cap_tuple(cap))


def test_the_readme_table_is_the_table(table):
    readme = (ROOT / "README.md").read_text()
    start, end = tt.readme_span(readme)
    assert readme[start:end] == tt.readme_block(table), REGENERATE


def test_each_readme_row_says_what_the_gating_runs(table):
    # every GPU of a row runs the same stages, and the row's words agree with the gating
    everything = {(s.name, d) for s in course_lib.stages() for d in s.dtypes}
    said = ""
    for gpus, caps, live, recorded in tt.README_ROWS:
        got = runnable(cap_tuple(caps[0]))
        assert all(runnable(cap_tuple(c)) == got for c in caps), gpus
        said += " " + live
        assert (live == "everything") == (got == everything), gpus
        assert (("triton_fp8", "e4m3") in got) == ("FP8" in said or live == "everything"), gpus
        assert (("triton_fast", "bf16") in got) == ("bf16" in said or live == "everything"), gpus
        assert (("triton_fast", "tf32") in got) == ("TF32" in said or live == "everything"), gpus
        assert (("tc_1_mma_sync", "bf16") in got) == ("`mma.sync` stages" in said or live == "everything"), gpus
        on_cuda_cores = tt.outcome(table, "fp16", caps[0]) == "fma"
        assert on_cuda_cores == ("Triton's fp16 on the CUDA cores" in live), gpus
        assert ("FP8" in recorded) == (("triton_fp8", "e4m3") not in got), gpus
    assert sorted(c for row in tt.README_ROWS for c in row[1]) == sorted(tt.CAPABILITIES)


@pytest.fixture
def fake_gpu(monkeypatch):
    def make(capability, device=None, name="Fake GPU"):
        fake = backend.Backend("gpu", "faked by a test", name, capability, device or capability)
        monkeypatch.setattr(backend, "_BACKEND", fake)
    return make


def test_turing_says_tritons_fp16_runs_on_the_cuda_cores(fake_gpu):
    fake_gpu((7, 5), name="Tesla T4")
    line = features.why_on_cuda_cores("stage 'triton_fast' (fp16)", "fp16", "triton")
    assert line.startswith("stage 'triton_fast' (fp16) runs on the CUDA cores here: Triton 3.7 compiles its tl.dot "
                           "to FMA instructions for sm_75")
    assert "cuBLAS's fp16 GEMM uses the tensor cores" in line and "Tesla T4 (sm_75)" in line and "\n" not in line
    assert features.why_on_cuda_cores("stage 'cublas' (fp16)", "fp16", "cublas") is None
    assert features.why_on_cuda_cores("stage 'triton_fast' (fp32)", "fp32", "triton") is None
    fake_gpu((8, 0))
    assert features.why_on_cuda_cores("stage 'triton_fast' (fp16)", "fp16", "triton") is None
    fake_gpu((7, 5), device=(9, 0), name="NVIDIA H200")  # treated as a T4, Triton still compiles for sm_90
    assert features.why_on_cuda_cores("stage 'triton_fast' (fp16)", "fp16", "triton") is None


def test_no_line_on_the_cpu():
    if backend.get().is_gpu:
        pytest.skip("this machine has a GPU")
    assert features.why_on_cuda_cores("stage 'triton_fast' (fp16)", "fp16", "triton") is None


def test_a_case_that_does_not_match_its_kernel_says_what_to_update():
    case = tt.cases()[0]
    bad = tt.Case(case.kernel, case.dtype, case.stage, case.config, {k: v for k, v in case.args.items() if k != "M"},
                  case.constexprs)
    from course_lib.kernels.coalescing_and_triton import tiled

    with pytest.raises(ValueError, match=r"missing \['M'\].*update tools/triton_targets.py"):
        tt._specialise(tiled.tiled_matmul_kernel, bad)
