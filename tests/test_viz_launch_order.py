"""course_lib.viz.launch_order: the picture of notebook 05's launch orders tells what the orders do."""

import matplotlib.pyplot as plt

from course_lib.viz.launch_order import draw_launch_order


def test_draw_launch_order_names_what_the_programs_in_flight_read():
    fig = draw_launch_order(6, 8, 3, 12)
    assert len(fig.axes) == 2 and "first 12 programs read 2 block-rows of A + 8" in fig.axes[0].get_title()
    assert "read 3 block-rows of A + 4 block-columns" in fig.axes[1].get_title()
    plt.close(fig)
