"""The block / warp / thread tile picture of notebook 03 agrees with the kernel's configuration."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from course_lib.kernels import thread_coarsening as coarsening  # noqa: E402
from course_lib.model.tiles import tile_hierarchy  # noqa: E402
from course_lib.viz import hierarchy  # noqa: E402


def test_the_levels_tile_each_other():
    h = tile_hierarchy(coarsening.DEFAULT_CONFIG)
    assert h == {"block": (128, 128), "warp": (64, 32), "thread": (8, 8), "warps": (2, 4), "lanes": (8, 4), "threads": 256}
    warps = h["warps"][0] * h["warps"][1]
    assert warps * 32 == h["threads"]
    assert h["lanes"][0] * h["thread"][0] == h["warp"][0] and h["lanes"][1] * h["thread"][1] == h["warp"][1]


@pytest.mark.parametrize("name", ["register_tiling_4x4_64", "register_tiling_row_warps"])
def test_every_warp_and_lane_is_drawn_once_and_one_thread_is_marked(name):
    cfg = coarsening.SWEEP_CONFIGS[name]
    h = tile_hierarchy(cfg)
    fig = hierarchy.draw_tile_hierarchy(cfg, thread=5)
    block, warp = fig.axes
    assert len([p for p in block.patches if isinstance(p, Rectangle)]) == h["warps"][0] * h["warps"][1]
    lanes = [p for p in warp.patches if isinstance(p, Rectangle)]
    assert len(lanes) == 32
    marked = [p for p in lanes if p.get_facecolor()[:3] != (1.0, 1.0, 1.0)]
    lane_m, lane_n = divmod(5, h["lanes"][1])
    assert len(marked) == 1 and marked[0].get_xy() == (lane_n * cfg.TN, lane_m * cfg.TM)
    matplotlib.pyplot.close(fig)


def test_a_lane_outside_the_warp_is_refused():
    with pytest.raises(ValueError, match="0..31"):
        hierarchy.draw_tile_hierarchy(coarsening.DEFAULT_CONFIG, thread=32)
