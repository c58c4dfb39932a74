"""The exercises of notebook 11 (course_lib.exercises.decode_and_host_time): the bytes of a decode
step, a question whose near misses are named; and the decode-roof puzzle, whose check takes the
course's function and a learner's in other words, and refuses realistic wrong ones - those it lists
and those it was not written around - each with the message that names its mistake."""

from __future__ import annotations

import math

import pytest

from course_lib import results
from course_lib.exercises import decode_and_host_time as ex
from course_lib.model_shapes import MODEL_SHAPES, bytes_moved


def _answer(question, answer, capsys) -> tuple[bool, str]:
    verdict = question.check(answer)
    return bool(verdict), " ".join(capsys.readouterr().out.split())


def _check(fn, capsys) -> tuple[bool, str, str]:
    """The verdict, what the check printed with its line breaks undone, and as printed."""
    verdict = ex.decode_roof.check(fn)
    raw = capsys.readouterr().out
    return bool(verdict), " ".join(raw.split()), raw


def _gbs() -> float:
    return results.load().ceilings["copy_bandwidth_gbs"]


# ---- the bytes of llama3 qkv M=1 ------------------------------------------------------------------

def test_decode_bytes_take_about_50_mb_and_name_what_was_left_out(capsys):
    want = bytes_moved(1, 6144, 4096, 2)
    assert ex.decode_bytes.expected() == want == 50_352_128
    ok, out = _answer(ex.decode_bytes, 50e6, capsys)  # "about 50 MB" is within the stated 2 %
    assert ok and "Exactly" not in out
    for answer, words in [(want - 6144 * 2, "left out writing C"), (want - 4096 * 2, "left out reading A"),
                          (4096 * 6144 * 2, "the weight alone")]:
        ok, out = _answer(ex.decode_bytes, answer, capsys)
        assert ok and words in out, (answer, out)
    for answer, words in [(2 * want, "4 bytes an element"), (50.35, "in MB"),
                          ((4096 + 6144) * 2, "leaves out the weight")]:
        ok, out = _answer(ex.decode_bytes, answer, capsys)
        assert not ok and words in out, (answer, out)


# ---- the puzzle: the least time on the memory roof ------------------------------------------------

def test_the_reference_is_the_bytes_moved_over_the_recorded_copy_bandwidth():
    for case in ex.roof_cases():
        assert ex.decode_roof_us(*case) == pytest.approx(bytes_moved(*case) / (_gbs() * 1e9) * 1e6, rel=1e-12)
    assert ex.decode_roof_us(1, 6144, 4096, 2) == pytest.approx(11.78, abs=0.01)  # 11's solution text


def test_the_cases_are_every_decode_row_in_bf16_and_unseen_shapes_and_element_sizes():
    cases = ex.roof_cases()
    decode = [(*s.shape, 2) for s in MODEL_SHAPES if s.phase == "decode"]
    assert cases[:len(decode)] == decode and len(decode) >= 9
    hidden = cases[len(decode):]
    assert {c[3] for c in hidden} >= {1, 2, 4}, "fp32 and 1-byte elements, unseen"
    assert any(c[0] % 2 for c in hidden), "an odd batch"
    assert not set(hidden) & set(decode)


def test_the_course_function_and_a_learners_in_other_words_solve_it(capsys):
    ok, out, raw = _check(ex.decode_roof_us, capsys)
    assert ok and f"right on all {len(ex.roof_cases())} cases" in out
    assert all(len(line) <= 100 for line in raw.splitlines())
    gbs = _gbs()

    def mine(M, N, K, itemsize):  # the bandwidth as the notebook prints it, in TB/s
        a, b, c = M * K, K * N, M * N
        return (a + b + c) * itemsize / (round(gbs / 1000, 2) * 1e12) / 1e-6

    assert _check(mine, capsys)[0]


@pytest.mark.parametrize("kind", ["0-d tensor", "1-element tensor", "numpy float"])
def test_a_right_roof_returned_as_a_tensor_or_numpy_scalar_solves_it(capsys, kind):
    """A returned number is read as NumberQuestion reads one: a 0-d tensor (what torch arithmetic on a
    tensor of bytes gives), a one-element tensor or a numpy scalar counts as its number."""
    import numpy as np
    import torch

    wrap = {"0-d tensor": lambda v: torch.tensor(v, dtype=torch.float64),
            "1-element tensor": lambda v: torch.tensor([v], dtype=torch.float64),
            "numpy float": np.float64}[kind]
    ok, out, _ = _check(lambda M, N, K, itemsize: wrap(ex.decode_roof_us(M, N, K, itemsize)), capsys)
    assert ok and "solved" in out, out
    ok, out, _ = _check(lambda M, N, K, itemsize: wrap(2 * ex.decode_roof_us(M, N, K, itemsize)), capsys)
    assert not ok and "2 times the roof on every case" in out, out


@pytest.mark.parametrize("returned", [True, "12.5", float("nan"), (1.0, 2.0), lambda: 1.0])
def test_what_is_not_one_finite_number_is_told_to_return_microseconds(capsys, returned):
    import torch

    for value in (returned, torch.tensor([1.0, 2.0])):
        ok, out, _ = _check(lambda M, N, K, itemsize: value, capsys)
        assert not ok and "return a number of microseconds" in out, out


def test_the_starter_and_nothing_are_told_what_to_do(capsys):
    ok, out, _ = _check(None, capsys)
    assert not ok and "no function yet" in out

    def starter(M, N, K, itemsize):
        # TODO
        return None

    ok, out, _ = _check(starter, capsys)
    assert not ok and "fill in the TODO lines" in out


@pytest.mark.parametrize("wrong, meaning", ex.ROOF_WRONG, ids=[f.__name__ for f, _ in ex.ROOF_WRONG])
def test_each_listed_wrong_function_is_refused_with_its_meaning(wrong, meaning, capsys):
    ok, out, raw = _check(wrong, capsys)
    assert not ok and " ".join(meaning.split()) in out, out
    assert all(len(line) <= 100 for line in raw.splitlines())
    assert "the roof" in out  # the first cases it gets wrong, with the roof's value


def test_wrong_functions_written_afresh_are_refused_with_the_mistake_named(capsys):
    """Wrong answers a learner might write, not the listed functions themselves."""
    gbs = _gbs()

    def weights_only(M, N, K, itemsize):
        return K * N * itemsize / gbs / 1000            # GB/s x 1000 = bytes per microsecond

    def without_c(M, N, K, itemsize):
        return (M + N) * K * itemsize * 1e6 / (gbs * 1e9)

    def c_in_fp32(M, N, K, itemsize):
        return ((M * K + K * N) * itemsize + 4 * M * N) / (gbs * 1e3)

    def gib(M, N, K, itemsize):
        return bytes_moved(M, N, K, itemsize) / (gbs * 1024**3) * 1e6

    def datasheet(M, N, K, itemsize):
        return bytes_moved(M, N, K, itemsize) / 4.8e12 * 1e6

    def flops(M, N, K, itemsize):
        return 2 * M * N * K / (gbs * 1e3)

    def bf16_always(M, N, K, itemsize):
        return 2 * (M * K + K * N + M * N) / (gbs * 1e3)

    for fn, words in [(weights_only, "the weight B alone"), (without_c, "leave out writing C"),
                      (c_in_fp32, "write C in fp32"), (gib, "not 2^30"), (datasheet, "HBM peak"),
                      (flops, "FLOPs"), (bf16_always, "multiply by itemsize, not by 2")]:
        ok, out, _ = _check(fn, capsys)
        assert not ok and words in out, (fn.__name__, out)


def test_wrong_functions_no_list_names_are_told_the_pattern(capsys):
    """Mistakes the check was not written around: a factor off everywhere, C's bytes fixed at 2,
    two mistakes at once, the roofline's bound instead of the memory roof, a wrong kind of value."""
    gbs = _gbs()

    def rounded_bandwidth(M, N, K, itemsize):   # "about 4.3 TB/s": 0.6 % off everywhere
        return bytes_moved(M, N, K, itemsize) / 4.3e12 * 1e6

    ok, out, _ = _check(rounded_bandwidth, capsys)
    assert not ok and "the bandwidth were 4300 GB/s" in out, out

    def nanoseconds(M, N, K, itemsize):
        return bytes_moved(M, N, K, itemsize) / (gbs * 1e9) * 1e9

    ok, out, _ = _check(nanoseconds, capsys)
    assert not ok and "10^3 times the roof" in out and "microseconds" in out, out

    def c_two_bytes(M, N, K, itemsize):          # C always bf16, whatever the inputs
        return ((M * K + K * N) * itemsize + 2 * M * N) / (gbs * 1e3)

    ok, out, _ = _check(c_two_bytes, capsys)
    assert not ok and "right in bf16, wrong with other element sizes" in out, out

    def without_c_and_gib(M, N, K, itemsize):
        return (M * K + K * N) * itemsize / (gbs * 2**30) * 1e6

    ok, out, _ = _check(without_c_and_gib, capsys)
    assert not ok and "wrong on" in out and "the roof" in out, out

    def a_twice(M, N, K, itemsize):              # A read again for every tile column: grows with M
        return (2 * M * K + K * N + M * N) * itemsize / (gbs * 1e3)

    ok, out, _ = _check(a_twice, capsys)
    assert not ok and "A (M x K) and C (M x N), is miscounted" in out, out

    peak = results.load().ceilings["cublas_peak_tflops"]

    def roofline_bound(M, N, K, itemsize):       # max of the two roofs: the compute roof wins at M = 256
        memory = bytes_moved(M, N, K, itemsize) / (gbs * 1e3)
        dtype = {1: "e4m3", 2: "bf16", 4: "fp32"}[itemsize]
        return max(memory, 2 * M * N * K / (peak[dtype] * 1e6))

    ok, out, _ = _check(roofline_bound, capsys)
    assert not ok and "the larger of the two bounds" in out and "the memory roof alone is asked" in out, out

    # The same idea with another peak (a datasheet's, or bf16's for every element size) gets the same
    # message, not "what grows with M ... is miscounted".
    for peaks in ({"e4m3": 1979.0, "bf16": 989.0, "fp32": 67.0}, {d: peak["bf16"] for d in peak}):
        def other_peak(M, N, K, itemsize, peaks=peaks):
            memory = bytes_moved(M, N, K, itemsize) / (gbs * 1e3)
            return max(memory, 2 * M * N * K / (peaks[{1: "e4m3", 2: "bf16", 4: "fp32"}[itemsize]] * 1e6))

        ok, out, _ = _check(other_peak, capsys)
        assert not ok and "the larger of the two bounds" in out and "miscounted" not in out, (peaks, out)

    ok, out, _ = _check(lambda M, N, K, itemsize: f"{bytes_moved(M, N, K, itemsize) / gbs / 1e3:.1f} us", capsys)
    assert not ok and "return a number of microseconds" in out

    ok, out, _ = _check(lambda M, N, K, itemsize: math.nan, capsys)
    assert not ok and "return a number" in out

    ok, out, _ = _check(lambda M, N, K, itemsize: bytes_moved(M, N, K) / gbs, capsys)
    assert not ok and "raised TypeError" in out


def test_the_solution_shows_the_course_function_only_when_pressed():
    box = ex.decode_roof.solution()
    assert box.output.outputs == ()
    box.button.click()
    shown = "".join(str(o.get("data", {}).get("text/plain", "")) for o in box.output.outputs)
    assert "def decode_roof_us" in shown
