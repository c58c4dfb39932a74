"""The roofline's helpers: plot_roofline labels each shape once by its label (not by its intensity),
and the prose checks' least bytes take each dtype's element size from the course's dtypes."""

from __future__ import annotations

import pytest

import prose_facts
from course_lib import plots, results


def _shape_labels(points) -> list[str]:
    fig = plots.plot_roofline(results.load(), "bf16", points)
    return sorted(t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("shape"))


def test_a_grouped_roofline_labels_each_shape_once_by_its_label():
    # two shapes at one intensity: both labelled; one shape at two intensities (two kernels count
    # its bytes differently): labelled once
    same_intensity = [("shape a", 8.0, 10.0, "cublas"), ("shape b", 8.0, 12.0, "cublas")]
    assert _shape_labels(same_intensity) == ["shape a", "shape b"]
    moved = [("shape a", 8.0, 10.0, "cublas"), ("shape a", 9.0, 11.0, "triton_fast")]
    assert _shape_labels(moved) == ["shape a"]


def test_least_bytes_take_each_dtypes_element_size_and_refuse_an_unknown_one():
    M, N, K = 16, 4096, 4096
    assert prose_facts.least_bytes(M, N, K, "bf16") == (M * K + K * N + M * N) * 2
    assert prose_facts.least_bytes(M, N, K, "fp32") == prose_facts.least_bytes(M, N, K, "tf32") == (M * K + K * N + M * N) * 4
    assert prose_facts.least_bytes(M, N, K, "e4m3") == (M * K + K * N) + M * N * 2  # C in bf16
    assert prose_facts.intensity((M, N, K), "e4m3") == pytest.approx(2 * M * N * K / ((M * K + K * N) + 2 * M * N))
    with pytest.raises(ValueError, match="unknown dtype 'fp64'"):
        prose_facts.intensity((M, N, K), "fp64")
