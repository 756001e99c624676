"""From page sources to HTML: Sphinx's settings, the site's own assets (its style sheet
and a copy of MathJax, so that no page loads anything from elsewhere), and the run."""

from __future__ import annotations

import copy
import re
import shutil
import warnings
from io import StringIO
from pathlib import Path

from .errors import INSTALL_HINT, SiteError
from .readme import HOMEPAGE

__all__ = ["CONFIG", "CSS", "copy_mathjax", "run_sphinx"]

MATHJAX_DIST = "sphinx-mathjax-offline"


def _mathjax_folder() -> Path:
    from importlib import metadata

    try:
        dist = metadata.distribution(MATHJAX_DIST)
    except metadata.PackageNotFoundError:
        raise SiteError(f"{MATHJAX_DIST} is not installed; {INSTALL_HINT}") from None
    folder = Path(str(dist.locate_file(f"{MATHJAX_DIST}/static/mathjax")))
    if not (folder / "tex-chtml.js").is_file():
        raise SiteError(f"{MATHJAX_DIST} has no static/mathjax/tex-chtml.js; {INSTALL_HINT}")
    return folder


# The parts of MathJax 3 that the chtml renderer loads: the combined
# component, TeX extensions it loads on demand, fonts, the menu and its
# accessibility tools. The other combined components are left out.
_MATHJAX_PARTS = ("tex-chtml.js", "input", "output/chtml.js", "output/chtml", "ui", "a11y",
                  "adaptors", "sre")


def copy_mathjax(dest: Path) -> None:
    """Copy the parts of MathJax the pages load into ``dest``, so that math is typeset
    without a network."""
    source = _mathjax_folder()
    for part in _MATHJAX_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, dest / part)
        elif (source / part).is_file():
            (dest / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / part, dest / part)


CSS = """\
/* backproplab: a few touches on top of the Sphinx Book Theme. */
/* The theme's top bar only repeats the sidebar's search box. */
.bd-header.bd-navbar { display: none; }
.bl-start { display: flex; gap: 1.2rem; align-items: center; flex-wrap: wrap; margin: 1.5rem 0; }
.bl-start-button {
  background: var(--pst-color-primary); color: #fff !important; border-radius: .4rem;
  padding: .55rem 1.1rem; font-weight: 600; text-decoration: none !important;
}
.bl-start-button:hover { filter: brightness(1.1); }
/* A page without a contents column (the landing page) uses its width. */
.bd-content:not(:has(#pst-secondary-sidebar)) .bd-article-container { max-width: 60rem; }
/* The landing page: the README's first sentence as a lead. */
section#backproplab > p:first-of-type { font-size: 1.3rem; line-height: 1.5; }
/* The lesson table: the number narrow, the title never squeezed. */
article table { width: 100%; }
article table td:first-child { text-align: right; width: 4.5rem; }
article table td:nth-child(2) { min-width: 11rem; font-weight: 600; }
/* Printed output wraps, as in JupyterLab. */
div.cell_output pre { white-space: pre-wrap; overflow-wrap: anywhere; }
/* A collapsed solution, or what follows a reveal: a clear bar to click. */
.tag_solution details.hide > summary, details.bl-after-reveal > summary {
  font-weight: 600; color: var(--pst-color-primary); background: var(--pst-color-surface);
  border: 1px solid var(--pst-color-border); border-radius: .3rem; padding: .35rem .8rem;
}
"""


CONFIG: dict[str, object] = {
    "project": "backproplab",
    "author": "the backproplab contributors",
    "html_title": "backproplab",
    "extensions": ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.mathjax"],
    "exclude_patterns": ["_notebooks", "_static"],
    # Render the outputs the notebooks store; never run them.
    "nb_execution_mode": "off",
    # Widget views need a widget manager from the internet: show their stored
    # still picture instead, and load no widget scripts.
    "nb_ipywidgets_js": {},
    "myst_enable_extensions": ["dollarmath", "amsmath", "colon_fence"],
    "myst_heading_anchors": 3,
    # MathJax from this site, never from a CDN.
    "mathjax_path": "mathjax/tex-chtml.js",
    "html_theme": "sphinx_book_theme",
    "html_theme_options": {
        "repository_url": HOMEPAGE,
        "use_repository_button": True,
        "use_download_button": False,
        "home_page_in_toc": True,
        "show_toc_level": 2,
        # The landing page is one table: it needs the width more than a contents list.
        "secondary_sidebar_items": {"**": ["page-toc"], "index": []},
        "extra_footer": "<p>Code under the MIT licence; lesson text under CC BY 4.0.</p>",
    },
    # Light unless the reader's browser asks for dark.
    "html_context": {"default_mode": "auto"},
    "html_static_path": ["_static"],
    "html_css_files": ["backproplab.css"],
    "html_copy_source": False,
    "html_show_sourcelink": False,
    "html_show_sphinx": False,
    "html_last_updated_fmt": None,
    # `name` in a docstring links to that name where it is documented.
    "default_role": "py:obj",
    "autodoc_member_order": "bysource",
    # Signatures show names and defaults; the docstrings say what each one is.
    "autodoc_typehints": "none",
    "add_module_names": False,
}


def _plain_bars(
    app: object, what: str, name: str, obj: object, options: object, lines: list[str]
) -> None:
    """Keep ``|grad|`` (an absolute value in a docstring) from being read as a reST substitution."""
    for i, line in enumerate(lines):
        if not line.lstrip().startswith((">>>", "...")):
            lines[i] = re.sub(r"(?<![\\`])\|(\w[\w ]*)\|", r"\\|\1\\|", line)


def run_sphinx(src: Path, out: Path, work: Path) -> list[str]:
    """Build ``src`` into ``out`` with Sphinx; returns the warnings it printed."""
    from sphinx.application import Sphinx
    from sphinx.util import console
    from sphinx.util.docutils import docutils_namespace, patch_docutils

    warned = StringIO()
    status = StringIO()
    console.nocolor()  # plain text in the warnings it returns
    # Python's deprecation warnings from inside the tools are theirs, not the site's.
    with warnings.catch_warnings(), patch_docutils(None), docutils_namespace():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        app = Sphinx(
            srcdir=src, confdir=None, outdir=out, doctreedir=work / "doctrees",
            buildername="html", confoverrides=copy.deepcopy(CONFIG),
            status=status, warning=warned, freshenv=True,
        )
        app.connect("autodoc-process-docstring", _plain_bars)
        app.build()
        if app.statuscode:
            raise SiteError(f"Sphinx failed: {warned.getvalue().strip() or status.getvalue()}")
    return [line for line in warned.getvalue().splitlines() if line.strip()]
