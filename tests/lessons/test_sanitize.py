"""Every nbval sanitize rule is explained and still needed."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).parents[2]
CFG = ROOT / "tests" / "nbval_sanitize.cfg"


def _rules() -> dict[str, tuple[str, str]]:
    parser = configparser.ConfigParser()
    parser.read(CFG)
    return {name: (parser[name]["regex"], parser[name]["replace"]) for name in parser.sections()}


def _comment_before(section: str) -> str:
    lines = CFG.read_text().splitlines()
    start = lines.index(f"[{section}]")
    comment = []
    for line in lines[start + 1:]:
        if not line.startswith("#"):
            break
        comment.append(line.lstrip("# "))
    return " ".join(comment)


def _stored_output_text() -> str:
    texts = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            for out in cell.get("outputs", []):
                texts.append(out.get("text", ""))
                texts.extend(v for k, v in out.get("data", {}).items() if k.startswith("text/"))
    return "\n".join(t if isinstance(t, str) else "".join(t) for t in texts)


def test_there_is_at_least_one_rule():
    assert _rules()


@pytest.mark.parametrize("section", sorted(_rules()))
def test_rule_says_why_it_is_needed(section: str):
    assert len(_comment_before(section)) > 80, f"[{section}] needs a comment saying why"


@pytest.mark.parametrize("section", sorted(_rules()))
def test_rule_is_still_needed(section: str):
    # A rule that matches no stored output hides nothing and should go.
    regex, _ = _rules()[section]
    assert re.search(regex, _stored_output_text()), f"[{section}] matches no stored output"
