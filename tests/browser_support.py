"""Drive JupyterLab in headless Chromium and check what a learner sees.

nbval proves that a notebook's kernel produces the stored text; it never
looks at the page. This module opens a notebook in a real JupyterLab, runs
it through the menu the way a learner would, and reports every visible
problem: error outputs, widgets that do not render or do not respond, graph
drawings that never appear, tracebacks printed by widget callbacks.

The pieces are plain functions and small classes so that the browser test
and the test of the checker itself (tests/lessons/test_browser.py) share them.
One server and one page with JupyterLab loaded serve every notebook a test
process opens (loading the app takes longer than running most lessons):

    server = LabServer(root_dir)            # one jupyter lab per test process
    server.start()
    lab = LabWindow(context, server)        # one page, the app loaded once
    report = check_notebook(lab, "lessons/02-chain-rule.ipynb", disk_path)
    assert report.ok, report.describe()
    server.stop()

A test that does more than "run all and look" (edit a cell, run it again)
builds on the same pieces:

    with notebook_page(lab, path, report, plans=plans, artifacts=folder) as page:
        open_notebook(page, path)
        run_all_cells(page)
        wait_for_run(page, path, plans, NOTEBOOK_RUN_TIMEOUT)
        set_cell_source(page, path, 27, "dfdx = 3.0")
        cell = run_cell(page, path, 27)
    assert report.ok, report.describe()
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

# Flags that let Debian's chromium run headless as root inside a container and
# keep it from phoning home (there is no network here, and a blocked request
# would only slow start-up).
CHROMIUM_ARGS: tuple[str, ...] = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)

# A tall viewport so a screenshot taken on failure shows several cells.
VIEWPORT = {"width": 1280, "height": 1600}

# Seconds; the machine that runs CI may be shared and slow, so every wait is
# generous and can be stretched with BACKPROPLAB_BROWSER_TIMEOUT (a factor).
_SCALE = float(os.environ.get("BACKPROPLAB_BROWSER_TIMEOUT", "1") or 1)
SERVER_START_TIMEOUT = 90 * _SCALE
NOTEBOOK_RUN_TIMEOUT = 300 * _SCALE
WIDGET_RENDER_TIMEOUT = 60 * _SCALE
SLIDER_RESPONSE_TIMEOUT = 45 * _SCALE
CELL_RUN_TIMEOUT = 60 * _SCALE

# Lab settings written into the isolated settings folder. Windowing "none"
# keeps every cell attached to the DOM (the default, contentVisibility, may
# skip off-screen cells); autosave off so nothing is ever written back; no
# news or update checks (there is no network).
LAB_SETTINGS: dict[str, dict[str, Any]] = {
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/apputils-extension/notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


def find_chromium() -> str | None:
    """Return the Chromium executable to drive, or None when there is none.

    CHROMIUM (a path or a command name) wins over the `chromium` on PATH;
    Playwright's own browser downloads are never used.

    For example, on Debian with the chromium package installed it returns
    ``'/usr/bin/chromium'``.
    """
    wanted = os.environ.get("CHROMIUM", "").strip()
    if wanted:
        return shutil.which(wanted) or (wanted if Path(wanted).is_file() else None)
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _ephemeral_low() -> int:
    """The first port of the range the OS picks from when a program binds port 0."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 49152  # the IANA range, which macOS and Windows use


def free_port() -> int:
    """A free loopback port for a test's server, which no other program is about to take.

    A server must be told its port before it binds it. A port the OS hands out for
    port 0 is free now but can be handed to anyone else (a gloo connection of lesson 23,
    say) before the server binds it; a port below that range is never handed out. Each
    test worker (PYTEST_XDIST_WORKER gw0, gw1, ...) searches a block of its own there, so
    two workers never choose the same one, and a worker's servers start one at a time."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    block = 200
    start = max(1024, _ephemeral_low() - 8000) + block * (int(worker or 0) % 40)
    for port in range(start, start + block):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # in use (or just released and waiting): the next one
                continue
            return port
    raise RuntimeError(f"no free loopback port in {start}-{start + block - 1}")


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------


class LabServer:
    """A `jupyter lab` on 127.0.0.1 with a token and no user settings.

    Everything Jupyter reads or writes for the user (config, data, runtime,
    lab settings and workspaces, IPython profile, matplotlib config) lives in
    a temporary folder, so a developer's own settings cannot change what the
    test sees, and the test cannot change theirs.

    Usage (it starts a real server, so this is not run as a doctest)::

        with LabServer(Path("/tmp/root")) as server:
            server.api("GET", "status")["kernels"]   # 0
    """

    def __init__(self, root_dir: Path) -> None:
        self.root_dir = Path(root_dir)
        self.port = free_port()
        self.token = os.urandom(16).hex()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._home = Path(tempfile.mkdtemp(prefix="bl-lab-home-"))
        self.log_path = self._home / "server.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: Any = None
        self._shutting: list[threading.Thread] = []

    def _environment(self) -> dict[str, str]:
        home = self._home
        env = dict(os.environ)
        settings = home / "config" / "lab" / "user-settings"
        env.update(
            JUPYTER_CONFIG_DIR=str(home / "config"),
            JUPYTER_DATA_DIR=str(home / "data"),
            JUPYTER_RUNTIME_DIR=str(home / "runtime"),
            JUPYTERLAB_SETTINGS_DIR=str(settings),
            JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
            IPYTHONDIR=str(home / "ipython"),
            MPLCONFIGDIR=str(home / "matplotlib"),
            # The inline backend draws the PNGs the learner sees; a backend
            # forced for headless unit tests (Agg) must not leak in.
            MPLBACKEND="module://matplotlib_inline.backend_inline",
            PYTHONUNBUFFERED="1",
        )
        # The kernel must be this environment's Python, even when the venv
        # is not "activated" in the calling shell.
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        for key in ("JUPYTER_PATH", "JUPYTER_PREFER_ENV_PATH", "JPY_SESSION_NAME"):
            env.pop(key, None)
        for plugin, values in LAB_SETTINGS.items():
            path = settings / f"{plugin}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values), encoding="utf-8")
        return env

    def start(self) -> None:
        """Launch the server and wait until /api/status answers with the token."""
        cmd = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--port-retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root_dir}",
            # window.jupyterapp lets the checker read the notebook model
            # (output types, execution counts) instead of guessing from CSS.
            "--LabApp.expose_app_in_browser=True",
            "--ServerApp.terminals_enabled=False",
            # Kernels on Unix sockets, as everywhere in the suite (tests/conftest.py).
            "--KernelManager.transport=ipc",
            # A notebook's kernel is shut down once its checks are done: stopped at once,
            # not left to exit on its own (about a second of CPU with torch loaded).
            "--KernelManager.shutdown_wait_time=0",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # CI containers run as root
        self._log_file = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        # A new session makes the server the leader of its own process group,
        # so stop() can take the kernels it started down with it.
        self._proc = subprocess.Popen(
            cmd,
            cwd=self.root_dir,
            env=self._environment(),
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"jupyter lab exited with code {self._proc.returncode}; log:\n{self.log_tail()}"
                )
            try:
                self.api("GET", "status")
                return
            except (OSError, urllib.error.URLError):
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(
            f"jupyter lab did not answer /api/status within {SERVER_START_TIMEOUT:.0f}s; "
            f"log:\n{self.log_tail()}"
        )

    def api(self, method: str, path: str, body: Any = None, timeout: float = 10) -> Any:
        """Call the REST API with the token (and `body` as JSON); return the decoded JSON
        (or None)."""
        headers = {"Authorization": f"token {self.token}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(
            f"{self.base_url}/api/{path}", data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer = response.read()
        return json.loads(answer) if answer else None

    def start_session(self, path: str) -> None:
        """Start the session of the notebook `path` with the kernel its metadata names, as
        JupyterLab does when it opens the notebook (the same request). The server answers
        once the kernel's process is launched; the kernel then starts up while the page
        loads and draws the notebook, which JupyterLab gives the session's kernel (it
        reuses the session of a notebook's path). If the request fails, JupyterLab starts
        the kernel itself."""
        try:
            book = nbformat.read(self.root_dir / path, as_version=4)
            kernel = book.metadata.get("kernelspec", {}).get("name") or "python3"
            self.api("POST", "sessions", {"path": path, "type": "notebook",
                                          "name": Path(path).name, "kernel": {"name": kernel}},
                     timeout=SERVER_START_TIMEOUT)
        except Exception:  # noqa: BLE001 - any failure here leaves the start to JupyterLab
            pass

    def lab_url(self) -> str:
        """URL of JupyterLab in a fresh workspace: `?reset` discards a saved one, so no
        tab (and no kernel) of an earlier page is restored."""
        return f"{self.base_url}/lab?reset&token={self.token}"

    def shutdown_sessions(self, path: str | None = None) -> None:
        """Shut down the kernels of every session (or only those on `path`)."""
        for session in self.api("GET", "sessions") or []:
            if path is None or session.get("path") == path:
                try:
                    self.api("DELETE", f"sessions/{session['id']}")
                except urllib.error.HTTPError:
                    pass  # already gone

    def shutdown_sessions_soon(self, path: str) -> None:
        """Shut down the kernels of the sessions on `path` while the caller goes on: the
        server answers a DELETE once the kernel has exited, which takes a while and need
        not hold up the next notebook. `stop` waits for what is still going."""
        def shut() -> None:
            try:
                self.shutdown_sessions(path)
            except OSError:
                pass  # the server is going down: `stop` ends every kernel anyway

        self._shutting = [t for t in self._shutting if t.is_alive()]
        thread = threading.Thread(target=shut, name=f"shut down {path}", daemon=True)
        thread.start()
        self._shutting.append(thread)

    def log_tail(self, lines: int = 60) -> str:
        """The last lines of the server log (kernels write here too)."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no server log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the server and every kernel it started; always safe to call."""
        for thread in self._shutting:
            thread.join(timeout=15)
        self._shutting = []
        proc = self._proc
        if proc is not None and proc.poll() is None:
            # Ask politely first (the server shuts its kernels down), then
            # kill the whole process group so no kernel outlives the test.
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=15)
        self._proc = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def cleanup(self) -> None:
        """Stop, then remove the temporary home (config, data, runtime)."""
        self.stop()
        shutil.rmtree(self._home, ignore_errors=True)

    def __enter__(self) -> LabServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


# --------------------------------------------------------------------------
# What the notebook on disk promises
# --------------------------------------------------------------------------

# A call of draw_graph, but not its definition (a fixture defines its own).
_DRAW_GRAPH_CALL = re.compile(r"(?<!def )\bdraw_graph\s*\(")
# Cells that build a widget with ipywidgets directly (class names are
# capitalised: widgets.IntSlider(...)).
_IPYWIDGETS_CALL = re.compile(r"\b(?:widgets|ipywidgets)\.[A-Z]\w*\s*\(|\binteract(?:ive)?\s*\(")
_WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


@dataclass(frozen=True)
class CellPlan:
    """What one cell of the notebook on disk should look like in the browser."""

    index: int
    cell_type: str
    source: str
    tags: tuple[str, ...]
    expects_widget: bool
    expects_graph_image: bool
    stores_widget_view: bool = False

    @property
    def runs(self) -> bool:
        """JupyterLab gives an execution count only to non-empty code cells."""
        return self.cell_type == "code" and bool(self.source.strip())

    @property
    def may_raise(self) -> bool:
        return "raises-exception" in self.tags


def _code_only(source: str) -> str:
    """Drop comment lines so a mention in a comment does not count as a call."""
    return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))


def plan_notebook(path: Path) -> list[CellPlan]:
    """Read the notebook on disk and decide what each cell must show.

    A widget is expected where the stored output holds a widget view or the
    source builds an ipywidgets widget; a graph image where the source calls
    draw_graph. Cells whose live output turns out to hold a widget view (a
    bl.widgets explorer in a notebook stored without outputs) are added
    after the run: a name match on `bl.widgets.` alone would also catch its
    plain functions, such as train_linear.
    """
    book = nbformat.read(path, as_version=4)
    plans = []
    for index, cell in enumerate(book.cells):
        source = cell.source
        code = _code_only(source) if cell.cell_type == "code" else ""
        stored_widget = any(
            _WIDGET_MIME in output.get("data", {}) for output in cell.get("outputs", [])
        )
        plans.append(
            CellPlan(
                index=index,
                cell_type=cell.cell_type,
                source=source,
                tags=tuple(cell.metadata.get("tags", ())),
                expects_widget=cell.cell_type == "code"
                and (stored_widget or bool(_IPYWIDGETS_CALL.search(code))),
                expects_graph_image=bool(_DRAW_GRAPH_CALL.search(code)),
                stores_widget_view=stored_widget,
            )
        )
    return plans


# --------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------


@dataclass
class NotebookReport:
    """Everything the checker saw for one notebook; `ok` when nothing is wrong."""

    name: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    sliders_moved: int = 0
    graph_images: int = 0
    seconds: float = 0.0
    artifacts: Path | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def problem(self, text: str) -> None:
        self.problems.append(text)

    def describe(self) -> str:
        """A multi-line summary for an assertion message."""
        lines = [f"{self.name}: {len(self.problems)} problem(s) seen in the browser"]
        lines += [f"  - {p}" for p in self.problems]
        if self.artifacts is not None:
            lines.append(f"  screenshots, page HTML and console log: {self.artifacts.resolve()}")
        return "\n".join(lines)


# --------------------------------------------------------------------------
# JavaScript run in the page
# --------------------------------------------------------------------------

# The notebook panel for `path`. With a log console docked, the current
# widget is not necessarily the notebook, so look it up by path.
_PANEL_JS = """
(path) => {
  const app = window.jupyterapp;
  if (!app) { return null; }
  for (const w of app.shell.widgets('main')) {
    if (w.context && w.context.path === path && w.content && w.content.widgets) { return w; }
  }
  return null;
}
"""

# The start of a function of a notebook's path with its `panel` and `kernel` bound; it
# returns null when the notebook is not on the page.
_NOTEBOOK_JS = (
    "(path) => { const findPanel = "
    + _PANEL_JS
    + """;
  const panel = findPanel(path);
  if (!panel) { return null; }
  const kernel = panel.sessionContext.session ? panel.sessionContext.session.kernel : null;
"""
)

_STATE_JS = (
    _NOTEBOOK_JS
    + """  const cells = panel.content.widgets.map((cell, i) => {
    const m = cell.model;
    const outputs = [];
    if (m.type === 'code') {
      for (let k = 0; k < m.outputs.length; k++) {
        const o = m.outputs.get(k).toJSON();
        outputs.push({
          type: o.output_type,
          widget: !!(o.data && o.data['application/vnd.jupyter.widget-view+json']),
          ename: o.ename || null,
          evalue: o.evalue || null,
        });
      }
    }
    const prompt = cell.node.querySelector('.jp-InputArea-prompt');
    return {
      index: i,
      type: m.type,
      count: m.type === 'code' ? (m.executionCount ?? null) : null,
      prompt: prompt ? prompt.textContent.trim() : '',
      outputs,
    };
  });
  return {kernel: kernel ? kernel.status : 'none', cells};
}"""
)

# A fingerprint of what a widget cell shows, minus the sliders themselves
# (their readout changes with the value and would always "differ").
_CELL_VIEW_JS = (
    "([path, index]) => { const findPanel = "
    + _PANEL_JS
    + """;
  const panel = findPanel(path);
  const cell = panel.content.widgets[index];
  const area = cell.node.querySelector('.jp-Cell-outputArea');
  if (!area) { return {widgets: 0, sliders: 0, text: '', images: [], tracebacks: [], broken: []}; }
  const clone = area.cloneNode(true);
  clone.querySelectorAll('.widget-slider, .widget-readout').forEach((n) => n.remove());
  const images = Array.from(area.querySelectorAll('img')).map((img) => ({
    src: img.src.length + ':' + img.src.slice(-64),
    width: img.naturalWidth,
    visible: img.getBoundingClientRect().width > 0,
  }));
  // Errors raised inside a widget's Output context are rendered there as
  // stderr text; JupyterLab draws an error output and a stderr stream with
  // the same markup, so recognise a traceback by its text.
  const tracebacks = [];
  area.querySelectorAll('.widget-output .jp-OutputArea-output').forEach((out) => {
    const text = out.textContent || '';
    const tail = text.split('\\n').slice(-3).join('\\n');
    if (/Traceback \\(most recent call last\\)/.test(text)
        || /^\\s*[A-Za-z_][\\w.]*(Error|Exception)\\b.*$/m.test(tail)) {
      tracebacks.push(text.trim().split('\\n').slice(-1)[0]);
    }
  });
  const broken = [];
  const whole = area.textContent || '';
  for (const phrase of ['Error displaying widget', 'Error rendering output item',
                        'Loading widget...', 'Failed to load model class']) {
    if (whole.includes(phrase)) { broken.push(phrase); }
  }
  return {
    widgets: area.querySelectorAll('.jupyter-widgets').length,
    sliders: area.querySelectorAll('.widget-slider .noUi-handle').length,
    text: clone.textContent,
    images,
    tracebacks,
    broken,
  };
}"""
)

# Entries of the log console at error level: where JupyterLab puts output of
# kernel messages that belong to no cell, e.g. an exception raised by a
# widget callback outside any Output widget.
_LOG_ERRORS_JS = """
() => Array.from(document.querySelectorAll('.jp-LogConsolePanel [data-log-level]'))
  .filter((p) => ['error', 'critical'].includes(p.dataset.logLevel))
  .map((p) => {
    const out = p.parentElement.querySelector('.jp-OutputArea-output');
    const lines = (out ? out.textContent : '').trim().split('\\n');
    return lines[lines.length - 1];
  })
"""

_LOG_COUNT_JS = """
() => {
  const item = document.querySelector('.jp-LogConsoleStatusItem');
  const n = item ? parseInt(item.textContent.trim(), 10) : NaN;
  return Number.isNaN(n) ? 0 : n;
}
"""


# --------------------------------------------------------------------------
# The checker
# --------------------------------------------------------------------------


def wait_for_run(page: Any, path: str, plans: Sequence[CellPlan], timeout: float) -> dict:
    """Wait until every cell that will run has run and the kernel is idle.

    JupyterLab stops "Run All" at the first unexpected error, and the cells
    after it never get a count; so "done" is either every count present, or
    an idle kernel with no queued cell ("[*]") that stays so for a while: a
    second once the run was seen under way (cells queued; when JupyterLab stops
    it, it takes the "[*]" off every cell left at once), 4 s if it never was.
    The run's progress is read from execution counts and prompts alone, five
    times a second; the whole state (`notebook_state`) once at the end.
    """
    expected = [p.index for p in plans if p.runs]
    deadline = time.monotonic() + timeout
    settled_since: float | None = None
    under_way = False
    while time.monotonic() < deadline:
        progress = page.evaluate(_PROGRESS_JS, path) or {}
        cells = progress.get("cells", [])
        idle = progress.get("kernel") == "idle"
        queued = any(c["queued"] for c in cells)
        under_way = under_way or queued
        counted = len(cells) == len(plans) and all(cells[i]["count"] is not None for i in expected)
        if idle and not queued and counted:
            return notebook_state(page, path)
        if idle and not queued:
            settled_since = settled_since or time.monotonic()
            if time.monotonic() - settled_since > (1 if under_way else 4):
                return notebook_state(page, path)
        else:
            settled_since = None
        time.sleep(0.2)
    state = notebook_state(page, path)
    state["timed_out"] = True
    return state


def _wait_kernel_idle(page: Any, path: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if notebook_state(page, path).get("kernel") == "idle":
            return
        time.sleep(0.3)


# --------------------------------------------------------------------------
# One cell at a time: read, edit and run it the way a learner does
# --------------------------------------------------------------------------

# The progress of a run, read cheaply (no outputs): the kernel's status and, per cell,
# its execution count and whether its prompt shows it queued or running ("[*]").
_PROGRESS_JS = (
    _NOTEBOOK_JS
    + """  const cells = panel.content.widgets.map((cell) => {
    const m = cell.model;
    const prompt = cell.node.querySelector('.jp-InputArea-prompt');
    return {
      count: m.type === 'code' ? (m.executionCount ?? null) : null,
      queued: !!prompt && prompt.textContent.trim().startsWith('[*]'),
    };
  });
  return {kernel: kernel ? kernel.status : 'none', cells};
}"""
)


# Prefix of a function of [path, index] with `app`, `panel` and `cell` bound;
# it returns null when the notebook or the cell is not on the page.
_CELL_PREFIX_JS = (
    "([path, index]) => { const findPanel = "
    + _PANEL_JS
    + """;
  const app = window.jupyterapp;
  const panel = findPanel(path);
  const cell = panel ? panel.content.widgets[index] : undefined;
  if (!cell) { return null; }
"""
)

_SOURCE_JS = _CELL_PREFIX_JS + "  return cell.model.sharedModel.getSource();\n}"

# What the editor on the page shows (CodeMirror draws one .cm-line per line).
_EDITOR_TEXT_JS = (
    _CELL_PREFIX_JS
    + """  return Array.from(cell.node.querySelectorAll('.jp-Cell-inputArea .cm-line'))
    .map((line) => line.textContent).join('\\n');
}"""
)

# What the output area on the page shows, tracebacks included.
_OUTPUT_TEXT_JS = (
    _CELL_PREFIX_JS
    + """  const area = cell.node.querySelector('.jp-Cell-outputArea');
  return area ? (area.innerText || area.textContent || '') : '';
}"""
)

# Whether the page shows every output of the cell's model: as many output elements as
# outputs, each with text or a picture in it.
_DRAWN_JS = (
    _CELL_PREFIX_JS
    + """  const outputs = cell.model.outputs ? cell.model.outputs.length : 0;
  const area = cell.node.querySelector('.jp-Cell-outputArea');
  if (!area) { return outputs === 0; }
  const shown = Array.from(area.children).filter(
    (child) => child.classList.contains('jp-OutputArea-child'));
  return shown.length === outputs && shown.every((child) => {
    const out = child.querySelector('.jp-OutputArea-output');
    return !!out && ((out.textContent || '').length > 0
                     || !!out.querySelector('img, svg, canvas, iframe, video'));
  });
}"""
)

# Replace the cell's whole text through the shared model, the same document
# the editor shows and that typing changes.
_SET_SOURCE_JS = (
    "([path, index, text]) => { const findPanel = "
    + _PANEL_JS
    + """;
  const panel = findPanel(path);
  const cell = panel ? panel.content.widgets[index] : undefined;
  if (!cell) { return false; }
  cell.model.sharedModel.setSource(text);
  return true;
}"""
)

# Make the cell the only selected, active one of the current notebook, then
# Run > Run Selected Cell (notebook:run-cell runs it and stays on it).
_RUN_CELL_JS = (
    _CELL_PREFIX_JS
    + """  if (!app.commands.hasCommand('notebook:run-cell')) {
    return 'there is no notebook:run-cell command';
  }
  app.shell.activateById(panel.id);
  const notebook = panel.content;
  notebook.mode = 'command';
  notebook.activeCellIndex = index;
  notebook.deselectAll();
  if (notebook.activeCell !== cell) { return 'could not make the cell active'; }
  // Not awaited: the caller watches the execution count instead.
  app.commands.execute('notebook:run-cell');
  return 'ok';
}"""
)


# Scroll the notebook so that cell `index` is at the top of its panel, as a learner
# reading the guess cell sees it, then return what every cell shows inside the
# panel's visible part: rendered markdown blocks, code lines and outputs (each piece
# only if it is at least partly on the screen).
_SCREEN_JS = (
    "async ([path, index]) => { const findPanel = "
    + _PANEL_JS
    + """;
  const panel = findPanel(path);
  if (!panel) { return null; }
  const notebook = panel.content;
  await notebook.scrollToItem(index, 'start', 0);
  const pause = () => new Promise((done) => setTimeout(done, 100));
  const frame = (notebook.outerNode || notebook.node).getBoundingClientRect();
  const top = Math.max(frame.top, 0);
  const bottom = Math.min(frame.bottom, window.innerHeight);
  const seen = (el) => { const r = el.getBoundingClientRect();
    return r.height > 0 && r.bottom > top + 1 && r.top < bottom - 1; };
  // The notebook draws the cells that scroll into view a moment later: wait until
  // every markdown cell on the screen shows its rendered text (at most 10 s).
  const drawn = () => notebook.widgets.every((cell) => cell.model.type !== 'markdown'
    || !cell.node.isConnected || !seen(cell.node) || !cell.model.sharedModel.getSource().trim()
    || (cell.node.querySelector('.jp-RenderedMarkdown') || {}).innerText);
  for (let k = 0; k < 100 && !drawn(); k++) { await pause(); }
  await pause();
  const shown = [];
  notebook.widgets.forEach((cell, i) => {
    if (!cell.node.isConnected || !seen(cell.node)) { return; }
    const pieces = [];
    const blocks = cell.node.querySelectorAll(
      '.jp-RenderedMarkdown > *, .jp-Cell-inputArea .cm-line, .jp-OutputArea-output');
    blocks.forEach((el) => {
      if (seen(el)) { pieces.push(el.innerText || el.textContent || ''); }
    });
    shown.push({index: i, type: cell.model.type, text: pieces.join('\\n')});
  });
  return shown;
}"""
)


def screen_at(page: Any, path: str, index: int) -> list[dict]:
    """Scroll cell `index` (0-based) to the top of the notebook and read the screen.

    Returns, per cell at least partly visible, ``{"index", "type", "text"}`` where
    text holds only what lies inside the visible area (markdown as rendered).
    """
    return _cell_call(page, _SCREEN_JS, path, index)


def notebook_state(page: Any, path: str) -> dict:
    """The kernel's status and, per cell, its type, execution count, prompt and outputs.

    Read from the notebook model JupyterLab renders, e.g.
    ``{"kernel": "idle", "cells": [{"index": 0, "type": "code", "count": 1,
    "prompt": "[1]:", "outputs": [{"type": "error", "ename": ..., ...}]}, ...]}``;
    ``{}`` when the notebook is not open in the page.
    """
    return page.evaluate(_STATE_JS, path) or {}


def _cell_call(page: Any, script: str, path: str, index: int) -> Any:
    result = page.evaluate(script, [path, index])
    if result is None:
        raise LookupError(f"cell {index + 1} of {path} is not on the page")
    return result


def cell_source(page: Any, path: str, index: int) -> str:
    """The text of cell `index` (0-based) as the notebook model holds it."""
    return _cell_call(page, _SOURCE_JS, path, index)


def cell_editor_text(page: Any, path: str, index: int) -> str:
    """The text the cell's editor shows on the page, lines joined by newlines."""
    return _cell_call(page, _EDITOR_TEXT_JS, path, index)


def cell_output_text(page: Any, path: str, index: int) -> str:
    """The text the cell's output area shows on the page ('' without outputs)."""
    return _cell_call(page, _OUTPUT_TEXT_JS, path, index)


def set_cell_source(page: Any, path: str, index: int, text: str) -> None:
    """Replace the whole text of cell `index` in the open notebook, as an edit would."""
    if not page.evaluate(_SET_SOURCE_JS, [path, index, text]):
        raise LookupError(f"cell {index + 1} of {path} is not on the page")


def run_cell(page: Any, path: str, index: int, timeout: float = CELL_RUN_TIMEOUT) -> dict:
    """Run cell `index` alone and return its state once the kernel is done with it.

    The cell is made the active one and run with JupyterLab's
    notebook:run-cell command (what Shift+Enter does, without moving on).
    Done means: a new execution count, no "[*]" prompt, the kernel idle, and
    the outputs drawn on the page.
    Returns the cell's entry of :func:`notebook_state`; raises TimeoutError
    when the cell has not finished within `timeout` seconds.
    """
    before = notebook_state(page, path).get("cells", [])
    if index >= len(before):
        raise LookupError(f"cell {index + 1} of {path} is not on the page")
    old_count = before[index]["count"]
    outcome = _cell_call(page, _RUN_CELL_JS, path, index)
    if outcome != "ok":
        raise RuntimeError(f"cannot run cell {index + 1} of {path}: {outcome}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.05)
        progress = page.evaluate(_PROGRESS_JS, path) or {}
        cell = progress.get("cells", [])[index]
        counted = cell["count"] is not None and cell["count"] != old_count
        if counted and progress.get("kernel") == "idle" and not cell["queued"]:
            _wait_drawn(page, path, index)
            return notebook_state(page, path)["cells"][index]
    raise TimeoutError(f"cell {index + 1} did not finish running within {timeout:.0f}s")


def _wait_drawn(page: Any, path: str, index: int, timeout: float = 2.0) -> None:
    """Wait until the page draws every output the cell's model holds (each output's
    element in place and filled), or `timeout` seconds (an output that draws as
    nothing at all is read as it is then). Once the cell has its new count, no "[*]"
    and an idle kernel, the model holds every output of the run; the page draws them
    a moment later."""
    deadline = time.monotonic() + timeout * _SCALE
    while not _cell_call(page, _DRAWN_JS, path, index) and time.monotonic() < deadline:
        time.sleep(0.05)


def _cell_view(page: Any, path: str, index: int) -> dict:
    return page.evaluate(_CELL_VIEW_JS, [path, index])


def _move_slider(page: Any, cell: Any) -> str:
    """Move the first slider of a cell one step with the keyboard.

    Arrow keys on the focused handle are what a keyboard user does, and unlike
    a drag they do not depend on the slider's pixel width.
    """
    handle = cell.locator(".widget-slider .noUi-handle").first
    handle.scroll_into_view_if_needed()
    now = handle.get_attribute("aria-valuenow")
    top = handle.get_attribute("aria-valuemax")
    key = "ArrowLeft" if now is not None and now == top else "ArrowRight"
    handle.focus()
    page.keyboard.press(key)
    return f"{now} -> {key}"


def _check_widget_cell(
    page: Any, path: str, plan: CellPlan, report: NotebookReport, slider_timeout: float
) -> None:
    cell = page.locator(".jp-Notebook .jp-Cell").nth(plan.index)
    label = f"cell {plan.index + 1}"
    deadline = time.monotonic() + WIDGET_RENDER_TIMEOUT
    view = _cell_view(page, path, plan.index)
    # Widget views attach after the kernel replies; give them time to appear.
    while view["widgets"] == 0 and not view["broken"] and time.monotonic() < deadline:
        time.sleep(0.5)
        view = _cell_view(page, path, plan.index)
    if view["broken"]:
        report.problem(f"{label}: the widget failed to display ({', '.join(view['broken'])})")
        return
    if view["widgets"] == 0:
        report.problem(f"{label}: expected a widget, none rendered")
        return
    if not cell.locator(".jupyter-widgets").first.is_visible():
        report.problem(f"{label}: the widget is in the page but not visible")
        return
    if view["sliders"] == 0:
        report.notes.append(f"{label}: widget without a slider, nothing to move")
        return
    if not cell.locator(".widget-slider").first.is_visible():
        report.problem(f"{label}: the slider is not visible")
        return
    # The first render may still be arriving (the Output widget fills after
    # the cell's reply); wait for the view to stop changing before moving.
    settle_deadline = time.monotonic() + 10
    while time.monotonic() < settle_deadline:
        time.sleep(0.5)
        again = _cell_view(page, path, plan.index)
        if (again["text"], again["images"]) == (view["text"], view["images"]):
            break
        view = again
    before = view
    log_before = page.evaluate(_LOG_COUNT_JS)
    move = _move_slider(page, cell)
    deadline = time.monotonic() + slider_timeout
    after = before
    changed = False
    while time.monotonic() < deadline:
        time.sleep(0.5)
        after = _cell_view(page, path, plan.index)
        changed = (after["text"], after["images"]) != (before["text"], before["images"])
        # Stop early on a visible failure: no point waiting out the timeout.
        if after["tracebacks"] or page.evaluate(_LOG_COUNT_JS) > log_before:
            break
        if changed:
            break
    _wait_kernel_idle(page, path, 30)
    time.sleep(1.0)  # let the last display messages of the callback land
    after = _cell_view(page, path, plan.index)
    changed = (after["text"], after["images"]) != (before["text"], before["images"])
    report.sliders_moved += 1
    if not changed:
        report.problem(
            f"{label}: moving the slider ({move}) did not change what the widget shows "
            f"within {slider_timeout:.0f}s"
        )
    for text in after["tracebacks"]:
        report.problem(f"{label}: after moving the slider the widget shows an error: {text}")
    # The backward stepper's slider and its text must name the same step.
    step_text = re.search(r"step (\d+) \(of 0-\d+\)", after["text"])
    if step_text is not None:
        value = cell.locator(".widget-slider .noUi-handle").first.get_attribute("aria-valuenow")
        if value is not None and int(float(value)) != int(step_text.group(1)):
            report.problem(
                f"{label}: the slider says step {value} but the text says step "
                f"{step_text.group(1)}"
            )
        else:
            report.notes.append(f"{label}: slider and text agree on step {step_text.group(1)}")
    broken_images = [img for img in after["images"] if img["width"] == 0]
    if broken_images:
        report.problem(f"{label}: {len(broken_images)} image(s) in the widget failed to load")


def _check_graph_cell(page: Any, path: str, plan: CellPlan, report: NotebookReport) -> None:
    view = _cell_view(page, path, plan.index)
    shown = [img for img in view["images"] if img["width"] > 0 and img["visible"]]
    if shown:
        report.graph_images += 1
    else:
        report.problem(
            f"cell {plan.index + 1}: calls draw_graph but shows no image "
            f"({len(view['images'])} <img>, none loaded and visible)"
        )


def check_notebook(
    lab: LabWindow,
    path: str,
    disk_path: Path,
    *,
    artifacts: Path | None = None,
    slider_timeout: float = SLIDER_RESPONSE_TIMEOUT,
) -> NotebookReport:
    """Open `path` in JupyterLab, run all cells, and report what is wrong.

    `path` is relative to the server's root; `disk_path` is the same notebook
    on disk (its tags and sources say what to expect). On failure, and when
    `artifacts` is given, screenshots, the page HTML and the console log are
    written there. The notebook's kernel is shut down before returning, and
    nothing is saved back to disk.
    """
    report = NotebookReport(name=Path(path).stem)
    plans = plan_notebook(disk_path)
    with notebook_page(lab, path, report, plans=plans, artifacts=artifacts) as page:
        _run_and_inspect(page, lab.server, path, plans, report, slider_timeout)
    return report


# JupyterLab up and its layout restored (a notebook opened earlier could be closed again
# by the restorer).
_APP_READY_JS = """
() => {
  const app = window.jupyterapp;
  if (!app) { return false; }
  if (!window.__blRestored) {
    window.__blRestored = 'waiting';
    app.restored.then(() => { window.__blRestored = 'yes'; });
  }
  return window.__blRestored === 'yes';
}
"""

# Close every panel of the main area (notebooks, log consoles) unsaved, and say how many
# notebooks and dialogs are still on the page: none, or the next test could trip on them.
_CLOSE_ALL_JS = """
() => {
  const app = window.jupyterapp;
  for (const w of Array.from(app.shell.widgets('main'))) {
    if (w.context) { w.context.model.dirty = false; }
    w.dispose();
  }
  return document.querySelectorAll('.jp-Notebook, .jp-Dialog').length;
}
"""


class LabWindow:
    """One browser page with JupyterLab loaded, for every notebook a test process opens.

    Loading the app takes longer than running most lessons, so it is loaded once and
    each notebook is opened in it, then closed unsaved. A notebook that leaves a problem,
    a dialog or a panel behind costs the page: the next notebook gets a freshly loaded
    app, so one failure never spills into the next test.

    Usage (it drives a real browser, so this is not run as a doctest)::

        lab = LabWindow(context, server)
        with notebook_page(lab, "lessons/01-computational-graph.ipynb", report) as page:
            open_notebook(page, "lessons/01-computational-graph.ipynb")
    """

    def __init__(self, context: Any, server: LabServer) -> None:
        self.context = context
        self.server = server
        self._page: Any = None
        self.loads = 0  # how many times the app was loaded

    def page(self) -> Any:
        """The page, with the app loaded and restored (loading it when there is none)."""
        if self._page is None or self._page.is_closed():
            page = self.context.new_page()
            try:
                page.goto(self.server.lab_url(), wait_until="domcontentloaded")
                page.wait_for_function(_APP_READY_JS, timeout=120_000 * _SCALE, polling=250)
            except BaseException:
                page.close()
                raise
            self._page = page
            self.loads += 1
        return self._page

    def close_all(self) -> int:
        """Close every notebook and panel, unsaved; how many notebooks or dialogs remain."""
        return self._page.evaluate(_CLOSE_ALL_JS)

    def discard(self) -> None:
        """Close the page; the next `page()` loads the app afresh."""
        if self._page is not None and not self._page.is_closed():
            self._page.close()
        self._page = None


@contextmanager
def notebook_page(
    lab: LabWindow,
    path: str,
    report: NotebookReport,
    *,
    plans: Sequence[CellPlan] = (),
    artifacts: Path | None = None,
    viewport: dict[str, int] = VIEWPORT,
) -> Iterator[Any]:
    """The lab's page, sized to `viewport`, for the notebook `path`; cleaned up and
    recorded on leaving.

    The page's console goes into `report.console`. An exception inside the
    block becomes a problem in `report` instead of propagating (a failed
    `assert` by its message alone), so the caller ends with
    `assert report.ok, report.describe()`. On leaving, when the report has
    problems and `artifacts` is given, screenshots, the page HTML and the
    logs are written there; then the notebook is closed, with nothing saved
    back to disk, and its kernel shut down.
    """
    started = time.monotonic()
    page = None

    def console(msg: Any) -> None:
        report.console.append(f"[{msg.type}] {msg.text}")

    def error(err: Any) -> None:
        report.console.append(f"[pageerror] {err}")

    try:
        page = lab.page()
        page.set_viewport_size(viewport)
        page.on("console", console)
        page.on("pageerror", error)
        yield page
    except AssertionError as exc:
        report.problem(str(exc).strip() or "an assertion failed")
    except Exception as exc:  # noqa: BLE001 - a crash of the checker is a finding too
        report.problem(f"the browser check itself failed: {type(exc).__name__}: {exc}")
    finally:
        report.seconds += time.monotonic() - started
        _leave(lab, page, path, report, plans, artifacts, console, error)


def _leave(lab: LabWindow, page: Any, path: str, report: NotebookReport,
           plans: Sequence[CellPlan], artifacts: Path | None, *listeners: Any) -> None:
    # BACKPROPLAB_BROWSER_SAVE=always keeps the pictures of a passing run
    # too, to look at what the learner sees without breaking anything.
    keep = not report.ok or os.environ.get("BACKPROPLAB_BROWSER_SAVE") == "always"
    if page is not None and keep and artifacts is not None:
        save_artifacts(page, lab.server, path, list(plans), report, artifacts)
    left = None
    try:
        if page is not None:
            for event, listener in zip(("console", "pageerror"), listeners, strict=True):
                page.remove_listener(event, listener)
            left = lab.close_all()
    except Exception:  # noqa: BLE001 - a page that cannot close its panels is discarded
        left = None
    finally:
        if not report.ok or left != 0:
            lab.discard()
        lab.server.shutdown_sessions_soon(path)


# The notebook `path` is open, its cells drawn; with `kernel`, its kernel idle too.
_OPENED_JS = (
    "([path, kernel]) => { const findPanel = "
    + _PANEL_JS
    + """;
  const p = findPanel(path);
  if (!p || !p.context.isReady || !p.content.node.querySelector('.jp-Cell')) { return false; }
  if (!kernel) { return !!p.content.node.querySelector('.jp-RenderedMarkdown'); }
  const s = p.sessionContext.session;
  return !!(s && s.kernel && s.kernel.status === 'idle');
}"""
)


def open_notebook(page: Any, path: str, *, kernel: bool = True,
                  server: LabServer | None = None) -> None:
    """Open `path` in the page's JupyterLab, as a double click in the file browser does,
    and wait until its kernel is idle (with ``kernel=False``, as Open With > Notebook (no
    kernel) does, and only until its cells are drawn: for reading, not running). Given
    the `server`, the notebook's session is started first (`LabServer.start_session`), so
    that its kernel starts while the notebook loads and draws."""
    if kernel and server is not None:
        server.start_session(path)
    page.evaluate(
        "([path, kernel]) => { window.jupyterapp.commands.execute('docmanager:open', "
        "{path, factory: 'Notebook', kernelPreference: {shouldStart: kernel, "
        "shouldReuse: kernel}}); }",
        [path, kernel],
    )
    timeout = (120_000 if kernel else 60_000) * _SCALE
    page.wait_for_function(_OPENED_JS, arg=[path, kernel], timeout=timeout, polling=100)


def open_folds(page: Any) -> None:
    """Click every "N cells hidden" button of the notebook (an "After the reveal" fold)."""
    buttons = page.locator(".jp-Notebook .jp-showHiddenCellsButton")
    for _ in range(buttons.count()):
        before = buttons.count()
        if not before:
            return
        buttons.first.click()
        page.wait_for_function(
            "(n) => document.querySelectorAll('.jp-Notebook .jp-showHiddenCellsButton').length < n",
            arg=before, timeout=10_000 * _SCALE)


def run_all_cells(page: Any) -> None:
    """Run > Run All Cells, through the menu as a learner would."""
    page.locator("#jp-MainMenu .lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-item[data-command='runmenu:run-all']").click()


def _run_and_inspect(
    page: Any,
    server: LabServer,
    path: str,
    plans: list[CellPlan],
    report: NotebookReport,
    slider_timeout: float,
) -> None:
    open_notebook(page, path, server=server)
    # Before anything runs, the stored outputs are all a learner sees: a widget
    # saved as a live view would show "Error displaying widget" here, once its
    # renderer has looked for the widget's model (no other output can show it).
    if any(plan.stores_widget_view for plan in plans):
        time.sleep(1.0)
        opened = page.locator(".jp-Notebook").first.inner_text()
        if "Error displaying widget" in opened:
            report.problem("on opening, before running, the page shows 'Error displaying "
                           "widget'")
    run_all_cells(page)
    state = wait_for_run(page, path, plans, NOTEBOOK_RUN_TIMEOUT)
    if state.get("timed_out"):
        report.problem(f"the notebook did not finish running within {NOTEBOOK_RUN_TIMEOUT:.0f}s")
    cells = state.get("cells", [])
    if len(cells) != len(plans):
        report.problem(f"the page shows {len(cells)} cells, the file has {len(plans)}")
        return

    for plan, cell in zip(plans, cells, strict=True):
        label = f"cell {plan.index + 1}"
        if plan.runs and cell["count"] is None:
            report.problem(f"{label} never ran (execution stopped before it?)")
        errors = [o for o in cell["outputs"] if o["type"] == "error"]
        if errors and not plan.may_raise:
            first = errors[0]
            report.problem(f"{label} shows an error: {first['ename']}: {first['evalue']}")
        if plan.may_raise and plan.runs and cell["count"] is not None and not errors:
            report.notes.append(f"{label} is tagged raises-exception but raised nothing")

    # Past every reveal, as a learner goes on: what the folds hold must render too.
    open_folds(page)
    for plan in plans:
        if plan.expects_graph_image:
            _check_graph_cell(page, path, plan, report)
    for plan, cell in zip(plans, cells, strict=True):
        # The kernel said "show a widget here": whether or not the file
        # promised one, the learner must see it render and respond.
        if plan.expects_widget or any(o["widget"] for o in cell["outputs"]):
            _check_widget_cell(page, path, plan, report, slider_timeout)

    # Every picture on the page should have loaded, not only the ones above.
    broken = page.evaluate(
        "() => Array.from(document.querySelectorAll('.jp-Notebook img'))"
        ".filter((img) => img.complete && img.naturalWidth === 0).length"
    )
    if broken:
        report.problem(f"{broken} image(s) in the notebook failed to load")

    # Finally, the log console: exceptions from widget callbacks that ran
    # outside any Output widget end up there and nowhere else.
    if page.evaluate(_LOG_COUNT_JS):
        page.evaluate(
            "() => window.jupyterapp.commands.execute('logconsole:open',"
            " {insertMode: 'split-bottom'})"
        )
        page.wait_for_selector(".jp-LogConsolePanel", timeout=10_000)
        time.sleep(0.5)
        for text in page.evaluate(_LOG_ERRORS_JS):
            report.problem(f"the log console shows an error (a widget callback?): {text}")


def save_artifacts(
    page: Any,
    server: LabServer,
    path: str,
    plans: list[CellPlan],
    report: NotebookReport,
    folder: Path,
) -> None:
    """Write what is needed to see the failure without re-running it."""
    folder.mkdir(parents=True, exist_ok=True)
    report.artifacts = folder
    (folder / "problems.txt").write_text(report.describe() + "\n", encoding="utf-8")
    (folder / "console.log").write_text("\n".join(report.console) + "\n", encoding="utf-8")
    (folder / "server.log").write_text(server.log_tail(400) + "\n", encoding="utf-8")
    try:
        page.screenshot(path=str(folder / "page.png"), full_page=True)
        (folder / "page.html").write_text(page.content(), encoding="utf-8")
        # The notebook scrolls inside its own panel, so a page screenshot shows
        # only part of it; a picture of each cell named in a problem helps.
        wanted = {
            int(m.group(1)) - 1
            for p in report.problems
            for m in [re.match(r"cell (\d+)", p)]
            if m is not None
        }
        cells = page.locator(".jp-Notebook .jp-Cell")
        if report.ok:  # saved on request, to look at the lesson as a learner: every cell
            wanted |= set(range(cells.count()))
        missed = []
        for index in sorted(wanted):
            if index < cells.count():
                try:  # one cell that cannot be pictured must not cost the ones after it
                    cells.nth(index).screenshot(path=str(folder / f"cell-{index + 1:02d}.png"),
                                                timeout=5_000)
                except Exception as exc:  # noqa: BLE001 - named in the file below
                    missed.append(f"cell {index + 1}: {type(exc).__name__}: "
                                  f"{str(exc).splitlines()[0]}")
        if missed:
            (folder / "screenshot-error.txt").write_text("\n".join(missed) + "\n",
                                                         encoding="utf-8")
    except Exception as exc:  # noqa: BLE001 - keep whatever was saved so far
        (folder / "screenshot-error.txt").write_text(repr(exc), encoding="utf-8")
