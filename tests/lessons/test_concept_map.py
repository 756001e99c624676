"""The course's order: no lesson leans on a later one, and every idea has one home.

A lesson's text is everything a learner reads while working it: its markdown
and code, the outputs stored under them, and the hints and messages of its
checks (``backproplab/course/exercises/lessonNN.py``, or the modules of a package
``lessonNN/``). None of it may name a
later lesson ("lesson 16", "lessons 3 and 18"), or promise one ("the next
lesson", "a later lesson", "we will see"). Pointers back are how the course
reuses what it taught.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
EXERCISES = ROOT / "backproplab" / "course" / "exercises"

_NUMBER = r"(?:[12][0-9]|0[1-9]|[1-9])"
# "lesson 5", "Lesson 05's", "lessons 3 and 18", "lessons 2, 4 or 6"
_JOIN = r"(?:,\s+|\s+and\s+|\s+or\s+|/|-|–|\s+to\s+)"
LESSONS = re.compile(rf"\b[Ll]essons?\s+{_NUMBER}(?:{_JOIN}{_NUMBER}\b)*")
PROMISES = re.compile(
    r"\b(?:later\s+lessons?|a\s+later\s+one|next\s+lessons?|lessons?\s+to\s+come|"
    r"coming\s+lessons?|we(?:'ll|\s+will)\s+see|later\s+in\s+the\s+course)\b",
    re.IGNORECASE,
)


def lesson_number(path: Path) -> int:
    return int(path.name[:2])


def _output_text(output: dict) -> str:
    text = output.get("text") or output.get("data", {}).get("text/plain", "")
    if output.get("output_type") == "error":
        text = "\n".join(output.get("traceback", []))
    return "".join(text) if isinstance(text, list) else str(text)


def learner_text(path: Path) -> list[tuple[str, str]]:
    """(where, text) for every piece of a lesson a learner reads."""
    nb = json.loads(path.read_text())
    pieces = []
    for cell in nb["cells"]:
        pieces.append((cell["id"], "".join(cell["source"])))
        for output in cell.get("outputs", []):
            pieces.append((f"{cell['id']} (output)", _output_text(output)))
    module = EXERCISES / f"lesson{lesson_number(path):02d}.py"
    package = EXERCISES / f"lesson{lesson_number(path):02d}"  # a lesson whose checks are long
    for part in [module] if module.exists() else sorted(package.glob("*.py")):
        pieces.append((part.relative_to(EXERCISES).as_posix(), part.read_text()))
    return pieces


def forward_references(path: Path) -> list[str]:
    own = lesson_number(path)
    found = []
    for where, text in learner_text(path):
        for match in LESSONS.finditer(text):
            named = [int(n) for n in re.findall(r"\d+", match.group(0))]
            if max(named) > own:
                found.append(f"{where}: {_context(text, match)}")
        for match in PROMISES.finditer(text):
            found.append(f"{where}: {_context(text, match)}")
    return found


def _context(text: str, match: re.Match) -> str:
    start, end = max(0, match.start() - 50), min(len(text), match.end() + 30)
    return " ".join(text[start:end].split())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_lesson_names_a_later_one(path: Path) -> None:
    found = forward_references(path)
    assert not found, f"{path.name} points forward:\n" + "\n".join(found)


def test_the_scanner_finds_forward_references_and_lets_pointers_back_pass(tmp_path: Path) -> None:
    cells = [
        {"id": "l05-01", "cell_type": "markdown", "source": ["As lesson 02 showed, paths add up."]},
        {"id": "l05-02", "cell_type": "markdown",
         "source": ["Lessons 3 and 18 use it; see the next lesson."]},
        {"id": "l05-03", "cell_type": "code", "source": ["x = 1"],
         "outputs": [{"output_type": "stream", "name": "stdout", "text": ["more in lesson 16\n"]}]},
    ]
    path = tmp_path / "05-sample.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    found = forward_references(path)
    assert [f.split(":")[0] for f in found] == ["l05-02", "l05-02", "l05-03 (output)"]


# -- the concept map ----------------------------------------------------------

MAP = ROOT / "notebooks" / "README.md"


def concept_map() -> dict[str, tuple[int, list[int]]]:
    """idea -> (the lesson that teaches it, the lessons that use it), from the table."""
    rows = {}
    for line in MAP.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[1].isdigit():
            continue
        idea, home, users = cells
        assert idea not in rows, f"{idea!r} has two rows in the concept map"
        rows[idea] = (int(home), [int(u) for u in re.findall(r"\d+", users)])
    return rows


def test_every_idea_has_one_home_and_is_used_only_after_it() -> None:
    lessons = {lesson_number(p) for p in NOTEBOOKS}
    rows = concept_map()
    assert len(rows) >= 50, "the concept map lost its rows"
    for idea, (home, users) in rows.items():
        assert home in lessons, f"{idea!r}: lesson {home} does not exist"
        assert all(u in lessons for u in users), f"{idea!r}: used in a lesson that does not exist"
        early = [u for u in users if u <= home]
        assert not early, f"{idea!r} is taught in {home} but used before, in {early}"
    taught = {home for home, _ in rows.values()}
    assert taught == lessons, f"lessons that teach nothing on the map: {sorted(lessons - taught)}"


# The ideas the course once taught three to six times. Each has one home; any
# other lesson whose prose speaks of it comes after the home, is listed as a
# user, and points back to the home by number.
REPEATED = {
    "Paths add up inside one backward":
        (r"along (?:more than one|two|several) paths|paths?,? (?:that )?adds? up|"
         r"contributions add up"),
    "tanh' = 1 - tanh²":
        r"1 ?[-−] ?\\?tanh|tanh'|derivative of tanh|tanh's rule",
    "The `=` vs `+=` bug in an engine's backward":
        r"`=` (?:instead of|vs\.?|versus|rather than|for) `\+=`",
    "XOR, the data that needs a hidden layer":
        r"\bXOR\b",
    "The slow intercept, and centring the input":
        r"intercept (?:is slow|lags|learns slowly)|slow intercept|centr(?:e|ing) (?:the )?input",
    "Least squares with `lstsq`":
        r"\blstsq\b",
    "`.grad` adds up across backward calls":
        r"across (?:two |separate |several )?`?backward(?:\(\))?`? calls|accumulat\w* across",
    "BatchNorm couples the examples of a batch":
        r"examples (?:do not |don't )?interact|couples? (?:the )?examples",
    "The ways to zero, and the loop that forgot":
        r"forg(?:o|e)t\w* to zero|loop that forg|left out: `(?:model\.|optimizer\.)?zero_grad",
    "The version counter: an in-place change between passes":
        r"version counter",
    "The linear layer's backward (matrix product, bias summed over rows)":
        r"(?:backward|gradients?) of a linear layer|linear layer's backward",
    "The BCE gradient at the logits, `(sigmoid(z) − y) / N`":
        r"(?:sigmoid|σ)\(z\) ?[-−] ?y\b",
    "The softmax VJP without its Jacobian":
        r"softmax(?:'s)? (?:VJP|vector-Jacobian)",
    "The Jacobian row by row; `jacrev` as a vmapped VJP":
        r"Jacobian,? (?:one )?row by row|Jacobian,? one row at a time|jacrev\b.{0,40}vmap",
    "Detaching a hidden state: truncated backpropagation through time, in chunks and in "
    "overlapping windows":
        r"hidden state (?:that is )?never detached|truncated backpropagation|TBPTT",
    "`total_loss += loss` keeps every batch's graph alive":
        r"total_loss \+= loss",
    "Saved bytes per node, and how they grow with batch, depth and loop length":
        r"grows? (?:linearly )?with the batch",
    "Hessian-vector products":
        r"Hessian-vector product",
    "At a tie, a maximum without an index splits the gradient evenly, `max(dim=...)` picks its "
    "index":
        r"split\w*\s+(?:the\s+gradient\s+|it\s+)?evenly",
    "Saved tensors are freed after backward; `retain_graph`":
        r"saved tensors (?:are|were|get) (?:freed|gone|released)|"
        r"fre(?:es|ed|eing) (?:its |their |the )?saved|let go of (?:their|its) saved|"
        r"retain_graph=True",
    "The engine sums a gradient of a broadcast shape down to its input's shape":
        r"sums? (?:it|them|a broadcast gradient) down|summing a broadcast gradient down",
    "On the CPU, backward runs on the thread that called it":
        r"thread that called|calling thread|very thread",
    "FLOPs of backward against forward":
        r"twice the forward(?! one)|two products of (?:its|the same) size",
    "A backward pass that counts each node's arriving gradients (one per edge) instead of "
    "sorting":
        r"count(?:s|ed|ing)?,? (?:for every node, )?(?:how many gradients|"
        r"the (?:edges|arrows|gradients) (?:into|each node)|the gradients each node)",
    "An engine held against torch: both trained from one start, the losses equal at every step "
    "to round-off":
        r"(?:loss curves?|runs|losses) (?:agree|within \S+ of torch's) at every step|"
        r"loss curve at every step",
    "Selective checkpointing: a policy per operation, and min-cut's activation memory budget":
        r"create_selective_checkpoint_contexts|activation_memory_budget|CheckpointPolicy",
}


def _prose(path: Path) -> str:
    nb = json.loads(path.read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


@pytest.mark.parametrize("idea", sorted(REPEATED))
def test_a_repeated_idea_lives_in_one_lesson(idea: str) -> None:
    rows = concept_map()
    assert idea in rows, f"{idea!r} is missing from notebooks/README.md"
    home, users = rows[idea]
    pattern = re.compile(REPEATED[idea], re.IGNORECASE)
    homes = [p for p in NOTEBOOKS if lesson_number(p) == home]
    assert any(pattern.search(_prose(p)) for p in homes), f"lesson {home} does not teach {idea!r}"
    pointer = re.compile(rf"\b[Ll]essons? (?:[0-9, ]+(?:and|or) )?0?{home}\b")
    wrong = []
    for path in NOTEBOOKS:
        n = lesson_number(path)
        text = _prose(path)
        if n == home or not pattern.search(text):
            continue
        if n < home:
            wrong.append(f"{path.name} speaks of it before its home, lesson {home}")
        elif n not in users:
            wrong.append(f"{path.name} speaks of it but is not listed as a user")
        elif not pointer.search(text):
            wrong.append(f"{path.name} speaks of it without pointing back to lesson {home}")
    assert not wrong, f"{idea}:\n" + "\n".join(wrong)
