"""Every picture the course's widgets and viz functions draw fits JupyterLab's output area, with
readable text, and every colour key tells the truth.

Sizes (course_lib.viz._figure): in a 1400 x 900 window with the file browser open - the smallest
screen the course is checked on - a notebook's output area is 968 px wide and the notebook panel
779 px tall. A picture wider than the output area is shrunk by the browser, its text with it (the
figures used to be up to 1084 px wide, their lane numbers shrunk to 5-7 px); one taller than the
screen cannot be seen whole next to its controls (the fragment map was 810 px tall). So: at most
960 px wide; at most 600 px tall, which leaves room for the tallest block of controls and summary
above a picture (the waves widget's, about 170 px) in the 779 px panel; no text under 9 px.
"""

import base64
import io

import numpy as np
import pytest
from PIL import Image

import course_lib.viz._figure as figure
from course_lib import model
from course_lib.viz import banks, coalescing, fragments, mapping, tiles, waves
from course_lib.viz._figure import MAX_HEIGHT_PX, MAX_WIDTH_PX, MIN_FONT_PX


def _png_size(png: bytes) -> tuple[int, int]:
    return Image.open(io.BytesIO(png)).size


def _smallest_text_px(fig, dpi: int = figure.DPI) -> float:
    """The smallest visible, non-empty text of the figure, in pixels at ``dpi``."""
    from matplotlib.text import Text

    sizes = [t.get_fontsize() * dpi / 72 for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return min(sizes)


@pytest.fixture
def pictures(monkeypatch):
    """Every picture a widget draws while the test runs: (what was on display, width, height,
    smallest text in px)."""
    drawn = []
    original = figure.figure_png

    def spy(fig, dpi=figure.DPI):
        smallest = _smallest_text_px(fig, dpi)
        png = original(fig, dpi)
        drawn.append((spy.state, *_png_size(png), smallest))
        return png

    spy.state = "default"
    monkeypatch.setattr(figure, "figure_png", spy)
    return drawn, spy


def _sweep(box, spy) -> None:
    """Set every control of the widget, one after the other, to each option (dropdowns, toggles)
    or to its minimum, maximum and middle (sliders)."""
    for name, control in box.controls.items():
        if hasattr(control, "options"):
            values = [o[1] if isinstance(o, tuple) else o for o in control.options]
        else:
            values = [control.min, control.max, (control.min + control.max) // 2]
        for v in values:
            if getattr(control, "disabled", False):
                continue
            spy.state = f"{name}={v}"
            control.value = v


def _trace_widget():
    from course_lib.instruments import trace_kernel
    from course_lib.kernels import naive
    from course_lib.viz.trace import trace_widget

    a, b, c = np.ones((16, 8), np.float32), np.ones((8, 16), np.float32), np.zeros((16, 16), np.float32)
    return trace_widget(trace_kernel(naive.naive_kernel, (1, 1), (16, 16), a, b, c))


# The widgets as the notebooks make them (the notebooks' arguments) and the browser test's trace.
WIDGETS = {
    "mapping": lambda: mapping.mapping_widget(n=64, block=16),
    "waves": lambda: waves.waves_widget(size=4096, tile=128, threads=256, regs=64, smem_kb=32),
    "tiles": lambda: tiles.tiles_widget(n=64, tile=16),
    "coalescing": lambda: coalescing.coalescing_widget(n=4096, dtype="fp32"),
    "banks": lambda: banks.banks_widget(cols=32, pattern="column", layout="plain"),
    "fragments": fragments.fragments_widget,
    "trace": _trace_widget,
}


def _assert_fits(drawn, where: str) -> None:
    assert drawn, f"{where}: nothing was drawn"
    for state, width, height, smallest in drawn:
        assert width <= MAX_WIDTH_PX, f"{where} ({state}): {width} px wide, the output area takes {MAX_WIDTH_PX}"
        assert height <= MAX_HEIGHT_PX, f"{where} ({state}): {height} px tall, at most {MAX_HEIGHT_PX} fit under the controls"
        assert smallest >= MIN_FONT_PX, f"{where} ({state}): text of {smallest:.1f} px, less than {MIN_FONT_PX}"


@pytest.mark.parametrize("name", list(WIDGETS))
def test_the_default_picture_of_every_widget_fits_the_output_area(name, pictures):
    drawn, _ = pictures
    box = WIDGETS[name]()
    assert _png_size(box.image.value) == drawn[-1][1:3]
    _assert_fits(drawn[:1], name)


@pytest.mark.parametrize("name", list(WIDGETS))
def test_every_picture_a_widget_draws_fits_the_output_area(name, pictures):
    drawn, spy = pictures
    _sweep(WIDGETS[name](), spy)
    assert len(drawn) > 3, f"{name}: the controls drew only {len(drawn)} pictures"
    _assert_fits(drawn, name)


@pytest.mark.parametrize("name", list(WIDGETS))
def test_a_widget_draws_its_pictures_without_pyplot(name, pictures, monkeypatch):
    """A widget redraws in the kernel's thread for widget messages while a cell may be running in
    the main thread, whose inline backend draws every figure on pyplot's list when the cell ends:
    a widget's figure on that list was drawn by both threads at once, and matplotlib's private
    ``Done`` escaped to the browser. So no picture of a widget is made through pyplot."""
    import matplotlib.pyplot as plt

    def refuse(*args, **kwargs):
        raise AssertionError(f"{name}: a widget made its picture with pyplot.figure, which the main thread can draw too")

    monkeypatch.setattr(plt, "figure", refuse)
    drawn, spy = pictures
    _sweep(WIDGETS[name](), spy)
    assert len(drawn) > 3, f"{name}: the controls drew only {len(drawn)} pictures"


def test_a_drawing_outside_a_widget_is_a_pyplot_figure_a_cell_shows():
    """Called from a cell, the same drawing function gives a pyplot figure (the inline backend shows
    it when the cell ends), with the same pixels as the widget's."""
    import matplotlib.pyplot as plt

    step = model.tiles.tile_step(n=64, tile=16, block=(1, 2), step=1)
    fig = tiles.draw_tiles(step)
    assert fig.canvas.manager is not None and fig.number in plt.get_fignums()
    from_a_cell = figure.figure_png(fig)
    assert fig.number not in plt.get_fignums(), "figure_png leaves the figure open"
    with figure.without_pyplot():
        fig = tiles.draw_tiles(step)
        assert fig.canvas.manager is None
        assert figure.figure_png(fig) == from_a_cell


# The figures the notebooks draw with the viz functions (their calls), and the largest of each kind.
FIGURES = {
    "mapping 64, warps (notebook 00)": lambda: mapping.draw_mapping(model.mapping.thread_mapping(64, 64, (16, 16)), color_by="warp"),
    "mapping 512 by 1x1 blocks": lambda: mapping.draw_mapping(model.mapping.thread_mapping(512, 512, (1, 1)), color_by="block"),
    "tiles (notebook 02)": lambda: tiles.draw_tiles(model.tiles.tile_step(n=64, tile=16, block=(1, 2), step=0)),
    "coalescing (notebook 01)": lambda: coalescing.draw_coalescing(
        {"along a row": model.coalescing.matrix_load("row", n=4096), "down a column": model.coalescing.matrix_load("column", n=4096)}
    ),
    "coalescing fp16, misaligned": lambda: coalescing.draw_coalescing(
        {"row": model.coalescing.matrix_load("row", 4096, 2, col=17), "column": model.coalescing.matrix_load("column", 4096, 2, col=17)}
    ),
    "fragments mma C (notebook 05)": lambda: fragments.draw_fragments(model.fragments.fragment_map("mma.m16n8k16", "C"), highlight=5),
    "fragments mma A": lambda: fragments.draw_fragments(model.fragments.fragment_map("mma.m16n8k16", "A"), highlight=31),
    "fragments wgmma D, N=256": lambda: fragments.draw_fragments(model.fragments.fragment_map("wgmma.m64nNk16", "D", 256), highlight=127),
    "banks 64 x 64 padded": lambda: banks.draw_banks(model.banks.tile_access(64, 64, "column", "padded", 5), words_in_tile=64 * 65),
    "waves, 12 of 2648": lambda: waves.draw_waves(model.waves.gemm_waves(16384, 16384, 16, 16, 3)),
}


@pytest.mark.parametrize("name", list(FIGURES))
def test_the_notebooks_figures_fit_the_output_area(name):
    fig = FIGURES[name]()
    smallest = _smallest_text_px(fig)
    width, height = _png_size(figure.figure_png(fig))
    _assert_fits([("", width, height, smallest)], name)


# ---- colour keys -----------------------------------------------------------------------------


def _cell_colours(ax) -> np.ndarray:
    """(rows, cols, 4) RGBA of the first image drawn in ``ax``, cell by cell."""
    im = ax.images[0]
    data = im.get_array()
    return np.asarray(data if data.ndim == 3 else im.to_rgba(data), dtype=float)


def _assert_one_colour_per_owner(colours: np.ndarray, owners: np.ndarray, where: str) -> None:
    """Each owner's cells share one colour, and no two owners share one."""
    seen: dict[tuple, int] = {}
    for owner in np.unique(owners):
        cells = {tuple(np.round(c[:3], 4)) for c in colours[owners == owner]}
        assert len(cells) == 1, f"{where}: owner {owner} is drawn in {len(cells)} colours"
        (colour,) = cells
        assert colour not in seen, f"{where}: owners {seen[colour]} and {owner} share the colour {colour}"
        seen[colour] = owner


@pytest.mark.parametrize(
    "n, block, color_by",
    [(64, 16, "block"), (64, 16, "warp"), (64, 8, "warp"), (64, 4, "block"), (100, 16, "block"), (64, 16, "thread"), (40, 32, "warp")],
)
def test_mapping_colours_are_one_per_owner_or_a_labelled_scale(n, block, color_by):
    m = model.mapping.thread_mapping(n, n, (block, block))
    fig = mapping.draw_mapping(m, color_by)
    ax = fig.axes[0]
    owners = {"block": m.block_id, "warp": m.warp_id, "thread": m.thread_id}[color_by]
    title = ax.get_title()
    if len(np.unique(owners)) <= mapping.CATEGORICAL_MAX:
        assert title.startswith("one colour per"), title
        _assert_one_colour_per_owner(_cell_colours(ax)[:n, :n], owners, f"{n}/{block} by {color_by}")
        assert len(fig.axes) == 1  # no colour bar: the colours are names, not a scale
    else:
        assert "scale on the right" in title and len(fig.axes) == 2, title  # the colour bar
        assert "one colour per" not in title


@pytest.mark.parametrize("operand", ["A", "B", "C"])
def test_mma_fragment_colours_are_one_per_lane(operand):
    fm = model.fragments.fragment_map("mma.m16n8k16", operand)
    fig = fragments.draw_fragments(fm, highlight=7)
    (ax,) = [a for a in fig.axes if a.get_gid() == "fragment-lanes"]
    assert "colour = lane" in ax.get_title()
    _assert_one_colour_per_owner(_cell_colours(ax), fm.owner, f"mma {operand}")
    assert len({fragments.lane_colour(lane) for lane in range(32)}) == 32


@pytest.mark.parametrize("operand, n, thread", [("D", 64, 69), ("A", 16, 5), ("D", 8, 127)])
def test_wgmma_fragment_colours_are_one_per_warp_and_one_per_lane_of_the_warp_shown(operand, n, thread):
    fm = model.fragments.fragment_map("wgmma.m64nNk16", operand, n)
    fig = fragments.draw_fragments(fm, highlight=thread)
    overview = next(a for a in fig.axes if a.get_gid() == "fragment-warps")
    zoom = next(a for a in fig.axes if a.get_gid() == "fragment-lanes")
    assert "colour = warp" in overview.get_title() and "colour = lane" in zoom.get_title()
    colours = _cell_colours(overview)
    mine = fm.owner == thread  # drawn red, the thread's mark
    _assert_one_colour_per_owner(colours[~mine], fm.owner[~mine] // 32, f"wgmma {operand} overview")
    warp = thread // 32
    shown = fm.owner[16 * warp : 16 * warp + 16, : min(n, fragments.ZOOM_COLS)]
    _assert_one_colour_per_owner(_cell_colours(zoom), shown % 32, f"wgmma {operand} warp {warp}")


def test_waves_colours_are_one_per_count_of_resident_blocks():
    w = model.waves.waves(1000, 3)  # 3 per SM: the last wave holds 1, 2 and 3 blocks on different SMs
    fig = waves.draw_waves(w)
    counts = w.occupancy_map()
    assert set(np.unique(counts)) == {1, 2, 3}
    _assert_one_colour_per_owner(_cell_colours(fig.axes[0]), counts, "waves")


# ---- words --------------------------------------------------------------------------------------


def test_counts_are_spelled_in_the_right_number():
    assert model.banks.tile_access(32, 32, "row").describe().endswith("conflict-free, 1 pass")
    assert model.banks.tile_access(32, 32, "column").describe().endswith("(bank 0 serves 32 distinct words); 32 passes")
    assert "1 lane:" in model.banks.bank_access([0]).describe()
    assert "1 sector (ideal 1), 1 line of 128 B" in model.coalescing.warp_access([0]).describe()
    one_wave = model.waves.waves(121, 1)
    assert "121 blocks" in one_wave.describe() and "11 SMs idle" in one_wave.describe()
    assert "1 SM idle" in model.waves.waves(131, 1).describe()
    box = mapping.mapping_widget(n=64, block=16)
    assert "1 wave, the last" in box.summary.value
    for make in WIDGETS.values():
        box = make()
        assert "(s)" not in box.summary.value and "(es)" not in box.summary.value, box.summary.value


# The notebooks' charts (course_lib.plots and the other figure functions): as wide as the output
# area at most, with readable text. Bar charts grow with their number of rows, so their height is
# not bounded here; a learner scrolls past them, no controls sit beside them.
def _charts():
    from course_lib import plots, results
    from course_lib.kernels import thread_coarsening as coarsening
    from course_lib.viz import hierarchy, launch_order

    recorded = results.load()
    stages = ["naive", "shared_memory_tiling", "coarsened_2x2", "register_tiling", "triton_fast"]
    tc = results.summary("tensor_core")
    return {
        "plot_stages": lambda: plots.plot_stages(recorded, "fp32", (4096, 4096, 4096), stages=stages),
        "plot_sweep": lambda: plots.plot_sweep(recorded, "bf16", stages=["triton_fast", "tc_6_tma_store"], ratio=True),
        "plot_roofline": lambda: plots.plot_roofline(recorded, "fp32", [("register_tiling", 32.0, 31.0)]),
        "plot_timeline": lambda: plots.plot_timeline(tc["timeline"]["consumers_4096"], "recorded"),
        "draw_launch_order": lambda: launch_order.draw_launch_order(6, 8, 3, programs=12),
        "draw_tile_hierarchy": lambda: hierarchy.draw_tile_hierarchy(coarsening.DEFAULT_CONFIG),
    }


@pytest.mark.parametrize("name", ["plot_stages", "plot_sweep", "plot_roofline", "plot_timeline", "draw_launch_order",
                                  "draw_tile_hierarchy"])
def test_the_charts_are_no_wider_than_the_output_area(name):
    fig = _charts()[name]()
    width, _ = _png_size(figure.figure_png(fig))
    assert width <= MAX_WIDTH_PX, f"{name}: {width} px wide, the output area takes {MAX_WIDTH_PX}"
    assert _smallest_text_px(fig) >= MIN_FONT_PX, f"{name}: text of {_smallest_text_px(fig):.1f} px"


def test_a_grouped_roofline_has_one_legend_entry_per_kernel_and_labels_each_shape_once():
    from course_lib import plots, results

    points = [(f"M={m}", float(m), float(m), kernel) for kernel in ("cublas", "triton_fast") for m in (1, 16, 64)]
    fig = plots.plot_roofline(results.load(), "bf16", points, intensity_of="FLOP per byte from DRAM, at least")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["cublas", "triton_fast"]
    shape_labels = [t.get_text() for t in ax.texts if t.get_text().startswith("M=")]
    assert sorted(shape_labels) == ["M=1", "M=16", "M=64"], shape_labels
    assert ax.get_xlabel() == "arithmetic intensity (FLOP per byte from DRAM, at least)"
    with pytest.raises(ValueError, match="roofline point"):
        plots.plot_roofline(results.load(), "bf16", [("x", 1.0)])
