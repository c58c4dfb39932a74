"""The mapping widget's extension: how the launched grid runs on the H200 in waves."""

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
