"""Shared test configuration, set before anything starts a kernel.

- Tests draw with Agg, chosen in this process only. Setting MPLBACKEND in the
  environment instead would leak into the nbval kernels and stop the lessons'
  inline figures from being displayed.
- One intra-op thread for torch: nbval kernels inherit this environment, and
  on a two-core machine torch's default thread pool fights the test process
  for the cores (a lesson's training loop ran 70x slower that way). Lessons
  print rounded numbers, so their stored outputs are the same either way.
"""

import os

import matplotlib

matplotlib.use("Agg")
os.environ.setdefault("OMP_NUM_THREADS", "1")


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def chromium_browser():
    """One Playwright and one headless Chromium for the whole session, shared by the
    lessons' browser test and the site's: Playwright's sync API cannot start a second
    time in a process while the first is running."""
    from browser_support import CHROMIUM_ARGS, find_chromium

    path = find_chromium()
    if path is None:
        message = ("no Chromium found: install Debian's `chromium` package "
                   "(apt-get install chromium) or set CHROMIUM=/path/to/chromium")
        # Under CI a missing browser means the install step is broken; a skip would hide it.
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and {message}")
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    browser = None
    try:
        # Playwright launches with its own temporary user-data-dir: no profile of the user's.
        browser = playwright.chromium.launch(executable_path=path, headless=True,
                                             args=list(CHROMIUM_ARGS))
        yield browser
    finally:
        if browser is not None:
            browser.close()
        playwright.stop()
