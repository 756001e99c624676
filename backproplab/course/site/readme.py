"""The landing page and the guide pages, from the README.

The landing page is the README's title, its introduction and its lesson table, each
lesson linked to its page; a README section the landing page links to (and those that
section links to) becomes a page of its own under ``guide/``, so such a link stays
inside the site. Other links lead to the repository.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..assignment import read_notebook
from .errors import SiteError
from .lessons import learn_commands

__all__ = ["HOMEPAGE", "LessonRow", "Readme", "read_readme", "write_guide"]

HOMEPAGE = "https://github.com/backproplab/backproplab"


@dataclass(frozen=True)
class LessonRow:
    """One row of the README's lesson table."""

    number: str  # as the table writes it: "5", "5b"
    title: str
    notebook: str  # the file name, e.g. "02-chain-rule.ipynb"
    summary: str


@dataclass(frozen=True)
class Readme:
    """What the landing page takes from the README."""

    title: str
    intro: str  # the text between the title and the first section
    lessons_section: str  # the whole "## Lessons" section, table included
    lessons: tuple[LessonRow, ...]


_ROW = re.compile(
    r"^\|\s*(?P<number>[^|]*?)\s*\|\s*\[(?P<title>[^\]]+)\]\(notebooks/(?P<file>[^)\s]+\.ipynb)\)"
    r"\s*\|\s*(?P<summary>.*?)\s*\|\s*$"
)


def read_readme(text: str, name: str = "README") -> Readme:
    """Split the README into the parts the landing page shows.

    The lesson section is the one whose heading starts with "Lessons"; its
    table rows link to ``notebooks/NN-topic.ipynb``. ``name`` is the file
    named in errors.
    """
    lines = text.splitlines()
    if not lines or not lines[0].startswith("# "):
        raise SiteError(f"{name}: the first line must be the title ('# name')")
    title = lines[0][2:].strip()
    headings = [i for i, line in enumerate(lines) if line.startswith("## ")]
    start = next((i for i in headings if lines[i][3:].strip().startswith("Lessons")), None)
    if start is None:
        raise SiteError(f"{name}: no '## Lessons' section with the lesson table")
    end = next((i for i in headings if i > start), len(lines))
    section = lines[start:end]
    rows = []
    for line in section:
        found = _ROW.match(line)
        if found:
            rows.append(LessonRow(found["number"], found["title"], found["file"],
                                  found["summary"]))
    if not rows:
        raise SiteError(f"{name}: the Lessons section has no table row linking a notebook")
    return Readme(
        title=title,
        intro="\n".join(lines[1:headings[0]]).strip(),  # what stands before any section
        lessons_section="\n".join(section).strip(),
        lessons=tuple(rows),
    )


def _rewrite_links(markdown: str, lessons: dict[str, str],
                   anchors: dict[str, str] | None = None, up: str = "") -> str:
    """Point README links at the site: lessons to their pages, a README section the site
    shows (``anchors``: anchor -> page path) to its page, the rest to the repository.
    ``up`` leads from the page being written to the site's root ("../" from a folder)."""
    anchors = anchors or {}

    def fix(found: re.Match[str]) -> str:
        text, target = found["text"], found["target"]
        if target.startswith("notebooks/") and target[len("notebooks/"):] in lessons:
            return f"[{text}]({up}lessons/{target[len('notebooks/'):]})"
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            return found[0]
        if target.startswith("#") and target[1:] in anchors:
            return f"[{text}]({up}{anchors[target[1:]]})"
        if target.startswith("#"):
            return f"[{text}]({HOMEPAGE}{target})"
        return f"[{text}]({HOMEPAGE}/blob/main/{target})"

    return re.sub(r"(?<!!)\[(?P<text>[^\]]+)\]\((?P<target>[^)\s]+)\)", fix, markdown)


def _slug(heading: str) -> str:
    """The anchor GitHub (and MyST) give a heading: lower case, punctuation dropped."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _readme_sections(text: str) -> dict[str, tuple[str, list[str]]]:
    """The README's "## " sections: slug -> (the section's text, the slugs of its headings).

    >>> sections = _readme_sections("# t\\n\\n## Use it\\n\\ntext\\n\\n### In a lab\\n")
    >>> sections["use-it"][1]
    ['use-it', 'in-a-lab']
    """
    found: dict[str, tuple[list[str], list[str]]] = {}
    lines: list[str] = []
    slugs: list[str] = []
    fenced = False  # a "## " line inside a code block is code, not a heading
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = None if fenced else re.match(r"(#{2,4}) (.*)", line)
        if heading and heading[1] == "##":
            lines, slugs = [], []
            found[_slug(heading[2])] = (lines, slugs)
        if heading and found:
            slugs.append(_slug(heading[2]))
        lines.append(line)
    return {slug: ("\n".join(part), heads) for slug, (part, heads) in found.items()}


def _section_pages(readme_text: str, start: str) -> dict[str, str]:
    """The README sections the landing page links to (and those they link to), as pages:
    slug -> page path without suffix, e.g. "guide/teaching-with-backproplab"."""
    sections = _readme_sections(readme_text)
    owner = {anchor: slug for slug, (_, slugs) in sections.items() for anchor in slugs}
    wanted: list[str] = []
    todo = [start]
    while todo:
        for target in re.findall(r"\]\(#([\w-]+)\)", todo.pop()):
            slug = owner.get(target)
            if slug and slug not in wanted and slug != "lessons":
                wanted.append(slug)
                todo.append(sections[slug][0])
    return {slug: f"guide/{slug}" for slug in wanted}


def _section_page(section: str, anchors: dict[str, str], lessons: dict[str, str]) -> str:
    """A README section as a page of its own: its headings one level up, its links fixed."""
    lines, fenced = [], False
    for line in section.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        lines.append(line[1:] if not fenced and re.match(r"#{2,4} ", line) else line)
    return _rewrite_links("\n".join(lines), lessons, anchors, up="../") + "\n"


def _landing_page(readme: Readme, lessons: Sequence[Path], anchors: dict[str, str] | None = None,
                  guide: Sequence[str] = ()) -> str:
    """The landing page's MyST source; ``anchors`` maps a README anchor to the site page
    that shows its section, ``guide`` lists those pages."""
    names = {path.name: path.stem for path in lessons}
    listed = {row.notebook for row in readme.lessons}
    section = readme.lessons_section
    # A lesson the README does not list yet still gets a row, so nothing is hidden.
    extra = [
        f"| {path.name[:2].lstrip('0')} | [{_notebook_title(path)}](notebooks/{path.name}) | |"
        for path in lessons if path.name not in listed
    ]
    if extra:
        table_end = max(i for i, line in enumerate(section.splitlines()) if line.startswith("|"))
        parts = section.splitlines()
        section = "\n".join(parts[: table_end + 1] + extra + parts[table_end + 1 :])
    first = lessons[0]
    return "\n\n".join([
        f"# {readme.title}",
        _rewrite_links(readme.intro, names, anchors),
        f'<p class="bl-start"><a class="bl-start-button" href="lessons/{first.stem}.html">'
        f"Start with lesson {first.name[:2].lstrip('0')} &rarr;</a>"
        '<a class="bl-start-link" href="reference/index.html">Package reference</a></p>',
        _rewrite_links(section, names, anchors),
        "## Reading this site\n\n"
        "Each lesson is shown as it ran, every output and figure included, from the "
        "notebooks the tests check. Exercises show a worked solution behind a "
        "**Show a solution** block: try the exercise first. Interactive widgets "
        "appear as still pictures; they respond to their controls in JupyterLab. "
        "To run a lesson, download it from the top of its page and make your own copy "
        "with blank exercises:\n\n" + learn_commands(first.name),
        _toctree("Lessons", [f"lessons/{path.stem}" for path in lessons]),
        _toctree("Reference", ["reference/index"]),
        *([_toctree("From the README", guide)] if guide else []),
    ]) + "\n"


def write_guide(src: Path, readme_text: str, readme: Readme, lessons: Sequence[Path]) -> None:
    """The landing page, and a page for each README section it links to (so that such a
    link stays inside the site)."""
    names = {path.name: path.stem for path in lessons}
    pages = _section_pages(readme_text, readme.intro + "\n" + readme.lessons_section)
    sections = _readme_sections(readme_text)
    anchors = {anchor: f"{page}.md" + ("" if anchor == slug else f"#{anchor}")
               for slug, page in pages.items() for anchor in sections[slug][1]}
    for slug, page in pages.items():
        (src / page).parent.mkdir(parents=True, exist_ok=True)
        (src / f"{page}.md").write_text(_section_page(sections[slug][0], anchors, names),
                                        encoding="utf-8")
    (src / "index.md").write_text(_landing_page(readme, lessons, anchors, list(pages.values())),
                                  encoding="utf-8")


def _toctree(caption: str, entries: Sequence[str]) -> str:
    return "```{toctree}\n:hidden:\n:caption: " + caption + "\n\n" + "\n".join(entries) + "\n```"


def _notebook_title(path: Path) -> str:
    """The first heading of a notebook, without its "NN · " prefix."""
    for cell in read_notebook(path).cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return re.sub(r"^\d+\S*\s*·\s*", "", line[2:].strip())
    return path.stem
