"""Pictures of a trace (:func:`course_lib.instruments.trace_kernel`): the accesses of your own numba
kernel, as warps see them.

Notebooks 01, 02 and 04 call::

    from course_lib.instruments import trace_kernel
    from course_lib.viz.trace import trace_widget
    trace_widget(trace_kernel(my_kernel, grid, block, a, b, c))   # a line of the kernel and a warp

A global-memory request is drawn as its sectors and lines (:mod:`course_lib.viz.coalescing`), a
shared-memory request as its banks (:mod:`course_lib.viz.banks`).
"""

from __future__ import annotations

from course_lib.instruments.trace import Trace, WarpRequest
from course_lib.viz.banks import draw_banks
from course_lib.viz.coalescing import draw_access


def draw_request(req: WarpRequest, ax=None):
    """The coalescing picture (global memory) or the bank picture (shared memory) of one request."""
    title = f"block {req.block[:2]} warp {req.warp}: {req.label}"
    if req.space == "global":
        return draw_access(req.coalescing(), ax=ax, title=title)
    return draw_banks(req.banks(), ax=ax, title=title)  # sized to the rows it draws when ax is None


def trace_widget(trace: Trace):
    """Pick one access of the kernel (a source line, an array, load or store) and step through its
    warp requests; the coalescing or bank picture of the request is drawn. ``.request`` holds the
    :class:`WarpRequest` on display; ``.controls``: 'site', 'request'."""
    import ipywidgets as widgets

    from course_lib.viz._figure import WIDE_WIDTH, connect, figure_box, figure_png, image_widget, style_controls

    summary = {(r["line"], r["array"], r["kind"], r["space"]): r for r in trace.summary()}
    options = [
        (f"line {line}: {kind} {array} ({space}) - {summary[(line, array, kind, space)]['metric']} "
         f"{summary[(line, array, kind, space)]['mean']:.1f}", (line, array, kind, space))
        for line, array, kind, space in trace.sites()
    ]
    if not options:
        raise ValueError("the trace recorded no accesses")
    site = widgets.Dropdown(options=options, value=options[0][1], description="access")
    req_s = widgets.IntSlider(value=0, min=0, max=0, description="warp request", continuous_update=False)
    style_controls(site, req_s, width=WIDE_WIDTH)  # long labels; a kernel can make hundreds of requests
    text = widgets.HTML()
    image = image_widget()
    box = figure_box([widgets.HTML(f"<pre>{trace.describe()}</pre>"), site, req_s, text, image], f"trace of {trace.kernel}")
    box.summary = text
    box.trace = trace
    busy = [False]

    def update(_=None) -> None:
        if busy[0]:
            return
        line, array, kind, space = site.value
        reqs = trace.requests(array=array, kind=kind, space=space, line=line)
        busy[0] = True
        try:
            req_s.max = len(reqs) - 1
            req_s.value = min(req_s.value, len(reqs) - 1)
        finally:
            busy[0] = False
        req = reqs[req_s.value]
        box.request = req
        text.value = req.describe()
        image.value = figure_png(draw_request(req))

    return connect(box, image, {"site": site, "request": req_s}, update)
