"""Fixtures of the lessons' browser tests: per test process, one JupyterLab server and one
page with the app loaded, which every notebook the process opens shares."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import VIEWPORT, LabServer, LabWindow, find_chromium

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "browser"


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
def browser_context(chromium_browser: Any) -> Iterator[Any]:
    """One page context for the session, in the session's Chromium (tests/conftest.py)."""
    context = chromium_browser.new_context(viewport=VIEWPORT)
    yield context
    context.close()


@pytest.fixture(scope="session")
def lab(browser_context: Any, lab_server: LabServer) -> Iterator[LabWindow]:
    """The page with JupyterLab loaded, shared by every notebook this process opens."""
    window = LabWindow(browser_context, lab_server)
    yield window
    window.discard()
