"""The course as a website: `backproplab site` builds it offline, and it reads well.

The site is built once for the module into a temporary folder, from the real
lessons and README. The HTML is then checked with the standard library's
parser: a page per lesson with every stored figure, every internal link and
image resolving (anchors included), no script or stylesheet from another
host, each solution collapsed, the download link and the learner-copy command
on each lesson page, no nbgrader marker line on a lesson page, no TeX escape
left unrendered, and the landing page's links to README sections kept inside
the site. Headless Chromium then opens the landing page, lesson 02, lesson
17 and the reference page of `check_by_hand` with every request off this
machine refused, and checks what a reader sees: MathJax's rendered math (as
written, no backslash left), a figure that loaded, a solution that opens on
a click.

Needs the site extra (part of the test extra). The browser test needs
Debian's `chromium`, and is skipped without it except under CI, like
tests/lessons/test_browser.py.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import nbformat
import pytest
from browser_support import VIEWPORT

from backproplab.__main__ import main
from backproplab.course.site import MARKER, build_site, read_readme

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
LESSONS = sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb"))
LESSON_02 = next((p for p in LESSONS if p.name.startswith("02-")), None)


def _require_site_tools() -> None:
    try:
        import myst_nb  # noqa: F401
        import sphinx  # noqa: F401
        import sphinx_book_theme  # noqa: F401
    except ImportError as err:
        message = f'{err.name} is missing: pip install -c .ci/constraints.txt -e ".[test]"'
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and {message}")
        pytest.skip(message)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """The site built from the repository's lessons, once for the module."""
    _require_site_tools()
    dest = tmp_path_factory.mktemp("site") / "site"
    started = time.perf_counter()
    warnings = build_site(dest, NOTEBOOKS)
    seconds = time.perf_counter() - started
    # The build time goes into the test log (README, "Reading the course as a website").
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\n[site built from {len(LESSONS)} lessons in {seconds:.0f} s]")
    assert warnings == [], "the site build warned:\n" + "\n".join(warnings)
    return dest


# --------------------------------------------------------------------------
# The HTML, read with html.parser


class Page(HTMLParser):
    """The links, sources, ids and text of one HTML page."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.links: list[tuple[str, str, dict[str, str]]] = []  # (tag, url, attrs)
        self.ids: set[str] = set()
        self.text_parts: list[str] = []
        self.details: list[dict[str, str]] = []
        self.summaries: list[str] = []
        self.folded_parts: list[str] = []  # text inside an "After the reveal" block
        self._in_summary = False
        self._open: list[str] = []  # the classes of the <details> we are inside
        self.feed(path.read_text(encoding="utf-8"))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if "id" in a:
            self.ids.add(a["id"])
        for attr in ("href", "src"):
            if attr in a:
                self.links.append((tag, a[attr], a))
        if tag == "details":
            self.details.append(a)
            self._open.append(a.get("class", ""))
        if tag == "summary":
            self._in_summary = True
            self.summaries.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "summary":
            self._in_summary = False
        if tag == "details" and self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        self.text_parts.append(data)
        if any("bl-after-reveal" in c for c in self._open) and not self._in_summary:
            self.folded_parts.append(data)
        if self._in_summary:
            self.summaries[-1] += data

    @property
    def text(self) -> str:
        return " ".join("".join(self.text_parts).split())

    @property
    def folded(self) -> str:
        return " ".join("".join(self.folded_parts).split())


_pages: dict[Path, Page] = {}


def page(path: Path) -> Page:
    if path not in _pages:
        _pages[path] = Page(path)
    return _pages[path]


def html_files(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def is_external(url: str) -> bool:
    return bool(re.match(r"^([a-z][a-z0-9+.-]*:|//)", url, re.IGNORECASE))


def lesson_page(site: Path, notebook: Path) -> Path:
    return site / "lessons" / f"{notebook.stem}.html"


# --------------------------------------------------------------------------
# What was built


def built_from(site: Path, notebook: Path) -> nbformat.NotebookNode:
    """The lesson as the build read it: the copy its page offers for download."""
    built = page(lesson_page(site, notebook))
    (url,) = {url for tag, url, _ in built.links
              if tag == "a" and url.endswith("/" + notebook.name)}
    return nbformat.read(built.path.parent / url, as_version=4)


def test_every_lesson_has_a_page_with_every_stored_figure(site: Path) -> None:
    assert LESSONS, "no lessons in notebooks/"
    for notebook in LESSONS:
        built = lesson_page(site, notebook)
        assert built.is_file(), f"no page for {notebook.name}"
        stored = sum(
            "image/png" in output.get("data", {})
            for cell in built_from(site, notebook).cells
            for output in cell.get("outputs", [])
        )
        images = [url for tag, url, _ in page(built).links
                  if tag == "img" and "/_images/" in f"/{url}"]
        assert len(images) == stored, (
            f"{built.name}: {len(images)} figures on the page, {stored} stored in the notebook"
        )


def test_landing_page_is_the_readmes_lesson_table(site: Path) -> None:
    readme = read_readme((REPO / "README.md").read_text(encoding="utf-8"))
    landing = page(site / "index.html")
    hrefs = [url for tag, url, _ in landing.links if tag == "a"]
    for row in readme.lessons:
        assert f"lessons/{Path(row.notebook).stem}.html" in hrefs, row
        assert row.title in landing.text
    # Every lesson is reachable from the landing page, listed or not.
    for notebook in LESSONS:
        assert f"lessons/{notebook.stem}.html" in hrefs, notebook.name
    assert "reference/index.html" in hrefs


def test_internal_links_and_images_resolve(site: Path) -> None:
    broken = []
    for path in html_files(site):
        for tag, url, _ in page(path).links:
            if is_external(url) or url.startswith("data:"):
                continue
            parts = urlsplit(url)
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{path.relative_to(site)}: <{tag}> {url} (no such file)")
                continue
            anchor = unquote(parts.fragment)
            if anchor and target.suffix == ".html" and anchor not in page(target).ids:
                broken.append(f"{path.relative_to(site)}: <{tag}> {url} (no such anchor)")
    assert not broken, f"{len(broken)} broken links:\n" + "\n".join(broken[:40])


def test_no_script_stylesheet_or_image_comes_from_another_host(site: Path) -> None:
    loaded = []
    for path in html_files(site):
        for tag, url, attrs in page(path).links:
            fetched = tag in ("script", "img", "iframe", "source") or (
                tag == "link" and attrs.get("rel") not in ("canonical",))
            if fetched and is_external(url) and not url.startswith("data:"):
                loaded.append(f"{path.relative_to(site)}: <{tag}> {url}")
    for path in sorted(site.rglob("*.css")):
        for url in re.findall(r"url\(\s*['\"]?([^'\")]+)", path.read_text(errors="replace")):
            if is_external(url) and not url.startswith("data:"):
                loaded.append(f"{path.relative_to(site)}: url({url})")
        if re.search(r"@import\s+(url\()?['\"]?(https?:)?//", path.read_text(errors="replace")):
            loaded.append(f"{path.relative_to(site)}: @import from another host")
    assert not loaded, "\n".join(loaded)
    # MathJax is the site's own copy.
    math = page(lesson_page(site, LESSON_02))
    scripts = [url for tag, url, _ in math.links if tag == "script"]
    assert any(urlsplit(url).path.endswith("_static/mathjax/tex-chtml.js") for url in scripts), (
        scripts)
    assert (site / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").is_dir()


def _solution_cells(book: nbformat.NotebookNode) -> list[str]:
    return [cell.source for cell in book.cells
            if cell.get("metadata", {}).get("nbgrader", {}).get("solution")]


def test_each_solution_is_collapsed_behind_show_a_solution(site: Path) -> None:
    for notebook in LESSONS:
        built = page(lesson_page(site, notebook))
        solutions = _solution_cells(built_from(site, notebook))
        shown = [s for s in built.summaries if "Show a solution" in s]
        assert len(shown) == len(solutions), (
            f"{notebook.name}: {len(solutions)} solutions, {len(shown)} 'Show a solution' blocks"
        )
        assert not any("open" in d for d in built.details), f"{notebook.name}: a block is open"
        html = built.path.read_text(encoding="utf-8")
        assert "BEGIN SOLUTION" not in html and "END SOLUTION" not in html, notebook.name


_ANSWER_CELL = re.compile(r"\bbl\.(?:check_prediction|reveal)\(")


def test_each_prediction_answer_is_folded_behind_show_the_answer(site: Path) -> None:
    """A prediction's check and reveal print the answer: on the page each output waits,
    folded, behind its own "Show the answer" (and none is open)."""
    folded = 0
    for notebook in LESSONS:
        built = page(lesson_page(site, notebook))
        answers = [c for c in built_from(site, notebook).cells
                   if c.cell_type == "code" and _ANSWER_CELL.search(c.source) and c.get("outputs")]
        shown = [s for s in built.summaries if "Show the answer" in s]
        assert len(shown) == len(answers), (
            f"{notebook.name}: {len(answers)} check/reveal outputs, {len(shown)} folds")
        folded += len(shown)
    assert folded >= 2 * 15, "fewer predictions than lessons: did the lessons lose theirs?"


def _plain_run(markdown: str) -> str | None:
    """The longest run of plain words (no markup, math or code) in a markdown text."""
    runs = re.findall(r"(?:[A-Za-z,;:]+ ){4,}[A-Za-z]+", markdown)
    return max(runs, key=len) if runs else None


def test_what_a_lesson_folds_after_a_reveal_is_folded_on_its_page(site: Path) -> None:
    """Each "After the reveal" fold of a lesson is one closed block on its page, and
    the prose it folds (which discusses the answer) is inside that block."""
    from backproplab.course.assignment import after_reveal_folds

    blocks = 0
    for notebook in LESSONS:
        lesson = nbformat.read(notebook, as_version=4)
        built = page(lesson_page(site, notebook))
        folds = after_reveal_folds(lesson.cells)
        opened = [d for d in built.details if "bl-after-reveal" in d.get("class", "")]
        assert len(opened) == len(folds), f"{notebook.name}: {len(folds)} folds, {len(opened)}"
        assert not any("open" in d for d in opened), f"{notebook.name}: a fold is open"
        for fold, end in folds:
            for cell in lesson.cells[fold + 1:end]:
                run = _plain_run(cell.source) if cell.cell_type == "markdown" else None
                if run:
                    assert run in built.folded, f"{notebook.name}: {run!r} is not folded"
        blocks += len(folds)
    assert blocks >= 20, "fewer folds than lessons: did the lessons lose theirs?"


# The marker lines of nbgrader. The guide page from the README and the reference of
# course.assignment show them on purpose, as the format they document; a lesson page never.
MARKER_LINE = re.compile(r"#+\s*(BEGIN|END) (HIDDEN TESTS|SOLUTION)")


def test_no_lesson_page_shows_an_nbgrader_marker_line(site: Path) -> None:
    from backproplab.course.assignment import HIDDEN_KEPT

    for notebook in LESSONS:
        built = page(lesson_page(site, notebook))
        found = MARKER_LINE.search(built.text)
        assert found is None, f"{notebook.name}: {found[0]!r} on the page"
        # The check itself stays, under the comment a learner's copy has.
        # (Lesson 01's prose quotes that comment once more.)
        hidden = sum(cell.source.count("BEGIN HIDDEN TESTS")
                     for cell in built_from(site, notebook).cells)
        assert built.text.count(HIDDEN_KEPT) >= hidden, notebook.name


class Prose(HTMLParser):
    """The text of a page outside code, split into plain text and TeX (MathJax's input)."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
            "track", "wbr"}

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.stack: list[str] = []  # open elements: "code", "math" or "" for the rest
        self.plain: list[str] = []
        self.tex: list[str] = []
        self.feed(path.read_text(encoding="utf-8"))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.VOID:
            return
        classes = (dict(attrs).get("class") or "").split()
        kind = ("code" if tag in ("pre", "code", "script", "style")
                else "math" if "math" in classes else "")
        self.stack.append(f"{tag}:{kind}")

    def handle_endtag(self, tag: str) -> None:
        names = [entry.split(":")[0] for entry in self.stack]
        if tag in names:
            del self.stack[len(names) - 1 - names[::-1].index(tag):]

    def handle_data(self, data: str) -> None:
        kinds = {entry.split(":")[1] for entry in self.stack}
        if "code" in kinds:
            return
        (self.tex if "math" in kinds else self.plain).append(data)


def test_no_unrendered_tex_escape_outside_code(site: Path) -> None:
    """A TeX escape (``\\_``) left in prose is printed as it is; MathJax keeps one inside
    ``\\text{...}`` as written too (it shows ``one\\_hot``, not ``one_hot``)."""
    left = []
    for path in html_files(site):
        if "_static" in path.parts:
            continue
        prose = Prose(path)
        where = path.relative_to(site)
        left += [f"{where}: {m[0]!r} in the text"
                 for m in re.finditer(r".{0,20}\\[_$#%&{}].{0,20}", " ".join(prose.plain))]
        left += [f"{where}: {m[0]!r} in the math"
                 for m in re.finditer(r"\\text\{[^{}]*\\[_$#%&][^{}]*\}", " ".join(prose.tex))]
    assert not left, "\n".join(left)


def test_landing_page_links_to_readme_sections_stay_in_the_site(site: Path) -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    readme = read_readme(text)
    linked = re.findall(r"\[([^\]]+)\]\(#([\w-]+)\)", readme.intro + readme.lessons_section)
    assert linked, "the README's intro links no section: the test would check nothing"
    html = (site / "index.html").read_text(encoding="utf-8")
    anchors = {" ".join(re.sub(r"<[^>]+>", "", body).split()): href
               for href, body in re.findall(r'<a [^>]*href="([^"]*)"[^>]*>(.*?)</a>', html, re.S)}
    for title, anchor in linked:
        href = anchors.get(" ".join(title.split()))
        assert href is not None, f"no link {title!r} on the landing page"
        assert not is_external(href), f"{title!r} leaves the site: {href}"
        parts = urlsplit(href)
        target = site / unquote(parts.path)
        assert target.is_file(), f"{title!r}: {href} is not a page of the site"
        assert not parts.fragment or parts.fragment in page(target).ids, href
        # The page shows that section of the README.
        heading = next(line for line in text.splitlines()
                       if line.startswith("#") and re.sub(r"[^\w\- ]", "", line.lstrip("# ")
                                                          .lower()).replace(" ", "-") == anchor)
        assert heading.lstrip("# ").strip() in page(target).text


def test_each_lesson_links_its_notebook_the_learner_command_and_the_next(site: Path) -> None:
    for i, notebook in enumerate(LESSONS):
        built = page(lesson_page(site, notebook))
        downloads = {url for tag, url, _ in built.links
                     if tag == "a" and url.endswith("/" + notebook.name)}
        assert len(downloads) == 1, f"{notebook.name}: download links {downloads}"
        # The lesson as stored, not the site's copy with solutions folded.
        assert "BEGIN SOLUTION" in (built.path.parent / downloads.pop()).read_text()
        assert f"backproplab learn {notebook.name} my-lessons/" in built.text
        if i + 1 < len(LESSONS):
            nxt = f"{LESSONS[i + 1].stem}.html"
            assert any(tag == "a" and url == nxt and "next" in attrs.get("class", "")
                       for tag, url, attrs in built.links), (
                f"{notebook.name} does not link the next lesson {nxt}"
            )


def test_the_reference_documents_check_by_hand_from_its_docstring(site: Path) -> None:
    import backproplab

    reference = page(site / "reference" / "course.byhand.html")
    assert "backproplab.course.byhand.check_by_hand" in reference.ids
    first_line = backproplab.check_by_hand.__doc__.strip().splitlines()[0]
    assert first_line in reference.text
    index = page(site / "reference" / "index.html")
    assert "course.byhand.html" in [url for tag, url, _ in index.links if tag == "a"]


def test_site_folder_is_marked_as_built_here(site: Path) -> None:
    assert (site / MARKER).is_file()
    assert not (site / ".buildinfo").exists()


# --------------------------------------------------------------------------
# The command's answers to bad input (no build needed)


def _cli(*args: object) -> int:
    return main(["site", *map(str, args)])


def test_dest_that_is_a_file_is_refused(tmp_path: Path, capsys) -> None:
    dest = tmp_path / "site.html"
    dest.write_text("mine")
    assert _cli(dest, "--lessons", NOTEBOOKS) == 2
    err = capsys.readouterr().err
    assert err.startswith("backproplab site: error: DEST:") and "is a file" in err
    assert len(err.strip().splitlines()) == 1
    assert dest.read_text() == "mine"


def test_dest_inside_the_lessons_is_refused(capsys) -> None:
    assert _cli(NOTEBOOKS / "site", "--lessons", NOTEBOOKS) == 2
    assert "DEST:" in capsys.readouterr().err
    assert not (NOTEBOOKS / "site").exists()


def test_dest_holding_the_lessons_is_refused_even_with_force(capsys) -> None:
    assert _cli(REPO, "--lessons", NOTEBOOKS, "--force") == 2
    assert "holds the lessons" in capsys.readouterr().err


def test_a_folder_of_other_files_is_kept_unless_forced(tmp_path: Path, capsys) -> None:
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "notes.txt").write_text("keep me")
    assert _cli(dest, "--lessons", NOTEBOOKS) == 2
    err = capsys.readouterr().err
    assert "not empty" in err and "--force" in err
    assert (dest / "notes.txt").read_text() == "keep me"


def test_missing_lessons_folder_is_named(tmp_path: Path, capsys) -> None:
    assert _cli(tmp_path / "out", "--lessons", tmp_path / "nowhere") == 2
    assert "--lessons:" in capsys.readouterr().err


def test_missing_site_tools_name_the_extra(tmp_path: Path, capsys, monkeypatch) -> None:
    import backproplab.course.site as site_module

    monkeypatch.setattr(site_module, "NEEDED", {"no_such_module_here": "no-such-dist"})
    assert _cli(tmp_path / "out", "--lessons", NOTEBOOKS) == 2
    err = capsys.readouterr().err
    assert 'pip install "backproplab[site]"' in err and "no-such-dist" in err
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------
# Rebuilding: a small course, built twice


def _small_course(root: Path) -> Path:
    lessons = root / "lessons"
    lessons.mkdir()
    book = nbformat.v4.new_notebook()
    book.cells = [
        nbformat.v4.new_markdown_cell("# 01 · Tiny\n\nThe slope of $x^2$ is $2x$."),
        nbformat.v4.new_code_cell(
            "def slope(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION",
            metadata={"nbgrader": {"solution": True, "grade": False, "grade_id": "l01-slope",
                                   "locked": False, "schema_version": 3, "task": False}},
        ),
    ]
    for i, cell in enumerate(book.cells):
        cell.id = f"l01-{i:02d}"
    nbformat.write(book, lessons / "01-tiny.ipynb")
    (root / "README.md").write_text(
        "# tiny\n\nA tiny course.\n\n## Lessons\n\n| # | Lesson | What you learn |\n"
        "|---|---|---|\n| 1 | [Tiny](notebooks/01-tiny.ipynb) | A slope |\n\n## More\n"
    )
    return lessons


def test_a_site_built_before_is_replaced_and_a_failed_build_keeps_it(tmp_path: Path) -> None:
    _require_site_tools()
    lessons = _small_course(tmp_path)
    dest = tmp_path / "out"
    assert build_site(dest, lessons) == []
    assert "Show a solution" in (dest / "lessons" / "01-tiny.html").read_text()
    (dest / "stale.html").write_text("from an old build")
    assert build_site(dest, lessons) == []
    assert not (dest / "stale.html").exists()
    # A README that links a lesson that is missing fails before DEST is touched.
    readme = tmp_path / "README.md"
    readme.write_text(readme.read_text().replace("01-tiny.ipynb", "01-gone.ipynb"))
    (dest / "kept.html").write_text("still here")
    with pytest.raises(ValueError, match="01-gone.ipynb"):
        build_site(dest, lessons)
    assert (dest / "kept.html").exists() and (dest / "index.html").exists()


def test_a_broken_lesson_is_named_by_its_own_path(tmp_path: Path, capsys) -> None:
    _require_site_tools()
    lessons = _small_course(tmp_path)
    (lessons / "02-broken.ipynb").write_text("{ not json")
    assert _cli(tmp_path / "out", "--lessons", lessons) == 2
    err = capsys.readouterr().err
    assert f"{lessons / '02-broken.ipynb'}: not a notebook" in err, err
    assert not (tmp_path / "out").exists()


def test_a_build_that_fails_leaves_dest_as_it_was(tmp_path: Path, monkeypatch) -> None:
    import backproplab.course.site as site_module

    _require_site_tools()
    lessons = _small_course(tmp_path)
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / MARKER).write_text("")
    (dest / "index.html").write_text("the last good build")

    def fail(*args: object) -> list[str]:
        raise site_module.SiteError("Sphinx failed: on purpose")

    monkeypatch.setattr(site_module, "run_sphinx", fail)
    with pytest.raises(ValueError, match="on purpose"):
        build_site(dest, lessons)
    assert (dest / "index.html").read_text() == "the last good build"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "lessons", "out"], (
        "a temporary folder was left behind")


# --------------------------------------------------------------------------
# In the browser


@dataclass
class Browser:
    context: Any
    refused: list[str]  # URLs off this machine that a page asked for (all refused)


@pytest.fixture(scope="module")
def browser(site: Path, chromium_browser: Any) -> Iterator[Browser]:
    """A headless Chromium page that may load the site's files and nothing else (one
    Chromium serves the whole session: tests/conftest.py)."""
    context = chromium_browser.new_context(viewport=VIEWPORT)
    refused: list[str] = []

    def only_local(route: Any) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    context.route("**/*", only_local)
    yield Browser(context, refused)
    context.close()


def _open(browser: Browser, url: str) -> tuple[Any, list[str]]:
    page_ = browser.context.new_page()
    problems: list[str] = []
    page_.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))
    page_.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page_.on("requestfailed", lambda r: problems.append(f"failed: {r.url}"))
    page_.goto(url)
    page_.wait_for_load_state("load")
    return page_, problems


@pytest.mark.browser
def test_landing_page_in_the_browser(browser: Browser, site: Path) -> None:
    page_, problems = _open(browser, (site / "index.html").as_uri())
    assert page_.locator("h1").first.inner_text().strip().startswith("backproplab")
    rows = page_.locator("article table tbody tr")
    assert rows.count() >= len(read_readme((REPO / "README.md").read_text()).lessons)
    start = page_.get_by_role("link", name=re.compile(r"Start with lesson 1"))
    assert start.is_visible()
    start.click()
    page_.wait_for_load_state("load")
    assert page_.url.endswith(f"lessons/{LESSONS[0].stem}.html")
    assert not problems and not browser.refused, problems + browser.refused
    page_.close()


@pytest.mark.browser
def test_lesson_02_shows_math_a_figure_and_a_collapsed_solution(
    browser: Browser, site: Path
) -> None:
    page_, problems = _open(browser, lesson_page(site, LESSON_02).as_uri())
    # MathJax has typeset the TeX: rendered containers, no raw $...$ left, no errors.
    page_.wait_for_selector("mjx-container", timeout=30_000)
    page_.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                            timeout=30_000)
    assert page_.evaluate("() => MathJax.startup.promise.then(() => true)")
    assert page_.locator("mjx-container").count() >= 5
    assert page_.locator("mjx-merror").count() == 0
    assert page_.locator("mjx-container mjx-mi").first.is_visible()
    # Every figure loaded.
    figures = page_.locator("div.cell_output img")
    assert figures.count() >= 1
    widths = figures.evaluate_all("imgs => imgs.map(i => i.complete ? i.naturalWidth : 0)")
    assert all(w > 0 for w in widths), widths
    # The first exercise's solution: collapsed, then opened by a click.
    solution = page_.locator("details", has=page_.locator("summary", has_text="Show a solution"))
    first = solution.first
    first.scroll_into_view_if_needed()
    code = first.locator("pre")
    assert first.get_attribute("open") is None and not code.is_visible()
    first.locator("summary").click()
    assert code.is_visible()
    expected = _solution_cells(built_from(site, LESSON_02))[0]
    body = next(line for line in expected.splitlines()
                if line.strip() and "SOLUTION" not in line and not line.startswith("#"))
    assert body.strip() in code.inner_text()
    # A prediction's answer: folded until asked for, then shown.
    answer = page_.locator("details", has=page_.locator("summary", has_text="Show the answer"))
    reveal = answer.nth(1)  # the first prediction's check, then its reveal
    reveal.scroll_into_view_if_needed()
    said = reveal.locator("div.cell_output")
    assert reveal.get_attribute("open") is None and not said.is_visible()
    reveal.locator("summary").click()
    assert said.is_visible() and "the answer is" in said.inner_text()
    # What the lesson says after the reveal: folded too, opened by its own click.
    after = page_.locator("details.bl-after-reveal").first
    after.scroll_into_view_if_needed()
    prose = after.locator("p").first
    assert after.get_attribute("open") is None and not prose.is_visible()
    after.locator("summary").click()
    assert prose.is_visible() and prose.inner_text().strip()
    assert not problems and not browser.refused, problems + browser.refused
    page_.close()


@pytest.mark.browser
def test_the_classifier_lessons_math_reads_as_written(browser: Browser, site: Path) -> None:
    """What MathJax made of the fused form: ``one_hot(y)``, no backslash left in any formula
    (its assistive MathML holds the text a reader sees)."""
    lesson = next(p for p in LESSONS if p.name.startswith("12-backprop"))
    page_, problems = _open(browser, lesson_page(site, lesson).as_uri())
    page_.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                            timeout=30_000)
    assert page_.evaluate("() => MathJax.startup.promise.then(() => true)")
    shown = page_.locator("mjx-container mjx-assistive-mml").evaluate_all(
        "nodes => nodes.map(n => n.textContent)")
    assert shown and not [t for t in shown if "\\" in t], shown
    assert any("one_hot(y)" in t for t in shown), shown
    assert not problems and not browser.refused, problems + browser.refused
    page_.close()


@pytest.mark.browser
def test_reference_page_of_check_by_hand(browser: Browser, site: Path) -> None:
    url = ((site / "reference" / "course.byhand.html").as_uri()
           + "#backproplab.course.byhand.check_by_hand")
    page_, problems = _open(browser, url)
    entry = page_.locator("dt[id='backproplab.course.byhand.check_by_hand']")
    assert entry.is_visible() and "check_by_hand" in entry.inner_text()
    import backproplab

    text = page_.locator("dl:has(> dt[id='backproplab.course.byhand.check_by_hand']) > dd").first
    first_line = backproplab.check_by_hand.__doc__.strip().splitlines()[0]
    assert first_line in " ".join(text.inner_text().split())
    # Its docstring example, highlighted as code.
    entry_block = "dl:has(> dt[id='backproplab.course.byhand.check_by_hand'])"
    assert page_.locator(f"{entry_block} pre").count() >= 1
    assert not problems and not browser.refused, problems + browser.refused
    page_.close()
