"""The course in a real browser: JupyterLab + headless Chromium, widgets rendered and moved.

What it does: starts JupyterLab on 127.0.0.1 with a random token and fresh config, data, runtime,
settings and workspace directories (all temporary), opens a notebook in Debian's Chromium through
Playwright (``executable_path``; no browser is ever downloaded), runs all cells, checks that every
widget rendered (none stuck at "Loading widget..." and no error output), moves a slider and checks
that the picture changed. Screenshots go to tests/artifacts/browser/ (git-ignored; the path is
printed), with the JupyterLab log, so a failing CI run can be inspected. Everything it starts is stopped at the end.

Notebooks driven: ``notebooks/00_gpu_execution_model.ipynb`` when it exists, and always a small
notebook written here (``_widget_cells``) that shows every widget of ``course_lib.viz``.

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
NOTEBOOK_00 = ROOT / "notebooks" / "00_gpu_execution_model.ipynb"
ARTIFACTS = ROOT / "tests" / "artifacts" / "browser"
TIMEOUT_S = 90  # for the server to start and for a notebook to run all its cells

# The notebook written for this test: one cell per widget of course_lib.viz (the mapping widget
# first, because its slider is the one moved). Kept small: each widget draws one figure.
_WIDGET_CELLS = [
    "import course_lib\n"
    "from course_lib.viz import banks, coalescing, fragments, mapping, tiles, waves",
    "mapping.mapping_widget()",
    "waves.waves_widget()",
    "tiles.tiles_widget()",
    "coalescing.coalescing_widget()",
    "banks.banks_widget()",
    "fragments.fragments_widget()",
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
    if NOTEBOOK_00.exists():
        shutil.copy(NOTEBOOK_00, dirs["notebooks"] / NOTEBOOK_00.name)
    _write_notebook(dirs["notebooks"] / "viz_widgets.ipynb", _WIDGET_CELLS)
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
        yield base, token, dirs["notebooks"], chromium
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


def _notebooks() -> list[str]:
    return ([NOTEBOOK_00.name] if NOTEBOOK_00.exists() else []) + ["viz_widgets.ipynb"]


_PNG_DIGEST = """async (el) => {
    const img = el.querySelector('img.widget-image');
    const bytes = await (await fetch(img.src)).arrayBuffer();
    const hash = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
    return Array.from(hash).map(b => b.toString(16).padStart(2, '0')).join('');
}"""


def _image_digest(box) -> str:
    """SHA-256 of the PNG the Image widget shows (its bytes, not its blob URL)."""
    return box.evaluate(_PNG_DIGEST)


@pytest.mark.parametrize("notebook", _notebooks())
def test_notebook_widgets_render_and_respond_in_chromium(lab, notebook):
    from playwright.sync_api import sync_playwright

    base, token, _, chromium = lab
    shots = ARTIFACTS / Path(notebook).stem
    shots.mkdir(parents=True, exist_ok=True)
    print(f"\nbrowser screenshots: {shots}")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(TIMEOUT_S * 1000)
            console_errors: list[str] = []
            page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
            try:
                # A workspace of its own, reset: only this notebook is open, and it is the current tab.
                page.goto(f"{base}/lab/workspaces/{Path(notebook).stem}/tree/{notebook}?reset&token={token}")
                state = f"(path) => {{ const s = ({_OUTPUT_STATE})(path); return s && s.status === 'idle'"
                page.wait_for_function(state + "; }", arg=notebook)
                page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
                page.wait_for_function(state + " && s.executed === s.cells && s.running === 0; }", arg=notebook, polling=500)
                # Widgets render after the kernel is idle: wait until none says "Loading widget".
                page.wait_for_function(
                    "() => !Array.from(document.querySelectorAll('.jp-OutputArea-output')).some(e => (e.innerText || '').includes('Loading widget'))",
                    polling=500,
                )
                boxes = page.locator(".jp-OutputArea-output .widget-vbox").filter(has=page.locator(".widget-slider")).filter(has=page.locator(".widget-image"))
                boxes.first.wait_for()
                page.screenshot(path=str(shots / "1_after_run_all.png"), full_page=True)
                assert page.evaluate(_PROBLEMS) == []
                if notebook == "viz_widgets.ipynb":  # every widget of course_lib.viz drew its figure
                    assert page.locator(".jp-OutputArea-output img.widget-image").count() >= len(_WIDGET_CELLS) - 1

                box = boxes.first
                box.scroll_into_view_if_needed()
                before = _image_digest(box)
                before_src = box.locator("img.widget-image").first.get_attribute("src")
                slider = box.locator(".widget-slider").first
                readout = slider.locator(".widget-readout").first
                old_value = readout.inner_text()
                slider.locator(".noUi-handle").first.focus()
                page.keyboard.press("ArrowRight")
                page.wait_for_function(
                    "([el, old]) => el.innerText !== old", arg=[readout.element_handle(), old_value], polling=200,
                )
                page.wait_for_function(  # the Image widget gets the new figure's PNG
                    "([el, old]) => { const img = el.querySelector('img.widget-image'); return img && img.src && img.src !== old; }",
                    arg=[box.element_handle(), before_src],
                    polling=200,
                )
                page.screenshot(path=str(shots / "2_after_slider.png"), full_page=True)
                assert readout.inner_text() != old_value
                assert _image_digest(box) != before, "the figure did not change when the slider moved"
                assert page.evaluate(_PROBLEMS) == []
            except Exception:
                page.screenshot(path=str(shots / "failure.png"), full_page=True)
                (shots / "console_errors.txt").write_text("\n".join(console_errors))
                raise
        finally:
            browser.close()
            _shutdown_kernels(base, token)  # the next notebook gets the CPU to itself


def test_a_missing_browser_skips_for_a_learner_and_fails_in_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromium"):
        _missing("Debian's chromium is not installed")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        _missing("Debian's chromium is not installed")
