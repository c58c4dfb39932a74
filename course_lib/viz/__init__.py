"""Visualisations: functions of plain data that return a figure or a widget. Every picture and widget
of the course lives here (charts of recorded results: :mod:`course_lib.plots`), none in ``kernels/``.
They draw what :mod:`course_lib.model` computes (sectors, banks, waves, fragments, tiles, orders);
no model lives here.

One module per topic; each module's docstring shows the exact calls a notebook makes.

* :mod:`course_lib.viz.mapping`    threads, warps and blocks onto the output matrix (notebook 00)
* :mod:`course_lib.viz.waves`      resident blocks per SM and waves on the H200's SMs (00, 03)
* :mod:`course_lib.viz.tiles`      what a T x T tiled block loads at each step; global vs shared reads (02)
* :mod:`course_lib.viz.coalescing` one warp's load in 32-byte sectors and 128-byte lines (01, 04)
* :mod:`course_lib.viz.banks`      shared-memory banks, conflict degree, padding and XOR swizzle (02, 04)
* :mod:`course_lib.viz.hierarchy`  block tile, warp tiles and thread tiles of register tiling (03)
* :mod:`course_lib.viz.launch_order` the order programs compute C's tiles in, row-major or grouped (05)
* :mod:`course_lib.viz.fragments`  which lane holds which element for mma.m16n8k16 and wgmma m64nNk16 (05)
* :mod:`course_lib.viz.ring`       the producer/consumer handshake over two ring slots, lap by lap (07)
* :mod:`course_lib.viz.trace`      a trace of your own numba kernel (course_lib.instruments), per warp request (01, 02, 04)
"""
