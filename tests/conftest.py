"""Shared test configuration, set before anything starts a kernel.

- Tests draw with Agg, chosen in this process only. Setting MPLBACKEND in the
  environment instead would leak into the nbval kernels and stop the lessons'
  inline figures from being displayed.
- One intra-op thread for torch in the test processes and in every kernel they
  start (the browser's, nbgrader's): on a two-core machine torch's default thread
  pool fights the test process for the cores (a lesson's training loop ran 70x
  slower with spinning threads). nbval's kernels are the exception: they run the
  lessons as a learner's lab does, with torch's default count and threads that
  sleep when idle (tests/rounds.py, `LessonKernelManager`), so a printed number that
  depended on the count would fail strict nbval.
- The suite runs on every core with pytest-xdist (`-n auto --dist loadfile` in
  pyproject.toml). A unit of work goes to one worker whole: a file (and so each
  notebook, whose nbval cells share one kernel and must run in order), except that
  a lesson's tests that share one live run of it are a unit of their own, here:
  its nbval cells with the tests that read the rounds played in nbval's kernel
  (tests/lessons/test_exercises.py, tests/rounds.py; the cells go first), and its
  visit in JupyterLab (test_browser.py and test_prediction_screens.py); and each test of
  the seed sweeps (test_method_sweep.py, test_slips_every_seed.py) is a unit alone,
  since a file of them is a quarter of an hour that one worker would carry. The
  units with the longest tests are handed out first (`--no-loadscope-reorder` keeps
  this order), so no worker is left with a long one at the end.
- After collection each test process freezes what it holds (`gc.freeze()`): the
  collected tests, torch and the lessons' modules live for the whole run, and a
  test that builds big graphs in Python (a sweep of a learner's engine over a
  5,000-node chain, fifty times) otherwise pays for the collector walking them
  all again at each of its full collections (lesson 03's sweep alone: 49 s -> 18 s).
  It freezes again, after a collection, at the start of each unit of work (below):
  what the units before left alive (a browser, the modules they imported) is kept out
  of the collector's walks too, and so is the whole process after a check that thaws
  it (lesson 16's checkpoint-by-hooks observation calls `gc.unfreeze()`, after which
  lesson 03's sweep spent 15 s of its 19 in the collector).
- The summary names how many notebooks ran under nbval: .ci/run reads it, since
  a green run that never executed a lesson would prove nothing.
- Every kernel the suite starts talks over Unix sockets, not TCP ports
  (`backproplab.course.kernels`): with TCP, the starter picks free ports and
  closes them for the kernel to bind, and a kernel started at the same moment by
  another worker could take one in between. nbval takes no kernel manager
  option, so its module's KernelManager is swapped here, before any kernel starts.
"""

import gc
import os
import re
from collections import Counter

import matplotlib

matplotlib.use("Agg")
os.environ.setdefault("OMP_NUM_THREADS", "1")


import pytest  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    import nbval.kernel
    from rounds import LessonKernelManager

    nbval.kernel.KernelManager = LessonKernelManager
    # A plugin, not a hook of this file: this file's run hooks reach only tests/.
    config.pluginmanager.register(_RoundsInNbval(), "backproplab-rounds-in-nbval")


class _RoundsInNbval:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        yield
        if item.path.suffix == ".ipynb" and hasattr(item, "cell_num"):
            from rounds import after_nbval_cell

            after_nbval_cell(item)  # a lesson's rounds, in nbval's kernel (tests/rounds.py)


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


# Handed out first, longest first: (nodeid fragment, rank). Everything else keeps its
# place after these, in collection order (a notebook's cells stay in order). A unit of
# work goes out where its first test stands.
_LONG_FIRST = (
    ("test_nbgrader.py::test_nbgrader_autograde", 0),
    ("test_method_sweep.py", 1),
    ("test_browser.py", 1),
    ("test_prediction_screens.py", 1),
    ("test_slips_every_seed.py", 4),
    ("test_packaging.py", 2),
    ("test_site.py", 3),
    ("test_exercises.py::test_lesson_matches", 4),
    ("test_exercises.py::test_checks_reject", 4),
    ("test_exercises.py::test_student_version", 4),
    ("test_distributed.py", 5),
    ("test_grade.py", 5),
    ("test_sandbox.py", 5),
    (".ipynb::", 6),
)


def _rank(item: pytest.Item) -> tuple[int, int]:
    if item.nodeid.startswith("notebooks/"):
        return 4, 0  # a lesson's nbval cells, ahead of its exercise tests (one unit)
    return next((rank for fragment, rank in _LONG_FIRST if fragment in item.nodeid), 7), 1


# A lesson's tests that read one shared run of it, by file: (unit prefix, file names).
_LESSON_UNITS = (
    ("browser", ("test_browser.py", "test_prediction_screens.py")),
    ("rounds", ("test_exercises.py",)),
)
_LESSON_ID = re.compile(r"\[(\d\d-[\w-]+?)(?:\.ipynb)?\]$")
# Files whose tests share nothing but their module: each test a unit alone.
_ALONE = ("test_method_sweep.py", "test_slips_every_seed.py")


def unit_of(nodeid: str) -> str:
    """The unit of work of the test `nodeid`: its lesson's, itself, or its file's.

    The scheduler sees ids only (the workers collect, it does not): a lesson's test is
    one whose id ends in the lesson's file name, with or without ``.ipynb``.
    """
    path, _, rest = nodeid.partition("::")
    if path.rsplit("/", 1)[-1] in _ALONE:
        return nodeid
    if path.startswith("notebooks/") and path.endswith(".ipynb"):
        return f"rounds-{path[len('notebooks/'):-len('.ipynb')]}"  # nbval plays the rounds
    lesson = _LESSON_ID.search(rest)
    for prefix, files in _LESSON_UNITS:
        if lesson and path.rsplit("/", 1)[-1] in files:
            return f"{prefix}-{lesson.group(1)}"
    return path


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """--dist loadfile with the lessons' units above (pytest-xdist's own grouping by mark,
    --dist loadgroup, no longer groups anything under pytest 9)."""
    if config.getvalue("dist") != "loadfile":
        return None  # another distribution asked for on the command line
    from xdist.scheduler import LoadScopeScheduling

    class LessonUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return LessonUnits(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    gc.freeze()  # see the module docstring


_LAST_UNIT: list[str] = []


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """At the start of a unit of work, before its fixtures: collect the garbage, then
    freeze what is left (see the module docstring). Objects made from here on are
    collected as usual."""
    unit = unit_of(item.nodeid)
    if _LAST_UNIT != [unit]:
        _LAST_UNIT[:] = [unit]
        gc.collect()
        gc.freeze()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.suffix == ".ipynb" or f"{item.path.name}::{item.name}".startswith(_SLOW):
            item.add_marker(pytest.mark.slow)
    items.sort(key=_rank)


# The fast lane (`-m "not slow"`, README "How the tests work") leaves out, besides
# what a test file marks slow itself, the tests that start servers, browsers, worker
# processes or a command line in a new Python, or walk graphs of 100,000 nodes and more.
_SLOW = (
    "test_browser.py::",
    "test_prediction_screens.py::",
    "test_site.py::",
    "test_distributed.py::",
    "test_release_safety.py::",
    "test_learn.py::",
    "test_readme.py::test_learn_command",
    "test_notebook_hygiene.py::test_runner_executes",
    "test_graph.py::test_graph_of_a_million_nodes",
    "test_graph.py::test_deep_chain_of_100000_ops",
    "test_layout.py::test_a_100000_node_chain",
)


_NBVAL_CELLS: Counter = Counter()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::")[0]
    if report.when == "call" and path.endswith(".ipynb") and path.startswith("notebooks/"):
        _NBVAL_CELLS[path] += 1


def pytest_terminal_summary(terminalreporter) -> None:
    if _NBVAL_CELLS:
        terminalreporter.write_line(
            f"nbval: {len(_NBVAL_CELLS)} notebooks, {sum(_NBVAL_CELLS.values())} cells run")
