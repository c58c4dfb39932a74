"""Test set-up: the CPU backend unless COURSE_BACKEND says otherwise; GPU tests are marked."""

import os
import sys

os.environ.setdefault("COURSE_BACKEND", "cpu")

import pytest  # noqa: E402

import course_lib  # noqa: E402,F401  - chooses the backend before numba/Triton are imported
from course_lib import backend  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if backend.get().is_gpu:
        return
    skip = pytest.mark.skip(reason="needs the GPU backend (COURSE_BACKEND=gpu on a machine with an NVIDIA GPU)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _close_figures():
    """Every figure a test drew is closed after it (pyplot keeps them all, and warns past 20)."""
    yield
    plt = sys.modules.get("matplotlib.pyplot")  # never imported here: some tests hold what is imported
    if plt is not None:
        plt.close("all")
