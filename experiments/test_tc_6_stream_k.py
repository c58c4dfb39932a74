"""Tests of the stage-6 experiment variant (tc_6_stream_k.py); not part of the course's tests.

    PYTHONPATH=. python -m pytest -q -p no:cacheprovider experiments/test_tc_6_stream_k.py

The schedule model and the compiled code are checked on any machine (nvcc and cuobjdump needed for
the latter); correctness needs a GPU (COURSE_BACKEND=gpu on a Hopper machine).
"""

import os

os.environ.setdefault("COURSE_BACKEND", "cpu")

import pytest  # noqa: E402

import course_lib  # noqa: E402
from course_lib import compiler  # noqa: E402
from course_lib.model.schedules import stream_k_work  # noqa: E402

import tc_6_stream_k as variant  # noqa: E402

on_gpu = pytest.mark.skipif(not course_lib.backend.get().is_gpu, reason="needs the GPU backend")


# ---- the stream-K schedule (the model itself is tested in tests/test_tensor_cores.py) -------------
def test_without_stream_k_every_tile_is_whole():
    work = stream_k_work(256, 66, 64, stream_k=False)
    assert all(b == 0 and e == 64 for units in work for _, b, e in units)
    assert sorted(t for units in work for t, _, _ in units) == list(range(256))


# ---- the compiled variant ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compiled():
    if compiler.find_nvcc() is None or compiler.find_cuobjdump() is None:
        pytest.skip("nvcc or cuobjdump not found")
    return variant.compile_variant(), variant.compile_variant(timeline=True)


def test_variant_compiles_both_tile_widths_and_clusters_without_warnings(compiled):
    plain, timed = compiled
    for r in compiled:
        assert [k.name.rsplit("<", 1)[-1] for k in r.kernels] == ["128,1>", "128,2>", "256,1>", "256,2>"], r.kernels
        assert r.warnings == (), r.warnings  # C7515 would mean serialised wgmmas: another kernel
        assert all(k.registers <= 168 for k in r.kernels)
    cluster2 = next(k for k in plain.kernels if k.name.endswith("<256,2>"))
    assert not cluster2.spills, cluster2  # the configuration the course measured


def test_variant_stores_only_stream_k_partials_and_stamps(compiled):
    """C leaves through stmatrix + TMA store; the ordinary global stores are stream-K's partial
    sums (BLOCK_N / 8 float4 per thread), the contributor's flag and the owner's store that empties
    it again (course_lib/csrc/tc_stream_k.cuh), in each kernel (two of each tile width), plus the
    timeline's stamps."""
    plain, timed = compiled
    mix, timed_mix = compiler.sass_instruction_mix(plain.cubin), compiler.sass_instruction_mix(timed.cubin)
    assert mix["STSM"] > 0 and mix["UTMASTG"] > 0
    assert mix["STG"] == 2 * (256 // 8 + 2) + 2 * (128 // 8 + 2)
    assert timed_mix["STG"] > mix["STG"] and timed_mix["HGMMA"] == mix["HGMMA"]
    assert "SR_GLOBALTIMER" in compiler.sass(timed.cubin) and "SR_GLOBALTIMER" not in compiler.sass(plain.cubin)


# ---- on a GPU ---------------------------------------------------------------------------------------
@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize("cluster,group_m,block_n", [(1, 1, 256), (1, 8, 128), (2, 1, 256), (2, 16, 128)])
def test_scheduling_knobs_are_correct_on_the_gpu(cluster, group_m, block_n):
    fn = variant.persistent_variant(cluster=cluster, group_m=group_m, block_n=block_n)
    course_lib.check(fn, "bf16", [(264, 520, 200), (1000, 1008, 520)])


@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize("cluster,block_n", [(1, 256), (2, 256), (1, 128), (2, 128)])
def test_stream_k_is_correct_on_the_gpu(cluster, block_n):
    # Fewer tiles than clusters (every tile split, some clusters idle), a ragged last wave, and
    # K with a partial last slice.
    fn = variant.persistent_variant(cluster=cluster, stream_k=True, block_n=block_n)
    for _ in range(3):  # fresh inputs each time: the partial buffers and flags are reused
        course_lib.check(fn, "bf16", [(264, 520, 200), (1000, 1008, 520), (2048, 2048, 2048), (4096, 4096, 1032)])


@pytest.mark.gpu
@on_gpu
def test_timeline_build_stamps_every_tile_on_the_gpu():
    ext = variant.extension(timeline=True)
    fn = variant.persistent_variant(timeline=True, max_ctas=course_lib.backend.sm_count)
    ext.clear_timeline()
    a, b = course_lib.random_inputs(1024, 1024, 1024, "bf16", seed=0)
    fn(a, b)
    stamps = ext.timeline()
    tiles = (stamps[:, :, 4::3] != 0).sum().item()  # "first slice arrived" of every consumer tile
    assert tiles == 2 * (1024 // 128) * (1024 // 256)
