"""The model shape table (course_lib.model_shapes): what issue 18 asks of it, and its helpers."""

import math

import pytest

from course_lib.model_shapes import MODEL_SHAPES, bytes_moved, find


def test_labels_and_shapes_are_unique():
    assert len({s.label for s in MODEL_SHAPES}) == len({s.shape for s in MODEL_SHAPES}) == len(MODEL_SHAPES) >= 12


def test_the_table_covers_what_it_is_for():
    prefill = [s for s in MODEL_SHAPES if s.phase == "prefill"]
    assert all(512 <= s.M <= 8192 for s in prefill)
    # A prompt short enough that whole 128 x 256 tiles leave SMs idle (a prefill layer with few tiles).
    assert any(math.ceil(s.M / 128) * math.ceil(s.N / 256) < 132 and s.K >= 4096 for s in prefill)
    squares = [s for s in prefill if s.M == s.N == s.K]  # a small square and a mid-size one, no power of two
    assert any(s.M < 1024 for s in squares) and any(1024 < s.M < 2048 and s.M & (s.M - 1) for s in squares)
    assert len({s.model for s in prefill}) >= 3
    # Attention and MLP projections of three models (and GPT-2's attention besides).
    for model in ("Llama 3 8B", "Qwen2.5 7B", "GPT-2 XL"):
        layers = {s.layer for s in prefill if s.model == model}
        assert any("attention" in layer for layer in layers) and any("MLP" in layer for layer in layers), model
    assert any(s.model == "GPT-2" and "attention" in s.layer for s in prefill)
    decode = [s for s in MODEL_SHAPES if s.phase == "decode"]
    # One token per sequence, batches of 1 to 256: the mid batches (96, 192, 256) are where tiles of
    # 128 rows are partly empty or few.
    assert decode and all(1 <= s.M <= 256 for s in decode) and {1, 8, 96, 128, 192, 256} <= {s.M for s in decode}
    assert any(s.K >= 4 * s.N for s in MODEL_SHAPES)  # K much larger than N
    assert any(s.N % 128 for s in MODEL_SHAPES)
    tiles = [math.ceil(s.M / 128) * math.ceil(s.N / 256) for s in MODEL_SHAPES]
    assert any(132 < t <= 132 + 16 for t in tiles)  # just past a whole wave of 132 SMs


def test_find_and_bytes_moved():
    assert find((16, 4096, 4096)).label == "llama3 o M=16"
    with pytest.raises(LookupError, match="not in the shape table"):
        find((1, 2, 3))
    assert bytes_moved(1, 6144, 4096, 2) == (4096 + 4096 * 6144 + 6144) * 2
