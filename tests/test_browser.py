"""What a learner sees: every lesson run in JupyterLab in headless Chromium.

nbval compares kernel output; this test looks at the page. For each lesson
it opens the notebook in a real JupyterLab, runs Run > Run All Cells, and
checks that no cell shows an error (cells tagged raises-exception aside),
that widgets render and respond to their slider, and that graph drawings
appear as images. The checker is itself tested on small notebooks in
tests/fixtures/browser/ that are broken on purpose.

One server and one browser serve the whole session; each notebook gets its
own page and its kernel is shut down after it. The server runs on copies of
the notebooks, so the repository's files are never modified.

Needs Debian's `chromium` (or CHROMIUM=/path/to/chromium). Without it the
test is skipped, except under CI (CI set), where that is a failure.
Failure artifacts go to test-artifacts/browser/<lesson>/ (or
$BACKPROPLAB_ARTIFACTS/<lesson>/); the assertion message names the folder.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import (
    CHROMIUM_ARGS,
    VIEWPORT,
    LabServer,
    NotebookReport,
    check_notebook,
    find_chromium,
)

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "browser"
ARTIFACTS = Path(os.environ.get("BACKPROPLAB_ARTIFACTS") or REPO / "test-artifacts" / "browser")

# Collected at collection time, so a lesson added to notebooks/ is tested
# with no edit here, and a failure names the lesson.
LESSONS = sorted(NOTEBOOKS.glob("*.ipynb"))


@pytest.fixture(scope="session")
def chromium() -> str:
    """The browser to drive; a skip only where none is installed."""
    path = find_chromium()
    if path is None:
        message = (
            "no Chromium found: install Debian's `chromium` package "
            "(apt-get install chromium) or set CHROMIUM=/path/to/chromium"
        )
        # Under CI a missing browser means the install step is broken; a
        # skip there would hide that the learner's view is no longer tested.
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and {message}")
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def lab_server(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """One jupyter lab for the session, serving copies of lessons and fixtures."""
    root = tmp_path_factory.mktemp("lab-root")
    if NOTEBOOKS.is_dir():
        shutil.copytree(NOTEBOOKS, root / "lessons")
    shutil.copytree(FIXTURES, root / "fixtures")
    server = LabServer(root)
    try:
        server.start()
        yield server
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def browser_context(chromium: str) -> Iterator[Any]:
    """One headless Chromium for the session, with a fresh profile."""
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    browser = None
    try:
        # Playwright launches with its own temporary user-data-dir, so no
        # profile, extension or cached page of the user's is used.
        browser = playwright.chromium.launch(
            executable_path=chromium, headless=True, args=list(CHROMIUM_ARGS)
        )
        context = browser.new_context(viewport=VIEWPORT)
        yield context
        context.close()
    finally:
        if browser is not None:
            browser.close()
        playwright.stop()


def _run(
    context: Any, server: LabServer, folder: str, notebook: Path, artifacts: Path
) -> NotebookReport:
    shutil.rmtree(artifacts, ignore_errors=True)  # stale pictures would mislead
    # Expectations come from the copy the server serves, not the repository
    # file, which may have been edited since the session started.
    served = server.root_dir / folder / notebook.name
    report = check_notebook(
        context, server, f"{folder}/{notebook.name}", served, artifacts=artifacts
    )
    print(
        f"{notebook.name}: {report.seconds:.1f}s, {report.sliders_moved} slider(s) moved, "
        f"{report.graph_images} graph image(s)" + "".join(f"\n  note: {n}" for n in report.notes)
    )
    return report


@pytest.mark.parametrize(
    "lesson",
    LESSONS or [pytest.param(None, marks=pytest.mark.skip(reason="no notebooks/*.ipynb yet"))],
    ids=[p.stem for p in LESSONS] or ["no-lessons"],
)
def test_lesson_in_browser(browser_context: Any, lab_server: LabServer, lesson: Path) -> None:
    report = _run(browser_context, lab_server, "lessons", lesson, ARTIFACTS / lesson.stem)
    assert report.ok, report.describe()


# ---------------------------------------------------------------------------
# The checker, checked: it passes a healthy notebook and catches each breakage.
# ---------------------------------------------------------------------------


def _fixture(
    context: Any, server: LabServer, name: str, tmp_path: Path, **kwargs: Any
) -> NotebookReport:
    path = FIXTURES / name
    return check_notebook(
        context, server, f"fixtures/{name}", path, artifacts=tmp_path / "artifacts", **kwargs
    )


def test_checker_passes_a_healthy_notebook(
    browser_context: Any, lab_server: LabServer, tmp_path: Path
) -> None:
    """Figure, graph drawing, a tagged error and a working slider: no problem."""
    report = _fixture(browser_context, lab_server, "lesson_like.ipynb", tmp_path)
    assert report.ok, report.describe()
    assert report.sliders_moved == 1
    assert report.graph_images == 1


def test_checker_catches_a_callback_that_raises(
    browser_context: Any, lab_server: LabServer, tmp_path: Path
) -> None:
    """The slider's callback raises before drawing: plot unchanged, error logged."""
    report = _fixture(
        browser_context, lab_server, "broken_callback.ipynb", tmp_path, slider_timeout=15
    )
    assert not report.ok
    text = "\n".join(report.problems)
    assert "did not change" in text, report.describe()
    assert "log console shows an error" in text and "broken callback" in text, report.describe()
    # The failure leaves pictures behind, and the message says where.
    assert report.artifacts is not None
    assert (report.artifacts / "page.png").stat().st_size > 0
    assert (report.artifacts / "console.log").exists()
    assert str(report.artifacts.resolve()) in report.describe()


def test_checker_catches_a_traceback_shown_by_the_widget(
    browser_context: Any, lab_server: LabServer, tmp_path: Path
) -> None:
    """The plot does change, but the callback then raises inside its Output."""
    report = _fixture(
        browser_context, lab_server, "broken_callback_after_draw.ipynb", tmp_path, slider_timeout=15
    )
    assert not report.ok
    assert any(
        "widget shows an error" in p and "broken after drawing" in p for p in report.problems
    ), report.describe()


def test_checker_catches_an_error_cell(
    browser_context: Any, lab_server: LabServer, tmp_path: Path
) -> None:
    """An untagged error fails, and Run All stopping there is reported too."""
    report = _fixture(browser_context, lab_server, "error_cell.ipynb", tmp_path)
    assert not report.ok
    assert "cell 3 shows an error: ZeroDivisionError" in "\n".join(report.problems)
    assert "cell 4 never ran" in "\n".join(report.problems), report.describe()
    assert (tmp_path / "artifacts" / "cell-03.png").exists()
