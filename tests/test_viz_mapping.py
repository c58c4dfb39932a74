"""The mapping widget's extension (how the launched grid runs on the H200 in waves), and its picture's
caption: the colours it names are the colours drawn."""

import re

import numpy as np
import pytest
from matplotlib.colors import to_rgb

from course_lib.model.mapping import thread_mapping
from course_lib.viz import mapping
from course_lib.viz.mapping import mapping_widget


def test_mapping_widget_says_how_the_grid_runs_on_the_h200():
    w = mapping_widget()  # 64 x 64 with 16 x 16 blocks: 16 blocks of 256 threads, 8 fit per SM
    assert w.waves.blocks == 16 and w.waves.resident == 8 and w.waves.waves == 1
    assert "1 wave, the last" in w.summary.value
    picture = w.image.value
    assert picture[:4] == b"\x89PNG"
    w.controls["color_by"].value = "warp"
    assert w.image.value != picture  # the picture follows the controls
    w.controls["n"].value = 1000  # 63 x 63 = 3969 blocks -> 3969 / (132 * 8) = 3.76 -> 4 waves
    assert w.image.layout.display == "none"  # a million elements are not drawn one by one
    assert w.waves.blocks == 63 * 63 and w.waves.waves == 4
    assert "4 waves, the last" in w.summary.value
    w.controls["block_x"].value = 32  # 512 threads per block: 4 per SM, 32 x 63 = 2016 blocks
    assert w.waves.resident == 4 and w.waves.blocks == 2016 and w.waves.waves == 4


# ---- the caption's colours are the colours drawn -----------------------------------------------------
def _pixel(fig, ax, col: float, row: float) -> np.ndarray:
    """The rendered RGB at the centre of cell (row, col) of ``ax``."""
    fig.canvas.draw()
    x, y = ax.transData.transform((col, row))
    buf = np.asarray(fig.canvas.buffer_rgba())
    return buf[int(round(buf.shape[0] - y)), int(round(x)), :3] / 255


@pytest.mark.parametrize("color_by", ["block", "warp", "thread"])
def test_the_caption_names_the_colours_the_picture_draws(color_by):
    m = thread_mapping(100, 100, (16, 16))  # a 7 x 7 grid over 112 x 112: idle threads at the right and bottom
    fig = mapping.draw_mapping(m, color_by)
    ax = fig.axes[0]
    title = ax.get_title()
    idle = re.search(r"(\w+): idle threads", title)
    edge = re.search(r"(\w+) line: the edge of C", title)
    assert idle and edge, title
    # the idle threads, cell (row 50, column 105), away from every block border, are drawn as the caption says
    assert np.allclose(_pixel(fig, ax, 105, 50), to_rgb(idle[1]), atol=0.02)
    (line,) = [a for a in ax.lines if a.get_gid() == "mapping-edge"]
    assert to_rgb(line.get_color()) == to_rgb(edge[1])
    assert (line.get_xdata().max(), line.get_ydata().max()) == (m.n_cols - 0.5, m.n_rows - 0.5)  # it is C's edge


def test_no_owner_colour_is_one_the_caption_gives_to_the_idle_threads_or_the_edge():
    reserved = [to_rgb(mapping.IDLE_COLOUR), to_rgb(mapping.EDGE_COLOUR)]
    colours = mapping.owner_colours()
    assert len(colours) == mapping.CATEGORICAL_MAX == len(set(colours))
    for colour in colours:
        for named in reserved:
            assert np.abs(np.subtract(colour, named)).max() > 0.15, (colour, named)
    # a picture with no idle thread says nothing of them
    assert "idle" not in mapping.draw_mapping(thread_mapping(64, 64, (16, 16)), "block").axes[0].get_title()
