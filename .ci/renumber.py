"""Renumber the lessons once, by a table: notebook names, cell and grade ids, exercise
modules, tests, README, the concept map and every "lesson N" a learner reads.

    python .ci/renumber.py            # prints what it would change
    python .ci/renumber.py --write    # changes the checkout (commit before, review after)

The table ``NUMBERS`` maps each lesson's number now to its number after the move.
Everything named by a lesson number follows it: ``NN-slug.ipynb``, cell ids and
grade ids ``lNN-...``, ``backproplab/course/exercises/lessonNN(.py|/)``,
``tests/{wrong_answers,cheats}/lessonNN.py``, ``tests/lessons/test_facts_lessonNN.py``,
and prose such as "lesson 8", "Lessons 03 and 14", "lessons 2, 4 or 6". A lesson
in two parts cannot be renumbered by number: split it into two numbers first.
What this cannot decide (numbers in code, sentences that count lessons) it
lists at the end, for a person to read.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# old number -> new number (numbers not listed keep theirs).
NUMBERS = {
    95: 9,   # deriving a tensor operation's backward (lesson 08's second part)
    9: 10,   # the MLP
    20: 11,  # a tensor engine of your own: right after the tensor VJPs and the MLP
    10: 12,  # the classifier by hand
    21: 13,  # the classic layers, beside the classifier
    11: 14,  # recording on and off
    94: 15,  # the debugging tools
    12: 16,  # what backward keeps
    13: 17,  # higher-order gradients
    14: 18,  # forward mode and torch.func
    15: 19,  # custom Functions
    91: 20,  # views and in-place operations
    22: 21,  # inside torch's engine
    23: 22,  # where calculus runs out
    16: 23,  # across processes
    17: 24,  # lower precision
    18: 25,  # the compiled backward
    19: 26,  # attention by hand
    24: 27,  # custom ops
    92: 28,  # the dispatcher
}

TEXT_SUFFIXES = {".py", ".md", ".ipynb", ".cfg", ".toml", ".txt", ".yml", ".yaml", ".html",
                 ".css", ".js", ""}
_NUM = r"(?:[1-9][0-9]|0[1-9]|[1-9])"
_JOIN = r"(?:,\s+|\s+and\s+|\s+or\s+|\s*/\s*|\s*-\s*|\s*–\s*|\s+to\s+)"
PROSE = re.compile(rf"\b([Ll]essons?)(\s+)({_NUM}(?:{_JOIN}{_NUM}\b)*)")
IDS = re.compile(r"\bl(\d\d)-")
MODULES = re.compile(r"\blesson(\d\d)\b")
FILES = re.compile(r"\b(\d\d)-([a-z0-9]+(?:-[a-z0-9]+)+)(?=\.ipynb|\b)")
TITLES = re.compile(r"^(#\s+)(\d\d)(\s+·)", re.MULTILINE)  # a lesson's title: "# 11 · ..."
PLANS = re.compile(r"\blesson_plans\(\"(\d\d)\"\)")  # tests/cheats: a lesson's number as text


def new(number: int) -> int:
    return NUMBERS.get(number, number)


def _prose(match: re.Match) -> str:
    word, space, numbers = match.groups()

    def one(m: re.Match) -> str:
        text = m.group(0)
        mapped = new(int(text))
        return f"{mapped:02d}" if len(text) == 2 or mapped >= 10 else str(mapped)

    return word + space + re.sub(_NUM, one, numbers)


def renumber_text(text: str, stems: dict[str, str]) -> str:
    """``text`` with every lesson number moved (see the module's documentation)."""
    text = PROSE.sub(_prose, text)
    text = IDS.sub(lambda m: f"l{new(int(m.group(1))):02d}-", text)
    text = MODULES.sub(lambda m: f"lesson{new(int(m.group(1))):02d}", text)
    text = TITLES.sub(lambda m: f"{m.group(1)}{new(int(m.group(2))):02d}{m.group(3)}", text)
    text = PLANS.sub(lambda m: f'lesson_plans("{new(int(m.group(1))):02d}")', text)

    def file(m: re.Match) -> str:
        stem = f"{m.group(1)}-{m.group(2)}"
        return stems.get(stem, stem)

    return FILES.sub(file, text)


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    return [ROOT / line for line in out.splitlines() if line]


def _moved_path(path: Path, stems: dict[str, str]) -> Path:
    rel = path.relative_to(ROOT).as_posix()
    def notebook(m: re.Match) -> str:
        stem = f"{m.group(2)}-{m.group(3)}"
        return f"{m.group(1)}{stems.get(stem, stem)}.ipynb"

    rel = re.sub(r"(^|/)(\d\d)-([a-z0-9-]+)\.ipynb$", notebook, rel)
    rel = re.sub(r"lesson(\d\d)(?=\.py$|/)", lambda m: f"lesson{new(int(m.group(1))):02d}", rel)
    return ROOT / rel


def _notebook(text: str, stems: dict[str, str]) -> str:
    """A notebook's JSON renumbered field by field (never inside a picture's bytes)."""
    nb = json.loads(text)
    for cell in nb["cells"]:
        cell["id"] = renumber_text(cell["id"], stems)
        cell["source"] = _lines(cell["source"], stems)
        meta = cell.get("metadata", {})
        if "nbgrader" in meta and "grade_id" in meta["nbgrader"]:
            meta["nbgrader"]["grade_id"] = renumber_text(meta["nbgrader"]["grade_id"], stems)
        for key in ("backproplab",):
            if key in meta:
                meta[key] = json.loads(renumber_text(json.dumps(meta[key]), stems))
        for output in cell.get("outputs", []):
            if "text" in output:
                output["text"] = _lines(output["text"], stems)
            data = output.get("data", {})
            for kind in ("text/plain", "text/html", "text/markdown"):
                if kind in data:
                    data[kind] = _lines(data[kind], stems)
            if "traceback" in output:
                output["traceback"] = [renumber_text(t, stems) for t in output["traceback"]]
            if "evalue" in output:
                output["evalue"] = renumber_text(output["evalue"], stems)
    import nbformat  # as the lessons are written, so that only what moved shows in a diff

    out = nbformat.writes(nbformat.from_dict(nb))
    return out if text.endswith("\n") else out.rstrip("\n")


def _lines(value: str | list[str], stems: dict[str, str]) -> str | list[str]:
    if isinstance(value, list):
        return renumber_text("".join(value), stems).splitlines(keepends=True)
    return renumber_text(value, stems)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="change the checkout")
    args = parser.parse_args(argv)
    stems = {}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb")):
        number, slug = int(path.name[:2]), path.stem[3:]
        stems[path.stem] = f"{new(number):02d}-{slug}"
    targets = [_moved_path(p, stems) for p in sorted((ROOT / "notebooks").glob("*.ipynb"))]
    if len(set(targets)) != len(targets):
        sys.exit("renumber: two notebooks would get the same name; split the lesson first")
    plans = []
    for path in _tracked():
        if not path.is_file() or path.suffix not in TEXT_SUFFIXES or ".ci/renumber" in str(path):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        after = _notebook(text, stems) if path.suffix == ".ipynb" else renumber_text(text, stems)
        target = _moved_path(path, stems)
        if after != text or target != path:
            plans.append((path, target, after))
            print(f"{path.relative_to(ROOT)}" + (f" -> {target.relative_to(ROOT)}"
                                                 if target != path else ""))
    if args.write:
        # Two steps, so that 09 -> 10 never meets the 10 that is leaving for 12.
        moving = [(p, t, p.with_name(p.name + ".renumbering")) for p, t, _ in plans if t != p]
        for path, _, step in moving:
            subprocess.run(["git", "mv", str(path), str(step)], cwd=ROOT, check=True)
        for _, target, step in moving:
            target.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["git", "mv", str(step), str(target)], cwd=ROOT, check=True)
        for _, target, after in plans:
            target.write_text(after, encoding="utf-8")
    print(f"{len(plans)} files {'changed' if args.write else 'would change'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
