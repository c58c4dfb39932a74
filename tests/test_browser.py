"""The course in a real browser: JupyterLab + headless Chromium, every notebook run, widgets moved.

What it does: starts JupyterLab on 127.0.0.1 with a random token and fresh config, data, runtime,
settings and workspace directories (all temporary), and for every notebook opens it in Debian's
Chromium through Playwright (``executable_path``; no browser is ever downloaded), runs all cells
(stopping at the first error output, which then fails the test with the cell and the error), and
checks that:

* before anything runs, every stored widget output of a course notebook shows its picture (the
  notebook is not trusted, as a learner's copy is not, so JupyterLab does not use the widget
  renderer: it shows the ``image/png`` the widget stores next to itself), not the raw text;
* every cell ran and no output is an error or a traceback on stderr;
* every widget the notebook makes rendered (none stuck at "Loading widget...", no error view) and
  drew its picture;
* no puzzle's solution shows after Run All: not in any cell's output nor on the page, only its
  button ("Show the course's solution"); pressing one button shows that solution's code;
* every widget fits a 1400 x 900 window: its picture is shown at its own size, no wider than the
  output area; the whole widget is no taller than the notebook panel; every slider's track is at
  least 250 px long and has a pixel per value (up to 600 px); toggle buttons sit on their label's line;
* every slider, toggle group and dropdown of every widget, in the course notebooks and in the
  notebook of all widgets, moved once, changes the picture (the PNG's bytes, not just its URL) or
  the summary above it;
* opened untouched, the notebook is not marked modified (its kernelspec is the installed one and
  the course's server fills in ``language_info`` as the kernel reports it: course_lib/jupyter.py),
  and no news prompt covers it;
* nothing went wrong in the kernel meanwhile: no error or stderr traceback on the kernel's message
  channel (where a widget callback's print or error goes) and no traceback in the server's log.

Two more tests: a printed line as wide as tests/test_notebook_structure.py allows takes one row of
the output area beside the open file browser; and a notebook run, saved and reopened with a new
kernel (a learner's next day) shows every widget's picture, restored from the widget state JupyterLab
saved with it (tools/jupyterlab/overrides.json turns that on), not "model not found".

Screenshots (before running, after running, of each widget before and after moving its controls,
and on failure) go to
tests/artifacts/browser/<notebook>/ (git-ignored; the path is printed), with the JupyterLab log, so a
failing CI run can be inspected. Everything it starts is stopped at the end.

Notebooks driven: every ``notebooks/NN_*.ipynb`` (in order) and a small notebook written here
(``_WIDGET_CELLS``) that shows every widget of ``course_lib.viz``. ``COURSE_BROWSER_NOTEBOOKS=00,04``
limits the course notebooks to those prefixes (for a quick local run). On a 2-core machine the whole
test takes about three minutes: running the notebooks' cells is most of it (the CPU backend's
simulator), the rest is about 6 s per notebook to open it and start its kernel.

Chromium comes from Debian's ``chromium`` package, which ``make test`` installs when it is missing
and it runs as root. Without it (a learner without root) this test skips with the reason - except
when the environment variable ``CI`` is set, where a missing browser is a failure.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"
ARTIFACTS = ROOT / "tests" / "artifacts" / "browser"
TIMEOUT_S = 90  # for the server to start, a notebook to open and its kernel to start, a widget to answer
RUN_TIMEOUT_S = 600  # for one notebook to run all its cells (the slowest takes about 30 s on 2 cores)
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

# The notebook written for this test: one cell per widget of course_lib.viz, the trace widget on a
# tiny naive GEMM. Kept small: each widget draws one figure.
_WIDGET_CELLS = [
    "import course_lib\n"
    "from course_lib.viz import banks, coalescing, fragments, mapping, tiles, waves",
    "mapping.mapping_widget()",
    "waves.waves_widget()",
    "tiles.tiles_widget()",
    "coalescing.coalescing_widget()",
    "banks.banks_widget()",
    "fragments.fragments_widget()",
    "import numpy as np\n"
    "from course_lib.kernels import naive\n"
    "from course_lib.instruments import trace_kernel\n"
    "from course_lib.viz.trace import trace_widget\n"
    "a, b, c = np.ones((16, 8), np.float32), np.ones((8, 16), np.float32), np.zeros((16, 16), np.float32)\n"
    "trace_widget(trace_kernel(naive.naive_kernel, (1, 1), (16, 16), a, b, c))",
]


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _missing(reason: str) -> None:
    """Skip on a learner's machine; fail in CI, where the browser test must run."""
    if _in_ci():
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


def _chromium() -> str:
    for candidate in (os.environ.get("COURSE_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    _missing("Debian's chromium is not installed (as root: apt-get install chromium; `make test` does it)")
    raise AssertionError("unreachable")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _descendants(pid: int) -> list[int]:
    """Process ids below ``pid`` (children, grandchildren...), read from /proc."""
    parent_of = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                parent_of[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent_of.items() if pp == p]
        found += kids
        frontier += kids
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _write_notebook(path: Path, cells: list[str]) -> None:
    nb = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "id": f"cell-{i}", "metadata": {}, "outputs": [], "source": src}
            for i, src in enumerate(cells)
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb, indent=1))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server of its own: (base url, token, notebook directory)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _missing("the playwright Python package is not installed (it is in the 'test' extra: make test)")
    chromium = _chromium()
    tmp = tmp_path_factory.mktemp("lab")
    dirs = {name: tmp / name for name in ("config", "data", "runtime", "settings", "workspaces", "ipython", "notebooks")}
    for d in dirs.values():
        d.mkdir()
    for path in _course_notebooks():
        shutil.copy(path, dirs["notebooks"] / path.name)
    _write_notebook(dirs["notebooks"] / "viz_widgets.ipynb", _WIDGET_CELLS)
    # The course's JupyterLab settings (widget state saved with a notebook, no news prompt) are the
    # environment's defaults, installed by `make lab` / `make test`: the server below reads them
    # from there, exactly as a learner's does.
    installed = Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    wanted = (ROOT / "tools" / "jupyterlab" / "overrides.json").read_text()
    if not installed.is_file() or installed.read_text() != wanted:
        pytest.fail(f"{installed} is not tools/jupyterlab/overrides.json: run `make test` (it installs it)")
    token, port = secrets.token_hex(16), _free_port()
    env = dict(os.environ)
    env.update(
        JUPYTER_CONFIG_DIR=str(dirs["config"]),
        JUPYTER_DATA_DIR=str(dirs["data"]),
        JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
        JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
        JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]),
        IPYTHONDIR=str(dirs["ipython"]),
        COURSE_BACKEND="cpu",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={dirs['notebooks']}", f"--LabApp.workspaces_dir={dirs['workspaces']}",
        f"--LabApp.user_settings_dir={dirs['settings']}", "--LabApp.expose_app_in_browser=True",
        "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--ServerApp.terminals_enabled=False",
        # Kernels talk over Unix sockets in the runtime folder: TCP ports picked free can be taken
        # before the kernel binds them (a CI run failed on "Address already in use").
        "--KernelManager.transport=ipc",
    ] + (["--allow-root"] if os.geteuid() == 0 else [])  # CI runs as root
    log = (tmp / "jupyterlab.log").open("w")
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"JupyterLab did not start; its log:\n{(tmp / 'jupyterlab.log').read_text()[-3000:]}")
            time.sleep(0.3)
        yield base, token, tmp / "jupyterlab.log", chromium, dirs["notebooks"]
    finally:
        _stop(server, base, token)
        log.close()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)  # the server's log, next to the screenshots
        shutil.copy(tmp / "jupyterlab.log", ARTIFACTS / "jupyterlab.log")


def _shutdown_kernels(base: str, token: str) -> None:
    try:
        with urllib.request.urlopen(f"{base}/api/kernels?token={token}", timeout=5) as r:
            for k in json.load(r):
                req = urllib.request.Request(f"{base}/api/kernels/{k['id']}?token={token}", method="DELETE")
                urllib.request.urlopen(req, timeout=10).close()
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        pass


def _stop(server: subprocess.Popen, base: str, token: str) -> None:
    """Shut the kernels down, stop the server's process group, then any process it left behind."""
    started = _descendants(server.pid)
    _shutdown_kernels(base, token)
    started = sorted(set(started + _descendants(server.pid)))
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=5)
    for pid in started:  # kernels run in sessions of their own: stop them by id
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


_OUTPUT_STATE = """(path) => {
    const app = window.jupyterapp;
    const panel = app && app.shell.currentWidget;
    if (!panel || !panel.content || !panel.sessionContext || !panel.context || panel.context.path !== path) return null;
    const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
    const cells = panel.content.widgets.filter(c => c.model.type === 'code');
    return {
        status: kernel ? kernel.status : 'none',
        executed: cells.filter(c => c.model.executionCount !== null).length,
        running: document.querySelectorAll('.jp-InputArea-prompt').length ?
            Array.from(document.querySelectorAll('.jp-InputArea-prompt')).filter(p => p.textContent.includes('*')).length : 0,
        cells: cells.length,
    };
}"""

_PROBLEMS = """() => {
    const out = [];
    for (const el of document.querySelectorAll('.jp-OutputArea-output')) {
        const text = el.innerText || '';
        if (text.includes('Loading widget')) out.push('stuck: ' + text.slice(0, 80));
        if (text.includes('Error displaying widget') || text.includes('model not found')) out.push('widget error: ' + text.slice(0, 200));
        if (el.getAttribute('data-mime-type') === 'application/vnd.jupyter.stderr' && /Error|Traceback/.test(text)) out.push('stderr: ' + text.slice(0, 400));
    }
    for (const el of document.querySelectorAll('.jp-OutputArea-output .jp-RenderedText[data-mime-type="application/vnd.jupyter.error"], .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]'))
        out.push('error: ' + (el.innerText || '').slice(0, 400));
    return out;
}"""


def _course_notebooks() -> list[Path]:
    """The course's notebooks, in order (``COURSE_BROWSER_NOTEBOOKS=00,04`` keeps only those)."""
    paths = sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
    wanted = [w.strip() for w in os.environ.get("COURSE_BROWSER_NOTEBOOKS", "").split(",") if w.strip()]
    return [p for p in paths if not wanted or any(p.name.startswith(w) for w in wanted)]


def _notebooks() -> list[str]:
    return [p.name for p in _course_notebooks()] + ["viz_widgets.ipynb"]


def _widgets_stored(path: Path, solutions: bool = False) -> int:
    """How many widgets with a picture the committed notebook shows (its stored outputs, from the
    CPU run), or with ``solutions``, how many solution buttons (``course_lib.learn.solution_widget``)."""
    from course_lib.learn import SOLUTION_HIDDEN

    nb = json.loads(path.read_text())
    return sum(
        WIDGET_MIME in out.get("data", {}) and (_plain(out) == SOLUTION_HIDDEN) == solutions
        for cell in nb["cells"] if cell["cell_type"] == "code" for out in cell.get("outputs", [])
    )


def _plain(out: dict) -> str:
    text = out.get("data", {}).get("text/plain", "")
    return "".join(text) if isinstance(text, list) else text


def _solution_code(path: Path) -> list[tuple[int, list[str]]]:
    """Every solution button of a notebook, in order: its cell's index and the first line of each
    piece of the course's code it shows (``def naive_kernel(``), which must not be on the page
    before the button is pressed."""
    import importlib
    import re

    nb = json.loads(path.read_text())
    module = next((m[1] for c in nb["cells"] if c["cell_type"] == "code"
                   for m in [re.search(r"from course_lib\.exercises import (\w+) as ex\b", "".join(c["source"]))] if m), None)
    if module is None:
        return []
    ex = importlib.import_module(f"course_lib.exercises.{module}")
    found = []
    for i, cell in enumerate(nb["cells"]):
        for m in re.finditer(r"\bex\.(\w+)\.solution\(([^)]*)\)", "".join(cell["source"])) if cell["cell_type"] == "code" else ():
            puzzle = getattr(ex, m[1])
            shown = [getattr(puzzle, "reveal", None) or puzzle.solved_by]
            shown += [getattr(importlib.import_module(_MODULE_OF[a.split(".")[0]]), a.split(".")[-1])
                      for a in filter(None, (a.strip() for a in m[2].split(",")))]
            lines = []
            for obj in shown:
                fn = getattr(obj, "fn", None) or getattr(obj, "py_func", None) or obj
                lines.append(f"def {fn.__name__}(")
            found.append((i, lines))
    return found


# What the notebooks import as a name whose code a solution button also shows: ``c04.vector_add``.
_MODULE_OF = {"c04": "course_lib.kernels.coalescing_and_triton"}


_PNG_DIGEST = """async (el) => {
    const img = el.querySelector('img.widget-image');
    const bytes = await (await fetch(img.src)).arrayBuffer();
    const hash = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
    return Array.from(hash).map(b => b.toString(16).padStart(2, '0')).join('');
}"""


def _image_digest(box) -> str:
    """SHA-256 of the PNG the Image widget shows (its bytes, not its blob URL)."""
    return box.evaluate(_PNG_DIGEST)


# Run-state and results read from JupyterLab's notebook model (complete even for cells scrolled out
# of view): code cells, how many ran, and every error output or traceback on stderr.
_RUN_STATE = """(path) => {
    const s = (""" + _OUTPUT_STATE + """)(path);
    if (!s) return null;
    const panel = window.jupyterapp.shell.currentWidget;
    s.errors = [];
    s.widgets = 0;
    panel.content.widgets.forEach((cell, index) => {
        if (cell.model.type !== 'code') return;
        for (let k = 0; k < cell.model.outputs.length; k++) {
            const o = cell.model.outputs.get(k).toJSON();
            if (o.output_type === 'error') s.errors.push(`cell ${index}: ${o.ename}: ${o.evalue}`);
            if (o.output_type === 'stream' && o.name === 'stderr' && /Error|Traceback/.test(o.text))
                s.errors.push(`cell ${index} (stderr): ${String(o.text).slice(0, 400)}`);
            if (o.data && o.data['""" + WIDGET_MIME + """']) s.widgets += 1;
        }
    });
    return s;
}"""

# The kernel's message channel: errors and stderr that reach no cell (a widget callback's, say).
_LISTEN_TO_KERNEL = """() => {
    const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
    window.__kernelProblems = [];
    kernel.iopubMessage.connect((_, msg) => {
        const t = msg.header.msg_type;
        if (t === 'error') window.__kernelProblems.push(`error: ${msg.content.ename}: ${msg.content.evalue}`);
        if (t === 'stream' && msg.content.name === 'stderr' && /Error|Traceback/.test(msg.content.text))
            window.__kernelProblems.push('stderr: ' + msg.content.text.slice(0, 400));
    });
}"""

_BOX_STATE = """(el) => {
    const img = el.querySelector('img.widget-image');
    return {src: img ? img.src : null,
            summary: Array.from(el.querySelectorAll('.widget-html-content')).map(e => e.innerText).join('|')};
}"""

_CHANGED = """([el, old, pictureOnly]) => {
    const img = el.querySelector('img.widget-image');
    const summary = Array.from(el.querySelectorAll('.widget-html-content')).map(e => e.innerText).join('|');
    return (img && img.src !== old.src) || (!pictureOnly && summary !== old.summary);
}"""


_KERNEL_IDLE = "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'"


_PICTURE_SHOWN = """(el) => {
    const img = el.querySelector('img.widget-image');
    return !img || img.offsetParent === null || (img.complete && img.naturalWidth > 0);
}"""


def _settle(page, box) -> None:
    """Wait until the kernel is idle again - every message the control's callback sent has arrived
    (the kernel's status messages come in order with the widget updates), so the summary and the
    picture belong together - and the browser has decoded the picture (or it is hidden)."""
    page.wait_for_function(_KERNEL_IDLE, polling=100)
    page.wait_for_function(_PICTURE_SHOWN, arg=box.element_handle(), polling=100)
    box.evaluate("async (el) => { const img = el.querySelector('img.widget-image'); if (img && img.offsetParent) await img.decode(); }")


def _wait_changed(page, box, before, before_digest, what: str) -> None:
    """After a control moved: the picture (its bytes) or the summary above it must change."""
    try:
        page.wait_for_function(_CHANGED, arg=[box.element_handle(), before, False], polling=200)
    except Exception as e:
        raise AssertionError(f"{what}: neither the picture nor the summary changed") from e
    # The picture may be replaced more than once for one move (an Image widget's value set twice):
    # the first new address can still hold the old bytes. Give the last one a few seconds to come.
    for _ in range(25):
        _settle(page, box)
        after = box.evaluate(_BOX_STATE)
        if after["summary"] != before["summary"] or _image_digest(box) != before_digest:
            return
        page.wait_for_timeout(200)
    raise AssertionError(f"{what}: the picture's address changed but not its bytes, nor the summary")


def _move_slider(page, box, slider, where: str) -> str:
    """Move a slider one step with the keyboard (back one step if it is at its maximum)."""
    name = slider.locator(".widget-label").first.inner_text()
    readout = slider.locator(".widget-readout").first
    old_value = readout.inner_text()
    before, before_digest = box.evaluate(_BOX_STATE), _image_digest(box)
    slider.locator(".noUi-handle").first.focus()
    page.keyboard.press("ArrowRight")
    try:
        page.wait_for_function("([el, old]) => el.innerText !== old", arg=[readout.element_handle(), old_value], polling=200, timeout=5000)
    except Exception:  # already at its maximum
        page.keyboard.press("ArrowLeft")
        page.wait_for_function("([el, old]) => el.innerText !== old", arg=[readout.element_handle(), old_value], polling=200)
    what = f"{where}: slider {name!r} {old_value} -> {readout.inner_text()}"
    _wait_changed(page, box, before, before_digest, what)
    return what


def _move_toggle(page, box, control, where: str) -> str:
    """Click the button after the active one (the first, after the last)."""
    label = control.locator(".widget-label").first.inner_text()
    buttons = control.locator("button")
    labels = [buttons.nth(b).inner_text() for b in range(buttons.count())]
    active = [b for b in range(buttons.count()) if "mod-active" in (buttons.nth(b).get_attribute("class") or "")]
    current = active[0] if active else 0
    before, before_digest = box.evaluate(_BOX_STATE), _image_digest(box)
    buttons.nth((current + 1) % len(labels)).click()
    what = f"{where}: toggle {label!r} {labels[current]} -> {labels[(current + 1) % len(labels)]}"
    _wait_changed(page, box, before, before_digest, what)
    return what


def _move_dropdown(page, box, control, where: str) -> str:
    """Pick the option after the selected one (the first, after the last)."""
    label = control.locator(".widget-label").first.inner_text()
    select = control.locator("select")
    assert not select.is_disabled(), f"{where}: dropdown {label!r} is disabled when its turn comes"
    options = select.evaluate("el => Array.from(el.options).map(o => o.text)")
    old = select.evaluate("el => el.options[el.selectedIndex].text")
    new = options[(options.index(old) + 1) % len(options)]
    before, before_digest = box.evaluate(_BOX_STATE), _image_digest(box)
    select.select_option(label=new)
    what = f"{where}: dropdown {label!r} {old} -> {new}"
    _wait_changed(page, box, before, before_digest, what)
    return what


def _move_every_control(page, box, where: str) -> list[str]:
    """Every slider, then every toggle group, then every dropdown of the widget, once each; each
    must change the picture or the summary. Toggles come before dropdowns because a toggle can
    enable a dropdown (the fragments widget's wgmma N)."""
    moved = [_move_slider(page, box, s, where) for s in box.locator(".widget-slider").all()]
    moved += [_move_toggle(page, box, t, where) for t in box.locator(".widget-toggle-buttons").all()]
    moved += [_move_dropdown(page, box, d, where) for d in box.locator(".widget-dropdown").all()]
    return moved


# A slider's track must be long enough to pick a value with the mouse: at least 250 px, and one
# pixel per value up to 600 px (a track of 54 px for 228 values, as the waves widget had, is not).
MIN_TRACK_PX = 250
MAX_TRACK_NEEDED_PX = 600

_LAYOUT = """(el) => {
    const panel = window.jupyterapp.shell.currentWidget.content.node;
    const outer = el.closest('.jp-WindowedPanel-outer') || panel;
    const img = el.querySelector('img.widget-image');
    const box = el.querySelector('.jupyter-widgets.widget-vbox');
    return {
        output: Math.round(el.getBoundingClientRect().width),
        screen: Math.round(outer.getBoundingClientRect().height),
        box: Math.round(box.getBoundingClientRect().height),
        picture: img ? [img.naturalWidth, img.naturalHeight, Math.round(img.getBoundingClientRect().width)] : null,
        sliders: Array.from(el.querySelectorAll('.widget-slider')).map(s => {
            const target = s.querySelector('.noUi-target');
            const o = target.noUiSlider.options;
            return {name: s.querySelector('.widget-label').innerText, track: Math.round(target.getBoundingClientRect().width),
                    values: Math.round((o.range.max - o.range.min) / o.step) + 1};
        }),
        toggles: Array.from(el.querySelectorAll('.widget-toggle-buttons')).map(t => {
            const label = t.querySelector('.widget-label').getBoundingClientRect();
            const first = t.querySelector('button').getBoundingClientRect();
            return {name: t.querySelector('.widget-label').innerText, labelTop: label.top, buttonTop: first.top,
                    gap: Math.round(first.left - label.right)};
        }),
    };
}"""


def _check_layout(box, where: str) -> dict:
    """The widget fits the screen: its picture is drawn at its own size within the output area, the
    whole widget (controls, summary, picture) is no taller than the notebook panel, every slider
    has a usable track, and every toggle group's buttons sit on its label's line, next to it."""
    layout = box.evaluate(_LAYOUT)
    natural_w, natural_h, shown_w = layout["picture"]
    assert natural_w <= layout["output"], f"{where}: a picture {natural_w} px wide in an output area of {layout['output']} px"
    assert shown_w == natural_w, f"{where}: the picture is shrunk from {natural_w} to {shown_w} px"
    assert layout["box"] <= layout["screen"], f"{where}: the widget is {layout['box']} px tall, the notebook panel {layout['screen']} px"
    for s in layout["sliders"]:
        needed = max(MIN_TRACK_PX, min(s["values"], MAX_TRACK_NEEDED_PX))
        assert s["track"] >= needed, f"{where}: slider {s['name']!r} has a track of {s['track']} px for {s['values']} values (needs {needed})"
    for t in layout["toggles"]:
        assert abs(t["labelTop"] - t["buttonTop"]) <= 4, f"{where}: toggle {t['name']!r}: the buttons are not on the label's line"
        assert 0 <= t["gap"] <= 24, f"{where}: toggle {t['name']!r}: the buttons start {t['gap']} px from the label"
    return layout


# Every stored widget output of the open notebook: how it is shown (before anything runs, an untrusted
# notebook shows the picture stored beside the widget; reopened after a save, the restored widget).
_UNRUN_WIDGETS = """() => {
    const panel = window.jupyterapp.shell.currentWidget;
    const out = [];
    panel.content.widgets.forEach((cell, index) => {
        if (cell.model.type !== 'code') return;
        const shown = cell.outputArea.node.querySelectorAll('.jp-OutputArea-output');
        for (let k = 0; k < cell.model.outputs.length; k++) {
            const o = cell.model.outputs.get(k).toJSON();
            if (!(o.data && o.data['""" + WIDGET_MIME + """'])) continue;
            const el = shown[k];
            const img = el && el.querySelector('img');
            const plain = [].concat(o.data['text/plain'] || []).join('');
            out.push({cell: index, mime: el ? el.getAttribute('data-mime-type') : null, image: !!img, plain: plain,
                      picture: !!(img && img.complete && img.naturalWidth > 0), text: el ? (el.innerText || '').slice(0, 120) : ''});
        }
    });
    return out;
}"""


# Where a solution's code shows after Run All: any cell's output (rendered or scrolled out of view),
# the page's text, a solution widget that shows more than its button.
_SOLUTIONS_SHOWN = """([markers, button]) => {
    const panel = window.jupyterapp.shell.currentWidget;
    const found = [];
    panel.content.widgets.forEach((cell, index) => {
        if (cell.model.type !== 'code') return;
        for (let k = 0; k < cell.model.outputs.length; k++) {
            const text = JSON.stringify(cell.model.outputs.get(k).toJSON());
            for (const m of markers) if (text.includes(m)) found.push(`cell ${index}, output ${k}: ${m}`);
        }
    });
    const page = document.body.innerText;
    for (const m of markers) if (page.includes(m)) found.push(`on the page: ${m}`);
    for (const el of document.querySelectorAll('.course-solution')) {  // (no text: scrolled out of view)
        const text = el.innerText.trim();
        if (el.querySelector('.jp-OutputArea-output') || (text && text !== button))
            found.push(`a solution widget shows ${JSON.stringify(text.slice(0, 80))}`);
    }
    return found;
}"""

# Scroll a cell into view (the notebook renders only what is near the view) and mark its node.
_SHOW_CELL = """async (index) => {
    const notebook = window.jupyterapp.shell.currentWidget.content;
    await notebook.scrollToItem(index, 'center');
    for (const el of document.querySelectorAll('[data-solution-cell]')) el.removeAttribute('data-solution-cell');
    notebook.widgets[index].node.setAttribute('data-solution-cell', String(index));
}"""


# What the solution widget in cell `index` shows now (null where no widget view is rendered there).
_SOLUTION_TEXT = """(index) => {
    const cell = window.jupyterapp.shell.currentWidget.content.widgets[index];
    const el = cell && cell.node.querySelector('.course-solution');
    return el && el.isConnected ? el.innerText.trim() : null;
}"""


def _check_solutions_hidden_then_press_one(page, notebook: str, solutions, shots: Path) -> str:
    """After Run All no solution's code is anywhere in the notebook or on the page, only buttons;
    the first button, pressed, shows its solution's code."""
    from course_lib.learn import SOLUTION_BUTTON

    markers = sorted({m for _, lines in solutions for m in lines})
    shown = page.evaluate(_SOLUTIONS_SHOWN, [markers, SOLUTION_BUTTON])
    assert shown == [], f"{notebook}: a solution shows before its button is pressed: {shown}"
    index, lines = solutions[0]
    cell = page.locator(f"[data-solution-cell='{index}']")
    button = cell.locator(".course-solution button")
    # The widget's view renders after its cell scrolls into view, and the notebook may render the cell
    # again (a fresh node) while it settles: scroll and read the widget afresh until it shows its button.
    # (Waiting on one element handle for 30 s timed out once in CI; a replaced node is the likely cause.)
    said, deadline = None, time.monotonic() + 60
    while time.monotonic() < deadline:
        page.evaluate(_SHOW_CELL, index)
        said = page.evaluate(_SOLUTION_TEXT, index)
        if said == SOLUTION_BUTTON:
            break
        page.wait_for_timeout(500)
    else:
        page.screenshot(path=str(shots / "4_solution_button_missing.png"))
        raise AssertionError(f"{notebook} cell {index}: after 60 s the solution widget says {said!r}, not {SOLUTION_BUTTON!r} "
                             f"(null: no widget rendered in the cell); screenshot 4_solution_button_missing.png")
    button.click()
    try:
        page.wait_for_function("([fn, index, lines]) => { const text = eval(fn)(index); "
                               "return text !== null && lines.every(l => text.includes(l)); }",
                               arg=[_SOLUTION_TEXT, index, lines], polling=200)
    except Exception as e:
        raise AssertionError(f"{notebook} cell {index}: pressed, the button does not show {lines}") from e
    cell.screenshot(path=str(shots / "4_solution_shown.png"))
    return f"{notebook} cell {index}: the button showed {', '.join(lines)}"


@pytest.mark.parametrize("notebook", _notebooks())
def test_notebook_runs_and_its_widgets_respond_in_chromium(lab, notebook):
    from playwright.sync_api import sync_playwright

    base, token, server_log, chromium, _ = lab
    shots = ARTIFACTS / Path(notebook).stem
    shots.mkdir(parents=True, exist_ok=True)
    print(f"\nbrowser screenshots: {shots}")
    log_start = server_log.stat().st_size
    expected_widgets = len(_WIDGET_CELLS) - 1 if notebook == "viz_widgets.ipynb" else _widgets_stored(NOTEBOOK_DIR / notebook)
    solutions = [] if notebook == "viz_widgets.ipynb" else _solution_code(NOTEBOOK_DIR / notebook)
    if solutions:
        assert _widgets_stored(NOTEBOOK_DIR / notebook, solutions=True) == len(solutions), (
            f"{notebook}: the stored outputs have not the {len(solutions)} solution buttons: regenerate them (make notebooks)")
    with sync_playwright() as pw:
        browser = _browser(pw, chromium)
        try:
            page = _page(browser)
            console_errors: list[str] = []
            page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
            try:
                _open(page, base, token, notebook, Path(notebook).stem)
                assert not page.evaluate(_DIRTY), f"{notebook}: marked modified as soon as it opened, untouched"
                assert page.get_by_text("official Jupyter news").count() == 0, f"{notebook}: a news prompt covers the notebook"
                if notebook != "viz_widgets.ipynb":
                    # Not run yet, and not trusted (someone else ran it): every widget shows its picture.
                    from course_lib.learn import SOLUTION_HIDDEN

                    unrun = page.evaluate(_UNRUN_WIDGETS)
                    # A solution's button has no picture: unrun, it shows its text, which is not the code.
                    hidden = [w for w in unrun if w["plain"] == SOLUTION_HIDDEN]
                    assert all(w["mime"] == "text/plain" for w in hidden), f"{notebook}: {hidden}"
                    unrun = [w for w in unrun if w["plain"] != SOLUTION_HIDDEN]
                    assert len(unrun) == expected_widgets, f"{notebook}: {len(unrun)} stored widget outputs, expected {expected_widgets}"
                    for w in unrun:
                        assert w["mime"] == "image/png" and w["image"], f"{notebook} cell {w['cell']}, not run: shows {w['mime']} {w['text']!r}"
                    if unrun:
                        page.locator(".jp-OutputArea-output[data-mime-type='image/png']").nth(0).scroll_into_view_if_needed()
                        page.screenshot(path=str(shots / "0_before_running.png"))
                page.evaluate(_LISTEN_TO_KERNEL)
                started = time.monotonic()
                _run_all(page, notebook)
                print(f"{notebook}: ran all cells in {time.monotonic() - started:.0f} s")
                state = page.evaluate(_RUN_STATE, notebook)
                page.screenshot(path=str(shots / "1_after_run_all.png"))
                assert state["errors"] == [], f"{notebook}: error output(s): {state['errors']}"
                assert state["executed"] == state["cells"], f"{notebook}: only {state['executed']} of {state['cells']} code cells ran"
                assert page.evaluate(_PROBLEMS) == []

                # Every widget the notebook makes rendered with its picture.
                assert state["widgets"] == expected_widgets + len(solutions), (
                    f"{notebook}: {state['widgets']} widgets, expected {expected_widgets} and {len(solutions)} solution buttons")
                boxes = page.locator(".jp-OutputArea-output").filter(has=page.locator(".jupyter-widgets img.widget-image"))
                assert boxes.count() == expected_widgets, f"{notebook}: {boxes.count()} of {expected_widgets} widgets rendered"
                moved = []
                for i in range(expected_widgets):
                    box = boxes.nth(i)
                    box.scroll_into_view_if_needed()
                    page.wait_for_function("(el) => { const img = el.querySelector('img.widget-image'); return img && img.src; }", arg=box.element_handle())
                    layout = _check_layout(box, f"{notebook} widget {i}")
                    print(f"{notebook} widget {i}: picture {layout['picture'][0]} x {layout['picture'][1]} px in an output area of "
                          f"{layout['output']} px; widget {layout['box']} px tall of {layout['screen']}; slider tracks "
                          + ", ".join(f"{s['name']} {s['track']} px / {s['values']} values" for s in layout["sliders"]))
                    box.screenshot(path=str(shots / f"2_widget_{i}.png"))
                    moved += _move_every_control(page, box, f"{notebook} widget {i}")
                    box.screenshot(path=str(shots / f"3_widget_{i}_after_moving.png"))
                    assert page.evaluate(_PROBLEMS) == [], moved[-1]
                print("\n".join(moved))
                if solutions:
                    print(_check_solutions_hidden_then_press_one(page, notebook, solutions, shots))

                kernel_problems = page.evaluate("() => window.__kernelProblems")
                assert kernel_problems == [], f"{notebook}: the kernel reported {kernel_problems}"
                new_log = server_log.read_text(errors="replace")[log_start:]
                assert "Traceback" not in new_log, f"{notebook}: a traceback in the JupyterLab log:\n{new_log[-3000:]}"
            except Exception:
                page.screenshot(path=str(shots / "failure.png"))
                (shots / "console_errors.txt").write_text("\n".join(console_errors))
                raise
        finally:
            browser.close()
            _shutdown_kernels(base, token)  # the next notebook gets the CPU to itself


_DIRTY = "() => window.jupyterapp.shell.currentWidget.context.model.dirty"

# A printed line: how many rows it takes in the output area (1: it fits), and whether the file
# browser is open beside the notebook (the narrowest layout the course is checked in).
_LINE_ROWS = """() => {
    const pre = document.querySelector('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stdout"] pre');
    const browser = document.querySelector('.jp-FileBrowser');
    const h = parseFloat(getComputedStyle(pre).lineHeight);
    return {rows: Math.round(pre.getBoundingClientRect().height / h), output: Math.round(pre.getBoundingClientRect().width),
            browser: browser && browser.offsetParent !== null ? Math.round(browser.getBoundingClientRect().width) : 0};
}"""


def _page(browser):
    """A page of 1400 x 900, the smallest screen the course is checked on."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(TIMEOUT_S * 1000)
    return page


def _open(page, base, token, notebook, workspace):
    """Open ``notebook`` alone in a workspace of its own, reset (so it is the current tab), and wait
    until its kernel is idle."""
    page.goto(f"{base}/lab/workspaces/{workspace}/tree/{notebook}?reset&token={token}")
    page.wait_for_function(f"(path) => {{ const s = ({_OUTPUT_STATE})(path); return s && s.status === 'idle'; }}", arg=notebook)


def _run_all(page, notebook):
    """Run every cell; done when every cell ran or one failed (run-all stops there), the kernel is
    idle and no widget still says "Loading widget" (widgets render after the kernel is idle)."""
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(
        f"(path) => {{ const s = ({_RUN_STATE})(path); return s && s.status === 'idle' && s.running === 0"
        " && (s.executed === s.cells || s.errors.length > 0); }",
        arg=notebook, polling=500, timeout=RUN_TIMEOUT_S * 1000,
    )
    page.wait_for_function(
        "() => !Array.from(document.querySelectorAll('.jp-OutputArea-output')).some(e => (e.innerText || '').includes('Loading widget'))",
        polling=500,
    )


def _browser(pw, chromium):
    return pw.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])


def test_a_printed_line_of_the_allowed_width_fits_beside_the_file_browser(lab):
    """tests/test_notebook_structure.py keeps printed lines to MAX_LINE characters; here such a line,
    printed in JupyterLab at 1400 x 900 with the file browser open, takes one row of the output area."""
    from playwright.sync_api import sync_playwright

    from test_notebook_structure import MAX_LINE

    base, token, _, chromium, folder = lab
    notebook = "line_width.ipynb"
    line = ("stage                         dtype      M     N     K        ms  TFLOP/s   cuBLAS   ratio" + " " * MAX_LINE)[:MAX_LINE - 1] + "%"
    _write_notebook(folder / notebook, [f"print({line!r})"])
    with sync_playwright() as pw:
        browser = _browser(pw, chromium)
        try:
            page = _page(browser)
            _open(page, base, token, notebook, "line_width")
            _run_all(page, notebook)
            got = page.evaluate(_LINE_ROWS)
            page.screenshot(path=str(ARTIFACTS / "line_width.png"))
            assert got["browser"] > 150, f"the file browser is not open beside the notebook: {got}"
            assert got["rows"] == 1, f"a printed line of {MAX_LINE} characters wraps to {got['rows']} rows in {got['output']} px"
        finally:
            browser.close()
            _shutdown_kernels(base, token)


def test_a_notebook_run_saved_and_reopened_shows_its_widgets(lab):
    """What a learner does: Run All, save, come back the next day (a new kernel): every widget shows
    its picture (restored from the state saved with the notebook), never "model not found"."""
    from playwright.sync_api import sync_playwright

    base, token, _, chromium, folder = lab
    notebook = _course_notebooks()[0].name  # the first notebook: it has widgets and runs in seconds
    with sync_playwright() as pw:
        browser = _browser(pw, chromium)
        try:
            page = _page(browser)
            _open(page, base, token, notebook, "save_1")
            _run_all(page, notebook)
            page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
            page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", polling=200)
            saved = json.loads((folder / notebook).read_text())
            assert "application/vnd.jupyter.widget-state+json" in saved["metadata"].get("widgets", {}), (
                "the saved notebook holds no widget state: is saveState on (tools/jupyterlab/overrides.json)?")
        finally:
            browser.close()
            _shutdown_kernels(base, token)  # the next day: the old kernel is gone
        browser = _browser(pw, chromium)
        try:
            page = _page(browser)
            _open(page, base, token, notebook, "save_2")
            page.wait_for_timeout(2000)  # the widget manager restores the saved models
            # (Reopened, it is marked modified: ipywidgets' widget manager marks a notebook dirty
            # whenever it registers a widget model when saveState is on, restored models included.
            # A notebook as committed has no widget state and opens unmodified: the test above.)
            shown = page.evaluate(_UNRUN_WIDGETS)
            page.screenshot(path=str(ARTIFACTS / "reopened.png"))
            assert shown, f"{notebook}: no widget outputs after reopening"
            for w in shown:
                assert "model not found" not in w["text"] and "Error displaying widget" not in w["text"], (
                    f"{notebook} cell {w['cell']}, reopened: {w['text']!r}")
                assert w["picture"], f"{notebook} cell {w['cell']}, reopened: no picture ({w['mime']}: {w['text']!r})"
            assert page.evaluate(_PROBLEMS) == []
        finally:
            browser.close()
            _shutdown_kernels(base, token)


def test_a_missing_browser_skips_for_a_learner_and_fails_in_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromium"):
        _missing("Debian's chromium is not installed")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        _missing("Debian's chromium is not installed")
